//! The planner's one error type: what went wrong, by kind, so that a caller (the runtime, the
//! browser build, an embedding program) answers each kind its own way without reading messages.

use std::fmt;

use crate::choose::CannotCompute;

/// The message of a run whose sink said it was [stopped](crate::exec::PairSink::stopped): what a
/// worker that stops returns, and what [`PlanError::Stopped`] says.
pub const STOPPED: &str = "the join was stopped before it finished";

/// Why planning or running a join failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanError {
    /// The request cannot be run as asked: a strategy that cannot compute the join type, a
    /// partition, worker or cluster layout out of range, generator settings out of bounds. Fix
    /// the request (the binary exits with its usage code).
    Usage(String),
    /// A worker, a sink, a row source or the network failed while the join ran.
    Execution(String),
    /// The run was stopped (a sink said it was [stopped](crate::exec::PairSink::stopped))
    /// before it finished.
    Stopped,
    /// A bug in skewjoin: a worker that panicked, a broken invariant.
    Internal(String),
}

impl PlanError {
    /// The message alone, without the kind.
    pub fn message(&self) -> &str {
        match self {
            PlanError::Usage(message)
            | PlanError::Execution(message)
            | PlanError::Internal(message) => message,
            PlanError::Stopped => STOPPED,
        }
    }

    /// The error of a worker that ended with `message`: [`PlanError::Stopped`] for
    /// [`STOPPED`], else an execution error.
    pub(crate) fn from_worker(message: String) -> PlanError {
        if message == STOPPED {
            PlanError::Stopped
        } else {
            PlanError::Execution(message)
        }
    }
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for PlanError {}

impl From<CannotCompute> for PlanError {
    fn from(error: CannotCompute) -> PlanError {
        PlanError::Usage(error.to_string())
    }
}

/// A message from a worker, a sink, a row source or the network (their errors travel through
/// timely as text): an execution error.
impl From<String> for PlanError {
    fn from(message: String) -> PlanError {
        PlanError::Execution(message)
    }
}

/// For callers that report errors as text (the browser build's answers).
impl From<PlanError> for String {
    fn from(error: PlanError) -> String {
        error.to_string()
    }
}

/// The planner's `Result`.
pub type Result<T, E = PlanError> = std::result::Result<T, E>;

/// `Err(PlanError::Usage(format!(..)))`: a request that cannot be run as asked.
#[macro_export]
macro_rules! usage_err {
    ($($arg:tt)*) => {
        Err($crate::error::PlanError::Usage(format!($($arg)*)))
    };
}
