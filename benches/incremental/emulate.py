#!/usr/bin/env python3
"""The incremental skew join beside differential's `join` on N emulated machines (issue 28).

Run as root from the repository root after
`cargo build --release -p skewjoin-incremental --example incremental`. It makes N machines with
benches/cluster/emulate's `Cluster` (a cpu cgroup capped to the box's cores / N, a network
namespace on a shaped veth link, per machine), runs incremental/examples/incremental.rs as a
timely cluster of N processes, one per machine (`--processes N --process i --hostfile`), in
each of its modes (`skew`, `home`, `differential`), interleaved, `--runs` times, and removes
everything it made when done, interrupted or failing.

Per run: CPU seconds of all processes (wait4) and the ideal makespan they allow (spread evenly
over all machines' cores); the makespan (from the cluster complete, when the last process's workers start, to
the last process's end: the slowest machine ends it), the summed output rows and checksum (every mode must give the same), and for
`skew` and `home` each worker's peak held records, updates and output updates as max/mean.

    sudo python3 benches/incremental/emulate.py --machines 8 --runs 3
"""

import argparse
import atexit
import importlib.machinery
import importlib.util
import os
import re
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODES = ["skew", "home", "differential"]


def load_emulate():
    """benches/cluster/emulate (a script without .py) as a module, for its `Cluster`."""
    path = os.path.join(ROOT, "benches", "cluster", "emulate")
    loader = importlib.machinery.SourceFileLoader("emulate", path)
    spec = importlib.util.spec_from_loader("emulate", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def run_once(emulate, cluster, binary, mode, workload, work, timeout):
    """One cluster run: (makespan seconds, rows, checksum, {figure: [per worker]}, CPU seconds of
    all processes)."""
    n = cluster.n
    hostfile = os.path.join(work, "hosts")
    with open(hostfile, "w") as f:
        f.write("\n".join(cluster.addresses) + "\n")
    children = []
    start = time.monotonic()
    for i in range(n):
        cmd = ["nsenter", f"--net=/var/run/netns/{cluster.namespaces[i]}", binary, "--workers", "1",
               "--processes", str(n), "--process", str(i), "--hostfile", hostfile, "--join", mode,
               "--quiet", *workload]
        procs_file = os.path.join(cluster.cgroups[i], "cgroup.procs")
        out = open(os.path.join(work, f"process-{i}.out"), "w")
        child = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                 preexec_fn=lambda path=procs_file: emulate.write(path, os.getpid()))
        children.append((child, out))
    cpu_seconds, running = 0.0, dict(enumerate(children))
    try:
        # Every child polled each pass: one that fails early (its peers then wait for it in
        # timely's connection setup) stops the run at once, not at the timeout.
        while running:
            for i, (child, _) in list(running.items()):
                pid, status, usage = os.wait4(child.pid, os.WNOHANG)
                if pid:
                    child.returncode = os.waitstatus_to_exitcode(status)
                    cpu_seconds += usage.ru_utime + usage.ru_stime
                    del running[i]
                    if child.returncode != 0:
                        raise RuntimeError(f"process {i} exited with {child.returncode}; see {work}/process-{i}.out")
            if time.monotonic() > start + timeout:
                raise RuntimeError(f"a run passed --timeout {timeout}s; see {work}/process-*.out")
            time.sleep(0.02)
    except RuntimeError:
        for child, _ in running.values():
            child.kill()
            child.wait()
        raise
    finally:
        for _, out in children:
            out.close()
    rows, checksum, figures = 0, 0, {"held": [], "updates": [], "output": []}
    spans = []
    for i, (child, _) in enumerate(children):
        with open(os.path.join(work, f"process-{i}.out")) as f:
            text = f.read()
        if child.returncode != 0:
            raise RuntimeError(f"process {i} exited with {child.returncode}: {text.strip()}")
        span = re.search(r"join from ([\d.]+) to ([\d.]+)", text)
        spans.append((float(span.group(1)), float(span.group(2))))
        found = re.search(r"output rows (-?\d+) checksum (\d+)", text)
        rows += int(found.group(1))
        checksum = (checksum + int(found.group(2))) % 2**64
        for held, updates, output in re.findall(r"peak_held (-?\d+) updates (\d+) output_updates (\d+)", text):
            figures["held"].append(int(held))
            figures["updates"].append(int(updates))
            figures["output"].append(int(output))
    # From the last process's workers starting (the cluster complete) to the last one ending.
    makespan = max(end for _, end in spans) - max(begin for begin, _ in spans)
    return makespan, rows, checksum, figures, cpu_seconds


