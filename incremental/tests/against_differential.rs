//! The skew join against differential's own `join`, `semijoin` and `antijoin`, at every time,
//! over random update streams whose hot keys drift, with deletes, multiplicities above 1 and
//! 1 to 4 workers; and its balance where `join` puts a hot key on one worker.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use differential_dataflow::input::Input;
use differential_dataflow::VecCollection;
use proptest::prelude::*;
use skewjoin_incremental::{
    join_with_plan, max_over_mean, Grid, LoadMeter, SkewJoin, Tuning, WorkerLoad,
};
use timely::dataflow::operators::Probe;
use timely::dataflow::ProbeHandle;

/// One update: key, value, diff.
type Update = (u8, u16, isize);

/// The updates of both sides at one epoch.
#[derive(Clone, Debug)]
struct Epoch {
    left: Vec<Update>,
    right: Vec<Update>,
}

/// Every output update seen, per output, as (datum, time, diff).
type Seen<D> = Arc<Mutex<Vec<(D, u64, isize)>>>;

/// The collection `updates` accumulate to by the end of each epoch, `0..epochs`.
fn accumulated<D: Ord + Clone>(
    updates: &[(D, u64, isize)],
    epochs: u64,
) -> Vec<BTreeMap<D, isize>> {
    (0..epochs)
        .map(|epoch| {
            let mut at: BTreeMap<D, isize> = BTreeMap::new();
            for (datum, time, diff) in updates {
                if *time <= epoch {
                    *at.entry(datum.clone()).or_default() += diff;
                }
            }
            at.retain(|_, diff| *diff != 0);
            at
        })
        .collect()
}

fn seen<D: Send + 'static>() -> Seen<D> {
    Arc::new(Mutex::new(Vec::new()))
}

/// One output of differential's operator and of the skew join's.
type Pair<D> = (Seen<D>, Seen<D>);

/// A full outer join's values.
type BothPadded = (Option<u16>, Option<u16>);

/// Which outputs a run compares.
struct Outputs {
    join: Pair<(u8, (u16, u16))>,
    semi: Pair<(u8, u16)>,
    anti: Pair<(u8, u16)>,
    left_outer: Pair<(u8, (u16, Option<u16>))>,
    full_outer: Pair<(u8, BothPadded)>,
}

/// How the skew join gets its plan.
#[derive(Clone, Debug)]
enum Planning {
    /// From key counts, with this threshold.
    Counted(Tuning),
    /// Given: at each epoch, keys whose grid changes to this one (or to none).
    Forced(Vec<Vec<(u8, Option<Grid>)>>),
}

