//! The build side's table: the rows reordered so that each key's rows are one run, found by key
//! through [`Slots`], with a matched flag per group when the join needs one.

use super::slots::{
    find_group, groups_of_keys, prefetch, tag, Group, Slot, Slots, LOOKUP_BATCH, NO_GROUP,
};
use crate::hash::mix64;
use crate::key::JoinKey;

/// Cursors that take turns in [`permute`].
const PERMUTE_CURSORS: usize = 16;

/// A hash table over borrowed `(key, value)` rows, grouped by key.
///
/// Building reorders the rows in place so that each key's rows are one contiguous run: emitting a
/// hot key's pairs then scans dense memory instead of chasing indices, which is what makes
/// output production run at memory speed.
///
/// The table is our own open addressing over 12-byte slots rather than a general hash map because
/// on tables far larger than the cache, lookups wait on memory: knowing where a key's slot and
/// run lie lets a batch of lookups prefetch them all before any of them waits.
pub struct BuildTable<'a, K, V> {
    /// The rows, NULL keys first, then grouped by key.
    rows: &'a [(K, V)],
    /// Every group's run of rows, found by its key's tag.
    slots: Slots,
    /// The groups' first rows in order, then the end of the last: `rows[starts[g]..starts[g + 1]]`.
    starts: Vec<u32>,
    /// Per row, whether some probe row matched the group it starts; empty unless tracking.
    matched: Vec<bool>,
}

impl<'a, K: JoinKey, V> BuildTable<'a, K, V> {
    /// Builds the table, reordering `rows`. `track_matches` keeps a matched flag per key, for
    /// outer, semi and anti joins that preserve or filter this side.
    pub fn new(rows: &'a mut [(K, V)], track_matches: bool) -> Self {
        assert!(
            rows.len() < NO_GROUP as usize,
            "too many rows for one partition"
        );
        // The table is sized for an estimate of the distinct keys, a little over. Grown from a
        // small size instead, a table of 5 x 10^6 keys doubled eleven times into fresh memory:
        // on a 10M x 10M uniform join the kernel zeroing new pages took 9.5 % of the samples,
        // and 3.9 % with the table sized once. Sized for every row, a hot key's rows would get
        // a table as large as the rows themselves.
        let first_size = estimate_distinct(rows);
        Self::with_first_size(rows, track_matches, first_size)
    }

    /// [`new`](Self::new) with the table first sized for `first_size` groups; it doubles as
    /// needed.
    pub(super) fn with_first_size(
        rows: &'a mut [(K, V)],
        track_matches: bool,
        first_size: usize,
    ) -> Self {
        // Pass 1: a group number per row (NULL keys form group 0's prefix, numbered NO_GROUP).
        // Rows are numbered in batches: the batch's home slots are prefetched first, then the
        // first row of each likely group, so that their cache misses overlap instead of coming
        // one after another.
        let mut slots = Slots::for_groups(first_size);
        let mut group_of_row = Vec::with_capacity(rows.len());
        let mut sizes: Vec<u32> = Vec::new();
        let mut nulls = 0u32;
        let view: &[(K, V)] = rows;
        let mut tags = [0u32; LOOKUP_BATCH];
        for (batch_number, batch) in view.chunks(LOOKUP_BATCH).enumerate() {
            for ((key, _), tag_of) in batch.iter().zip(&mut tags) {
                *tag_of = tag(key);
                prefetch(&slots.slots[slots.home(*tag_of)]);
            }
            for &tag in &tags[..batch.len()] {
                if let Some(slot) = slots.candidate(tag) {
                    prefetch(&view[slot.end as usize]);
                }
            }
            for (offset, ((key, _), &tag)) in batch.iter().zip(&tags).enumerate() {
                if key.is_null() {
                    nulls += 1;
                    group_of_row.push(NO_GROUP);
                    continue;
                }
                let mut at = slots.home(tag);
                let group = loop {
                    let slot = slots.slots[at];
                    if slot.tag == 0 {
                        let group = sizes.len() as u32;
                        sizes.push(0);
                        let end = (batch_number * LOOKUP_BATCH + offset) as u32;
                        slots.fill(
                            at,
                            Slot {
                                tag,
                                start: group,
                                end,
                            },
                        );
                        break group;
                    }
                    if slot.tag == tag && view[slot.end as usize].0 == *key {
                        break slot.start;
                    }
                    at = slots.next(at);
                };
                sizes[group as usize] += 1;
                group_of_row.push(group);
            }
        }
        // Destination of every row: NULLs first, then each group's run.
        let mut starts = Vec::with_capacity(sizes.len() + 1);
        let mut total = nulls;
        for size in &sizes {
            starts.push(total);
            total += size;
        }
        starts.push(total);
        drop(sizes);
        for slot in slots.slots.iter_mut().filter(|slot| slot.tag != 0) {
            let group = slot.start as usize;
            slot.start = starts[group];
            slot.end = starts[group + 1];
        }
        let mut cursor = starts[..starts.len() - 1].to_vec();
        let mut null_cursor = 0u32;
        let mut destination: Vec<u32> = group_of_row
            .into_iter()
            .map(|group| {
                let slot = if group == NO_GROUP {
                    &mut null_cursor
                } else {
                    &mut cursor[group as usize]
                };
                *slot += 1;
                *slot - 1
            })
            .collect();
        drop(cursor);
        permute(rows, &mut destination);
        let matched = if track_matches {
            vec![false; rows.len()]
        } else {
            Vec::new()
        };
        BuildTable {
            rows,
            slots,
            starts,
            matched,
        }
    }

