//! Key samples: each worker samples a fraction of its records, summarises the sampled key counts
//! (its `top` largest counts plus `random` others), and the summaries of all workers are merged
//! into one sorted `(key, count)` list, the same on every worker.
//!
//! VPRP plans its key ranges from these lists. Every choice is deterministic and platform
//! independent: whether a record is sampled depends on the stable hash of (seed, worker, record
//! index, key), and the "random" keys are those with the smallest stable hash of (seed, key), so a
//! run with the same seed and layout plans the same ranges natively and in the browser. NULL keys
//! are never sampled: they match nothing and are routed without the table.

use std::collections::HashMap;

use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::Capability;
use timely::dataflow::StreamVec;
use timely::progress::Timestamp;
use timely::ExchangeData;

use crate::hash::{mix64, StableHasher};
use crate::key::JoinKey;

/// How a worker samples and summarises its records.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SampleConfig {
    /// The fraction of records sampled, in `[0, 1]`.
    pub fraction: f64,
    /// The seed of every sampling decision.
    pub seed: u64,
    /// How many of the largest sampled key counts a worker keeps (p).
    pub top: usize,
    /// How many other sampled keys a worker keeps, chosen pseudo-randomly (q).
    pub random: usize,
}

impl Default for SampleConfig {
    fn default() -> Self {
        SampleConfig {
            fraction: 0.05,
            seed: 0x5eed,
            top: 1024,
            random: 4096,
        }
    }
}

impl SampleConfig {
    /// The sampling threshold: a record is sampled when its hash is below it.
    fn threshold(&self) -> u64 {
        if self.fraction >= 1.0 {
            u64::MAX
        } else if self.fraction <= 0.0 {
            0
        } else {
            (self.fraction * u64::MAX as f64) as u64
        }
    }

    /// Whether record number `index` (counted per worker and time) with `key` is sampled.
    pub fn samples<K: JoinKey>(&self, worker: usize, index: u64, key: &K) -> bool {
        if key.is_null() {
            return false;
        }
        let threshold = self.threshold();
        if threshold == u64::MAX {
            return true;
        }
        let mut hasher = StableHasher::new();
        hasher.write_u64(self.seed);
        hasher.write_u64(worker as u64);
        hasher.write_u64(index);
        hasher.write_u64(key.stable_hash());
        mix64(hasher.finish()) < threshold
    }
}

/// One worker's summary of its sampled counts: the `top` largest counts (ties by key) and
/// `random` of the others (smallest stable hash of (seed, key)), sorted by key.
pub fn summarise<K: JoinKey>(counts: HashMap<K, u64>, config: &SampleConfig) -> Vec<(K, u64)> {
    let mut all: Vec<(K, u64)> = counts.into_iter().collect();
    // HashMap order is random: sort before choosing anything.
    all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let rest = all.split_off(config.top.min(all.len()));
    let mut rest: Vec<(u64, (K, u64))> = rest
        .into_iter()
        .map(|entry| {
            let mut hasher = StableHasher::new();
            hasher.write_u64(config.seed);
            hasher.write_u64(entry.0.stable_hash());
            (mix64(hasher.finish()), entry)
        })
        .collect();
    rest.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1 .0.cmp(&b.1 .0)));
    all.extend(rest.into_iter().take(config.random).map(|(_, entry)| entry));
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

/// Merges summaries into one list sorted by key, adding the counts of equal keys. The result does
/// not depend on the order of the summaries, so every worker merges to the same list.
pub fn merge_samples<K: JoinKey>(
    summaries: impl IntoIterator<Item = Vec<(K, u64)>>,
) -> Vec<(K, u64)> {
    let mut all: Vec<(K, u64)> = summaries.into_iter().flatten().collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    let mut merged: Vec<(K, u64)> = Vec::with_capacity(all.len());
    for (key, count) in all {
        match merged.last_mut() {
            Some(last) if last.0 == key => last.1 += count,
            _ => merged.push((key, count)),
        }
    }
    merged
}

