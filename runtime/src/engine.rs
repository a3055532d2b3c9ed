//! Runs one join on worker threads, over two loaded tables ([`run`]) or streaming two files
//! ([`run_stream`]), and reduces the output to a row count and checksum, writing it to a file
//! when asked.
//!
//! The checksum of a join is the wrapping sum, over output rows, of
//! `pair_checksum(left_row_hash, right_row_hash)` (see `skewjoin_operators::hash`), where a row
//! hash is the stable hash of all of that input row's column values (see [`crate::io::row_hashes`]).
//! It does not depend on the order of rows, the strategy, or the worker and partition counts, so
//! two runs agree exactly when they produce the same multiset of (left row, right row) pairs.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use skewjoin_operators::{JoinType, Key, LoadReport, Side};
use skewjoin_planner::exec::{execute, JobOutput, JoinJob, PairSink, RowRef, STOPPED};
use skewjoin_planner::exec_stream::{execute_stream, split_at_cuts, RowSource, StreamJob};
use skewjoin_planner::report::StrategyReport;
use skewjoin_planner::{PlanError, Resolved};

use crate::error::{Error, Result};
use crate::interrupt;
use crate::io::batches::{check_side_rows, counted_batch_rows, InputFile};
use crate::io::{
    extract_keys, for_each_key, key_kinds, row_hashes, take_output, BatchEncoder, FileFormat,
    OutputWriter, RowStore, Share,
};
use crate::output_rows::{window_pairs, OutputRows, PAD};
use skewjoin_planner::count_sink::OutputTally;

mod late_side;
use late_side::{LateBounds, LateSide, Pending};

/// One side of a join, loaded.
#[derive(Clone, Debug)]
pub struct SideData {
    /// Where it came from, for messages.
    pub name: String,
    /// Its schema.
    pub schema: SchemaRef,
    /// Its rows (all columns), in batches of any lengths, as they were read or handed over.
    pub batches: Vec<RecordBatch>,
    /// The join key of each row.
    pub keys: Arc<[Key]>,
    /// The stable hash of each row; empty where the rows were not hashed (no checksum is
    /// computed), which the join reads as every row's hash being 0.
    pub hashes: Arc<[u64]>,
}

impl SideData {
    /// A side of `batches` (each of `schema`) joined on `key_columns`: the key columns are
    /// checked (their types, see [`key_kinds`]), each row's key read and its hash computed, on
    /// up to `threads` threads, until `stop` is set ([`Error::Interrupted`]). `name` names the
    /// side in errors (a file's path, or "the left table").
    pub fn from_batches(
        name: &str,
        schema: SchemaRef,
        batches: Vec<RecordBatch>,
        key_columns: &[String],
        threads: usize,
        stop: Option<&AtomicBool>,
    ) -> Result<SideData> {
        SideData::from_batches_selecting(
            name,
            schema,
            batches,
            key_columns,
            None,
            true,
            threads,
            stop,
        )
    }

    /// As [`from_batches`](SideData::from_batches), keeping only the columns `selected` (indices
    /// into `schema`, in output order) where given: keys are read from every column, row
    /// hashes and the kept batches are of the selected columns. Without `hashed` no row is
    /// hashed (`hashes` is empty: every row's hash is 0), for a run whose checksum nobody reads.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_batches_selecting(
        name: &str,
        schema: SchemaRef,
        batches: Vec<RecordBatch>,
        key_columns: &[String],
        selected: Option<&[usize]>,
        hashed: bool,
        threads: usize,
        stop: Option<&AtomicBool>,
    ) -> Result<SideData> {
        let path = Path::new(name);
        key_kinds(schema.as_ref(), key_columns, path)?;
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        check_side_rows(name, rows as u64)?;
        for batch in &batches {
            if batch.schema().fields() != schema.fields() {
                return Err(Error::Input(format!(
                    "{name}: a batch's columns differ from the table's ({} against {}); \
                     hand over batches of one schema",
                    batch.schema(),
                    schema
                )));
            }
        }
        // Pieces of at most PIECE_ROWS rows (slices, not copies), in order, split into a
        // contiguous run per thread: reading keys and hashing every column was a tenth of a
        // TPC-H join's time on one thread.
        const PIECE_ROWS: usize = 64 * 1024;
        let pieces: Vec<RecordBatch> = batches
            .iter()
            .flat_map(|batch| {
                (0..batch.num_rows())
                    .step_by(PIECE_ROWS)
                    .map(|start| batch.slice(start, PIECE_ROWS.min(batch.num_rows() - start)))
            })
            .collect();
        let per_thread = pieces.len().div_ceil(threads.max(1)).max(1);
        let read = |run: &[RecordBatch]| -> Result<(Vec<Key>, Vec<u64>)> {
            let rows = run.iter().map(RecordBatch::num_rows).sum();
            let hashed_rows = if hashed { rows } else { 0 };
            let (mut keys, mut hashes) =
                (Vec::with_capacity(rows), Vec::with_capacity(hashed_rows));
            for piece in run {
                if stop.is_some_and(|stop| stop.load(Ordering::Relaxed)) {
                    return Err(Error::Interrupted);
                }
                keys.extend(extract_keys(piece, key_columns, path)?);
                match selected {
                    _ if !hashed => {}
                    Some(indices) => hashes.extend(row_hashes(&project(piece, indices)?)),
                    None => hashes.extend(row_hashes(piece)),
                }
            }
            Ok((keys, hashes))
        };
        let runs: Vec<Result<(Vec<Key>, Vec<u64>)>> = std::thread::scope(|scope| {
            let read = &read;
            let threads: Vec<_> = pieces
                .chunks(per_thread)
                .map(|run| scope.spawn(move || read(run)))
                .collect();
            threads
                .into_iter()
                .map(|thread| {
                    thread
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect()
        });
        let mut keys = Vec::with_capacity(rows);
        let mut hashes = Vec::with_capacity(if hashed { rows } else { 0 });
        for run in runs {
            let (run_keys, run_hashes) = run?;
            keys.extend(run_keys);
            hashes.extend(run_hashes);
        }
        let (schema, batches) = match selected {
            Some(indices) => (
                Arc::new(schema.project(indices).map_err(|error| {
                    Error::Internal(format!("selecting columns of {name}: {error}"))
                })?),
                batches
                    .iter()
                    .map(|batch| project(batch, indices))
                    .collect::<Result<Vec<_>>>()?,
            ),
            None => (schema, batches),
        };
        Ok(SideData {
            name: name.to_string(),
            schema,
            batches,
            keys: keys.into(),
            hashes: hashes.into(),
        })
    }
}

/// The columns `indices` of `batch`.
fn project(batch: &RecordBatch, indices: &[usize]) -> Result<RecordBatch> {
    batch
        .project(indices)
        .map_err(|error| Error::Internal(format!("selecting columns: {error}")))
}

/// Where output rows go, if anywhere.
// One per run, moved once: boxing the file's writer would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum OutputTarget {
    /// A file.
    File {
        /// The file being written (a temporary until finished).
        writer: OutputWriter,
        /// Its schema.
        schema: SchemaRef,
        /// The final path, for messages.
        path: PathBuf,
        /// Whether the output's checksum is computed: where nobody reads it (a quiet run
        /// without metrics), the rows are written without being hashed, which was 7 % of the
        /// CPU of TPC-H's lineitem x orders written.
        checksum: bool,
    },
    /// Batches of the output's rows, each handed to `sink` by the worker that made it, as it is
    /// made: for a caller that keeps the output in memory or passes it on while the join runs.
    Batches {
        /// The batches' schema (see [`output_schema`](crate::io::output_schema)).
        schema: SchemaRef,
        /// Takes each batch; an error stops that worker's output and fails the run.
        sink: BatchSink,
    },
}

