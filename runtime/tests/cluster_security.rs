//! Cluster mode against strangers and mistakes, on loopback: a replayed handshake, a stranger's
//! connection, a squatter on a peer's port, a process without a secret, processes started on
//! different files, outputs or worker counts, re-runs into an existing output, signals to the
//! `skewjoin cluster` launcher and to its children, and dictionary columns written by a cluster.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{DictionaryArray, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Int32Type, Schema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use tempfile::TempDir;

mod common;
use common::sorted_parquet_rows;

const SECRET: &str = "a secret of the security tests";

fn command(dir: &Path, args: &[&str], secret: Option<&str>) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_skewjoin"));
    command
        .args(args)
        .current_dir(dir)
        .env_remove("SKEWJOIN_CLUSTER_SECRET");
    if let Some(secret) = secret {
        command.env("SKEWJOIN_CLUSTER_SECRET", secret);
    }
    command
}

fn spawn(dir: &Path, args: &[&str]) -> Child {
    command(dir, args, Some(SECRET))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the skewjoin binary runs")
}

fn run(dir: &Path, args: &[&str]) -> Output {
    command(dir, args, Some(SECRET)).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn gen(dir: &Path, out: &str, args: &[&str]) {
    let mut all = vec!["gen", "--out", out];
    all.extend_from_slice(args);
    let output = run(dir, &all);
    assert!(output.status.success(), "{}", text(&output.stderr));
}

/// `n` loopback addresses with ports free a moment ago.
fn free_addresses(n: usize) -> Vec<String> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    listeners
        .iter()
        .map(|listener| listener.local_addr().unwrap().to_string())
        .collect()
}

fn write_hostfile(dir: &Path, name: &str, addresses: &[String]) -> String {
    std::fs::write(dir.join(name), addresses.join("\n") + "\n").unwrap();
    name.to_string()
}

