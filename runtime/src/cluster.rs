//! Cluster mode: `skewjoin join ... --processes N --process I --hostfile FILE` runs process `I` of
//! a timely cluster of `N` processes (the hostfile has one `host:port` per process, as timely's
//! `-h`), and `skewjoin cluster --processes N -- join ...` starts `N` such processes on this
//! machine, on free loopback ports, with a secret of the run. The connections are opened and
//! authenticated here (`handshake`), where the processes also compare everything that must
//! agree (`agreed_fields`), and only then handed to timely.
//!
//! Each process reads only its share of each input (row groups of Parquet, record batches of
//! Arrow IPC, byte ranges of CSV; see [`crate::io::read_table_share`]), streaming it into the join
//! a batch at a time ([`crate::batches::InputFile::open_share`]), and its rows stay home on its
//! own workers. The processes agree on cluster-wide row counts before anything is planned,
//! so every one runs the same plan. Output is written as one part file per worker,
//! `DIR/part-WWWWW.EXT`, and process 0 writes `DIR/_manifest.json` (every part with its row count
//! and checksum, and the totals) once all parts are complete; the parts are written in a
//! directory of the run beside `DIR`, moved into place whole when complete (`staged_dir`), so a
//! failed run leaves an earlier output as it was. Without `--output` only the row count and
//! checksum are computed, and rows travel as a row number and a hash; with it, each row's contents
//! travel with it (Arrow's row format, encoded a batch at a time as it is read), because the
//! worker that joins a pair may be on a process that read neither row.
//! `--metrics` is written by process 0 and describes the whole cluster; `--process-metrics` is
//! written by every process and describes that process (`ProcessMetrics`).
//!
//! Faults: a process that cannot connect to all others within `--connect-timeout` seconds exits
//! with code 5; a process that dies during the join makes timely's connections to it fail, and
//! the others exit with code 5 and remove the part files they wrote.

mod handshake;

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow::array::{Array, RecordBatch, RecordBatchOptions};
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::row::{RowConverter, Rows, SortField};
use clap::Args;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use skewjoin_operators::{JoinType, Side};
use skewjoin_planner::exec::{CarriedRow, PairSink, RowRef, RowValue};
use skewjoin_planner::exec_cluster::{
    execute_cluster_stream, ClusterFacts, ClusterSpec, Network, ProcessFacts,
};
use skewjoin_planner::exec_stream::StreamJob;
use skewjoin_planner::skew_check::{KeySample, SkewFinding};
use skewjoin_planner::strategy::{choose, Choice, PlanInputs, Resolved, Strategy};
use skewjoin_planner::work_costs::WorkCosts;

use crate::batches::CHUNK_ROWS;
use crate::cli::JoinArgs;
use crate::commands::{
    check_metrics_path, check_writable_dir, column_flag, join_columns, layout, metrics_for,
    output_columns, output_compression, parse_how, refuse_overwrite, tally_stream, with_vprp_flags,
    write_atomically,
};
use crate::engine::{FileSource, KeepBatch, RunReport, StreamSide};
use crate::error::{Error, Result};
use crate::io::{
    check_key_compat, output_schema, take_output, FileFormat, OutputCompression, OutputWriter,
    RowStore, Share,
};
use crate::link;
use crate::memory::broadcast_budget;
use crate::metrics::checksum_hex;
use crate::progress::Progress;
use crate::tally::OutputTally;

/// The flags of `join` that make it one process of a cluster.
#[derive(Debug, Args, Clone, Default)]
pub struct ClusterArgs {
    /// Cluster mode: the number of processes (timely's -n). Each process reads only its share of
    /// the inputs; start every process with the same arguments but --process.
    #[arg(long, short = 'n', requires_all = ["process", "hostfile"])]
    pub processes: Option<usize>,
    /// Cluster mode: this process's index, 0 to N-1 (timely's -p). Process 0 writes the
    /// metrics and the output manifest.
    #[arg(long, requires = "processes")]
    pub process: Option<usize>,
    /// Cluster mode: a file with one host:port per process, in process order (timely's -h).
    #[arg(long, requires = "processes")]
    pub hostfile: Option<PathBuf>,
    /// Cluster mode: seconds to wait for every process to connect before giving up (exit 5).
    #[arg(long, default_value_t = 30)]
    pub connect_timeout: u64,
    /// Cluster mode: a file holding the cluster's shared secret (at least 16 bytes, not
    /// readable by others): processes prove they hold it before they join. Or set
    /// SKEWJOIN_CLUSTER_SECRET; `skewjoin cluster` makes one for each run.
    #[arg(long, value_name = "PATH", requires = "processes")]
    pub cluster_secret_file: Option<PathBuf>,
    /// Cluster mode without a secret: anyone who can reach a process's port can join the
    /// cluster or feed it data; only on a trusted private network.
    #[arg(long, requires = "processes")]
    pub insecure: bool,
    /// Cluster mode: write this process's own figures as JSON to PATH (its workers' output rows,
    /// its join time, CPU seconds during the join and in all, peak memory), where `--metrics`
    /// describes the whole cluster. `{process}` in PATH is replaced by the process index, so
    /// processes sharing a file system write different files.
    #[arg(long, value_name = "PATH", requires = "processes")]
    pub process_metrics: Option<PathBuf>,
    /// Cluster mode: each process's link rate in each direction, such as 100mbit, 1gbit or
    /// 10gbit, for `auto`: on a slow link a record sent costs more than its CPU, so a small
    /// side's copy and AM-Join's extra traffic weigh more. Unset, the link is not weighed (it was
    /// never the bottleneck at 1.25 Gbit/s a core).
    #[arg(long, value_name = "RATE", value_parser = crate::link::parse_bandwidth, requires = "processes")]
    pub bandwidth: Option<u64>,
}

