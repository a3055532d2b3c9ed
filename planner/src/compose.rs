//! The executors' one entry to a resolved strategy's dataflow, which its module builds from the
//! operators' building blocks ([`JoinStrategy::build`](crate::strategies::JoinStrategy::build)).
//!
//! Inputs are streams of `(key, value)` on every worker, and each record has a *home* partition:
//! the partition whose share of the input it is (the runtime reads partition `p`'s rows on the
//! worker that hosts `p`). Strategies that leave records in place keep them at home, which makes
//! the per-partition figures independent of the worker count: the browser build, with one worker
//! hosting every partition, reports exactly what a native run does.

use skewjoin_operators::join_logic::JoinLogic;
use skewjoin_operators::{JoinKey, JoinType, Partitioning};
use timely::dataflow::StreamVec;
use timely::progress::Timestamp;
use timely::ExchangeData;

use crate::am_join::planning::AmPlanning;
// Re-exported so that `compose::Home`, its path before it had a module of its own, still works.
pub use crate::home::Home;
use crate::report::Observers;
use crate::strategy::{JoinSetup, Resolved};

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
    resolved.build(
        left,
        right,
        JoinSetup {
            how,
            partitioning,
            homes,
            planning,
            observers,
        },
        logic,
    )
}
