//! The plan: a collection of `(key, grid)` for the hot keys, changed as the key counts change.
//!
//! The plan is itself a differential collection: when a key's grid changes at time `t`, the
//! plan retracts the old `(key, grid)` and inserts the new one at `t`, so every record routed
//! through the plan (a join with it) is retracted from its old cells and inserted in its new
//! ones at `t`. Whatever the plan says, at every time it holds at most one grid per key, and a
//! left and a right record of a key meet in exactly one cell: the output is exact for any plan;
//! the plan decides only the balance.

use std::collections::HashMap;
use std::hash::Hash;

use differential_dataflow::{AsCollection, ExchangeData, VecCollection};
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::Operator;
use timely::order::TotalOrder;
use timely::progress::Timestamp;

use crate::grid::{replan, Grid, Planned, Tuning};
use crate::load::LoadMeter;
use crate::local::ByTime;
use crate::route::Side;
use crate::Weight;

/// What the planner holds for one key with records on either side or a grid.
#[derive(Default)]
struct KeyState {
    left: u64,
    right: u64,
    planned: Option<Planned>,
}

/// A change of one side's count of a key: `count` with `diff` +1 (the new count) or -1 (the
/// old one), as `count_total` reports it.
type CountChange<K> = (Side, K, u64, isize);

/// The plan from the two sides' key counts, which must be partitioned alike (both come from
/// `count_total`, which exchanges by the key's hash), so that one worker sees both counts of a
/// key and decides its plan alone.
pub fn plan<'s, T, K, R>(
    left_counts: VecCollection<'s, T, (K, i64), isize>,
    right_counts: VecCollection<'s, T, (K, i64), isize>,
    tuning: Tuning,
    workers: u32,
    meter: Option<LoadMeter>,
) -> VecCollection<'s, T, (K, Grid), R>
where
    T: Timestamp + TotalOrder,
    K: ExchangeData + Hash,
    R: Weight,
{
    left_counts
        .inner
        .binary_frontier(
            right_counts.inner,
            Pipeline,
            Pipeline,
            "SkewPlan",
            move |_, _| {
                let mut keys: HashMap<K, KeyState> = HashMap::new();
                let mut pending: ByTime<T, CountChange<K>> = ByTime::new();
                move |(left, left_frontier), (right, right_frontier), output| {
                    for (input, side) in [(left, Side::Left), (right, Side::Right)] {
                        input.for_each_stamp(|stamp, data| {
                            for batch in data {
                                for ((key, count), time, diff) in batch.drain(..) {
                                    let count = count.max(0) as u64;
                                    pending.push(&stamp, &time, (side, key, count, diff));
                                }
                            }
                        });
                    }
                    // Times no input can still send updates for, in order: a key's plan at `t`
                    // follows from its plan before `t` and its counts at `t`.
                    while let Some((capability, mut changes)) = pending.next_complete(|time| {
                        left_frontier.less_equal(time) || right_frontier.less_equal(time)
                    }) {
                        // The retraction of an old count before the new one: a count that only
                        // leaves (the key's last record went) leaves zero.
                        changes.sort_by_key(|change| change.3);
                        let mut touched = Vec::new();
                        for (side, key, count, diff) in changes {
                            let state = keys.entry(key.clone()).or_default();
                            let slot = match side {
                                Side::Left => &mut state.left,
                                Side::Right => &mut state.right,
                            };
                            *slot = if diff > 0 { count } else { 0 };
                            touched.push(key);
                        }
                        touched.sort();
                        touched.dedup();
                        let mut session = output.session(&capability);
                        let time = capability.time().clone();
                        let one = R::from(1);
                        let mut minus_one = one;
                        minus_one.negate();
                        for key in touched {
                            let state = keys.get_mut(&key).expect("touched keys have a state");
                            let next =
                                replan(state.planned, state.left, state.right, tuning, workers);
                            let (old, new) = (state.planned.map(|p| p.grid), next.map(|p| p.grid));
                            if old != new {
                                if let Some(grid) = old {
                                    session.give(((key.clone(), grid), time.clone(), minus_one));
                                }
                                if let Some(grid) = new {
                                    session.give(((key.clone(), grid), time.clone(), one));
                                }
                                if let Some(meter) = &meter {
                                    meter.update(|load| {
                                        load.replans += 1;
                                        load.hot_keys = load.hot_keys + u64::from(new.is_some())
                                            - u64::from(old.is_some());
                                    });
                                }
                            }
                            state.planned = next;
                            if state.left == 0 && state.right == 0 && state.planned.is_none() {
                                keys.remove(&key);
                            }
                        }
                    }
                }
            },
        )
        .as_collection()
}