impl OutputTarget {
    /// Whether a run into this target computes its output's checksum (a counted run, with no
    /// target, always does).
    fn checksum(&self) -> bool {
        match self {
            OutputTarget::File { checksum, .. } => *checksum,
            OutputTarget::Batches { .. } => true,
        }
    }
}

/// What an [`OutputTarget::Batches`] hands its batches to.
pub type BatchSink = Arc<dyn Fn(RecordBatch) -> Result<()> + Send + Sync>;

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
    /// The order-independent checksum of the output; `None` where it was not asked for (see
    /// [`OutputTarget::File`]).
    pub checksum: Option<u64>,
    /// Per-partition load.
    pub loads: LoadReport,
    /// Wall time of the join itself (not loading inputs before it): with streamed inputs, it
    /// includes reading them, and writing the output rows of a side read twice after the join.
    pub elapsed: Duration,
    /// The strategy's decisions: AM-Join's classes, Tree-Join's rounds, VPRP's ranges.
    pub strategy_report: StrategyReport,
}

/// Rows of one output batch (and one row group of a Parquet output).
const WRITE_BATCH_ROWS: usize = 64 * 1024;

/// The first error of a run, which every worker stops at: a worker's output error, or an input
/// found bad while it is read (a corrupt page past the footer). Shared by the sinks, which ask
/// between steps whether to stop, and the file source, so that the error reaches the caller
/// with its kind and exit code, and the output files are removed there.
#[derive(Debug, Default)]
pub(crate) struct RunFailure {
    error: Mutex<Option<Error>>,
    /// Whether `error` is set: what every worker asks between steps, without the lock.
    failed: AtomicBool,
}

impl RunFailure {
    /// Records `error`, unless an earlier error is recorded.
    pub(crate) fn record(&self, error: Error) {
        if let Ok(mut first) = self.error.lock() {
            first.get_or_insert(error);
        }
        self.failed.store(true, Ordering::Relaxed);
    }

    /// Whether an error is recorded.
    pub(crate) fn is_set(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// The recorded error, if any.
    fn take(&self) -> Option<Error> {
        self.error.lock().ok().and_then(|mut first| first.take())
    }
}

struct Shared {
    how: JoinType,
    left: Arc<RowStore>,
    right: Arc<RowStore>,
    output: Option<SharedOutput>,
    /// Set when the run is no longer wanted (see [`PairSink::stopped`]).
    stop: Option<Arc<AtomicBool>>,
    /// The first error of any worker, output or input: every worker stops at it.
    failure: Arc<RunFailure>,
}

/// Where the workers' output goes.
// One per run, shared by reference.
#[allow(clippy::large_enum_variant)]
enum SharedOutput {
    /// The output file the workers share, and what each of them encodes its rows with before
    /// it takes the file (see [`EncodedBatch`](crate::io::EncodedBatch)).
    File {
        writer: Mutex<OutputWriter>,
        encoder: Arc<BatchEncoder>,
        schema: SchemaRef,
        /// Each worker's last batch, shorter than a row group, written together at the end.
        rests: Mutex<Vec<RecordBatch>>,
    },
    /// See [`OutputTarget::Batches`].
    Batches { schema: SchemaRef, sink: BatchSink },
}

impl Shared {
    /// Whether the run is to end now: a worker's output or input failed, or the caller stopped
    /// it.
    fn stopped(&self) -> bool {
        self.failure.is_set()
            || self
                .stop
                .as_ref()
                .is_some_and(|stop| stop.load(Ordering::Relaxed))
    }
}

impl SharedOutput {
    fn schema(&self) -> &SchemaRef {
        match self {
            SharedOutput::File { schema, .. } | SharedOutput::Batches { schema, .. } => schema,
        }
    }

    /// Takes one batch of a worker's output rows; `last` when it is the worker's last.
    fn take(&self, batch: RecordBatch, last: bool) -> Result<()> {
        fn poisoned<T>(_: T) -> Error {
            Error::Internal("an output writer panicked".into())
        }
        match self {
            SharedOutput::File { rests, .. } if last && batch.num_rows() < WRITE_BATCH_ROWS => {
                rests.lock().map_err(poisoned)?.push(batch);
                Ok(())
            }
            SharedOutput::File {
                writer, encoder, ..
            } => {
                let encoded = encoder.encode(&batch)?;
                writer.lock().map_err(poisoned)?.append(encoded)
            }
            SharedOutput::Batches { sink, .. } => sink(batch),
        }
    }

