//! End-to-end tests of where the `skewjoin` binary writes and how it ends: outputs that are not
//! regular files (`/dev/null`, a FIFO, `/dev/stdout`) are written in place and never replaced; a
//! link to a file stays a link; temporary files of dead runs are cleaned, those of live ones
//! kept; new files follow the umask and replaced ones keep their mode; a full disk is exit 4 in
//! every format; bounds on --workers, --partitions and `gen` sizes are usage errors; a closed
//! stdout ends the program quietly with 141; hints name flags that exist.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_skewjoin");

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `skewjoin args...` in `dir`.
fn skewjoin(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the skewjoin binary runs")
}

/// Runs `skewjoin args...` in `dir` through `sh`, after the shell commands `setup` (a umask,
/// a ulimit).
fn skewjoin_after(dir: &Path, setup: &str, args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("{setup}; exec \"$0\" \"$@\""))
        .arg(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("sh runs")
}

fn assert_success(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what} failed ({:?})\nstdout:\n{}\nstderr:\n{}",
        output.status,
        text(&output.stdout),
        text(&output.stderr)
    );
}

/// Asserts exit `code` and a one-line error (no panic) containing each of `needles`.
fn assert_fails(output: &Output, code: i32, needles: &[&str]) {
    let stderr = text(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(code),
        "expected exit {code}\nstderr:\n{stderr}"
    );
    assert!(stderr.contains("skewjoin: error:"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "stderr lacks {needle:?}:\n{stderr}"
        );
    }
}

/// A directory with `left.csv` and `right.csv` joined on `key` into many rows (a few hundred
/// KB of CSV output).
fn inputs() -> TempDir {
    let dir = TempDir::new().unwrap();
    let output = skewjoin(
        dir.path(),
        &[
            "gen", "--out", ".", "--format", "csv", "--rows", "3000", "--keys", "300",
        ],
    );
    assert_success(&output, "gen");
    dir
}

/// `join left.csv right.csv --on key -w 2` with `more` arguments.
fn join_args<'a>(more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "join",
        "left.csv",
        "right.csv",
        "--on",
        "key",
        "-w",
        "2",
        "-q",
    ];
    args.extend_from_slice(more);
    args
}

/// The lines of a CSV output, header first and then the rows sorted: two workers write their
/// batches in either order.
fn table(bytes: &[u8]) -> Vec<String> {
    let text = text(bytes);
    let mut lines = text.lines().map(str::to_string);
    let header = lines.next().expect("a header line");
    let mut rows: Vec<String> = lines.collect();
    rows.sort();
    std::iter::once(header).chain(rows).collect()
}

/// The CSV output of the join, written to a regular file, as [`table`] gives it.
fn expected_csv(dir: &Path) -> Vec<String> {
    let output = skewjoin(dir, &join_args(&["-o", "expected.csv"]));
    assert_success(&output, "join into a file");
    let bytes = std::fs::read(dir.join("expected.csv")).unwrap();
    assert!(bytes.len() > 100_000, "a sizeable output");
    std::fs::remove_file(dir.join("expected.csv")).unwrap();
    table(&bytes)
}

/// The names in `dir` that start with `.` (temporary files).
fn hidden(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.starts_with('.'))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Outputs that are not regular files
// ---------------------------------------------------------------------------------------------

#[test]
fn dev_null_as_output_stays_a_character_device() {
    let dir = inputs();
    for format in ["parquet", "arrow", "csv"] {
        let output = skewjoin(
            dir.path(),
            &join_args(&["-o", "/dev/null", "--output-format", format]),
        );
        assert_success(&output, format);
        let metadata = std::fs::symlink_metadata("/dev/null").unwrap();
        assert!(metadata.file_type().is_char_device(), "{format}");
        assert_eq!(metadata.len(), 0);
    }
    // --metrics too.
    let output = skewjoin(dir.path(), &join_args(&["--metrics", "/dev/null"]));
    assert_success(&output, "--metrics /dev/null");
    assert!(std::fs::symlink_metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
}

fn mkfifo(path: &Path) {
    let name = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string; mkfifo only creates a node.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o644) }, 0, "mkfifo");
}

