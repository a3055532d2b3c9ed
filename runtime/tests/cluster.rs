//! End-to-end tests of cluster mode: processes of the `skewjoin` binary connected over loopback
//! give exactly the output of a one-process run; a process that dies or never connects makes the
//! others exit with code 5 in bounded time and leaves no output that looks complete; processes
//! started with different arguments refuse to run; bad cluster arguments are usage errors.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

mod common;
use common::sorted_parquet_rows;

/// The cluster secret of processes these tests start by hand (`skewjoin cluster` makes its own).
const SECRET: &str = "the secret of the cluster tests";

fn skewjoin(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skewjoin"))
        .args(args)
        .env("SKEWJOIN_CLUSTER_SECRET", SECRET)
        .current_dir(dir)
        .output()
        .expect("the skewjoin binary runs")
}

fn spawn(dir: &Path, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_skewjoin"))
        .args(args)
        .env("SKEWJOIN_CLUSTER_SECRET", SECRET)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the skewjoin binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Asserts success and returns the `rows` and `checksum` lines of stdout.
fn rows_and_checksum(output: &Output, what: &str) -> (String, String) {
    let stdout = text(&output.stdout);
    assert!(
        output.status.success(),
        "{what} failed\nstdout:\n{stdout}\nstderr:\n{}",
        text(&output.stderr)
    );
    let field = |name: &str| {
        let found: Vec<&str> = stdout
            .lines()
            .filter_map(|line| line.strip_prefix(&format!("{name}\t")))
            .collect();
        assert_eq!(
            found.len(),
            1,
            "{what}: one {name} line expected in\n{stdout}"
        );
        found[0].to_string()
    };
    (field("rows"), field("checksum"))
}

/// A hostfile of `n` loopback addresses with ports free a moment ago, in `dir`.
fn hostfile(dir: &Path, n: usize) -> String {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let lines: Vec<String> = listeners
        .iter()
        .map(|listener| listener.local_addr().unwrap().to_string())
        .collect();
    std::fs::write(dir.join("hosts"), lines.join("\n") + "\n").unwrap();
    "hosts".to_string()
}

/// The directories a cluster run writes `output`'s parts in until they are complete.
fn staged_dirs(dir: &Path, output: &str) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap())
        .filter(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            name.starts_with(&format!(".{output}.")) && name.ends_with(".partial")
        })
        .map(|entry| entry.path())
        .collect()
}

fn gen(dir: &Path, out: &str, args: &[&str]) {
    let mut all = vec!["gen", "--out", out];
    all.extend_from_slice(args);
    let output = skewjoin(dir, &all);
    assert!(output.status.success(), "{}", text(&output.stderr));
}

/// Two processes of one worker give the rows and checksum of one process of two workers, for a
/// strategy of each kind, on Parquet (several row groups), CSV and Arrow IPC inputs; the metrics
/// of process 0 describe every partition of the cluster.
#[test]
fn two_processes_give_the_output_of_one() {
    let dir = TempDir::new().unwrap();
    let path = dir.path();
    // 150,000 rows: three row groups per file, so both processes read some.
    let data = [
        "--rows", "150000", "--keys", "20000", "--skew", "1.0", "--noise", "0.1",
    ];
    gen(path, "pq", &data);
    let mut csv_data = data.to_vec();
    csv_data.extend(["--format", "csv"]);
    gen(path, "csv", &csv_data);
    let mut arrow_data = data.to_vec();
    arrow_data.extend(["--format", "arrow"]);
    gen(path, "arrow", &arrow_data);
    let none: &[&str] = &[];
    // Chosen output columns: key columns left out, and (`--select key`) no right column.
    let chosen = ["--left-columns", "value", "--right-columns", "id"];
    let runs = [
        ("pq", "shuffle", "full", none),
        ("pq", "ib", "full", none),
        ("pq", "am", "inner", none),
        ("pq", "vprp", "left", none),
        ("pq", "tree", "right-anti", none),
        ("pq", "auto", "full", none),
        ("csv", "am", "full", none),
        ("arrow", "tree", "full", none),
        ("pq", "am", "full", &chosen[..]),
        ("csv", "shuffle", "left", &chosen[..]),
        ("arrow", "ib", "inner", &["--select", "key"][..]),
    ];
    for (data, strategy, how, columns) in runs {
        let extension = if data == "pq" { "parquet" } else { data };
        let left = format!("{data}/left.{extension}");
        let right = format!("{data}/right.{extension}");
        let join = [
            "join",
            &left,
            &right,
            "--on",
            "key",
            "--how",
            how,
            "--strategy",
            strategy,
            "--partitions",
            "6",
        ];
        let what = format!("{strategy} {how} on {data} {columns:?}");
        let mut one = join.to_vec();
        one.extend(columns);
        one.extend(["--workers", "2"]);
        let expected = rows_and_checksum(&skewjoin(path, &one), &what);

        let mut cluster = vec!["cluster", "--processes", "2", "--"];
        cluster.extend(join);
        cluster.extend(columns);
        cluster.extend(["--workers", "1", "--metrics", "m.json"]);
        let got = rows_and_checksum(&skewjoin(path, &cluster), &format!("{what}, 2 processes"));
        assert_eq!(got, expected, "{what}");

        let metrics: Value =
            serde_json::from_str(&std::fs::read_to_string(path.join("m.json")).unwrap()).unwrap();
        assert_eq!(metrics["processes"], 2, "{what}");
        assert_eq!(metrics["workers"], 2, "{what}");
        assert_eq!(metrics["left_rows"], 150000, "{what}");
        let partitions = metrics["per_partition"].as_array().unwrap();
        assert_eq!(partitions.len(), 6, "{what}");
        let output: u64 = partitions
            .iter()
            .map(|p| p["output_rows"].as_u64().unwrap())
            .sum();
        assert_eq!(output.to_string(), expected.0, "{what}");
        if strategy == "auto" {
            // The processes' key samples find the hot keys of Zipf 1.0.
            assert_eq!(metrics["strategy"], "am", "{what}");
            assert!(
                metrics["strategy_reason"]
                    .as_str()
                    .unwrap()
                    .contains("a sample of every process's keys finds a key"),
                "{what}: {}",
                metrics["strategy_reason"]
            );
        }
    }
}

