//! Where an output's bytes go, and how they get there without harming what was there.
//!
//! - A regular file, or a path where nothing exists yet, is written to a temporary file in the
//!   same directory and renamed onto it when complete, so that a failed or interrupted run leaves
//!   the previous file as it was. A symbolic link to a regular file stays a link: the file it
//!   points to is the one replaced. A replaced file keeps its permissions (and, where the
//!   process may set it, its owner); a new one gets the usual `0666 & !umask`.
//! - Anything else that can be opened for writing (a character device such as `/dev/null`, a
//!   FIFO, a terminal) is written in place, as a stream: it is never replaced, renamed over or
//!   removed. So is a descriptor the process already holds, named `/dev/stdout`, `/dev/stderr`,
//!   `/dev/fd/N` or `/proc/self/fd/N` (or a link to one): the bytes go through that descriptor,
//!   at its offset, as a shell redirection set it up. A run that fails after it started
//!   writing such an output cannot take back what it wrote.
//! - A block device or a directory is refused.
//!
//! Temporary files are named `.NAME.PID.XXXXXX.tmp`, NAME the target's file name and PID the
//! writing process: one left behind by a process that no longer exists (killed by SIGKILL, or
//! a machine that lost power) is removed by the next run that writes NAME in the same
//! directory; one of a process still running is left alone.

use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use tempfile::TempPath;

use crate::error::{Error, Result};
use crate::interrupt::Registered;

/// How many symbolic links are followed before giving up, as the kernel does (ELOOP).
const MAX_LINKS: usize = 40;

/// An output being written: the open file comes with it from [`PendingOutput::create`], and
/// [`complete`](PendingOutput::complete) puts the written file in place. Dropped without
/// completing, a temporary file is removed.
#[derive(Debug)]
pub struct PendingOutput {
    /// The path as the user gave it, for messages.
    path: PathBuf,
    how: How,
}

#[derive(Debug)]
enum How {
    /// Written in place; nothing to rename.
    Streamed,
    /// Written to `temp`, renamed onto `target` when complete.
    Replacing {
        temp: TempPath,
        target: PathBuf,
        /// Keeps `temp` registered for removal on Ctrl-C until it is renamed or removed.
        _interrupt: Registered,
    },
}

/// An I/O failure while writing `path`, as the user sees it; a pipe whose reader is gone is
/// [`Error::ClosedPipe`].
pub fn write_error(path: &Path, error: &io::Error) -> Error {
    if error.kind() == io::ErrorKind::BrokenPipe {
        return Error::ClosedPipe;
    }
    Error::Io(format!(
        "cannot write {}: {error}; check free disk space and permissions",
        path.display()
    ))
}

/// An output file that remembers the first error the operating system gave when writing it,
/// for [`FileFailure::explain`]: encoders wrap it in their own errors, some (the CSV writer's)
/// as text only.
#[derive(Debug)]
pub struct WatchedFile {
    file: File,
    failure: FileFailure,
    /// Whether the file's pages are sent to disk as it grows (see [`WRITEBACK_BYTES`]).
    writeback: bool,
    /// Bytes written so far, all at the end: the file is written from its start.
    written: u64,
    /// Bytes whose writeback has been started.
    sent: u64,
}

/// How many written bytes wait in the page cache before their writeback is started. The
/// output is synced before it is renamed into place, and a sync that waited for the whole file
/// at the end ran on no other thread: 0.12 s of 3.8 s on TPC-H lineitem x orders written
/// (220 MB), with both cores idle. Started as the file grows, the disk writes while the
/// workers encode, and the sync waits for little more than the last piece.
const WRITEBACK_BYTES: u64 = 8 << 20;

/// The first error of a [`WatchedFile`], shared with whoever reports its writer's errors.
#[derive(Clone, Debug, Default)]
pub struct FileFailure(Arc<OnceLock<(io::ErrorKind, Option<i32>, String)>>);

impl WatchedFile {
    /// Watches `file`; the second value reports its first failure.
    pub fn new(file: File) -> (WatchedFile, FileFailure) {
        let failure = FileFailure::default();
        let watched = WatchedFile {
            file,
            failure: failure.clone(),
            writeback: false,
            written: 0,
            sent: 0,
        };
        (watched, failure)
    }

