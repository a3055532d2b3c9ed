//! `skewjoin join` as one process of a cluster.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use skewjoin_operators::{JoinType, Side};
use skewjoin_planner::choose::{choose, resolve, KeyCheck};
use skewjoin_planner::exec::{CarriedRow, RowRef};
use skewjoin_planner::exec_cluster::{
    execute_cluster_stream, ClusterFacts, ClusterSpec, Network, ProcessFacts,
};
use skewjoin_planner::exec_stream::StreamJob;
use skewjoin_planner::skew_check::KeySample;
use skewjoin_planner::strategy::{Choice, PlanInputs, Resolved, Strategy};
use skewjoin_planner::work_costs::WorkCosts;

use crate::cli::checks::{
    check_metrics_path, check_vprp_flags, check_writable_dir, join_columns, layout, output_columns,
    output_compression, parse_how, refuse_overwrite, with_vprp_flags,
};
use crate::cli::JoinArgs;
use crate::engine::{FileSource, OnReadError, RunReport, StreamSide};
use crate::error::{Error, Result};
use crate::io::{check_key_compat, output_schema, FileFormat, OutputCompression, Share};
use crate::link;
use crate::memory::broadcast_budget;
use crate::metrics::checksum_hex;
use crate::output_file::write_atomically;
use crate::plan::{metrics_for, tally_stream};
use crate::progress::Progress;
use skewjoin_planner::count_sink::CountSink;

use super::config::{cluster_secret, read_hostfile};
use super::handshake;
use super::manifest::{
    agreed_fields, check_replaceable, fingerprint, put_in_place, staged_dir, Manifest,
    ManifestPart, MANIFEST, PROCESS_0_MARK,
};
use super::rows::RowEncoder;
use super::sinks::{part_name, PartLayout, PartSink, WorkerSummary};
use super::watchdog::stop_on_peer_failure;
use skewjoin_planner::strategies::Shuffle;

/// The strategy for the cluster-wide facts: `auto` as on one process, except that no process
/// sees every key before the join: where it would shuffle, the skew check runs on every
/// process's key sample (`facts.skew`, see [`KeyCheck::sampled`]).
fn cluster_choice(
    strategy: Strategy,
    how: JoinType,
    facts: &ClusterFacts,
    workers: usize,
    args: &JoinArgs,
) -> std::result::Result<Choice, String> {
    let inputs = PlanInputs {
        how,
        left_rows: facts.left_rows,
        right_rows: facts.right_rows,
        workers,
        broadcast_limit: facts.broadcast_limit,
        costs: facts.work_costs,
    };
    let tuning = with_vprp_flags(&args.tuning(), &args.run);
    resolve(strategy, &inputs, &tuning, || {
        Ok::<_, String>(KeyCheck::sampled(facts.skew.filter(|_| facts.sampled)))
    })
}

