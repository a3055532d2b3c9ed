//! AM-Join's plans made inside the dataflow, one per timestamp.
//!
//! A plan is valid for the records it was made from and no others: a key hot on both sides at
//! one time may have no right records at the next, and AM-Join's grid joins its cells as inner
//! joins because "a key hot on both sides has records on both sides". So every timestamp gets
//! its own plan, made on every worker from that timestamp's records only, and AM-Join's routing
//! holds a timestamp's records until its plan is known ([`crate::am_join`]). Epochs may overlap:
//! nothing is planned from another timestamp's data.
//!
//! - [`AmPlanning::PerTimestamp`]: keys are counted per timestamp (exactly, or with Space-Saving
//!   summaries), the hot ones gathered on every worker with the timestamp's input sizes, and
//!   [`AmPlan::new`] plans from them, as the command line does for its one timestamp.
//! - [`AmPlanning::Fixed`]: a plan made elsewhere (from other data, an earlier epoch, by hand) is
//!   checked per timestamp: each worker notes which of the plan's keys it saw on each side, and a
//!   key planned hot on a side where the timestamp has no record of it is demoted
//!   ([`AmPlan::restricted`]). A stale plan then costs time (a key that turned cold stays on a
//!   grid or a broadcast), never rows.
//! - [`AmPlanning::Exact`]: a plan made from exact counts of exactly the records the dataflow
//!   will see (the command line's statistics phase, one timestamp): used as is, without holding
//!   records.

use std::rc::Rc;

use rustc_hash::FxHashSet;
use serde::{Deserialize, Serialize};
use skewjoin_operators::heavy_hitters::summarised_hot_keys;
use skewjoin_operators::key_stats::{
    counts_for, hot_keys_by_size, HotThresholds, KeyCount, KeyCounts,
};
use skewjoin_operators::{JoinKey, Partitioning, Side};
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::vec::{Broadcast, Map};
use timely::dataflow::operators::{Capability, Concat};
use timely::dataflow::StreamVec;
use timely::progress::Timestamp;
use timely::ExchangeData;

use crate::am_join::params::{AmParams, Statistics};
use crate::am_join::plan::AmPlan;

/// Where AM-Join's plan comes from.
#[derive(Clone, Debug)]
pub enum AmPlanning<K> {
    /// Counted and planned for each timestamp inside the dataflow, with these parameters.
    PerTimestamp(AmParams),
    /// A plan made in advance, checked against each timestamp's records: keys planned hot where
    /// a timestamp has no records are demoted for that timestamp.
    Fixed(Rc<AmPlan<K>>),
    /// A plan made from exact counts of exactly the records the dataflow sees, at one timestamp:
    /// used as is. A plan made from other records must be [`AmPlanning::Fixed`].
    Exact(Rc<AmPlan<K>>),
}

/// What workers tell each other about one timestamp, for its plan.
#[derive(Clone, Debug, Serialize, Deserialize)]
enum PlanPart<K> {
    /// Record counts `(left, right)` of the timestamp: one worker's, or the totals.
    Rows(u64, u64),
    /// Keys with their counts: the hot keys one owner found, or Space-Saving's candidates.
    Keys(Vec<KeyCount<K>>),
    /// The floors of the merged Space-Saving summaries.
    Floors(u64, u64),
    /// Keys of a fixed plan that one worker saw on one side.
    Seen(Side, Vec<K>),
}

/// One worker's plan for every timestamp of `left` and `right`, emitted at that timestamp once
/// both inputs are complete for it. Every worker computes the same plan. With
/// [`AmPlanning::Exact`], nothing is emitted (the plan needs no checking).
pub fn plans<'s, T, K, L, R>(
    left: &StreamVec<'s, T, (K, L)>,
    right: &StreamVec<'s, T, (K, R)>,
    planning: &AmPlanning<K>,
    partitioning: Partitioning,
) -> StreamVec<'s, T, Rc<AmPlan<K>>>
where
    T: Timestamp,
    K: JoinKey,
    L: ExchangeData + Clone,
    R: ExchangeData + Clone,
{
    let scope = left.scope();
    let (parts, make): (StreamVec<'s, T, PlanPart<K>>, _) = match planning {
        AmPlanning::Exact(_) => {
            return timely::dataflow::operators::generic::operator::empty(scope);
        }
        AmPlanning::PerTimestamp(params) => {
            let params = *params;
            let rows = record_counts(left, Side::Left)
                .concat(record_counts(right, Side::Right))
                .broadcast();
            let parts = match params.statistics {
                Statistics::Exact => {
                    let thresholds = move |l: u64, r: u64| {
                        params.stats_thresholds(l, r, partitioning.partitions())
                    };
                    hot_keys_by_size(
                        left.clone().partial_key_counts(),
                        right.clone().partial_key_counts(),
                        rows.clone(),
                        thresholds,
                    )
                    .map(|(hot, _)| PlanPart::Keys(hot))
                    .broadcast()
                }
                Statistics::SpaceSaving { capacity } => {
                    let capacity = if capacity == 0 {
                        Statistics::default_capacity(
                            partitioning.partitions(),
                            params.hot_per_mille,
                        )
                    } else {
                        capacity as usize
                    };
                    // Every key the summaries found present: the plan applies the thresholds
                    // of the timestamp's sizes. Every worker merges the same summaries.
                    let present = HotThresholds { left: 0, right: 0 };
                    summarised_hot_keys(left.clone(), right.clone(), capacity, present).flat_map(
                        |(hot, left_floor, right_floor)| {
                            [
                                PlanPart::Keys(hot),
                                PlanPart::Floors(left_floor, right_floor),
                            ]
                        },
                    )
                }
            };
            let rows = rows.map(|(l, r)| PlanPart::Rows(l, r));
            (parts.concat(rows), Made::Counted(params))
        }
        AmPlanning::Fixed(plan) => {
            let parts = seen_keys(left, Side::Left, Rc::clone(plan))
                .concat(seen_keys(right, Side::Right, Rc::clone(plan)))
                .broadcast();
            (parts, Made::Checked(Rc::clone(plan)))
        }
    };
    parts.unary_frontier(Pipeline, "AmPlan", move |_, _| {
        let mut pending: Vec<(Capability<T>, Gathered<K>)> = Vec::new();
        move |(input, frontier), output| {
            input.for_each_stamp(|stamp, data| {
                let gathered = counts_for(&mut pending, &stamp);
                for batch in data {
                    for part in batch.drain(..) {
                        gathered.add(part);
                    }
                }
            });
            let mut index = 0;
            while index < pending.len() {
                if frontier.less_equal(pending[index].0.time()) {
                    index += 1;
                    continue;
                }
                let (capability, gathered) = pending.swap_remove(index);
                let plan = gathered.plan(&make, &partitioning);
                output.session(&capability).give(Rc::new(plan));
            }
        }
    })
}