    /// Takes the rows of `batches`, in order, as whole batches of a worker's output: a file's
    /// encoder takes them as they are, row groups spanning them, without joining them first.
    fn take_all(&self, batches: &[RecordBatch]) -> Result<()> {
        match self {
            SharedOutput::File {
                writer, encoder, ..
            } => {
                let encoded = encoder.encode_all(batches)?;
                writer
                    .lock()
                    .map_err(|_| Error::Internal("an output writer panicked".into()))?
                    .append(encoded)
            }
            SharedOutput::Batches { sink, .. } => {
                batches.iter().try_for_each(|batch| sink(batch.clone()))
            }
        }
    }
}

/// One worker's sink: counts, checksums and (optionally) writes output rows.
struct RuntimeSink {
    shared: Arc<Shared>,
    tally: OutputTally,
    /// Output rows found and not yet written.
    rows: OutputRows,
    /// Whether the run was stopped with rows of a window not handed over.
    cut_short: bool,
    /// Whether rows are still being written (an output is set and no write has failed).
    writing: bool,
    error: Option<Error>,
    /// Where a side is read twice: the output rows held for it instead of `rows`.
    late: Option<LatePairs>,
}

/// A worker's output rows of a join whose larger side is read twice (see [`LateSide`]).
struct LatePairs {
    side: Arc<LateSide>,
    /// Rows found and not yet written, packed by [`LateSide::pack`].
    pairs: Vec<u64>,
    /// How many pairs the worker holds before it writes them itself.
    bound: usize,
    /// Rows written short of a batch, carried to the next write.
    pending: Pending,
    /// The checksum of the rows this worker wrote itself.
    checksum: u64,
}

impl RuntimeSink {
    /// Writes the rows this worker holds for a side read twice, alone, reading every unit of
    /// that side they refer to: its bound is reached, and holding more would grow without limit.
    fn write_late(&mut self) {
        let Some(late) = &mut self.late else {
            return;
        };
        let grouped = [late.side.group(&late.pairs)];
        late.pairs.clear();
        let units = late.side.units_in_turn();
        match late
            .side
            .write(&grouped, &units, &self.shared, &mut late.pending)
        {
            Ok(checksum) => late.checksum = late.checksum.wrapping_add(checksum),
            Err(_) if self.shared.stopped() => {
                self.writing = false;
                self.cut_short = true;
            }
            Err(error) => {
                self.shared.failure.record(error.clone());
                self.error = Some(error);
                self.writing = false;
            }
        }
    }

    /// Writes the rows gathered so far: a whole batch as its own row group, encoded here; a
    /// worker's last, shorter batch (`last`) is set aside, and the rest of all workers are
    /// written together at the end, so that every row group but the file's last has 64 Ki
    /// rows and a later run can cut the file between them.
    fn flush(&mut self, last: bool) {
        if self.rows.is_empty() || self.error.is_some() {
            return;
        }
        let Some(output) = &self.shared.output else {
            return;
        };
        let shared = &self.shared;
        let result = self
            .rows
            .drain(WRITE_BATCH_ROWS, |left_rows, right_rows, last_batch| {
                // A window holds many batches: a stopped run assembles none of the rest
                // (`None`: whoever stopped it reports why).
                if shared.stopped() {
                    return Err(None);
                }
                take_output(
                    output.schema(),
                    shared.how,
                    &shared.left,
                    &shared.right,
                    left_rows,
                    right_rows,
                )
                .and_then(|batch| output.take(batch, last && last_batch))
                .map_err(Some)
            });
        if let Err(None) = result {
            self.writing = false;
            self.cut_short = true;
        } else if let Err(Some(error)) = result {
            self.shared.failure.record(error.clone());
            self.error = Some(error);
            self.writing = false;
        }
    }
}

/// What a worker's sink reports: output rows, their checksum, and the first write error.
type SinkSummary = (u64, u64, Option<Error>);

impl PairSink for RuntimeSink {
    type Summary = SinkSummary;

    #[inline]
    fn emit(&mut self, left: Option<&RowRef>, right: Option<&RowRef>) {
        self.tally
            .row(left.map(|row| row.1), right.map(|row| row.1));
        if let Some(late) = &mut self.late {
            if self.writing {
                let pair = late.side.pack(
                    left.map_or(PAD, |row| row.0),
                    right.map_or(PAD, |row| row.0),
                );
                if late.pairs.len() == late.pairs.capacity() {
                    // Grown by doubling up to the bound, never past it.
                    let len = late.pairs.len();
                    let target = (len * 2).max(1024).min(late.bound);
                    late.pairs.reserve_exact(target.saturating_sub(len).max(1));
                }
                late.pairs.push(pair);
                if late.pairs.len() >= late.bound {
                    self.write_late();
                }
            }
        } else if self.writing
            && self.rows.push(
                left.map_or(PAD, |row| row.0),
                right.map_or(PAD, |row| row.0),
            )
        {
            self.flush(false);
        }
    }

    #[inline]
    fn lefts_with<'v>(&mut self, lefts: impl ExactSizeIterator<Item = &'v RowRef>, right: &RowRef) {
        if self.writing {
            for left in lefts {
                self.emit(Some(left), Some(right));
            }
        } else {
            self.tally.lefts_with(lefts.map(|row| row.1), right.1);
        }
    }

    #[inline]
    fn left_with_rights<'v>(
        &mut self,
        left: &RowRef,
        rights: impl ExactSizeIterator<Item = &'v RowRef>,
    ) {
        if self.writing {
            for right in rights {
                self.emit(Some(left), Some(right));
            }
        } else {
            self.tally.left_with_rights(left.1, rights.map(|row| row.1));
        }
    }

    fn stopped(&self) -> bool {
        self.shared.stopped()
    }

    fn finish(mut self) -> std::result::Result<Self::Summary, String> {
        self.flush(true);
        let mut checksum = self.tally.checksum;
        if let Some(late) = &mut self.late {
            // The rows of a side read twice are hashed when they are written: the checksum is
            // that of the rows this worker wrote, and the rest's is added when they are.
            checksum = late.checksum;
            let grouped = late.side.group(&late.pairs);
            late.pairs = Vec::new();
            let handed = late
                .side
                .write_rest(&self.shared, &mut late.pending)
                .and_then(|()| late.side.finish(grouped));
            if let Err(error) = handed {
                self.shared.failure.record(error.clone());
                self.error.get_or_insert(error);
            }
        }
        if self.cut_short {
            // Rows were counted but never handed over: the run must not end as complete
            // (the runtime reports the recorded failure or Error::Interrupted).
            return Err(STOPPED.to_string());
        }
        Ok((self.tally.rows, checksum, self.error))
    }
}