/// Runs `epochs` on `workers` workers (each feeds the updates whose position is its index modulo
/// `workers`), stepping until each epoch is done or (`step_each` false) only after feeding all
/// of them, and returns every output's updates and each worker's load. A forced plan compares
/// the join only.
fn run(
    epochs: &[Epoch],
    workers: usize,
    planning: Planning,
    step_each: bool,
) -> (Outputs, Vec<WorkerLoad>) {
    let outputs = Outputs {
        join: (seen(), seen()),
        semi: (seen(), seen()),
        anti: (seen(), seen()),
        left_outer: (seen(), seen()),
        full_outer: (seen(), seen()),
    };
    let loads = Arc::new(Mutex::new(vec![WorkerLoad::default(); workers]));
    let epochs = epochs.to_vec();
    let (join, semi, anti) = (
        outputs.join.clone(),
        outputs.semi.clone(),
        outputs.anti.clone(),
    );
    let (left_outer, full_outer) = (outputs.left_outer.clone(), outputs.full_outer.clone());
    let gathered = loads.clone();
    timely::execute(timely::Config::process(workers), move |worker| {
        let (index, peers) = (worker.index(), worker.peers());
        let meter = LoadMeter::new();
        let mut probe = ProbeHandle::new();
        let planning = planning.clone();
        let (mut left_in, mut right_in, mut plan_in) = worker.dataflow::<u64, _, _>(|scope| {
            let (left_in, left) = scope.new_collection::<(u8, u16), isize>();
            let (right_in, right) = scope.new_collection::<(u8, u16), isize>();
            let (plan_in, plan) = scope.new_collection::<(u8, Grid), isize>();
            watch(left.clone().join(right.clone()), &join.0, &mut probe);
            let Planning::Counted(tuning) = planning else {
                let joined = join_with_plan(left, right, plan, Some(meter.clone()), |k, v, v2| {
                    (*k, (*v, *v2))
                });
                watch(joined, &join.1, &mut probe);
                return (left_in, right_in, plan_in);
            };
            let keys: VecCollection<_, u8, isize> = right.clone().map(|(key, _)| key);
            watch(
                left.clone()
                    .skew_join(right.clone(), tuning, Some(meter.clone())),
                &join.1,
                &mut probe,
            );
            watch(left.clone().semijoin(keys.clone()), &semi.0, &mut probe);
            watch(
                left.clone().skew_semijoin(keys.clone(), tuning, None),
                &semi.1,
                &mut probe,
            );
            watch(left.clone().antijoin(keys.clone()), &anti.0, &mut probe);
            watch(
                left.clone().skew_antijoin(keys, tuning, None),
                &anti.1,
                &mut probe,
            );
            // Outer joins in differential's own operators: the join, plus the records whose key
            // has no positive count on the other side.
            let positive = |c: &isize| if *c > 0 { 1isize } else { 0 };
            let left_keys = left
                .clone()
                .map(|(k, _)| k)
                .threshold(move |_, c| positive(c));
            let right_keys = right
                .clone()
                .map(|(k, _)| k)
                .threshold(move |_, c| positive(c));
            let matched = left.clone().join(right.clone());
            let left_only = left.clone().antijoin(right_keys);
            let right_only = right.clone().antijoin(left_keys);
            watch(
                matched
                    .clone()
                    .map(|(k, (v, v2))| (k, (v, Some(v2))))
                    .concat(left_only.clone().map(|(k, v)| (k, (v, None)))),
                &left_outer.0,
                &mut probe,
            );
            watch(
                matched
                    .map(|(k, (v, v2))| (k, (Some(v), Some(v2))))
                    .concat(left_only.map(|(k, v)| (k, (Some(v), None))))
                    .concat(right_only.map(|(k, v2)| (k, (None, Some(v2))))),
                &full_outer.0,
                &mut probe,
            );
            watch(
                left.clone().skew_left_join(right.clone(), tuning, None),
                &left_outer.1,
                &mut probe,
            );
            watch(
                left.skew_full_join(right, tuning, None),
                &full_outer.1,
                &mut probe,
            );
            (left_in, right_in, plan_in)
        });
        let mut grids: BTreeMap<u8, Grid> = BTreeMap::new();
        for (time, epoch) in epochs.iter().enumerate() {
            for (input, updates) in [(&mut left_in, &epoch.left), (&mut right_in, &epoch.right)] {
                for (position, &(key, value, diff)) in updates.iter().enumerate() {
                    if position % peers == index {
                        input.update((key, value), diff);
                    }
                }
                input.advance_to(time as u64 + 1);
                input.flush();
            }
            if let (Planning::Forced(changes), 0) = (&planning, index) {
                for &(key, grid) in changes.get(time).into_iter().flatten() {
                    if let Some(old) = grids.remove(&key) {
                        plan_in.update((key, old), -1);
                    }
                    if let Some(new) = grid {
                        plan_in.update((key, new), 1);
                        grids.insert(key, new);
                    }
                }
            }
            plan_in.advance_to(time as u64 + 1);
            plan_in.flush();
            if step_each {
                worker.step_while(|| probe.less_than(left_in.time()));
            }
        }
        worker.step_while(|| probe.less_than(left_in.time()));
        gathered.lock().unwrap()[index] = meter.get();
    })
    .expect("timely runs");
    let loads = loads.lock().unwrap().clone();
    (outputs, loads)
}

