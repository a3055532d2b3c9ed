//! Runs a planned join on a multi-process timely cluster, each process holding only the rows it
//! read: from memory ([`execute_cluster`]) or read while the join runs
//! ([`execute_cluster_stream`], a [`RowSource`] per process, as on one process).
//!
//! Every process runs this with its own rows and the same arguments. Before anything is planned,
//! the processes exchange what each read (row counts, its broadcast budget, a fingerprint of its
//! arguments), so that every worker plans from the same cluster-wide facts and so builds the same
//! dataflows: timely requires that, and a plan made from one process's rows alone would differ
//! between processes. A process's rows are home to the partitions its own workers host
//! ([`RowHomes::of_process`]), so strategies that leave records in place never move them between
//! processes. At the end every worker's load, sink summary and strategy report are gathered on
//! worker 0, so process 0 can describe the whole cluster.
//!
//! Networking is timely's own (`CommunicationConfig::Cluster`, the meaning of timely's `-n -p -h`),
//! or connections the caller opened and authenticated ([`Network::Connected`]).
//! `execute_cluster` returns once the join is done everywhere, or an error when the cluster could
//! not agree; a process that dies makes timely's network threads panic in the others, which then
//! return an error. Timely waits for peers to connect without a limit; callers that want a bound
//! keep a watchdog on the call (the `skewjoin` binary does).

use std::cell::RefCell;
use std::net::TcpStream;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use skewjoin_operators::{JoinKey, JoinType, LoadReport, PartitionLoad, Partitioning, Side};
use timely::communication::allocator::zero_copy::initialize::initialize_networking_from_sockets;
use timely::communication::allocator::{AllocatorBuilder, ProcessBuilder};
use timely::communication::{Config as CommunicationConfig, Hooks};
use timely::dataflow::operators::vec::Broadcast;
use timely::dataflow::operators::{Exchange, Input, Inspect, Probe};
use timely::dataflow::{InputHandle, ProbeHandle};
use timely::worker::Worker;
use timely::{ExchangeData, WorkerConfig};

use crate::error::PlanError;
use crate::exec::{run_worker, Feed, JobKind, JoinJob, MemoryFeed, PairSink, RowHomes, RowValue};
use crate::exec_stream::{RowSource, StreamFeed, StreamJob};
use crate::report::StrategyReport;
use crate::skew_check::{sampled_skew, KeySample, Skew};
use crate::strategy::Resolved;
use crate::usage_err;
use crate::work_costs::WorkCosts;

/// How a process connects to the others.
#[derive(Debug)]
pub enum Network {
    /// Timely connects: its handshake is an 8-byte process index, which anyone who can reach the
    /// port can send; for tests and trusted networks.
    Timely,
    /// Connections the caller opened and authenticated, to every other process by index, `None`
    /// at this one; process `i` must have connected to every `j < i` and accepted from every
    /// `j > i`, as timely does.
    Connected(Vec<Option<TcpStream>>),
}

/// This process's place in a cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterSpec {
    /// Worker threads per process.
    pub threads: usize,
    /// This process's index, `0..addresses.len()`.
    pub process: usize,
    /// `host:port` of every process, by index.
    pub addresses: Vec<String>,
}

impl ClusterSpec {
    /// How many processes.
    pub fn processes(&self) -> usize {
        self.addresses.len()
    }

    /// Every worker of the cluster.
    pub fn total_workers(&self) -> usize {
        self.threads * self.processes()
    }

    /// Checks what the cluster relies on: a process index in range, at least one thread, and
    /// every worker hosting at least one partition (each process's rows need a home there).
    pub fn check(&self, partitions: usize) -> Result<(), PlanError> {
        if self.addresses.is_empty() {
            return usage_err!("a cluster needs at least one process address");
        }
        if self.process >= self.processes() {
            return usage_err!(
                "process index {} is out of range for {} processes; use 0 to {}",
                self.process,
                self.processes(),
                self.processes() - 1
            );
        }
        if self.threads == 0 {
            return usage_err!("the worker count per process must be at least 1");
        }
        if partitions < self.total_workers() {
            return usage_err!(
                "{partitions} partitions for {} workers in all: in a cluster every worker must \
                 host a partition, since each process's rows stay on its own workers; use at \
                 least {} partitions",
                self.total_workers(),
                self.total_workers()
            );
        }
        Ok(())
    }
}