/// Runs the join over two loaded tables. With an output file, the file is complete and in
/// place when this returns `Ok`, and absent when it returns an error. Setting `stop` ends the
/// run early with [`Error::Interrupted`].
pub fn run(
    left: SideData,
    right: SideData,
    plan: JoinPlan,
    output: Option<OutputTarget>,
    progress: Option<Arc<AtomicU64>>,
    stop: Option<Arc<AtomicBool>>,
) -> Result<RunReport> {
    let job = JoinJob {
        left: Arc::clone(&left.keys),
        right: Arc::clone(&right.keys),
        left_hashes: Arc::clone(&left.hashes),
        right_hashes: Arc::clone(&right.hashes),
        how: plan.how,
        resolved: plan.resolved,
        partitions: plan.partitions,
        workers: plan.workers,
    };
    let stores = (
        Arc::new(RowStore::batches(left.schema, left.batches)),
        Arc::new(RowStore::batches(right.schema, right.batches)),
    );
    run_with(
        plan,
        stores,
        None,
        output,
        progress,
        stop,
        Arc::default(),
        |make_sink| execute(job, make_sink),
    )
}

/// An input file to stream into a join, and the key columns to join it on.
#[derive(Clone, Debug)]
pub struct StreamSide {
    /// The file, opened.
    pub input: InputFile,
    /// Its key columns.
    pub key_columns: Vec<String>,
}

impl StreamSide {
    /// Opens `path` (see [`InputFile::open`]) to be joined on `key_columns`.
    pub fn open(path: &Path, format: FileFormat, key_columns: &[String]) -> Result<StreamSide> {
        Ok(StreamSide {
            input: InputFile::open(path, format, key_columns)?,
            key_columns: key_columns.to_vec(),
        })
    }

    /// Gives the output only the columns `names` of this side (see [`InputFile::select`]);
    /// `flag` names where they came from in errors.
    pub fn select(&mut self, names: &[String], flag: &str) -> Result<()> {
        self.input.select(names, flag)
    }

    /// Reads this side in batches sized for a join whose rows are counted, not kept
    /// ([`counted_batch_rows`]).
    pub fn read_for_counting(&mut self) {
        let rows = counted_batch_rows(&self.input.selected);
        self.input.set_batch_rows(rows);
    }

    /// Opens share `share` of `path` (see [`InputFile::open_share`]), for one process of a
    /// cluster.
    pub fn open_share(
        path: &Path,
        format: FileFormat,
        key_columns: &[String],
        share: Share,
    ) -> Result<StreamSide> {
        Ok(StreamSide {
            input: InputFile::open_share(path, format, key_columns, share)?,
            key_columns: key_columns.to_vec(),
        })
    }
}

/// Runs the join reading both inputs while it runs, a bounded batch at a time (see
/// [`execute_stream`]): without an output, no input row is held but as the strategy's record;
/// with one, the rows of each side the output includes are kept (as Arrow) for the output rows,
/// but the larger side's where its file can be read again a part at a time and it is large: that
/// side is read twice, its keys for the join, its rows after it (see the module
/// `engine/late_side.rs`). With an output target,
/// the file is complete and in place when this returns `Ok`, and absent when it returns an error.
///
/// An input that turns out to be bad while it is read (a corrupt page past the footer) ends the
/// run with that error (a `RunFailure`): every worker stops reading and joining at it, since the
/// join cannot succeed and the work the rows already read have started (a hot key's pairs) could
/// take long to finish.
///
/// `progress` counts output rows as they are produced, `read` input rows as they are read.
pub fn run_stream(
    left: StreamSide,
    right: StreamSide,
    plan: JoinPlan,
    output: Option<OutputTarget>,
    progress: Option<Arc<AtomicU64>>,
    read: Option<Arc<AtomicU64>>,
) -> Result<RunReport> {
    let late = Some(LateBounds::DEFAULT);
    run_stream_with(left, right, plan, output, progress, read, late)
}

/// [`run_stream`], where a side is read twice within `late_bounds` (tests make them small), or
/// none is (`None`).
fn run_stream_with(
    mut left: StreamSide,
    mut right: StreamSide,
    plan: JoinPlan,
    output: Option<OutputTarget>,
    progress: Option<Arc<AtomicU64>>,
    read: Option<Arc<AtomicU64>>,
    late_bounds: Option<LateBounds>,
) -> Result<RunReport> {
    if output.is_none() {
        left.read_for_counting();
        right.read_for_counting();
    }
    let hashing = output.as_ref().is_none_or(OutputTarget::checksum);
    let late = output
        .as_ref()
        .zip(late_bounds)
        .and_then(|(_, bounds)| {
            LateSide::choose(&left, &right, plan.how, plan.workers, bounds, hashing)
        })
        .map(|late| Arc::new(late.counting(progress.clone())));
    let late_side = late.as_ref().map(|late| late.side);
    // With an output, the batches of each side it includes but the late side are kept as the
    // workers read them: each its part of the side, cut where `execute_stream` cuts it.
    let kept =
        |which: Side| output.is_some() && late_side != Some(which) && plan.how.outputs_side(which);
    let store = |side: &StreamSide, which: Side| {
        let parts = match kept(which) {
            true => split_at_cuts(&side.input.cuts(), side.input.rows, plan.workers),
            false => Vec::new(),
        };
        Arc::new(RowStore::parts(
            Arc::clone(&side.input.selected),
            &parts,
            side.input.batch_rows(),
        ))
    };
    let stores = (store(&left, Side::Left), store(&right, Side::Right));
    let job = StreamJob {
        left_rows: left.input.rows,
        right_rows: right.input.rows,
        how: plan.how,
        resolved: plan.resolved,
        partitions: plan.partitions,
        workers: plan.workers,
    };
    // The side held while the other is read twice keeps its rows' hashes too, for the checksum
    // of the output written after the join.
    let keep_hashes = late.is_some() && hashing;
    let keep_in = |store: &Arc<RowStore>, which: Side| -> Option<KeepBatch> {
        let store = Arc::clone(store);
        kept(which).then(|| {
            Box::new(move |first, batch: &RecordBatch, hashes: &[u64]| {
                store.put(first, batch.clone(), keep_hashes.then(|| hashes.to_vec()))
            }) as KeepBatch
        })
    };
    let keep = [
        keep_in(&stores.0, Side::Left),
        keep_in(&stores.1, Side::Right),
    ];
    let failure = Arc::new(RunFailure::default());
    let source = Arc::new(
        FileSource::new(
            [left, right],
            keep,
            read,
            OnReadError::Record(Arc::clone(&failure)),
        )
        .keys_only_of(late_side)
        .hashing(hashing),
    );
    run_with(
        plan,
        stores,
        late,
        output,
        progress,
        None,
        failure,
        |make_sink| execute_stream(job, source, make_sink),
    )
}

