//! The kernel's lookup over rows grouped elsewhere, for an index that owns its rows.

use super::slots::{groups_of_keys, prefetch, tag, Group, Slot, Slots, LOOKUP_BATCH, NO_GROUP};
use crate::key::JoinKey;

/// The lookup of a [`BuildTable`](crate::kernel::BuildTable) over rows that its owner keeps
/// grouped by key (each key's rows one contiguous run, no NULL keys), for an index that outlives
/// any borrow of them: IB-Join's broadcast small side, which every large record probes. Keys are
/// found in batches whose cache misses overlap, as the kernel's probe finds them.
pub struct GroupedKeys {
    slots: Slots,
}

impl GroupedKeys {
    /// Rows per batch of [`groups_of`](Self::groups_of).
    pub const BATCH: usize = LOOKUP_BATCH;

    /// The lookup over `rows`, whose group `g` is `rows[starts[g]..starts[g + 1]]`.
    pub fn new<K: JoinKey, V>(rows: &[(K, V)], starts: &[usize]) -> Self {
        assert!(rows.len() < NO_GROUP as usize, "too many rows to index");
        let groups = starts.len().saturating_sub(1);
        let mut slots = Slots::for_groups(groups);
        // A batch of keys' home slots is prefetched before any is filled: rows come in key order,
        // so their slots in random order, and each insert waited alone on its miss. On TPC-H
        // lineitem x partsupp (800,000 small keys, indexed by each worker) that load was 94 % of
        // the index's construction and 7 % of the join's CPU.
        let mut tags = [0u32; LOOKUP_BATCH];
        for first in (0..groups).step_by(LOOKUP_BATCH) {
            let batch = &starts[first..=(first + LOOKUP_BATCH).min(groups)];
            for (bounds, tag_of) in batch.windows(2).zip(&mut tags) {
                *tag_of = tag(&rows[bounds[0]].0);
                prefetch(&slots.slots[slots.home(*tag_of)]);
            }
            for (bounds, &tag) in batch.windows(2).zip(&tags) {
                let key = &rows[bounds[0]].0;
                debug_assert!(!key.is_null(), "NULL keys are not indexed");
                let mut at = slots.home(tag);
                while slots.slots[at].tag != 0 {
                    debug_assert!(
                        !(slots.slots[at].tag == tag
                            && rows[slots.slots[at].start as usize].0 == *key),
                        "a key in two groups: the rows are not grouped"
                    );
                    at = slots.next(at);
                }
                let slot = Slot {
                    tag,
                    start: bounds[0] as u32,
                    end: bounds[1] as u32,
                };
                slots.fill(at, slot);
            }
        }
        GroupedKeys { slots }
    }

    /// The groups of up to [`BATCH`](Self::BATCH) keys (`None`: no key, nothing found) in
    /// `rows`, the rows this lookup was made over, into `found`.
    #[inline]
    pub fn groups_of<K: JoinKey, V>(
        &self,
        rows: &[(K, V)],
        keys: &[Option<&K>],
        found: &mut [Option<Group>],
    ) {
        groups_of_keys(&self.slots, rows, keys, |key| *key, found);
    }
}
