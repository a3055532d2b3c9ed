//! The probe: each time's broadcast small rows indexed once the small input is complete at that
//! time, then probed by the large records, those held until then and each batch that arrives
//! after as it arrives, a budget of output rows per activation; once the large input is complete
//! too, with tracking, each partition's matches reported to the owners of the id ranges.

use std::cell::RefCell;
use std::rc::Rc;

use timely::dataflow::channels::pact::ParallelizationContract;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::Capability;
use timely::dataflow::StreamVec;
use timely::progress::Timestamp;
use timely::ExchangeData;

use super::index::Index;
use super::large_input::LargeInput;
use super::tracking::{
    id_range, slice_bits, MatchSet, TrackPayload, Tracking, TrackingMode, MESSAGE_HEADER_BYTES,
};
use crate::batch_builder::batch_exchange;
use crate::join_logic::JoinLogic;
use crate::join_type::{JoinType, Side};
use crate::kernel::{GroupedKeys, GROUP_PIECE};
use crate::key::JoinKey;
use crate::load::LoadRecorder;
use crate::partition::Partitioning;
use crate::partitioned_join::{OUTPUT_BATCH, OUTPUT_BUDGET};
use crate::route::Routed;

/// A run of `len` consecutive large records of a batch counted under local slot `slot`
/// ([`DROPPED`] for records that take no part: NULL keys the join does not keep).
type Run = (u32, u32);

/// The slot of large records that are not probed.
const DROPPED: u32 = u32::MAX;

/// Per-time state of the probe on one worker.
struct Probe<K, S, X> {
    small_own: Vec<Vec<(K, S)>>,
    /// The large side's batches as they arrived, with the partition of each run of records:
    /// keeping timely's containers saves copying every large record once more, and inputs fed
    /// partition by partition make one run per batch.
    large_batches: Vec<(Vec<X>, Vec<Run>)>,
    /// Large records held per local slot, for the load counters.
    large_held: Vec<u64>,
    broadcast: Vec<(K, S)>,
}

/// Probes waiting for their small input to complete, with a capability for their time.
type PendingProbes<T, K, S, X> = Vec<(Capability<T>, Probe<K, S, X>)>;

/// Index kept for the tracking operator of the same worker, per time.
pub(super) type SharedIndexes<T, K, S> = Rc<RefCell<Vec<(T, Rc<Index<K, S>>)>>>;

