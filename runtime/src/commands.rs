//! What each subcommand does.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};
use skewjoin_operators::load::imbalance;
use skewjoin_operators::{JoinType, Key, Partitioning, Side};
use skewjoin_planner::cost::{predict, KeyStats};
use skewjoin_planner::datagen::pavlo::{generate_pavlo, PavloSpec};
use skewjoin_planner::datagen::{generate, GenSpec, JoinCounts};
use skewjoin_planner::skew_check::{skew_reason, KeySink, KeyTally, SkewFinding};
use skewjoin_planner::work_costs::WorkCosts;
use skewjoin_planner::{choose, Choice, PlanInputs, Resolved, Strategy, Tuning};

use crate::batches::column_indices;
use crate::cli::{DemoArgs, ExplainArgs, GenArgs, GenFlags, JoinArgs, RunArgs};
use crate::engine::{self, JoinPlan, OutputTarget, SideData, StreamSide};
use crate::error::{Error, Result};
use crate::explain::{HotKey, Plan, SideSummary};
use crate::generate::{rankings_batch, to_batch, to_side, uservisits_batch};
use crate::io::{
    check_key_compat, extract_keys, output_schema, read_table, similar_column, tally_keys,
    write_table, FileFormat, OutputCompression, OutputWriter,
};
use crate::memory::{broadcast_budget, BroadcastBudget};
use crate::metrics::{checksum_hex, Metrics};
use crate::progress::Progress;

/// Writes to standard output; a closed one (the reader of a pipe exited) is
/// [`Error::ClosedPipe`], which ends the program quietly where `print!` would panic.
pub(crate) fn write_stdout(text: std::fmt::Arguments) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_fmt(text)
        .and_then(|()| stdout.flush())
        .map_err(|error| Error::stdout(&error))
}

/// `println!` through [`write_stdout`], returning its error from the enclosing function.
macro_rules! outln {
    ($($arg:tt)*) => {
        write_stdout(format_args!("{}\n", format_args!($($arg)*)))?
    };
}

pub(crate) fn parse_how(how: &str) -> Result<JoinType> {
    how.parse().map_err(|e| Error::Usage(format!("--how: {e}")))
}

/// Applies the VPRP flags to a VPRP choice; other strategies are left as they are.
pub(crate) fn with_vprp_flags(mut choice: Choice, run: &RunArgs) -> Result<Choice> {
    if !(0.0..=1.0).contains(&run.sample_fraction) || run.virtual_per_partition == 0 {
        return Err(Error::Usage(
            "--sample-fraction must be in 0..1 and --virtual-per-partition at least 1".into(),
        ));
    }
    if let Resolved::Vprp(settings) | Resolved::VprpT(settings) = &mut choice.resolved {
        *settings = settings.with_sample_fraction(run.sample_fraction);
        settings.virtual_per_partition = run.virtual_per_partition;
    }
    Ok(choice)
}

/// The most worker threads one process runs, per CPU core, and at least: every worker
/// exchanges with every other (W^2 channels, each polled as the join progresses), so workers
/// far beyond the cores cost time and memory and measure nothing that partitions would not.
const WORKERS_PER_CORE: usize = 4;
const MIN_MAX_WORKERS: usize = 64;

/// The most worker threads one process may run here (see [`WORKERS_PER_CORE`]).
pub(crate) fn max_workers() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores * WORKERS_PER_CORE).max(MIN_MAX_WORKERS)
}