/// What one process tells the others before planning.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ProcessFacts {
    /// Left rows this process read.
    pub left_rows: u64,
    /// Right rows this process read.
    pub right_rows: u64,
    /// The most rows this process can afford to receive as a broadcast copy.
    pub broadcast_limit: u64,
    /// A hash of the arguments that must agree across processes (join type, strategy, key
    /// columns, tuning); processes started with different ones refuse to run.
    pub fingerprint: u64,
    /// For `auto`, a sample of this process's keys ([`KeySample::for_rows`]); empty otherwise.
    pub key_sample: KeySample,
    /// How `auto`'s skew check weighs work on this cluster ([`WorkCosts::of_run`]).
    pub work_costs: WorkCosts,
}

/// What the whole cluster read, as every worker sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ClusterFacts {
    /// Left rows over all processes.
    pub left_rows: u64,
    /// Right rows over all processes.
    pub right_rows: u64,
    /// The smallest broadcast limit of any process: a copy must fit everywhere.
    pub broadcast_limit: u64,
    /// Whether the processes sent key samples (`auto`), and so whether `skew` was checked.
    pub sampled: bool,
    /// What the skew check found on every process's key sample ([`sampled_skew`]) for the
    /// cluster's partitions and workers: the hottest key's predicted load, if any key is hot.
    pub skew: Option<Skew>,
    /// How work is weighed on this cluster, as every process sent it, the link weighed as the
    /// process with the fewest cores for its workers weighs it.
    pub work_costs: WorkCosts,
}

/// What a cluster run produced, as this process sees it.
#[derive(Clone, Debug)]
pub struct ClusterOutput<S> {
    /// The strategy every process ran.
    pub resolved: Resolved,
    /// The cluster-wide facts it was planned from.
    pub facts: ClusterFacts,
    /// Whether this output describes the whole cluster (on process 0) or this process alone.
    pub whole_cluster: bool,
    /// Per-partition load: every partition on process 0, this process's partitions elsewhere.
    pub loads: LoadReport,
    /// Sink summaries by worker index: every worker's on process 0, this process's elsewhere.
    pub summaries: Vec<(usize, S)>,
    /// The strategy's decisions.
    pub report: StrategyReport,
    /// Wall time from the moment the cluster formed to the end of the join.
    pub elapsed: Duration,
}

impl<S> ClusterOutput<S> {
    /// The same output with each worker's summary made a `T`: runs whose sinks differ report
    /// alike.
    pub fn map_summaries<T>(self, f: impl Fn(S) -> T) -> ClusterOutput<T> {
        ClusterOutput {
            resolved: self.resolved,
            facts: self.facts,
            whole_cluster: self.whole_cluster,
            loads: self.loads,
            summaries: self
                .summaries
                .into_iter()
                .map(|(worker, summary)| (worker, f(summary)))
                .collect(),
            report: self.report,
            elapsed: self.elapsed,
        }
    }
}

/// One worker's result, as gathered on worker 0. The strategy report travels as JSON: its serde
/// form skips absent parts, which timely's binary encoding cannot represent.
type WorkerResult<S> = (
    usize,
    Result<(Vec<(u32, PartitionLoad)>, S, String), String>,
);

/// What each worker returns to the caller of `timely::execute`.
struct WorkerReturn<S> {
    resolved: Resolved,
    facts: ClusterFacts,
    /// This worker's own result.
    own: WorkerResult<S>,
    /// On worker 0, every worker's result (its own included); elsewhere empty.
    gathered: Vec<WorkerResult<S>>,
}

