//! Table files in and out: reading Parquet, Arrow IPC and CSV into one [`RecordBatch`], turning
//! key columns into [`Key`]s, hashing rows for checksums, assembling join output and writing it
//! atomically.
//!
//! Everything that can go wrong with a user's file is an [`Error::Input`] whose message names the
//! file (and the line or column) and says what to do; only failures of the operating system are
//! [`Error::Io`]. Bad bytes never panic: decoders of third-party crates are fenced with
//! `catch_unwind`, because a corrupt file must be reported, not crash a worker.

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::ops::Range;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use arrow::array::{
    new_empty_array, new_null_array, Array, ArrayRef, AsArray, BinaryArray, BinaryViewArray,
    FixedSizeBinaryArray, Int64Array, LargeBinaryArray, LargeStringArray, RecordBatch,
    RecordBatchOptions, StringArray, StringViewArray, UInt32Array,
};
use arrow::buffer::NullBuffer;
use arrow::compute::{cast, concat_batches, interleave, take};
use arrow::csv::reader::Format as CsvFormat;
use arrow::datatypes::{
    ArrowPrimitiveType, BinaryType, BinaryViewType, ByteArrayType, ByteViewType, DataType,
    Date32Type, Date64Type, Decimal128Type, Decimal256Type, Decimal32Type, Decimal64Type,
    DecimalType, DurationMicrosecondType, DurationMillisecondType, DurationNanosecondType,
    DurationSecondType, Field, Float16Type, Float32Type, Float64Type, Int16Type, Int32Type,
    Int64Type, Int8Type, LargeBinaryType, LargeUtf8Type, Schema, SchemaRef, StringViewType,
    Time32MillisecondType, Time32SecondType, Time64MicrosecondType, Time64NanosecondType, TimeUnit,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type, Utf8Type,
};
use arrow::error::ArrowError;
use arrow::ipc::reader::{FileReader, StreamReader};
use arrow::ipc::writer::{FileWriter, IpcWriteOptions};
use arrow::ipc::CompressionType as IpcCompression;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::arrow_writer::{compute_leaves, ArrowColumnChunk, ArrowRowGroupWriterFactory};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use skewjoin_operators::hash::StableHasher;
use skewjoin_operators::{JoinType, Key, Side};
use skewjoin_planner::skew_check::KeySink;

use crate::error::{Error, Result};
use crate::output_file::{write_error, FileFailure, PendingOutput, WatchedFile};

use crate::output_rows::PAD;

/// The most rows in one row group of a Parquet file we write.
pub const WRITE_ROW_GROUP_ROWS: usize = 64 * 1024;

/// The largest dictionary a column of a Parquet output keeps before it falls back to plain
/// encoding (see where the writer is made).
const DICTIONARY_PAGE_BYTES: usize = 32 * 1024;

/// Rows per batch when decoding; the batches are concatenated afterwards.
const READ_BATCH_ROWS: usize = 64 * 1024;

/// What [`row_hashes`] feeds for a NULL value, so that NULL differs from every integer it could be
/// confused with in practice (0 in particular).
const NULL_WORD: u64 = 0x6e75_6c6c_7661_6c21;

/// The bits every NaN is hashed as, whatever its payload.
const CANONICAL_NAN: u64 = 0x7ff8_0000_0000_0000;

/// The magic bytes that open an Arrow IPC *file* (as opposed to a stream).
pub(crate) const ARROW_FILE_MAGIC: &[u8; 6] = b"ARROW1";

/// The file formats skewjoin reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileFormat {
    /// Apache Parquet.
    Parquet,
    /// Arrow IPC file format (also known as Feather v2); IPC streams are read too.
    ArrowIpc,
    /// Comma-separated values with a header row.
    Csv,
}

impl FileFormat {
    /// `"parquet"`, `"arrow"`, `"ipc"`, `"feather"` or `"csv"`, in any case; [`Error::Usage`]
    /// otherwise.
    pub fn parse(name: &str) -> Result<FileFormat> {
        match name.to_ascii_lowercase().as_str() {
            "parquet" => Ok(FileFormat::Parquet),
            "arrow" | "ipc" | "feather" => Ok(FileFormat::ArrowIpc),
            "csv" => Ok(FileFormat::Csv),
            _ => Err(Error::Usage(format!(
                "unknown file format {name:?}; use one of parquet, arrow (also ipc, feather), csv"
            ))),
        }
    }

    /// The format of `path`: `explicit` if given, else by extension (`.parquet`/`.pq`,
    /// `.arrow`/`.ipc`/`.feather`, `.csv`, in any case).
    pub fn detect(path: &Path, explicit: Option<FileFormat>) -> Result<FileFormat> {
        FileFormat::detect_as(path, explicit, "--format")
    }

    /// The format of the output `path`, as [`detect`](FileFormat::detect) tells it; the flag
    /// that names it is `--output-format`.
    pub fn detect_output(path: &Path, explicit: Option<FileFormat>) -> Result<FileFormat> {
        FileFormat::detect_as(path, explicit, "--output-format")
    }

    /// The format of `path`, or an error that advises `flag`.
    fn detect_as(path: &Path, explicit: Option<FileFormat>, flag: &str) -> Result<FileFormat> {
        if let Some(format) = explicit {
            return Ok(format);
        }
        let extension = path
            .extension()
            .and_then(|ext| ext.to_str())
            .map(str::to_ascii_lowercase);
        match extension.as_deref() {
            Some("parquet" | "pq") => Ok(FileFormat::Parquet),
            Some("arrow" | "ipc" | "feather") => Ok(FileFormat::ArrowIpc),
            Some("csv") => Ok(FileFormat::Csv),
            _ => Err(Error::Usage(format!(
                "cannot tell the format of {} from its name; name it .parquet, .arrow or .csv, \
                 or pass {flag} parquet, {flag} arrow or {flag} csv",
                path.display()
            ))),
        }
    }
}

impl fmt::Display for FileFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileFormat::Parquet => "parquet",
            FileFormat::ArrowIpc => "arrow",
            FileFormat::Csv => "csv",
        })
    }
}

/// How output files are compressed (`--compression`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputCompression {
    /// Zstandard (level 1 in Parquet, the library's default level).
    Zstd,
    /// Snappy (Parquet only: Arrow IPC has no Snappy codec).
    Snappy,
    /// LZ4 (Parquet's `LZ4_RAW`, Arrow IPC's `LZ4_FRAME`).
    Lz4,
    /// Uncompressed.
    None,
}

impl OutputCompression {
    /// The codec `requested` names for output in `format`, or the default where nothing is
    /// requested: zstd for Parquet, as Polars and DataFusion write it (smaller than Snappy at
    /// about its speed); none for Arrow IPC, whose files readers memory-map, which compression
    /// prevents, and none for CSV. A codec the format has no place for is [`Error::Usage`] with
    /// the codecs it does have.
    pub fn for_output(requested: Option<&str>, format: FileFormat) -> Result<OutputCompression> {
        let Some(name) = requested else {
            return Ok(match format {
                FileFormat::Parquet => OutputCompression::Zstd,
                FileFormat::ArrowIpc | FileFormat::Csv => OutputCompression::None,
            });
        };
        let codec = match name.to_ascii_lowercase().as_str() {
            "zstd" => OutputCompression::Zstd,
            "snappy" => OutputCompression::Snappy,
            "lz4" => OutputCompression::Lz4,
            "none" | "uncompressed" => OutputCompression::None,
            _ => {
                return Err(Error::Usage(format!(
                    "--compression {name:?}: use one of zstd, snappy, lz4, none"
                )))
            }
        };
        match (format, codec) {
            (FileFormat::Csv, OutputCompression::None)
            | (FileFormat::Parquet, _)
            | (
                FileFormat::ArrowIpc,
                OutputCompression::Zstd | OutputCompression::Lz4 | OutputCompression::None,
            ) => Ok(codec),
            (FileFormat::Csv, _) => Err(Error::Usage(format!(
                "--compression {name}: CSV output is written uncompressed; write Parquet or \
                 Arrow IPC to compress it, or leave out --compression"
            ))),
            (FileFormat::ArrowIpc, _) => Err(Error::Usage(format!(
                "--compression {name}: Arrow IPC has no {name} codec; use zstd, lz4 or none"
            ))),
        }
    }
}

impl fmt::Display for OutputCompression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OutputCompression::Zstd => "zstd",
            OutputCompression::Snappy => "snappy",
            OutputCompression::Lz4 => "lz4",
            OutputCompression::None => "none",
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------

/// Reads a whole file into one [`RecordBatch`].
///
/// A CSV file must start with a header row; column types are inferred from every record (integers
/// become `Int64`, text `Utf8`, and a column without any value `Null`). A header-only CSV is a
/// valid table of 0 rows. Missing, empty, malformed or corrupt files are [`Error::Input`] naming
/// the file; failures of the operating system while reading are [`Error::Io`].
pub fn read_table(path: &Path, format: FileFormat) -> Result<RecordBatch> {
    let mut file = open_input(path)?;
    fenced(path, format, || match format {
        FileFormat::Csv => {
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)
                .map_err(|error| read_error(path, error))?;
            read_csv(path, &bytes)
        }
        FileFormat::Parquet => read_parquet(path, file),
        FileFormat::ArrowIpc => read_ipc(path, file),
    })
}

thread_local! {
    /// Whether this thread is inside [`fenced`], whose panics are reported as errors.
    static FENCED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs a decoder step on `path`: decoders of third-party crates have panicked on corrupt input
/// before, and a bad file must be an error message ([`Error::Input`] naming the file), never a
/// crashed run. With [`quiet_fenced_panics`] installed, such a panic prints nothing of its own.
pub(crate) fn fenced<T>(
    path: &Path,
    format: FileFormat,
    step: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let outer = FENCED.with(|fenced| fenced.replace(true));
    let result = panic::catch_unwind(AssertUnwindSafe(step));
    FENCED.with(|fenced| fenced.set(outer));
    result.unwrap_or_else(|_| {
        Err(Error::Input(format!(
            "{}: the {format} decoder failed on this file, so it is corrupt or not {format}; \
             re-export it",
            path.display()
        )))
    })
}

/// Whether this thread is inside [`fenced`], so that a panic now becomes an input error.
pub(crate) fn in_fenced() -> bool {
    FENCED.with(std::cell::Cell::get)
}

/// Installs a panic hook that leaves out the panics `fenced` turns into input errors: the
/// user sees the error naming the file, not a decoder's panic message and backtrace. Every
/// other panic goes to the hook that was installed before.
pub fn quiet_fenced_panics() {
    let earlier = panic::take_hook();
    panic::set_hook(Box::new(move |info| {
        if !in_fenced() {
            earlier(info);
        }
    }));
}

/// Which part of an input a process reads: share `index` of `count` (0-based).
///
/// In a cluster of `count` processes, process `index` reads share `index` of every input, so that
/// no process reads a whole file. Concatenating shares `0..count` in order gives exactly the rows
/// of the whole file, in order, with one schema; a share may hold no rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share {
    /// Which share, in `0..count`.
    pub index: usize,
    /// How many shares the input is cut into; at least 1.
    pub count: usize,
}

impl Share {
    /// The whole input: share 0 of 1.
    pub const WHOLE: Share = Share { index: 0, count: 1 };

    /// Refuses a share that does not exist ([`Error::Usage`]): `index` must be below `count`.
    pub fn check(self) -> Result<()> {
        if self.count == 0 || self.index >= self.count {
            return Err(Error::Usage(format!(
                "there is no share {} of {}; a process index must be below the number of \
                 processes",
                self.index, self.count
            )));
        }
        Ok(())
    }
}

/// Reads share `share` of a file into one [`RecordBatch`]; [`Share::WHOLE`] is [`read_table`].
///
/// How a file is cut, so that a process reads little more than its share:
///
/// * Parquet: whole row groups, in contiguous runs balanced by row count (from the footer); a
///   share reads only its row groups. With fewer row groups than shares some shares are empty.
/// * Arrow IPC file: whole record batches, in contiguous runs balanced by body length (from the
///   footer); a share reads only its batches. An IPC *stream* has no index, so every share reads
///   (and decodes) the whole stream and keeps its run of batches, balanced by row count.
/// * CSV: bytes. Share `i` covers bytes `[i * len / count, (i + 1) * len / count)` and owns every
///   record that starts in that range (the header belongs to no share); it reads its range, the
///   rest of its last line, and the first [`CSV_PREFIX_BYTES`] of the file. The column types must
///   be the same on every process, so they are inferred from that prefix (cut after a whole
///   record), which every share reads alike; a column with no value in the prefix is `Utf8`. A
///   later value that does not fit its column's type is an [`Error::Input`] naming the file and
///   the byte offset and saying how to fix it. A file that fits in the prefix is split at its
///   exact record boundaries and gets the same types as [`read_table`] (`Null` for a column with
///   no value). A larger file is split at line breaks, so it must not hold line breaks inside
///   quoted fields: they are detected (in the prefix by every share, later by the share whose part
///   they are in) and reported as [`Error::Input`], never read as wrong rows. A file whose only
///   line ends are bare `\r` has no split points and is read by the share its header is in.
///
/// `share.index` must be below `share.count`; otherwise this is [`Error::Usage`].
pub fn read_table_share(path: &Path, format: FileFormat, share: Share) -> Result<RecordBatch> {
    share.check()?;
    if share.count == 1 {
        return read_table(path, format);
    }
    let file = open_input(path)?;
    fenced(path, format, || match format {
        FileFormat::Csv => read_csv_share(path, file, share, CSV_PREFIX_BYTES).map(|(b, _)| b),
        FileFormat::Parquet => read_parquet_share(path, file, share),
        FileFormat::ArrowIpc => read_ipc_share(path, file, share),
    })
}

/// Opens an input file, rejecting what cannot be a table before any decoder sees it: a
/// directory, a pipe or device (inputs are read more than once and at offsets, which only a
/// regular file allows), an empty file, and a Feather v1 file (which arrow-rs does not read).
pub(crate) fn open_input(path: &Path) -> Result<File> {
    // Looked at before opening: opening a FIFO waits for a writer, maybe forever.
    let metadata = std::fs::metadata(path).map_err(|error| read_error(path, error))?;
    if metadata.is_dir() {
        return Err(Error::Input(format!(
            "{} is a directory, not a file; give the path of a table file",
            path.display()
        )));
    }
    if !metadata.is_file() {
        return Err(Error::Input(format!(
            "{} is not a regular file (a pipe, FIFO, socket or device); skewjoin reads an input \
             more than once and at offsets, so it must be a regular file: write it to one first \
             (e.g. `command > input.csv`) and give that path",
            path.display()
        )));
    }
    let mut file = File::open(path).map_err(|error| read_error(path, error))?;
    if metadata.len() == 0 {
        return Err(Error::Input(format!(
            "{} is empty (0 bytes); a table file needs at least a header or schema; \
             check that it was written completely",
            path.display()
        )));
    }
    if is_feather_v1(&mut file, metadata.len()) {
        return Err(Error::Input(format!(
            "{} is a Feather v1 file, an old format that skewjoin (arrow-rs) cannot read; \
             convert it to Feather v2 (Arrow IPC), e.g. in Python: \
             `pyarrow.feather.write_feather(pyarrow.feather.read_table(\"in.feather\"), \
             \"out.feather\", version=2)`",
            path.display()
        )));
    }
    io::Seek::rewind(&mut file).map_err(|error| read_error(path, error))?;
    Ok(file)
}

/// The magic bytes that open (and close) a Feather v1 file.
const FEATHER_V1_MAGIC: &[u8; 4] = b"FEA1";

/// Whether `file` (of `len` bytes) opens and closes with the Feather v1 magic: a CSV file may
/// well start with those letters, but hardly also end with them.
fn is_feather_v1(file: &mut File, len: u64) -> bool {
    let magic_len = FEATHER_V1_MAGIC.len() as u64;
    let mut magic_at = |offset: u64| {
        let mut magic = [0u8; FEATHER_V1_MAGIC.len()];
        io::Seek::seek(file, io::SeekFrom::Start(offset)).is_ok()
            && file.read_exact(&mut magic).is_ok()
            && &magic == FEATHER_V1_MAGIC
    };
    len >= 2 * magic_len && magic_at(0) && magic_at(len - magic_len)
}

/// A failed open or read: the user's fault when the file is missing or unreadable to us,
/// the system's otherwise.
pub(crate) fn read_error(path: &Path, error: io::Error) -> Error {
    match error.kind() {
        io::ErrorKind::NotFound => {
            Error::Input(format!("{}: no such file; check the path", path.display()))
        }
        io::ErrorKind::PermissionDenied => Error::Input(format!(
            "{}: permission denied; make the file readable",
            path.display()
        )),
        io::ErrorKind::IsADirectory => Error::Input(format!(
            "{} is a directory, not a file; give the path of a table file",
            path.display()
        )),
        _ => Error::Io(format!(
            "{}: reading failed: {error}; check the disk and try again",
            path.display()
        )),
    }
}

/// How CSV inputs are read, from the flags `--delimiter`, `--quote` and `--null`: what is not
/// given is the default (`"` quotes, an empty field is NULL) or, for the delimiter, detected
/// from each file's header line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CsvDialect {
    /// The byte between fields; detected per file when `None`.
    pub delimiter: Option<u8>,
    /// The byte that quotes a field; `"` when `None`.
    pub quote: Option<u8>,
    /// The text that stands for NULL; an empty field when `None`.
    pub null: Option<String>,
}

/// The dialect of this run's CSV inputs, set once from the command line before any input is read
/// (every reader, in every module and worker, reads it here rather than having it passed down).
static CSV_DIALECT: OnceLock<CsvDialect> = OnceLock::new();

/// Sets how this process reads CSV inputs; only the first call counts. Without a call, inputs
/// are read with [`CsvDialect::default`].
pub fn set_csv_dialect(dialect: CsvDialect) {
    let _ = CSV_DIALECT.set(dialect);
}

fn csv_dialect() -> &'static CsvDialect {
    CSV_DIALECT.get_or_init(CsvDialect::default)
}

/// Parses the value of `--delimiter` or `--quote`: one ASCII character, or `tab` / `\t` for a tab.
pub fn parse_csv_byte(text: &str) -> std::result::Result<u8, String> {
    match text {
        "tab" | "\\t" | "\t" => Ok(b'\t'),
        _ => match text.as_bytes() {
            [byte] if byte.is_ascii() && !matches!(byte, b'\n' | b'\r') => Ok(*byte),
            _ => Err(format!(
                "{text:?} is not one ASCII character; give one, such as ';' or '|', or `tab`"
            )),
        },
    }
}

/// The delimiter and quote one CSV file is read with: the dialect's, the delimiter detected from
/// the file's header line when the dialect has none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CsvSyntax {
    delimiter: u8,
    quote: u8,
}

/// The delimiters detected in a header line when `--delimiter` is not given, comma first.
const DETECTED_DELIMITERS: [u8; 4] = [b',', b'\t', b';', b'|'];

/// The syntax of the CSV file whose first bytes are `head`. Without `--delimiter`, the delimiter
/// is the one of [`DETECTED_DELIMITERS`] that occurs most often, outside quotes, in the header
/// line (a comma on a tie or when there is none: a one-column file).
pub(crate) fn csv_syntax(head: &[u8]) -> CsvSyntax {
    let dialect = csv_dialect();
    let quote = dialect.quote.unwrap_or(b'"');
    let delimiter = dialect.delimiter.unwrap_or_else(|| {
        let mut counts = [0usize; DETECTED_DELIMITERS.len()];
        let mut quoted = false;
        for &byte in head
            .iter()
            .take_while(|&&byte| byte != b'\n' && byte != b'\r')
        {
            if byte == quote {
                quoted = !quoted;
            } else if !quoted {
                if let Some(at) = DETECTED_DELIMITERS.iter().position(|&d| d == byte) {
                    counts[at] += 1;
                }
            }
        }
        let best = (0..counts.len())
            .max_by_key(|&at| (counts[at], std::cmp::Reverse(at)))
            .unwrap_or(0);
        DETECTED_DELIMITERS[best]
    });
    CsvSyntax { delimiter, quote }
}

/// The syntax of the CSV file `file` (from its first bytes), which is left at its start.
pub(crate) fn csv_syntax_of_file(path: &Path, file: &mut File) -> Result<CsvSyntax> {
    let mut head = Vec::new();
    Read::by_ref(file)
        .take(CSV_HEAD_BYTES)
        .read_to_end(&mut head)
        .map_err(|error| read_error(path, error))?;
    io::Seek::rewind(file).map_err(|error| read_error(path, error))?;
    Ok(csv_syntax(&head))
}