/// Worker and partition counts, with defaults, within their bounds.
pub(crate) fn layout(run: &RunArgs) -> Result<(usize, usize)> {
    let max_workers = max_workers();
    let workers = match run.workers {
        Some(0) => return Err(Error::Usage("--workers must be at least 1".into())),
        Some(w) if w > max_workers => {
            return Err(Error::Usage(format!(
                "--workers {w} is more than {max_workers}, the most this machine runs \
                 ({WORKERS_PER_CORE} per CPU core, at least {MIN_MAX_WORKERS}): every worker \
                 exchanges with every other, so more only add overhead; to measure balance over \
                 many parts, raise --partitions instead"
            )))
        }
        Some(w) => w,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let partitions = match run.partitions {
        Some(0) => return Err(Error::Usage("--partitions must be at least 1".into())),
        Some(p) if p > Partitioning::MAX_PARTITIONS => {
            return Err(Error::Usage(format!(
                "--partitions {p} is more than {}, the most a join is cut into: each partition \
                 has its own state and report line, and no balance is measurably finer",
                Partitioning::MAX_PARTITIONS
            )))
        }
        Some(p) => p,
        None => workers,
    };
    Ok((workers, partitions))
}

/// A whole input read into memory, its keys read and rows hashed; `selected` (see
/// [`output_columns`], and `flag` that chose them) chooses the columns kept for the output.
fn load_side(
    path: &Path,
    batch: RecordBatch,
    columns: &[String],
    selected: Option<&[String]>,
    flag: &str,
) -> Result<SideData> {
    let schema = batch.schema();
    let indices = selected
        .map(|names| column_indices(&schema, names, path, flag))
        .transpose()?;
    SideData::from_batches_selecting(
        &path.display().to_string(),
        schema,
        vec![batch],
        columns,
        indices.as_deref(),
        max_threads(),
        None,
    )
}

/// The CPU cores here: the threads a whole file's keys and row hashes are read on.
fn max_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Whether two paths name the same file, whether or not it exists yet.
fn same_file(a: &Path, b: &Path) -> bool {
    fn resolve(path: &Path) -> Option<std::path::PathBuf> {
        if let Ok(full) = path.canonicalize() {
            return Some(full);
        }
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        Some(dir.canonicalize().ok()?.join(path.file_name()?))
    }
    match (resolve(a), resolve(b)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// Refuses a path we would write that is an input, or another path we write.
pub(crate) fn refuse_overwrite(flag: &str, path: &Path, others: &[(&str, &Path)]) -> Result<()> {
    for (what, other) in others {
        if same_file(path, other) {
            return Err(Error::Usage(format!(
                "{flag} {} is also {what}; choose another path so it is not overwritten",
                path.display()
            )));
        }
    }
    Ok(())
}

/// Writes `text` to `path` as every output is written (see [`crate::output_file`]): a regular
/// file atomically, a device, FIFO or `/dev/stdout` in place.
pub(crate) fn write_atomically(path: &Path, text: &str) -> Result<()> {
    crate::output_file::write_whole(path, text.as_bytes())
}

pub(crate) fn check_writable_dir(path: &Path, flag: &str) -> Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(Error::Io(format!(
            "{flag} {}: the directory {} does not exist; create it first",
            path.display(),
            dir.display()
        )));
    }
    Ok(())
}

/// The key columns of each side, from `--on` or `--left-on` and `--right-on`.
pub(crate) fn join_columns(args: &JoinArgs) -> Result<(Vec<String>, Vec<String>)> {
    let (left_on, right_on) = if !args.on.is_empty() {
        (args.on.clone(), args.on.clone())
    } else if !args.left_on.is_empty() {
        (args.left_on.clone(), args.right_on.clone())
    } else {
        return Err(Error::Usage(
            "no join key: give --on COLUMNS, or --left-on and --right-on".into(),
        ));
    };
    if left_on.len() != right_on.len() {
        return Err(Error::Usage(format!(
            "--left-on names {} columns but --right-on names {}; give the same number",
            left_on.len(),
            right_on.len()
        )));
    }
    Ok((left_on, right_on))
}

/// The columns each side gives the output, from `--left-columns` and `--right-columns` or
/// `--select` (`None`: all of that side's). `schemas` and `keys` are each side's columns and
/// key columns. A column asked of a side the join type does not output, a name neither side
/// has, and a name both have (but a key of both at the same place, taken from the side every
/// output row has) are usage or input errors that say what to write instead.
pub(crate) fn output_columns(
    args: &JoinArgs,
    how: JoinType,
    schemas: [&Schema; 2],
    keys: [&[String]; 2],
) -> Result<[Option<Vec<String>>; 2]> {
    let sides = [Side::Left, Side::Right];
    let paths = [args.left.as_path(), args.right.as_path()];
    let mut chosen = [args.left_columns.clone(), args.right_columns.clone()];
    for (flag, names) in [
        ("--left-columns", &args.left_columns),
        ("--right-columns", &args.right_columns),
        ("--select", &args.select),
    ] {
        if names.iter().flatten().any(String::is_empty) {
            return Err(Error::Usage(format!(
                "{flag} has an empty column name (a stray comma?); separate names by one comma"
            )));
        }
    }
    for (index, side) in sides.into_iter().enumerate() {
        if chosen[index].is_some() && !how.outputs_side(side) {
            return Err(Error::Usage(format!(
                "--{side}-columns: {} outputs no column of the {side} input; leave the \
                 flag out",
                a_join(how)
            )));
        }
    }
    let Some(names) = &args.select else {
        return Ok(chosen);
    };
    let mut picked: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    for name in names {
        let has = |index: usize| {
            how.outputs_side(sides[index]) && schemas[index].column_with_name(name).is_some()
        };
        let index = match (has(0), has(1)) {
            (true, false) => 0,
            (false, true) => 1,
            (false, false) if schemas.iter().any(|s| s.column_with_name(name).is_some()) => {
                let side = sides
                    .into_iter()
                    .find(|&side| !how.outputs_side(side))
                    .expect("a side that has the column but is not output");
                return Err(Error::Usage(format!(
                    "--select: `{name}` is a column of the {side} input, and {} outputs \
                     only the {} input's columns; leave it out",
                    a_join(how),
                    side.other()
                )));
            }
            (false, false) => {
                let listed = |index: usize| {
                    let names: Vec<String> = schemas[index]
                        .fields()
                        .iter()
                        .map(|field| format!("`{}`", field.name()))
                        .collect();
                    format!("{} has {}", paths[index].display(), names.join(", "))
                };
                let outputs: Vec<String> = (0..2)
                    .filter(|&index| how.outputs_side(sides[index]))
                    .map(listed)
                    .collect();
                // A name the default output gives a right column (`id_right`), or one that
                // differs in case or spaces.
                let renamed = name
                    .strip_suffix("_right")
                    .filter(|stem| {
                        how.outputs_side(Side::Right)
                            && schemas
                                .iter()
                                .all(|schema| schema.column_with_name(stem).is_some())
                    })
                    .map(|stem| {
                        format!(
                            " (`{name}` is how the output names the right input's `{stem}` \
                             beside the left's: name each side's columns with --left-columns and \
                             --right-columns instead, `{stem}` among the right's)"
                        )
                    });
                let similar = schemas
                    .iter()
                    .find_map(|schema| similar_column(schema, name))
                    .map(|similar| format!(" ({similar})"));
                return Err(Error::Input(format!(
                    "--select: no input has a column `{name}`{}; {}",
                    renamed.or(similar).unwrap_or_default(),
                    outputs.join("; ")
                )));
            }
            (true, true) => {
                let same_key = keys[0]
                    .iter()
                    .zip(keys[1])
                    .any(|(left, right)| left == name && right == name);
                // The side whose rows are in every output row: its value is the key's.
                let always = sides
                    .iter()
                    .position(|&side| !how.keeps_unmatched(side.other()));
                match always {
                    Some(index) if same_key => index,
                    _ => {
                        return Err(Error::Usage(format!(
                            "--select: both inputs have a column `{name}`{}; name the columns \
                             of each side with --left-columns and --right-columns instead",
                            if same_key {
                                " and a full join pads either one with NULL"
                            } else {
                                ""
                            }
                        )))
                    }
                }
            }
        };
        picked[index].push(name.clone());
    }
    let [left, right] = picked;
    chosen = [Some(left), Some(right)];
    Ok(chosen)
}

/// "a semi join", "an inner join": the join type `how` with its article.
fn a_join(how: JoinType) -> String {
    let name = how.name();
    let article = if name.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {name} join")
}

/// The flag that chose `side`'s output columns, for errors: `--select` or `--left-columns` /
/// `--right-columns`.
pub(crate) fn column_flag(args: &JoinArgs, side: Side) -> &'static str {
    match (args.select.is_some(), side) {
        (true, _) => "--select",
        (false, Side::Left) => "--left-columns",
        (false, Side::Right) => "--right-columns",
    }
}

