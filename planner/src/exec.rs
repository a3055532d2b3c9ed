//! Runs a planned join over in-memory keys on a pool of timely worker threads.
//!
//! The values that flow through the dataflow are [`RowRef`]s, a row number and the row's hash, so
//! records stay small, whatever a row carries is looked up only for output rows, and checksums
//! need no lookup at all. Row `i` of a side with `n` rows has
//! home partition `partitioning.partition_of_row(i, n)` (contiguous ranges), and is fed by the
//! worker hosting that partition.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use skewjoin_operators::heavy_hitters::summarised_hot_keys;
use skewjoin_operators::join_logic::JoinLogic;
use skewjoin_operators::key_stats::{hot_keys, KeyCount, KeyCounts};
use skewjoin_operators::{
    JoinConfig, JoinKey, JoinType, JoinedRow, LoadReport, PartitionLoad, Partitioning, Side,
};
use timely::dataflow::operators::{Concat, Exchange, Input, Inspect, Probe};
use timely::dataflow::StreamVec;
use timely::dataflow::{InputHandle, ProbeHandle};
use timely::worker::Worker;
use timely::ExchangeData;

use crate::am_join::params::{AmParams, Statistics};
use crate::am_join::plan::AmPlan;
use crate::am_join::planning::AmPlanning;
use crate::error::PlanError;
use crate::home::Home;
use crate::join::SkewJoin;
use crate::report::{Observers, StrategyReport};
use crate::strategy::Resolved;
use crate::usage_err;

/// A row as it travels through a join: its row number and its hash (zero when the job has none).
pub type RowRef = (u32, u64);

/// What travels through a join for each input row: at least the row's number on the process
/// that read it and its hash, for the home partition and the checksum.
pub trait RowValue: ExchangeData + Clone {
    /// The row's number among the rows its process read.
    fn row(&self) -> u32;
    /// The row's hash (zero when the job has none).
    fn hash(&self) -> u64;
}

impl RowValue for RowRef {
    #[inline]
    fn row(&self) -> u32 {
        self.0
    }
    #[inline]
    fn hash(&self) -> u64 {
        self.1
    }
}

/// A row that carries its own contents, for joins whose output is written by a process that may
/// not hold the row: in a multi-process cluster, a row's bytes travel with it (the encoding is
/// the caller's; the runtime uses Arrow's row format).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CarriedRow {
    /// The row's number on the process that read it.
    pub row: u32,
    /// Its hash.
    pub hash: u64,
    /// Its encoded contents.
    pub bytes: Vec<u8>,
}

impl RowValue for CarriedRow {
    #[inline]
    fn row(&self) -> u32 {
        self.row
    }
    #[inline]
    fn hash(&self) -> u64 {
        self.hash
    }
}

/// Where one worker's output rows go: each call is one output row, by left and right row
/// (`None` for a padded side, or the absent side of a semi or anti join), or a group of pairs
/// that share a row of one side.
pub trait PairSink<V = RowRef>: 'static {
    /// What the sink reports when the join is done.
    type Summary: Send + 'static;
    /// One output row.
    fn emit(&mut self, left: Option<&V>, right: Option<&V>);

    /// The pairs of every row of `lefts` with `right`, in order: what calling [`PairSink::emit`]
    /// once per pair does, which is the default. A hot key's pairs come this way, so a sink that
    /// sums its rows gains from doing it in one loop.
    #[inline]
    fn lefts_with<'v>(&mut self, lefts: impl ExactSizeIterator<Item = &'v V>, right: &V)
    where
        V: 'v,
    {
        for left in lefts {
            self.emit(Some(left), Some(right));
        }
    }

    /// The pairs of `left` with every row of `rights`, in order (see [`PairSink::lefts_with`]).
    #[inline]
    fn left_with_rights<'v>(&mut self, left: &V, rights: impl ExactSizeIterator<Item = &'v V>)
    where
        V: 'v,
    {
        for right in rights {
            self.emit(Some(left), Some(right));
        }
    }

    /// Whether the run is no longer wanted (its caller was interrupted, its reader went away):
    /// the workers then stop between steps, drop the join and fail with [`STOPPED`], and
    /// [`PairSink::finish`] is not called. Asked between steps, not per row.
    fn stopped(&self) -> bool {
        false
    }

    /// Called once after the last row.
    fn finish(self) -> Result<Self::Summary, String>;
}

