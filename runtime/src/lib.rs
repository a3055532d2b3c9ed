//! The `skewjoin` binary's library: file IO, the join engine over loaded tables, metrics, and
//! the subcommands. See the README for usage.

pub mod allocator;
pub mod cli;
pub mod cluster;
pub mod commands;
pub mod engine;
pub mod error;
pub mod explain;
pub mod generate;
pub mod interrupt;
pub mod io;
pub mod link;
pub mod memory;
pub mod metrics;
pub mod output_file;
pub mod output_rows;
pub mod plan;
pub mod progress;
pub mod tables;
mod threads;