/// Refuses a `--metrics` path that is an input or the output (`output_is`, e.g. "the --output
/// file"), or whose directory is missing.
pub(crate) fn check_metrics_path(args: &JoinArgs, output_is: &str) -> Result<()> {
    let Some(path) = &args.metrics else {
        return Ok(());
    };
    let mut others = vec![
        ("an input file", &*args.left),
        ("an input file", &*args.right),
    ];
    if let Some(output) = &args.output {
        others.push((output_is, output));
    }
    refuse_overwrite("--metrics", path, &others)?;
    check_writable_dir(path, "--metrics")
}

/// The inputs of a prepared join.
// One per run, moved once: boxing the larger variant would buy nothing.
#[allow(clippy::large_enum_variant)]
enum Inputs {
    /// Read whole, for `explain`, which looks at every key.
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

/// Passes each key of a streamed input to `visit`, a batch at a time, until it returns `false`.
fn visit_keys(input: &StreamSide, mut visit: impl FnMut(&Key) -> bool) -> Result<()> {
    for batch in input.input.batches(true)? {
        let keys = extract_keys(&batch?, &input.key_columns, &input.input.path)?;
        if !keys.iter().all(&mut visit) {
            break;
        }
    }
    Ok(())
}

/// Counts every key of a streamed side in `tally`: one pass over its key columns.
pub(crate) fn tally_stream(input: &StreamSide, side: Side, tally: &mut impl KeySink) -> Result<()> {
    for batch in input.input.batches(true)? {
        tally_keys(&batch?, &input.key_columns, &input.input.path, side, tally)?;
    }
    Ok(())
}

/// `auto`'s skew check over streamed inputs: a pass over the keys of each side, and when a key
/// is hot, another until it is found (a hot key comes early), to name it.
fn streamed_skew(
    left: &StreamSide,
    right: &StreamSide,
    partitions: usize,
    workers: usize,
    costs: WorkCosts,
) -> Result<Option<SkewFinding>> {
    // The two sides are read at once, one on another thread: reading and hashing the keys is
    // most of the check's time.
    // Both tallies sample alike (one row in 2^s past skew_check::SAMPLE_ROWS rows in all).
    let both = left.input.rows + right.input.rows;
    let tally_side = |input: &StreamSide, side: Side| -> Result<KeyTally> {
        let mut tally = KeyTally::for_join(both, input.input.rows);
        tally_stream(input, side, &mut tally)?;
        Ok(tally)
    };
    let (tally, right_tally) = std::thread::scope(|scope| {
        let left_pass = scope.spawn(|| tally_side(left, Side::Left));
        let right_tally = tally_side(right, Side::Right);
        let left_tally = left_pass
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (left_tally, right_tally)
    });
    let mut tally = tally?;
    tally.merge(right_tally?);
    // Counted on as many threads as the join will run.
    let Some(skew) = tally.skew_on_threads(partitions, workers, costs, workers) else {
        return Ok(None);
    };
    let mut found = None;
    for input in [left, right] {
        visit_keys(input, |key| {
            if skew.is_of(key) {
                found = Some(skew.finding(key));
            }
            found.is_none()
        })?;
        if found.is_some() {
            break;
        }
    }
    Ok(found)
}

/// What a join's strategy is chosen from, whatever its inputs are (files or tables in memory).
pub(crate) struct PlanRequest<'a> {
    /// The strategy asked for.
    pub strategy: Strategy,
    /// The join type.
    pub how: JoinType,
    /// W.
    pub workers: usize,
    /// The row counts of the two sides.
    pub rows: (u64, u64),
    /// Whether the output rows are written (a pair then costs nearly what an input record
    /// does), not only counted.
    pub written: bool,
    /// VPRP's settings.
    pub run: &'a RunArgs,
    /// AM-Join's and Tree-Join's settings.
    pub tuning: &'a Tuning,
    /// `--broadcast-limit`.
    pub broadcast_limit: Option<u64>,
    /// `--memory-limit`.
    pub memory_limit: Option<u64>,
}