    /// Starts the writeback of every 8 MiB written, for a file that is synced
    /// when complete; a stream (a pipe, `/dev/null`) has nothing to sync.
    pub fn with_writeback(mut self, writeback: bool) -> WatchedFile {
        self.writeback = writeback;
        self
    }

    /// Asks the kernel to start writing the bytes written since the last call, without waiting
    /// for them: a hint, whose failure changes nothing (the sync at the end reports any).
    fn start_writeback(&mut self) {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            // SAFETY: the descriptor is this file's own and open; the call reads no memory.
            unsafe {
                libc::sync_file_range(
                    self.file.as_raw_fd(),
                    self.sent as libc::off64_t,
                    (self.written - self.sent) as libc::off64_t,
                    libc::SYNC_FILE_RANGE_WRITE,
                );
            }
        }
        self.sent = self.written;
    }

    /// The file, to complete it.
    pub fn into_inner(self) -> File {
        self.file
    }

    fn watch<T>(&self, result: io::Result<T>) -> io::Result<T> {
        if let Err(error) = &result {
            let _ = self
                .failure
                .0
                .set((error.kind(), error.raw_os_error(), error.to_string()));
        }
        result
    }
}

impl Write for WatchedFile {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let result = self.file.write(bytes);
        if let Ok(written) = result {
            self.written += written as u64;
            if self.writeback && self.written - self.sent >= WRITEBACK_BYTES {
                self.start_writeback();
            }
        }
        self.watch(result)
    }

    fn flush(&mut self) -> io::Result<()> {
        let result = self.file.flush();
        self.watch(result)
    }
}

impl FileFailure {
    /// `error`, an encoder's report of a failed write of `path`, as the file's own failure
    /// when the file failed ([`write_error`]: exit 4, or a closed pipe), else as it is.
    pub fn explain(&self, path: &Path, error: Error) -> Error {
        match self.0.get() {
            Some((kind, Some(code), _)) if *kind != io::ErrorKind::Interrupted => {
                write_error(path, &io::Error::from_raw_os_error(*code))
            }
            Some((kind, None, text)) => write_error(path, &io::Error::new(*kind, text.clone())),
            _ => error,
        }
    }
}

impl PendingOutput {
    /// Opens `path` for writing as the module documentation says. An unusable path is
    /// [`Error::Io`] (or [`Error::Usage`] for a directory or block device) naming it.
    pub fn create(path: &Path) -> Result<(File, PendingOutput)> {
        let cannot = |why: String| Error::Io(format!("cannot write {}: {why}", path.display()));
        let resolved = resolve(path).map_err(|error| cannot(error.to_string()))?;
        let pending = |how| PendingOutput {
            path: path.to_path_buf(),
            how,
        };
        let target = match resolved {
            Resolved::Descriptor(fd) => {
                return Ok((duplicate(fd).map_err(cannot)?, pending(How::Streamed)))
            }
            Resolved::Path(target) => target,
        };
        let existing = match std::fs::metadata(&target) {
            Ok(metadata) => Some(metadata),
            Err(error) if error.kind() == io::ErrorKind::NotFound => None,
            Err(error) => return Err(cannot(error.to_string())),
        };
        if let Some(metadata) = &existing {
            let kind = metadata.file_type();
            if kind.is_dir() {
                return Err(cannot(
                    "it is a directory; give the path of a file to write".to_string(),
                ));
            }
            if kind.is_block_device() {
                return Err(Error::Usage(format!(
                    "{} is a block device; skewjoin writes files, not disks: give a file path",
                    path.display()
                )));
            }
            if !kind.is_file() {
                let file = OpenOptions::new()
                    .write(true)
                    .open(&target)
                    .map_err(|error| cannot(error.to_string()))?;
                return Ok((file, pending(How::Streamed)));
            }
        }
        let (file, temp, interrupt) = create_temp(path, &target, existing.as_ref())?;
        Ok((
            file,
            pending(How::Replacing {
                temp,
                target,
                _interrupt: interrupt,
            }),
        ))
    }

    /// Whether the output is written in place (and so cannot be taken back on failure).
    pub fn is_streamed(&self) -> bool {
        matches!(self.how, How::Streamed)
    }