/// `skewjoin join` as one process of a cluster.
pub fn join(args: JoinArgs) -> Result<()> {
    let cluster = &args.cluster;
    let processes = cluster.processes.unwrap_or(1);
    let process = cluster.process.unwrap_or(0);
    let hostfile = cluster
        .hostfile
        .clone()
        .ok_or_else(|| Error::Usage("--processes needs --hostfile".into()))?;
    if process >= processes {
        return Err(Error::Usage(format!(
            "--process {process} is out of range for --processes {processes}; use 0 to {}",
            processes - 1
        )));
    }
    let addresses = read_hostfile(&hostfile, processes)?;
    let secret = cluster_secret(cluster)?;
    let mut progress = Progress::new(args.quiet);
    let how = parse_how(&args.run.how)?;
    check_vprp_flags(&args.run)?;
    let strategy: Strategy = args
        .strategy
        .parse()
        .map_err(|e| Error::Usage(format!("--strategy: {e}")))?;
    // A strategy that cannot compute this join type whatever the sizes (a plain broadcast of a
    // full join) is refused now, as on one process (exit code 2), not after the cluster has
    // formed: the row counts of no process change that answer.
    choose(
        strategy,
        &PlanInputs {
            how,
            left_rows: 0,
            right_rows: 0,
            workers: 1,
            broadcast_limit: 0,
            costs: WorkCosts::CLUSTER,
        },
    )?;
    // --workers is per process; --partitions defaults to every worker of the cluster.
    let (threads, _) = layout(&args.run)?;
    let total_workers = threads * processes;
    let partitions = args.run.partitions.unwrap_or(total_workers);
    let spec = ClusterSpec {
        threads,
        process,
        addresses,
    };
    spec.check(partitions)
        .map_err(|error| Error::Usage(format!("--partitions: {error}")))?;
    let (left_on, right_on) = join_columns(&args)?;
    let explicit = args.format.as_deref().map(FileFormat::parse).transpose()?;
    let left_format = FileFormat::detect(&args.left, explicit)?;
    let right_format = FileFormat::detect(&args.right, explicit)?;
    let output = match &args.output {
        Some(dir) => {
            let explicit = args
                .output_format
                .as_deref()
                .map(FileFormat::parse)
                .transpose()?;
            let format = FileFormat::detect(dir, explicit).map_err(|_| {
                Error::Usage(format!(
                    "--output {}: in cluster mode the output is a directory of part files; name \
                     it with the format's extension (e.g. out.parquet) or give --output-format",
                    dir.display()
                ))
            })?;
            check_writable_dir(dir, "--output")?;
            if dir.exists() && !dir.is_dir() {
                return Err(Error::Usage(format!(
                    "--output {} is a file; in cluster mode the output is a directory of part \
                     files, so give a new path",
                    dir.display()
                )));
            }
            check_replaceable(dir)?;
            Some((dir.clone(), format))
        }
        None => None,
    };
    let compression = output_compression(&args, output.as_ref().map(|(_, format)| *format))?;
    check_metrics_path(&args, "the --output directory")?;
    let process_metrics = process_metrics_path(&args, process)?;

    let share = Share {
        index: process,
        count: processes,
    };
    let read_start = Instant::now();
    progress.say(&format!(
        "process {process} of {processes}: opening its share of {} and {}",
        args.left.display(),
        args.right.display()
    ));
    let mut left = StreamSide::open_share(&args.left, left_format, &left_on, share)?;
    let mut right = StreamSide::open_share(&args.right, right_format, &right_on, share)?;
    check_key_compat(
        (&args.left, left.input.schema.as_ref(), &left_on),
        (&args.right, right.input.schema.as_ref(), &right_on),
    )?;
    let columns = args.columns();
    let [left_columns, right_columns] = output_columns(
        &columns,
        how,
        [left.input.schema.as_ref(), right.input.schema.as_ref()],
        [left_on.as_slice(), right_on.as_slice()],
        [
            &args.left.display().to_string(),
            &args.right.display().to_string(),
        ],
    )?;
    if let Some(names) = left_columns {
        left.select(&names, columns.flag(Side::Left))?;
    }
    if let Some(names) = right_columns {
        right.select(&names, columns.flag(Side::Right))?;
    }
    let read_seconds = read_start.elapsed().as_secs_f64();
    let (left_rows, right_rows) = (left.input.rows, right.input.rows);
    progress.say(&format!(
        "process {process}: its shares hold {left_rows} and {right_rows} rows (opened in \
         {read_seconds:.2}s; read while joining); connecting to {} other process(es)",
        processes - 1
    ));

    let fields = agreed_fields(
        &args,
        &spec,
        partitions,
        output.as_ref(),
        (&left.input.selected, &right.input.selected),
    )?;
    let mut facts = ProcessFacts {
        left_rows,
        right_rows,
        broadcast_limit: broadcast_budget(args.broadcast_limit, args.memory_limit, threads).rows,
        fingerprint: fingerprint(&fields),
        key_sample: KeySample::default(),
        work_costs: match args.cluster.bandwidth {
            // A slow link makes a record sent cost more than its CPU; see `link`.
            Some(bits) => {
                WorkCosts::of_run(processes, args.output.is_some()).over_link(&link::link(
                    bits,
                    link::record_bytes(
                        &left.input.selected,
                        &right.input.selected,
                        args.output.is_some(),
                    ),
                    processes,
                    threads,
                ))
            }
            None => WorkCosts::of_run(processes, args.output.is_some()),
        },
    };
    let timeout = Duration::from_secs(args.cluster.connect_timeout);
    let token = handshake::random_hex(16)
        .map_err(|error| Error::Io(format!("cannot make a random run token: {error}")))?;
    let joined = handshake::join(handshake::Handshake {
        process,
        addresses: spec.addresses.clone(),
        secret,
        facts: handshake::Facts { fields, token },
        deadline: Instant::now() + timeout,
        timeout,
    })
    .map_err(|message| Error::Cluster(format!("process {process}: {message}")))?;
    progress.say(&format!(
        "process {process}: connected to every process, all started with the same arguments"
    ));
    // Sampled once connected, so that a slow pass over a large share is not counted against
    // --connect-timeout by the peers that wait for this process to listen.
    if strategy == Strategy::Auto {
        progress.say(&format!(
            "process {process}: sampling its keys for auto's skew check"
        ));
        facts.key_sample = sample_keys(&left, &right)?;
    }
    let cpu_at_join = ProcessUsage::now();
    let job = StreamJob {
        left_rows,
        right_rows,
        how,
        resolved: Resolved::Shuffle(Shuffle),
        partitions,
        workers: threads,
    };
    let args = Arc::new(args);
    let decide_args = Arc::clone(&args);
    let decide = move |facts: &ClusterFacts| {
        cluster_choice(strategy, how, facts, total_workers, &decide_args).map(|c| c.resolved)
    };
    stop_on_peer_failure(process);
    let counter = progress.output_counter();
    let read = progress.read_counter(left_rows + right_rows);
    progress.watch(&counter);

    // The output is written into a directory of this run beside the target, moved into place
    // once complete.
    let staged = output.as_ref().map(|(dir, _)| staged_dir(dir, &joined.run));
    let first_worker = process * threads;
    let own_parts: Vec<PathBuf> = match (&output, &staged) {
        (Some((_, format)), Some(staged)) => (first_worker..first_worker + threads)
            .map(|worker| staged.join(part_name(worker, *format)))
            .collect(),
        _ => Vec::new(),
    };
    // Finished parts are removed too if the run is interrupted or a peer fails: without every
    // part the output is not complete.
    let mut registered: Vec<_> = own_parts
        .iter()
        .map(|part| crate::interrupt::Registered::new(part))
        .collect();
    let staged_registration = match &staged {
        Some(staged) => {
            // Processes sharing a file system create it together.
            match std::fs::create_dir(staged) {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(error) => {
                    return Err(Error::Io(format!(
                        "--output: cannot create the directory {} to write the parts in: {error}",
                        staged.display()
                    )))
                }
            }
            if process == 0 {
                let mark = staged.join(PROCESS_0_MARK);
                registered.push(crate::interrupt::Registered::new(&mark));
                std::fs::write(&mark, b"").map_err(|error| {
                    Error::Io(format!("{}: cannot write: {error}", mark.display()))
                })?;
            }
            Some(crate::interrupt::CreatedDir::adopt(staged))
        }
        None => None,
    };
    let network = Network::Connected(joined.sockets);
    let count_counter = counter.clone();
    let result = match (&output, &staged) {
        (Some((_, format)), Some(staged)) => {
            let (left_schema, right_schema) = (
                Arc::clone(&left.input.selected),
                Arc::clone(&right.input.selected),
            );
            let schema = output_schema(left_schema.as_ref(), right_schema.as_ref(), how);
            let left_encoder = Arc::new(RowEncoder::new(&left)?);
            let right_encoder = Arc::new(RowEncoder::new(&right)?);
            let layout = Arc::new(PartLayout {
                how,
                dir: staged.clone(),
                format: *format,
                compression: compression.unwrap_or(OutputCompression::None),
                schema,
                sides: [
                    (left_schema, left_encoder.fields.clone()),
                    (right_schema, right_encoder.fields.clone()),
                ],
            });
            let keep = [
                Some(RowEncoder::keep(&left_encoder)),
                Some(RowEncoder::keep(&right_encoder)),
            ];
            let source = Arc::new(FileSource::new(
                [left, right],
                keep,
                read,
                OnReadError::EndProcess,
            ));
            let encoders = [left_encoder, right_encoder];
            let counter = counter.clone();
            execute_cluster_stream(
                job,
                source,
                &spec,
                network,
                facts,
                decide,
                move |side, row, hash| CarriedRow {
                    row,
                    hash,
                    bytes: encoders[side.index()].bytes(row),
                },
                move |worker| PartSink::new(Arc::clone(&layout), worker, counter.clone()),
                || {},
            )
        }
        _ => {
            left.read_for_counting();
            right.read_for_counting();
            execute_cluster_stream(
                job,
                Arc::new(FileSource::new(
                    [left, right],
                    [None, None],
                    read,
                    OnReadError::EndProcess,
                )),
                &spec,
                network,
                facts,
                decide,
                |_, row, hash| -> RowRef { (row, hash) },
                move |_| CountSink::with_progress(count_counter.clone()),
                || {},
            )
            .map(|output| output.map_summaries(WorkerSummary::from))
        }
    };
    let remove_parts = || {
        for part in &own_parts {
            let _ = std::fs::remove_file(part);
        }
        if let Some(staged) = &staged {
            if process == 0 {
                let _ = std::fs::remove_file(staged.join(PROCESS_0_MARK));
            }
        }
        if let Some(dir) = &staged_registration {
            dir.remove_if_empty();
        }
    };
    let output_run = match result {
        Ok(output) => output,
        Err(error) => {
            remove_parts();
            return Err(Error::Cluster(format!(
                "process {process}: the cluster run failed: {}; every process stops: check the \
                 other processes' messages and start them all again",
                error.message().trim()
            )));
        }
    };
    progress.finish();
    if let Some(error) = output_run
        .summaries
        .iter()
        .find_map(|(_, s)| s.error.clone())
    {
        remove_parts();
        return Err(Error::Io(error));
    }
    let rows: u64 = output_run.summaries.iter().map(|(_, s)| s.rows).sum();
    if let Some(path) = &process_metrics {
        let usage = ProcessUsage::now();
        let own = first_worker..first_worker + threads;
        let figures = ProcessMetrics {
            process,
            processes,
            workers: threads,
            output_rows: output_run
                .summaries
                .iter()
                .filter(|(worker, _)| own.contains(worker))
                .map(|(_, s)| s.rows)
                .sum(),
            open_seconds: read_seconds,
            join_seconds: output_run.elapsed.as_secs_f64(),
            join_cpu_seconds: usage.cpu_seconds - cpu_at_join.cpu_seconds,
            cpu_seconds: usage.cpu_seconds,
            peak_rss_bytes: usage.peak_rss_bytes,
        };
        // The join is done and its parts are about to be put in place: a metrics file that
        // cannot be written is said, not made the run's failure.
        let written = serde_json::to_string_pretty(&figures)
            .map_err(|e| Error::Internal(format!("cannot encode process metrics: {e}")))
            .and_then(|text| write_atomically(path, &(text + "\n")));
        if let Err(error) = written {
            // A closed stderr must not fail a finished run (eprintln! would panic).
            let _ = writeln!(
                std::io::stderr(),
                "skewjoin: warning: process {process}: --process-metrics: {error}"
            );
        }
    }
    let checksum = output_run
        .summaries
        .iter()
        .fold(0u64, |sum, (_, s)| sum.wrapping_add(s.checksum));
    if !output_run.whole_cluster {
        if let (Some((dir, _)), Some(staged)) = (&output, &staged) {
            // Process 0 moves the directory into place when it shares this file system (its mark
            // or, once done, its manifest is there, or the directory is gone); on a machine of
            // its own this process moves its own parts into place.
            let shared = !staged.exists()
                || staged.join(PROCESS_0_MARK).exists()
                || staged.join(MANIFEST).exists();
            if !shared {
                put_in_place(staged, dir)?;
            }
        }
        drop(registered);
        if !args.quiet {
            let _ = writeln!(
                std::io::stderr(),
                "skewjoin: process {process} of {processes}: done; its workers produced {rows} \
                 rows; process 0 reports the whole cluster"
            );
        }
        return Ok(());
    }
    let choice = cluster_choice(strategy, how, &output_run.facts, total_workers, &args)
        .map_err(Error::Usage)?;
    if let (Some((dir, format)), Some(staged)) = (&output, &staged) {
        let manifest = Manifest {
            format: format.to_string(),
            rows,
            checksum: checksum_hex(checksum),
            parts: output_run
                .summaries
                .iter()
                .filter_map(|(worker, s)| {
                    Some(ManifestPart {
                        file: s.part.clone()?,
                        worker: *worker,
                        rows: s.rows,
                        checksum: checksum_hex(s.checksum),
                    })
                })
                .collect(),
        };
        let text = serde_json::to_string_pretty(&manifest)
            .map_err(|e| Error::Internal(format!("cannot encode the manifest: {e}")))?;
        write_atomically(&staged.join(MANIFEST), &(text + "\n"))?;
        let _ = std::fs::remove_file(staged.join(PROCESS_0_MARK));
        put_in_place(staged, dir)?;
    }
    drop(registered);
    let report = RunReport {
        output_rows: rows,
        checksum: Some(checksum),
        loads: output_run.loads,
        elapsed: output_run.elapsed,
        strategy_report: output_run.report,
    };
    let mut metrics = metrics_for(
        &choice,
        how,
        total_workers,
        partitions,
        (output_run.facts.left_rows, output_run.facts.right_rows),
        read_seconds,
        &report,
    );
    metrics.processes = Some(processes);
    if let Some(path) = &args.metrics {
        let text = serde_json::to_string_pretty(&metrics)
            .map_err(|e| Error::Internal(format!("cannot encode metrics: {e}")))?;
        write_atomically(path, &(text + "\n"))?;
    }
    if !args.quiet {
        if args.output.is_none() {
            // A reader that stopped reading (`| head -1`) ends this quietly, as it does `cat`.
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "rows\t{rows}")
                .and_then(|()| writeln!(stdout, "checksum\t{}", checksum_hex(checksum)))
                .and_then(|()| stdout.flush());
        }
        let _ = writeln!(std::io::stderr(), "{}", metrics.summary());
    }
    Ok(())
}

