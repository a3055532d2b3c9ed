//! What every reader shares: the batch size decoders are asked for, and one batch from many.

use std::path::Path;

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use arrow::datatypes::SchemaRef;

use crate::error::{Error, Result};

/// Rows per batch when decoding; the batches are concatenated afterwards.
pub(super) const READ_BATCH_ROWS: usize = 64 * 1024;

pub(super) fn concat(
    path: &Path,
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Result<RecordBatch> {
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
