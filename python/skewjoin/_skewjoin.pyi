# The native module; skewjoin/__init__.py documents and checks the arguments.
from typing import Any, Optional

import pyarrow

__version__: str
STRATEGIES: tuple[str, ...]

class InputError(ValueError):
    """An input table or file is malformed, or its columns do not fit the join."""

def join(
    left: Any,
    right: Any,
    left_on: list[str],
    right_on: list[str],
    columns: tuple[Optional[list[str]], Optional[list[str]], Optional[list[str]]],
    how: str,
    strategy: str,
    workers: Optional[int],
    partitions: Optional[int],
    stream: bool,
    metrics: bool,
    format: Optional[str],
    tuning: Optional[dict[str, Any]],
) -> tuple[pyarrow.Table | pyarrow.RecordBatchReader, Optional[str]]: ...
def explain(
    left: Any,
    right: Any,
    left_on: list[str],
    right_on: list[str],
    columns: tuple[Optional[list[str]], Optional[list[str]], Optional[list[str]]],
    how: str,
    strategy: str,
    workers: Optional[int],
    partitions: Optional[int],
    analyze: bool,
    top: int,
    format: Optional[str],
    tuning: Optional[dict[str, Any]],
) -> str: ...
def _imported_buffer_addresses(table: Any) -> list[list[list[int]]]: ...
