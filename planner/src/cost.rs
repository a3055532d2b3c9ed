//! Key statistics, and the rules the cost model's predictions are made of (what a key's rows
//! produce, how kept NULL keys spread): what each partition will receive and produce under a
//! resolved strategy is computed from the keys alone, before anything runs, by the strategy's
//! module.
//!
//! `skewjoin explain` prints these predictions (each strategy's own, through
//! [`Resolved::predict`](crate::strategy::Resolved::predict)), and with `--analyze` sets them
//! beside the measured figures. For Shuffle-Join and Broadcast-Join the prediction is exact
//! (NULL keys on a preserved side are spread round-robin at run time and are predicted spread
//! evenly).

use rustc_hash::FxHashMap;
use serde::Serialize;
use skewjoin_operators::{JoinKey, JoinType, PartitionLoad, Side};

/// How often one key occurs on each side.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KeyCount<K> {
    /// The key.
    pub key: K,
    /// Rows with it on the left.
    pub left: u64,
    /// Rows with it on the right.
    pub right: u64,
}

impl<K> KeyCount<K> {
    /// Output pairs this key produces in an inner join.
    pub fn pairs(&self) -> u128 {
        self.left as u128 * self.right as u128
    }
}

/// Exact key counts of both sides.
#[derive(Clone, Debug, Serialize)]
pub struct KeyStats<K> {
    /// Every non-NULL key with its counts, in no particular order.
    pub keys: Vec<KeyCount<K>>,
    /// Rows on each side.
    pub left_rows: u64,
    /// Rows on the right.
    pub right_rows: u64,
    /// Rows whose key is NULL, per side.
    pub left_nulls: u64,
    /// NULL keys on the right.
    pub right_nulls: u64,
}

impl<K: JoinKey> KeyStats<K> {
    /// Counts the keys of both sides.
    pub fn from_keys(left: &[K], right: &[K]) -> KeyStats<K> {
        // The map owns its keys: one keyed by references into the inputs followed each one to
        // a random place in them to compare it, a cache miss per row (most of `explain`'s time
        // on 10M x 10M rows).
        let mut counts: FxHashMap<K, [u64; 2]> = FxHashMap::default();
        let mut nulls = [0u64; 2];
        for (side, keys) in [left, right].into_iter().enumerate() {
            for key in keys {
                if key.is_null() {
                    nulls[side] += 1;
                } else if let Some(count) = counts.get_mut(key) {
                    count[side] += 1;
                } else {
                    let mut count = [0; 2];
                    count[side] = 1;
                    counts.insert(key.clone(), count);
                }
            }
        }
        let nulls = (nulls[0], nulls[1]);
        KeyStats {
            keys: counts
                .into_iter()
                .map(|(key, [left, right])| KeyCount { key, left, right })
                .collect(),
            left_rows: left.len() as u64,
            right_rows: right.len() as u64,
            left_nulls: nulls.0,
            right_nulls: nulls.1,
        }
    }

    /// The `n` keys that produce the most output (ties: more records), most first.
    pub fn hottest(&self, n: usize) -> Vec<&KeyCount<K>> {
        let hotter = |a: &&KeyCount<K>, b: &&KeyCount<K>| {
            b.pairs()
                .cmp(&a.pairs())
                .then((b.left + b.right).cmp(&(a.left + a.right)))
                .then(a.key.cmp(&b.key))
        };
        let mut keys: Vec<&KeyCount<K>> = self.keys.iter().collect();
        // The first `n` chosen before they are sorted: sorting all 1.5M keys of TPC-H's orders
        // was a quarter of `skewjoin explain`'s time, for the 10 it shows.
        if n < keys.len() {
            keys.select_nth_unstable_by(n, hotter);
            keys.truncate(n);
        }
        keys.sort_unstable_by(hotter);
        keys
    }

    /// Distinct non-NULL keys on each side.
    pub fn distinct(&self) -> (u64, u64) {
        let left = self.keys.iter().filter(|k| k.left > 0).count() as u64;
        let right = self.keys.iter().filter(|k| k.right > 0).count() as u64;
        (left, right)
    }
}

/// Output rows a key with `left` and `right` rows contributes to a `how` join.
pub fn key_output(how: JoinType, left: u64, right: u64) -> u64 {
    let mut rows = 0;
    if how.emits_pairs() {
        rows += left * right;
    }
    for (side, mine, theirs) in [(Side::Left, left, right), (Side::Right, right, left)] {
        if theirs == 0 && how.keeps_unmatched(side) {
            rows += mine;
        }
        if theirs > 0 && how.semi_side() == Some(side) {
            rows += mine;
        }
    }
    rows
}

