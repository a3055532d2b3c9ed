#!/bin/bash
# Prints BENCHMARKS.md's "Makespan on N emulated machines" tables: every workload on 2, 4 and 8
# emulated machines (each 2/N of this box's cores and a shaped link), Zipf 1.0 on 16, and the
# VPRP paper's experiment 2 on 20. Run as root from the repository root after
# `cargo build --release -p skewjoin-runtime`; results go to ${OUT:-/tmp/skewjoin-makespan}/*/
# (results.json, results.md, makespan.png). About 35 minutes on the 2-core machine.
set -euo pipefail
OUT=${OUT:-/tmp/skewjoin-makespan}
E="python3 $(dirname "$0")/emulate --runs ${RUNS:-3}"
$E --machines 2,4,8 --workloads zipf1.0 --scale 2.67 --strategies shuffle,am,auto,tree,vprp --out "$OUT/zipf1.0"
$E --machines 2,4,8 --workloads zipf0.8 --scale 1 --strategies shuffle,auto,am,vprp --out "$OUT/zipf0.8"
$E --machines 2,4,8 --workloads zipf1.2 --scale 2 --strategies shuffle,auto,am,tree,vprp --out "$OUT/zipf1.2"
$E --machines 2,4,8 --workloads zipf1.2-uniform --scale 0.3 --strategies shuffle,auto,am,tree,vprp,ib --out "$OUT/zipf1.2-uniform"
$E --machines 2,4,8 --workloads uniform --scale 0.5 --strategies shuffle,auto,am,vprp --out "$OUT/uniform"
$E --machines 2,4,8 --workloads small-large --scale 1 --strategies shuffle,auto,am,ib,broadcast --hows inner,full --out "$OUT/small-large"
$E --machines 2,4,8 --workloads zipf1.0-noise --scale 2.67 --strategies shuffle,auto,am,tree,vprp --hows full --out "$OUT/zipf1.0-noise"
$E --machines 16 --workloads zipf1.0 --scale 4 --strategies shuffle,am,auto,tree --runs 1 --out "$OUT/zipf1.0-16"
$E --machines 20 --workloads pavlo-15,pavlo-35,pavlo-55,pavlo-75,pavlo-95 --strategies shuffle,vprp,vprp-t --out "$OUT/pavlo"
$E --merge "$OUT"/zipf1.0 "$OUT"/zipf1.0-16 "$OUT"/zipf0.8 "$OUT"/zipf1.2 "$OUT"/zipf1.2-uniform \
    "$OUT"/uniform "$OUT"/small-large "$OUT"/zipf1.0-noise "$OUT"/pavlo --out "$OUT/all"