/// Samples `stream` and emits, once per time at which this worker saw records, its summary
/// (possibly empty) when the input is complete for that time. Broadcast the result and
/// [`merge_samples`] to get every worker's view.
///
/// ```
/// use skewjoin_operators::sample::{sample_summaries, SampleConfig};
/// use timely::dataflow::operators::{Capture, ToStream};
/// use timely::dataflow::operators::capture::Extract;
///
/// let captured = timely::example(|scope| {
///     let keys = vec![(1u64, ()), (2, ()), (2, ())].to_stream(scope).container::<Vec<_>>();
///     let config = SampleConfig { fraction: 1.0, ..SampleConfig::default() };
///     sample_summaries(keys, &config).capture()
/// });
/// let summaries: Vec<_> = captured.extract().into_iter().flat_map(|(_, s)| s).collect();
/// assert_eq!(summaries, vec![vec![(1, 1), (2, 2)]]);
/// ```
pub fn sample_summaries<'s, T, K, V>(
    stream: StreamVec<'s, T, (K, V)>,
    config: &SampleConfig,
) -> StreamVec<'s, T, Vec<(K, u64)>>
where
    T: Timestamp,
    K: JoinKey,
    V: ExchangeData + Clone,
{
    let config = *config;
    let worker = stream.scope().index();
    stream.unary_frontier(Pipeline, "Sample", move |_, _| {
        let mut pending: Vec<(Capability<T>, u64, HashMap<K, u64>)> = Vec::new();
        move |(input, frontier), output| {
            input.for_each_stamp(|stamp, data| {
                let time = crate::partitioned_join::join_time(&stamp).clone();
                let index = match pending.iter().position(|(cap, _, _)| *cap.time() == time) {
                    Some(index) => index,
                    None => {
                        pending.push((stamp.delayed(&time, 0), 0, HashMap::new()));
                        pending.len() - 1
                    }
                };
                let (_, seen, counts) = &mut pending[index];
                for batch in data {
                    for (key, _) in batch.iter() {
                        if config.samples(worker, *seen, key) {
                            *counts.entry(key.clone()).or_insert(0) += 1;
                        }
                        *seen += 1;
                    }
                }
            });
            let mut index = 0;
            while index < pending.len() {
                if frontier.less_equal(pending[index].0.time()) {
                    index += 1;
                    continue;
                }
                let (capability, _, counts) = pending.swap_remove(index);
                output.session(&capability).give(summarise(counts, &config));
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_keep_the_top_counts_and_some_others() {
        let counts: HashMap<u64, u64> = [(1, 5), (2, 1), (3, 9), (4, 1), (5, 1), (6, 2)]
            .into_iter()
            .collect();
        let config = SampleConfig {
            top: 2,
            random: 2,
            ..SampleConfig::default()
        };
        let summary = summarise(counts.clone(), &config);
        assert_eq!(summary.len(), 4);
        assert!(summary.contains(&(3, 9)) && summary.contains(&(1, 5)));
        assert!(summary.windows(2).all(|w| w[0].0 < w[1].0));
        // Deterministic, whatever the HashMap order.
        assert_eq!(summary, summarise(counts, &config));
    }

    #[test]
    fn merging_adds_equal_keys_in_any_order() {
        let a = vec![(1u64, 2), (3, 1)];
        let b = vec![(1u64, 1), (2, 4)];
        let merged = merge_samples([a.clone(), b.clone()]);
        assert_eq!(merged, vec![(1, 3), (2, 4), (3, 1)]);
        assert_eq!(merged, merge_samples([b, a]));
    }

    #[test]
    fn sampling_takes_about_the_fraction_and_never_nulls() {
        let config = SampleConfig {
            fraction: 0.25,
            ..SampleConfig::default()
        };
        let taken = (0..10_000u64)
            .filter(|&i| config.samples(0, i, &(i % 17)))
            .count();
        assert!((2000..3000).contains(&taken), "{taken}");
        assert!(!config.samples(0, 0, &None::<u64>));
        let none = SampleConfig {
            fraction: 0.0,
            ..config
        };
        assert!(!(0..100u64).any(|i| none.samples(0, i, &i)));
    }
}
