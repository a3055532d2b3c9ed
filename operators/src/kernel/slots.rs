//! The kernel's hash table: open addressing over 12-byte slots, each naming one key's run of
//! rows, and the batched lookups whose cache misses overlap.

use crate::hash::mix64;
use crate::key::JoinKey;

/// The group number of rows with NULL keys, which belong to no group; row numbers stay below it.
pub(super) const NO_GROUP: u32 = u32::MAX;

/// Rows looked up together, before any of them inserts or emits.
pub(super) const LOOKUP_BATCH: usize = 32;

/// One key's rows in a [`BuildTable`](crate::kernel::BuildTable) or over the rows of a
/// [`GroupedKeys`](crate::kernel::GroupedKeys): a run of its rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Group {
    pub(super) start: u32,
    pub(super) end: u32,
}

impl Group {
    /// The positions of the group's rows.
    #[inline]
    pub fn rows(&self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

/// One slot of a [`BuildTable`](crate::kernel::BuildTable)'s table.
#[derive(Clone, Copy, Default)]
pub(super) struct Slot {
    /// The key's [`tag`], never 0; 0 marks an empty slot.
    pub(super) tag: u32,
    /// While the rows are numbered, the group's number; then the first row of its run.
    pub(super) start: u32,
    /// While the rows are numbered, the group's first row; then the end of its run.
    pub(super) end: u32,
}

/// A key's 32-bit tag: where its slot search starts (the high bits) and what slots are compared
/// by before the keys are. The stable hash is mixed again because partitions are cut by its high
/// bits, so within one partition those are alike.
#[inline]
pub(super) fn tag<K: JoinKey>(key: &K) -> u32 {
    ((mix64(key.stable_hash()) >> 32) as u32) | 1
}

/// Asks the CPU to start loading `item`'s cache line. Issued on x86_64 only; on every other
/// target, aarch64 included (whose `PRFM` is not yet a stable intrinsic), it does nothing. Any
/// address will do, also one past an allocation's end.
#[inline(always)]
pub(super) fn prefetch<T>(item: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it cannot fault and changes nothing the program sees.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(item.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = item;
}

/// [`prefetch`]es the first and the last cache line of `row` (every line of a row of up to 64
/// bytes), which differ where the row straddles two. Rows lie at their vector's alignment, not
/// a line's: 32-byte rows from an allocation that starts 16 or 48 bytes into a line (glibc's
/// mapped chunks start 16 bytes past a page) alternate, every other row straddling two lines,
/// and a probe that compared the key in one line then read the value from the next waited on
/// that one.
#[inline(always)]
pub(super) fn prefetch_row<T>(row: &T) {
    let first = (row as *const T).cast::<u8>();
    prefetch(first);
    prefetch(first.wrapping_add(size_of::<T>().max(1) - 1));
}

/// Open addressing with linear probing over a power-of-two number of slots, at most
/// [`MAX_LOAD`] full; a key's search starts at the slot its tag's high bits name, so growing
/// needs the tags only.
pub(super) struct Slots {
    pub(super) slots: Vec<Slot>,
    /// `32 - log2(slots.len())`.
    shift: u32,
    used: usize,
}

/// The fullest a table gets before it doubles, as used slots per ten.
const MAX_LOAD: usize = 7;

impl Slots {
    pub(super) fn for_groups(groups: usize) -> Self {
        let capacity = (groups * 10 / MAX_LOAD + 1).next_power_of_two().max(16);
        assert!(capacity <= 1 << 31, "too many keys for one partition");
        Slots {
            slots: vec![Slot::default(); capacity],
            shift: 32 - capacity.trailing_zeros(),
            used: 0,
        }
    }

    #[inline]
    pub(super) fn home(&self, tag: u32) -> usize {
        (tag >> self.shift) as usize
    }

    #[inline]
    pub(super) fn next(&self, at: usize) -> usize {
        (at + 1) & (self.slots.len() - 1)
    }

    /// The first slot with this tag, if one comes before an empty slot: the likely slot of the
    /// key, to prefetch its row.
    #[inline]
    pub(super) fn candidate(&self, tag: u32) -> Option<&Slot> {
        let mut at = self.home(tag);
        loop {
            let slot = &self.slots[at];
            if slot.tag == tag {
                return Some(slot);
            }
            if slot.tag == 0 {
                return None;
            }
            at = self.next(at);
        }
    }

    /// Fills the empty slot `at`, growing the table if that made it too full.
    #[inline]
    pub(super) fn fill(&mut self, at: usize, slot: Slot) {
        self.slots[at] = slot;
        self.used += 1;
        if self.used * 10 > self.slots.len() * MAX_LOAD {
            let mut grown = Slots::for_groups(self.slots.len());
            for &slot in self.slots.iter().filter(|slot| slot.tag != 0) {
                let mut at = grown.home(slot.tag);
                while grown.slots[at].tag != 0 {
                    at = grown.next(at);
                }
                grown.slots[at] = slot;
            }
            grown.used = self.used;
            *self = grown;
        }
    }
}

impl std::fmt::Debug for Slots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slots")
            .field("slots", &self.slots.len())
            .field("used", &self.used)
            .finish()
    }
}

/// The group of `key` (whose tag is `tag`) in `slots` over `rows`; NULL finds nothing.
#[inline]
pub(super) fn find_group<K: JoinKey, V>(
    slots: &Slots,
    rows: &[(K, V)],
    key: &K,
    tag: u32,
) -> Option<Group> {
    if key.is_null() {
        return None;
    }
    let mut at = slots.home(tag);
    loop {
        let slot = &slots.slots[at];
        if slot.tag == 0 {
            return None;
        }
        if slot.tag == tag && rows[slot.start as usize].0 == *key {
            return Some(Group {
                start: slot.start,
                end: slot.end,
            });
        }
        at = slots.next(at);
    }
}

/// The groups of the keys of up to [`LOOKUP_BATCH`] `probe` items (`key_of`: an item's key, if
/// it has one) into `found`, their cache misses overlapped: the home slots of all are
/// prefetched, then the first row of each one's likely run (each line of it), and only then is
/// any compared.
#[inline]
pub(super) fn groups_of_keys<'k, K: JoinKey + 'k, V, X>(
    slots: &Slots,
    rows: &[(K, V)],
    probe: &'k [X],
    key_of: impl Fn(&'k X) -> Option<&'k K>,
    found: &mut [Option<Group>],
) {
    assert!(probe.len() <= LOOKUP_BATCH && found.len() >= probe.len());
    let mut tags = [0u32; LOOKUP_BATCH];
    for (item, tag_of) in probe.iter().zip(&mut tags) {
        if let Some(key) = key_of(item) {
            *tag_of = tag(key);
            prefetch(&slots.slots[slots.home(*tag_of)]);
        }
    }
    for (item, &tag) in probe.iter().zip(&tags) {
        if key_of(item).is_some() {
            if let Some(slot) = slots.candidate(tag) {
                prefetch_row(&rows[slot.start as usize]);
            }
        }
    }
    for ((item, &tag), group) in probe.iter().zip(&tags).zip(found.iter_mut()) {
        *group = key_of(item).and_then(|key| find_group(slots, rows, key, tag));
    }
}
