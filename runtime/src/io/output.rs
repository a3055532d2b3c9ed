//! Assembling output rows from the inputs' columns.

use std::ops::Range;
use std::sync::{Arc, OnceLock};

use arrow::array::{
    new_empty_array, new_null_array, Array, ArrayRef, RecordBatch, RecordBatchOptions, UInt32Array,
};
use arrow::buffer::NullBuffer;
use arrow::compute::{interleave, take};
use arrow::datatypes::{Field, Schema, SchemaRef};
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;
use skewjoin_operators::{JoinType, Side};

use crate::error::{Error, Result};

use crate::output_rows::PAD;

/// The output schema of a join: the left columns, then the right columns, of the sides that `how`
/// outputs. A right column whose name is a left column's gets the suffix `_right` (or `_right2`,
/// `_right3`, ... when that is taken too). A name an input repeats (a CSV header may) is kept by
/// its first column and the others get `_2`, `_3`, ...: an output whose columns share a name
/// cannot be read back by name (Polars refuses such a file). The columns of a side that may be
/// padded with NULLs (because the other side keeps unmatched rows) are nullable. An input
/// column's Parquet field id is not kept: the output is a new table, and both inputs number
/// their columns from 1, so kept ids would give two columns one id (a reader that resolves
/// columns by id, as Iceberg's do, would read one for the other).
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
                let mut field = field.as_ref().clone().with_nullable(nullable);
                field.metadata_mut().remove(PARQUET_FIELD_ID_META_KEY);
                field
            })
            .collect()
    };
    let mut fields = side_fields(left, Side::Left);
    let mut right_fields = side_fields(right, Side::Right);

    // A new name must not collide with any column of either side, so that renaming one column
    // never shadows another.
    let mut taken: std::collections::HashSet<String> = fields
        .iter()
        .chain(&right_fields)
        .map(|field| field.name().clone())
        .collect();
    // The first of `candidates` no column has, now taken.
    fn claim(
        taken: &mut std::collections::HashSet<String>,
        mut candidates: impl Iterator<Item = String>,
    ) -> String {
        let name = candidates
            .find(|candidate| !taken.contains(candidate))
            .expect("an unbounded sequence of names has a free one");
        taken.insert(name.clone());
        name
    }
    for side_fields in [&mut fields, &mut right_fields] {
        let mut seen = std::collections::HashSet::new();
        for field in side_fields.iter_mut() {
            if !seen.insert(field.name().clone()) {
                let base = field.name().clone();
                let name = claim(&mut taken, (2..).map(|n| format!("{base}_{n}")));
                *field = field.clone().with_name(name);
            }
        }
    }
    let left_names: std::collections::HashSet<&str> =
        fields.iter().map(|field| field.name().as_str()).collect();
    let mut renamed = Vec::with_capacity(right_fields.len());
    for field in right_fields {
        if !left_names.contains(field.name().as_str()) {
            renamed.push(field);
            continue;
        }
        let base = format!("{}_right", field.name());
        let name = claim(
            &mut taken,
            std::iter::once(base.clone()).chain((2..).map(|n| format!("{base}{n}"))),
        );
        renamed.push(field.with_name(name));
    }
    fields.extend(renamed);
    Arc::new(Schema::new(fields))
}

/// The rows of one input, for assembling output rows: the whole table as one batch, batches of
/// any lengths handed over whole, or the batches of a streamed input, filled in as its workers
/// read their parts of it ([`parts`](RowStore::parts)).
#[derive(Debug)]
pub struct RowStore {
    schema: SchemaRef,
    rows: u64,
    chunks: Vec<OnceLock<RecordBatch>>,
    /// The first row of each chunk and, last, the row count.
    starts: Vec<u64>,
    /// The row hashes of each chunk where they are kept ([`put`](Self::put)):
    /// those of a side held while the other is read twice, for the checksum of the output
    /// written after the join. Each is held as it is read, so the store grows with the rows read,
    /// not with the count a file claims.
    hashes: Vec<OnceLock<Vec<u64>>>,
}

impl RowStore {
    /// A store holding `batch`, complete.
    pub fn whole(batch: RecordBatch) -> RowStore {
        let rows = batch.num_rows() as u64;
        RowStore {
            schema: batch.schema(),
            rows,
            chunks: vec![OnceLock::from(batch)],
            starts: vec![0, rows],
            hashes: Vec::new(),
        }
    }

    /// A store holding `batches` (all of `schema`), complete, as they are: a table handed over
    /// in batches of any lengths is not copied into one.
    pub fn batches(schema: SchemaRef, batches: Vec<RecordBatch>) -> RowStore {
        if let [_] = batches.as_slice() {
            return RowStore::whole(batches.into_iter().next().expect("one batch"));
        }
        let mut starts = Vec::with_capacity(batches.len() + 1);
        let mut rows = 0u64;
        for batch in &batches {
            starts.push(rows);
            rows += batch.num_rows() as u64;
        }
        starts.push(rows);
        RowStore {
            schema,
            rows,
            chunks: batches.into_iter().map(OnceLock::from).collect(),
            starts,
            hashes: Vec::new(),
        }
    }

    /// How many rows the store holds (read or not).
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The chunk holding row `row`, and the row's place in it.
    #[inline]
    fn locate(&self, row: u64) -> (usize, usize) {
        // The last chunk starting at or before `row` (empty batches start where the next does).
        let chunk = self.starts.partition_point(|&start| start <= row) - 1;
        (chunk, (row - self.starts[chunk]) as usize)
    }