/// Chooses the strategy of a join (one rule for files and tables): the one asked for, or
/// `auto`'s choice from the sizes and the broadcast budget, and where that would shuffle, from
/// the keys' skew (`skew` looks at them, given the costs of the run; it is called only then);
/// then VPRP's settings and the tuning. Returns the choice and the budget it was made with.
pub(crate) fn choose_strategy(
    request: &PlanRequest,
    skew: impl FnOnce(WorkCosts) -> Result<Option<SkewFinding>>,
) -> Result<(Choice, BroadcastBudget)> {
    let budget = broadcast_budget(
        request.broadcast_limit,
        request.memory_limit,
        request.workers,
    );
    let costs = WorkCosts::of_run(1, request.written);
    let plan_inputs = PlanInputs {
        how: request.how,
        left_rows: request.rows.0,
        right_rows: request.rows.1,
        workers: request.workers,
        broadcast_limit: budget.rows,
        costs,
    };
    let mut choice = choose(request.strategy, &plan_inputs).map_err(Error::Usage)?;
    choice = with_vprp_flags(choice, request.run)?;
    // auto: with a hash partitioning made uneven by a hot key, AM-Join instead of Shuffle-Join.
    if request.strategy == Strategy::Auto && choice.resolved == Resolved::Shuffle {
        if let Some(finding) = skew(costs)? {
            choice = finding.decide(choice, &plan_inputs);
        }
    }
    choice.resolved = choice.resolved.tuned(request.tuning);
    Ok((choice, budget))
}

/// A join with its inputs loaded or opened, and its strategy chosen.
struct Prepared {
    how: JoinType,
    workers: usize,
    partitions: usize,
    inputs: Inputs,
    rows: (u64, u64),
    read_seconds: f64,
    choice: Choice,
    budget: BroadcastBudget,
    output_encoding: Option<(FileFormat, OutputCompression)>,
}