// The message of a stopped run lives with the error kinds; it is also here, next to `PairSink`,
// where callers have found it.
pub use crate::error::STOPPED;

/// A worker's sink as the join's logic: every output row goes to the sink, a group of pairs in
/// one call (and one borrow).
struct SinkLogic<S>(Rc<RefCell<S>>);

impl<K, V, S: PairSink<V>> JoinLogic<K, V, V, ()> for SinkLogic<S> {
    #[inline]
    fn row(&mut self, _: &K, left: Option<&V>, right: Option<&V>, _: &mut Vec<()>) {
        self.0.borrow_mut().emit(left, right)
    }

    #[inline]
    fn lefts_with<'v>(
        &mut self,
        _: &K,
        lefts: impl ExactSizeIterator<Item = &'v V>,
        right: &V,
        _: &mut Vec<()>,
    ) where
        V: 'v,
    {
        self.0.borrow_mut().lefts_with(lefts, right)
    }

    #[inline]
    fn left_with_rights<'v>(
        &mut self,
        _: &K,
        left: &V,
        rights: impl ExactSizeIterator<Item = &'v V>,
        _: &mut Vec<()>,
    ) where
        V: 'v,
    {
        self.0.borrow_mut().left_with_rights(left, rights)
    }
}

/// The partitions that are home to the rows a process read, and which row goes to which: rows
/// are cut into contiguous runs, one per partition hosted in the process, in partition order.
/// With one process every partition is here, and row `i` of `n` is home to
/// `partitioning.partition_of_row(i, n)`.
#[derive(Clone, Debug)]
pub struct RowHomes {
    here: Rc<[u32]>,
    /// Cuts rows into `here.len()` runs.
    runs: Partitioning,
}

impl RowHomes {
    /// Every partition: the rows of a one-process run.
    pub fn all(partitioning: &Partitioning) -> RowHomes {
        RowHomes::new((0..partitioning.partitions() as u32).collect())
    }

    fn new(here: Rc<[u32]>) -> RowHomes {
        let runs = Partitioning::new(here.len().max(1), 1);
        RowHomes { here, runs }
    }

    /// The partitions hosted by the workers `first_worker..first_worker + threads` of a cluster:
    /// one process's.
    pub fn of_process(
        partitioning: &Partitioning,
        first_worker: usize,
        threads: usize,
    ) -> RowHomes {
        let hosts = first_worker..first_worker + threads;
        RowHomes::new(
            (0..partitioning.partitions() as u32)
                .filter(|&p| hosts.contains(&partitioning.owner(p)))
                .collect(),
        )
    }

    /// How many partitions are home to this process's rows.
    pub fn len(&self) -> usize {
        self.here.len()
    }

    /// Whether no partition is (the process then cannot hold rows).
    pub fn is_empty(&self) -> bool {
        self.here.is_empty()
    }

    /// The home partition of row `row` of `rows`.
    #[inline]
    pub fn home(&self, row: u64, rows: u64) -> u32 {
        self.here[self.runs.partition_of_row(row, rows) as usize]
    }

    /// The rows whose home is `partition`, for `rows` rows (empty when it is not here).
    pub fn rows_of(&self, partition: u32, rows: u64) -> std::ops::Range<u64> {
        match self.here.binary_search(&partition) {
            Ok(run) => self.runs.rows_of_partition(run as u32, rows),
            Err(_) => 0..0,
        }
    }
}

