//! Every strategy, every join type, several worker and partition counts, against the nested-loop
//! reference: output multisets must be equal.

use proptest::prelude::*;
use skewjoin_operators::key_stats::HotThresholds;
use skewjoin_operators::reference::nested_loop_join;
use skewjoin_operators::tree_join::TreeParams;
use skewjoin_operators::{JoinKey, JoinType, Key, Side};
use skewjoin_planner::am_join::{AmParams, HotChoice, Statistics};
use skewjoin_planner::exec::join_in_memory;
use skewjoin_planner::strategies::{
    Am, Broadcast, Ddr, Der, Ib, Shuffle, Tree, TreeBasic, Vprp, VprpT,
};
use skewjoin_planner::strategy::{Resolved, VprpSettings};

type Rows = Vec<(Key, u32)>;

/// Every resolved strategy that can compute `how`.
fn strategies(how: JoinType) -> Vec<Resolved> {
    let mut all = vec![Resolved::Shuffle(Shuffle)];
    // A full sample makes every sampled key a boundary candidate, so keys equal to boundaries
    // are routed on every run; a partial one leaves keys the table never saw.
    let full = VprpSettings::default().with_sample_fraction(1.0);
    let partial = VprpSettings::default().with_sample_fraction(0.3);
    all.push(Resolved::Vprp(Vprp(full)));
    all.push(Resolved::VprpT(VprpT(partial)));
    for side in [Side::Left, Side::Right] {
        if !how.tracks_matches(side) {
            all.push(Resolved::Broadcast(Broadcast { side }));
        }
        all.push(Resolved::Ib(Ib { small: side }));
        all.push(Resolved::Der(Der { small: side }));
        all.push(Resolved::Ddr(Ddr { small: side }));
    }
    // AM-Join with detected hot keys (on these small inputs nearly every repeated key is hot)
    // and with every key forced hot on both sides (everything through the grid).
    all.push(Resolved::Am(Am {
        params: AmParams::default(),
    }));
    all.push(Resolved::Am(Am {
        params: AmParams::forced(HotChoice::EveryKey),
    }));
    // AM-Join from Space-Saving summaries of two counters: estimates, evictions and merges on
    // every run, which may change the plan but never the output.
    all.push(Resolved::Am(Am {
        params: AmParams {
            statistics: Statistics::SpaceSaving { capacity: 2 },
            ..AmParams::default()
        },
    }));
    // Tree-Join with tiny leaves, so that entries split over several rounds: basic, and inside
    // AM-Join's grid with every key hot on both sides.
    let tiny = TreeParams { leaf: 2, fanout: 2 };
    all.push(Resolved::TreeBasic(TreeBasic { tree: tiny }));
    all.push(Resolved::Tree(Tree {
        params: AmParams::forced(HotChoice::EveryKey),
        tree: tiny,
    }));
    all
}

/// AM-Join with every wrong classification the planner can be forced into.
fn forced_am() -> Vec<Resolved> {
    [
        HotChoice::NoKey,
        HotChoice::EveryKey,
        HotChoice::EveryKeyLeft,
        HotChoice::EveryKeyRight,
        HotChoice::Swapped,
    ]
    .into_iter()
    .map(|hot| {
        Resolved::Am(Am {
            params: AmParams::forced(hot),
        })
    })
    .chain([Resolved::Am(Am {
        params: AmParams {
            thresholds: Some(HotThresholds { left: 2, right: 5 }),
            ..AmParams::default()
        },
    })])
    .collect()
}

/// (workers, partitions) pairs: W in {1, 2, 3, 4, 8}, with P equal to, above and below W.
const LAYOUTS: [(usize, usize); 7] = [(1, 1), (1, 5), (2, 2), (2, 7), (3, 8), (4, 3), (8, 16)];

fn check(left: &Rows, right: &Rows, layouts: &[(usize, usize)]) {
    check_with(left, right, layouts, strategies)
}

