//! The local join kernel: build a hash table on one side, probe it with the other, pad the
//! unmatched rows of preserved sides, and answer semi and anti joins.
//!
//! Pure Rust, no timely: it is the inner loop of every strategy. The table borrows the build rows
//! and stores each key's rows contiguously (a counting sort by group), so probing allocates
//! nothing and a hot key's rows are scanned as one dense run.
//!
//! Besides its own rows, a partition may see *broadcast* rows: copies of records that every
//! partition received (Broadcast-Join, and the one-side-hot classes of AM-Join). They are probed
//! like any build row, but they are never padded and never emitted on their own, because whether
//! a broadcast row matched is not known to any single partition. Broadcast rows of the two sides
//! are never joined with each other; strategies route a key's records so that this never loses a
//! pair.

pub mod buckets;
mod build_table;
mod grouped_keys;
mod join;
pub mod partitioned_join;
mod phases;
mod slots;
mod stepped;
#[cfg(test)]
mod tests;

pub use build_table::{BuildTable, TableIndex};
pub use grouped_keys::GroupedKeys;
pub use join::{hash_join, local_join, local_join_logic};
pub use phases::GROUP_PIECE;
pub use slots::Group;
pub use stepped::SteppedJoin;
