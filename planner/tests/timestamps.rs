//! Every strategy through the builder, over several timestamps whose hot keys drift: each
//! timestamp's output equals the nested-loop join of that timestamp's records, for every join
//! type, W in {1, 2, 3, 4} with P != W, with plans made per timestamp, forced, and stale.
//!
//! Epochs are fed without waiting for the previous one to finish, so their records overlap in
//! the dataflow: a plan made from another epoch's records would show here as missing or extra
//! rows.

use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use proptest::strategy::Strategy as _;
use skewjoin_operators::key_stats::KeyCount;
use skewjoin_operators::reference::nested_loop_join;
use skewjoin_operators::{JoinConfig, JoinType, JoinedRow, Partitioning};
use skewjoin_planner::am_join::HotChoice;
use skewjoin_planner::strategies::{Am, Tree, Vprp};
use skewjoin_planner::strategy::VprpSettings;
use skewjoin_planner::{AmParams, AmPlan, Resolved, SkewJoin, Strategy};
use timely::dataflow::operators::{Input, Inspect, Probe};
use timely::dataflow::{InputHandle, ProbeHandle};

/// A key: `None` is SQL NULL.
type K = Option<u64>;
/// One epoch's records: left and right.
type Epoch = (Vec<(K, u32)>, Vec<(K, u32)>);
type Row = JoinedRow<K, u32, u32>;

/// How a test asks for its strategy.
#[derive(Clone, Debug)]
enum Ask {
    Named(Strategy),
    Resolved(Resolved),
    /// AM-Join (or Tree-Join with `tree`) with a plan made in advance from `stats`.
    Fixed {
        tree: bool,
        stats: Vec<KeyCount<K>>,
        hot: HotChoice,
    },
}

/// Runs the join of `epochs` (epoch `e` at time `e`) on `workers` workers and `partitions`
/// partitions, each worker feeding every `workers`-th record; returns each epoch's rows, or
/// `None` when the builder refuses the join (a broadcast the join type does not allow).
fn run(
    epochs: &[Epoch],
    ask: &Ask,
    how: JoinType,
    workers: usize,
    partitions: usize,
) -> Option<Vec<Vec<Row>>> {
    let epochs = Arc::new(epochs.to_vec());
    let out: Arc<Mutex<Vec<Vec<Row>>>> = Arc::new(Mutex::new(vec![Vec::new(); epochs.len()]));
    let refused = Arc::new(Mutex::new(false));
    let (sink, refusal, ask) = (Arc::clone(&out), Arc::clone(&refused), ask.clone());
    timely::execute(timely::Config::process(workers), move |worker| {
        let index = worker.index();
        let peers = worker.peers();
        let mut left_input = InputHandle::new();
        let mut right_input = InputHandle::new();
        let probe = ProbeHandle::new();
        let sink = Arc::clone(&sink);
        let refusal = Arc::clone(&refusal);
        let ask = ask.clone();
        worker.dataflow::<u32, _, _>(|scope| {
            let left = scope.input_from(&mut left_input);
            let right = scope.input_from(&mut right_input);
            let config = JoinConfig::new().with_partitions(partitions);
            let builder = left.skew_join(right).how(how).config(&config);
            let builder = match ask {
                Ask::Named(strategy) => builder.strategy(strategy),
                Ask::Resolved(resolved) => builder.resolved(resolved),
                Ask::Fixed { tree, stats, hot } => {
                    let params = AmParams::forced(hot);
                    let partitioning = Partitioning::new(partitions, peers);
                    let (l, r) = stats.iter().fold((0, 0), |(l, r), k| (l + k.1, r + k.2));
                    let plan = AmPlan::new(stats, &params, &partitioning, l, r);
                    let resolved = if tree {
                        Resolved::Tree(Tree {
                            params,
                            tree: skewjoin_operators::tree_join::TreeParams { leaf: 3, fanout: 2 },
                        })
                    } else {
                        Resolved::Am(Am { params })
                    };
                    builder.resolved(resolved).plan(plan)
                }
            };
            match builder.rows() {
                Ok(rows) => {
                    rows.inspect_core(move |event| {
                        if let Ok((stamp, rows)) = event {
                            let time = *stamp.elements().first().expect("a time") as usize;
                            sink.lock().unwrap()[time].extend(rows.iter().cloned());
                        }
                    })
                    .probe_with(&probe);
                }
                Err(_) => *refusal.lock().unwrap() = true,
            }
        });
        // Every epoch is sent before any is waited for: their records overlap in the dataflow.
        for (epoch, (left, right)) in epochs.iter().enumerate() {
            left_input.advance_to(epoch as u32);
            right_input.advance_to(epoch as u32);
            for (i, record) in left.iter().enumerate() {
                if i % peers == index {
                    left_input.send(*record);
                }
            }
            for (i, record) in right.iter().enumerate() {
                if i % peers == index {
                    right_input.send(*record);
                }
            }
            worker.step();
        }
        left_input.close();
        right_input.close();
        while !probe.done() {
            worker.step();
        }
    })
    .expect("timely runs");
    if *refused.lock().unwrap() {
        return None;
    }
    let mut rows = Arc::try_unwrap(out).unwrap().into_inner().unwrap();
    rows.iter_mut().for_each(|epoch| epoch.sort());
    Some(rows)
}