/// The environment variable that may hold the cluster secret instead of a file; `skewjoin
/// cluster` passes its children the secret it made this way, not on their command lines.
pub const SECRET_ENV: &str = "SKEWJOIN_CLUSTER_SECRET";

/// The fewest bytes a secret may have.
const SECRET_MIN_BYTES: usize = 16;

/// How to make a secret, for messages.
const MAKE_A_SECRET: &str = "make one with `(umask 077; head -c 32 /dev/urandom | base64 > \
                             cluster.secret)`, copy it to every machine and give every process \
                             --cluster-secret-file cluster.secret";

/// The cluster's shared secret: `--cluster-secret-file`, else SKEWJOIN_CLUSTER_SECRET, else none
/// with `--insecure` (an empty key); without any, cluster mode refuses to start.
fn cluster_secret(cluster: &ClusterArgs) -> Result<Vec<u8>> {
    let secret = if let Some(path) = &cluster.cluster_secret_file {
        let shown = path.display();
        let metadata = std::fs::metadata(path).map_err(|error| {
            Error::Usage(format!(
                "--cluster-secret-file {shown}: cannot read it: {error}; {MAKE_A_SECRET}"
            ))
        })?;
        {
            use std::os::unix::fs::PermissionsExt;
            if metadata.permissions().mode() & 0o007 != 0 {
                return Err(Error::Usage(format!(
                    "--cluster-secret-file {shown}: anyone on this machine can read it; make it \
                     private with `chmod 600 {shown}`"
                )));
            }
        }
        let bytes = std::fs::read(path).map_err(|error| {
            Error::Usage(format!(
                "--cluster-secret-file {shown}: cannot read it: {error}; {MAKE_A_SECRET}"
            ))
        })?;
        let text_end = bytes
            .iter()
            .rposition(|byte| !byte.is_ascii_whitespace())
            .map_or(0, |end| end + 1);
        let secret = bytes[..text_end].to_vec();
        if secret.len() < SECRET_MIN_BYTES {
            return Err(Error::Usage(format!(
                "--cluster-secret-file {shown} holds {} bytes; a secret needs at least \
                 {SECRET_MIN_BYTES}: {MAKE_A_SECRET}",
                secret.len()
            )));
        }
        secret
    } else if let Some(value) = std::env::var_os(SECRET_ENV) {
        let secret = value.into_encoded_bytes();
        if secret.len() < SECRET_MIN_BYTES {
            return Err(Error::Usage(format!(
                "{SECRET_ENV} holds {} bytes; a secret needs at least {SECRET_MIN_BYTES}: \
                 {MAKE_A_SECRET}",
                secret.len()
            )));
        }
        secret
    } else if cluster.insecure {
        eprintln!(
            "skewjoin: warning: --insecure: any program that can reach this process's port can \
             join the cluster or feed it data"
        );
        Vec::new()
    } else {
        return Err(Error::Usage(format!(
            "cluster mode needs a shared secret, so that only your processes can join the \
             cluster: {MAKE_A_SECRET} (or set {SECRET_ENV}); --insecure runs without one, on a \
             trusted private network only"
        )));
    };
    Ok(secret)
}

impl ClusterArgs {
    /// Whether these flags ask for more than one process.
    pub fn is_cluster(&self) -> bool {
        self.processes.is_some_and(|n| n > 1)
    }
}

/// The addresses of a hostfile: one `host:port` per line, blank lines and `#` comments ignored;
/// there must be exactly `processes` of them.
pub fn read_hostfile(path: &Path, processes: usize) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path).map_err(|error| {
        Error::Usage(format!(
            "--hostfile {}: cannot read it: {error}; give a file with one host:port per process",
            path.display()
        ))
    })?;
    let mut addresses = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let port = line.rsplit_once(':').map(|(_, port)| port.parse::<u16>());
        if !matches!(port, Some(Ok(_))) {
            return Err(Error::Usage(format!(
                "--hostfile {}: line {}: {line:?} is not host:port (e.g. 10.0.0.5:2101)",
                path.display(),
                number + 1
            )));
        }
        addresses.push(line.to_string());
    }
    if addresses.len() != processes {
        return Err(Error::Usage(format!(
            "--hostfile {} lists {} addresses but --processes is {processes}; give one host:port \
             per process",
            path.display(),
            addresses.len()
        )));
    }
    Ok(addresses)
}

