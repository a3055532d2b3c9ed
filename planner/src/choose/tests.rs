use super::*;
use crate::strategies::{Am, Der, Ib, Shuffle, Tree};
use crate::work_costs::WorkCosts;
use skewjoin_operators::Side;

fn inputs(how: JoinType, left_rows: u64, right_rows: u64) -> PlanInputs {
    PlanInputs {
        how,
        left_rows,
        right_rows,
        workers: 4,
        broadcast_limit: 1_000_000,
        costs: WorkCosts::THREADS,
    }
}

#[test]
fn auto_runs_ib_join_on_a_small_side_it_may_copy() {
    // IB-Join, not a plain broadcast, even where the join type allows one: it probes as the
    // large side streams in.
    let choice = choose(Strategy::Auto, &inputs(JoinType::Inner, 1_000_000, 100)).unwrap();
    assert_eq!(choice.resolved, Resolved::Ib(Ib { small: Side::Right }));
    // A left join cannot plainly broadcast the left side; IB-Join can.
    let choice = choose(Strategy::Auto, &inputs(JoinType::Left, 100, 1_000_000)).unwrap();
    assert_eq!(choice.resolved, Resolved::Ib(Ib { small: Side::Left }));
    let choice = choose(Strategy::Auto, &inputs(JoinType::RightSemi, 1_000_000, 10)).unwrap();
    assert_eq!(choice.resolved, Resolved::Ib(Ib { small: Side::Right }));
    let choice = choose(Strategy::Auto, &inputs(JoinType::Full, 1000, 1000)).unwrap();
    assert_eq!(choice.resolved, Resolved::Shuffle(Shuffle));
    let choice = choose(Strategy::Auto, &inputs(JoinType::Inner, 1000, 1000)).unwrap();
    assert_eq!(choice.resolved, Resolved::Shuffle(Shuffle));
    // On two threads a copied record costs 1.7 shuffled ones and a record probed in place
    // 0.65 of one: copying pays where the large side is over 7 times the small one, and where
    // the output is written (IB-Join's is not grouped by key) over 11 times. On a cluster,
    // where a shuffled record crosses a socket, from 8.6 times.
    let mut pair = inputs(JoinType::Inner, 100_000, 650_000);
    pair.workers = 2;
    assert_eq!(
        choose(Strategy::Auto, &pair).unwrap().resolved,
        Resolved::Shuffle(Shuffle)
    );
    pair.right_rows = 750_000;
    assert_eq!(
        choose(Strategy::Auto, &pair).unwrap().resolved,
        Resolved::Ib(Ib { small: Side::Left })
    );
    pair.costs = WorkCosts::of_run(1, true);
    pair.right_rows = 1_050_000;
    assert_eq!(
        choose(Strategy::Auto, &pair).unwrap().resolved,
        Resolved::Shuffle(Shuffle)
    );
    pair.right_rows = 1_150_000;
    assert_eq!(
        choose(Strategy::Auto, &pair).unwrap().resolved,
        Resolved::Ib(Ib { small: Side::Left })
    );
    let mut cluster = inputs(JoinType::Inner, 100_000, 800_000);
    cluster.workers = 2;
    cluster.costs = WorkCosts::CLUSTER;
    assert_eq!(
        choose(Strategy::Auto, &cluster).unwrap().resolved,
        Resolved::Shuffle(Shuffle)
    );
    cluster.right_rows = 900_000;
    assert_eq!(
        choose(Strategy::Auto, &cluster).unwrap().resolved,
        Resolved::Ib(Ib { small: Side::Left })
    );
    // Equal sides are never Small-Large, and one worker moves nothing.
    let mut equal = inputs(JoinType::Inner, 1000, 1000);
    equal.costs = WorkCosts::CLUSTER;
    assert_eq!(
        choose(Strategy::Auto, &equal).unwrap().resolved,
        Resolved::Shuffle(Shuffle)
    );
    let mut one = inputs(JoinType::Inner, 1, 1_000_000);
    one.workers = 1;
    assert_eq!(
        choose(Strategy::Auto, &one).unwrap().resolved,
        Resolved::Shuffle(Shuffle)
    );
}

