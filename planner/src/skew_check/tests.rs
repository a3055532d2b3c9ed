use super::*;

/// Work weighed as records and pairs alike, with AM-Join's key count a whole fair share: the
/// loads brute force predicts.
const UNIT: WorkCosts = WorkCosts {
    pair_1024ths: 1024,
    key_count_per_mille: 1000,
    ..WorkCosts::THREADS
};

/// The samples of `processes` processes, each holding `rows` rows a side: keys spread over
/// `distinct` values, and `hot` more rows a side of key 7 on each process.
fn samples(processes: u64, rows: u64, distinct: u64, hot: u64) -> Vec<KeySample> {
    (0..processes)
        .map(|process| {
            let keys: Vec<u64> = (0..rows)
                .map(|row| 1000 + mix64(process * rows + row) % distinct)
                .chain(std::iter::repeat_n(7, hot as usize))
                .collect();
            let mut sample = KeySample::for_rows(rows + hot, rows + hot);
            keys.iter().for_each(|key| sample.add(Side::Left, key));
            keys.iter().for_each(|key| sample.add(Side::Right, key));
            sample
        })
        .collect()
}

#[test]
fn a_cluster_sample_finds_a_hot_key_and_no_skew_in_uniform_keys() {
    for processes in [2, 4, 8] {
        // Uniform: no key is worth AM-Join's count, at any cluster size, even with pairs
        // weighed like records (as written output nearly is).
        let uniform = samples(processes, 200_000, 200_000 * processes, 0);
        assert!(
            sampled_skew(&uniform, processes as usize, processes as usize, UNIT)
                .is_none_or(|skew| !skew.am_pays()),
            "{processes} processes"
        );
        // Key 7 on a fifth of the rows on both sides: its pairs are most of the output, and
        // weigh more than every input record (at 2 %, a counted pair weighing 1/341 of a
        // record, they would not: balancing them would cost more than it saves).
        let hot = samples(processes, 200_000, 200_000 * processes, 50_000);
        let skew = sampled_skew(
            &hot,
            processes as usize,
            processes as usize,
            WorkCosts::CLUSTER,
        )
        .expect("key 7 is hot");
        assert!(skew.is_of(&7u64) && skew.am_pays(), "{processes}: {skew:?}");
    }
}

/// The sample a process of `rows` rows a side would send, its keys drawn by `key_of(i)`
/// for the i-th sampled row: made directly, as sampling 10^8 rows would take the test long.
fn drawn(rows: u64, key_of: impl Fn(u64, usize) -> u64) -> KeySample {
    let sampled = CLUSTER_SAMPLE_ROWS;
    let hashes = (0..2)
        .flat_map(|side| (0..sampled).map(move |i| (side, i)))
        .map(|(side, i)| (key_of(i, side).stable_hash() & !1) | side as u64)
        .collect();
    KeySample {
        hashes,
        rows: [rows; 2],
        sampled: [sampled; 2],
        cut: [0; 2],
    }
}

#[test]
fn cold_keys_sampled_once_on_each_side_do_not_read_as_skew_on_large_inputs() {
    // 10^8 rows a side over 10^7 uniform keys on 4 processes of 4 workers: each sampled
    // row stands for about 6,100, so a cold key sampled once on each side is estimated at
    // 3.7 x 10^7 pairs. Placed, a few such lumps made `auto` choose AM-Join in most seeds.
    for seed in 0..20u64 {
        let heard: Vec<KeySample> = (0..4u64)
            .map(|process| {
                drawn(25_000_000, |i, side| {
                    mix64(seed << 40 ^ process << 32 ^ (side as u64) << 31 ^ i) % 10_000_000
                })
            })
            .collect();
        // Pairs weighed like records: a lump of 3.7 x 10^7 pairs would read as skew.
        let verdict = sampled_skew(&heard, 16, 16, UNIT);
        assert!(
            verdict.is_none_or(|skew| !skew.am_pays()),
            "seed {seed}: {verdict:?}"
        );
        // The same inputs with key 7 on 2 % of every process's rows of both sides.
        let hot: Vec<KeySample> = (0..4u64)
            .map(|process| {
                drawn(25_000_000, |i, side| match i % 50 {
                    0 => 7,
                    _ => mix64(seed << 40 ^ process << 32 ^ (side as u64) << 31 ^ i) % 10_000_000,
                })
            })
            .collect();
        let skew = sampled_skew(&hot, 16, 16, WorkCosts::CLUSTER).expect("key 7 is hot");
        assert!(skew.is_of(&7u64) && skew.am_pays(), "seed {seed}: {skew:?}");
    }
}