#[test]
fn a_fifo_as_output_receives_the_whole_output_and_stays_a_fifo() {
    let dir = inputs();
    let expected = expected_csv(dir.path());
    let fifo = dir.path().join("out.csv");
    mkfifo(&fifo);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            File::open(fifo).unwrap().read_to_end(&mut bytes).unwrap();
            bytes
        })
    };
    let output = skewjoin(dir.path(), &join_args(&["-o", "out.csv"]));
    if !output.status.success() {
        // Let the reader go: a writer opens and closes the FIFO.
        let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
    }
    assert_success(&output, "join into a FIFO");
    let received = reader.join().unwrap();
    assert!(
        table(&received) == expected,
        "the FIFO got other rows than the file"
    );
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    assert!(hidden(dir.path()).is_empty(), "{:?}", hidden(dir.path()));
}

#[test]
fn dev_stdout_writes_through_the_inherited_descriptor() {
    let dir = inputs();
    let expected = expected_csv(dir.path());
    let args = join_args(&["-o", "/dev/stdout", "--output-format", "csv"]);
    // A pipe.
    let output = skewjoin(dir.path(), &args);
    assert_success(&output, "join into /dev/stdout, a pipe");
    assert!(
        table(&output.stdout) == expected,
        "stdout differs from the file"
    );
    // A regular file, as `> file` leaves it: written at the descriptor's offset, after what
    // is there already, and not renamed over.
    let redirected = dir.path().join("redirected.csv");
    std::fs::write(&redirected, "before\n").unwrap();
    let file = std::fs::OpenOptions::new()
        .append(true)
        .open(&redirected)
        .unwrap();
    let status = Command::new(BIN)
        .args(&args)
        .current_dir(dir.path())
        .stdout(file)
        .status()
        .unwrap();
    assert!(status.success());
    let written = std::fs::read(&redirected).unwrap();
    let after = written
        .strip_prefix(b"before\n")
        .expect("what was in the file is kept, first");
    assert!(table(after) == expected);
    assert!(std::fs::symlink_metadata("/dev/stdout")
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(hidden(dir.path()).is_empty(), "{:?}", hidden(dir.path()));
}

#[test]
fn a_link_to_a_file_stays_a_link_and_the_file_keeps_its_mode() {
    let dir = inputs();
    let expected = expected_csv(dir.path());
    std::fs::create_dir(dir.path().join("real")).unwrap();
    let real = dir.path().join("real/out.csv");
    std::fs::write(&real, "old\n").unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::symlink("real/out.csv", dir.path().join("link.csv")).unwrap();
    let output = skewjoin(dir.path(), &join_args(&["-o", "link.csv"]));
    assert_success(&output, "join into a link");
    let link = std::fs::symlink_metadata(dir.path().join("link.csv")).unwrap();
    assert!(link.file_type().is_symlink(), "the link was replaced");
    assert!(table(&std::fs::read(&real).unwrap()) == expected);
    let mode = std::fs::metadata(&real).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
    assert!(hidden(&dir.path().join("real")).is_empty());
}

// ---------------------------------------------------------------------------------------------
// Temporary files and modes
// ---------------------------------------------------------------------------------------------

/// The pid of a process that has exited.
fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

#[test]
fn a_dead_runs_temporary_file_is_removed_and_a_live_ones_kept() {
    let dir = inputs();
    let dead = dead_pid();
    let mut live = Command::new("sleep").arg("30").spawn().unwrap();
    let stale = format!(".out.csv.{dead}.aB3dE9.tmp");
    let running = format!(".out.csv.{}.xY7zQ2.tmp", live.id());
    // Not ours to judge: no pid (an older name), and another output's.
    let unnamed = ".out.csv.aB3dE9.tmp".to_string();
    let other = format!(".other.csv.{dead}.aB3dE9.tmp");
    for name in [&stale, &running, &unnamed, &other] {
        std::fs::write(dir.path().join(name), "partial").unwrap();
    }
    let output = skewjoin(dir.path(), &join_args(&["-o", "out.csv"]));
    live.kill().unwrap();
    live.wait().unwrap();
    assert_success(&output, "join");
    let mut left = hidden(dir.path());
    left.sort();
    let mut want = vec![running, unnamed, other];
    want.sort();
    assert_eq!(left, want, "only the dead run's file of out.csv goes");
}

#[test]
fn new_files_follow_the_umask_and_replaced_ones_keep_their_mode() {
    let dir = inputs();
    for (umask, mode) in [("022", 0o644), ("027", 0o640), ("077", 0o600)] {
        let output = skewjoin_after(
            dir.path(),
            &format!("umask {umask}"),
            &join_args(&["-o", "new.csv", "--metrics", "new.json"]),
        );
        assert_success(&output, "join");
        for name in ["new.csv", "new.json"] {
            let path = dir.path().join(name);
            let got = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(got, mode, "{name} with umask {umask}");
            std::fs::remove_file(path).unwrap();
        }
    }
    let metrics = dir.path().join("kept.json");
    std::fs::write(&metrics, "{}").unwrap();
    std::fs::set_permissions(&metrics, std::fs::Permissions::from_mode(0o604)).unwrap();
    let output = skewjoin(dir.path(), &join_args(&["--metrics", "kept.json"]));
    assert_success(&output, "join");
    assert!(std::fs::read_to_string(&metrics)
        .unwrap()
        .contains("checksum"));
    let got = std::fs::metadata(&metrics).unwrap().permissions().mode() & 0o777;
    assert_eq!(got, 0o604);
}

// ---------------------------------------------------------------------------------------------
// A full disk
// ---------------------------------------------------------------------------------------------

#[test]
fn a_full_device_is_exit_4_in_every_format_with_two_workers() {
    let dir = inputs();
    for format in ["parquet", "arrow", "csv"] {
        let output = skewjoin(
            dir.path(),
            &join_args(&["-o", "/dev/full", "--output-format", format]),
        );
        assert_fails(&output, 4, &["/dev/full", "No space left"]);
        assert!(std::fs::symlink_metadata("/dev/full")
            .unwrap()
            .file_type()
            .is_char_device());
    }
}

#[test]
fn a_file_that_cannot_grow_is_exit_4_in_every_format_and_leaves_nothing() {
    let dir = inputs();
    for format in ["parquet", "arrow", "csv"] {
        for workers in ["1", "2", "4"] {
            let name = format!("out.{format}");
            // A file-size limit of 64 KiB (128 blocks of 512 bytes in POSIX sh; larger blocks
            // elsewhere only make it 128 KiB): writes beyond fail with EFBIG, as on a full
            // disk, once SIGXFSZ is ignored.
            let output = skewjoin_after(
                dir.path(),
                "trap '' XFSZ; ulimit -f 128",
                &[
                    "join",
                    "left.csv",
                    "right.csv",
                    "--on",
                    "key",
                    "-w",
                    workers,
                    "-q",
                    "-o",
                    &name,
                ],
            );
            assert_fails(&output, 4, &[&name, "cannot write"]);
            assert!(!dir.path().join(&name).exists(), "{format} {workers}");
            assert!(hidden(dir.path()).is_empty(), "{:?}", hidden(dir.path()));
        }
    }
}

/// A tmpfs of 256 KiB mounted on a new directory, unmounted on drop; `None` (with a message)
/// where mounting is not permitted.
struct SmallDisk {
    point: PathBuf,
    /// Holds the mount point's parent until the disk is unmounted.
    _parent: TempDir,
}

impl SmallDisk {
    fn mount() -> Option<SmallDisk> {
        let dir = TempDir::new().unwrap();
        let point = dir.path().join("disk");
        std::fs::create_dir(&point).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
            .arg(&point)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if !mounted {
            eprintln!("skipped: cannot mount a tmpfs here (not root, or no CAP_SYS_ADMIN)");
            return None;
        }
        Some(SmallDisk {
            point,
            _parent: dir,
        })
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.point).status();
    }
}

