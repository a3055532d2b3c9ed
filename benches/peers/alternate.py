#!/usr/bin/env python3
"""Before and after: runs several builds of skewjoin on the same arguments in turn.

    python3 benches/peers/alternate.py RUNS "ARGS" BINARY [BINARY ...]

Each round runs every binary once, one after the other, so that a noisy machine slows every
build alike instead of whichever happened to run during a burst. The first round is a warm-up
(page cache, CPU frequency) and is not counted. Prints, per binary, the median, least and every
whole-process wall time and the median peak resident memory, then the last lines of each one's
output so that checksums can be compared. Exits non-zero, saying which, when a binary fails.

    python3 benches/peers/alternate.py 5 "join a.parquet b.parquet --on key -w 2 -q" \\
        /tmp/skewjoin-before target/release/skewjoin
"""

import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time


def run_once(binary, args):
    """Whole-process wall seconds, peak resident MiB and the output's tail of one run."""
    with tempfile.TemporaryFile(mode="w+") as output:
        started = time.monotonic()
        child = subprocess.Popen([binary] + args, stdout=output, stderr=subprocess.STDOUT)
        # Reaped here rather than by Popen.wait, because wait4 also gives the child's peak
        # resident memory (ru_maxrss, KiB on Linux).
        _, status, usage = os.wait4(child.pid, 0)
        elapsed = time.monotonic() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        output.seek(0)
        text = output.read()
    if child.returncode != 0:
        sys.exit(f"{binary} exited with {child.returncode}:\n{text[-2000:]}")
    return elapsed, usage.ru_maxrss / 1024, text[-400:]


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    runs = int(sys.argv[1])
    args = shlex.split(sys.argv[2])
    binaries = sys.argv[3:]
    times = {binary: [] for binary in binaries}
    peaks = {binary: [] for binary in binaries}
    tails = {}
    for round_number in range(runs + 1):
        for binary in binaries:
            elapsed, peak, tails[binary] = run_once(binary, args)
            if round_number > 0:
                times[binary].append(elapsed)
                peaks[binary].append(peak)
    width = max(len(binary) for binary in binaries)
    for binary in binaries:
        seconds = times[binary]
        print(
            f"{binary:{width}}  median {statistics.median(seconds):.3f} s"
            f"  least {min(seconds):.3f} s  peak {statistics.median(peaks[binary]):.0f} MiB"
            f"  all {' '.join(f'{s:.2f}' for s in seconds)}"
        )
    for binary in binaries:
        print(f"--- {binary}, last run's output:\n{tails[binary]}")


if __name__ == "__main__":
    main()
