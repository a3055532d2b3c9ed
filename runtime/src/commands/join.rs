//! `skewjoin join` on one process: check the flags, read or open the inputs, choose the strategy, run, write.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use arrow::datatypes::SchemaRef;
use skewjoin_operators::{JoinType, Side};
use skewjoin_planner::skew_check::skew_reason;
use skewjoin_planner::{Choice, Strategy};

use crate::cli::JoinArgs;
use crate::engine::{self, JoinPlan, OutputTarget, SideData, StreamSide};
use crate::error::{Error, Result};
use crate::io::{check_key_compat, output_schema, FileFormat, OutputCompression, OutputWriter};
use crate::memory::{kept_keys_bytes, BroadcastBudget};
use crate::metrics::Metrics;
use crate::progress::Progress;

use super::write_stdout;
use crate::cli::checks::{
    check_metrics_path, check_vprp_flags, check_writable_dir, join_columns, layout, output_columns,
    output_compression, parse_how, refuse_overwrite,
};
use crate::output_file::write_atomically;
use crate::plan::{choose_strategy, metrics_for, streamed_skew, PlanRequest};

/// A side read into memory on as many threads as there are cores: whole (its chosen and key
/// columns, where columns were chosen), its keys read, its rows hashed and the chosen columns
/// kept for the output; or, with `keys_only`, its key columns alone, no column kept and no row
/// hashed.
fn load(side: &StreamSide, keys_only: bool) -> Result<SideData> {
    let input = &side.input;
    let (schema, batches) = input.read_all(keys_only, max_threads(), None)?;
    let kept = if keys_only {
        Some(&[][..])
    } else {
        input.selected_positions()
    };
    SideData::from_batches_selecting(
        &input.path.display().to_string(),
        schema,
        batches,
        &side.key_columns,
        kept,
        !keys_only,
        max_threads(),
        None,
    )
}

/// The CPU cores here: the threads a whole file's keys and row hashes are read on.
fn max_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The inputs of a prepared join.
// One per run, moved once: boxing the larger variant would buy nothing.
#[allow(clippy::large_enum_variant)]
pub(super) enum Inputs {
    /// Read into memory for `explain`, which looks at every key: whole, or only the keys.
    Loaded(SideData, SideData),
    /// Opened and counted, to be read while the join runs.
    Streamed(StreamSide, StreamSide),
}

impl Inputs {
    fn schemas(&self) -> (SchemaRef, SchemaRef) {
        match self {
            Inputs::Loaded(left, right) => (Arc::clone(&left.schema), Arc::clone(&right.schema)),
            Inputs::Streamed(left, right) => (
                Arc::clone(&left.input.selected),
                Arc::clone(&right.input.selected),
            ),
        }
    }
}

/// A join with its inputs loaded or opened, and its strategy chosen.
pub(super) struct Prepared {
    pub(super) how: JoinType,
    pub(super) workers: usize,
    pub(super) partitions: usize,
    pub(super) inputs: Inputs,
    pub(super) rows: (u64, u64),
    pub(super) read_seconds: f64,
    pub(super) choice: Choice,
    pub(super) budget: BroadcastBudget,
    pub(super) output_encoding: Option<(FileFormat, OutputCompression)>,
}

/// How [`prepare`] reads the inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reading {
    /// Only what planning needs (row counts, and the keys when `auto` checks them for skew):
    /// the rest is read while the join runs.
    Streamed,
    /// Whole (the chosen and key columns, where columns were chosen), every row kept and
    /// hashed: for `explain --analyze`, which runs the loaded join.
    Whole,
    /// The key columns alone: for `explain`, which looks at every key and at nothing else.
    Keys,
}

