//! Runs a planned join whose rows are read while it runs: a [`RowSource`] sends each side's rows
//! in order, a bounded batch at a time, so no input is held whole before the join starts. Only
//! the row counts must be known beforehand (they fix each row's home partition).
//!
//! One worker reads each side (worker 0 the left, worker 1 the right when there are two or more),
//! so the two inputs are decoded in parallel and every other worker joins from the start. A row's
//! home partition is the one [`execute`](crate::exec::execute) gives it, by row number, so loads
//! and outputs are those of an in-memory run. Rows go home through an exchange where the
//! strategy needs them there before it routes them: every row for IB-Join and its baselines,
//! which probe in place, and NULL keys for the others, which spread NULLs over the partitions of
//! the worker that has them.
//!
//! In a cluster, [`execute_cluster_stream`](crate::exec_cluster::execute_cluster_stream) runs the
//! same feed on each process over its share of the rows.
//!
//! ```
//! use std::sync::Arc;
//! use skewjoin_operators::{JoinType, Key, Side};
//! use skewjoin_planner::exec::CollectSink;
//! use skewjoin_planner::exec_stream::{execute_stream, RowSource, StreamJob};
//! use skewjoin_planner::strategy::Resolved;
//!
//! /// Rows made up on the fly: left keys 0..1000, right keys 0..1000 step 2.
//! struct Counting;
//! impl RowSource<Key> for Counting {
//!     fn read(&self, side: Side, _keys_only: bool, send: &mut dyn FnMut(Key, u64)) -> Result<(), String> {
//!         let step = if side == Side::Left { 1 } else { 2 };
//!         for key in (0..1000).step_by(step) {
//!             send(Key::Int(key), 0);
//!         }
//!         Ok(())
//!     }
//! }
//! let job = StreamJob {
//!     left_rows: 1000,
//!     right_rows: 500,
//!     how: JoinType::Inner,
//!     resolved: Resolved::Shuffle,
//!     partitions: 4,
//!     workers: 2,
//! };
//! let output = execute_stream(job, Arc::new(Counting), |_| CollectSink::default()).unwrap();
//! let rows: usize = output.summaries.iter().map(Vec::len).sum();
//! assert_eq!(rows, 500);
//! ```

use std::sync::Arc;
use std::time::Instant;

use skewjoin_operators::{JoinKey, JoinType, Partitioning, Side};
use timely::worker::Worker;

use crate::exec::{
    gather, row_ref, run_worker, Feed, JobKind, JobOutput, PairSink, RowHomes, FEED_CHUNK,
};
use crate::strategy::Resolved;

/// Where a streaming job's rows come from.
pub trait RowSource<K>: Send + Sync + 'static {
    /// Sends every row of `side`, in order, as `send(key, hash)` (the hash goes to the output's
    /// checksum). With `keys_only` only the keys are needed, for the key statistics, and the hash
    /// may be zero. A failed read returns the error and sends nothing more.
    fn read(&self, side: Side, keys_only: bool, send: &mut dyn FnMut(K, u64))
        -> Result<(), String>;
}

/// A join whose rows a [`RowSource`] reads, fully planned.
#[derive(Clone, Copy, Debug)]
pub struct StreamJob {
    /// Rows of the left input: exactly what the source will send.
    pub left_rows: u64,
    /// Rows of the right input.
    pub right_rows: u64,
    /// The join type.
    pub how: JoinType,
    /// The strategy.
    pub resolved: Resolved,
    /// P.
    pub partitions: usize,
    /// W, the number of worker threads.
    pub workers: usize,
}

/// The workers that read the left and the right side, out of `threads` workers from
/// `first_worker` on: the first reads the left, the second (if any) the right.
pub(crate) fn readers(first_worker: usize, threads: usize) -> (usize, usize) {
    (first_worker, first_worker + 1 % threads.max(1))
}

