//! VPRP range planning: from the merged key samples of both sides to a routing table of key
//! ranges ([`RangeTable`]), pure functions.
//!
//! 1. [`classify`]: keys sampled on both sides are *join data* (L), keys on one side only are
//!    *join noise* (V).
//! 2. [`fold_short_noise`]: a run of fewer than `theta` noise keys between join keys is folded
//!    into L: such keys are most likely join keys whose other side the sample missed.
//!    [`DEFAULT_THETA`] is 9, the top of the paper's 4..9: a 5 % sample of sparse join data sees
//!    many join keys on one side only, and unfolded they pile into the first noise ranges.
//!    Measured (`vprp_balance` in benches/measure, join data 15 % of 200,000 rows a side,
//!    P = 8): theta 5 left a third of the sampled join weight as noise, output max/mean 3.67;
//!    see BENCHMARKS.md.
//! 3. [`cut_equal_weight`]: L and V are each cut into `v` contiguous ranges of equal weight
//!    (sampled count, both sides), greedily: a range keeps taking the next key while half of that
//!    key's count still fits under the range's cumulative share `(i + 1) * total / v`; a range is
//!    never left empty while keys remain, and the last range takes the rest.
//! 4. Virtual range `H_i = L_i + V_i`, mapped round-robin onto the `P` partitions
//!    (`H_i -> i mod P`), with `v = alpha * P` ([`DEFAULT_VIRTUAL_PER_PARTITION`] = 2).
//!
//! VPRP-T, the paper's ablation, skips steps 1 and 2 and cuts all sampled keys into `v` ranges.
//! VPRP never splits a key: one key heavier than a partition's share stays on one partition.

use skewjoin_operators::range_pact::RangeTable;

/// The paper's `alpha`: virtual ranges per partition.
pub const DEFAULT_VIRTUAL_PER_PARTITION: u32 = 2;
/// Noise runs shorter than this, between join keys, are folded into join data.
pub const DEFAULT_THETA: usize = 9;

/// The choices of a range plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeParams {
    /// The number of real partitions P.
    pub partitions: usize,
    /// Virtual ranges per partition (alpha); `v = alpha * P`.
    pub virtual_per_partition: usize,
    /// The noise-folding threshold.
    pub theta: usize,
    /// Separate join data from noise (VPRP) or not (VPRP-T).
    pub separate_noise: bool,
}

/// A sampled key: its weight (sampled count over both sides) and whether it is join data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sampled<K> {
    /// The key.
    pub key: K,
    /// Left count plus right count in the samples.
    pub weight: u64,
    /// Sampled on both sides (or folded into join data).
    pub join: bool,
}

/// Merges two sorted samples into one sorted list, marking keys present in both as join data.
pub fn classify<K: Ord + Clone>(left: &[(K, u64)], right: &[(K, u64)]) -> Vec<Sampled<K>> {
    let mut out = Vec::with_capacity(left.len() + right.len());
    let (mut i, mut j) = (0, 0);
    while i < left.len() || j < right.len() {
        let order = match (left.get(i), right.get(j)) {
            (Some(l), Some(r)) => l.0.cmp(&r.0),
            (Some(_), None) => std::cmp::Ordering::Less,
            _ => std::cmp::Ordering::Greater,
        };
        let sampled = match order {
            std::cmp::Ordering::Less => {
                i += 1;
                Sampled {
                    key: left[i - 1].0.clone(),
                    weight: left[i - 1].1,
                    join: false,
                }
            }
            std::cmp::Ordering::Greater => {
                j += 1;
                Sampled {
                    key: right[j - 1].0.clone(),
                    weight: right[j - 1].1,
                    join: false,
                }
            }
            std::cmp::Ordering::Equal => {
                i += 1;
                j += 1;
                Sampled {
                    key: left[i - 1].0.clone(),
                    weight: left[i - 1].1 + right[j - 1].1,
                    join: true,
                }
            }
        };
        out.push(sampled);
    }
    out
}

/// Folds every maximal run of fewer than `theta` noise keys that has join data on both sides
/// into join data.
pub fn fold_short_noise<K>(keys: &mut [Sampled<K>], theta: usize) {
    let mut index = 0;
    while index < keys.len() {
        if keys[index].join {
            index += 1;
            continue;
        }
        let start = index;
        while index < keys.len() && !keys[index].join {
            index += 1;
        }
        let inside = start > 0 && index < keys.len();
        if inside && index - start < theta {
            keys[start..index]
                .iter_mut()
                .for_each(|key| key.join = true);
        }
    }
}

