#!/bin/bash
# Prints BENCHMARKS.md's cluster-mode figures: 2 processes x 1 worker against 1 process x 2
# workers, and IB-Join / DER / DDR / Shuffle-Join across two processes. Run from the repository
# root after `cargo build --release`; data go to ${DATA:-/tmp/skewjoin-cluster-bench}.
set -euo pipefail
B=${B:-$PWD/target/release/skewjoin}
DATA=${DATA:-/tmp/skewjoin-cluster-bench}
PY=${PY:-python3}
mkdir -p "$DATA/sl" && cd "$DATA"
[ -f u/left.parquet ] || "$B" gen --out u --rows 2000000 --keys 2000000 --skew 0 >/dev/null
[ -f z/left.parquet ] || "$B" gen --out z --rows 300000 --keys 1000000 --skew 1.0 >/dev/null
[ -f sl/small.parquet ] || "$PY" "$(dirname "$0")/small_large_files.py" sl
field() { python3 -c "import json; m = json.load(open('m.json')); print($1)"; }
# Best join time and best wall time of RUNS runs of a command (it gets --metrics m.json -q).
best() {
  local best_join=999 best_wall=999
  for _ in $(seq "${RUNS:-5}"); do
    local start end
    start=$(date +%s.%N); "$@" --metrics m.json -q >/dev/null; end=$(date +%s.%N)
    best_join=$(python3 -c "print(min($best_join, $(field "m['elapsed_seconds']")))")
    best_wall=$(python3 -c "print(min($best_wall, $end - $start))")
  done
  echo "$best_join $best_wall"
}
echo "data strategy how rows | 1x2 join, wall | 2x1 join, wall"
for spec in "u shuffle inner" "u shuffle full" "z shuffle inner" "z am inner"; do
  set -- $spec
  one=$(best "$B" join "$1/left.parquet" "$1/right.parquet" --on key --how "$3" --strategy "$2" -w 2)
  two=$(best "$B" cluster -n 2 -- join "$1/left.parquet" "$1/right.parquet" --on key --how "$3" --strategy "$2" -w 1)
  echo "$1 $2 $3 $(field "m['output_rows']") | $one | $two"
done
echo "rate P strategy | join, wall | tracking bytes"
for rate in 0.1 0.9; do for P in 2 8 32; do for s in ib der ddr shuffle; do
  r=$(best "$B" cluster -n 2 -- join "sl/large$rate.parquet" sl/small.parquet --on key --how full --strategy $s -w 1 -p $P)
  echo "$rate $P $s | $r | $(field "sum(p['traffic']['tracking_bytes'] for p in m['per_partition'])")"
done; done; done
