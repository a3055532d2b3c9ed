//! Joins of tables already in memory, for a program that holds Arrow batches rather than files
//! (the Python package, or a Rust caller): the same checks, strategy choice, workers and
//! metrics as `skewjoin join`, with the tables joined as they are (their batches are not copied
//! into one) and the output handed back as Arrow batches, while the join runs.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//!
//! use arrow::array::{Int64Array, RecordBatch};
//! use arrow::datatypes::{DataType, Field, Schema};
//! use skewjoin_runtime::tables::{Table, TableJoin};
//!
//! let table = |name: &str, keys: Vec<i64>| {
//!     let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true)]));
//!     let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(keys))])
//!         .unwrap();
//!     Table { name: name.into(), schema, batches: vec![batch] }
//! };
//! let join = TableJoin::on(&["k"], &["k"]);
//! let prepared = join.prepare(table("left", vec![1, 2, 2]), table("right", vec![2, 3]), None).unwrap();
//! let output = Arc::new(Mutex::new(Vec::new()));
//! let kept = Arc::clone(&output);
//! let sink = Arc::new(move |batch: RecordBatch| {
//!     kept.lock().unwrap().push(batch);
//!     Ok(())
//! });
//! let metrics = prepared.run(Some(sink), None).unwrap();
//! assert_eq!(metrics.output_rows, 2);
//! let rows: usize = output.lock().unwrap().iter().map(RecordBatch::num_rows).sum();
//! assert_eq!(rows, 2);
//! ```

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use skewjoin_operators::{JoinType, Side};
use skewjoin_planner::skew_check::skew_reason;
use skewjoin_planner::{Choice, Strategy, Tuning};

pub use crate::cli::checks::ColumnChoice;
use crate::cli::checks::{layout, output_columns};
use crate::cli::RunArgs;
use crate::engine::{self, BatchSink, JoinPlan, OutputTarget, SideData};
use crate::error::{Error, Result};
use crate::explain::Plan;
use crate::io::batches::{column_indices, InputFile};
use crate::io::{check_key_compat, output_schema, FileFormat};
use crate::memory::BroadcastBudget;
use crate::metrics::Metrics;
use crate::plan::{choose_strategy, metrics_for, plan_of, PlanFacts, PlanRequest};

/// A table in memory: batches of one schema.
#[derive(Clone, Debug)]
pub struct Table {
    /// What to call it in messages ("the left table", a file's path).
    pub name: String,
    /// Its schema.
    pub schema: SchemaRef,
    /// Its rows.
    pub batches: Vec<RecordBatch>,
}

/// One side of a join of tables: a table in memory, or a file read by the join (see
/// [`TableJoin::prepare_sources`]).
#[derive(Clone, Debug)]
pub enum Source {
    /// A table already in memory.
    Table(Table),
    /// A Parquet, Arrow IPC or CSV file.
    File {
        /// Its path.
        path: PathBuf,
        /// Its format.
        format: FileFormat,
    },
}

/// A [`Source`] whose schema is known: a table, or a file opened (its footer or header read).
enum Opened {
    Table(Table),
    File(InputFile),
}

impl Opened {
    /// A table as it is, or a file opened (its schema, key columns and row count read) with
    /// `keys` as its key columns.
    fn new(source: Source, keys: &[String]) -> Result<Opened> {
        match source {
            Source::Table(table) => Ok(Opened::Table(table)),
            Source::File { path, format } => InputFile::open(&path, format, keys).map(Opened::File),
        }
    }

    fn schema(&self) -> SchemaRef {
        match self {
            Opened::Table(table) => Arc::clone(&table.schema),
            Opened::File(input) => Arc::clone(&input.schema),
        }
    }

    fn name(&self) -> String {
        match self {
            Opened::Table(table) => table.name.clone(),
            Opened::File(input) => input.path.display().to_string(),
        }
    }

    /// A table as it is, or a file's key columns alone read on `threads` threads.
    fn read_keys(self, threads: usize, stop: Option<&AtomicBool>) -> Result<Table> {
        match self {
            Opened::Table(table) => Ok(table),
            Opened::File(input) => {
                let (schema, batches) = input.read_all(true, threads, stop)?;
                Ok(Table {
                    name: input.path.display().to_string(),
                    schema,
                    batches,
                })
            }
        }
    }

    /// The table, a file's rows read on `threads` threads: only its `chosen` and key columns
    /// where `chosen` is given (the others left undecoded), every column otherwise.
    fn read(
        self,
        chosen: Option<&[String]>,
        flag: &str,
        threads: usize,
        stop: Option<&AtomicBool>,
    ) -> Result<Table> {
        let mut input = match self {
            Opened::Table(table) => return Ok(table),
            Opened::File(input) => input,
        };
        let name = input.path.display().to_string();
        if let Some(names) = chosen {
            input.select(names, flag)?;
        }
        // The columns read: the chosen and the key columns, in the file's order.
        let (schema, batches) = input.read_all(false, threads, stop)?;
        Ok(Table {
            name,
            schema,
            batches,
        })
    }
}