/// On keys that no sample finds hot, `auto` in a cluster shuffles rather than pay for AM-Join's
/// key count; and `--process-metrics` has each process describe itself, `{process}` naming it.
#[test]
fn a_cluster_auto_shuffles_uniform_keys_and_each_process_reports_itself() {
    let dir = TempDir::new().unwrap();
    let path = dir.path();
    gen(
        path,
        "u",
        &["--rows", "150000", "--keys", "150000", "--skew", "0"],
    );
    let join = [
        "join",
        "u/left.parquet",
        "u/right.parquet",
        "--on",
        "key",
        "--strategy",
        "auto",
    ];
    let mut one = join.to_vec();
    one.extend(["--workers", "2"]);
    let expected = rows_and_checksum(&skewjoin(path, &one), "one process");
    let mut cluster = vec!["cluster", "--processes", "2", "--"];
    cluster.extend(join);
    cluster.extend([
        "--workers",
        "1",
        "--metrics",
        "m.json",
        "--process-metrics",
        "p{process}.json",
    ]);
    let got = rows_and_checksum(&skewjoin(path, &cluster), "two processes");
    assert_eq!(got, expected);
    let read = |name: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(path.join(name)).unwrap()).unwrap()
    };
    let metrics = read("m.json");
    assert_eq!(metrics["strategy"], "shuffle", "{metrics}");
    assert!(
        metrics["strategy_reason"]
            .as_str()
            .unwrap()
            .starts_with("a sample of every process's keys finds no key"),
        "{}",
        metrics["strategy_reason"]
    );
    let mut rows = 0;
    for process in 0..2 {
        let own = read(&format!("p{process}.json"));
        assert_eq!(own["process"], process, "{own}");
        assert_eq!(own["processes"], 2, "{own}");
        rows += own["output_rows"].as_u64().unwrap();
        let join_cpu = own["join_cpu_seconds"].as_f64().unwrap();
        let cpu = own["cpu_seconds"].as_f64().unwrap();
        assert!(join_cpu >= 0.0 && join_cpu <= cpu, "{own}");
        assert!(own["peak_rss_bytes"].as_u64().unwrap() > 0, "{own}");
    }
    assert_eq!(rows.to_string(), expected.0);
}