/// How a timestamp's plan is made from what was gathered.
enum Made<K> {
    /// From counts, with these parameters.
    Counted(AmParams),
    /// By checking this plan against the keys seen.
    Checked(Rc<AmPlan<K>>),
}

/// What one worker gathered of one timestamp.
struct Gathered<K> {
    rows: (u64, u64),
    keys: Vec<KeyCount<K>>,
    floors: Option<(u64, u64)>,
    seen_left: FxHashSet<K>,
    seen_right: FxHashSet<K>,
}

impl<K> Default for Gathered<K> {
    fn default() -> Self {
        Gathered {
            rows: (0, 0),
            keys: Vec::new(),
            floors: None,
            seen_left: FxHashSet::default(),
            seen_right: FxHashSet::default(),
        }
    }
}

impl<K: JoinKey> Gathered<K> {
    fn add(&mut self, part: PlanPart<K>) {
        match part {
            PlanPart::Rows(left, right) => {
                self.rows.0 += left;
                self.rows.1 += right;
            }
            PlanPart::Keys(mut keys) => self.keys.append(&mut keys),
            PlanPart::Floors(left, right) => self.floors = Some((left, right)),
            PlanPart::Seen(Side::Left, keys) => self.seen_left.extend(keys),
            PlanPart::Seen(Side::Right, keys) => self.seen_right.extend(keys),
        }
    }

    fn plan(self, made: &Made<K>, partitioning: &Partitioning) -> AmPlan<K> {
        match made {
            Made::Counted(params) => {
                let (left_rows, right_rows) = self.rows;
                let mut plan = AmPlan::new(self.keys, params, partitioning, left_rows, right_rows);
                plan.set_summary_floors(self.floors);
                plan
            }
            Made::Checked(plan) => {
                plan.restricted(|key| (self.seen_left.contains(key), self.seen_right.contains(key)))
            }
        }
    }
}

/// One worker's record count of `side` per timestamp, as `(left, right)`.
fn record_counts<'s, T, K, V>(
    stream: &StreamVec<'s, T, (K, V)>,
    side: Side,
) -> StreamVec<'s, T, (u64, u64)>
where
    T: Timestamp,
    K: JoinKey,
    V: ExchangeData + Clone,
{
    stream
        .clone()
        .unary_frontier(Pipeline, "AmRows", move |_, _| {
            let mut pending: Vec<(Capability<T>, u64)> = Vec::new();
            move |(input, frontier), output| {
                input.for_each_stamp(|stamp, data| {
                    let count = counts_for(&mut pending, &stamp);
                    for batch in data {
                        *count += batch.len() as u64;
                        batch.clear();
                    }
                });
                pending.retain(|(capability, count)| {
                    if frontier.less_equal(capability.time()) {
                        return true;
                    }
                    let counts = match side {
                        Side::Left => (*count, 0),
                        Side::Right => (0, *count),
                    };
                    output.session(capability).give(counts);
                    false
                });
            }
        })
}

/// The keys of `plan`'s hot classes that one worker sees on `side`, per timestamp.
fn seen_keys<'s, T, K, V>(
    stream: &StreamVec<'s, T, (K, V)>,
    side: Side,
    plan: Rc<AmPlan<K>>,
) -> StreamVec<'s, T, PlanPart<K>>
where
    T: Timestamp,
    K: JoinKey,
    V: ExchangeData + Clone,
{
    stream
        .clone()
        .unary_frontier(Pipeline, "AmSeenKeys", move |_, _| {
            let mut pending: Vec<(Capability<T>, FxHashSet<K>)> = Vec::new();
            move |(input, frontier), output| {
                input.for_each_stamp(|stamp, data| {
                    let seen = counts_for(&mut pending, &stamp);
                    for batch in data {
                        for (key, _) in batch.drain(..) {
                            if plan.class(&key).is_some() && !seen.contains(&key) {
                                seen.insert(key);
                            }
                        }
                    }
                });
                pending.retain_mut(|(capability, seen)| {
                    if frontier.less_equal(capability.time()) {
                        return true;
                    }
                    let keys = std::mem::take(seen).into_iter().collect();
                    output.session(capability).give(PlanPart::Seen(side, keys));
                    false
                });
            }
        })
}
