//! The large side as the probe takes it: routed to partitions and exchanged, or left in place.

use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::StreamVec;
use timely::progress::Timestamp;
use timely::ExchangeData;

use crate::batch_builder::{batch_exchange, BatchExchange};
use crate::key::JoinKey;
use crate::route::{null_aware, Destination, Routed};

/// The large side of [`ib_core`](super::dataflow::ib_core): records of type `X` arriving
/// through `pact`, `place(record)` naming the local partition each is counted under (`None`: it
/// takes no part), `view` its key and value.
pub(super) struct LargeInput<'s, T: Timestamp, K, G, X, P, H> {
    pub(super) stream: StreamVec<'s, T, X>,
    pub(super) pact: P,
    pub(super) place: H,
    pub(super) view: fn(&X) -> (&K, &G),
}

/// A large side already routed to partitions, exchanged to their workers.
#[allow(clippy::type_complexity)]
pub(super) fn routed_large<'s, T: Timestamp, K: JoinKey, G: ExchangeData>(
    stream: StreamVec<'s, T, Routed<K, G>>,
) -> LargeInput<
    's,
    T,
    K,
    G,
    Routed<K, G>,
    BatchExchange<Routed<K, G>, impl FnMut(&Routed<K, G>) -> u64 + 'static>,
    impl FnMut(&Routed<K, G>) -> Option<u32> + 'static,
> {
    LargeInput {
        stream,
        pact: batch_exchange(|record: &Routed<K, G>| record.0.exchange_hash()),
        place: |record: &Routed<K, G>| {
            Some(
                record
                    .0
                    .as_partition()
                    .expect("IB-Join never broadcasts the large side"),
            )
        },
        view: |record| (&record.1 .0, &record.1 .1),
    }
}

/// A large side that stays where it is: no routing operator and no exchange, each record
/// probed on the worker that holds it and counted under `home(key, value)`, which must be a
/// partition of that worker. NULL keys take no part unless kept.
#[allow(clippy::type_complexity)]
pub(super) fn in_place_large<'s, T: Timestamp, K: JoinKey, G: ExchangeData>(
    stream: StreamVec<'s, T, (K, G)>,
    home: impl FnMut(&K, &G) -> u32 + 'static,
    keep_nulls: bool,
) -> LargeInput<'s, T, K, G, (K, G), Pipeline, impl FnMut(&(K, G)) -> Option<u32> + 'static> {
    let mut rule = null_aware(Destination::Home, keep_nulls, home);
    LargeInput {
        stream,
        pact: Pipeline,
        place: move |(key, value): &(K, G)| rule(key, value).single(),
        view: |record| (&record.0, &record.1),
    }
}
