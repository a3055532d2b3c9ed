#!/usr/bin/env python3
"""skewjoin beside DuckDB, Polars, DataFusion, Spark and differential dataflow on the same joins (issue 8).

One command: generates each workload with `skewjoin gen`, runs the same join in every system with
2 threads, records the median wall time of 5 runs after one warm-up and the peak memory of the
process that ran them (a library's time is its query's in a warm session; with --cold-runs N
also of the first query of N fresh processes), checks that every system produced the same rows,
and writes results.json and results.md beside this file. See README.md.

Every system computes the same thing: the number of output rows and a checksum that needs every
output row, sum over rows of

    (lvalue % 1009) * (rvalue % 1013) + 3 * (lid % 1019) + 7 * (rid % 1021)

with a NULL-padded side counted as 0. It mixes both sides of each pair, so no planner can answer
it from per-side counts, and it stays below 2^63 for over 10^12 output rows, so every engine's
64-bit (or wider) sum gives the same exact number.

Each system runs in a subprocess of its own (this script with --worker) so that its peak memory
is its own: the worker reports its ru_maxrss, plus the JVM's VmHWM for Spark, whose JVM is a
separate process. skewjoin and dd-join (differential dataflow, dd/) run as their own binaries,
timed and measured with os.wait4.
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
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
THREADS = 2

# name: (left rows, right rows, keys, left Zipf, right Zipf, noise, description). Sizes are at
# --scale 1; --scale multiplies rows and keys. "Same-rank" is gen's default: the same keys are
# hot on both sides.
WORKLOADS = {
    "uniform": (10_000_000, 10_000_000, 10_000_000, 0.0, 0.0, 0.0, "uniform keys"),
    "zipf0.8": (5_000_000, 5_000_000, 5_000_000, 0.8, 0.8, 0.0, "same-rank Zipf 0.8"),
    "zipf1.0": (300_000, 300_000, 1_000_000, 1.0, 1.0, 0.0, "same-rank Zipf 1.0"),
    "zipf1.2-uniform": (10_000_000, 10_000_000, 10_000_000, 1.2, 0.0, 0.0, "left Zipf 1.2, right uniform"),
    # The small side is on the left; 10 % of each side's rows have keys the other side lacks,
    # so a full outer join pads rows on both sides.
    "small-large": (100_000, 5_000_000, 100_000, 0.0, 0.0, 0.1, "Small-Large, 10 % unmatched per side"),
    # The full outer case of same-rank Zipf 1.0 with 20 % one-sided keys, so padding is a real
    # part of the output rather than the few unmatched keys of zipf1.0.
    "zipf1.0-noise": (300_000, 300_000, 1_000_000, 1.0, 1.0, 0.2, "same-rank Zipf 1.0, 20 % unmatched per side"),
}
HOWS = ["inner", "full"]
DEFAULT_DD = os.path.join(HERE, "dd", "target", "release", "dd-join")
SYSTEMS = [
    "skewjoin-auto",
    "skewjoin-shuffle",
    "duckdb",
    "polars",
    "datafusion",
    "datafusion-partitioned",
    "spark",
    "spark-skew",
    "dd",
]
SQL_JOIN = {"inner": "INNER JOIN", "full": "FULL OUTER JOIN"}
CHECKSUM_SQL = (
    "count(*) AS n, sum((coalesce(l.value, 0) % 1009) * (coalesce(r.value, 0) % 1013)"
    " + 3 * (coalesce(l.id, 0) % 1019) + 7 * (coalesce(r.id, 0) % 1021)) AS s"
)


# ---------------------------------------------------------------------------------------------
# Workers: one system, one join, warm-up plus timed runs, in a process of their own.


def sql_query(left, right, how):
    return f"SELECT {CHECKSUM_SQL} FROM {left} l {SQL_JOIN[how]} {right} r ON l.key = r.key"


# Each run_<system>(spec) returns once(), which runs the query and returns (rows, checksum); a
# dict of notes for the report; and finish(), which closes what it opened and returns the peak
# memory (KiB) of any other process it started.


def run_duckdb(spec):
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET threads = {THREADS}")
    query = sql_query(f"read_parquet('{spec['left']}')", f"read_parquet('{spec['right']}')", spec["how"])

    def once():
        n, s = con.execute(query).fetchone()
        return n, s

    return once, {}, lambda: 0


def run_polars(spec):
    # POLARS_MAX_THREADS is set by the parent before this process imports polars.
    import polars as pl

    how = spec["how"]

    def once():
        left = pl.scan_parquet(spec["left"]).rename({"id": "lid", "value": "lvalue"})
        right = pl.scan_parquet(spec["right"]).rename({"id": "rid", "value": "rvalue"})
        joined = left.join(right, on="key", how=how)
        z = lambda name: pl.col(name).fill_null(0)  # noqa: E731 - a NULL-padded side counts as 0
        mix = (z("lvalue") % 1009) * (z("rvalue") % 1013) + 3 * (z("lid") % 1019) + 7 * (z("rid") % 1021)
        # The streaming engine: the in-memory one would hold every output row at once, which
        # the larger workloads (10^8 to 10^9 rows) cannot afford.
        out = joined.select(pl.len().alias("n"), mix.sum().alias("s")).collect(engine="streaming")
        return out["n"][0], out["s"][0]

    return once, {"engine": "streaming"}, lambda: 0


def run_datafusion(spec):
    from datafusion import SessionConfig, SessionContext

    config = SessionConfig().with_target_partitions(THREADS)
    if spec["system"] == "datafusion-partitioned":
        # Force a hash-partitioned join: repartition both sides by key, never collect one
        # side whole (CollectLeft) however small it is.
        for name, value in [
            ("datafusion.optimizer.repartition_joins", "true"),
            ("datafusion.optimizer.prefer_hash_join", "true"),
            ("datafusion.optimizer.hash_join_single_partition_threshold", "0"),
            ("datafusion.optimizer.hash_join_single_partition_threshold_rows", "0"),
        ]:
            config = config.set(name, value)
    plan = {}

    def once():
        ctx = SessionContext(config)
        ctx.register_parquet("lt", spec["left"])
        ctx.register_parquet("rt", spec["right"])
        df = ctx.sql(sql_query("lt", "rt", spec["how"]))
        text = df.execution_plan().display_indent()
        modes = {line.split("mode=")[1].split(",")[0] for line in text.splitlines() if "HashJoinExec: mode=" in line}
        plan["join"] = "HashJoinExec " + ", ".join(sorted(modes))
        row = df.to_pylist()[0]
        return row["n"], row["s"]

    return once, plan, lambda: 0


def spark_session(spec):
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(f"local[{THREADS}]")
        .appName("skewjoin-peers")
        .config("spark.driver.memory", spec["spark_memory"])
        .config("spark.ui.enabled", "false")
        .config("spark.sql.adaptive.enabled", "true")
    )
    for key, value in spec.get("spark_conf", {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def run_spark(spec):
    started = time.perf_counter()
    spark = spark_session(spec)
    spark.sparkContext.setLogLevel("ERROR")
    info = {"startup_s": time.perf_counter() - started, "conf": spec.get("spark_conf", {})}

    def once():
        spark.read.parquet(spec["left"]).createOrReplaceTempView("lt")
        spark.read.parquet(spec["right"]).createOrReplaceTempView("rt")
        df = spark.sql(sql_query("lt", "rt", spec["how"]))
        row = df.collect()[0]
        plan = df._jdf.queryExecution().executedPlan().toString()
        joins = [j for j in ("BroadcastHashJoin", "SortMergeJoin", "ShuffledHashJoin", "BroadcastNestedLoopJoin") if j in plan]
        info["join"] = ", ".join(joins) + (" (skew split)" if "skew=true" in plan else "")
        return row["n"], row["s"]

    def finish():
        # The JVM is a child process of this one; its VmHWM is its peak resident memory, read
        # before the session stops and the JVM exits.
        with open(f"/proc/{spark.sparkContext._gateway.proc.pid}/status") as f:
            peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
        spark.stop()
        return peak

    return once, info, finish


def worker(spec):
    """The --worker entry point: a helper task, or one system's warm-up and timed runs, whose
    result it prints as one JSON line."""
    if "task" in spec:
        task = {"row-groups": set_row_groups, "compare": compare_with_duckdb}[spec["task"]]
        print(json.dumps(task(spec)))
        return
    system = spec["system"]
    if system.startswith("datafusion"):
        setup = run_datafusion
    elif system.startswith("spark"):
        setup = run_spark
    else:
        setup = {"duckdb": run_duckdb, "polars": run_polars}[system]
    once, info, finish = setup(spec)
    results, times = [], []
    for i in range(spec["warmups"] + spec["runs"]):
        started = time.perf_counter()
        n, s = once()
        elapsed = time.perf_counter() - started
        results.append((int(n), int(s or 0)))  # a sum over no rows is NULL
        if i >= spec["warmups"]:
            times.append(elapsed)
    other_process_kib = finish()
    print(
        json.dumps(
            {
                "times": times,
                "rows": results[-1][0],
                "checksum": results[-1][1],
                "repeatable": len(set(results)) == 1,
                "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss + other_process_kib,
                **info,
            }
        )
    )


# ---------------------------------------------------------------------------------------------
# The parent: data, runs, checks, reports.


def generate(skewjoin, name, scale, data_dir):
    """Writes the workload once per scale; returns its directory and gen's exact join sizes."""
    lrows, rrows, keys, lskew, rskew, noise, _ = WORKLOADS[name]
    out = os.path.join(data_dir, f"scale-{scale:g}", name)
    summary_path = os.path.join(out, "gen.json")
    if os.path.exists(summary_path):
        with open(summary_path) as f:
            return out, json.load(f)
    sized = lambda n: max(1, round(n * scale))  # noqa: E731
    cmd = [skewjoin, "gen", "--out", out, "--left-rows", str(sized(lrows)), "--right-rows", str(sized(rrows))]
    cmd += ["--keys", str(sized(keys)), "--left-skew", str(lskew), "--right-skew", str(rskew), "--noise", str(noise)]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    # gen prints "  inner  <rows>" lines: the exact size of each join type.
    exact = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            exact[parts[0]] = int(parts[1])
    # Rewrite each file with 8 row groups: Spark (and DataFusion) split a Parquet file into
    # tasks only at row-group boundaries.
    for side in ("left", "right"):
        helper({"task": "row-groups", "path": os.path.join(out, f"{side}.parquet"), "groups": 8})
    summary = {"command": " ".join(cmd[1:]), "exact_rows": exact, "left_rows": sized(lrows), "right_rows": sized(rrows)}
    with open(summary_path, "w") as f:
        json.dump(summary, f, indent=2)
    return out, summary