#[test]
fn every_order_of_the_samples_gives_the_same_verdict() {
    let mut heard = samples(4, 50_000, 100_000, 700);
    let first = sampled_skew(&heard, 8, 4, WorkCosts::CLUSTER);
    heard.reverse();
    assert_eq!(sampled_skew(&heard, 8, 4, WorkCosts::CLUSTER), first);
    heard.swap(0, 2);
    assert_eq!(sampled_skew(&heard, 8, 4, WorkCosts::CLUSTER), first);
}

#[test]
fn skew_is_seen_in_the_counts() {
    let uniform: Vec<u64> = (0..1000).collect();
    assert_eq!(
        skew_reason(&uniform, &uniform, 8, 8, WorkCosts::THREADS),
        None
    );
    let mut hot = uniform.clone();
    hot.extend([7u64; 200]);
    let finding = skew_reason(&hot, &hot, 8, 8, WorkCosts::THREADS).unwrap();
    assert!(finding.reason.contains("key 7"), "{}", finding.reason);
    assert!(finding.am_pays, "{}", finding.reason);
}

/// A key hot on one side only, as in left Zipf 1.2 x right uniform: on two workers it
/// unbalances Shuffle-Join by less than AM-Join's key count costs, however many partitions
/// they host, and on eight by more.
#[test]
fn a_one_sided_hot_key_pays_for_am_join_only_over_many_workers() {
    // Left: key 7 on 3,000 rows, 7,000 rows of distinct keys; right: 10,000 distinct keys.
    let mut left: Vec<u64> = vec![7; 3000];
    left.extend((0..7000).map(|i| 20_000 + i * 11));
    let right: Vec<u64> = (0..10_000).collect();
    let two = skew_reason(&left, &right, 2, 2, WorkCosts::THREADS).unwrap();
    assert!(two.reason.contains("key 7"), "{}", two.reason);
    assert!(!two.am_pays, "{}", two.reason);
    let two_of_eight = skew_reason(&left, &right, 8, 2, WorkCosts::THREADS).unwrap();
    assert!(!two_of_eight.am_pays, "{}", two_of_eight.reason);
    let eight = skew_reason(&left, &right, 8, 8, WorkCosts::THREADS).unwrap();
    assert!(eight.am_pays, "{}", eight.reason);
}

/// A key on 2,000 of 102,000 rows of both sides, on two workers: its 4 x 10^6 pairs put
/// 2 x 10^6 more on one worker than the mean. Counted, a pair costs 1/256 of an input
/// record, and balancing them is not worth AM-Join's key count (0.75 of a worker's 102,000
/// records); written, a pair costs 3/4 of a record, and it is, as it is on a cluster with
/// the output written. Weighed like records (as `auto` did), the counted pairs would pay.
#[test]
fn output_pairs_weigh_what_the_run_does_with_them() {
    let keys: Vec<u64> = (0..100_000).chain(std::iter::repeat_n(7, 2_000)).collect();
    let verdict = |costs| skew_reason(&keys, &keys, 2, 2, costs).expect("key 7 is hot");
    let counted = verdict(WorkCosts::of_run(1, false));
    assert!(!counted.am_pays, "{}", counted.reason);
    assert!(
        counted.reason.contains("1/256 of an input record"),
        "{}",
        counted.reason
    );
    for (processes, written) in [(1, true), (2, true)] {
        let found = verdict(WorkCosts::of_run(processes, written));
        assert!(found.am_pays, "{processes}: {}", found.reason);
    }
    assert!(verdict(UNIT).am_pays);
    assert!(!verdict(WorkCosts::of_run(2, false)).am_pays);
}

