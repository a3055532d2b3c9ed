"""Writes the same two tables with pyarrow, Polars and DuckDB, each with its DEFAULT settings
(Parquet: pyarrow snappy, Polars zstd, DuckDB snappy; Arrow IPC: pyarrow.feather lz4, Polars
uncompressed; CSV from all three), plus a Feather v1 file, into the directory given as the only
argument, and a manifest.json listing, for each file pair and key column, DuckDB's row count of
the inner join of that pair on that key (DuckDB reading the files themselves; Arrow IPC files,
which DuckDB cannot read, read back with pyarrow).

Run by runtime/tests/formats.rs with the interpreter named by SKEWJOIN_TEST_PYTHON (needs
pyarrow, polars and duckdb; .ci/run installs them, pinned like benches/peers/requirements.txt).
"""

import datetime
import decimal
import json
import math
import os
import random
import sys
import warnings

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.feather as feather
import pyarrow.parquet as pq

# Every key column, and the formats it is checked in. CSV has no binary type, and its floats
# are text (DuckDB writes NaN as `nan`, Polars as `NaN`), so those keys are checked in the
# binary formats only.
KEYS = {
    "k_int": ("parquet", "arrow", "csv"),
    "k_str": ("parquet", "arrow", "csv"),
    "k_bool": ("parquet", "arrow", "csv"),
    "k_date": ("parquet", "arrow", "csv"),
    "k_ts": ("parquet", "arrow"),
    "k_dec": ("parquet", "arrow"),
    "k_float": ("parquet", "arrow"),
    "k_bin": ("parquet", "arrow"),
}


def table(rows, seed):
    rng = random.Random(seed)

    def maybe(value):
        return None if rng.random() < 0.05 else value

    floats = [0.0, -0.0, math.nan, 1.5, -2.25, 1e300]
    base = datetime.datetime(2024, 2, 29, 12, 0, 0)
    columns = {
        "k_int": pa.array([maybe(rng.randrange(40)) for _ in range(rows)], pa.int64()),
        "k_str": pa.array([maybe(f"key-{rng.randrange(30)}") for _ in range(rows)], pa.string()),
        "k_bool": pa.array([maybe(rng.random() < 0.3) for _ in range(rows)], pa.bool_()),
        "k_date": pa.array(
            [maybe(datetime.date(2020, 1, 1) + datetime.timedelta(days=rng.randrange(25)))
             for _ in range(rows)],
            pa.date32(),
        ),
        "k_ts": pa.array(
            [maybe(base + datetime.timedelta(microseconds=rng.randrange(20) * 1500))
             for _ in range(rows)],
            pa.timestamp("us"),
        ),
        "k_dec": pa.array(
            [maybe(decimal.Decimal(rng.randrange(-20, 20)) / 4) for _ in range(rows)],
            pa.decimal128(10, 2),
        ),
        "k_float": pa.array([maybe(rng.choice(floats)) for _ in range(rows)], pa.float64()),
        "k_bin": pa.array([maybe(bytes([rng.randrange(12), 0, 255])) for _ in range(rows)],
                          pa.binary()),
        "v": pa.array(range(rows), pa.int64()),
    }
    return pa.table(columns)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    tables = {"left": table(300, 1), "right": table(200, 2)}
    files = {}  # (tool, format) -> {side: path}

    def add(tool, fmt, side, name):
        files.setdefault((tool, fmt), {})[side] = os.path.join(out, name)
        return os.path.join(out, name)

    con = duckdb.connect()
    for side, data in tables.items():
        pq.write_table(data, add("pyarrow", "parquet", side, f"pyarrow-{side}.parquet"))
        feather.write_feather(data, add("pyarrow", "arrow", side, f"pyarrow-{side}.feather"))
        pacsv.write_csv(data.drop_columns(["k_bin"]),
                        add("pyarrow", "csv", side, f"pyarrow-{side}.csv"))

        frame = pl.from_arrow(data)
        frame.write_parquet(add("polars", "parquet", side, f"polars-{side}.parquet"))
        frame.write_ipc(add("polars", "arrow", side, f"polars-{side}.arrow"))
        frame.drop("k_bin").write_csv(add("polars", "csv", side, f"polars-{side}.csv"))

        con.register("data", data)
        path = add("duckdb", "parquet", side, f"duckdb-{side}.parquet")
        con.execute(f"COPY data TO '{path}' (FORMAT parquet)")
        path = add("duckdb", "csv", side, f"duckdb-{side}.csv")
        con.execute(f"COPY (SELECT * EXCLUDE (k_bin) FROM data) TO '{path}' (FORMAT csv, HEADER)")
        con.unregister("data")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        feather.write_feather(tables["left"].drop_columns(["k_dec"]),
                              os.path.join(out, "v1.feather"), version=1)

    def relation(path, fmt):
        if fmt == "parquet":
            return f"read_parquet('{path}')"
        if fmt == "csv":
            return f"read_csv('{path}')"
        name = "ipc_" + os.path.basename(path).replace("-", "_").replace(".", "_")
        ipc = feather.read_table(path)
        # DuckDB's scan of Arrow data cannot filter view types (Polars writes strings as views).
        plain = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}
        ipc = ipc.cast(pa.schema([field.with_type(plain.get(field.type, field.type))
                                  for field in ipc.schema]))
        # Copied into a DuckDB table: joining the Arrow scan directly, DuckDB 1.5 misses the
        # float matches of -0.0 with 0.0 and of NaN with NaN that it finds in its own tables.
        con.register("ipc", ipc)
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM ipc")
        con.unregister("ipc")
        return name

    joins = []
    for (tool, fmt), sides in sorted(files.items()):
        left = relation(sides["left"], fmt)
        right = relation(sides["right"], fmt)
        for key, formats in KEYS.items():
            if fmt not in formats:
                continue
            (count,) = con.execute(
                f"SELECT count(*) FROM {left} l JOIN {right} r ON l.{key} = r.{key}"
            ).fetchone()
            joins.append({
                "tool": tool,
                "format": fmt,
                "key": key,
                "left": sides["left"],
                "right": sides["right"],
                "duckdb_rows": count,
            })
    versions = {"pyarrow": pa.__version__, "polars": pl.__version__, "duckdb": duckdb.__version__}
    with open(os.path.join(out, "manifest.json"), "w") as manifest:
        json.dump({"versions": versions, "joins": joins}, manifest, indent=1)


if __name__ == "__main__":
    main()
