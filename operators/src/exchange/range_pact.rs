//! The virtual-range exchange of VPRP: a routing table of sorted key boundaries, each run of keys
//! mapped to a virtual range and its partition, and the operators that plan the table from key
//! samples and route records by binary search over it.
//!
//! The table must be complete before the first record is routed. Design choice: one dataflow in
//! two phases rather than two dataflows in sequence. [`plan_tables`] gathers every worker's
//! sample summaries (broadcast) for a time and, once both sample streams are complete for it,
//! plans the table on every worker (planning is deterministic, so all workers hold the same
//! table). [`route_by_ranges`] holds the records of a time until that time's table has arrived,
//! then tags each with `Dest` = its range's partition; the exchange itself is
//! [`partitioned_join`](crate::partitioned_join::partitioned_join)'s, so the local join and the
//! load counting are shared with every other strategy. Keeping one dataflow keeps the strategy
//! composable like the others (`build_join` takes streams) at the cost of holding each worker's
//! input once while the sample completes. For programs that know the table when they build the
//! dataflow, [`range_pact`] is the same routing as a `DistributorPact`.

use std::cell::RefCell;
use std::rc::Rc;

use serde::{Deserialize, Serialize};
use timely::container::{CapacityContainerBuilder, ContainerBuilder, PushInto};
use timely::dataflow::channels::pact::{DistributorPact, Pipeline};
use timely::dataflow::channels::pushers::exchange::Distributor;
use timely::dataflow::channels::Message;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::Capability;
use timely::dataflow::StreamVec;
use timely::progress::Timestamp;
use timely::ExchangeData;

use crate::key::JoinKey;
use crate::partition::{Dest, Partitioning};
use crate::route::{RoundRobin, Routed};

/// Sorted key boundaries and where each run of keys goes.
///
/// Run `i` holds the keys `k` with `boundaries[i-1] <= k < boundaries[i]` (run 0 everything below
/// the first boundary, the last run everything from the last boundary up), so a key equal to a
/// boundary belongs to the run it starts. Keys never sampled fall into the run around them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeTable<K> {
    /// The first key of every run but the first, strictly increasing.
    pub boundaries: Vec<K>,
    /// The virtual range of each run (`boundaries.len() + 1` entries).
    pub virtual_of_run: Vec<u32>,
    /// The partition of each virtual range.
    pub partition_of_virtual: Vec<u32>,
    /// The sampled weight planned for each virtual range.
    pub planned: Vec<u64>,
}

impl<K: Ord> RangeTable<K> {
    /// Everything in one virtual range on partition 0: the table when nothing was sampled.
    pub fn single() -> RangeTable<K> {
        RangeTable {
            boundaries: Vec::new(),
            virtual_of_run: vec![0],
            partition_of_virtual: vec![0],
            planned: vec![0],
        }
    }

    /// The virtual range of `key`, by binary search over the boundaries.
    #[inline]
    pub fn virtual_of(&self, key: &K) -> u32 {
        let run = self.boundaries.partition_point(|boundary| boundary <= key);
        self.virtual_of_run[run]
    }

    /// The partition of `key`.
    #[inline]
    pub fn partition_of(&self, key: &K) -> u32 {
        self.partition_of_virtual[self.virtual_of(key) as usize]
    }
}

/// Plans one routing table per time on every worker from the broadcast sample summaries of both
/// sides, calling `plan(left_sample, right_sample)` with the merged sorted `(key, count)` lists.
pub fn plan_tables<'s, T, K, F>(
    left_summaries: StreamVec<'s, T, Vec<(K, u64)>>,
    right_summaries: StreamVec<'s, T, Vec<(K, u64)>>,
    plan: F,
) -> StreamVec<'s, T, Rc<RangeTable<K>>>
where
    T: Timestamp,
    K: JoinKey,
    F: Fn(&[(K, u64)], &[(K, u64)]) -> RangeTable<K> + 'static,
{
    type Gathered<T, K> = (Capability<T>, Vec<Vec<(K, u64)>>, Vec<Vec<(K, u64)>>);
    left_summaries.binary_frontier(
        right_summaries,
        Pipeline,
        Pipeline,
        "PlanRanges",
        move |_, _| {
            let mut pending: Vec<Gathered<T, K>> = Vec::new();
            move |(left, left_frontier), (right, right_frontier), output| {
                for (input, is_left) in [(left, true), (right, false)] {
                    input.for_each_stamp(|stamp, data| {
                        let time = crate::partitioned_join::join_time(&stamp).clone();
                        let index = match pending.iter().position(|(cap, _, _)| *cap.time() == time)
                        {
                            Some(index) => index,
                            None => {
                                pending.push((stamp.delayed(&time, 0), Vec::new(), Vec::new()));
                                pending.len() - 1
                            }
                        };
                        let target = if is_left {
                            &mut pending[index].1
                        } else {
                            &mut pending[index].2
                        };
                        for batch in data {
                            target.append(batch);
                        }
                    });
                }
                let mut index = 0;
                while index < pending.len() {
                    let time = pending[index].0.time();
                    if left_frontier.less_equal(time) || right_frontier.less_equal(time) {
                        index += 1;
                        continue;
                    }
                    let (capability, left, right) = pending.swap_remove(index);
                    let left = crate::sample::merge_samples(left);
                    let right = crate::sample::merge_samples(right);
                    output
                        .session(&capability)
                        .give(Rc::new(plan(&left, &right)));
                }
            }
        },
    )
}