/// The largest share any key has of the output or of one side's input, by brute force.
fn largest_share(left: &[Option<i64>], right: &[Option<i64>], partitions: usize) -> f64 {
    let count = |keys: &[Option<i64>], key: i64| keys.iter().filter(|k| **k == Some(key)).count();
    let keys: std::collections::BTreeSet<i64> =
        left.iter().chain(right).flatten().copied().collect();
    let output: usize = keys.iter().map(|&k| count(left, k) * count(right, k)).sum();
    let p = partitions as f64;
    let fair = |n: usize| (n as f64 / p).max(1.0);
    keys.iter()
        .flat_map(|&k| {
            let (l, r) = (count(left, k), count(right, k));
            [
                (l * r) as f64 / fair(output),
                l as f64 / fair(left.len()),
                r as f64 / fair(right.len()),
            ]
        })
        .fold(0.0, f64::max)
}

/// The busiest worker's input plus output pairs beyond the mean under Shuffle-Join, by
/// brute force: every row placed by its key's hash, every pair counted where it meets.
fn shuffle_excess(
    left: &[Option<i64>],
    right: &[Option<i64>],
    partitions: usize,
    workers: usize,
) -> u64 {
    let placement = Partitioning::new(partitions, workers);
    let place = |key: &i64| placement.owner(placement.partition_of_hash(key.stable_hash() & !1));
    let mut loads = vec![0u64; workers];
    for key in left.iter().chain(right).flatten() {
        loads[place(key)] += 1;
    }
    for l in left.iter().flatten() {
        loads[place(l)] += right.iter().filter(|r| **r == Some(*l)).count() as u64;
    }
    let total: u64 = loads.iter().sum();
    loads.iter().max().unwrap() - total / workers as u64
}

proptest::proptest! {
    /// The bucketed tally finds the key with the largest share, as counting every key by
    /// brute force does, NULL keys counted as rows but never as keys, and with its sides
    /// counted apart and merged; and it predicts Shuffle-Join's excess load exactly, counted on
    /// one thread or several.
    #[test]
    fn the_tally_finds_the_largest_share(
        left in proptest::collection::vec(proptest::option::weighted(0.9, 0i64..40), 0..300),
        right in proptest::collection::vec(proptest::option::weighted(0.9, 0i64..40), 0..300),
        partitions in 1usize..9,
        workers in 1usize..5,
        threads in 1usize..4,
    ) {
        // Each side tallied apart and merged, as the runtime does on two threads.
        let mut tally = KeyTally::default();
        left.iter().for_each(|key| tally.add(Side::Left, key));
        let mut right_tally = KeyTally::default();
        right.iter().for_each(|key| right_tally.add(Side::Right, key));
        tally.merge(right_tally);
        let expected = largest_share(&left, &right, partitions);
        let skew = tally.skew_on_threads(partitions, workers, UNIT, threads);
        // Counted in runs of buckets on several threads, as in one pass.
        proptest::prop_assert_eq!(skew, tally.skew(partitions, workers, UNIT));
        match skew {
            Some(skew) => {
                proptest::prop_assert!((skew.share - expected).abs() < 1e-9, "{:?} {}", skew, expected);
                proptest::prop_assert_eq!(
                    skew.excess,
                    shuffle_excess(&left, &right, partitions, workers)
                );
                proptest::prop_assert_eq!(
                    skew.count_cost,
                    (left.len() + right.len()) as u64 / workers as u64
                );
                let key = left.iter().chain(&right).find(|key| skew.is_of(*key));
                proptest::prop_assert!(key.is_some());
            }
            None => proptest::prop_assert!(expected <= 0.5, "{}", expected),
        }
    }
}

#[test]
fn only_inputs_past_the_sample_size_are_sampled() {
    assert_eq!(sample_shift(0), 0);
    assert_eq!(sample_shift(SAMPLE_ROWS), 0);
    assert_eq!(sample_shift(SAMPLE_ROWS + 1), 1);
    // A uniform 10M x 10M pair: one row in 16.
    assert_eq!(sample_shift(20_000_000), 4);
    assert!(20_000_000 >> sample_shift(20_000_000) <= SAMPLE_ROWS);
}

