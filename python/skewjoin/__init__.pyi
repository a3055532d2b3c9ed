from os import PathLike
from typing import Any, Literal, Optional, Sequence, Union, overload

import pyarrow

from ._skewjoin import InputError as InputError

__version__: str

Keys = Union[str, Sequence[str]]
Source = Union[str, PathLike[str], Any]
How = Literal["inner", "left", "right", "full", "semi", "anti", "right-semi", "right-anti"]
# One of STRATEGIES: the planner's registry names them, so that no list here can drift.
StrategyName = str
STRATEGIES: tuple[str, ...]

class Metrics(dict[str, Any]):
    @property
    def strategy(self) -> str: ...
    @property
    def output_rows(self) -> int: ...
    def plot(self, ax: Any = ..., load: str = ...) -> Any: ...

@overload
def join(
    left: Source, right: Source, on: Optional[Keys] = ..., *, left_on: Optional[Keys] = ...,
    right_on: Optional[Keys] = ..., left_columns: Optional[Keys] = ...,
    right_columns: Optional[Keys] = ..., select: Optional[Keys] = ..., how: How = ...,
    strategy: StrategyName = ...,
    workers: Optional[int] = ..., partitions: Optional[int] = ..., stream: Literal[False] = ...,
    metrics: Literal[False] = ..., format: Optional[str] = ..., **tuning: Any,
) -> pyarrow.Table: ...
@overload
def join(
    left: Source, right: Source, on: Optional[Keys] = ..., *, left_on: Optional[Keys] = ...,
    right_on: Optional[Keys] = ..., left_columns: Optional[Keys] = ...,
    right_columns: Optional[Keys] = ..., select: Optional[Keys] = ..., how: How = ...,
    strategy: StrategyName = ...,
    workers: Optional[int] = ..., partitions: Optional[int] = ..., stream: Literal[False] = ...,
    metrics: Literal[True], format: Optional[str] = ..., **tuning: Any,
) -> tuple[pyarrow.Table, Metrics]: ...
@overload
def join(
    left: Source, right: Source, on: Optional[Keys] = ..., *, left_on: Optional[Keys] = ...,
    right_on: Optional[Keys] = ..., left_columns: Optional[Keys] = ...,
    right_columns: Optional[Keys] = ..., select: Optional[Keys] = ..., how: How = ...,
    strategy: StrategyName = ...,
    workers: Optional[int] = ..., partitions: Optional[int] = ..., stream: Literal[True],
    metrics: Literal[False] = ..., format: Optional[str] = ..., **tuning: Any,
) -> pyarrow.RecordBatchReader: ...
def explain(
    left: Source, right: Source, on: Optional[Keys] = ..., *, left_on: Optional[Keys] = ...,
    right_on: Optional[Keys] = ..., left_columns: Optional[Keys] = ...,
    right_columns: Optional[Keys] = ..., select: Optional[Keys] = ..., how: How = ...,
    strategy: StrategyName = ...,
    workers: Optional[int] = ..., partitions: Optional[int] = ..., analyze: bool = ...,
    top: int = ..., format: Optional[str] = ..., **tuning: Any,
) -> dict[str, Any]: ...