/// How much of a CSV file is read to find its header line's delimiter.
const CSV_HEAD_BYTES: u64 = 64 * 1024;

impl CsvSyntax {
    /// The arrow format to read a file of this syntax with: a header row, and the dialect's
    /// NULL text.
    pub(crate) fn format(self) -> Result<CsvFormat> {
        let format = CsvFormat::default()
            .with_header(true)
            .with_delimiter(self.delimiter)
            .with_quote(self.quote);
        let Some(null) = &csv_dialect().null else {
            return Ok(format);
        };
        let pattern = format!("^{}$", regex::escape(null));
        let null = regex::Regex::new(&pattern)
            .map_err(|error| Error::Usage(format!("--null {null:?} cannot be matched: {error}")))?;
        Ok(format.with_null_regex(null))
    }
}

fn read_csv(path: &Path, bytes: &[u8]) -> Result<RecordBatch> {
    let format = csv_syntax(bytes).format()?;
    // Inference scans every record (`None`), so a type seen only late in the file is still found
    // and every malformed line is reported here, with its physical line number.
    let (schema, _) = format
        .infer_schema(bytes, None)
        .map_err(|error| csv_error(path, error))?;
    if schema.fields().is_empty() {
        return Err(Error::Input(format!(
            "{}: no header row; the first line must name the columns, separated by commas",
            path.display()
        )));
    }
    let schema = Arc::new(schema);
    let reader = arrow::csv::ReaderBuilder::new(schema.clone())
        .with_format(format)
        .with_batch_size(READ_BATCH_ROWS)
        .build(bytes)
        .map_err(|error| csv_error(path, error))?;
    let batches = reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|error| csv_error(path, error))?;
    concat(path, &schema, &batches)
}

/// Rewrites the CSV errors of arrow (and of the `csv` crate under it) into our message style.
/// The patterns are those of arrow-csv 60; anything else is passed on with the file name.
pub(crate) fn csv_error(path: &Path, error: ArrowError) -> Error {
    let message = match &error {
        ArrowError::CsvError(message) => message.as_str(),
        _ => return Error::Input(format!("{}: not valid CSV: {error}", path.display())),
    };
    // From schema inference: "... Expected 3 records, found 4 records at line 17".
    if message.contains("unequal lengths") {
        if let (Some(expected), Some(found), Some(line)) = (
            number_after(message, "Expected "),
            number_after(message, "found "),
            number_after(message, " at line "),
        ) {
            return Error::Input(format!(
                "{}: line {line}: expected {expected} fields, found {found}; fix the line or quote \
                 the field that contains a comma",
                path.display()
            ));
        }
    }
    // From decoding: "incorrect number of fields for line 17, expected 3 got 4".
    if message.contains("incorrect number of fields") {
        if let (Some(line), Some(expected), Some(found)) = (
            number_after(message, "for line "),
            number_after(message, "expected "),
            number_after(message, " got "),
        ) {
            return Error::Input(format!(
                "{}: record {line}: expected {expected} fields, found {found}; fix the line or \
                 quote the field that contains a comma",
                path.display()
            ));
        }
    }
    if message.contains("UTF-8") {
        let place = number_after(message, " line ")
            .map(|line| format!(" line {line}:"))
            .unwrap_or_default();
        return Error::Input(format!(
            "{}:{place} invalid UTF-8; convert the file to UTF-8 (e.g. `iconv -f latin1 -t utf-8`)",
            path.display()
        ));
    }
    Error::Input(format!(
        "{}: not valid CSV: {message}; check that it is comma-separated with a header row",
        path.display()
    ))
}

/// The decimal number right after the first `marker` in `text`.
fn number_after(text: &str, marker: &str) -> Option<u64> {
    let rest = &text[text.find(marker)? + marker.len()..];
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..digits].parse().ok()
}

fn read_parquet(path: &Path, file: File) -> Result<RecordBatch> {
    let corrupt = |error: ParquetError| parquet_read_error(path, error);
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(corrupt)?;
    let schema = builder.schema().clone();
    let reader = builder
        .with_batch_size(READ_BATCH_ROWS)
        .build()
        .map_err(corrupt)?;
    let batches = reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|error| arrow_read_error(path, FileFormat::Parquet, error))?;
    concat(path, &schema, &batches)
}

pub(crate) fn parquet_read_error(path: &Path, error: ParquetError) -> Error {
    if let ParquetError::External(inner) = &error {
        if let Some(io_error) = inner.downcast_ref::<io::Error>() {
            if !is_bad_bytes(io_error) {
                return Error::Io(format!(
                    "{}: reading failed: {io_error}; check the disk and try again",
                    path.display()
                ));
            }
        }
    }
    let message = error.to_string();
    if is_unsupported_feature(&message) {
        return unsupported_feature(path, FileFormat::Parquet, &message);
    }
    Error::Input(format!(
        "{}: not a valid Parquet file ({message}); it may be truncated or corrupt, re-export it",
        path.display()
    ))
}

/// Whether a decoder's error says the file is well formed but uses something the decoder does
/// not implement (a codec, an encoding, a type), rather than that its bytes are bad.
fn is_unsupported_feature(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    [
        "disabled feature",
        "nyi:",
        "not yet implemented",
        "not supported",
    ]
    .iter()
    .any(|marker| message.contains(marker))
}

fn unsupported_feature(path: &Path, format: FileFormat, message: &str) -> Error {
    Error::Input(format!(
        "{}: the {format} file uses a feature skewjoin cannot read ({message}); re-export it \
         with common settings (zstd, snappy or no compression, plain column types), or, if it \
         was written with those, check that it is not corrupt",
        path.display()
    ))
}

fn read_ipc(path: &Path, mut file: File) -> Result<RecordBatch> {
    // The IPC file format opens with a magic; anything else may still be an IPC stream.
    let mut magic = [0u8; ARROW_FILE_MAGIC.len()];
    let is_file_format = file.read_exact(&mut magic).is_ok() && &magic == ARROW_FILE_MAGIC;
    io::Seek::rewind(&mut file).map_err(|error| read_error(path, error))?;
    let corrupt = |error| arrow_read_error(path, FileFormat::ArrowIpc, error);
    let (schema, batches) = if is_file_format {
        let reader = FileReader::try_new_buffered(file, None).map_err(corrupt)?;
        let schema = reader.schema();
        (schema, reader.collect::<std::result::Result<Vec<_>, _>>())
    } else {
        let reader = StreamReader::try_new_buffered(file, None).map_err(corrupt)?;
        let schema = reader.schema();
        (schema, reader.collect::<std::result::Result<Vec<_>, _>>())
    };
    concat(path, &schema, &batches.map_err(corrupt)?)
}

pub(crate) fn arrow_read_error(path: &Path, format: FileFormat, error: ArrowError) -> Error {
    if let ArrowError::IoError(_, io_error) = &error {
        if !is_bad_bytes(io_error) {
            return Error::Io(format!(
                "{}: reading failed: {io_error}; check the disk and try again",
                path.display()
            ));
        }
    }
    if matches!(error, ArrowError::NotYetImplemented(_))
        || is_unsupported_feature(&error.to_string())
    {
        return unsupported_feature(path, format, &error.to_string());
    }
    let what = match format {
        FileFormat::Parquet => "Parquet file",
        FileFormat::ArrowIpc => "Arrow IPC file",
        FileFormat::Csv => "CSV file",
    };
    Error::Input(format!(
        "{}: not a valid {what} ({error}); it may be truncated or corrupt, re-export it",
        path.display()
    ))
}

/// Whether an I/O error met while decoding comes from the file's contents rather than the system:
/// a truncated file runs out early, and a footer length pointing before the start makes the seek
/// to it invalid.
fn is_bad_bytes(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::UnexpectedEof | io::ErrorKind::InvalidInput | io::ErrorKind::InvalidData
    )
}

fn concat(path: &Path, schema: &SchemaRef, batches: &[RecordBatch]) -> Result<RecordBatch> {
    match batches {
        [] => Ok(RecordBatch::new_empty(schema.clone())),
        [batch] => Ok(batch.clone()),
        _ => concat_batches(schema, batches).map_err(|error| {
            Error::Input(format!(
                "{}: its batches do not fit together ({error}); re-export the file",
                path.display()
            ))
        }),
    }
}

// ---------------------------------------------------------------------------------------------
// Reading shares
// ---------------------------------------------------------------------------------------------

/// How many bytes from the start of a CSV file every share reads to infer the column types, so
/// that all processes agree on them. The prefix is cut after its last whole record.
pub const CSV_PREFIX_BYTES: usize = 1 << 20;

/// How much further a CSV share reads at a time while looking for the end of a line.
const CSV_TAIL_CHUNK: u64 = 64 * 1024;

/// The items (row groups, record batches) of share `share`, out of items of the given `weights`.
///
/// An item belongs to the share in whose `1/count` of the total weight the item starts, the rule
/// CSV shares follow with bytes: runs are contiguous and in order, each item is in exactly one of
/// them, and runs are balanced as well as whole items allow. An item heavier than a share leaves
/// the shares it covers empty.
pub(crate) fn share_run(weights: &[u64], share: Share) -> Range<usize> {
    let total: u128 = weights.iter().map(|&weight| u128::from(weight)).sum();
    let count = share.count as u128;
    let boundary = |cut: usize| -> usize {
        if cut == 0 {
            return 0;
        }
        if cut >= share.count {
            return weights.len();
        }
        // The first item whose start is at or after cut/count of the total weight.
        let mut start = 0u128;
        for (item, &weight) in weights.iter().enumerate() {
            if start * count >= total * cut as u128 {
                return item;
            }
            start += u128::from(weight);
        }
        weights.len()
    };
    boundary(share.index)..boundary(share.index + 1)
}

/// The rows of each row group of a Parquet file, from its footer. A negative count is corrupt;
/// weighing it 0 leaves the error to the decoder.
pub(crate) fn row_group_rows(metadata: &parquet::file::metadata::ParquetMetaData) -> Vec<u64> {
    metadata
        .row_groups()
        .iter()
        .map(|group| u64::try_from(group.num_rows()).unwrap_or(0))
        .collect()
}

fn read_parquet_share(path: &Path, file: File, share: Share) -> Result<RecordBatch> {
    let corrupt = |error: ParquetError| parquet_read_error(path, error);
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(corrupt)?;
    let schema = builder.schema().clone();
    // Row counts come from the footer, so choosing this share's row groups reads no data.
    let run = share_run(&row_group_rows(builder.metadata()), share);
    let reader = builder
        .with_row_groups(run.collect())
        .with_batch_size(READ_BATCH_ROWS)
        .build()
        .map_err(corrupt)?;
    let batches = reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|error| arrow_read_error(path, FileFormat::Parquet, error))?;
    concat(path, &schema, &batches)
}

fn read_ipc_share(path: &Path, mut file: File, share: Share) -> Result<RecordBatch> {
    let mut magic = [0u8; ARROW_FILE_MAGIC.len()];
    let is_file_format = file.read_exact(&mut magic).is_ok() && &magic == ARROW_FILE_MAGIC;
    io::Seek::rewind(&mut file).map_err(|error| read_error(path, error))?;
    let corrupt = |error| arrow_read_error(path, FileFormat::ArrowIpc, error);
    if !is_file_format {
        // A stream has no index of its batches: the only way to learn their sizes, and so which
        // are ours, is to read them all.
        let reader = StreamReader::try_new_buffered(file, None).map_err(corrupt)?;
        let schema = reader.schema();
        let mut batches = reader
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(corrupt)?;
        let rows: Vec<u64> = batches.iter().map(|b| b.num_rows() as u64).collect();
        let run = share_run(&rows, share);
        batches.truncate(run.end);
        batches.drain(..run.start);
        return concat(path, &schema, &batches);
    }
    let mut reader = FileReader::try_new_buffered(file, None).map_err(corrupt)?;
    let schema = reader.schema();
    let bodies = ipc_file_bodies(&mut reader).map_err(corrupt)?;
    let run = share_run(&bodies, share);
    let batches = if run.is_empty() {
        Vec::new()
    } else {
        reader.set_index(run.start).map_err(corrupt)?;
        reader
            .take(run.len())
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(corrupt)?
    };
    concat(path, &schema, &batches)
}

/// The body length of each record batch of an Arrow IPC file, checked against the batches its
/// reader counts. The reader keeps the footer's blocks to itself, so they are read again.
pub(crate) fn ipc_file_bodies<R: Read + io::Seek>(
    reader: &mut FileReader<R>,
) -> std::result::Result<Vec<u64>, ArrowError> {
    let bodies = ipc_block_bodies(reader.get_mut())?;
    if bodies.len() != reader.num_batches() {
        return Err(ArrowError::ParseError(format!(
            "the footer lists {} record batches, then {}",
            reader.num_batches(),
            bodies.len()
        )));
    }
    Ok(bodies)
}

/// The body length of each record batch an Arrow IPC file's footer lists.
fn ipc_block_bodies<R: Read + io::Seek>(
    reader: &mut R,
) -> std::result::Result<Vec<u64>, ArrowError> {
    let mut tail = [0u8; 10];
    reader.seek(io::SeekFrom::End(-10))?;
    reader.read_exact(&mut tail)?;
    let footer_len = arrow::ipc::reader::read_footer_length(tail)?;
    let mut footer = vec![0u8; footer_len];
    reader.seek(io::SeekFrom::End(-10 - footer_len as i64))?;
    reader.read_exact(&mut footer)?;
    let footer = arrow::ipc::root_as_footer(&footer)
        .map_err(|error| ArrowError::ParseError(format!("unreadable footer: {error}")))?;
    let blocks = footer
        .recordBatches()
        .ok_or_else(|| ArrowError::ParseError("the footer lists no record batches".into()))?;
    Ok(blocks
        .iter()
        .map(|block| u64::try_from(block.bodyLength()).unwrap_or(0))
        .collect())
}

/// One record found by [`scan_csv_records`], as byte positions in the scanned bytes.
#[derive(Clone, Copy, Debug)]
struct CsvRecord {
    start: usize,
    /// Just after the record's line end (`\n`, `\r` or `\r\n`), or the end of the bytes.
    end: usize,
    /// Whether the record ends with a line end rather than with the bytes.
    terminated: bool,
    /// Whether a quoted field of the record holds a line break.
    quoted_line_break: bool,
}

/// Calls `visit` for each record of `bytes`, read as CSV from a record start, until it returns
/// `false`. This mirrors the parser under arrow (`csv-core`: `syntax.delimiter` separates,
/// `syntax.quote` quotes and a doubled quote escapes one, `\n`, `\r` and `\r\n` end a record,
/// empty lines are skipped), so that its records are arrow's records, numbered alike.
fn scan_csv_records(syntax: CsvSyntax, bytes: &[u8], mut visit: impl FnMut(CsvRecord) -> bool) {
    let CsvSyntax { delimiter, quote } = syntax;
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum State {
        StartRecord,
        StartField,
        InField,
        InQuoted,
        QuoteInQuoted,
    }
    let mut state = State::StartRecord;
    let mut start = 0;
    let mut quoted_line_break = false;
    for (at, &byte) in bytes.iter().enumerate() {
        let line_end = byte == b'\n' || byte == b'\r';
        if state == State::StartRecord {
            if line_end {
                continue;
            }
            start = at;
            quoted_line_break = false;
            state = State::StartField;
        }
        let ends_record = match state {
            State::InQuoted => {
                quoted_line_break |= line_end;
                if byte == quote {
                    state = State::QuoteInQuoted;
                }
                false
            }
            State::StartField if byte == quote => {
                state = State::InQuoted;
                false
            }
            State::QuoteInQuoted if byte == quote => {
                state = State::InQuoted;
                false
            }
            _ if byte == delimiter => {
                state = State::StartField;
                false
            }
            _ if line_end => true,
            _ => {
                state = State::InField;
                false
            }
        };
        if ends_record {
            let crlf = byte == b'\r' && bytes.get(at + 1) == Some(&b'\n');
            state = State::StartRecord;
            let record = CsvRecord {
                start,
                end: at + 1 + usize::from(crlf),
                terminated: true,
                quoted_line_break,
            };
            if !visit(record) {
                return;
            }
        }
    }
    if state != State::StartRecord {
        visit(CsvRecord {
            start,
            end: bytes.len(),
            terminated: false,
            quoted_line_break,
        });
    }
}

/// An input file read by byte ranges, counting the bytes read.
struct RangeReader<'a> {
    path: &'a Path,
    file: File,
    len: u64,
    bytes_read: u64,
}

impl RangeReader<'_> {
    /// Bytes `[from, to)` of the file, `to` capped at its end.
    fn read(&mut self, from: u64, to: u64) -> Result<Vec<u8>> {
        let to = to.min(self.len);
        let mut bytes = vec![0u8; to.saturating_sub(from) as usize];
        if !bytes.is_empty() {
            io::Seek::seek(&mut self.file, io::SeekFrom::Start(from))
                .and_then(|_| self.file.read_exact(&mut bytes))
                .map_err(|error| read_error(self.path, error))?;
        }
        self.bytes_read += bytes.len() as u64;
        Ok(bytes)
    }
}

/// Contiguous bytes of a file from `start`, grown on demand.
struct Window {
    start: u64,
    bytes: Vec<u8>,
}

impl Window {
    fn end(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }

    /// Makes the window reach `to` (or the end of the file).
    fn reach(&mut self, source: &mut RangeReader<'_>, to: u64) -> Result<()> {
        if to > self.end() {
            let more = source.read(self.end(), to)?;
            self.bytes.extend_from_slice(&more);
        }
        Ok(())
    }

    /// The first line start at or after `at` (where `at >= start + 1` or `at == 0`): just after
    /// the first `\n` at or after `at - 1`, or the end of the file. Reads on in chunks as needed.
    fn line_start_at_or_after(&mut self, source: &mut RangeReader<'_>, at: u64) -> Result<u64> {
        if at == 0 {
            return Ok(0);
        }
        let mut from = at - 1;
        loop {
            self.reach(source, from + 1)?;
            let offset = from.saturating_sub(self.start) as usize;
            let found = self
                .bytes
                .get(offset..)
                .and_then(|rest| rest.iter().position(|&byte| byte == b'\n'));
            if let Some(found) = found {
                return Ok(from + found as u64 + 1);
            }
            if self.end() >= source.len {
                return Ok(source.len);
            }
            from = self.end();
            self.reach(source, from + CSV_TAIL_CHUNK)?;
        }
    }
}