/// Told that its links are slow (`--bandwidth`), a cluster's `auto` copies a small side it would
/// shuffle by CPU alone: on 2 processes a copy crosses to one other machine, a shuffle sends
/// half of both sides, so at 1 Mbit/s a 3:1 pair is Small-Large. The rows are the same.
#[test]
fn a_cluster_told_its_links_are_slow_copies_a_small_side_sooner() {
    let dir = TempDir::new().unwrap();
    let path = dir.path();
    gen(
        path,
        "s",
        &[
            "--left-rows",
            "20000",
            "--right-rows",
            "60000",
            "--keys",
            "20000",
            "--skew",
            "0",
        ],
    );
    let join = [
        "join",
        "s/left.parquet",
        "s/right.parquet",
        "--on",
        "key",
        "--strategy",
        "auto",
        "--workers",
        "1",
    ];
    let expected = rows_and_checksum(&skewjoin(path, &join), "one process");
    let read = |name: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(path.join(name)).unwrap()).unwrap()
    };
    for (link, strategy) in [(None, "shuffle"), (Some("1mbit"), "ib")] {
        let mut cluster = vec!["cluster", "--processes", "2", "--"];
        cluster.extend(join);
        cluster.extend(["--metrics", "m.json"]);
        cluster.extend(link.iter().flat_map(|rate| ["--bandwidth", rate]));
        let got = rows_and_checksum(&skewjoin(path, &cluster), "two processes");
        assert_eq!(got, expected, "{link:?}");
        let metrics = read("m.json");
        assert_eq!(metrics["strategy"], strategy, "{link:?}: {metrics}");
        let reason = metrics["strategy_reason"].as_str().unwrap();
        assert_eq!(
            reason.contains("on the link given"),
            link.is_some(),
            "{reason}"
        );
    }
}

/// A cluster writes one part per worker and a manifest; the parts hold exactly the rows of a
/// one-process output file, all columns or those chosen, and the manifest's counts add up.
/// Each process's share is several row groups, which its two workers read at once.
#[test]
fn a_cluster_output_is_the_rows_of_a_one_process_output() {
    let dir = TempDir::new().unwrap();
    let path = dir.path();
    // Five row groups of at most 64 Ki rows.
    gen(
        path,
        "d",
        &[
            "--rows", "300000", "--keys", "180000", "--skew", "0.5", "--noise", "0.2",
        ],
    );
    let join = [
        "join",
        "d/left.parquet",
        "d/right.parquet",
        "--on",
        "key",
        "--strategy",
        "am",
    ];
    // Every column of a full join; chosen columns of an inner join, one side giving none (the
    // rows a process sends each other then carry no column).
    let runs: [(&str, &[&str]); 3] = [
        ("full", &[]),
        (
            "inner",
            &["--left-columns", "value", "--right-columns", "id"],
        ),
        ("inner", &["--select", "key"]),
    ];
    for (how, columns) in runs {
        let what = format!("{how} {columns:?}");
        let _ = std::fs::remove_file(path.join("one.parquet"));
        let _ = std::fs::remove_dir_all(path.join("out.parquet"));
        let mut one = join.to_vec();
        one.extend(["--how", how]);
        one.extend(columns);
        one.extend(["--workers", "2", "-o", "one.parquet"]);
        let output = skewjoin(path, &one);
        assert!(output.status.success(), "{what}: {}", text(&output.stderr));
        let mut cluster = vec!["cluster", "--processes", "2", "--"];
        cluster.extend(join);
        cluster.extend(["--how", how]);
        cluster.extend(columns);
        cluster.extend(["--workers", "2", "-o", "out.parquet"]);
        let output = skewjoin(path, &cluster);
        assert!(output.status.success(), "{what}: {}", text(&output.stderr));

        let manifest: Value = serde_json::from_str(
            &std::fs::read_to_string(path.join("out.parquet/_manifest.json")).unwrap(),
        )
        .unwrap();
        let parts = manifest["parts"].as_array().unwrap();
        assert_eq!(parts.len(), 4, "{what}: one part per worker: {manifest}");
        let part_rows: u64 = parts.iter().map(|p| p["rows"].as_u64().unwrap()).sum();
        assert_eq!(manifest["rows"].as_u64().unwrap(), part_rows);
        let files: Vec<_> = parts
            .iter()
            .map(|p| path.join("out.parquet").join(p["file"].as_str().unwrap()))
            .collect();
        let got = sorted_parquet_rows(&files);
        let expected = sorted_parquet_rows(&[path.join("one.parquet")]);
        assert_eq!(got.len() as u64, part_rows, "{what}");
        assert!(expected.len() > 50_000, "{what}: {}", expected.len());
        let width = if columns.is_empty() {
            6
        } else {
            columns.len() / 2
        };
        assert_eq!(expected[0].len(), width, "{what}: the chosen columns");
        assert!(
            got == expected,
            "{what}: the parts differ from the one-process output"
        );
    }
}