/// Checks the arguments, reads both inputs (whole, or with `stream` only what planning needs:
/// row counts, and the keys when `auto` checks them for skew) and chooses the strategy.
/// Everything that can be checked before the join runs is checked here, so a bad output path
/// fails in a second, not after an hour of joining.
fn prepare(args: &JoinArgs, progress: &Progress, stream: bool) -> Result<Prepared> {
    let how = parse_how(&args.run.how)?;
    let strategy: Strategy = args
        .strategy
        .parse()
        .map_err(|e| Error::Usage(format!("--strategy: {e}")))?;
    let (workers, partitions) = layout(&args.run)?;
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
    // `announce`: say each file's name as it is opened (not where it is opened only to check
    // the chosen columns before it is read whole).
    let open_streamed = |announce: bool| -> Result<(StreamSide, StreamSide)> {
        if announce {
            say_reading(&args.left);
        }
        let mut left = StreamSide::open(&args.left, left_format, &left_on)?;
        if announce {
            say_reading(&args.right);
        }
        let mut right = StreamSide::open(&args.right, right_format, &right_on)?;
        check_key_compat(
            (&args.left, left.input.schema.as_ref(), &left_on),
            (&args.right, right.input.schema.as_ref(), &right_on),
        )?;
        let schemas = [left.input.schema.as_ref(), right.input.schema.as_ref()];
        let [left_columns, right_columns] = output_columns(args, how, schemas, keys)?;
        if let Some(names) = left_columns {
            left.select(&names, column_flag(args, Side::Left))?;
        }
        if let Some(names) = right_columns {
            right.select(&names, column_flag(args, Side::Right))?;
        }
        Ok((left, right))
    };
    let inputs = if stream {
        let (left, right) = open_streamed(true)?;
        Inputs::Streamed(left, right)
    } else {
        let chooses_columns =
            args.left_columns.is_some() || args.right_columns.is_some() || args.select.is_some();
        if chooses_columns {
            // The chosen columns are checked from the files' footers (a CSV file's type pass)
            // before the files are read whole: a misspelled name is said at once.
            progress.say("checking the chosen columns against the files' schemas");
            open_streamed(false)?;
        }
        say_reading(&args.left);
        let left = read_table(&args.left, left_format)?;
        say_reading(&args.right);
        let right = read_table(&args.right, right_format)?;
        check_key_compat(
            (&args.left, left.schema().as_ref(), &left_on),
            (&args.right, right.schema().as_ref(), &right_on),
        )?;
        let (left_schema, right_schema) = (left.schema(), right.schema());
        let [left_columns, right_columns] =
            output_columns(args, how, [&left_schema, &right_schema], keys)?;
        let left = load_side(
            &args.left,
            left,
            &left_on,
            left_columns.as_deref(),
            column_flag(args, Side::Left),
        )?;
        let right = load_side(
            &args.right,
            right,
            &right_on,
            right_columns.as_deref(),
            column_flag(args, Side::Right),
        )?;
        Inputs::Loaded(left, right)
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
                let skew = streamed_skew(left, right, partitions, workers, costs)?;
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

/// The codec `--compression` asks for output in `format` (its default where not given);
/// `None` without an output, where `--compression` is a usage error (one process and a
/// cluster alike).
pub(crate) fn output_compression(
    args: &JoinArgs,
    format: Option<FileFormat>,
) -> Result<Option<OutputCompression>> {
    match format {
        Some(format) => {
            OutputCompression::for_output(args.compression.as_deref(), format).map(Some)
        }
        None if args.compression.is_some() => Err(Error::Usage(
            "--compression applies to the written output; give --output too".into(),
        )),
        None => Ok(None),
    }
}

/// Runs a prepared join: writes the output and metrics files if asked, and returns the metrics.
fn run_prepared(args: &JoinArgs, prepared: Prepared, progress: &mut Progress) -> Result<Metrics> {
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
    let prepared = prepare(&args, &progress, true)?;
    let metrics = run_prepared(&args, prepared, &mut progress)?;
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

/// A key as text for the plan.
fn key_text(key: &Key) -> String {
    key.to_string()
}

/// What a plan is made of besides the inputs: the choice and the layout it runs with.
pub(crate) struct PlanFacts<'a> {
    pub choice: &'a Choice,
    pub how: JoinType,
    pub workers: usize,
    pub partitions: usize,
    pub budget: &'a BroadcastBudget,
}

/// The plan of a join of two loaded sides (each with its name for the plan): key statistics,
/// the `top` hottest keys and the predicted per-partition load; `measured` is left empty.
pub(crate) fn plan_of(
    facts: &PlanFacts,
    (left_name, left): (&str, &SideData),
    (right_name, right): (&str, &SideData),
    top: usize,
) -> Plan {
    let partitioning = Partitioning::new(facts.partitions, facts.workers);
    let stats = KeyStats::from_keys(&left.keys, &right.keys);
    let predicted = predict(
        &facts.choice.resolved,
        facts.how,
        &left.keys,
        &right.keys,
        partitioning,
    );
    let (left_distinct, right_distinct) = stats.distinct();
    let hot: Vec<HotKey> = stats
        .hottest(top)
        .into_iter()
        .map(|count| HotKey {
            key: key_text(&count.key),
            left: count.left,
            right: count.right,
            pairs: count.pairs(),
        })
        .collect();
    Plan {
        strategy: facts.choice.resolved.name().to_string(),
        reason: facts.choice.reason.clone(),
        how: facts.how.name().to_string(),
        workers: facts.workers,
        partitions: facts.partitions,
        left: SideSummary {
            path: left_name.to_string(),
            rows: stats.left_rows,
            distinct_keys: left_distinct,
            null_keys: stats.left_nulls,
            fits_broadcast: stats.left_rows <= facts.budget.rows,
        },
        right: SideSummary {
            path: right_name.to_string(),
            rows: stats.right_rows,
            distinct_keys: right_distinct,
            null_keys: stats.right_nulls,
            fits_broadcast: stats.right_rows <= facts.budget.rows,
        },
        broadcast_budget: facts.budget.clone(),
        hot_keys: hot,
        predicted_output_rows: predicted
            .as_ref()
            .map(|loads| loads.iter().map(|l| l.output_rows).sum()),
        predicted_input_imbalance: predicted
            .as_ref()
            .map(|loads| imbalance(loads.iter().map(|l| l.input_records))),
        predicted_output_imbalance: predicted
            .as_ref()
            .map(|loads| imbalance(loads.iter().map(|l| l.output_rows))),
        predicted,
        measured: None,
    }
}

/// `skewjoin explain`.
pub fn explain(args: ExplainArgs) -> Result<()> {
    if args.join.cluster.is_cluster() {
        return Err(Error::Usage(
            "explain runs on one process; leave out --processes (the plan of a cluster run is in \
             its --metrics)"
                .into(),
        ));
    }
    let mut progress = Progress::new(args.join.quiet);
    let prepared = prepare(&args.join, &progress, false)?;
    let Inputs::Loaded(left, right) = &prepared.inputs else {
        return Err(Error::Internal("explain reads its inputs whole".into()));
    };
    let mut plan = plan_of(
        &PlanFacts {
            choice: &prepared.choice,
            how: prepared.how,
            workers: prepared.workers,
            partitions: prepared.partitions,
            budget: &prepared.budget,
        },
        (&args.join.left.display().to_string(), left),
        (&args.join.right.display().to_string(), right),
        args.top,
    );
    if args.analyze {
        plan.measured = Some(run_prepared(&args.join, prepared, &mut progress)?);
    }
    if args.json {
        let text = serde_json::to_string_pretty(&plan)
            .map_err(|e| Error::Internal(format!("cannot encode the plan: {e}")))?;
        outln!("{text}");
    } else {
        write_stdout(format_args!("{}", plan.render()))?;
    }
    Ok(())
}

pub(crate) fn metrics_for(
    choice: &Choice,
    how: JoinType,
    workers: usize,
    partitions: usize,
    rows: (u64, u64),
    read_seconds: f64,
    report: &engine::RunReport,
) -> Metrics {
    let broadcast_side = choice.resolved.copied_side().map(|side| side.to_string());
    Metrics::new(
        choice.resolved.name(),
        &choice.reason,
        broadcast_side,
        how.name(),
        workers,
        partitions,
        rows,
        read_seconds,
        report,
    )
}

/// The generator spec from flags, with `defaults` for what is not given.
fn gen_spec(flags: &GenFlags, defaults: GenSpec) -> Result<GenSpec> {
    let rows = flags.rows;
    let skew = flags.skew;
    let spec = GenSpec {
        left_rows: flags.left_rows.or(rows).unwrap_or(defaults.left_rows),
        right_rows: flags.right_rows.or(rows).unwrap_or(defaults.right_rows),
        keys: flags.keys.unwrap_or(defaults.keys),
        left_skew: flags.left_skew.or(skew).unwrap_or(defaults.left_skew),
        right_skew: flags.right_skew.or(skew).unwrap_or(defaults.right_skew),
        independent: flags.independent,
        noise: flags.noise,
        seed: flags.seed,
    };
    spec.validate().map_err(Error::Usage)?;
    // Per row: the generator's key, id and value, and the Arrow batch made of them.
    let rows = u128::from(spec.left_rows) + u128::from(spec.right_rows);
    check_gen_memory(rows * 48 + u128::from(spec.keys) * ZIPF_BYTES_PER_KEY)?;
    Ok(spec)
}

/// The memory a Zipf sampler takes per key of its domain: its CDF and the key permutation.
const ZIPF_BYTES_PER_KEY: u128 = 16;

/// Refuses a generator run that needs, by the estimate `bytes`, more memory than is available:
/// the tables are built whole in memory before they are written.
fn check_gen_memory(bytes: u128) -> Result<()> {
    let Some(available) = crate::memory::available_bytes() else {
        return Ok(());
    };
    if bytes > u128::from(available) {
        const GIB: f64 = (1u64 << 30) as f64;
        return Err(Error::Usage(format!(
            "these sizes need about {:.1} GiB of memory to generate, but {:.1} GiB are \
             available; give fewer --rows or --keys",
            bytes as f64 / GIB,
            available as f64 / GIB
        )));
    }
    Ok(())
}

fn describe(spec: &GenSpec) -> String {
    format!(
        "{} x {} rows over {} keys, Zipf {} / {}, {} hot keys, noise {}, seed {}",
        spec.left_rows,
        spec.right_rows,
        spec.keys,
        spec.left_skew,
        spec.right_skew,
        if spec.independent {
            "independent"
        } else {
            "shared"
        },
        spec.noise,
        spec.seed
    )
}

fn print_counts(counts: &JoinCounts) -> Result<()> {
    outln!("exact output rows of each join type:");
    for (name, rows) in [
        ("inner", counts.inner),
        ("left", counts.left),
        ("right", counts.right),
        ("full", counts.full),
        ("semi", counts.left_semi),
        ("anti", counts.left_anti),
        ("right-semi", counts.right_semi),
        ("right-anti", counts.right_anti),
    ] {
        outln!("  {name:<11} {rows}");
    }
    Ok(())
}

/// The web-log generator's spec from the flags of `gen --kind pavlo`: `--keys` pages (rankings
/// rows), `--rows` (or `--right-rows`) visits, `--skew` of destURL, `--noise`, `--seed`. Flags of
/// the plain pair that mean nothing here are refused rather than ignored.
fn pavlo_spec(flags: &GenFlags) -> Result<PavloSpec> {
    for (flag, given) in [
        ("--left-rows", flags.left_rows.is_some()),
        ("--left-skew", flags.left_skew.is_some()),
        ("--right-skew", flags.right_skew.is_some()),
        ("--independent", flags.independent),
    ] {
        if given {
            return Err(Error::Usage(format!(
                "{flag} does not apply to --kind pavlo: rankings has one row per page (--keys), \
                 uservisits has --rows rows whose destURL follows Zipf --skew"
            )));
        }
    }
    let defaults = PavloSpec::default();
    let spec = PavloSpec {
        pages: flags.keys.unwrap_or(defaults.pages),
        visits: flags.right_rows.or(flags.rows).unwrap_or(defaults.visits),
        skew: flags.skew.unwrap_or(defaults.skew),
        noise: flags.noise,
        seed: flags.seed,
    };
    spec.validate().map_err(Error::Usage)?;
    // Per visit: four columns, two of them strings (an IP address and a URL), made twice (the
    // generator's and Arrow's); per page: a URL and two numbers, likewise.
    check_gen_memory(
        u128::from(spec.visits) * 160 + u128::from(spec.pages) * (120 + ZIPF_BYTES_PER_KEY),
    )?;
    Ok(spec)
}

/// Creates `gen`'s output directory.
fn create_out_dir(out: &Path) -> Result<()> {
    std::fs::create_dir_all(out)
        .map_err(|e| Error::Io(format!("{}: cannot create directory: {e}", out.display())))
}

/// `skewjoin gen --kind pavlo`: rankings and uservisits.
fn gen_pavlo(args: &GenArgs, format: FileFormat, extension: &str) -> Result<()> {
    let spec = pavlo_spec(&args.gen)?;
    create_out_dir(&args.out)?;
    let pair = generate_pavlo(&spec);
    let rankings = args.out.join(format!("rankings.{extension}"));
    let uservisits = args.out.join(format!("uservisits.{extension}"));
    write_table(&rankings, format, &rankings_batch(&pair.rankings))?;
    write_table(&uservisits, format, &uservisits_batch(&pair.uservisits))?;
    outln!("wrote {} and {}", rankings.display(), uservisits.display());
    outln!(
        "{} pages x {} visits, destURL Zipf {}, noise {}, seed {}; join on \
         rankings.pageURL = uservisits.destURL (--left-on pageURL --right-on destURL)",
        spec.pages,
        spec.visits,
        spec.skew,
        spec.noise,
        spec.seed
    );
    print_counts(&pair.counts())?;
    Ok(())
}

/// `skewjoin gen`.
pub fn gen(args: GenArgs) -> Result<()> {
    let format = FileFormat::parse(&args.format)?;
    let extension = match format {
        FileFormat::Parquet => "parquet",
        FileFormat::ArrowIpc => "arrow",
        FileFormat::Csv => "csv",
    };
    if args.kind == "pavlo" {
        return gen_pavlo(&args, format, extension);
    }
    let spec = gen_spec(&args.gen, GenSpec::default())?;
    create_out_dir(&args.out)?;
    let pair = generate(&spec);
    let left_path = args.out.join(format!("left.{extension}"));
    let right_path = args.out.join(format!("right.{extension}"));
    write_table(&left_path, format, &to_batch(&pair.left))?;
    write_table(&right_path, format, &to_batch(&pair.right))?;
    outln!("wrote {} and {}", left_path.display(), right_path.display());
    outln!("{}", describe(&spec));
    print_counts(&pair.counts())?;
    Ok(())
}

fn expected_rows(counts: &JoinCounts, how: JoinType) -> u64 {
    match how {
        JoinType::Inner => counts.inner,
        JoinType::Left => counts.left,
        JoinType::Right => counts.right,
        JoinType::Full => counts.full,
        JoinType::LeftSemi => counts.left_semi,
        JoinType::LeftAnti => counts.left_anti,
        JoinType::RightSemi => counts.right_semi,
        JoinType::RightAnti => counts.right_anti,
    }
}

/// `skewjoin demo`.
pub fn demo(args: DemoArgs) -> Result<()> {
    let how = parse_how(&args.run.how)?;
    let run = RunArgs {
        workers: args.run.workers.or(Some(2)),
        partitions: args.run.partitions.or(Some(8)),
        ..args.run.clone()
    };
    let (workers, partitions) = layout(&run)?;
    let defaults = GenSpec {
        left_rows: 100_000,
        right_rows: 100_000,
        keys: 10_000,
        left_skew: 0.8,
        right_skew: 0.8,
        ..GenSpec::default()
    };
    let spec = gen_spec(&args.gen, defaults)?;
    outln!("skewjoin demo: {} join of generated data", how);
    outln!("data: {}", describe(&spec));
    let start = Instant::now();
    let pair = generate(&spec);
    let counts = pair.counts();
    let expected = expected_rows(&counts, how);
    let left = to_side("left", &pair.left);
    let right = to_side("right", &pair.right);
    outln!(
        "generated in {:.2}s; the exact {how} join has {expected} rows",
        start.elapsed().as_secs_f64()
    );
    outln!(
        "running each strategy on {workers} worker threads, {partitions} partitions; load is max/mean over partitions (1.00 = perfectly even); copies is records received over input rows (1.00x: no record copied)\n"
    );
    outln!(
        "{:<10} {:>12} {:>16} {:>9} {:>13} {:>10} {:>10} {:>10} {:>8}",
        "strategy",
        "rows",
        "checksum",
        "time",
        "rows/s",
        "input",
        "output",
        "peak",
        "copies"
    );
    let mut checksums = Vec::new();
    let mut all_right = true;
    for strategy in Strategy::CONCRETE {
        let inputs = PlanInputs {
            how,
            left_rows: spec.left_rows,
            right_rows: spec.right_rows,
            workers,
            // No budget: each strategy runs as named (AM-Join would run IB-Join on a side within
            // a budget, and the demo shows AM-Join's own key classes).
            broadcast_limit: 0,
            costs: WorkCosts::THREADS,
        };
        let choice = match choose(strategy, &inputs) {
            Ok(choice) => with_vprp_flags(choice, &run)?,
            Err(_) => {
                outln!("{:<10} (cannot compute a {how} join)", strategy.name());
                continue;
            }
        };
        let plan = JoinPlan {
            how,
            resolved: choice.resolved,
            partitions,
            workers,
        };
        let report = engine::run(left.clone(), right.clone(), plan, None, None, None)?;
        let label = match choice.resolved {
            Resolved::Broadcast { side: Side::Left } => "bcast-L".to_string(),
            Resolved::Broadcast { side: Side::Right } => "bcast-R".to_string(),
            Resolved::Ib { small: Side::Left } => "ib-L".to_string(),
            Resolved::Ib { small: Side::Right } => "ib-R".to_string(),
            Resolved::Der { small: Side::Left } => "der-L".to_string(),
            Resolved::Der { small: Side::Right } => "der-R".to_string(),
            Resolved::Ddr { small: Side::Left } => "ddr-L".to_string(),
            Resolved::Ddr { small: Side::Right } => "ddr-R".to_string(),
            other => other.name().to_string(),
        };
        let seconds = report.elapsed.as_secs_f64();
        outln!(
            "{:<10} {:>12} {:>16} {:>8.3}s {:>13.3e} {:>10.2} {:>10.2} {:>10.2} {:>7.2}x",
            label,
            report.output_rows,
            checksum_hex(report.checksum),
            seconds,
            report.output_rows as f64 / seconds.max(1e-9),
            report.loads.input_imbalance(),
            report.loads.output_imbalance(),
            report.loads.peak_imbalance(),
            report
                .loads
                .copying_factor(spec.left_rows + spec.right_rows),
        );
        all_right &= report.output_rows == expected;
        checksums.push(report.checksum);
    }
    checksums.dedup();
    outln!("");
    if all_right && checksums.len() == 1 {
        outln!("every strategy produced the exact {expected} rows with the same checksum");
        Ok(())
    } else {
        Err(Error::Internal(
            "strategies disagree on the output; this is a bug, please report it".into(),
        ))
    }
}
