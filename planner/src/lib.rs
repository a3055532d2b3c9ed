//! Plans and runs skew-resistant joins composed from the `skewjoin-operators` building blocks.
//!
//! - [`strategy`]: the registry of strategies, by name, and what each resolves to;
//! - [`strategies`]: a module per strategy (its name, choice, tuning, prediction, report and
//!   dataflow);
//! - [`sizes`]: what the input sizes say (the smaller side, the side a broadcast may copy,
//!   Small-Large joins);
//! - [`tuning`]: the settings a user may override;
//! - [`mod@choose`]: how a strategy is chosen for a join, `auto`'s whole policy;
//! - [`skew_check`]: `auto`'s check for keys that would unbalance a Shuffle-Join;
//! - [`work_costs`]: what work costs on threads and on a cluster, which `auto` weighs by;
//! - [`cost`]: key statistics and what per-partition load predictions are made of;
//! - [`join`]: the builder every strategy is reached through ([`SkewJoin::skew_join`]);
//! - [`am_join`]: AM-Join, key classes from exact counts, grids for keys hot on both sides, and
//!   its plans made inside the dataflow, one per timestamp;
//! - [`compose`]: builds a resolved strategy's dataflow, the one entry the executors use;
//! - [`exec`]: runs a planned join over in-memory keys on timely worker threads;
//! - [`count_sink`]: the sink that counts output rows and sums their checksum, and the tally
//!   every counting sink keeps;
//! - [`vprp`]: VPRP's range planning from key samples;
//! - [`exec_cluster`]: runs it on a multi-process timely cluster, each process with its own rows;
//! - [`exec_local`]: runs the same dataflow on one hand-stepped worker (the browser build);
//! - [`report`]: what a run reports of its strategy's decisions (classes, rounds, ranges);
//! - [`row_hash`]: the runtime's row hashes of generated tables, computed without Arrow;
//! - [`datagen`]: deterministic skewed inputs, the same natively and in the browser;
//! - [`error`]: [`PlanError`], the one error type, by kind (usage, execution, stopped, internal).

pub mod am_join;
pub mod choose;
pub mod compose;
pub mod cost;
pub mod count_sink;
pub mod datagen;
pub mod error;
pub mod exec;
pub mod exec_cluster;
pub mod exec_local;
pub mod exec_stream;
mod home;
pub mod join;
pub mod report;
pub mod row_hash;
pub mod sizes;
pub mod skew_check;
pub mod strategies;
pub mod strategy;
pub mod tuning;
pub mod vprp;
pub mod work_costs;

pub use am_join::{AmParams, AmPlan, AmPlanning};
pub use choose::{choose, resolve};
pub use error::PlanError;
pub use join::{JoinBuilder, SkewJoin};
pub use strategy::{Choice, PlanInputs, Resolved, Strategy, Tuning};

/// The README's Rust examples, compiled and run as doc tests (here, where both crates they use
/// are dependencies).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