/// The probe operator of [`ib_core`](super::dataflow::ib_core): output rows go out as `Ok`,
/// tracking messages (when the join tracks the small side's matches) as `Err`; the index of each
/// time whose ids this worker's partitions own is left in `indexes` for their owners.
#[allow(clippy::too_many_arguments)]
pub(super) fn probe<'s, T, K, S, G, X, P, H, D, F>(
    small_stream: StreamVec<'s, T, Routed<K, S>>,
    large: LargeInput<'s, T, K, G, X, P, H>,
    how: JoinType,
    small: Side,
    mode: TrackingMode,
    order: fn(&mut [(K, S)]),
    partitioning: Partitioning,
    local: Vec<u32>,
    loads: LoadRecorder,
    logic: Rc<RefCell<F>>,
    indexes: SharedIndexes<T, K, S>,
) -> StreamVec<'s, T, Result<D, Tracking<K, S>>>
where
    T: Timestamp,
    K: JoinKey,
    S: ExchangeData + Clone,
    G: ExchangeData + Clone,
    X: Clone + 'static,
    P: ParallelizationContract<T, Vec<X>>,
    H: FnMut(&X) -> Option<u32> + 'static,
    D: Clone + 'static,
    F: JoinLogic<K, S, G, D> + 'static,
{
    let LargeInput {
        stream: large_stream,
        pact: large_pact,
        mut place,
        view,
    } = large;
    let large = small.other();
    let scope = small_stream.scope();
    let worker = scope.index();
    let slots = local.len();
    let tracks = how.tracks_matches(small);
    let keep_small = how.keeps_unmatched(small);
    let keep_large = how.keeps_unmatched(large);
    let semi_large = how.semi_side() == Some(large);
    let pairs = how.emits_pairs();
    let row_bytes = std::mem::size_of::<(K, S)>() as u64;
    small_stream.binary_frontier(
        large_stream,
        batch_exchange(|record: &Routed<K, S>| record.0.exchange_hash()),
        large_pact,
        "IbProbe",
        move |_capability, info| {
            let activator = scope.activator_for(info.address);
            let mut pending: PendingProbes<T, K, S, X> = Vec::new();
            let mut ready: Vec<ProbeJob<T, K, S, X>> = Vec::new();
            let mut out: Vec<D> = Vec::with_capacity(OUTPUT_BATCH);
            let mut received = vec![0u64; slots];
            move |(input_small, frontier_small), (input_large, frontier_large), output| {
                input_small.for_each_stamp(|stamp, data| {
                    let time = stamp_time(&stamp);
                    let state = probe_state(&mut pending, &time, || stamp.delayed(&time, 0), slots);
                    for batch in data {
                        let mut broadcasts = 0u64;
                        for (dest, record) in batch.drain(..) {
                            match dest.as_partition() {
                                Some(partition) => {
                                    loads.receive(partition, 1);
                                    state.small_own[partitioning.slot(partition)].push(record);
                                }
                                None => {
                                    broadcasts += 1;
                                    state.broadcast.push(record);
                                }
                            }
                        }
                        for &partition in &local {
                            if broadcasts > 0 {
                                loads.receive(partition, broadcasts);
                                loads.broadcast(partition, broadcasts, broadcasts * row_bytes);
                            }
                        }
                    }
                });
                input_large.for_each_stamp(|stamp, data| {
                    let time = stamp_time(&stamp);
                    // A time whose index is built probes its large batches as they come; the
                    // others hold them until it is.
                    let (large_batches, large_held) =
                        match ready.iter_mut().find(|job| job.capability.time() == &time) {
                            Some(job) => (&mut job.large_batches, &mut job.large_held),
                            None => {
                                let state = probe_state(
                                    &mut pending,
                                    &time,
                                    || stamp.delayed(&time, 0),
                                    slots,
                                );
                                (&mut state.large_batches, &mut state.large_held)
                            }
                        };
                    for batch in data {
                        // One counter update per partition and batch, not per record.
                        received.iter_mut().for_each(|count| *count = 0);
                        let mut runs: Vec<Run> = Vec::new();
                        for record in batch.iter() {
                            let slot = match place(record) {
                                Some(partition) => {
                                    assert_eq!(
                                        partitioning.owner(partition),
                                        worker,
                                        "IB-Join probes a large record where it is: its partition must be this worker's"
                                    );
                                    let slot = partitioning.slot(partition);
                                    received[slot] += 1;
                                    slot as u32
                                }
                                None => DROPPED,
                            };
                            match runs.last_mut() {
                                Some((last, len)) if *last == slot => *len += 1,
                                _ => runs.push((slot, 1)),
                            }
                        }
                        for (slot, &count) in received.iter().enumerate() {
                            if count > 0 {
                                loads.receive(local[slot], count);
                                large_held[slot] += count;
                            }
                        }
                        large_batches.push((std::mem::take(batch), runs));
                    }
                });

                // A time's index is built as soon as its small rows are all here.
                let mut index = 0;
                while index < pending.len() {
                    let time = pending[index].0.time();
                    if frontier_small.less_equal(time) {
                        index += 1;
                        continue;
                    }
                    let (capability, state) = pending.swap_remove(index);
                    ready.push(ProbeJob::new(capability, state, order, mode, tracks));
                }

                // At most OUTPUT_BUDGET rows this activation: a probe stops where the budget
                // runs out, inside a hot key's small rows if need be, and goes on next time.
                let mut budget = OUTPUT_BUDGET;
                let mut index = 0;
                while let Some(job) = ready.get_mut(index) {
                    let mut session = output.session(&job.capability);
                    let mut logic = logic.borrow_mut();
                    let mut emit = ProbeOutput {
                        logic: &mut *logic,
                        produced: std::mem::take(&mut job.produced),
                        give: |out: &mut Vec<D>| session.give_iterator(out.drain(..).map(Ok)),
                    };
                    let table = Rc::clone(&job.table);
                    let finished = 'probe: {
                        // Small rows with NULL keys match nothing; they are here only when kept.
                        if keep_small {
                            while job.null_slot < job.small_own.len() {
                                let rows = &job.small_own[job.null_slot];
                                while job.null_row < rows.len() {
                                    if budget == 0 {
                                        break 'probe false;
                                    }
                                    let (key, s) = &rows[job.null_row];
                                    emit.row(job.null_slot, key, Some(s), None, &mut out);
                                    budget -= 1;
                                    job.null_row += 1;
                                }
                                job.null_slot += 1;
                                job.null_row = 0;
                            }
                        }
                        // One pass over the large batches as they arrived, each record probing
                        // the index directly, a batch of keys at a time so that their cache
                        // misses overlap; a batch is freed as soon as it has been probed.
                        let mut found = [None; GroupedKeys::BATCH];
                        while job.batch < job.large_batches.len() {
                            let (batch, runs) = &job.large_batches[job.batch];
                            while job.run < runs.len() {
                                let (slot, len) = runs[job.run];
                                let run = &batch[job.at..job.at + len as usize];
                                while slot != DROPPED && job.record < run.len() {
                                    let slot = slot as usize;
                                    let end = (job.record + GroupedKeys::BATCH).min(run.len());
                                    let chunk = &run[job.record..end];
                                    let mut keys = [None; GroupedKeys::BATCH];
                                    for (record, key) in chunk.iter().zip(&mut keys) {
                                        *key = Some(view(record).0);
                                    }
                                    table.probe_batch(&keys[..chunk.len()], &mut found);
                                    for (record, group) in chunk.iter().zip(found) {
                                        let (key, g) = view(record);
                                        match group {
                                            None => {
                                                if keep_large {
                                                    if budget == 0 {
                                                        break 'probe false;
                                                    }
                                                    emit.row(slot, key, None, Some(g), &mut out);
                                                    budget -= 1;
                                                }
                                            }
                                            Some(group) => {
                                                if tracks {
                                                    let id = table.id_of(group);
                                                    job.matched[slot][id / 64] |= 1 << (id % 64);
                                                }
                                                if pairs {
                                                    // `done` rows of the group given already.
                                                    let smalls = table.rows_of(group);
                                                    while job.done < smalls.len() {
                                                        if budget == 0 {
                                                            break 'probe false;
                                                        }
                                                        let take = (smalls.len() - job.done)
                                                            .min(budget)
                                                            .min(GROUP_PIECE);
                                                        let piece =
                                                            &smalls[job.done..job.done + take];
                                                        emit.pairs(slot, key, piece, g, &mut out);
                                                        job.done += take;
                                                        budget -= take;
                                                    }
                                                } else if semi_large {
                                                    if budget == 0 {
                                                        break 'probe false;
                                                    }
                                                    emit.row(slot, key, None, Some(g), &mut out);
                                                    budget -= 1;
                                                }
                                            }
                                        }
                                        job.record += 1;
                                        job.done = 0;
                                    }
                                }
                                job.at += len as usize;
                                job.run += 1;
                                job.record = 0;
                            }
                            job.large_batches[job.batch] = (Vec::new(), Vec::new());
                            job.batch += 1;
                            job.run = 0;
                            job.at = 0;
                        }
                        // Every batch that came is probed: the list starts again for the next.
                        job.large_batches.clear();
                        job.batch = 0;
                        true
                    };
                    job.produced = emit.produced;
                    // What is gathered goes out now: the next activation may be another time's.
                    if !out.is_empty() {
                        session.give_iterator(out.drain(..).map(Ok));
                    }
                    if !finished {
                        drop(session);
                        activator.activate();
                        break;
                    }
                    if frontier_large.less_equal(job.capability.time()) {
                        // Every large batch that has come is probed; more may come.
                        index += 1;
                        continue;
                    }
                    for (slot, &partition) in local.iter().enumerate() {
                        let held = job.small_own[slot].len() as u64
                            + job.large_held[slot]
                            + job.broadcast_held;
                        loads.output(partition, job.produced[slot]);
                        loads.release(partition, held);
                        let matched = if tracks { &job.matched[slot][..] } else { &[][..] };
                        if tracks {
                            // Every partition tells every owner of a non-empty range, even when it
                            // matched nothing there: the message is what gives the owner a
                            // capability at this time, and its payload is then empty.
                            let mut sent = 0u64;
                            let mut bytes = 0u64;
                            for owner in 0..partitioning.partitions() as u32 {
                                let range = id_range(&partitioning, owner, job.ids_tracked);
                                if range.is_empty() {
                                    continue;
                                }
                                let is_matched = |row: usize| {
                                    let id = job.row_keys[row] as usize;
                                    matched[id / 64] & (1 << (id % 64)) != 0
                                };
                                let payload = match mode {
                                    TrackingMode::Ib => {
                                        let set = MatchSet::encode(
                                            &slice_bits(matched, range.start, range.len()),
                                            range.len(),
                                        );
                                        bytes += set.bytes();
                                        TrackPayload::Keys(set)
                                    }
                                    TrackingMode::Der => {
                                        let ids: Vec<u32> = range
                                            .clone()
                                            .filter(|&row| !is_matched(row))
                                            .map(|row| (row - range.start) as u32)
                                            .collect();
                                        bytes += ids.len() as u64 * 4;
                                        TrackPayload::RowIds(ids)
                                    }
                                    TrackingMode::Ddr => {
                                        let rows: Vec<(u32, K, S)> = range
                                            .clone()
                                            .filter(|&row| !is_matched(row))
                                            .map(|row| {
                                                let (key, s) = &job.table.rows[row];
                                                ((row - range.start) as u32, key.clone(), s.clone())
                                            })
                                            .collect();
                                        bytes += rows.len() as u64 * (4 + row_bytes);
                                        TrackPayload::Rows(rows)
                                    }
                                };
                                sent += 1;
                                bytes += MESSAGE_HEADER_BYTES;
                                session.give(Err((owner, payload)));
                            }
                            loads.tracking(partition, sent, bytes);
                        }
                    }
                    drop(session);
                    // The owners on this worker will need the rows of their ranges.
                    let owns_ids = local
                        .iter()
                        .any(|&p| !id_range(&partitioning, p, job.ids_tracked).is_empty());
                    if tracks && owns_ids {
                        indexes
                            .borrow_mut()
                            .push((job.capability.time().clone(), Rc::clone(&job.table)));
                    }
                    // Done: its capability goes, and with it the hold on the output frontier.
                    ready.remove(index);
                }
            }
        },
    )
}