fn check_with(
    left: &Rows,
    right: &Rows,
    layouts: &[(usize, usize)],
    strategies: impl Fn(JoinType) -> Vec<Resolved>,
) {
    for how in JoinType::ALL {
        let mut expected = nested_loop_join(left, right, how);
        expected.sort();
        for resolved in strategies(how) {
            for &(workers, partitions) in layouts {
                let (mut rows, loads) =
                    join_in_memory(left, right, how, resolved, partitions, workers).unwrap();
                rows.sort();
                assert_eq!(
                    rows, expected,
                    "{how} join with {resolved:?}, W={workers}, P={partitions}"
                );
                assert_eq!(loads.total_output(), expected.len() as u64);
                assert_eq!(loads.per_partition.len(), partitions);
            }
        }
    }
}

fn rows(keys: Vec<Key>) -> Rows {
    keys.into_iter().zip(0..).collect()
}

fn int_keys(keys: &[Option<i64>]) -> Rows {
    rows(keys.iter().map(|k| Key::from(*k)).collect())
}

#[test]
fn empty_inputs() {
    let some = int_keys(&[Some(1), Some(2), None]);
    check(&Vec::new(), &Vec::new(), &LAYOUTS);
    check(&some, &Vec::new(), &LAYOUTS);
    check(&Vec::new(), &some, &LAYOUTS);
}

#[test]
fn all_null_keys() {
    check(
        &int_keys(&[None, None, None]),
        &int_keys(&[None, None]),
        &LAYOUTS,
    );
}

#[test]
fn a_single_hot_key_on_both_sides() {
    check(
        &int_keys(&[Some(7); 40]),
        &int_keys(&[Some(7); 25]),
        &LAYOUTS,
    );
}

#[test]
fn keys_on_one_side_only() {
    check(
        &int_keys(&[Some(1), Some(2), Some(3), Some(3)]),
        &int_keys(&[Some(4), Some(5), Some(5)]),
        &LAYOUTS,
    );
}

#[test]
fn composite_string_and_integer_keys() {
    let make = |parts: &[(&str, Option<i64>)]| {
        rows(
            parts
                .iter()
                .map(|(s, i)| Key::composite(vec![Key::str(s), Key::from(*i)]))
                .collect(),
        )
    };
    let left = make(&[("a", Some(1)), ("a", Some(2)), ("b", Some(1)), ("a", None)]);
    let right = make(&[
        ("a", Some(1)),
        ("a", Some(1)),
        ("b", Some(2)),
        ("c", Some(1)),
    ]);
    check(&left, &right, &LAYOUTS);
}

#[test]
fn many_string_keys_cut_into_ranges() {
    // 40 distinct string keys over 16 partitions: many ranges, boundaries at sampled keys, and
    // keys on one side only between them (join noise).
    let left = rows(
        (0..120)
            .map(|i| Key::str(&format!("k{:02}", i % 40)))
            .collect(),
    );
    let right = rows(
        (0..60)
            .map(|i| Key::str(&format!("k{:02}", (i * 3) % 50)))
            .collect(),
    );
    check(&left, &right, &[(2, 7), (3, 8), (8, 16)]);
}

#[test]
fn forced_classification_never_changes_the_output() {
    // Hot in both, hot on one side only, cold, one-side-only and NULL keys together.
    let mut left = vec![Some(1); 30];
    left.extend([Some(2); 12]);
    left.extend([Some(3), Some(4), Some(4), Some(5), None, None]);
    let mut right = vec![Some(1); 20];
    right.extend([Some(2), Some(3)]);
    right.extend([Some(6); 9]);
    right.extend([Some(4), None]);
    check_with(&int_keys(&left), &int_keys(&right), &LAYOUTS, |_| {
        forced_am()
    });
    check_with(&int_keys(&right), &int_keys(&left), &LAYOUTS, |_| {
        forced_am()
    });
}

fn key_strategy() -> impl Strategy<Value = Key> {
    prop_oneof![
        1 => Just(Key::Null),
        // A small domain, so that keys collide and some are hot.
        6 => (0i64..12).prop_map(Key::Int),
        2 => "[ab]{0,2}".prop_map(|s| Key::str(&s)),
        1 => ((0i64..3), "[xy]").prop_map(|(i, s)| Key::composite(vec![Key::Int(i), Key::str(&s)])),
    ]
}