/// Runs `job` on `job.workers` threads, reading its rows from `source` while it runs and giving
/// each worker the sink `make_sink(worker)`. A source that sends a different number of rows than
/// the job says is an error: the input changed between planning and joining.
pub fn execute_stream<K, R, S, M>(
    job: StreamJob,
    source: Arc<R>,
    make_sink: M,
) -> Result<JobOutput<S::Summary>, String>
where
    K: JoinKey,
    R: RowSource<K>,
    S: PairSink,
    M: Fn(usize) -> S + Send + Sync + 'static,
{
    if job.workers == 0 {
        return Err("the worker count must be at least 1".into());
    }
    if job.partitions == 0 {
        return Err("the partition count must be at least 1".into());
    }
    if job.left_rows >= u64::from(u32::MAX) || job.right_rows >= u64::from(u32::MAX) {
        return Err("an input has 2^32 rows or more; split it into several files".into());
    }
    let start = Instant::now();
    let guards = timely::execute(timely::Config::process(job.workers), move |worker| {
        let partitioning = Partitioning::new(job.partitions, worker.peers());
        let homes = RowHomes::all(&partitioning);
        let totals = (job.left_rows, job.right_rows);
        let mut rows = StreamFeed {
            source: Arc::clone(&source),
            local: totals,
            readers: readers(0, job.workers),
        };
        let kind = JobKind {
            how: job.how,
            resolved: job.resolved,
        };
        let sink = make_sink(worker.index());
        run_worker(
            worker,
            kind,
            partitioning,
            &homes,
            totals,
            &mut rows,
            &row_ref,
            sink,
        )
    })?;
    gather(guards.join(), job.partitions, start)
}

/// A worker's rows of a streaming job: all of a side's rows (this process's, in a cluster) if it
/// reads that side, else none.
pub(crate) struct StreamFeed<R: ?Sized> {
    pub(crate) source: Arc<R>,
    /// The rows of each side the source sends.
    pub(crate) local: (u64, u64),
    /// The workers that read the left and the right side.
    pub(crate) readers: (usize, usize),
}

impl<K: JoinKey, R: RowSource<K> + ?Sized> Feed<K> for StreamFeed<R> {
    fn local_rows(&self) -> (u64, u64) {
        self.local
    }

    fn fed_at_home(&self) -> bool {
        false
    }

