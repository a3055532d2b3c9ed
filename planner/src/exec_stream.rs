//! Runs a planned join whose rows are read while it runs: a [`RowSource`] sends each side's rows
//! in order, a bounded batch at a time, so no input is held whole before the join starts. Only
//! the row counts must be known beforehand (they fix each row's home partition).
//!
//! A side the source can cut into parts ([`RowSource::cuts`]: a Parquet file's row groups, an
//! Arrow IPC file's record batches) is read by every worker at once, each its own run of parts,
//! so a large side is decoded on all cores. A side that cannot be cut is read by one worker
//! (worker 0 the left, worker 1 the right when there are two or more), so the two inputs are
//! still decoded in parallel. A row's home partition is the one
//! [`execute`](crate::exec::execute) gives it, by row number, so loads and outputs are those of
//! an in-memory run. A row read by a worker that does not host its home goes there through an
//! exchange where the strategy needs it there before it routes it: every such row for IB-Join
//! and its baselines, which probe in place, and those with NULL keys for VPRP and the basic
//! Tree-Join, which spread NULLs over the partitions of the worker that has them.
//!
//! In a cluster, [`execute_cluster_stream`](crate::exec_cluster::execute_cluster_stream) runs the
//! same feed on each process over its share of the rows.
//!
//! ```
//! use std::ops::Range;
//! use std::sync::Arc;
//! use skewjoin_operators::{JoinType, Key, Side};
//! use skewjoin_planner::exec::CollectSink;
//! use skewjoin_planner::exec_stream::{execute_stream, RowSource, StreamJob};
//! use skewjoin_planner::strategies::Shuffle;
//! use skewjoin_planner::strategy::Resolved;
//!
//! /// Rows made up on the fly: left keys 0..1000, right keys 0..1000 step 2.
//! struct Counting;
//! impl RowSource<Key> for Counting {
//!     fn read(
//!         &self,
//!         side: Side,
//!         _keys_only: bool,
//!         _rows: Range<u64>, // always every row: this source has no cuts
//!         send: &mut dyn FnMut(Key, u64),
//!     ) -> Result<(), String> {
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
//!     resolved: Resolved::Shuffle(Shuffle),
//!     partitions: 4,
//!     workers: 2,
//! };
//! let output = execute_stream(job, Arc::new(Counting), |_| CollectSink::default()).unwrap();
//! let rows: usize = output.summaries.iter().map(Vec::len).sum();
//! assert_eq!(rows, 500);
//! ```

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use skewjoin_operators::{JoinKey, JoinType, Partitioning, Side};
use timely::worker::Worker;

use crate::error::PlanError;
use crate::exec::{
    gather, row_ref, run_worker, Feed, JobKind, JobOutput, PairSink, RowHomes, FEED_CHUNK,
};
use crate::strategy::Resolved;
use crate::usage_err;

/// Where a streaming job's rows come from.
pub trait RowSource<K>: Send + Sync + 'static {
    /// Sends the rows `rows` of `side` (every row, unless the side has [`cuts`](Self::cuts):
    /// then the rows from one cut, or 0, to the next, or the end), in order, as `send(key,
    /// hash)` (the hash goes to the output's checksum). With `keys_only` only the keys are
    /// needed, for the key statistics, and the hash may be zero. A failed read returns the error
    /// and sends nothing more.
    fn read(
        &self,
        side: Side,
        keys_only: bool,
        rows: Range<u64>,
        send: &mut dyn FnMut(K, u64),
    ) -> Result<(), String>;

    /// The row numbers at which `side` may be cut into parts that are read apart, by several
    /// workers at once: ascending, each above 0 and below the side's row count. None (the
    /// default) has the side read whole, by one worker.
    fn cuts(&self, _side: Side) -> Vec<u64> {
        Vec::new()
    }
}

