//! Builds the dataflow of a resolved strategy from the operators' building blocks.
//!
//! Inputs are streams of `(key, value)` on every worker, and each record has a *home* partition:
//! the partition whose share of the input it is (the runtime reads partition `p`'s rows on the
//! worker that hosts `p`). Strategies that leave records in place keep them at home, which makes
//! the per-partition figures independent of the worker count: the browser build, with one worker
//! hosting every partition, reports exactly what a native run does.

use skewjoin_operators::ib_join::{baseline_join, ib_join_in_place, TrackingMode};
use skewjoin_operators::join_logic::JoinLogic;
use skewjoin_operators::partitioned_join::partitioned_join;
use skewjoin_operators::range_pact::{plan_tables, route_by_ranges, RangeObserver};
use skewjoin_operators::route::{null_aware, route, Destination, Routed};
use skewjoin_operators::sample::{sample_summaries, SampleConfig};
use skewjoin_operators::tree_join::tree_join;
use skewjoin_operators::{JoinKey, JoinType, Partitioning, Side};
use timely::dataflow::operators::vec::Broadcast;
use timely::dataflow::StreamVec;
use timely::progress::Timestamp;
use timely::ExchangeData;

use crate::am_join::dataflow::am_join;
use crate::am_join::planning::AmPlanning;
// Re-exported so that `compose::Home`, its path before it had a module of its own, still works.
pub use crate::home::Home;
use crate::report::Observers;
use crate::strategy::{Resolved, VprpSettings};
use crate::vprp::{plan_ranges, RangeParams, DEFAULT_THETA};

/// Builds `resolved` over `left` and `right`, handing every output row to `logic` (hot keys'
/// pairs a group at a time where the strategy joins them in the kernel or a Tree-Join leaf).
/// Strategies planned from key statistics (AM-Join, Tree-Join) plan as `planning` says; `None`
/// plans every timestamp inside the dataflow with the strategy's parameters (see
/// [`crate::am_join::planning`]). The command line passes the exact plan of its statistics
/// phase (see [`crate::exec`]). The operators count their load and record their decisions
/// (Tree-Join rounds, VPRP ranges) into `observers`.
#[allow(clippy::too_many_arguments)]
pub fn build_join<'s, T, K, L, R, D, F>(
    left: StreamVec<'s, T, (K, L)>,
    right: StreamVec<'s, T, (K, R)>,
    resolved: Resolved,
    how: JoinType,
    partitioning: Partitioning,
    homes: (Home<K, L>, Home<K, R>),
    planning: Option<AmPlanning<K>>,
    observers: &Observers<K>,
    logic: F,
) -> StreamVec<'s, T, D>
where
    T: Timestamp,
    K: JoinKey,
    L: ExchangeData + Clone,
    R: ExchangeData + Clone,
    D: Clone + 'static,
    F: JoinLogic<K, L, R, D> + 'static,
{
    let (home_left, home_right) = homes;
    let loads = observers.loads.clone();
    match resolved {
        // Shuffle-Join, with kept NULL keys in their home partitions: the rows need not be at
        // home before they are routed.
        Resolved::Shuffle => {
            let left = route(
                left,
                "ShuffleLeft",
                null_aware(
                    Destination::KeyHash(partitioning),
                    how.keeps_unmatched(Side::Left),
                    move |k, v| home_left(k, v),
                ),
            );
            let right = route(
                right,
                "ShuffleRight",
                null_aware(
                    Destination::KeyHash(partitioning),
                    how.keeps_unmatched(Side::Right),
                    move |k, v| home_right(k, v),
                ),
            );
            partitioned_join(left, right, how, partitioning, loads, logic)
        }
        Resolved::Broadcast { side } => {
            let (left_to, right_to) = match side {
                Side::Right => (Destination::Home, Destination::Everywhere),
                Side::Left => (Destination::Everywhere, Destination::Home),
            };
            let left = route(
                left,
                "BroadcastJoinLeft",
                null_aware(left_to, how.keeps_unmatched(Side::Left), move |k, v| {
                    home_left(k, v)
                }),
            );
            let right = route(
                right,
                "BroadcastJoinRight",
                null_aware(right_to, how.keeps_unmatched(Side::Right), move |k, v| {
                    home_right(k, v)
                }),
            );
            partitioned_join(left, right, how, partitioning, loads, logic)
        }
        Resolved::Vprp(settings) | Resolved::VprpT(settings) => {
            let separate_noise = matches!(resolved, Resolved::Vprp(_));
            let (left, right) = vprp_route(
                left,
                right,
                settings,
                separate_noise,
                how,
                partitioning,
                &observers.ranges,
            );
            partitioned_join(left, right, how, partitioning, loads, logic)
        }
        // The large side stays on the worker that feeds it: no routing, no exchange.
        Resolved::Ib { small } => ib_join_in_place(
            left,
            right,
            how,
            small,
            partitioning,
            (
                move |k: &K, v: &L| home_left(k, v),
                move |k: &K, v: &R| home_right(k, v),
            ),
            loads,
            logic,
        ),
        Resolved::Der { small } | Resolved::Ddr { small } => {
            let mode = match resolved {
                Resolved::Der { .. } => TrackingMode::Der,
                _ => TrackingMode::Ddr,
            };
            baseline_join(
                left,
                right,
                how,
                small,
                mode,
                partitioning,
                (
                    move |k: &K, v: &L| home_left(k, v),
                    move |k: &K, v: &R| home_right(k, v),
                ),
                loads,
                logic,
            )
        }
        Resolved::Am { params } => am_join(
            left,
            right,
            how,
            partitioning,
            (home_left, home_right),
            planning.unwrap_or(AmPlanning::PerTimestamp(params)),
            None,
            loads,
            logic,
        ),
        Resolved::Tree { params, tree } => am_join(
            left,
            right,
            how,
            partitioning,
            (home_left, home_right),
            planning.unwrap_or(AmPlanning::PerTimestamp(params)),
            Some((tree, observers.rounds.clone())),
            loads,
            logic,
        ),
        Resolved::TreeBasic { tree } => tree_join(
            left,
            right,
            how,
            partitioning,
            tree,
            |_: &K| None,
            loads,
            observers.rounds.clone(),
            logic,
        ),
    }
}