/// A join over in-memory keys, fully planned.
#[derive(Clone, Debug)]
pub struct JoinJob<K> {
    /// The left keys, by row number.
    pub left: Arc<[K]>,
    /// The right keys, by row number.
    pub right: Arc<[K]>,
    /// Each left row's hash, carried with it to the output (empty: all zero).
    pub left_hashes: Arc<[u64]>,
    /// Each right row's hash (empty: all zero).
    pub right_hashes: Arc<[u64]>,
    /// The join type.
    pub how: JoinType,
    /// The strategy.
    pub resolved: Resolved,
    /// P.
    pub partitions: usize,
    /// W, the number of worker threads.
    pub workers: usize,
}

impl<K> JoinJob<K> {
    /// Checks what the executors rely on: row numbers fit in 32 bits, hashes for every row or
    /// none, at least one partition.
    pub(crate) fn check(&self) -> Result<(), PlanError> {
        if self.left.len() >= u32::MAX as usize || self.right.len() >= u32::MAX as usize {
            return usage_err!("an input has 2^32 - 1 rows or more; split it into several files");
        }
        if (!self.left_hashes.is_empty() && self.left_hashes.len() != self.left.len())
            || (!self.right_hashes.is_empty() && self.right_hashes.len() != self.right.len())
        {
            return usage_err!("row hashes must be given for every row or for none");
        }
        if self.partitions == 0 {
            return usage_err!("the partition count must be at least 1");
        }
        Ok(())
    }
}

/// What a job produced.
#[derive(Clone, Debug)]
pub struct JobOutput<S> {
    /// Per-partition load.
    pub loads: LoadReport,
    /// Each worker's sink summary, by worker index.
    pub summaries: Vec<S>,
    /// Wall time from the start of the workers to the end of the join (statistics included).
    pub elapsed: Duration,
    /// What the strategy decided: AM-Join's classes, Tree-Join's rounds, VPRP's ranges.
    pub report: StrategyReport,
}

/// How many records a worker sends before it lets the dataflow run.
pub(crate) const FEED_CHUNK: usize = 1 << 14;

/// Rows sent into the join's inputs at a time.
const SEND_BATCH: usize = 1 << 10;

/// Runs `job` on `job.workers` threads, giving each worker the sink `make_sink(worker)`.
pub fn execute<K, S, M>(job: JoinJob<K>, make_sink: M) -> Result<JobOutput<S::Summary>, PlanError>
where
    K: JoinKey + Sync,
    S: PairSink,
    M: Fn(usize) -> S + Send + Sync + 'static,
{
    job.check()?;
    if job.workers == 0 {
        return usage_err!("the worker count must be at least 1");
    }
    let partitions = job.partitions;
    let workers = job.workers;
    let start = Instant::now();
    let job = Arc::new(job);
    let guards = timely::execute(timely::Config::process(workers), move |worker| {
        let partitioning = Partitioning::new(job.partitions, worker.peers());
        let sink = make_sink(worker.index());
        let homes = RowHomes::all(&partitioning);
        let totals = (job.left.len() as u64, job.right.len() as u64);
        let mut rows = MemoryFeed::new(&job, &partitioning, &homes);
        run_worker(
            worker,
            job.as_ref().into(),
            partitioning,
            &homes,
            totals,
            &mut rows,
            &row_ref,
            sink,
        )
    })?;
    gather(guards.join(), partitions, start)
}

/// Sums what the workers of a job produced, in worker order; the first error if any failed (a
/// worker that panicked is an internal error).
pub(crate) fn gather<S>(
    results: Vec<Result<Result<WorkerOutput<S>, String>, String>>,
    partitions: usize,
    start: Instant,
) -> Result<JobOutput<S>, PlanError> {
    let mut loads = LoadReport::new(partitions);
    let mut summaries = Vec::with_capacity(results.len());
    let mut report = StrategyReport::default();
    for result in results {
        let output = result
            .map_err(PlanError::Internal)?
            .map_err(PlanError::from_worker)?;
        loads.add(&output.loads);
        summaries.push(output.summary);
        report.merge(output.report);
    }
    Ok(JobOutput {
        loads,
        summaries,
        elapsed: start.elapsed(),
        report,
    })
}