/// What keeps a side's batches for the output: called with each batch's first row (its row
/// number in the side), the batch and its rows' hashes, before its rows are sent, on the worker
/// that sends them.
pub(crate) type KeepBatch = Box<dyn Fn(u64, &RecordBatch, &[u64]) -> Result<()> + Send + Sync>;

/// What an input found bad while it is read does to the run.
pub(crate) enum OnReadError {
    /// Recorded for the caller, and every worker stops at it (one process).
    Record(Arc<RunFailure>),
    /// Ends the process at once with the error's message and exit code, after removing every
    /// unfinished output file ([`interrupt::abort`]): a cluster process. Every worker of a
    /// cluster must build the same dataflows, so a worker cannot leave the run while the others
    /// go on; the process leaving is what its peers' watchdogs see.
    EndProcess,
}

/// Both inputs of a streamed join (or a cluster process's shares of them), read by the workers
/// that feed them.
pub(crate) struct FileSource {
    /// Each side, with what keeps its batches when the output needs them.
    sides: [(StreamSide, Option<KeepBatch>); 2],
    /// Counts the rows read for the join, for progress.
    read: Option<Arc<AtomicU64>>,
    on_error: OnReadError,
    /// A side whose key columns alone the join reads (see [`LateSide`]).
    keys_only: Option<Side>,
    /// Whether rows are hashed for the checksum as they are read (else their hash is 0).
    hashing: bool,
}

impl FileSource {
    /// Reads `left` and `right`, handing each batch read for the join (not those read for key
    /// statistics) to that side's `keep` before its rows are sent; `read` counts rows read.
    pub(crate) fn new(
        [left, right]: [StreamSide; 2],
        [keep_left, keep_right]: [Option<KeepBatch>; 2],
        read: Option<Arc<AtomicU64>>,
        on_error: OnReadError,
    ) -> FileSource {
        FileSource {
            sides: [(left, keep_left), (right, keep_right)],
            read,
            on_error,
            keys_only: None,
            hashing: true,
        }
    }

    /// Has the join read only the key columns of `side`, if any: its rows are read again for
    /// the output after the join.
    pub(crate) fn keys_only_of(mut self, side: Option<Side>) -> FileSource {
        self.keys_only = side;
        self
    }

    /// Hashes the rows read for the checksum, or not (`false`: every row's hash is 0, and the
    /// batches kept get no hashes).
    pub(crate) fn hashing(mut self, hashing: bool) -> FileSource {
        self.hashing = hashing;
        self
    }

    fn side(&self, side: Side) -> &(StreamSide, Option<KeepBatch>) {
        match side {
            Side::Left => &self.sides[0],
            Side::Right => &self.sides[1],
        }
    }

    fn read_side(
        &self,
        side: Side,
        keys_only: bool,
        rows: Range<u64>,
        send: &mut dyn FnMut(Key, u64),
    ) -> Result<()> {
        let (input, keep) = self.side(side);
        let path = input.input.path.as_path();
        let late = self.keys_only == Some(side);
        let batches = input
            .input
            .batches_of_rows(keys_only || late, rows.clone())?;
        let mut first = rows.start;
        for batch in batches {
            if let OnReadError::Record(failure) = &self.on_error {
                // The run ends with another worker's error (the one recorded first, which the
                // caller gets): reading on is wasted.
                if failure.is_set() {
                    return Err(Error::Internal(
                        "stopped reading: another worker's read or write failed".into(),
                    ));
                }
            }
            let batch = batch?;
            if keys_only || late {
                // Read for the join, not for key statistics: counted once.
                if let Some(read) = self.read.as_ref().filter(|_| late && !keys_only) {
                    read.fetch_add(batch.num_rows() as u64, Ordering::Relaxed);
                }
                for_each_key(&batch, &input.key_columns, path, |key| send(key, 0))?;
                continue;
            }
            // A row's hash and what the output keeps are of its selected columns; its key is
            // read from the batch as decoded, which holds the key columns whether selected or not.
            let selected = input.input.selected_columns(&batch)?;
            let hashes = match self.hashing {
                true => row_hashes(&selected),
                false => Vec::new(),
            };
            if let Some(read) = &self.read {
                read.fetch_add(batch.num_rows() as u64, Ordering::Relaxed);
            }
            if let Some(keep) = keep {
                keep(first, &selected, &hashes)?;
            }
            first += batch.num_rows() as u64;
            if self.hashing {
                let mut hashes = hashes.into_iter();
                for_each_key(&batch, &input.key_columns, path, |key| {
                    send(key, hashes.next().expect("a row hash per row"));
                })?;
            } else {
                for_each_key(&batch, &input.key_columns, path, |key| send(key, 0))?;
            }
        }
        Ok(())
    }
}

impl RowSource<Key> for FileSource {
    fn read(
        &self,
        side: Side,
        keys_only: bool,
        rows: Range<u64>,
        send: &mut dyn FnMut(Key, u64),
    ) -> std::result::Result<(), String> {
        self.read_side(side, keys_only, rows, send)
            .map_err(|error| match &self.on_error {
                OnReadError::Record(failure) => {
                    let message = error.to_string();
                    failure.record(error);
                    message
                }
                OnReadError::EndProcess => interrupt::abort(error.exit_code(), &error.to_string()),
            })
    }

    /// A Parquet side is cut at its row groups and an Arrow IPC file at its record batches, so
    /// that every worker decodes a share of it.
    fn cuts(&self, side: Side) -> Vec<u64> {
        self.side(side).0.input.cuts()
    }
}

/// The rows of `side` held for the output, or `u64::MAX` where the output does not include it
/// (so that the rows of the side it includes order the output, see [`OutputRows`]).
fn output_rows_of(shared: &Shared, side: Side) -> u64 {
    match (shared.how.outputs_side(side), side) {
        (false, _) => u64::MAX,
        (true, Side::Left) => shared.left.rows(),
        (true, Side::Right) => shared.right.rows(),
    }
}

