#!/usr/bin/env python3
"""The incremental skew join beside differential dataflow's `join` (issue 28).

Runs incremental/examples/incremental.rs in its three modes, interleaved, `--runs` times each:
`skew` (the skew join), `home` (the same operator with no key ever hot: differential's
placement, measured) and `differential` (differential's `join`), and stops unless they all give
the same output rows and checksum. Prints a Markdown table of medians: whole-process wall time, input updates per second, peak memory (max RSS), and each
worker's peak held records, updates and output updates as max/mean.

    cargo build --release -p skewjoin-incremental --example incremental
    python3 benches/incremental/run.py --workers 2 8 --runs 3
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODES = ["skew", "home", "differential"]


def run_once(binary, mode, workers, workload):
    """One run: (seconds, updates/s, max RSS in MB, {figure: max/mean}, (output rows, checksum))."""
    command = ["/usr/bin/time", "-f", "maxrss %M", binary, "--workers", str(workers),
               "--join", mode, "--quiet"] + workload
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}")
    rss = int(re.search(r"maxrss (\d+)", done.stderr).group(1)) / 1024
    rate = float(re.search(r"\(([\d.]+) updates/s\)", done.stdout).group(1))
    balance = {}
    found = re.search(r"peak held ([\d.]+), updates ([\d.]+), output updates ([\d.]+)", done.stdout)
    if found:
        balance = dict(zip(["held", "updates", "output"], map(float, found.groups())))
    output = re.search(r"output rows (-?\d+) checksum (\d+)", done.stdout)
    return seconds, rate, rss, balance, (int(output.group(1)), int(output.group(2)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "examples", "incremental"))
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 8])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--inserts", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--zipf", type=float, default=1.0)
    args = parser.parse_args()
    workload = ["--inserts", str(args.inserts), "--batch", str(args.batch),
                "--keys", str(args.keys), "--zipf", str(args.zipf)]
    print(f"Zipf {args.zipf} on both sides (same ranking), {args.inserts:,} inserts per side in "
          f"batches of {args.batch:,}, {args.keys:,} keys, a drifting key, 10% deletes; "
          f"medians of {args.runs}")
    print()
    print("| W | join | seconds | updates/s | vs differential | peak RSS MB | held max/mean | updates max/mean | output max/mean |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for workers in args.workers:
        results = {mode: [] for mode in MODES}
        for _ in range(args.runs):
            for mode in MODES:
                results[mode].append(run_once(args.binary, mode, workers, workload))
        # The workload depends on the worker count, not on the join: every mode's output must agree.
        outputs = {r[4] for mode in MODES for r in results[mode]}
        if len(outputs) != 1:
            sys.exit(f"W = {workers}: the joins' outputs differ (rows, checksum): {sorted(outputs)}")
        medians = {}
        for mode in MODES:
            runs = results[mode]
            medians[mode] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs),
                             statistics.median(r[2] for r in runs), runs[0][3])
        for mode in MODES:
            seconds, rate, rss, balance = medians[mode]
            speedup = medians["differential"][0] / seconds
            figures = [f"{balance[k]:.2f}" if k in balance else "-" for k in ["held", "updates", "output"]]
            print(f"| {workers} | {mode} | {seconds:.2f} | {rate:,.0f} | {speedup:.2f}x | {rss:.0f} | "
                  + " | ".join(figures) + " |")


if __name__ == "__main__":
    main()