/// Reads share `share` (of at least 2) of a CSV file, inferring the schema from its first
/// `prefix_limit` bytes (see [`read_table_share`]); also returns the number of bytes read.
fn read_csv_share(
    path: &Path,
    file: File,
    share: Share,
    prefix_limit: usize,
) -> Result<(RecordBatch, u64)> {
    let len = file
        .metadata()
        .map_err(|error| read_error(path, error))?
        .len();
    let mut source = RangeReader {
        path,
        file,
        len,
        bytes_read: 0,
    };

    // The prefix: at least the header and one whole record, so that types can be inferred.
    let mut prefix = source.read(0, prefix_limit.max(1) as u64)?;
    let syntax = csv_syntax(&prefix);
    let (header_end, cut, quoted_break) = loop {
        let mut header_end = None;
        let mut cut = None;
        let mut terminated = 0;
        let mut quoted_break = None;
        scan_csv_records(syntax, &prefix, |record| {
            header_end.get_or_insert(record.end);
            if record.terminated {
                terminated += 1;
                cut = Some(record.end);
                if record.quoted_line_break && quoted_break.is_none() {
                    quoted_break = Some(record.start);
                }
            }
            true
        });
        let whole = prefix.len() as u64 == len;
        if whole {
            break (header_end.unwrap_or(prefix.len()), prefix.len(), None);
        }
        if let (Some(header_end), Some(cut), true) = (header_end, cut, terminated >= 2) {
            break (header_end, cut, quoted_break);
        }
        let more = source.read(prefix.len() as u64, 2 * prefix.len() as u64)?;
        prefix.extend_from_slice(&more);
    };
    let whole = prefix.len() as u64 == len;

    let format = syntax.format()?;
    let (schema, _) = format
        .infer_schema(&prefix[..cut], None)
        .map_err(|error| csv_error(path, error))?;
    if schema.fields().is_empty() {
        return Err(Error::Input(format!(
            "{}: no header row; the first line must name the columns, separated by commas",
            path.display()
        )));
    }
    let schema = if whole {
        Arc::new(schema)
    } else {
        // The prefix cannot tell what an empty column holds; every value fits `Utf8`.
        let fields: Vec<Field> = schema
            .fields()
            .iter()
            .map(|field| match field.data_type() {
                DataType::Null => field.as_ref().clone().with_data_type(DataType::Utf8),
                _ => field.as_ref().clone(),
            })
            .collect();
        Arc::new(Schema::new(fields))
    };
    if let Some(start) = quoted_break {
        let place = CsvPlace::new(syntax, &prefix, 0, Some(&prefix[..]), None, share);
        return Err(quoted_line_break_error(path, &place.of_byte(start)));
    }

    let header_end = header_end as u64;
    let count = share.count as u128;
    let range_start = (share.index as u128 * u128::from(len) / count) as u64;
    let range_end = ((share.index as u128 + 1) * u128::from(len) / count) as u64;
    let (from, to, window) = if whole {
        // All of the file is here: split it at exact record starts, quoted line breaks and all.
        let mut starts = Vec::new();
        scan_csv_records(syntax, &prefix, |record| {
            starts.push(record.end as u64);
            true
        });
        let record_start_at_or_after = |at: u64| {
            let found = starts.partition_point(|&start| start < at);
            starts.get(found).copied().unwrap_or(len).max(header_end)
        };
        let from = match share.index {
            0 => header_end,
            _ => record_start_at_or_after(range_start),
        };
        let to = if share.index + 1 == share.count {
            len
        } else {
            record_start_at_or_after(range_end)
        };
        let window = Window {
            start: 0,
            bytes: std::mem::take(&mut prefix),
        };
        (from, to, window)
    } else {
        // Start where the previous share stops looking for a line start, reusing the prefix.
        let start = range_start.saturating_sub(1);
        let mut window = Window {
            start,
            bytes: prefix.get(start as usize..).unwrap_or_default().to_vec(),
        };
        window.reach(&mut source, range_end)?;
        let from = match share.index {
            0 => header_end,
            _ => window
                .line_start_at_or_after(&mut source, range_start)?
                .max(header_end),
        };
        let to = if share.index + 1 == share.count {
            len
        } else {
            window
                .line_start_at_or_after(&mut source, range_end)?
                .max(header_end)
        };
        window.reach(&mut source, to)?;
        (from, to, window)
    };
    let fragment = if from < to {
        &window.bytes[(from - window.start) as usize..(to - window.start) as usize]
    } else {
        &[][..]
    };
    // Line numbers are known where this share holds the file from its start.
    let from_file_start = (window.start == 0).then_some(&window.bytes[..]);
    let prefix_bytes = (!whole).then_some(cut);
    let place = CsvPlace::new(syntax, fragment, from, from_file_start, prefix_bytes, share);

    if !whole {
        // Split at line breaks, a share is only right if no quoted field holds one; when a split
        // point fell inside a quoted field, the share before it ends inside that field.
        let mut quoted_break = None;
        scan_csv_records(syntax, fragment, |record| {
            if record.quoted_line_break {
                quoted_break = Some(record.start);
            }
            quoted_break.is_none()
        });
        if let Some(start) = quoted_break {
            return Err(quoted_line_break_error(path, &place.of_byte(start)));
        }
    }

    let reader = arrow::csv::ReaderBuilder::new(schema.clone())
        .with_format(syntax.format()?.with_header(false))
        .with_batch_size(READ_BATCH_ROWS)
        .build(fragment)
        .map_err(|error| csv_error(path, error))?;
    let batches = reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|error| csv_share_error(path, &schema, error, &place))?;
    Ok((concat(path, &schema, &batches)?, source.bytes_read))
}

/// Where the bytes of a CSV share lie in the file, to turn arrow's record numbers into places.
struct CsvPlace<'a> {
    fragment: &'a [u8],
    /// The byte offset of `fragment` in the file.
    offset: u64,
    /// The file's bytes from its start, where this share holds them, for line numbers.
    from_file_start: Option<&'a [u8]>,
    /// How many bytes the column types were inferred from, unless from the whole file.
    prefix_bytes: Option<usize>,
    share: Share,
    syntax: CsvSyntax,
}

impl<'a> CsvPlace<'a> {
    fn new(
        syntax: CsvSyntax,
        fragment: &'a [u8],
        offset: u64,
        from_file_start: Option<&'a [u8]>,
        prefix_bytes: Option<usize>,
        share: Share,
    ) -> CsvPlace<'a> {
        CsvPlace {
            fragment,
            offset,
            from_file_start,
            prefix_bytes,
            share,
            syntax,
        }
    }

    /// `line L (byte B)`, or `byte B` without the start of the file, for byte `at` of the
    /// fragment.
    fn of_byte(&self, at: usize) -> String {
        let byte = self.offset + at as u64;
        let before = usize::try_from(byte)
            .ok()
            .and_then(|byte| self.from_file_start?.get(..byte));
        match before {
            Some(before) => {
                let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
                format!("line {line} (byte {byte})")
            }
            None => format!("byte {byte}"),
        }
    }

    /// Where record `number` (1-based, as arrow counts them) of the fragment starts.
    fn of_record(&self, number: u64) -> String {
        let mut seen = 0;
        let mut start = 0;
        scan_csv_records(self.syntax, self.fragment, |record| {
            seen += 1;
            start = record.start;
            seen < number
        });
        self.of_byte(start)
    }
}

fn quoted_line_break_error(path: &Path, place: &str) -> Error {
    Error::Input(format!(
        "{}: {place}: a quoted field holds a line break; a CSV file read in shares by several \
         processes is split at line breaks, and cannot be where quoted fields hold them; run \
         with one process, or remove the line breaks inside quoted fields",
        path.display()
    ))
}

/// [`csv_error`] for the bytes of one share: arrow numbers records from the share's start, so
/// they are turned into places in the file; a value that does not fit the type inferred from
/// the prefix says how to fix that.
fn csv_share_error(path: &Path, schema: &Schema, error: ArrowError, place: &CsvPlace) -> Error {
    let path_name = path.display();
    match &error {
        // "Error while parsing value '{v}' as type '{t}' for column {c} at line {n}. ..." with
        // a 0-based record number `n`.
        ArrowError::ParseError(message) if message.contains(" at line ") => {
            let at = place.of_record(number_after(message, " at line ").unwrap_or(0) + 1);
            let column = number_after(message, "column ")
                .and_then(|index| schema.fields().get(usize::try_from(index).ok()?))
                .map(|field| format!("column `{}`", field.name()))
                .unwrap_or_else(|| "a column".to_string());
            let value = text_between(message, "value '", "' as type '");
            let data_type = text_between(message, "as type '", "'");
            let what = match (value, data_type) {
                (Some(value), Some(data_type)) => {
                    format!("value {value:?} in {column} is not a valid {data_type}")
                }
                _ => format!("{column}: {message}"),
            };
            match place.prefix_bytes {
                Some(bytes) => Error::Input(format!(
                    "{path_name}: {at}: {what}; the column types of a CSV file read in shares \
                     by several processes are inferred from its first {bytes} bytes, alike on \
                     every process; put a row that shows the column's real type first in the \
                     file (e.g. move this one up), or run with one process so that the whole \
                     file is inferred"
                )),
                None => Error::Input(format!("{path_name}: {at}: {what}; fix the value")),
            }
        }
        // "incorrect number of fields for line {n}, expected {e} got {f}", `n` 1-based.
        ArrowError::CsvError(message) if message.contains("incorrect number of fields") => {
            let record = number_after(message, "for line ").unwrap_or(1);
            let expected = number_after(message, "expected ").unwrap_or(0);
            let found = message
                .split(" got ")
                .nth(1)
                .unwrap_or("a different number");
            // A share that starts inside a quoted field sees its tail as a record.
            let hint = if record == 1 && place.share.index > 0 {
                format!(
                    "; it is the first record of share {} of {}, so if a quoted field holds a \
                     line break the split cut it: then run with one process or remove such line \
                     breaks",
                    place.share.index, place.share.count
                )
            } else {
                String::new()
            };
            Error::Input(format!(
                "{path_name}: {}: expected {expected} fields, found {found}; fix the line or \
                 quote the field that contains a comma{hint}",
                place.of_record(record)
            ))
        }
        // "Encountered invalid UTF-8 data for line {n} and field {f}", `n` 1-based.
        ArrowError::CsvError(message) if message.contains("UTF-8") => {
            let record = number_after(message, "for line ").unwrap_or(1);
            Error::Input(format!(
                "{path_name}: {}: invalid UTF-8; convert the file to UTF-8 (e.g. `iconv -f \
                 latin1 -t utf-8`)",
                place.of_record(record)
            ))
        }
        _ => csv_error(path, error),
    }
}

/// The text between the first `open` in `text` and the next `close` after it.
fn text_between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let rest = &text[text.find(open)? + open.len()..];
    Some(&rest[..rest.find(close)?])
}

// ---------------------------------------------------------------------------------------------
// Keys
// ---------------------------------------------------------------------------------------------

/// The kind of a key column: what its values are, whatever their width or encoding. Both sides'
/// key columns must be of one kind (checked by [`check_key_compat`]), because each kind is mapped
/// onto the few variants of [`Key`] and the variant alone does not say what a value was: a date
/// must never match the integer that happens to encode it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// Integers of any width, signed or unsigned, widened to `i64`.
    Int,
    /// UTF-8 strings (`Utf8`, `LargeUtf8`, `Utf8View`).
    Str,
    /// Booleans, as the integers 0 and 1.
    Bool,
    /// Floats of any width, compared as `f64` with SQL equality: `-0.0` is `0.0` and every NaN
    /// equals every NaN (as DuckDB has it); keyed by the bits of that canonical `f64`.
    Float,
    /// Decimals of any width, precision and scale, compared by value: keyed by canonical text
    /// (`15e-1` for 1.5 at any scale).
    Decimal,
    /// Dates (`Date32` days, `Date64` milliseconds), as milliseconds since the epoch.
    Date,
    /// Times of day of any unit, as nanoseconds since midnight.
    Time,
    /// Timestamps of any unit, as nanoseconds since the epoch. `zoned` is whether the column has
    /// a time zone: its values are then instants (UTC), and they join other zoned timestamps
    /// whatever the zone's name, but never a timestamp without a zone (a wall-clock reading).
    Timestamp {
        /// Whether the type names a time zone.
        zoned: bool,
    },
    /// Byte strings (`Binary`, `LargeBinary`, `BinaryView`, `FixedSizeBinary`).
    Bytes,
}

impl fmt::Display for KeyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyKind::Int => "integer",
            KeyKind::Str => "string",
            KeyKind::Bool => "boolean",
            KeyKind::Float => "float",
            KeyKind::Decimal => "decimal",
            KeyKind::Date => "date",
            KeyKind::Time => "time",
            KeyKind::Timestamp { zoned: false } => "timestamp without time zone",
            KeyKind::Timestamp { zoned: true } => "timestamp with time zone",
            KeyKind::Bytes => "binary",
        })
    }
}

/// The kind of each key column of a file with `schema`.
///
/// A missing column is [`Error::Input`] naming the file, the column and the file's columns; a
/// column of a type that cannot be a key (nested types, durations, ...) is [`Error::Input`]
/// suggesting a cast. A column of type `Null` (no values at all, as in a header-only CSV) holds
/// only NULL keys, which match nothing, so it is reported as [`KeyKind::Int`] and
/// [`check_key_compat`] accepts it against any kind.
pub fn key_kinds(schema: &Schema, columns: &[String], path: &Path) -> Result<Vec<KeyKind>> {
    columns
        .iter()
        .map(|name| {
            let (_, field) = find_field(schema, name, path)?;
            key_kind(field.data_type()).ok_or_else(|| unsupported_key(field, path))
        })
        .collect()
}

fn key_kind(data_type: &DataType) -> Option<KeyKind> {
    match data_type {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Null => Some(KeyKind::Int),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Some(KeyKind::Str),
        DataType::Boolean => Some(KeyKind::Bool),
        DataType::Float16 | DataType::Float32 | DataType::Float64 => Some(KeyKind::Float),
        DataType::Decimal32(..)
        | DataType::Decimal64(..)
        | DataType::Decimal128(..)
        | DataType::Decimal256(..) => Some(KeyKind::Decimal),
        DataType::Date32 | DataType::Date64 => Some(KeyKind::Date),
        DataType::Time32(_) | DataType::Time64(_) => Some(KeyKind::Time),
        DataType::Timestamp(_, zone) => Some(KeyKind::Timestamp {
            zoned: zone.is_some(),
        }),
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => Some(KeyKind::Bytes),
        // Parquet files often dictionary-encode strings; the key is the value, not the code.
        DataType::Dictionary(_, values) => key_kind(values),
        _ => None,
    }
}

/// The index and field of column `name`, or an error listing the columns there are.
pub(crate) fn find_field<'a>(
    schema: &'a Schema,
    name: &str,
    path: &Path,
) -> Result<(usize, &'a Field)> {
    if let Some(found) = schema.column_with_name(name) {
        // A column named twice is ambiguous: taking the first would be a guess.
        let named = schema
            .fields()
            .iter()
            .filter(|field| field.name() == name)
            .count();
        if named > 1 {
            return Err(Error::Input(format!(
                "{} has {named} columns named `{name}`, so the name is ambiguous; rename all \
                 but one",
                path.display()
            )));
        }
        return Ok(found);
    }
    let names: Vec<String> = schema
        .fields()
        .iter()
        .map(|field| format!("`{}`", field.name()))
        .collect();
    let hint = similar_column(schema, name)
        .map(|similar| format!(" ({similar})"))
        .unwrap_or_default();
    Err(Error::Input(format!(
        "{} has no column `{name}`{hint}; its columns are: {}",
        path.display(),
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    )))
}

/// A column of `schema` that `name` was likely meant to be, said as a question: one that differs
/// in case only, or in spaces around it (`--left-columns "a, b"` names ` b`; a CSV header
/// written `a, b` names its second column ` b`).
pub(crate) fn similar_column(schema: &Schema, name: &str) -> Option<String> {
    let fields = schema.fields();
    if let Some(field) = fields
        .iter()
        .find(|field| field.name().eq_ignore_ascii_case(name))
    {
        return Some(format!("did you mean `{}`?", field.name()));
    }
    fields
        .iter()
        .find(|field| field.name().trim().eq_ignore_ascii_case(name.trim()))
        .map(|field| {
            format!(
                "did you mean `{}`? The names differ in spaces: a list is separated by commas \
                 alone",
                field.name()
            )
        })
}

fn unsupported_key(field: &Field, path: &Path) -> Error {
    Error::Input(format!(
        "{} column `{}` has type {}, which cannot be a join key; keys may be integers, strings, \
         booleans, floats, decimals, dates, times, timestamps or binary: cast it to one of \
         those before joining",
        path.display(),
        field.name(),
        field.data_type()
    ))
}

/// Checks that the left and right key columns exist, are usable as keys and pair up: both key
/// columns of each pair must be of one [`KeyKind`] (an integer key cannot join a string or a date
/// key: [`Error::Input`] naming both columns and types), while widths, units, scales and zone
/// names within a kind may differ. Different numbers of key columns is [`Error::Usage`].
pub fn check_key_compat(
    left: (&Path, &Schema, &[String]),
    right: (&Path, &Schema, &[String]),
) -> Result<()> {
    let (left_path, left_schema, left_columns) = left;
    let (right_path, right_schema, right_columns) = right;
    if left_columns.is_empty() || right_columns.is_empty() {
        return Err(Error::Usage(
            "no join key columns given; name at least one key column for each side".to_string(),
        ));
    }
    if left_columns.len() != right_columns.len() {
        return Err(Error::Usage(format!(
            "the left side has {} key columns ({}) but the right side has {} ({}); give both \
             sides the same number of key columns, in matching order",
            left_columns.len(),
            left_columns.join(", "),
            right_columns.len(),
            right_columns.join(", ")
        )));
    }
    let left_kinds = key_kinds(left_schema, left_columns, left_path)?;
    let right_kinds = key_kinds(right_schema, right_columns, right_path)?;
    for (i, (left_kind, right_kind)) in left_kinds.iter().zip(&right_kinds).enumerate() {
        let (_, left_field) = find_field(left_schema, &left_columns[i], left_path)?;
        let (_, right_field) = find_field(right_schema, &right_columns[i], right_path)?;
        let all_null = |field: &Field| field.data_type() == &DataType::Null;
        if left_kind != right_kind && !all_null(left_field) && !all_null(right_field) {
            let describe = |path: &Path, field: &Field, kind: KeyKind| {
                format!(
                    "{} column `{}` is {kind} ({})",
                    path.display(),
                    field.name(),
                    field.data_type()
                )
            };
            // A CSV column's type is inferred from its values: one odd value makes it text (or
            // float), and that value, not the type, is what the user has to find.
            let culprit = first_csv_value_not_of(left_path, left_field, right_field.data_type())
                .or_else(|| first_csv_value_not_of(right_path, right_field, left_field.data_type()))
                .map(|culprit| {
                    format!(
                        "; {culprit}: fix that value, pass `--null <value>` if it stands for \
                         NULL, or"
                    )
                })
                .unwrap_or_else(|| ";".to_string());
            return Err(Error::Input(format!(
                "key types differ: {}, {}{culprit} cast one side",
                describe(left_path, left_field, *left_kind),
                describe(right_path, right_field, *right_kind)
            )));
        }
    }
    Ok(())
}

/// In a CSV file (by its name), the first value of `field`'s column that does not convert to
/// `wanted`, as `<file> line <L> has the value <V> in column <C>, which is not of type ...`;
/// `None` when the file is not CSV, cannot be read, or every value converts.
fn first_csv_value_not_of(path: &Path, field: &Field, wanted: &DataType) -> Option<String> {
    /// Values converted at a time.
    const CHUNK: usize = 4096;
    let wanted = match wanted {
        DataType::Dictionary(_, values) => values.as_ref(),
        other => other,
    };
    if FileFormat::detect(path, None).ok()? != FileFormat::Csv
        || matches!(wanted, DataType::Null)
        || field.data_type() == wanted
    {
        return None;
    }
    let mut file = File::open(path).ok()?;
    let syntax = csv_syntax_of_file(path, &mut file).ok()?;
    let null = csv_dialect().null.as_deref();
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(syntax.delimiter)
        .quote(syntax.quote)
        .flexible(true)
        .from_reader(io::BufReader::new(file));
    let index = reader
        .headers()
        .ok()?
        .iter()
        .position(|name| name == field.name())?;
    let mut record = csv::StringRecord::new();
    let (mut values, mut lines) = (Vec::with_capacity(CHUNK), Vec::with_capacity(CHUNK));
    loop {
        let more = reader.read_record(&mut record).ok()?;
        if more {
            let value = record.get(index).unwrap_or_default();
            if !value.is_empty() && Some(value) != null {
                values.push(value.to_string());
                lines.push(record.position().map_or(0, csv::Position::line));
            }
        }
        if values.len() == CHUNK || !more {
            // A safe cast gives NULL for each value that does not convert.
            let texts = StringArray::from_iter_values(&values);
            let converted = cast(&texts, wanted).ok()?;
            if let Some(at) = (0..converted.len()).find(|&at| converted.is_null(at)) {
                return Some(format!(
                    "{} line {} has the value {:?} in column `{}`, which is not of type {} and \
                     made the whole column {}",
                    path.display(),
                    lines[at],
                    values[at],
                    field.name(),
                    key_kind(wanted).map_or_else(|| wanted.to_string(), |kind| kind.to_string()),
                    field.data_type()
                ));
            }
            values.clear();
            lines.clear();
        }
        if !more {
            return None;
        }
    }
}