/// Both sides tallied apart at `shift` and merged, as the runtime does.
fn tally_at(shift: u32, left: &[Option<i64>], right: &[Option<i64>]) -> KeyTally {
    let mut tally = KeyTally::sampled(shift, left.len() as u64);
    left.iter().for_each(|key| tally.add(Side::Left, key));
    let mut right_tally = KeyTally::sampled(shift, right.len() as u64);
    right
        .iter()
        .for_each(|key| right_tally.add(Side::Right, key));
    tally.merge(right_tally);
    tally
}

/// The check of a tally at `shift` of both sides, with the exact pass over every row that it
/// asks for, if any (and whether it asked).
fn checked_at(
    shift: u32,
    left: &[Option<i64>],
    right: &[Option<i64>],
    partitions: usize,
    workers: usize,
) -> (Option<Skew>, bool) {
    let counts = tally_at(shift, left, right).counts(partitions, workers, UNIT, 2);
    let exact = counts.exact_pass().map(|pass| {
        // Counted in two passes merged, as the runtime's threads do.
        let (mut first, mut second) = (pass.clone(), pass);
        left.iter().for_each(|key| first.add(Side::Left, key));
        right.iter().for_each(|key| second.add(Side::Right, key));
        first.merge(second);
        first
    });
    (counts.skew(exact.as_ref()), exact.is_some())
}

/// A sampled tally (one row in 16) with the exact pass it asks for finds what an exact tally
/// does on 300,000-row sides: no hot key on uniform keys, and the same hot key, share and
/// whether AM-Join pays, with the excess within a hundredth of the exact one's, where a key is
/// hot on one side, on both, or a Zipf-like spread of keys is. It asks for the pass wherever a
/// key is hot, and not on uniform keys, which it then reads once. From the sample alone (no
/// pass) it finds the same hot key and whether AM-Join pays, its excess within a quarter.
#[test]
fn a_sampled_tally_finds_what_an_exact_one_does() {
    const ROWS: u64 = 300_000;
    let side = |salt: u64, key: &dyn Fn(u64, u64) -> Option<i64>| -> Vec<Option<i64>> {
        (0..ROWS).map(|row| key(row, mix64(row ^ salt))).collect()
    };
    let uniform = |_: u64, random: u64| Some((random % ROWS) as i64);
    let hot_on_left = |row: u64, random: u64| match row % 7 {
        0 => Some(7),
        _ => Some((random % ROWS) as i64),
    };
    let hot_on_right_rarely = |row: u64, random: u64| match row % 5_000 {
        0 => Some(7),
        _ => Some((random % ROWS) as i64),
    };
    let hot_on_both = |row: u64, random: u64| match row % 10 {
        0 => Some(7),
        9 => None,
        _ => Some((random % ROWS) as i64),
    };
    // Key k on about ROWS / (k + 1) rows: many warm keys, a few hot ones.
    let zipf_like = |_: u64, random: u64| {
        let u = (random >> 11) as f64 / (1u64 << 53) as f64;
        Some(((ROWS as f64).powf(u) - 1.0) as i64)
    };
    type KeyOf<'a> = &'a dyn Fn(u64, u64) -> Option<i64>;
    let cases: [(&str, KeyOf, KeyOf); 4] = [
        ("uniform", &uniform, &uniform),
        ("hot on one side", &hot_on_left, &hot_on_right_rarely),
        ("hot on both sides", &hot_on_both, &hot_on_both),
        ("zipf-like", &zipf_like, &zipf_like),
    ];
    for (name, left_key, right_key) in cases {
        let (left, right) = (side(1, left_key), side(2, right_key));
        for (partitions, workers) in [(2, 2), (8, 2), (8, 8)] {
            let (exact, asked) = checked_at(0, &left, &right, partitions, workers);
            assert!(!asked, "an exact tally needs no pass");
            let (sampled, asked) = checked_at(4, &left, &right, partitions, workers);
            let estimated =
                tally_at(4, &left, &right).skew_on_threads(partitions, workers, UNIT, 2);
            let case = format!("{name}, P = {partitions}, W = {workers}");
            assert_eq!(asked, name != "uniform", "{case}: the exact pass asked for");
            match (&exact, &estimated) {
                (None, None) => {}
                (Some(exact), Some(estimated)) => {
                    assert_eq!(estimated.hash, exact.hash, "{case}");
                    assert_eq!(estimated.am_pays(), exact.am_pays(), "{case}");
                    let off = (estimated.excess as f64 - exact.excess as f64).abs();
                    assert!(
                        off <= exact.excess as f64 / 4.0 + 1_000.0,
                        "{case}: {estimated:?} from the sample against {exact:?}"
                    );
                }
                (exact, estimated) => {
                    panic!("{case}: {estimated:?} from the sample against {exact:?}")
                }
            }
            match (exact, sampled) {
                (None, None) => assert_eq!(name, "uniform", "{case}"),
                (Some(exact), Some(sampled)) => {
                    assert_eq!(sampled.hash, exact.hash, "{case}");
                    assert_eq!(sampled.what, exact.what, "{case}");
                    assert_eq!(sampled.am_pays(), exact.am_pays(), "{case}");
                    assert_eq!(sampled.count_cost, exact.count_cost, "{case}");
                    let off = (sampled.excess as f64 - exact.excess as f64).abs();
                    assert!(
                        off <= exact.excess as f64 / 100.0 + 1_000.0,
                        "{case}: {sampled:?} against {exact:?}"
                    );
                    assert!(
                        (sampled.share - exact.share).abs() <= exact.share / 100.0,
                        "{case}: {sampled:?} against {exact:?}"
                    );
                }
                (exact, sampled) => panic!("{case}: {sampled:?} against {exact:?}"),
            }
        }
    }
}

