//! Ctrl-C stops a run cleanly: on SIGINT (or SIGTERM) the temporary files of the outputs being
//! written are removed and the process exits with code 130, so an interrupted run never leaves a
//! partial file behind, under its final name or a temporary one.
//!
//! Outputs that are regular files are written to a temporary file that is renamed onto the
//! target when complete ([`crate::output_file`]); each such file is registered here while it
//! exists. The handler
//! runs on a thread of its own (the `ctrlc` crate), removes what is registered and exits.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// A set of files to remove on an interrupt.
struct Pending(Mutex<Vec<PathBuf>>);

impl Pending {
    const fn new() -> Pending {
        Pending(Mutex::new(Vec::new()))
    }

    fn files(&self) -> std::sync::MutexGuard<'_, Vec<PathBuf>> {
        // A panic elsewhere while holding the lock must not stop the cleanup.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn add(&self, path: &Path) {
        self.files().push(path.to_path_buf());
    }

    fn forget(&self, path: &Path) {
        let mut files = self.files();
        if let Some(index) = files.iter().position(|file| file == path) {
            files.swap_remove(index);
        }
    }

    /// Removes every path with `remove`; returns how many went, and the lock, still held.
    fn remove_all(
        &self,
        remove: fn(&Path) -> std::io::Result<()>,
    ) -> (usize, std::sync::MutexGuard<'_, Vec<PathBuf>>) {
        let mut paths = self.files();
        let removed = paths.drain(..).filter(|path| remove(path).is_ok()).count();
        (removed, paths)
    }
}

/// The temporary output files of this process being written.
static PENDING: Pending = Pending::new();

/// The output directories this process created for a run still going: removed after the files
/// on an interrupt, if nothing else is in them.
static CREATED_DIRS: Pending = Pending::new();

/// Removes the unfinished files, then the directories created for them that are left empty;
/// returns how many files existed, and the registries' locks, to hold until the process exits:
/// a thread still running then cannot create and register a file after the files were removed
/// (see [`create_registered`]).
fn clean_up() -> (usize, [std::sync::MutexGuard<'static, Vec<PathBuf>>; 2]) {
    let (removed, files) = PENDING.remove_all(|path| std::fs::remove_file(path));
    // A directory that holds anything stays.
    let (_, dirs) = CREATED_DIRS.remove_all(|path| std::fs::remove_dir(path));
    (removed, [files, dirs])
}

/// The exit code of an interrupted run (128 + SIGINT, what shells report).
pub const INTERRUPTED_EXIT_CODE: i32 = 130;

/// Set by a process that forwards interrupts to its children (`skewjoin cluster`): the handler
/// then only records the interrupt, and the process stops its children before it exits.
static FORWARDING: AtomicBool = AtomicBool::new(false);
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// From now on an interrupt is only recorded, for [`interrupted`] to see.
pub fn forward_to_children() {
    FORWARDING.store(true, Ordering::Release);
}

/// Whether SIGINT or SIGTERM came since [`forward_to_children`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Acquire)
}

/// Installs the handler; once per process (later calls do nothing).
pub fn install() {
    // An error means a handler is already installed: keep it.
    let _ = ctrlc::set_handler(|| {
        if FORWARDING.load(Ordering::Acquire) {
            INTERRUPTED.store(true, Ordering::Release);
            return;
        }
        let (removed, _held) = clean_up();
        // A closed stderr must not stop the exit (eprintln! would panic this thread).
        let mut stderr = std::io::stderr();
        let _ = if removed > 0 {
            writeln!(
                stderr,
                "\nskewjoin: interrupted; removed {removed} unfinished output file(s)"
            )
        } else {
            writeln!(stderr, "\nskewjoin: interrupted")
        };
        std::process::exit(INTERRUPTED_EXIT_CODE);
    });
}

/// Stops the process now with `code`, after printing `message` and removing every unfinished
/// output file: for a failed run, whose worker threads may still hold files being written, and
/// for failures noticed outside the main thread, such as a cluster that never forms.
pub fn abort(code: i32, message: &str) -> ! {
    let _held = clean_up();
    // A closed stderr must not stop the exit.
    let _ = writeln!(std::io::stderr(), "skewjoin: error: {message}");
    std::process::exit(code);
}