#[test]
fn am_join_runs_ib_join_when_a_side_fits_the_budget() {
    // Small-Large: the right side fits and copying it is cheaper than a shuffle, for every
    // join type (IB-Join indexes either side whatever the join keeps or filters).
    for how in JoinType::ALL {
        let choice = choose(Strategy::Am, &inputs(how, 1_000_000, 100)).unwrap();
        assert_eq!(
            choice.resolved,
            Resolved::Ib(Ib { small: Side::Right }),
            "{how}"
        );
        assert!(choice.reason.contains("IB-Join"), "{}", choice.reason);
        let choice = choose(Strategy::Am, &inputs(how, 100, 1_000_000)).unwrap();
        assert_eq!(
            choice.resolved,
            Resolved::Ib(Ib { small: Side::Left }),
            "{how}"
        );
    }
    // Over the budget: AM-Join's own plan, even though the side is much the smaller.
    let mut over = inputs(JoinType::Full, 200_000_000, 2_000_000);
    over.broadcast_limit = 1_999_999;
    let choice = choose(Strategy::Am, &over).unwrap();
    assert!(
        matches!(choice.resolved, Resolved::Am(Am { .. })),
        "{choice:?}"
    );
    over.broadcast_limit = 2_000_000;
    let choice = choose(Strategy::Am, &over).unwrap();
    assert_eq!(choice.resolved, Resolved::Ib(Ib { small: Side::Right }));
    // Within the budget but not Small-Large: copying 1000 rows to 3 more workers costs more
    // than shuffling both sides would.
    let choice = choose(Strategy::Am, &inputs(JoinType::Inner, 1000, 1000)).unwrap();
    assert!(
        matches!(choice.resolved, Resolved::Am(Am { .. })),
        "{choice:?}"
    );
    // Two equal sides on two workers: not Small-Large; nor a side two thirds of the other's.
    // Half is: against AM-Join's shuffle and key count, copying it pays, though against a
    // shuffle alone (auto, before its skew check) it does not.
    let mut equal = inputs(JoinType::Inner, 300_000, 300_000);
    equal.workers = 2;
    let choice = choose(Strategy::Am, &equal).unwrap();
    assert!(
        matches!(choice.resolved, Resolved::Am(Am { .. })),
        "{choice:?}"
    );
    equal.left_rows = 450_000;
    let choice = choose(Strategy::Am, &equal).unwrap();
    assert!(
        matches!(choice.resolved, Resolved::Am(Am { .. })),
        "{choice:?}"
    );
    equal.left_rows = 600_000;
    let choice = choose(Strategy::Am, &equal).unwrap();
    assert_eq!(choice.resolved, Resolved::Ib(Ib { small: Side::Right }));
    assert!(
        choice.reason.contains("AM-Join's shuffle and key count"),
        "{}",
        choice.reason
    );
    let choice = choose(Strategy::Auto, &equal).unwrap();
    assert_eq!(choice.resolved, Resolved::Shuffle(Shuffle));
    // A zero budget keeps AM-Join's own plan whatever the sizes.
    let mut none = inputs(JoinType::Full, 1_000_000, 1);
    none.broadcast_limit = 0;
    assert!(matches!(
        choose(Strategy::Am, &none).unwrap().resolved,
        Resolved::Am(Am { .. })
    ));
    // Tree keeps its grid: the rule is AM-Join's.
    let choice = choose(Strategy::Tree, &inputs(JoinType::Full, 1_000_000, 100)).unwrap();
    assert!(matches!(choice.resolved, Resolved::Tree(Tree { .. })));
}

#[test]
fn the_budget_follows_memory_and_workers() {
    // A quarter of the memory, shared by one 128-byte copy per worker.
    assert_eq!(broadcast_limit_for_memory(1 << 30, 1), (1 << 28) / 128);
    assert_eq!(broadcast_limit_for_memory(1 << 30, 4), (1 << 28) / 512);
    assert_eq!(broadcast_limit_for_memory(1 << 30, 0), (1 << 28) / 128);
    assert_eq!(broadcast_limit_for_memory(100, 1), 0);
    let fits = inputs(JoinType::Inner, 10, 1_000_001);
    assert!(fits_broadcast(&fits, 1_000_000));
    assert!(!fits_broadcast(&fits, 1_000_001));
}

#[test]
fn broadcast_of_a_full_join_is_an_error() {
    let error = choose(Strategy::Broadcast, &inputs(JoinType::Full, 10, 10)).unwrap_err();
    assert!(error.to_string().contains("--strategy shuffle"), "{error}");
    let choice = choose(Strategy::Ib, &inputs(JoinType::Full, 10, 20)).unwrap();
    assert_eq!(choice.resolved, Resolved::Ib(Ib { small: Side::Left }));
    let choice = choose(Strategy::Der, &inputs(JoinType::Full, 30, 20)).unwrap();
    assert_eq!(choice.resolved, Resolved::Der(Der { small: Side::Right }));
    for name in [
        "auto",
        "shuffle",
        "broadcast",
        "ib",
        "der",
        "ddr",
        "vprp",
        "vprp-t",
        "am",
        "tree",
        "tree-basic",
    ] {
        assert_eq!(name.parse::<Strategy>().unwrap().name(), name);
    }
}