/// Records every update of `collection` into `into`, and has `probe` wait for it.
fn watch<D: differential_dataflow::Data + Send>(
    collection: VecCollection<'_, u64, D, isize>,
    into: &Seen<D>,
    probe: &mut ProbeHandle<u64>,
) {
    let into = into.clone();
    collection
        .inspect(move |update| into.lock().unwrap().push(update.clone()))
        .inner
        .probe_with(probe);
}

/// Asserts that both outputs of a pair accumulate to the same collection at every epoch.
fn same_at_every_time<D: Ord + Clone + std::fmt::Debug>(
    what: &str,
    (reference, skew): &Pair<D>,
    epochs: u64,
) -> Result<(), TestCaseError> {
    let reference = accumulated(&reference.lock().unwrap(), epochs);
    let skew = accumulated(&skew.lock().unwrap(), epochs);
    for (epoch, (want, got)) in reference.iter().zip(&skew).enumerate() {
        prop_assert_eq!(want, got, "{} differs at epoch {}", what, epoch);
    }
    Ok(())
}

/// Updates of one side at one epoch: mostly the epoch's hot key (which drifts from epoch to
/// epoch), some others, some deleted, some with multiplicity 2.
fn side(hot: u8, hot_count: usize) -> impl Strategy<Value = Vec<Update>> {
    let hot_updates = prop::collection::vec(
        (
            0u16..40,
            prop::sample::select(vec![1isize, 1, 2, 3, -1, -2]),
        ),
        hot_count,
    )
    .prop_map(move |updates| {
        updates
            .into_iter()
            .map(|(v, d)| (hot, v, d))
            .collect::<Vec<_>>()
    });
    let other = prop::collection::vec(
        (
            0u8..12,
            0u16..40,
            prop::sample::select(vec![1isize, 1, 2, 3, -1, -2]),
        ),
        0..12,
    );
    (hot_updates, other).prop_map(|(mut hot, other)| {
        hot.extend(other);
        hot
    })
}

fn epochs() -> impl Strategy<Value = Vec<Epoch>> {
    prop::collection::vec(
        (0u8..4, 0usize..40, 0u8..4, 0usize..40).prop_flat_map(
            |(hot_left, left_count, hot_right, right_count)| {
                (side(hot_left, left_count), side(hot_right, right_count))
                    .prop_map(|(left, right)| Epoch { left, right })
            },
        ),
        1..6,
    )
}

/// Whether some key has a positive count on some side at the end of some epoch.
fn some_key_counted(epochs: &[Epoch]) -> bool {
    let mut counts: BTreeMap<(bool, u8), isize> = BTreeMap::new();
    epochs.iter().any(|epoch| {
        for (side, updates) in [(false, &epoch.left), (true, &epoch.right)] {
            for &(key, _, diff) in updates {
                *counts.entry((side, key)).or_default() += diff;
            }
        }
        counts.values().any(|&count| count > 0)
    })
}

/// Random plans: at each epoch some of keys 0..4 get a random grid (cells up to 16, more than
/// the workers: cells then share workers) or lose theirs.
fn forced_plans(epochs: usize) -> impl Strategy<Value = Vec<Vec<(u8, Option<Grid>)>>> {
    let grid = (1u32..=4, 1u32..=4).prop_map(|(rows, cols)| Grid { rows, cols });
    prop::collection::vec(
        prop::collection::vec((0u8..4, prop::option::of(grid)), 0..4),
        epochs,
    )
}