/// The rows of each of `parts` parts of a side of `rows` rows, cut only at `cuts` (ascending,
/// within `1..rows`), each part as near `rows / parts` rows as the cuts allow; a part may be
/// empty. A side with cuts is read so by the workers of a process, part `i` by its `i`th
/// worker, which is where a caller that keeps the batches read finds them.
pub fn split_at_cuts(cuts: &[u64], rows: u64, parts: usize) -> Vec<Range<u64>> {
    let mut bounds = vec![0u64];
    for part in 1..parts {
        let target = (rows as u128 * part as u128 / parts as u128) as u64;
        // The cut nearest the target, not behind the last bound.
        let after = cuts.partition_point(|&cut| cut < target);
        let nearest = [after.checked_sub(1), Some(after)]
            .into_iter()
            .flatten()
            .filter_map(|index| cuts.get(index).copied())
            .min_by_key(|cut| cut.abs_diff(target))
            .unwrap_or(0);
        bounds.push(nearest.max(*bounds.last().unwrap_or(&0)));
    }
    bounds.push(rows);
    bounds.windows(2).map(|pair| pair[0]..pair[1]).collect()
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
) -> Result<JobOutput<S::Summary>, PlanError>
where
    K: JoinKey,
    R: RowSource<K>,
    S: PairSink,
    M: Fn(usize) -> S + Send + Sync + 'static,
{
    if job.workers == 0 {
        return usage_err!("the worker count must be at least 1");
    }
    if job.partitions == 0 {
        return usage_err!("the partition count must be at least 1");
    }
    if job.left_rows >= u64::from(u32::MAX) || job.right_rows >= u64::from(u32::MAX) {
        return usage_err!("an input has 2^32 - 1 rows or more; split it into several files");
    }
    let start = Instant::now();
    let guards = timely::execute(timely::Config::process(job.workers), move |worker| {
        let partitioning = Partitioning::new(job.partitions, worker.peers());
        let homes = RowHomes::all(&partitioning);
        let totals = (job.left_rows, job.right_rows);
        let mut rows = StreamFeed {
            source: Arc::clone(&source),
            local: totals,
            workers: 0..job.workers,
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

/// A worker's rows of a streaming job (of this process's rows, in a cluster): its run of parts
/// of each side that can be cut, and all of a side that cannot if it reads that side.
pub(crate) struct StreamFeed<R: ?Sized> {
    pub(crate) source: Arc<R>,
    /// The rows of each side the source sends.
    pub(crate) local: (u64, u64),
    /// This process's workers, which share the reading.
    pub(crate) workers: Range<usize>,
}

impl<R: ?Sized> StreamFeed<R> {
    /// The rows of `side` (with `rows` rows and these cuts) that `worker` reads, if any: a side
    /// that cannot be cut is read by its reader even when it was empty when planned, so that
    /// rows added since are found.
    fn rows_of(&self, side: Side, rows: u64, cuts: &[u64], worker: usize) -> Option<Range<u64>> {
        let first = self.workers.start;
        let threads = self.workers.len();
        if cuts.is_empty() {
            let (left_reader, right_reader) = readers(first, threads);
            let reader = match side {
                Side::Left => left_reader,
                Side::Right => right_reader,
            };
            return (reader == worker).then_some(0..rows);
        }
        split_at_cuts(cuts, rows, threads.max(1))
            .into_iter()
            .nth(worker - first)
            .filter(|part| !part.is_empty())
    }
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
        side: Side,
        send: &mut dyn FnMut(K, u32, u64),
    ) -> Result<(), String> {
        let total = match side {
            Side::Left => self.local.0,
            Side::Right => self.local.1,
        };
        {
            let cuts = self.source.cuts(side);
            let Some(rows) = self.rows_of(side, total, &cuts, worker.index()) else {
                return Ok(());
            };
            let whole = rows == (0..total);
            let mut row = rows.start;
            self.source
                .read(side, keys_only, rows.clone(), &mut |key, hash| {
                    // More rows than planned: their homes are unknown, so they are counted, not
                    // sent.
                    if row < rows.end {
                        send(key, row as u32, hash);
                        if (row + 1).is_multiple_of(FEED_CHUNK as u64) {
                            worker.step();
                        }
                    }
                    row += 1;
                })?;
            if row != rows.end {
                let read = row - rows.start;
                let planned = rows.end - rows.start;
                return Err(if whole {
                    format!(
                        "the {side} input had {planned} rows when the join was planned but {read} \
                         when it was read: it changed while skewjoin was reading it; run again on \
                         a file that is not being written"
                    )
                } else {
                    format!(
                        "rows {} to {} of the {side} input were {planned} rows when the join was \
                         planned but {read} when they were read: the input changed while \
                         skewjoin was reading it; run again on a file that is not being written",
                        rows.start, rows.end
                    )
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