/// Each process reads its share while it joins, so a corrupt data page (the footer is fine) is
/// found mid-join by the process whose share holds it: the cluster stops with that process's
/// input error (exit code 3), and leaves neither a manifest nor a part, nor the directory it
/// created for them.
#[test]
fn a_corrupt_page_found_by_one_process_stops_the_cluster() {
    let dir = TempDir::new().unwrap();
    let path = dir.path();
    gen(path, "d", &["--rows", "300000", "--keys", "1000"]);
    let left = path.join("d/left.parquet");
    let mut bytes = std::fs::read(&left).unwrap();
    // Three quarters in: inside the second process's row groups.
    let at = bytes.len() * 3 / 4;
    bytes[at..at + 8192].fill(0xA5);
    std::fs::write(&left, &bytes).unwrap();
    // A directory the user made is theirs: a failed run leaves it, empty.
    std::fs::create_dir(path.join("mine.parquet")).unwrap();
    for (strategy, out) in [
        ("shuffle", "out.parquet"),
        ("am", "out.parquet"),
        ("shuffle", "mine.parquet"),
    ] {
        let output = skewjoin(
            path,
            &[
                "cluster",
                "--processes",
                "2",
                "--",
                "join",
                "d/left.parquet",
                "d/right.parquet",
                "--on",
                "key",
                "--strategy",
                strategy,
                "--workers",
                "1",
                "-o",
                out,
            ],
        );
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(3), "{strategy}: {stderr}");
        assert!(
            stderr.contains("d/left.parquet") && stderr.contains("corrupt"),
            "{strategy}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{strategy}: {stderr}");
        // No output at all: a directory the run created went with the parts.
        let left: Vec<String> = std::fs::read_dir(path.join(out))
            .map(|entries| {
                entries
                    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        assert!(left.is_empty(), "{strategy}: {left:?}");
        assert_eq!(
            path.join(out).exists(),
            out == "mine.parquet",
            "{strategy} {out}"
        );
    }
}

/// Killing one process mid-join makes the other exit with code 5 within seconds, and it leaves
/// neither a manifest nor a finished part of its own.
#[test]
fn a_dead_process_stops_the_others() {
    let dir = TempDir::new().unwrap();
    let path = dir.path();
    // 50 keys of 4,000 rows a side: 800 million output rows, minutes of CSV writing.
    gen(
        path,
        "d",
        &["--rows", "200000", "--keys", "50", "--skew", "0"],
    );
    let hosts = hostfile(path, 2);
    let args = |process: &'static str| {
        vec![
            "join",
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
            "--processes",
            "2",
            "--process",
            process,
            "--hostfile",
            &hosts,
        ]
        .into_iter()
        .map(str::to_string)
        .collect::<Vec<_>>()
    };
    let first_args = args("0");
    let second_args = args("1");
    let first_args: Vec<&str> = first_args.iter().map(String::as_str).collect();
    let second_args: Vec<&str> = second_args.iter().map(String::as_str).collect();
    let mut first = spawn(path, &first_args);
    let mut second = spawn(path, &second_args);
    // Wait until both are writing their parts.
    let start = Instant::now();
    // Parts are written in a directory of the run beside out.csv, moved into place when done.
    let staged = || staged_dirs(path, "out.csv");
    let writing = || {
        staged()
            .iter()
            .flat_map(|dir| std::fs::read_dir(dir).unwrap())
            .filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                name.to_string_lossy().ends_with(".tmp")
            })
            .count()
            == 2
    };
    while !writing() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the processes never started writing"
        );
        assert!(first.try_wait().unwrap().is_none(), "process 0 ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    second.kill().unwrap();
    second.wait().unwrap();
    let killed = Instant::now();
    let status = loop {
        if let Some(status) = first.try_wait().unwrap() {
            break status;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(20),
            "process 0 still runs 20 s after process 1 died"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = first.wait_with_output().unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(status.code(), Some(5), "{stderr}");
    assert!(stderr.contains("lost the connection"), "{stderr}");
    assert!(!path.join("out.csv").exists());
    let left: Vec<String> = staged()
        .iter()
        .flat_map(|dir| std::fs::read_dir(dir).unwrap())
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    // Process 1 was killed outright and could not remove its temporary file; nothing else stays.
    assert!(
        left.iter()
            .all(|name| name.starts_with(".part-00001") && name.ends_with(".tmp")),
        "{left:?}"
    );
}

/// A process whose peers never come exits with code 5 after --connect-timeout.
#[test]
fn a_missing_process_times_out() {
    let dir = TempDir::new().unwrap();
    let path = dir.path();
    gen(path, "d", &["--rows", "1000", "--keys", "100"]);
    let hosts = hostfile(path, 2);
    let start = Instant::now();
    let output = skewjoin(
        path,
        &[
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
            "0",
            "--hostfile",
            &hosts,
            "--connect-timeout",
            "1",
        ],
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(5), "{stderr}");
    assert!(
        stderr.contains("did not all connect within 1 s"),
        "{stderr}"
    );
    assert!(start.elapsed() < Duration::from_secs(30));
}

/// Processes started with different arguments (here, join types) both refuse to run.
#[test]
fn processes_with_different_arguments_refuse_to_run() {
    let dir = TempDir::new().unwrap();
    let path = dir.path();
    gen(path, "d", &["--rows", "1000", "--keys", "100"]);
    // A join type, and a link rate (one process told of a slow link, the other not).
    let cases: [([&[&str]; 2], &str); 2] = [
        ([&["--how", "inner"], &["--how", "full"]], "--how: "),
        ([&[], &["--bandwidth", "10mbit"]], "--bandwidth: "),
    ];
    for (differing, needle) in cases {
        let hosts = hostfile(path, 2);
        let children: Vec<Child> = ["0", "1"]
            .into_iter()
            .zip(differing)
            .map(|(process, extra)| {
                let mut args = vec![
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
                    &hosts,
                ];
                args.extend_from_slice(extra);
                spawn(path, &args)
            })
            .collect();
        for child in children {
            let output = child.wait_with_output().unwrap();
            let stderr = text(&output.stderr);
            assert_eq!(output.status.code(), Some(5), "{stderr}");
            assert!(stderr.contains("different join arguments"), "{stderr}");
            assert!(stderr.contains(needle), "{needle}: {stderr}");
        }
    }
}

#[test]
fn bad_cluster_arguments_are_usage_errors() {
    let dir = TempDir::new().unwrap();
    let path = dir.path();
    gen(path, "d", &["--rows", "1000", "--keys", "100"]);
    let hosts = hostfile(path, 2);
    let cases: BTreeMap<&str, (Vec<&str>, &str)> = BTreeMap::from([
        (
            "hostfile of 2 for 3 processes",
            (
                vec!["--processes", "3", "--process", "0", "--hostfile", &hosts],
                "lists 2 addresses",
            ),
        ),
        (
            "process out of range",
            (
                vec!["--processes", "2", "--process", "2", "--hostfile", &hosts],
                "out of range",
            ),
        ),
        (
            "metrics onto an input",
            (
                vec![
                    "--processes",
                    "2",
                    "--process",
                    "0",
                    "--hostfile",
                    &hosts,
                    "--metrics",
                    "d/left.parquet",
                ],
                "is also an input file",
            ),
        ),
        (
            "fewer partitions than workers",
            (
                vec![
                    "--processes",
                    "2",
                    "--process",
                    "0",
                    "--hostfile",
                    &hosts,
                    "-p",
                    "1",
                ],
                "at least 2 partitions",
            ),
        ),
        (
            "a link rate that is not one",
            (
                vec![
                    "--processes",
                    "2",
                    "--process",
                    "0",
                    "--hostfile",
                    &hosts,
                    "--bandwidth",
                    "fast",
                ],
                "such as 100mbit",
            ),
        ),
        (
            // Refused before connecting: no peer is running, so a refusal after the cluster
            // formed would wait out the connect timeout and exit with another code.
            "a plain broadcast of a full join",
            (
                vec![
                    "--processes",
                    "2",
                    "--process",
                    "0",
                    "--hostfile",
                    &hosts,
                    "--how",
                    "full",
                    "--strategy",
                    "broadcast",
                ],
                "--strategy shuffle",
            ),
        ),
    ]);
    for (what, (extra, needle)) in cases {
        let mut args = vec![
            "join",
            "d/left.parquet",
            "d/right.parquet",
            "--on",
            "key",
            "-w",
            "1",
        ];
        args.extend(extra);
        let output = skewjoin(path, &args);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{what}: {stderr}");
        assert!(stderr.contains(needle), "{what}: {stderr}");
    }
    let output = skewjoin(
        path,
        &["cluster", "--processes", "2", "--", "gen", "--out", "x"],
    );
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    // One --process-metrics file for processes on one machine would be overwritten by each.
    let output = skewjoin(
        path,
        &[
            "cluster",
            "--processes",
            "2",
            "--",
            "join",
            "d/left.parquet",
            "d/right.parquet",
            "--on",
            "key",
            "--process-metrics",
            "p.json",
        ],
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("put {process} in the path"), "{stderr}");
    assert!(!path.join("p.json").exists());
}
