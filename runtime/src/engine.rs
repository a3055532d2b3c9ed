//! Runs one join over two loaded tables: plans it, executes it on worker threads, and reduces
//! the output to a row count and checksum, writing it to a file when asked.
//!
//! The checksum of a join is the wrapping sum, over output rows, of
//! `pair_checksum(left_row_hash, right_row_hash)` (see `skewjoin_operators::hash`), where a row
//! hash is the stable hash of all of that input row's column values (see [`crate::io::row_hashes`]).
//! It does not depend on the order of rows, the strategy, or the worker and partition counts, so
//! two runs agree exactly when they produce the same multiset of (left row, right row) pairs.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use skewjoin_operators::hash::pair_checksum;
use skewjoin_operators::{JoinType, Key, LoadReport};
use skewjoin_planner::exec::{execute, JoinJob, PairSink, RowRef};
use skewjoin_planner::report::StrategyReport;
use skewjoin_planner::Resolved;

use crate::error::{Error, Result};
use crate::io::{take_output, OutputWriter};

/// One side of a join, loaded.
#[derive(Clone, Debug)]
pub struct SideData {
    /// Where it came from, for messages.
    pub name: String,
    /// Its rows (all columns).
    pub batch: RecordBatch,
    /// The join key of each row.
    pub keys: Arc<[Key]>,
    /// The stable hash of each row.
    pub hashes: Arc<[u64]>,
}

/// Where output rows are written, if anywhere.
pub struct OutputTarget {
    /// The file being written (a temporary until finished).
    pub writer: OutputWriter,
    /// Its schema.
    pub schema: SchemaRef,
    /// The final path, for messages.
    pub path: PathBuf,
}

/// What to run: the join type, the strategy, and the partition and worker counts.
#[derive(Clone, Copy, Debug)]
pub struct JoinPlan {
    /// The join type.
    pub how: JoinType,
    /// The strategy, resolved.
    pub resolved: Resolved,
    /// P.
    pub partitions: usize,
    /// W.
    pub workers: usize,
}

/// What a join run did.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// Output rows.
    pub output_rows: u64,
    /// The order-independent checksum of the output.
    pub checksum: u64,
    /// Per-partition load.
    pub loads: LoadReport,
    /// Wall time of the join itself (not reading inputs).
    pub elapsed: Duration,
    /// The strategy's decisions: AM-Join's classes, Tree-Join's rounds, VPRP's ranges.
    pub strategy_report: StrategyReport,
}

/// Output rows gathered per worker before they are turned into an Arrow batch and written.
const WRITE_BATCH_ROWS: usize = 64 * 1024;

/// The padding marker for [`take_output`].
const PAD: u32 = u32::MAX;

struct Shared {
    how: JoinType,
    left: SideData,
    right: SideData,
    output: Option<(Mutex<OutputWriter>, SchemaRef)>,
}

/// One worker's sink: counts, checksums and (optionally) writes output rows.
struct RuntimeSink {
    shared: Arc<Shared>,
    rows: u64,
    checksum: u64,
    left_rows: Vec<u32>,
    right_rows: Vec<u32>,
    /// Where live progress is counted, in steps of `PROGRESS_EVERY` rows.
    progress: Option<Arc<AtomicU64>>,
    /// Whether rows are still being written (an output is set and no write has failed).
    writing: bool,
    error: Option<Error>,
}

impl RuntimeSink {
    fn flush(&mut self) {
        if self.left_rows.is_empty() || self.error.is_some() {
            return;
        }
        let Some((writer, schema)) = &self.shared.output else {
            return;
        };
        let result = take_output(
            schema,
            self.shared.how,
            &self.shared.left.batch,
            &self.shared.right.batch,
            &self.left_rows,
            &self.right_rows,
        )
        .and_then(|batch| {
            writer
                .lock()
                .map_err(|_| Error::Internal("an output writer panicked".into()))?
                .write(&batch)
        });
        if let Err(error) = result {
            self.error = Some(error);
            self.writing = false;
        }
        self.left_rows.clear();
        self.right_rows.clear();
    }
}

impl PairSink for RuntimeSink {
    type Summary = (u64, u64, Option<Error>);

    #[inline]
    fn emit(&mut self, left: Option<&RowRef>, right: Option<&RowRef>) {
        self.rows += 1;
        if self.rows.is_multiple_of(PROGRESS_EVERY) {
            if let Some(counter) = &self.progress {
                counter.fetch_add(PROGRESS_EVERY, Ordering::Relaxed);
            }
        }
        self.checksum = self
            .checksum
            .wrapping_add(pair_checksum(left.map(|row| row.1), right.map(|row| row.1)));
        if self.writing {
            self.left_rows.push(left.map_or(PAD, |row| row.0));
            self.right_rows.push(right.map_or(PAD, |row| row.0));
            if self.left_rows.len() >= WRITE_BATCH_ROWS {
                self.flush();
            }
        }
    }

    fn finish(mut self) -> std::result::Result<Self::Summary, String> {
        self.flush();
        Ok((self.rows, self.checksum, self.error))
    }
}

/// Output rows a worker produces between updates of the shared progress counter.
const PROGRESS_EVERY: u64 = 1 << 20;

/// Runs the join. With an output target, the file is complete and in place when this returns
/// `Ok`, and absent when it returns an error.
pub fn run(
    left: SideData,
    right: SideData,
    plan: JoinPlan,
    output: Option<OutputTarget>,
    progress: Option<Arc<AtomicU64>>,
) -> Result<RunReport> {
    let JoinPlan {
        how,
        resolved,
        partitions,
        workers,
    } = plan;
    let job = JoinJob {
        left: Arc::clone(&left.keys),
        right: Arc::clone(&right.keys),
        left_hashes: Arc::clone(&left.hashes),
        right_hashes: Arc::clone(&right.hashes),
        how,
        resolved,
        partitions,
        workers,
    };
    let output_path = output.as_ref().map(|target| target.path.clone());
    let shared = Arc::new(Shared {
        how,
        left,
        right,
        output: output.map(|target| (Mutex::new(target.writer), target.schema)),
    });
    let sink_shared = Arc::clone(&shared);
    let writing = shared.output.is_some();
    let result = execute(job, move |_| RuntimeSink {
        writing,
        progress: progress.clone(),
        shared: Arc::clone(&sink_shared),
        rows: 0,
        checksum: 0,
        left_rows: Vec::new(),
        right_rows: Vec::new(),
        error: None,
    })
    .map_err(|message| Error::Internal(format!("the join failed: {message}")))?;

    let mut output_rows = 0u64;
    let mut checksum = 0u64;
    for (rows, sum, error) in result.summaries {
        if let Some(error) = error {
            return Err(error);
        }
        output_rows += rows;
        checksum = checksum.wrapping_add(sum);
    }
    let shared = Arc::try_unwrap(shared)
        .map_err(|_| Error::Internal("a worker still holds the output".into()))?;
    if let Some((writer, _)) = shared.output {
        let writer = writer
            .into_inner()
            .map_err(|_| Error::Internal("an output writer panicked".into()))?;
        writer
            .finish()
            .map_err(|error| match (error, &output_path) {
                (Error::Io(message), Some(path)) if !message.contains(&*path.to_string_lossy()) => {
                    Error::Io(format!("{}: {message}", path.display()))
                }
                (error, _) => error,
            })?;
    }
    Ok(RunReport {
        output_rows,
        checksum,
        loads: result.loads,
        elapsed: result.elapsed,
        strategy_report: result.report,
    })
}