/// Spreads `count` records evenly over all partitions.
pub(crate) fn spread(loads: &mut [PartitionLoad], count: u64, output: bool) {
    let partitions = loads.len() as u64;
    for (index, load) in loads.iter_mut().enumerate() {
        let share = count / partitions + u64::from((index as u64) < count % partitions);
        load.input_records += share;
        if output {
            load.output_rows += share;
        }
    }
}

#[cfg(test)]
mod tests {
    use skewjoin_operators::Partitioning;

    use super::*;
    use crate::exec::join_in_memory;
    use crate::strategies::{Broadcast, Shuffle};
    use crate::strategy::Resolved;

    fn keys(values: &[i64]) -> Vec<(i64, u32)> {
        values.iter().map(|&k| (k, 0)).collect()
    }

    #[test]
    fn key_output_follows_the_join_type() {
        assert_eq!(key_output(JoinType::Inner, 3, 4), 12);
        assert_eq!(key_output(JoinType::Left, 3, 0), 3);
        assert_eq!(key_output(JoinType::Right, 3, 0), 0);
        assert_eq!(key_output(JoinType::Full, 0, 2), 2);
        assert_eq!(key_output(JoinType::LeftSemi, 3, 4), 3);
        assert_eq!(key_output(JoinType::LeftAnti, 3, 4), 0);
        assert_eq!(key_output(JoinType::RightAnti, 3, 0), 0);
        assert_eq!(key_output(JoinType::RightAnti, 0, 5), 5);
    }

    #[test]
    fn predictions_equal_measured_load() {
        // Skewed keys without NULLs: the prediction must be exact, partition by partition.
        let left: Vec<i64> = (0..400)
            .map(|i| if i % 3 == 0 { 7 } else { i % 37 })
            .collect();
        let right: Vec<i64> = (0..300)
            .map(|i| if i % 2 == 0 { 7 } else { 50 + i % 11 })
            .collect();
        let (l, r) = (keys(&left), keys(&right));
        for how in JoinType::ALL {
            let mut strategies = vec![Resolved::Shuffle(Shuffle)];
            for side in [Side::Left, Side::Right] {
                if !how.tracks_matches(side) {
                    strategies.push(Resolved::Broadcast(Broadcast { side }));
                }
            }
            for resolved in strategies {
                for (partitions, workers) in [(8, 2), (5, 3)] {
                    let (_, measured) =
                        join_in_memory(&l, &r, how, resolved, partitions, workers).unwrap();
                    let predicted = resolved
                        .predict(how, &left, &right, Partitioning::new(partitions, workers))
                        .unwrap();
                    assert_eq!(predicted, measured.per_partition, "{how} {resolved:?}");
                }
            }
        }
    }

    #[test]
    fn hottest_keys_come_first() {
        let stats = KeyStats::from_keys(&[1i64, 1, 2, 3, 3, 3], &[1i64, 3, 4]);
        let hot = stats.hottest(2);
        assert_eq!(hot[0].key, 3);
        assert_eq!(hot[1].key, 1);
        assert_eq!(stats.distinct(), (3, 3));
    }

    /// The `n` hottest are the first `n` of every key in order, whatever `n`, ties included.
    #[test]
    fn the_hottest_n_are_the_first_n_of_all_in_order() {
        let left: Vec<i64> = (0..600).map(|row| (row * 7919) % 97 % 23).collect();
        let right: Vec<i64> = (0..300).map(|row| (row * 104_729) % 89 % 31).collect();
        let stats = KeyStats::from_keys(&left, &right);
        let all = stats.hottest(usize::MAX);
        assert_eq!(all.len(), stats.keys.len());
        let key = |k: &KeyCount<i64>| (k.pairs(), k.left + k.right);
        for pair in all.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            assert!(
                key(a) > key(b) || (key(a) == key(b) && a.key < b.key),
                "{a:?} {b:?}"
            );
        }
        for n in 0..=all.len() + 1 {
            let first: Vec<i64> = stats.hottest(n).iter().map(|k| k.key).collect();
            let expected: Vec<i64> = all.iter().take(n).map(|k| k.key).collect();
            assert_eq!(first, expected, "n = {n}");
        }
    }
}