def timed_process(cmd, timeout=None, stdout=None):
    """Runs cmd; returns (seconds, exit code, ru_maxrss in KiB, stderr) of that one process.
    os.wait4 reaps it and gives its own resource usage, which Popen.wait would discard.
    stdout: a file for its standard output (default: discarded)."""
    with tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=stdout or subprocess.DEVNULL, stderr=err)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            elapsed = time.perf_counter() - started
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                err.seek(0)
                return elapsed, proc.returncode, usage.ru_maxrss, err.read()
            if timeout and elapsed > timeout:
                proc.kill()
                proc.wait()
                return None, "timeout", 0, ""
            time.sleep(0.001)


def run_skewjoin(args, strategy, left, right, how, metrics_path):
    cmd = [args.skewjoin, "join", left, right, "--on", "key", "--how", how, "--strategy", strategy]
    cmd += ["--workers", str(THREADS), "--quiet", "--metrics", metrics_path]
    if args.partitions:
        cmd += ["--partitions", str(args.partitions)]
    times, peaks, rows = [], [], set()
    for i in range(args.warmups + args.runs):
        elapsed, code, peak, err = timed_process(cmd, timeout=args.timeout)
        if code != 0:
            return {"error": f"exit {code}: {err.strip()[-300:]}"}
        with open(metrics_path) as f:
            metrics = json.load(f)
        rows.add(metrics["output_rows"])
        peaks.append(peak)
        if i >= args.warmups:
            times.append(elapsed)
    return {
        "times": times,
        "rows": max(rows),
        "repeatable": len(rows) == 1,
        "peak_kib": max(peaks),
        "strategy": metrics["strategy"],
        "join_s": metrics["elapsed_seconds"],
    }


