//! The owners of the small side's id ranges: each combines what every partition reported for
//! its range at a time and, once the time is complete, emits the small rows of its range that
//! the join keeps, each exactly once.

use std::cell::RefCell;
use std::rc::Rc;

use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::Capability;
use timely::dataflow::StreamVec;
use timely::progress::Timestamp;
use timely::ExchangeData;

use super::probe::{stamp_time, SharedIndexes};
use super::tracking::{id_range, MatchSet, TrackPayload, Tracking, TrackingMode};
use crate::join_logic::JoinLogic;
use crate::join_type::{JoinType, Side};
use crate::key::JoinKey;
use crate::load::LoadRecorder;
use crate::partition::Partitioning;
use crate::partitioned_join::OUTPUT_BATCH;

/// The tracking operator of [`ib_core`](super::dataflow::ib_core): the output rows of the owners
/// on this worker, from the tracking messages of every partition and the indexes the probe left
/// in `indexes`.
#[allow(clippy::too_many_arguments)]
pub(super) fn owned_rows<'s, T, K, S, G, D, F>(
    tracking: StreamVec<'s, T, Tracking<K, S>>,
    how: JoinType,
    small: Side,
    mode: TrackingMode,
    partitioning: Partitioning,
    local: Vec<u32>,
    loads: LoadRecorder,
    logic: Rc<RefCell<F>>,
    indexes: SharedIndexes<T, K, S>,
) -> StreamVec<'s, T, D>
where
    T: Timestamp,
    K: JoinKey,
    S: ExchangeData + Clone,
    D: Clone + 'static,
    F: JoinLogic<K, S, G, D> + 'static,
{
    let slots = local.len();
    let keep_small = how.keeps_unmatched(small);
    let semi_small = how.semi_side() == Some(small);
    tracking.unary_frontier(
        Exchange::new(|message: &Tracking<K, S>| message.0 as u64),
        "IbTrack",
        move |_capability, _info| {
            // Per time: the capability and, per local slot, the OR of the received sets.
            let mut pending: Vec<(Capability<T>, Vec<OwnerState>)> = Vec::new();
            let mut out: Vec<D> = Vec::with_capacity(OUTPUT_BATCH);
            move |(input, frontier), output| {
                input.for_each_stamp(|stamp, data| {
                    let time = stamp_time(&stamp);
                    let position = match pending.iter().position(|(cap, _)| *cap.time() == time) {
                        Some(position) => position,
                        None => {
                            pending.push((
                                stamp.delayed(&time, 0),
                                vec![OwnerState::default(); slots],
                            ));
                            pending.len() - 1
                        }
                    };
                    let sets = &mut pending[position].1;
                    for batch in data {
                        for (owner, payload) in batch.drain(..) {
                            let state = &mut sets[partitioning.slot(owner)];
                            match payload {
                                TrackPayload::Keys(set) => {
                                    let needed = match &set {
                                        MatchSet::Bits(words) => words.len(),
                                        MatchSet::Ids(ids) => {
                                            ids.last().map_or(0, |&id| id as usize / 64 + 1)
                                        }
                                    };
                                    if state.bits.len() < needed {
                                        state.bits.resize(needed, 0);
                                    }
                                    set.or_into(&mut state.bits);
                                }
                                TrackPayload::RowIds(ids) => {
                                    state.reports += 1;
                                    for id in ids {
                                        state.count(id);
                                    }
                                }
                                TrackPayload::Rows(rows) => {
                                    state.reports += 1;
                                    for (id, _, _) in rows {
                                        state.count(id);
                                    }
                                }
                            }
                        }
                    }
                });
                let mut index = 0;
                while index < pending.len() {
                    let time = pending[index].0.time();
                    if frontier.less_equal(time) {
                        index += 1;
                        continue;
                    }
                    let (capability, sets) = pending.swap_remove(index);
                    let table = {
                        let mut stored = indexes.borrow_mut();
                        let position = stored
                            .iter()
                            .position(|(t, _)| t == capability.time())
                            .expect("the probe stores the index before its frontier passes");
                        stored.swap_remove(position).1
                    };
                    let keys = table.keys();
                    let mut session = output.session(&capability);
                    let mut logic = logic.borrow_mut();
                    for (slot, &owner) in local.iter().enumerate() {
                        let mut produced = 0u64;
                        let state = &sets[slot];
                        match mode {
                            TrackingMode::Ib => {
                                for (offset, id) in id_range(&partitioning, owner, keys).enumerate()
                                {
                                    let matched = state
                                        .bits
                                        .get(offset / 64)
                                        .is_some_and(|w| w & (1 << (offset % 64)) != 0);
                                    if (matched && semi_small) || (!matched && keep_small) {
                                        for (key, s) in table.group(id) {
                                            produced += 1;
                                            logic.row(key, Some(s), None, &mut out);
                                            if out.len() >= OUTPUT_BATCH {
                                                session.give_container(&mut out);
                                                out.clear();
                                            }
                                        }
                                    }
                                }
                            }
                            TrackingMode::Der | TrackingMode::Ddr => {
                                // A row is unmatched everywhere when every partition that
                                // probed reported it unmatched; every partition probes and
                                // reports to every owner of a non-empty range.
                                let rows = id_range(&partitioning, owner, table.rows.len());
                                assert!(
                                    rows.is_empty()
                                        || state.reports == partitioning.partitions() as u32,
                                    "an owner heard from {} of {} partitions",
                                    state.reports,
                                    partitioning.partitions()
                                );
                                for (offset, row) in rows.enumerate() {
                                    let unmatched = state.counts.get(offset).copied().unwrap_or(0)
                                        == state.reports;
                                    if (!unmatched && semi_small) || (unmatched && keep_small) {
                                        let (key, s) = &table.rows[row];
                                        produced += 1;
                                        logic.row(key, Some(s), None, &mut out);
                                        if out.len() >= OUTPUT_BATCH {
                                            session.give_container(&mut out);
                                            out.clear();
                                        }
                                    }
                                }
                            }
                        }
                        if !out.is_empty() {
                            session.give_container(&mut out);
                            out.clear();
                        }
                        loads.output(owner, produced);
                    }
                }
            }
        },
    )
}

/// What the owner of one range has received at one time.
#[derive(Clone, Debug, Default)]
struct OwnerState {
    /// IB-Join: the OR of the matched key-id sets.
    bits: Vec<u64>,
    /// DER, DDR: per row of the range, how many partitions reported it unmatched.
    counts: Vec<u32>,
    /// DER, DDR: how many partitions reported.
    reports: u32,
}

impl OwnerState {
    fn count(&mut self, id: u32) {
        let id = id as usize;
        if self.counts.len() <= id {
            self.counts.resize(id + 1, 0);
        }
        self.counts[id] += 1;
    }
}
