//! Small-Large full outer joins: IB-Join against its DER and DDR baselines and Shuffle-Join.
//!
//! Small side: `S` rows with unique keys `0..S`. Large side: `L` rows with keys drawn uniformly
//! from the first `rate * S` small keys, so exactly that share of small rows finds a partner and
//! the rest must be padded. Prints one markdown row per (S, rate, P, strategy): the bytes moved
//! by the unmatched-row tracking step, the broadcast bytes, and the wall time.
//!
//! ```sh
//! cargo run --release -p skewjoin-measure --bin small_large -- 5000000 2
//! ```
//! (large rows, workers; defaults 5,000,000 and 2). Two more arguments narrow the run, for
//! profiling one case: the small-side row count and a strategy name (`ib`, `der`, `ddr`,
//! `shuffle`), e.g. `-- 5000000 2 100000 ib`.

use std::sync::Arc;

use skewjoin_measure::RowCount;
use skewjoin_operators::hash::hash_u64;
use skewjoin_operators::{JoinType, Side};
use skewjoin_planner::exec::{execute, JoinJob};
use skewjoin_planner::strategies::{Ddr, Der, Ib, Shuffle};
use skewjoin_planner::Resolved;

fn main() {
    let mut args = std::env::args().skip(1);
    let large_rows: u64 = args
        .next()
        .map_or(5_000_000, |a| a.parse().expect("large rows"));
    let workers: usize = args.next().map_or(2, |a| a.parse().expect("workers"));
    let only_small: Option<u64> = args.next().map(|a| a.parse().expect("small rows"));
    let only_strategy: Option<String> = args.next();
    println!(
        "large side {large_rows} rows, W = {workers}, full outer join, small side on the right"
    );
    println!();
    println!("| small rows | match rate | P | strategy | output rows | tracking bytes | P x K / 8 | broadcast bytes | wall s |");
    println!("|---:|---:|---:|---|---:|---:|---:|---:|---:|");
    for small_rows in [1_000u64, 10_000, 100_000] {
        if only_small.is_some_and(|only| only != small_rows) {
            continue;
        }
        for rate in [0.1f64, 0.5, 0.9] {
            let matched = ((small_rows as f64 * rate) as u64).max(1);
            let large: Arc<[i64]> = (0..large_rows)
                .map(|i| (hash_u64(i) % matched) as i64)
                .collect();
            let small: Arc<[i64]> = (0..small_rows as i64).collect();
            let expected = large_rows + (small_rows - matched);
            for partitions in [2usize, 8, 32] {
                for resolved in [
                    Resolved::Ib(Ib { small: Side::Right }),
                    Resolved::Der(Der { small: Side::Right }),
                    Resolved::Ddr(Ddr { small: Side::Right }),
                    Resolved::Shuffle(Shuffle),
                ] {
                    if only_strategy
                        .as_deref()
                        .is_some_and(|only| only != resolved.name())
                    {
                        continue;
                    }
                    let job = JoinJob {
                        left: Arc::clone(&large),
                        right: Arc::clone(&small),
                        left_hashes: Arc::new([]),
                        right_hashes: Arc::new([]),
                        how: JoinType::Full,
                        resolved,
                        partitions,
                        workers,
                    };
                    let output = execute(job, |_| RowCount::default()).expect("the join runs");
                    let rows: u64 = output.summaries.iter().sum();
                    assert_eq!(rows, expected, "{resolved:?} produced the wrong row count");
                    let traffic = output.loads.total_traffic();
                    println!(
                        "| {small_rows} | {rate} | {partitions} | {} | {rows} | {} | {} | {} | {:.3} |",
                        resolved.name(),
                        traffic.tracking_bytes,
                        partitions as u64 * small_rows / 8,
                        traffic.broadcast_bytes,
                        output.elapsed.as_secs_f64()
                    );
                }
            }
        }
    }
}