/// How to join two tables: the key columns and what `skewjoin join`'s flags say past the files.
#[derive(Clone, Debug)]
pub struct TableJoin {
    /// The left table's key columns.
    pub left_on: Vec<String>,
    /// The right table's key columns, as many.
    pub right_on: Vec<String>,
    /// The output columns, as `--left-columns`, `--right-columns` or `--select` choose them
    /// (default: every column of both tables). The others are never hashed or taken into the
    /// output; key columns are read for the join whether output or not.
    pub columns: ColumnChoice,
    /// The strategy, by its name (`auto`, `shuffle`, `am`, ...).
    pub strategy: String,
    /// The join type, W, P and VPRP's settings, as `--how`, `--workers`, `--partitions`,
    /// `--virtual-per-partition` and `--sample-fraction` give them.
    pub run: RunArgs,
    /// AM-Join's and Tree-Join's settings.
    pub tuning: Tuning,
    /// `--broadcast-limit`.
    pub broadcast_limit: Option<u64>,
    /// `--memory-limit`.
    pub memory_limit: Option<u64>,
    /// Whether the output rows are made (handed to an output), not only counted: `auto`
    /// weighs an output pair by it, as the command line does with and without `--output`.
    pub makes_output: bool,
    /// Whether the run's checksum is computed (the metrics' `checksum`). Without it no row is
    /// hashed, and the metrics say the checksum was not computed: a caller that keeps the
    /// output and shows no metrics saves hashing every value of every row it reads.
    pub checksum: bool,
}

impl TableJoin {
    /// An inner join on these key columns, with `skewjoin join`'s defaults for the rest.
    pub fn on(left_on: &[&str], right_on: &[&str]) -> TableJoin {
        TableJoin {
            left_on: left_on.iter().map(|name| name.to_string()).collect(),
            right_on: right_on.iter().map(|name| name.to_string()).collect(),
            columns: ColumnChoice::default(),
            strategy: Strategy::Auto.name().into(),
            run: RunArgs::default(),
            tuning: Tuning::default(),
            broadcast_limit: None,
            memory_limit: None,
            makes_output: true,
            checksum: true,
        }
    }

    /// As [`prepare`](Self::prepare), for sides that may be files: a file is read here, its runs
    /// of Parquet row groups or Arrow IPC record batches on the join's workers (a CSV file or
    /// IPC stream on one; see [`InputFile::read_all`]), and where [`columns`](Self::columns)
    /// choose a side's columns only those and its key columns are decoded (as `skewjoin join
    /// --left-columns` reads it; of a side the join type does not output, only the keys), after
    /// the choice is checked against both sides' schemas (a file's from its footer or header).
    pub fn prepare_sources(
        &self,
        left: Source,
        right: Source,
        stop: Option<&AtomicBool>,
    ) -> Result<PreparedTables> {
        let left = Opened::new(left, &self.left_on)?;
        let right = Opened::new(right, &self.right_on)?;
        let (threads, _) = layout(&self.run)?;
        if !self.columns.is_given() {
            let left = left.read(None, "", threads, stop)?;
            let right = right.read(None, "", threads, stop)?;
            return self.prepare(left, right, stop);
        }
        let how = self.how()?;
        let [left_chosen, right_chosen] = self.columns_read(how, &left, &right)?;
        let left = left.read(
            left_chosen.as_deref(),
            self.columns.flag(Side::Left),
            threads,
            stop,
        )?;
        let right = right.read(
            right_chosen.as_deref(),
            self.columns.flag(Side::Right),
            threads,
            stop,
        )?;
        let join = TableJoin {
            columns: ColumnChoice {
                left: left_chosen.filter(|_| how.outputs_side(Side::Left)),
                right: right_chosen.filter(|_| how.outputs_side(Side::Right)),
                select: None,
            },
            ..self.clone()
        };
        join.prepare(left, right, stop)
    }

    /// The plan of this join of `left` and `right` ([`PreparedTables::plan`], `top` hottest
    /// keys), from their keys alone: of a file only the key columns are decoded, on the join's
    /// workers, as `skewjoin explain` reads it, and no row is hashed. A column choice is checked
    /// against the schemas as [`prepare_sources`](Self::prepare_sources) checks it, though no
    /// column but the keys is read.
    pub fn plan_sources(
        &self,
        left: Source,
        right: Source,
        top: usize,
        stop: Option<&AtomicBool>,
    ) -> Result<Plan> {
        let left = Opened::new(left, &self.left_on)?;
        let right = Opened::new(right, &self.right_on)?;
        let (threads, _) = layout(&self.run)?;
        if self.columns.is_given() {
            let chosen = self.columns_read(self.how()?, &left, &right)?;
            // Each side's names, as a read of its columns would look them up.
            let sides = [(&left, Side::Left), (&right, Side::Right)];
            for ((opened, side), names) in sides.into_iter().zip(chosen) {
                if let Some(names) = names {
                    let (schema, name) = (opened.schema(), opened.name());
                    column_indices(&schema, &names, Path::new(&name), self.columns.flag(side))?;
                }
            }
        }
        let left = left.read_keys(threads, stop)?;
        let right = right.read_keys(threads, stop)?;
        let keys_only = TableJoin {
            columns: ColumnChoice::default(),
            checksum: false,
            ..self.clone()
        };
        Ok(keys_only.prepare(left, right, stop)?.plan(top))
    }

    /// The columns of each side, by name, that a read of it decodes besides its keys (`None`:
    /// all): the column choice, checked against both sides' schemas ([`output_columns`]). From
    /// here `select`'s names, resolved, are a side's own, and of a side the join type does not
    /// output none is read ([`read_columns`]).
    fn columns_read(
        &self,
        how: JoinType,
        left: &Opened,
        right: &Opened,
    ) -> Result<[Option<Vec<String>>; 2]> {
        let chosen = output_columns(
            &self.columns,
            how,
            [left.schema().as_ref(), right.schema().as_ref()],
            [&self.left_on, &self.right_on],
            [&left.name(), &right.name()],
        )?;
        Ok(read_columns(how, chosen))
    }

