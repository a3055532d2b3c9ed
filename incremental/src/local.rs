//! Holding updates until their time is complete, on the worker that has them.

use std::collections::BTreeMap;

use differential_dataflow::consolidation::consolidate_updates;
use differential_dataflow::difference::Semigroup;
use differential_dataflow::{AsCollection, Data, VecCollection};
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::{Capability, InputCapability};
use timely::order::TotalOrder;
use timely::progress::Timestamp;

/// Updates held by time until the time is complete, each time with a capability to send at it.
pub struct ByTime<T: Timestamp, U> {
    pending: BTreeMap<T, (Capability<T>, Vec<U>)>,
}

impl<T: Timestamp + TotalOrder, U> ByTime<T, U> {
    pub fn new() -> Self {
        ByTime {
            pending: BTreeMap::new(),
        }
    }

    /// Holds `update`, of `time`, which came in a message with capability `stamp`.
    pub fn push(&mut self, stamp: &InputCapability<T>, time: &T, update: U) {
        match self.pending.get_mut(time) {
            Some((_, updates)) => updates.push(update),
            None => {
                self.pending
                    .insert(time.clone(), (stamp.delayed(time, 0), vec![update]));
            }
        }
    }

    /// The earliest held time's updates, if `open(time)` says no input can still send any.
    pub fn next_complete(&mut self, open: impl Fn(&T) -> bool) -> Option<(Capability<T>, Vec<U>)> {
        let entry = self.pending.first_entry()?;
        if open(entry.key()) {
            return None;
        }
        Some(entry.remove())
    }
}

/// `collection` with the updates of each time summed on this worker (no exchange) and those
/// that sum to zero dropped, each time's updates sent once the time is complete.
///
/// Differential's `consolidate` exchanges by the record's hash; this is for updates that
/// cancel where they are made, such as a record sent home and the same record taken back home
/// by a join on the same worker.
pub fn consolidate_here<'s, T, D, R>(
    collection: VecCollection<'s, T, D, R>,
) -> VecCollection<'s, T, D, R>
where
    T: Timestamp + TotalOrder,
    D: Data,
    R: Semigroup + 'static,
{
    collection
        .inner
        .unary_frontier(Pipeline, "ConsolidateHere", |_, _| {
            let mut pending = ByTime::new();
            move |(input, frontier), output| {
                input.for_each_stamp(|stamp, data| {
                    for batch in data {
                        for (datum, time, diff) in batch.drain(..) {
                            pending.push(&stamp, &time.clone(), (datum, time, diff));
                        }
                    }
                });
                while let Some((capability, mut updates)) =
                    pending.next_complete(|time| frontier.less_equal(time))
                {
                    consolidate_updates(&mut updates);
                    output
                        .session(&capability)
                        .give_iterator(updates.into_iter());
                }
            }
        })
        .as_collection()
}
