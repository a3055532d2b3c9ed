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
use std::io::{self, BufWriter, Read};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    new_null_array, Array, ArrayRef, AsArray, Int64Array, LargeStringArray, RecordBatch,
    RecordBatchOptions, StringArray, StringViewArray, UInt32Array,
};
use arrow::buffer::NullBuffer;
use arrow::compute::{cast, concat_batches, take};
use arrow::csv::reader::Format as CsvFormat;
use arrow::datatypes::{
    ArrowPrimitiveType, BinaryType, BinaryViewType, ByteArrayType, ByteViewType, DataType,
    Date32Type, Date64Type, DurationMicrosecondType, DurationMillisecondType,
    DurationNanosecondType, DurationSecondType, Field, Float16Type, Float32Type, Float64Type,
    Int16Type, Int32Type, Int64Type, Int8Type, LargeBinaryType, LargeUtf8Type, Schema, SchemaRef,
    StringViewType, Time32MillisecondType, Time32SecondType, Time64MicrosecondType,
    Time64NanosecondType, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
    Utf8Type,
};
use arrow::error::ArrowError;
use arrow::ipc::reader::{FileReader, StreamReader};
use arrow::ipc::writer::FileWriter;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::errors::ParquetError;
use parquet::file::properties::WriterProperties;
use skewjoin_operators::hash::StableHasher;
use skewjoin_operators::{JoinType, Key, Side};
use tempfile::TempPath;

use crate::error::{Error, Result};

/// The row index that stands for "no row": the output row is padded with NULLs on that side.
const PAD: u32 = u32::MAX;

/// Rows per batch when decoding; the batches are concatenated afterwards.
const READ_BATCH_ROWS: usize = 64 * 1024;

/// What [`row_hashes`] feeds for a NULL value, so that NULL differs from every integer it could be
/// confused with in practice (0 in particular).
const NULL_WORD: u64 = 0x6e75_6c6c_7661_6c21;

/// The bits every NaN is hashed as, whatever its payload.
const CANONICAL_NAN: u64 = 0x7ff8_0000_0000_0000;

/// The magic bytes that open an Arrow IPC *file* (as opposed to a stream).
const ARROW_FILE_MAGIC: &[u8; 6] = b"ARROW1";

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
                 or pass --format parquet, --format arrow or --format csv",
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
    // Decoders of third-party crates have panicked on corrupt input before; a bad file must be
    // an error message, never a crashed run.
    panic::catch_unwind(AssertUnwindSafe(|| match format {
        FileFormat::Csv => {
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)
                .map_err(|error| read_error(path, error))?;
            read_csv(path, &bytes)
        }
        FileFormat::Parquet => read_parquet(path, file),
        FileFormat::ArrowIpc => read_ipc(path, file),
    }))
    .unwrap_or_else(|_| {
        Err(Error::Input(format!(
            "{}: the {format} decoder failed on this file, so it is corrupt or not {format}; \
             re-export it",
            path.display()
        )))
    })
}

/// Opens an input file, rejecting what cannot be a table before any decoder sees it.
fn open_input(path: &Path) -> Result<File> {
    let file = File::open(path).map_err(|error| read_error(path, error))?;
    let metadata = file.metadata().map_err(|error| read_error(path, error))?;
    if metadata.is_dir() {
        return Err(Error::Input(format!(
            "{} is a directory, not a file; give the path of a table file",
            path.display()
        )));
    }
    if metadata.len() == 0 {
        return Err(Error::Input(format!(
            "{} is empty (0 bytes); a table file needs at least a header or schema; \
             check that it was written completely",
            path.display()
        )));
    }
    Ok(file)
}