#[test]
fn a_full_disk_is_exit_4_for_parquet_with_two_workers() {
    let Some(disk) = SmallDisk::mount() else {
        return;
    };
    let dir = inputs();
    for format in ["parquet", "arrow", "csv"] {
        let out = disk.point.join(format!("out.{format}"));
        let out = out.to_str().unwrap();
        let output = skewjoin(dir.path(), &join_args(&["-o", out]));
        assert_fails(&output, 4, &["No space left"]);
        assert_eq!(
            std::fs::read_dir(&disk.point).unwrap().count(),
            0,
            "{format}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Bounds
// ---------------------------------------------------------------------------------------------

#[test]
fn partitions_workers_and_gen_sizes_are_bounded() {
    let dir = inputs();
    for partitions in [
        "2147483648",
        "4294967296",
        "18446744073709551615",
        "1048577",
    ] {
        let output = skewjoin(dir.path(), &join_args(&["-p", partitions]));
        assert_fails(&output, 2, &["--partitions", "1048576"]);
    }
    let output = skewjoin(
        dir.path(),
        &[
            "join",
            "left.csv",
            "right.csv",
            "--on",
            "key",
            "-w",
            "100000",
        ],
    );
    assert_fails(&output, 2, &["--workers 100000", "per CPU core"]);
    let output = skewjoin(dir.path(), &["demo", "-w", "100000"]);
    assert_fails(&output, 2, &["--workers"]);
    for args in [
        ["--rows", "18446744073709551615"],
        ["--left-rows", "4294967296"],
        ["--keys", "18446744073709551615"],
    ] {
        let mut all = vec!["gen", "--out", "g"];
        all.extend_from_slice(&args);
        let output = skewjoin(dir.path(), &all);
        assert_fails(&output, 2, &[args[0]]);
        assert!(!dir.path().join("g").exists(), "nothing is written");
    }
    let output = skewjoin(
        dir.path(),
        &[
            "gen",
            "--kind",
            "pavlo",
            "--out",
            "g",
            "--rows",
            "18446744073709551615",
        ],
    );
    assert_fails(&output, 2, &["--rows"]);
}

// ---------------------------------------------------------------------------------------------
// A closed stdout
// ---------------------------------------------------------------------------------------------

/// Runs `skewjoin args...` in `dir` with stdout a pipe whose reader is already gone, as for
/// `skewjoin ... | head -0`.
fn with_closed_stdout(dir: &Path, args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

#[test]
fn a_closed_stdout_ends_quietly_with_141() {
    let dir = inputs();
    let runs: [&[&str]; 5] = [
        &[
            "explain",
            "left.csv",
            "right.csv",
            "--on",
            "key",
            "--json",
            "-q",
        ],
        &["explain", "left.csv", "right.csv", "--on", "key", "-q"],
        &["demo", "--rows", "2000", "--keys", "100"],
        &["join", "left.csv", "right.csv", "--on", "key"],
        &["gen", "--out", "g", "--rows", "100"],
    ];
    for args in runs {
        let output = with_closed_stdout(dir.path(), args);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(141), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("error"), "{args:?}: {stderr}");
    }
    // Writing the output itself there: nothing left behind.
    let output = with_closed_stdout(
        dir.path(),
        &join_args(&["-o", "/dev/stdout", "--output-format", "parquet"]),
    );
    assert_eq!(output.status.code(), Some(141), "{}", text(&output.stderr));
    assert!(hidden(dir.path()).is_empty());
}

#[test]
fn a_closed_stderr_does_not_stop_a_join() {
    let dir = inputs();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    // Without -q, progress goes to stderr as plain lines when it is not a terminal: every line
    // meets a closed pipe, and the join must still print its result.
    let output = Command::new(BIN)
        .args(["join", "left.csv", "right.csv", "--on", "key", "-w", "2"])
        .current_dir(dir.path())
        .stderr(writer)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(
        text(&output.stdout).starts_with("rows\t"),
        "{}",
        text(&output.stdout)
    );
}

// ---------------------------------------------------------------------------------------------
// Hints
// ---------------------------------------------------------------------------------------------

#[test]
fn an_output_of_unknown_format_is_advised_output_format() {
    let dir = inputs();
    let output = skewjoin(dir.path(), &join_args(&["-o", "out.txt"]));
    assert_fails(&output, 2, &["out.txt", "--output-format csv"]);
    assert!(!text(&output.stderr).contains(" --format "));
    // The advice works.
    let output = skewjoin(
        dir.path(),
        &join_args(&["-o", "out.txt", "--output-format", "csv"]),
    );
    assert_success(&output, "--output-format csv");
}

// ---------------------------------------------------------------------------------------------
// Compression
// ---------------------------------------------------------------------------------------------

/// The codec of the first column chunk of a Parquet file, as the file names it.
fn parquet_codec(path: &Path) -> String {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let reader = SerializedFileReader::new(File::open(path).unwrap()).unwrap();
    reader
        .metadata()
        .row_group(0)
        .column(0)
        .compression()
        .to_string()
}

#[test]
fn parquet_output_is_zstd_unless_told_and_a_codec_a_format_lacks_is_refused() {
    let dir = inputs();
    let output = skewjoin(dir.path(), &join_args(&["-o", "default.parquet"]));
    assert_success(&output, "default compression");
    assert!(parquet_codec(&dir.path().join("default.parquet")).starts_with("ZSTD"));
    let output = skewjoin(
        dir.path(),
        &join_args(&["-o", "lz4.parquet", "--compression", "lz4"]),
    );
    assert_success(&output, "--compression lz4");
    assert_eq!(parquet_codec(&dir.path().join("lz4.parquet")), "LZ4_RAW");
    for (args, says, written) in [
        (
            &["-o", "out.csv", "--compression", "zstd"][..],
            "CSV output is written uncompressed",
            Some("out.csv"),
        ),
        (
            &["-o", "out.arrow", "--compression", "snappy"][..],
            "use zstd, lz4 or none",
            Some("out.arrow"),
        ),
        (&["--compression", "zstd"][..], "give --output too", None),
    ] {
        let output = skewjoin(dir.path(), &join_args(args));
        assert_fails(&output, 2, &["--compression", says]);
        if let Some(name) = written {
            assert!(!dir.path().join(name).exists(), "{name} was not written");
        }
    }
}

/// Two workers finish at different times, yet every row group but the last is a whole 64 Ki
/// rows, so that a later join can cut the file between its row groups.
#[test]
fn parquet_output_row_groups_are_whole_but_the_last() {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let dir = TempDir::new().unwrap();
    let output = skewjoin(
        dir.path(),
        &["gen", "--out", ".", "--rows", "20000", "--keys", "2000"],
    );
    assert_success(&output, "gen");
    let output = skewjoin(
        dir.path(),
        &[
            "join",
            "left.parquet",
            "right.parquet",
            "--on",
            "key",
            "-w",
            "2",
            "-q",
            "-o",
            "out.parquet",
        ],
    );
    assert_success(&output, "join");
    let reader =
        SerializedFileReader::new(File::open(dir.path().join("out.parquet")).unwrap()).unwrap();
    let groups: Vec<i64> = reader
        .metadata()
        .row_groups()
        .iter()
        .map(|group| group.num_rows())
        .collect();
    assert!(groups.len() >= 3, "{groups:?}");
    let (last, whole) = groups.split_last().unwrap();
    assert!(whole.iter().all(|&rows| rows == 65_536), "{groups:?}");
    assert!((1..=65_536).contains(last), "{groups:?}");
}
