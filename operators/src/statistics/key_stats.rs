//! Key statistics: exact per-key record counts of both join inputs, and the *hot* keys found from
//! them, made known to every worker.
//!
//! Counting is combined per worker before anything is exchanged: each worker first totals the
//! keys of its own records, then sends `(key, count)` pairs to the key's owner (by stable hash),
//! which adds the partial counts. A hot key with a million records therefore costs about one
//! message per worker and window, not a million. The owner of a key sees both sides' totals,
//! keeps the keys above a [`HotThresholds`] threshold on either side, and broadcasts those (few)
//! keys with both exact counts to every worker: that list is what AM-Join plans from.
//!
//! The combining map is bounded ([`LOCAL_KEYS`] keys, a size that stays in cache): when it is
//! full its partial counts are sent on and it starts again. Hot keys recur within every window and
//! still combine; keys seen once or twice, which a map of every distinct key would only have
//! copied (10^7 of them on a uniform input, inserted at a cache miss each), pass through at the
//! cost of a cache-resident insert. [`hot_keys`] adds partial counts itself, so AM-Join sends the
//! combined counts ([`KeyCounts::partial_key_counts`]) straight to it.
//!
//! The owner does not total every key either: it keeps the partial counts as they come and adds
//! them up per hash bucket ([`OWNER_BUCKETS`] of them). A bucket's sums are at least the counts
//! of any key in it, so a key in a bucket under both thresholds cannot be hot, and only the keys
//! of the few buckets over one are totalled by key. On 10^7 uniform keys that map of every key,
//! which missed the caches on nearly every record, is gone.
//!
//! Counts are per timestamp: the records of time `t` are counted, and the totals emitted at `t`
//! once the inputs' frontiers have passed `t`. NULL keys match nothing and are never hot, so they
//! are not counted.
//!
//! ```
//! use skewjoin_operators::key_stats::{hot_keys, HotThresholds, KeyCounts};
//! use timely::dataflow::operators::{Capture, ToStream};
//! use timely::dataflow::operators::capture::Extract;
//!
//! let captured = timely::example(|scope| {
//!     let left = vec![(1u64, 'a'), (1, 'b'), (1, 'c'), (2, 'd')].to_stream(scope).container::<Vec<_>>();
//!     let right = vec![(1u64, 10), (3, 30), (3, 31), (3, 32)].to_stream(scope).container::<Vec<_>>();
//!     let thresholds = HotThresholds { left: 2, right: 2 };
//!     hot_keys(left.key_counts(), right.key_counts(), thresholds).capture()
//! });
//! let mut hot: Vec<_> = captured.extract().into_iter().flat_map(|(_, rows)| rows).collect();
//! hot.sort();
//! assert_eq!(hot, vec![(1, 3, 1), (3, 0, 3)]);
//! ```

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::vec::Broadcast;
use timely::dataflow::operators::{Capability, InputCapability};
use timely::dataflow::StreamVec;
use timely::progress::Timestamp;
use timely::ExchangeData;

use crate::hash::mix64;
use crate::key::JoinKey;

/// Counts being gathered for one timestamp, with the capability to emit them at it.
type Pending<T, K, C> = (Capability<T>, FxHashMap<K, C>);

/// The most distinct keys a worker combines before it sends their partial counts on: 2^16
/// entries of a key and a count stay within a core's cache.
pub const LOCAL_KEYS: usize = 1 << 16;

/// Hash buckets an owner adds partial counts up in before it totals any key (1 MiB of sums):
/// far fewer than the distinct keys of a large input, and far more than the keys that can be hot.
pub const OWNER_BUCKETS: usize = 1 << 16;

/// One time's partial counts on the keys' owner: kept as they came, and added up per hash bucket.
struct OwnerTally<K> {
    /// `(key, left count, right count)`, one of the two counts 0.
    partials: Vec<KeyCount<K>>,
    /// Per bucket, the left and right sums; allocated with the first count.
    buckets: Vec<[u64; 2]>,
}

