//! The local join kernel: build a hash table on one side, probe it with the other, pad the
//! unmatched rows of preserved sides, and answer semi and anti joins.
//!
//! Pure Rust, no timely: it is the inner loop of every strategy. The table borrows the build rows
//! and stores each key's rows contiguously (a counting sort by group), so probing allocates
//! nothing and a hot key's rows are scanned as one dense run.
//!
//! Besides its own rows, a partition may see *broadcast* rows: copies of records that every
//! partition received (Broadcast-Join, and the one-side-hot classes of AM-Join). They are probed
//! like any build row, but they are never padded and never emitted on their own, because whether
//! a broadcast row matched is not known to any single partition. Broadcast rows of the two sides
//! are never joined with each other; strategies route a key's records so that this never loses a
//! pair.

use crate::hash::mix64;
use crate::join_logic::{each_row, JoinLogic, Swapped};
use crate::join_type::{JoinType, Side};
use crate::key::JoinKey;

const NO_GROUP: u32 = u32::MAX;

/// Cursors that take turns in [`permute`].
const PERMUTE_CURSORS: usize = 16;

/// Rows looked up together, before any of them inserts or emits.
const LOOKUP_BATCH: usize = 32;

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

/// One key's rows in a [`BuildTable`]: a run of its rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Group {
    start: u32,
    end: u32,
}

/// One slot of a [`BuildTable`]'s table.
#[derive(Clone, Copy, Default)]
struct Slot {
    /// The key's [`tag`], never 0; 0 marks an empty slot.
    tag: u32,
    /// While the rows are numbered, the group's number; then the first row of its run.
    start: u32,
    /// While the rows are numbered, the group's first row; then the end of its run.
    end: u32,
}

/// A key's 32-bit tag: where its slot search starts (the high bits) and what slots are compared
/// by before the keys are. The stable hash is mixed again because partitions are cut by its high
/// bits, so within one partition those are alike.
#[inline]
fn tag<K: JoinKey>(key: &K) -> u32 {
    ((mix64(key.stable_hash()) >> 32) as u32) | 1
}

/// Asks the CPU to start loading `item`'s cache line; a no-op where there is no such hint.
#[inline(always)]
fn prefetch<T>(item: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it cannot fault and changes nothing the program sees.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(item).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = item;
}

/// Open addressing with linear probing over a power-of-two number of slots, at most
/// [`MAX_LOAD`] full; a key's search starts at the slot its tag's high bits name, so growing
/// needs the tags only.
struct Slots {
    slots: Vec<Slot>,
    /// `32 - log2(slots.len())`.
    shift: u32,
    used: usize,
}

/// The fullest a table gets before it doubles, as used slots per ten.
const MAX_LOAD: usize = 7;

impl Slots {
    fn for_groups(groups: usize) -> Self {
        let capacity = (groups * 10 / MAX_LOAD + 1).next_power_of_two().max(16);
        assert!(capacity <= 1 << 31, "too many keys for one partition");
        Slots {
            slots: vec![Slot::default(); capacity],
            shift: 32 - capacity.trailing_zeros(),
            used: 0,
        }
    }

    #[inline]
    fn home(&self, tag: u32) -> usize {
        (tag >> self.shift) as usize
    }

    #[inline]
    fn next(&self, at: usize) -> usize {
        (at + 1) & (self.slots.len() - 1)
    }

