//! `skewjoin._skewjoin`, the native half of the Python package: tables in through the Arrow C
//! stream interface (`__arrow_c_stream__`, zero-copy) or read from files, joined by
//! [`skewjoin_runtime::tables`] on worker threads with the GIL released, and the output out as
//! a `pyarrow.Table` or a `pyarrow.RecordBatchReader` fed while the join runs. The Python half
//! (`skewjoin/__init__.py`) holds the documented functions and the `Metrics` class.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use arrow::array::{Array, RecordBatch, RecordBatchReader};
use arrow::error::ArrowError;
use arrow::ffi_stream::RecordBatchStreamReader;
use arrow_pyarrow::{FromPyArrow, IntoPyArrow, ToPyArrow};
use pyo3::create_exception;
use pyo3::exceptions::{PyKeyboardInterrupt, PyOSError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use skewjoin_planner::am_join::Statistics;
use skewjoin_planner::Strategy;
use skewjoin_runtime::engine::BatchSink;
use skewjoin_runtime::error::Error;
use skewjoin_runtime::io::{compact_views, FileFormat};
use skewjoin_runtime::memory::parse_size;
use skewjoin_runtime::metrics::Metrics;
use skewjoin_runtime::tables::{ColumnChoice, PreparedTables, Source, Table, TableJoin};

create_exception!(
    skewjoin,
    InputError,
    PyValueError,
    "An input table or file is malformed, or its columns do not fit the join (a missing key \
     column, key types that cannot be compared)."
);

/// The command line's flags, as this package's arguments name them: the runtime's messages
/// name flags, and a Python caller gave arguments.
const FLAGS_AS_ARGUMENTS: [(&str, &str); 13] = [
    ("--strategy shuffle", "strategy=\"shuffle\""),
    ("--strategy", "strategy"),
    ("--how", "how"),
    ("--workers", "workers"),
    ("--partitions", "partitions"),
    ("--sample-fraction", "sample_fraction"),
    ("--virtual-per-partition", "virtual_per_partition"),
    ("--broadcast-limit", "broadcast_limit"),
    ("--memory-limit", "memory_limit"),
    ("--hot-per-mille", "hot_per_mille"),
    ("--left-columns", "left_columns"),
    ("--right-columns", "right_columns"),
    ("--select", "select"),
];

/// Advice of the command line's that names a flag this package has no argument for (CSV files'
/// dialect is the command line's alone), and what is left of the sentence without it.
const CLI_ONLY_ADVICE: [(&str, &str); 1] = [(
    "pass `--null <value>` if it stands for NULL, or cast",
    "or cast",
)];

fn in_python_terms(mut message: String) -> String {
    for (advice, rest) in CLI_ONLY_ADVICE {
        message = message.replace(advice, rest);
    }
    // Only outside backticks: column names and values are quoted in them, and stay as they are.
    let parts: Vec<String> = message
        .split('`')
        .enumerate()
        .map(|(index, part)| {
            let mut part = part.to_string();
            if index % 2 == 0 {
                for (flag, argument) in FLAGS_AS_ARGUMENTS {
                    part = part.replace(flag, argument);
                }
            }
            part
        })
        .collect();
    parts.join("`")
}

/// A runtime error as the Python exception of its kind, with the CLI's message (its flags
/// named as this package's arguments).
fn to_py(error: Error) -> PyErr {
    match error {
        Error::Usage(message) => PyValueError::new_err(in_python_terms(message)),
        // An input error may name an argument too ("select: no input has a column ...").
        Error::Input(message) => InputError::new_err(in_python_terms(message)),
        Error::Io(message) => PyOSError::new_err(message),
        Error::Interrupted => PyKeyboardInterrupt::new_err(Error::Interrupted.to_string()),
        other => PyRuntimeError::new_err(other.to_string()),
    }
}

/// One side of a join from what the caller gave: a path to a file (read by the join, with the
/// GIL released), or anything that exports an Arrow stream. The stream's batches are imported
/// as they are: their buffers stay the producer's (pyarrow's, Polars') and are not copied.
fn source_from(value: &Bound<'_, PyAny>, side: &str, format: Option<&str>) -> PyResult<Source> {
    if let Ok(path) = value.extract::<PathBuf>() {
        let explicit = format
            .map(FileFormat::parse)
            .transpose()
            .map_err(|error| PyValueError::new_err(format!("format: {error}")))?;
        let format = FileFormat::detect(&path, explicit).map_err(|_| {
            PyValueError::new_err(format!(
                "cannot tell the format of {} from its name; name it .parquet, .arrow or \
                 .csv, or pass format=\"parquet\", \"arrow\" or \"csv\"",
                path.display()
            ))
        })?;
        return Ok(Source::File { path, format });
    }
    if !value.hasattr("__arrow_c_stream__")? {
        let type_name = value.get_type().name()?;
        return Err(PyTypeError::new_err(format!(
            "{side}: a {type_name} is not a table skewjoin can read; pass a pyarrow Table or \
             RecordBatchReader, a Polars or pandas DataFrame, a DuckDB relation (anything with \
             __arrow_c_stream__), or the path of a Parquet, Arrow IPC or CSV file"
        )));
    }
    let reader = RecordBatchStreamReader::from_pyarrow_bound(value)?;
    let schema = reader.schema();
    let batches = reader
        .collect::<Result<Vec<_>, ArrowError>>()
        .map_err(|error| {
            InputError::new_err(format!("{side}: reading the table failed: {error}"))
        })?;
    Ok(Source::Table(Table {
        name: format!("the {side} table"),
        schema,
        batches,
    }))
}

/// The arguments past the tables and keys that tune a run, as keyword arguments.
const TUNING: &str = "hot_per_mille, broadcast_per_mille, statistics, leaf, fanout, \
                      broadcast_limit, memory_limit, virtual_per_partition, sample_fraction";

/// The output columns `left_columns`, `right_columns` and `select` choose (`None`: every one).
type Columns = (
    Option<Vec<String>>,
    Option<Vec<String>>,
    Option<Vec<String>>,
);

/// The join request from the arguments.
#[allow(clippy::too_many_arguments)]
fn request(
    left_on: Vec<String>,
    right_on: Vec<String>,
    (left_columns, right_columns, select): Columns,
    how: &str,
    strategy: &str,
    workers: Option<usize>,
    partitions: Option<usize>,
    tuning: Option<&Bound<'_, PyDict>>,
) -> PyResult<TableJoin> {
    let mut join = TableJoin {
        left_on,
        right_on,
        columns: ColumnChoice {
            left: left_columns,
            right: right_columns,
            select,
        },
        ..TableJoin::on(&[], &[])
    };
    join.strategy = strategy.to_string();
    join.run.how = how.to_string();
    join.run.workers = workers;
    join.run.partitions = partitions;
    let Some(tuning) = tuning else {
        return Ok(join);
    };
    for (name, value) in tuning.iter() {
        let name: String = name.extract()?;
        let bad =
            |what: &str| PyValueError::new_err(format!("{name}: expected {what}, got {value:?}"));
        let count = || -> PyResult<u32> {
            value
                .extract::<u32>()
                .map_err(|_| bad("a non-negative integer"))
        };
        match name.as_str() {
            "hot_per_mille" => join.tuning.hot_per_mille = Some(count()?),
            "broadcast_per_mille" => join.tuning.broadcast_per_mille = Some(count()?),
            "leaf" => join.tuning.leaf = Some(count()?),
            "fanout" => join.tuning.fanout = Some(count()?),
            "statistics" => {
                let text: String = value
                    .extract()
                    .map_err(|_| bad("\"exact\", \"space-saving\" or \"space-saving:N\""))?;
                join.tuning.statistics = Some(
                    text.parse::<Statistics>()
                        .map_err(|error| PyValueError::new_err(format!("statistics: {error}")))?,
                );
            }
            "broadcast_limit" => {
                join.broadcast_limit = Some(
                    value
                        .extract::<u64>()
                        .map_err(|_| bad("a non-negative number of rows"))?,
                )
            }
            "memory_limit" => {
                join.memory_limit = Some(match value.extract::<u64>() {
                    Ok(bytes) => bytes,
                    Err(_) => {
                        let text: String = value
                            .extract()
                            .map_err(|_| bad("a size in bytes or text such as \"8G\""))?;
                        parse_size(&text).map_err(|error| {
                            PyValueError::new_err(format!("memory_limit: {error}"))
                        })?
                    }
                })
            }
            "virtual_per_partition" => join.run.virtual_per_partition = count()?,
            "sample_fraction" => {
                join.run.sample_fraction = value
                    .extract::<f64>()
                    .map_err(|_| bad("a fraction between 0 and 1"))?
            }
            _ => {
                return Err(PyTypeError::new_err(format!(
                    "unexpected keyword argument '{name}'; the tuning arguments are {TUNING}"
                )))
            }
        }
    }
    Ok(join)
}

/// Runs `work` on a thread of its own while this one waits with the GIL released, looking at
/// Python's signals every 100 ms: at Ctrl-C, `stop` is set, the work is awaited (it ends within
/// a step of the join's workers) and the `KeyboardInterrupt` is raised.
fn run_detached<T: Send + 'static>(
    py: Python<'_>,
    stop: &Arc<AtomicBool>,
    work: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> PyResult<T> {
    let (done, mut result) = mpsc::channel();
    let worker: JoinHandle<()> = std::thread::Builder::new()
        .name("skewjoin".into())
        .spawn(move || {
            let _ = done.send(work());
        })
        .map_err(|error| PyRuntimeError::new_err(format!("cannot start the join: {error}")))?;
    // The receiver goes into each wait and comes back: a detached closure may hold nothing
    // that is not Send.
    let outcome = loop {
        let (receiver, received) = py.detach(move || {
            let received = result.recv_timeout(Duration::from_millis(100));
            (result, received)
        });
        result = receiver;
        match received {
            Ok(outcome) => break outcome,
            Err(RecvTimeoutError::Timeout) => {
                if let Err(signal) = py.check_signals() {
                    stop.store(true, Ordering::Relaxed);
                    py.detach(move || {
                        let _ = result.recv();
                    });
                    let _ = worker.join();
                    return Err(signal);
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(PyRuntimeError::new_err(
                    "the join's thread ended without a result",
                ))
            }
        }
    };
    let _ = worker.join();
    outcome.map_err(to_py)
}

/// The join's output as it is made: the batches the workers hand over, paced by their
/// consumer (the workers wait while `CHANNEL_BATCHES` batches are unread). A Python iterator,
/// which `join` wraps in a `pyarrow.RecordBatchReader`: pyarrow calls it for each batch, and the
/// exceptions it raises (the join's errors as their kinds, a `KeyboardInterrupt`) reach the
/// reader's caller as they are.
#[pyclass]
struct OutputBatches {
    batches: Mutex<mpsc::Receiver<RecordBatch>>,
    join: Mutex<Option<JoinHandle<Result<Metrics, Error>>>>,
    stop: Arc<AtomicBool>,
}

/// Batches (of up to 64 Ki rows each) the workers may be ahead of a streaming reader.
const CHANNEL_BATCHES: usize = 4;

#[pymethods]
impl OutputBatches {
    fn __iter__(this: PyRef<'_, Self>) -> PyRef<'_, Self> {
        this
    }

    /// The next batch; waits with the GIL released, looking at Python's signals every 100 ms:
    /// at Ctrl-C the join is stopped and the `KeyboardInterrupt` raised.
    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        loop {
            let received = py
                .detach(|| {
                    self.batches
                        .lock()
                        .map(|batches| batches.recv_timeout(Duration::from_millis(100)))
                        .map_err(drop)
                })
                .map_err(|_| PyRuntimeError::new_err("a reader of this output panicked"))?;
            match received {
                Ok(batch) => return batch.to_pyarrow(py).map(Some),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    if let Err(signal) = py.check_signals() {
                        self.stop.store(true, Ordering::Relaxed);
                        return Err(signal);
                    }
                }
            }
        }
        // Every sender is gone: the join has ended.
        let join = self
            .join
            .lock()
            .map_err(|_| PyRuntimeError::new_err("a reader of this output panicked"))?
            .take();
        match join.map(|join| py.detach(|| join.join())) {
            None | Some(Ok(Ok(_))) => Ok(None),
            Some(Ok(Err(error))) => Err(to_py(error)),
            Some(Err(_)) => Err(PyRuntimeError::new_err("the join panicked")),
        }
    }
}

impl Drop for OutputBatches {
    /// A reader closed or dropped before the end stops the join (its thread then ends alone).
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Runs `work` on the sources `left` and `right` (tables or files in `format`) detached from the
/// interpreter (see [`run_detached`]), with `stop` set by Ctrl-C.
fn on_sources<T: Send + 'static>(
    py: Python<'_>,
    (left, right): (&Bound<'_, PyAny>, &Bound<'_, PyAny>),
    format: Option<&str>,
    stop: &Arc<AtomicBool>,
    work: impl FnOnce(Source, Source, &AtomicBool) -> Result<T, Error> + Send + 'static,
) -> PyResult<T> {
    let left = source_from(left, "left", format)?;
    let right = source_from(right, "right", format)?;
    let work_stop = Arc::clone(stop);
    run_detached(py, stop, move || work(left, right, &work_stop))
}

fn prepare(
    py: Python<'_>,
    left: &Bound<'_, PyAny>,
    right: &Bound<'_, PyAny>,
    format: Option<&str>,
    join: TableJoin,
    stop: &Arc<AtomicBool>,
) -> PyResult<PreparedTables> {
    on_sources(py, (left, right), format, stop, move |left, right, stop| {
        join.prepare_sources(left, right, Some(stop))
    })
}

/// The join (see `skewjoin.join`): returns the output (a `pyarrow.Table`, or with `stream` a
/// `pyarrow.RecordBatchReader`) and, with `metrics` (for a whole table), the metrics as JSON.
/// Without `metrics` no row is hashed for the checksum nobody would see.
#[pyfunction]
#[pyo3(signature = (left, right, left_on, right_on, columns, how, strategy, workers, partitions, stream, metrics, format, tuning))]
#[allow(clippy::too_many_arguments)]
fn join<'py>(
    py: Python<'py>,
    left: &Bound<'py, PyAny>,
    right: &Bound<'py, PyAny>,
    left_on: Vec<String>,
    right_on: Vec<String>,
    columns: Columns,
    how: &str,
    strategy: &str,
    workers: Option<usize>,
    partitions: Option<usize>,
    stream: bool,
    metrics: bool,
    format: Option<&str>,
    tuning: Option<&Bound<'py, PyDict>>,
) -> PyResult<(Bound<'py, PyAny>, Option<String>)> {
    let mut request = request(
        left_on, right_on, columns, how, strategy, workers, partitions, tuning,
    )?;
    request.checksum = metrics && !stream;
    let stop = Arc::new(AtomicBool::new(false));
    let prepared = prepare(py, left, right, format, request, &stop)?;
    let schema = prepared.output_schema();
    if stream {
        let (sender, batches) = mpsc::sync_channel(CHANNEL_BATCHES);
        let sink: BatchSink = Arc::new(move |batch| {
            sender
                .send(compact_views(&batch))
                .map_err(|_| Error::Interrupted)
        });
        let run_stop = Arc::clone(&stop);
        let join = std::thread::Builder::new()
            .name("skewjoin".into())
            .spawn(move || prepared.run(Some(sink), Some(run_stop)))
            .map_err(|error| PyRuntimeError::new_err(format!("cannot start the join: {error}")))?;
        let batches = OutputBatches {
            batches: Mutex::new(batches),
            join: Mutex::new(Some(join)),
            stop,
        };
        let reader = py
            .import("pyarrow")?
            .getattr("RecordBatchReader")?
            .call_method1(
                "from_batches",
                (schema.as_ref().to_pyarrow(py)?, Bound::new(py, batches)?),
            )?;
        return Ok((reader, None));
    }
    let kept = Arc::new(Mutex::new(Vec::new()));
    let sink_kept = Arc::clone(&kept);
    // View columns keep only their rows' bytes: taken from the input they still point into
    // its whole data buffers, and a table written to Arrow IPC or Feather by pyarrow would
    // carry those buffers with every batch (3 rows of a 200,000-row string_view table made an
    // 8 MB file). The same for a stream's batches.
    let sink: BatchSink = Arc::new(move |batch| {
        let batch = compact_views(&batch);
        sink_kept
            .lock()
            .map_err(|_| Error::Internal("a worker panicked".into()))?
            .push(batch);
        Ok(())
    });
    let run_stop = Arc::clone(&stop);
    let measured = run_detached(py, &stop, move || prepared.run(Some(sink), Some(run_stop)))?;
    let batches = std::mem::take(
        &mut *kept
            .lock()
            .map_err(|_| PyRuntimeError::new_err("a worker panicked"))?,
    );
    let table = arrow_pyarrow::Table::try_new(batches, schema)
        .map_err(|error| PyRuntimeError::new_err(error.to_string()))?;
    let metrics = match metrics {
        true => Some(
            serde_json::to_string(&measured)
                .map_err(|error| PyRuntimeError::new_err(error.to_string()))?,
        ),
        false => None,
    };
    Ok((table.into_pyarrow(py)?, metrics))
}