/// A hot key hands `auto` to what `-s am` runs, and the reason says which: AM-Join on two
/// equal sides, IB-Join where one side is small enough that a copy costs less than AM-Join's
/// shuffle and key count (600,000 x 3M on two threads), though not less than a shuffle.
#[test]
fn a_hot_key_gives_auto_what_am_join_would_run_with_the_reason() {
    let inputs = |left_rows, right_rows| PlanInputs {
        how: JoinType::Inner,
        left_rows,
        right_rows,
        workers: 2,
        broadcast_limit: 10_000_000,
        costs: WorkCosts::THREADS,
    };
    let hot = |am_pays| SkewFinding {
        am_pays,
        reason: "key 7 is hot".into(),
    };
    let small_large = inputs(600_000, 3_000_000);
    let shuffle = choose(Strategy::Auto, &small_large).unwrap();
    assert_eq!(shuffle.resolved, Resolved::Shuffle(Shuffle), "{shuffle:?}");
    let choice = decide(hot(true), shuffle.clone(), &small_large);
    assert_eq!(choice.resolved, Resolved::Ib(Ib { small: Side::Left }));
    assert!(
        choice.reason.starts_with("key 7 is hot; but"),
        "{}",
        choice.reason
    );
    assert!(
        choice.reason.contains("IB-Join copies the left side"),
        "{}",
        choice.reason
    );
    assert!(
        !choice.reason.contains("AM-Join counts"),
        "{}",
        choice.reason
    );

    let equal = inputs(3_000_000, 3_000_000);
    let choice = decide(hot(true), shuffle.clone(), &equal);
    assert!(
        matches!(choice.resolved, Resolved::Am(Am { .. })),
        "{choice:?}"
    );
    assert!(
        choice.reason.contains("AM-Join counts the keys"),
        "{}",
        choice.reason
    );

    let choice = decide(hot(false), shuffle.clone(), &equal);
    assert_eq!(choice.resolved, Resolved::Shuffle(Shuffle));
    assert_eq!(choice.reason, format!("{}; key 7 is hot", shuffle.reason));
}

/// `resolve` looks at the keys only where `auto` would shuffle by the sizes, and a skewed key
/// then decides; the tuning is applied to what runs, and a strategy that cannot compute the join
/// type is an error before anything is looked at.
#[test]
fn resolve_looks_at_the_keys_only_where_auto_would_shuffle() {
    let tuning = Tuning {
        hot_per_mille: Some(7),
        ..Tuning::default()
    };
    let skewed = || {
        Ok::<_, CannotCompute>(KeyCheck::Skewed(SkewFinding {
            am_pays: true,
            reason: "key 7 is hot".into(),
        }))
    };
    let never = || -> Result<KeyCheck, CannotCompute> { panic!("the keys were looked at") };
    let equal = inputs(JoinType::Inner, 1000, 1000);

    let choice = resolve(Strategy::Auto, &equal, &tuning, skewed).unwrap();
    let Resolved::Am(Am { params }) = choice.resolved else {
        panic!("{choice:?}")
    };
    assert_eq!(params.hot_per_mille, 7, "tuned");
    assert!(
        choice.reason.starts_with("key 7 is hot; AM-Join counts"),
        "{}",
        choice.reason
    );

    // A Small-Large join, or a strategy asked for: the keys are not read.
    let small_large = inputs(JoinType::Inner, 1_000_000, 100);
    let choice = resolve(Strategy::Auto, &small_large, &tuning, never).unwrap();
    assert_eq!(choice.resolved, Resolved::Ib(Ib { small: Side::Right }));
    let choice = resolve(Strategy::Shuffle, &equal, &tuning, never).unwrap();
    assert_eq!(choice.resolved, Resolved::Shuffle(Shuffle));
    let error = resolve(
        Strategy::Broadcast,
        &inputs(JoinType::Full, 10, 10),
        &tuning,
        never,
    )
    .unwrap_err();
    assert_eq!(
        error,
        CannotCompute {
            strategy: Strategy::Broadcast,
            how: JoinType::Full
        }
    );

    // Even keys keep Shuffle-Join; a cluster's sample says what it looked at.
    let even = resolve(Strategy::Auto, &equal, &tuning, || {
        Ok::<_, CannotCompute>(KeyCheck::counted(None))
    })
    .unwrap();
    assert_eq!(even.resolved, Resolved::Shuffle(Shuffle));
    assert_eq!(even.reason, choose(Strategy::Auto, &equal).unwrap().reason);
    let sampled = resolve(Strategy::Auto, &equal, &tuning, || {
        Ok::<_, CannotCompute>(KeyCheck::sampled(None))
    })
    .unwrap();
    assert_eq!(sampled.resolved, Resolved::Shuffle(Shuffle));
    assert!(
        sampled
            .reason
            .starts_with("a sample of every process's keys finds no key"),
        "{}",
        sampled.reason
    );

    // The builder's `auto`, planned per timestamp: AM-Join on equal sides, IB-Join where a copy
    // costs less than AM-Join's shuffle and count, though not less than a shuffle.
    let per_timestamp = || Ok::<_, CannotCompute>(KeyCheck::PerTimestamp);
    let choice = resolve(Strategy::Auto, &equal, &tuning, per_timestamp).unwrap();
    assert!(
        matches!(choice.resolved, Resolved::Am(Am { .. })),
        "{choice:?}"
    );
    let mut between = inputs(JoinType::Inner, 600_000, 3_000_000);
    between.workers = 2;
    between.broadcast_limit = 10_000_000;
    assert_eq!(
        choose(Strategy::Auto, &between).unwrap().resolved,
        Resolved::Shuffle(Shuffle)
    );
    let choice = resolve(Strategy::Auto, &between, &tuning, per_timestamp).unwrap();
    assert_eq!(choice.resolved, Resolved::Ib(Ib { small: Side::Left }));
}
