//! Where a record goes: its key's home worker, or the cells of its key's grid.

use crate::grid::Grid;

/// Which input a record comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Left records take one row of their key's grid.
    Left,
    /// Right records take one column.
    Right,
}

/// The salt of a record with value hash `hash`, one of `salts`: a hot key's records are
/// arranged (and matched with its plan) by `(key, salt)`, so that no worker holds all of them.
pub fn salt(hash: u64, salts: u32) -> u32 {
    (hash % u64::from(salts.max(1))) as u32
}

/// The cells of `grid` a record of `side` with value hash `hash` goes to. The row or column
/// comes from the hash's high half, independent of the salt taken from its low bits.
pub fn cells(side: Side, hash: u64, grid: Grid) -> impl Iterator<Item = u32> {
    let high = hash >> 32;
    let (rows, cols) = (grid.rows.max(1), grid.cols.max(1));
    let (start, step, count) = match side {
        // Row r: cells r * cols .. (r + 1) * cols.
        Side::Left => ((high % u64::from(rows)) as u32 * cols, 1, cols),
        // Column c: cells c, c + cols, c + 2 * cols, ...
        Side::Right => ((high % u64::from(cols)) as u32, cols, rows),
    };
    (0..count).map(move |i| start + i * step)
}

/// The worker of `cell` of the key with hash `key_hash`: cell 0 is on the key's home worker,
/// `key_hash % workers`, and the other cells of a grid (at most `workers` in all) follow it on
/// distinct workers.
pub fn worker(key_hash: u64, cell: u32, workers: usize) -> usize {
    ((key_hash % workers as u64 + u64::from(cell)) % workers as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_left_and_right_record_meet_in_exactly_one_cell() {
        for (rows, cols) in [(1, 1), (1, 4), (4, 1), (2, 3), (3, 2), (2, 4)] {
            let grid = Grid { rows, cols };
            for left_hash in [0u64, 7 << 32, 13 << 32 | 5, u64::MAX] {
                for right_hash in [0u64, 3 << 32, 11 << 32 | 9, u64::MAX - 1] {
                    let left: Vec<u32> = cells(Side::Left, left_hash, grid).collect();
                    let right: Vec<u32> = cells(Side::Right, right_hash, grid).collect();
                    assert_eq!(left.len() as u32, cols);
                    assert_eq!(right.len() as u32, rows);
                    let met = left.iter().filter(|c| right.contains(c)).count();
                    assert_eq!(met, 1, "{grid:?} {left:?} {right:?}");
                    assert!(left.iter().chain(&right).all(|&c| c < grid.cells()));
                }
            }
        }
    }

    #[test]
    fn the_cells_of_a_grid_are_on_distinct_workers() {
        for workers in 1..=8usize {
            for key_hash in [0u64, 5, 1 << 40, u64::MAX] {
                let mut seen: Vec<usize> = (0..workers as u32)
                    .map(|c| worker(key_hash, c, workers))
                    .collect();
                assert_eq!(seen[0], (key_hash % workers as u64) as usize);
                seen.sort();
                seen.dedup();
                assert_eq!(seen.len(), workers);
            }
        }
    }
}