    /// The join type `run.how` names.
    fn how(&self) -> Result<JoinType> {
        self.run
            .how
            .parse()
            .map_err(|e| Error::Usage(format!("how: {e}")))
    }

    /// Checks the request against the tables, reads every row's key and hash, and chooses the
    /// strategy. Bad arguments are [`Error::Usage`]; key columns that are missing or cannot be
    /// joined are [`Error::Input`], naming the table and column. Setting `stop` ends it with
    /// [`Error::Interrupted`].
    pub fn prepare(
        &self,
        left: Table,
        right: Table,
        stop: Option<&AtomicBool>,
    ) -> Result<PreparedTables> {
        let start = Instant::now();
        let how = self.how()?;
        let strategy: Strategy = self
            .strategy
            .parse()
            .map_err(|e| Error::Usage(format!("strategy: {e}")))?;
        let (workers, partitions) = layout(&self.run)?;
        if self.left_on.is_empty() {
            return Err(Error::Usage(
                "no join key: name the key columns of both tables".into(),
            ));
        }
        if self.left_on.len() != self.right_on.len() {
            return Err(Error::Usage(format!(
                "the left key has {} columns but the right key has {}; give the same number",
                self.left_on.len(),
                self.right_on.len()
            )));
        }
        check_key_compat(
            (Path::new(&left.name), left.schema.as_ref(), &self.left_on),
            (
                Path::new(&right.name),
                right.schema.as_ref(),
                &self.right_on,
            ),
        )?;
        let chosen = output_columns(
            &self.columns,
            how,
            [left.schema.as_ref(), right.schema.as_ref()],
            [&self.left_on, &self.right_on],
            [&left.name, &right.name],
        )?;
        // Where columns are chosen, a side not output is neither hashed nor kept past its keys.
        let [left_columns, right_columns] = if self.columns.is_given() {
            read_columns(how, chosen)
        } else {
            chosen
        };
        let left = self.side(left, &self.left_on, left_columns, Side::Left, workers, stop)?;
        let right = self.side(
            right,
            &self.right_on,
            right_columns,
            Side::Right,
            workers,
            stop,
        )?;
        let rows = (left.keys.len() as u64, right.keys.len() as u64);
        let (choice, budget) = choose_strategy(
            &PlanRequest {
                strategy,
                how,
                workers,
                rows,
                written: self.makes_output,
                run: &self.run,
                tuning: &self.tuning,
                broadcast_limit: self.broadcast_limit,
                memory_limit: self.memory_limit,
            },
            |costs| {
                Ok(skew_reason(
                    &left.keys,
                    &right.keys,
                    partitions,
                    workers,
                    costs,
                ))
            },
        )?;
        Ok(PreparedTables {
            how,
            workers,
            partitions,
            left,
            right,
            choice,
            budget,
            prepare_seconds: start.elapsed().as_secs_f64(),
            checksum: self.checksum,
        })
    }
}

impl TableJoin {
    /// One side's keys and row hashes, its batches kept with the `selected` columns only (all
    /// where `None`).
    fn side(
        &self,
        table: Table,
        key_columns: &[String],
        selected: Option<Vec<String>>,
        side: Side,
        workers: usize,
        stop: Option<&AtomicBool>,
    ) -> Result<SideData> {
        let indices = selected
            .map(|names| {
                column_indices(
                    &table.schema,
                    &names,
                    Path::new(&table.name),
                    self.columns.flag(side),
                )
            })
            .transpose()?;
        SideData::from_batches_selecting(
            &table.name,
            table.schema,
            table.batches,
            key_columns,
            indices.as_deref(),
            self.checksum,
            workers,
            stop,
        )
    }
}

/// The columns of each side a join needs, from those [`output_columns`] chose: none (past the
/// keys) of a side the join type does not output.
fn read_columns(how: JoinType, chosen: [Option<Vec<String>>; 2]) -> [Option<Vec<String>>; 2] {
    let [left, right] = chosen;
    let needed = |columns: Option<Vec<String>>, side: Side| {
        if how.outputs_side(side) {
            columns
        } else {
            Some(Vec::new())
        }
    };
    [needed(left, Side::Left), needed(right, Side::Right)]
}

/// Two tables ready to join, with the strategy chosen.
#[derive(Debug)]
pub struct PreparedTables {
    how: JoinType,
    workers: usize,
    partitions: usize,
    left: SideData,
    right: SideData,
    choice: Choice,
    budget: BroadcastBudget,
    prepare_seconds: f64,
    checksum: bool,
}

impl PreparedTables {
    /// The schema of the output: the columns of both tables, a right column named as a left one
    /// suffixed `_right` (see [`output_schema`]).
    pub fn output_schema(&self) -> SchemaRef {
        output_schema(&self.left.schema, &self.right.schema, self.how)
    }

    /// The plan `skewjoin explain` shows: the strategy and why, the key statistics, the `top`
    /// hottest keys and the predicted per-partition load.
    pub fn plan(&self, top: usize) -> Plan {
        plan_of(
            &PlanFacts {
                choice: &self.choice,
                how: self.how,
                workers: self.workers,
                partitions: self.partitions,
                budget: &self.budget,
            },
            (&self.left.name, &self.left),
            (&self.right.name, &self.right),
            top,
        )
    }