    fn feed(
        &mut self,
        worker: &mut Worker,
        keys_only: bool,
        send: &mut dyn FnMut(K, u32, u64, Side),
    ) -> Result<(), String> {
        for (side, expected, reader) in [
            (Side::Left, self.local.0, self.readers.0),
            (Side::Right, self.local.1, self.readers.1),
        ] {
            if reader != worker.index() {
                continue;
            }
            let mut row = 0u64;
            self.source.read(side, keys_only, &mut |key, hash| {
                // More rows than planned: their homes are unknown, so they are counted, not sent.
                if row < expected {
                    send(key, row as u32, hash, side);
                    if (row + 1).is_multiple_of(FEED_CHUNK as u64) {
                        worker.step();
                    }
                }
                row += 1;
            })?;
            if row != expected {
                return Err(format!(
                    "the {side} input had {expected} rows when the join was planned but {row} \
                     when it was read: it changed while skewjoin was reading it; run again on a \
                     file that is not being written"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::am_join::AmParams;
    use crate::exec::{execute, CollectSink, JoinJob};
    use crate::strategy::Resolved;
    use skewjoin_operators::tree_join::TreeParams;
    use skewjoin_operators::{Key, LoadReport};

    /// Rows from memory, read a side at a time as a file would be.
    struct Memory {
        left: Vec<Key>,
        right: Vec<Key>,
        /// Rows to add to the right side on its read for the join: a file that grew.
        extra: usize,
    }

    impl RowSource<Key> for Memory {
        fn read(
            &self,
            side: Side,
            keys_only: bool,
            send: &mut dyn FnMut(Key, u64),
        ) -> Result<(), String> {
            let keys = match side {
                Side::Left => &self.left,
                Side::Right => &self.right,
            };
            for (row, key) in keys.iter().enumerate() {
                send(key.clone(), if keys_only { 0 } else { row as u64 + 1 });
            }
            if side == Side::Right && !keys_only {
                for _ in 0..self.extra {
                    send(Key::Int(1), 0);
                }
            }
            Ok(())
        }
    }

    fn skewed(rows: usize, seed: u64) -> Vec<Key> {
        (0..rows)
            .map(|row| match (row as u64 * 2654435761 + seed) % 10 {
                0..=4 => Key::Int(7),
                5 => Key::Null,
                other => Key::Int(other as i64 * 1000 + row as i64 % 50),
            })
            .collect()
    }

    fn sorted(mut rows: Vec<(Option<u32>, Option<u32>)>) -> Vec<(Option<u32>, Option<u32>)> {
        rows.sort_unstable();
        rows
    }

    #[test]
    fn streaming_gives_the_rows_and_loads_of_an_in_memory_run() {
        let (left, right) = (skewed(3000, 1), skewed(2000, 5));
        let strategies = [
            Resolved::Shuffle,
            Resolved::Am {
                params: AmParams::default(),
            },
            Resolved::Tree {
                params: AmParams::default(),
                tree: TreeParams::default(),
            },
            Resolved::Ib { small: Side::Right },
            Resolved::Der { small: Side::Right },
            Resolved::Broadcast { side: Side::Right },
            Resolved::Vprp(Default::default()),
        ];
        for resolved in strategies {
            for how in [JoinType::Inner, JoinType::Full, JoinType::LeftAnti] {
                for workers in [1, 2, 3] {
                    let partitions = workers * 2;
                    let memory = JoinJob {
                        left: left.clone().into(),
                        right: right.clone().into(),
                        left_hashes: (1..=left.len() as u64).collect(),
                        right_hashes: (1..=right.len() as u64).collect(),
                        how,
                        resolved,
                        partitions,
                        workers,
                    };
                    let expected = execute(memory, |_| CollectSink::default()).unwrap();
                    let job = StreamJob {
                        left_rows: left.len() as u64,
                        right_rows: right.len() as u64,
                        how,
                        resolved,
                        partitions,
                        workers,
                    };
                    let source = Arc::new(Memory {
                        left: left.clone(),
                        right: right.clone(),
                        extra: 0,
                    });
                    let case = format!("{} {how:?} W={workers}", resolved.name());
                    let streamed = execute_stream(job, source, |_| CollectSink::default()).unwrap();
                    assert_eq!(
                        sorted(streamed.summaries.into_iter().flatten().collect()),
                        sorted(expected.summaries.into_iter().flatten().collect()),
                        "{case}"
                    );
                    // Peaks depend on arrival order; what each partition received and produced
                    // does not, except with VPRP, whose sample is drawn on the workers that feed
                    // the rows, so only its totals are the same.
                    let counts = |loads: &LoadReport| match resolved {
                        Resolved::Vprp(_) => vec![(loads.total_input(), loads.total_output())],
                        _ => loads
                            .per_partition
                            .iter()
                            .map(|load| (load.input_records, load.output_rows))
                            .collect(),
                    };
                    assert_eq!(counts(&streamed.loads), counts(&expected.loads), "{case}");
                }
            }
        }
    }

    #[test]
    fn a_source_that_changed_since_planning_is_an_error() {
        let job = StreamJob {
            left_rows: 10,
            right_rows: 10,
            how: JoinType::Inner,
            resolved: Resolved::Shuffle,
            partitions: 2,
            workers: 2,
        };
        let keys: Vec<Key> = (0..10).map(Key::Int).collect();
        let source = Arc::new(Memory {
            left: keys.clone(),
            right: keys,
            extra: 3,
        });
        let error = execute_stream(job, source, |_| CollectSink::default()).unwrap_err();
        assert!(error.contains("right input had 10 rows"), "{error}");
        assert!(error.contains("but 13"), "{error}");
    }
}