/// What one worker's part of a job produced.
pub(crate) struct WorkerOutput<S> {
    /// The load of the partitions it hosts.
    pub loads: Vec<(u32, PartitionLoad)>,
    /// Its sink's summary.
    pub summary: S,
    /// What it saw of the strategy's decisions.
    pub report: StrategyReport,
}

/// Steps `worker` until `probe` is done, parking the thread (after timely's short idle spin)
/// while it has nothing to do. A worker waiting on others (another process's rows, a busier
/// worker's output) then costs no CPU: spinning would take it from this process's network
/// threads and from other work on the machine, and on a machine with more workers than cores,
/// from the workers that have work.
pub(crate) fn step_until_done(worker: &mut Worker, probe: &ProbeHandle<u32>) {
    step_until_done_or_stopped(worker, probe, &|| false);
}

/// How long a parked worker sleeps at most before it looks at its sink's
/// [`PairSink::stopped`] again: a worker waiting on a busier one is woken by nothing else.
const PARK_AT_MOST: std::time::Duration = std::time::Duration::from_millis(50);

/// [`step_until_done`], until `stopped` says the run is no longer wanted (it is asked between
/// steps); returns whether it stopped early.
pub(crate) fn step_until_done_or_stopped(
    worker: &mut Worker,
    probe: &ProbeHandle<u32>,
    stopped: &dyn Fn() -> bool,
) -> bool {
    while !probe.done() {
        if stopped() {
            return true;
        }
        // The browser's single worker runs on the page's thread, which must not park; it has
        // no one to wait for.
        if cfg!(target_arch = "wasm32") {
            worker.step();
        } else {
            worker.step_or_park(Some(PARK_AT_MOST));
        }
    }
    false
}

/// The value of a row that carries only its number and hash.
#[inline]
pub(crate) fn row_ref(_: Side, row: u32, hash: u64) -> RowRef {
    (row, hash)
}

/// What a worker needs to know of a job besides its rows: the join type and the strategy.
#[derive(Clone, Copy, Debug)]
pub(crate) struct JobKind {
    /// The join type.
    pub how: JoinType,
    /// The strategy.
    pub resolved: Resolved,
}

impl<K> From<&JoinJob<K>> for JobKind {
    fn from(job: &JoinJob<K>) -> JobKind {
        JobKind {
            how: job.how,
            resolved: job.resolved,
        }
    }
}

/// Where one worker's rows come from.
pub(crate) trait Feed<K> {
    /// The rows of each side that this process reads; homes cut them over its partitions.
    fn local_rows(&self) -> (u64, u64);
    /// Whether each row is sent by the worker hosting its home partition.
    fn fed_at_home(&self) -> bool {
        true
    }
    /// Sends this worker's rows of `side` as `send(key, row, hash)`, row numbers counted among
    /// this process's rows of that side, stepping `worker` every so often so the dataflows keep
    /// up. With `keys_only` a feed may leave hashes zero. After an error, nothing more is sent.
    fn feed(
        &mut self,
        worker: &mut Worker,
        keys_only: bool,
        side: Side,
        send: &mut dyn FnMut(K, u32, u64),
    ) -> Result<(), String>;
}

/// The rows of a [`JoinJob`], in memory: each worker sends the rows whose home it hosts.
pub(crate) struct MemoryFeed<'a, K> {
    job: &'a JoinJob<K>,
    partitioning: &'a Partitioning,
    homes: &'a RowHomes,
}