/// Cuts `weights` (in key order) into at most `v` contiguous ranges of equal weight with the
/// greedy rule; returns each key's range, non-decreasing and below `v`.
pub fn cut_equal_weight(weights: &[u64], v: usize) -> Vec<u32> {
    let v = v.max(1) as u128;
    let total: u128 = weights.iter().map(|&w| w as u128).sum();
    let mut range = 0u128;
    let mut taken = 0u128; // weight in ranges 0..=range so far
    let mut in_range = 0usize;
    let mut out = Vec::with_capacity(weights.len());
    for &weight in weights {
        let weight = weight as u128;
        // Fits when taken + weight/2 <= (range + 1) * total / v, in integers.
        let fits = 2 * v * taken + v * weight <= 2 * (range + 1) * total;
        if in_range > 0 && !fits && range + 1 < v {
            range += 1;
            in_range = 0;
        }
        taken += weight;
        in_range += 1;
        out.push(range as u32);
    }
    out
}

/// Plans the routing table from the merged sorted samples of both sides.
pub fn plan_ranges<K: Ord + Clone>(
    left: &[(K, u64)],
    right: &[(K, u64)],
    params: &RangeParams,
) -> RangeTable<K> {
    let partitions = params.partitions.max(1);
    let v = partitions * params.virtual_per_partition.max(1);
    let mut keys = classify(left, right);
    if keys.is_empty() {
        return RangeTable::single();
    }
    let mut virtual_of_key = vec![0u32; keys.len()];
    if params.separate_noise {
        fold_short_noise(&mut keys, params.theta);
        for class in [true, false] {
            let members: Vec<usize> = (0..keys.len()).filter(|&i| keys[i].join == class).collect();
            let weights: Vec<u64> = members.iter().map(|&i| keys[i].weight).collect();
            for (&i, range) in members.iter().zip(cut_equal_weight(&weights, v)) {
                virtual_of_key[i] = range;
            }
        }
    } else {
        let weights: Vec<u64> = keys.iter().map(|key| key.weight).collect();
        virtual_of_key = cut_equal_weight(&weights, v);
    }
    let mut planned = vec![0u64; v];
    let mut boundaries = Vec::new();
    let mut virtual_of_run = vec![virtual_of_key[0]];
    for (index, key) in keys.iter().enumerate() {
        let range = virtual_of_key[index];
        planned[range as usize] += key.weight;
        if index > 0 && range != virtual_of_key[index - 1] {
            boundaries.push(key.key.clone());
            virtual_of_run.push(range);
        }
    }
    RangeTable {
        boundaries,
        virtual_of_run,
        partition_of_virtual: (0..v).map(|i| (i % partitions) as u32).collect(),
        planned,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_weights_cut_evenly() {
        // total 8, v = 4: cumulative shares 2, 4, 6, 8.
        assert_eq!(cut_equal_weight(&[1; 8], 4), vec![0, 0, 1, 1, 2, 2, 3, 3]);
        // total 12, v = 3, shares 4, 8, 12: 3 opens range 0, 3 + 2/2 = 4 <= 4 fits, 5 + 3/2 > 4
        // starts range 1, 8 + 3/2 > 8 starts range 2, which takes the rest.
        assert_eq!(cut_equal_weight(&[3, 2, 3, 3, 1], 3), vec![0, 0, 1, 2, 2]);
    }

    #[test]
    fn a_heavy_key_keeps_a_range_to_itself_and_is_never_split() {
        // total 14, v = 4, shares 3.5, 7, 10.5, 14.
        assert_eq!(cut_equal_weight(&[10, 1, 1, 1, 1], 4), vec![0, 1, 2, 3, 3]);
        // Fewer keys than ranges: every key its own range, the rest empty.
        assert_eq!(cut_equal_weight(&[5, 5], 8), vec![0, 1]);
        assert_eq!(cut_equal_weight(&[], 3), Vec::<u32>::new());
    }

    #[test]
    fn classify_marks_keys_on_both_sides() {
        let keys = classify(&[(1, 2), (3, 1), (5, 1)], &[(2, 1), (3, 4)]);
        let summary: Vec<_> = keys.iter().map(|k| (k.key, k.weight, k.join)).collect();
        assert_eq!(
            summary,
            vec![(1, 2, false), (2, 1, false), (3, 5, true), (5, 1, false)]
        );
    }

    #[test]
    fn short_noise_runs_inside_join_data_are_folded() {
        // J N J N N N N N J N: the single N is folded, the run of 5 is not (theta 5), nor the
        // trailing run (not inside join data).
        let pattern = [
            true, false, true, false, false, false, false, false, true, false,
        ];
        let mut keys: Vec<Sampled<u32>> = pattern
            .iter()
            .enumerate()
            .map(|(i, &join)| Sampled {
                key: i as u32,
                weight: 1,
                join,
            })
            .collect();
        fold_short_noise(&mut keys, 5);
        let folded: Vec<bool> = keys.iter().map(|k| k.join).collect();
        assert_eq!(
            folded,
            vec![true, true, true, false, false, false, false, false, true, false]
        );
    }

    #[test]
    fn vprp_cuts_join_data_and_noise_separately() {
        // Join keys 10, 20, 30, 40 (weight 2 each); noise 1, 2, 3, 4 below them (one side).
        let left = [
            (1, 1),
            (2, 1),
            (3, 1),
            (4, 1),
            (10, 1),
            (20, 1),
            (30, 1),
            (40, 1),
        ];
        let right = [(10, 1), (20, 1), (30, 1), (40, 1)];
        let params = RangeParams {
            partitions: 2,
            virtual_per_partition: 1,
            theta: 5,
            separate_noise: true,
        };
        let table = plan_ranges(&left, &right, &params);
        // L = {10, 20 | 30, 40} and V = {1, 2 | 3, 4}: H_0 = {1, 2, 10, 20}, H_1 = {3, 4, 30, 40}.
        assert_eq!(table.boundaries, vec![3, 10, 30]);
        assert_eq!(table.virtual_of_run, vec![0, 1, 0, 1]);
        assert_eq!(table.planned, vec![6, 6]);
        assert_eq!(table.partition_of_virtual, vec![0, 1]);
        for (key, partition) in [
            (0, 0),
            (2, 0),
            (3, 1),
            (9, 1),
            (10, 0),
            (25, 0),
            (30, 1),
            (99, 1),
        ] {
            assert_eq!(table.partition_of(&key), partition, "key {key}");
        }
        // VPRP-T cuts all 8 keys (weight 12) by weight: 1,2,3,4,10 (6) | 20,30,40 (6).
        let table = plan_ranges(
            &left,
            &right,
            &RangeParams {
                separate_noise: false,
                ..params
            },
        );
        assert_eq!(table.boundaries, vec![20]);
        assert_eq!(table.planned, vec![6, 6]);
    }

    #[test]
    fn an_empty_sample_routes_everything_to_one_range() {
        let params = RangeParams {
            partitions: 4,
            virtual_per_partition: 2,
            theta: 5,
            separate_noise: true,
        };
        let table = plan_ranges::<u64>(&[], &[], &params);
        assert_eq!(table.partition_of(&7), 0);
    }

    #[test]
    fn vprp_spreads_distinct_keys_evenly_and_noise_too() {
        use crate::exec::join_in_memory;
        use crate::strategies::Vprp;
        use crate::strategy::{Resolved, VprpSettings};
        use skewjoin_operators::JoinType;
        // 64 join keys (10 rows a side) and 64 noise keys on the left only, interleaved in
        // blocks of 16, longer than the theta fold, so that no noise run is folded: with 16
        // virtual ranges over 8 partitions, each partition gets 8 join keys and 8 noise keys.
        const BLOCK: i64 = 16;
        assert!(BLOCK as usize >= DEFAULT_THETA);
        let mut left = Vec::new();
        let mut right = Vec::new();
        for key in 0..128i64 {
            let join = (key / BLOCK) % 2 == 0;
            for copy in 0..10 {
                left.push((key, copy));
                if join {
                    right.push((key, copy));
                }
            }
        }
        let settings = VprpSettings::default().with_sample_fraction(1.0);
        let (rows, loads) = join_in_memory(
            &left,
            &right,
            JoinType::Inner,
            Resolved::Vprp(Vprp(settings)),
            8,
            2,
        )
        .unwrap();
        assert_eq!(rows.len(), 64 * 100);
        assert!(
            loads.input_imbalance() < 1.01,
            "{}",
            loads.input_imbalance()
        );
        assert!(
            loads.output_imbalance() < 1.01,
            "{}",
            loads.output_imbalance()
        );
    }
}
