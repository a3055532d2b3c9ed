//! Row hashes of generated tables without Arrow: what the runtime's `row_hashes` computes for a
//! row of non-NULL Int64 columns, so that the browser's checksums equal `skewjoin join`'s on the
//! files `skewjoin gen` writes.
//!
//! The runtime feeds each value of a row, column by column, into one [`StableHasher`] in a
//! canonical encoding; for a non-NULL integer that is its value as `i64` bits (one `write_u64`).
//! A generated table has the Int64 columns `key`, `id`, `value`, in that order.
//!
//! ```
//! use skewjoin_planner::row_hash::int64_row_hash;
//! assert_ne!(int64_row_hash(&[1, 2, 3]), int64_row_hash(&[1, 3, 2]));
//! ```

use skewjoin_operators::hash::StableHasher;

use crate::datagen::GenTable;

/// The runtime's row hash of a row whose columns are the non-NULL Int64 `values`, in order.
#[inline]
pub fn int64_row_hash(values: &[i64]) -> u64 {
    let mut hasher = StableHasher::new();
    for &value in values {
        hasher.write_u64(value as u64);
    }
    hasher.finish()
}

/// The row hash of every row of a generated table (columns `key`, `id`, `value`).
pub fn table_row_hashes(table: &GenTable) -> Vec<u64> {
    (0..table.len())
        .map(|row| int64_row_hash(&[table.key[row], table.id[row], table.value[row]]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_depend_on_every_column_and_the_order() {
        let table = GenTable {
            key: vec![1, 1, 2],
            id: vec![0, 1, 0],
            value: vec![5, 5, 5],
        };
        let hashes = table_row_hashes(&table);
        assert_eq!(hashes.len(), 3);
        assert_ne!(hashes[0], hashes[1]);
        assert_ne!(hashes[0], hashes[2]);
        assert_eq!(hashes[0], int64_row_hash(&[1, 0, 5]));
        assert_ne!(int64_row_hash(&[0, 5, 1]), hashes[0]);
        // An empty row is the hasher's initial state, finished.
        assert_eq!(int64_row_hash(&[]), StableHasher::new().finish());
    }
}