/// Both inputs, routed.
type RoutedPair<'s, T, K, L, R> = (
    StreamVec<'s, T, Routed<K, L>>,
    StreamVec<'s, T, Routed<K, R>>,
);

/// VPRP's routing: sample both sides, gather the summaries on every worker, plan the range
/// table, then route each record by its key's range (records wait for the table).
fn vprp_route<'s, T, K, L, R>(
    left: StreamVec<'s, T, (K, L)>,
    right: StreamVec<'s, T, (K, R)>,
    settings: VprpSettings,
    separate_noise: bool,
    how: JoinType,
    partitioning: Partitioning,
    observer: &RangeObserver<K>,
) -> RoutedPair<'s, T, K, L, R>
where
    T: Timestamp,
    K: JoinKey,
    L: ExchangeData + Clone,
    R: ExchangeData + Clone,
{
    let config = SampleConfig {
        fraction: settings.sample_fraction(),
        seed: settings.seed,
        ..SampleConfig::default()
    };
    let params = RangeParams {
        partitions: partitioning.partitions(),
        virtual_per_partition: settings.virtual_per_partition.max(1) as usize,
        theta: DEFAULT_THETA,
        separate_noise,
    };
    let left_sample = sample_summaries(left.clone(), &config).broadcast();
    let right_sample = sample_summaries(right.clone(), &config).broadcast();
    let tables = plan_tables(left_sample, right_sample, move |l, r| {
        plan_ranges(l, r, &params)
    });
    (
        route_by_ranges(
            left,
            tables.clone(),
            "VprpLeft",
            partitioning,
            how.keeps_unmatched(Side::Left),
            observer.clone(),
        ),
        route_by_ranges(
            right,
            tables,
            "VprpRight",
            partitioning,
            how.keeps_unmatched(Side::Right),
            observer.clone(),
        ),
    )
}