/// Parts of the sides tallied apart, in any order and on any tally, each told where it starts,
/// sample the rows one pass over each side does: merged, they find the same skew to the last
/// record, as the runtime's skew check relies on when it reads parts on several threads.
#[test]
fn tallies_of_parts_told_where_they_start_are_the_tally_of_the_whole() {
    const ROWS: u64 = 200_000;
    let keys = |salt: u64| -> Vec<Option<i64>> {
        (0..ROWS)
            .map(|row| match row % 9 {
                0 => Some(7),
                8 => None,
                _ => Some((mix64(row ^ salt) % ROWS) as i64),
            })
            .collect()
    };
    let (left, right) = (keys(1), keys(2));
    let shift = 3;
    let whole = tally_at(shift, &left, &right);
    // Left in three parts, right in two, spread over two tallies out of order.
    let parts = [
        (Side::Right, 120_000..200_000),
        (Side::Left, 70_000..130_000),
        (Side::Left, 0..70_000),
        (Side::Right, 0..120_000),
        (Side::Left, 130_000..200_000),
    ];
    let mut tallies = [
        KeyTally::sampled(shift, ROWS),
        KeyTally::sampled(shift, ROWS),
    ];
    for (index, (side, rows)) in parts.into_iter().enumerate() {
        let keys = if side == Side::Left { &left } else { &right };
        let tally = &mut tallies[index % 2];
        tally.continue_at(side, rows.start as u64);
        keys[rows].iter().for_each(|key| tally.add(side, key));
    }
    let [mut merged, other] = tallies;
    merged.merge(other);
    assert_eq!(merged.rows, whole.rows);
    for (partitions, workers) in [(2, 2), (8, 4)] {
        let expected = whole.skew_on_threads(partitions, workers, UNIT, 2);
        assert!(expected.is_some(), "key 7 is hot");
        assert_eq!(
            merged.skew_on_threads(partitions, workers, UNIT, 2),
            expected,
            "P = {partitions}, W = {workers}"
        );
    }
}

