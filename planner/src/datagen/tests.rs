use super::*;

fn spec(keys: u64, skew: f64) -> GenSpec {
    GenSpec {
        keys,
        left_skew: skew,
        right_skew: skew,
        ..GenSpec::default()
    }
}

/// Per-key counts of `keys`, plus the most frequent key (smallest id on
/// ties, so the answer is deterministic).
fn hottest(keys: &[i64]) -> (i64, u64) {
    let counts = key_counts(keys);
    counts
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .expect("non-empty")
}

#[test]
fn splitmix64_matches_reference_vector() {
    let mut sm = SplitMix64::new(1_234_567);
    let got: Vec<u64> = (0..5).map(|_| sm.next_u64()).collect();
    assert_eq!(
        got,
        [
            6457827717110365317,
            3203168211198807973,
            9817491932198370423,
            4593380528125082431,
            16408922859458223821
        ]
    );
}

#[test]
fn xoshiro256starstar_matches_reference_vector() {
    let mut x = Xoshiro256StarStar { s: [1, 2, 3, 4] };
    let got: Vec<u64> = (0..10).map(|_| x.next_u64()).collect();
    assert_eq!(
        got,
        [
            11520,
            0,
            1509978240,
            1215971899390074240,
            1216172134540287360,
            607988272756665600,
            16172922978634559625,
            8476171486693032832,
            10595114339597558777,
            2904607092377533576
        ]
    );
}

#[test]
fn below_stays_in_range_and_hits_every_value() {
    let mut rng = Xoshiro256StarStar::derive(7, 0);
    let mut seen = [0u32; 7];
    for _ in 0..7_000 {
        seen[rng.below(7) as usize] += 1;
    }
    assert!(seen.iter().all(|&c| c > 800), "{seen:?}");
    assert_eq!(rng.below(1), 0);
    // A bound just above 2^63 rejects about half the draws: still in range.
    let n = (1u64 << 63) + 1;
    assert!((0..100).all(|_| rng.below(n) < n));
}

#[test]
fn unit_draws_are_in_unit_interval() {
    let mut rng = Xoshiro256StarStar::derive(1, 2);
    assert!((0..10_000)
        .map(|_| unit_f64(rng.next_u53()))
        .all(|u| (0.0..1.0).contains(&u)));
}

#[test]
fn permutation_is_a_permutation() {
    let mut p = permutation(1000, 3, TAG_SHARED_PERM);
    assert_ne!(p, (0..1000).collect::<Vec<u32>>(), "should be shuffled");
    p.sort_unstable();
    assert_eq!(p, (0..1000).collect::<Vec<u32>>());
    assert_eq!(permutation(1, 3, TAG_SHARED_PERM), [0]);
}

#[test]
fn zipf_cdf_is_normalised_and_monotone() {
    for s in [0.5, 1.0, 1.2, 3.0, 400.0] {
        let cdf = zipf_cdf(500, s);
        assert_eq!(cdf.len(), 500);
        assert_eq!(*cdf.last().unwrap(), 1.0, "s = {s}");
        assert!(cdf.windows(2).all(|w| w[0] <= w[1]), "s = {s}");
    }
    // s = 1 over two ranks: weights 1 and 1/2.
    let cdf = zipf_cdf(2, 1.0);
    assert!((cdf[0] - 2.0 / 3.0).abs() < 1e-15);
}

#[test]
fn guided_search_equals_plain_search() {
    let mut rng = Xoshiro256StarStar::derive(5, 5);
    for (keys, s) in [
        (1, 1.0),
        (2, 0.5),
        (3, 2.0),
        (1000, 1.2),
        (1025, 0.9),
        (5000, 60.0),
    ] {
        let t = ZipfTable::new(keys, s);
        assert_eq!(t.guide.len(), (1usize << t.bits) + 1);
        let plain = |m: u64| t.cdf.partition_point(|&c| c <= unit_f64(m)) as u64;
        let shift = 53 - t.bits;
        let edges = (0..1u64 << t.bits).flat_map(|b| {
            let e = b << shift;
            [e, e.saturating_sub(1), e + 1]
        });
        let randoms = (0..20_000).map(|_| rng.next_u53()).collect::<Vec<_>>();
        for m in edges.chain(randoms).chain([0, (1 << 53) - 1]) {
            assert_eq!(t.rank(m), plain(m), "keys {keys}, s {s}, m {m}");
            assert!(t.rank(m) < keys);
        }
    }
    // Large domains get a capped guide.
    assert_eq!(ZipfTable::new(1 << 23, 1.0).bits, MAX_GUIDE_BITS);
}