/// The arguments of process `process` of two joining d/ with one worker each.
fn join_args(hosts: &str, process: &str, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<&str> = vec![
        "join",
        "d/left.parquet",
        "d/right.parquet",
        "--on",
        "key",
        "--workers",
        "1",
        "--processes",
        "2",
        "--process",
        process,
        "--hostfile",
        hosts,
    ];
    args.extend_from_slice(extra);
    args.into_iter().map(str::to_string).collect()
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// Waits for `child` at most `limit`, killing it if it runs longer (a failed test, not a hang).
fn wait_bounded(mut child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            child.kill().unwrap();
            let output = child.wait_with_output().unwrap();
            panic!(
                "still running after {limit:?}; stderr:\n{}",
                text(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// The `rows` and `checksum` lines of a successful run's stdout.
fn result_lines(output: &Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what} failed: {}",
        text(&output.stderr)
    );
    text(&output.stdout)
        .lines()
        .filter(|line| line.starts_with("rows\t") || line.starts_with("checksum\t"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The one-process result of joining d/ (rows and checksum lines).
fn one_process_result(dir: &Path) -> String {
    let output = run(
        dir,
        &[
            "join",
            "d/left.parquet",
            "d/right.parquet",
            "--on",
            "key",
            "--workers",
            "2",
        ],
    );
    result_lines(&output, "one process")
}

/// Connects to `address`, retrying while nothing listens there yet.
fn connect(address: &str) -> TcpStream {
    let start = Instant::now();
    loop {
        match TcpStream::connect(address) {
            Ok(stream) => return stream,
            Err(_) if start.elapsed() < Duration::from_secs(20) => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(error) => panic!("cannot connect to {address}: {error}"),
        }
    }
}

/// A stream recorded between a real process 1 and process 0, replayed to a new process 0 from a
/// plain socket with no process 1 running, proves nothing: process 0 refuses it, saying why, and
/// gives no result (exit code 5 at its connect timeout).
#[test]
fn a_replayed_stream_is_refused() {
    let dir = TempDir::new().unwrap();
    let path = dir.path();
    gen(path, "d", &["--rows", "2000", "--keys", "300"]);
    let addresses = free_addresses(2);
    // Process 1 reaches process 0 through a relay that records what process 1 sends.
    let relay = TcpListener::bind("127.0.0.1:0").unwrap();
    let relay_address = relay.local_addr().unwrap().to_string();
    let hosts0 = write_hostfile(path, "hosts0", &addresses);
    let hosts1 = write_hostfile(path, "hosts1", &[relay_address, addresses[1].clone()]);
    let target = addresses[0].clone();
    let recorder = std::thread::spawn(move || {
        let (mut from_one, _) = relay.accept().unwrap();
        let mut to_zero = connect(&target);
        let mut back = to_zero.try_clone().unwrap();
        let mut to_one = from_one.try_clone().unwrap();
        let backwards = std::thread::spawn(move || {
            let _ = std::io::copy(&mut back, &mut to_one);
            let _ = to_one.shutdown(std::net::Shutdown::Write);
        });
        let mut recorded = Vec::new();
        let mut buffer = [0u8; 64 * 1024];
        loop {
            match from_one.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    recorded.extend_from_slice(&buffer[..n]);
                    if to_zero.write_all(&buffer[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to_zero.shutdown(std::net::Shutdown::Write);
        let _ = backwards.join();
        recorded
    });
    let zero = spawn(path, &strs(&join_args(&hosts0, "0", &[])));
    let one = spawn(path, &strs(&join_args(&hosts1, "1", &[])));
    let expected = one_process_result(path);
    let zero = wait_bounded(zero, Duration::from_secs(60));
    let one = wait_bounded(one, Duration::from_secs(60));
    assert_eq!(result_lines(&zero, "process 0"), expected);
    assert!(one.status.success(), "{}", text(&one.stderr));
    let recorded = recorder.join().unwrap();
    assert!(recorded.len() > 100, "{} bytes recorded", recorded.len());

    // The same process 0 again, fed the recording.
    let addresses = free_addresses(2);
    let hosts = write_hostfile(path, "hosts2", &addresses);
    let zero = spawn(
        path,
        &strs(&join_args(&hosts, "0", &["--connect-timeout", "3"])),
    );
    let mut replay = connect(&addresses[0]);
    let _ = replay.write_all(&recorded);
    let zero = wait_bounded(zero, Duration::from_secs(30));
    let stderr = text(&zero.stderr);
    assert_eq!(zero.status.code(), Some(5), "{stderr}");
    assert!(stderr.contains("refused a connection"), "{stderr}");
    assert!(stderr.contains("proof is wrong"), "{stderr}");
    assert!(!text(&zero.stdout).contains("rows\t"), "{stderr}");
}

/// Strangers connecting to a process that waits for its peer (garbage, an HTTP request, timely's
/// handshake with index 99, 0 or 1, two bytes, connect-and-close) are refused with a reason, and
/// the real cluster still forms and gives the one-process result; nothing panics.
#[test]
fn strangers_are_refused_and_the_cluster_still_forms() {
    let dir = TempDir::new().unwrap();
    let path = dir.path();
    gen(path, "d", &["--rows", "2000", "--keys", "300"]);
    let expected = one_process_result(path);
    let addresses = free_addresses(2);
    let hosts = write_hostfile(path, "hosts", &addresses);
    let zero = spawn(
        path,
        &strs(&join_args(&hosts, "0", &["--connect-timeout", "20"])),
    );
    // skewjoin's own hello from a process 99 that does not exist.
    let mut hello_99 = b"SKJOIN\x00\x04".to_vec();
    hello_99.extend(99u64.to_be_bytes());
    hello_99.extend(0u64.to_be_bytes());
    hello_99.extend([7u8; 32]);
    let strangers: [&[u8]; 7] = [
        b"GET / HTTP/1.0\r\n\r\n",
        &[0xff; 100],
        &99u64.to_be_bytes(),
        &0u64.to_be_bytes(),
        &[1, 2],
        b"",
        &hello_99,
    ];
    let mut held = Vec::new();
    for bytes in strangers {
        let mut stream = connect(&addresses[0]);
        stream.write_all(bytes).unwrap();
        // Closing sends end-of-file after the bytes.
        drop(stream);
    }
    // A stranger claiming to be process 1 in timely's handshake, and then silent, does not hold
    // up the real process 1.
    let mut claims_one = connect(&addresses[0]);
    claims_one.write_all(&1u64.to_be_bytes()).unwrap();
    held.push(claims_one);
    let one = spawn(
        path,
        &strs(&join_args(&hosts, "1", &["--connect-timeout", "20"])),
    );
    let zero = wait_bounded(zero, Duration::from_secs(60));
    let one = wait_bounded(one, Duration::from_secs(60));
    let stderr = text(&zero.stderr);
    assert_eq!(result_lines(&zero, "process 0"), expected, "{stderr}");
    assert!(one.status.success(), "{}", text(&one.stderr));
    assert!(!stderr.contains("panicked"), "{stderr}");
    // Each reason is said once.
    for reason in [
        "it began with \"GET / HT\"",
        "does not speak skewjoin's handshake",
        "it says it is process 99",
        "closed the connection before sending its hello",
    ] {
        assert!(stderr.contains(reason), "{reason}: {stderr}");
    }
}

/// A stranger that sends timely's index 1 and then nothing, and a squatter that holds process 0's
/// port and says nothing, leave the waiting process bounded by --connect-timeout (exit code 5).
#[test]
fn silent_strangers_and_squatters_end_at_the_connect_timeout() {
    let dir = TempDir::new().unwrap();
    let path = dir.path();
    gen(path, "d", &["--rows", "1000", "--keys", "100"]);

    let addresses = free_addresses(2);
    let hosts = write_hostfile(path, "hosts", &addresses);
    let zero = spawn(
        path,
        &strs(&join_args(&hosts, "0", &["--connect-timeout", "2"])),
    );
    let mut stranger = connect(&addresses[0]);
    stranger.write_all(&1u64.to_be_bytes()).unwrap();
    let zero = wait_bounded(zero, Duration::from_secs(30));
    let stderr = text(&zero.stderr);
    assert_eq!(zero.status.code(), Some(5), "{stderr}");
    assert!(
        stderr.contains("did not all connect within 2 s"),
        "{stderr}"
    );
    drop(stranger);

    // The squatter accepts every connection on process 0's address and answers nothing.
    let squatter = TcpListener::bind("127.0.0.1:0").unwrap();
    let squatted = squatter.local_addr().unwrap().to_string();
    let hosts = write_hostfile(path, "squatted", &[squatted, free_addresses(1).remove(0)]);
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in squatter.incoming() {
            held.push(stream);
        }
    });
    let one = spawn(
        path,
        &strs(&join_args(&hosts, "1", &["--connect-timeout", "2"])),
    );
    let one = wait_bounded(one, Duration::from_secs(30));
    let stderr = text(&one.stderr);
    assert_eq!(one.status.code(), Some(5), "{stderr}");
    assert!(
        stderr.contains("did not all connect within 2 s"),
        "{stderr}"
    );
    assert!(stderr.contains("process 0 at"), "{stderr}");
}

/// A process started by hand without a secret refuses to listen (exit code 2, saying how to make
/// one); with --insecure the cluster runs; a secret file readable by others is refused.
#[test]
fn manual_mode_needs_a_secret_or_insecure() {
    let dir = TempDir::new().unwrap();
    let path = dir.path();
    gen(path, "d", &["--rows", "1000", "--keys", "100"]);
    let addresses = free_addresses(2);
    let hosts = write_hostfile(path, "hosts", &addresses);
    let output = command(path, &strs(&join_args(&hosts, "0", &[])), None)
        .output()
        .unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--cluster-secret-file"), "{stderr}");
    assert!(stderr.contains("/dev/urandom"), "{stderr}");

    std::fs::write(path.join("open.secret"), "a secret everyone can read\n").unwrap();
    let output = command(
        path,
        &strs(&join_args(
            &hosts,
            "0",
            &["--cluster-secret-file", "open.secret"],
        )),
        None,
    )
    .output()
    .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("chmod 600"));

    let expected = one_process_result(path);
    let children: Vec<Child> = ["0", "1"]
        .into_iter()
        .map(|process| {
            command(
                path,
                &strs(&join_args(&hosts, process, &["--insecure"])),
                None,
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    let outputs: Vec<Output> = children
        .into_iter()
        .map(|child| wait_bounded(child, Duration::from_secs(60)))
        .collect();
    assert_eq!(result_lines(&outputs[0], "insecure process 0"), expected);
    assert!(outputs[1].status.success());
}

/// Processes whose secrets differ never form a cluster, and processes started with a secret
/// file of the same secret do.
#[test]
fn a_secret_file_is_shared_and_a_wrong_one_is_refused() {
    let dir = TempDir::new().unwrap();
    let path = dir.path();
    gen(path, "d", &["--rows", "1000", "--keys", "100"]);
    let secret_file = path.join("cluster.secret");
    std::fs::write(&secret_file, format!("{SECRET}\n")).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&secret_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let hosts = write_hostfile(path, "hosts", &free_addresses(2));
    let with_file = |process| {
        command(
            path,
            &strs(&join_args(
                &hosts,
                process,
                &[
                    "--cluster-secret-file",
                    "cluster.secret",
                    "--connect-timeout",
                    "3",
                ],
            )),
            None,
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
    };
    // The file's trailing newline is not part of the secret: the same as the variable.
    let zero = with_file("0");
    let one = spawn(
        path,
        &strs(&join_args(&hosts, "1", &["--connect-timeout", "3"])),
    );
    let zero = wait_bounded(zero, Duration::from_secs(60));
    let one = wait_bounded(one, Duration::from_secs(60));
    assert!(zero.status.success(), "{}", text(&zero.stderr));
    assert!(one.status.success(), "{}", text(&one.stderr));

    let hosts = write_hostfile(path, "hosts", &free_addresses(2));
    let zero = with_file("0");
    let one = command(
        path,
        &strs(&join_args(&hosts, "1", &["--connect-timeout", "3"])),
        Some("another secret, of another cluster"),
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let zero = wait_bounded(zero, Duration::from_secs(30));
    let one = wait_bounded(one, Duration::from_secs(30));
    let stderr = text(&zero.stderr);
    assert_eq!(zero.status.code(), Some(5), "{stderr}");
    assert!(stderr.contains("proof is wrong"), "{stderr}");
    assert_eq!(one.status.code(), Some(5), "{}", text(&one.stderr));
}

/// Two processes started on different input files, different outputs or different worker
/// counts both stop with exit code 5 before joining, naming what differs.
#[test]
fn processes_that_differ_stop_naming_the_difference() {
    let dir = TempDir::new().unwrap();
    let path = dir.path();
    gen(path, "d", &["--rows", "1000", "--keys", "100"]);
    gen(
        path,
        "e",
        &["--rows", "1000", "--keys", "100", "--seed", "9"],
    );
    let cases: [(&str, [&[&str]; 2], &str); 4] = [
        (
            "csv null text",
            [&["--null", "NA"], &["--null", "-"]],
            "CSV dialect",
        ),
        (
            "inputs",
            [&["--workers", "1"], &["--workers", "1"]],
            "left input",
        ),
        (
            "outputs",
            [&["-o", "a.parquet"], &["-o", "b.parquet"]],
            "--output: ",
        ),
        (
            "workers",
            [&["--workers", "1"], &["--workers", "2"]],
            "--workers per process",
        ),
    ];
    for (what, extras, needle) in cases {
        let hosts = write_hostfile(path, "hosts", &free_addresses(2));
        let children: Vec<Child> = (0..2)
            .map(|process| {
                let left = if what == "inputs" && process == 1 {
                    "e/left.parquet"
                } else {
                    "d/left.parquet"
                };
                let mut args = vec![
                    "join",
                    left,
                    "d/right.parquet",
                    "--on",
                    "key",
                    "--processes",
                    "2",
                    "--process",
                    if process == 0 { "0" } else { "1" },
                    "--hostfile",
                    &hosts,
                    "--connect-timeout",
                    "20",
                ];
                args.extend_from_slice(extras[process]);
                if !args.contains(&"--workers") {
                    args.extend(["--workers", "1"]);
                }
                spawn(path, &args)
            })
            .collect();
        for child in children {
            let output = wait_bounded(child, Duration::from_secs(30));
            let stderr = text(&output.stderr);
            assert_eq!(output.status.code(), Some(5), "{what}: {stderr}");
            assert!(stderr.contains(needle), "{what}: {stderr}");
            assert!(!stderr.contains("panicked"), "{what}: {stderr}");
        }
        for out in ["a.parquet", "b.parquet"] {
            assert!(!path.join(out).exists(), "{what}: {out}");
        }
    }
}

/// The names in a directory, sorted; hidden ones too.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn launcher(dir: &Path, processes: &str, join: &[&str]) -> Command {
    let mut args = vec!["cluster", "--processes", processes, "--", "join"];
    args.extend_from_slice(join);
    command(dir, &args, None)
}

/// A re-run into a 4-part output with 2 parts leaves exactly the new parts and manifest; the
/// output directory is moved into place whole, with no directory of the run left beside it.
#[test]
fn a_rerun_replaces_the_earlier_output_whole() {
    let dir = TempDir::new().unwrap();
    let path = dir.path();
    gen(path, "d", &["--rows", "3000", "--keys", "300"]);
    let join = |workers: &'static str| {
        [
            "d/left.parquet",
            "d/right.parquet",
            "--on",
            "key",
            "--workers",
            workers,
            "-o",
            "out.parquet",
        ]
    };
    let output = launcher(path, "2", &join("2")).output().unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(
        listing(&path.join("out.parquet")),
        [
            "_manifest.json",
            "part-00000.parquet",
            "part-00001.parquet",
            "part-00002.parquet",
            "part-00003.parquet"
        ]
    );
    let output = launcher(path, "2", &join("1")).output().unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(
        listing(&path.join("out.parquet")),
        ["_manifest.json", "part-00000.parquet", "part-00001.parquet"]
    );
    assert_eq!(listing(path), ["d", "out.parquet"]);
    // A directory with a file of the user's in it is not replaced.
    std::fs::write(path.join("out.parquet/notes.txt"), "mine").unwrap();
    let output = launcher(path, "2", &join("1")).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("notes.txt"));
    assert_eq!(
        std::fs::read_to_string(path.join("out.parquet/notes.txt")).unwrap(),
        "mine"
    );
}

/// The children of `parent`, by pid.
fn children_of(parent: u32) -> Vec<u32> {
    let mut children = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: the command may hold spaces, the last ')' ends it.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let ppid = rest.split_whitespace().nth(1).and_then(|p| p.parse().ok());
        if ppid == Some(parent) {
            children.push(pid);
        }
    }
    children
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
            !state.is_some_and(|state| state.starts_with('Z'))
        })
        .unwrap_or(false)
}

fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

/// A launcher joining a pair big enough to write for minutes, started once its output parts
/// are being written in the run's directory beside `out.csv`; returns it and its children.
fn launch_long_run(path: &Path) -> (Child, Vec<u32>) {
    let mut launcher = launcher(
        path,
        "2",
        &[
            "d/left.parquet",
            "d/right.parquet",
            "--on",
            "key",
            "--strategy",
            "shuffle",
            "--workers",
            "1",
            "-o",
            "out.csv",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let start = Instant::now();
    loop {
        let writing = listing(path)
            .iter()
            .filter(|name| name.starts_with(".out.csv.") && name.ends_with(".partial"))
            .flat_map(|name| listing(&path.join(name)))
            .filter(|name| name.ends_with(".tmp"))
            .count();
        if writing == 2 {
            break;
        }
        assert!(
            launcher.try_wait().unwrap().is_none(),
            "the launcher ended early"
        );
        assert!(start.elapsed() < Duration::from_secs(120), "never wrote");
        std::thread::sleep(Duration::from_millis(20));
    }
    let children = children_of(launcher.id());
    assert_eq!(children.len(), 2, "{children:?}");
    (launcher, children)
}

fn wait_status(child: &mut Child, limit: Duration) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(start.elapsed() < limit, "still running after {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGTERM to the launcher's pid alone stops its children too: exit code 130, no child left
/// running, and no output nor part file left behind.
#[test]
fn sigterm_to_the_launcher_stops_its_children() {
    let dir = TempDir::new().unwrap();
    let path = dir.path();
    gen(
        path,
        "d",
        &["--rows", "200000", "--keys", "50", "--skew", "0"],
    );
    let (mut launcher, children) = launch_long_run(path);
    signal(launcher.id(), "TERM");
    let status = wait_status(&mut launcher, Duration::from_secs(30));
    let mut stderr = String::new();
    launcher
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}");
    for child in children {
        assert!(!alive(child), "process {child} still runs");
    }
    assert_eq!(listing(path), ["d"], "{stderr}");
}

/// A child killed by SIGKILL is a cluster failure (exit code 5) naming the process and the
/// signal, and the failed re-run leaves the earlier good output whole.
#[test]
fn a_child_killed_by_a_signal_is_a_cluster_failure_and_the_old_output_stays() {
    let dir = TempDir::new().unwrap();
    let path = dir.path();
    gen(path, "small", &["--rows", "2000", "--keys", "300"]);
    let output = launcher(
        path,
        "2",
        &[
            "small/left.parquet",
            "small/right.parquet",
            "--on",
            "key",
            "--workers",
            "1",
            "-o",
            "out.csv",
        ],
    )
    .output()
    .unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    let before: Vec<(String, Vec<u8>)> = listing(&path.join("out.csv"))
        .into_iter()
        .map(|name| {
            let bytes = std::fs::read(path.join("out.csv").join(&name)).unwrap();
            (name, bytes)
        })
        .collect();
    gen(
        path,
        "d",
        &["--rows", "200000", "--keys", "50", "--skew", "0"],
    );
    let (mut launcher, children) = launch_long_run(path);
    let victim = *children.iter().max().unwrap();
    signal(victim, "KILL");
    let status = wait_status(&mut launcher, Duration::from_secs(30));
    let mut stderr = String::new();
    launcher
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(5), "{stderr}");
    assert!(
        stderr.contains("was killed by signal 9 (SIGKILL)"),
        "{stderr}"
    );
    let after: Vec<(String, Vec<u8>)> = listing(&path.join("out.csv"))
        .into_iter()
        .map(|name| {
            let bytes = std::fs::read(path.join("out.csv").join(&name)).unwrap();
            (name, bytes)
        })
        .collect();
    assert!(before == after, "the earlier output changed");
}

/// The launcher's children print the result; a reader that closes the pipe early (`| head -1`)
/// ends the run quietly, without a panic.
#[test]
fn a_closed_stdout_ends_the_launcher_quietly() {
    let dir = TempDir::new().unwrap();
    let path = dir.path();
    gen(path, "d", &["--rows", "1000", "--keys", "100"]);
    let mut child = launcher(
        path,
        "2",
        &[
            "d/left.parquet",
            "d/right.parquet",
            "--on",
            "key",
            "-w",
            "1",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    drop(child.stdout.take());
    let output = wait_bounded(child, Duration::from_secs(60));
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A Parquet file of `rows` rows: an integer key and a dictionary-encoded string column.
fn write_dictionary_file(path: &Path, rows: i64, seed: i64) {
    let keys: Int64Array = (0..rows).map(|row| (row * seed) % 97).collect();
    let names: DictionaryArray<Int32Type> = (0..rows)
        .map(|row| ["red", "green", "blue"][(row % 3) as usize])
        .collect();
    let schema = Arc::new(Schema::new(vec![
        Field::new("key", DataType::Int64, false),
        Field::new(
            "name",
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            false,
        ),
    ]));
    let batch =
        RecordBatch::try_new(schema.clone(), vec![Arc::new(keys), Arc::new(names)]).unwrap();
    let mut writer = ArrowWriter::try_new(File::create(path).unwrap(), schema, None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

/// Dictionary-encoded columns written by a cluster: the parts hold the rows of a one-process
/// output, with the column still a dictionary.
#[test]
fn dictionary_columns_are_written_by_a_cluster() {
    let dir = TempDir::new().unwrap();
    let path = dir.path();
    write_dictionary_file(&path.join("left.parquet"), 3000, 7);
    write_dictionary_file(&path.join("right.parquet"), 2000, 11);
    let join = ["left.parquet", "right.parquet", "--on", "key", "-w", "1"];
    let mut one = vec!["join"];
    one.extend(join);
    one.extend(["-o", "one.parquet"]);
    let output = run(path, &one);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let mut cluster = join.to_vec();
    cluster.extend(["-o", "out.parquet"]);
    let output = launcher(path, "2", &cluster).output().unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    let parts: Vec<PathBuf> = listing(&path.join("out.parquet"))
        .into_iter()
        .filter(|name| name.starts_with("part-"))
        .map(|name| path.join("out.parquet").join(name))
        .collect();
    assert_eq!(parts.len(), 2);
    let expected = sorted_parquet_rows(&[path.join("one.parquet")]);
    assert!(expected.len() > 1000, "{}", expected.len());
    assert!(sorted_parquet_rows(&parts) == expected, "the parts differ");
    let schema = ParquetRecordBatchReaderBuilder::try_new(File::open(&parts[0]).unwrap())
        .unwrap()
        .schema()
        .clone();
    assert!(
        matches!(
            schema
                .field_with_name("name")
                .map(|f| f.data_type().clone()),
            Ok(DataType::Dictionary(..))
        ),
        "{schema:?}"
    );
}
