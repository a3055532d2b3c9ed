//! Runs a planned join on ONE timely worker that hosts all P partitions, stepped by hand.
//!
//! This is the executor of the browser build: `wasm32-unknown-unknown` has neither threads nor a
//! clock (`std::time::Instant::now` panics there, and `timely::execute_directly` calls it), so the
//! worker is built directly over timely's single-thread allocator with no timer, and stepped with
//! a zero park duration, which never consults a clock. It builds the same dataflow as
//! [`crate::exec::execute`] (via [`build_join`](crate::compose::build_join)) with `Partitioning::new(P, 1)`; because routing
//! decides partitions and load is counted per partition, the per-partition figures are the ones a
//! native run with any worker count reports on the same data.
//!
//! ```
//! use std::sync::Arc;
//! use skewjoin_operators::JoinType;
//! use skewjoin_planner::exec::{CollectSink, JoinJob};
//! use skewjoin_planner::exec_local::execute_local;
//! use skewjoin_planner::strategies::Shuffle;
//! use skewjoin_planner::Resolved;
//!
//! let job = JoinJob {
//!     left: Arc::from(vec![1i64, 2, 2]),
//!     right: Arc::from(vec![2i64, 3]),
//!     left_hashes: Arc::from(Vec::new()),
//!     right_hashes: Arc::from(Vec::new()),
//!     how: JoinType::Inner,
//!     resolved: Resolved::Shuffle(Shuffle),
//!     partitions: 4,
//!     workers: 1,
//! };
//! let output = execute_local(&job, CollectSink::default()).unwrap();
//! assert_eq!(output.summary.len(), 2);
//! assert_eq!(output.loads.per_partition.len(), 4);
//! assert_eq!(output.loads.total_output(), 2);
//! ```

use skewjoin_operators::{JoinKey, LoadReport, Partitioning};
use timely::communication::allocator::{Allocator, Thread};
use timely::worker::Worker;
use timely::WorkerConfig;

use crate::error::PlanError;
use crate::exec::{row_ref, run_worker, JoinJob, MemoryFeed, PairSink, RowHomes};
use crate::report::StrategyReport;

/// What a single-worker run produced.
#[derive(Clone, Debug)]
pub struct LocalOutput<S> {
    /// Per-partition load, all P partitions.
    pub loads: LoadReport,
    /// The sink's summary.
    pub summary: S,
    /// What the strategy decided: AM-Join's classes, Tree-Join's rounds, VPRP's ranges.
    pub report: StrategyReport,
}

/// Runs `job` on one worker hosting all `job.partitions` partitions, feeding every output row to
/// `sink`. `job.workers` is not used: there is exactly one worker.
pub fn execute_local<K, S>(job: &JoinJob<K>, sink: S) -> Result<LocalOutput<S::Summary>, PlanError>
where
    K: JoinKey,
    S: PairSink,
{
    job.check()?;

    // No timer: `Some(Instant::now())` is what `execute_directly` passes, and it panics in the
    // browser. Without one, timely keeps no logging registry and schedules no delayed activations,
    // neither of which the join uses.
    let mut worker = Worker::new(
        WorkerConfig::default(),
        Allocator::Thread(Thread::default()),
        None,
    );
    let partitioning = Partitioning::new(job.partitions, 1);
    let homes = RowHomes::all(&partitioning);
    let totals = (job.left.len() as u64, job.right.len() as u64);
    let mut rows = MemoryFeed::new(job, &partitioning, &homes);
    let output = run_worker(
        &mut worker,
        job.into(),
        partitioning,
        &homes,
        totals,
        &mut rows,
        &row_ref,
        sink,
    )
    .map_err(PlanError::from_worker)?;
    let mut loads = LoadReport::new(job.partitions);
    loads.add(&output.loads);
    Ok(LocalOutput {
        loads,
        summary: output.summary,
        report: output.report,
    })
}

#[cfg(test)]
mod tests {
    use skewjoin_operators::{JoinType, Key};

    use super::*;
    use crate::choose::choose;
    use crate::count_sink::{CountSink, Counted};
    use crate::datagen::{generate, GenSpec};
    use crate::exec::execute;
    use crate::row_hash::table_row_hashes;
    use crate::strategy::{PlanInputs, Strategy};
    use crate::work_costs::WorkCosts;

