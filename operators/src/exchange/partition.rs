//! Partitions and workers are separate: routing decides a partition `0..P`, and partition `p`
//! lives on worker `p % W`.
//!
//! Keeping the two apart lets one machine measure the balance of 32 or 128 partitions with two
//! worker threads, and lets the browser build host all `P` partitions on its single worker while
//! computing exactly the same per-partition figures as a native run.

use serde::{Deserialize, Serialize};

/// Where a routed record goes: one partition, or (for broadcast) every partition of one worker.
///
/// A broadcast is sent as one copy per *worker*, not per partition: the copy serves all of that
/// worker's partitions, which is what a real deployment would hold in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Dest(u64);

const ALL_OF_WORKER: u64 = 1 << 63;

impl Dest {
    /// To partition `partition`.
    #[inline]
    pub fn partition(partition: u32) -> Dest {
        Dest(partition as u64)
    }

    /// To every partition hosted by worker `worker`.
    #[inline]
    pub fn all_of_worker(worker: u32) -> Dest {
        Dest(ALL_OF_WORKER | worker as u64)
    }

    /// The partition, unless this is a broadcast copy.
    #[inline]
    pub fn as_partition(self) -> Option<u32> {
        (self.0 & ALL_OF_WORKER == 0).then_some(self.0 as u32)
    }

    /// The value the exchange pacts route on. Timely's and
    /// [`batch_exchange`](crate::batch_builder::batch_exchange) alike send hash `h` to worker
    /// `h % W` (a mask when W is a power of two, the same thing), so a partition goes to `p % W`
    /// and a broadcast copy to its worker.
    #[inline]
    pub fn exchange_hash(self) -> u64 {
        self.0 & !ALL_OF_WORKER
    }
}

/// How many partitions there are and how they map onto workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partitioning {
    partitions: u32,
    workers: u32,
}

impl Partitioning {
    /// The most partitions a join may be cut into, 2^20. Every partition has state on its
    /// worker and a line in the load report, and a million parts already measure balance far
    /// more finely than any strategy achieves; it also keeps partition numbers well inside the
    /// 32 bits that [`Dest`] and routing give them.
    pub const MAX_PARTITIONS: usize = 1 << 20;

    /// `partitions` partitions over `workers` workers; both at least 1, partitions at most
    /// [`MAX_PARTITIONS`](Partitioning::MAX_PARTITIONS) (callers check what users give).
    pub fn new(partitions: usize, workers: usize) -> Partitioning {
        assert!(partitions >= 1, "at least one partition is needed");
        assert!(workers >= 1, "at least one worker is needed");
        assert!(
            partitions <= Partitioning::MAX_PARTITIONS,
            "at most {} partitions, got {partitions}",
            Partitioning::MAX_PARTITIONS
        );
        let partitions = partitions as u32;
        let workers = u32::try_from(workers).expect("worker count fits in u32");
        Partitioning {
            partitions,
            workers,
        }
    }

    /// The number of partitions, P.
    #[inline]
    pub fn partitions(&self) -> usize {
        self.partitions as usize
    }

    /// The number of workers, W.
    #[inline]
    pub fn workers(&self) -> usize {
        self.workers as usize
    }

    /// The worker hosting `partition`.
    #[inline]
    pub fn owner(&self, partition: u32) -> usize {
        (partition % self.workers) as usize
    }

    /// The index of `partition` among its worker's partitions.
    #[inline]
    pub fn slot(&self, partition: u32) -> usize {
        (partition / self.workers) as usize
    }

    /// The partitions hosted by `worker`, in increasing order.
    pub fn local_partitions(&self, worker: usize) -> Vec<u32> {
        (worker as u32..self.partitions)
            .step_by(self.workers as usize)
            .collect()
    }

    /// The partition a hash value maps to. Multiply-shift uses the high bits of the hash, so the
    /// partition is independent of the low bits that `p % W` then looks at.
    #[inline]
    pub fn partition_of_hash(&self, hash: u64) -> u32 {
        ((hash as u128 * self.partitions as u128) >> 64) as u32
    }

    /// The partition of row `row` when `rows` rows are cut into P contiguous ranges of near-equal
    /// size: the "home" of an input row before any exchange.
    #[inline]
    pub fn partition_of_row(&self, row: u64, rows: u64) -> u32 {
        debug_assert!(row < rows);
        // Every input row is placed with this; a 128-bit division costs more than the rest of
        // the routing, so take it only when the 64-bit product would overflow.
        match (row + 1).checked_mul(self.partitions as u64) {
            Some(product) => ((product - 1) / rows) as u32,
            None => (((row as u128 + 1) * self.partitions as u128 - 1) / rows as u128) as u32,
        }
    }

    /// The rows `[start, end)` whose home is `partition`, for `rows` rows in all.
    pub fn rows_of_partition(&self, partition: u32, rows: u64) -> std::ops::Range<u64> {
        let start = (partition as u128 * rows as u128 / self.partitions as u128) as u64;
        let end = ((partition as u128 + 1) * rows as u128 / self.partitions as u128) as u64;
        start..end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_and_partitions_agree() {
        for partitions in 1..9 {
            let part = Partitioning::new(partitions, 3);
            for rows in 1..40u64 {
                let mut covered = 0;
                for p in 0..partitions as u32 {
                    let range = part.rows_of_partition(p, rows);
                    assert_eq!(range.start, covered);
                    covered = range.end;
                    for row in range {
                        assert_eq!(part.partition_of_row(row, rows), p);
                    }
                }
                assert_eq!(covered, rows);
            }
        }
    }

    #[test]
    fn destinations_route_to_owners() {
        let part = Partitioning::new(8, 3);
        for p in 0..8u32 {
            assert_eq!(Dest::partition(p).exchange_hash() % 3, part.owner(p) as u64);
            assert_eq!(Dest::partition(p).as_partition(), Some(p));
            assert!(part.local_partitions(part.owner(p)).contains(&p));
            assert_eq!(part.local_partitions(part.owner(p))[part.slot(p)], p);
        }
        assert_eq!(Dest::all_of_worker(2).exchange_hash(), 2);
        assert_eq!(Dest::all_of_worker(2).as_partition(), None);
    }

    #[test]
    fn hash_partitioning_covers_all_partitions() {
        let part = Partitioning::new(5, 2);
        let mut counts = [0u32; 5];
        for i in 0..5000u64 {
            counts[part.partition_of_hash(crate::hash::hash_u64(i)) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| c > 800), "{counts:?}");
    }
}
