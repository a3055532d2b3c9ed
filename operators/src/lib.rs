//! Skew-resistant equi-join operators for [timely dataflow](https://docs.rs/timely).
//!
//! Each strategy is an extension trait on streams of `(key, value)` pairs:
//!
//! - [`ShuffleJoin`]: hash-partition both inputs, join locally (the baseline);
//! - [`BroadcastJoin`]: copy one input to every worker, leave the other in place;
//! - [`IbJoin`]: broadcast a small side as a key index, with unmatched-row tracking by key id,
//!   so that even joins preserving the small side can broadcast it; [`der_join`] and
//!   [`ddr_join`] are the published baselines it is measured against;
//! - VPRP's building blocks: [`sample`] (per-worker key samples) and [`range_pact`] (routing by
//!   sorted key ranges, also as a `DistributorPact`).
//! - [`TreeJoin`]: group by key, then split large entries round after round in a timely loop.
//!
//! Routing decides a *partition* `0..P`, and partition `p` lives on worker `p % W`
//! ([`Partitioning`]); load is counted per partition into a [`LoadRecorder`]. The building
//! blocks, [`route::route`] and [`partitioned_join::partitioned_join`], compose into the
//! skew-aware strategies of the planner crate. Every join supports inner, left, right and full
//! outer, semi and anti joins with SQL NULL semantics ([`JoinType`]). Output rows go to a
//! closure, once per row, or to a [`JoinLogic`], which may take a hot key's pairs a group at a
//! time.
//!
//! Keys implement [`JoinKey`]: integers, `bool`, `char`, `String`, byte strings, `Option`, tuples
//! of up to four keys and the dynamic [`Key`] ([`key`] lists them); a newtype key gets the impl
//! from [`join_key_newtype!`].

pub mod broadcast_join;
pub mod buckets;
pub mod config;
pub mod ddr_join;
pub mod der_join;
pub mod error;
pub mod hash;
pub mod heavy_hitters;
pub mod ib_join;
pub mod join_logic;
pub mod join_type;
pub mod kernel;
pub mod key;
pub mod key_stats;
pub mod load;
pub mod partition;
pub mod partitioned_join;
pub mod range_pact;
pub mod reference;
pub mod route;
pub mod sample;
pub mod shuffle_join;
pub mod tree_join;

pub use broadcast_join::BroadcastJoin;
pub use config::JoinConfig;
pub use ddr_join::DdrJoin;
pub use der_join::DerJoin;
pub use error::JoinError;
pub use ib_join::IbJoin;
pub use join_logic::JoinLogic;
pub use join_type::{JoinType, Side};
pub use key::{JoinKey, Key};
pub use load::{LoadRecorder, LoadReport, PartitionLoad, TrafficCounters};
pub use partition::{Dest, Partitioning};
pub use reference::JoinedRow;
pub use shuffle_join::ShuffleJoin;
pub use tree_join::TreeJoin;