#[test]
fn same_seed_is_deterministic_and_other_seeds_differ() {
    let s = GenSpec {
        left_rows: 5_000,
        right_rows: 3_000,
        noise: 0.1,
        independent: true,
        right_skew: 0.7,
        ..GenSpec::default()
    };
    let a = generate(&s);
    assert_eq!(a, generate(&s));
    let b = generate(&GenSpec {
        seed: 43,
        ..s.clone()
    });
    assert_ne!(a.left.key, b.left.key);
    assert_ne!(a.right.key, b.right.key);
    assert_ne!(a.left.value, b.left.value);
    assert_ne!(a.right.value, b.right.value);
}

/// Pins the exact output, so any change to the PRNG, stream derivation or
/// sampling order (which would break parity with already-generated data
/// and with the wasm build) fails loudly.
#[test]
fn output_is_pinned() {
    let s = GenSpec {
        left_rows: 6,
        right_rows: 6,
        keys: 100,
        left_skew: 1.0,
        right_skew: 0.0,
        independent: false,
        noise: 0.25,
        seed: 2024,
    };
    let p = generate(&s);
    assert_eq!(p.left.key, PINNED_LEFT_KEYS);
    assert_eq!(p.right.key, PINNED_RIGHT_KEYS);
    assert_eq!(p.left.value, PINNED_LEFT_VALUES);
    assert_eq!(p.right.value, PINNED_RIGHT_VALUES);
}
// Left row 5 is noise (ids 100..200); the right side is uniform (skew 0).
const PINNED_LEFT_KEYS: [i64; 6] = [12, 58, 52, 12, 96, 130];
const PINNED_RIGHT_KEYS: [i64; 6] = [20, 74, 16, 12, 35, 26];
const PINNED_LEFT_VALUES: [i64; 6] = [673392, 541464, 473989, 961726, 121775, 540822];
const PINNED_RIGHT_VALUES: [i64; 6] = [50408, 227216, 702212, 488222, 616610, 495014];