    /// An empty store for the rows of `parts` of `schema`, to be filled with [`put`](Self::put)
    /// as the parts are read: `parts` are consecutive runs of rows from row 0 on (some may be
    /// empty), each read in batches of `chunk_rows` rows from its start (its last may be
    /// shorter), as a worker reads its part of a side
    /// ([`split_at_cuts`](skewjoin_planner::exec_stream::split_at_cuts)). A part need not start
    /// at a multiple of `chunk_rows`: row groups of any size can be read by several workers.
    pub fn parts(schema: SchemaRef, parts: &[Range<u64>], chunk_rows: usize) -> RowStore {
        let mut starts = Vec::new();
        for part in parts {
            starts.extend((part.start..part.end).step_by(chunk_rows.max(1)));
        }
        let rows = parts.last().map_or(0, |part| part.end);
        starts.push(rows);
        RowStore {
            schema,
            rows,
            chunks: (1..starts.len()).map(|_| OnceLock::new()).collect(),
            hashes: (1..starts.len()).map(|_| OnceLock::new()).collect(),
            starts,
        }
    }

    /// Stores the batch whose first row is row `first` of the side, and its rows' hashes where
    /// they are kept (see [`hash`](Self::hash)). A batch that does not start a chunk, or of the
    /// wrong length or schema, or one stored twice, or hashes not one per row, are
    /// [`Error::Internal`]: only a bug can cause it.
    pub fn put(&self, first: u64, batch: RecordBatch, hashes: Option<Vec<u64>>) -> Result<()> {
        let starts = &self.starts;
        let rows = batch.num_rows();
        let fits = |&index: &usize| {
            starts[index + 1] - first == rows as u64
                && batch.schema().fields() == self.schema.fields()
                && hashes.as_ref().is_none_or(|hashes| hashes.len() == rows)
        };
        let stored = starts[..starts.len() - 1]
            .binary_search(&first)
            .ok()
            .filter(fits)
            .and_then(|index| {
                let hashes = match hashes {
                    Some(hashes) => self.hashes.get(index)?.set(hashes).ok(),
                    None => Some(()),
                };
                hashes.and_then(|()| self.chunks.get(index)?.set(batch).ok())
            });
        stored.ok_or_else(|| {
            Error::Internal(format!(
                "a batch of an input starting at row {first} does not fit its place"
            ))
        })
    }

    /// The hash of row `row`, as [`put`](Self::put) kept it; one not kept (or a row past the
    /// store) is [`Error::Internal`].
    pub fn hash(&self, row: u64) -> Result<u64> {
        (row < self.rows)
            .then(|| self.locate(row))
            .and_then(|(chunk, at)| self.hashes.get(chunk)?.get()?.get(at).copied())
            .ok_or_else(|| Error::Internal(format!("the hash of input row {row} was not kept")))
    }

    /// Appends the columns of the rows `rows` (with `PAD` as NULL) to `columns`.
    fn take(&self, side: Side, rows: &[u32], columns: &mut Vec<ArrayRef>) -> Result<()> {
        let len = self.rows;
        if let Some(&bad) = rows
            .iter()
            .find(|&&row| row != PAD && u64::from(row) >= len)
        {
            return Err(Error::Internal(format!(
                "join output refers to {side} row {bad}, but the {side} side has {len} rows"
            )));
        }
        let padded = rows.contains(&PAD);
        if len == 0 {
            // Nothing to take from: every row is padding.
            columns.extend(
                self.schema
                    .fields()
                    .iter()
                    .map(|field| new_null_array(field.data_type(), rows.len())),
            );
            return Ok(());
        }
        let missing = |index: usize| {
            Error::Internal(format!(
                "join output refers to {side} rows of chunk {index}, which was not read yet"
            ))
        };
        if let [only] = self.chunks.as_slice() {
            let batch = only.get().ok_or_else(|| missing(0))?;
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
            return Ok(());
        }
        // Several chunks: (chunk, row) pairs, with padding taken from a one-row NULL array
        // placed after the chunks.
        let pad_source = self.chunks.len();
        let indices: Vec<(usize, usize)> = rows
            .iter()
            .map(|&row| match row {
                PAD => (pad_source, 0),
                row => self.locate(u64::from(row)),
            })
            .collect();
        if let Some(&(index, _)) = indices
            .iter()
            .find(|&&(index, _)| index != pad_source && self.chunks[index].get().is_none())
        {
            return Err(missing(index));
        }
        for (column, field) in self.schema.fields().iter().enumerate() {
            let pad = new_null_array(field.data_type(), 1);
            let unread = new_empty_array(field.data_type());
            let sources: Vec<&dyn Array> = self
                .chunks
                .iter()
                .map(|chunk| {
                    chunk
                        .get()
                        .map_or(unread.as_ref(), |batch| batch.column(column).as_ref())
                })
                .chain([pad.as_ref()])
                .collect();
            let taken = interleave(&sources, &indices).map_err(|error| {
                Error::Internal(format!(
                    "taking {side} rows for join output failed: {error}"
                ))
            })?;
            columns.push(taken);
        }
        Ok(())
    }
}

/// Builds one output batch of a join with `schema` (from [`output_schema`]): output row `i` is
/// left row `left_rows[i]` and right row `right_rows[i]`, where `u32::MAX` pads that side with
/// NULLs. The rows of a side that `how` does not output are ignored (the slice may be empty).
/// Inconsistent arguments are [`Error::Internal`]: they can only come from a bug.
pub fn take_output(
    schema: &SchemaRef,
    how: JoinType,
    left: &RowStore,
    right: &RowStore,
    left_rows: &[u32],
    right_rows: &[u32],
) -> Result<RecordBatch> {
    let sides = [
        (Side::Left, left, left_rows),
        (Side::Right, right, right_rows),
    ];
    let mut num_rows = None;
    let mut columns = Vec::with_capacity(schema.fields().len());
    for (side, store, rows) in sides {
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
        store.take(side, rows, &mut columns)?;
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

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------