/// A failed open or read: the user's fault when the file is missing or unreadable to us,
/// the system's otherwise.
fn read_error(path: &Path, error: io::Error) -> Error {
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

fn read_csv(path: &Path, bytes: &[u8]) -> Result<RecordBatch> {
    let format = CsvFormat::default().with_header(true);
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
fn csv_error(path: &Path, error: ArrowError) -> Error {
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

fn parquet_read_error(path: &Path, error: ParquetError) -> Error {
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
    Error::Input(format!(
        "{}: not a valid Parquet file ({error}); it may be truncated or corrupt, re-export it",
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

fn arrow_read_error(path: &Path, format: FileFormat, error: ArrowError) -> Error {
    if let ArrowError::IoError(_, io_error) = &error {
        if !is_bad_bytes(io_error) {
            return Error::Io(format!(
                "{}: reading failed: {io_error}; check the disk and try again",
                path.display()
            ));
        }
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
// Keys
// ---------------------------------------------------------------------------------------------

/// The kind of a key column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// Integers of any width, signed or unsigned, widened to `i64`.
    Int,
    /// UTF-8 strings (`Utf8`, `LargeUtf8`, `Utf8View`).
    Str,
}

/// The kind of each key column of a file with `schema`.
///
/// A missing column is [`Error::Input`] naming the file, the column and the file's columns; a
/// column of another type (floats, dates, ...) is [`Error::Input`] suggesting a cast. A column of
/// type `Null` (no values at all, as in a header-only CSV) holds only NULL keys, which match
/// nothing, so it is reported as [`KeyKind::Int`] and [`check_key_compat`] accepts it against
/// either kind.
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
        // Parquet files often dictionary-encode strings; the key is the value, not the code.
        DataType::Dictionary(_, values) => key_kind(values),
        _ => None,
    }
}

/// The index and field of column `name`, or an error listing the columns there are.
fn find_field<'a>(schema: &'a Schema, name: &str, path: &Path) -> Result<(usize, &'a Field)> {
    if let Some(found) = schema.column_with_name(name) {
        return Ok(found);
    }
    let names: Vec<String> = schema
        .fields()
        .iter()
        .map(|field| format!("`{}`", field.name()))
        .collect();
    let hint = schema
        .fields()
        .iter()
        .find(|field| field.name().eq_ignore_ascii_case(name))
        .map(|field| format!(" (did you mean `{}`?)", field.name()))
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

fn unsupported_key(field: &Field, path: &Path) -> Error {
    Error::Input(format!(
        "{} column `{}` has type {}, which cannot be a join key; cast it to an integer or a \
         string before joining",
        path.display(),
        field.name(),
        field.data_type()
    ))
}

/// Checks that the left and right key columns exist, are usable as keys and pair up: an integer
/// key cannot join a string key ([`Error::Input`] naming both columns and types), while integers
/// of different widths join fine. Different numbers of key columns is [`Error::Usage`].
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
                    "{} column `{}` is {} ({})",
                    path.display(),
                    field.name(),
                    match kind {
                        KeyKind::Int => "integer",
                        KeyKind::Str => "string",
                    },
                    field.data_type()
                )
            };
            return Err(Error::Input(format!(
                "key types differ: {}, {}; cast one side",
                describe(left_path, left_field, *left_kind),
                describe(right_path, right_field, *right_kind)
            )));
        }
    }
    Ok(())
}

/// One key column, downcast once so that the per-row loop is monomorphic.
enum KeyColumn<'a> {
    Null,
    Int(&'a Int64Array),
    Utf8(&'a StringArray),
    LargeUtf8(&'a LargeStringArray),
    Utf8View(&'a StringViewArray),
}

impl KeyColumn<'_> {
    fn is_null(&self, row: usize) -> bool {
        match self {
            KeyColumn::Null => true,
            KeyColumn::Int(array) => array.is_null(row),
            KeyColumn::Utf8(array) => array.is_null(row),
            KeyColumn::LargeUtf8(array) => array.is_null(row),
            KeyColumn::Utf8View(array) => array.is_null(row),
        }
    }

    fn key(&self, row: usize) -> Key {
        if self.is_null(row) {
            return Key::Null;
        }
        match self {
            KeyColumn::Null => Key::Null,
            KeyColumn::Int(array) => Key::Int(array.value(row)),
            KeyColumn::Utf8(array) => Key::str(array.value(row)),
            KeyColumn::LargeUtf8(array) => Key::str(array.value(row)),
            KeyColumn::Utf8View(array) => Key::str(array.value(row)),
        }
    }
}

/// Brings a key column to one of the types [`KeyColumn`] reads: integers to `Int64` (checking
/// that unsigned 64-bit values fit), dictionaries to their values.
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
    match array.data_type() {
        DataType::Int64 | DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            Ok(array.clone())
        }
        DataType::Null => Ok(array.clone()),
        DataType::UInt64 => {
            let values = array.as_primitive::<UInt64Type>();
            let too_big = (0..values.len())
                .find(|&row| values.is_valid(row) && values.value(row) > i64::MAX as u64);
            if let Some(row) = too_big {
                return Err(Error::Input(format!(
                    "{} column `{}` row {}: value {} is above the largest supported key \
                     {}; keys must fit a signed 64-bit integer, or cast the column to a string",
                    path.display(),
                    field.name(),
                    row + 1,
                    values.value(row),
                    i64::MAX
                )));
            }
            Ok(Arc::new(values.unary::<_, Int64Type>(|value| value as i64)))
        }
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32 => cast_to(&DataType::Int64),
        DataType::Dictionary(_, values) if key_kind(values).is_some() => {
            let plain = cast_to(values)?;
            normalise_key_column(&plain, field, path)
        }
        _ => Err(unsupported_key(field, path)),
    }
}