impl<K> Default for OwnerTally<K> {
    fn default() -> Self {
        OwnerTally {
            partials: Vec::new(),
            buckets: Vec::new(),
        }
    }
}

impl<K: JoinKey> OwnerTally<K> {
    /// The bucket of `key`. The stable hash is mixed again: the exchange that brought the key
    /// here chose this worker by its bits.
    fn bucket(key: &K) -> usize {
        (mix64(key.stable_hash()) >> (64 - OWNER_BUCKETS.trailing_zeros())) as usize
    }

    fn add(&mut self, key: K, left: u64, right: u64) {
        if self.buckets.is_empty() {
            self.buckets = vec![[0, 0]; OWNER_BUCKETS];
        }
        let sums = &mut self.buckets[Self::bucket(&key)];
        sums[0] += left;
        sums[1] += right;
        self.partials.push((key, left, right));
    }

    /// The keys hot under `thresholds`, with their exact totals.
    fn hot(self, thresholds: HotThresholds) -> impl Iterator<Item = KeyCount<K>> {
        let buckets = self.buckets;
        let mut totals: FxHashMap<K, (u64, u64)> = FxHashMap::default();
        for (key, left, right) in self.partials {
            let [left_sum, right_sum] = buckets[Self::bucket(&key)];
            if thresholds.is_hot(left_sum, right_sum) {
                let total = totals.entry(key).or_insert((0, 0));
                total.0 += left;
                total.1 += right;
            }
        }
        totals
            .into_iter()
            .filter(move |(_, (left, right))| thresholds.is_hot(*left, *right))
            .map(|(key, (left, right))| (key, left, right))
    }
}

/// A key with its exact record counts on the left and on the right.
pub type KeyCount<K> = (K, u64, u64);

/// A key is hot on a side when its record count there is strictly above that side's threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HotThresholds {
    /// Left records a key needs, more than this, to be hot on the left.
    pub left: u64,
    /// The same for the right.
    pub right: u64,
}

impl HotThresholds {
    /// The default fraction of one partition's fair share of a side above which a key is hot.
    pub const DEFAULT_FRACTION: f64 = 0.005;

    /// Thresholds from the input sizes: a key is hot on a side when it holds more than
    /// `fraction` of one partition's fair share of that side (`rows / partitions`).
    ///
    /// Why a fraction of a share and not the share itself: hash partitioning puts a key whole on
    /// one partition, and the key's *output* grows with the product of its counts, so a key far
    /// below one share of the input can still be several shares of the output. At the default
    /// 0.005 a cold key holds at most a two-hundredth of a share on each side, so its output is at
    /// most 1/40,000 of a share squared; the keys above it are placed by the planner rather than
    /// by their hash, which is what evens out the partitions. Measured with same-rank Zipf, 10^5
    /// rows a side over 10^4 keys, s from 0.5 to 1.5, P = 8 and 32 (`am_balance` in
    /// benches/measure): output max/mean up to 1.46 at 0.1, up to 1.27 at 0.02 (at s = 0.5, where many medium keys
    /// stay cold and hash unevenly), at most 1.09 at 0.005; with independent Zipf 1.0 hot keys,
    /// 10^6 rows, P = 32: 1.63 at 0.02, 1.08 at 0.005, input 1.04 both. The statistics phase
    /// reports at most `P / fraction` keys a side (at most 6,400 at P = 32), a small price. The
    /// threshold is at least 1, so a key met once is never hot.
    pub fn from_sizes(
        left_rows: u64,
        right_rows: u64,
        partitions: usize,
        fraction: f64,
    ) -> HotThresholds {
        let partitions = partitions.max(1) as f64;
        let threshold = |rows: u64| ((rows as f64 / partitions) * fraction).floor().max(1.0) as u64;
        HotThresholds {
            left: threshold(left_rows),
            right: threshold(right_rows),
        }
    }

    /// Thresholds that make every key with a record on a side hot there (for forced plans).
    pub const EVERY_KEY: HotThresholds = HotThresholds { left: 0, right: 0 };