/// Each epoch's nested-loop join, sorted.
fn reference(epochs: &[Epoch], how: JoinType) -> Vec<Vec<Row>> {
    epochs
        .iter()
        .map(|(left, right)| {
            let mut rows = nested_loop_join(left, right, how);
            rows.sort();
            rows
        })
        .collect()
}

/// Checks `ask` against the reference; a refusal is accepted only for a broadcast the join type
/// does not allow.
fn check(epochs: &[Epoch], ask: &Ask, how: JoinType, workers: usize, partitions: usize) {
    let expected = reference(epochs, how);
    match run(epochs, ask, how, workers, partitions) {
        Some(got) => {
            for (epoch, (got, expected)) in got.iter().zip(&expected).enumerate() {
                assert!(
                    got == expected,
                    "{ask:?} {how} W={workers} P={partitions} epoch {epoch}: {} rows, expected {}; \
                     missing {:?}, extra {:?}",
                    got.len(),
                    expected.len(),
                    difference(expected, got),
                    difference(got, expected),
                );
            }
        }
        None => assert!(
            matches!(ask, Ask::Named(Strategy::Broadcast)) && how == JoinType::Full,
            "{ask:?} {how}: refused"
        ),
    }
}

/// Rows of `a` not in `b` (multisets, both sorted), the first few.
fn difference(a: &[Row], b: &[Row]) -> Vec<Row> {
    let mut b = b.to_vec();
    let mut out = Vec::new();
    for row in a {
        match b.iter().position(|r| r == row) {
            Some(i) => {
                b.remove(i);
            }
            None => out.push(*row),
        }
    }
    out.truncate(5);
    out
}

/// Records of `key` numbered from `base`.
fn records(key: K, count: u32, base: u32) -> Vec<(K, u32)> {
    (0..count).map(|i| (key, base + i)).collect()
}

/// Three epochs whose hot keys drift: key 0 is hot on both sides, then on the left only, then on
/// the right only; key 1 is hot on the left, then on both, then gone; key 2 appears only on the
/// right, then on both; NULL keys and a tail of cold keys in every epoch.
fn drifting() -> Vec<Epoch> {
    let cold = |base: u32, n: u32| -> Vec<(K, u32)> {
        (0..n)
            .map(|i| (Some(10 + (i as u64 * 7) % 23), base + i))
            .collect()
    };
    let epoch = |parts: Vec<Vec<(K, u32)>>| parts.concat();
    vec![
        (
            epoch(vec![
                records(Some(0), 40, 0),
                records(Some(1), 30, 100),
                records(None, 3, 200),
                cold(300, 30),
            ]),
            epoch(vec![
                records(Some(0), 25, 0),
                records(Some(1), 2, 100),
                records(None, 2, 200),
                cold(300, 20),
            ]),
        ),
        (
            epoch(vec![
                records(Some(0), 45, 0),
                records(Some(1), 25, 100),
                records(None, 2, 200),
                cold(400, 25),
            ]),
            epoch(vec![
                records(Some(1), 30, 100),
                records(Some(2), 12, 150),
                records(None, 1, 200),
                cold(400, 15),
            ]),
        ),
        (
            epoch(vec![
                records(Some(2), 20, 150),
                records(None, 1, 200),
                cold(500, 20),
            ]),
            epoch(vec![
                records(Some(0), 35, 0),
                records(Some(2), 30, 150),
                records(None, 2, 200),
                cold(500, 30),
            ]),
        ),
    ]
}