/// Runs a join through `execute` (given the sink factory) with the sinks writing to `output`,
/// and sums what the sinks report.
#[allow(clippy::too_many_arguments)]
fn run_with<E>(
    plan: JoinPlan,
    (left, right): (Arc<RowStore>, Arc<RowStore>),
    late: Option<Arc<LateSide>>,
    output: Option<OutputTarget>,
    progress: Option<Arc<AtomicU64>>,
    stop: Option<Arc<AtomicBool>>,
    failure: Arc<RunFailure>,
    execute: E,
) -> Result<RunReport>
where
    E: FnOnce(
        Box<dyn Fn(usize) -> RuntimeSink + Send + Sync>,
    ) -> std::result::Result<JobOutput<SinkSummary>, PlanError>,
{
    let output_path = match &output {
        Some(OutputTarget::File { path, .. }) => Some(path.clone()),
        _ => None,
    };
    let output_checksum = output.as_ref().is_none_or(OutputTarget::checksum);
    let shared = Arc::new(Shared {
        how: plan.how,
        left,
        right,
        output: output.map(|target| match target {
            OutputTarget::File {
                writer,
                schema,
                path: _,
                checksum: _,
            } => SharedOutput::File {
                encoder: writer.encoder(),
                writer: Mutex::new(writer),
                schema,
                rests: Mutex::new(Vec::new()),
            },
            OutputTarget::Batches { schema, sink } => SharedOutput::Batches { schema, sink },
        }),
        stop: stop.clone(),
        failure,
    });
    let sink_shared = Arc::clone(&shared);
    let writing = shared.output.is_some();
    let window = window_pairs(plan.workers, WRITE_BATCH_ROWS);
    let sink_late = late.clone();
    let result = execute(Box::new(move |_| RuntimeSink {
        writing,
        // With a side read twice, rows are counted for progress as they are written.
        tally: OutputTally::new(progress.clone().filter(|_| sink_late.is_none())),
        shared: Arc::clone(&sink_shared),
        // Ordered by the smaller side the output includes (the other side's store is empty).
        rows: OutputRows::new(
            output_rows_of(&sink_shared, Side::Left),
            output_rows_of(&sink_shared, Side::Right),
            window,
        ),
        cut_short: false,
        error: None,
        late: sink_late.clone().map(|side| LatePairs {
            pairs: Vec::new(),
            bound: side.worker_pairs,
            side,
            pending: Pending::default(),
            checksum: 0,
        }),
    }))
    .map_err(|error| {
        match (shared.failure.take(), error) {
            // The workers stopped at a worker's output or input error.
            (Some(error), _) => error,
            (None, _) if stop.is_some_and(|stop| stop.load(Ordering::Relaxed)) => {
                Error::Interrupted
            }
            // Whatever its kind: the runtime checked the request before the run, so a refusal
            // now is a fault of its own.
            (None, error) => Error::Internal(format!("the join failed: {error}")),
        }
    })?;

    let mut output_rows = 0u64;
    let mut checksum = 0u64;
    for (rows, sum, error) in result.summaries {
        if let Some(error) = error {
            return Err(error);
        }
        output_rows += rows;
        checksum = checksum.wrapping_add(sum);
    }
    let mut elapsed = result.elapsed;
    if let Some(late) = late {
        // The rows of a side read twice that the workers hold, written now on as many threads.
        let start = std::time::Instant::now();
        let written = late
            .write_finished(&shared, plan.workers)
            .map_err(|error| shared.failure.take().unwrap_or(error))?;
        checksum = checksum.wrapping_add(written);
        elapsed += start.elapsed();
    }
    let shared = Arc::try_unwrap(shared)
        .map_err(|_| Error::Internal("a worker still holds the output".into()))?;
    if let Some(SharedOutput::File {
        writer,
        rests,
        encoder,
        schema: _,
    }) = shared.output
    {
        let mut writer = writer
            .into_inner()
            .map_err(|_| Error::Internal("an output writer panicked".into()))?;
        let rests = rests
            .into_inner()
            .map_err(|_| Error::Internal("an output writer panicked".into()))?;
        if !rests.is_empty() {
            // Nothing else runs now: the columns are encoded on as many threads as there are
            // workers. On one thread,
            // encoding the rests of TPC-H lineitem x orders written (up to a row group a
            // worker) was 0.14 s of 3.8 s with the other core idle.
            writer.append(encoder.encode_all_on(&rests, plan.workers)?)?;
        }
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
        checksum: output_checksum.then_some(checksum),
        loads: result.loads,
        elapsed,
        strategy_report: result.report,
    })
}

#[cfg(test)]
mod tests {
    use std::fs::File;

    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::basic::{Compression, ZstdLevel};
    use parquet::file::properties::WriterProperties;
    use skewjoin_planner::AmParams;

    use crate::io::output_schema;

    use super::*;
    use skewjoin_planner::strategies::{Am, Shuffle};

