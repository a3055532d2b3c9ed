//! The joins, one extension trait each, declared with `join_extension!` (`extension.rs`):
//! [`shuffle_join`], [`broadcast_join`], [`ib_join`] and its published baselines [`der_join`]
//! and [`ddr_join`], [`tree_join`].

mod baselines;
pub mod broadcast_join;
mod extension;
pub mod ib_join;
pub mod shuffle_join;
pub mod tree_join;

pub use baselines::{ddr_join, der_join};
