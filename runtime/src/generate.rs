//! Turns the planner's generated tables into Arrow batches, and loads them as join inputs
//! without touching the disk (for `demo`).

use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use skewjoin_operators::Key;
use skewjoin_planner::datagen::GenTable;

use crate::engine::SideData;
use crate::io::row_hashes;

/// A generated table as a batch with Int64 columns `key`, `id` and `value`.
pub fn to_batch(table: &GenTable) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("key", DataType::Int64, false),
        Field::new("id", DataType::Int64, false),
        Field::new("value", DataType::Int64, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(table.key.clone())),
            Arc::new(Int64Array::from(table.id.clone())),
            Arc::new(Int64Array::from(table.value.clone())),
        ],
    )
    .expect("three equal-length Int64 columns make a valid batch")
}

/// A generated table as a join input keyed on `key`, hashed exactly as if it had been written to
/// a file and read back, so checksums agree with `skewjoin join` on `skewjoin gen` output.
pub fn to_side(name: &str, table: &GenTable) -> SideData {
    let batch = to_batch(table);
    let hashes: Arc<[u64]> = row_hashes(&batch).into();
    SideData {
        name: name.to_string(),
        keys: table.key.iter().map(|&k| Key::Int(k)).collect(),
        hashes,
        batch,
    }
}

#[cfg(test)]
mod tests {
    use skewjoin_planner::datagen::{generate, GenSpec};
    use skewjoin_planner::row_hash::table_row_hashes;

    use super::*;

    /// The browser computes row hashes without Arrow; they must be the ones `join` computes from
    /// the files `gen` writes, or its checksums would not be comparable.
    #[test]
    fn planner_row_hashes_equal_the_runtime_row_hashes() {
        let pair = generate(&GenSpec {
            left_rows: 2000,
            right_rows: 1500,
            keys: 100,
            noise: 0.2,
            seed: 3,
            ..GenSpec::default()
        });
        for table in [&pair.left, &pair.right] {
            let side = to_side("t", table);
            assert_eq!(&*side.hashes, table_row_hashes(table).as_slice());
        }
        // Through a file too: what `join` actually reads back.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("left.parquet");
        crate::io::write_table(&path, crate::io::FileFormat::Parquet, &to_batch(&pair.left))
            .unwrap();
        let back = crate::io::read_table(&path, crate::io::FileFormat::Parquet).unwrap();
        assert_eq!(row_hashes(&back), table_row_hashes(&pair.left));
    }
}