/// Checks the arguments, reads both inputs as `reading` says and chooses the strategy.
/// Everything that can be checked before the join runs is checked here, so a bad output path
/// fails in a second, not after an hour of joining.
pub(super) fn prepare(args: &JoinArgs, progress: &Progress, reading: Reading) -> Result<Prepared> {
    let stream = reading == Reading::Streamed;
    let how = parse_how(&args.run.how)?;
    let strategy: Strategy = args
        .strategy
        .parse()
        .map_err(|e| Error::Usage(format!("--strategy: {e}")))?;
    let (workers, partitions) = layout(&args.run)?;
    check_vprp_flags(&args.run)?;
    let (left_on, right_on) = join_columns(args)?;
    let explicit = args.format.as_deref().map(FileFormat::parse).transpose()?;
    let left_format = FileFormat::detect(&args.left, explicit)?;
    let right_format = FileFormat::detect(&args.right, explicit)?;
    let output_encoding = match &args.output {
        Some(path) => {
            let explicit = args
                .output_format
                .as_deref()
                .map(FileFormat::parse)
                .transpose()?;
            refuse_overwrite(
                "--output",
                path,
                &[
                    ("an input file", &args.left),
                    ("an input file", &args.right),
                ],
            )?;
            check_writable_dir(path, "--output")?;
            let format = FileFormat::detect_output(path, explicit)?;
            output_compression(args, Some(format))?.map(|compression| (format, compression))
        }
        None => {
            // Refuses a --compression without an output.
            output_compression(args, None)?;
            None
        }
    };
    check_metrics_path(args, "the --output file")?;

    let read_start = Instant::now();
    let say_reading = |path: &Path| progress.say(&format!("reading {}", path.display()));
    let keys = [left_on.as_slice(), right_on.as_slice()];
    let columns = args.columns();
    let inputs = [
        args.left.display().to_string(),
        args.right.display().to_string(),
    ];
    let inputs = [inputs[0].as_str(), inputs[1].as_str()];
    // Opened as the streamed join opens them: the footers (a CSV file's type pass) say whether
    // the keys can be joined and the chosen columns exist before anything is decoded. Each file
    // is named as it is read: a streamed one as it is opened, the rest as they are decoded.
    if stream {
        say_reading(&args.left);
    }
    let mut left = StreamSide::open(&args.left, left_format, &left_on)?;
    if stream {
        say_reading(&args.right);
    }
    let mut right = StreamSide::open(&args.right, right_format, &right_on)?;
    check_key_compat(
        (&args.left, left.input.schema.as_ref(), &left_on),
        (&args.right, right.input.schema.as_ref(), &right_on),
    )?;
    let schemas = [left.input.schema.as_ref(), right.input.schema.as_ref()];
    let [left_columns, right_columns] = output_columns(&columns, how, schemas, keys, inputs)?;
    if let Some(names) = left_columns {
        left.select(&names, columns.flag(Side::Left))?;
    }
    if let Some(names) = right_columns {
        right.select(&names, columns.flag(Side::Right))?;
    }
    let load = |side: &StreamSide| {
        say_reading(&side.input.path);
        load(side, reading == Reading::Keys)
    };
    let inputs = match reading {
        Reading::Streamed => Inputs::Streamed(left, right),
        Reading::Keys | Reading::Whole => Inputs::Loaded(load(&left)?, load(&right)?),
    };
    let rows = match &inputs {
        Inputs::Loaded(left, right) => (left.keys.len() as u64, right.keys.len() as u64),
        Inputs::Streamed(left, right) => (left.input.rows, right.input.rows),
    };
    let mut read_seconds = read_start.elapsed().as_secs_f64();
    progress.say(&format!(
        "{} {} and {} rows in {read_seconds:.2}s",
        if stream { "counted" } else { "read" },
        rows.0,
        rows.1
    ));

    let written = output_encoding.is_some();
    let (choice, budget) = choose_strategy(
        &PlanRequest {
            strategy,
            how,
            workers,
            rows,
            written,
            run: &args.run,
            tuning: &args.tuning(),
            broadcast_limit: args.broadcast_limit,
            memory_limit: args.memory_limit,
        },
        |costs| match &inputs {
            Inputs::Loaded(left, right) => Ok(skew_reason(
                &left.keys,
                &right.keys,
                partitions,
                workers,
                costs,
            )),
            Inputs::Streamed(left, right) => {
                progress.say("reading the keys to check them for skew");
                let keys_start = Instant::now();
                let kept = kept_keys_bytes(args.memory_limit);
                let skew = streamed_skew(left, right, partitions, workers, costs, kept)?;
                read_seconds += keys_start.elapsed().as_secs_f64();
                Ok(skew)
            }
        },
    )?;
    Ok(Prepared {
        how,
        workers,
        partitions,
        inputs,
        rows,
        read_seconds,
        choice,
        budget,
        output_encoding,
    })
}

/// Runs a prepared join: writes the output and metrics files if asked, and returns the metrics.
/// A written output's checksum is computed where the caller shows it (`checksum_shown`) or the
/// metrics file has it; else the metrics say it was not computed.
pub(super) fn run_prepared(
    args: &JoinArgs,
    prepared: Prepared,
    progress: &mut Progress,
    checksum_shown: bool,
) -> Result<Metrics> {
    let Prepared {
        how,
        workers,
        partitions,
        inputs,
        rows,
        read_seconds,
        choice,
        budget: _,
        output_encoding,
    } = prepared;
    let output = match (&args.output, output_encoding) {
        (Some(path), Some((format, compression))) => {
            let (left_schema, right_schema) = inputs.schemas();
            let schema = output_schema(left_schema.as_ref(), right_schema.as_ref(), how);
            let writer = OutputWriter::create(path, format, compression, Arc::clone(&schema))?;
            Some(OutputTarget::File {
                writer,
                schema,
                path: path.clone(),
                checksum: checksum_shown || args.metrics.is_some(),
            })
        }
        _ => None,
    };
    let counter = progress.output_counter();
    let read = match &inputs {
        Inputs::Streamed(..) => progress.read_counter(rows.0 + rows.1),
        Inputs::Loaded(..) => None,
    };
    progress.watch(&counter);
    progress.say(&format!(
        "joining with the {} strategy on {workers} workers, {partitions} partitions",
        choice.resolved.name()
    ));
    let plan = JoinPlan {
        how,
        resolved: choice.resolved,
        partitions,
        workers,
    };
    let report = match inputs {
        Inputs::Loaded(left, right) => engine::run(left, right, plan, output, counter, None)?,
        Inputs::Streamed(left, right) => {
            engine::run_stream(left, right, plan, output, counter, read)?
        }
    };
    progress.finish();
    let metrics = metrics_for(
        &choice,
        how,
        workers,
        partitions,
        rows,
        read_seconds,
        &report,
    );
    if let Some(path) = &args.metrics {
        let text = serde_json::to_string_pretty(&metrics)
            .map_err(|e| Error::Internal(format!("cannot encode metrics: {e}")))?;
        write_atomically(path, &(text + "\n"))?;
    }
    Ok(metrics)
}

/// `skewjoin join`.
pub fn join(args: JoinArgs) -> Result<()> {
    if args.cluster.is_cluster() {
        return crate::cluster::join(args);
    }
    let mut progress = Progress::new(args.quiet);
    let prepared = prepare(&args, &progress, Reading::Streamed)?;
    let metrics = run_prepared(&args, prepared, &mut progress, !args.quiet)?;
    if !args.quiet {
        if args.output.is_none() {
            outln!("rows\t{}", metrics.output_rows);
            outln!("checksum\t{}", metrics.checksum);
        }
        // The summary is a courtesy: a closed stderr does not fail a finished join.
        let _ = writeln!(std::io::stderr(), "{}", metrics.summary());
    }
    Ok(())
}