/// One [`Key`] per row of `batch` from the key `columns`: `Key::Int` or `Key::Str` for one
/// column, [`Key::composite`] for several; a NULL in any key column gives [`Key::Null`].
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
    let key_columns: Vec<KeyColumn<'_>> = normalised
        .iter()
        .map(|array| match array.data_type() {
            DataType::Int64 => KeyColumn::Int(array.as_primitive::<Int64Type>()),
            DataType::Utf8 => KeyColumn::Utf8(array.as_string::<i32>()),
            DataType::LargeUtf8 => KeyColumn::LargeUtf8(array.as_string::<i64>()),
            DataType::Utf8View => KeyColumn::Utf8View(array.as_string_view()),
            _ => KeyColumn::Null,
        })
        .collect();

    let rows = 0..batch.num_rows();
    Ok(match key_columns.as_slice() {
        [single] => rows.map(|row| single.key(row)).collect(),
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
/// binaries are their bytes. Other types (decimals, nested types, ...) hash their display string.
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

    match column.data_type() {
        DataType::Null => hashers
            .iter_mut()
            .for_each(|hasher| hasher.write_u64(NULL_WORD)),
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

/// Builds one output batch of a join with `schema` (from [`output_schema`]): output row `i` is
/// left row `left_rows[i]` and right row `right_rows[i]`, where `u32::MAX` pads that side with
/// NULLs. The rows of a side that `how` does not output are ignored (the slice may be empty).
/// Inconsistent arguments are [`Error::Internal`]: they can only come from a bug.
pub fn take_output(
    schema: &SchemaRef,
    how: JoinType,
    left: &RecordBatch,
    right: &RecordBatch,
    left_rows: &[u32],
    right_rows: &[u32],
) -> Result<RecordBatch> {
    let sides = [
        (Side::Left, left, left_rows),
        (Side::Right, right, right_rows),
    ];
    let mut num_rows = None;
    let mut columns = Vec::with_capacity(schema.fields().len());
    for (side, batch, rows) in sides {
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
        take_side(side, batch, rows, &mut columns)?;
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

/// Appends the columns of `batch` taken at `rows` (with `PAD` as NULL) to `columns`.
fn take_side(
    side: Side,
    batch: &RecordBatch,
    rows: &[u32],
    columns: &mut Vec<ArrayRef>,
) -> Result<()> {
    let len = batch.num_rows();
    if let Some(&bad) = rows.iter().find(|&&row| row != PAD && row as usize >= len) {
        return Err(Error::Internal(format!(
            "join output refers to {side} row {bad}, but the {side} side has {len} rows"
        )));
    }
    let padded = rows.contains(&PAD);
    if padded && len == 0 {
        // Nothing to take from: every row is padding.
        columns.extend(
            batch
                .columns()
                .iter()
                .map(|column| new_null_array(column.data_type(), rows.len())),
        );
        return Ok(());
    }
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
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

/// The encoder of an [`OutputWriter`].
enum Sink {
    Parquet(ArrowWriter<BufWriter<File>>),
    Ipc(FileWriter<BufWriter<File>>),
    Csv(arrow::csv::Writer<BufWriter<File>>),
}

/// Writes a table as Parquet, Arrow IPC file or CSV (with header), atomically: batches go to a
/// temporary file in the target's directory, which [`finish`](OutputWriter::finish) renames onto
/// the target. Dropping the writer without finishing removes the temporary file, so a failed run
/// never leaves partial output behind.
pub struct OutputWriter {
    // Declared before `temp` so that the encoder is dropped before its file is deleted.
    sink: Sink,
    schema: SchemaRef,
    path: PathBuf,
    /// Whether any batch was written: a CSV header is only written with the first batch.
    wrote_any: bool,
    temp: TempPath,
    /// Keeps `temp` registered for removal on Ctrl-C until it is renamed or deleted.
    _interrupt: crate::interrupt::Registered,
}

// The runtime shares one writer among worker threads behind a mutex.
const _: fn() = || {
    fn assert_send<T: Send>() {}
    assert_send::<OutputWriter>();
};

impl OutputWriter {
    /// Starts writing `path` in `format`. An unwritable directory or path is [`Error::Io`]
    /// naming it.
    pub fn create(path: &Path, format: FileFormat, schema: SchemaRef) -> Result<OutputWriter> {
        let cannot = |why: String| Error::Io(format!("cannot write {}: {why}", path.display()));
        if path.is_dir() {
            return Err(cannot(
                "it is a directory; give the path of a file to write".to_string(),
            ));
        }
        let Some(name) = path.file_name() else {
            return Err(cannot(
                "it does not end in a file name; give the path of a file to write".to_string(),
            ));
        };
        let directory = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        let mut prefix = std::ffi::OsString::from(".");
        prefix.push(name);
        prefix.push(".");
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).suffix(".tmp");
        // Temporary files are private (0600) by default; the output should get the usual
        // permissions of a new file, so ask for 0666 and let the umask narrow it.
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
        let (file, temp) = builder
            .tempfile_in(directory)
            .map_err(|error| {
                // The error of `tempfile` names the temporary file, which would only confuse.
                cannot(match error.kind() {
                    io::ErrorKind::NotFound if !directory.is_dir() => format!(
                        "directory {} does not exist; create it or choose another output path",
                        directory.display()
                    ),
                    io::ErrorKind::PermissionDenied => format!(
                        "no permission to create files in {}; choose a writable directory",
                        directory.display()
                    ),
                    _ => format!(
                        "{}; check that {} is a writable directory with free space",
                        io::Error::from(error.kind()),
                        directory.display()
                    ),
                })
            })?
            .into_parts();
        let interrupt = crate::interrupt::Registered::new(&temp);
        let file = BufWriter::new(file);
        let sink = match format {
            FileFormat::Parquet => {
                let properties = WriterProperties::builder()
                    .set_compression(Compression::SNAPPY)
                    .build();
                let writer = ArrowWriter::try_new(file, schema.clone(), Some(properties))
                    .map_err(|error| parquet_write_error(path, error))?;
                Sink::Parquet(writer)
            }
            FileFormat::ArrowIpc => {
                let writer = FileWriter::try_new(file, &schema)
                    .map_err(|error| arrow_write_error(path, format, error))?;
                Sink::Ipc(writer)
            }
            FileFormat::Csv => Sink::Csv(
                arrow::csv::WriterBuilder::new()
                    .with_header(true)
                    .build(file),
            ),
        };
        Ok(OutputWriter {
            sink,
            schema,
            path: path.to_path_buf(),
            wrote_any: false,
            temp,
            _interrupt: interrupt,
        })
    }

    /// Appends `batch`, which must have the writer's schema.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.schema_ref().fields() != self.schema.fields() {
            return Err(Error::Internal(format!(
                "writing {}: batch schema {:?} differs from the output schema {:?}",
                self.path.display(),
                batch.schema_ref().fields(),
                self.schema.fields()
            )));
        }
        let path = &self.path;
        match &mut self.sink {
            Sink::Parquet(writer) => writer
                .write(batch)
                .map_err(|error| parquet_write_error(path, error))?,
            Sink::Ipc(writer) => writer
                .write(batch)
                .map_err(|error| arrow_write_error(path, FileFormat::ArrowIpc, error))?,
            Sink::Csv(writer) => writer
                .write(batch)
                .map_err(|error| arrow_write_error(path, FileFormat::Csv, error))?,
        }
        self.wrote_any = true;
        Ok(())
    }

    /// Completes the file and renames it onto the target path, replacing any file there.
    pub fn finish(self) -> Result<()> {
        let OutputWriter {
            sink,
            schema,
            path,
            wrote_any,
            temp,
            _interrupt,
        } = self;
        let buffered = match sink {
            Sink::Parquet(writer) => writer
                .into_inner()
                .map_err(|error| parquet_write_error(&path, error))?,
            Sink::Ipc(writer) => writer
                .into_inner()
                .map_err(|error| arrow_write_error(&path, FileFormat::ArrowIpc, error))?,
            Sink::Csv(mut writer) => {
                if !wrote_any {
                    // The header goes out with the first batch; an empty table still needs it.
                    writer
                        .write(&RecordBatch::new_empty(schema))
                        .map_err(|error| arrow_write_error(&path, FileFormat::Csv, error))?;
                }
                writer.into_inner()
            }
        };
        let io_error = |error: io::Error| {
            Error::Io(format!(
                "cannot write {}: {error}; check free disk space and permissions",
                path.display()
            ))
        };
        let file = buffered
            .into_inner()
            .map_err(|error| io_error(error.into_error()))?;
        // The data must be on disk before the rename makes it visible under the final name.
        file.sync_all().map_err(io_error)?;
        drop(file);
        temp.persist(&path).map_err(|error| io_error(error.error))
    }
}

fn arrow_write_error(path: &Path, format: FileFormat, error: ArrowError) -> Error {
    match error {
        ArrowError::IoError(_, io_error) => Error::Io(format!(
            "cannot write {}: {io_error}; check free disk space and permissions",
            path.display()
        )),
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
            return Error::Io(format!(
                "cannot write {}: {io_error}; check free disk space and permissions",
                path.display()
            ));
        }
    }
    Error::Internal(format!(
        "writing {} as parquet failed: {error}",
        path.display()
    ))
}

/// Writes a whole table to `path` in `format`, atomically (see [`OutputWriter`]).
pub fn write_table(path: &Path, format: FileFormat, batch: &RecordBatch) -> Result<()> {
    let mut writer = OutputWriter::create(path, format, batch.schema())?;
    writer.write(batch)?;
    writer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{BooleanArray, Float64Array, Int32Array, UInt64Array};
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
            Field::new("price", DataType::Float64, false),
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
                assert!(message.contains("Float64"), "{message}");
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
                Key::Composite(vec![Key::Int(1), Key::str("x")].into_boxed_slice()),
                Key::Null,
                Key::Null,
            ]
        );
        let single = extract_keys(&batch, &strings(&["b"]), Path::new("t.csv")).unwrap();
        assert_eq!(single, [Key::str("x"), Key::str("y"), Key::Null]);
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
        let out = take_output(
            &schema,
            JoinType::Full,
            &left,
            &right,
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
        let empty = RecordBatch::new_empty(right.schema());
        let schema = output_schema(left.schema_ref(), right.schema_ref(), JoinType::Left);
        let out = take_output(&schema, JoinType::Left, &left, &empty, &[2], &[PAD]).unwrap();
        assert_eq!(out.column(2).null_count(), 1);
        let schema = output_schema(left.schema_ref(), right.schema_ref(), JoinType::LeftSemi);
        let out = take_output(&schema, JoinType::LeftSemi, &left, &right, &[2, 0], &[]).unwrap();
        assert_eq!(out.num_rows(), 2);
        assert_eq!(out.num_columns(), 2);

        let bad = take_output(&schema, JoinType::LeftSemi, &left, &right, &[3], &[]);
        assert!(matches!(bad, Err(Error::Internal(_))), "{bad:?}");
    }

    #[test]
    fn dropped_writer_leaves_nothing_behind() {
        let dir = TempDir::new().unwrap();
        let path = dir.path().join("out.parquet");
        let table = sample();
        let mut writer = OutputWriter::create(&path, FileFormat::Parquet, table.schema()).unwrap();
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
        match OutputWriter::create(&path, FileFormat::Csv, sample().schema()) {
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
        OutputWriter::create(&path, FileFormat::Csv, table.schema())
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
}
