//! Space-Saving heavy-hitter summaries: the cheap alternative to exact key counts for finding hot
//! keys. A summary keeps at most a fixed number of counters however many distinct keys a worker
//! sees, summaries merge, and [`summarised_hot_keys`] turns both inputs into the same
//! `(key, left, right)` list that [`crate::key_stats::hot_keys`] produces from exact counts.
//!
//! **The summary** (Metwally, Agrawal and El Abbadi's Space-Saving, pruned in batches): each
//! monitored key has a `count` and an `error` with `count - error <= true count <= count`, and a
//! key that is not monitored has a true count of at most the summary's `floor`. A new key starts
//! at `floor + 1` with error `floor`; when more than twice the capacity of keys are monitored, the
//! smallest are evicted down to the capacity and the floor rises to the largest evicted count.
//! Merging (Agarwal et al.'s mergeable summaries) adds the counts of keys in both summaries, adds
//! the other summary's floor to keys only in one (their count there is at most that floor), and
//! prunes; the merged floor is the sum of the floors, or more after pruning.
//!
//! **What the join may rely on.** Estimates only change the cost of a plan, never its result, as
//! long as a key is said to have records on a side only when it certainly has: the list reports a
//! side's count as the estimate where its lower bound `count - error` is positive, and as 0
//! otherwise. A truly hot key is detected whenever the merged floor is at most the threshold
//! (the key is then monitored, and its estimate is at least its true count): [`HeavyHitters`]
//! reports the floors so that a planner can say so.
//!
//! ```
//! use skewjoin_operators::heavy_hitters::SpaceSaving;
//!
//! let mut summary = SpaceSaving::new(2);
//! for key in [1u64, 1, 1, 1, 2, 2, 3, 4, 5, 1] {
//!     summary.insert(key);
//! }
//! let (upper, lower) = summary.bounds(&1);
//! assert!(lower <= 5 && 5 <= upper);
//! assert!(summary.bounds(&9).0 <= summary.floor().max(1));
//! ```

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::vec::Broadcast;
use timely::dataflow::StreamVec;
use timely::progress::Timestamp;
use timely::ExchangeData;

use crate::key::JoinKey;
use crate::key_stats::{counts_for, flush, HotThresholds, KeyCount};

/// One monitored key's counter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counter {
    /// An upper bound of the key's true count.
    pub count: u64,
    /// How much of `count` may be overestimate.
    pub error: u64,
}

/// A Space-Saving summary of the keys of a stream.
#[derive(Clone, Debug)]
pub struct SpaceSaving<K> {
    capacity: usize,
    counters: HashMap<K, Counter>,
    floor: u64,
}

impl<K: JoinKey> SpaceSaving<K> {
    /// An empty summary keeping `capacity` counters (at least 1) after each pruning.
    pub fn new(capacity: usize) -> SpaceSaving<K> {
        SpaceSaving {
            capacity: capacity.max(1),
            counters: HashMap::new(),
            floor: 0,
        }
    }

    /// Counts one record of `key`.
    #[inline]
    pub fn insert(&mut self, key: K) {
        self.add(key, 1, 0);
    }

    /// Adds `count` (of which `error` may be overestimate) to `key`.
    fn add(&mut self, key: K, count: u64, error: u64) {
        let floor = self.floor;
        let counter = self.counters.entry(key).or_insert(Counter {
            count: floor,
            error: floor,
        });
        counter.count += count;
        counter.error += error;
        if self.counters.len() > 2 * self.capacity {
            self.prune();
        }
    }

    /// Keeps the `capacity` largest counters (ties broken by key, so that every worker prunes
    /// alike) and raises the floor to the largest count evicted.
    fn prune(&mut self) {
        if self.counters.len() <= self.capacity {
            return;
        }
        let mut counters: Vec<(K, Counter)> = self.counters.drain().collect();
        counters.sort_by(|a, b| b.1.count.cmp(&a.1.count).then_with(|| a.0.cmp(&b.0)));
        self.floor = self.floor.max(counters[self.capacity].1.count);
        counters.truncate(self.capacity);
        self.counters.extend(counters);
    }

    /// Merges `other` into this summary.
    pub fn merge(&mut self, other: SpaceSaving<K>) {
        let (mine, theirs) = (self.floor, other.floor);
        let mut seen = std::mem::take(&mut self.counters);
        for (key, counter) in other.counters {
            let merged = match seen.remove(&key) {
                Some(own) => Counter {
                    count: own.count + counter.count,
                    error: own.error + counter.error,
                },
                // Not monitored here: at most `mine` records of it were counted here.
                None => Counter {
                    count: counter.count + mine,
                    error: counter.error + mine,
                },
            };
            self.counters.insert(key, merged);
        }
        for (key, own) in seen {
            let merged = Counter {
                count: own.count + theirs,
                error: own.error + theirs,
            };
            self.counters.insert(key, merged);
        }
        self.floor = mine + theirs;
        self.capacity = self.capacity.max(other.capacity);
        self.prune();
    }