def ensure_dd(args):
    """Builds dd-join when --dd names no binary: its own cargo package (dd/), outside the
    workspace, so that the workspace's builds and tests never compile differential dataflow.
    --target-dir pins where the binary lands whatever CARGO_TARGET_DIR says."""
    if os.access(args.dd, os.X_OK):
        return
    manifest = os.path.join(HERE, "dd", "Cargo.toml")
    if args.dd != DEFAULT_DD:
        sys.exit(f"no dd-join binary at {args.dd}: build it (cargo build --release --manifest-path {manifest}) or drop --dd")
    print(f"building dd-join ({manifest}) ...", flush=True)
    cmd = ["cargo", "build", "--release", "--manifest-path", manifest, "--target-dir", os.path.join(HERE, "dd", "target")]
    if subprocess.run(cmd).returncode != 0 or not os.access(args.dd, os.X_OK):
        sys.exit(f"building dd-join failed ({' '.join(cmd)}); build it by hand and pass --dd PATH")


def run_dd(args, left, right, how):
    """dd-join as its own process, timed like skewjoin: the whole process, reading included.
    It prints rows, checksum and its join time without the reading, as tab-separated lines."""
    cmd = [args.dd, "--left", left, "--right", right, "--how", how, "--workers", str(THREADS)]
    times, peaks, results = [], [], set()
    for i in range(args.warmups + args.runs):
        with tempfile.TemporaryFile("w+") as out:
            elapsed, code, peak, err = timed_process(cmd, timeout=args.timeout, stdout=out)
            if code != 0:
                return {"error": f"exit {code}: {err.strip()[-300:]}"}
            out.seek(0)
            printed = dict(line.rstrip("\n").split("\t", 1) for line in out if "\t" in line)
        results.add((int(printed["rows"]), int(printed["checksum"])))
        peaks.append(peak)
        if i >= args.warmups:
            times.append(elapsed)
    rows, checksum = max(results)
    return {
        "times": times,
        "rows": rows,
        "checksum": checksum,
        "repeatable": len(results) == 1,
        "peak_kib": max(peaks),
        "join_s": float(printed["seconds"]),
    }


