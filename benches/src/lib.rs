//! Micro-benchmarks of skewjoin (criterion): run `cargo bench -p skewjoin-benches`. The
//! benchmarks are in `benches/joins.rs`; this library holds the inputs they share.

/// `rows` keys drawn from `0..keys` by a fixed multiplicative sequence: uniform enough, the same
/// on every run and machine.
pub fn uniform_keys(rows: usize, keys: u64) -> Vec<(u64, u32)> {
    (0..rows as u64)
        .map(|i| {
            (
                i.wrapping_mul(0x9e37_79b9_7f4a_7c15) % keys.max(1),
                i as u32,
            )
        })
        .collect()
}