/// A time whose small rows are all indexed, probing a budget of output rows per activation, its
/// large batches appended as they come until that input is complete too.
struct ProbeJob<T: Timestamp, K, S, X> {
    capability: Capability<T>,
    table: Rc<Index<K, S>>,
    small_own: Vec<Vec<(K, S)>>,
    large_batches: Vec<(Vec<X>, Vec<Run>)>,
    large_held: Vec<u64>,
    broadcast_held: u64,
    /// Ids the owners track: keys (IB-Join) or rows (DER, DDR).
    ids_tracked: usize,
    /// DER, DDR with tracking: the key id of every row.
    row_keys: Vec<u32>,
    /// With tracking: per local slot, a bit per key id that a large record matched.
    matched: Vec<Vec<u64>>,
    /// Output rows per local slot so far.
    produced: Vec<u64>,
    /// Where the probe stands: the slot and row of the kept NULL-key small rows, then the
    /// large batch, its run, the run's first record in the batch, the record in the run, and
    /// the small rows of its key already paired with it.
    null_slot: usize,
    null_row: usize,
    batch: usize,
    run: usize,
    at: usize,
    record: usize,
    done: usize,
}

impl<T: Timestamp, K: JoinKey, S, X> ProbeJob<T, K, S, X> {
    fn new(
        capability: Capability<T>,
        state: Probe<K, S, X>,
        order: fn(&mut [(K, S)]),
        mode: TrackingMode,
        tracks: bool,
    ) -> Self {
        let slots = state.small_own.len();
        let broadcast_held = state.broadcast.len() as u64;
        let table = Rc::new(Index::new(state.broadcast, order));
        let ids_tracked = match mode {
            TrackingMode::Ib => table.keys(),
            TrackingMode::Der | TrackingMode::Ddr => table.rows.len(),
        };
        let row_keys = if tracks && mode != TrackingMode::Ib {
            table.row_keys()
        } else {
            Vec::new()
        };
        let words = table.keys().div_ceil(64);
        let matched = if tracks {
            vec![vec![0u64; words]; slots]
        } else {
            Vec::new()
        };
        ProbeJob {
            capability,
            table,
            small_own: state.small_own,
            large_batches: state.large_batches,
            large_held: state.large_held,
            broadcast_held,
            ids_tracked,
            row_keys,
            matched,
            produced: vec![0; slots],
            null_slot: 0,
            null_row: 0,
            batch: 0,
            run: 0,
            at: 0,
            record: 0,
            done: 0,
        }
    }
}