def verify_skewjoin_output(args, strategy, left, right, how, tmp):
    """Writes skewjoin's whole output for a check in a helper process. Untimed."""
    out = os.path.join(tmp, f"verify-{strategy}-{how}.parquet")
    cmd = [args.skewjoin, "join", left, right, "--on", "key", "--how", how, "--strategy", strategy]
    subprocess.run(cmd + ["--workers", str(THREADS), "--quiet", "--output", out], check=True)
    try:
        return helper({"task": "compare", "left": left, "right": right, "how": how, "output": out})
    finally:
        os.remove(out)


def compare_with_duckdb(spec):
    """Compares skewjoin's output with DuckDB's join as multisets (EXCEPT ALL both ways) and
    computes the peers' checksum over it."""
    import duckdb

    left, right, how, out = spec["left"], spec["right"], spec["how"], spec["output"]
    con = duckdb.connect()
    con.execute(f"SET threads = {THREADS}")
    theirs = (
        f"SELECT l.key, l.id, l.value, r.key AS key_right, r.id AS id_right, r.value AS value_right"
        f" FROM read_parquet('{left}') l {SQL_JOIN[how]} read_parquet('{right}') r ON l.key = r.key"
    )
    ours = f"SELECT key, id, value, key_right, id_right, value_right FROM read_parquet('{out}')"
    missing, extra = con.execute(
        f"SELECT (SELECT count(*) FROM ({theirs} EXCEPT ALL {ours})), (SELECT count(*) FROM ({ours} EXCEPT ALL {theirs}))"
    ).fetchone()
    checksum = con.execute(
        "SELECT sum((coalesce(value, 0) % 1009) * (coalesce(value_right, 0) % 1013)"
        f" + 3 * (coalesce(id, 0) % 1019) + 7 * (coalesce(id_right, 0) % 1021)) FROM read_parquet('{out}')"
    ).fetchone()[0]
    return {"missing": missing, "extra": extra, "checksum": int(checksum or 0)}