    /// The first slot with this tag, if one comes before an empty slot: the likely slot of the
    /// key, to prefetch its row.
    #[inline]
    fn candidate(&self, tag: u32) -> Option<&Slot> {
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
    fn fill(&mut self, at: usize, slot: Slot) {
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

/// The group of `key` (whose tag is `tag`) in `slots` over `rows`; NULL finds nothing.
#[inline]
fn find_group<K: JoinKey, V>(slots: &Slots, rows: &[(K, V)], key: &K, tag: u32) -> Option<Group> {
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
/// prefetched, then the first row of each one's likely run, and only then is any compared.
#[inline]
fn groups_of_keys<'k, K: JoinKey + 'k, V, X>(
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
                prefetch(&rows[slot.start as usize]);
            }
        }
    }
    for ((item, &tag), group) in probe.iter().zip(&tags).zip(found.iter_mut()) {
        *group = key_of(item).and_then(|key| find_group(slots, rows, key, tag));
    }
}

impl Group {
    /// The positions of the group's rows.
    #[inline]
    pub fn rows(&self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

/// The lookup of a [`BuildTable`] over rows that its owner keeps grouped by key (each key's rows
/// one contiguous run, no NULL keys), for an index that outlives any borrow of them: IB-Join's
/// broadcast small side, which every large record probes. Keys are found in batches whose cache
/// misses overlap, as the kernel's probe finds them.
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
    fn with_first_size(rows: &'a mut [(K, V)], track_matches: bool, first_size: usize) -> Self {
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

/// Registers of [`estimate_distinct`]'s HyperLogLog: 2^10, for a standard error of about 3 %.
const ESTIMATE_REGISTERS_LOG2: u32 = 10;

/// Rows up to which [`estimate_distinct`] does not estimate: a table for every row is small
/// (at most 1.5 MiB), and the rows of a bucket of a partitioned join (about 20,000 on a uniform
/// 10M x 10M join) skip the estimate's pass over their keys: 4M x 4M bucket by bucket, 337 ms
/// with the estimate, 315 ms without.
const ESTIMATE_MIN_ROWS: usize = 1 << 16;

/// An estimate of the distinct non-NULL keys of `rows`, a little over (HyperLogLog, plus 25 %),
/// to size a table that then rarely grows; small inputs get their row count.
fn estimate_distinct<K: JoinKey, V>(rows: &[(K, V)]) -> usize {
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
fn permute<T>(rows: &mut [T], destination: &mut [u32]) {
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

/// What the kernel emits, seen from the build and probe sides.
#[derive(Clone, Copy, Debug)]
struct Emission {
    pairs: bool,
    pad_build: bool,
    pad_probe: bool,
    semi_build: bool,
    semi_probe: bool,
    anti_build: bool,
    anti_probe: bool,
}

impl Emission {
    fn new(how: JoinType, build: Side) -> Self {
        let probe = build.other();
        Emission {
            pairs: how.emits_pairs(),
            pad_build: how.emits_pairs() && how.keeps_unmatched(build),
            pad_probe: how.emits_pairs() && how.keeps_unmatched(probe),
            semi_build: how.semi_side() == Some(build),
            semi_probe: how.semi_side() == Some(probe),
            anti_build: how.anti_side() == Some(build),
            anti_probe: how.anti_side() == Some(probe),
        }
    }

    fn track_build(&self) -> bool {
        self.pad_build || self.semi_build || self.anti_build
    }
}

/// Joins one partition's own rows, plus optional tables of broadcast rows, and calls `emit` once
/// per output row with `(key, left, right)`: both present for a pair, one present for a padded
/// row or a semi/anti row.
///
/// The smaller own side is built (and reordered by key); the other probes. Own rows are complete for their keys (every
/// own record of a key is in this partition), so padding and semi/anti decisions about them are
/// final here. Broadcast rows only ever pair with own rows of the other side.
///
/// ```
/// use skewjoin_operators::{kernel::hash_join, JoinType};
///
/// let mut left = vec![(1u64, "a"), (2, "b"), (2, "c")];
/// let mut right = vec![(2u64, 'x'), (3, 'y')];
/// let mut out = Vec::new();
/// hash_join(&mut left, &mut right, JoinType::Full, |k, l, r| out.push((*k, l.copied(), r.copied())));
/// out.sort();
/// assert_eq!(out, vec![
///     (1, Some("a"), None),
///     (2, Some("b"), Some('x')),
///     (2, Some("c"), Some('x')),
///     (3, None, Some('y')),
/// ]);
/// ```
pub fn local_join<K, L, R, E>(
    left: &mut [(K, L)],
    right: &mut [(K, R)],
    broadcast_left: Option<&BuildTable<'_, K, L>>,
    broadcast_right: Option<&BuildTable<'_, K, R>>,
    how: JoinType,
    mut emit: E,
) where
    K: JoinKey,
    E: FnMut(&K, Option<&L>, Option<&R>),
{
    let mut logic =
        each_row(|key: &K, l: Option<&L>, r: Option<&R>, _: &mut Vec<()>| emit(key, l, r));
    local_join_logic(
        left,
        right,
        broadcast_left,
        broadcast_right,
        how,
        &mut logic,
        &mut Vec::new(),
    )
}

/// [`local_join`] handing its output to [`JoinLogic`]: a key's rows matching one row of the
/// other side go to `logic` as one group call. `out` is passed through to `logic`.
pub fn local_join_logic<K, L, R, D, G>(
    left: &mut [(K, L)],
    right: &mut [(K, R)],
    broadcast_left: Option<&BuildTable<'_, K, L>>,
    broadcast_right: Option<&BuildTable<'_, K, R>>,
    how: JoinType,
    logic: &mut G,
    out: &mut Vec<D>,
) where
    K: JoinKey,
    G: JoinLogic<K, L, R, D>,
{
    if left.is_empty() && right.is_empty() {
        return;
    }
    if left.len() <= right.len() {
        join_oriented(
            left,
            right,
            broadcast_left,
            broadcast_right,
            Emission::new(how, Side::Left),
            logic,
            out,
        );
    } else {
        join_oriented(
            right,
            left,
            broadcast_right,
            broadcast_left,
            Emission::new(how, Side::Right),
            &mut Swapped(logic),
            out,
        );
    }
}

/// Joins two slices of rows in memory: [`local_join`] without broadcast rows.
pub fn hash_join<K, L, R, E>(left: &mut [(K, L)], right: &mut [(K, R)], how: JoinType, emit: E)
where
    K: JoinKey,
    E: FnMut(&K, Option<&L>, Option<&R>),
{
    local_join(left, right, None, None, how, emit)
}

/// The values of a run of rows.
#[inline]
fn values<K, V>(rows: &[(K, V)]) -> impl ExactSizeIterator<Item = &V> {
    rows.iter().map(|(_, value)| value)
}

/// The most pairs handed to logic in one group call: a hot key's run of thousands of rows is
/// given in pieces, so that a budget of output rows ([`SteppedJoin::step`]) can stop inside it
/// and the logic's buffer never holds more than one piece past its own batch size. A piece this
/// long still amortises the call over a tight loop.
pub const GROUP_PIECE: usize = 4096;

/// Where a join of one oriented pair of sides stands: which phase, and in it which probe row or
/// group (`at`), which built row of that group (`row`), and how many of the current item's
/// output rows were already handed over (`done`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Cursor {
    phase: Phase,
    at: usize,
    row: usize,
    done: usize,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Phase {
    /// Own probe rows look up the table and the broadcast build table.
    #[default]
    Probe,
    /// Own build groups look up the broadcast probe table.
    BroadcastProbe,
    /// Unmatched (or, for semi joins, matched) build groups are emitted alone.
    Pad,
    /// Build rows with NULL keys are emitted alone.
    PadNulls,
    Done,
}

impl Cursor {
    /// Starts `phase` from its first item.
    fn enter(&mut self, phase: Phase) {
        *self = Cursor {
            phase,
            ..Cursor::default()
        };
    }
}

/// Hands `logic` the pairs of the rows of `run` with `probed` from the `done - before`th on, in
/// pieces of at most [`GROUP_PIECE`] and of what is left of `budget`; `before` is how many of
/// the probe row's output rows come before this run's. False if the budget ran out first.
#[inline]
#[allow(clippy::too_many_arguments)]
fn pairs_with_run<K, B, P, D, G>(
    logic: &mut G,
    key: &K,
    run: &[(K, B)],
    probed: &P,
    before: usize,
    done: &mut usize,
    budget: &mut usize,
    out: &mut Vec<D>,
) -> bool
where
    G: JoinLogic<K, B, P, D>,
{
    let end = before + run.len();
    while *done < end {
        if *budget == 0 {
            return false;
        }
        let from = *done - before;
        let take = (end - *done).min(*budget).min(GROUP_PIECE);
        logic.lefts_with(key, values(&run[from..from + take]), probed, out);
        *done += take;
        *budget -= take;
    }
    true
}

/// The kernel with fixed roles, from `cursor` on, until it is done (true) or has handed `logic`
/// `budget` output rows (false; `cursor` and the table's matched flags then say where to go
/// on). `build` rows are in `table`, `probe` rows look up; `logic` sees the build side as its
/// left. Broadcast tables: `broadcast_build` holds rows of the build side's type (probed by own
/// probe rows), `broadcast_probe` rows of the probe side's type (looked up by own build keys).
///
/// Every output row comes from one item of a phase (a probe row, a build row, a group), and
/// an item's rows come in a fixed order, so the cursor resumes exactly after the last row given:
/// a stop may fall inside a hot key's run. Marks of a group as matched are idempotent, so an
/// item whose lookups are redone on resuming marks nothing twice.
#[allow(clippy::too_many_arguments)]
fn run_oriented<K, B, P, D, G>(
    table: &mut BuildTable<'_, K, B>,
    probe: &[(K, P)],
    broadcast_build: Option<&BuildTable<'_, K, B>>,
    broadcast_probe: Option<&BuildTable<'_, K, P>>,
    emission: Emission,
    cursor: &mut Cursor,
    logic: &mut G,
    out: &mut Vec<D>,
    budget: &mut usize,
) -> bool
where
    K: JoinKey,
    G: JoinLogic<K, B, P, D>,
{
    if cursor.phase == Phase::Probe {
        // Probe rows look up in batches: the lookups of a batch do not depend on each other, so
        // their cache misses overlap when no emitting runs between them. A resumed batch starts
        // at the row the last one stopped in.
        let mut found = [None; LOOKUP_BATCH];
        while cursor.at < probe.len() {
            let batch = &probe[cursor.at..(cursor.at + LOOKUP_BATCH).min(probe.len())];
            table.groups_of_batch(batch, &mut found);
            for ((key, value), group) in batch.iter().zip(found) {
                let other = broadcast_build.and_then(|other| other.group_of(key));
                let own_rows = group.map_or(0, |group| group.rows().len());
                if let Some(group) = group {
                    table.mark(group);
                    if emission.pairs {
                        let run = table.group_rows(group);
                        let done = &mut cursor.done;
                        if !pairs_with_run(logic, key, run, value, 0, done, budget, out) {
                            return false;
                        }
                    }
                }
                if let (Some(other_group), Some(other)) = (other, broadcast_build) {
                    if emission.pairs {
                        let run = other.group_rows(other_group);
                        let done = &mut cursor.done;
                        if !pairs_with_run(logic, key, run, value, own_rows, done, budget, out) {
                            return false;
                        }
                    }
                }
                let keep = if group.is_some() || other.is_some() {
                    emission.semi_probe
                } else {
                    emission.pad_probe || emission.anti_probe
                };
                if keep {
                    if *budget == 0 {
                        return false;
                    }
                    logic.row(key, None, Some(value), out);
                    *budget -= 1;
                }
                cursor.at += 1;
                cursor.done = 0;
            }
        }
        cursor.enter(Phase::BroadcastProbe);
    }

    if cursor.phase == Phase::BroadcastProbe {
        if let Some(other) = broadcast_probe {
            while cursor.at < table.group_count() {
                let group = table.group_at(cursor.at);
                let key = table.group_key(group);
                if let Some(other_group) = other.group_of(key) {
                    table.mark(group);
                    if emission.pairs {
                        let probed = other.group_rows(other_group);
                        let built = table.group_rows(group);
                        while cursor.row < built.len() {
                            let value = &built[cursor.row].1;
                            while cursor.done < probed.len() {
                                if *budget == 0 {
                                    return false;
                                }
                                let take =
                                    (probed.len() - cursor.done).min(*budget).min(GROUP_PIECE);
                                let piece = &probed[cursor.done..cursor.done + take];
                                logic.left_with_rights(key, value, values(piece), out);
                                cursor.done += take;
                                *budget -= take;
                            }
                            cursor.row += 1;
                            cursor.done = 0;
                        }
                    }
                }
                cursor.at += 1;
                cursor.row = 0;
            }
        }
        cursor.enter(Phase::Pad);
    }

    if cursor.phase == Phase::Pad {
        if emission.track_build() {
            while cursor.at < table.group_count() {
                let group = table.group_at(cursor.at);
                let keep = if table.is_matched(group) {
                    emission.semi_build
                } else {
                    emission.pad_build || emission.anti_build
                };
                if keep {
                    let rows = table.group_rows(group);
                    while cursor.row < rows.len() {
                        if *budget == 0 {
                            return false;
                        }
                        let (key, built) = &rows[cursor.row];
                        logic.row(key, Some(built), None, out);
                        *budget -= 1;
                        cursor.row += 1;
                    }
                }
                cursor.at += 1;
                cursor.row = 0;
            }
        }
        cursor.enter(Phase::PadNulls);
    }

    if cursor.phase == Phase::PadNulls {
        if emission.pad_build || emission.anti_build {
            let nulls = table.null_rows();
            while cursor.at < nulls.len() {
                if *budget == 0 {
                    return false;
                }
                let (key, built) = &nulls[cursor.at];
                logic.row(key, Some(built), None, out);
                *budget -= 1;
                cursor.at += 1;
            }
        }
        cursor.enter(Phase::Done);
    }
    true
}

/// The kernel with fixed roles, run to the end: [`run_oriented`] on a table built here.
fn join_oriented<K, B, P, D, G>(
    build: &mut [(K, B)],
    probe: &[(K, P)],
    broadcast_build: Option<&BuildTable<'_, K, B>>,
    broadcast_probe: Option<&BuildTable<'_, K, P>>,
    emission: Emission,
    logic: &mut G,
    out: &mut Vec<D>,
) where
    K: JoinKey,
    G: JoinLogic<K, B, P, D>,
{
    let mut table = BuildTable::new(build, emission.track_build());
    let mut budget = usize::MAX;
    run_oriented(
        &mut table,
        probe,
        broadcast_build,
        broadcast_probe,
        emission,
        &mut Cursor::default(),
        logic,
        out,
        &mut budget,
    );
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

impl std::fmt::Debug for Slots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slots")
            .field("slots", &self.slots.len())
            .field("used", &self.used)
            .finish()
    }
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

/// One join of two sides that it owns, run a budget of output rows at a time:
/// [`step`](Self::step) hands rows to the logic until the budget is spent and returns, keeping
/// the built table and its place, and the next call goes on from the row after the last one
/// given.
/// Joining in steps yields the same rows as [`local_join_logic`], in the same order.
///
/// This is what lets a timely operator bound its output per activation: it joins a step, gives
/// the step's rows to the stream, and asks to be scheduled again, so downstream operators
/// consume the output while the join runs instead of after it.
///
/// ```
/// use skewjoin_operators::join_logic::each_row;
/// use skewjoin_operators::kernel::SteppedJoin;
/// use skewjoin_operators::JoinType;
///
/// // One key: 300 x 200 pairs, handed over at most 1,000 per step.
/// let mut join = SteppedJoin::new();
/// join.load((0..300).map(|i| (7u64, i)).collect(), (0..200).map(|i| (7u64, i)).collect());
/// let mut pairs = 0;
/// let mut logic = each_row(|_: &u64, _: Option<&i32>, _: Option<&i32>, _: &mut Vec<()>| pairs += 1);
/// let mut steps = 0;
/// loop {
///     let mut budget = 1_000;
///     steps += 1;
///     if join.step(None, None, JoinType::Inner, &mut logic, &mut Vec::new(), &mut budget) {
///         break;
///     }
///     assert_eq!(budget, 0, "a step stops only when its budget is spent");
/// }
/// assert_eq!((pairs, steps), (60_000, 60));
/// ```
#[derive(Debug)]
pub struct SteppedJoin<K, L, R> {
    left: Vec<(K, L)>,
    right: Vec<(K, R)>,
    /// Whether the left side is built (it is the smaller); otherwise the right is.
    left_builds: bool,
    /// The built side's table once the first step built it.
    index: Option<TableIndex>,
    cursor: Cursor,
}

impl<K: JoinKey, L, R> Default for SteppedJoin<K, L, R> {
    fn default() -> Self {
        SteppedJoin {
            left: Vec::new(),
            right: Vec::new(),
            left_builds: true,
            index: None,
            cursor: Cursor::default(),
        }
    }
}

impl<K: JoinKey, L, R> SteppedJoin<K, L, R> {
    /// A join with no rows: it is done at once.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a join of `left` and `right`, dropping what is left of the one before.
    pub fn load(&mut self, left: Vec<(K, L)>, right: Vec<(K, R)>) {
        self.left = left;
        self.right = right;
        self.restart();
    }

    /// Starts a join of the rows that `fill` puts into the two sides, which it is handed empty
    /// but with the room of the last join's rows: joins one after another reuse their memory.
    pub fn load_with(&mut self, fill: impl FnOnce(&mut Vec<(K, L)>, &mut Vec<(K, R)>)) {
        self.left.clear();
        self.right.clear();
        fill(&mut self.left, &mut self.right);
        self.restart();
    }

    fn restart(&mut self) {
        self.left_builds = self.left.len() <= self.right.len();
        self.index = None;
        self.cursor = Cursor::default();
    }

    /// Lets go of the rows and their memory.
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// Joins on from where the last step stopped, as [`local_join_logic`] joins, handing `logic`
    /// at most `budget` output rows (and taking them off it). True once every row is given; then
    /// the sides are emptied (their room kept for [`load_with`](Self::load_with)). False when
    /// the budget ran out first: call again, with the same broadcast tables, to go on.
    #[allow(clippy::too_many_arguments)]
    pub fn step<D, G>(
        &mut self,
        broadcast_left: Option<&BuildTable<'_, K, L>>,
        broadcast_right: Option<&BuildTable<'_, K, R>>,
        how: JoinType,
        logic: &mut G,
        out: &mut Vec<D>,
        budget: &mut usize,
    ) -> bool
    where
        G: JoinLogic<K, L, R, D>,
    {
        if self.cursor.phase == Phase::Done || (self.left.is_empty() && self.right.is_empty()) {
            self.cursor.enter(Phase::Done);
            return true;
        }
        let done = if self.left_builds {
            let emission = Emission::new(how, Side::Left);
            let mut table = match self.index.take() {
                Some(index) => BuildTable::with_index(&self.left, index),
                None => BuildTable::new(&mut self.left, emission.track_build()),
            };
            let done = run_oriented(
                &mut table,
                &self.right,
                broadcast_left,
                broadcast_right,
                emission,
                &mut self.cursor,
                logic,
                out,
                budget,
            );
            self.index = (!done).then(|| table.into_index());
            done
        } else {
            let emission = Emission::new(how, Side::Right);
            let mut table = match self.index.take() {
                Some(index) => BuildTable::with_index(&self.right, index),
                None => BuildTable::new(&mut self.right, emission.track_build()),
            };
            let done = run_oriented(
                &mut table,
                &self.left,
                broadcast_right,
                broadcast_left,
                emission,
                &mut self.cursor,
                &mut Swapped(&mut *logic),
                out,
                budget,
            );
            self.index = (!done).then(|| table.into_index());
            done
        };
        if done {
            self.left.clear();
            self.right.clear();
            self.cursor.enter(Phase::Done);
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::Key;

    type Row = (Option<u8>, Option<u32>, Option<u32>);

    fn nested_loop(left: &[(Key, u32)], right: &[(Key, u32)], how: JoinType) -> Vec<Row> {
        crate::reference::nested_loop_join(left, right, how)
            .into_iter()
            .map(|(k, l, r)| {
                (
                    if let Key::Int(v) = k {
                        Some(v as u8)
                    } else {
                        None
                    },
                    l,
                    r,
                )
            })
            .collect()
    }

    fn run(left: &[(Key, u32)], right: &[(Key, u32)], how: JoinType) -> Vec<Row> {
        let mut out = Vec::new();
        let (mut left, mut right) = (left.to_vec(), right.to_vec());
        hash_join(&mut left, &mut right, how, |k, l, r| {
            out.push((
                if let Key::Int(v) = k {
                    Some(*v as u8)
                } else {
                    None
                },
                l.copied(),
                r.copied(),
            ))
        });
        out.sort();
        out
    }

    fn rows(keys: &[Option<i64>]) -> Vec<(Key, u32)> {
        keys.iter()
            .enumerate()
            .map(|(i, k)| (Key::from(*k), i as u32))
            .collect()
    }

    #[test]
    fn every_join_type_matches_the_nested_loop() {
        let left = rows(&[Some(1), Some(2), Some(2), None, Some(4)]);
        let right = rows(&[Some(2), Some(3), None, Some(2), Some(2), Some(1)]);
        for how in JoinType::ALL {
            for (l, r) in [(&left, &right), (&right, &left)] {
                let mut expected = nested_loop(l, r, how);
                expected.sort();
                assert_eq!(run(l, r, how), expected, "{how}");
            }
        }
    }

    #[test]
    fn nulls_never_match_and_are_kept_where_preserved() {
        let left = rows(&[None, None]);
        let right = rows(&[None]);
        assert!(run(&left, &right, JoinType::Inner).is_empty());
        assert_eq!(run(&left, &right, JoinType::Full).len(), 3);
        assert_eq!(run(&left, &right, JoinType::LeftAnti).len(), 2);
        assert!(run(&left, &right, JoinType::LeftSemi).is_empty());
    }

    #[test]
    fn broadcast_rows_pair_but_are_never_padded() {
        // Left stays in place, right is broadcast: a left-outer join is correct per partition.
        let left = rows(&[Some(1), Some(2)]);
        let mut broadcast = rows(&[Some(2), Some(5)]);
        let table = BuildTable::new(&mut broadcast, false);
        let mut out = Vec::new();
        local_join(
            &mut left.clone(),
            &mut [] as &mut [(Key, u32)],
            None,
            Some(&table),
            JoinType::Full,
            |k, l, r| out.push((k.clone(), l.copied(), r.copied())),
        );
        out.sort();
        assert_eq!(
            out,
            vec![
                (Key::Int(1), Some(0), None),
                (Key::Int(2), Some(1), Some(0))
            ]
        );
    }

    #[test]
    fn own_rows_match_broadcast_rows_of_the_other_side() {
        // Own left rows of key 2 must count as matched by a broadcast right row, so an anti join
        // drops them and the matched own right row of key 3 pairs with the broadcast left row.
        let left = rows(&[Some(2), Some(7)]);
        let right = rows(&[Some(3)]);
        let mut broadcast_right = rows(&[Some(2)]);
        let mut broadcast_left = rows(&[Some(3)]);
        let bl = BuildTable::new(&mut broadcast_left, false);
        let br = BuildTable::new(&mut broadcast_right, false);
        let (mut left, mut right) = (left, right);
        let mut anti = Vec::new();
        local_join(
            &mut left,
            &mut right,
            Some(&bl),
            Some(&br),
            JoinType::LeftAnti,
            |k, l, _| anti.push((k.clone(), l.copied())),
        );
        assert_eq!(anti, vec![(Key::Int(7), Some(1))]);
        let mut full = Vec::new();
        local_join(
            &mut left,
            &mut right,
            Some(&bl),
            Some(&br),
            JoinType::Full,
            |k, l, r| full.push((k.clone(), l.copied(), r.copied())),
        );
        full.sort();
        assert_eq!(
            full,
            vec![
                (Key::Int(2), Some(0), Some(0)),
                (Key::Int(3), Some(0), Some(0)),
                (Key::Int(7), Some(1), None),
            ]
        );
    }

    /// A deterministic scramble (Fisher-Yates driven by SplitMix64).
    fn scramble<T>(items: &mut [T], seed: u64) {
        let mut state = seed;
        for i in (1..items.len()).rev() {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            items.swap(i, (mix64(state) % (i as u64 + 1)) as usize);
        }
    }

    type KeyRow = (Key, Option<u32>, Option<u32>);

    /// The rows of a join of `left` and `right` (with broadcast tables of `bl` and `br`) run in
    /// steps of `budget` rows, and the number of steps; every step but the last must spend its
    /// whole budget.
    fn stepped(
        left: &[(Key, u32)],
        right: &[(Key, u32)],
        bl: &[(Key, u32)],
        br: &[(Key, u32)],
        how: JoinType,
        budget: usize,
    ) -> (Vec<KeyRow>, usize) {
        let (mut bl, mut br) = (bl.to_vec(), br.to_vec());
        let bl = (!bl.is_empty()).then(|| BuildTable::new(&mut bl, false));
        let br = (!br.is_empty()).then(|| BuildTable::new(&mut br, false));
        let mut join = SteppedJoin::new();
        join.load(left.to_vec(), right.to_vec());
        let mut rows = Vec::new();
        let mut logic = each_row(
            |k: &Key, l: Option<&u32>, r: Option<&u32>, _: &mut Vec<()>| {
                rows.push((k.clone(), l.copied(), r.copied()))
            },
        );
        let mut steps = 0;
        loop {
            steps += 1;
            let mut left_over = budget;
            let (bl, br) = (bl.as_ref(), br.as_ref());
            if join.step(bl, br, how, &mut logic, &mut Vec::new(), &mut left_over) {
                break;
            }
            assert_eq!(left_over, 0, "a step stopped with budget left");
        }
        (rows, steps)
    }

    #[test]
    fn a_join_in_steps_gives_the_rows_of_a_join_in_one_go_in_the_same_order() {
        // A hot key (longer than a group piece on one side), keys of one side only, NULLs; own
        // rows on both sides and broadcast rows of each side that match own rows of the other.
        let mut left = rows(&[Some(1), Some(2), Some(2), None, Some(4), Some(6)]);
        left.extend((0..5_000).map(|i| (Key::Int(9), 100 + i)));
        let mut right = rows(&[Some(2), Some(3), None, Some(2), Some(2), Some(1), Some(7)]);
        right.extend((0..3).map(|i| (Key::Int(9), 100 + i)));
        let bl = rows(&[Some(3), Some(3), Some(8)]);
        let br = rows(&[Some(4), Some(9), Some(6), Some(6)]);
        for how in JoinType::ALL {
            for (l, r) in [(&left, &right), (&right, &left)] {
                // Broadcast rows only where the join keeps no unmatched rows of that side.
                let bl = if how.keeps_unmatched(Side::Left) || how.semi_side().is_some() {
                    &[][..]
                } else {
                    &bl[..]
                };
                let br = if how.keeps_unmatched(Side::Right) || how.semi_side().is_some() {
                    &[][..]
                } else {
                    &br[..]
                };
                let (whole, _) = stepped(l, r, bl, br, how, usize::MAX);
                let mut expected = Vec::new();
                let (mut l2, mut r2, mut bl2, mut br2) =
                    (l.clone(), r.clone(), bl.to_vec(), br.to_vec());
                let tl = (!bl2.is_empty()).then(|| BuildTable::new(&mut bl2, false));
                let tr = (!br2.is_empty()).then(|| BuildTable::new(&mut br2, false));
                local_join(
                    &mut l2,
                    &mut r2,
                    tl.as_ref(),
                    tr.as_ref(),
                    how,
                    |k, a, b| expected.push((k.clone(), a.copied(), b.copied())),
                );
                assert_eq!(whole, expected, "{how}");
                for budget in [1, 7, 4_999, 5_001] {
                    let (rows, steps) = stepped(l, r, bl, br, how, budget);
                    assert_eq!(rows, expected, "{how}, budget {budget}");
                    assert!(steps >= expected.len() / budget, "{how}, budget {budget}");
                }
            }
        }
    }

    #[test]
    fn permute_puts_every_row_where_it_belongs() {
        for count in [0usize, 1, 2, 15, 16, 17, 33, 1000] {
            let mut destination: Vec<u32> = (0..count as u32).collect();
            scramble(&mut destination, count as u64);
            let mut rows: Vec<String> = (0..count).map(|i| format!("row {i}")).collect();
            let wanted = destination.clone();
            permute(&mut rows, &mut destination);
            for (from, &to) in wanted.iter().enumerate() {
                assert_eq!(rows[to as usize], format!("row {from}"), "{count} rows");
            }
        }
    }

    #[test]
    fn the_distinct_estimate_is_near_the_distinct_count_and_never_past_the_rows() {
        // Each key on 1 to 4 rows, NULLs among them (they are not keys), scrambled.
        for distinct in [30_000usize, 300_000] {
            let mut rows: Vec<(Key, u32)> = Vec::new();
            for i in 0..distinct {
                for _ in 0..=i % 4 {
                    rows.push((Key::Int(i as i64 * 7_919), 0));
                }
            }
            rows.extend((0..5_000).map(|_| (Key::Null, 0)));
            scramble(&mut rows, distinct as u64);
            let estimate = estimate_distinct(&rows);
            // Plus 25 %, within four standard errors (3.3 % each) of the count.
            let low = (distinct as f64 * 1.25 * 0.87) as usize;
            let high = (distinct as f64 * 1.25 * 1.13) as usize;
            assert!(
                (low..=high).contains(&estimate),
                "{distinct} keys: estimated {estimate}"
            );
            assert!(estimate <= rows.len());
        }
        // One hot key: a table for a few keys, not for its 10^5 rows.
        let hot: Vec<(Key, u32)> = (0..100_000).map(|_| (Key::Int(42), 0)).collect();
        assert!(estimate_distinct(&hot) <= 2);
        // Few rows: no estimate, a table for every row.
        let few: Vec<(Key, u32)> = (0..100).map(|i| (Key::Int(i % 3), 0)).collect();
        assert_eq!(estimate_distinct(&few), 100);
    }

    #[test]
    fn grouped_keys_find_each_run_and_nothing_else() {
        // 5,000 keys, key i on 1 to 3 consecutive rows, strings among them; absent keys between.
        let key_of = |i: i64| {
            if i % 5 == 0 {
                Key::from(format!("s{i}").as_str())
            } else {
                Key::Int(i * 2)
            }
        };
        let mut rows: Vec<(Key, u32)> = Vec::new();
        let mut starts = Vec::new();
        for i in 0..5_000i64 {
            starts.push(rows.len());
            for _ in 0..=i % 3 {
                rows.push((key_of(i), i as u32));
            }
        }
        starts.push(rows.len());
        let lookup = GroupedKeys::new(&rows, &starts);
        let mut probe: Vec<Option<Key>> = (0..5_000i64).map(|i| Some(key_of(i))).collect();
        probe.extend((0..1_000i64).map(|i| Some(Key::Int(i * 2 + 1))));
        probe.push(Some(Key::Null));
        probe.push(None);
        let mut found_runs = 0;
        for batch in probe.chunks(GroupedKeys::BATCH) {
            let keys: Vec<Option<&Key>> = batch.iter().map(Option::as_ref).collect();
            let mut found = [None; GroupedKeys::BATCH];
            lookup.groups_of(&rows, &keys, &mut found);
            for (key, group) in keys.iter().zip(found) {
                match (key, group) {
                    (Some(key), Some(group)) => {
                        let run = &rows[group.rows()];
                        let i = run[0].1 as usize;
                        assert_eq!(group.rows(), starts[i]..starts[i + 1], "{key:?}");
                        assert!(run.iter().all(|(k, _)| k == *key));
                        found_runs += 1;
                    }
                    (Some(key), None) => {
                        assert!(key.is_null() || matches!(key, Key::Int(n) if n % 2 == 1));
                    }
                    (None, found) => assert_eq!(found, None),
                }
            }
        }
        assert_eq!(found_runs, 5_000);
    }

    #[test]
    fn a_table_past_its_first_size_finds_every_key_and_only_its_rows() {
        // 20,000 distinct keys (the table is first sized for 16 and doubles several times),
        // each on 1 to 3 rows, strings among them, and NULLs, in scrambled order.
        let mut rows: Vec<(Key, u32)> = Vec::new();
        let key_of = |i: i64| {
            if i % 7 == 0 {
                Key::str(&format!("s{i}"))
            } else {
                Key::Int(i * 1_000_003)
            }
        };
        for i in 0..20_000i64 {
            for _ in 0..=i % 3 {
                rows.push((key_of(i), rows.len() as u32));
            }
            if i % 1000 == 0 {
                rows.push((Key::Null, rows.len() as u32));
            }
        }
        scramble(&mut rows, 7);
        let mut expected: std::collections::BTreeMap<Key, Vec<u32>> = Default::default();
        for (key, value) in rows.iter().filter(|(key, _)| !key.is_null()) {
            expected.entry(key.clone()).or_default().push(*value);
        }
        let table = BuildTable::with_first_size(&mut rows, true, 16);
        assert_eq!(table.group_count(), 20_000);
        assert_eq!(table.null_rows().len(), 20);
        assert!(table.null_rows().iter().all(|(key, _)| key.is_null()));
        for (key, values) in &expected {
            let group = table.group_of(key).expect("every key is found");
            assert_eq!(table.group_key(group), key);
            let mut found: Vec<u32> = table
                .group_rows(group)
                .iter()
                .map(|(row_key, value)| {
                    assert_eq!(row_key, key);
                    *value
                })
                .collect();
            found.sort_unstable();
            let mut values = values.clone();
            values.sort_unstable();
            assert_eq!(found, values);
        }
        // Batched lookups agree with single ones, across a last short batch, for keys present,
        // absent (never inserted, or NULL) alike.
        let probe: Vec<(Key, ())> = (0..20_037i64)
            .map(|i| match i % 3 {
                0 => (key_of(i), ()),
                1 => (Key::Int(i * 1_000_003 + 1), ()),
                _ if i % 2 == 0 => (Key::Null, ()),
                _ => (key_of(i), ()),
            })
            .collect();
        let mut found = [None; LOOKUP_BATCH];
        for batch in probe.chunks(LOOKUP_BATCH) {
            table.groups_of_batch(batch, &mut found);
            for ((key, _), group) in batch.iter().zip(found) {
                assert_eq!(group, table.group_of(key));
                assert_eq!(group.is_some(), expected.contains_key(key), "{key:?}");
            }
        }
    }
}