    /// The job of running `strategy` on the data of `spec`, or `None` when the strategy cannot
    /// compute this join type.
    fn job(
        spec: &GenSpec,
        how: JoinType,
        strategy: Strategy,
        partitions: usize,
    ) -> Option<JoinJob<Key>> {
        let pair = generate(spec);
        let resolved = choose(
            strategy,
            &PlanInputs {
                how,
                left_rows: spec.left_rows,
                right_rows: spec.right_rows,
                workers: 2,
                // Broadcast may copy any side; AM-Join must not turn into IB-Join on these
                // Small-Large-looking inputs, or its own plan would go untested here.
                broadcast_limit: if strategy == Strategy::Am {
                    0
                } else {
                    u64::MAX
                },
                costs: WorkCosts::THREADS,
            },
        )
        .ok()?
        .resolved;
        Some(JoinJob {
            left: pair.left.key.iter().map(|&k| Key::Int(k)).collect(),
            right: pair.right.key.iter().map(|&k| Key::Int(k)).collect(),
            left_hashes: table_row_hashes(&pair.left).into(),
            right_hashes: table_row_hashes(&pair.right).into(),
            how,
            resolved,
            partitions,
            workers: 2,
        })
    }

    /// The browser's executor and a native two-thread run agree partition by partition, and on
    /// the output's row count and checksum.
    #[test]
    fn one_worker_reports_what_two_workers_report() {
        let skewed = GenSpec {
            left_rows: 3000,
            right_rows: 2000,
            keys: 300,
            left_skew: 1.1,
            right_skew: 0.7,
            noise: 0.1,
            seed: 7,
            ..GenSpec::default()
        };
        let independent = GenSpec {
            independent: true,
            right_rows: 500,
            seed: 11,
            ..skewed.clone()
        };
        let mut compared = 0;
        for spec in [&skewed, &independent] {
            for how in [JoinType::Inner, JoinType::Left, JoinType::RightAnti] {
                // Strategies whose placement depends on the worker that reads a record are left
                // out: VPRP samples per worker (a stable hash of worker, record index and key) and
                // AM-Join picks grid rows and columns round-robin per worker. Their output is the
                // same on any W; their per-partition figures differ slightly with W.
                for strategy in Strategy::CONCRETE.into_iter().filter(|s| {
                    !matches!(
                        s,
                        Strategy::Vprp | Strategy::VprpT | Strategy::Am | Strategy::Tree
                    )
                }) {
                    for partitions in [1, 5, 8] {
                        let Some(job) = job(spec, how, strategy, partitions) else {
                            continue;
                        };
                        let local = execute_local(&job, CountSink::default()).unwrap();
                        let native = execute(job.clone(), |_| CountSink::default()).unwrap();
                        let rows: u64 = native.summaries.iter().map(|s| s.rows).sum();
                        let checksum = native
                            .summaries
                            .iter()
                            .fold(0u64, |sum, s| sum.wrapping_add(s.checksum));
                        let what = format!("{how} {strategy} P={partitions}");
                        assert_eq!(local.loads, native.loads, "{what}");
                        assert_eq!(local.summary.rows, rows, "{what}");
                        assert_eq!(local.summary.checksum, checksum, "{what}");
                        assert_eq!(local.loads.per_partition.len(), partitions, "{what}");
                        assert_eq!(local.loads.total_output(), rows, "{what}");
                        compared += 1;
                    }
                }
            }
        }
        // Shuffle and broadcast compute all three join types.
        assert!(compared >= 2 * 3 * 2 * 3, "{compared}");
    }

    /// Skewed input really is unbalanced under a shuffle, so the comparison above is not between
    /// two all-equal reports.
    #[test]
    fn shuffle_of_skewed_keys_is_unbalanced() {
        let spec = GenSpec {
            left_rows: 5000,
            right_rows: 5000,
            keys: 1000,
            left_skew: 1.3,
            right_skew: 1.3,
            ..GenSpec::default()
        };
        let local = execute_local(
            &job(&spec, JoinType::Inner, Strategy::Shuffle, 8).unwrap(),
            CountSink::default(),
        )
        .unwrap();
        assert!(local.loads.output_imbalance() > 2.0, "{:?}", local.loads);
    }

    #[test]
    fn empty_inputs_report_every_partition() {
        let spec = GenSpec {
            left_rows: 0,
            right_rows: 0,
            ..GenSpec::default()
        };
        for how in [JoinType::Inner, JoinType::Full] {
            for strategy in Strategy::CONCRETE {
                let Some(job) = job(&spec, how, strategy, 3) else {
                    continue;
                };
                let local = execute_local(&job, CountSink::default()).unwrap();
                assert_eq!(local.loads, LoadReport::new(3), "{how} {strategy}");
                assert_eq!(local.summary, Counted::default());
            }
        }
    }
}