    /// Runs the join. Each batch of output rows (of [`output_schema`](Self::output_schema)) goes
    /// to `output` from the worker that made it, as it is made; without one the rows are only
    /// counted (and checksummed, with [`TableJoin::checksum`]). Setting `stop` ends the run with
    /// [`Error::Interrupted`] within a step of the workers; an error from `output` ends it with
    /// that error.
    pub fn run(self, output: Option<BatchSink>, stop: Option<Arc<AtomicBool>>) -> Result<Metrics> {
        let schema = self.output_schema();
        let rows = (self.left.keys.len() as u64, self.right.keys.len() as u64);
        let plan = JoinPlan {
            how: self.how,
            resolved: self.choice.resolved,
            partitions: self.partitions,
            workers: self.workers,
        };
        let output = output.map(|sink| OutputTarget::Batches { schema, sink });
        let mut report = engine::run(self.left, self.right, plan, output, None, stop)?;
        if !self.checksum {
            // Every row hashed as 0: what was summed is no checksum of the rows.
            report.checksum = None;
        }
        Ok(metrics_for(
            &self.choice,
            self.how,
            self.workers,
            self.partitions,
            rows,
            self.prepare_seconds,
            &report,
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::atomic::Ordering;
    use std::sync::Mutex;

    use arrow::array::{Array, Int64Array};
    use arrow::datatypes::{DataType, Field, Schema};
    use skewjoin_operators::reference::nested_loop_join;
    use skewjoin_operators::Key;

    use super::*;

    /// A table of `keys` (NULL for `None`) with a distinct `id` per row, cut into batches of
    /// `cuts` rows (empty ones included) and one of what is left.
    fn table(name: &str, keys: &[Option<i64>], first_id: i64, cuts: &[usize]) -> Table {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, true),
            Field::new("id", DataType::Int64, false),
        ]));
        let mut batches = Vec::new();
        let mut start = 0;
        for &len in cuts.iter().chain([&usize::MAX]) {
            let end = start + len.min(keys.len() - start);
            let ids: Vec<i64> = (start..end).map(|row| first_id + row as i64).collect();
            batches.push(
                RecordBatch::try_new(
                    Arc::clone(&schema),
                    vec![
                        Arc::new(Int64Array::from(keys[start..end].to_vec())),
                        Arc::new(Int64Array::from(ids)),
                    ],
                )
                .unwrap(),
            );
            start = end;
        }
        Table {
            name: name.into(),
            schema,
            batches,
        }
    }

    /// Keys hot on both sides (7), hot on one (8 left, 9 right), on one side only, and NULLs.
    fn keys(side: u8) -> Vec<Option<i64>> {
        let mut keys = Vec::new();
        for row in 0..240i64 {
            keys.push(match row % 12 {
                0..=3 => Some(7),
                4 | 5 => Some(if side == 0 { 8 } else { 9 }),
                6 => None,
                7 => Some(100 + row % 5 + i64::from(side) * 3),
                _ => Some(row % 40),
            });
        }
        keys
    }

    /// The output as a multiset of (left id, right id), `None` where a side is padded or not
    /// output.
    fn pairs(batches: &[RecordBatch], how: JoinType) -> HashMap<(Option<i64>, Option<i64>), u32> {
        let mut counted = HashMap::new();
        for batch in batches {
            let column = |name: &str| {
                batch.column_by_name(name).map(|column| {
                    column
                        .as_any()
                        .downcast_ref::<Int64Array>()
                        .unwrap()
                        .clone()
                })
            };
            let (left, right) = match (
                how.emits_pairs(),
                how.outputs_side(skewjoin_operators::Side::Left),
            ) {
                (true, _) => (column("id"), column("id_right")),
                (false, true) => (column("id"), None),
                (false, false) => (None, column("id")),
            };
            for row in 0..batch.num_rows() {
                let id = |ids: &Option<Int64Array>| {
                    ids.as_ref()
                        .and_then(|ids| ids.is_valid(row).then(|| ids.value(row)))
                };
                *counted.entry((id(&left), id(&right))).or_insert(0) += 1;
            }
        }
        counted
    }

    fn expected(
        left: &[Option<i64>],
        right: &[Option<i64>],
        how: JoinType,
    ) -> HashMap<(Option<i64>, Option<i64>), u32> {
        let side = |keys: &[Option<i64>], first_id: i64| -> Vec<(Key, i64)> {
            keys.iter()
                .enumerate()
                .map(|(row, key)| (key.map_or(Key::Null, Key::Int), first_id + row as i64))
                .collect()
        };
        let mut counted = HashMap::new();
        for (_, l, r) in nested_loop_join(&side(left, 0), &side(right, 10_000), how) {
            let l = l.filter(|_| how.outputs_side(skewjoin_operators::Side::Left));
            let r = r.filter(|_| how.outputs_side(skewjoin_operators::Side::Right));
            *counted.entry((l, r)).or_insert(0) += 1;
        }
        counted
    }

    fn collect_into(batches: &Arc<Mutex<Vec<RecordBatch>>>) -> BatchSink {
        let batches = Arc::clone(batches);
        Arc::new(move |batch| {
            batches.lock().unwrap().push(batch);
            Ok(())
        })
    }

    #[test]
    fn every_strategy_and_join_type_on_batched_tables_matches_the_nested_loop() {
        let (left_keys, right_keys) = (keys(0), keys(1));
        let mut ran = HashMap::new();
        let strategies = std::iter::once("auto".to_string())
            .chain(Strategy::CONCRETE.iter().map(|s| s.name().to_string()));
        for strategy in strategies {
            for how in JoinType::ALL {
                for (workers, partitions) in [(1, 1), (3, 5)] {
                    let mut join = TableJoin::on(&["k"], &["k"]);
                    join.strategy = strategy.clone();
                    join.run.how = how.name().into();
                    join.run.workers = Some(workers);
                    join.run.partitions = Some(partitions);
                    // Rows not hashed for a checksum nobody reads join alike.
                    join.checksum = workers == 1;
                    let prepared = match join.prepare(
                        table("left", &left_keys, 0, &[0, 3, 1, 0, 17, 64]),
                        table("right", &right_keys, 10_000, &[100, 0, 1]),
                        None,
                    ) {
                        // A strategy that cannot compute this join type says so.
                        Err(Error::Usage(_)) => continue,
                        other => other.unwrap(),
                    };
                    assert_eq!(prepared.left.hashes.is_empty(), !join.checksum);
                    assert_eq!(prepared.right.hashes.is_empty(), !join.checksum);
                    let output = Arc::new(Mutex::new(Vec::new()));
                    let metrics = prepared.run(Some(collect_into(&output)), None).unwrap();
                    assert_eq!(
                        metrics.checksum == crate::metrics::NOT_COMPUTED,
                        !join.checksum
                    );
                    let output = output.lock().unwrap();
                    let rows: usize = output.iter().map(RecordBatch::num_rows).sum();
                    assert_eq!(rows as u64, metrics.output_rows);
                    assert_eq!(
                        pairs(&output, how),
                        expected(&left_keys, &right_keys, how),
                        "{strategy} {} W={workers} P={partitions}",
                        how.name()
                    );
                    *ran.entry(how.name()).or_insert(0) += 1;
                }
            }
        }
        // Every join type ran with most strategies (only some refuse some types).
        for how in JoinType::ALL {
            assert!(ran.get(how.name()).copied().unwrap_or(0) >= 12, "{ran:?}");
        }
    }

    /// One hot key on both sides: 4,000 x 4,000 pairs, far more than one batch.
    fn hot_pair() -> (Table, Table) {
        let keys = vec![Some(1); 4000];
        (
            table("left", &keys, 0, &[]),
            table("right", &keys, 10_000, &[]),
        )
    }

    #[test]
    fn a_run_stopped_by_its_caller_ends_interrupted_early() {
        let (left, right) = hot_pair();
        let mut join = TableJoin::on(&["k"], &["k"]);
        join.run.workers = Some(2);
        let prepared = join.prepare(left, right, None).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(0usize));
        let (stopper, counter) = (Arc::clone(&stop), Arc::clone(&seen));
        let sink: BatchSink = Arc::new(move |batch: RecordBatch| {
            *counter.lock().unwrap() += batch.num_rows();
            stopper.store(true, Ordering::Relaxed);
            Ok(())
        });
        assert_eq!(
            prepared.run(Some(sink), Some(stop)).unwrap_err(),
            Error::Interrupted
        );
        // Stopped well before its 16 million rows.
        assert!(*seen.lock().unwrap() < 8_000_000);
    }

    /// A stop that comes while a worker hands over its last window (all of this join's output
    /// fits in one, so it is handed over as the workers finish) ends the run interrupted, not
    /// complete with rows missing.
    #[test]
    fn a_run_stopped_while_its_last_rows_are_handed_over_ends_interrupted() {
        let keys = vec![Some(1); 600];
        let (left, right) = (
            table("left", &keys, 0, &[]),
            table("right", &keys, 10_000, &[]),
        );
        let mut join = TableJoin::on(&["k"], &["k"]);
        join.run.workers = Some(2);
        let prepared = join.prepare(left, right, None).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(0usize));
        let (stopper, counter) = (Arc::clone(&stop), Arc::clone(&seen));
        let sink: BatchSink = Arc::new(move |batch: RecordBatch| {
            *counter.lock().unwrap() += batch.num_rows();
            stopper.store(true, Ordering::Relaxed);
            Ok(())
        });
        assert_eq!(
            prepared.run(Some(sink), Some(stop)).unwrap_err(),
            Error::Interrupted
        );
        // 360,000 rows, 6 batches: the run stopped before it handed over all of them.
        assert!(*seen.lock().unwrap() < 360_000);
    }

    #[test]
    fn preparing_stops_when_told() {
        let (left, right) = hot_pair();
        let stop = AtomicBool::new(true);
        let join = TableJoin::on(&["k"], &["k"]);
        assert_eq!(
            join.prepare(left, right, Some(&stop)).unwrap_err(),
            Error::Interrupted
        );
    }

    #[test]
    fn an_output_error_ends_the_run_with_that_error() {
        let (left, right) = hot_pair();
        let mut join = TableJoin::on(&["k"], &["k"]);
        join.run.workers = Some(3);
        let prepared = join.prepare(left, right, None).unwrap();
        let sink: BatchSink =
            Arc::new(|_| Err(Error::Io("the reader of the output went away".into())));
        assert_eq!(
            prepared.run(Some(sink), None).unwrap_err(),
            Error::Io("the reader of the output went away".into())
        );
    }

    /// The output rows of `join` on the tables of `keys(0)` and `keys(1)`, as the values of
    /// the named `columns` per row (NULL as `None`), sorted; with the output's column names.
    fn chosen_rows(join: &TableJoin) -> (Vec<String>, Vec<Vec<Option<i64>>>) {
        let prepared = join
            .prepare(
                table("left", &keys(0), 0, &[5, 40]),
                table("right", &keys(1), 10_000, &[7]),
                None,
            )
            .unwrap();
        let schema = prepared.output_schema();
        let output = Arc::new(Mutex::new(Vec::new()));
        prepared.run(Some(collect_into(&output)), None).unwrap();
        let mut rows = Vec::new();
        for batch in output.lock().unwrap().iter() {
            assert_eq!(batch.schema().fields(), schema.fields());
            for row in 0..batch.num_rows() {
                rows.push(
                    batch
                        .columns()
                        .iter()
                        .map(|column| {
                            let column = column.as_any().downcast_ref::<Int64Array>().unwrap();
                            column.is_valid(row).then(|| column.value(row))
                        })
                        .collect(),
                );
            }
        }
        rows.sort();
        let names = schema.fields().iter().map(|f| f.name().clone()).collect();
        (names, rows)
    }

    #[test]
    fn chosen_columns_are_the_output_and_the_rows_are_those_of_every_column() {
        for how in [JoinType::Inner, JoinType::Full, JoinType::Left] {
            let mut all = TableJoin::on(&["k"], &["k"]);
            all.run.how = how.name().into();
            all.run.workers = Some(2);
            let (names, every) = chosen_rows(&all);
            assert_eq!(names, ["k", "id", "k_right", "id_right"]);
            // Each side's ids only, the key columns left out: the same rows, projected.
            let mut ids = all.clone();
            ids.columns.left = Some(vec!["id".into()]);
            ids.columns.right = Some(vec!["id".into()]);
            let (names, rows) = chosen_rows(&ids);
            assert_eq!(names, ["id", "id_right"]);
            let mut projected: Vec<Vec<Option<i64>>> =
                every.iter().map(|row| vec![row[1], row[3]]).collect();
            projected.sort();
            assert_eq!(rows, projected, "{}", how.name());
            // By name: `k` from the side every output row has (the left's, inner or left).
            let mut select = all.clone();
            select.columns.select = Some(vec!["k".into()]);
            if how == JoinType::Full {
                // Either side's may be NULL-padded.
                let error = select
                    .prepare(hot_pair().0, hot_pair().1, None)
                    .unwrap_err();
                assert!(
                    matches!(&error, Error::Usage(m) if m.contains("`k`") && m.contains("full join pads")),
                    "{error:?}"
                );
                continue;
            }
            let (names, rows) = chosen_rows(&select);
            assert_eq!(names, ["k"]);
            let mut keys: Vec<Vec<Option<i64>>> = every.iter().map(|row| vec![row[0]]).collect();
            keys.sort();
            assert_eq!(rows, keys);
        }
    }

    /// Files read by the join decode only the chosen and the key columns, and join as the same
    /// tables in memory do, in Parquet, Arrow IPC and CSV.
    #[test]
    fn files_read_by_the_join_decode_only_their_chosen_and_key_columns() {
        let dir = tempfile::tempdir().unwrap();
        let file = |table: &Table, format: FileFormat, extension: &str| {
            let path = dir.path().join(format!("{}.{extension}", table.name));
            let batch = arrow::compute::concat_batches(&table.schema, &table.batches).unwrap();
            crate::io::write_table(&path, format, &batch).unwrap();
            Source::File { path, format }
        };
        let left = table("left", &keys(0), 0, &[9]);
        // The right table with a column no join below chooses.
        let right = {
            let narrow = table("right", &keys(1), 10_000, &[]);
            let mut fields = narrow.schema.fields().to_vec();
            fields.push(Arc::new(Field::new("pad", DataType::Utf8, false)));
            let schema = Arc::new(Schema::new(fields));
            let batches = narrow
                .batches
                .iter()
                .map(|batch| {
                    let pad: arrow::array::StringArray = (0..batch.num_rows())
                        .map(|row| Some(format!("p{row}")))
                        .collect();
                    let mut columns = batch.columns().to_vec();
                    columns.push(Arc::new(pad));
                    RecordBatch::try_new(Arc::clone(&schema), columns).unwrap()
                })
                .collect();
            Table {
                name: narrow.name,
                schema,
                batches,
            }
        };
        for (format, extension) in [
            (FileFormat::Parquet, "parquet"),
            (FileFormat::ArrowIpc, "arrow"),
            (FileFormat::Csv, "csv"),
        ] {
            let (left_file, right_file) = (
                file(&left, format, extension),
                file(&right, format, extension),
            );
            // What the join reads of the right file with only `id` chosen: that and the key,
            // in the file's order, and not `pad`.
            let Source::File { path, format } = &right_file else {
                unreachable!()
            };
            let opened = Opened::File(InputFile::open(path, *format, &["k".into()]).unwrap());
            let read = opened
                .read(Some(&["id".into()]), "--right-columns", 2, None)
                .unwrap();
            let names: Vec<&str> = read
                .schema
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect();
            assert_eq!(names, ["k", "id"], "{extension}");
            for how in [JoinType::Inner, JoinType::Full, JoinType::RightSemi] {
                let mut join = TableJoin::on(&["k"], &["k"]);
                join.run.how = how.name().into();
                join.run.workers = Some(2);
                join.columns.right = Some(vec!["id".into()]);
                if how.outputs_side(Side::Left) {
                    join.columns.left = Some(vec!["id".into(), "k".into()]);
                }
                let in_memory = join.prepare(left.clone(), right.clone(), None).unwrap();
                let from_files = join
                    .prepare_sources(left_file.clone(), right_file.clone(), None)
                    .unwrap();
                // The same columns (a file's may say nullable where the table's do not).
                let columns = |prepared: &PreparedTables| -> Vec<(String, DataType)> {
                    let schema = prepared.output_schema();
                    let fields = schema.fields().iter();
                    fields
                        .map(|f| (f.name().clone(), f.data_type().clone()))
                        .collect()
                };
                assert_eq!(columns(&from_files), columns(&in_memory), "{extension}");
                let expected = in_memory.run(None, None).unwrap();
                let measured = from_files.run(None, None).unwrap();
                assert_eq!(measured.output_rows, expected.output_rows, "{extension}");
                assert_eq!(measured.checksum, expected.checksum, "{extension}");
            }
            // `select` resolves names against the files' own schemas; a semi join's other
            // side keeps none.
            let mut join = TableJoin::on(&["k"], &["k"]);
            join.run.how = "semi".into();
            join.columns.select = Some(vec!["id".into()]);
            let prepared = join
                .prepare_sources(left_file.clone(), right_file.clone(), None)
                .unwrap();
            let names: Vec<String> = prepared
                .output_schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            assert_eq!(names, ["id"]);
            // The right side, not output, keeps no column (its keys are held apart), and of a
            // file with none chosen only the key is read.
            assert!(prepared.right.schema.fields().is_empty(), "{extension}");
            let opened = Opened::File(InputFile::open(path, *format, &["k".into()]).unwrap());
            let read = opened.read(Some(&[]), "--select", 2, None).unwrap();
            let names: Vec<&str> = read
                .schema
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect();
            assert_eq!(names, ["k"], "{extension}");
            join.columns.select = Some(vec!["idd".into()]);
            let error = join
                .prepare_sources(left_file.clone(), right_file.clone(), None)
                .unwrap_err();
            assert!(
                matches!(&error, Error::Input(m) if m.contains("idd") && m.contains(extension)),
                "{error:?}"
            );
        }
    }

    /// A file read whole is decoded a run of row groups (or record batches) per thread, and its
    /// rows come back in the file's order whatever the number of threads; joined, it is the
    /// same tables in memory.
    #[test]
    fn files_read_whole_are_read_in_parts_in_order() {
        use arrow::ipc::writer::FileWriter;
        use parquet::arrow::ArrowWriter;
        use parquet::file::properties::WriterProperties;

        let dir = tempfile::tempdir().unwrap();
        let (left, right) = (
            table("left", &keys(0), 0, &[]),
            table("right", &keys(1), 0, &[]),
        );
        let whole =
            |table: &Table| arrow::compute::concat_batches(&table.schema, &table.batches).unwrap();
        // Parts of 7 rows: more parts than threads, several of them read by each thread.
        let write = |table: &Table, extension: &str| -> Source {
            let path = dir.path().join(format!("{}.{extension}", table.name));
            let file = std::fs::File::create(&path).unwrap();
            let batch = whole(table);
            let format = if extension == "parquet" {
                let properties = WriterProperties::builder()
                    .set_max_row_group_row_count(Some(7))
                    .build();
                let mut writer =
                    ArrowWriter::try_new(file, Arc::clone(&table.schema), Some(properties))
                        .unwrap();
                writer.write(&batch).unwrap();
                writer.close().unwrap();
                FileFormat::Parquet
            } else {
                let mut writer = FileWriter::try_new(file, &table.schema).unwrap();
                for start in (0..batch.num_rows()).step_by(7) {
                    let rows = 7.min(batch.num_rows() - start);
                    writer.write(&batch.slice(start, rows)).unwrap();
                }
                writer.finish().unwrap();
                FileFormat::ArrowIpc
            };
            Source::File { path, format }
        };
        for extension in ["parquet", "arrow"] {
            let (left_file, right_file) = (write(&left, extension), write(&right, extension));
            let Source::File { path, format } = &left_file else {
                unreachable!()
            };
            let input = InputFile::open(path, *format, &["k".into()]).unwrap();
            assert!(
                input.cuts().len() >= 8,
                "{extension}: {} parts",
                input.cuts().len()
            );
            for threads in [1, 2, 3, 4, 8] {
                let (schema, batches) = input.read_all(false, threads, None).unwrap();
                let read = arrow::compute::concat_batches(&schema, &batches).unwrap();
                assert_eq!(
                    read.columns(),
                    whole(&left).columns(),
                    "{extension}, {threads}"
                );
            }
            for workers in [1, 3] {
                let mut join = TableJoin::on(&["k"], &["k"]);
                join.run.how = "full".into();
                join.run.workers = Some(workers);
                let expected = join.prepare(left.clone(), right.clone(), None).unwrap();
                let from_files = join
                    .prepare_sources(left_file.clone(), right_file.clone(), None)
                    .unwrap();
                let (expected, measured) = (
                    expected.run(None, None).unwrap(),
                    from_files.run(None, None).unwrap(),
                );
                assert_eq!(measured.output_rows, expected.output_rows, "{extension}");
                assert_eq!(measured.checksum, expected.checksum, "{extension}");
            }
            // A plan from the keys alone is the plan of the files read whole, or of the tables.
            let plan_json = |plan: Plan| {
                let mut json = serde_json::to_value(&plan).unwrap();
                // What memory was free when the plan was made.
                json.as_object_mut().unwrap().remove("broadcast_budget");
                json
            };
            for (how, strategy) in [("inner", "auto"), ("left", "ib"), ("full", "shuffle")] {
                let mut join = TableJoin::on(&["k"], &["k"]);
                join.run.how = how.into();
                join.strategy = strategy.into();
                join.run.workers = Some(2);
                let case = format!("{extension} {how} {strategy}");
                let whole = join
                    .prepare_sources(left_file.clone(), right_file.clone(), None)
                    .unwrap()
                    .plan(5);
                assert!(!whole.hot_keys.is_empty(), "{case}");
                let whole = plan_json(whole);
                let from_keys = join
                    .plan_sources(left_file.clone(), right_file.clone(), 5, None)
                    .unwrap();
                assert_eq!(plan_json(from_keys), whole, "{case}");
                let tables = join.prepare(left.clone(), right.clone(), None).unwrap();
                let (left, right) = (Source::Table(left.clone()), Source::Table(right.clone()));
                let in_memory = join.plan_sources(left, right, 5, None).unwrap();
                assert_eq!(plan_json(in_memory), plan_json(tables.plan(5)), "{case}");
            }
            // A column choice is checked, as a join from the files checks it.
            let mut join = TableJoin::on(&["k"], &["k"]);
            join.columns.left = Some(vec!["idd".into()]);
            let planned = join.plan_sources(left_file.clone(), right_file.clone(), 5, None);
            let prepared = join.prepare_sources(left_file.clone(), right_file.clone(), None);
            let (Err(planned), Err(prepared)) = (&planned, &prepared) else {
                panic!("{extension}: {:?}", (planned.is_ok(), prepared.is_ok()));
            };
            assert_eq!(planned.to_string(), prepared.to_string(), "{extension}");
        }
        // Told to stop, a read ends interrupted.
        let Source::File { path, format } = write(&left, "parquet") else {
            unreachable!()
        };
        let input = InputFile::open(&path, format, &["k".into()]).unwrap();
        let stop = AtomicBool::new(true);
        assert!(matches!(
            input.read_all(false, 2, Some(&stop)),
            Err(Error::Interrupted)
        ));
    }

    #[test]
    fn bad_column_choices_name_what_is_wrong() {
        let prepare = |columns: ColumnChoice, how: &str| {
            let mut join = TableJoin::on(&["k"], &["k"]);
            join.columns = columns;
            join.run.how = how.into();
            let (left, right) = hot_pair();
            join.prepare(left, right, None).unwrap_err()
        };
        let names = |names: &[&str]| Some(names.iter().map(|name| name.to_string()).collect());
        let choice = |left: &[&str], right: &[&str], select: &[&str]| ColumnChoice {
            left: (!left.is_empty()).then(|| names(left)).flatten(),
            right: (!right.is_empty()).then(|| names(right)).flatten(),
            select: (!select.is_empty()).then(|| names(select)).flatten(),
        };
        // (the choice, the join type, whether an input error (else usage), what it says).
        let cases = [
            (
                choice(&["idd"], &[], &[]),
                "inner",
                true,
                &["left", "idd", "`id`"][..],
            ),
            (
                choice(&[], &["id"], &["k"]),
                "inner",
                false,
                &["--select", "not both"],
            ),
            // A semi join outputs no right column.
            (
                choice(&[], &["id"], &[]),
                "semi",
                false,
                &["--right-columns", "semi"],
            ),
            (choice(&["id", "id"], &[], &[]), "inner", false, &["twice"]),
            (
                choice(&[], &[], &["k", "k"]),
                "inner",
                false,
                &["--select names `k` twice"],
            ),
            // No column at all: refused, where one side's none is an output of the other's.
            (
                ColumnChoice {
                    select: names(&[]),
                    ..ColumnChoice::default()
                },
                "inner",
                false,
                &["none"],
            ),
        ];
        for (columns, how, input, says) in cases {
            let error = prepare(columns, how);
            let message = match (&error, input) {
                (Error::Input(message), true) | (Error::Usage(message), false) => message,
                _ => panic!("{error:?}"),
            };
            assert!(says.iter().all(|part| message.contains(part)), "{error:?}");
        }
        let mut join = TableJoin::on(&["k"], &["k"]);
        join.columns.left = names(&[]);
        let (left, right) = hot_pair();
        let names: Vec<String> = join
            .prepare(left, right, None)
            .unwrap()
            .output_schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(names, ["k", "id"]);
    }

    #[test]
    fn bad_requests_name_what_is_wrong() {
        let keys = vec![Some(1), None];
        let sides = || (table("left", &keys, 0, &[]), table("right", &keys, 10, &[]));
        let mut join = TableJoin::on(&["k"], &["nope"]);
        let (left, right) = sides();
        let error = join.prepare(left, right, None).unwrap_err();
        assert!(
            matches!(&error, Error::Input(message) if message.contains("nope") && message.contains("right")),
            "{error:?}"
        );
        join.right_on = vec!["k".into(), "id".into()];
        let (left, right) = sides();
        assert!(matches!(
            join.prepare(left, right, None),
            Err(Error::Usage(_))
        ));
        join.right_on = vec!["k".into()];
        join.run.how = "sideways".into();
        let (left, right) = sides();
        let error = join.prepare(left, right, None).unwrap_err();
        assert!(
            matches!(&error, Error::Usage(message) if message.starts_with("how:")),
            "{error:?}"
        );
    }

    #[test]
    fn a_key_named_by_two_columns_is_refused_as_ambiguous() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, true),
            Field::new("k", DataType::Int64, true),
        ]));
        let column = Arc::new(Int64Array::from(vec![1, 2])) as arrow::array::ArrayRef;
        let batch =
            RecordBatch::try_new(Arc::clone(&schema), vec![Arc::clone(&column), column]).unwrap();
        let twice = Table {
            name: "left".into(),
            schema,
            batches: vec![batch],
        };
        let right = table("right", &[Some(1)], 0, &[]);
        let error = TableJoin::on(&["k"], &["k"])
            .prepare(twice, right, None)
            .unwrap_err();
        assert!(
            matches!(&error, Error::Input(message) if message.contains("2 columns named `k`")),
            "{error:?}"
        );
    }
}