def set_row_groups(spec):
    import pyarrow.parquet as pq

    table = pq.read_table(spec["path"])
    pq.write_table(table, spec["path"], row_group_size=max(1, -(-table.num_rows // spec["groups"])))
    return {}


def helper(spec):
    """Runs a task needing pyarrow or DuckDB in a child process, so that this parent stays small:
    a child's ru_maxrss starts at its parent's resident size when forked."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(spec)]
    proc = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def spark_skew_conf(left, right, left_rows, right_rows):
    """Spark's skew-join settings scaled to the data. Its defaults (a skewed partition is over 256
    MB and 5x the median, 64 MB advisory size) are sized for clusters; at these sizes no
    partition reaches them. A shuffle partition holds about 40 bytes per row (UnsafeRow of three
    longs plus header); with the default 200 shuffle partitions the median one holds 1/200 of a
    side, and a partition 2x the median and over the advisory size counts as skewed."""
    side_bytes = 40 * max(left_rows, right_rows)
    advisory = max(1024, side_bytes // 50)
    # AQE splits a skewed partition only between map tasks' blocks: read each file as 8 tasks
    # (one per row group) rather than one, or there would be nothing to split.
    split = max(1024, max(os.path.getsize(left), os.path.getsize(right)) // 8)
    return {
        # A broadcast join has no shuffle and so nothing for AQE to split: force a shuffled join.
        "spark.sql.autoBroadcastJoinThreshold": "-1",
        "spark.sql.files.maxPartitionBytes": str(split),
        "spark.sql.files.openCostInBytes": "1024",
        "spark.sql.adaptive.skewJoin.enabled": "true",
        "spark.sql.adaptive.forceOptimizeSkewedJoin": "true",
        "spark.sql.adaptive.advisoryPartitionSizeInBytes": str(advisory),
        "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes": str(advisory),
        "spark.sql.adaptive.skewJoin.skewedPartitionFactor": "2",
        "spark.sql.adaptive.coalescePartitions.minPartitionSize": str(max(1, advisory // 4)),
    }


def run_peer(args, system, left, right, how, summary, log_path):
    spec = {"system": system, "left": left, "right": right, "how": how, "runs": args.runs, "warmups": args.warmups}
    spec["spark_memory"] = args.spark_memory
    if system == "spark-skew":
        spec["spark_conf"] = spark_skew_conf(left, right, summary["left_rows"], summary["right_rows"])
    env = dict(os.environ, POLARS_MAX_THREADS=str(THREADS))
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    def process(spec, mode):
        """One worker process for `spec`: its JSON line, and the process's whole wall time."""
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(spec)]
        started = time.perf_counter()
        with open(log_path, mode) as log:
            proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=log, text=True, timeout=args.timeout)
        elapsed = time.perf_counter() - started
        if proc.returncode != 0:
            with open(log_path) as f:
                return {"error": f"exit {proc.returncode}: " + f.read().strip()[-300:]}, elapsed
        return json.loads(proc.stdout.strip().splitlines()[-1]), elapsed

    result, _ = process(spec, "w")
    if "error" in result:
        return result
    return with_cold_runs(result, args.cold_runs, lambda: process(dict(spec, warmups=0, runs=1), "a"))


def with_cold_runs(result, runs, run_cold):
    """`result` (a library's warm runs) with `runs` cold runs added, each `run_cold()`: a worker
    process whose one query is its first, giving its JSON line and its whole wall time; or the
    error of the first that failed or answered otherwise than the warm runs.

    Cold is each run the first query of a process of its own, as a command-line user's join is,
    with nothing kept from an earlier query: no memory already taken from the system, no threads
    started, no file metadata read. The process's whole wall time, interpreter start and import
    included, is kept beside it. tpch.py times its libraries so too."""
    if not runs:
        return result
    result["cold_times"], result["cold_process"] = [], []
    for _ in range(runs):
        cold, elapsed = run_cold()
        if "error" in cold:
            return cold
        if (cold.get("rows"), cold.get("checksum")) != (result.get("rows"), result.get("checksum")):
            return {"error": f"a cold run gave {cold.get('rows')} rows, checksum {cold.get('checksum')}, where the warm runs gave {result.get('rows')}, {result.get('checksum')}"}
        result["cold_times"] += cold["times"]
        result["cold_process"].append(elapsed)
        result["peak_kib_cold"] = max(result.get("peak_kib_cold", 0), cold["peak_kib"])
    return result