/// Runs `job` (this process's rows; its `resolved` is replaced by `decide`'s answer and its
/// `workers` by `spec.threads`) as process `spec.process` of a cluster. `facts` is what this
/// process read; `decide` chooses the strategy from the cluster-wide facts and must give the
/// same answer on every process for the same facts. Each worker feeds its rows as
/// `make_value(side, row, hash)` and sends output rows to `make_sink(worker)`. `on_start` is
/// called by each worker as it starts, once timely has connected every process.
#[allow(clippy::too_many_arguments)]
pub fn execute_cluster<K, V, S, D, F, M, C>(
    job: JoinJob<K>,
    spec: &ClusterSpec,
    facts: ProcessFacts,
    decide: D,
    make_value: F,
    make_sink: M,
    on_start: C,
) -> Result<ClusterOutput<S::Summary>, PlanError>
where
    K: JoinKey + Sync,
    V: RowValue,
    S: PairSink<V>,
    S::Summary: ExchangeData + Clone,
    D: Fn(&ClusterFacts) -> Result<Resolved, String> + Send + Sync + 'static,
    F: Fn(Side, u32, u64) -> V + Send + Sync + 'static,
    M: Fn(usize) -> S + Send + Sync + 'static,
    C: Fn() + Send + Sync + 'static,
{
    job.check()?;
    let (how, partitions) = (job.how, job.partitions);
    let rows = ProcessRows::Memory(job);
    run_cluster(
        rows,
        how,
        partitions,
        spec,
        Network::Timely,
        facts,
        decide,
        make_value,
        make_sink,
        on_start,
    )
}

/// [`execute_cluster`] with this process's rows read while the join runs, as
/// [`execute_stream`](crate::exec_stream::execute_stream) reads them on one process: `source`
/// sends this process's share of each side, `job.left_rows` and `job.right_rows` rows (its
/// `resolved` is replaced by `decide`'s answer and its `workers` by `spec.threads`). The
/// process's first worker reads the left side and its second (or first) the right; rows go to
/// home partitions on this process's workers, as they would from memory.
///
/// `make_value(side, row, hash)` is called on the reading worker while `source` is sending that
/// row, so a value may be built from what the source is reading at that moment.
///
/// `sockets`, if given, are connections the caller opened (and authenticated) to every other
/// process, by index, `None` at this one (see [`Network`]); without them timely connects itself.
#[allow(clippy::too_many_arguments)]
pub fn execute_cluster_stream<K, R, V, S, D, F, M, C>(
    job: StreamJob,
    source: Arc<R>,
    spec: &ClusterSpec,
    network: Network,
    facts: ProcessFacts,
    decide: D,
    make_value: F,
    make_sink: M,
    on_start: C,
) -> Result<ClusterOutput<S::Summary>, PlanError>
where
    K: JoinKey + Sync,
    R: RowSource<K>,
    V: RowValue,
    S: PairSink<V>,
    S::Summary: ExchangeData + Clone,
    D: Fn(&ClusterFacts) -> Result<Resolved, String> + Send + Sync + 'static,
    F: Fn(Side, u32, u64) -> V + Send + Sync + 'static,
    M: Fn(usize) -> S + Send + Sync + 'static,
    C: Fn() + Send + Sync + 'static,
{
    if job.left_rows >= u64::from(u32::MAX) || job.right_rows >= u64::from(u32::MAX) {
        return usage_err!("an input share has 2^32 - 1 rows or more; split it into several files");
    }
    if (job.left_rows, job.right_rows) != (facts.left_rows, facts.right_rows) {
        return usage_err!(
            "the job has {} and {} rows but the facts say {} and {}",
            job.left_rows,
            job.right_rows,
            facts.left_rows,
            facts.right_rows
        );
    }
    let rows = ProcessRows::Streamed {
        rows: (job.left_rows, job.right_rows),
        source: source as Arc<dyn RowSource<K>>,
    };
    run_cluster(
        rows,
        job.how,
        job.partitions,
        spec,
        network,
        facts,
        decide,
        make_value,
        make_sink,
        on_start,
    )
}

/// Where a process's rows come from.
enum ProcessRows<K> {
    /// In memory, each worker feeding the rows whose home it hosts.
    Memory(JoinJob<K>),
    /// Read while the join runs.
    Streamed {
        /// The rows of each side `source` sends.
        rows: (u64, u64),
        source: Arc<dyn RowSource<K>>,
    },
}