    /// Puts `file`, the one [`create`](PendingOutput::create) gave, written and flushed, in
    /// place: the data is synced to disk, then the temporary file renamed onto the target.
    pub fn complete(self, file: File) -> Result<()> {
        let PendingOutput { path, how } = self;
        match how {
            How::Streamed => Ok(()),
            How::Replacing {
                temp,
                target,
                _interrupt,
            } => {
                // The data must be on disk before the rename makes it visible under the name.
                file.sync_all()
                    .map_err(|error| write_error(&path, &error))?;
                drop(file);
                temp.persist(&target)
                    .map_err(|error| write_error(&path, &error.error))
            }
        }
    }
}

/// Writes `bytes` to `path` whole, as [`PendingOutput`] does: for small documents such as
/// metrics and manifests.
pub fn write_whole(path: &Path, bytes: &[u8]) -> Result<()> {
    let (mut file, pending) = PendingOutput::create(path)?;
    file.write_all(bytes)
        .and_then(|()| file.flush())
        .map_err(|error| write_error(path, &error))?;
    pending.complete(file)
}

/// What an output path comes to once its links are followed.
enum Resolved {
    /// A descriptor this process holds (`/dev/stdout` and kin).
    Descriptor(RawFd),
    /// A path that is not a symbolic link (it may not exist).
    Path(PathBuf),
}

/// Follows the symbolic links of `path` (the last component's; a link in a directory above
/// it is the kernel's business), stopping at a name of one of this process's descriptors.
fn resolve(path: &Path) -> io::Result<Resolved> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        if let Some(fd) = descriptor_of(&current) {
            return Ok(Resolved::Descriptor(fd));
        }
        match std::fs::symlink_metadata(&current) {
            Ok(metadata) if metadata.file_type().is_symlink() => {
                let link = std::fs::read_link(&current)?;
                current = match current.parent() {
                    Some(dir) => dir.join(link),
                    None => link,
                };
            }
            Ok(_) => return Ok(Resolved::Path(current)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                return Ok(Resolved::Path(current))
            }
            Err(error) => return Err(error),
        }
    }
    Err(io::Error::other(format!(
        "more than {MAX_LINKS} symbolic links to follow; check for a loop"
    )))
}

/// The descriptor a path names, if it names one of this process's: `/dev/stdout`,
/// `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N` or `/proc/PID/fd/N` with PID this process.
fn descriptor_of(path: &Path) -> Option<RawFd> {
    if path == Path::new("/dev/stdout") {
        return Some(1);
    }
    if path == Path::new("/dev/stderr") {
        return Some(2);
    }
    let own = std::process::id().to_string();
    let number = path
        .strip_prefix("/dev/fd")
        .or_else(|_| path.strip_prefix("/proc/self/fd"))
        .or_else(|_| path.strip_prefix(Path::new("/proc").join(&own).join("fd")))
        .ok()?;
    number.to_str()?.parse().ok()
}

/// A new descriptor for `fd`, closed on exec; an error if `fd` is not open.
fn duplicate(fd: RawFd) -> std::result::Result<File, String> {
    // SAFETY: fcntl only reads the descriptor number; it fails with EBADF if it is not open.
    let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if copy < 0 {
        let error = io::Error::last_os_error();
        return Err(format!("descriptor {fd} is not open for writing: {error}"));
    }
    // SAFETY: `copy` is a new descriptor that nothing else owns.
    Ok(unsafe { File::from_raw_fd(copy) })
}

/// The directory a file at `path` is in.
fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// `.NAME.` for the temporary files of `name`.
fn temp_prefix(name: &OsStr) -> OsString {
    let mut prefix = OsString::from(".");
    prefix.push(name);
    prefix.push(".");
    prefix
}

/// The random characters `tempfile` puts in a name.
const TEMP_RANDOM_CHARS: usize = 6;