fn side_strategy() -> impl Strategy<Value = Rows> {
    prop::collection::vec(key_strategy(), 0..60).prop_map(rows)
}

fn skewed_side() -> impl Strategy<Value = Rows> {
    // Mostly one hot key, plus a few others.
    prop::collection::vec(
        prop_oneof![5 => Just(Key::Int(3)), 2 => (0i64..20).prop_map(Key::Int), 1 => Just(Key::Null)],
        0..120,
    )
    .prop_map(rows)
}

/// One (W, P) layout per generated case: over the cases every layout is exercised, at a
/// seventh of the cost of running every case on every layout (the fixed tests above do that).
fn layout() -> impl Strategy<Value = (usize, usize)> {
    prop::sample::select(LAYOUTS.to_vec())
}

proptest! {
    // 32 cases each: tests/timestamps.rs draws 40 more inputs through the same strategies.
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn random_inputs_match_the_nested_loop(
        left in side_strategy(),
        right in side_strategy(),
        layout in layout(),
    ) {
        check(&left, &right, &[layout]);
    }

    #[test]
    fn skewed_inputs_match_the_nested_loop(
        left in skewed_side(),
        right in skewed_side(),
        layout in layout(),
    ) {
        check(&left, &right, &[layout]);
    }
}

/// IB-Join's tracking step moves at most one bit per distinct small-side key per partition, plus
/// a fixed header per message (P x P messages), whatever the match rate.
#[test]
fn ib_tracking_traffic_is_a_bitset_per_partition() {
    let keys = 1000i64;
    let small = int_keys(&(0..keys).map(Some).collect::<Vec<_>>());
    // Half the small keys match; the large side has 4 rows per matched key.
    let large = int_keys(
        &(0..2000)
            .map(|i| Some(i % (keys / 2) * 2))
            .collect::<Vec<_>>(),
    );
    for (workers, partitions) in [(2, 8), (3, 4)] {
        let (rows, loads) = join_in_memory(
            &large,
            &small,
            JoinType::Full,
            Resolved::Ib(Ib { small: Side::Right }),
            partitions,
            workers,
        )
        .unwrap();
        assert_eq!(rows.len(), 2000 + 500);
        let traffic = loads.total_traffic();
        let p = partitions as u64;
        assert_eq!(traffic.broadcast_records, keys as u64 * p);
        assert_eq!(traffic.tracking_records, p * p);
        // Each partition's bits are padded to whole words per range.
        let bound = p * (keys as u64).div_ceil(8) + p * p * (8 + 8);
        assert!(
            traffic.tracking_bytes <= bound,
            "{} > {bound}",
            traffic.tracking_bytes
        );
    }
}

/// DER sends 4 bytes per locally unmatched small row and DDR the row itself; IB-Join one bit per
/// key. With half the keys matched and 8 partitions, both baselines move more than IB-Join.
#[test]
fn baselines_track_with_more_bytes_than_ib() {
    let small = int_keys(&(0..1000).map(Some).collect::<Vec<_>>());
    let large = int_keys(&(0..2000).map(|i| Some(i % 500 * 2)).collect::<Vec<_>>());
    let bytes = |resolved| {
        let (rows, loads) = join_in_memory(&large, &small, JoinType::Full, resolved, 8, 2).unwrap();
        assert_eq!(rows.len(), 2500);
        loads.total_traffic().tracking_bytes
    };
    let ib = bytes(Resolved::Ib(Ib { small: Side::Right }));
    let der = bytes(Resolved::Der(Der { small: Side::Right }));
    let ddr = bytes(Resolved::Ddr(Ddr { small: Side::Right }));
    assert!(ib < der && der < ddr, "ib {ib}, der {der}, ddr {ddr}");
}

proptest! {
    // Six strategies per join type: fewer cases, the fixed test above covers every layout.
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn forced_classification_matches_the_nested_loop(left in skewed_side(), right in side_strategy()) {
        check_with(&left, &right, &[(2, 8), (3, 5)], |_| forced_am());
    }
}

