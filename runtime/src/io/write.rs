//! Writing output files: encoding on any thread, appending atomically.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::error::ArrowError;
use arrow::ipc::writer::{FileWriter, IpcWriteOptions};
use arrow::ipc::CompressionType as IpcCompression;
use parquet::arrow::arrow_writer::{
    compute_leaves, ArrowColumnChunk, ArrowColumnWriter, ArrowRowGroupWriterFactory,
};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;

use crate::error::{Error, Result};
use crate::output_file::{write_error, FileFailure, PendingOutput, WatchedFile};
use crate::threads::{on_threads, InTurn};

use super::format::{FileFormat, OutputCompression};

/// The most rows in one row group of a Parquet file we write.
pub const WRITE_ROW_GROUP_ROWS: usize = 64 * 1024;

/// The largest dictionary a column of a Parquet output keeps before it falls back to plain
/// encoding (see where the writer is made).
const DICTIONARY_PAGE_BYTES: usize = 32 * 1024;

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
    /// The factory of each row group's column writers, and how many leaf columns (and so
    /// writers, in order) each field of the schema has.
    Parquet(ArrowRowGroupWriterFactory, Vec<usize>),
    Csv,
    Ipc,
}

impl BatchEncoder {
    /// Encodes `batch`, which must have the output's schema: a Parquet batch becomes row
    /// groups of at most [`WRITE_ROW_GROUP_ROWS`] rows.
    pub fn encode(&self, batch: &RecordBatch) -> Result<EncodedBatch> {
        self.encode_all(std::slice::from_ref(batch))
    }

    /// Encodes the rows of `batches` (each with the output's schema), in order, as
    /// [`encode`](Self::encode) encodes them joined into one batch: a Parquet row group may
    /// take rows of several, so that rows short of a row group join the next without a copy.
    pub fn encode_all(&self, batches: &[RecordBatch]) -> Result<EncodedBatch> {
        self.encode_all_on(batches, 1)
    }

