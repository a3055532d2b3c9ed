//! Key columns decoded once: `auto`'s skew check decodes every key of a streamed input before
//! the join starts, and the join's read of whole rows decoded them again. The check keeps what it
//! decodes ([`KeptKeys`]), a part of a side at a time (the parts the join's workers read), and
//! the first read of whole rows of such a part decodes only its other columns and puts the kept
//! key columns back among them ([`KeyMerge`]).
//!
//! On the generated 10M x 10M uniform pair the key column is a third of the bytes decoded, and its
//! Snappy pages were half of the check's CPU; see BENCHMARKS.md for what keeping them saved.

use std::collections::VecDeque;
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, Mutex};

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::concat_batches;
use arrow::datatypes::{FieldRef, Schema, SchemaRef};

use crate::error::{Error, Result};

/// Key columns decoded by a read of an input's key columns, by the rows they are of, for the
/// next read of whole rows of those rows; shared by the clones of an input.
#[derive(Debug, Default)]
pub(crate) struct KeptKeys {
    state: Mutex<KeptState>,
}

#[derive(Debug, Default)]
struct KeptState {
    parts: Vec<KeptPart>,
    /// Bytes of the parts kept and of those being read to keep ([`KeyCollector`]).
    bytes: usize,
}

/// The key columns of one part of an input, as a keys-only read yielded them.
#[derive(Debug)]
struct KeptPart {
    rows: Range<u64>,
    batches: Vec<RecordBatch>,
    bytes: usize,
}

impl KeptKeys {
    fn state(&self) -> std::sync::MutexGuard<'_, KeptState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A collector of the key batches of one part as they are read, kept while this input's
    /// kept and collected key columns take at most `most` bytes.
    pub(crate) fn collector(&self, most: u64) -> KeyCollector<'_> {
        KeyCollector {
            kept: self,
            most,
            batches: Vec::new(),
            bytes: 0,
            full: most == 0,
        }
    }

    /// Counts `bytes` more towards the bound, if the input's key columns then take at most
    /// `most` bytes.
    fn reserve(&self, bytes: usize, most: u64) -> bool {
        let mut state = self.state();
        let fits = (state.bytes + bytes) as u64 <= most;
        if fits {
            state.bytes += bytes;
        }
        fits
    }

    /// Gives back `bytes` counted and not kept.
    fn release(&self, bytes: usize) {
        let mut state = self.state();
        state.bytes = state.bytes.saturating_sub(bytes);
    }

    /// The key columns kept for rows `rows`, left kept.
    pub(crate) fn peek(&self, rows: &Range<u64>) -> Option<Vec<RecordBatch>> {
        self.state()
            .parts
            .iter()
            .find(|part| part.rows == *rows)
            .map(|part| part.batches.clone())
    }

    /// The key columns kept for rows `rows`, no longer kept.
    pub(crate) fn take(&self, rows: &Range<u64>) -> Option<Vec<RecordBatch>> {
        let mut state = self.state();
        let at = state.parts.iter().position(|part| part.rows == *rows)?;
        let part = state.parts.swap_remove(at);
        state.bytes = state.bytes.saturating_sub(part.bytes);
        Some(part.batches)
    }
}

/// The key batches of one part as a keys-only read yields them, each counted towards the
/// input's bound as it comes: past the bound the part is not kept, and what it held is freed at
/// once, so that the check never holds more than the bound (a part is a whole side where the
/// side cannot be cut).
pub(crate) struct KeyCollector<'a> {
    kept: &'a KeptKeys,
    most: u64,
    batches: Vec<RecordBatch>,
    bytes: usize,
    /// Whether the bound was reached: nothing more is collected.
    full: bool,
}

impl KeyCollector<'_> {
    /// Collects the next batch of the part, while the bound allows.
    pub(crate) fn add(&mut self, batch: &RecordBatch) {
        if self.full {
            return;
        }
        let bytes = batch.get_array_memory_size();
        if self.kept.reserve(bytes, self.most) {
            self.bytes += bytes;
            self.batches.push(batch.clone());
        } else {
            self.full = true;
            self.kept.release(std::mem::take(&mut self.bytes));
            self.batches = Vec::new();
        }
    }

    /// Keeps what was collected as the key columns of rows `rows`, unless the bound was reached
    /// or those rows are kept already.
    pub(crate) fn finish(mut self, rows: Range<u64>) {
        if self.full {
            return;
        }
        let bytes = std::mem::take(&mut self.bytes);
        let mut state = self.kept.state();
        if state.parts.iter().any(|part| part.rows == rows) {
            state.bytes = state.bytes.saturating_sub(bytes);
            return;
        }
        state.parts.push(KeptPart {
            rows,
            batches: std::mem::take(&mut self.batches),
            bytes,
        });
    }
}

