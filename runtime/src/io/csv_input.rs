//! CSV inputs: the dialect and syntax, reading a whole file, reading a share by byte ranges, and placing its errors.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use arrow::array::RecordBatch;
use arrow::csv::reader::Format as CsvFormat;
use arrow::datatypes::{DataType, Field, Schema};
use arrow::error::ArrowError;

use crate::error::{Error, Result};

use super::decode::{concat, READ_BATCH_ROWS};
use super::diagnose::{csv_error, number_after, read_error};
use super::shares::{Share, CSV_TAIL_CHUNK};

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

pub(super) fn csv_dialect() -> &'static CsvDialect {
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
    pub(super) delimiter: u8,
    pub(super) quote: u8,
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

pub(super) fn read_csv(path: &Path, bytes: &[u8]) -> Result<RecordBatch> {
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
/// `prefix_limit` bytes (see [`read_table_share`](crate::io::read_table_share)); also returns the number of bytes read.
pub(super) fn read_csv_share(
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
