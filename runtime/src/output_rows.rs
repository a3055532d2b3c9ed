//! The output rows a worker has found and not yet assembled: pairs of row indices, handed out
//! grouped by blocks of the smaller side's rows.
//!
//! A worker finds its output in the order of its join's buckets (keys by hash), so consecutive
//! output rows come from anywhere in the stored inputs, and assembling a batch from them
//! (arrow's `interleave`, per column) misses the cache on nearly every row. Holding a window
//! of pairs and handing them out by block of the smaller side's rows makes the gathers from
//! that side walk forward, keeps the output rows of one smaller-side row together (in a join
//! on a foreign key, the rows that repeat it, which Parquet's dictionaries and zstd then
//! compress), and walks the larger side forward too where the two are stored in key order (as
//! TPC-H's lineitem and orders are). Ordered by the larger side instead, the repeated rows
//! were scattered: TPC-H orders x customer written took 2.33 s and 129 MB that way, 1.92 s and
//! 55 MB this way, 1.86 s and 67 MB in bucket order (BENCHMARKS.md). The output's row order is
//! not part of a join's result; the checksum and row count do not depend on it.

use skewjoin_operators::Side;

/// The row index that stands for "no row": the output row is padded with NULLs on that side.
pub const PAD: u32 = u32::MAX;

/// Pairs a worker holds before it orders and assembles them: 4 Mi pairs, 32 MiB (and as much
/// again to order them). A much smaller window leaves the gathers scattered: 1 Mi pairs
/// gained half as much on TPC-H SF1's lineitem x orders (6 million output rows).
pub const WINDOW_PAIRS: usize = 4 << 20;

/// Pairs all the workers of a process hold together at most: 16 Mi, 256 MiB with the buffers
/// that order them, so that many workers do not multiply the window.
pub const PROCESS_WINDOW_PAIRS: usize = 16 << 20;

/// The window of each of `workers` workers: [`WINDOW_PAIRS`], less where the workers would
/// hold more than [`PROCESS_WINDOW_PAIRS`] together, and a whole number of batches of
/// `batch_rows` (at least one), so that every batch a full window hands out is whole: the
/// runtime writes each as a row group of its own and sets aside only a worker's last.
pub fn window_pairs(workers: usize, batch_rows: usize) -> usize {
    let batch_rows = batch_rows.max(1);
    let share = WINDOW_PAIRS.min(PROCESS_WINDOW_PAIRS / workers.max(1));
    (share / batch_rows).max(1) * batch_rows
}

/// Blocks of rows are at least this many rows apart (1 Ki rows: a few pages of a column).
const MIN_BLOCK_SHIFT: u32 = 10;

/// At most this many blocks, so that counting them stays cheap for any table size.
const MAX_BLOCK_BITS: u32 = 16;

/// Output rows waiting to be assembled: see the module's documentation.
pub struct OutputRows {
    /// Each pair packed as `ordering row << 32 | other row`.
    pairs: Vec<u64>,
    /// Whether the left side's rows order the output (it is the smaller side).
    by_left: bool,
    /// A row's block is `row >> block_shift`, of `blocks`; padding goes after every block.
    block_shift: u32,
    blocks: usize,
    window: usize,
    /// Reused between drains: the pairs in block order, block offsets, one batch's rows.
    ordered: Vec<u64>,
    offsets: Vec<usize>,
    left: Vec<u32>,
    right: Vec<u32>,
}

impl OutputRows {
    /// Output rows of a join of a `left_rows`-row and a `right_rows`-row table, holding
    /// `window` pairs at most before [`push`](Self::push) says it is full.
    pub fn new(left_rows: u64, right_rows: u64, window: usize) -> OutputRows {
        let ordering = left_rows.min(right_rows);
        let bits = u64::BITS - ordering.leading_zeros();
        let block_shift = bits.saturating_sub(MAX_BLOCK_BITS).max(MIN_BLOCK_SHIFT);
        OutputRows {
            pairs: Vec::new(),
            by_left: left_rows <= right_rows,
            block_shift,
            blocks: (ordering >> block_shift) as usize + 1,
            window: window.max(1),
            ordered: Vec::new(),
            offsets: Vec::new(),
            left: Vec::new(),
            right: Vec::new(),
        }
    }