/// The cluster run behind [`execute_cluster`] and [`execute_cluster_stream`].
#[allow(clippy::too_many_arguments)]
fn run_cluster<K, V, S, D, F, M, C>(
    rows: ProcessRows<K>,
    how: JoinType,
    partitions: usize,
    spec: &ClusterSpec,
    network: Network,
    facts: ProcessFacts,
    decide: D,
    make_value: F,
    make_sink: M,
    on_start: C,
) -> Result<ClusterOutput<S::Summary>, PlanError>
where
    K: JoinKey + Sync,
    V: RowValue,
    S: PairSink<V>,
    S::Summary: ExchangeData + Clone,
    D: Fn(&ClusterFacts) -> Result<Resolved, String> + Send + Sync + 'static,
    F: Fn(Side, u32, u64) -> V + Send + Sync + 'static,
    M: Fn(usize) -> S + Send + Sync + 'static,
    C: Fn() + Send + Sync + 'static,
{
    if partitions == 0 {
        return usage_err!("the partition count must be at least 1");
    }
    spec.check(partitions)?;
    let threads = spec.threads;
    let process = spec.process;
    let (allocators, guard) = match network {
        Network::Timely => CommunicationConfig::Cluster {
            threads,
            process,
            addresses: spec.addresses.clone(),
            report: false,
            zerocopy: false,
        }
        .try_build()?,
        Network::Connected(sockets) => {
            if sockets.len() != spec.processes()
                || sockets
                    .iter()
                    .enumerate()
                    .any(|(i, s)| s.is_none() != (i == process))
            {
                return usage_err!(
                    "{} connections given for {} processes; every process but this one needs one",
                    sockets.iter().flatten().count(),
                    spec.processes()
                );
            }
            let hooks = Hooks::default();
            let local = ProcessBuilder::new_typed_vector(
                threads,
                hooks.refill.clone(),
                hooks.spill.clone(),
            );
            let (builders, guard) =
                initialize_networking_from_sockets(local, sockets, process, threads, hooks)
                    .map_err(|error| format!("failed to initialize networking: {error}"))?;
            let builders = builders.into_iter().map(AllocatorBuilder::Tcp).collect();
            (builders, Box::new(guard) as Box<dyn std::any::Any + Send>)
        }
    };
    // The join's time starts when the cluster has formed, not while processes wait for each other.
    let start = Arc::new(std::sync::OnceLock::new());
    let started = Arc::clone(&start);
    let rows = Arc::new(rows);
    let guards = timely::execute::execute_from(
        allocators,
        guard,
        WorkerConfig::default(),
        move |worker| -> Result<WorkerReturn<S::Summary>, String> {
            started.get_or_init(Instant::now);
            on_start();
            let partitioning = Partitioning::new(partitions, worker.peers());
            let first_worker = process * threads;
            let homes = RowHomes::of_process(&partitioning, first_worker, threads);
            // One worker per process speaks for it; every worker hears every process.
            let mine = if worker.index() % threads == 0 {
                vec![facts.clone()]
            } else {
                Vec::new()
            };
            let heard = exchange(worker, mine, true);
            let cluster = agree(&heard, partitions, worker.peers())?;
            let resolved = decide(&cluster)?;
            let sink = make_sink(worker.index());
            let totals = (cluster.left_rows, cluster.right_rows);
            // A worker whose sink failed still takes part in the gather: every worker must build the
            // same dataflows, or worker 0 would wait for it forever.
            let (mut memory, mut streamed);
            let feed: &mut dyn Feed<K> = match &*rows {
                ProcessRows::Memory(job) => {
                    memory = MemoryFeed::new(job, &partitioning, &homes);
                    &mut memory
                }
                ProcessRows::Streamed { rows, source } => {
                    streamed = StreamFeed {
                        source: Arc::clone(source),
                        local: *rows,
                        workers: first_worker..first_worker + threads,
                    };
                    &mut streamed
                }
            };
            let result = run_worker(
                worker,
                JobKind { how, resolved },
                partitioning,
                &homes,
                totals,
                feed,
                &make_value,
                sink,
            )
            .and_then(|output| {
                let report = serde_json::to_string(&output.report)
                    .map_err(|error| format!("encoding the strategy report: {error}"))?;
                Ok((output.loads, output.summary, report))
            });
            let own = (worker.index(), result);
            let gathered = exchange(worker, vec![own.clone()], false);
            Ok(WorkerReturn {
                resolved,
                facts: cluster,
                own,
                gathered,
            })
        },
    )?;

    let mut loads = LoadReport::new(partitions);
    let mut summaries = Vec::new();
    let mut report = StrategyReport::default();
    let mut decided = None;
    let mut own = Vec::new();
    let mut gathered = Vec::new();
    for returned in guards.join() {
        let returned = returned
            .map_err(PlanError::Internal)?
            .map_err(PlanError::from_worker)?;
        decided.get_or_insert((returned.resolved, returned.facts));
        own.push(returned.own);
        gathered.extend(returned.gathered);
    }
    // Worker 0 gathered everyone's results; every other process describes just its own.
    let whole_cluster = process == 0;
    for (index, result) in if whole_cluster { gathered } else { own } {
        let (worker_loads, summary, worker_report) =
            result.map_err(|message| format!("worker {index}: {message}"))?;
        let worker_report: StrategyReport = serde_json::from_str(&worker_report)
            .map_err(|error| format!("worker {index}: decoding its strategy report: {error}"))?;
        loads.add(&worker_loads);
        summaries.push((index, summary));
        report.merge(worker_report);
    }
    let (resolved, facts) =
        decided.ok_or_else(|| PlanError::Internal("the cluster ran no workers".into()))?;
    summaries.sort_by_key(|(index, _)| *index);
    Ok(ClusterOutput {
        resolved,
        facts,
        whole_cluster,
        loads,
        summaries,
        report,
        elapsed: start.get().map_or(Duration::ZERO, Instant::elapsed),
    })
}

