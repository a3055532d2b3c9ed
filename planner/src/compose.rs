//! Builds the dataflow of a resolved strategy from the operators' building blocks.
//!
//! Inputs are streams of `(key, value)` on every worker, and each record has a *home* partition:
//! the partition whose share of the input it is (the runtime reads partition `p`'s rows on the
//! worker that hosts `p`). Strategies that leave records in place keep them at home, which makes
//! the per-partition figures independent of the worker count: the browser build, with one worker
//! hosting every partition, reports exactly what a native run does.

use std::rc::Rc;

use skewjoin_operators::broadcast_join::broadcast_all;
use skewjoin_operators::partitioned_join::partitioned_join;
use skewjoin_operators::route::{by_key_hash, route, Route};
use skewjoin_operators::tree_join::{tree_join, TreeRounds};
use skewjoin_operators::{JoinKey, JoinType, LoadRecorder, Partitioning, Side};
use timely::dataflow::StreamVec;
use timely::progress::Timestamp;
use timely::ExchangeData;

use crate::am_join::{am_join, AmPlan};
use crate::strategy::Resolved;

/// The home partition of a record.
pub type Home<K, V> = Rc<dyn Fn(&K, &V) -> u32>;

/// Builds `resolved` over `left` and `right`, calling `logic(key, left, right, out)` for every
/// output row. Strategies planned from key statistics (AM-Join) take their plan in `plan`, made
/// by a statistics run before this dataflow is built (see [`crate::exec`]).
#[allow(clippy::too_many_arguments)]
pub fn build_join<'s, T, K, L, R, D, F>(
    left: StreamVec<'s, T, (K, L)>,
    right: StreamVec<'s, T, (K, R)>,
    resolved: Resolved,
    how: JoinType,
    partitioning: Partitioning,
    homes: (Home<K, L>, Home<K, R>),
    plan: Option<Rc<AmPlan<K>>>,
    loads: LoadRecorder,
    logic: F,
) -> StreamVec<'s, T, D>
where
    T: Timestamp,
    K: JoinKey,
    L: ExchangeData + Clone,
    R: ExchangeData + Clone,
    D: Clone + 'static,
    F: FnMut(&K, Option<&L>, Option<&R>, &mut Vec<D>) + 'static,
{
    let worker = left.scope().index();
    let (home_left, home_right) = homes;
    match resolved {
        Resolved::Shuffle => {
            let left = route(
                left,
                "ShuffleLeft",
                by_key_hash(partitioning, worker, how.keeps_unmatched(Side::Left)),
            );
            let right = route(
                right,
                "ShuffleRight",
                by_key_hash(partitioning, worker, how.keeps_unmatched(Side::Right)),
            );
            partitioned_join(left, right, how, partitioning, loads, logic)
        }
        Resolved::Broadcast { side } => {
            let keep_left = how.keeps_unmatched(Side::Left);
            let keep_right = how.keeps_unmatched(Side::Right);
            let (left, right) = match side {
                Side::Right => (
                    route(left, "StayLeft", stay_home(home_left, keep_left)),
                    route(right, "BroadcastRight", broadcast_all),
                ),
                Side::Left => (
                    route(left, "BroadcastLeft", broadcast_all),
                    route(right, "StayRight", stay_home(home_right, keep_right)),
                ),
            };
            partitioned_join(left, right, how, partitioning, loads, logic)
        }
        Resolved::Am { .. } => {
            let plan = plan.expect("AM-Join is built from a plan: run the key statistics first");
            am_join(
                left,
                right,
                how,
                partitioning,
                (home_left, home_right),
                plan,
                None,
                loads,
                logic,
            )
        }
        Resolved::Tree { tree, .. } => {
            let plan =
                plan.expect("Tree-Join's grid is built from a plan: run the key statistics first");
            am_join(
                left,
                right,
                how,
                partitioning,
                (home_left, home_right),
                plan,
                Some((tree, TreeRounds::new())),
                loads,
                logic,
            )
        }
        Resolved::TreeBasic { tree } => tree_join(
            left,
            right,
            how,
            partitioning,
            tree,
            |_: &K| None,
            loads,
            TreeRounds::new(),
            logic,
        ),
    }
}

/// Leaves each record in its home partition; NULL keys that no output keeps are dropped.
fn stay_home<K: JoinKey, V>(home: Home<K, V>, keep_nulls: bool) -> impl FnMut(&K, &V) -> Route {
    move |key, value| {
        if key.is_null() && !keep_nulls {
            Route::Drop
        } else {
            Route::To(home(key, value))
        }
    }
}
