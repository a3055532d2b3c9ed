//! IB-Join's dataflow: the probe, then, when the join tracks the small side's matches, the
//! owners of the id ranges, both at the same timestamp with no loop.

use std::cell::RefCell;
use std::rc::Rc;

use timely::dataflow::channels::pact::ParallelizationContract;
use timely::dataflow::operators::{Concat, OkErr};
use timely::dataflow::StreamVec;
use timely::progress::Timestamp;
use timely::ExchangeData;

use super::large_input::{in_place_large, routed_large, LargeInput};
use super::owners::owned_rows;
use super::probe::{probe, SharedIndexes};
use super::tracking::{Tracking, TrackingMode};
use crate::join_logic::JoinLogic;
use crate::join_type::{JoinType, Side};
use crate::key::JoinKey;
use crate::load::LoadRecorder;
use crate::partition::Partitioning;
use crate::route::{null_aware, route, Destination, Routed};

/// [`ib_core`] with the large side kept in place when every worker hosts a partition, and
/// exchanged to `home` otherwise.
#[allow(clippy::too_many_arguments)]
pub(super) fn ib_with_home<'s, T, K, S, G, H, D, F>(
    small_routed: StreamVec<'s, T, Routed<K, S>>,
    large: StreamVec<'s, T, (K, G)>,
    home: H,
    keep_large: bool,
    how: JoinType,
    small: Side,
    mode: TrackingMode,
    order: fn(&mut [(K, S)]),
    partitioning: Partitioning,
    loads: LoadRecorder,
    logic: F,
) -> StreamVec<'s, T, D>
where
    T: Timestamp,
    K: JoinKey,
    S: ExchangeData + Clone,
    G: ExchangeData + Clone,
    H: FnMut(&K, &G) -> u32 + 'static,
    D: Clone + 'static,
    F: JoinLogic<K, S, G, D> + 'static,
{
    if partitioning.partitions() >= partitioning.workers() {
        ib_core(
            small_routed,
            in_place_large(large, home, keep_large),
            how,
            small,
            mode,
            order,
            partitioning,
            loads,
            logic,
        )
    } else {
        let routed = route(
            large,
            "StayLarge",
            null_aware(Destination::Home, keep_large, home),
        );
        ib_core(
            small_routed,
            routed_large(routed),
            how,
            small,
            mode,
            order,
            partitioning,
            loads,
            logic,
        )
    }
}

/// IB-Join with the small side `S` and the large side `G`, handing output rows to `logic` as
/// `(key, small, large)`.
#[allow(clippy::too_many_arguments)]
pub(super) fn ib_core<'s, T, K, S, G, X, P, H, D, F>(
    small_stream: StreamVec<'s, T, Routed<K, S>>,
    large: LargeInput<'s, T, K, G, X, P, H>,
    how: JoinType,
    small: Side,
    mode: TrackingMode,
    order: fn(&mut [(K, S)]),
    partitioning: Partitioning,
    loads: LoadRecorder,
    logic: F,
) -> StreamVec<'s, T, D>
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
    let worker = small_stream.scope().index();
    assert_eq!(
        partitioning.workers(),
        small_stream.scope().peers(),
        "the partitioning must be made for this computation's worker count"
    );
    let local = partitioning.local_partitions(worker);
    for &partition in &local {
        loads.register(partition);
    }
    let tracks = how.tracks_matches(small);
    let logic = Rc::new(RefCell::new(logic));
    let indexes: SharedIndexes<T, K, S> = Rc::new(RefCell::new(Vec::new()));

    let probed = probe(
        small_stream,
        large,
        how,
        small,
        mode,
        order,
        partitioning,
        local.clone(),
        loads.clone(),
        Rc::clone(&logic),
        Rc::clone(&indexes),
    );

    let (rows, tracking) =
        probed.ok_err::<Vec<D>, D, Vec<Tracking<K, S>>, Tracking<K, S>, _>(|x| x);
    if !tracks {
        return rows;
    }

    let tracked = owned_rows::<_, _, _, G, _, _>(
        tracking,
        how,
        small,
        mode,
        partitioning,
        local,
        loads,
        logic,
        indexes,
    );
    rows.concat(tracked)
}
