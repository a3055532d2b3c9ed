//! The join half of every strategy: exchange routed records to their partitions' workers, hold
//! them per timestamp, and once both inputs are complete for a timestamp join each partition
//! locally with the [`kernel`](crate::kernel).
//!
//! A join is per timestamp: the records of time `t` on both inputs form one join, emitted at `t`
//! once both input frontiers have passed `t`. Load is counted per partition into a
//! [`LoadRecorder`]: records received (a broadcast copy once for every local partition), rows
//! produced, and the peak of records held.
//!
//! # Bounded output
//!
//! Output leaves while the join runs, a bounded amount at a time. An activation hands at most
//! [`OUTPUT_BUDGET`] rows to the logic, in containers of about [`OUTPUT_BATCH`] records given to
//! timely as they fill; then the operator keeps its place (the time, the partition slot, the
//! bucket, the probe row or group, and how many of that row's pairs it gave, so a stop may fall
//! inside a hot key's run) and asks timely to schedule it again. Giving containers is not enough
//! by itself: timely runs no other operator of the worker until this activation returns, so
//! everything given in one activation is held at once in the channels. Stopping lets a
//! downstream operator take each share before the next one is made, and a consumer that drops
//! or folds rows as they come holds the records being joined plus about one budget of output
//! (2.6 MB of 40-byte rows), not the output of a hot key's whole product. The other joins
//! do the same: IB-Join's probe (and DER, DDR) and Tree-Join's rounds. A time's capability is
//! kept until its last row is given, so downstream frontiers still say when a time's output is
//! complete.

use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::{Capability, InputCapability};
use timely::dataflow::StreamVec;
use timely::progress::Timestamp;
use timely::ExchangeData;

use crate::batch_builder::batch_exchange;
use crate::buckets::{KeyBuckets, SteppedBuckets};
use crate::join_logic::JoinLogic;
use crate::join_type::JoinType;
use crate::kernel::{BuildTable, TableIndex};
use crate::key::JoinKey;
use crate::load::LoadRecorder;
use crate::partition::Partitioning;
use crate::route::Routed;

/// How many output records are gathered before they are handed to timely.
pub const OUTPUT_BATCH: usize = 4096;

/// The most output rows one activation of the join hands to its logic; past it, the operator
/// keeps its place and asks to be scheduled again.
///
/// Chosen by measurement (`output_memory` in benches/measure, 10^8 rows of one hot key on two
/// workers into a counting sink): at 2^16 Shuffle-Join took 1.7 s and 8 MB, Tree-Join 0.5 s and
/// 17 MB; at 2^18, 2.2 s and 2.8 s, glibc handing the freed containers' pages back to the system
/// and faulting them in again (970,000 minor faults against 4,400); at 2^20, 2.2 s and 1.4 s
/// with 47 and 121 MB. A uniform join of 10^7 rows a side was as fast at each.
pub const OUTPUT_BUDGET: usize = 1 << 16;

/// The records of one timestamp held by one worker.
struct Pending<K, L, R> {
    /// Own records per local partition slot, in buckets by key hash once there are many, so
    /// that a large partition is joined a cache-sized bucket at a time.
    left: Vec<KeyBuckets<K, L>>,
    right: Vec<KeyBuckets<K, R>>,
    /// Broadcast copies, shared by every local partition.
    broadcast_left: Vec<(K, L)>,
    broadcast_right: Vec<(K, R)>,
}

impl<K: JoinKey, L, R> Pending<K, L, R> {
    fn new(slots: usize) -> Self {
        Pending {
            left: (0..slots).map(|_| KeyBuckets::new()).collect(),
            right: (0..slots).map(|_| KeyBuckets::new()).collect(),
            broadcast_left: Vec::new(),
            broadcast_right: Vec::new(),
        }
    }
}

/// Held records per timestamp, with the capability to emit their output.
type PendingByTime<T, K, L, R> = Vec<(Capability<T>, Pending<K, L, R>)>;

/// Moves a batch of routed records into per-slot vectors, counting receipt per partition.
fn absorb<K: JoinKey, V>(
    batch: &mut Vec<Routed<K, V>>,
    own: &mut [KeyBuckets<K, V>],
    broadcast: &mut Vec<(K, V)>,
    partitioning: &Partitioning,
    local: &[u32],
    loads: &LoadRecorder,
    counts: &mut [u64],
) {
    counts.iter_mut().for_each(|c| *c = 0);
    let mut broadcasts = 0u64;
    for (dest, record) in batch.drain(..) {
        match dest.as_partition() {
            Some(partition) => {
                let slot = partitioning.slot(partition);
                own[slot].push(record);
                counts[slot] += 1;
            }
            None => {
                broadcast.push(record);
                broadcasts += 1;
            }
        }
    }
    for (slot, &partition) in local.iter().enumerate() {
        let received = counts[slot] + broadcasts;
        if received > 0 {
            loads.receive(partition, received);
        }
    }
}

