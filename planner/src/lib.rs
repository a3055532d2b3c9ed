//! Plans and runs skew-resistant joins composed from the `skewjoin-operators` building blocks.
//!
//! - [`strategy`]: the strategies by name, and how `auto` chooses;
//! - [`am_join`]: AM-Join, key classes from exact counts, grids for keys hot on both sides;
//! - [`compose`]: builds a resolved strategy's dataflow from routes and partitioned joins;
//! - [`exec`]: runs a planned join over in-memory keys on timely worker threads;
//! - [`datagen`]: deterministic skewed inputs, the same natively and in the browser.

pub mod am_join;
pub mod compose;
pub mod datagen;
pub mod exec;
pub mod strategy;

pub use strategy::{choose, Choice, PlanInputs, Resolved, Strategy};
