//! What each worker does with its output pairs: counts them, or decodes and writes them to its part file.

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use arrow::array::{Array, RecordBatch, RecordBatchOptions};
use arrow::datatypes::SchemaRef;
use arrow::row::{RowConverter, SortField};
use serde::{Deserialize, Serialize};
use skewjoin_operators::JoinType;
use skewjoin_planner::exec::{CarriedRow, PairSink};

use crate::error::{Error, Result};
use crate::io::{take_output, FileFormat, OutputCompression, OutputWriter, RowStore};
use skewjoin_planner::count_sink::{Counted, OutputTally};

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

impl From<Counted> for WorkerSummary {
    fn from(counted: Counted) -> WorkerSummary {
        WorkerSummary {
            rows: counted.rows,
            checksum: counted.checksum,
            ..WorkerSummary::default()
        }
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
pub(super) struct PartLayout {
    pub(super) how: JoinType,
    pub(super) dir: PathBuf,
    pub(super) format: FileFormat,
    pub(super) compression: OutputCompression,
    pub(super) schema: SchemaRef,
    pub(super) sides: [(SchemaRef, Vec<SortField>); 2],
}

/// One worker's sink when writing output: decodes the rows that travelled with each pair and
/// writes them to the worker's own part file.
pub(super) struct PartSink {
    layout: Arc<PartLayout>,
    summary: WorkerSummary,
    writer: Option<OutputWriter>,
    converters: [RowConverter; 2],
    buffers: [RowBuffer; 2],
    tally: OutputTally,
}

impl PartSink {
    pub(super) fn new(
        layout: Arc<PartLayout>,
        worker: usize,
        progress: Option<Arc<AtomicU64>>,
    ) -> PartSink {
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
pub(super) fn part_name(worker: usize, format: FileFormat) -> String {
    let extension = match format {
        FileFormat::Parquet => "parquet",
        FileFormat::ArrowIpc => "arrow",
        FileFormat::Csv => "csv",
    };
    format!("part-{worker:05}.{extension}")
}