    /// True when `(left, right)` counts make a key hot on either side.
    #[inline]
    pub fn is_hot(&self, left: u64, right: u64) -> bool {
        left > self.left || right > self.right
    }
}

/// Counting the keys of a stream of `(key, value)` records.
pub trait KeyCounts<'s, T: Timestamp, K: JoinKey> {
    /// Exact record counts per non-NULL key: combined on each worker, then exchanged by the key's
    /// stable hash and totalled there, so every key appears once over all workers, on the worker
    /// `stable_hash % W`, at the records' time.
    fn key_counts(self) -> StreamVec<'s, T, (K, u64)>;

    /// Partial record counts per non-NULL key, combined on this worker in windows of at most
    /// [`LOCAL_KEYS`] distinct keys and not exchanged: a key may appear several times and on
    /// several workers, and its counts sum to its record count. What [`hot_keys`] needs.
    fn partial_key_counts(self) -> StreamVec<'s, T, (K, u64)>;
}

impl<'s, T, K, V> KeyCounts<'s, T, K> for StreamVec<'s, T, (K, V)>
where
    T: Timestamp,
    K: JoinKey,
    V: ExchangeData,
{
    fn key_counts(self) -> StreamVec<'s, T, (K, u64)> {
        let pact = Exchange::new(|record: &(K, u64)| record.0.stable_hash());
        self.partial_key_counts()
            .unary_frontier(pact, "CountKeysTotal", |_, _| {
                let mut pending: Vec<Pending<T, K, u64>> = Vec::new();
                move |(input, frontier), output| {
                    input.for_each_stamp(|stamp, data| {
                        let counts = counts_for(&mut pending, &stamp);
                        for batch in data {
                            for (key, count) in batch.drain(..) {
                                *counts.entry(key).or_insert(0) += count;
                            }
                        }
                    });
                    flush(&mut pending, frontier, |capability, counts| {
                        let mut session = output.session(capability);
                        for record in counts.drain() {
                            session.give(record);
                        }
                    });
                }
            })
    }

    fn partial_key_counts(self) -> StreamVec<'s, T, (K, u64)> {
        self.unary_frontier(Pipeline, "CountKeysLocal", |_, _| {
            let mut pending: Vec<Pending<T, K, u64>> = Vec::new();
            move |(input, frontier), output| {
                input.for_each_stamp(|stamp, data| {
                    let (capability, counts) = slot_for(&mut pending, &stamp);
                    for batch in data {
                        for (key, _) in batch.drain(..) {
                            if !key.is_null() {
                                *counts.entry(key).or_insert(0) += 1;
                            }
                        }
                        if counts.len() >= LOCAL_KEYS {
                            let mut session = output.session(capability);
                            for record in counts.drain() {
                                session.give(record);
                            }
                        }
                    }
                });
                flush(&mut pending, frontier, |capability, counts| {
                    let mut session = output.session(capability);
                    for record in counts.drain() {
                        session.give(record);
                    }
                });
            }
        })
    }
}

/// The keys hot on either side under `thresholds`, each with both exact counts, sent to every
/// worker. `left` and `right` are counts of keys, total ([`KeyCounts::key_counts`]) or partial
/// ([`KeyCounts::partial_key_counts`]): they are exchanged by key, so that both sides' counts of a
/// key meet on one worker, and added up there.
pub fn hot_keys<'s, T, K>(
    left: StreamVec<'s, T, (K, u64)>,
    right: StreamVec<'s, T, (K, u64)>,
    thresholds: HotThresholds,
) -> StreamVec<'s, T, KeyCount<K>>
where
    T: Timestamp,
    K: JoinKey,
{
    let by_key = || Exchange::new(|record: &(K, u64)| record.0.stable_hash());
    left.binary_frontier(right, by_key(), by_key(), "HotKeys", move |_, _| {
        let mut pending: Vec<(Capability<T>, OwnerTally<K>)> = Vec::new();
        move |(input_left, frontier_left), (input_right, frontier_right), output| {
            input_left.for_each_stamp(|stamp, data| {
                let tally = counts_for(&mut pending, &stamp);
                for batch in data {
                    for (key, count) in batch.drain(..) {
                        tally.add(key, count, 0);
                    }
                }
            });
            input_right.for_each_stamp(|stamp, data| {
                let tally = counts_for(&mut pending, &stamp);
                for batch in data {
                    for (key, count) in batch.drain(..) {
                        tally.add(key, 0, count);
                    }
                }
            });
            let mut index = 0;
            while index < pending.len() {
                let time = pending[index].0.time();
                if frontier_left.less_equal(time) || frontier_right.less_equal(time) {
                    index += 1;
                    continue;
                }
                let (capability, tally) = pending.swap_remove(index);
                let mut session = output.session(&capability);
                for hot in tally.hot(thresholds) {
                    session.give(hot);
                }
            }
        }
    })
    .broadcast()
}

