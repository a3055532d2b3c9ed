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

use rustc_hash::{FxBuildHasher, FxHashMap};

use crate::join_type::{JoinType, Side};
use crate::key::JoinKey;

const NO_GROUP: u32 = u32::MAX;

/// A hash table over borrowed `(key, value)` rows, grouped by key.
///
/// Building reorders the rows in place so that each key's rows are one contiguous run: emitting a
/// hot key's pairs then scans dense memory instead of chasing indices, which is what makes
/// output production run at memory speed.
pub struct BuildTable<'a, K, V> {
    /// The rows, NULL keys first, then grouped by key.
    rows: &'a [(K, V)],
    /// Key to group number.
    groups: FxHashMap<&'a K, u32>,
    /// Group `g`'s rows are `rows[starts[g]..starts[g + 1]]`.
    starts: Vec<u32>,
    /// Per group, whether some probe row matched it; empty unless tracking was asked for.
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
        // Pass 1: a group number per row (NULL keys form group 0's prefix, numbered NO_GROUP).
        let mut group_of_row = Vec::with_capacity(rows.len());
        let mut sizes: Vec<u32> = Vec::new();
        let mut nulls = 0u32;
        {
            let mut numbering: FxHashMap<&K, u32> =
                FxHashMap::with_capacity_and_hasher(rows.len().min(1 << 16), FxBuildHasher);
            for (key, _) in rows.iter() {
                if key.is_null() {
                    nulls += 1;
                    group_of_row.push(NO_GROUP);
                    continue;
                }
                let next = sizes.len() as u32;
                let group = *numbering.entry(key).or_insert(next);
                if group == next {
                    sizes.push(0);
                }
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
        let mut cursor = starts[..sizes.len()].to_vec();
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
        // Apply the permutation in place by following its cycles.
        for start in 0..rows.len() {
            while destination[start] as usize != start {
                let target = destination[start] as usize;
                rows.swap(start, target);
                destination.swap(start, target);
            }
        }
        let rows: &'a [(K, V)] = rows;
        let mut groups: FxHashMap<&'a K, u32> =
            FxHashMap::with_capacity_and_hasher(sizes.len(), FxBuildHasher);
        for (group, &start) in starts[..sizes.len()].iter().enumerate() {
            groups.insert(&rows[start as usize].0, group as u32);
        }
        let matched = if track_matches {
            vec![false; sizes.len()]
        } else {
            Vec::new()
        };
        BuildTable {
            rows,
            groups,
            starts,
            matched,
        }
    }

    /// The number of distinct non-NULL keys.
    pub fn group_count(&self) -> usize {
        self.starts.len() - 1
    }

    /// The group of `key`, if any row has it. NULL finds nothing.
    #[inline]
    pub fn group_of(&self, key: &K) -> Option<u32> {
        if key.is_null() {
            return None;
        }
        self.groups.get(key).copied()
    }

    /// The rows of group `group`, contiguous.
    #[inline]
    pub fn group_rows(&self, group: u32) -> &'a [(K, V)] {
        &self.rows[self.starts[group as usize] as usize..self.starts[group as usize + 1] as usize]
    }

    /// The key of group `group`.
    #[inline]
    pub fn group_key(&self, group: u32) -> &'a K {
        &self.rows[self.starts[group as usize] as usize].0
    }

    /// Records that group `group` matched (a no-op unless tracking).
    #[inline]
    pub fn mark(&mut self, group: u32) {
        if let Some(flag) = self.matched.get_mut(group as usize) {
            *flag = true;
        }
    }

    /// Whether group `group` matched (false unless tracking).
    #[inline]
    pub fn is_matched(&self, group: u32) -> bool {
        self.matched.get(group as usize).copied().unwrap_or(false)
    }

    /// The rows whose key is NULL.
    pub fn null_rows(&self) -> &'a [(K, V)] {
        &self.rows[..self.starts[0] as usize]
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
            &mut |k, l, r| emit(k, l, r),
        );
    } else {
        join_oriented(
            right,
            left,
            broadcast_right,
            broadcast_left,
            Emission::new(how, Side::Right),
            &mut |k, r, l| emit(k, l, r),
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

/// The kernel with fixed roles: `build` rows go into the table, `probe` rows look up. Broadcast
/// tables: `broadcast_build` holds rows of the build side's type (probed by own probe rows),
/// `broadcast_probe` rows of the probe side's type (looked up by own build keys).
fn join_oriented<K, B, P, E>(
    build: &mut [(K, B)],
    probe: &[(K, P)],
    broadcast_build: Option<&BuildTable<'_, K, B>>,
    broadcast_probe: Option<&BuildTable<'_, K, P>>,
    emission: Emission,
    emit: &mut E,
) where
    K: JoinKey,
    E: FnMut(&K, Option<&B>, Option<&P>),
{
    let mut table = BuildTable::new(build, emission.track_build());

    for (key, value) in probe {
        let mut matched = false;
        if let Some(group) = table.group_of(key) {
            matched = true;
            table.mark(group);
            if emission.pairs {
                for (_, built) in table.group_rows(group) {
                    emit(key, Some(built), Some(value));
                }
            }
        }
        if let Some(other) = broadcast_build {
            if let Some(group) = other.group_of(key) {
                matched = true;
                if emission.pairs {
                    for (_, built) in other.group_rows(group) {
                        emit(key, Some(built), Some(value));
                    }
                }
            }
        }
        let keep = if matched {
            emission.semi_probe
        } else {
            emission.pad_probe || emission.anti_probe
        };
        if keep {
            emit(key, None, Some(value));
        }
    }

    if let Some(other) = broadcast_probe {
        for group in 0..table.group_count() as u32 {
            let key = table.group_key(group);
            if let Some(other_group) = other.group_of(key) {
                table.mark(group);
                if emission.pairs {
                    for (_, built) in table.group_rows(group) {
                        for (_, probed) in other.group_rows(other_group) {
                            emit(key, Some(built), Some(probed));
                        }
                    }
                }
            }
        }
    }

    if emission.track_build() {
        for group in 0..table.group_count() as u32 {
            let keep = if table.is_matched(group) {
                emission.semi_build
            } else {
                emission.pad_build || emission.anti_build
            };
            if keep {
                for (key, built) in table.group_rows(group) {
                    emit(key, Some(built), None);
                }
            }
        }
        if emission.pad_build || emission.anti_build {
            for (key, built) in table.null_rows() {
                emit(key, Some(built), None);
            }
        }
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
}