/// Joins two routed streams partition by partition, handing every output row to `logic` (a
/// closure called once per row, through [`each_row`](crate::join_logic::each_row), or logic
/// that takes a hot key's pairs a group at a time); `logic` pushes whatever it wants the output
/// stream to carry into `out` (possibly nothing, when it folds rows into a summary instead).
///
/// Records routed to a partition are "own" records of that partition: all own records of a key
/// must be in the same partition, on both sides, for padding and semi/anti decisions to be right.
/// Broadcast copies pair with own records of the other side only, and are never padded or
/// emitted alone; strategies must not broadcast a side whose unmatched rows the join type keeps.
pub fn partitioned_join<'s, T, K, L, R, D, F>(
    left: StreamVec<'s, T, Routed<K, L>>,
    right: StreamVec<'s, T, Routed<K, R>>,
    how: JoinType,
    partitioning: Partitioning,
    loads: LoadRecorder,
    mut logic: F,
) -> StreamVec<'s, T, D>
where
    T: Timestamp,
    K: JoinKey,
    L: ExchangeData + Clone,
    R: ExchangeData + Clone,
    D: Clone + 'static,
    F: JoinLogic<K, L, R, D> + 'static,
{
    let worker = left.scope().index();
    assert_eq!(
        partitioning.workers(),
        left.scope().peers(),
        "the partitioning must be made for this computation's worker count"
    );
    let local = partitioning.local_partitions(worker);
    for &partition in &local {
        loads.register(partition);
    }
    let slots = local.len();
    let pact_left = batch_exchange(|record: &Routed<K, L>| record.0.exchange_hash());
    let pact_right = batch_exchange(|record: &Routed<K, R>| record.0.exchange_hash());
    let scope = left.scope();

    left.binary_frontier(
        right,
        pact_left,
        pact_right,
        "PartitionedJoin",
        move |_capability, info| {
            let activator = scope.activator_for(info.address);
            let mut pending: PendingByTime<T, K, L, R> = Vec::new();
            let mut ready: Vec<Ready<T, K, L, R>> = Vec::new();
            let mut buckets = SteppedBuckets::new();
            let mut counts = vec![0u64; slots];
            let mut out: Vec<D> = Vec::with_capacity(OUTPUT_BATCH);

            move |(input_left, frontier_left), (input_right, frontier_right), output| {
                input_left.for_each_stamp(|stamp, data| {
                    let time = join_time(&stamp);
                    let state = state_for(&mut pending, time, || stamp.delayed(time, 0), slots);
                    for batch in data {
                        absorb(
                            batch,
                            &mut state.left,
                            &mut state.broadcast_left,
                            &partitioning,
                            &local,
                            &loads,
                            &mut counts,
                        );
                    }
                });
                input_right.for_each_stamp(|stamp, data| {
                    let time = join_time(&stamp);
                    let state = state_for(&mut pending, time, || stamp.delayed(time, 0), slots);
                    for batch in data {
                        absorb(
                            batch,
                            &mut state.right,
                            &mut state.broadcast_right,
                            &partitioning,
                            &local,
                            &loads,
                            &mut counts,
                        );
                    }
                });

                // Times whose inputs are complete join next, in the order they completed.
                let mut index = 0;
                while index < pending.len() {
                    let time = pending[index].0.time();
                    if frontier_left.less_equal(time) || frontier_right.less_equal(time) {
                        index += 1;
                        continue;
                    }
                    let (capability, state) = pending.swap_remove(index);
                    ready.push(Ready::new(capability, state));
                }

                // At most OUTPUT_BUDGET rows this activation; the rest on the next.
                let mut budget = OUTPUT_BUDGET;
                while let Some(job) = ready.first_mut() {
                    let mut session = output.session(&job.capability);
                    let state = &mut job.state;
                    let broadcast_left = job
                        .broadcast_left
                        .take()
                        .map(|index| BuildTable::with_index(&state.broadcast_left, index));
                    let broadcast_right = job
                        .broadcast_right
                        .take()
                        .map(|index| BuildTable::with_index(&state.broadcast_right, index));
                    while job.slot < local.len() {
                        let (slot, partition) = (job.slot, local[job.slot]);
                        let mut batched = Batched {
                            logic: &mut logic,
                            produced: 0,
                            give: |out: &mut Vec<D>| {
                                session.give_container(out);
                                out.clear();
                            },
                        };
                        let done = buckets.step(
                            &mut state.left[slot],
                            &mut state.right[slot],
                            broadcast_left.as_ref(),
                            broadcast_right.as_ref(),
                            how,
                            &mut batched,
                            &mut out,
                            &mut budget,
                        );
                        let produced = batched.produced;
                        // What is gathered goes out now: nothing waits in `out` for the next
                        // activation, which may be another time's.
                        if !out.is_empty() {
                            session.give_container(&mut out);
                            out.clear();
                        }
                        loads.output(partition, produced);
                        if !done {
                            break;
                        }
                        loads.release(partition, job.held[slot]);
                        job.slot += 1;
                    }
                    drop(session);
                    if job.slot < local.len() {
                        job.broadcast_left = broadcast_left.map(BuildTable::into_index);
                        job.broadcast_right = broadcast_right.map(BuildTable::into_index);
                        activator.activate();
                        break;
                    }
                    drop((broadcast_left, broadcast_right));
                    // Done: its capability goes, and with it the hold on the output frontier.
                    ready.remove(0);
                }
            }
        },
    )
}