/// Combines the facts every process sent: sums of rows, the smallest budget; different
/// fingerprints or work costs mean the processes were started with different arguments (or
/// different builds).
fn agree(
    heard: &[ProcessFacts],
    partitions: usize,
    workers: usize,
) -> Result<ClusterFacts, String> {
    let first = heard.first().ok_or("no process sent its facts")?;
    // The link's weight depends on each machine's cores, so it may differ: the slowest rules.
    let unlinked = |costs: WorkCosts| WorkCosts {
        crossing_per_mille: 0,
        ..costs
    };
    if heard.iter().any(|facts| {
        (facts.fingerprint, unlinked(facts.work_costs))
            != (first.fingerprint, unlinked(first.work_costs))
    }) {
        return Err(
            "the processes were started with different join arguments; start every process \
             with the same arguments (only --process may differ)"
                .into(),
        );
    }
    let work_costs = WorkCosts {
        crossing_per_mille: heard
            .iter()
            .map(|facts| facts.work_costs.crossing_per_mille)
            .max()
            .unwrap_or(0),
        ..first.work_costs
    };
    // A default sample is none taken: the strategy was not `auto`.
    let sampled = heard
        .iter()
        .any(|facts| facts.key_sample != KeySample::default());
    Ok(ClusterFacts {
        left_rows: heard.iter().map(|facts| facts.left_rows).sum(),
        right_rows: heard.iter().map(|facts| facts.right_rows).sum(),
        broadcast_limit: heard
            .iter()
            .map(|facts| facts.broadcast_limit)
            .min()
            .unwrap_or(0),
        sampled,
        work_costs,
        skew: if sampled {
            let samples: Vec<KeySample> =
                heard.iter().map(|facts| facts.key_sample.clone()).collect();
            sampled_skew(&samples, partitions, workers, work_costs)
        } else {
            None
        },
    })
}

/// A small dataflow of its own: sends `mine` to every worker (`to_all`) or to worker 0, and
/// returns what this worker received once every worker has sent.
fn exchange<T: ExchangeData + Clone>(worker: &mut Worker, mine: Vec<T>, to_all: bool) -> Vec<T> {
    let received = Rc::new(RefCell::new(Vec::new()));
    let mut input: InputHandle<u32, _> = InputHandle::new();
    let probe = ProbeHandle::new();
    worker.dataflow::<u32, _, _>(|scope| {
        let stream = scope.input_from(&mut input).container::<Vec<T>>();
        let stream = if to_all {
            stream.broadcast()
        } else {
            stream.exchange(|_: &T| 0)
        };
        let sink = Rc::clone(&received);
        stream
            .inspect(move |record| sink.borrow_mut().push(record.clone()))
            .probe_with(&probe);
    });
    for record in mine {
        input.send(record);
    }
    input.close();
    crate::exec::step_until_done(worker, &probe);
    received.take()
}

#[cfg(test)]
mod tests;
