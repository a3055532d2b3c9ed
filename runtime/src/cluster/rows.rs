//! Rows in Arrow's row format, to travel with their pairs between processes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use arrow::array::RecordBatch;
use arrow::error::ArrowError;
use arrow::row::{RowConverter, Rows, SortField};

use crate::engine::{KeepBatch, StreamSide};
use crate::error::{Error, Result};

/// Encodes a side's rows in Arrow's row format, to travel with them between processes: each batch
/// as it is read ([`RowEncoder::keep`]), its rows then taken one at a time as they are fed.
pub(super) struct RowEncoder {
    pub(super) fields: Vec<SortField>,
    converter: RowConverter,
    /// The batch each reading worker is feeding, by its thread: the row number of its first
    /// row, and its rows encoded. The workers of a process read parts of a side at once.
    current: Mutex<HashMap<ThreadId, (u64, Rows)>>,
    name: String,
}

impl RowEncoder {
    /// An encoder for `side`'s columns; a column the row format cannot hold is refused here,
    /// before the join starts.
    pub(super) fn new(side: &StreamSide) -> Result<RowEncoder> {
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
            current: Mutex::new(HashMap::new()),
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
    /// it the batch whose rows [`RowEncoder::bytes`] gives on this worker's thread.
    pub(super) fn keep(encoder: &Arc<RowEncoder>) -> KeepBatch {
        let encoder = Arc::clone(encoder);
        Box::new(move |first, batch: &RecordBatch, _hashes: &[u64]| {
            let rows = encoder
                .converter
                .convert_columns(batch.columns())
                .map_err(|error| RowEncoder::unsupported(&encoder.name, error))?;
            let mut current = encoder
                .current
                .lock()
                .map_err(|_| Error::Internal("a row encoder panicked".into()))?;
            current.insert(std::thread::current().id(), (first, rows));
            Ok(())
        })
    }

    /// Row `row` of the side, encoded: it must be in the batch this thread is feeding, which it
    /// is while the source sends it (see `execute_cluster_stream`).
    pub(super) fn bytes(&self, row: u32) -> Vec<u8> {
        // A side that gives the output no column (`--select` naming only the other side's)
        // sends rows of no bytes; arrow's row format holds no rows without a column.
        if self.fields.is_empty() {
            return Vec::new();
        }
        let current = self
            .current
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let (first, rows) = current
            .get(&std::thread::current().id())
            .expect("a row is fed by the worker that read its batch");
        rows.row((u64::from(row) - first) as usize)
            .as_ref()
            .to_vec()
    }
}