/// FNV-1a over 64-bit words, to pin large outputs in one number.
fn fnv(words: impl IntoIterator<Item = u64>) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for w in words {
        for b in w.to_le_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// Pins every bit of a CDF table (libm::pow, summation order) and of a
/// larger generated pair in every mode.
#[test]
fn tables_and_larger_output_are_pinned() {
    let cdf = zipf_cdf(10_000, 1.2);
    assert_eq!(fnv(cdf.iter().map(|c| c.to_bits())), PINNED_CDF_HASH);
    let mut hashes = Vec::new();
    for independent in [false, true] {
        let p = generate(&GenSpec {
            left_rows: 20_000,
            right_rows: 10_000,
            keys: 5_000,
            left_skew: 0.8,
            right_skew: 1.3,
            independent,
            noise: 0.05,
            seed: 7,
        });
        let cols = [&p.left.key, &p.left.value, &p.right.key, &p.right.value];
        hashes.push(fnv(cols.iter().flat_map(|c| c.iter().map(|&x| x as u64))));
    }
    assert_eq!(hashes, PINNED_PAIR_HASHES);
}
const PINNED_CDF_HASH: u64 = 0x81d9_1514_2a20_aedd;
const PINNED_PAIR_HASHES: [u64; 2] = [0xb2c3_330b_a042_6fd1, 0x6575_6bd6_261b_d2a1];

#[test]
fn row_counts_ids_and_values_are_exact() {
    for (l, r) in [(0, 0), (0, 17), (1, 0), (12_345, 678)] {
        let p = generate(&GenSpec {
            left_rows: l,
            right_rows: r,
            noise: 0.3,
            ..GenSpec::default()
        });
        for (t, n) in [(&p.left, l), (&p.right, r)] {
            assert_eq!(t.len() as u64, n);
            assert_eq!(t.is_empty(), n == 0);
            assert_eq!(t.key.len(), t.value.len());
            assert!(t.id.iter().copied().eq(0..n as i64));
            assert!(t.value.iter().all(|v| (0..1_000_000).contains(v)));
        }
    }
}

#[test]
fn keys_stay_in_their_ranges() {
    let keys = 50;
    let p = generate(&GenSpec {
        keys,
        noise: 0.0,
        ..GenSpec::default()
    });
    let k = keys as i64;
    assert!(p.left.key.iter().all(|x| (0..k).contains(x)));
    assert!(p.right.key.iter().all(|x| (0..k).contains(x)));
    // Every key of a small domain shows up under mild skew.
    assert_eq!(key_counts(&p.left.key).len(), 50);

    let single = generate(&GenSpec {
        keys: 1,
        left_rows: 10,
        right_rows: 10,
        ..GenSpec::default()
    });
    assert!(single
        .left
        .key
        .iter()
        .chain(&single.right.key)
        .all(|&x| x == 0));
    assert_eq!(single.counts().inner, 100);
}

#[test]
fn skew_concentrates_rows_on_hot_keys() {
    let keys = 1000;
    let rows = 200_000;
    let mean = rows as f64 / keys as f64;

    let skewed = generate(&GenSpec {
        left_rows: rows,
        right_rows: rows,
        ..spec(keys, 1.2)
    });
    let (_, max) = hottest(&skewed.left.key);
    assert!(max as f64 > 100.0 * mean, "max {max}, mean {mean}");
    // The hottest key carries rank 1's share, 1 / sum(r^-1.2) ≈ 0.23.
    let h: f64 = (1..=keys).map(|r| libm::pow(r as f64, -1.2)).sum();
    let expected = rows as f64 / h;
    assert!(
        (max as f64 - expected).abs() < 0.03 * expected,
        "{max} vs {expected}"
    );

    let uniform = generate(&GenSpec {
        left_rows: rows,
        right_rows: rows,
        ..spec(keys, 0.0)
    });
    for t in [&uniform.left, &uniform.right] {
        let (_, max) = hottest(&t.key);
        assert!((max as f64) < 1.5 * mean, "max {max}, mean {mean}");
    }
}

#[test]
fn hot_keys_are_scattered_over_the_domain() {
    // The permutation moves rank 1 away from id 0, and it moves with the seed.
    let hot: Vec<i64> = (0..8)
        .map(|seed| {
            hottest(
                &generate(&GenSpec {
                    seed,
                    ..spec(1000, 1.5)
                })
                .left
                .key,
            )
            .0
        })
        .collect();
    let mut distinct = hot.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(distinct.len() >= 6, "{hot:?}");
}

#[test]
fn shared_mode_has_the_same_hottest_key_on_both_sides() {
    for seed in 0..5 {
        let p = generate(&GenSpec {
            seed,
            right_skew: 0.9,
            ..spec(1000, 1.2)
        });
        assert_eq!(
            hottest(&p.left.key).0,
            hottest(&p.right.key).0,
            "seed {seed}"
        );
    }
}

#[test]
fn independent_mode_usually_has_different_hottest_keys() {
    let differ = (0..10)
        .filter(|&seed| {
            let p = generate(&GenSpec {
                seed,
                independent: true,
                ..spec(1000, 1.2)
            });
            hottest(&p.left.key).0 != hottest(&p.right.key).0
        })
        .count();
    assert!(differ >= 9, "only {differ} of 10 differ");
}

#[test]
fn noise_keys_never_match() {
    let s = GenSpec {
        left_rows: 3_000,
        right_rows: 2_000,
        keys: 100,
        noise: 1.0,
        ..GenSpec::default()
    };
    let p = generate(&s);
    assert!(p.left.key.iter().all(|k| (100..200).contains(k)));
    assert!(p.right.key.iter().all(|k| (200..300).contains(k)));
    let c = p.counts();
    assert_eq!(c.inner, 0);
    assert_eq!(c.left_anti, s.left_rows);
    assert_eq!(c.right_anti, s.right_rows);
    assert_eq!(c.full, s.left_rows + s.right_rows);

    // Partial noise: about that share of rows is out of the shared range.
    let p = generate(&GenSpec {
        noise: 0.3,
        left_rows: 20_000,
        ..s
    });
    let noisy = p.left.key.iter().filter(|&&k| k >= 100).count() as f64;
    assert!((noisy / 20_000.0 - 0.3).abs() < 0.02, "{noisy}");
    assert!(p.counts().left_anti as f64 >= noisy);
}

#[test]
fn join_counts_match_brute_force() {
    let mut rng = Xoshiro256StarStar::derive(99, 0);
    for _ in 0..300 {
        let domain = 1 + rng.below(8) as i64;
        let side = |rng: &mut Xoshiro256StarStar| -> Vec<i64> {
            let n = rng.below(25);
            (0..n)
                .map(|_| rng.below(domain as u64) as i64 - 2)
                .collect()
        };
        let l = side(&mut rng);
        let r = side(&mut rng);

        let mut want = JoinCounts::default();
        for a in &l {
            let matches = r.iter().filter(|b| *b == a).count() as u64;
            want.inner += matches;
            want.left += matches.max(1);
            want.left_semi += u64::from(matches > 0);
            want.left_anti += u64::from(matches == 0);
        }
        for b in &r {
            let matches = l.iter().filter(|a| *a == b).count() as u64;
            want.right += matches.max(1);
            want.right_semi += u64::from(matches > 0);
            want.right_anti += u64::from(matches == 0);
        }
        want.full = want.inner + want.left_anti + want.right_anti;
        assert_eq!(JoinCounts::of(&l, &r), want, "{l:?} {r:?}");
    }
}

#[test]
fn join_counts_do_not_overflow_on_large_products() {
    // 10^6 x 10^6 rows on one key: 10^12 output rows.
    let l = vec![7i64; 1_000_000];
    let r = vec![7i64; 1_000_000];
    let c = JoinCounts::of(&l, &r);
    assert_eq!(c.inner, 1_000_000_000_000);
    assert_eq!(c.full, 1_000_000_000_000);
    assert_eq!(c.left_semi, 1_000_000);
}

#[test]
fn validate_rejects_bad_specs() {
    assert_eq!(GenSpec::default().validate(), Ok(()));
    // Every refusal is a usage error, named by its flag.
    let bad = |s: GenSpec| match s.validate() {
        Err(PlanError::Usage(message)) => message,
        other => panic!("{other:?}"),
    };
    let d = GenSpec::default;
    assert_eq!(
        bad(GenSpec { noise: 1.5, ..d() }),
        "--noise must be between 0 and 1, got 1.5"
    );
    assert!(bad(GenSpec { noise: -0.1, ..d() }).starts_with("--noise"));
    assert!(bad(GenSpec {
        noise: f64::NAN,
        ..d()
    })
    .starts_with("--noise"));
    assert_eq!(
        bad(GenSpec { keys: 0, ..d() }),
        "--keys must be at least 1, got 0"
    );
    assert!(bad(GenSpec {
        keys: MAX_KEYS + 1,
        ..d()
    })
    .starts_with("--keys"));
    assert!(bad(GenSpec {
        left_skew: -1.0,
        ..d()
    })
    .starts_with("--left-skew"));
    assert!(bad(GenSpec {
        left_skew: f64::NAN,
        ..d()
    })
    .starts_with("--left-skew"));
    assert!(bad(GenSpec {
        right_skew: f64::INFINITY,
        ..d()
    })
    .starts_with("--right-skew"));
    // As many rows as a side of a join may have: fewer than u32::MAX, which marks a missing
    // side, so that every generated file can be joined.
    assert!(bad(GenSpec {
        left_rows: u64::from(u32::MAX),
        ..d()
    })
    .starts_with("--left-rows"));
    for ok in [
        GenSpec {
            right_rows: u64::from(u32::MAX) - 1,
            ..d()
        },
        GenSpec { noise: 0.0, ..d() },
        GenSpec { noise: 1.0, ..d() },
        GenSpec {
            keys: 1,
            left_skew: 0.0,
            ..d()
        },
    ] {
        assert_eq!(ok.validate(), Ok(()));
    }
}

#[test]
#[should_panic(expected = "--noise must be between 0 and 1")]
fn generate_panics_on_invalid_spec() {
    generate(&GenSpec {
        noise: 2.0,
        ..GenSpec::default()
    });
}
