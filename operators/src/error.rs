//! Errors raised when a join operator is constructed with settings that would give wrong results.

use std::fmt;

use crate::join_type::{JoinType, Side};

/// A join that cannot be built as asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JoinError {
    /// A broadcast side cannot be preserved, semi- or anti-joined: whether a broadcast row matched
    /// is only known globally.
    BroadcastSideTracked {
        /// The join type asked for.
        how: JoinType,
        /// The side asked to be broadcast.
        broadcast: Side,
    },
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::BroadcastSideTracked { how, broadcast } => write!(
                f,
                "a {how} join cannot broadcast the {broadcast} side: it keeps or filters {broadcast} rows by whether they matched anywhere, which no single partition knows; broadcast the {} side, or use a shuffle or IB-Join strategy",
                broadcast.other()
            ),
        }
    }
}

impl std::error::Error for JoinError {}
