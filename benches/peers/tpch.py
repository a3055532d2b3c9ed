#!/usr/bin/env python3
"""skewjoin beside DuckDB, Polars and DataFusion on TPC-H joins of wide tables (issue 23).

Data we did not make: TPC-H at scale factor 1 (default) as `tpchgen-cli` writes it with its
default settings (Parquet, snappy, `Utf8View` strings, lineitem in 53 row groups). Each join
runs in three modes, every system with 2 threads, as a process of its own (wall time of the whole
process where the system is a binary, of the query in a warm session where it is a library, and
with --cold-runs also of the first query of a fresh process; peak memory as ru_maxrss):

- write: the join's every column of both sides written to one Parquet file, each system with
  its own default codec; afterwards DuckDB reads every written file back and compares its row
  count and `sum(hash(all columns))` (columns by name, so column order does not matter) with
  its own output's;
- count: the rows counted and reduced to a checksum over every column (DuckDB
  `sum(hash(col, ...))`, Polars `struct(all).hash().sum()`, skewjoin its own row checksum), so
  no column can go unread. DataFusion has no hash of a row and is left out of this mode; the
  row counts are compared with DuckDB's;
- narrow: as write, but only a few columns of each side (NARROW below), chosen by each system's
  own way of naming output columns (skewjoin --left-columns/--right-columns), so that a system
  can leave the other columns undecoded.

skewjoin's warm-up and timed runs of write and narrow are `skewjoin join ... --quiet --output
FILE`, as a user writing a join runs it, and its peak memory is theirs: its `--metrics` (which
would have it also hash every row for the output's checksum, work no peer is asked for) are
written by one more run after them, untimed.

Writes tpch-results.json and tpch-results.md beside this file (or --out), prints the table and
exits non-zero when any system failed or disagreed. See README.md.
"""

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run import timed_process, with_cold_runs  # noqa: E402 - the same timing as run.py

THREADS = 2

# name: (left table, right table, left keys, right keys, how).
JOINS = {
    "lineitem-orders": ("lineitem", "orders", ["l_orderkey"], ["o_orderkey"], "inner"),
    "orders-lineitem-left": ("orders", "lineitem", ["o_orderkey"], ["l_orderkey"], "left"),
    "lineitem-partsupp": ("lineitem", "partsupp", ["l_partkey", "l_suppkey"], ["ps_partkey", "ps_suppkey"], "inner"),
    "orders-customer": ("orders", "customer", ["o_custkey"], ["c_custkey"], "inner"),
}
# The narrow mode's output columns of each join (left, right): a few columns of each side, as
# TPC-H's queries read them; the rest of each table need never be decoded.
NARROW = {
    "lineitem-orders": (["l_orderkey", "l_extendedprice", "l_discount", "l_shipdate"], ["o_orderdate", "o_shippriority"]),
    "orders-lineitem-left": (["o_orderkey", "o_orderdate"], ["l_quantity", "l_extendedprice"]),
    "lineitem-partsupp": (["l_partkey", "l_suppkey", "l_quantity"], ["ps_supplycost", "ps_availqty"]),
    "orders-customer": (["o_orderkey", "o_totalprice"], ["c_name", "c_mktsegment"]),
}
TABLES = ["lineitem", "orders", "partsupp", "customer"]
MODES = ["write", "count", "narrow"]
SYSTEMS = ["skewjoin", "duckdb", "polars", "datafusion"]
SQL_JOIN = {"inner": "INNER JOIN", "left": "LEFT OUTER JOIN"}


def columns(data, table):
    import duckdb

    rows = duckdb.sql(f"DESCRIBE SELECT * FROM read_parquet('{data}/{table}.parquet')").fetchall()
    return [row[0] for row in rows]


def join_sql(spec, select):
    lt, rt, lk, rk, how = JOINS[spec["join"]]
    on = " AND ".join(f"l.{a} = r.{b}" for a, b in zip(lk, rk))
    return (
        f"SELECT {select} FROM read_parquet('{spec['data']}/{lt}.parquet') l "
        f"{SQL_JOIN[how]} read_parquet('{spec['data']}/{rt}.parquet') r ON {on}"
    )


def row_hash_sql(cols, source=""):
    """count(*) and the sum of a hash of every column of a row, as DuckDB computes it."""
    return f"count(*) AS n, sum(hash({', '.join(source + c for c in cols)})) AS s"


# ---------------------------------------------------------------------------------------------
# Workers: one system, one join, one mode, in a process of their own. Each returns once(),
# which runs the job and returns its row count (and, in count mode, a checksum).