    /// The most records a key that is not monitored can have.
    pub fn floor(&self) -> u64 {
        self.floor
    }

    /// `(upper, lower)` bounds of `key`'s true count.
    pub fn bounds(&self, key: &K) -> (u64, u64) {
        match self.counters.get(key) {
            Some(counter) => (counter.count, counter.count - counter.error),
            None => (self.floor, 0),
        }
    }

    /// The monitored keys with their counters, in key order, and the floor: what is exchanged.
    pub fn into_parts(self) -> (u64, Vec<(K, Counter)>) {
        let mut counters: Vec<(K, Counter)> = self.counters.into_iter().collect();
        counters.sort_by(|a, b| a.0.cmp(&b.0));
        (self.floor, counters)
    }

    /// A summary from [`SpaceSaving::into_parts`].
    pub fn from_parts(capacity: usize, floor: u64, counters: Vec<(K, Counter)>) -> SpaceSaving<K> {
        SpaceSaving {
            capacity: capacity.max(1),
            counters: counters.into_iter().collect(),
            floor,
        }
    }

    /// The monitored keys.
    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.counters.keys()
    }
}

/// A worker's summary of one side as it travels: the worker, the floor and the counters.
type Shipped<K> = (usize, u64, Vec<(K, Counter)>);

/// What [`summarised_hot_keys`] found: the hot keys and the floors of the merged summaries.
pub type HeavyHitters<K> = (Vec<KeyCount<K>>, u64, u64);

/// The keys hot on either side under `thresholds`, estimated from Space-Saving summaries of
/// `capacity` counters per worker and side, as `(hot keys, left floor, right floor)` on every
/// worker at each time. Every worker merges all workers' summaries in worker order, so all
/// compute the same list. A side's count of a key is its estimate where the key certainly has
/// records on that side, and 0 where it may have none (see the module notes).
pub fn summarised_hot_keys<'s, T, K, L, R>(
    left: StreamVec<'s, T, (K, L)>,
    right: StreamVec<'s, T, (K, R)>,
    capacity: usize,
    thresholds: HotThresholds,
) -> StreamVec<'s, T, HeavyHitters<K>>
where
    T: Timestamp,
    K: JoinKey,
    L: ExchangeData,
    R: ExchangeData,
{
    let left = summarise(left, capacity).broadcast();
    let right = summarise(right, capacity).broadcast();
    type Gathered<K> = (Vec<Shipped<K>>, Vec<Shipped<K>>);
    left.binary_frontier(right, Pipeline, Pipeline, "HeavyHitters", move |_, _| {
        let mut pending: Vec<(timely::dataflow::operators::Capability<T>, Gathered<K>)> =
            Vec::new();
        move |(input_left, frontier_left), (input_right, frontier_right), output| {
            input_left.for_each_stamp(|stamp, data| {
                let gathered = counts_for(&mut pending, &stamp);
                for batch in data {
                    gathered.0.append(batch);
                }
            });
            input_right.for_each_stamp(|stamp, data| {
                let gathered = counts_for(&mut pending, &stamp);
                for batch in data {
                    gathered.1.append(batch);
                }
            });
            let mut index = 0;
            while index < pending.len() {
                let time = pending[index].0.time();
                if frontier_left.less_equal(time) || frontier_right.less_equal(time) {
                    index += 1;
                    continue;
                }
                let (capability, (left, right)) = pending.swap_remove(index);
                let left = merge_in_worker_order(left, capacity);
                let right = merge_in_worker_order(right, capacity);
                let mut keys: Vec<&K> = left.keys().chain(right.keys()).collect();
                keys.sort();
                keys.dedup();
                let mut hot = Vec::new();
                for key in keys {
                    let present = |(upper, lower): (u64, u64)| if lower > 0 { upper } else { 0 };
                    let (l, r) = (present(left.bounds(key)), present(right.bounds(key)));
                    if thresholds.is_hot(l, r) {
                        hot.push((key.clone(), l, r));
                    }
                }
                output
                    .session(&capability)
                    .give((hot, left.floor(), right.floor()));
            }
        }
    })
}

/// Each worker's summary of its non-NULL keys at each time.
fn summarise<'s, T, K, V>(
    stream: StreamVec<'s, T, (K, V)>,
    capacity: usize,
) -> StreamVec<'s, T, Shipped<K>>
where
    T: Timestamp,
    K: JoinKey,
    V: ExchangeData,
{
    let worker = stream.scope().index();
    stream.unary_frontier(Pipeline, "SpaceSaving", move |_, _| {
        let mut pending: Vec<(
            timely::dataflow::operators::Capability<T>,
            Option<SpaceSaving<K>>,
        )> = Vec::new();
        move |(input, frontier), output| {
            input.for_each_stamp(|stamp, data| {
                let summary = counts_for(&mut pending, &stamp)
                    .get_or_insert_with(|| SpaceSaving::new(capacity));
                for batch in data {
                    for (key, _) in batch.drain(..) {
                        if !key.is_null() {
                            summary.insert(key);
                        }
                    }
                }
            });
            flush(&mut pending, frontier, |capability, summary| {
                if let Some(summary) = summary.take() {
                    let (floor, counters) = summary.into_parts();
                    output.session(capability).give((worker, floor, counters));
                }
            });
        }
    })
}