/// `--process-metrics` with `{process}` replaced, refused where it names an input, the output or
/// `--metrics`.
fn process_metrics_path(args: &JoinArgs, process: usize) -> Result<Option<PathBuf>> {
    let Some(given) = &args.cluster.process_metrics else {
        return Ok(None);
    };
    let path = PathBuf::from(
        given
            .to_string_lossy()
            .replace("{process}", &process.to_string()),
    );
    let mut others = vec![
        ("an input file", &*args.left),
        ("an input file", &*args.right),
    ];
    if let Some(output) = &args.output {
        others.push(("the --output directory", output));
    }
    if let Some(metrics) = &args.metrics {
        others.push(("the --metrics file", metrics));
    }
    refuse_overwrite("--process-metrics", &path, &others)?;
    check_writable_dir(&path, "--process-metrics")?;
    Ok(Some(path))
}

/// One process's own figures in a cluster, written to `--process-metrics`. Field names are
/// stable: scripts read them (benches/cluster/emulate does).
#[derive(Debug, Serialize)]
pub(super) struct ProcessMetrics {
    /// This process's index.
    process: usize,
    /// Processes in the cluster.
    processes: usize,
    /// This process's worker threads.
    workers: usize,
    /// Output rows its workers produced.
    output_rows: u64,
    /// Wall time of opening its shares of the inputs, before connecting.
    open_seconds: f64,
    /// Wall time of its dataflow, from the cluster forming to the join's end (which every
    /// process sees at about the same moment: the join ends when the last worker's does).
    join_seconds: f64,
    /// CPU seconds (user and system, every thread) it used from the cluster forming to the end:
    /// its share of the join's work, whatever the wait for others.
    join_cpu_seconds: f64,
    /// CPU seconds it used in all, startup and opening included.
    cpu_seconds: f64,
    /// Its peak resident memory.
    peak_rss_bytes: u64,
}

/// The CPU time and peak memory of this process so far (`getrusage`).
struct ProcessUsage {
    cpu_seconds: f64,
    peak_rss_bytes: u64,
}

impl ProcessUsage {
    fn now() -> ProcessUsage {
        // SAFETY: getrusage writes only into the struct it is given.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
            return ProcessUsage {
                cpu_seconds: 0.0,
                peak_rss_bytes: 0,
            };
        }
        let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        ProcessUsage {
            cpu_seconds: seconds(usage.ru_utime) + seconds(usage.ru_stime),
            // Linux reports kilobytes.
            peak_rss_bytes: u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024,
        }
    }
}

/// `auto`'s sample of this process's keys (its shares of both inputs) for the cluster's skew
/// check: one pass over the key columns of its shares.
fn sample_keys(left: &StreamSide, right: &StreamSide) -> Result<KeySample> {
    let mut sample = KeySample::for_rows(left.input.rows, right.input.rows);
    tally_stream(left, Side::Left, &mut sample)?;
    tally_stream(right, Side::Right, &mut sample)?;
    Ok(sample)
}
