"""Skew-resistant equi-joins of Arrow tables, on worker threads.

``skewjoin.join`` joins two tables, each a pyarrow ``Table`` or ``RecordBatchReader``, a Polars
``DataFrame``, a DuckDB relation (anything that exports an Arrow stream through
``__arrow_c_stream__``; its buffers are not copied) or the path of a Parquet, Arrow IPC or CSV
file, and returns a ``pyarrow.Table``. When a key is hot (so frequent that hashing every row of
it to one worker would leave the others idle) its work is spread over the workers, by the same
strategies as the ``skewjoin`` command line.

>>> import pyarrow as pa, skewjoin
>>> orders = pa.table({"customer": [1, 1, 1, 2], "amount": [10, 20, 30, 40]})
>>> customers = pa.table({"customer": [1, 2], "name": ["ada", "bob"]})
>>> skewjoin.join(orders, customers, on="customer").num_rows
4
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable, Optional, Sequence, Union

from . import _skewjoin
from ._skewjoin import InputError

__all__ = ["join", "explain", "Metrics", "InputError", "STRATEGIES", "__version__"]
__version__: str = _skewjoin.__version__

Keys = Union[str, Sequence[str]]

JOIN_TYPES = ("inner", "left", "right", "full", "semi", "anti", "right-semi", "right-anti")
# Every strategy's name, from the planner's registry (each strategy's module carries its name);
# the first is "auto", the default.
STRATEGIES: tuple = _skewjoin.STRATEGIES


class Metrics(dict):
    """What a join did: the strategy and why, rows in and out, timings, and the load of every
    partition (``per_partition``: input records received, output rows produced, peak records
    held) with each load's max/mean (``input_imbalance``, ``output_imbalance``,
    ``peak_imbalance``; 1.0 is perfect balance), and the records received with the copying
    factor (``records_received``, ``copying_factor``: 1.0 where no record was copied, more
    where a strategy broadcasts a side). The same document as the command line's
    ``--metrics`` file; a ``dict``, so it prints, compares and serialises as one."""

    @property
    def strategy(self) -> str:
        """The strategy that ran."""
        return self["strategy"]

    @property
    def output_rows(self) -> int:
        """Rows the join produced."""
        return self["output_rows"]

    def plot(self, ax: Any = None, load: str = "output_rows") -> Any:
        """Draws the load of every partition as bars, with the mean as a line and the busiest
        partition in red, as the browser demo does; returns the matplotlib ``Axes``.

        ``load`` is ``"output_rows"`` (default), ``"input_records"`` or ``"peak_records"``.
        Needs matplotlib (``pip install skewjoin[plot]``); draws on ``ax`` when given."""
        try:
            import matplotlib.pyplot as plt
        except ImportError as error:  # pragma: no cover - depends on the environment
            raise ImportError(
                "Metrics.plot needs matplotlib: pip install matplotlib (or skewjoin[plot])"
            ) from error
        parts = self["per_partition"]
        if not parts or not isinstance(parts[0].get(load), (int, float)):
            names = ", ".join(sorted(k for k, v in parts[0].items() if isinstance(v, (int, float))))
            raise ValueError(f"load: no per-partition figure {load!r}; these exist: {names or 'none'}")
        values = [part[load] for part in parts]
        mean = sum(values) / len(values)
        busiest = max(range(len(values)), key=values.__getitem__)
        if ax is None:
            _, ax = plt.subplots(figsize=(max(4.0, 0.35 * len(values) + 2), 3))
        colours = ["#d62728" if i == busiest else "#1f77b4" for i in range(len(values))]
        ax.bar(range(len(values)), values, color=colours)
        ax.axhline(mean, color="black", linestyle="--", linewidth=1, label=f"mean {mean:,.0f}")
        ax.set_xlabel("partition")
        ax.set_ylabel(load.replace("_", " "))
        imbalance = max(values) / mean if mean else 1.0
        ax.set_title(f"{self['strategy']}: max/mean {imbalance:.2f}")
        ax.legend(loc="upper right")
        ax.figure.tight_layout()
        return ax


def _keys(name: str, value: Optional[Keys], allow_empty: bool = False) -> Optional[list]:
    """Column names: a name or a list of names (an empty list only where `allow_empty`), or
    None."""
    if value is None:
        return None
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names) or (
            not names and not allow_empty):
        raise ValueError(f"{name}: expected a column name or a list of column names, got {value!r}")
    if "" in names:
        raise ValueError(f"{name}: an empty column name; name each column")
    return list(names)


def _output_columns(left_columns: Optional[Keys], right_columns: Optional[Keys], select: Optional[Keys]):
    # An empty list of one side's columns outputs none of that side's.
    return (
        _keys("left_columns", left_columns, allow_empty=True),
        _keys("right_columns", right_columns, allow_empty=True),
        _keys("select", select, allow_empty=True),
    )


def _key_columns(on: Optional[Keys], left_on: Optional[Keys], right_on: Optional[Keys]):
    on, left_on, right_on = _keys("on", on), _keys("left_on", left_on), _keys("right_on", right_on)
    if on is not None:
        if left_on is not None or right_on is not None:
            raise ValueError("give either on, or left_on and right_on, not both")
        return on, on
    if left_on is None or right_on is None:
        raise ValueError("no join key: give on=COLUMNS, or left_on= and right_on=")
    if len(left_on) != len(right_on):
        raise ValueError(
            f"left_on names {len(left_on)} columns but right_on names {len(right_on)}; "
            "give the same number"
        )
    return left_on, right_on


def _count(name: str, value: Optional[int]) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def _source(value: Any) -> Any:
    return os.fspath(value) if isinstance(value, os.PathLike) else value


def join(
    left: Any,
    right: Any,
    on: Optional[Keys] = None,
    *,
    left_on: Optional[Keys] = None,
    right_on: Optional[Keys] = None,
    left_columns: Optional[Keys] = None,
    right_columns: Optional[Keys] = None,
    select: Optional[Keys] = None,
    how: str = "inner",
    strategy: str = STRATEGIES[0],
    workers: Optional[int] = None,
    partitions: Optional[int] = None,
    stream: bool = False,
    metrics: bool = False,
    format: Optional[str] = None,
    **tuning: Any,
):
    """Joins ``left`` and ``right`` where their key columns are equal.

    left, right
        A pyarrow ``Table`` or ``RecordBatchReader``, a Polars ``DataFrame``, a DuckDB
        relation, anything else with ``__arrow_c_stream__`` (its Arrow buffers are used as they
        are, not copied; a pandas 2.2+ ``DataFrame`` has one too, but pyarrow converts it,
        copying, with a non-default index as a column), or the path of a Parquet, Arrow IPC
        (.arrow, .ipc, .feather) or CSV file (a Parquet or Arrow IPC file, not an IPC stream,
        is decoded by the workers, a few runs of row groups or record batches each).
    on
        The key column, or list of columns, named the same on both sides.
    left_on, right_on
        The key columns of each side, when their names differ (as many on each side).
        A NULL in any key column matches nothing. Keys of integer types of any width match
        each other (unsigned values above 2**63 - 1 are refused: cast such a key to a string),
        strings match strings (also across ``string``, ``large_string`` and ``string_view``).
    left_columns, right_columns
        The columns of each side to output, in this order (default: all of that side's; ``[]``:
        none of them). The others are neither hashed nor copied into the output, and a file
        given by path leaves them undecoded; key columns are read for the join whether output
        or not. Naming the columns of a side the join does not output (the right side of a
        semi join) is an error.
    select
        Columns to output by name, from whichever side has them, instead of ``left_columns``
        and ``right_columns``; the left's come first. A name both sides have is refused unless
        it is a key column of both at the same place (``on="id"``: taken from the side every
        output row has, so not in a full join).
    how
        ``"inner"``, ``"left"``, ``"right"``, ``"full"``, ``"semi"`` (left rows with a match),
        ``"anti"`` (left rows without one), ``"right-semi"`` or ``"right-anti"``.
    strategy
        ``"auto"`` (default: copy a side small enough to copy, else shuffle by hash, or
        AM-Join when a hot key would unbalance the shuffle), or any other name in
        ``skewjoin.STRATEGIES`` (see the README's table of strategies).
    workers
        Worker threads (default: the number of CPU cores). The GIL is released while they run.
    partitions
        Parts the work is cut into (default: one per worker); load is reported per partition.
    stream
        Return a ``pyarrow.RecordBatchReader`` that yields the output's batches while the join
        runs, instead of a whole table (the workers wait while a few batches are unread;
        dropping the reader, e.g. ``del reader``, stops the join). Errors and Ctrl-C reach the
        code that reads it.
    metrics
        Also return the run's :class:`Metrics`: ``table, metrics = join(..., metrics=True)``.
    format
        ``"parquet"``, ``"arrow"`` or ``"csv"``: the format of inputs given by path, where their
        names do not tell it (default: from the extension).
    **tuning
        ``hot_per_mille``, ``broadcast_per_mille``, ``statistics`` (``"exact"``,
        ``"space-saving"``, ``"space-saving:N"``), ``leaf``, ``fanout`` (AM-Join and Tree-Join),
        ``broadcast_limit`` (rows), ``memory_limit`` (bytes, or text such as ``"8G"``),
        ``virtual_per_partition`` and ``sample_fraction`` (VPRP): the command line's flags of
        the same names.

    The output has the (chosen) columns of the left side, then those of the right side (only
    one side for semi and anti joins); a right column named as a left one gets the suffix
    ``_right``.
    Rows come in no particular order.

    Raises ``ValueError`` for a bad argument; :class:`InputError` (a ``ValueError``) for an
    input that is missing, malformed, or whose key columns are missing or cannot be joined;
    ``OSError`` when the operating system fails to read a file; and ``KeyboardInterrupt`` at
    Ctrl-C, which stops the join.
    """
    left_keys, right_keys = _key_columns(on, left_on, right_on)
    if stream and metrics:
        raise ValueError(
            "metrics=True needs the finished join, and stream=True returns before it ends; "
            "leave out one of them (explain(..., analyze=True) gives the metrics of a run)"
        )
    output, metrics_json = _skewjoin.join(
        _source(left),
        _source(right),
        left_keys,
        right_keys,
        _output_columns(left_columns, right_columns, select),
        how,
        strategy,
        _count("workers", workers),
        _count("partitions", partitions),
        bool(stream),
        bool(metrics),
        format,
        tuning or None,
    )
    if metrics:
        return output, Metrics(json.loads(metrics_json))
    return output


def explain(
    left: Any,
    right: Any,
    on: Optional[Keys] = None,
    *,
    left_on: Optional[Keys] = None,
    right_on: Optional[Keys] = None,
    left_columns: Optional[Keys] = None,
    right_columns: Optional[Keys] = None,
    select: Optional[Keys] = None,
    how: str = "inner",
    strategy: str = STRATEGIES[0],
    workers: Optional[int] = None,
    partitions: Optional[int] = None,
    analyze: bool = False,
    top: int = 10,
    format: Optional[str] = None,
    **tuning: Any,
) -> dict:
    """The plan of a join, as ``skewjoin explain --json`` prints it, as a ``dict``: the strategy
    and the reason for it, each side's rows, distinct and NULL keys, the ``top`` hottest keys
    with the pairs they make, and the predicted load of every partition. Of a file given by
    path only the key columns are decoded. With ``analyze=True`` the join also runs (its rows
    are counted, not kept; a file's chosen and key columns, or all of them, are decoded) and
    ``plan["measured"]`` holds its
    :class:`Metrics`. The arguments are :func:`join`'s."""
    left_keys, right_keys = _key_columns(on, left_on, right_on)
    if isinstance(top, bool) or not isinstance(top, int) or top < 0:
        raise ValueError(f"top must be a non-negative integer, got {top!r}")
    plan = json.loads(
        _skewjoin.explain(
            _source(left),
            _source(right),
            left_keys,
            right_keys,
            _output_columns(left_columns, right_columns, select),
            how,
            strategy,
            _count("workers", workers),
            _count("partitions", partitions),
            bool(analyze),
            top,
            format,
            tuning or None,
        )
    )
    if plan.get("measured") is not None:
        plan["measured"] = Metrics(plan["measured"])
    return plan