impl<'a, K> MemoryFeed<'a, K> {
    pub(crate) fn new(
        job: &'a JoinJob<K>,
        partitioning: &'a Partitioning,
        homes: &'a RowHomes,
    ) -> Self {
        MemoryFeed {
            job,
            partitioning,
            homes,
        }
    }
}

impl<K: JoinKey> Feed<K> for MemoryFeed<'_, K> {
    fn local_rows(&self) -> (u64, u64) {
        (self.job.left.len() as u64, self.job.right.len() as u64)
    }

    fn feed(
        &mut self,
        worker: &mut Worker,
        _keys_only: bool,
        side: Side,
        send: &mut dyn FnMut(K, u32, u64),
    ) -> Result<(), String> {
        let job = self.job;
        let (keys, hashes) = match side {
            Side::Left => (&job.left, &job.left_hashes),
            Side::Right => (&job.right, &job.right_hashes),
        };
        let mut sent = 0usize;
        for partition in self.partitioning.local_partitions(worker.index()) {
            for row in self.homes.rows_of(partition, keys.len() as u64) {
                let hash = hashes.get(row as usize).copied().unwrap_or(0);
                send(keys[row as usize].clone(), row as u32, hash);
                sent += 1;
                if sent.is_multiple_of(FEED_CHUNK) {
                    worker.step();
                }
            }
        }
        Ok(())
    }
}