proptest! {
    #![proptest_config(ProptestConfig {
        // SKEW_CASES=N runs more cases locally.
        cases: std::env::var("SKEW_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(48),
        ..ProptestConfig::default()
    })]

    /// Hot keys move from epoch to epoch, with thresholds from "every key is hot" to "none
    /// is", so plans are made, changed and dropped at every epoch; epochs are completed one by
    /// one, or all fed before any is (several times pending in every operator).
    #[test]
    fn the_skew_join_is_differentials_join_at_every_time(
        epochs in epochs(),
        workers in 1usize..=4,
        hot_load in prop::sample::select(vec![0u64, 1, 3, 30, 200, u64::MAX]),
        step_each in any::<bool>(),
    ) {
        let (outputs, loads) = run(&epochs, workers, Planning::Counted(Tuning { hot_load }), step_each);
        let times = epochs.len() as u64;
        same_at_every_time("join", &outputs.join, times)?;
        same_at_every_time("semijoin", &outputs.semi, times)?;
        same_at_every_time("antijoin", &outputs.anti, times)?;
        same_at_every_time("left outer join", &outputs.left_outer, times)?;
        same_at_every_time("full outer join", &outputs.full_outer, times)?;
        if workers > 1 && hot_load <= 1 && some_key_counted(&epochs) {
            prop_assert!(loads.iter().map(|l| l.replans).sum::<u64>() > 0, "{:?}", loads);
        }
    }

    /// Whatever the plan says, and however often it changes, the output is the join's.
    #[test]
    fn any_plan_gives_differentials_join_at_every_time(
        (epochs, plans) in epochs().prop_flat_map(|epochs| {
            let count = epochs.len();
            (Just(epochs), forced_plans(count))
        }),
        workers in 1usize..=4,
        step_each in any::<bool>(),
    ) {
        let (outputs, _) = run(&epochs, workers, Planning::Forced(plans), step_each);
        same_at_every_time("join", &outputs.join, epochs.len() as u64)?;
    }
}

/// One key with `count` records on each side at the first epoch, cold ones around it, and at
/// the second epoch the hot key's records deleted: it goes hot, then home.
fn hot_then_cold(count: u16) -> Vec<Epoch> {
    let mut left: Vec<Update> = (0..count).map(|v| (7, v, 1)).collect();
    let mut right: Vec<Update> = (0..count).map(|v| (7, v, 1)).collect();
    left.extend((0..40).map(|k| (k as u8 + 10, k, 1)));
    right.extend((0..40).map(|k| (k as u8 + 10, k, 1)));
    let delete = |side: &[Update]| {
        side.iter()
            .filter(|u| u.0 == 7)
            .map(|&(k, v, _)| (k, v, -1))
            .collect()
    };
    let second = Epoch {
        left: delete(&left),
        right: delete(&right),
    };
    vec![Epoch { left, right }, second]
}

#[test]
fn a_key_hot_on_both_sides_is_spread_over_every_worker_and_goes_home_when_it_cools() {
    let epochs = hot_then_cold(400);
    let workers = 4;
    let (outputs, spread) = run(
        &epochs,
        workers,
        Planning::Counted(Tuning { hot_load: 10_000 }),
        true,
    );
    same_at_every_time("join", &outputs.join, 2).unwrap();
    let (_, home) = run(
        &epochs,
        workers,
        Planning::Counted(Tuning { hot_load: u64::MAX }),
        true,
    );
    // 160,000 pairs of the hot key: all on one worker without a plan, a quarter each with one.
    let output =
        |loads: &[WorkerLoad]| max_over_mean(loads.iter().map(|l| l.output_updates as f64));
    assert!(output(&home) > 3.5, "without a plan: {home:?}");
    assert!(output(&spread) < 1.2, "with a plan: {spread:?}");
    let peak = |loads: &[WorkerLoad]| max_over_mean(loads.iter().map(|l| l.peak_held as f64));
    assert!(peak(&spread) < peak(&home), "{spread:?} vs {home:?}");
    // The key was planned once and dropped once, on its counting worker.
    assert_eq!(spread.iter().map(|l| l.replans).sum::<u64>(), 2);
    assert_eq!(spread.iter().map(|l| l.hot_keys).sum::<u64>(), 0);
    // Everything deleted but the cold keys' 40 records a side, each held twice: by salt, to be
    // routed, and in its cell.
    assert_eq!(spread.iter().map(|l| l.held).sum::<i64>(), 2 * 80);
}
