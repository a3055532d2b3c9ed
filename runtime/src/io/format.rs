//! The file formats skewjoin reads and writes, and how output is compressed.

use std::fmt;
use std::path::Path;

use crate::error::{Error, Result};

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