/// What one worker of a cluster run reports, gathered on process 0.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct WorkerSummary {
    /// Output rows.
    pub rows: u64,
    /// Their checksum.
    pub checksum: u64,
    /// The part file it wrote, by file name, if any.
    pub part: Option<String>,
    /// What went wrong writing it.
    pub error: Option<String>,
}

/// Counts and checksums output rows, whatever travels with them.
struct CountSink(OutputTally);

impl<V: RowValue> PairSink<V> for CountSink {
    type Summary = WorkerSummary;

    #[inline]
    fn emit(&mut self, left: Option<&V>, right: Option<&V>) {
        self.0
            .row(left.map(RowValue::hash), right.map(RowValue::hash));
    }

    #[inline]
    fn lefts_with<'v>(&mut self, lefts: impl ExactSizeIterator<Item = &'v V>, right: &V) {
        self.0.lefts_with(lefts.map(RowValue::hash), right.hash());
    }

    #[inline]
    fn left_with_rights<'v>(&mut self, left: &V, rights: impl ExactSizeIterator<Item = &'v V>) {
        self.0
            .left_with_rights(left.hash(), rights.map(RowValue::hash));
    }

    fn finish(self) -> std::result::Result<WorkerSummary, String> {
        Ok(WorkerSummary {
            rows: self.0.rows,
            checksum: self.0.checksum,
            ..WorkerSummary::default()
        })
    }
}

/// Output rows gathered before they are decoded and written as one batch.
const PART_BATCH_ROWS: usize = 64 * 1024;

/// The rows of one side gathered for the next batch, in Arrow's row format, back to back.
struct RowBuffer {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    /// Per output row, the index of its row here, or `u32::MAX` for padding.
    index: Vec<u32>,
}

impl RowBuffer {
    fn new() -> RowBuffer {
        RowBuffer {
            bytes: Vec::new(),
            ends: Vec::new(),
            index: Vec::new(),
        }
    }

    fn push(&mut self, row: Option<&CarriedRow>) {
        match row {
            Some(row) => {
                self.index.push(self.ends.len() as u32);
                self.bytes.extend_from_slice(&row.bytes);
                self.ends.push(self.bytes.len());
            }
            None => self.index.push(u32::MAX),
        }
    }