def run_duckdb(spec):
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET threads = {THREADS}")
    if spec["mode"] in ("write", "narrow"):
        select = "*"
        if spec["mode"] == "narrow":
            lc, rc = NARROW[spec["join"]]
            select = ", ".join([f"l.{c}" for c in lc] + [f"r.{c}" for c in rc])
        query = f"COPY ({join_sql(spec, select)}) TO '{spec['out']}' (FORMAT parquet)"

        def once():
            con.execute(query)
            return None, None

    else:
        query = join_sql(spec, row_hash_sql(spec["columns"]))

        def once():
            return con.execute(query).fetchone()

    return once


def run_polars(spec):
    # POLARS_MAX_THREADS is set by the parent before this process imports polars.
    import polars as pl

    lt, rt, lk, rk, how = JOINS[spec["join"]]

    def joined():
        left = pl.scan_parquet(f"{spec['data']}/{lt}.parquet")
        right = pl.scan_parquet(f"{spec['data']}/{rt}.parquet")
        # coalesce=False keeps the right key columns, as every other system does.
        return left.join(right, left_on=lk, right_on=rk, how=how, coalesce=False)

    if spec["mode"] == "write":

        def once():
            joined().sink_parquet(spec["out"])
            return None, None

    elif spec["mode"] == "narrow":
        lc, rc = NARROW[spec["join"]]

        def once():
            joined().select(lc + rc).sink_parquet(spec["out"])
            return None, None

    else:

        def once():
            out = joined().select(pl.len().alias("n"), pl.struct(pl.all()).hash().sum().alias("s"))
            out = out.collect(engine="streaming")
            return out["n"][0], out["s"][0]

    return once


def run_datafusion(spec):
    from datafusion import SessionConfig, SessionContext

    lt, rt, lk, rk, how = JOINS[spec["join"]]

    def once():
        ctx = SessionContext(SessionConfig().with_target_partitions(THREADS))
        ctx.register_parquet("lt", f"{spec['data']}/{lt}.parquet")
        ctx.register_parquet("rt", f"{spec['data']}/{rt}.parquet")
        on = " AND ".join(f"l.{a} = r.{b}" for a, b in zip(lk, rk))
        select = "*"
        if spec["mode"] == "narrow":
            lc, rc = NARROW[spec["join"]]
            select = ", ".join([f"l.{c}" for c in lc] + [f"r.{c}" for c in rc])
        df = ctx.sql(f"SELECT {select} FROM lt l {SQL_JOIN[how]} rt r ON {on}")
        df.write_parquet(spec["out"])
        return None, None

    return once


def worker(spec):
    """The --worker entry point: warm-up and timed runs, printed as one JSON line; or a task of
    the parent's that needs DuckDB (see helper)."""
    if spec.get("task") == "columns":
        print(json.dumps(columns(spec["data"], spec["table"])))
        return
    if spec.get("task") == "digest":
        print(json.dumps(written_digest(spec["path"], spec["columns"])))
        return
    once = {"duckdb": run_duckdb, "polars": run_polars, "datafusion": run_datafusion}[spec["system"]](spec)
    times, result = [], None
    for i in range(spec["warmups"] + spec["runs"]):
        started = time.perf_counter()
        result = once()
        if i >= spec["warmups"]:
            times.append(time.perf_counter() - started)
    n, s = result
    print(
        json.dumps(
            {
                "times": times,
                "rows": None if n is None else int(n),
                "checksum": None if s is None else int(s),
                "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            }
        )
    )


# ---------------------------------------------------------------------------------------------
# The parent: data, runs, checks, reports.


def generate(args):
    missing = [t for t in TABLES if not os.path.exists(os.path.join(args.data, f"{t}.parquet"))]
    if missing:
        os.makedirs(args.data, exist_ok=True)
        cmd = [args.tpchgen, "parquet", "-s", f"{args.sf:g}", "--tables", ",".join(missing), "--output-dir", args.data]
        print("generating:", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)


def written_digest(path, cols):
    """Row count and DuckDB's sum(hash(every column)) of a written Parquet file (or of a
    directory of them, as DataFusion may write)."""
    import duckdb

    source = f"{path}/*.parquet" if os.path.isdir(path) else path
    n, s = duckdb.sql(f"SELECT {row_hash_sql(cols)} FROM read_parquet('{source}')").fetchall()[0]
    return int(n), int(s or 0)


def run_skewjoin(args, spec):
    lt, rt, lk, rk, how = JOINS[spec["join"]]
    metrics_path = os.path.join(args.scratch, "metrics.json")
    cmd = [args.skewjoin, "join", f"{args.data}/{lt}.parquet", f"{args.data}/{rt}.parquet"]
    cmd += ["--left-on", ",".join(lk), "--right-on", ",".join(rk), "--how", how]
    cmd += ["--workers", str(THREADS), "--quiet"] + args.skewjoin_arg
    written = spec["mode"] in ("write", "narrow")
    if written:
        cmd += ["--output", spec["out"]]
    if spec["mode"] == "narrow":
        lc, rc = NARROW[spec["join"]]
        cmd += ["--left-columns", ",".join(lc), "--right-columns", ",".join(rc)]
    with_metrics = cmd + ["--metrics", metrics_path]
    # A written run's rows are checked in the file it wrote, so its warm-up and timed runs ask
    # for no metrics, as no peer is asked for more than the file: with them skewjoin also
    # hashes every row for the output's checksum. One more run, untimed and after them, writes
    # the metrics. A counted run's checksum is its job, and every run has it.
    timed = cmd if written else with_metrics
    times, peaks = [], []
    for i in range(args.warmups + args.runs):
        elapsed, code, peak, err = timed_process(timed, timeout=args.timeout)
        if code != 0:
            return {"error": f"exit {code}: {err.strip()[-300:]}"}
        peaks.append(peak)
        if i >= args.warmups:
            times.append(elapsed)
    if written:
        _, code, _, err = timed_process(with_metrics, timeout=args.timeout)
        if code != 0:
            return {"error": f"exit {code}: {err.strip()[-300:]}"}
    with open(metrics_path) as f:
        metrics = json.load(f)
    return {
        "times": times,
        "rows": metrics["output_rows"],
        "peak_kib": max(peaks),
        "strategy": metrics["strategy"],
        "join_s": metrics["elapsed_seconds"],
        "command": " ".join(timed),
    }


def helper(spec):
    """Runs a task of the parent's that needs DuckDB in a child process, so that the parent stays
    small: Linux keeps a process's peak memory across exec, so every process this one starts
    (vfork, then exec) counts this one's peak as the least of its own. With DuckDB's reading of
    the written files in this process, every small run reported about 370 MiB, this process's
    size, whatever it used."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(spec)]
    proc = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def peer_process(args, spec):
    """One worker process for `spec`: its JSON line, and the process's whole wall time."""
    env = dict(os.environ, POLARS_MAX_THREADS=str(THREADS))
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps(spec)],
        capture_output=True,
        text=True,
        env=env,
        timeout=args.timeout,
    )
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        return {"error": proc.stderr.strip()[-300:]}, elapsed
    return json.loads(proc.stdout.strip().splitlines()[-1]), elapsed