/// What one worker's range routing saw: the table it routed by, and how many records (both sides
/// together) it sent to each virtual range. Every worker plans the same table, so the actual
/// weight of a virtual range over the whole run is the sum of the workers' counts.
#[derive(Clone, Debug)]
pub struct RangeObserver<K>(Rc<RefCell<RangeObservation<K>>>);

/// The contents of a [`RangeObserver`].
#[derive(Clone, Debug)]
pub struct RangeObservation<K> {
    /// The last table routed by (`None`: no records were routed by a planned table).
    pub table: Option<Rc<RangeTable<K>>>,
    /// Records sent to each virtual range of `table`.
    pub routed: Vec<u64>,
}

impl<K> Default for RangeObserver<K> {
    fn default() -> Self {
        RangeObserver(Rc::new(RefCell::new(RangeObservation {
            table: None,
            routed: Vec::new(),
        })))
    }
}

impl<K> RangeObserver<K> {
    /// A fresh observer.
    pub fn new() -> RangeObserver<K> {
        RangeObserver::default()
    }

    /// What was seen so far.
    pub fn observation(&self) -> RangeObservation<K> {
        let seen = self.0.borrow();
        RangeObservation {
            table: seen.table.clone(),
            routed: seen.routed.clone(),
        }
    }

    /// Adds `counts` (records per virtual range) routed by `table`.
    fn record(&self, table: &Rc<RangeTable<K>>, counts: &[u64]) {
        let mut seen = self.0.borrow_mut();
        let same = seen
            .table
            .as_ref()
            .is_some_and(|known| Rc::ptr_eq(known, table));
        if !same {
            seen.table = Some(Rc::clone(table));
            seen.routed = vec![0; counts.len()];
        }
        for (total, count) in seen.routed.iter_mut().zip(counts) {
            *total += count;
        }
    }
}

/// A time's records waiting for its table.
type Held<T, K, V> = (Capability<T>, Vec<(K, V)>);

/// Tags each record with the partition of its key's range, holding a time's records until that
/// time's table has arrived on `tables`. NULL keys match nothing: they are spread round-robin
/// over this worker's partitions when `keep_nulls`, and dropped otherwise. The records routed to
/// each virtual range are counted into `observer`.
pub fn route_by_ranges<'s, T, K, V>(
    stream: StreamVec<'s, T, (K, V)>,
    tables: StreamVec<'s, T, Rc<RangeTable<K>>>,
    name: &str,
    partitioning: Partitioning,
    keep_nulls: bool,
    observer: RangeObserver<K>,
) -> StreamVec<'s, T, Routed<K, V>>
where
    T: Timestamp,
    K: JoinKey,
    V: ExchangeData + Clone,
{
    let worker = stream.scope().index();
    stream.binary_frontier(tables, Pipeline, Pipeline, name, move |_, _| {
        let mut spread = RoundRobin::local(&partitioning, worker);
        let mut known: Vec<(T, Rc<RangeTable<K>>)> = Vec::new();
        let mut held: Vec<Held<T, K, V>> = Vec::new();
        let fallback = Rc::new(RangeTable::single());
        move |(records, records_frontier), (table_input, tables_frontier), output| {
            table_input.for_each_stamp(|stamp, data| {
                for batch in data {
                    for table in batch.drain(..) {
                        known.push((crate::partitioned_join::join_time(&stamp).clone(), table));
                    }
                }
            });
            records.for_each_stamp(|stamp, data| {
                let time = crate::partitioned_join::join_time(&stamp).clone();
                let index = match held.iter().position(|(cap, _)| *cap.time() == time) {
                    Some(index) => index,
                    None => {
                        held.push((stamp.delayed(&time, 0), Vec::new()));
                        held.len() - 1
                    }
                };
                for batch in data {
                    held[index].1.append(batch);
                }
            });
            let mut index = 0;
            while index < held.len() {
                let time = held[index].0.time().clone();
                let table = match known.iter().find(|(t, _)| *t == time) {
                    Some((_, table)) => Rc::clone(table),
                    // No table will come: nothing was sampled anywhere for this time.
                    None if !tables_frontier.less_equal(&time) => Rc::clone(&fallback),
                    None => {
                        index += 1;
                        continue;
                    }
                };
                let (capability, batch) = held.swap_remove(index);
                let mut session = output.session(&capability);
                let mut counts = vec![0u64; table.partition_of_virtual.len()];
                for (key, value) in batch {
                    if key.is_null() {
                        if keep_nulls {
                            session.give((Dest::partition(spread.next_partition()), (key, value)));
                        }
                    } else {
                        let range = table.virtual_of(&key);
                        counts[range as usize] += 1;
                        let partition = table.partition_of_virtual[range as usize];
                        session.give((Dest::partition(partition), (key, value)));
                    }
                }
                observer.record(&table, &counts);
            }
            // A table is needed while records of its time may still arrive.
            known.retain(|(time, _)| records_frontier.less_equal(time));
        }
    })
}

