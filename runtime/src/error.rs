//! The errors the `skewjoin` binary reports, each kind with its own exit code.
//!
//! Messages are written for the person at the terminal: each one says what is wrong, names the
//! file, column or line concerned, and says what to do about it, e.g.
//! `left.csv: line 17: expected 3 fields, found 4; fix the line or quote the field`.

use std::fmt;

/// The exit code of a run whose output pipe was closed by its reader (128 + SIGPIPE).
pub const CLOSED_PIPE_EXIT_CODE: i32 = 141;

/// Every error the binary reports. Each kind has its own exit code, documented in the README.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The command line is wrong: an unknown flag or value, a missing argument (exit code 2).
    Usage(String),
    /// An input file is missing, malformed, or its columns do not fit the request (exit code 3).
    Input(String),
    /// The operating system failed to read or write a file (exit code 4).
    Io(String),
    /// The cluster of processes could not be formed or lost a member (exit code 5).
    Cluster(String),
    /// A bug in skewjoin itself (exit code 1).
    Internal(String),
    /// The reader of a pipe we write, standard output or a FIFO given as an output, closed it
    /// (`skewjoin explain --json | head -1`): the program ends quietly, with the exit code of a
    /// process killed by SIGPIPE, 141 (128 + 13), as command-line tools do.
    ClosedPipe,
    /// The caller stopped the run before it finished (a library caller's interrupt; the binary
    /// exits at Ctrl-C with the same code, 130, see [`crate::interrupt`]).
    Interrupted,
}

impl Error {
    /// The process exit code for this kind of error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) => 2,
            Error::Input(_) => 3,
            Error::Io(_) => 4,
            Error::Cluster(_) => 5,
            Error::Internal(_) => 1,
            Error::ClosedPipe => CLOSED_PIPE_EXIT_CODE,
            Error::Interrupted => crate::interrupt::INTERRUPTED_EXIT_CODE,
        }
    }

    /// The message alone, without the kind.
    fn message(&self) -> &str {
        match self {
            Error::Usage(message)
            | Error::Input(message)
            | Error::Io(message)
            | Error::Cluster(message)
            | Error::Internal(message) => message,
            Error::ClosedPipe => "the reader of the output closed it",
            Error::Interrupted => "the join was interrupted before it finished",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for Error {}

/// A strategy asked for that cannot compute the join type is a usage error.
impl From<skewjoin_planner::choose::CannotCompute> for Error {
    fn from(error: skewjoin_planner::choose::CannotCompute) -> Error {
        Error::Usage(error.to_string())
    }
}

/// The planner's errors by kind. A run's execution error is reported as a bug unless the caller
/// knows better (a recorded input or output failure, a cluster's peers): those sites map it
/// themselves.
impl From<skewjoin_planner::PlanError> for Error {
    fn from(error: skewjoin_planner::PlanError) -> Error {
        use skewjoin_planner::PlanError;
        match error {
            PlanError::Usage(message) => Error::Usage(message),
            PlanError::Stopped => Error::Interrupted,
            PlanError::Execution(message) | PlanError::Internal(message) => {
                Error::Internal(message)
            }
        }
    }
}

impl Error {
    /// A failure to write standard output: [`Error::ClosedPipe`] when its reader is gone.
    pub fn stdout(error: &std::io::Error) -> Error {
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            Error::ClosedPipe
        } else {
            Error::Io(format!("cannot write to standard output: {error}"))
        }
    }
}

/// The result type of everything in the runtime that can fail.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_own_exit_code() {
        let errors = [
            Error::Usage(String::new()),
            Error::Input(String::new()),
            Error::Io(String::new()),
            Error::Cluster(String::new()),
            Error::Internal(String::new()),
            Error::ClosedPipe,
        ];
        let codes: Vec<i32> = errors.iter().map(Error::exit_code).collect();
        assert_eq!(codes, [2, 3, 4, 5, 1, 141]);
    }

    #[test]
    fn display_is_the_message_alone() {
        let error = Error::Input("left.csv: line 3: expected 2 fields, found 3".into());
        assert_eq!(
            error.to_string(),
            "left.csv: line 3: expected 2 fields, found 3"
        );
        let boxed: Box<dyn std::error::Error> = Box::new(Error::Io("disk full".into()));
        assert_eq!(boxed.to_string(), "disk full");
    }
}