/// The join by key groups: for each key, every left row with every right row; then the
/// unmatched or matched rows the join type keeps. The nested loop's rule in linear time, for
/// inputs too large to compare with it.
fn grouped_reference(
    left: &Rows,
    right: &Rows,
    how: JoinType,
) -> Vec<(Key, Option<u32>, Option<u32>)> {
    use std::collections::HashMap;
    let mut right_by_key: HashMap<&Key, Vec<u32>> = HashMap::new();
    for (key, value) in right.iter().filter(|(key, _)| !key.is_null()) {
        right_by_key.entry(key).or_default().push(*value);
    }
    let left_keys: std::collections::HashSet<&Key> = left.iter().map(|(key, _)| key).collect();
    let mut out = Vec::new();
    for (key, value) in left {
        let partners = right_by_key.get(key);
        if how.emits_pairs() {
            for right in partners.into_iter().flatten() {
                out.push((key.clone(), Some(*value), Some(*right)));
            }
        }
        let keep = match how {
            JoinType::Left | JoinType::Full | JoinType::LeftAnti => partners.is_none(),
            JoinType::LeftSemi => partners.is_some(),
            _ => false,
        };
        if keep {
            out.push((key.clone(), Some(*value), None));
        }
    }
    for (key, value) in right {
        let matched = !key.is_null() && left_keys.contains(key);
        let keep = match how {
            JoinType::Right | JoinType::Full | JoinType::RightAnti => !matched,
            JoinType::RightSemi => matched,
            _ => false,
        };
        if keep {
            out.push((key.clone(), None, Some(*value)));
        }
    }
    out.sort();
    out
}

#[test]
fn the_grouped_reference_agrees_with_the_nested_loop() {
    let left = int_keys(&[Some(1), Some(2), Some(2), None, Some(4), Some(9)]);
    let right = int_keys(&[Some(2), Some(3), None, Some(2), Some(1), Some(9), Some(9)]);
    for how in JoinType::ALL {
        let mut expected = nested_loop_join(&left, &right, how);
        expected.sort();
        assert_eq!(grouped_reference(&left, &right, how), expected, "{how}");
    }
}

/// Partitions large enough that the join holds their rows in hash buckets (past
/// `skewjoin_operators::buckets::SPLIT_ROWS` rows), with a hot key, NULLs and keys on one side
/// only, for every strategy and join type.
#[test]
fn partitions_held_in_buckets_join_exactly() {
    // Key 7 is hot on the left (a twentieth of its rows) and on 35 rows of the right.
    let side = |rows: u32, hot_every: u32, shift: i64| {
        rows_of(rows, |row| match row % 20 {
            0 => None,
            _ if row % hot_every == 1 => Some(7),
            _ => Some((row as i64 * 7_919) % 50_000 + shift),
        })
    };
    fn rows_of(rows: u32, key: impl Fn(u32) -> Option<i64>) -> Rows {
        (0..rows).map(|row| (Key::from(key(row)), row)).collect()
    }
    let (left, right) = (side(90_000, 20, 0), side(70_000, 2_000, 20_000));
    assert!(left.len() / 2 > skewjoin_operators::buckets::SPLIT_ROWS);
    for how in JoinType::ALL {
        let expected = grouped_reference(&left, &right, how);
        // Tree-Join with its default leaves: the tiny ones of the small tests would copy the hot
        // key's lists thousands of times.
        let sized = strategies(how).into_iter().map(|resolved| match resolved {
            Resolved::Tree(Tree { params, .. }) => Resolved::Tree(Tree {
                params,
                tree: TreeParams::default(),
            }),
            Resolved::TreeBasic(TreeBasic { .. }) => Resolved::TreeBasic(TreeBasic {
                tree: TreeParams::default(),
            }),
            other => other,
        });
        for resolved in sized {
            for (workers, partitions) in [(1, 1), (2, 2)] {
                let (mut rows, _) =
                    join_in_memory(&left, &right, how, resolved, partitions, workers).unwrap();
                rows.sort();
                assert!(
                    rows == expected,
                    "{how} join with {resolved:?}, W={workers}, P={partitions}: {} rows, {} expected",
                    rows.len(),
                    expected.len()
                );
            }
        }
    }
}
