//! The kernel's lookup over rows grouped elsewhere, for an index that owns its rows.

use super::slots::{groups_of_keys, tag, Group, Slot, Slots, LOOKUP_BATCH, NO_GROUP};
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
        for bounds in starts.windows(2) {
            let key = &rows[bounds[0]].0;
            debug_assert!(!key.is_null(), "NULL keys are not indexed");
            let tag = tag(key);
            let mut at = slots.home(tag);
            while slots.slots[at].tag != 0 {
                debug_assert!(
                    !(slots.slots[at].tag == tag && rows[slots.slots[at].start as usize].0 == *key),
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
