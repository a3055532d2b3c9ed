//! Routing records to partitions: the first half of every strategy.
//!
//! A strategy decides, per record, one partition, every partition (broadcast), or none (a record
//! that cannot contribute to the output, such as a NULL key on a side that is not preserved).
//! [`route`] turns that decision into `(Dest, record)` pairs that
//! [`partitioned_join`](crate::partitioned_join::partitioned_join) exchanges to the owners.

use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::StreamVec;
use timely::progress::Timestamp;
use timely::ExchangeData;

use crate::batch_builder::{batch_records, Workers};
use crate::key::JoinKey;
use crate::partition::{Dest, Partitioning};

/// Where one record goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// To one partition.
    To(u32),
    /// To every partition (one copy per worker, shared by its partitions).
    Broadcast,
    /// Nowhere: the record cannot affect the output.
    Drop,
}

impl Route {
    /// The partition of a record that goes to one; `None` for one broadcast or dropped.
    #[inline]
    pub fn single(self) -> Option<u32> {
        match self {
            Route::To(partition) => Some(partition),
            Route::Broadcast | Route::Drop => None,
        }
    }
}

/// A routed record: its destination and the `(key, value)` pair.
pub type Routed<K, V> = (Dest, (K, V));

/// Tags every record of `stream` with the destination `rule` chooses.
pub fn route<'s, T, K, V, F>(
    stream: StreamVec<'s, T, (K, V)>,
    name: &str,
    mut rule: F,
) -> StreamVec<'s, T, Routed<K, V>>
where
    T: Timestamp,
    K: JoinKey,
    V: ExchangeData + Clone,
    F: FnMut(&K, &V) -> Route + 'static,
{
    let workers = stream.scope().peers();
    let exchange = Workers::new(workers);
    let full = batch_records::<Routed<K, V>>();
    stream.unary(Pipeline, name, move |_, _| {
        // Records are routed into a container per worker and each is handed over whole: giving
        // records one at a time cost a container builder's checks per record, and a container
        // bound for one worker crosses the exchange without being copied (`batch_exchange`).
        let mut routed: Vec<Vec<Routed<K, V>>> = (0..workers).map(|_| Vec::new()).collect();
        move |input, output| {
            input.for_each_stamp(|cap, data| {
                let mut session = output.session(&cap);
                // Adds a record to its worker's container, handing the container over when full.
                macro_rules! send {
                    ($worker:expr, $record:expr) => {{
                        let container = &mut routed[$worker];
                        if container.capacity() == 0 {
                            // A container given away leaves none behind: growing the next one
                            // by doubling copied every record once more.
                            container.reserve(full);
                        }
                        container.push($record);
                        if container.len() >= full {
                            session.give_container(container);
                            container.clear();
                        }
                    }};
                }
                for batch in data {
                    for (key, value) in batch.drain(..) {
                        match rule(&key, &value) {
                            Route::To(partition) => {
                                let dest = Dest::partition(partition);
                                send!(exchange.of(dest.exchange_hash()), (dest, (key, value)));
                            }
                            Route::Broadcast => {
                                (1..workers).for_each(|worker| {
                                    let dest = Dest::all_of_worker(worker as u32);
                                    send!(worker, (dest, (key.clone(), value.clone())));
                                });
                                send!(0, (Dest::all_of_worker(0), (key, value)));
                            }
                            Route::Drop => {}
                        }
                    }
                }
                for container in routed.iter_mut().filter(|c| !c.is_empty()) {
                    session.give_container(container);
                    container.clear();
                }
            });
        }
    })
}

/// Spreads records over partitions without looking at their keys: round-robin over the
/// partitions of this worker, so nothing crosses to another worker ("stays in place"), or over
/// all partitions when this worker hosts none (P < W).
#[derive(Clone, Debug)]
pub struct RoundRobin {
    targets: Vec<u32>,
    next: usize,
}

impl RoundRobin {
    /// Round-robin over the partitions hosted by `worker`.
    pub fn local(partitioning: &Partitioning, worker: usize) -> RoundRobin {
        let mut targets = partitioning.local_partitions(worker);
        let mut next = 0;
        if targets.is_empty() {
            targets = (0..partitioning.partitions() as u32).collect();
            next = worker % targets.len();
        }
        RoundRobin { targets, next }
    }