    /// Holds output row (`left`, `right`), either [`PAD`]; true when the window is full.
    #[inline]
    pub fn push(&mut self, left: u32, right: u32) -> bool {
        let (first, second) = if self.by_left {
            (left, right)
        } else {
            (right, left)
        };
        self.pairs
            .push((u64::from(first) << 32) | u64::from(second));
        self.pairs.len() >= self.window
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// Which side's rows order the output.
    pub fn ordering_side(&self) -> Side {
        if self.by_left {
            Side::Left
        } else {
            Side::Right
        }
    }

    /// Hands every held row to `assemble` in batches of at most `batch_rows` rows, as
    /// (left rows, right rows, whether it is the last batch), grouped by block of the ordering
    /// side's rows (in arrival order within a block), and empties the window. Stops at the
    /// first error, which it returns; the rows are dropped either way.
    pub fn drain<E>(
        &mut self,
        batch_rows: usize,
        mut assemble: impl FnMut(&[u32], &[u32], bool) -> Result<(), E>,
    ) -> Result<(), E> {
        self.order();
        let batch_rows = batch_rows.max(1);
        let count = self.ordered.len().div_ceil(batch_rows);
        let mut result = Ok(());
        for (index, chunk) in self.ordered.chunks(batch_rows).enumerate() {
            self.left.clear();
            self.right.clear();
            let (first, second) = if self.by_left {
                (&mut self.left, &mut self.right)
            } else {
                (&mut self.right, &mut self.left)
            };
            for &pair in chunk {
                first.push((pair >> 32) as u32);
                second.push(pair as u32);
            }
            result = assemble(&self.left, &self.right, index + 1 == count);
            if result.is_err() {
                break;
            }
        }
        self.ordered.clear();
        result
    }

    /// Moves the pairs into `ordered` by block of the ordering row: a counting sort, linear
    /// in the pairs and the blocks.
    fn order(&mut self) {
        let (shift, padding) = (self.block_shift, self.blocks);
        // Rows past the ordering side's count cannot occur; were one to, it would join the last
        // block rather than index out of bounds.
        let block = |pair: u64| match (pair >> 32) as u32 {
            PAD => padding,
            row => ((row >> shift) as usize).min(padding - 1),
        };
        self.offsets.clear();
        self.offsets.resize(padding + 2, 0);
        for &pair in &self.pairs {
            self.offsets[block(pair) + 1] += 1;
        }
        for index in 1..self.offsets.len() {
            self.offsets[index] += self.offsets[index - 1];
        }
        self.ordered.clear();
        self.ordered.resize(self.pairs.len(), 0);
        for &pair in &self.pairs {
            let slot = &mut self.offsets[block(pair)];
            self.ordered[*slot] = pair;
            *slot += 1;
        }
        self.pairs.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drained(rows: &mut OutputRows, batch_rows: usize) -> Vec<(Vec<u32>, Vec<u32>, bool)> {
        let mut batches = Vec::new();
        rows.drain(batch_rows, |left, right, last| {
            batches.push((left.to_vec(), right.to_vec(), last));
            Ok::<(), ()>(())
        })
        .unwrap();
        batches
    }

    #[test]
    fn every_pair_comes_out_once_grouped_by_the_smaller_sides_block() {
        // The left side is smaller: its rows order the output, 1 Ki rows to a block.
        let mut rows = OutputRows::new(5000, 1 << 20, 1 << 20);
        let input: Vec<(u32, u32)> = vec![
            (4000, 1),
            (10, PAD),
            (PAD, 2),
            (1500, 3),
            (12, 4),
            (4001, 5),
            (1100, 6),
        ];
        for &(left, right) in &input {
            assert!(!rows.push(left, right));
        }
        assert_eq!(rows.ordering_side(), Side::Left);
        let batches = drained(&mut rows, 3);
        assert_eq!(
            batches.iter().map(|batch| batch.2).collect::<Vec<_>>(),
            [false, false, true]
        );
        let out: Vec<(u32, u32)> = batches
            .iter()
            .flat_map(|(left, right, _)| left.iter().copied().zip(right.iter().copied()))
            .collect();
        // Blocks 0 (rows 10, 12), 1 (1500, 1100), 3 (4000, 4001), then padding; arrival
        // order within a block.
        assert_eq!(
            out,
            [
                (10, PAD),
                (12, 4),
                (1500, 3),
                (1100, 6),
                (4000, 1),
                (4001, 5),
                (PAD, 2)
            ]
        );
        assert!(rows.is_empty());
        assert!(drained(&mut rows, 3).is_empty());
    }

    #[test]
    fn a_full_window_hands_out_whole_batches_and_many_workers_share_a_bound() {
        let batch = 64 * 1024;
        assert_eq!(window_pairs(2, batch), WINDOW_PAIRS);
        assert_eq!(window_pairs(8, batch), PROCESS_WINDOW_PAIRS / 8);
        assert_eq!(window_pairs(1000, batch), batch);
        assert_eq!(window_pairs(3, 1000) % 1000, 0);
        for workers in [1, 2, 3, 4, 8, 16, 64] {
            let window = window_pairs(workers, batch);
            assert_eq!(window % batch, 0, "{workers} workers");
            assert!(window * workers <= PROCESS_WINDOW_PAIRS.max(batch * workers));
        }
        // A window of three batches of 2 rows hands out three whole batches.
        let mut rows = OutputRows::new(10, 10, window_pairs(1, 2).min(6));
        let mut full = false;
        for row in 0..6 {
            full = rows.push(row, 9 - row);
        }
        assert!(full);
        let sizes: Vec<usize> = drained(&mut rows, 2).iter().map(|b| b.0.len()).collect();
        assert_eq!(sizes, [2, 2, 2]);
    }

    #[test]
    fn the_window_fills_and_an_error_stops_the_drain() {
        let mut rows = OutputRows::new(1 << 40, 1 << 33, 3);
        assert_eq!(rows.ordering_side(), Side::Right);
        assert!(!rows.push(0, u32::MAX - 1));
        assert!(!rows.push(1, 0));
        assert!(rows.push(PAD, 7));
        let mut calls = 0;
        let result = rows.drain(1, |_, right, _| {
            calls += 1;
            if right == [7] {
                Err(right[0])
            } else {
                Ok(())
            }
        });
        // Blocks of 2^18 rows for a table of 2^33 rows: 0 and 7 share block 0.
        assert_eq!((result, calls), (Err(7), 2));
        assert!(rows.is_empty());
    }
}