def run_peer(args, spec):
    result, _ = peer_process(args, spec)
    if "error" in result:
        return result
    return with_cold_runs(result, args.cold_runs, lambda: peer_process(args, dict(spec, warmups=0, runs=1)))

def report(results, meta):
    lines = [
        f"TPC-H SF{meta['sf']:g} ({meta['data']}), {THREADS} threads, median of {meta['runs']} runs after "
        f"{meta['warmups']} warm-up; {meta['machine']}; {meta['versions']}",
        "",
        "| join | mode | system | median s | vs DuckDB | peak MiB | rows | check | notes |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    cold = [r for r in results if "cold_times" in r]
    for r in results:
        duck = next((x for x in results if x["join"] == r["join"] and x["mode"] == r["mode"] and x["system"] == "duckdb"), None)
        if "error" in r:
            lines.append(f"| {r['join']} | {r['mode']} | {r['system']} | failed | | | | | {r['error'][:120]} |")
            continue
        median = statistics.median(r["times"])
        ratio = ""
        if duck and "times" in duck:
            ratio = f"{median / statistics.median(duck['times']):.2f}x"
        notes = []
        if "strategy" in r:
            notes.append(f"{r['strategy']}, join {r['join_s']:.2f} s")
        if "size_mb" in r:
            notes.append(f"{r['size_mb']:.0f} MB written")
        lines.append(
            f"| {r['join']} | {r['mode']} | {r['system']} | {median:.2f} | {ratio} | {r['peak_kib'] / 1024:.0f} | "
            f"{r['rows']:,} | {r['check']} | {'; '.join(notes)} |"
        )
    if cold:
        lines += [
            "",
            f"Cold sessions: each library's query the first of a process of its own, median of "
            f"{meta['cold_runs']} (its whole process in brackets, interpreter start and import "
            f"included); skewjoin's whole process as above.",
            "",
            "| join | mode | system | cold s | vs DuckDB cold | peak MiB |",
            "| --- | --- | --- | ---: | ---: | ---: |",
        ]
        for r in results:
            if "error" in r or ("cold_times" not in r and r["system"] != "skewjoin"):
                continue
            duck = next((x for x in cold if x["join"] == r["join"] and x["mode"] == r["mode"] and x["system"] == "duckdb"), None)
            times = r.get("cold_times", r["times"])
            median = statistics.median(times)
            ratio = f"{median / statistics.median(duck['cold_times']):.2f}x" if duck else ""
            process = f" ({statistics.median(r['cold_process']):.2f})" if "cold_process" in r else ""
            peak = r.get("peak_kib_cold", r["peak_kib"]) / 1024
            lines.append(f"| {r['join']} | {r['mode']} | {r['system']} | {median:.2f}{process} | {ratio} | {peak:.0f} |")
    return "\n".join(lines)


def versions():
    found = []
    for name in ["duckdb", "polars", "datafusion", "pyarrow"]:
        try:
            module = __import__(name)
            found.append(f"{name} {module.__version__}")
        except Exception:  # noqa: BLE001 - a peer not installed is reported as missing
            found.append(f"{name} missing")
    return ", ".join(found)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sf", type=float, default=1.0, help="TPC-H scale factor")
    parser.add_argument("--only", action="append", help="this join only (repeatable): " + ", ".join(JOINS))
    parser.add_argument("--modes", default=",".join(MODES), help="write, count, narrow")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="subset of: " + ", ".join(SYSTEMS))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--warmups", type=int, default=1)
    parser.add_argument("--cold-runs", type=int, default=0,
                        help="also time each library's query this many times as the first of a fresh process")
    parser.add_argument("--skewjoin", default=shutil.which("skewjoin") or os.path.join(HERE, "../../target/release/skewjoin"))
    parser.add_argument("--skewjoin-arg", action="append", default=[], help="an extra argument to skewjoin join (repeatable)")
    parser.add_argument("--tpchgen", default=shutil.which("tpchgen-cli") or os.path.join(os.path.dirname(sys.executable), "tpchgen-cli"))
    parser.add_argument("--data", help="where the TPC-H tables are kept (default: data/tpch-sf<SF>)")
    parser.add_argument("--scratch", default=None, help="where outputs are written (default: <data>/out)")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--out", default=HERE, help="where tpch-results.json and tpch-results.md go")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(json.loads(args.worker))
        return
    args.data = os.path.abspath(args.data or os.path.join(HERE, "data", f"tpch-sf{args.sf:g}"))
    args.scratch = os.path.abspath(args.scratch or os.path.join(args.data, "out"))
    os.makedirs(args.scratch, exist_ok=True)
    generate(args)
    # DuckDB first: every other system's output is checked against its.
    systems = sorted(args.systems.split(","), key=lambda system: system != "duckdb")
    results, ok = [], True
    for join in args.only or list(JOINS):
        lt, rt = JOINS[join][:2]
        for mode in args.modes.split(","):
            cols = sum(NARROW[join], []) if mode == "narrow" else [
                column for table in (lt, rt) for column in helper({"task": "columns", "data": args.data, "table": table})
            ]
            expected = None
            for system in systems:
                if system == "datafusion" and mode == "count":
                    continue
                out = os.path.join(args.scratch, f"{join}-{system}.parquet")
                spec = {"system": system, "join": join, "mode": mode, "data": args.data, "out": out,
                        "columns": cols, "runs": args.runs, "warmups": args.warmups}
                print(f"{join} {mode} {system} ...", end=" ", flush=True)
                result = run_skewjoin(args, spec) if system == "skewjoin" else run_peer(args, spec)
                result.update(join=join, mode=mode, system=system)
                if "error" not in result:
                    if mode in ("write", "narrow"):
                        size = os.path.getsize(out) if os.path.isfile(out) else sum(
                            os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
                        result["size_mb"] = size / 1e6
                        result["rows"], result["digest"] = helper({"task": "digest", "path": out, "columns": cols})
                        shutil.rmtree(out) if os.path.isdir(out) else os.remove(out)
                        reference = result["digest"]
                    else:
                        reference = result.get("checksum")
                    if system == "duckdb":
                        expected = (result["rows"], reference)
                        result["check"] = "reference"
                    elif expected is None:
                        result["check"] = "no reference"
                    elif mode in ("write", "narrow"):
                        result["check"] = "yes" if (result["rows"], reference) == expected else "DIFFERS"
                    else:
                        # Each system hashes rows its own way: only the counts compare.
                        result["check"] = "rows" if result["rows"] == expected[0] else "DIFFERS"
                    ok &= result["check"] != "DIFFERS"
                    print(f"{statistics.median(result['times']):.2f} s, {result['check']}", flush=True)
                else:
                    ok = False
                    print("failed:", result["error"], flush=True)
                results.append(result)
    meta = {"sf": args.sf, "data": os.path.relpath(args.data, HERE) if args.data.startswith(HERE) else args.data, "runs": args.runs, "warmups": args.warmups,
            "cold_runs": args.cold_runs, "machine": f"{os.cpu_count()} cores, {platform.machine()}", "versions": versions()}
    table = report(results, meta)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "tpch-results.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=2)
    with open(os.path.join(args.out, "tpch-results.md"), "w") as f:
        f.write(table + "\n")
    print(table)
    if not ok:
        sys.exit("some results disagree or failed: see the table")


if __name__ == "__main__":
    main()
