//! AM-Join (Adaptive-Multistage-Join): every key is routed by its *class*, found from exact key
//! counts, so that no partition receives a hot key's records or output whole.
//!
//! - hot in both inputs: the key is *unravelled* into a grid of `a x b` cells; each left record
//!   picks one row `i` and is copied to the `b` cells `(i, *)`, each right record picks one column
//!   `j` and is copied to the `a` cells `(*, j)`, so each pair meets in exactly one cell. Cells are
//!   joined under the key `(key, cell)` (copies in one partition never pair across cells) and
//!   placed on partitions by the planner, largest first onto the least-loaded partition;
//! - hot in the left input only: left records stay at home, the right records of those keys
//!   (few, as the key is cold on the right) are broadcast; hot in the right only: symmetric;
//! - cold and NULL keys: Shuffle-Join by key hash.
//!
//! **A plan per timestamp.** The classes must be known on every worker before a record is
//! routed, and they hold only for the records they were counted from. Inside a dataflow, each
//! timestamp is planned from its own records ([`planning`]): the routing operators hold a
//! timestamp's records until its plan has arrived, so nothing is routed by another timestamp's
//! classes. A plan made elsewhere ([`AmPlanning::Fixed`]) is checked against each timestamp's
//! records first. The command line, which joins one timestamp, counts keys in a dataflow of its
//! own first and passes the plan as [`AmPlanning::Exact`]: the join then routes records as they
//! come instead of holding them (inputs are re-read instead).
//!
//! **No deduplication, all join types.** Records of a hot-in-both key are copied to several cells,
//! so a cell cannot decide padding, semi or anti: a cell may miss one side altogether. It need
//! not: a key hot in both inputs has records on both sides (the counts are exact), so every one of
//! its records is matched. Cells are therefore joined as *inner* joins; for a semi join the
//! records of the semi side are emitted once, where they are read, and never sent to a cell; for
//! an anti join they are dropped. The same holds for the broadcast side of a one-side-hot key: a
//! key hot on the left has left records, so its right records all match; they are broadcast for
//! pairs (broadcast copies are never padded), emitted at the source for a right semi join, and
//! dropped for a right anti join, while the left records at home are decided by the kernel, which
//! sees every right record of the key. A key forced or planned hot on a side where the timestamp
//! has no records of it is treated as not hot there ([`AmPlan::new`] for counts,
//! [`AmPlan::restricted`] for a fixed plan), so a wrong or stale classification changes the cost,
//! never the result.

// Four layers, each depending only on those below it: `params` (the tuning), `plan` (made from
// key counts with it), `planning` (plans made per timestamp inside a dataflow) and `dataflow`
// (routes records by plans). The crate's modules import the
// layers, not these re-exports, so that what the dataflow builds on never depends on this file
// (which depends on the dataflow); the re-exports keep the `am_join::*` paths other crates use.
pub(crate) mod dataflow;
pub(crate) mod params;
pub(crate) mod plan;
pub mod planning;

pub use dataflow::{am_join, CellKey};
pub use params::{AmParams, HotChoice, Statistics, DEFAULT_BROADCAST_PER_MILLE};
pub use plan::{grid_shape, AmPlan, AmSummary, Class, Grid, GridSummary};
pub use planning::AmPlanning;
