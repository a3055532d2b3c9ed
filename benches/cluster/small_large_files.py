"""Writes the Small-Large files of BENCHMARKS.md's cluster table into DIR (default sl/):
small.parquet, 10^5 rows with unique keys 0..10^5; large0.1.parquet and large0.9.parquet,
5 x 10^6 rows with keys uniform over the first rate x 10^5 small keys. Needs numpy and pyarrow
(benches/peers/requirements.txt)."""
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

out = sys.argv[1] if len(sys.argv) > 1 else "sl"
SMALL, LARGE = 100_000, 5_000_000
rng = np.random.default_rng(7)
pq.write_table(
    pa.table({"key": np.arange(SMALL, dtype=np.int64), "small_v": rng.integers(0, 1 << 40, SMALL)}),
    f"{out}/small.parquet",
    row_group_size=65536,
)
for rate in (0.1, 0.9):
    matched = max(1, int(SMALL * rate))
    pq.write_table(
        pa.table({"key": rng.integers(0, matched, LARGE).astype(np.int64),
                  "large_v": rng.integers(0, 1 << 40, LARGE)}),
        f"{out}/large{rate}.parquet",
        row_group_size=65536,
    )
