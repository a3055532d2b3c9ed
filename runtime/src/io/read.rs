//! Reading a whole file, or one process's share of it, into one batch.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use arrow::array::RecordBatch;
use arrow::ipc::reader::{FileReader, StreamReader};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::errors::ParquetError;

use crate::error::{Error, Result};

use super::csv_input::{read_csv, read_csv_share};
use super::decode::{concat, READ_BATCH_ROWS};
use super::diagnose::{arrow_read_error, parquet_read_error, read_error};
use super::fence::fenced;
use super::format::{FileFormat, ARROW_FILE_MAGIC};
use super::shares::{ipc_file_bodies, row_group_rows, share_run, Share, CSV_PREFIX_BYTES};

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

fn read_parquet_share(path: &Path, file: File, share: Share) -> Result<RecordBatch> {
    let corrupt = |error: ParquetError| parquet_read_error(path, error);
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(corrupt)?;
    let schema = builder.schema().clone();
    // Row counts come from the footer, so choosing this share's row groups reads no data.
    let run = share_run(&row_group_rows(path, builder.metadata())?, share);
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