/// Every strategy by name, and forced hot sets planned per timestamp.
fn every_strategy() -> Vec<Ask> {
    let mut asks = vec![Ask::Named(Strategy::Auto)];
    asks.extend(Strategy::CONCRETE.into_iter().map(Ask::Named));
    for hot in [
        HotChoice::EveryKey,
        HotChoice::EveryKeyLeft,
        HotChoice::Swapped,
    ] {
        asks.push(Ask::Resolved(Resolved::Am(Am {
            params: AmParams::forced(hot),
        })));
    }
    asks.push(Ask::Resolved(Resolved::Vprp(Vprp(
        VprpSettings::default().with_sample_fraction(0.5),
    ))));
    asks
}

/// Plans made in advance from the first epoch's keys: stale for the later epochs, where keys
/// planned hot are absent, one-sided or cold.
fn stale_plans(epochs: &[Epoch]) -> Vec<Ask> {
    let (left, right) = &epochs[0];
    let mut stats: Vec<KeyCount<K>> = Vec::new();
    for key in 0..40u64 {
        let l = left.iter().filter(|r| r.0 == Some(key)).count() as u64;
        let r = right.iter().filter(|r| r.0 == Some(key)).count() as u64;
        if l + r > 0 {
            stats.push((Some(key), l, r));
        }
    }
    // A key planned hot on both sides that never appears, and one only ever on the right.
    stats.push((Some(99), 50, 50));
    stats.push((Some(2), 40, 40));
    // A hand-made plan may list the NULL key: it must stay matchless.
    stats.push((None, 30, 30));
    let mut asks = Vec::new();
    for tree in [false, true] {
        for hot in [
            HotChoice::EveryKey,
            HotChoice::EveryKeyRight,
            HotChoice::Detect,
        ] {
            asks.push(Ask::Fixed {
                tree,
                stats: stats.clone(),
                hot,
            });
        }
    }
    asks
}

/// P != W for each W: more partitions than workers, and fewer (some workers host none).
fn partition_counts(workers: usize) -> Vec<usize> {
    match workers {
        1 => vec![3],
        2 => vec![1],
        3 => vec![7],
        _ => vec![3],
    }
}

#[test]
fn every_strategy_and_join_type_is_exact_per_epoch_as_hot_keys_drift() {
    let epochs = drifting();
    for workers in [1, 2, 3, 4] {
        for partitions in partition_counts(workers) {
            for ask in every_strategy() {
                for how in JoinType::ALL {
                    check(&epochs, &ask, how, workers, partitions);
                }
            }
        }
    }
}

#[test]
fn stale_plans_cost_no_rows() {
    let epochs = drifting();
    for workers in [1, 2, 3, 4] {
        for partitions in partition_counts(workers) {
            for ask in stale_plans(&epochs) {
                for how in JoinType::ALL {
                    check(&epochs, &ask, how, workers, partitions);
                }
            }
        }
    }
}

/// An epoch with one or two hot keys drawn per side (or absent), NULL keys and cold keys.
fn arbitrary_epoch() -> impl proptest::strategy::Strategy<Value = Epoch> {
    let side = (
        prop::collection::vec(
            (prop::option::weighted(0.95, 0u64..30), any::<u32>()),
            0..60,
        ),
        0u64..4,
        0u32..50,
    )
        .prop_map(|(mut records, hot, count)| {
            records.extend((0..count).map(|i| (Some(hot), i)));
            records
        });
    (side.clone(), side)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn random_drifting_epochs_equal_the_reference(
        epochs in prop::collection::vec(arbitrary_epoch(), 1..4),
        strategy in 0usize..Strategy::CONCRETE.len() + 1,
        how in 0usize..JoinType::ALL.len(),
        workers in 1usize..5,
        more in 1usize..6,
    ) {
        let strategy = if strategy == 0 { Strategy::Auto } else { Strategy::CONCRETE[strategy - 1] };
        let partitions = if more == workers { more + 1 } else { more };
        check(&epochs, &Ask::Named(strategy), JoinType::ALL[how], workers, partitions);
        let stale = stale_plans(&epochs);
        check(&epochs, &stale[how % stale.len()], JoinType::ALL[how], workers, partitions);
    }
}