    /// The groups of a batch of probe rows' keys, into `found`: the home slots of all are
    /// prefetched, then the first row of each one's likely run, and only then is any compared,
    /// so that the batch's cache misses overlap.
    pub fn groups_of_batch<X>(&self, probe: &[(K, X)], found: &mut [Option<Group>]) {
        groups_of_keys(&self.slots, self.rows, probe, |(key, _)| Some(key), found);
    }

    /// The number of distinct non-NULL keys.
    pub fn group_count(&self) -> usize {
        self.starts.len() - 1
    }

    /// The `index`th group in the order of the rows, for `index < group_count()`.
    #[inline]
    pub fn group_at(&self, index: usize) -> Group {
        Group {
            start: self.starts[index],
            end: self.starts[index + 1],
        }
    }

    /// The group of `key`, if any row has it. NULL finds nothing.
    #[inline]
    pub fn group_of(&self, key: &K) -> Option<Group> {
        self.find(key, tag(key))
    }

    #[inline]
    fn find(&self, key: &K, tag: u32) -> Option<Group> {
        find_group(&self.slots, self.rows, key, tag)
    }

    /// The rows of `group`, contiguous.
    #[inline]
    pub fn group_rows(&self, group: Group) -> &'a [(K, V)] {
        &self.rows[group.start as usize..group.end as usize]
    }

    /// The key of `group`.
    #[inline]
    pub fn group_key(&self, group: Group) -> &'a K {
        &self.rows[group.start as usize].0
    }

    /// Records that `group` matched (a no-op unless tracking).
    #[inline]
    pub fn mark(&mut self, group: Group) {
        if let Some(flag) = self.matched.get_mut(group.start as usize) {
            *flag = true;
        }
    }

    /// Whether `group` matched (false unless tracking).
    #[inline]
    pub fn is_matched(&self, group: Group) -> bool {
        self.matched
            .get(group.start as usize)
            .copied()
            .unwrap_or(false)
    }

    /// The rows whose key is NULL.
    pub fn null_rows(&self) -> &'a [(K, V)] {
        &self.rows[..self.starts[0] as usize]
    }
}

/// A [`BuildTable`]'s index without its rows: what a join keeps of a built table between
/// activations, while it owns the (reordered) rows, so that the table is built once however
/// often the join stops and resumes.
#[derive(Debug)]
pub struct TableIndex {
    slots: Slots,
    starts: Vec<u32>,
    matched: Vec<bool>,
}

impl<'a, K: JoinKey, V> BuildTable<'a, K, V> {
    /// Keeps the index and lets go of the rows, which must not change until the index is
    /// joined with them again by [`with_index`](Self::with_index).
    pub fn into_index(self) -> TableIndex {
        TableIndex {
            slots: self.slots,
            starts: self.starts,
            matched: self.matched,
        }
    }