    /// A Parquet file of `rows` rows in zstd row groups of 10,000, keys `0..1000`, values the row
    /// numbers.
    fn write_table(path: &Path, rows: i64) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("key", DataType::Int64, false),
            Field::new("value", DataType::Int64, false),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from_iter_values(
                    (0..rows).map(|row| row % 1000),
                )),
                // Compressible, so that the corrupt bytes are in zstd's compressed blocks (its
                // raw blocks of incompressible data would pass them on as other values).
                Arc::new(Int64Array::from_iter_values(0..rows)),
            ],
        )
        .unwrap();
        let properties = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_max_row_group_row_count(Some(10_000))
            .build();
        write_parquet(path, &batch, properties);
    }

    /// Writes `batch` to a Parquet file at `path` with `properties`.
    fn write_parquet(path: &Path, batch: &RecordBatch, properties: WriterProperties) {
        let file = File::create(path).unwrap();
        let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(properties)).unwrap();
        writer.write(batch).unwrap();
        writer.close().unwrap();
    }

    /// A row group whose pages hold other rows than it claims ends a streamed join with an input
    /// error naming its file, wherever that side's rows go: counted, kept for the output, read
    /// twice (its keys, then its rows), or holding the hashes of the side read twice.
    #[test]
    fn a_miscounted_row_group_ends_a_streamed_join_naming_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let (liar, other) = (
            dir.path().join("liar.parquet"),
            dir.path().join("other.parquet"),
        );
        let keys = ["key".to_string()];
        let side = |path: &Path| StreamSide::open(path, FileFormat::Parquet, &keys).unwrap();
        let read_twice = Some(LateBounds {
            pairs: 1_000,
            min_bytes: 0,
        });
        for (liar_rows, other_rows) in [(50_000, 20_000), (20_000, 50_000)] {
            write_table(&other, other_rows);
            for claimed in [12_000, 8_000] {
                write_table(&liar, liar_rows);
                crate::io::tests::patch_parquet_count(&liar, 10_000, claimed, |metadata| {
                    metadata.row_group(0).num_rows()
                });
                for workers in [1, 3] {
                    let plan = JoinPlan {
                        how: JoinType::Full,
                        resolved: Resolved::Shuffle(Shuffle),
                        partitions: 4,
                        workers,
                    };
                    for (written, late_bounds) in [(false, None), (true, None), (true, read_twice)]
                    {
                        let target = written.then(|| OutputTarget::Batches {
                            schema: output_schema(
                                &side(&liar).input.selected,
                                &side(&other).input.selected,
                                JoinType::Full,
                            ),
                            sink: Arc::new(|_| Ok(())),
                        });
                        let result = run_stream_with(
                            side(&liar),
                            side(&other),
                            plan,
                            target,
                            None,
                            None,
                            late_bounds,
                        );
                        let case = format!(
                            "{liar_rows} rows claimed as {}, {workers} workers, written \
                             {written}, {late_bounds:?}",
                            liar_rows - 10_000 + claimed
                        );
                        match result {
                            // The count check's message, not another error on the way.
                            Err(Error::Input(message)) => assert!(
                                message.contains("liar.parquet")
                                    && message.contains("row groups' counts say")
                                    && message.contains("were decoded"),
                                "{case}: {message}"
                            ),
                            Err(other) => panic!("{case}: not an input error: {other:?}"),
                            Ok(_) => panic!("{case}: joined"),
                        }
                    }
                }
            }
        }
    }

    /// Every row of `batches` as text, sorted: equal exactly when the multisets are.
    fn sorted_rows(batches: &[RecordBatch]) -> Vec<Vec<Option<String>>> {
        use arrow::array::{Array, AsArray};
        let mut rows = Vec::new();
        for batch in batches {
            let columns: Vec<_> = batch
                .columns()
                .iter()
                .map(|column| arrow::compute::cast(column, &DataType::Utf8).unwrap())
                .collect();
            for row in 0..batch.num_rows() {
                rows.push(
                    columns
                        .iter()
                        .map(|column| {
                            let column = column.as_string::<i32>();
                            column.is_valid(row).then(|| column.value(row).to_string())
                        })
                        .collect(),
                );
            }
        }
        rows.sort();
        rows
    }

    /// A written join whose larger side is read twice (its keys for the join, its rows for the
    /// output) writes the rows, and reports the count and checksum, of one that keeps both
    /// sides: for every join type, with either side the larger, on 1 and 3 workers, with the
    /// pairs written once at the end and with a bound so small that each worker writes its own
    /// many times while it joins, with Shuffle-Join and with AM-Join (which reads the keys
    /// twice). The larger side has NULL keys, keys the other lacks and a hot key that the
    /// other has twice, and three units of row groups.
    #[test]
    fn a_side_read_twice_writes_the_rows_of_a_side_kept() {
        use arrow::array::StringArray;
        let dir = tempfile::tempdir().unwrap();
        let write = |path: &Path, keys: Vec<Option<i64>>, group: usize| {
            let schema = Arc::new(Schema::new(vec![
                Field::new("key", DataType::Int64, true),
                Field::new("text", DataType::Utf8, false),
            ]));
            let text: StringArray = (0..keys.len())
                .map(|row| Some(format!("{}-{row}", path.display())))
                .collect();
            let batch = RecordBatch::try_new(
                Arc::clone(&schema),
                vec![Arc::new(Int64Array::from(keys)), Arc::new(text)],
            )
            .unwrap();
            let properties = WriterProperties::builder()
                .set_max_row_group_row_count(Some(group))
                .build();
            write_parquet(path, &batch, properties);
        };
        let (large, small) = (
            dir.path().join("large.parquet"),
            dir.path().join("small.parquet"),
        );
        // 150,000 rows in groups of 10,000: units of 70,000, 70,000 and 10,000 rows.
        write(
            &large,
            (0..150_000i64)
                .map(|row| match row % 10 {
                    0 => None,
                    1..=3 => Some(7),
                    _ => Some(row % 3_000),
                })
                .collect(),
            10_000,
        );
        // Even keys, and the hot key 7 twice: each of its 45,000 large rows is output twice.
        write(
            &small,
            (0..2_000i64)
                .map(|row| Some(if row % 1000 == 1 { 7 } else { row * 2 }))
                .collect(),
            700,
        );
        let keys = ["key".to_string()];
        let side = |path: &Path| StreamSide::open(path, FileFormat::Parquet, &keys).unwrap();
        let bounds = |pairs| LateBounds {
            pairs,
            min_bytes: 1 << 20,
        };
        let chosen = |small: &Path, large: &Path, bounds| {
            LateSide::choose(&side(small), &side(large), JoinType::Inner, 1, bounds, true)
                .map(|late| late.side)
        };
        // 150,000 rows of 24 bytes: read twice from 1 MiB on, kept under the default bound.
        assert_eq!(chosen(&small, &large, bounds(1)), Some(Side::Right));
        assert_eq!(chosen(&small, &large, LateBounds::DEFAULT), None);
        let strategies = [
            Resolved::Shuffle(Shuffle),
            Resolved::Am(Am {
                params: AmParams::default(),
            }),
        ];
        for (how, resolved) in JoinType::ALL
            .into_iter()
            .flat_map(|how| strategies.map(|resolved| (how, resolved)))
        {
            for (left, right) in [(&large, &small), (&small, &large)] {
                for workers in [1, 3] {
                    let plan = JoinPlan {
                        how,
                        resolved,
                        partitions: 4,
                        workers,
                    };
                    let run = |late_bounds: Option<LateBounds>| {
                        let schema = output_schema(
                            &side(left).input.selected,
                            &side(right).input.selected,
                            how,
                        );
                        let batches = Arc::new(Mutex::new(Vec::new()));
                        let into = Arc::clone(&batches);
                        let sink: BatchSink = Arc::new(move |batch| {
                            into.lock().unwrap().push(batch);
                            Ok(())
                        });
                        let target = OutputTarget::Batches { schema, sink };
                        let report = run_stream_with(
                            side(left),
                            side(right),
                            plan,
                            Some(target),
                            None,
                            None,
                            late_bounds,
                        )
                        .unwrap();
                        let batches = batches.lock().unwrap().clone();
                        (report.output_rows, report.checksum, sorted_rows(&batches))
                    };
                    let kept = run(None);
                    assert!(kept.0 > 0, "{how:?}");
                    assert_eq!(kept.2.len() as u64, kept.0, "{how:?}");
                    for late_pairs in [16 << 20, 3_001] {
                        let late = run(Some(bounds(late_pairs)));
                        let what = format!(
                            "{how:?}, {resolved:?}, {} left, W = {workers}, {late_pairs} pairs",
                            left.display()
                        );
                        assert_eq!(late.0, kept.0, "{what}: rows");
                        assert_eq!(late.1, kept.1, "{what}: checksum");
                        assert!(late.2 == kept.2, "{what}: the rows differ");
                    }
                }
            }
        }
    }

    /// Written to a Parquet file, a join whose larger side is read twice writes the rows of one
    /// that keeps it, in row groups of 64 Ki rows but the last, whether the workers write their
    /// rows once after the join or many times while it runs (their rows short of a row group
    /// carried from one write to the next, and set aside at the end). Without a checksum (no
    /// one reads it) the rows written are the same, and none is reported.
    #[test]
    fn a_side_read_twice_writes_whole_row_groups_to_a_file() {
        use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

        use crate::io::OutputCompression;
        let dir = tempfile::tempdir().unwrap();
        let (large, small) = (
            dir.path().join("large.parquet"),
            dir.path().join("small.parquet"),
        );
        write_table(&large, 400_000);
        write_table(&small, 1_500);
        let keys = ["key".to_string()];
        let side = |path: &Path| StreamSide::open(path, FileFormat::Parquet, &keys).unwrap();
        let read_back = |path: &Path| {
            let builder =
                ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap()).unwrap();
            let groups: Vec<i64> = builder
                .metadata()
                .row_groups()
                .iter()
                .map(|group| group.num_rows())
                .collect();
            let batches: Vec<RecordBatch> = builder
                .build()
                .unwrap()
                .map(|batch| batch.unwrap())
                .collect();
            (sorted_rows(&batches), groups)
        };
        for how in [JoinType::Inner, JoinType::Full] {
            let plan = JoinPlan {
                how,
                resolved: Resolved::Shuffle(Shuffle),
                partitions: 5,
                workers: 3,
            };
            let run = |late_bounds: Option<LateBounds>, name: &str, checksum: bool| {
                let path = dir.path().join(name);
                let schema = output_schema(
                    &side(&large).input.selected,
                    &side(&small).input.selected,
                    how,
                );
                let writer = OutputWriter::create(
                    &path,
                    FileFormat::Parquet,
                    OutputCompression::Zstd,
                    Arc::clone(&schema),
                )
                .unwrap();
                let target = OutputTarget::File {
                    writer,
                    schema,
                    path: path.clone(),
                    checksum,
                };
                let report = run_stream_with(
                    side(&large),
                    side(&small),
                    plan,
                    Some(target),
                    None,
                    None,
                    late_bounds,
                )
                .unwrap();
                (report.output_rows, report.checksum, read_back(&path))
            };
            let kept = run(None, "kept.parquet", true);
            // Keys 0..1000 on both sides, the small side's 1,500 rows each key once or twice.
            assert!(kept.0 > 400_000, "{how:?}: {} rows", kept.0);
            assert!(kept.1.is_some(), "{how:?}: a checksum asked for");
            let unhashed = run(None, "unhashed.parquet", false);
            assert_eq!((unhashed.0, unhashed.1), (kept.0, None), "{how:?}");
            assert!(unhashed.2 .0 == kept.2 .0, "{how:?}: the rows differ");
            for (pairs, checksum) in [(16 << 20, true), (50_000, true), (50_000, false)] {
                let bounds = LateBounds {
                    pairs,
                    min_bytes: 1 << 20,
                };
                let (rows, sum, (written, groups)) = run(Some(bounds), "late.parquet", checksum);
                let what = format!("{how:?}, {pairs} pairs, checksum {checksum}");
                assert_eq!(rows, kept.0, "{what}");
                assert_eq!(sum, kept.1.filter(|_| checksum), "{what}");
                assert!(written == kept.2 .0, "{what}: the rows differ");
                let (last, whole) = groups.split_last().unwrap();
                assert!(
                    whole.iter().all(|&rows| rows == 65_536),
                    "{what}: {groups:?}"
                );
                assert!((1..=65_536).contains(last), "{what}: {groups:?}");
            }
        }
    }

    /// A page found corrupt while the join reads it (the footer is fine) ends the run with an
    /// input error naming the file, returned to the caller: a program that embeds the runtime
    /// goes on, and every worker stops, in the join itself (Shuffle-Join) and in AM-Join's key
    /// count before it.
    #[test]
    fn an_input_found_corrupt_while_joining_is_an_error_returned_to_the_caller() {
        let dir = tempfile::tempdir().unwrap();
        let (left, right) = (
            dir.path().join("left.parquet"),
            dir.path().join("right.parquet"),
        );
        write_table(&left, 200_000);
        write_table(&right, 20_000);
        let mut bytes = std::fs::read(&left).unwrap();
        // The middle half: its row groups' pages, not the footer at the end.
        let quarter = bytes.len() / 4;
        bytes[quarter..3 * quarter].fill(0xA5);
        std::fs::write(&left, &bytes).unwrap();
        let keys = ["key".to_string()];
        let side = |path: &Path| StreamSide::open(path, FileFormat::Parquet, &keys).unwrap();
        for resolved in [
            Resolved::Shuffle(Shuffle),
            Resolved::Am(Am {
                params: AmParams::default(),
            }),
        ] {
            let plan = JoinPlan {
                how: JoinType::Inner,
                resolved,
                partitions: 4,
                workers: 2,
            };
            match run_stream(side(&left), side(&right), plan, None, None, None) {
                Err(Error::Input(message)) => {
                    assert!(message.contains("left.parquet"), "{resolved:?}: {message}")
                }
                Err(other) => panic!("{resolved:?}: not an input error: {other:?}"),
                Ok(report) => panic!("{resolved:?}: joined {} rows", report.output_rows),
            }
        }
    }
}