/// One worker's part of a job, the same natively, in a cluster, streaming from files and in the
/// browser: the key statistics phase when the strategy plans from counts, then the join dataflow,
/// fed with this worker's rows from `rows` (home to `homes`; `totals` counts the rows of every
/// process) as `make_value(side, row, hash)`, and stepped until done. When `rows` fails, the
/// dataflows still run to the end on what was sent, so that every worker finishes, and the
/// error is returned.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_worker<K, V, S, F>(
    worker: &mut Worker,
    job: JobKind,
    partitioning: Partitioning,
    homes: &RowHomes,
    totals: (u64, u64),
    rows: &mut dyn Feed<K>,
    make_value: &F,
    sink: S,
) -> Result<WorkerOutput<S::Summary>, String>
where
    K: JoinKey,
    V: RowValue,
    S: PairSink<V>,
    F: Fn(Side, u32, u64) -> V,
{
    let observers = Observers::new();
    let sink = Rc::new(RefCell::new(sink));
    // Each side has two inputs: its records that join where they are fed, and those that go
    // to their home partition's worker first (see `GoesHome`). A side's inputs close (are
    // taken) when it has been fed.
    let mut inputs = [(); 2].map(|_| Some([(); 2].map(|_| InputHandle::new())));
    let probe = ProbeHandle::new();
    let (left_rows, right_rows) = totals;
    // AM-Join and Tree-Join plan from exact key counts, a first dataflow of their own.
    let mut failure = None;
    let plan = job.resolved.needs_key_stats().map(|params| {
        let (hot, floors) = key_statistics(worker, rows, &partitioning, totals, &params)
            .unwrap_or_else(|error| {
                failure = Some(error);
                (Vec::new(), None)
            });
        let mut plan = AmPlan::new(hot, &params, &partitioning, left_rows, right_rows);
        plan.set_summary_floors(floors);
        Rc::new(plan)
    });
    let am_summary = plan.as_ref().map(|plan| plan.summary().clone());
    // The plan was made from exact counts of the rows this dataflow is fed, at its one time.
    let plan = plan.map(AmPlanning::Exact);
    let (local_left, local_right) = rows.local_rows();
    // Rows not fed at home go there first only where the strategy needs them there.
    let goes_home = GoesHome::of(
        job.resolved,
        rows.fed_at_home(),
        homes,
        partitioning,
        (local_left, local_right),
        worker.index(),
    );
    worker.dataflow::<u32, _, _>(|scope| -> Result<(), String> {
        let [Some([left_input, left_away]), Some([right_input, right_away])] = &mut inputs else {
            unreachable!("the inputs close after the dataflow is built");
        };
        let mut left = scope.input_from(left_input);
        let mut right = scope.input_from(right_input);
        if let Some(goes_home) = &goes_home {
            // Only the records that go elsewhere pass through an exchange: an exchange of
            // every record cost a fifth of a streamed IB-Join's CPU time, when most records
            // are read by the worker that hosts their home.
            left = left.concat(goes_home.send(scope.input_from(left_away), Side::Left));
            right = right.concat(goes_home.send(scope.input_from(right_away), Side::Right));
        }
        // Homes follow this process's row counts: its rows are cut over its own partitions.
        let (homes_left, homes_right) = (homes.clone(), homes.clone());
        let home_left: Home<K, V> =
            Rc::new(move |_, row: &V| homes_left.home(row.row() as u64, local_left));
        let home_right: Home<K, V> =
            Rc::new(move |_, row: &V| homes_right.home(row.row() as u64, local_right));
        let sink = Rc::clone(&sink);
        let config = JoinConfig::new().with_partitions(partitioning.partitions());
        let mut join = left
            .skew_join(right)
            .resolved(job.resolved)
            .how(job.how)
            .config(&config)
            .homes(home_left, home_right)
            .observers(&observers);
        if let Some(plan) = plan {
            join = join.planning(plan);
        }
        join.with(SinkLogic(sink))
            .map_err(|error| error.to_string())?
            .probe_with(&probe);
        Ok(())
    })?;

    // The side the strategy copies is fed first, and its inputs close before the other side is
    // read: IB-Join then probes the large side's records as they come, rather than holding them
    // all until its index is complete. Each worker orders its own reading so; a side that
    // cannot be cut into parts (CSV) is read by one worker while another reads the other side,
    // and large records read before every worker has fed the small side are held until then.
    let first = job.resolved.copied_side().unwrap_or(Side::Left);
    for side in [first, first.other()] {
        let Some([input, away]) = &mut inputs[side.index()] else {
            continue;
        };
        if failure.is_none() {
            // Rows go in as containers of SEND_BATCH, not one at a time through the inputs'
            // container builders, whose checks per row cost more than the push.
            let mut batches = [Vec::new(), Vec::new()];
            let sent = rows.feed(worker, false, side, &mut |key, row, hash| {
                let moves = goes_home
                    .as_ref()
                    .is_some_and(|goes_home| goes_home.moves(&key, row, side));
                let (batch, input) = match moves {
                    false => (&mut batches[0], &mut *input),
                    true => (&mut batches[1], &mut *away),
                };
                if batch.capacity() == 0 {
                    batch.reserve(SEND_BATCH);
                }
                batch.push((key, make_value(side, row, hash)));
                if batch.len() == SEND_BATCH {
                    input.send_batch(batch);
                    batch.clear();
                }
            });
            let [here_batch, away_batch] = &mut batches;
            input.send_batch(here_batch);
            away.send_batch(away_batch);
            failure = sent.err();
        }
        inputs[side.index()] = None;
    }
    let stopped = step_until_done_or_stopped(worker, &probe, &|| sink.borrow().stopped());
    if stopped && failure.is_none() {
        failure = Some(STOPPED.to_string());
    }
    // Drop the finished (or stopped) dataflows, and with them their handles on the sink, rather than step
    // until timely tears them down (which a dataflow with a loop may never let happen on its own).
    for dataflow in worker.installed_dataflows() {
        worker.drop_dataflow(dataflow);
    }
    if let Some(error) = failure {
        return Err(error);
    }
    let sink = Rc::try_unwrap(sink)
        .map_err(|_| "the join's dataflow outlived the run".to_string())?
        .into_inner();
    Ok(WorkerOutput {
        loads: observers.loads.snapshot(),
        summary: sink.finish()?,
        report: observers.report(job.resolved.reports(), am_summary),
    })
}