/// The process that wrote a file named `entry`, if it is a temporary file of ours for
/// `prefix` (`.NAME.`): `.NAME.PID.XXXXXX.tmp`.
fn temp_owner(entry: &OsStr, prefix: &OsStr) -> Option<u32> {
    let rest = entry.as_bytes().strip_prefix(prefix.as_bytes())?;
    let rest = rest.strip_suffix(b".tmp")?;
    let dot = rest.iter().position(|&byte| byte == b'.')?;
    let (pid, random) = (&rest[..dot], &rest[dot + 1..]);
    let well_formed = !pid.is_empty()
        && pid.iter().all(u8::is_ascii_digit)
        && random.len() == TEMP_RANDOM_CHARS
        && random.iter().all(u8::is_ascii_alphanumeric);
    if !well_formed {
        return None;
    }
    std::str::from_utf8(pid).ok()?.parse().ok()
}

/// Whether process `pid` exists (on this machine, in this PID namespace).
fn process_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 sends nothing; it only checks that the process exists.
    if unsafe { libc::kill(pid, 0) } == 0 {
        return true;
    }
    // EPERM: it exists, owned by someone else.
    io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Removes the temporary files for `name` in `dir` that processes no longer running left
/// behind. Best effort: a file that cannot be listed or removed is left.
fn remove_stale_temps(dir: &Path, name: &OsStr) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = temp_prefix(name);
    for entry in entries.flatten() {
        let Some(pid) = temp_owner(&entry.file_name(), &prefix) else {
            continue;
        };
        if pid == std::process::id() || process_exists(pid) {
            continue;
        }
        // Only a plain file of ours: never follow or remove anything else under that name.
        if entry.file_type().is_ok_and(|kind| kind.is_file()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Creates the temporary file for `target` (a regular file, or nothing yet), registered for
/// removal on Ctrl-C, with the permissions of `existing` if given.
fn create_temp(
    path: &Path,
    target: &Path,
    existing: Option<&Metadata>,
) -> Result<(File, TempPath, Registered)> {
    let cannot = |why: String| Error::Io(format!("cannot write {}: {why}", path.display()));
    let Some(name) = target.file_name() else {
        return Err(cannot(
            "it does not end in a file name; give the path of a file to write".to_string(),
        ));
    };
    let directory = directory_of(target);
    remove_stale_temps(directory, name);
    let mut prefix = temp_prefix(name);
    prefix.push(std::process::id().to_string());
    prefix.push(".");
    let mut builder = tempfile::Builder::new();
    builder
        .prefix(&prefix)
        .suffix(".tmp")
        .rand_bytes(TEMP_RANDOM_CHARS)
        // Temporary files are private (0600) by default; a new output gets the usual
        // permissions of a new file: 0666, narrowed by the umask.
        .permissions(std::fs::Permissions::from_mode(0o666));
    let (file, temp, interrupt) = crate::interrupt::create_registered(|| {
        builder
            .tempfile_in(directory)
            .map(tempfile::NamedTempFile::into_parts)
    })
    .map_err(|error| {
        // The error of `tempfile` names the temporary file, which would only confuse.
        cannot(match error.kind() {
            io::ErrorKind::NotFound if !directory.is_dir() => format!(
                "directory {} does not exist; create it or choose another output path",
                directory.display()
            ),
            io::ErrorKind::PermissionDenied => format!(
                "no permission to create files in {}; choose a writable directory",
                directory.display()
            ),
            _ => format!(
                "{}; check that {} is a writable directory with free space",
                io::Error::from(error.kind()),
                directory.display()
            ),
        })
    })?;
    if let Some(existing) = existing {
        // The replacement keeps what the user set on the file it replaces. The owner can only
        // be given away by root: elsewhere the file is the writer's, as any rewritten file is.
        let _ = std::os::unix::fs::fchown(&file, Some(existing.uid()), Some(existing.gid()));
        file.set_permissions(existing.permissions())
            .map_err(|error| cannot(error.to_string()))?;
    }
    Ok((file, temp, interrupt))
}

/// Writes `text` to `path` as every output is written (see [`crate::output_file`]): a regular
/// file atomically, a device, FIFO or `/dev/stdout` in place.
pub(crate) fn write_atomically(path: &Path, text: &str) -> Result<()> {
    write_whole(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_written_with_writeback_starts_it_every_few_megabytes_and_keeps_every_byte() {
        let dir = tempfile::TempDir::new().unwrap();
        let path = dir.path().join("out.bin");
        let (file, pending) = PendingOutput::create(&path).unwrap();
        assert!(!pending.is_streamed());
        let (watched, _failure) = WatchedFile::new(file);
        let mut watched = watched.with_writeback(true);
        let piece: Vec<u8> = (0..=255u8).cycle().take(3 << 20).collect();
        for _ in 0..7 {
            watched.write_all(&piece).unwrap();
        }
        assert_eq!(watched.written, 21 << 20);
        assert_eq!(
            watched.sent,
            18 << 20,
            "started at 9, and then 18 MiB written"
        );
        pending.complete(watched.into_inner()).unwrap();
        let back = std::fs::read(&path).unwrap();
        assert_eq!(back.len(), 21 << 20);
        assert!(back.chunks(3 << 20).all(|chunk| chunk == &piece[..]));

        // A stream is never synced: nothing is started.
        let (file, pending) = PendingOutput::create(Path::new("/dev/null")).unwrap();
        assert!(pending.is_streamed());
        let (watched, _failure) = WatchedFile::new(file);
        let mut watched = watched.with_writeback(!pending.is_streamed());
        for _ in 0..4 {
            watched.write_all(&piece).unwrap();
        }
        assert_eq!(watched.sent, 0);
    }

    #[test]
    fn temp_names_are_recognised_only_for_their_output() {
        let prefix = temp_prefix(OsStr::new("out.parquet"));
        let owner = |name: &str| temp_owner(OsStr::new(name), &prefix);
        assert_eq!(owner(".out.parquet.1234.aB3xYz.tmp"), Some(1234));
        assert_eq!(owner(".out.parquet.1234.aB3xY.tmp"), None, "5 random chars");
        assert_eq!(
            owner(".out.parquet.aB3xYz.tmp"),
            None,
            "no pid (an older name)"
        );
        assert_eq!(owner(".out.parquet.x12.aB3xYz.tmp"), None);
        assert_eq!(owner(".other.parquet.1234.aB3xYz.tmp"), None);
        assert_eq!(owner(".out.parquet.1234.aB3xYz.tmp.keep"), None);
        assert_eq!(owner("out.parquet"), None);
    }

    #[test]
    fn descriptors_are_named_by_their_usual_paths() {
        assert_eq!(descriptor_of(Path::new("/dev/stdout")), Some(1));
        assert_eq!(descriptor_of(Path::new("/dev/stderr")), Some(2));
        assert_eq!(descriptor_of(Path::new("/dev/fd/7")), Some(7));
        assert_eq!(descriptor_of(Path::new("/proc/self/fd/3")), Some(3));
        let own = format!("/proc/{}/fd/4", std::process::id());
        assert_eq!(descriptor_of(Path::new(&own)), Some(4));
        assert_eq!(descriptor_of(Path::new("/proc/1/fd/4")), None);
        assert_eq!(descriptor_of(Path::new("/dev/null")), None);
        assert_eq!(descriptor_of(Path::new("out/dev/stdout")), None);
    }

    #[test]
    fn a_link_to_a_file_stays_a_link_and_its_file_is_replaced() {
        let dir = tempfile::TempDir::new().unwrap();
        let real = dir.path().join("real.csv");
        let link = dir.path().join("link.csv");
        std::fs::write(&real, "old\n").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o640)).unwrap();
        std::os::unix::fs::symlink("real.csv", &link).unwrap();
        write_whole(&link, b"new\n").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new\n");
        let mode = std::fs::metadata(&real).unwrap().permissions().mode();
        assert_eq!(
            mode & 0o777,
            0o640,
            "the replaced file's permissions are kept"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn a_dropped_output_leaves_the_previous_file() {
        let dir = tempfile::TempDir::new().unwrap();
        let path = dir.path().join("out.json");
        std::fs::write(&path, "previous").unwrap();
        let (mut file, pending) = PendingOutput::create(&path).unwrap();
        file.write_all(b"partial").unwrap();
        assert!(!pending.is_streamed());
        drop((file, pending));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "previous");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn dev_null_is_streamed() {
        let (mut file, pending) = PendingOutput::create(Path::new("/dev/null")).unwrap();
        assert!(pending.is_streamed());
        file.write_all(b"gone").unwrap();
        pending.complete(file).unwrap();
        assert!(std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
    }
}
