#!/usr/bin/env python3
"""Before and after: runs several builds of skewjoin on the same arguments in turn.

    python3 benches/peers/alternate.py RUNS "ARGS" BINARY [BINARY ...]

Each round runs every binary once, one after the other (every other round in reverse order),
so that a noisy machine slows every build alike instead of whichever happened to run during a
burst. The first round is a warm-up (page cache, CPU frequency) and is not counted. Prints, per binary, the median, least and every
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

# How much of a run's output is kept: enough for its closing lines and checksum.
TAIL_BYTES = 4096


def run_once(binary, args):
    """Whole-process wall seconds, peak resident MiB and the output's tail of one run."""
    with tempfile.TemporaryFile() as output:
        started = time.monotonic()
        child = subprocess.Popen([binary] + args, stdout=output, stderr=subprocess.STDOUT)
        # Reaped here rather than by Popen.wait, because wait4 also gives the child's peak
        # resident memory (ru_maxrss, KiB on Linux).
        _, status, usage = os.wait4(child.pid, 0)
        elapsed = time.monotonic() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        # Only the tail is read back: a child's ru_maxrss counts its parent's resident memory at
        # the fork, so a parent holding a large output would inflate every later run's peak.
        output.seek(max(0, output.seek(0, os.SEEK_END) - TAIL_BYTES))
        tail = output.read().decode(errors="replace")
    if child.returncode < 0:
        sys.exit(f"{binary} was killed by signal {-child.returncode}:\n{tail}")
    if child.returncode != 0:
        sys.exit(f"{binary} exited with {child.returncode}:\n{tail}")
    return elapsed, usage.ru_maxrss / 1024, tail[-400:]


def main():
    if len(sys.argv) < 4 or not sys.argv[1].isdigit() or int(sys.argv[1]) < 1:
        sys.exit(__doc__)
    runs = int(sys.argv[1])
    args = shlex.split(sys.argv[2])
    binaries = sys.argv[3:]
    # By position, so that one binary named twice (a check of the noise alone) is two columns.
    times = [[] for _ in binaries]
    peaks = [[] for _ in binaries]
    tails = [""] * len(binaries)
    for round_number in range(runs + 1):
        # Every other round in reverse, so that no binary always runs right after another.
        order = list(range(len(binaries)))
        if round_number % 2:
            order.reverse()
        for index in order:
            elapsed, peak, tails[index] = run_once(binaries[index], args)
            if round_number > 0:
                times[index].append(elapsed)
                peaks[index].append(peak)
    width = max(len(binary) for binary in binaries)
    for index, binary in enumerate(binaries):
        seconds = times[index]
        print(
            f"{binary:{width}}  median {statistics.median(seconds):.3f} s"
            f"  least {min(seconds):.3f} s  peak {statistics.median(peaks[index]):.0f} MiB"
            f"  all {' '.join(f'{s:.2f}' for s in seconds)}"
        )
    for binary, tail in zip(binaries, tails):
        print(f"--- {binary}, last run's output:\n{tail}")


if __name__ == "__main__":
    main()