    /// The gathered rows decoded into a batch of `schema`.
    fn decode(&self, converter: &RowConverter, schema: &SchemaRef) -> Result<RecordBatch> {
        let parser = converter.parser();
        let mut start = 0;
        let rows = self.ends.iter().map(|&end| {
            let row = parser.parse(&self.bytes[start..end]);
            start = end;
            row
        });
        let columns = converter.convert_rows(rows).map_err(|error| {
            Error::Internal(format!("decoding rows sent between processes: {error}"))
        })?;
        // Arrow's row format gives a dictionary column back as its values: encode it again.
        let columns = columns
            .into_iter()
            .zip(schema.fields())
            .map(|(column, field)| {
                if column.data_type() == field.data_type() {
                    return Ok(column);
                }
                arrow::compute::cast(&column, field.data_type()).map_err(|error| {
                    Error::Internal(format!(
                        "rebuilding column {} as {}: {error}",
                        field.name(),
                        field.data_type()
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(self.ends.len()));
        RecordBatch::try_new_with_options(schema.clone(), columns, &options)
            .map_err(|error| Error::Internal(format!("rebuilding rows: {error}")))
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
        self.index.clear();
    }
}

/// What every part writer needs to know.
struct PartLayout {
    how: JoinType,
    dir: PathBuf,
    format: FileFormat,
    compression: OutputCompression,
    schema: SchemaRef,
    sides: [(SchemaRef, Vec<SortField>); 2],
}

/// One worker's sink when writing output: decodes the rows that travelled with each pair and
/// writes them to the worker's own part file.
struct PartSink {
    layout: Arc<PartLayout>,
    summary: WorkerSummary,
    writer: Option<OutputWriter>,
    converters: [RowConverter; 2],
    buffers: [RowBuffer; 2],
    tally: OutputTally,
}

impl PartSink {
    fn new(layout: Arc<PartLayout>, worker: usize, progress: Option<Arc<AtomicU64>>) -> PartSink {
        let name = part_name(worker, layout.format);
        let mut summary = WorkerSummary {
            part: Some(name.clone()),
            ..WorkerSummary::default()
        };
        let writer = match OutputWriter::create(
            &layout.dir.join(&name),
            layout.format,
            layout.compression,
            layout.schema.clone(),
        ) {
            Ok(writer) => Some(writer),
            Err(error) => {
                summary.error = Some(error.to_string());
                None
            }
        };
        let converters = layout.sides.clone().map(|(_, fields)| {
            RowConverter::new(fields).expect("the fields were accepted when the rows were encoded")
        });
        PartSink {
            layout,
            summary,
            writer,
            converters,
            buffers: [RowBuffer::new(), RowBuffer::new()],
            tally: OutputTally::new(progress),
        }
    }

    fn flush(&mut self) {
        let Some(writer) = &mut self.writer else {
            return;
        };
        if self.buffers[0].index.is_empty() {
            return;
        }
        let result = (|| {
            let left = self.buffers[0].decode(&self.converters[0], &self.layout.sides[0].0)?;
            let right = self.buffers[1].decode(&self.converters[1], &self.layout.sides[1].0)?;
            let batch = take_output(
                &self.layout.schema,
                self.layout.how,
                &RowStore::whole(left),
                &RowStore::whole(right),
                &self.buffers[0].index,
                &self.buffers[1].index,
            )?;
            writer.write(&batch)
        })();
        if let Err(error) = result {
            self.summary.error = Some(error.to_string());
            self.writer = None;
        }
        self.buffers.iter_mut().for_each(RowBuffer::clear);
    }
}

impl PairSink<CarriedRow> for PartSink {
    type Summary = WorkerSummary;

    #[inline]
    fn emit(&mut self, left: Option<&CarriedRow>, right: Option<&CarriedRow>) {
        self.tally
            .row(left.map(|row| row.hash), right.map(|row| row.hash));
        if self.writer.is_some() {
            self.buffers[0].push(left);
            self.buffers[1].push(right);
            if self.buffers[0].index.len() >= PART_BATCH_ROWS {
                self.flush();
            }
        }
    }

    fn finish(mut self) -> std::result::Result<WorkerSummary, String> {
        self.flush();
        if let Some(writer) = self.writer.take() {
            if let Err(error) = writer.finish() {
                self.summary.error = Some(error.to_string());
            }
        }
        self.summary.rows = self.tally.rows;
        self.summary.checksum = self.tally.checksum;
        Ok(self.summary)
    }
}

/// The file name of worker `worker`'s part.
fn part_name(worker: usize, format: FileFormat) -> String {
    let extension = match format {
        FileFormat::Parquet => "parquet",
        FileFormat::ArrowIpc => "arrow",
        FileFormat::Csv => "csv",
    };
    format!("part-{worker:05}.{extension}")
}

/// The manifest of a finished cluster output.
#[derive(Debug, Serialize, Deserialize)]
pub struct Manifest {
    /// The format of every part.
    pub format: String,
    /// Output rows in all parts.
    pub rows: u64,
    /// The checksum of all parts together, as 16 hex digits.
    pub checksum: String,
    /// Every part, by worker.
    pub parts: Vec<ManifestPart>,
}

/// One part of a cluster output.
#[derive(Debug, Serialize, Deserialize)]
pub struct ManifestPart {
    /// The file, relative to the output directory.
    pub file: String,
    /// The worker that wrote it.
    pub worker: usize,
    /// Its rows.
    pub rows: u64,
    /// Their checksum, as 16 hex digits.
    pub checksum: String,
}

/// The manifest's file name in the output directory.
pub const MANIFEST: &str = "_manifest.json";

/// Everything that must agree between the processes of a run, by name, as each process shows it
/// to the others in the handshake: a process started on other files, another output, other
/// flags or another worker count would give a wrong or mixed result, so the run stops, naming
/// each field that differs.
fn agreed_fields(
    args: &JoinArgs,
    spec: &ClusterSpec,
    partitions: usize,
    output: Option<&(PathBuf, FileFormat)>,
    (left, right): (&SchemaRef, &SchemaRef),
) -> Result<BTreeMap<String, String>> {
    let mut fields = BTreeMap::new();
    let mut put = |name: &str, value: String| {
        fields.insert(name.to_string(), value);
    };
    for (side, path, schema) in [("left", &args.left, left), ("right", &args.right, right)] {
        put(&format!("{side} input"), path.display().to_string());
        put(&format!("{side} input size"), file_size(path)?);
        put(&format!("{side} input content"), content_digest(path)?);
        put(&format!("{side} schema"), format!("{schema:?}"));
    }
    match output {
        Some((dir, format)) => {
            put("--output", dir.display().to_string());
            put("output format", format.to_string());
        }
        None => put("--output", "(none)".into()),
    }
    put("--processes", spec.processes().to_string());
    put("--workers per process", spec.threads.to_string());
    put("--partitions", partitions.to_string());
    put("--how", args.run.how.clone());
    put("--strategy", args.strategy.clone());
    put(
        "--bandwidth",
        args.cluster
            .bandwidth
            .map_or("(none)".into(), |bits| format!("{bits} bit/s")),
    );
    put(
        "key columns",
        format!("{:?} {:?} {:?}", args.on, args.left_on, args.right_on),
    );
    put(
        "tuning",
        format!(
            "hot {:?}, broadcast {:?}, leaf {:?}, fanout {:?}, statistics {:?}, virtual {:?}, \
             sample {:?}",
            args.hot_per_mille,
            args.broadcast_per_mille,
            args.leaf,
            args.fanout,
            args.statistics,
            args.run.virtual_per_partition,
            args.run.sample_fraction,
        ),
    );
    put("CSV dialect", format!("{:?}", args.csv.dialect()));
    put(
        "memory limits",
        format!(
            "broadcast {:?}, memory {:?}",
            args.broadcast_limit, args.memory_limit
        ),
    );
    Ok(fields)
}

fn file_size(path: &Path) -> Result<String> {
    std::fs::metadata(path)
        .map(|metadata| metadata.len().to_string())
        .map_err(|error| Error::Input(format!("{}: cannot read it: {error}", path.display())))
}

/// The bytes of each end of an input that go into [`content_digest`].
const DIGEST_END_BYTES: u64 = 64 * 1024;

/// A SHA-256 of the first and last 64 KiB of a file, where a Parquet file keeps its footer: files
/// copied between machines keep it, where they may not keep their modification times.
fn content_digest(path: &Path) -> Result<String> {
    let fail = |error: std::io::Error| {
        Error::Input(format!("{}: cannot read it: {error}", path.display()))
    };
    let mut file = std::fs::File::open(path).map_err(fail)?;
    let size = file.metadata().map_err(fail)?.len();
    let mut hasher = Sha256::new();
    let mut buffer = Vec::new();
    (&mut file)
        .take(DIGEST_END_BYTES)
        .read_to_end(&mut buffer)
        .map_err(fail)?;
    hasher.update(&buffer);
    if size > DIGEST_END_BYTES {
        buffer.clear();
        file.seek(SeekFrom::Start(
            size.saturating_sub(DIGEST_END_BYTES).max(DIGEST_END_BYTES),
        ))
        .map_err(fail)?;
        file.take(DIGEST_END_BYTES)
            .read_to_end(&mut buffer)
            .map_err(fail)?;
        hasher.update(&buffer);
    }
    Ok(hasher
        .finalize()
        .iter()
        .take(12)
        .map(|byte| format!("{byte:02x}"))
        .collect())
}

/// A hash of [`agreed_fields`], for the facts the processes compare once more as they plan.
fn fingerprint(fields: &BTreeMap<String, String>) -> u64 {
    let mut hasher = DefaultHasher::new();
    fields.hash(&mut hasher);
    hasher.finish()
}

/// Where a cluster output is written until it is complete: a hidden directory beside the target
/// named by the run, the same on every process (process 0's token from the handshake), so that
/// processes sharing a file system write into one directory, and a failed run never touches the
/// previous output.
fn staged_dir(target: &Path, run: &str) -> PathBuf {
    let name = target.file_name().map_or_else(
        || "output".to_string(),
        |name| name.to_string_lossy().into_owned(),
    );
    target.with_file_name(format!(".{name}.{}.partial", &run[..run.len().min(16)]))
}

/// The file process 0 keeps in the staged directory while the run goes on: a process that
/// finds it at the end shares process 0's file system and leaves the directory to it.
const PROCESS_0_MARK: &str = ".process-0";

/// Whether `name` is a file that a cluster output holds: an existing output directory holding
/// only these may be replaced by a new run.
fn is_output_file(name: &str) -> bool {
    name == MANIFEST || name.starts_with("part-") || name.starts_with(".part-")
}

/// Refuses an existing `--output` directory that holds anything but a cluster output's files:
/// replacing it would lose them.
fn check_replaceable(dir: &Path) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !is_output_file(&name) {
            return Err(Error::Usage(format!(
                "--output {} exists and holds {name:?}, which is not part of a skewjoin output: \
                 a cluster run replaces the whole directory; give a new path",
                dir.display()
            )));
        }
    }
    Ok(())
}

/// Moves the complete output `staged` onto `target`, replacing an earlier output there (its
/// files are removed once the new one is in place; see [`check_replaceable`]).
fn put_in_place(staged: &Path, target: &Path) -> Result<()> {
    let fail = |error: std::io::Error| {
        Error::Io(format!(
            "--output {}: cannot move the finished output {} into place: {error}",
            target.display(),
            staged.display()
        ))
    };
    if !target.exists() {
        return std::fs::rename(staged, target).map_err(fail);
    }
    let old = staged.with_extension("old");
    std::fs::rename(target, &old).map_err(fail)?;
    if let Err(error) = std::fs::rename(staged, target) {
        let _ = std::fs::rename(&old, target);
        return Err(fail(error));
    }
    if let Ok(entries) = std::fs::read_dir(&old) {
        for entry in entries.flatten() {
            if is_output_file(&entry.file_name().to_string_lossy()) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    let _ = std::fs::remove_dir(&old);
    Ok(())
}

/// The strategy for the cluster-wide facts: `auto` as on one process, except that no process
/// sees every key before the join: where it would shuffle, the skew check runs on every
/// process's key sample (`facts.skew`), and AM-Join runs where that check says its key count
/// pays.
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
    let mut choice = choose(strategy, &inputs)?;
    if strategy == Strategy::Auto && choice.resolved == Resolved::Shuffle {
        // No process sees every key before the join: the check runs on every process's sample.
        choice = match facts.skew.filter(|_| facts.sampled) {
            Some(skew) => SkewFinding {
                am_pays: skew.am_pays(),
                reason: format!(
                    "a sample of every process's keys finds a key of about {}{} {}",
                    skew.described(),
                    if skew.am_pays() { ":" } else { ", but" },
                    skew.verdict()
                ),
            }
            .decide(choice, &inputs),
            None => Choice {
                reason: "a sample of every process's keys finds no key that would unbalance \
                         Shuffle-Join"
                    .into(),
                ..choice
            },
        };
    }
    let mut choice = with_vprp_flags(choice, &args.run).map_err(|error| error.to_string())?;
    choice.resolved = choice.resolved.tuned(&args.tuning());
    Ok(choice)
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
    )
    .map_err(Error::Usage)?;
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
        .map_err(|message| Error::Usage(format!("--partitions: {message}")))?;
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
    let [left_columns, right_columns] = output_columns(
        &args,
        how,
        [left.input.schema.as_ref(), right.input.schema.as_ref()],
        [left_on.as_slice(), right_on.as_slice()],
    )?;
    if let Some(names) = left_columns {
        left.select(&names, column_flag(&args, Side::Left))?;
    }
    if let Some(names) = right_columns {
        right.select(&names, column_flag(&args, Side::Right))?;
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
        resolved: Resolved::Shuffle,
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
            let source = Arc::new(FileSource::new([left, right], keep, read));
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
                    bytes: encoders[side_index(side)].bytes(row),
                },
                move |worker| PartSink::new(Arc::clone(&layout), worker, counter.clone()),
                || {},
            )
        }
        _ => execute_cluster_stream(
            job,
            Arc::new(FileSource::new([left, right], [None, None], read)),
            &spec,
            network,
            facts,
            decide,
            |_, row, hash| -> RowRef { (row, hash) },
            move |_| CountSink(OutputTally::new(count_counter.clone())),
            || {},
        ),
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
        Err(message) => {
            remove_parts();
            return Err(Error::Cluster(format!(
                "process {process}: the cluster run failed: {}; every process stops: check the \
                 other processes' messages and start them all again",
                message.trim()
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
        checksum,
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
struct ProcessMetrics {
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

fn side_index(side: Side) -> usize {
    match side {
        Side::Left => 0,
        Side::Right => 1,
    }
}

/// Encodes a side's rows in Arrow's row format, to travel with them between processes: each batch
/// as it is read ([`RowEncoder::keep`]), its rows then taken one at a time as they are fed.
struct RowEncoder {
    fields: Vec<SortField>,
    converter: RowConverter,
    /// The batch being fed: the row number of its first row, and its rows encoded.
    current: Mutex<(u64, Option<Rows>)>,
    name: String,
}

impl RowEncoder {
    /// An encoder for `side`'s columns; a column the row format cannot hold is refused here,
    /// before the join starts.
    fn new(side: &StreamSide) -> Result<RowEncoder> {
        let name = side.input.path.display().to_string();
        let fields: Vec<SortField> = side
            .input
            .selected
            .fields()
            .iter()
            .map(|field| SortField::new(field.data_type().clone()))
            .collect();
        let converter = RowConverter::new(fields.clone())
            .map_err(|error| RowEncoder::unsupported(&name, error))?;
        Ok(RowEncoder {
            fields,
            converter,
            current: Mutex::new((0, None)),
            name,
        })
    }

    fn unsupported(name: &str, error: ArrowError) -> Error {
        Error::Input(format!(
            "{name}: a column cannot be sent between processes ({error}); write the output with \
             one process, or leave out --output"
        ))
    }

    /// What the file source calls with each batch it reads for the join: encodes it, and makes
    /// it the batch whose rows [`RowEncoder::bytes`] gives.
    fn keep(encoder: &Arc<RowEncoder>) -> KeepBatch {
        let encoder = Arc::clone(encoder);
        Box::new(move |index, batch: &RecordBatch| {
            let rows = encoder
                .converter
                .convert_columns(batch.columns())
                .map_err(|error| RowEncoder::unsupported(&encoder.name, error))?;
            let mut current = encoder
                .current
                .lock()
                .map_err(|_| Error::Internal("a row encoder panicked".into()))?;
            *current = ((index * CHUNK_ROWS) as u64, Some(rows));
            Ok(())
        })
    }

    /// Row `row` of the side, encoded: it must be in the batch being fed, which it is while the
    /// source sends it (see `execute_cluster_stream`).
    fn bytes(&self, row: u32) -> Vec<u8> {
        // A side that gives the output no column (`--select` naming only the other side's)
        // sends rows of no bytes; arrow's row format holds no rows without a column.
        if self.fields.is_empty() {
            return Vec::new();
        }
        let current = self
            .current
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let (first, rows) = &*current;
        let rows = rows.as_ref().expect("a row is fed after its batch is read");
        rows.row((u64::from(row) - first) as usize)
            .as_ref()
            .to_vec()
    }
}

/// Timely's network threads panic when a peer goes away ("timely communication error"), and the
/// workers after them. A worker busy in a long operator would notice only when it next looks at
/// the network, so the first such panic stops this process at once, removing every file of this
/// run it wrote (exit code 5). The workers' own panics after it print nothing; every other panic
/// prints as usual and stops the process too (exit code 1), but those `fenced` turns into input
/// errors.
fn stop_on_peer_failure(process: usize) {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        // "Clean shutdown followed by data": a peer broke the protocol, or its bytes were cut.
        if message.contains("timely communication error")
            || message.contains("Clean shutdown followed by data")
        {
            crate::interrupt::abort(
                Error::Cluster(String::new()).exit_code(),
                &format!(
                    "process {process}: lost the connection to another process of the cluster \
                     ({message}); it stopped or crashed, see its messages. This process stops \
                     too and removed the files it wrote; start every process again"
                ),
            );
        }
        let follows_another = message.contains("MergeQueue") || message.contains("poison");
        if !follows_another {
            default(info);
        }
        // Any other panic of a worker is a bug; the other workers, and every other process,
        // would wait for its records forever: stop now, so that they see this one go.
        if !follows_another && !crate::io::in_fenced() {
            crate::interrupt::abort(
                Error::Internal(String::new()).exit_code(),
                &format!(
                    "process {process}: a thread failed on an internal error (above); this \
                     process stops and removed the files it wrote. Please report it"
                ),
            );
        }
    }));
}

/// `skewjoin cluster`: the flags of the launcher.
#[derive(Debug, Args)]
pub struct LaunchArgs {
    /// How many processes to start on this machine.
    #[arg(long, short = 'n')]
    pub processes: usize,
    /// The command each process runs, after `--`: `join LEFT RIGHT --on KEY ...` (--processes,
    /// --process and --hostfile are added).
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// Sends SIGTERM to `child`, which removes its unfinished files and exits.
fn terminate(child: &Child) {
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: kill on the pid of a child not yet waited for, so not reused.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
}

/// How long stopped children get to clean up before they are killed outright.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Stops every running child with SIGTERM and waits for them; one still running after
/// [`STOP_GRACE`] is killed.
fn stop_children(children: &mut [Option<Child>]) {
    for child in children.iter().flatten() {
        terminate(child);
    }
    let start = Instant::now();
    while children.iter().any(Option::is_some) {
        for slot in children.iter_mut() {
            let Some(child) = slot else { continue };
            match child.try_wait() {
                Ok(None) if start.elapsed() < STOP_GRACE => {}
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    *slot = None;
                }
                _ => *slot = None,
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// "signal 9 (SIGKILL)" for a status that ended by a signal.
fn describe_signal(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    let Some(signal) = status.signal() else {
        return "a signal".into();
    };
    let name = match signal {
        libc::SIGKILL => " (SIGKILL)",
        libc::SIGTERM => " (SIGTERM)",
        libc::SIGINT => " (SIGINT)",
        libc::SIGSEGV => " (SIGSEGV)",
        libc::SIGABRT => " (SIGABRT)",
        libc::SIGBUS => " (SIGBUS)",
        libc::SIGPIPE => " (SIGPIPE)",
        _ => "",
    };
    format!("signal {signal}{name}")
}

/// The `--output` of the join arguments `command` (starting with `join`), if they parse.
fn output_of(command: &[String]) -> Option<PathBuf> {
    let arguments = std::iter::once("skewjoin").chain(command.iter().map(String::as_str));
    match <crate::cli::Cli as clap::Parser>::try_parse_from(arguments)
        .ok()?
        .command
    {
        crate::cli::Command::Join(join) => join.output,
        _ => None,
    }
}

/// `skewjoin cluster --processes N -- join ...`: starts N processes on free loopback ports,
/// waits for them, and exits with the first failure's code (stopping the others) or 0.
pub fn launch(args: LaunchArgs) -> Result<()> {
    if args.processes == 0 {
        return Err(Error::Usage("--processes must be at least 1".into()));
    }
    if args.command.first().map(String::as_str) != Some("join") {
        return Err(Error::Usage(
            "skewjoin cluster runs a join: `skewjoin cluster --processes 2 -- join LEFT RIGHT --on KEY`"
                .into(),
        ));
    }
    for flag in [
        "--processes",
        "-n",
        "--process",
        "--hostfile",
        "--cluster-secret-file",
        "--insecure",
    ] {
        if args
            .command
            .iter()
            .any(|arg| arg == flag || arg.starts_with(&format!("{flag}=")))
        {
            return Err(Error::Usage(format!(
                "leave {flag} out of the join arguments: skewjoin cluster sets it for each process"
            )));
        }
    }
    // Its processes share this file system: one --process-metrics path would be overwritten by
    // each in turn.
    if let Some(position) = args
        .command
        .iter()
        .position(|arg| arg == "--process-metrics" || arg.starts_with("--process-metrics="))
    {
        let value = match args.command[position].split_once('=') {
            Some((_, value)) => Some(value),
            None => args.command.get(position + 1).map(String::as_str),
        };
        if !value.is_some_and(|value| value.contains("{process}")) {
            return Err(Error::Usage(
                "--process-metrics: every process of `skewjoin cluster` writes its own file on \
                 this machine; put {process} in the path (e.g. p{process}.json)"
                    .into(),
            ));
        }
    }
    let dir = tempfile::TempDir::new()
        .map_err(|error| Error::Io(format!("cannot create a temporary directory: {error}")))?;
    let hostfile = dir.path().join("hostfile");
    // Ports free now; the processes bind them a moment later.
    let listeners: Vec<TcpListener> = (0..args.processes)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<_>>()
        .map_err(|error| Error::Io(format!("cannot find a free loopback port: {error}")))?;
    let addresses: Vec<String> = listeners
        .iter()
        .map(|listener| listener.local_addr().map(|a| a.to_string()))
        .collect::<std::io::Result<_>>()
        .map_err(|error| Error::Io(format!("cannot find a free loopback port: {error}")))?;
    drop(listeners);
    std::fs::write(&hostfile, addresses.join("\n") + "\n")
        .map_err(|error| Error::Io(format!("{}: cannot write: {error}", hostfile.display())))?;
    // A secret of this run only, in the children's environment: not on their command lines,
    // which anyone on the machine can read.
    let secret = handshake::random_hex(32)
        .map_err(|error| Error::Io(format!("cannot make a cluster secret: {error}")))?;
    let exe = std::env::current_exe()
        .map_err(|error| Error::Io(format!("cannot find the skewjoin executable: {error}")))?;
    // An output directory this run creates: each process removes it on failure if it created it
    // and it is empty by then, but another process's part may still have been in it; once every
    // process has stopped, it goes if it is empty.
    let new_output_dir = output_of(&args.command).filter(|dir| !dir.exists());
    // SIGTERM or SIGINT to this process alone (as a supervisor sends it) stops the children too.
    crate::interrupt::forward_to_children();
    let mut children: Vec<Option<Child>> = Vec::new();
    for process in 0..args.processes {
        let child = Process::new(&exe)
            .args(&args.command)
            .arg("--processes")
            .arg(args.processes.to_string())
            .arg("--process")
            .arg(process.to_string())
            .arg("--hostfile")
            .arg(&hostfile)
            .env(SECRET_ENV, &secret)
            .spawn()
            .map_err(|error| Error::Io(format!("cannot start process {process}: {error}")))?;
        children.push(Some(child));
    }
    let mut failure: Option<(usize, i32)> = None;
    let secondary = Error::Cluster(String::new()).exit_code();
    while children.iter().any(Option::is_some) {
        if crate::interrupt::interrupted() {
            stop_children(&mut children);
            if let Some(dir) = &new_output_dir {
                let _ = std::fs::remove_dir(dir);
            }
            eprintln!("\nskewjoin cluster: interrupted; stopped every process");
            std::process::exit(crate::interrupt::INTERRUPTED_EXIT_CODE);
        }
        for (process, slot) in children.iter_mut().enumerate() {
            let Some(child) = slot else { continue };
            match child.try_wait() {
                Ok(Some(status)) => {
                    *slot = None;
                    // A process that lost its peers (a cluster failure) is reported only if no
                    // process failed for a reason of its own, which is the cause.
                    let cause = failure.is_none_or(|(_, code)| code == secondary);
                    if !status.success() && cause {
                        let code = match status.code() {
                            Some(code) => code,
                            None => {
                                // Killed by a signal: it could not say why, so it is the
                                // cluster's failure.
                                eprintln!(
                                    "skewjoin cluster: process {process} was killed by {}",
                                    describe_signal(status)
                                );
                                secondary
                            }
                        };
                        failure = Some((process, code));
                    }
                }
                Ok(None) => {}
                Err(error) => {
                    return Err(Error::Io(format!(
                        "cannot wait for process {process}: {error}"
                    )))
                }
            }
        }
        if failure.is_some() {
            // The others would wait for the failed one until their own timeouts; stop them now,
            // with SIGTERM so they remove their unfinished files.
            for child in children.iter_mut().flatten() {
                terminate(child);
            }
            // One that had already failed for a reason of its own, unseen when its peer's lost
            // connection was, is the cause: a code other than the secondary one and than the
            // one the stop itself gives.
            for (process, slot) in children.iter_mut().enumerate() {
                let Some(child) = slot else { continue };
                let Ok(status) = child.wait() else { continue };
                let own = status.code().filter(|&code| {
                    code != 0
                        && code != secondary
                        && code != crate::interrupt::INTERRUPTED_EXIT_CODE
                });
                if let (Some(code), Some((_, found))) = (own, failure) {
                    if found == secondary {
                        failure = Some((process, code));
                    }
                }
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    match failure {
        None => Ok(()),
        Some((process, code)) => {
            if let Some(dir) = &new_output_dir {
                let _ = std::fs::remove_dir(dir);
            }
            eprintln!(
                "skewjoin cluster: process {process} failed (exit code {code}); stopped the others"
            );
            std::process::exit(code)
        }
    }
}