/// The plan (see `skewjoin.explain`) as JSON; with `analyze`, the join is run (its rows
/// counted, not kept) and its metrics are the plan's `measured`.
#[pyfunction]
#[pyo3(signature = (left, right, left_on, right_on, columns, how, strategy, workers, partitions, analyze, top, format, tuning))]
#[allow(clippy::too_many_arguments)]
fn explain(
    py: Python<'_>,
    left: &Bound<'_, PyAny>,
    right: &Bound<'_, PyAny>,
    left_on: Vec<String>,
    right_on: Vec<String>,
    columns: Columns,
    how: &str,
    strategy: &str,
    workers: Option<usize>,
    partitions: Option<usize>,
    analyze: bool,
    top: usize,
    format: Option<&str>,
    tuning: Option<&Bound<'_, PyDict>>,
) -> PyResult<String> {
    let mut request = request(
        left_on, right_on, columns, how, strategy, workers, partitions, tuning,
    )?;
    // Rows are counted, not made, as `skewjoin explain` without --output counts them; they are
    // hashed only for a run's checksum.
    request.makes_output = false;
    request.checksum = analyze;
    let stop = Arc::new(AtomicBool::new(false));
    let plan = if analyze {
        let prepared = prepare(py, left, right, format, request, &stop)?;
        let mut plan = prepared.plan(top);
        let run_stop = Arc::clone(&stop);
        plan.measured = Some(run_detached(py, &stop, move || {
            prepared.run(None, Some(run_stop))
        })?);
        plan
    } else {
        // Only the keys are looked at, so of a file only its key columns are decoded.
        on_sources(
            py,
            (left, right),
            format,
            &stop,
            move |left, right, stop| request.plan_sources(left, right, top, Some(stop)),
        )?
    };
    serde_json::to_string(&plan).map_err(|error| PyRuntimeError::new_err(error.to_string()))
}