    /// The next partition.
    #[inline]
    pub fn next_partition(&mut self) -> u32 {
        let partition = self.targets[self.next];
        self.next += 1;
        if self.next == self.targets.len() {
            self.next = 0;
        }
        partition
    }
}

/// Where [`null_aware`] sends a record whose key is not NULL.
#[derive(Clone, Copy, Debug)]
pub enum Destination {
    /// To its home partition, where the record stays (the side that does not move).
    Home,
    /// To every partition (the broadcast side).
    Everywhere,
    /// To the partition of its key's stable hash (Shuffle-Join).
    KeyHash(Partitioning),
}

/// The routing rule of every join, with SQL's NULL semantics written once: a NULL key matches
/// nothing, so its record goes to its home (`home(key, value)`, never hashed: that would pile
/// every NULL onto one partition) when its side keeps unmatched rows (`keep_nulls`), and is
/// dropped otherwise; any other record goes to `others`. `home` may keep state (a round-robin).
///
/// ```
/// use skewjoin_operators::route::{null_aware, Destination, Route};
///
/// let mut rule = null_aware(Destination::Everywhere, true, |_: &Option<u32>, _: &()| 7);
/// assert_eq!(rule(&Some(1), &()), Route::Broadcast);
/// assert_eq!(rule(&None, &()), Route::To(7));
/// let mut dropping = null_aware(Destination::Home, false, |_: &Option<u32>, _: &()| 3);
/// assert_eq!(dropping(&Some(1), &()), Route::To(3));
/// assert_eq!(dropping(&None, &()), Route::Drop);
/// ```
pub fn null_aware<K: JoinKey, V>(
    others: Destination,
    keep_nulls: bool,
    mut home: impl FnMut(&K, &V) -> u32 + 'static,
) -> impl FnMut(&K, &V) -> Route + 'static {
    move |key, value| {
        if key.is_null() {
            if keep_nulls {
                Route::To(home(key, value))
            } else {
                Route::Drop
            }
        } else {
            match others {
                Destination::Home => Route::To(home(key, value)),
                Destination::Everywhere => Route::Broadcast,
                Destination::KeyHash(partitioning) => {
                    Route::To(partitioning.partition_of_hash(key.stable_hash()))
                }
            }
        }
    }
}

/// The Shuffle-Join rule: a key's records go to the partition of its stable hash; kept NULL
/// keys are spread round-robin over this worker's partitions (see [`null_aware`]).
pub fn by_key_hash<K: JoinKey, V>(
    partitioning: Partitioning,
    worker: usize,
    keep_nulls: bool,
) -> impl FnMut(&K, &V) -> Route + 'static {
    let mut spread = RoundRobin::local(&partitioning, worker);
    null_aware(
        Destination::KeyHash(partitioning),
        keep_nulls,
        move |_: &K, _: &V| spread.next_partition(),
    )
}

/// Like [`route`], but a record may go to several partitions, each copy with its own key: `rule`
/// pushes `(partition, key)` for every copy. This is how a hot key is unravelled into a grid of
/// cells, each copy keyed by `(key, cell)` so copies meeting in one partition never pair across
/// cells.
pub fn route_copies<'s, T, K, V, K2, F>(
    stream: StreamVec<'s, T, (K, V)>,
    name: &str,
    mut rule: F,
) -> StreamVec<'s, T, Routed<K2, V>>
where
    T: Timestamp,
    K: JoinKey,
    K2: JoinKey,
    V: ExchangeData + Clone,
    F: FnMut(&K, &V, &mut Vec<(u32, K2)>) + 'static,
{
    stream.unary(Pipeline, name, move |_, _| {
        let mut copies = Vec::new();
        move |input, output| {
            input.for_each_stamp(|cap, data| {
                let mut session = output.session(&cap);
                for batch in data {
                    for (key, value) in batch.drain(..) {
                        rule(&key, &value, &mut copies);
                        for (partition, key) in copies.drain(..) {
                            session.give((Dest::partition(partition), (key, value.clone())));
                        }
                    }
                }
            });
        }
    })
}