/// Merges shipped summaries in worker order.
fn merge_in_worker_order<K: JoinKey>(
    mut shipped: Vec<Shipped<K>>,
    capacity: usize,
) -> SpaceSaving<K> {
    shipped.sort_by_key(|(worker, _, _)| *worker);
    let mut merged = SpaceSaving::new(capacity);
    for (_, floor, counters) in shipped {
        merged.merge(SpaceSaving::from_parts(capacity, floor, counters));
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The bounds hold for every key, monitored or not.
    fn check_bounds(summary: &SpaceSaving<u64>, truth: &HashMap<u64, u64>) {
        for (key, &count) in truth {
            let (upper, lower) = summary.bounds(key);
            assert!(
                lower <= count && count <= upper,
                "key {key}: {lower} <= {count} <= {upper}"
            );
        }
    }

    proptest! {
        #[test]
        fn bounds_hold_after_inserts_and_merges(
            streams in proptest::collection::vec(proptest::collection::vec(0u64..40, 0..300), 1..4),
            capacity in 1usize..12,
        ) {
            let mut truth: HashMap<u64, u64> = HashMap::new();
            let mut merged = SpaceSaving::new(capacity);
            for stream in &streams {
                let mut summary = SpaceSaving::new(capacity);
                for &key in stream {
                    summary.insert(key);
                    *truth.entry(key).or_default() += 1;
                }
                merged.merge(summary);
            }
            check_bounds(&merged, &truth);
            prop_assert!(merged.keys().count() <= 2 * capacity);
        }
    }

    #[test]
    fn a_dominant_key_is_monitored_with_a_tight_count() {
        let mut summary = SpaceSaving::new(4);
        for i in 0..10_000u64 {
            summary.insert(if i % 2 == 0 { 7 } else { 1000 + i });
        }
        let (upper, lower) = summary.bounds(&7);
        assert!(lower <= 5000 && upper >= 5000);
        assert!(upper - lower <= summary.floor());
        // Half the records are distinct keys: the floor stays far below the hot key.
        assert!(summary.floor() < 5000 / 4, "floor {}", summary.floor());
    }

    #[test]
    fn the_operator_finds_the_hot_keys_on_every_worker() {
        use std::sync::{Arc, Mutex};
        use timely::dataflow::operators::{Inspect, ToStream};
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        timely::execute(timely::Config::process(3), move |worker| {
            let index = worker.index() as u64;
            let sink = Arc::clone(&sink);
            worker.dataflow::<u64, _, _>(|scope| {
                // Key 1: 600 left, 300 right; key 2: 400 on the left only; key 3: on the right
                // only; 3,000 distinct cold keys on each side.
                let mut left: Vec<(u64, ())> = Vec::new();
                let mut right: Vec<(u64, ())> = Vec::new();
                for i in 0..1000u64 {
                    if i % 3 != index {
                        continue;
                    }
                    left.extend([(10_000 + i, ()), (20_000 + i, ()), (30_000 + i, ())]);
                    right.extend([(40_000 + i, ()), (50_000 + i, ()), (60_000 + i, ())]);
                    if i < 600 {
                        left.push((1, ()));
                    }
                    if i < 300 {
                        right.push((1, ()));
                        right.push((3, ()));
                    }
                    if i < 400 {
                        left.push((2, ()));
                    }
                }
                let left = left.to_stream(scope).container::<Vec<_>>();
                let right = right.to_stream(scope).container::<Vec<_>>();
                let thresholds = HotThresholds {
                    left: 100,
                    right: 100,
                };
                summarised_hot_keys(left, right, 64, thresholds).inspect(move |found| {
                    sink.lock().unwrap().push((index, found.clone()));
                });
            });
        })
        .unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 3, "every worker gets the list");
        for (_, (hot, left_floor, right_floor)) in seen.iter() {
            assert_eq!(hot, &seen[0].1 .0, "every worker computes the same list");
            assert!(*left_floor < 100 && *right_floor < 100);
            let find = |key: u64| hot.iter().find(|(k, _, _)| *k == key).cloned();
            let (_, l1, r1) = find(1).expect("key 1 is hot");
            assert!(l1 >= 600 && r1 >= 300);
            let (_, l2, r2) = find(2).expect("key 2 is hot on the left");
            assert!(l2 >= 400);
            // Key 2 has no right records: it must never be said to have some.
            assert_eq!(r2, 0);
            let (_, l3, r3) = find(3).expect("key 3 is hot on the right");
            assert_eq!(l3, 0);
            assert!(r3 >= 300);
        }
    }
}