/// A time whose inputs are complete, joining partition slot after slot, a budget of output
/// rows per activation.
struct Ready<T: Timestamp, K, L, R> {
    capability: Capability<T>,
    state: Pending<K, L, R>,
    /// The broadcast rows' tables (over `state`'s broadcast rows, reordered), built once.
    broadcast_left: Option<TableIndex>,
    broadcast_right: Option<TableIndex>,
    /// Records held per slot when the join started, released as each slot finishes.
    held: Vec<u64>,
    /// The slot being joined.
    slot: usize,
}

impl<T: Timestamp, K: JoinKey, L, R> Ready<T, K, L, R> {
    fn new(capability: Capability<T>, mut state: Pending<K, L, R>) -> Self {
        let broadcast_held = (state.broadcast_left.len() + state.broadcast_right.len()) as u64;
        let held = (0..state.left.len())
            .map(|slot| (state.left[slot].len() + state.right[slot].len()) as u64 + broadcast_held)
            .collect();
        let broadcast_left = (!state.broadcast_left.is_empty())
            .then(|| BuildTable::new(&mut state.broadcast_left, false).into_index());
        let broadcast_right = (!state.broadcast_right.is_empty())
            .then(|| BuildTable::new(&mut state.broadcast_right, false).into_index());
        Ready {
            capability,
            state,
            broadcast_left,
            broadcast_right,
            held,
            slot: 0,
        }
    }
}

/// `logic` counting the rows it is handed and giving `out` to the output stream whenever it holds
/// [`OUTPUT_BATCH`] records or more (after a group call, that may be a whole group's rows more).
struct Batched<'a, F, G> {
    logic: &'a mut F,
    produced: u64,
    give: G,
}

impl<K, L, R, D, F, G> JoinLogic<K, L, R, D> for Batched<'_, F, G>
where
    F: JoinLogic<K, L, R, D>,
    G: FnMut(&mut Vec<D>),
{
    #[inline]
    fn row(&mut self, key: &K, left: Option<&L>, right: Option<&R>, out: &mut Vec<D>) {
        self.produced += 1;
        self.logic.row(key, left, right, out);
        if out.len() >= OUTPUT_BATCH {
            (self.give)(out);
        }
    }

    #[inline]
    fn lefts_with<'v>(
        &mut self,
        key: &K,
        lefts: impl ExactSizeIterator<Item = &'v L>,
        right: &R,
        out: &mut Vec<D>,
    ) where
        L: 'v,
    {
        self.produced += lefts.len() as u64;
        self.logic.lefts_with(key, lefts, right, out);
        if out.len() >= OUTPUT_BATCH {
            (self.give)(out);
        }
    }

    #[inline]
    fn left_with_rights<'v>(
        &mut self,
        key: &K,
        left: &L,
        rights: impl ExactSizeIterator<Item = &'v R>,
        out: &mut Vec<D>,
    ) where
        R: 'v,
    {
        self.produced += rights.len() as u64;
        self.logic.left_with_rights(key, left, rights, out);
        if out.len() >= OUTPUT_BATCH {
            (self.give)(out);
        }
    }
}

/// The time a message's records are joined at: its stamp's only element in the usual case, the
/// least one (by `Ord`) when a message carries several.
pub fn join_time<T: Timestamp>(stamp: &InputCapability<T>) -> &T {
    stamp
        .stamp()
        .elements()
        .first()
        .expect("join inputs must carry timestamps: records sent without a capability cannot be joined at a time")
}

