//! Counting output rows, with their checksum and live progress: [`OutputTally`], which every
//! sink that counts keeps (the CLI's, the cluster's, the browser build's), and [`CountSink`],
//! the sink that only counts.
//!
//! The checksum of a join's output is the wrapping sum of [`pair_checksum`] over its rows: it
//! does not depend on the order rows come in, so runs on any number of workers, processes and
//! strategies compare by it. A hot key's pairs arrive as groups (see
//! [`PairSink::lefts_with`]); a group is summed
//! a chunk of row hashes at a time, in a loop that runs eight pairs at once where the CPU has
//! AVX-512 ([`GroupChecksums`]), with its total in a register: most of the output's
//! speed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use skewjoin_operators::hash::{pair_checksum, GroupChecksums};

use crate::exec::{PairSink, RowValue};

/// Output rows a worker produces between updates of the shared progress counter.
pub const PROGRESS_EVERY: u64 = 1 << 20;

/// Output rows counted, with their checksum (see [`pair_checksum`]).
pub struct OutputTally {
    /// Rows counted.
    pub rows: u64,
    /// The wrapping sum of their [`pair_checksum`]s.
    pub checksum: u64,
    /// Where live progress is counted, in steps of [`PROGRESS_EVERY`] rows.
    progress: Option<Arc<AtomicU64>>,
    /// Sums a group's checksums, its row hashes gathered for the vectorised loop.
    groups: GroupChecksums,
}

impl OutputTally {
    /// Nothing counted yet.
    pub fn new(progress: Option<Arc<AtomicU64>>) -> OutputTally {
        OutputTally {
            rows: 0,
            checksum: 0,
            progress,
            groups: GroupChecksums::new(),
        }
    }

    /// One row, by the hashes of its left and right input rows.
    #[inline]
    pub fn row(&mut self, left: Option<u64>, right: Option<u64>) {
        self.add(1, pair_checksum(left, right));
    }

    /// The pairs of every left row hashed in `lefts` with the right row hashed `right`.
    #[inline]
    pub fn lefts_with(&mut self, lefts: impl ExactSizeIterator<Item = u64>, right: u64) {
        let count = lefts.len() as u64;
        let sum = self.groups.sum_lefts(lefts, right);
        self.add(count, sum);
    }

    /// The pairs of the left row hashed `left` with every right row hashed in `rights`.
    #[inline]
    pub fn left_with_rights(&mut self, left: u64, rights: impl ExactSizeIterator<Item = u64>) {
        let count = rights.len() as u64;
        let sum = self.groups.sum_rights(left, rights);
        self.add(count, sum);
    }

    /// Counts `count` rows whose checksums sum to `sum`, moving progress on by every step of
    /// [`PROGRESS_EVERY`] rows passed.
    #[inline]
    fn add(&mut self, count: u64, sum: u64) {
        let steps_before = self.rows / PROGRESS_EVERY;
        self.rows += count;
        self.checksum = self.checksum.wrapping_add(sum);
        let steps = self.rows / PROGRESS_EVERY - steps_before;
        if steps > 0 {
            if let Some(counter) = &self.progress {
                counter.fetch_add(steps * PROGRESS_EVERY, Ordering::Relaxed);
            }
        }
    }
}

impl Default for OutputTally {
    fn default() -> OutputTally {
        OutputTally::new(None)
    }
}

/// Output rows and their checksum: what a [`CountSink`] reports (and, on a cluster, sends to
/// process 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counted {
    /// Output rows.
    pub rows: u64,
    /// Their checksum (see [`pair_checksum`]).
    pub checksum: u64,
}

/// The sink that counts output rows and sums their checksum, whatever the rows carry.
///
/// ```
/// use skewjoin_planner::count_sink::{Counted, CountSink};
/// use skewjoin_planner::exec::{PairSink, RowRef};
///
/// let mut sink = CountSink::default();
/// let (a, b): (RowRef, RowRef) = ((0, 11), (1, 22));
/// sink.emit(Some(&a), Some(&b));
/// sink.lefts_with([a, a].iter(), &b);
/// let counted: Counted = PairSink::<RowRef>::finish(sink).unwrap();
/// assert_eq!(counted.rows, 3);
/// ```
#[derive(Default)]
pub struct CountSink(OutputTally);

