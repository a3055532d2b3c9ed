//! The balance table of issue 3: same-rank Zipf inputs, s in {0.5, 0.8, 1.0, 1.2, 1.5}, at P = 8
//! and P = 32 on two workers; per-partition max/mean of input records, output rows and peak
//! records held for Shuffle-Join, AM-Join, AM-Join with Tree-Join cells, and basic Tree-Join,
//! as a markdown table.
//!
//! `cargo run --release -p skewjoin-measure --bin am_balance -- [rows] [keys]`
//! (defaults: 100000 rows per side over 10000 keys). Loads are counts, not times.

use std::sync::Arc;

use skewjoin_measure::RowCount;
use skewjoin_operators::JoinType;
use skewjoin_planner::datagen::{generate, GenSpec};
use skewjoin_planner::exec::{execute, JoinJob};
use skewjoin_planner::work_costs::WorkCosts;
use skewjoin_planner::{choose, PlanInputs, Strategy};

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<u64>().expect("a number"));
    let rows = args.next().unwrap_or(100_000);
    let keys = args.next().unwrap_or(10_000);
    println!(
        "same-rank Zipf, {rows} rows per side over {keys} keys, W = 2; max/mean per partition of input / output / peak held (the largest peak, in thousands of records)\n"
    );
    println!("| s | P | shuffle | am | tree | tree-basic |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: |");
    for skew in [0.5, 0.8, 1.0, 1.2, 1.5] {
        let data = generate(&GenSpec {
            left_rows: rows,
            right_rows: rows,
            keys,
            left_skew: skew,
            right_skew: skew,
            ..GenSpec::default()
        });
        let expected = data.counts().inner;
        for partitions in [8usize, 32] {
            let mut line = format!("| {skew} | {partitions} |");
            for strategy in [
                Strategy::Shuffle,
                Strategy::Am,
                Strategy::Tree,
                Strategy::TreeBasic,
            ] {
                let inputs = PlanInputs {
                    how: JoinType::Inner,
                    left_rows: rows,
                    right_rows: rows,
                    workers: 2,
                    broadcast_limit: 0,
                    costs: WorkCosts::THREADS,
                };
                let job = JoinJob {
                    left: data.left.key.clone().into(),
                    right: data.right.key.clone().into(),
                    left_hashes: Arc::new([]),
                    right_hashes: Arc::new([]),
                    how: JoinType::Inner,
                    resolved: choose(strategy, &inputs)
                        .expect("every strategy computes inner")
                        .resolved,
                    partitions,
                    workers: 2,
                };
                let output = execute(job, |_| RowCount::default()).expect("the join runs");
                assert_eq!(output.summaries.iter().sum::<u64>(), expected, "{strategy}");
                let max_peak = output
                    .loads
                    .per_partition
                    .iter()
                    .map(|p| p.peak_records)
                    .max()
                    .unwrap_or(0);
                line += &format!(
                    " {:.2} / {:.2} / {:.2} ({:.0}k) |",
                    output.loads.input_imbalance(),
                    output.loads.output_imbalance(),
                    output.loads.peak_imbalance(),
                    max_peak as f64 / 1000.0
                );
            }
            println!("{line}");
        }
    }
}