    /// [`encode_all`](Self::encode_all), a Parquet row group's columns encoded on `threads`
    /// threads: for rows that no other thread is encoding meanwhile, such as the workers'
    /// last rows, which end a run.
    pub fn encode_all_on(&self, batches: &[RecordBatch], threads: usize) -> Result<EncodedBatch> {
        if let Some(batch) = batches
            .iter()
            .find(|batch| batch.schema_ref().fields() != self.schema.fields())
        {
            return Err(Error::Internal(format!(
                "writing {}: batch schema {:?} differs from the output schema {:?}",
                self.path.display(),
                batch.schema_ref().fields(),
                self.schema.fields()
            )));
        }
        let path = &self.path;
        let batch = match (&self.format, batches) {
            (Encoding::Parquet(factory, leaves), _) => {
                return encode_row_groups(factory, leaves, batches, threads)
                    .map(|groups| EncodedBatch(Encoded::RowGroups(groups)))
                    .map_err(|error| parquet_write_error(path, error));
            }
            (_, [batch]) => batch.clone(),
            (_, _) => arrow::compute::concat_batches(&self.schema, batches)
                .map_err(|error| Error::Internal(format!("joining output batches: {error}")))?,
        };
        match &self.format {
            Encoding::Parquet(..) => unreachable!("encoded above"),
            Encoding::Csv => {
                let mut writer = arrow::csv::WriterBuilder::new()
                    .with_header(false)
                    .build(Vec::new());
                writer
                    .write(&batch)
                    .map_err(|error| arrow_write_error(path, FileFormat::Csv, error))?;
                Ok(EncodedBatch(Encoded::Csv(writer.into_inner())))
            }
            Encoding::Ipc => Ok(EncodedBatch(Encoded::Ipc(compact_views(&batch)))),
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

/// The rows of `batches`, in order, encoded as row groups of [`WRITE_ROW_GROUP_ROWS`] rows
/// (the last may be shorter), a row group taking rows of as many batches as it needs; the
/// columns of each row group are encoded on `threads` threads (see
/// [`BatchEncoder::encode_all_on`]).
fn encode_row_groups(
    factory: &ArrowRowGroupWriterFactory,
    leaves: &[usize],
    batches: &[RecordBatch],
    threads: usize,
) -> std::result::Result<Vec<Vec<ArrowColumnChunk>>, ParquetError> {
    // Each row group's pieces of the batches, as (batch, first row, rows).
    let mut groups: Vec<Vec<(usize, usize, usize)>> = Vec::new();
    let mut rows_in_open = WRITE_ROW_GROUP_ROWS;
    for (index, batch) in batches.iter().enumerate() {
        let mut start = 0;
        while start < batch.num_rows() {
            if rows_in_open == WRITE_ROW_GROUP_ROWS {
                groups.push(Vec::new());
                rows_in_open = 0;
            }
            let rows = (WRITE_ROW_GROUP_ROWS - rows_in_open).min(batch.num_rows() - start);
            groups
                .last_mut()
                .expect("pushed above")
                .push((index, start, rows));
            start += rows;
            rows_in_open += rows;
        }
    }
    groups
        .iter()
        .map(|pieces| {
            let parts: Vec<RecordBatch> = pieces
                .iter()
                .map(|&(index, start, rows)| batches[index].slice(start, rows))
                .collect();
            // The row group's index only matters to encryption, which is not compiled in.
            encode_columns(factory.create_column_writers(0)?, leaves, &parts, threads)
        })
        .collect()
}

/// The column chunks of one row group of the rows of `parts`, written by `writers` (one per
/// leaf column, in order; `leaves[f]` of them for field `f`): each field's leaves by one
/// thread, the fields taken in turn, the largest first, by `threads` threads (only this one
/// where `threads` is 1).
fn encode_columns(
    writers: Vec<ArrowColumnWriter>,
    leaves: &[usize],
    parts: &[RecordBatch],
    threads: usize,
) -> std::result::Result<Vec<ArrowColumnChunk>, ParquetError> {
    let Some(first) = parts.first() else {
        return writers.into_iter().map(ArrowColumnWriter::close).collect();
    };
    let fields = first.schema_ref().fields();
    if leaves.len() != fields.len() || leaves.iter().sum::<usize>() != writers.len() {
        return Err(ParquetError::General(
            "the column writers do not match the schema's leaf columns".into(),
        ));
    }
    // Each field's leaf writers, in order.
    let mut writers = writers.into_iter();
    let by_field: Vec<Vec<ArrowColumnWriter>> = leaves
        .iter()
        .map(|&count| writers.by_ref().take(count).collect())
        .collect();
    let encode_field = |field: usize, mut writers: Vec<ArrowColumnWriter>| {
        for part in parts {
            let leaves = compute_leaves(&fields[field], part.column(field))?;
            for (writer, leaf) in writers.iter_mut().zip(&leaves) {
                writer.write(leaf)?;
            }
        }
        writers
            .into_iter()
            .map(ArrowColumnWriter::close)
            .collect::<std::result::Result<Vec<_>, _>>()
    };
    let threads = threads.clamp(1, by_field.len().max(1));
    let mut fields_in_order: Vec<(usize, Vec<ArrowColumnWriter>)> =
        by_field.into_iter().enumerate().collect();
    if threads > 1 {
        // Largest columns first, so that no thread starts a long one last.
        fields_in_order.sort_by_cached_key(|&(field, _)| {
            let bytes: usize = parts
                .iter()
                .map(|part| part.column(field).get_array_memory_size())
                .sum();
            std::cmp::Reverse(bytes)
        });
    }
    let fields_in_turn = InTurn::new(fields_in_order);
    let encode_in_turn = || {
        let mut encoded = Vec::new();
        fields_in_turn.try_each(|(field, writers)| {
            encoded.push((field, encode_field(field, writers)?));
            Ok::<_, ParquetError>(())
        })?;
        Ok(encoded)
    };
    // A worker encodes its own row groups on its own thread, with no thread started for each.
    let encoded = if threads == 1 {
        vec![Ok(encode_in_turn())]
    } else {
        on_threads(threads, encode_in_turn)
    };
    let mut chunks = Vec::with_capacity(fields.len());
    for thread in encoded {
        chunks.extend(
            thread.unwrap_or_else(|_| {
                Err(ParquetError::General("a column encoder panicked".into()))
            })?,
        );
    }
    chunks.sort_unstable_by_key(|&(field, _)| field);
    Ok(chunks.into_iter().flat_map(|(_, chunks)| chunks).collect())
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
        let file = file.with_writeback(!pending.is_streamed());
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
                let schema_leaves = writer.schema_descr();
                let mut leaves = vec![0; schema.fields().len()];
                for leaf in 0..schema_leaves.num_columns() {
                    leaves[schema_leaves.get_column_root_idx(leaf)] += 1;
                }
                (Sink::Parquet(writer), Encoding::Parquet(factory, leaves))
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