impl CountSink {
    /// A sink that also moves `progress` on as it counts (see [`PROGRESS_EVERY`]).
    pub fn with_progress(progress: Option<Arc<AtomicU64>>) -> CountSink {
        CountSink(OutputTally::new(progress))
    }
}

impl<V: RowValue> PairSink<V> for CountSink {
    type Summary = Counted;

    #[inline]
    fn emit(&mut self, left: Option<&V>, right: Option<&V>) {
        self.0
            .row(left.map(RowValue::hash), right.map(RowValue::hash));
    }

    #[inline]
    fn lefts_with<'v>(&mut self, lefts: impl ExactSizeIterator<Item = &'v V>, right: &V) {
        self.0.lefts_with(lefts.map(RowValue::hash), right.hash());
    }

    #[inline]
    fn left_with_rights<'v>(&mut self, left: &V, rights: impl ExactSizeIterator<Item = &'v V>) {
        self.0
            .left_with_rights(left.hash(), rights.map(RowValue::hash));
    }

    fn finish(self) -> Result<Counted, String> {
        Ok(Counted {
            rows: self.0.rows,
            checksum: self.0.checksum,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skewjoin_operators::hash::hash_u64;

    #[test]
    fn groups_of_pairs_count_sum_and_report_progress_as_single_rows_do() {
        // More rows than one progress step, in groups that straddle the steps.
        let hashes: Vec<u64> = (0..1_500_000u64).map(hash_u64).collect();
        let other = hash_u64(1 << 40);
        let (cut_a, cut_b) = (700_000, 1_100_000);

        let row_progress = Arc::new(AtomicU64::new(0));
        let mut by_row = OutputTally::new(Some(Arc::clone(&row_progress)));
        for &left in &hashes[..cut_a] {
            by_row.row(Some(left), Some(other));
        }
        by_row.row(None, Some(other));
        for &right in &hashes[cut_a..cut_b] {
            by_row.row(Some(other), Some(right));
        }
        for &left in &hashes[cut_b..] {
            by_row.row(Some(left), Some(other));
        }

        let group_progress = Arc::new(AtomicU64::new(0));
        let mut by_group = OutputTally::new(Some(Arc::clone(&group_progress)));
        by_group.lefts_with(hashes[..cut_a].iter().copied(), other);
        by_group.row(None, Some(other));
        by_group.left_with_rights(other, hashes[cut_a..cut_b].iter().copied());
        by_group.lefts_with(hashes[cut_b..].iter().copied(), other);

        assert_eq!(by_row.rows, hashes.len() as u64 + 1);
        assert_eq!(by_group.rows, by_row.rows);
        assert_eq!(by_group.checksum, by_row.checksum);
        assert_eq!(row_progress.load(Ordering::Relaxed), PROGRESS_EVERY);
        assert_eq!(group_progress.load(Ordering::Relaxed), PROGRESS_EVERY);
    }

    #[test]
    fn groups_of_every_size_around_the_gathering_bounds_sum_as_rows_do() {
        let hashes: Vec<u64> = (0..600u64).map(hash_u64).collect();
        let other = hash_u64(7);
        for size in [0, 1, 15, 16, 17, 255, 256, 257, 511, 512, 600] {
            let group = &hashes[..size];
            let mut by_row = OutputTally::new(None);
            let mut by_group = OutputTally::new(None);
            for &hash in group {
                by_row.row(Some(hash), Some(other));
                by_row.row(Some(other), Some(hash));
            }
            by_group.lefts_with(group.iter().copied(), other);
            by_group.left_with_rights(other, group.iter().copied());
            assert_eq!(by_group.rows, by_row.rows, "{size}");
            assert_eq!(by_group.checksum, by_row.checksum, "{size}");
        }
    }
}
