#!/usr/bin/env python3
"""The Python package on tables in memory beside DuckDB and Polars on the same tables (issue 27).

Each system joins two pyarrow tables already in memory and returns the whole output as Arrow,
every column of both sides, with 2 threads:

- skewjoin: `skewjoin.join(left, right, left_on=..., right_on=..., workers=2)`;
- DuckDB: `con.sql("SELECT * FROM l JOIN r ON ...").to_arrow_table()` on the registered tables;
- Polars: `left.join(right, left_on=..., right_on=...)` on frames made from the tables (made
  before the clock starts), then `.to_arrow()`.

Beside them, the command line on the same data as files: `skewjoin join` writing the output
uncompressed to an Arrow IPC file in /dev/shm (whole process), and its own join time from
`--metrics` (`elapsed_seconds`: the join with its output assembled and written, no reading).

Workloads: TPC-H SF1 lineitem x orders on orderkey (`tpchgen-cli` from PyPI, its default
Parquet), and the same-rank Zipf 1.0 pair of run.py at --zipf-scale (default 0.2: 60,000 rows a
side over 200,000 keys; 36 million output rows; at full size the output would be 34 GB as
Arrow). Every run is a process of its own (peak memory as ru_maxrss, tables read before the
clock starts); medians of --runs. Row counts must agree. Prints a Markdown table.

With --narrow every system outputs only a few columns of each side (NARROW below), each named its
own way: skewjoin `left_columns=`/`right_columns=` (the command line's `--left-columns` and
`--right-columns`), DuckDB a `SELECT` list, Polars a lazy join's `select`.

    python3 benches/peers/python_tables.py --skewjoin target/release/skewjoin --data /tmp/pt
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

THREADS = 2

WORKLOADS = {
    "tpch-lineitem-orders": ("lineitem.parquet", "orders.parquet", ["l_orderkey"], ["o_orderkey"]),
    "zipf1.0": ("left.parquet", "right.parquet", ["key"], ["key"]),
}

# The --narrow mode's output columns of each workload (left, right), as benches/peers/tpch.py's.
NARROW = {
    "tpch-lineitem-orders": (["l_orderkey", "l_extendedprice", "l_discount", "l_shipdate"],
                             ["o_orderdate", "o_shippriority"]),
    "zipf1.0": (["id"], ["value"]),
}


def child(system, left_path, right_path, left_on, right_on, columns=None):
    """One timed join in this process (only `columns`, a (left, right) pair, where given);
    prints its JSON line."""
    os.environ["POLARS_MAX_THREADS"] = str(THREADS)
    import pyarrow.parquet as pq

    left, right = pq.read_table(left_path), pq.read_table(right_path)
    if system == "skewjoin":
        import skewjoin

        start = time.perf_counter()
        chosen = {} if columns is None else {"left_columns": columns[0], "right_columns": columns[1]}
        out = skewjoin.join(left, right, left_on=left_on, right_on=right_on, workers=THREADS, **chosen)
        seconds = time.perf_counter() - start
        rows = out.num_rows
    elif system == "duckdb":
        import duckdb

        con = duckdb.connect(config={"threads": THREADS})
        con.register("l", left)
        con.register("r", right)
        on = " AND ".join(f"l.{a} = r.{b}" for a, b in zip(left_on, right_on))
        start = time.perf_counter()
        chosen = "*" if columns is None else ", ".join(
            [f"l.{c}" for c in columns[0]] + [f"r.{c}" for c in columns[1]])
        out = con.sql(f"SELECT {chosen} FROM l JOIN r ON {on}").to_arrow_table()
        seconds = time.perf_counter() - start
        rows = out.num_rows
    elif system == "polars":
        import polars as pl

        lf, rf = pl.from_arrow(left), pl.from_arrow(right)
        start = time.perf_counter()
        if columns is None:
            out = lf.join(rf, left_on=left_on, right_on=right_on, suffix="_right").to_arrow()
        else:
            out = (lf.lazy().join(rf.lazy(), left_on=left_on, right_on=right_on, suffix="_right")
                   .select(columns[0] + columns[1]).collect().to_arrow())
        seconds = time.perf_counter() - start
        rows = out.num_rows
    else:
        raise SystemExit(f"unknown system {system}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"seconds": seconds, "rows": rows, "peak_bytes": peak}))


def run_child(system, paths, keys, columns):
    cmd = [sys.executable, __file__, "--child", system, *paths, ",".join(keys[0]), ",".join(keys[1]),
           json.dumps(columns)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_cli(skewjoin, paths, keys, columns):
    out, metrics = "/dev/shm/python_tables_out.arrow", "/dev/shm/python_tables_metrics.json"
    cmd = [skewjoin, "join", *paths, "--left-on", ",".join(keys[0]), "--right-on", ",".join(keys[1])]
    if columns is not None:
        cmd += ["--left-columns", ",".join(columns[0]), "--right-columns", ",".join(columns[1])]
    cmd += ["--workers", str(THREADS), "--quiet", "-o", out, "--metrics", metrics]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed")
    with open(metrics) as f:
        document = json.load(f)
    os.remove(out)
    os.remove(metrics)
    return {"seconds": seconds, "rows": document["output_rows"], "peak_bytes": usage.ru_maxrss * 1024,
            "join_seconds": document["elapsed_seconds"]}


def prepare(args):
    tpch = os.path.join(args.data, "tpch")
    if not os.path.exists(os.path.join(tpch, "orders.parquet")):
        subprocess.run(["tpchgen-cli", "parquet", "-s", "1", "--tables", "lineitem,orders",
                        "--output-dir", tpch], check=True)
    zipf = os.path.join(args.data, f"zipf1.0-{args.zipf_scale:g}")
    if not os.path.exists(os.path.join(zipf, "right.parquet")):
        rows, keys = round(300_000 * args.zipf_scale), round(1_000_000 * args.zipf_scale)
        subprocess.run([args.skewjoin, "gen", "--out", zipf, "--rows", str(rows), "--keys", str(keys),
                        "--skew", "1.0"], check=True, capture_output=True)
    return {"tpch-lineitem-orders": tpch, "zipf1.0": zipf}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _, _, system, left, right, left_on, right_on, columns = sys.argv
        child(system, left, right, left_on.split(","), right_on.split(","), json.loads(columns))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skewjoin", required=True, help="the skewjoin binary (release)")
    parser.add_argument("--data", required=True, help="where the data is made, once")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--zipf-scale", type=float, default=0.2)
    parser.add_argument("--only", action="append", choices=list(WORKLOADS))
    parser.add_argument("--narrow", action="store_true", help="output only NARROW's columns")
    args = parser.parse_args()
    dirs = prepare(args)
    print("| workload | system | median s | runs | peak GB | rows |")
    print("| --- | --- | ---: | --- | ---: | ---: |")
    for name in args.only or list(WORKLOADS):
        left, right, left_on, right_on = WORKLOADS[name]
        paths = [os.path.join(dirs[name], left), os.path.join(dirs[name], right)]
        columns = NARROW[name] if args.narrow else None
        results = {s: [] for s in ["skewjoin", "duckdb", "polars", "cli", "cli-join"]}
        # Interleaved, so that the machine's noise falls on every system alike.
        for _ in range(args.runs):
            for system in ["skewjoin", "duckdb", "polars"]:
                results[system].append(run_child(system, paths, (left_on, right_on), columns))
            cli = run_cli(args.skewjoin, paths, (left_on, right_on), columns)
            results["cli"].append(cli)
            results["cli-join"].append({**cli, "seconds": cli["join_seconds"]})
        rows = {s: {r["rows"] for r in runs} for s, runs in results.items()}
        agreed = len(set().union(*rows.values())) == 1
        for system, runs in results.items():
            times = [r["seconds"] for r in runs]
            print(f"| {name} | {system} | {statistics.median(times):.2f} | "
                  f"{' '.join(f'{t:.2f}' for t in times)} | {max(r['peak_bytes'] for r in runs) / 1e9:.2f} | "
                  f"{sorted(rows[system])[0]}{'' if agreed else ' DISAGREE'} |")
        if not agreed:
            raise SystemExit(f"{name}: the systems disagree on the row count: {rows}")


if __name__ == "__main__":
    main()