impl Drop for KeyCollector<'_> {
    /// A part whose read failed gives back what it counted.
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.kept.release(self.bytes);
        }
    }
}

/// Puts kept key columns back among the other columns of whole rows, a batch at a time: the
/// kept batches hold the same rows in the same order, cut where the keys-only read cut them,
/// which need not be where the read of whole rows does (a counted join reads wide rows in
/// smaller batches).
pub(crate) struct KeyMerge {
    keys: VecDeque<RecordBatch>,
    /// For each column of a batch of whole rows, in order, whether it is a key column (taken
    /// from the kept batches) or another (from the batch decoded now); both in file order.
    from_keys: Vec<bool>,
    /// The merged batches' schema, made from the first pair of batches.
    schema: Option<SchemaRef>,
}

impl KeyMerge {
    pub(crate) fn new(keys: Vec<RecordBatch>, from_keys: Vec<bool>) -> KeyMerge {
        KeyMerge {
            keys: keys.into(),
            from_keys,
            schema: None,
        }
    }

    /// The next `rows` kept rows, as one batch: a slice of the next kept batch, or several
    /// joined; `None` where fewer are kept.
    fn next_keys(&mut self, rows: usize) -> Option<RecordBatch> {
        let mut parts = Vec::new();
        let mut missing = rows;
        while missing > 0 {
            let first = self.keys.pop_front()?;
            let taken = first.num_rows().min(missing);
            if taken < first.num_rows() {
                self.keys
                    .push_front(first.slice(taken, first.num_rows() - taken));
            }
            parts.push(first.slice(0, taken));
            missing -= taken;
        }
        match parts.len() {
            1 => parts.pop(),
            _ => concat_batches(&parts.first()?.schema(), &parts).ok(),
        }
    }

    /// `others` (the next batch of the other columns) with the same rows' kept key columns put
    /// back in place. Fewer kept rows than read means the file changed between the reads.
    pub(crate) fn merge(&mut self, path: &Path, others: RecordBatch) -> Result<RecordBatch> {
        let keys = self
            .next_keys(others.num_rows())
            .ok_or_else(|| changed_between_reads(path))?;
        let (key_schema, other_schema) = (keys.schema(), others.schema());
        let mut from_keys = key_schema.fields().iter().zip(keys.columns());
        let mut from_others = other_schema.fields().iter().zip(others.columns());
        let mut fields: Vec<FieldRef> = Vec::with_capacity(self.from_keys.len());
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.from_keys.len());
        for &is_key in &self.from_keys {
            let next = match is_key {
                true => from_keys.next(),
                false => from_others.next(),
            };
            let (field, column) = next.ok_or_else(|| {
                Error::Internal(format!(
                    "{}: kept key columns do not fit the columns read",
                    path.display()
                ))
            })?;
            if self.schema.is_none() {
                fields.push(Arc::clone(field));
            }
            columns.push(Arc::clone(column));
        }
        let schema = self.schema.get_or_insert_with(|| {
            Arc::new(Schema::new_with_metadata(
                fields,
                other_schema.metadata().clone(),
            ))
        });
        RecordBatch::try_new(Arc::clone(schema), columns).map_err(|error| {
            Error::Internal(format!(
                "{}: putting kept key columns back: {error}",
                path.display()
            ))
        })
    }

    /// Whether every kept row has been merged.
    pub(crate) fn is_done(&self) -> bool {
        self.keys.is_empty()
    }
}

/// The error of a read whose rows differ from those the file gave when its keys were read.
pub(crate) fn changed_between_reads(path: &Path) -> Error {
    Error::Input(format!(
        "{}: its rows changed between two reads: the file was rewritten while skewjoin read \
         it; run again on a file that is not being written",
        path.display()
    ))
}
