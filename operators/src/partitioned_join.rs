//! The join half of every strategy: exchange routed records to their partitions' workers, hold
//! them per timestamp, and once both inputs are complete for a timestamp join each partition
//! locally with the [`kernel`](crate::kernel).
//!
//! A join is per timestamp: the records of time `t` on both inputs form one join, emitted at `t`
//! once both input frontiers have passed `t`. Load is counted per partition into a
//! [`LoadRecorder`]: records received (a broadcast copy once for every local partition), rows
//! produced, and the peak of records held.

use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::{Capability, InputCapability};
use timely::dataflow::StreamVec;
use timely::progress::Timestamp;
use timely::ExchangeData;

use crate::buckets::{join_buckets_logic, KeyBuckets};
use crate::join_logic::JoinLogic;
use crate::join_type::JoinType;
use crate::kernel::BuildTable;
use crate::key::JoinKey;
use crate::load::LoadRecorder;
use crate::partition::Partitioning;
use crate::route::Routed;

/// How many output records are gathered before they are handed to timely.
const OUTPUT_BATCH: usize = 4096;

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
    let pact_left = Exchange::new(|record: &Routed<K, L>| record.0.exchange_hash());
    let pact_right = Exchange::new(|record: &Routed<K, R>| record.0.exchange_hash());

    left.binary_frontier(
        right,
        pact_left,
        pact_right,
        "PartitionedJoin",
        move |_capability, _info| {
            let mut pending: PendingByTime<T, K, L, R> = Vec::new();
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

                let mut index = 0;
                while index < pending.len() {
                    let time = pending[index].0.time();
                    if frontier_left.less_equal(time) || frontier_right.less_equal(time) {
                        index += 1;
                        continue;
                    }
                    let (capability, mut state) = pending.swap_remove(index);
                    let mut session = output.session(&capability);
                    let broadcast_held =
                        (state.broadcast_left.len() + state.broadcast_right.len()) as u64;
                    let broadcast_left = (!state.broadcast_left.is_empty())
                        .then(|| BuildTable::new(&mut state.broadcast_left, false));
                    let broadcast_right = (!state.broadcast_right.is_empty())
                        .then(|| BuildTable::new(&mut state.broadcast_right, false));
                    for (slot, &partition) in local.iter().enumerate() {
                        let held = (state.left[slot].len() + state.right[slot].len()) as u64
                            + broadcast_held;
                        let mut batched = Batched {
                            logic: &mut logic,
                            produced: 0,
                            give: |out: &mut Vec<D>| {
                                session.give_container(out);
                                out.clear();
                            },
                        };
                        join_buckets_logic(
                            &mut state.left[slot],
                            &mut state.right[slot],
                            broadcast_left.as_ref(),
                            broadcast_right.as_ref(),
                            how,
                            &mut batched,
                            &mut out,
                        );
                        let produced = batched.produced;
                        if !out.is_empty() {
                            session.give_container(&mut out);
                            out.clear();
                        }
                        loads.output(partition, produced);
                        loads.release(partition, held);
                    }
                }
            }
        },
    )
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
