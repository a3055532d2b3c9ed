//! What several of the binary's test files read back from its outputs, written once.
//!
//! Each test file is a crate of its own that includes this module (`mod common;`) and uses
//! only part of it.
#![allow(dead_code)]

use std::fs::File;
use std::path::Path;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// A row as text: each value as Arrow casts it to a string, `None` for NULL.
pub type TextRow = Vec<Option<String>>;

/// The rows of Arrow batches, in order, each value cast to text.
pub fn text_rows(batches: &[RecordBatch]) -> Vec<TextRow> {
    let mut rows = Vec::new();
    for batch in batches {
        let texts: Vec<ArrayRef> = batch
            .columns()
            .iter()
            .map(|column| cast(column, &DataType::Utf8).unwrap())
            .collect();
        for row in 0..batch.num_rows() {
            rows.push(
                texts
                    .iter()
                    .map(|column| {
                        let column = column.as_string::<i32>();
                        column.is_valid(row).then(|| column.value(row).to_string())
                    })
                    .collect(),
            );
        }
    }
    rows
}

/// Every row of a set of Parquet files as text, sorted: equal exactly when the multisets are.
pub fn sorted_parquet_rows(paths: &[impl AsRef<Path>]) -> Vec<TextRow> {
    let mut rows = Vec::new();
    for path in paths {
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
            .unwrap()
            .build()
            .unwrap();
        let batches: Vec<RecordBatch> = reader.map(Result::unwrap).collect();
        rows.extend(text_rows(&batches));
    }
    rows.sort();
    rows
}
