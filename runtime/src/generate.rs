//! Turns the planner's generated tables (the plain pair and the Pavlo web-log pair) into Arrow
//! batches, and loads them as join inputs without touching the disk (for `demo`).

use std::sync::Arc;

use arrow::array::{ArrayRef, Date32Array, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use skewjoin_operators::Key;
use skewjoin_planner::datagen::pavlo::{Rankings, UserVisits};
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

/// The generated `rankings` table: `pageURL` (Utf8), `pageRank`, `avgDuration` (Int64).
pub fn rankings_batch(table: &Rankings) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("pageURL", DataType::Utf8, false),
        Field::new("pageRank", DataType::Int64, false),
        Field::new("avgDuration", DataType::Int64, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(table.page_url.clone())),
            Arc::new(Int64Array::from(table.page_rank.clone())),
            Arc::new(Int64Array::from(table.avg_duration.clone())),
        ],
    )
    .expect("equal-length columns of the declared types make a valid batch")
}

/// The generated `uservisits` table, with the benchmark's columns: `visitDate` is a Date32,
/// `adRevenue` a Float64, `duration` an Int64, the rest Utf8.
pub fn uservisits_batch(table: &UserVisits) -> RecordBatch {
    let text = |name: &str| Field::new(name, DataType::Utf8, false);
    let schema = Arc::new(Schema::new(vec![
        text("sourceIP"),
        text("destURL"),
        Field::new("visitDate", DataType::Date32, false),
        Field::new("adRevenue", DataType::Float64, false),
        text("userAgent"),
        text("countryCode"),
        text("languageCode"),
        text("searchWord"),
        Field::new("duration", DataType::Int64, false),
    ]));
    let strings =
        |column: &Vec<String>| -> ArrayRef { Arc::new(StringArray::from(column.clone())) };
    RecordBatch::try_new(
        schema,
        vec![
            strings(&table.source_ip),
            strings(&table.dest_url),
            Arc::new(Date32Array::from(table.visit_date.clone())),
            Arc::new(Float64Array::from(table.ad_revenue.clone())),
            strings(&table.user_agent),
            strings(&table.country_code),
            strings(&table.language_code),
            strings(&table.search_word),
            Arc::new(Int64Array::from(table.duration.clone())),
        ],
    )
    .expect("equal-length columns of the declared types make a valid batch")
}

/// A generated table as a join input keyed on `key`, hashed exactly as if it had been written to
/// a file and read back, so checksums agree with `skewjoin join` on `skewjoin gen` output.
pub fn to_side(name: &str, table: &GenTable) -> SideData {
    let batch = to_batch(table);
    let hashes: Arc<[u64]> = row_hashes(&batch).into();
    SideData {
        name: name.to_string(),
        schema: batch.schema(),
        keys: table.key.iter().map(|&k| Key::Int(k)).collect(),
        hashes,
        batches: vec![batch],
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