/// Rows counted a slice at a time are sampled and counted as row by row, wherever the slices
/// start and end within the sample's blocks of 64 rows, NULL keys included; and about one row
/// in `2^shift` is sampled.
#[test]
fn rows_added_in_slices_are_counted_as_row_by_row() {
    const ROWS: usize = 50_000;
    let keys: Vec<Option<i64>> = (0..ROWS as u64)
        .map(|row| (row % 17 != 3).then_some((mix64(row) % 300) as i64))
        .collect();
    let cuts = [
        0, 1, 63, 64, 65, 200, 1_000, 1_001, 4_096, 4_999, 30_000, ROWS,
    ];
    // The first row's number, as `continue_at` sets it: a part's start, and one where the row
    // numbers wrap around within the slices.
    for (shift, start) in (0..5).flat_map(|shift| [(shift, 10_007), (shift, u64::MAX - 40)]) {
        for side in [Side::Left, Side::Right] {
            let mut by_row = KeyTally::sampled(shift, ROWS as u64);
            by_row.continue_at(side, start);
            keys.iter().for_each(|key| by_row.add(side, key));
            let mut by_slice = KeyTally::sampled(shift, ROWS as u64);
            by_slice.continue_at(side, start);
            for bounds in cuts.windows(2) {
                by_slice.add_all(side, &keys[bounds[0]..bounds[1]]);
            }
            assert_eq!(by_slice.rows, by_row.rows);
            assert_eq!(
                by_slice.buckets, by_row.buckets,
                "shift {shift}, start {start}, {side:?}"
            );
            let counted: usize = by_row.buckets.iter().map(Vec::len).sum();
            let expected = keys.iter().flatten().count() >> shift;
            assert!(
                counted.abs_diff(expected) <= expected / 8,
                "shift {shift}: {counted} rows counted, about {expected} expected"
            );
        }
    }
}

/// Sampling one side's tally and not the other's would count their rows at different rates.
#[test]
#[should_panic(expected = "different rates")]
fn tallies_sampled_at_different_rates_are_not_merged() {
    let mut tally = KeyTally::sampled(2, 10);
    tally.merge(KeyTally::default());
}

/// Where every key is common enough to be set aside (40 keys over 300,000 rows a side), the
/// sampled check with its exact pass estimates nothing: it is the exact tally's, to the last
/// record.
#[test]
fn a_sampled_check_of_common_keys_only_is_exact() {
    const ROWS: u64 = 300_000;
    let side = |salt: u64| -> Vec<Option<i64>> {
        (0..ROWS)
            .map(|row| match mix64(row ^ salt) % 50 {
                0..=4 => Some(7),
                5 => None,
                random => Some(random as i64),
            })
            .collect()
    };
    let (left, right) = (side(1), side(2));
    for (partitions, workers) in [(2, 2), (8, 3)] {
        let (exact, _) = checked_at(0, &left, &right, partitions, workers);
        let (sampled, asked) = checked_at(4, &left, &right, partitions, workers);
        assert!(asked, "P = {partitions}: every key is set aside");
        assert!(exact.is_some(), "P = {partitions}: key 7 is hot");
        assert_eq!(sampled, exact, "P = {partitions}, W = {workers}");
    }
}

/// A key too rare to be set aside (about 40 sampled rows a side at one in 16) can still be hot
/// in a small output: the sample finding it asks for the exact pass, and the check names the
/// key the exact tally does.
#[test]
fn a_hot_key_the_sample_finds_asks_for_the_exact_pass() {
    const ROWS: u64 = 300_000;
    let side = |salt: u64| -> Vec<Option<i64>> {
        (0..ROWS)
            .map(|row| match row % 500 {
                // 600 rows a side: 360,000 pairs, against about 300,000 from the rest.
                0 => Some(7),
                _ => Some((mix64(row ^ salt) % ROWS) as i64 + 100),
            })
            .collect()
    };
    let (left, right) = (side(1), side(2));
    let counts = tally_at(4, &left, &right).counts(8, 2, UNIT, 2);
    assert!(
        counts.counts.set_aside.is_empty(),
        "no key has {EXACT_SAMPLES} sampled rows"
    );
    let (exact, _) = checked_at(0, &left, &right, 8, 2);
    let (sampled, asked) = checked_at(4, &left, &right, 8, 2);
    assert!(asked, "the sample finds key 7 hot");
    let (exact, sampled) = (exact.expect("key 7 is hot"), sampled.expect("key 7 is hot"));
    assert!(
        exact.is_of(&7i64) && sampled.is_of(&7i64),
        "{sampled:?} against {exact:?}"
    );
    assert_eq!(sampled.what, "output");
}