    /// The table again, from the rows it was built over (reordered by the build, unchanged
    /// since) and its [`index`](Self::into_index).
    pub fn with_index(rows: &'a [(K, V)], index: TableIndex) -> Self {
        debug_assert_eq!(
            index.starts.last().map_or(0, |&end| end as usize),
            rows.len(),
            "an index joined with rows it was not built over"
        );
        BuildTable {
            rows,
            slots: index.slots,
            starts: index.starts,
            matched: index.matched,
        }
    }
}

/// Registers of [`estimate_distinct`]'s HyperLogLog: 2^10, for a standard error of about 3 %.
const ESTIMATE_REGISTERS_LOG2: u32 = 10;

/// Rows up to which [`estimate_distinct`] does not estimate: a table for every row is small
/// (at most 1.5 MiB), and the rows of a bucket of a partitioned join (about 20,000 on a uniform
/// 10M x 10M join) skip the estimate's pass over their keys: 4M x 4M bucket by bucket, 337 ms
/// with the estimate, 315 ms without.
const ESTIMATE_MIN_ROWS: usize = 1 << 16;

/// An estimate of the distinct non-NULL keys of `rows`, a little over (HyperLogLog, plus 25 %),
/// to size a table that then rarely grows; small inputs get their row count.
pub(super) fn estimate_distinct<K: JoinKey, V>(rows: &[(K, V)]) -> usize {
    if rows.len() <= ESTIMATE_MIN_ROWS {
        return rows.len();
    }
    const M: usize = 1 << ESTIMATE_REGISTERS_LOG2;
    let mut registers = [0u8; M];
    for (key, _) in rows {
        if key.is_null() {
            continue;
        }
        let hash = mix64(key.stable_hash());
        let register = (hash >> (64 - ESTIMATE_REGISTERS_LOG2)) as usize;
        // The position of the first 1 among the remaining bits (a sentinel bit bounds it).
        let rank = ((hash << ESTIMATE_REGISTERS_LOG2) | 1 << (ESTIMATE_REGISTERS_LOG2 - 1))
            .leading_zeros() as u8
            + 1;
        registers[register] = registers[register].max(rank);
    }
    let m = M as f64;
    let alpha = 0.7213 / (1.0 + 1.079 / m);
    let sum: f64 = registers.iter().map(|&r| (-f64::from(r)).exp2()).sum();
    let empty = registers.iter().filter(|&&r| r == 0).count();
    let raw = alpha * m * m / sum;
    // Few keys: linear counting of the empty registers is the better estimate.
    let estimate = if raw <= 2.5 * m && empty > 0 {
        m * (m / empty as f64).ln()
    } else {
        raw
    };
    ((estimate * 1.25) as usize).clamp(1, rows.len())
}

/// Moves row `i` to `destination[i]`, in place; `destination` must be a permutation of the row
/// numbers (it is left as the identity).
///
/// A swap puts one row where it belongs and never moves one that is there already, so swaps may
/// come in any order. Following one cycle at a time, every swap would wait for the cache miss of
/// the one before; [`PERMUTE_CURSORS`] cursors, each over its own stretch of start positions,
/// take turns, so that their misses overlap.
pub(super) fn permute<T>(rows: &mut [T], destination: &mut [u32]) {
    let count = rows.len();
    assert_eq!(destination.len(), count);
    let stretch = count.div_ceil(PERMUTE_CURSORS).max(1);
    let mut at: [usize; PERMUTE_CURSORS] = std::array::from_fn(|c| (c * stretch).min(count));
    let ends: [usize; PERMUTE_CURSORS] = std::array::from_fn(|c| ((c + 1) * stretch).min(count));
    loop {
        let mut moving = false;
        for (at, &end) in at.iter_mut().zip(&ends) {
            if *at == end {
                continue;
            }
            moving = true;
            let to = destination[*at] as usize;
            if to == *at {
                *at += 1;
            } else {
                rows.swap(*at, to);
                destination.swap(*at, to);
            }
        }
        if !moving {
            break;
        }
    }
}