/// [`hot_keys`] for inputs whose sizes are known only when a time is complete: `rows` carries
/// record counts `(left, right)` of each time from every worker, and must reach every worker
/// (broadcast); the thresholds of a time are `thresholds(left total, right total)`. Each key's
/// owner emits the hot keys it owns, with exact counts, and the sizes, at their time; the hot
/// keys are not broadcast (send them on as needed).
pub fn hot_keys_by_size<'s, T, K>(
    left: StreamVec<'s, T, (K, u64)>,
    right: StreamVec<'s, T, (K, u64)>,
    rows: StreamVec<'s, T, (u64, u64)>,
    thresholds: impl Fn(u64, u64) -> HotThresholds + 'static,
) -> StreamVec<'s, T, SizedHotKeys<K>>
where
    T: Timestamp,
    K: JoinKey,
{
    use timely::dataflow::operators::vec::Map;
    use timely::dataflow::operators::{Concat, Exchange as _};
    let counts = left
        .exchange(|record: &(K, u64)| record.0.stable_hash())
        .map(|(key, count)| (key, count, 0))
        .concat(
            right
                .exchange(|record: &(K, u64)| record.0.stable_hash())
                .map(|(key, count)| (key, 0, count)),
        );
    counts.binary_frontier(rows, Pipeline, Pipeline, "HotKeysBySize", move |_, _| {
        let mut pending: Vec<(Capability<T>, SizedTally<K>)> = Vec::new();
        move |(input_counts, frontier_counts), (input_rows, frontier_rows), output| {
            input_counts.for_each_stamp(|stamp, data| {
                let (tally, _) = counts_for(&mut pending, &stamp);
                for batch in data {
                    for (key, left, right) in batch.drain(..) {
                        tally.add(key, left, right);
                    }
                }
            });
            input_rows.for_each_stamp(|stamp, data| {
                let (_, sizes) = counts_for(&mut pending, &stamp);
                for batch in data {
                    for (left, right) in batch.drain(..) {
                        sizes.0 += left;
                        sizes.1 += right;
                    }
                }
            });
            let mut index = 0;
            while index < pending.len() {
                let time = pending[index].0.time();
                if frontier_counts.less_equal(time) || frontier_rows.less_equal(time) {
                    index += 1;
                    continue;
                }
                let (capability, (tally, sizes)) = pending.swap_remove(index);
                let hot: Vec<KeyCount<K>> = tally.hot(thresholds(sizes.0, sizes.1)).collect();
                output.session(&capability).give((hot, sizes));
            }
        }
    })
}

/// One time's partial counts on an owner, with both inputs' sizes at that time.
type SizedTally<K> = (OwnerTally<K>, (u64, u64));

/// What [`hot_keys_by_size`] emits per owner and time: the hot keys it owns, and the sizes of
/// both inputs at that time.
pub type SizedHotKeys<K> = (Vec<KeyCount<K>>, (u64, u64));