/// The addresses of the value buffers of every column of every batch of `table`, as `join`
/// imports it: the tests compare them with the producer's to check that nothing was copied.
#[pyfunction]
fn _imported_buffer_addresses(table: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<Vec<usize>>>> {
    let Source::Table(table) = source_from(table, "left", None)? else {
        return Err(PyTypeError::new_err("a table in memory, not a path"));
    };
    Ok(table
        .batches
        .iter()
        .map(|batch| {
            batch
                .columns()
                .iter()
                .map(|column| {
                    column
                        .to_data()
                        .buffers()
                        .iter()
                        .map(|buffer| buffer.as_ptr() as usize)
                        .collect()
                })
                .collect()
        })
        .collect())
}

#[pymodule]
fn _skewjoin(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(join, module)?)?;
    module.add_function(wrap_pyfunction!(explain, module)?)?;
    module.add_function(wrap_pyfunction!(_imported_buffer_addresses, module)?)?;
    module.add("InputError", module.py().get_type::<InputError>())?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // The strategies by name, from the planner's registry: the package lists none of its own.
    let strategies: Vec<&str> = Strategy::ALL.iter().map(|s| s.name()).collect();
    module.add("STRATEGIES", PyTuple::new(module.py(), strategies)?)?;
    Ok(())
}