def report(results, meta):
    """The markdown table: one row per system, workload and join type."""
    lines = [
        "# skewjoin beside DuckDB, Polars, DataFusion, Spark and differential dataflow",
        "",
        f"Scale {meta['scale']:g} ({meta['date']}, {meta['machine']}); {THREADS} threads each;"
        f" median of {meta['runs']} runs after {meta['warmups']} warm-up; peak memory of the process"
        f" that ran them (each includes up to {meta['launcher_peak_mib']:.0f} MiB of the launching script). Regenerate with the command in README.md, which explains the columns.",
        "",
        "| system | workload | join | median s | peak MiB | rows | checksum ok | notes |",
        "| --- | --- | --- | ---: | ---: | ---: | --- | --- |",
    ]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['system']} | {r['workload']} | {r['how']} | error | | | no | {r['error'][:120]} |")
            continue
        notes = []
        if r.get("strategy"):
            notes.append(r["strategy"])
        if r.get("join"):
            notes.append(r["join"])
        if r.get("startup_s") is not None:
            notes.append(f"start-up {r['startup_s']:.1f} s (not in median)")
        if r.get("engine"):
            notes.append(f"{r['engine']} engine")
        if r["system"] == "dd":
            notes.append(f"join {r['join_s']:.3f} s without reading (last run)")
        lines.append(
            f"| {r['system']} | {r['workload']} | {r['how']} | {r['median_s']:.3f} | {r['peak_mib']:.0f}"
            f" | {r['rows']:,} | {r['checksum_ok']} | {'; '.join(notes)} |"
        )
    cold = [r for r in results if "cold_times" in r]
    if cold:
        lines += [
            "",
            f"Cold sessions: each library's query the first of a process of its own, median of"
            f" {meta['cold_runs']} (its whole process in brackets, interpreter start and import included);"
            f" skewjoin's whole process as above.",
            "",
            "| system | workload | join | cold s | vs DuckDB cold | peak MiB |",
            "| --- | --- | --- | ---: | ---: | ---: |",
        ]
        for r in results:
            if "error" in r or ("cold_times" not in r and not r["system"].startswith("skewjoin")):
                continue
            duck = next((x for x in cold if x["workload"] == r["workload"] and x["how"] == r["how"] and x["system"] == "duckdb"), None)
            median = statistics.median(r.get("cold_times", r["times"]))
            ratio = f"{median / statistics.median(duck['cold_times']):.2f}x" if duck else ""
            process = f" ({statistics.median(r['cold_process']):.2f})" if "cold_process" in r else ""
            peak = r.get("peak_kib_cold", r["peak_kib"]) / 1024
            lines.append(f"| {r['system']} | {r['workload']} | {r['how']} | {median:.3f}{process} | {ratio} | {peak:.0f} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every workload's rows and keys")
    parser.add_argument("--only", action="append", help="run this workload only (repeatable): " + ", ".join(WORKLOADS))
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated subset of: " + ", ".join(SYSTEMS))
    parser.add_argument("--hows", default=",".join(HOWS), help="join types: inner, full")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per measurement (median reported)")
    parser.add_argument("--warmups", type=int, default=1)
    parser.add_argument("--cold-runs", type=int, default=0,
                        help="also time each library's query this many times as the first of a fresh process")
    parser.add_argument("--skewjoin", default=shutil.which("skewjoin") or os.path.join(HERE, "../../target/release/skewjoin"))
    parser.add_argument("--dd", default=DEFAULT_DD, help="dd-join binary (default: built from dd/ when missing)")
    parser.add_argument("--partitions", type=int, help="skewjoin --partitions (default: one per worker)")
    parser.add_argument("--spark-memory", default="8g", help="spark.driver.memory (local mode: all of Spark)")
    parser.add_argument("--verify-rows", type=int, default=5_000_000, help="check skewjoin's whole output against DuckDB's where the join has at most this many rows")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per system and join before it is recorded as timed out")
    parser.add_argument("--data", default=os.path.join(HERE, "data"), help="where generated workloads are kept")
    parser.add_argument("--out", default=HERE, help="where results.json, results.md and metrics/ go")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(json.loads(args.worker))

    args.skewjoin = os.path.abspath(args.skewjoin)
    if not os.access(args.skewjoin, os.X_OK):
        sys.exit(f"no skewjoin binary at {args.skewjoin}: build it (cargo build --release) or pass --skewjoin PATH")
    names = args.only or list(WORKLOADS)
    for name in names:
        if name not in WORKLOADS:
            sys.exit(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}")
    systems = args.systems.split(",")
    for system in systems:
        if system not in SYSTEMS:
            sys.exit(f"unknown system {system!r}; choose from {', '.join(SYSTEMS)}")
    if "dd" in systems:
        args.dd = os.path.abspath(args.dd)
        ensure_dd(args)
    metrics_dir = os.path.join(args.out, "metrics")
    logs_dir = os.path.join(args.out, "logs")
    os.makedirs(metrics_dir, exist_ok=True)
    os.makedirs(logs_dir, exist_ok=True)

    results = []
    for name in names:
        data, summary = generate(args.skewjoin, name, args.scale, args.data)
        left, right = os.path.join(data, "left.parquet"), os.path.join(data, "right.parquet")
        for how in args.hows.split(","):
            expected = summary["exact_rows"][how]
            print(f"== {name} {how}: {summary['left_rows']:,} x {summary['right_rows']:,} rows -> {expected:,}", flush=True)
            group = []
            for system in systems:
                tag = f"{name}-{how}-{system}"
                if system.startswith("skewjoin-"):
                    strategy = system.split("-", 1)[1]
                    r = run_skewjoin(args, strategy, left, right, how, os.path.join(metrics_dir, f"{tag}.json"))
                    if "error" not in r and expected <= args.verify_rows:
                        r["verified"] = verify_skewjoin_output(args, strategy, left, right, how, data)
                elif system == "dd":
                    r = run_dd(args, left, right, how)
                else:
                    try:
                        r = run_peer(args, system, left, right, how, summary, os.path.join(logs_dir, f"{tag}.log"))
                    except subprocess.TimeoutExpired:
                        r = {"error": f"timed out after {args.timeout:g} s"}
                r.update(system=system, workload=name, how=how, expected_rows=expected)
                if "error" not in r:
                    r["median_s"] = statistics.median(r["times"])
                    r["peak_mib"] = r["peak_kib"] / 1024
                print(f"   {system:24} " + (r.get("error") or f"{r['median_s']:.3f} s, {r['peak_mib']:.0f} MiB, {r['rows']:,} rows"), flush=True)
                group.append(r)
            # The checksum every peer must match: DuckDB's, or the first peer's without DuckDB.
            peers = [r for r in group if "checksum" in r and "error" not in r]
            reference = next((r["checksum"] for r in peers if r["system"] == "duckdb"), peers[0]["checksum"] if peers else None)
            for r in group:
                if "error" in r:
                    r["checksum_ok"] = "no"
                    continue
                rows_ok = r["rows"] == expected and r.get("repeatable", True)
                if "checksum" in r:
                    r["checksum_ok"] = "yes" if rows_ok and r["checksum"] == reference else "NO"
                elif "verified" in r:
                    v = r["verified"]
                    same = rows_ok and v["missing"] == 0 and v["extra"] == 0 and reference in (None, v["checksum"])
                    r["checksum_ok"] = "yes (output = DuckDB's)" if same else f"NO ({v['missing']} missing, {v['extra']} extra)"
                else:
                    r["checksum_ok"] = "rows only" if rows_ok else "NO (rows)"
            results.extend(group)

    meta = {
        "scale": args.scale,
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}",
        "runs": args.runs,
        "warmups": args.warmups,
        "cold_runs": args.cold_runs,
        "workloads": {n: WORKLOADS[n][-1] for n in names},
        # Every child's peak includes up to this much: a forked child starts at its parent's size.
        "launcher_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=2)
    table = report(results, meta)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(table)
    print()
    print(table)
    if any(r["checksum_ok"].startswith(("NO", "no")) for r in results):
        sys.exit("some results disagree or failed: see the table")


if __name__ == "__main__":
    main()