def max_over_mean(values):
    mean = sum(values) / len(values) if values else 0
    return max(values) / mean if mean > 0 else 1.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "examples", "incremental"))
    parser.add_argument("--machines", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--inserts", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--zipf", type=float, default=1.0)
    parser.add_argument("--out", default="/tmp/skewjoin-incremental-emulate")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("emulate.py: run as root: it makes cgroups, network namespaces and links")
    if not os.access(args.binary, os.X_OK):
        sys.exit(f"emulate.py: {args.binary} is not there: "
                 "cargo build --release -p skewjoin-incremental --example incremental")
    emulate = load_emulate()
    if emulate.cgroup_root() is None:
        sys.exit("emulate.py: no cpu cgroup controller here (neither /sys/fs/cgroup/cpu nor cgroup v2's cpu)")
    n = args.machines
    cpu = os.cpu_count() / n
    bits = emulate.REFERENCE_BITS * cpu / emulate.REFERENCE_CORES
    workload = ["--inserts", str(args.inserts), "--batch", str(args.batch), "--keys", str(args.keys),
                "--zipf", str(args.zipf)]
    os.makedirs(args.out, exist_ok=True)
    live = []

    def close_all(*_):
        while live:
            live.pop().close()

    def interrupted(signum, _frame):
        close_all()
        sys.exit(128 + signum)

    atexit.register(close_all)
    signal.signal(signal.SIGINT, interrupted)
    signal.signal(signal.SIGTERM, interrupted)
    cluster = emulate.Cluster(n, [cpu] * n, bits, 0.0, f"{os.getpid() % 100000:x}i", 9)
    live.append(cluster)
    results = {mode: [] for mode in MODES}
    try:
        for _ in range(args.runs):
            for mode in MODES:
                work = os.path.join(args.out, mode)
                os.makedirs(work, exist_ok=True)
                results[mode].append(run_once(emulate, cluster, args.binary, mode, workload, work, args.timeout))
                print(f"{mode}: {results[mode][-1][0]:.2f} s", file=sys.stderr, flush=True)
    finally:
        close_all()
    outputs = {(r[1], r[2]) for runs in results.values() for r in runs}
    print(f"{n} machines of {cpu:.2f} cores and {bits / 1e9:.2f} Gbit/s, one worker each; Zipf "
          f"{args.zipf} on both sides, {args.inserts:,} inserts per side in batches of {args.batch:,}, "
          f"{args.keys:,} keys, a drifting key, 10% deletes; medians of {args.runs}")
    print()
    print("| join | makespan s | vs differential | CPU s, all machines | ideal s | makespan / ideal | held max/mean | updates max/mean | output max/mean |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    reference = statistics.median(r[0] for r in results["differential"])
    for mode in MODES:
        makespan = statistics.median(r[0] for r in results[mode])
        figures = results[mode][0][3]
        balance = [f"{max_over_mean(figures[k]):.2f}" if figures[k] else "-" for k in ["held", "updates", "output"]]
        cpu_seconds = statistics.median(r[4] for r in results[mode])
        # The makespan if the CPU time were spread evenly over every machine's cores.
        ideal = cpu_seconds / (cpu * n)
        print(f"| {mode} | {makespan:.2f} | {reference / makespan:.2f}x | {cpu_seconds:.2f} | {ideal:.2f} | "
              f"{makespan / ideal:.2f} | " + " | ".join(balance) + " |")
    print()
    if len(outputs) != 1:
        sys.exit(f"emulate.py: the modes' outputs differ (rows, checksum): {sorted(outputs)}")
    rows, checksum = outputs.pop()
    print(f"every run: {rows} output rows, checksum {checksum}")


if __name__ == "__main__":
    main()