/// The pending state for `time`, created (with a capability from `retain`) if new.
fn state_for<'a, T: Timestamp, K: JoinKey, L, R>(
    pending: &'a mut PendingByTime<T, K, L, R>,
    time: &T,
    retain: impl FnOnce() -> Capability<T>,
    slots: usize,
) -> &'a mut Pending<K, L, R> {
    let index = match pending.iter().position(|(cap, _)| cap.time() == time) {
        Some(index) => index,
        None => {
            pending.push((retain(), Pending::new(slots)));
            pending.len() - 1
        }
    };
    &mut pending[index].1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::JoinConfig;
    use crate::shuffle_join::ShuffleJoin;
    use crate::tree_join::{TreeJoin, TreeParams};
    use std::cell::RefCell;
    use std::rc::Rc;
    use timely::dataflow::channels::pact::Pipeline;
    use timely::dataflow::operators::ToStream;

    /// What a sink saw: rows in all, the most rows in one of its activations, and how many of
    /// its activations received rows.
    #[derive(Debug, Default)]
    struct Seen {
        rows: u64,
        most_per_activation: u64,
        activations: u64,
    }

    /// Joins one key of `n` x `n` rows on one worker with `join` into a sink that counts the
    /// rows it receives per activation.
    fn sink_of(
        n: u64,
        join: impl for<'a> FnOnce(
                StreamVec<'a, u32, (u64, u64)>,
                StreamVec<'a, u32, (u64, u64)>,
            ) -> StreamVec<'a, u32, ()>
            + Send
            + 'static,
    ) -> Seen {
        let join = std::sync::Mutex::new(Some(join));
        let seen = timely::execute(timely::Config::thread(), move |worker| {
            let seen = Rc::new(RefCell::new(Seen::default()));
            let sink = Rc::clone(&seen);
            let join = join.lock().unwrap().take().expect("one worker");
            worker.dataflow::<u32, _, _>(|scope| {
                let left = (0..n)
                    .map(|i| (7u64, i))
                    .to_stream(scope)
                    .container::<Vec<_>>();
                let right = (0..n)
                    .map(|i| (7u64, i))
                    .to_stream(scope)
                    .container::<Vec<_>>();
                join(left, right).sink(Pipeline, "Count", move |(input, _)| {
                    let mut rows = 0;
                    input.for_each(|_, data| rows += data.len() as u64);
                    if rows > 0 {
                        let mut seen = sink.borrow_mut();
                        seen.rows += rows;
                        seen.most_per_activation = seen.most_per_activation.max(rows);
                        seen.activations += 1;
                    }
                });
            });
            while worker.step() {}
            Rc::try_unwrap(seen)
                .expect("the dataflow is gone")
                .into_inner()
        })
        .unwrap()
        .join()
        .pop()
        .unwrap()
        .unwrap();
        seen
    }

    #[test]
    fn a_hot_key_reaches_downstream_a_bounded_amount_at_a_time() {
        // 4 x 10^6 rows of one key: before output was bounded, the sink got them all in one
        // activation, after the join had produced every one.
        let n = 2_000;
        let seen = sink_of(n, |left, right| {
            left.shuffle_join_with(
                right,
                JoinType::Inner,
                &JoinConfig::new(),
                |_, _, _, out| out.push(()),
            )
        });
        assert_eq!(seen.rows, n * n);
        assert!(
            seen.most_per_activation <= 2 * OUTPUT_BUDGET as u64,
            "{seen:?}"
        );
        assert!(
            seen.activations >= n * n / (2 * OUTPUT_BUDGET as u64),
            "{seen:?}"
        );
    }

    #[test]
    fn tree_join_rounds_reach_downstream_a_bounded_amount_at_a_time() {
        // Leaves of up to 1,000 x 1,000 rows, and a leaf bigger than the budget: the rows of
        // one leaf are given in several activations.
        let n = 2_000;
        let seen = sink_of(n, |left, right| {
            let params = TreeParams {
                leaf: 1_000,
                fanout: 2,
            };
            left.tree_join_with(
                right,
                JoinType::Inner,
                params,
                &JoinConfig::new(),
                |_, _, _, out| out.push(()),
            )
        });
        assert_eq!(seen.rows, n * n);
        assert!(
            seen.most_per_activation <= 2 * OUTPUT_BUDGET as u64,
            "{seen:?}"
        );
        assert!(
            seen.activations >= n * n / (2 * OUTPUT_BUDGET as u64),
            "{seen:?}"
        );
    }
}