/// Which of a worker's records go to the worker hosting their home partition before they join
/// (for inputs not fed at home): all of them where the strategy probes where a record is fed
/// (IB-Join and its baselines), only NULL keys where it spreads them over the partitions of the
/// worker that has them (VPRP and the basic Tree-Join: a streamed side is fed by one worker,
/// which would otherwise keep every NULL). The other records stay where they are, and the
/// strategy routes them; so does a record whose home is on the worker that read it.
struct GoesHome {
    /// Every record, not only NULL keys.
    every: bool,
    homes: RowHomes,
    partitioning: Partitioning,
    /// The rows of each side that this process reads.
    local: (u64, u64),
    /// This worker.
    here: usize,
}

impl GoesHome {
    /// The rule for `resolved` run on worker `here`, or `None` where no record moves.
    fn of(
        resolved: Resolved,
        fed_at_home: bool,
        homes: &RowHomes,
        partitioning: Partitioning,
        local: (u64, u64),
        here: usize,
    ) -> Option<Rc<GoesHome>> {
        let every = resolved.probes_in_place();
        (!fed_at_home && (every || resolved.spreads_nulls_locally())).then(|| {
            Rc::new(GoesHome {
                every,
                homes: homes.clone(),
                partitioning,
                local,
                here,
            })
        })
    }

    /// The worker hosting the home of row `row` of `side`.
    #[inline]
    fn owner(&self, row: u32, side: Side) -> usize {
        let rows = match side {
            Side::Left => self.local.0,
            Side::Right => self.local.1,
        };
        self.partitioning
            .owner(self.homes.home(u64::from(row), rows))
    }

    /// Whether the record of row `row` of `side`, with key `key`, goes elsewhere.
    #[inline]
    fn moves<K: JoinKey>(&self, key: &K, row: u32, side: Side) -> bool {
        (self.every || key.is_null()) && self.owner(row, side) != self.here
    }

    /// Sends each record of `stream` (of `side`) to the worker hosting its home.
    fn send<'s, K: JoinKey, V: RowValue>(
        self: &Rc<Self>,
        stream: StreamVec<'s, u32, (K, V)>,
        side: Side,
    ) -> StreamVec<'s, u32, (K, V)> {
        let rule = Rc::clone(self);
        stream.exchange(move |(_, value)| rule.owner(value.row(), side) as u64)
    }
}

/// What AM-Join's first phase finds: the hot keys with both counts, and with Space-Saving the
/// summaries' floors.
type KeyStatistics<K> = (Vec<KeyCount<K>>, Option<(u64, u64)>);

/// AM-Join's first phase, a dataflow of its own: key counts of both inputs (exact, or estimated
/// by Space-Saving summaries), and the keys above the statistics thresholds with both counts, as
/// every worker receives them; with Space-Saving, also the summaries' floors.
pub(crate) fn key_statistics<K: JoinKey>(
    worker: &mut Worker,
    rows: &mut dyn Feed<K>,
    partitioning: &Partitioning,
    totals: (u64, u64),
    params: &AmParams,
) -> Result<KeyStatistics<K>, String> {
    let thresholds = params.stats_thresholds(totals.0, totals.1, partitioning.partitions());
    let hot = Rc::new(RefCell::new(Vec::new()));
    let floors = Rc::new(RefCell::new(None));
    let mut left_input: InputHandle<u32, _> = InputHandle::new();
    let mut right_input: InputHandle<u32, _> = InputHandle::new();
    let probe = ProbeHandle::new();
    worker.dataflow::<u32, _, _>(|scope| {
        let left = scope.input_from(&mut left_input);
        let right = scope.input_from(&mut right_input);
        let sink = Rc::clone(&hot);
        match params.statistics {
            Statistics::Exact => {
                hot_keys(
                    left.partial_key_counts(),
                    right.partial_key_counts(),
                    thresholds,
                )
                .inspect(move |record| sink.borrow_mut().push(record.clone()))
                .probe_with(&probe);
            }
            Statistics::SpaceSaving { capacity } => {
                let capacity = match capacity {
                    0 => Statistics::default_capacity(
                        partitioning.partitions(),
                        params.hot_per_mille,
                    ),
                    given => given as usize,
                };
                let floors = Rc::clone(&floors);
                summarised_hot_keys(left, right, capacity, thresholds)
                    .inspect(move |(keys, left_floor, right_floor)| {
                        sink.borrow_mut().extend(keys.iter().cloned());
                        *floors.borrow_mut() = Some((*left_floor, *right_floor));
                    })
                    .probe_with(&probe);
            }
        }
    });
    let sent = rows
        .feed(worker, true, Side::Left, &mut |key, _, _| {
            left_input.send((key, ()))
        })
        .and_then(|()| {
            rows.feed(worker, true, Side::Right, &mut |key, _, _| {
                right_input.send((key, ()))
            })
        });
    left_input.close();
    right_input.close();
    step_until_done(worker, &probe);
    sent.map(|()| (hot.take(), floors.take()))
}