/// One key column, downcast once so that the per-row loop is monomorphic.
enum KeyColumn<'a> {
    Null,
    Int(&'a Int64Array),
    Utf8(&'a StringArray),
    LargeUtf8(&'a LargeStringArray),
    Utf8View(&'a StringViewArray),
    Binary(&'a BinaryArray),
    LargeBinary(&'a LargeBinaryArray),
    BinaryView(&'a BinaryViewArray),
    FixedSizeBinary(&'a FixedSizeBinaryArray),
}

impl KeyColumn<'_> {
    fn of(array: &ArrayRef) -> KeyColumn<'_> {
        match array.data_type() {
            DataType::Int64 => KeyColumn::Int(array.as_primitive::<Int64Type>()),
            DataType::Utf8 => KeyColumn::Utf8(array.as_string::<i32>()),
            DataType::LargeUtf8 => KeyColumn::LargeUtf8(array.as_string::<i64>()),
            DataType::Utf8View => KeyColumn::Utf8View(array.as_string_view()),
            DataType::Binary => KeyColumn::Binary(array.as_binary::<i32>()),
            DataType::LargeBinary => KeyColumn::LargeBinary(array.as_binary::<i64>()),
            DataType::BinaryView => KeyColumn::BinaryView(array.as_binary_view()),
            DataType::FixedSizeBinary(_) => {
                KeyColumn::FixedSizeBinary(array.as_fixed_size_binary())
            }
            _ => KeyColumn::Null,
        }
    }

    fn is_null(&self, row: usize) -> bool {
        match self {
            KeyColumn::Null => true,
            KeyColumn::Int(array) => array.is_null(row),
            KeyColumn::Utf8(array) => array.is_null(row),
            KeyColumn::LargeUtf8(array) => array.is_null(row),
            KeyColumn::Utf8View(array) => array.is_null(row),
            KeyColumn::Binary(array) => array.is_null(row),
            KeyColumn::LargeBinary(array) => array.is_null(row),
            KeyColumn::BinaryView(array) => array.is_null(row),
            KeyColumn::FixedSizeBinary(array) => array.is_null(row),
        }
    }

    fn key(&self, row: usize) -> Key {
        if self.is_null(row) {
            return Key::Null;
        }
        let bytes = |value: &[u8]| Key::Bytes(value.into());
        match self {
            KeyColumn::Null => Key::Null,
            KeyColumn::Int(array) => Key::Int(array.value(row)),
            KeyColumn::Utf8(array) => Key::str(array.value(row)),
            KeyColumn::LargeUtf8(array) => Key::str(array.value(row)),
            KeyColumn::Utf8View(array) => Key::str(array.value(row)),
            KeyColumn::Binary(array) => bytes(array.value(row)),
            KeyColumn::LargeBinary(array) => bytes(array.value(row)),
            KeyColumn::BinaryView(array) => bytes(array.value(row)),
            KeyColumn::FixedSizeBinary(array) => bytes(array.value(row)),
        }
    }
}

/// Brings a key column to one of the types [`KeyColumn`] reads, so that equal values of one
/// [`KeyKind`] give equal [`Key`]s whatever their width, unit or scale: integers, booleans,
/// dates (to milliseconds), times and timestamps (to nanoseconds) and floats (to the bits of
/// their canonical `f64`) to `Int64`; decimals to canonical text; dictionaries to their values.
/// A value that does not fit (an unsigned 64-bit integer above `i64::MAX`, a timestamp outside
/// the years 1677 to 2262 in nanoseconds) is [`Error::Input`] naming the row.
fn normalise_key_column(array: &ArrayRef, field: &Field, path: &Path) -> Result<ArrayRef> {
    let cast_to = |to: &DataType| {
        cast(array, to).map_err(|error| {
            Error::Internal(format!(
                "{} column `{}`: converting {} to {to} failed: {error}",
                path.display(),
                field.name(),
                field.data_type()
            ))
        })
    };
    let too_big = |row: usize, value: &dyn fmt::Display, limit: &str| {
        Error::Input(format!(
            "{} column `{}` row {}: value {value} of type {} is outside {limit}, which keys of \
             its kind must fit; cast the column to a string",
            path.display(),
            field.name(),
            row + 1,
            field.data_type()
        ))
    };
    match array.data_type() {
        DataType::Int64
        | DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_)
        | DataType::Null => Ok(array.clone()),
        DataType::UInt64 => {
            let values = array.as_primitive::<UInt64Type>();
            let too_big_row = (0..values.len())
                .find(|&row| values.is_valid(row) && values.value(row) > i64::MAX as u64);
            if let Some(row) = too_big_row {
                return Err(too_big(row, &values.value(row), "a signed 64-bit integer"));
            }
            Ok(Arc::new(values.unary::<_, Int64Type>(|value| value as i64)))
        }
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::Boolean => cast_to(&DataType::Int64),
        DataType::Float16 => Ok(float_keys::<Float16Type>(array, |value| value.to_f64())),
        DataType::Float32 => Ok(float_keys::<Float32Type>(array, f64::from)),
        DataType::Float64 => Ok(float_keys::<Float64Type>(array, |value| value)),
        DataType::Decimal32(_, scale) => Ok(decimal_keys::<Decimal32Type>(array, *scale)),
        DataType::Decimal64(_, scale) => Ok(decimal_keys::<Decimal64Type>(array, *scale)),
        DataType::Decimal128(_, scale) => Ok(decimal_keys::<Decimal128Type>(array, *scale)),
        DataType::Decimal256(_, scale) => Ok(decimal_keys::<Decimal256Type>(array, *scale)),
        DataType::Date32 => Ok(Arc::new(
            array
                .as_primitive::<Date32Type>()
                .unary::<_, Int64Type>(|days| i64::from(days) * MILLIS_PER_DAY),
        )),
        DataType::Date64 => cast_to(&DataType::Int64),
        DataType::Time32(unit) | DataType::Time64(unit) => {
            // A time of day is below 86,400 s, so no unit overflows in nanoseconds.
            let values = cast_to(&DataType::Int64)?;
            let factor = nanos_per(*unit);
            Ok(Arc::new(
                values
                    .as_primitive::<Int64Type>()
                    .unary::<_, Int64Type>(|value| value * factor),
            ))
        }
        DataType::Timestamp(unit, _) => {
            let values = cast_to(&DataType::Int64)?;
            let values = values.as_primitive::<Int64Type>();
            let factor = nanos_per(*unit);
            let overflow = (0..values.len()).find(|&row| {
                values.is_valid(row) && values.value(row).checked_mul(factor).is_none()
            });
            if let Some(row) = overflow {
                let shown = ArrayFormatter::try_new(array.as_ref(), &FormatOptions::default())
                    .map(|formatter| formatter.value(row).to_string())
                    .unwrap_or_else(|_| values.value(row).to_string());
                return Err(too_big(
                    row,
                    &shown,
                    "the nanosecond range (years 1677 to 2262)",
                ));
            }
            Ok(Arc::new(
                values.unary::<_, Int64Type>(|value| value * factor),
            ))
        }
        DataType::Dictionary(_, values) if key_kind(values).is_some() => {
            let plain = cast_to(values)?;
            normalise_key_column(&plain, field, path)
        }
        _ => Err(unsupported_key(field, path)),
    }
}

const MILLIS_PER_DAY: i64 = 86_400_000;

fn nanos_per(unit: TimeUnit) -> i64 {
    match unit {
        TimeUnit::Second => 1_000_000_000,
        TimeUnit::Millisecond => 1_000_000,
        TimeUnit::Microsecond => 1_000,
        TimeUnit::Nanosecond => 1,
    }
}

/// Float keys as the bits of their canonical `f64` ([`float_word`]), which are equal exactly
/// when SQL (as DuckDB has it) calls the values equal. A `float32` widens to `f64` exactly, so it
/// matches the `float64` of the same value, as DuckDB's implicit cast does.
fn float_keys<T: ArrowPrimitiveType>(
    array: &ArrayRef,
    to_f64: impl Fn(T::Native) -> f64,
) -> ArrayRef {
    Arc::new(
        array
            .as_primitive::<T>()
            .unary::<_, Int64Type>(|value| float_word(to_f64(value)) as i64),
    )
}

/// Decimal keys as canonical text: the unscaled value without trailing zeros, and the power of
/// ten it is scaled by (`15e-1` for 1.5 whether stored as 15 at scale 1 or 150 at scale 2), so
/// that equal values at different scales are one key and no width is too narrow.
fn decimal_keys<T: DecimalType>(array: &ArrayRef, scale: i8) -> ArrayRef
where
    T::Native: fmt::Display,
{
    let values = array.as_primitive::<T>();
    let texts: StringArray = values
        .iter()
        .map(|value| value.map(|value| canonical_decimal(&value.to_string(), scale)))
        .collect();
    Arc::new(texts)
}

/// `unscaled` (decimal digits with an optional `-`) times ten to the `-scale`, as
/// `<digits>e<exponent>` with no trailing zeros in the digits; zero is `0e0`.
fn canonical_decimal(unscaled: &str, scale: i8) -> String {
    let digits = unscaled.trim_end_matches('0');
    if digits.is_empty() || digits == "-" {
        return "0e0".to_string();
    }
    let stripped = (unscaled.len() - digits.len()) as i64;
    format!("{digits}e{}", stripped - i64::from(scale))
}

/// The key column of `batch`, normalised to `Int64`, when the key is one integer column: the
/// fast paths below read its values without making a [`Key`] per row.
fn single_int_key(
    batch: &RecordBatch,
    columns: &[String],
    path: &Path,
) -> Result<Option<ArrayRef>> {
    let [column] = columns else {
        return Ok(None);
    };
    let schema = batch.schema();
    let (index, field) = find_field(&schema, column, path)?;
    let normalised = normalise_key_column(batch.column(index), field, path)?;
    Ok((normalised.data_type() == &DataType::Int64).then_some(normalised))
}

/// Calls `each` with the key of every row of `batch`, in order: the keys of [`extract_keys`],
/// without collecting them into a `Vec` per batch (on 10^6 uniform integer keys a side, 7 % of
/// the instructions of reading the rows for the join).
pub fn for_each_key(
    batch: &RecordBatch,
    columns: &[String],
    path: &Path,
    mut each: impl FnMut(Key),
) -> Result<()> {
    if let Some(column) = single_int_key(batch, columns, path)? {
        let values = column.as_primitive::<Int64Type>();
        if values.null_count() == 0 {
            values.values().iter().for_each(|&key| each(Key::Int(key)));
        } else {
            values
                .iter()
                .for_each(|key| each(key.map_or(Key::Null, Key::Int)));
        }
        return Ok(());
    }
    extract_keys(batch, columns, path)?
        .into_iter()
        .for_each(each);
    Ok(())
}

/// Counts the key of every row of `batch` in `tally` (a [`KeyTally`](skewjoin_planner::skew_check::KeyTally) or a
/// [`KeySample`](skewjoin_planner::skew_check::KeySample)) as `side`'s. A single integer key column
/// is counted from its values, with no [`Key`] made per row: making and dropping them was a
/// third of `auto`'s skew check on integer keys (hashing a `Key::Int` instead of the `i64`
/// itself, through [`for_each_key`], costs the check a quarter more instructions).
pub fn tally_keys(
    batch: &RecordBatch,
    columns: &[String],
    path: &Path,
    side: Side,
    tally: &mut impl KeySink,
) -> Result<()> {
    if let Some(column) = single_int_key(batch, columns, path)? {
        // An `i64` and an `Option<i64>` hash as `Key::Int` does; `None` is NULL.
        let values = column.as_primitive::<Int64Type>();
        if values.null_count() == 0 {
            values
                .values()
                .iter()
                .for_each(|key| tally.add_key(side, key));
        } else {
            values.iter().for_each(|key| tally.add_key(side, &key));
        }
        return Ok(());
    }
    for key in extract_keys(batch, columns, path)? {
        tally.add_key(side, &key);
    }
    Ok(())
}

/// One [`Key`] per row of `batch` from the key `columns`, each read by the rules of
/// [`KeyKind`]: `Key::Int`, `Key::Str` or `Key::Bytes` for one column, [`Key::composite`] for
/// several; a NULL in any key column gives [`Key::Null`].
pub fn extract_keys(batch: &RecordBatch, columns: &[String], path: &Path) -> Result<Vec<Key>> {
    if columns.is_empty() {
        return Err(Error::Usage(
            "no join key columns given; name at least one key column".to_string(),
        ));
    }
    let schema = batch.schema();
    let normalised = columns
        .iter()
        .map(|name| {
            let (index, field) = find_field(&schema, name, path)?;
            normalise_key_column(batch.column(index), field, path)
        })
        .collect::<Result<Vec<ArrayRef>>>()?;
    let key_columns: Vec<KeyColumn<'_>> = normalised.iter().map(KeyColumn::of).collect();

    let rows = 0..batch.num_rows();
    Ok(match key_columns.as_slice() {
        [single] => rows.map(|row| single.key(row)).collect(),
        [first, second] => rows
            .map(|row| Key::pair(first.key(row), second.key(row)))
            .collect(),
        several => rows
            .map(|row| {
                // Check for NULL first: a NULL key allocates no parts at all.
                if several.iter().any(|column| column.is_null(row)) {
                    Key::Null
                } else {
                    Key::composite(several.iter().map(|column| column.key(row)).collect())
                }
            })
            .collect(),
    })
}

// ---------------------------------------------------------------------------------------------
// Row hashes
// ---------------------------------------------------------------------------------------------

/// A stable 64-bit hash of each row of `batch` over all its columns.
///
/// Each value is fed in a canonical, type-independent encoding, so that the same logical row
/// hashes the same whether it was read from Parquet, Arrow IPC or CSV: NULL is a fixed marker
/// word; integers of every width, booleans (0/1), dates, times, timestamps and durations are their
/// value as `i64` bits; floats are their `f64` bits with `-0.0` as `0.0` and one NaN; strings and
/// binaries are their bytes; decimals up to 128 bits wide are their value as `i128` and their
/// scale. Other types (256-bit decimals, nested types, ...) hash their display string.
pub fn row_hashes(batch: &RecordBatch) -> Vec<u64> {
    let mut hashers = vec![StableHasher::new(); batch.num_rows()];
    for column in batch.columns() {
        feed_column(column, &mut hashers);
    }
    hashers.iter().map(StableHasher::finish).collect()
}

/// Feeds one value of `column` into each row's hasher, column by column so that each column is
/// downcast once.
fn feed_column(column: &ArrayRef, hashers: &mut [StableHasher]) {
    fn int<T: ArrowPrimitiveType>(
        column: &ArrayRef,
        hashers: &mut [StableHasher],
        word: impl Fn(T::Native) -> i64,
    ) {
        let values = column.as_primitive::<T>().values();
        feed_each(column, hashers, |hasher, row| {
            hasher.write_u64(word(values[row]) as u64)
        });
    }
    fn float<T: ArrowPrimitiveType>(
        column: &ArrayRef,
        hashers: &mut [StableHasher],
        to_f64: impl Fn(T::Native) -> f64,
    ) {
        let values = column.as_primitive::<T>().values();
        feed_each(column, hashers, |hasher, row| {
            hasher.write_u64(float_word(to_f64(values[row])))
        });
    }
    fn bytes<T: ByteArrayType>(column: &ArrayRef, hashers: &mut [StableHasher]) {
        let values = column.as_bytes::<T>();
        feed_each(column, hashers, |hasher, row| {
            hasher.write_bytes(values.value(row).as_ref())
        });
    }
    fn byte_view<T: ByteViewType>(column: &ArrayRef, hashers: &mut [StableHasher]) {
        let values = column.as_byte_view::<T>();
        feed_each(column, hashers, |hasher, row| {
            hasher.write_bytes(values.value(row).as_ref())
        });
    }

    fn decimal<T: DecimalType>(
        column: &ArrayRef,
        hashers: &mut [StableHasher],
        scale: i8,
        to_i128: impl Fn(T::Native) -> i128,
    ) {
        let values = column.as_primitive::<T>().values();
        feed_each(column, hashers, |hasher, row| {
            let value = to_i128(values[row]);
            hasher.write_u64(value as u64);
            hasher.write_u64((value >> 64) as u64);
            hasher.write_u64(scale as u64);
        });
    }

    match column.data_type() {
        DataType::Null => hashers
            .iter_mut()
            .for_each(|hasher| hasher.write_u64(NULL_WORD)),
        // Formatting each value to hash its text was a tenth of the CPU of a TPC-H join.
        DataType::Decimal32(_, scale) => {
            decimal::<Decimal32Type>(column, hashers, *scale, i128::from)
        }
        DataType::Decimal64(_, scale) => {
            decimal::<Decimal64Type>(column, hashers, *scale, i128::from)
        }
        DataType::Decimal128(_, scale) => {
            decimal::<Decimal128Type>(column, hashers, *scale, |value| value)
        }
        DataType::Boolean => {
            let values = column.as_boolean();
            feed_each(column, hashers, |hasher, row| {
                hasher.write_u64(u64::from(values.value(row)))
            });
        }
        DataType::Int8 => int::<Int8Type>(column, hashers, i64::from),
        DataType::Int16 => int::<Int16Type>(column, hashers, i64::from),
        DataType::Int32 => int::<Int32Type>(column, hashers, i64::from),
        DataType::Int64 => int::<Int64Type>(column, hashers, |value| value),
        DataType::UInt8 => int::<UInt8Type>(column, hashers, i64::from),
        DataType::UInt16 => int::<UInt16Type>(column, hashers, i64::from),
        DataType::UInt32 => int::<UInt32Type>(column, hashers, i64::from),
        // Bit-preserving: values above i64::MAX keep their bits, so they still hash distinctly.
        DataType::UInt64 => int::<UInt64Type>(column, hashers, |value| value as i64),
        DataType::Date32 => int::<Date32Type>(column, hashers, i64::from),
        DataType::Date64 => int::<Date64Type>(column, hashers, |value| value),
        DataType::Time32(TimeUnit::Second) => int::<Time32SecondType>(column, hashers, i64::from),
        DataType::Time32(TimeUnit::Millisecond) => {
            int::<Time32MillisecondType>(column, hashers, i64::from)
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            int::<Time64MicrosecondType>(column, hashers, |value| value)
        }
        DataType::Time64(TimeUnit::Nanosecond) => {
            int::<Time64NanosecondType>(column, hashers, |value| value)
        }
        DataType::Timestamp(TimeUnit::Second, _) => {
            int::<TimestampSecondType>(column, hashers, |value| value)
        }
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            int::<TimestampMillisecondType>(column, hashers, |value| value)
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            int::<TimestampMicrosecondType>(column, hashers, |value| value)
        }
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            int::<TimestampNanosecondType>(column, hashers, |value| value)
        }
        DataType::Duration(TimeUnit::Second) => {
            int::<DurationSecondType>(column, hashers, |value| value)
        }
        DataType::Duration(TimeUnit::Millisecond) => {
            int::<DurationMillisecondType>(column, hashers, |value| value)
        }
        DataType::Duration(TimeUnit::Microsecond) => {
            int::<DurationMicrosecondType>(column, hashers, |value| value)
        }
        DataType::Duration(TimeUnit::Nanosecond) => {
            int::<DurationNanosecondType>(column, hashers, |value| value)
        }
        DataType::Float16 => float::<Float16Type>(column, hashers, |value| value.to_f64()),
        DataType::Float32 => float::<Float32Type>(column, hashers, f64::from),
        DataType::Float64 => float::<Float64Type>(column, hashers, |value| value),
        DataType::Utf8 => bytes::<Utf8Type>(column, hashers),
        DataType::LargeUtf8 => bytes::<LargeUtf8Type>(column, hashers),
        DataType::Binary => bytes::<BinaryType>(column, hashers),
        DataType::LargeBinary => bytes::<LargeBinaryType>(column, hashers),
        DataType::Utf8View => byte_view::<StringViewType>(column, hashers),
        DataType::BinaryView => byte_view::<BinaryViewType>(column, hashers),
        DataType::FixedSizeBinary(_) => {
            let values = column.as_fixed_size_binary();
            feed_each(column, hashers, |hasher, row| {
                hasher.write_bytes(values.value(row))
            });
        }
        // A dictionary-encoded column holds the same logical values as its plain form.
        DataType::Dictionary(_, value_type) => match cast(column, value_type) {
            Ok(plain) => feed_column(&plain, hashers),
            Err(_) => feed_display(column, hashers),
        },
        _ => feed_display(column, hashers),
    }
}

/// Calls `feed` for every non-NULL row and feeds the NULL marker for the others.
fn feed_each(
    column: &ArrayRef,
    hashers: &mut [StableHasher],
    mut feed: impl FnMut(&mut StableHasher, usize),
) {
    let nulls: Option<NullBuffer> = column.logical_nulls();
    for (row, hasher) in hashers.iter_mut().enumerate() {
        if nulls.as_ref().is_some_and(|nulls| nulls.is_null(row)) {
            hasher.write_u64(NULL_WORD);
        } else {
            feed(hasher, row);
        }
    }
}

/// Hashes the display string of each value, for types without a canonical encoding above.
fn feed_display(column: &ArrayRef, hashers: &mut [StableHasher]) {
    let options = FormatOptions::default();
    let Ok(formatter) = ArrayFormatter::try_new(column.as_ref(), &options) else {
        // No display either: all that is left to tell rows apart is NULL or not.
        let type_name = column.data_type().to_string();
        feed_each(column, hashers, |hasher, _| {
            hasher.write_bytes(type_name.as_bytes())
        });
        return;
    };
    let mut text = String::new();
    feed_each(column, hashers, |hasher, row| {
        text.clear();
        // A value that fails to format still hashes what was written of it.
        let _ = formatter.value(row).write(&mut text);
        hasher.write_bytes(text.as_bytes());
    });
}

/// The canonical 64-bit word of a float: `-0.0` equals `0.0` and all NaNs are one NaN.
fn float_word(value: f64) -> u64 {
    if value.is_nan() {
        CANONICAL_NAN
    } else if value == 0.0 {
        0
    } else {
        value.to_bits()
    }
}

// ---------------------------------------------------------------------------------------------
// Join output
// ---------------------------------------------------------------------------------------------

/// The output schema of a join: the left columns, then the right columns, of the sides that `how`
/// outputs. A right column whose name is a left column's gets the suffix `_right` (or `_right2`,
/// `_right3`, ... when that is taken too). The columns of a side that may be padded with NULLs
/// (because the other side keeps unmatched rows) are nullable.
pub fn output_schema(left: &Schema, right: &Schema, how: JoinType) -> SchemaRef {
    let side_fields = |schema: &Schema, side: Side| -> Vec<Field> {
        if !how.outputs_side(side) {
            return Vec::new();
        }
        let padded = how.keeps_unmatched(side.other());
        schema
            .fields()
            .iter()
            .map(|field| {
                let nullable = field.is_nullable() || padded;
                field.as_ref().clone().with_nullable(nullable)
            })
            .collect()
    };
    let mut fields = side_fields(left, Side::Left);
    let right_fields = side_fields(right, Side::Right);

    // A new name must not collide with any column of either side, so that renaming one column
    // never shadows another.
    let mut taken: std::collections::HashSet<String> = fields
        .iter()
        .chain(&right_fields)
        .map(|field| field.name().clone())
        .collect();
    let left_names: std::collections::HashSet<&str> =
        fields.iter().map(|field| field.name().as_str()).collect();
    let mut renamed = Vec::with_capacity(right_fields.len());
    for field in right_fields {
        if !left_names.contains(field.name().as_str()) {
            renamed.push(field);
            continue;
        }
        let base = format!("{}_right", field.name());
        let name = std::iter::once(base.clone())
            .chain((2..).map(|n| format!("{base}{n}")))
            .find(|candidate| !taken.contains(candidate))
            .expect("an unbounded sequence of names has a free one");
        taken.insert(name.clone());
        renamed.push(field.with_name(name));
    }
    fields.extend(renamed);
    Arc::new(Schema::new(fields))
}

/// The rows of one input, for assembling output rows: the whole table as one batch, or chunks
/// of [`CHUNK_ROWS`](crate::batches::CHUNK_ROWS) rows filled in while the input is streamed.
/// Row `r` is row `r % chunk_rows` of chunk `r / chunk_rows`.
#[derive(Debug)]
pub struct RowStore {
    schema: SchemaRef,
    chunk_rows: u64,
    rows: u64,
    chunks: Vec<OnceLock<RecordBatch>>,
    /// For a store of batches of any lengths ([`RowStore::batches`]), the first row of each
    /// batch and, last, the row count; empty when every chunk has `chunk_rows` rows.
    starts: Vec<u64>,
}

impl RowStore {
    /// A store holding `batch`, complete.
    pub fn whole(batch: RecordBatch) -> RowStore {
        RowStore {
            schema: batch.schema(),
            chunk_rows: (batch.num_rows() as u64).max(1),
            rows: batch.num_rows() as u64,
            chunks: vec![OnceLock::from(batch)],
            starts: Vec::new(),
        }
    }

    /// A store holding `batches` (all of `schema`), complete, as they are: a table handed over
    /// in batches of any lengths is not copied into one.
    pub fn batches(schema: SchemaRef, batches: Vec<RecordBatch>) -> RowStore {
        if let [_] = batches.as_slice() {
            return RowStore::whole(batches.into_iter().next().expect("one batch"));
        }
        let mut starts = Vec::with_capacity(batches.len() + 1);
        let mut rows = 0u64;
        for batch in &batches {
            starts.push(rows);
            rows += batch.num_rows() as u64;
        }
        starts.push(rows);
        RowStore {
            schema,
            chunk_rows: rows.max(1),
            rows,
            chunks: batches.into_iter().map(OnceLock::from).collect(),
            starts,
        }
    }

    /// How many rows the store holds (read or not).
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The chunk holding row `row`, and the row's place in it.
    #[inline]
    fn locate(&self, row: u64) -> (usize, usize) {
        if self.starts.is_empty() {
            return (
                (row / self.chunk_rows) as usize,
                (row % self.chunk_rows) as usize,
            );
        }
        // The last chunk starting at or before `row` (empty batches start where the next does).
        let chunk = self.starts.partition_point(|&start| start <= row) - 1;
        (chunk, (row - self.starts[chunk]) as usize)
    }

    /// An empty store for `rows` rows of `schema`, to be filled with [`put`](Self::put) in chunks
    /// of `chunk_rows` rows (the last may be shorter).
    pub fn chunked(schema: SchemaRef, rows: u64, chunk_rows: usize) -> RowStore {
        let chunk_rows = chunk_rows.max(1) as u64;
        RowStore {
            schema,
            chunk_rows,
            rows,
            chunks: (0..rows.div_ceil(chunk_rows))
                .map(|_| OnceLock::new())
                .collect(),
            starts: Vec::new(),
        }
    }

    /// Stores chunk `index`. A chunk of the wrong length or schema, or one stored twice, is
    /// [`Error::Internal`]: only a bug can cause it.
    pub fn put(&self, index: usize, batch: RecordBatch) -> Result<()> {
        let start = index as u64 * self.chunk_rows;
        let expected = self.chunk_rows.min(self.rows.saturating_sub(start));
        let slot = self.chunks.get(index).filter(|_| {
            batch.num_rows() as u64 == expected && batch.schema().fields() == self.schema.fields()
        });
        match slot.map(|slot| slot.set(batch)) {
            Some(Ok(())) => Ok(()),
            _ => Err(Error::Internal(format!(
                "chunk {index} of an input does not fit its place (expected {expected} rows)"
            ))),
        }
    }

    /// Appends the columns of the rows `rows` (with `PAD` as NULL) to `columns`.
    fn take(&self, side: Side, rows: &[u32], columns: &mut Vec<ArrayRef>) -> Result<()> {
        let len = self.rows;
        if let Some(&bad) = rows
            .iter()
            .find(|&&row| row != PAD && u64::from(row) >= len)
        {
            return Err(Error::Internal(format!(
                "join output refers to {side} row {bad}, but the {side} side has {len} rows"
            )));
        }
        let padded = rows.contains(&PAD);
        if len == 0 {
            // Nothing to take from: every row is padding.
            columns.extend(
                self.schema
                    .fields()
                    .iter()
                    .map(|field| new_null_array(field.data_type(), rows.len())),
            );
            return Ok(());
        }
        let missing = |index: usize| {
            Error::Internal(format!(
                "join output refers to {side} rows of chunk {index}, which was not read yet"
            ))
        };
        if let [only] = self.chunks.as_slice() {
            let batch = only.get().ok_or_else(|| missing(0))?;
            // Padding slots point at row 0, which exists, so no kernel ever reads out of bounds;
            // the null mask makes them NULL in the output.
            let values: Vec<u32> = rows
                .iter()
                .map(|&row| if row == PAD { 0 } else { row })
                .collect();
            let nulls = padded.then(|| NullBuffer::from_iter(rows.iter().map(|&row| row != PAD)));
            let indices = UInt32Array::new(values.into(), nulls);
            for column in batch.columns() {
                let taken = take(column.as_ref(), &indices, None).map_err(|error| {
                    Error::Internal(format!(
                        "taking {side} rows for join output failed: {error}"
                    ))
                })?;
                columns.push(taken);
            }
            return Ok(());
        }
        // Several chunks: (chunk, row) pairs, with padding taken from a one-row NULL array
        // placed after the chunks.
        let pad_source = self.chunks.len();
        let indices: Vec<(usize, usize)> = rows
            .iter()
            .map(|&row| match row {
                PAD => (pad_source, 0),
                row => self.locate(u64::from(row)),
            })
            .collect();
        if let Some(&(index, _)) = indices
            .iter()
            .find(|&&(index, _)| index != pad_source && self.chunks[index].get().is_none())
        {
            return Err(missing(index));
        }
        for (column, field) in self.schema.fields().iter().enumerate() {
            let pad = new_null_array(field.data_type(), 1);
            let unread = new_empty_array(field.data_type());
            let sources: Vec<&dyn Array> = self
                .chunks
                .iter()
                .map(|chunk| {
                    chunk
                        .get()
                        .map_or(unread.as_ref(), |batch| batch.column(column).as_ref())
                })
                .chain([pad.as_ref()])
                .collect();
            let taken = interleave(&sources, &indices).map_err(|error| {
                Error::Internal(format!(
                    "taking {side} rows for join output failed: {error}"
                ))
            })?;
            columns.push(taken);
        }
        Ok(())
    }
}

/// Builds one output batch of a join with `schema` (from [`output_schema`]): output row `i` is
/// left row `left_rows[i]` and right row `right_rows[i]`, where `u32::MAX` pads that side with
/// NULLs. The rows of a side that `how` does not output are ignored (the slice may be empty).
/// Inconsistent arguments are [`Error::Internal`]: they can only come from a bug.
pub fn take_output(
    schema: &SchemaRef,
    how: JoinType,
    left: &RowStore,
    right: &RowStore,
    left_rows: &[u32],
    right_rows: &[u32],
) -> Result<RecordBatch> {
    let sides = [
        (Side::Left, left, left_rows),
        (Side::Right, right, right_rows),
    ];
    let mut num_rows = None;
    let mut columns = Vec::with_capacity(schema.fields().len());
    for (side, store, rows) in sides {
        if !how.outputs_side(side) {
            continue;
        }
        if *num_rows.get_or_insert(rows.len()) != rows.len() {
            return Err(Error::Internal(format!(
                "join output has {} left rows but {} right rows",
                left_rows.len(),
                right_rows.len()
            )));
        }
        store.take(side, rows, &mut columns)?;
    }
    if columns.len() != schema.fields().len() {
        return Err(Error::Internal(format!(
            "join output schema has {} columns but the inputs give {}",
            schema.fields().len(),
            columns.len()
        )));
    }
    let options = RecordBatchOptions::new().with_row_count(Some(num_rows.unwrap_or(0)));
    RecordBatch::try_new_with_options(schema.clone(), columns, &options)
        .map_err(|error| Error::Internal(format!("assembling join output failed: {error}")))
}

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

/// The file end of an [`OutputWriter`]: what appends encoded rows to the file.
enum Sink {
    /// Row groups encoded by [`BatchEncoder`]s are appended as they are.
    Parquet(SerializedFileWriter<BufWriter<WatchedFile>>),
    Ipc(FileWriter<BufWriter<WatchedFile>>),
    /// CSV text, the header written when the file was created.
    Csv(BufWriter<WatchedFile>),
}

/// Output rows made ready for the file by the worker that produced them: Parquet's column
/// chunks encoded and compressed, CSV's text formatted. Encoding is most of the cost of
/// writing (41 % of the CPU of a TPC-H lineitem x orders join written to Parquet), so every
/// worker encodes its own rows and only [`OutputWriter::append`], which copies bytes, holds
/// the shared writer. Arrow IPC batches pass through as they are (arrow's IPC file writer takes
/// no encoded batches), so IPC's encoding and any `--compression` of it still run in turns.
pub struct EncodedBatch(Encoded);

enum Encoded {
    /// One or more row groups, each the chunks of every column.
    RowGroups(Vec<Vec<ArrowColumnChunk>>),
    Csv(Vec<u8>),
    Ipc(RecordBatch),
}

/// Encodes batches for an [`OutputWriter`], on any thread; [`OutputWriter::encoder`] gives one.
pub struct BatchEncoder {
    format: Encoding,
    schema: SchemaRef,
    path: PathBuf,
}

enum Encoding {
    Parquet(ArrowRowGroupWriterFactory),
    Csv,
    Ipc,
}

impl BatchEncoder {
    /// Encodes `batch`, which must have the output's schema: a Parquet batch becomes row
    /// groups of at most [`WRITE_ROW_GROUP_ROWS`] rows.
    pub fn encode(&self, batch: &RecordBatch) -> Result<EncodedBatch> {
        if batch.schema_ref().fields() != self.schema.fields() {
            return Err(Error::Internal(format!(
                "writing {}: batch schema {:?} differs from the output schema {:?}",
                self.path.display(),
                batch.schema_ref().fields(),
                self.schema.fields()
            )));
        }
        let path = &self.path;
        match &self.format {
            Encoding::Parquet(factory) => {
                let mut groups = Vec::new();
                let mut start = 0;
                while start < batch.num_rows() {
                    let rows = WRITE_ROW_GROUP_ROWS.min(batch.num_rows() - start);
                    let group = batch.slice(start, rows);
                    groups.push(
                        encode_row_group(factory, &group)
                            .map_err(|error| parquet_write_error(path, error))?,
                    );
                    start += rows;
                }
                Ok(EncodedBatch(Encoded::RowGroups(groups)))
            }
            Encoding::Csv => {
                let mut writer = arrow::csv::WriterBuilder::new()
                    .with_header(false)
                    .build(Vec::new());
                writer
                    .write(batch)
                    .map_err(|error| arrow_write_error(path, FileFormat::Csv, error))?;
                Ok(EncodedBatch(Encoded::Csv(writer.into_inner())))
            }
            Encoding::Ipc => Ok(EncodedBatch(Encoded::Ipc(compact_views(batch)))),
        }
    }
}

/// `batch` with its string and binary view columns holding only the bytes their rows use.
/// Output rows taken from a view column still point into the input's data buffers, and an IPC
/// writer writes every buffer a column refers to whole: each batch of a join of TPC-H's
/// lineitem (strings as `Utf8View`, as tpchgen-cli and Polars write them) carried all of the
/// input's string bytes, and the file grew past 20 GB for 6 million rows. The Python package
/// compacts its output batches so too.
pub fn compact_views(batch: &RecordBatch) -> RecordBatch {
    if !batch.columns().iter().any(|column| {
        matches!(
            column.data_type(),
            DataType::Utf8View | DataType::BinaryView
        )
    }) {
        return batch.clone();
    }
    let columns = batch
        .columns()
        .iter()
        .map(|column| match column.data_type() {
            DataType::Utf8View => Arc::new(column.as_string_view().gc()) as ArrayRef,
            DataType::BinaryView => Arc::new(column.as_binary_view().gc()) as ArrayRef,
            _ => Arc::clone(column),
        })
        .collect();
    RecordBatch::try_new_with_options(
        batch.schema(),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )
    .expect("the same columns, compacted, fit the same schema")
}

/// One row group of `batch`: every column encoded and compressed by a column writer of
/// `factory`.
fn encode_row_group(
    factory: &ArrowRowGroupWriterFactory,
    batch: &RecordBatch,
) -> std::result::Result<Vec<ArrowColumnChunk>, ParquetError> {
    // The row group's index only matters to encryption, which is not compiled in.
    let mut writers = factory.create_column_writers(0)?;
    let mut leaves = writers.iter_mut();
    for (field, column) in batch.schema_ref().fields().iter().zip(batch.columns()) {
        for leaf in compute_leaves(field, column)? {
            let writer = leaves.next().ok_or_else(|| {
                ParquetError::General("more leaf columns than column writers".into())
            })?;
            writer.write(&leaf)?;
        }
    }
    writers.into_iter().map(|writer| writer.close()).collect()
}

/// Writes a table as Parquet, Arrow IPC file or CSV (with header) to an output path as
/// [`crate::output_file`] says: a regular file atomically (batches go to a temporary file in
/// its directory, which [`finish`](OutputWriter::finish) renames onto it; dropping the writer
/// without finishing removes it, so a failed run never leaves partial output behind), anything
/// else (`/dev/null`, a FIFO, `/dev/stdout`) in place, as a stream.
///
/// Workers that share one writer encode their batches with an [`encoder`](OutputWriter::encoder)
/// each and [`append`](OutputWriter::append) them, so that the encoding runs in parallel.
pub struct OutputWriter {
    sink: Sink,
    encoder: Arc<BatchEncoder>,
    path: PathBuf,
    /// The first append that failed: an encoder is unusable after it (Parquet's says "Previous
    /// row group writer was not closed"), so every later append reports this error instead.
    failed: Option<Error>,
    /// The first error of the file itself: encoders report it in their own words (Parquet's
    /// and IPC's may lose its kind), so it is told from it.
    file_failure: FileFailure,
    /// Declared after `sink`, so that the encoder is dropped before a temporary file is deleted.
    pending: PendingOutput,
}

// The runtime shares one writer among worker threads behind a mutex, and its encoder without.
const _: fn() = || {
    fn assert_send<T: Send>() {}
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send::<OutputWriter>();
    assert_send::<EncodedBatch>();
    assert_send_sync::<BatchEncoder>();
};

impl OutputWriter {
    /// Starts writing `path` in `format`. An unwritable directory or path is [`Error::Io`]
    /// naming it.
    pub fn create(
        path: &Path,
        format: FileFormat,
        compression: OutputCompression,
        schema: SchemaRef,
    ) -> Result<OutputWriter> {
        let (file, pending) = PendingOutput::create(path)?;
        let (file, file_failure) = WatchedFile::new(file);
        let mut file = BufWriter::new(file);
        let (sink, encoding) = match format {
            FileFormat::Parquet => {
                let codec = match compression {
                    OutputCompression::Zstd => Compression::ZSTD(ZstdLevel::default()),
                    OutputCompression::Snappy => Compression::SNAPPY,
                    OutputCompression::Lz4 => Compression::LZ4_RAW,
                    OutputCompression::None => Compression::UNCOMPRESSED,
                };
                // A dictionary pays for a column with few distinct values. With the library's
                // 1 MiB limit a column of mostly distinct values (keys, prices, comments)
                // interned most of every 64 Ki-row group before it fell back to plain
                // encoding: TPC-H lineitem x orders written took 9 % longer and made a 21 %
                // larger file than with 32 KiB, where such columns fall back after a few
                // thousand values (4 Ki 8-byte values) and a column of a thousand short
                // strings (`o_clerk`) keeps its dictionary.
                let properties = WriterProperties::builder()
                    .set_compression(codec)
                    .set_dictionary_page_size_limit(DICTIONARY_PAGE_BYTES)
                    .build();
                // The arrow writer puts the Arrow schema in the file's metadata; its row groups
                // are then made by the workers' encoders, of WRITE_ROW_GROUP_ROWS rows at most
                // (rather than the library's 1 Mi), so that the processes of a cluster, which
                // split a file by row group, each get a share of a file of a few hundred
                // thousand rows.
                let (writer, factory) =
                    ArrowWriter::try_new(file, schema.clone(), Some(properties))
                        .and_then(ArrowWriter::into_serialized_writer)
                        .map_err(|error| parquet_write_error(path, error))?;
                (Sink::Parquet(writer), Encoding::Parquet(factory))
            }
            FileFormat::ArrowIpc => {
                let codec = match compression {
                    OutputCompression::Zstd => Some(IpcCompression::ZSTD),
                    OutputCompression::Lz4 => Some(IpcCompression::LZ4_FRAME),
                    OutputCompression::None => None,
                    OutputCompression::Snappy => {
                        return Err(Error::Internal(
                            "Arrow IPC has no Snappy codec; OutputCompression::for_output \
                             refuses it"
                                .into(),
                        ))
                    }
                };
                let options = IpcWriteOptions::default()
                    .try_with_compression(codec)
                    .map_err(|error| arrow_write_error(path, format, error))?;
                let writer = FileWriter::try_new_with_options(file, &schema, options)
                    .map_err(|error| arrow_write_error(path, format, error))?;
                (Sink::Ipc(writer), Encoding::Ipc)
            }
            FileFormat::Csv => {
                // The header now, so that an output of no rows has it too.
                let mut header = arrow::csv::WriterBuilder::new()
                    .with_header(true)
                    .build(Vec::new());
                header
                    .write(&RecordBatch::new_empty(schema.clone()))
                    .map_err(|error| arrow_write_error(path, format, error))?;
                file.write_all(&header.into_inner())
                    .map_err(|error| file_failure.explain(path, write_error(path, &error)))?;
                (Sink::Csv(file), Encoding::Csv)
            }
        };
        Ok(OutputWriter {
            sink,
            encoder: Arc::new(BatchEncoder {
                format: encoding,
                schema,
                path: path.to_path_buf(),
            }),
            path: path.to_path_buf(),
            failed: None,
            file_failure,
            pending,
        })
    }

    /// What encodes batches for this writer, on any thread.
    pub fn encoder(&self) -> Arc<BatchEncoder> {
        Arc::clone(&self.encoder)
    }

    /// Appends `batch`, which must have the writer's schema: [`encoder`](Self::encoder)'s
    /// encoding and [`append`](Self::append) in one.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        // A row group at a time, so that a whole table is never held encoded.
        let mut start = 0;
        loop {
            let rows = WRITE_ROW_GROUP_ROWS.min(batch.num_rows() - start);
            let encoded = self.encoder.encode(&batch.slice(start, rows))?;
            self.append(encoded)?;
            start += rows;
            if start >= batch.num_rows() {
                return Ok(());
            }
        }
    }

    /// Appends rows that this writer's [`encoder`](Self::encoder) encoded.
    pub fn append(&mut self, encoded: EncodedBatch) -> Result<()> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let path = &self.path;
        let written = match (&mut self.sink, encoded.0) {
            (Sink::Parquet(writer), Encoded::RowGroups(groups)) => groups
                .into_iter()
                .try_for_each(|chunks| {
                    let mut group = writer.next_row_group()?;
                    for chunk in chunks {
                        chunk.append_to_row_group(&mut group)?;
                    }
                    group.close().map(drop)
                })
                .map_err(|error| parquet_write_error(path, error)),
            (Sink::Ipc(writer), Encoded::Ipc(batch)) => writer
                .write(&batch)
                .map_err(|error| arrow_write_error(path, FileFormat::ArrowIpc, error)),
            (Sink::Csv(file), Encoded::Csv(text)) => file
                .write_all(&text)
                .map_err(|error| write_error(path, &error)),
            _ => Err(Error::Internal(format!(
                "writing {}: rows encoded for another format",
                path.display()
            ))),
        };
        let written = written.map_err(|error| self.file_failure.explain(path, error));
        if let Err(error) = &written {
            self.failed = Some(error.clone());
        }
        written
    }

    /// Completes the file and puts it in place (renamed onto the target path, replacing any
    /// file there, or, streamed, just flushed).
    pub fn finish(self) -> Result<()> {
        let OutputWriter {
            sink,
            encoder: _,
            path,
            failed,
            file_failure,
            pending,
        } = self;
        if let Some(error) = failed {
            return Err(error);
        }
        let encoded = (|| {
            let buffered = match sink {
                Sink::Parquet(writer) => writer
                    .into_inner()
                    .map_err(|error| parquet_write_error(&path, error))?,
                Sink::Ipc(writer) => writer
                    .into_inner()
                    .map_err(|error| arrow_write_error(&path, FileFormat::ArrowIpc, error))?,
                Sink::Csv(file) => file,
            };
            buffered
                .into_inner()
                .map_err(|error| write_error(&path, error.error()))
        })();
        let file = encoded.map_err(|error| file_failure.explain(&path, error))?;
        pending.complete(file.into_inner())
    }
}

