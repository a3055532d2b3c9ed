use super::build_table::{estimate_distinct, permute, BuildTable};
use super::grouped_keys::GroupedKeys;
use super::join::{hash_join, local_join};
use super::slots::LOOKUP_BATCH;
use super::stepped::SteppedJoin;
use crate::hash::mix64;
use crate::join_logic::each_row;
use crate::join_type::{JoinType, Side};
use crate::key::{JoinKey, Key};

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