/// Stops the process now with `code` and no message, after removing every unfinished output
/// file: for a run whose output pipe was closed by its reader.
pub fn end_quietly(code: i32) -> ! {
    let _held = clean_up();
    std::process::exit(code);
}

/// A temporary output file, registered for removal on Ctrl-C while this value lives.
#[derive(Debug)]
pub struct Registered(PathBuf);

impl Registered {
    /// Registers `path`.
    pub fn new(path: &Path) -> Registered {
        PENDING.add(path);
        Registered(path.to_path_buf())
    }
}

/// Runs `create`, which makes a file and returns it with its path, and registers the path, with
/// the registry locked throughout: an interrupt comes before the file exists or after it is
/// registered, never in between, so it cannot leave the file behind.
pub fn create_registered<T, P: AsRef<Path>, E>(
    create: impl FnOnce() -> Result<(T, P), E>,
) -> Result<(T, P, Registered), E> {
    let mut files = PENDING.files();
    let (made, path) = create()?;
    let path_buf = path.as_ref().to_path_buf();
    files.push(path_buf.clone());
    Ok((made, path, Registered(path_buf)))
}

impl Drop for Registered {
    fn drop(&mut self) {
        PENDING.forget(&self.0);
    }
}

/// An output directory this run created, registered for removal on Ctrl-C while this value
/// lives, and removed by [`remove_if_empty`](CreatedDir::remove_if_empty) when the run fails: a
/// failed run leaves no output behind, not even an empty directory. A directory that existed
/// before the run is never removed, nor one that holds anything (another process's part, or a
/// file of the user's).
#[derive(Debug)]
pub struct CreatedDir(PathBuf);

impl CreatedDir {
    /// Creates `dir` and any missing parents; returns it registered if it did not exist.
    pub fn create(dir: &Path) -> std::io::Result<Option<CreatedDir>> {
        // Locked while creating, as in `create_registered`.
        let mut dirs = CREATED_DIRS.files();
        let existed = dir.exists();
        std::fs::create_dir_all(dir)?;
        Ok((!existed).then(|| {
            dirs.push(dir.to_path_buf());
            CreatedDir(dir.to_path_buf())
        }))
    }

    /// Registers `dir`, which another process of the same run may have created: it goes on an
    /// interrupt if it is empty by then.
    pub fn adopt(dir: &Path) -> CreatedDir {
        CREATED_DIRS.add(dir);
        CreatedDir(dir.to_path_buf())
    }

    /// Removes the directory if it is empty.
    pub fn remove_if_empty(&self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

impl Drop for CreatedDir {
    fn drop(&mut self) {
        CREATED_DIRS.forget(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_files_are_removed_and_unregistered_ones_kept() {
        let dir = tempfile::TempDir::new().unwrap();
        let unfinished = dir.path().join("a.tmp");
        let finished = dir.path().join("b.tmp");
        std::fs::write(&unfinished, "partial").unwrap();
        std::fs::write(&finished, "done").unwrap();
        // A set of its own: the process-wide one holds other tests' outputs.
        let pending = Pending::new();
        pending.add(&unfinished);
        pending.add(&finished);
        pending.forget(&finished);
        assert_eq!(pending.remove_all(|path| std::fs::remove_file(path)).0, 1);
        assert_eq!(pending.remove_all(|path| std::fs::remove_file(path)).0, 0);
        assert!(!unfinished.exists());
        assert!(finished.exists());
    }

    #[test]
    fn a_created_directory_goes_only_when_empty_and_one_found_stays() {
        let dir = tempfile::TempDir::new().unwrap();
        let new = dir.path().join("out").join("parts");
        let created = CreatedDir::create(&new).unwrap().expect("it did not exist");
        assert!(new.is_dir());
        // Found, not created: never removed.
        assert!(CreatedDir::create(&new).unwrap().is_none());
        std::fs::write(new.join("kept"), "someone's").unwrap();
        created.remove_if_empty();
        assert!(new.join("kept").exists());
        std::fs::remove_file(new.join("kept")).unwrap();
        created.remove_if_empty();
        assert!(!new.exists());
        // Only the directory named; the parents it needed stay.
        assert!(dir.path().join("out").is_dir());
    }
}