fn arrow_write_error(path: &Path, format: FileFormat, error: ArrowError) -> Error {
    match error {
        ArrowError::IoError(_, io_error) => write_error(path, &io_error),
        // The CSV writer rejects types it cannot represent (lists, structs, ...).
        ArrowError::CsvError(message) if format == FileFormat::Csv => Error::Input(format!(
            "cannot write {} as CSV: {message}; write Parquet or Arrow instead",
            path.display()
        )),
        error => Error::Internal(format!(
            "writing {} as {format} failed: {error}",
            path.display()
        )),
    }
}

fn parquet_write_error(path: &Path, error: ParquetError) -> Error {
    if let ParquetError::External(inner) = &error {
        if let Some(io_error) = inner.downcast_ref::<io::Error>() {
            return write_error(path, io_error);
        }
    }
    Error::Internal(format!(
        "writing {} as parquet failed: {error}",
        path.display()
    ))
}

/// Writes a whole table to `path` in `format`, atomically (see [`OutputWriter`]), Parquet with
/// snappy as `tpchgen-cli` and DuckDB write it: `gen`'s inputs. (Parquet pages carry no
/// checksum; a page of `gen`'s overwritten in tests/cli.rs fails to decode as snappy, where as
/// zstd it decoded to other values.)
pub fn write_table(path: &Path, format: FileFormat, batch: &RecordBatch) -> Result<()> {
    let compression = match format {
        FileFormat::Parquet => OutputCompression::Snappy,
        FileFormat::ArrowIpc | FileFormat::Csv => OutputCompression::None,
    };
    let mut writer = OutputWriter::create(path, format, compression, batch.schema())?;
    writer.write(batch)?;
    writer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{BooleanArray, Float64Array, Int16Array, Int32Array, UInt64Array};
    use skewjoin_planner::skew_check::KeyTally;
    use skewjoin_planner::work_costs::WorkCosts;
    use tempfile::TempDir;

    const ALL_FORMATS: [(FileFormat, &str); 3] = [
        (FileFormat::Parquet, "parquet"),
        (FileFormat::ArrowIpc, "arrow"),
        (FileFormat::Csv, "csv"),
    ];

    /// A small table with the column types every format round-trips: Int64, Utf8, Float64, with
    /// NULLs. Every field is nullable because CSV inference cannot know better.
    fn sample() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
            Field::new("score", DataType::Float64, true),
            Field::new("qty", DataType::Int64, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![1, 2, 3, -4])),
                Arc::new(StringArray::from(vec![
                    Some("ann"),
                    None,
                    Some("c, with comma"),
                    Some("dé \"quoted\""),
                ])),
                Arc::new(Float64Array::from(vec![
                    Some(1.5),
                    Some(2.0),
                    None,
                    Some(-1e-3),
                ])),
                Arc::new(Int64Array::from(vec![Some(10), None, Some(0), Some(7)])),
            ],
        )
        .unwrap()
    }

    fn write_bytes(dir: &TempDir, name: &str, bytes: &[u8]) -> PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    fn input_message(result: Result<RecordBatch>) -> String {
        match result {
            Err(Error::Input(message)) => message,
            other => panic!("expected an input error, got {other:?}"),
        }
    }

    fn strings(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn formats_parse_and_detect() {
        assert_eq!(FileFormat::parse("PARQUET").unwrap(), FileFormat::Parquet);
        assert_eq!(FileFormat::parse("feather").unwrap(), FileFormat::ArrowIpc);
        assert_eq!(FileFormat::parse("Csv").unwrap(), FileFormat::Csv);
        assert!(matches!(FileFormat::parse("xlsx"), Err(Error::Usage(_))));

        let detect = |name: &str| FileFormat::detect(Path::new(name), None);
        assert_eq!(detect("a/b.PQ").unwrap(), FileFormat::Parquet);
        assert_eq!(detect("b.ipc").unwrap(), FileFormat::ArrowIpc);
        assert_eq!(detect("b.csv").unwrap(), FileFormat::Csv);
        let explicit = FileFormat::detect(Path::new("b.txt"), Some(FileFormat::Csv));
        assert_eq!(explicit.unwrap(), FileFormat::Csv);
        match detect("data.txt") {
            Err(Error::Usage(message)) => {
                assert!(message.contains("data.txt"), "{message}");
                assert!(message.contains("--format"), "{message}");
            }
            other => panic!("expected a usage error, got {other:?}"),
        }
    }

    #[test]
    fn round_trip_through_every_format() {
        let dir = TempDir::new().unwrap();
        let table = sample();
        let expected_hashes = row_hashes(&table);
        for (format, extension) in ALL_FORMATS {
            let path = dir.path().join(format!("table.{extension}"));
            write_table(&path, format, &table).unwrap();
            let back = read_table(&path, FileFormat::detect(&path, None).unwrap()).unwrap();
            assert_eq!(back.schema().fields(), table.schema().fields(), "{format}");
            assert_eq!(back.columns(), table.columns(), "{format}");
            assert_eq!(row_hashes(&back), expected_hashes, "{format}");
        }
        let mut distinct = expected_hashes.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(
            distinct.len(),
            table.num_rows(),
            "different rows hash apart"
        );
    }

    /// Every codec a format has round-trips, and is the codec the file says it was written
    /// with: Parquet's column chunks name it; an Arrow IPC file compressed is smaller than one
    /// that is not, for a column that repeats.
    #[test]
    fn view_columns_written_to_ipc_hold_only_their_rows_bytes() {
        let dir = TempDir::new().unwrap();
        // 100,000 strings of 40 bytes (past the 12 a view holds inline): 4 MB of data.
        let strings: Vec<String> = (0..100_000).map(|row| format!("{row:040}")).collect();
        let column: ArrayRef = Arc::new(StringViewArray::from_iter_values(&strings));
        let table = RecordBatch::try_from_iter([("s", column)]).unwrap();
        // Ten rows taken, as a join's output takes them: views into the 4 MB buffer.
        let rows = UInt32Array::from_iter_values((0..10).map(|row| row * 9_999));
        let taken = RecordBatch::try_new(
            table.schema(),
            vec![take(table.column(0).as_ref(), &rows, None).unwrap()],
        )
        .unwrap();
        let path = dir.path().join("out.arrow");
        let compression = OutputCompression::for_output(None, FileFormat::ArrowIpc).unwrap();
        let mut writer =
            OutputWriter::create(&path, FileFormat::ArrowIpc, compression, table.schema()).unwrap();
        writer.write(&taken).unwrap();
        writer.finish().unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() < 16 * 1024);
        let back = read_table(&path, FileFormat::ArrowIpc).unwrap();
        assert_eq!(back.column(0).as_string_view().value(3), strings[3 * 9_999]);
        assert_eq!(back.num_rows(), 10);
    }

    #[test]
    fn every_output_codec_round_trips() {
        let dir = TempDir::new().unwrap();
        let repeated: Vec<i64> = (0..20_000).map(|row| row % 7).collect();
        let table = RecordBatch::try_from_iter([(
            "value",
            Arc::new(Int64Array::from(repeated)) as ArrayRef,
        )])
        .unwrap();
        let write = |format: FileFormat, codec: &str| {
            let compression = OutputCompression::for_output(Some(codec), format).unwrap();
            let path = dir.path().join(format!("{codec}.{format}"));
            let mut writer =
                OutputWriter::create(&path, format, compression, table.schema()).unwrap();
            writer.write(&table).unwrap();
            writer.finish().unwrap();
            let back = read_table(&path, format).unwrap();
            assert_eq!(back.columns(), table.columns(), "{format} {codec}");
            path
        };
        for (codec, expected) in [
            ("zstd", "ZSTD"),
            ("snappy", "SNAPPY"),
            ("lz4", "LZ4_RAW"),
            ("none", "UNCOMPRESSED"),
        ] {
            let path = write(FileFormat::Parquet, codec);
            let reader =
                parquet::file::reader::SerializedFileReader::new(File::open(&path).unwrap())
                    .unwrap();
            use parquet::file::reader::FileReader as _;
            let written = reader.metadata().row_group(0).column(0).compression();
            assert!(
                written.to_string().starts_with(expected),
                "{codec}: {written}"
            );
        }
        let size = |path: PathBuf| std::fs::metadata(path).unwrap().len();
        let plain = size(write(FileFormat::ArrowIpc, "none"));
        for codec in ["zstd", "lz4"] {
            let compressed = size(write(FileFormat::ArrowIpc, codec));
            assert!(
                compressed * 4 < plain,
                "{codec}: {compressed} of {plain} bytes"
            );
        }
    }

    /// Nothing asked, Parquet is zstd and the others plain; a codec a format has no place for,
    /// or no codec at all, is a usage error that says what to give instead.
    #[test]
    fn compression_defaults_and_refusals() {
        let default = |format| OutputCompression::for_output(None, format).unwrap();
        assert_eq!(default(FileFormat::Parquet), OutputCompression::Zstd);
        assert_eq!(default(FileFormat::ArrowIpc), OutputCompression::None);
        assert_eq!(default(FileFormat::Csv), OutputCompression::None);
        assert_eq!(
            OutputCompression::for_output(Some("NONE"), FileFormat::Csv).unwrap(),
            OutputCompression::None
        );
        for (codec, format, says) in [
            ("snappy", FileFormat::ArrowIpc, "use zstd, lz4 or none"),
            (
                "zstd",
                FileFormat::Csv,
                "CSV output is written uncompressed",
            ),
            ("gzip", FileFormat::Parquet, "zstd, snappy, lz4, none"),
        ] {
            match OutputCompression::for_output(Some(codec), format) {
                Err(Error::Usage(message)) => {
                    assert!(message.contains(says), "{codec} {format}: {message}")
                }
                other => panic!("{codec} {format}: expected a usage error, got {other:?}"),
            }
        }
    }

    /// A decimal hashes as its value and scale, whatever its width: the same numbers at 32,
    /// 64 and 128 bits hash alike, another value, another scale or a NULL apart.
    #[test]
    fn decimals_hash_by_value_and_scale_at_every_width() {
        use arrow::array::{Decimal128Array, Decimal32Array, Decimal64Array};
        let hashes =
            |array: ArrayRef| row_hashes(&RecordBatch::try_from_iter([("d", array)]).unwrap());
        let values = [Some(150), Some(-1), Some(0), None];
        let narrow = hashes(Arc::new(
            Decimal32Array::from(values.to_vec())
                .with_precision_and_scale(9, 2)
                .unwrap(),
        ));
        let middle = hashes(Arc::new(
            Decimal64Array::from(values.map(|v| v.map(i64::from)).to_vec())
                .with_precision_and_scale(15, 2)
                .unwrap(),
        ));
        let wide = hashes(Arc::new(
            Decimal128Array::from(values.map(|v| v.map(i128::from)).to_vec())
                .with_precision_and_scale(38, 2)
                .unwrap(),
        ));
        assert_eq!(narrow, middle);
        assert_eq!(narrow, wide);
        let mut distinct = wide.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 4, "150, -1, 0 and NULL hash apart");
        let rescaled = hashes(Arc::new(
            Decimal128Array::from(values.map(|v| v.map(i128::from)).to_vec())
                .with_precision_and_scale(38, 3)
                .unwrap(),
        ));
        assert_ne!(rescaled[0], wide[0], "1.50 and 0.150 differ");
    }

    #[test]
    fn arrow_ipc_streams_are_read_too() {
        let dir = TempDir::new().unwrap();
        let path = dir.path().join("stream.arrows");
        let table = sample();
        let mut writer = arrow::ipc::writer::StreamWriter::try_new(
            File::create(&path).unwrap(),
            &table.schema(),
        )
        .unwrap();
        writer.write(&table).unwrap();
        writer.write(&table).unwrap();
        writer.finish().unwrap();
        let back = read_table(&path, FileFormat::ArrowIpc).unwrap();
        assert_eq!(back.num_rows(), 2 * table.num_rows());
        assert_eq!(back.slice(4, 4).columns(), table.columns());
    }

    #[test]
    fn malformed_csv_names_the_line_and_the_counts() {
        let dir = TempDir::new().unwrap();
        let path = write_bytes(&dir, "left.csv", b"a,b,c\n1,2,3\n\"x\ny\",5,6\n7,8,9,10\n");
        let message = input_message(read_table(&path, FileFormat::Csv));
        // The quoted field spans lines 3 and 4, so the bad record starts on line 5.
        assert!(message.contains("left.csv: line 5:"), "{message}");
        assert!(message.contains("expected 3 fields, found 4"), "{message}");
    }

    #[test]
    fn empty_and_missing_files_are_input_errors() {
        let dir = TempDir::new().unwrap();
        for (format, extension) in ALL_FORMATS {
            let path = write_bytes(&dir, &format!("empty.{extension}"), b"");
            let message = input_message(read_table(&path, format));
            assert!(message.contains("is empty"), "{message}");
            assert!(message.contains(&format!("empty.{extension}")), "{message}");
        }
        let missing = dir.path().join("nope.csv");
        let message = input_message(read_table(&missing, FileFormat::Csv));
        assert!(message.contains("nope.csv: no such file"), "{message}");
    }

    #[test]
    fn header_only_csv_is_a_table_of_zero_rows() {
        let dir = TempDir::new().unwrap();
        let path = write_bytes(&dir, "h.csv", b"id,name\n");
        let batch = read_table(&path, FileFormat::Csv).unwrap();
        assert_eq!(batch.num_rows(), 0);
        let names: Vec<&str> = batch
            .schema_ref()
            .fields()
            .iter()
            .map(|field| field.name().as_str())
            .collect();
        assert_eq!(names, ["id", "name"]);
        // Its all-NULL key column joins a key of either kind.
        let int_schema = Schema::new(vec![Field::new("id", DataType::Int64, false)]);
        let key = strings(&["id"]);
        check_key_compat(
            (&path, batch.schema_ref(), &key),
            (Path::new("r.parquet"), &int_schema, &key),
        )
        .unwrap();
    }

    #[test]
    fn a_line_without_header_is_rejected() {
        let dir = TempDir::new().unwrap();
        let path = write_bytes(&dir, "blank.csv", b"\n\n");
        let message = input_message(read_table(&path, FileFormat::Csv));
        assert!(message.contains("no header row"), "{message}");
    }

    #[test]
    fn truncated_files_are_input_errors_not_panics() {
        let dir = TempDir::new().unwrap();
        for (format, extension) in [
            (FileFormat::Parquet, "parquet"),
            (FileFormat::ArrowIpc, "arrow"),
        ] {
            let path = dir.path().join(format!("cut.{extension}"));
            write_table(&path, format, &sample()).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
            let message = input_message(read_table(&path, format));
            assert!(message.contains(&format!("cut.{extension}")), "{message}");
            assert!(message.contains("truncated or corrupt"), "{message}");
        }
        // Bytes that are not the format at all.
        let path = write_bytes(&dir, "text.parquet", b"id,name\n1,a\n");
        input_message(read_table(&path, FileFormat::Parquet));
        let path = write_bytes(&dir, "text.arrow", b"id,name\n1,a\n");
        input_message(read_table(&path, FileFormat::ArrowIpc));
    }

    #[test]
    fn invalid_utf8_in_csv_names_the_line() {
        let dir = TempDir::new().unwrap();
        let path = write_bytes(&dir, "latin.csv", b"id,name\n1,ok\n2,caf\xe9\n");
        let message = input_message(read_table(&path, FileFormat::Csv));
        assert!(message.contains("latin.csv: line 3:"), "{message}");
        assert!(message.contains("UTF-8"), "{message}");
    }

    /// CSV-like bytes: a header and rows of a fixed field count whose fields are numbers, words,
    /// empty, quoted (with separators and line ends inside) or not UTF-8, then a few bytes
    /// overwritten with anything, so that both well-formed and broken files come out.
    fn csv_like_bytes() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let field = prop_oneof![
            4 => (-50i64..50).prop_map(|n| n.to_string().into_bytes()),
            2 => "[a-c]{0,3}".prop_map(String::into_bytes),
            1 => Just(b"\"x,\ny\"".to_vec()),
            1 => Just(b"1.5".to_vec()),
            1 => Just(vec![b'c', 0xe9]),
        ];
        let table = (1usize..4).prop_flat_map(move |columns| {
            proptest::collection::vec(proptest::collection::vec(field.clone(), columns), 0..8)
        });
        let corruption =
            proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3);
        (table, corruption, any::<bool>()).prop_map(|(rows, corruption, crlf)| {
            let mut bytes = Vec::new();
            let columns = rows.first().map_or(1, Vec::len);
            let header: Vec<String> = (0..columns).map(|c| format!("c{c}")).collect();
            bytes.extend_from_slice(header.join(",").as_bytes());
            for row in rows {
                bytes.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
                bytes.extend_from_slice(&row.join(&b',')[..]);
            }
            for (at, byte) in corruption {
                if !bytes.is_empty() {
                    let at = at.index(bytes.len());
                    bytes[at] = byte;
                }
            }
            bytes
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 2000, ..Default::default() })]
        /// The CSV path never panics: any bytes are read as a table or rejected as bad input that
        /// names the file; a table read is joinable by any of its columns or rejected likewise.
        #[test]
        fn csv_reading_never_panics(bytes in csv_like_bytes()) {
            let dir = TempDir::new().unwrap();
            let path = write_bytes(&dir, "fuzz.csv", &bytes);
            match read_table(&path, FileFormat::Csv) {
                Ok(batch) => {
                    let _ = row_hashes(&batch);
                    let columns: Vec<String> =
                        batch.schema().fields().iter().map(|f| f.name().clone()).collect();
                    for column in &columns {
                        if let Err(error) = extract_keys(&batch, std::slice::from_ref(column), &path) {
                            let message = error.to_string();
                            proptest::prop_assert!(message.contains("fuzz.csv"), "{}", message);
                        }
                    }
                }
                Err(Error::Input(message)) => {
                    proptest::prop_assert!(message.contains("fuzz.csv"), "{}", message);
                }
                Err(other) => proptest::prop_assert!(false, "not an input error: {:?}", other),
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 500, ..Default::default() })]
        /// Streaming a CSV file gives exactly the table that reading it whole gives, in chunks;
        /// a file that cannot be read whole fails when opened or while streamed, never panics.
        #[test]
        fn streamed_csv_is_the_whole_table(bytes in csv_like_bytes()) {
            use crate::batches::{InputFile, CHUNK_ROWS};
            let dir = TempDir::new().unwrap();
            let path = write_bytes(&dir, "fuzz.csv", &bytes);
            let whole = read_table(&path, FileFormat::Csv);
            let key = whole.as_ref().ok().and_then(|batch| {
                batch.schema().fields().iter().map(|f| f.name().clone()).find(|name| {
                    extract_keys(batch, std::slice::from_ref(name), &path).is_ok()
                })
            });
            let streamed = InputFile::open(&path, FileFormat::Csv, &[key.clone().unwrap_or_else(|| "c0".into())])
                .and_then(|input| {
                    let batches = input.batches(false)?.collect::<Result<Vec<_>>>()?;
                    Ok((input, batches))
                });
            match (whole, key, streamed) {
                (Ok(batch), Some(_), Ok((input, batches))) => {
                    proptest::prop_assert_eq!(input.rows, batch.num_rows() as u64);
                    proptest::prop_assert!(batches.iter().rev().skip(1).all(|b| b.num_rows() == CHUNK_ROWS));
                    let joined = concat(&path, &input.schema, &batches).unwrap();
                    proptest::prop_assert_eq!(joined, batch);
                }
                (Ok(_), Some(_), Err(error)) => {
                    proptest::prop_assert!(false, "read whole but not streamed: {}", error);
                }
                (_, _, Err(Error::Input(message))) => {
                    proptest::prop_assert!(message.contains("fuzz.csv"), "{}", message);
                }
                (Err(_), _, Ok(_)) => proptest::prop_assert!(false, "streamed a file that cannot be read"),
                (_, _, Err(other)) => proptest::prop_assert!(false, "not an input error: {:?}", other),
                (Ok(_), None, Ok(_)) => {}
            }
        }
    }

    #[test]
    fn key_type_mismatch_names_both_columns() {
        let left = Schema::new(vec![Field::new("id", DataType::Int64, false)]);
        let right = Schema::new(vec![Field::new("uid", DataType::Utf8, true)]);
        let result = check_key_compat(
            (Path::new("left.parquet"), &left, &strings(&["id"])),
            (Path::new("right.csv"), &right, &strings(&["uid"])),
        );
        match result {
            Err(Error::Input(message)) => {
                assert!(
                    message.contains("left.parquet column `id` is integer (Int64)"),
                    "{message}"
                );
                assert!(
                    message.contains("right.csv column `uid` is string (Utf8)"),
                    "{message}"
                );
            }
            other => panic!("expected an input error, got {other:?}"),
        }
        let counts = check_key_compat(
            (Path::new("l.csv"), &left, &strings(&["id"])),
            (Path::new("r.csv"), &right, &strings(&["uid", "uid"])),
        );
        assert!(matches!(counts, Err(Error::Usage(_))), "{counts:?}");
    }

    #[test]
    fn bad_key_columns_are_explained() {
        let schema = Schema::new(vec![
            Field::new("Id", DataType::Int64, false),
            Field::new("price", DataType::Duration(TimeUnit::Second), false),
        ]);
        let path = Path::new("t.parquet");
        match key_kinds(&schema, &strings(&["id"]), path) {
            Err(Error::Input(message)) => {
                assert!(
                    message.contains("t.parquet has no column `id`"),
                    "{message}"
                );
                assert!(message.contains("did you mean `Id`"), "{message}");
                assert!(message.contains("`Id`, `price`"), "{message}");
            }
            other => panic!("expected an input error, got {other:?}"),
        }
        match key_kinds(&schema, &strings(&["price"]), path) {
            Err(Error::Input(message)) => {
                assert!(message.contains("`price`"), "{message}");
                assert!(message.contains("Duration"), "{message}");
                assert!(message.contains("cast"), "{message}");
            }
            other => panic!("expected an input error, got {other:?}"),
        }
        assert_eq!(
            key_kinds(&schema, &strings(&["Id"]), path).unwrap(),
            [KeyKind::Int]
        );
    }

    #[test]
    fn a_missing_decoder_feature_is_not_called_corruption() {
        let path = Path::new("t.parquet");
        let missing = ParquetError::General("Disabled feature at compile time: zstd".into());
        let message = parquet_read_error(path, missing).to_string();
        assert!(
            message.contains("uses a feature skewjoin cannot read"),
            "{message}"
        );
        assert!(message.contains("zstd"), "{message}");
        assert!(!message.contains("may be truncated"), "{message}");
        let bad = ParquetError::General("Invalid Parquet file. Corrupt footer".into());
        let message = parquet_read_error(path, bad).to_string();
        assert!(message.contains("may be truncated or corrupt"), "{message}");
    }

    #[test]
    fn equal_decimals_at_any_scale_are_one_text() {
        assert_eq!(canonical_decimal("150", 2), "15e-1");
        assert_eq!(canonical_decimal("1500", 3), "15e-1");
        assert_eq!(canonical_decimal("-1", 2), "-1e-2");
        assert_eq!(canonical_decimal("0", 5), "0e0");
        assert_eq!(canonical_decimal("12", -2), "12e2");
        assert_eq!(canonical_decimal("1200", 0), "12e2");
        assert_ne!(canonical_decimal("15", 1), canonical_decimal("15", 0));
    }

    #[test]
    fn the_csv_delimiter_is_the_commonest_in_the_header() {
        let delimiter = |head: &str| csv_syntax(head.as_bytes()).delimiter;
        assert_eq!(delimiter("a,b,c\n1;2;3;4;5\n"), b',');
        assert_eq!(delimiter("a\tb\tc\n"), b'\t');
        assert_eq!(delimiter("a;b,c;d\n"), b';');
        assert_eq!(delimiter("\"a;b\",c\n"), b',');
        assert_eq!(delimiter("a|b\n"), b'|');
        assert_eq!(delimiter("a;b,c\n"), b',', "a tie is a comma");
        assert_eq!(delimiter("only\n"), b',');
        assert_eq!(parse_csv_byte("tab"), Ok(b'\t'));
        assert_eq!(parse_csv_byte(";"), Ok(b';'));
        assert!(parse_csv_byte(";;").is_err());
        assert!(parse_csv_byte("é").is_err());
    }

    #[test]
    fn int32_and_int64_keys_are_compatible_and_equal() {
        let narrow = RecordBatch::try_from_iter([(
            "k",
            Arc::new(Int32Array::from(vec![Some(5), None, Some(-2)])) as ArrayRef,
        )])
        .unwrap();
        let wide = RecordBatch::try_from_iter([(
            "k",
            Arc::new(Int64Array::from(vec![Some(5), None, Some(-2)])) as ArrayRef,
        )])
        .unwrap();
        let key = strings(&["k"]);
        check_key_compat(
            (Path::new("a.arrow"), narrow.schema_ref(), &key),
            (Path::new("b.arrow"), wide.schema_ref(), &key),
        )
        .unwrap();
        let narrow_keys = extract_keys(&narrow, &key, Path::new("a.arrow")).unwrap();
        let wide_keys = extract_keys(&wide, &key, Path::new("b.arrow")).unwrap();
        assert_eq!(narrow_keys, [Key::Int(5), Key::Null, Key::Int(-2)]);
        assert_eq!(narrow_keys, wide_keys);
    }

    #[test]
    fn composite_keys_with_a_null_part_are_null() {
        let batch = RecordBatch::try_from_iter([
            (
                "a",
                Arc::new(Int64Array::from(vec![Some(1), None, Some(3)])) as ArrayRef,
            ),
            (
                "b",
                Arc::new(StringArray::from(vec![Some("x"), Some("y"), None])) as ArrayRef,
            ),
        ])
        .unwrap();
        let keys = extract_keys(&batch, &strings(&["a", "b"]), Path::new("t.csv")).unwrap();
        assert_eq!(
            keys,
            [
                Key::composite(vec![Key::Int(1), Key::str("x")]),
                Key::Null,
                Key::Null,
            ]
        );
        let single = extract_keys(&batch, &strings(&["b"]), Path::new("t.csv")).unwrap();
        assert_eq!(single, [Key::str("x"), Key::str("y"), Key::Null]);
    }

    /// Two integer key columns make the same keys whatever their widths, held inline where
    /// both values fit in 32 bits.
    #[test]
    fn two_integer_key_columns_make_the_same_keys_at_any_width() {
        let narrow = RecordBatch::try_from_iter([
            (
                "a",
                Arc::new(Int32Array::from(vec![Some(1), Some(-7), None])) as ArrayRef,
            ),
            (
                "b",
                Arc::new(Int16Array::from(vec![Some(2), Some(3), Some(4)])) as ArrayRef,
            ),
        ])
        .unwrap();
        let wide = RecordBatch::try_from_iter([
            (
                "a",
                Arc::new(Int64Array::from(vec![
                    Some(1),
                    Some(-7),
                    None,
                    Some(1 << 40),
                ])) as ArrayRef,
            ),
            (
                "b",
                Arc::new(Int64Array::from(vec![Some(2), Some(3), Some(4), Some(2)])) as ArrayRef,
            ),
        ])
        .unwrap();
        let columns = strings(&["a", "b"]);
        let narrow = extract_keys(&narrow, &columns, Path::new("n.parquet")).unwrap();
        let wide = extract_keys(&wide, &columns, Path::new("w.csv")).unwrap();
        assert_eq!(narrow, [Key::IntPair(1, 2), Key::IntPair(-7, 3), Key::Null]);
        assert_eq!(wide[..3], narrow[..]);
        assert_eq!(
            wide[3],
            Key::composite(vec![Key::Int(1 << 40), Key::Int(2)])
        );
        assert!(matches!(wide[3], Key::Composite(_)));
    }

    /// A batch with every key shape the fast paths must agree on, and the key columns of each:
    /// nullable Int64, Int32 (normalised to Int64), strings and a composite. Key 3 (`"k3"`) is
    /// on half of the rows; a NULL on every tenth of the nullable columns.
    fn key_shapes() -> (RecordBatch, [Vec<String>; 4]) {
        let ints: Vec<Option<i64>> = (0..400i64)
            .map(|i| match i {
                _ if i % 10 == 0 => None,
                _ if i % 2 == 0 => Some(3),
                _ => Some(i),
            })
            .collect();
        let dense: Vec<i32> = (0..400).map(|i| if i % 2 == 0 { 3 } else { i }).collect();
        let text: Vec<Option<String>> = ints
            .iter()
            .map(|key| key.map(|key| format!("k{key}")))
            .collect();
        let batch = RecordBatch::try_from_iter([
            ("nullable", Arc::new(Int64Array::from(ints)) as ArrayRef),
            ("narrow", Arc::new(Int32Array::from(dense)) as ArrayRef),
            ("text", Arc::new(StringArray::from(text)) as ArrayRef),
        ])
        .unwrap();
        let columns = [
            strings(&["nullable"]),
            strings(&["narrow"]),
            strings(&["text"]),
            strings(&["narrow", "text"]),
        ];
        (batch, columns)
    }

    /// The integer fast path counts what counting each row's [`Key`] counts: the same hot key,
    /// share and loads, NULLs included in the rows, for every key shape.
    #[test]
    fn tallied_keys_find_the_skew_that_extracted_keys_find() {
        let (batch, shapes) = key_shapes();
        let path = Path::new("t.parquet");
        for columns in shapes {
            let mut fast = KeyTally::with_room_for(400);
            let mut by_key = KeyTally::default();
            for side in [Side::Left, Side::Right] {
                tally_keys(&batch, &columns, path, side, &mut fast).unwrap();
                for key in extract_keys(&batch, &columns, path).unwrap() {
                    by_key.add(side, &key);
                }
            }
            let found = fast.skew(4, 2, WorkCosts::THREADS);
            assert!(found.is_some(), "{columns:?}: key 3 is hot");
            assert_eq!(found, by_key.skew(4, 2, WorkCosts::THREADS), "{columns:?}");
        }
    }

    /// The keys given one at a time are the keys collected, for every key shape.
    #[test]
    fn keys_given_one_at_a_time_are_the_keys_extracted() {
        let (batch, shapes) = key_shapes();
        let path = Path::new("t.parquet");
        for columns in shapes {
            let mut given = Vec::new();
            for_each_key(&batch, &columns, path, |key| given.push(key)).unwrap();
            let extracted = extract_keys(&batch, &columns, path).unwrap();
            assert_eq!(given, extracted, "{columns:?}");
        }
    }

    #[test]
    fn unsigned_keys_above_i64_max_are_rejected_when_met() {
        let fits = RecordBatch::try_from_iter([(
            "k",
            Arc::new(UInt64Array::from(vec![7, i64::MAX as u64])) as ArrayRef,
        )])
        .unwrap();
        let keys = extract_keys(&fits, &strings(&["k"]), Path::new("u.parquet")).unwrap();
        assert_eq!(keys, [Key::Int(7), Key::Int(i64::MAX)]);

        let too_big = RecordBatch::try_from_iter([(
            "k",
            Arc::new(UInt64Array::from(vec![7, u64::MAX])) as ArrayRef,
        )])
        .unwrap();
        match extract_keys(&too_big, &strings(&["k"]), Path::new("u.parquet")) {
            Err(Error::Input(message)) => {
                assert!(message.contains("u.parquet column `k` row 2"), "{message}");
                assert!(message.contains(&u64::MAX.to_string()), "{message}");
            }
            other => panic!("expected an input error, got {other:?}"),
        }
    }

    #[test]
    fn row_hashes_are_canonical_across_types() {
        let hash_of =
            |column: ArrayRef| row_hashes(&RecordBatch::try_from_iter([("c", column)]).unwrap());
        let ints = hash_of(Arc::new(Int64Array::from(vec![Some(0), Some(1), None])));
        assert_eq!(
            ints,
            hash_of(Arc::new(Int32Array::from(vec![Some(0), Some(1), None])))
        );
        assert_eq!(
            ints[..2],
            hash_of(Arc::new(BooleanArray::from(vec![false, true])))[..]
        );
        assert_ne!(ints[0], ints[2], "NULL is not 0");

        let floats = hash_of(Arc::new(Float64Array::from(vec![
            0.0,
            -0.0,
            f64::NAN,
            -f64::NAN,
            1.0,
        ])));
        assert_eq!(floats[0], floats[1]);
        assert_eq!(floats[2], floats[3]);
        assert_ne!(floats[0], floats[4]);

        let text = hash_of(Arc::new(StringArray::from(vec!["a", "b"])));
        assert_eq!(
            text,
            hash_of(Arc::new(StringViewArray::from(vec!["a", "b"])))
        );
        assert_ne!(text[0], text[1]);
    }

    #[test]
    fn output_schema_renames_collisions_and_drops_unoutput_sides() {
        let left = Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, false),
        ]);
        let right = Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("id_right", DataType::Utf8, false),
            Field::new("name", DataType::Utf8, false),
        ]);
        let names = |schema: &SchemaRef| -> Vec<String> {
            schema
                .fields()
                .iter()
                .map(|field| field.name().clone())
                .collect()
        };

        let inner = output_schema(&left, &right, JoinType::Inner);
        assert_eq!(
            names(&inner),
            ["id", "name", "id_right2", "id_right", "name_right"]
        );
        assert!(inner.fields().iter().all(|field| !field.is_nullable()));

        let left_join = output_schema(&left, &right, JoinType::Left);
        let nullable: Vec<bool> = left_join.fields().iter().map(|f| f.is_nullable()).collect();
        assert_eq!(nullable, [false, false, true, true, true]);

        let semi = output_schema(&left, &right, JoinType::LeftSemi);
        assert_eq!(names(&semi), ["id", "name"]);
        let anti = output_schema(&left, &right, JoinType::RightAnti);
        assert_eq!(names(&anti), ["id", "id_right", "name"]);
    }

    #[test]
    fn take_output_pads_with_nulls() {
        let left = RecordBatch::try_from_iter([
            ("id", Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef),
            (
                "l",
                Arc::new(StringArray::from(vec!["a", "b", "c"])) as ArrayRef,
            ),
        ])
        .unwrap();
        let right = RecordBatch::try_from_iter([
            ("id", Arc::new(Int64Array::from(vec![3, 1])) as ArrayRef),
            ("r", Arc::new(StringArray::from(vec!["x", "y"])) as ArrayRef),
        ])
        .unwrap();
        let schema = output_schema(left.schema_ref(), right.schema_ref(), JoinType::Full);
        let (left_store, right_store) = (
            RowStore::whole(left.clone()),
            RowStore::whole(right.clone()),
        );
        let out = take_output(
            &schema,
            JoinType::Full,
            &left_store,
            &right_store,
            &[0, 1, 2, PAD],
            &[1, PAD, 0, PAD],
        )
        .unwrap();
        assert_eq!(out.num_columns(), 4);
        assert_eq!(
            out.column(0).as_ref(),
            &Int64Array::from(vec![Some(1), Some(2), Some(3), None])
        );
        assert_eq!(
            out.column(3).as_ref(),
            &StringArray::from(vec![Some("y"), None, Some("x"), None])
        );

        // An empty right side pads everything; semi joins ignore the right rows entirely.
        let empty = RowStore::whole(RecordBatch::new_empty(right.schema()));
        let schema = output_schema(left.schema_ref(), right.schema_ref(), JoinType::Left);
        let out = take_output(&schema, JoinType::Left, &left_store, &empty, &[2], &[PAD]).unwrap();
        assert_eq!(out.column(2).null_count(), 1);
        let schema = output_schema(left.schema_ref(), right.schema_ref(), JoinType::LeftSemi);
        let out = take_output(
            &schema,
            JoinType::LeftSemi,
            &left_store,
            &right_store,
            &[2, 0],
            &[],
        )
        .unwrap();
        assert_eq!(out.num_rows(), 2);
        assert_eq!(out.num_columns(), 2);

        let bad = take_output(
            &schema,
            JoinType::LeftSemi,
            &left_store,
            &right_store,
            &[3],
            &[],
        );
        assert!(matches!(bad, Err(Error::Internal(_))), "{bad:?}");
    }

    #[test]
    fn a_chunked_store_gives_the_rows_of_the_whole_batch() {
        let ids: Vec<Option<i64>> = (0..10).map(|i| (i % 4 != 3).then_some(i)).collect();
        let names: Vec<String> = (0..10).map(|i| format!("n{i}")).collect();
        let whole = RecordBatch::try_from_iter([
            ("id", Arc::new(Int64Array::from(ids)) as ArrayRef),
            ("name", Arc::new(StringArray::from(names)) as ArrayRef),
        ])
        .unwrap();
        let chunked = RowStore::chunked(whole.schema(), 10, 4);
        // Chunks arrive in any order; a chunk of the wrong size or a second copy is refused.
        for index in [2, 0, 1] {
            let start = index * 4;
            let batch = whole.slice(start, 4.min(10 - start));
            assert!(chunked.put(index, whole.slice(0, 1)).is_err());
            chunked.put(index, batch.clone()).unwrap();
            assert!(chunked.put(index, batch).is_err());
        }
        assert!(chunked.put(3, whole.slice(0, 1)).is_err());
        let rows = [9, PAD, 0, 4, 3, 7, 8, PAD, 1];
        let right = RowStore::whole(RecordBatch::new_empty(whole.schema()));
        let schema = output_schema(whole.schema_ref(), whole.schema_ref(), JoinType::Full);
        let pads = vec![PAD; rows.len()];
        let expected = take_output(
            &schema,
            JoinType::Full,
            &RowStore::whole(whole.clone()),
            &right,
            &rows,
            &pads,
        )
        .unwrap();
        let got = take_output(&schema, JoinType::Full, &chunked, &right, &rows, &pads).unwrap();
        assert_eq!(got, expected);
        assert_eq!(got.column(0).null_count(), 4, "two pads and two NULL ids");

        // A row whose chunk has not been read is a bug, reported as such.
        let partial = RowStore::chunked(whole.schema(), 10, 4);
        partial.put(0, whole.slice(0, 4)).unwrap();
        let early = take_output(&schema, JoinType::Full, &partial, &right, &[5], &[PAD]);
        assert!(matches!(early, Err(Error::Internal(_))), "{early:?}");
    }

    #[test]
    fn dropped_writer_leaves_nothing_behind() {
        let dir = TempDir::new().unwrap();
        let path = dir.path().join("out.parquet");
        let table = sample();
        let mut writer = OutputWriter::create(
            &path,
            FileFormat::Parquet,
            OutputCompression::Zstd,
            table.schema(),
        )
        .unwrap();
        writer.write(&table).unwrap();
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "the temporary file"
        );
        drop(writer);
        assert!(!path.exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn writing_into_a_missing_directory_is_an_io_error() {
        let dir = TempDir::new().unwrap();
        let path = dir.path().join("no/such/dir/out.csv");
        match OutputWriter::create(
            &path,
            FileFormat::Csv,
            OutputCompression::None,
            sample().schema(),
        ) {
            Err(Error::Io(message)) => {
                assert!(message.contains("out.csv"), "{message}");
                assert!(message.contains("does not exist"), "{message}");
                assert!(
                    !message.contains(".out.csv."),
                    "no temporary name: {message}"
                );
            }
            Err(other) => panic!("expected an io error, got {other:?}"),
            Ok(_) => panic!("expected an io error, got a writer"),
        }
    }

    #[test]
    fn finished_writer_replaces_the_target_even_when_empty() {
        let dir = TempDir::new().unwrap();
        let path = dir.path().join("out.csv");
        std::fs::write(&path, "old contents\n").unwrap();
        let table = sample();
        OutputWriter::create(
            &path,
            FileFormat::Csv,
            OutputCompression::None,
            table.schema(),
        )
        .unwrap()
        .finish()
        .unwrap();
        let back = read_table(&path, FileFormat::Csv).unwrap();
        assert_eq!(back.num_rows(), 0);
        assert_eq!(
            back.num_columns(),
            table.num_columns(),
            "the header was written"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_ne!(
                mode & 0o044,
                0,
                "readable beyond the owner, as a normal new file"
            );
        }
    }

    // -----------------------------------------------------------------------------------------
    // Shares
    // -----------------------------------------------------------------------------------------

    /// `rows` rows of an Int64 id, a Utf8 name with NULLs and a Float64.
    fn numbered(rows: usize) -> RecordBatch {
        let ids: Vec<i64> = (0..rows as i64).collect();
        let names: Vec<Option<String>> = (0..rows)
            .map(|row| (row % 7 != 3).then(|| format!("n{row}, x")))
            .collect();
        let scores: Vec<f64> = (0..rows).map(|row| row as f64 / 4.0).collect();
        RecordBatch::try_from_iter([
            ("id", Arc::new(Int64Array::from(ids)) as ArrayRef),
            ("name", Arc::new(StringArray::from(names)) as ArrayRef),
            ("score", Arc::new(Float64Array::from(scores)) as ArrayRef),
        ])
        .unwrap()
    }

    /// Every share of `count` through the public API, concatenated in order.
    fn all_shares(path: &Path, format: FileFormat, count: usize) -> Result<RecordBatch> {
        let parts = (0..count)
            .map(|index| read_table_share(path, format, Share { index, count }))
            .collect::<Result<Vec<_>>>()?;
        for part in &parts {
            assert_eq!(
                part.schema(),
                parts[0].schema(),
                "one schema on every share"
            );
        }
        Ok(concat_batches(&parts[0].schema(), &parts).unwrap())
    }

    fn shares_equal_whole(path: &Path, format: FileFormat, counts: &[usize]) {
        let whole = read_table(path, format).unwrap();
        for &count in counts {
            let shares = all_shares(path, format, count).unwrap();
            assert_eq!(shares.schema(), whole.schema(), "{format} count {count}");
            assert_eq!(shares.columns(), whole.columns(), "{format} count {count}");
        }
    }

    #[test]
    fn parquet_shares_are_runs_of_row_groups() {
        let dir = TempDir::new().unwrap();
        let path = dir.path().join("groups.parquet");
        let table = numbered(1000);
        let properties = WriterProperties::builder()
            .set_max_row_group_row_count(Some(100))
            .build();
        let mut writer = ArrowWriter::try_new(
            File::create(&path).unwrap(),
            table.schema(),
            Some(properties),
        )
        .unwrap();
        writer.write(&table).unwrap();
        writer.close().unwrap();
        shares_equal_whole(&path, FileFormat::Parquet, &[1, 2, 3, 4, 5, 7, 10, 11, 25]);
        // Ten groups of 100 rows: five shares take two groups each.
        for index in 0..5 {
            let share = read_table_share(&path, FileFormat::Parquet, Share { index, count: 5 });
            assert_eq!(share.unwrap().num_rows(), 200, "share {index}");
        }
        // More shares than groups: the groups are spread out, the other shares are empty.
        let sizes: Vec<usize> = (0..25)
            .map(|index| {
                read_table_share(&path, FileFormat::Parquet, Share { index, count: 25 })
                    .unwrap()
                    .num_rows()
            })
            .collect();
        assert_eq!(sizes.iter().filter(|&&rows| rows == 100).count(), 10);
        assert_eq!(sizes.iter().filter(|&&rows| rows == 0).count(), 15);
    }

    #[test]
    fn arrow_file_and_stream_shares_are_runs_of_batches() {
        let dir = TempDir::new().unwrap();
        let table = numbered(900);
        let slices = [
            (0, 100),
            (100, 250),
            (350, 50),
            (400, 300),
            (700, 0),
            (700, 200),
        ];
        let file_path = dir.path().join("batches.arrow");
        let mut writer =
            FileWriter::try_new(File::create(&file_path).unwrap(), &table.schema()).unwrap();
        let stream_path = dir.path().join("batches.arrows");
        let mut stream = arrow::ipc::writer::StreamWriter::try_new(
            File::create(&stream_path).unwrap(),
            &table.schema(),
        )
        .unwrap();
        for (offset, rows) in slices {
            writer.write(&table.slice(offset, rows)).unwrap();
            stream.write(&table.slice(offset, rows)).unwrap();
        }
        writer.finish().unwrap();
        stream.finish().unwrap();
        for path in [&file_path, &stream_path] {
            shares_equal_whole(path, FileFormat::ArrowIpc, &[1, 2, 3, 4, 5, 6, 9]);
        }
        // Two halves of the body bytes: the first share holds the batches that start in the
        // first half, which the batch of rows 400..700 does (rows 0..400 hold under half of the
        // bytes, their names being the shorter).
        let first = read_table_share(
            &file_path,
            FileFormat::ArrowIpc,
            Share { index: 0, count: 2 },
        );
        assert_eq!(first.unwrap().num_rows(), 700);
    }

    #[test]
    fn shares_of_corrupt_files_are_input_errors() {
        let dir = TempDir::new().unwrap();
        for (format, extension) in ALL_FORMATS {
            let path = dir.path().join(format!("cut.{extension}"));
            write_table(&path, format, &numbered(50)).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
            for index in 0..3 {
                // A CSV cut in half is still CSV; the binary formats must fail cleanly.
                match read_table_share(&path, format, Share { index, count: 3 }) {
                    Err(Error::Input(message)) => {
                        assert!(message.contains(&format!("cut.{extension}")), "{message}")
                    }
                    Ok(_) => assert_eq!(format, FileFormat::Csv),
                    Err(other) => panic!("expected an input error, got {other:?}"),
                }
            }
        }
        let path = write_bytes(&dir, "t.csv", b"a\n1\n");
        for share in [Share { index: 2, count: 2 }, Share { index: 0, count: 0 }] {
            let result = read_table_share(&path, FileFormat::Csv, share);
            assert!(matches!(result, Err(Error::Usage(_))), "{result:?}");
        }
    }

    /// Every CSV share of `count`, with the types inferred from `prefix` bytes, concatenated.
    fn csv_shares(path: &Path, count: usize, prefix: usize) -> Result<RecordBatch> {
        let parts = (0..count)
            .map(|index| {
                let file = open_input(path)?;
                read_csv_share(path, file, Share { index, count }, prefix).map(|(part, _)| part)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(concat_batches(&parts[0].schema(), &parts).unwrap())
    }

    /// The shares hold the rows of the whole file: with the same types where the prefix held the
    /// whole file, else with the whole file's values cast to the prefix's types.
    fn assert_csv_shares_whole(path: &Path, count: usize, prefix: usize) {
        let whole = read_table(path, FileFormat::Csv).unwrap();
        let shares = match csv_shares(path, count, prefix) {
            Ok(shares) => shares,
            Err(error) => panic!("count {count} prefix {prefix}: {error}"),
        };
        let len = std::fs::metadata(path).unwrap().len() as usize;
        if prefix >= len {
            assert_eq!(shares.schema(), whole.schema(), "count {count}");
        }
        assert_eq!(
            shares.num_rows(),
            whole.num_rows(),
            "count {count} prefix {prefix}"
        );
        for (index, field) in shares.schema().fields().iter().enumerate() {
            let expected = cast(whole.column(index), field.data_type()).unwrap();
            assert_eq!(
                shares.column(index),
                &expected,
                "count {count} prefix {prefix} column {}",
                field.name()
            );
        }
    }

    #[test]
    fn csv_shares_concatenate_to_the_whole_file() {
        let dir = TempDir::new().unwrap();
        let cases: [(&str, &[u8]); 10] = [
            ("plain", b"id,name\n1,a\n2,b\n3,c\n4,d\n5,e\n6,f\n7,g\n"),
            ("no_trailing_newline", b"id,name\n1,a\n2,b\n3,c\n4,d\n5,e"),
            ("crlf", b"id,name\r\n1,a\r\n2,b\r\n3,c\r\n4,d\r\n5,e\r\n"),
            ("empty_lines_at_end", b"id,name\n1,a\n2,b\n3,c\n\n\n\n"),
            ("crlf_empty_lines", b"id,name\r\n1,a\r\n\r\n2,b\r\n\r\n"),
            ("header_only", b"id,name\n"),
            ("header_only_unterminated", b"id,name"),
            ("fewer_lines_than_shares", b"id,name\n1,a\n"),
            (
                "quoted_commas",
                b"id,name,v\n1,\"a, b\",2\n2,\"\"\"q\"\", r\",3\n3,,4\n4,\"x,,y\",\n",
            ),
            ("empty_column", b"id,gap,name\n1,,a\n2,,b\n3,,c\n"),
        ];
        for (name, bytes) in cases {
            let path = write_bytes(&dir, &format!("{name}.csv"), bytes);
            for count in 1..=12 {
                for prefix in [1, 9, 17, 30, CSV_PREFIX_BYTES] {
                    if count == 1 {
                        // One share is the whole file, read as `read_table` does.
                        let whole = read_table(&path, FileFormat::Csv).unwrap();
                        let share = read_table_share(&path, FileFormat::Csv, Share::WHOLE);
                        assert_eq!(share.unwrap(), whole);
                    } else {
                        assert_csv_shares_whole(&path, count, prefix);
                    }
                }
            }
            shares_equal_whole(&path, FileFormat::Csv, &[1, 2, 3, 4, 5, 8]);
        }
    }

    #[test]
    fn small_csv_with_quoted_line_breaks_is_split_at_records() {
        let dir = TempDir::new().unwrap();
        let path = write_bytes(
            &dir,
            "multi.csv",
            b"id,text\n1,\"a\nb\"\n2,\"c,\r\nd\"\n3,e\n4,\"\n\n\"\n5,f\n",
        );
        // The whole file is in the prefix, so every share knows the exact record starts.
        shares_equal_whole(&path, FileFormat::Csv, &[1, 2, 3, 4, 5, 6, 7, 30]);
    }

    #[test]
    fn csv_quoted_line_breaks_are_refused_when_split_at_lines() {
        let dir = TempDir::new().unwrap();
        // In the prefix: every share refuses the file.
        let path = write_bytes(&dir, "early.csv", b"id,text\n1,\"a\nb\"\n2,c\n3,d\n4,e\n");
        for index in 0..3 {
            let file = open_input(&path).unwrap();
            let result = read_csv_share(&path, file, Share { index, count: 3 }, 20);
            let message = input_message(result.map(|(batch, _)| batch));
            assert!(message.contains("early.csv: line 2 (byte 8)"), "{message}");
            assert!(message.contains("line break"), "{message}");
            assert!(message.contains("one process"), "{message}");
        }
        // After the prefix: whichever way the file is cut, some share reports it rather than
        // every share returning rows.
        let mut bytes = b"id,text,more\n".to_vec();
        for row in 0..40 {
            bytes.extend_from_slice(format!("{row},w{row},x\n").as_bytes());
        }
        bytes.extend_from_slice(b"40,\"a,b\nc,d\ne,f\ng,h\",x\n41,z,x\n");
        let path = write_bytes(&dir, "late.csv", &bytes);
        for count in 2..=40 {
            let result = csv_shares(&path, count, 30);
            let message = input_message(result);
            assert!(message.contains("late.csv"), "{message}");
            assert!(message.contains("line break"), "count {count}: {message}");
        }
    }

    #[test]
    fn csv_type_mismatch_after_the_prefix_says_how_to_fix_it() {
        let dir = TempDir::new().unwrap();
        let path = write_bytes(
            &dir,
            "late.csv",
            b"id,name\n1,a\n2,b\n3,c\n4,d\nx5,e\n6,f\n",
        );
        let file = open_input(&path).unwrap();
        let result = read_csv_share(&path, file, Share { index: 1, count: 2 }, 12);
        let message = input_message(result.map(|(batch, _)| batch));
        assert!(message.contains("late.csv: byte 24:"), "{message}");
        assert!(
            message.contains("\"x5\" in column `id` is not a valid Int64"),
            "{message}"
        );
        assert!(message.contains("first 12 bytes"), "{message}");
        assert!(message.contains("one process"), "{message}");
        // With the whole file in the prefix the column is text.
        let file = open_input(&path).unwrap();
        let result = read_csv_share(&path, file, Share { index: 1, count: 2 }, 100);
        assert!(result.is_ok(), "{result:?}");
        // Share 0 holds the file from its start, so it names the line too.
        let path = write_bytes(
            &dir,
            "early.csv",
            b"id,name\n1,a\nx2,b\n3,c\n4,d\n5,e\n6,f\n",
        );
        let file = open_input(&path).unwrap();
        let result = read_csv_share(&path, file, Share { index: 0, count: 2 }, 12);
        let message = input_message(result.map(|(batch, _)| batch));
        assert!(
            message.contains("early.csv: line 3 (byte 12):"),
            "{message}"
        );

        // The same through the public API, after the real prefix of 1 MiB.
        let mut bytes = b"id,name\n".to_vec();
        let mut row = 0;
        while bytes.len() <= CSV_PREFIX_BYTES + 1000 {
            bytes.extend_from_slice(format!("{row},name{row}\n").as_bytes());
            row += 1;
        }
        bytes.extend_from_slice(b"1.5,late\n");
        let path = write_bytes(&dir, "big.csv", &bytes);
        let message = input_message(read_table_share(
            &path,
            FileFormat::Csv,
            Share { index: 1, count: 2 },
        ));
        assert!(message.contains("big.csv: byte "), "{message}");
        assert!(message.contains("\"1.5\" in column `id`"), "{message}");
        assert!(message.contains("are inferred from its first"), "{message}");
        let first = read_table_share(&path, FileFormat::Csv, Share { index: 0, count: 2 });
        assert_eq!(
            first.unwrap().schema().field(0).data_type(),
            &DataType::Int64
        );
        let whole = read_table(&path, FileFormat::Csv).unwrap();
        assert_eq!(whole.schema().field(0).data_type(), &DataType::Float64);
    }

    #[test]
    fn csv_shares_read_little_more_than_their_bytes() {
        let dir = TempDir::new().unwrap();
        let mut bytes = b"id,name\n".to_vec();
        for row in 0..200_000 {
            bytes.extend_from_slice(format!("{row},some name {row}\n").as_bytes());
        }
        let path = write_bytes(&dir, "long.csv", &bytes);
        let len = bytes.len() as u64;
        let count = 8;
        let prefix = 64 * 1024;
        let mut rows = 0;
        for index in 0..count {
            let file = open_input(&path).unwrap();
            let (part, read) = read_csv_share(&path, file, Share { index, count }, prefix).unwrap();
            rows += part.num_rows();
            // The prefix, the share's bytes from the one before them (to see whether they start
            // a line), and at most one chunk to finish the last line.
            let bound = prefix as u64 + len.div_ceil(count as u64) + 1 + CSV_TAIL_CHUNK;
            assert!(read <= bound, "share {index} read {read} bytes of {len}");
        }
        assert_eq!(rows, 200_000);
        assert_csv_shares_whole(&path, count, prefix);
    }

    #[test]
    fn csv_field_count_errors_in_a_share_name_the_byte() {
        let dir = TempDir::new().unwrap();
        let path = write_bytes(&dir, "bad.csv", b"a,b\n1,2\n3,4\n5,6\n7,8,9\n10,11\n");
        let file = open_input(&path).unwrap();
        let result = read_csv_share(&path, file, Share { index: 1, count: 2 }, 8);
        let message = input_message(result.map(|(batch, _)| batch));
        assert!(
            message.contains("bad.csv: byte 16: expected 2 fields, found 3"),
            "{message}"
        );
        assert!(
            message.contains("first record of share 1 of 2"),
            "{message}"
        );
    }

    /// CSV text from simple fields: per column integers (or empty), words, or quoted words with
    /// commas; `\n` or `\r\n`; with or without a final line end and empty lines at the end.
    fn simple_csv() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let kinds = proptest::collection::vec(0u8..3, 1..4);
        kinds
            .prop_flat_map(|kinds| {
                let row = kinds
                    .iter()
                    .map(|&kind| match kind {
                        0 => prop_oneof![
                            3 => (-1000i64..1000).prop_map(|n| n.to_string()),
                            1 => Just(String::new()),
                        ]
                        .boxed(),
                        1 => "[a-c]{1,4}".boxed(),
                        _ => "[a-c ,]{0,4}"
                            .prop_map(|text| format!("\"{text}\""))
                            .boxed(),
                    })
                    .collect::<Vec<_>>();
                (
                    Just(kinds.len()),
                    proptest::collection::vec(row, 0..30),
                    any::<bool>(),
                    any::<bool>(),
                    0usize..3,
                )
            })
            .prop_map(|(columns, rows, crlf, final_end, empty_lines)| {
                let end: &[u8] = if crlf { b"\r\n" } else { b"\n" };
                let header: Vec<String> = (0..columns).map(|c| format!("c{c}")).collect();
                let mut bytes = header.join(",").into_bytes();
                for row in rows {
                    bytes.extend_from_slice(end);
                    bytes.extend_from_slice(row.join(",").as_bytes());
                }
                if final_end {
                    bytes.extend_from_slice(end);
                }
                for _ in 0..empty_lines {
                    bytes.extend_from_slice(end);
                }
                bytes
            })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 300, ..Default::default() })]
        /// Whatever the contents and the number of shares, and whether the types come from the
        /// whole file or a prefix of it, the shares concatenate to the whole file.
        #[test]
        fn csv_shares_always_concatenate_to_the_whole(
            bytes in simple_csv(),
            count in 2usize..9,
            prefix in proptest::prop_oneof![1usize..80, proptest::strategy::Just(CSV_PREFIX_BYTES)],
        ) {
            let dir = TempDir::new().unwrap();
            let path = write_bytes(&dir, "random.csv", &bytes);
            assert_csv_shares_whole(&path, count, prefix);
        }
    }
}