/// The probe's output rows: to `logic`, a small key's rows that match one large record as one
/// group, counted per local partition slot; `give` hands `out` to the stream whenever it holds
/// [`OUTPUT_BATCH`] records or more.
struct ProbeOutput<'a, F, Give> {
    logic: &'a mut F,
    produced: Vec<u64>,
    give: Give,
}

impl<F, Give> ProbeOutput<'_, F, Give> {
    #[inline]
    fn row<K, S, G, D>(
        &mut self,
        slot: usize,
        key: &K,
        s: Option<&S>,
        g: Option<&G>,
        out: &mut Vec<D>,
    ) where
        F: JoinLogic<K, S, G, D>,
        Give: FnMut(&mut Vec<D>),
    {
        self.produced[slot] += 1;
        self.logic.row(key, s, g, out);
        if out.len() >= OUTPUT_BATCH {
            (self.give)(out);
        }
    }

    /// Every row of `smalls` (rows of `key`) paired with the large record `g`.
    #[inline]
    fn pairs<K, S, G, D>(
        &mut self,
        slot: usize,
        key: &K,
        smalls: &[(K, S)],
        g: &G,
        out: &mut Vec<D>,
    ) where
        F: JoinLogic<K, S, G, D>,
        Give: FnMut(&mut Vec<D>),
    {
        self.produced[slot] += smalls.len() as u64;
        self.logic
            .lefts_with(key, smalls.iter().map(|(_, s)| s), g, out);
        if out.len() >= OUTPUT_BATCH {
            (self.give)(out);
        }
    }
}

/// The time a message's records are joined at (the least element of its stamp).
pub(super) fn stamp_time<T: Timestamp>(
    stamp: &timely::dataflow::operators::InputCapability<T>,
) -> T {
    stamp
        .stamp()
        .elements()
        .first()
        .expect("IB-Join inputs must carry timestamps")
        .clone()
}

fn probe_state<'a, T: Timestamp, K, S, X>(
    pending: &'a mut PendingProbes<T, K, S, X>,
    time: &T,
    retain: impl FnOnce() -> Capability<T>,
    slots: usize,
) -> &'a mut Probe<K, S, X> {
    let index = match pending.iter().position(|(cap, _)| cap.time() == time) {
        Some(index) => index,
        None => {
            pending.push((
                retain(),
                Probe {
                    small_own: (0..slots).map(|_| Vec::new()).collect(),
                    large_batches: Vec::new(),
                    large_held: vec![0; slots],
                    broadcast: Vec::new(),
                },
            ));
            pending.len() - 1
        }
    };
    &mut pending[index].1
}
