//! What each subcommand does: one file per subcommand.

use std::io::Write;

use crate::error::{Error, Result};

/// Writes to standard output; a closed one (the reader of a pipe exited) is
/// [`Error::ClosedPipe`], which ends the program quietly where `print!` would panic.
pub(crate) fn write_stdout(text: std::fmt::Arguments) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_fmt(text)
        .and_then(|()| stdout.flush())
        .map_err(|error| Error::stdout(&error))
}

/// `println!` through [`write_stdout`], returning its error from the enclosing function.
macro_rules! outln {
    ($($arg:tt)*) => {
        write_stdout(format_args!("{}\n", format_args!($($arg)*)))?
    };
}

mod demo;
mod explain;
mod gen;
mod join;

pub use demo::demo;
pub use explain::explain;
pub use gen::gen;
pub use join::join;
