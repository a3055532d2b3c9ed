//! Turning decoders' errors into messages that name the file, the place and the fix.

use std::io::{self};
use std::path::Path;

use arrow::error::ArrowError;
use parquet::errors::ParquetError;

use crate::error::Error;

use super::format::FileFormat;

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
pub(super) fn number_after(text: &str, marker: &str) -> Option<u64> {
    let rest = &text[text.find(marker)? + marker.len()..];
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..digits].parse().ok()
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