/// The accumulator of `stamp`'s time, created with a capability for it if new: how the
/// operators that gather something per timestamp find that timestamp's state.
pub fn counts_for<'a, T: Timestamp, M: Default>(
    pending: &'a mut Vec<(Capability<T>, M)>,
    stamp: &InputCapability<T>,
) -> &'a mut M {
    &mut slot_for(pending, stamp).1
}

/// [`counts_for`] with the capability to emit at the accumulator's time.
pub fn slot_for<'a, T: Timestamp, M: Default>(
    pending: &'a mut Vec<(Capability<T>, M)>,
    stamp: &InputCapability<T>,
) -> &'a mut (Capability<T>, M) {
    let time = stamp
        .stamp()
        .elements()
        .first()
        .expect("counted records carry a timestamp");
    let index = match pending.iter().position(|(cap, _)| cap.time() == time) {
        Some(index) => index,
        None => {
            pending.push((stamp.delayed(time, 0), M::default()));
            pending.len() - 1
        }
    };
    &mut pending[index]
}

/// Hands every accumulator whose time the frontier has passed to `emit`, and drops it.
pub(crate) fn flush<T: Timestamp, M>(
    pending: &mut Vec<(Capability<T>, M)>,
    frontier: &timely::progress::frontier::MutableAntichain<T>,
    mut emit: impl FnMut(&Capability<T>, &mut M),
) {
    let mut index = 0;
    while index < pending.len() {
        if frontier.less_equal(pending[index].0.time()) {
            index += 1;
            continue;
        }
        let (capability, mut counts) = pending.swap_remove(index);
        emit(&capability, &mut counts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use timely::dataflow::operators::{Inspect, ToStream};

    /// The owner totals a key's partial counts exactly, and a cold key that shares a hot key's
    /// bucket (so it is totalled too) is still not reported.
    #[test]
    fn the_owner_reports_exact_totals_of_hot_keys_only() {
        let (hot_left, hot_right) = (7u64, 9u64);
        let bucket = OwnerTally::<u64>::bucket;
        let neighbour = (0u64..)
            .find(|&key| key != hot_left && bucket(&key) == bucket(&hot_left))
            .expect("some key shares the bucket");
        let mut tally = OwnerTally::default();
        for _ in 0..6 {
            tally.add(hot_left, 2, 0);
            tally.add(hot_right, 0, 2);
        }
        tally.add(neighbour, 5, 3);
        for key in 1000..21_000u64 {
            tally.add(key, 1, 1);
        }
        tally.add(hot_left, 0, 4);
        let mut hot: Vec<KeyCount<u64>> = tally
            .hot(HotThresholds {
                left: 10,
                right: 10,
            })
            .collect();
        hot.sort();
        assert_eq!(hot, vec![(hot_left, 12, 4), (hot_right, 0, 12)]);
    }

    /// Every worker must receive the same complete hot list, with exact counts, whatever W is.
    #[test]
    fn every_worker_gets_the_exact_hot_list() {
        let left: Vec<(u64, u32)> = (0..1000u32)
            .map(|i| ((i % 7 == 0) as u64 * 5 + (i % 3) as u64, i))
            .collect();
        let right: Vec<(u64, u32)> = (0..600u32).map(|i| ((i % 5) as u64, i)).collect();
        let thresholds = HotThresholds {
            left: 150,
            right: 100,
        };
        let mut expected: Vec<KeyCount<u64>> = Vec::new();
        for key in 0..10u64 {
            let l = left.iter().filter(|r| r.0 == key).count() as u64;
            let r = right.iter().filter(|r| r.0 == key).count() as u64;
            if thresholds.is_hot(l, r) {
                expected.push((key, l, r));
            }
        }
        assert!(expected.len() >= 3, "{expected:?}");
        for (workers, partial) in [1usize, 2, 3, 4]
            .into_iter()
            .flat_map(|workers| [(workers, false), (workers, true)])
        {
            let seen: Arc<Mutex<Vec<Vec<KeyCount<u64>>>>> =
                Arc::new(Mutex::new(vec![Vec::new(); workers]));
            let (l, r, s) = (left.clone(), right.clone(), Arc::clone(&seen));
            timely::execute(timely::Config::process(workers), move |worker| {
                let index = worker.index();
                let peers = worker.peers();
                let mine = |rows: &Vec<(u64, u32)>| {
                    rows.iter()
                        .enumerate()
                        .filter(|(i, _)| i % peers == index)
                        .map(|(_, r)| *r)
                        .collect::<Vec<_>>()
                };
                let (ml, mr) = (mine(&l), mine(&r));
                let s = Arc::clone(&s);
                worker.dataflow::<u32, _, _>(|scope| {
                    let left = ml.to_stream(scope).container::<Vec<_>>();
                    let right = mr.to_stream(scope).container::<Vec<_>>();
                    // Totals and partial counts must give the same list.
                    let (left, right) = if partial {
                        (left.partial_key_counts(), right.partial_key_counts())
                    } else {
                        (left.key_counts(), right.key_counts())
                    };
                    hot_keys(left, right, thresholds)
                        .inspect(move |record| s.lock().unwrap()[index].push(*record));
                });
            })
            .unwrap();
            for mut list in seen.lock().unwrap().drain(..) {
                list.sort();
                assert_eq!(list, expected, "W={workers}, partial counts: {partial}");
            }
        }
    }

    /// Past the combining window: three windows' worth of distinct keys with one key recurring
    /// throughout. Totals are exact and once per key; partial counts sum to the same, and the
    /// recurring key still combines (a few messages, not one per record).
    #[test]
    fn counts_stay_exact_past_the_combining_window() {
        let rows: Vec<(u64, u32)> = (0..3 * LOCAL_KEYS as u64)
            .map(|i| (if i % 4 == 0 { 7 } else { i + 100 }, 0))
            .collect();
        let hot_records = rows.iter().filter(|row| row.0 == 7).count() as u64;
        for workers in [1usize, 3] {
            for partial in [false, true] {
                let seen: Arc<Mutex<Vec<(u64, u64)>>> = Arc::new(Mutex::new(Vec::new()));
                let (all, s) = (rows.clone(), Arc::clone(&seen));
                timely::execute(timely::Config::process(workers), move |worker| {
                    // Worker 0 holds every row, as the reader of a streamed input does.
                    let mine = if worker.index() == 0 {
                        all.clone()
                    } else {
                        Vec::new()
                    };
                    let s = Arc::clone(&s);
                    worker.dataflow::<u32, _, _>(|scope| {
                        let stream = mine.to_stream(scope).container::<Vec<_>>();
                        let counts = if partial {
                            stream.partial_key_counts()
                        } else {
                            stream.key_counts()
                        };
                        counts.inspect(move |record| s.lock().unwrap().push(*record));
                    });
                })
                .unwrap();
                let seen = seen.lock().unwrap();
                let case = format!("W={workers}, partial: {partial}");
                let hot: Vec<u64> = seen.iter().filter(|r| r.0 == 7).map(|r| r.1).collect();
                assert_eq!(hot.iter().sum::<u64>(), hot_records, "{case}");
                assert!(
                    hot.len() <= 4,
                    "{case}: {} messages for the hot key",
                    hot.len()
                );
                let mut others: Vec<(u64, u64)> =
                    seen.iter().filter(|r| r.0 != 7).copied().collect();
                others.sort_unstable();
                let expected: Vec<(u64, u64)> = rows
                    .iter()
                    .filter(|row| row.0 != 7)
                    .map(|row| (row.0, 1))
                    .collect();
                assert_eq!(others, expected, "{case}");
                if !partial {
                    assert_eq!(hot.len(), 1, "{case}");
                }
            }
        }
    }

    #[test]
    fn default_thresholds_follow_sizes() {
        let t = HotThresholds::from_sizes(100_000, 8_000, 8, 0.1);
        assert_eq!(
            t,
            HotThresholds {
                left: 1250,
                right: 100
            }
        );
        assert_eq!(
            HotThresholds::from_sizes(3, 0, 8, 0.1),
            HotThresholds { left: 1, right: 1 }
        );
    }
}