/// Routes `(key, value)` records to the worker of their key's partition: the same routing as
/// [`route_by_ranges`], as a `DistributorPact` for a table known when the dataflow is built.
/// NULL keys go to worker 0 (they match nothing; drop them before if no output keeps them).
pub fn range_pact<K, V>(
    table: Rc<RangeTable<K>>,
) -> DistributorPact<impl FnOnce(usize) -> RangeDistributor<K, V>>
where
    K: JoinKey,
    V: ExchangeData,
{
    DistributorPact(move |peers| RangeDistributor {
        table,
        builders: (0..peers).map(|_| Default::default()).collect(),
    })
}

/// The distributor behind [`range_pact`].
pub struct RangeDistributor<K, V> {
    table: Rc<RangeTable<K>>,
    builders: Vec<CapacityContainerBuilder<Vec<(K, V)>>>,
}

impl<K: JoinKey, V: ExchangeData> Distributor<Vec<(K, V)>> for RangeDistributor<K, V> {
    fn partition<T: Clone, P: timely::communication::Push<Message<T, Vec<(K, V)>>>>(
        &mut self,
        container: &mut Vec<(K, V)>,
        stamp: &timely::progress::Stamp<T>,
        pushers: &mut [P],
    ) {
        let peers = pushers.len();
        for (key, value) in container.drain(..) {
            let worker = if key.is_null() {
                0
            } else {
                self.table.partition_of(&key) as usize % peers
            };
            self.builders[worker].push_into((key, value));
            while let Some(batch) = self.builders[worker].extract() {
                Message::push_at(batch, stamp.clone(), &mut pushers[worker]);
            }
        }
    }

    fn flush<T: Clone, P: timely::communication::Push<Message<T, Vec<(K, V)>>>>(
        &mut self,
        stamp: &timely::progress::Stamp<T>,
        pushers: &mut [P],
    ) {
        for (builder, pusher) in self.builders.iter_mut().zip(pushers) {
            while let Some(batch) = builder.finish() {
                Message::push_at(batch, stamp.clone(), pusher);
            }
        }
    }

    fn relax(&mut self) {
        for builder in &mut self.builders {
            builder.relax();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_equal_to_a_boundary_starts_its_run() {
        let table = RangeTable {
            boundaries: vec![10u64, 20],
            virtual_of_run: vec![0, 1, 2],
            partition_of_virtual: vec![0, 1, 0],
            planned: vec![1, 1, 1],
        };
        assert_eq!(table.virtual_of(&0), 0);
        assert_eq!(table.virtual_of(&9), 0);
        assert_eq!(table.virtual_of(&10), 1);
        assert_eq!(table.virtual_of(&19), 1);
        assert_eq!(table.virtual_of(&20), 2);
        assert_eq!(table.partition_of(&u64::MAX), 0);
        assert_eq!(RangeTable::<u64>::single().partition_of(&5), 0);
    }

    #[test]
    fn the_pact_delivers_each_key_to_its_partitions_worker() {
        use std::sync::{Arc, Mutex};
        use timely::dataflow::operators::ToStream;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        timely::execute(timely::Config::process(2), move |worker| {
            let index = worker.index();
            let sink = Arc::clone(&sink);
            let table = Rc::new(RangeTable {
                boundaries: vec![10u64, 20],
                virtual_of_run: vec![0, 1, 2],
                partition_of_virtual: vec![0, 1, 2],
                planned: vec![0; 3],
            });
            worker.dataflow::<u64, _, _>(|scope| {
                let keys: Vec<(u64, ())> = (0..30)
                    .filter(|k| k % 2 == index as u64)
                    .map(|k| (k, ()))
                    .collect();
                keys.to_stream(scope).container::<Vec<_>>().sink(
                    range_pact(table),
                    "Check",
                    move |(input, _)| {
                        input.for_each(|_, data| {
                            for (key, _) in data.drain(..) {
                                sink.lock().unwrap().push((index, key));
                            }
                        });
                    },
                );
            });
        })
        .unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 30);
        for &(worker, key) in seen.iter() {
            // Partitions 0 and 2 (keys below 10, from 20) live on worker 0, partition 1 on 1.
            let expected = usize::from((10..20).contains(&key));
            assert_eq!(worker, expected, "key {key}");
        }
    }
}
