//! Fencing third-party decoders: a panic on corrupt bytes becomes an input error.

use std::panic::{self, AssertUnwindSafe};
use std::path::Path;

use crate::error::{Error, Result};

use super::format::FileFormat;

thread_local! {
    /// Whether this thread is inside [`fenced`], whose panics are reported as errors.
    static FENCED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs a decoder step on `path`: decoders of third-party crates have panicked on corrupt input
/// before, and a bad file must be an error message ([`Error::Input`] naming the file), never a
/// crashed run. With [`quiet_fenced_panics`] installed, such a panic prints nothing of its own.
pub(crate) fn fenced<T>(
    path: &Path,
    format: FileFormat,
    step: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let outer = FENCED.with(|fenced| fenced.replace(true));
    let result = panic::catch_unwind(AssertUnwindSafe(step));
    FENCED.with(|fenced| fenced.set(outer));
    result.unwrap_or_else(|_| {
        Err(Error::Input(format!(
            "{}: the {format} decoder failed on this file, so it is corrupt or not {format}; \
             re-export it",
            path.display()
        )))
    })
}

/// Whether this thread is inside [`fenced`], so that a panic now becomes an input error.
pub(crate) fn in_fenced() -> bool {
    FENCED.with(std::cell::Cell::get)
}

/// Installs a panic hook that leaves out the panics `fenced` turns into input errors: the
/// user sees the error naming the file, not a decoder's panic message and backtrace. Every
/// other panic goes to the hook that was installed before.
pub fn quiet_fenced_panics() {
    let earlier = panic::take_hook();
    panic::set_hook(Box::new(move |info| {
        if !in_fenced() {
            earlier(info);
        }
    }));
}