/// A sink that keeps every output row's row numbers.
#[derive(Debug, Default)]
pub struct CollectSink(pub Vec<(Option<u32>, Option<u32>)>);

impl PairSink for CollectSink {
    type Summary = Vec<(Option<u32>, Option<u32>)>;
    fn emit(&mut self, left: Option<&RowRef>, right: Option<&RowRef>) {
        self.0.push((left.map(|row| row.0), right.map(|row| row.0)));
    }
    fn finish(self) -> Result<Self::Summary, String> {
        Ok(self.0)
    }
}

/// The output rows of an in-memory join and the per-partition load.
pub type InMemoryJoin<K, L, R> = (Vec<JoinedRow<K, L, R>>, LoadReport);

/// Joins two slices of `(key, value)` rows with `resolved` on `workers` threads and returns the
/// output rows (in no particular order) with the per-partition load: the simplest way to run a
/// strategy, and what the tests compare with the nested-loop reference.
///
/// ```
/// use skewjoin_planner::exec::join_in_memory;
/// use skewjoin_planner::strategies::Shuffle;
/// use skewjoin_planner::strategy::Resolved;
/// use skewjoin_operators::JoinType;
///
/// let left = vec![(1i64, 'a'), (2, 'b'), (2, 'c')];
/// let right = vec![(2i64, 'x')];
/// let (rows, loads) = join_in_memory(&left, &right, JoinType::Inner, Resolved::from(Shuffle), 4, 2)
///     .unwrap();
/// assert_eq!(rows.len(), 2);
/// assert_eq!(loads.per_partition.len(), 4);
/// assert_eq!(loads.total_output(), 2);
/// ```
pub fn join_in_memory<K, L, R>(
    left: &[(K, L)],
    right: &[(K, R)],
    how: JoinType,
    resolved: Resolved,
    partitions: usize,
    workers: usize,
) -> Result<InMemoryJoin<K, L, R>, PlanError>
where
    K: JoinKey + Sync,
    L: Clone,
    R: Clone,
{
    let job = JoinJob {
        left: left.iter().map(|(k, _)| k.clone()).collect(),
        right: right.iter().map(|(k, _)| k.clone()).collect(),
        left_hashes: Arc::new([]),
        right_hashes: Arc::new([]),
        how,
        resolved,
        partitions,
        workers,
    };
    let output = execute(job, |_| CollectSink::default())?;
    let rows = output
        .summaries
        .into_iter()
        .flatten()
        .map(|(l, r)| {
            let key = match (l, r) {
                (Some(l), _) => left[l as usize].0.clone(),
                (None, Some(r)) => right[r as usize].0.clone(),
                (None, None) => unreachable!("an output row has at least one side"),
            };
            (
                key,
                l.map(|l| left[l as usize].1.clone()),
                r.map(|r| right[r as usize].1.clone()),
            )
        })
        .collect();
    Ok((rows, output.loads))
}
