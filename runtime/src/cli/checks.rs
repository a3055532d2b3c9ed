//! What the flags ask for, checked once for one process and a cluster: join type, layout, key and output columns, paths we write, codecs.

use std::path::Path;

use arrow::datatypes::Schema;
use skewjoin_operators::{JoinType, Partitioning, Side};
use skewjoin_planner::strategy::VprpSettings;
use skewjoin_planner::Tuning;

use crate::cli::{JoinArgs, RunArgs};
use crate::error::{Error, Result};
use crate::io::{similar_column, FileFormat, OutputCompression};

pub(crate) fn parse_how(how: &str) -> Result<JoinType> {
    how.parse().map_err(|e| Error::Usage(format!("--how: {e}")))
}

/// The VPRP flags, checked before anything is read.
pub(crate) fn check_vprp_flags(run: &RunArgs) -> Result<()> {
    if !(0.0..=1.0).contains(&run.sample_fraction) || run.virtual_per_partition == 0 {
        return Err(Error::Usage(
            "--sample-fraction must be in 0..1 and --virtual-per-partition at least 1".into(),
        ));
    }
    Ok(())
}

/// `tuning` with the VPRP flags ([`check_vprp_flags`]) added, which every run has (with their
/// defaults): the tuning the planner applies once, after its choice.
pub(crate) fn with_vprp_flags(tuning: &Tuning, run: &RunArgs) -> Tuning {
    Tuning {
        virtual_per_partition: Some(run.virtual_per_partition),
        sample_per_million: Some(
            VprpSettings::default()
                .with_sample_fraction(run.sample_fraction)
                .sample_per_million,
        ),
        ..*tuning
    }
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

/// The output columns a join is asked for: each side's by name (`left`, `right`), or `select`'s
/// from whichever side has them; `None` is all of a side's columns. The command line's
/// `--left-columns`, `--right-columns` and `--select`; the Python package's `left_columns`,
/// `right_columns` and `select`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ColumnChoice {
    /// The left input's output columns, in order.
    pub left: Option<Vec<String>>,
    /// The right input's output columns, in order.
    pub right: Option<Vec<String>>,
    /// Output columns by name, from whichever input has them; the left's come first.
    pub select: Option<Vec<String>>,
}

impl ColumnChoice {
    /// Whether any columns are chosen (else every column of both inputs is output).
    pub fn is_given(&self) -> bool {
        self.left.is_some() || self.right.is_some() || self.select.is_some()
    }

    /// The flag that chose `side`'s output columns, for errors: `--select` or
    /// `--left-columns` / `--right-columns`.
    pub(crate) fn flag(&self, side: Side) -> &'static str {
        match (self.select.is_some(), side) {
            (true, _) => "--select",
            (false, Side::Left) => "--left-columns",
            (false, Side::Right) => "--right-columns",
        }
    }
}

/// The columns each side gives the output, from `choice` (`None`: all of that side's).
/// `schemas` and `keys` are each side's columns and key columns, `inputs` what to call each
/// side in messages (its file). A column asked of a side the join type does not output, a name
/// neither side has, and a name both have (but a key of both at the same place, taken from the
/// side every output row has) are usage or input errors that say what to write instead.
pub(crate) fn output_columns(
    choice: &ColumnChoice,
    how: JoinType,
    schemas: [&Schema; 2],
    keys: [&[String]; 2],
    inputs: [&str; 2],
) -> Result<[Option<Vec<String>>; 2]> {
    let sides = [Side::Left, Side::Right];
    let mut chosen = [choice.left.clone(), choice.right.clone()];
    for (flag, names) in [
        ("--left-columns", &choice.left),
        ("--right-columns", &choice.right),
        ("--select", &choice.select),
    ] {
        let names = names.as_deref().unwrap_or_default();
        if names.iter().any(String::is_empty) {
            return Err(Error::Usage(format!(
                "{flag} has an empty column name (a stray comma?); separate names by one comma"
            )));
        }
        let repeated = (1..names.len()).find(|&at| names[..at].contains(&names[at]));
        if let Some(name) = repeated.map(|at| &names[at]) {
            return Err(Error::Usage(format!(
                "{flag} names `{name}` twice; name each column once"
            )));
        }
    }
    if choice.select.is_some() && (choice.left.is_some() || choice.right.is_some()) {
        return Err(Error::Usage(
            "--select chooses the columns of both inputs: give it or --left-columns and \
             --right-columns, not both"
                .into(),
        ));
    }
    for (index, side) in sides.into_iter().enumerate() {
        if chosen[index].is_some() && !how.outputs_side(side) {
            return Err(Error::Usage(format!(
                "--{side}-columns: {} outputs no column of the {side} input; leave it out",
                a_join(how)
            )));
        }
    }
    let Some(names) = &choice.select else {
        return some_column(chosen, how, schemas);
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
                    format!("{} has {}", inputs[index], names.join(", "))
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
    some_column(chosen, how, schemas)
}

/// `chosen`, unless it leaves the output no column (an empty list of names, possible from
/// Python), which is refused.
fn some_column(
    chosen: [Option<Vec<String>>; 2],
    how: JoinType,
    schemas: [&Schema; 2],
) -> Result<[Option<Vec<String>>; 2]> {
    let output = [Side::Left, Side::Right]
        .into_iter()
        .zip(&chosen)
        .zip(schemas)
        .filter(|((side, _), _)| how.outputs_side(*side))
        .map(|((_, names), schema)| names.as_ref().map_or(schema.fields().len(), Vec::len))
        .sum::<usize>();
    if output == 0 {
        return Err(Error::Usage(
            "the chosen columns leave the output none; name at least one".into(),
        ));
    }
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
