//! End-to-end tests of the `skewjoin` binary: every join type, strategy and output format on
//! small hand-written files checked row by row against a nested-loop join; format independence
//! of `rows`/`checksum`; the metrics document; error exit codes and messages; `demo`; and the
//! determinism of `gen`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::DataType;
use arrow::ipc::reader::FileReader;
use arrow::ipc::writer::FileWriter;
use arrow::record_batch::RecordBatchReader;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use serde_json::Value;
use tempfile::TempDir;

mod common;
use common::text_rows;

// ---------------------------------------------------------------------------------------------
// Running the binary
// ---------------------------------------------------------------------------------------------

/// What one run of the binary did.
struct Run {
    args: Vec<String>,
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    /// Asserts a zero exit status and returns the run.
    fn success(self) -> Run {
        assert_eq!(
            self.code,
            Some(0),
            "skewjoin {:?} failed\nstdout:\n{}\nstderr:\n{}",
            self.args,
            self.stdout,
            self.stderr
        );
        self
    }

    /// Asserts exit status `code` and an error message on stderr containing every one of
    /// `needles`; returns the message.
    fn fails(&self, code: i32, needles: &[&str]) -> &str {
        assert_eq!(
            self.code,
            Some(code),
            "skewjoin {:?}: expected exit code {code}\nstdout:\n{}\nstderr:\n{}",
            self.args,
            self.stdout,
            self.stderr
        );
        assert!(
            self.stderr.contains("skewjoin: error:"),
            "skewjoin {:?}: no error line on stderr:\n{}",
            self.args,
            self.stderr
        );
        // Bad input is an error message, never a panic, even one that was caught.
        assert!(
            !self.stderr.contains("panicked"),
            "skewjoin {:?}: a panic reached stderr:\n{}",
            self.args,
            self.stderr
        );
        for needle in needles {
            assert!(
                self.stderr.contains(needle),
                "skewjoin {:?}: stderr lacks {needle:?}:\n{}",
                self.args,
                self.stderr
            );
        }
        &self.stderr
    }

    /// The value of a `name<TAB>value` line on stdout (`rows`, `checksum`).
    fn stdout_field(&self, name: &str) -> String {
        let prefix = format!("{name}\t");
        let mut found = self
            .stdout
            .lines()
            .filter_map(|line| line.strip_prefix(&prefix));
        let value = found
            .next()
            .unwrap_or_else(|| panic!("no {name:?} line in stdout:\n{}", self.stdout));
        assert!(
            found.next().is_none(),
            "two {name:?} lines:\n{}",
            self.stdout
        );
        value.to_string()
    }
}

/// Runs `skewjoin args...` in directory `dir`, so that relative file names in `args` (and in the
/// binary's messages) are names in `dir`.
fn skewjoin(dir: &Path, args: &[&str]) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_skewjoin"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the skewjoin binary runs");
    Run {
        args: args.iter().map(|arg| arg.to_string()).collect(),
        code: output.status.code(),
        stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    }
}

/// The names of the entries of `dir`.
fn listing(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|name| name.to_string()).collect()
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Tables as rows of optional strings
// ---------------------------------------------------------------------------------------------

/// A row with every value as text; `None` is NULL.
type Row = common::TextRow;

/// Column names and rows.
#[derive(Clone, Debug)]
struct Table {
    columns: Vec<String>,
    rows: Vec<Row>,
}

impl Table {
    fn column(&self, name: &str) -> usize {
        self.columns
            .iter()
            .position(|column| column == name)
            .unwrap_or_else(|| panic!("no column {name} in {:?}", self.columns))
    }

    /// The rows sorted, so that two multisets of rows compare equal exactly when they are.
    fn sorted_rows(&self) -> Vec<Row> {
        let mut rows = self.rows.clone();
        rows.sort();
        rows
    }
}

/// Parses simple CSV (no quoting; an empty field is NULL) with a header row.
fn parse_csv(text: &str) -> Table {
    let mut lines = text.lines();
    let header = lines.next().expect("a header line");
    let columns: Vec<String> = header.split(',').map(str::to_string).collect();
    let rows: Vec<Row> = lines
        .map(|line| {
            let row: Row = line
                .split(',')
                .map(|field| (!field.is_empty()).then(|| field.to_string()))
                .collect();
            assert_eq!(row.len(), columns.len(), "line {line:?} of\n{text}");
            row
        })
        .collect();
    Table { columns, rows }
}

/// Reads an output file back by its extension, with the data type of each column (`None` for
/// CSV, which has no types).
fn read_output(path: &Path) -> (Table, Option<Vec<DataType>>) {
    let extension = path.extension().unwrap().to_str().unwrap();
    let (schema, batches) = match extension {
        "csv" => return (parse_csv(&std::fs::read_to_string(path).unwrap()), None),
        "parquet" => {
            let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
                .expect("a valid Parquet file");
            let schema = builder.schema().clone();
            let batches: Vec<RecordBatch> = builder.build().unwrap().map(Result::unwrap).collect();
            (schema, batches)
        }
        "arrow" => {
            let reader = FileReader::try_new(File::open(path).unwrap(), None)
                .expect("a valid Arrow IPC file");
            let schema = reader.schema();
            let batches: Vec<RecordBatch> = reader.map(Result::unwrap).collect();
            (schema, batches)
        }
        other => panic!("no reader for .{other}"),
    };
    let columns = schema.fields().iter().map(|f| f.name().clone()).collect();
    let types = schema
        .fields()
        .iter()
        .map(|f| f.data_type().clone())
        .collect();
    (
        Table {
            columns,
            rows: text_rows(&batches),
        },
        Some(types),
    )
}

// ---------------------------------------------------------------------------------------------
// The reference join
// ---------------------------------------------------------------------------------------------

const HOWS: [&str; 8] = [
    "inner",
    "left",
    "right",
    "full",
    "semi",
    "anti",
    "right-semi",
    "right-anti",
];

/// The output of `left <how> right` on `left_key = right_key` by a nested loop, with SQL
/// semantics (a NULL key matches nothing) and skewjoin's column naming.
fn reference_join(
    how: &str,
    left: &Table,
    left_key: &str,
    right: &Table,
    right_key: &str,
) -> Table {
    let (lk, rk) = (left.column(left_key), right.column(right_key));
    let matches = |l: &Row, r: &Row| l[lk].is_some() && l[lk] == r[rk];
    let left_nulls: Row = vec![None; left.columns.len()];
    let right_nulls: Row = vec![None; right.columns.len()];
    let left_matched: Vec<bool> = left
        .rows
        .iter()
        .map(|l| right.rows.iter().any(|r| matches(l, r)))
        .collect();
    let right_matched: Vec<bool> = right
        .rows
        .iter()
        .map(|r| left.rows.iter().any(|l| matches(l, r)))
        .collect();

    let mut rows = Vec::new();
    let pairs = matches!(how, "inner" | "left" | "right" | "full");
    if pairs {
        for l in &left.rows {
            for r in &right.rows {
                if matches(l, r) {
                    rows.push([l.clone(), r.clone()].concat());
                }
            }
        }
    }
    if matches!(how, "left" | "full") {
        for (l, _) in left.rows.iter().zip(&left_matched).filter(|(_, m)| !**m) {
            rows.push([l.clone(), right_nulls.clone()].concat());
        }
    }
    if matches!(how, "right" | "full") {
        for (r, _) in right.rows.iter().zip(&right_matched).filter(|(_, m)| !**m) {
            rows.push([left_nulls.clone(), r.clone()].concat());
        }
    }
    let keep = |rows: &[Row], matched: &[bool], want: bool| -> Vec<Row> {
        rows.iter()
            .zip(matched)
            .filter(|(_, m)| **m == want)
            .map(|(row, _)| row.clone())
            .collect()
    };
    let (columns, rows) = match how {
        "semi" => (left.columns.clone(), keep(&left.rows, &left_matched, true)),
        "anti" => (left.columns.clone(), keep(&left.rows, &left_matched, false)),
        "right-semi" => (
            right.columns.clone(),
            keep(&right.rows, &right_matched, true),
        ),
        "right-anti" => (
            right.columns.clone(),
            keep(&right.rows, &right_matched, false),
        ),
        _ => {
            let mut columns = left.columns.clone();
            for name in &right.columns {
                if left.columns.contains(name) {
                    columns.push(format!("{name}_right"));
                } else {
                    columns.push(name.clone());
                }
            }
            (columns, rows)
        }
    };
    Table { columns, rows }
}

/// The side `--strategy broadcast` copies: the smaller side whose unmatched rows the join type
/// does not need to know about (the right side on a tie); `None` when neither may be copied.
fn broadcast_side(how: &str, left_rows: usize, right_rows: usize) -> Option<&'static str> {
    let left_ok = !matches!(how, "left" | "full" | "semi" | "anti");
    let right_ok = !matches!(how, "right" | "full" | "right-semi" | "right-anti");
    match (left_ok, right_ok) {
        (true, true) if left_rows < right_rows => Some("left"),
        (_, true) => Some("right"),
        (true, false) => Some("left"),
        (false, false) => None,
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Every join type, strategy and output format on hand-written CSV
// ---------------------------------------------------------------------------------------------

/// String keys: a hot key (3 x 4 pairs), a NULL key on each side (empty field), keys on one side
/// only, and `name` in both inputs so that the right one is renamed.
const LEFT_CSV: &str = "\
k,lv,name
apple,1,L1
apple,2,L2
hot,3,L3
hot,4,L4
hot,5,L5
,6,L6
lonly,7,L7
";

const RIGHT_CSV: &str = "\
k,rv,name
hot,10,R1
hot,11,R2
hot,12,R3
hot,13,R4
apple,14,R5
,15,R6
ronly,16,R7
ronly,17,R8
";

fn join_matrix(extension: &str) {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "left.csv", LEFT_CSV);
    write(dir.path(), "right.csv", RIGHT_CSV);
    let left = parse_csv(LEFT_CSV);
    let right = parse_csv(RIGHT_CSV);
    let output = format!("out.{extension}");
    for how in HOWS {
        let expected = reference_join(how, &left, "k", &right, "k");
        assert!(
            !expected.rows.is_empty(),
            "{how}: the data should give every join type some rows"
        );
        for strategy in ["shuffle", "broadcast", "auto"] {
            let context = format!("--how {how} --strategy {strategy} --output {output}");
            let run = skewjoin(
                dir.path(),
                &[
                    "join",
                    "left.csv",
                    "right.csv",
                    "--on",
                    "k",
                    "--how",
                    how,
                    "--strategy",
                    strategy,
                    "--workers",
                    "3",
                    "--partitions",
                    "5",
                    "--output",
                    &output,
                    "--metrics",
                    "m.json",
                ],
            );
            let side = broadcast_side(how, left.rows.len(), right.rows.len());
            if strategy == "broadcast" && side.is_none() {
                run.fails(
                    2,
                    &["broadcast", &format!("{how} join"), "--strategy shuffle"],
                );
                assert_eq!(
                    listing(dir.path()),
                    names(&["left.csv", "right.csv"]),
                    "{context}: a refused join leaves no files behind"
                );
                continue;
            }
            let run = run.success();
            assert!(
                run.stdout.is_empty(),
                "{context}: with --output nothing goes to stdout, got:\n{}",
                run.stdout
            );
            let (actual, types) = read_output(&dir.path().join(&output));
            assert_eq!(actual.columns, expected.columns, "{context}: column names");
            assert_eq!(
                actual.sorted_rows(),
                expected.sorted_rows(),
                "{context}: output rows"
            );
            if let Some(types) = types {
                // Key and name columns stay strings, lv/rv stay integers.
                for (column, data_type) in actual.columns.iter().zip(&types) {
                    let want = if column.starts_with("lv") || column.starts_with("rv") {
                        DataType::Int64
                    } else {
                        DataType::Utf8
                    };
                    assert_eq!(data_type, &want, "{context}: type of {column}");
                }
            }
            let metrics = read_metrics(&dir.path().join("m.json"));
            assert_eq!(metrics["how"], how, "{context}");
            assert_eq!(metrics["output_rows"], expected.rows.len(), "{context}");
            let received = check_partitions(&metrics, 5);
            if strategy == "shuffle" && how == "full" {
                // A full join needs every row, NULL keys included, so all of them are sent.
                assert_eq!(
                    received as usize,
                    left.rows.len() + right.rows.len(),
                    "{context}"
                );
            }
            if strategy == "broadcast" {
                assert_eq!(metrics["strategy"], "broadcast", "{context}");
                assert_eq!(metrics["broadcast_side"], side.unwrap(), "{context}");
            } else if strategy == "shuffle" {
                assert_eq!(metrics["strategy"], "shuffle", "{context}");
                assert!(metrics.get("broadcast_side").is_none(), "{context}");
            }
            assert_eq!(
                listing(dir.path()),
                names(&["left.csv", "right.csv", &output, "m.json"]),
                "{context}: no temporary files left behind"
            );
            std::fs::remove_file(dir.path().join(&output)).unwrap();
            std::fs::remove_file(dir.path().join("m.json")).unwrap();
        }
    }
}

#[test]
fn every_join_type_and_strategy_written_as_csv() {
    join_matrix("csv");
}

#[test]
fn every_join_type_and_strategy_written_as_parquet() {
    join_matrix("parquet");
}

#[test]
fn every_join_type_and_strategy_written_as_arrow() {
    join_matrix("arrow");
}

#[test]
fn reference_join_sanity() {
    // The reference itself, on the data above, by hand: apple 2x1, hot 3x4.
    let left = parse_csv(LEFT_CSV);
    let right = parse_csv(RIGHT_CSV);
    let count = |how| reference_join(how, &left, "k", &right, "k").rows.len();
    assert_eq!(count("inner"), 2 + 12);
    assert_eq!(count("left"), 14 + 2); // NULL and lonly
    assert_eq!(count("right"), 14 + 3); // NULL and two ronly
    assert_eq!(count("full"), 14 + 2 + 3);
    assert_eq!(count("semi"), 5);
    assert_eq!(count("anti"), 2);
    assert_eq!(count("right-semi"), 5);
    assert_eq!(count("right-anti"), 3);
}

#[test]
fn string_keys_with_no_match_give_an_empty_file_with_a_header() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "left.csv", LEFT_CSV);
    write(dir.path(), "right.csv", RIGHT_CSV);
    // `name` values never match: L1.. against R1..
    skewjoin(
        dir.path(),
        &[
            "join",
            "left.csv",
            "right.csv",
            "--on",
            "name",
            "--output",
            "out.csv",
            "-w",
            "3",
            "-p",
            "5",
        ],
    )
    .success();
    let text = std::fs::read_to_string(dir.path().join("out.csv")).unwrap();
    assert_eq!(text, "k,lv,name,k_right,rv,name_right\n");
}

// ---------------------------------------------------------------------------------------------
// 2. The same data in every format gives the same rows and checksum
// ---------------------------------------------------------------------------------------------

/// `skewjoin gen` into `dir/sub`; returns the exact row count of each join type it printed.
fn gen(dir: &Path, sub: &str, format: &str, seed: &str) -> BTreeMap<String, u64> {
    let run = skewjoin(
        dir,
        &[
            "gen", "--format", format, "--rows", "2000", "--keys", "50", "--skew", "1.0",
            "--noise", "0.1", "--seed", seed, "--out", sub,
        ],
    )
    .success();
    assert!(
        run.stdout.contains(&format!("{sub}/left.{format}"))
            && run.stdout.contains(&format!("{sub}/right.{format}")),
        "gen names what it wrote:\n{}",
        run.stdout
    );
    printed_counts(&run.stdout)
}

/// The exact row count of each join type that `gen` printed.
fn printed_counts(stdout: &str) -> BTreeMap<String, u64> {
    let counts_at = stdout
        .lines()
        .position(|line| line == "exact output rows of each join type:")
        .unwrap_or_else(|| panic!("no counts in gen output:\n{stdout}"));
    let counts: BTreeMap<String, u64> = stdout.lines().collect::<Vec<_>>()[counts_at + 1..]
        .iter()
        .map(|line| {
            let mut parts = line.split_whitespace();
            let name = parts.next().unwrap().to_string();
            let rows = parts.next().unwrap().parse().unwrap();
            (name, rows)
        })
        .collect();
    assert_eq!(
        counts.keys().map(String::as_str).collect::<BTreeSet<_>>(),
        HOWS.into_iter().collect::<BTreeSet<_>>(),
        "gen reports every join type"
    );
    counts
}

#[test]
fn every_input_format_gives_the_same_rows_and_checksum() {
    let dir = TempDir::new().unwrap();
    let counts = gen(dir.path(), "csv", "csv", "7");
    for format in ["parquet", "arrow"] {
        assert_eq!(gen(dir.path(), format, format, "7"), counts, "{format}");
    }
    // With noise every outer join adds rows, so the counts tell the join types apart.
    assert!(counts["inner"] < counts["left"] && counts["left"] < counts["full"]);
    assert!(counts["inner"] < counts["right"] && counts["right"] < counts["full"]);

    let pairs = [
        ("csv/left.csv", "csv/right.csv"),
        ("parquet/left.parquet", "parquet/right.parquet"),
        ("arrow/left.arrow", "arrow/right.arrow"),
        ("csv/left.csv", "parquet/right.parquet"),
        ("arrow/left.arrow", "csv/right.csv"),
        ("parquet/left.parquet", "arrow/right.arrow"),
    ];
    for how in ["inner", "left", "full"] {
        let mut checksums = BTreeSet::new();
        for (i, (left, right)) in pairs.iter().enumerate() {
            // Vary the strategy too: the checksum must not depend on it.
            let strategy = if how == "full" || i % 2 == 0 {
                "shuffle"
            } else {
                "broadcast"
            };
            let run = skewjoin(
                dir.path(),
                &[
                    "join", left, right, "--on", "key", "--how", how, "-s", strategy, "-w", "3",
                    "-p", "5",
                ],
            )
            .success();
            assert_eq!(
                run.stdout_field("rows"),
                counts[how].to_string(),
                "{how} join of {left} and {right}"
            );
            let checksum = run.stdout_field("checksum");
            assert_eq!(checksum.len(), 16, "{checksum}");
            assert!(
                checksum.chars().all(|c| c.is_ascii_hexdigit()),
                "{checksum}"
            );
            checksums.insert(checksum);
        }
        // Writing the output sums every row on its own; counting alone sums a key's pairs a
        // group at a time. Both must give the same checksum.
        skewjoin(
            dir.path(),
            &[
                "join",
                "parquet/left.parquet",
                "parquet/right.parquet",
                "--on",
                "key",
                "--how",
                how,
                "-w",
                "2",
                "-o",
                &format!("written-{how}.parquet"),
                "--metrics",
                "written.json",
            ],
        )
        .success();
        let written = read_metrics(&dir.path().join("written.json"));
        let written = written["checksum"]
            .as_str()
            .expect("a checksum in the metrics");
        checksums.insert(written.to_string());
        assert_eq!(checksums.len(), 1, "{how}: checksums differ: {checksums:?}");
    }
}

/// A Parquet file of several row groups, or an Arrow IPC file of several record batches, is
/// read by every worker at once, each a run of row groups or batches, whether or not they are
/// whole 64 Ki-row chunks, also when the output keeps the rows: the output is the one a CSV copy
/// of the same data gives, which is read whole by one worker.
#[test]
fn row_groups_and_record_batches_read_by_every_worker_give_the_rows_of_one_read() {
    let dir = TempDir::new().unwrap();
    // 200,000 rows: three row groups of 64 Ki rows, and a short one.
    let gen_in = |format: &str| {
        skewjoin(
            dir.path(),
            &[
                "gen", "--format", format, "--rows", "200000", "--keys", "200000", "--skew", "0",
                "--noise", "0.1", "--seed", "3", "--out", format,
            ],
        )
        .success();
    };
    gen_in("parquet");
    gen_in("csv");
    // The Parquet files (row groups of 64 Ki rows) copied to Arrow IPC files of 30,000-row
    // record batches (`gen` writes one batch): cut at every batch, none at a chunk's end.
    std::fs::create_dir(dir.path().join("arrow")).unwrap();
    for side in ["left", "right"] {
        let reader = ParquetRecordBatchReaderBuilder::try_new(
            File::open(dir.path().join(format!("parquet/{side}.parquet"))).unwrap(),
        )
        .unwrap()
        .with_batch_size(30_000)
        .build()
        .unwrap();
        let path = dir.path().join(format!("arrow/{side}.arrow"));
        let mut writer =
            FileWriter::try_new(File::create(path).unwrap(), &reader.schema()).unwrap();
        let mut batches = 0;
        for batch in reader {
            writer.write(&batch.unwrap()).unwrap();
            batches += 1;
        }
        writer.finish().unwrap();
        assert_eq!(batches, 7, "{side}");
    }
    for (how, strategy, workers) in [("full", "shuffle", "3"), ("left", "am", "2")] {
        let mut outputs = Vec::new();
        for format in ["csv", "parquet", "arrow"] {
            let left = format!("{format}/left.{format}");
            let right = format!("{format}/right.{format}");
            let out = format!("{how}-{format}.parquet");
            let args = [
                "join", &left, &right, "--on", "key", "--how", how, "-s", strategy, "-w", workers,
            ];
            // Counted only, then written.
            let counted = skewjoin(dir.path(), &args).success();
            let mut written_args = args.to_vec();
            written_args.extend(["-o", &out]);
            skewjoin(dir.path(), &written_args).success();
            let rows = counted.stdout_field("rows");
            let (table, _) = read_output(&dir.path().join(&out));
            assert_eq!(table.rows.len().to_string(), rows, "{how} {format}");
            outputs.push((rows, counted.stdout_field("checksum"), table.sorted_rows()));
        }
        assert!(
            outputs[0] == outputs[1],
            "{how}: a Parquet side read in parts differs"
        );
        assert!(
            outputs[0] == outputs[2],
            "{how}: an Arrow IPC side read in parts differs"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 3. The metrics document
// ---------------------------------------------------------------------------------------------

fn read_metrics(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).expect("metrics are JSON")
}

fn u64_field(value: &Value, name: &str) -> u64 {
    value[name]
        .as_u64()
        .unwrap_or_else(|| panic!("{name} is not an unsigned integer in {value}"))
}

fn f64_field(value: &Value, name: &str) -> f64 {
    value[name]
        .as_f64()
        .unwrap_or_else(|| panic!("{name} is not a number in {value}"))
}

/// Checks the per-partition figures against the totals; returns the sum of input records.
fn check_partitions(metrics: &Value, partitions: usize) -> u64 {
    let per_partition = metrics["per_partition"]
        .as_array()
        .expect("per_partition is an array");
    assert_eq!(per_partition.len(), partitions, "{metrics}");
    let inputs: Vec<u64> = per_partition
        .iter()
        .map(|p| u64_field(p, "input_records"))
        .collect();
    let outputs: Vec<u64> = per_partition
        .iter()
        .map(|p| u64_field(p, "output_rows"))
        .collect();
    for (p, &input) in per_partition.iter().zip(&inputs) {
        let peak = u64_field(p, "peak_records");
        assert!(
            peak <= input,
            "a partition cannot hold more than it got: {p}"
        );
    }
    assert_eq!(
        outputs.iter().sum::<u64>(),
        u64_field(metrics, "output_rows"),
        "{metrics}"
    );
    let imbalance = |values: &[u64]| {
        let max = *values.iter().max().unwrap() as f64;
        let mean = values.iter().sum::<u64>() as f64 / values.len() as f64;
        max / mean
    };
    let input_imbalance = f64_field(metrics, "input_imbalance");
    let output_imbalance = f64_field(metrics, "output_imbalance");
    assert!(input_imbalance >= 1.0, "{metrics}");
    assert!(output_imbalance >= 1.0, "{metrics}");
    assert!(
        (input_imbalance - imbalance(&inputs)).abs() < 1e-9,
        "{metrics}"
    );
    assert!(
        (output_imbalance - imbalance(&outputs)).abs() < 1e-9,
        "{metrics}"
    );
    let received: u64 = inputs.iter().sum();
    assert_eq!(u64_field(metrics, "records_received"), received);
    let input_rows = u64_field(metrics, "left_rows") + u64_field(metrics, "right_rows");
    assert!(
        (f64_field(metrics, "copying_factor") - received as f64 / input_rows as f64).abs() < 1e-9,
        "{metrics}"
    );
    received
}

#[test]
fn metrics_describe_the_run() {
    let dir = TempDir::new().unwrap();
    let counts = gen(dir.path(), "d", "csv", "7");
    let left_rows = parse_csv(&std::fs::read_to_string(dir.path().join("d/left.csv")).unwrap())
        .rows
        .len() as u64;
    let right_rows = parse_csv(&std::fs::read_to_string(dir.path().join("d/right.csv")).unwrap())
        .rows
        .len() as u64;
    assert_eq!((left_rows, right_rows), (2000, 2000));

    let join = |how: &str, strategy: &str| {
        skewjoin(
            dir.path(),
            &[
                "join",
                "d/left.csv",
                "d/right.csv",
                "--on",
                "key",
                "--how",
                how,
                "--strategy",
                strategy,
                "--workers",
                "3",
                "--partitions",
                "5",
                "--metrics",
                "m.json",
            ],
        )
        .success()
    };

    let run = join("left", "shuffle");
    let metrics = read_metrics(&dir.path().join("m.json"));
    assert_eq!(metrics["strategy"], "shuffle");
    assert_eq!(metrics["how"], "left");
    assert_eq!(u64_field(&metrics, "workers"), 3);
    assert_eq!(u64_field(&metrics, "partitions"), 5);
    assert_eq!(u64_field(&metrics, "left_rows"), left_rows);
    assert_eq!(u64_field(&metrics, "right_rows"), right_rows);
    assert_eq!(u64_field(&metrics, "output_rows"), counts["left"]);
    assert_eq!(metrics["checksum"], run.stdout_field("checksum"));
    assert_eq!(run.stdout_field("rows"), counts["left"].to_string());
    assert!(f64_field(&metrics, "elapsed_seconds") >= 0.0);
    assert!(f64_field(&metrics, "read_seconds") >= 0.0);
    assert!(metrics["strategy_reason"].as_str().is_some());
    // A shuffle sends every input record to exactly one partition.
    assert_eq!(check_partitions(&metrics, 5), left_rows + right_rows);
    // The summary on stderr agrees.
    assert!(
        run.stderr.contains("left join, shuffle strategy"),
        "{}",
        run.stderr
    );

    let run = join("inner", "broadcast");
    let metrics = read_metrics(&dir.path().join("m.json"));
    assert_eq!(metrics["strategy"], "broadcast");
    assert_eq!(metrics["broadcast_side"], "right");
    assert_eq!(u64_field(&metrics, "output_rows"), counts["inner"]);
    assert_eq!(metrics["checksum"], run.stdout_field("checksum"));
    // The broadcast side reaches every partition, the other side one partition per record.
    assert_eq!(check_partitions(&metrics, 5), left_rows + 5 * right_rows);
    // 2000 + 5 x 2000 records received for 4000 input rows, in the summary too.
    assert_eq!(f64_field(&metrics, "copying_factor"), 3.0);
    assert!(
        run.stderr
            .contains("records received 12000 (3.00x the input rows)"),
        "{}",
        run.stderr
    );
    assert!(metrics.get("ranges").is_none() && metrics.get("tree_rounds").is_none());

    // VPRP's range table: 2 virtual ranges per partition, round-robin, every record routed once.
    let run = join("inner", "vprp");
    let metrics = read_metrics(&dir.path().join("m.json"));
    assert_eq!(metrics["checksum"], run.stdout_field("checksum"));
    let ranges = metrics["ranges"]["virtual_ranges"].as_array().unwrap();
    assert_eq!(ranges.len(), 10, "{metrics}");
    let mut routed = 0;
    for (index, range) in ranges.iter().enumerate() {
        assert_eq!(u64_field(range, "partition"), index as u64 % 5);
        routed += u64_field(range, "actual_records");
    }
    assert_eq!(routed, left_rows + right_rows);
    assert_eq!(check_partitions(&metrics, 5), routed);
    let runs = metrics["ranges"]["virtual_of_run"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(
        runs,
        metrics["ranges"]["boundaries"].as_array().unwrap().len() + 1
    );
    assert!(
        run.stderr.contains("VPRP ranges: 10 virtual ranges"),
        "{}",
        run.stderr
    );

    // Tree-Join's rounds and AM-Join's classes.
    let run = join("full", "tree");
    let metrics = read_metrics(&dir.path().join("m.json"));
    assert_eq!(u64_field(&metrics, "output_rows"), counts["full"]);
    assert!(u64_field(&metrics, "tree_rounds") >= 1, "{metrics}");
    assert!(metrics["am"]["hot_both"].as_u64().is_some(), "{metrics}");
    assert!(run.stderr.contains("Tree-Join rounds: "), "{}", run.stderr);

    assert_eq!(
        listing(dir.path()),
        names(&["d", "m.json"]),
        "the metrics are written in place, without temporary files left over"
    );
}

// ---------------------------------------------------------------------------------------------
// 4. Bad input
// ---------------------------------------------------------------------------------------------

/// A directory with `files` written into it.
fn dir_with(files: &[(&str, &str)]) -> TempDir {
    let dir = TempDir::new().unwrap();
    for (name, text) in files {
        write(dir.path(), name, text);
    }
    dir
}

/// Runs a join that must fail with `code` and a message containing `needles`, and checks that
/// the directory holds exactly what it held before (no output, no temporary files).
fn join_fails(dir: &TempDir, args: &[&str], code: i32, needles: &[&str]) {
    let before = listing(dir.path());
    let mut all = vec!["join"];
    all.extend_from_slice(args);
    skewjoin(dir.path(), &all).fails(code, needles);
    assert_eq!(
        listing(dir.path()),
        before,
        "skewjoin {all:?} left files behind"
    );
}

const SMALL_LEFT: &str = "id,lv\n1,a\n2,b\n";
const SMALL_RIGHT: &str = "id,rv\n1,x\n3,y\n";

#[test]
fn a_missing_input_file_is_exit_code_3() {
    let dir = dir_with(&[("right.csv", SMALL_RIGHT)]);
    join_fails(
        &dir,
        &["nope.csv", "right.csv", "--on", "id", "-o", "out.csv"],
        3,
        &["nope.csv", "no such file"],
    );
    let dir = dir_with(&[("left.csv", SMALL_LEFT)]);
    join_fails(
        &dir,
        &["left.csv", "gone.parquet", "--on", "id", "-o", "out.csv"],
        3,
        &["gone.parquet", "no such file"],
    );
}

#[test]
fn an_unknown_extension_is_exit_code_2() {
    let dir = dir_with(&[("left.txt", SMALL_LEFT), ("right.csv", SMALL_RIGHT)]);
    join_fails(
        &dir,
        &["left.txt", "right.csv", "--on", "id", "-o", "out.csv"],
        2,
        &["left.txt", "--format"],
    );
    // The same goes for the output.
    let dir = dir_with(&[("left.csv", SMALL_LEFT), ("right.csv", SMALL_RIGHT)]);
    join_fails(
        &dir,
        &["left.csv", "right.csv", "--on", "id", "-o", "out.xlsx"],
        2,
        &["out.xlsx"],
    );
}

#[test]
fn a_missing_key_column_is_exit_code_3() {
    let dir = dir_with(&[("left.csv", SMALL_LEFT), ("right.csv", SMALL_RIGHT)]);
    join_fails(
        &dir,
        &["left.csv", "right.csv", "--on", "ident", "-o", "out.csv"],
        3,
        &["left.csv", "`ident`", "`id`, `lv`"],
    );
    join_fails(
        &dir,
        &[
            "left.csv",
            "right.csv",
            "--left-on",
            "id",
            "--right-on",
            "rid",
            "-o",
            "out.parquet",
        ],
        3,
        &["right.csv", "`rid`", "`id`, `rv`"],
    );
}

#[test]
fn an_integer_key_against_a_string_key_is_exit_code_3() {
    let dir = dir_with(&[
        ("left.csv", "id,lv\n1,a\n2,b\n"),
        ("right.csv", "code,rv\nx1,a\ny2,b\n"),
    ]);
    join_fails(
        &dir,
        &[
            "left.csv",
            "right.csv",
            "--left-on",
            "id",
            "--right-on",
            "code",
            "-o",
            "out.arrow",
        ],
        3,
        &[
            "left.csv column `id` is integer",
            "right.csv column `code` is string",
        ],
    );
}

#[test]
fn an_int32_key_joins_an_int64_key() {
    let dir = dir_with(&[(
        "right.csv",
        "uid,rv\n5,five\n5,cinq\n-2,minus\n9,nine\n,null\n",
    )]);
    let batch = RecordBatch::try_from_iter([
        (
            "id",
            Arc::new(Int32Array::from(vec![Some(5), None, Some(-2), Some(7)])) as ArrayRef,
        ),
        (
            "lv",
            Arc::new(Int64Array::from(vec![50, 0, -20, 70])) as ArrayRef,
        ),
    ])
    .unwrap();
    let mut writer = ArrowWriter::try_new(
        File::create(dir.path().join("left.parquet")).unwrap(),
        batch.schema(),
        None,
    )
    .unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();

    for how in ["inner", "full"] {
        skewjoin(
            dir.path(),
            &[
                "join",
                "left.parquet",
                "right.csv",
                "--left-on",
                "id",
                "--right-on",
                "uid",
                "--how",
                how,
                "-w",
                "3",
                "-p",
                "5",
                "-o",
                "out.parquet",
            ],
        )
        .success();
        let (actual, types) = read_output(&dir.path().join("out.parquet"));
        assert_eq!(actual.columns, ["id", "lv", "uid", "rv"]);
        assert_eq!(types.unwrap()[0], DataType::Int32, "the key keeps its type");
        let left = Table {
            columns: vec!["id".into(), "lv".into()],
            rows: text_rows(std::slice::from_ref(&batch)),
        };
        let right = parse_csv(&std::fs::read_to_string(dir.path().join("right.csv")).unwrap());
        let expected = reference_join(how, &left, "id", &right, "uid");
        assert_eq!(actual.sorted_rows(), expected.sorted_rows(), "{how}");
        if how == "inner" {
            assert_eq!(actual.rows.len(), 3, "5 twice and -2");
        }
    }
}

#[test]
fn a_csv_line_with_the_wrong_field_count_is_exit_code_3() {
    let dir = dir_with(&[
        ("left.csv", "id,lv\n1,a\n2,b\n3,c,extra\n4,d\n"),
        ("right.csv", SMALL_RIGHT),
    ]);
    join_fails(
        &dir,
        &["left.csv", "right.csv", "--on", "id", "-o", "out.csv"],
        3,
        &["left.csv", "line 4", "expected 2 fields, found 3"],
    );
    let dir = dir_with(&[("left.csv", SMALL_LEFT), ("right.csv", "id,rv\n1,x\n2\n")]);
    join_fails(
        &dir,
        &["left.csv", "right.csv", "--on", "id", "-o", "out.csv"],
        3,
        &["right.csv", "line 3", "expected 2 fields, found 1"],
    );
}

#[test]
fn a_corrupt_page_found_while_joining_is_exit_code_3_and_leaves_no_output() {
    // Inputs are read while the join runs, so a bad data page (the footer is fine) is found
    // mid-join: in the join itself (shuffle) or in AM-Join's key statistics before it.
    let dir = TempDir::new().unwrap();
    skewjoin(
        dir.path(),
        &["gen", "--out", "data", "--rows", "300000", "--keys", "1000"],
    )
    .success();
    let left = dir.path().join("data/left.parquet");
    let mut bytes = std::fs::read(&left).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle..middle + 8192].fill(0xA5);
    std::fs::write(&left, &bytes).unwrap();
    for strategy in ["shuffle", "am"] {
        join_fails(
            &dir,
            &[
                "data/left.parquet",
                "data/right.parquet",
                "--on",
                "key",
                "--strategy",
                strategy,
                "--workers",
                "2",
                "-o",
                "out.parquet",
            ],
            3,
            &["data/left.parquet", "corrupt"],
        );
    }
}

#[test]
fn an_output_in_a_missing_directory_is_exit_code_4() {
    let dir = dir_with(&[("left.csv", SMALL_LEFT), ("right.csv", SMALL_RIGHT)]);
    join_fails(
        &dir,
        &[
            "left.csv",
            "right.csv",
            "--on",
            "id",
            "-o",
            "no/such/out.csv",
        ],
        4,
        &["no/such/out.csv", "does not exist"],
    );
    join_fails(
        &dir,
        &[
            "left.csv",
            "right.csv",
            "--on",
            "id",
            "--metrics",
            "no/m.json",
        ],
        4,
        &["no/m.json", "does not exist"],
    );
}

#[test]
fn an_unknown_join_type_is_exit_code_2() {
    let dir = dir_with(&[("left.csv", SMALL_LEFT), ("right.csv", SMALL_RIGHT)]);
    join_fails(
        &dir,
        &[
            "left.csv",
            "right.csv",
            "--on",
            "id",
            "--how",
            "sideways",
            "-o",
            "out.csv",
        ],
        2,
        &["--how", "sideways"],
    );
    join_fails(
        &dir,
        &[
            "left.csv",
            "right.csv",
            "--on",
            "id",
            "--strategy",
            "psychic",
            "-o",
            "out.csv",
        ],
        2,
        &["--strategy", "psychic"],
    );
}

#[test]
fn an_output_that_is_an_input_is_exit_code_2_and_the_input_survives() {
    let dir = dir_with(&[("left.csv", SMALL_LEFT), ("right.csv", SMALL_RIGHT)]);
    for output in ["left.csv", "./right.csv"] {
        join_fails(
            &dir,
            &["left.csv", "right.csv", "--on", "id", "-o", output],
            2,
            &["--output", output, "input"],
        );
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("left.csv")).unwrap(),
        SMALL_LEFT
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("right.csv")).unwrap(),
        SMALL_RIGHT
    );
}

/// `--metrics left.csv` would replace the input with the JSON document.
#[test]
fn metrics_that_are_an_input_are_refused_and_the_input_survives() {
    let dir = dir_with(&[("left.csv", SMALL_LEFT), ("right.csv", SMALL_RIGHT)]);
    join_fails(
        &dir,
        &[
            "left.csv",
            "right.csv",
            "--on",
            "id",
            "--metrics",
            "left.csv",
        ],
        2,
        &["--metrics", "left.csv"],
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("left.csv")).unwrap(),
        SMALL_LEFT
    );
}

/// `--metrics` equal to `--output` would replace the join output with the metrics document.
#[test]
fn metrics_at_the_output_path_are_refused() {
    let dir = dir_with(&[("left.csv", SMALL_LEFT), ("right.csv", SMALL_RIGHT)]);
    join_fails(
        &dir,
        &[
            "left.csv",
            "right.csv",
            "--on",
            "id",
            "-o",
            "out.csv",
            "--metrics",
            "out.csv",
        ],
        2,
        &["--metrics", "out.csv"],
    );
}

// ---------------------------------------------------------------------------------------------
// 5. demo, 6. gen determinism
// ---------------------------------------------------------------------------------------------

#[test]
fn demo_runs_every_strategy_and_they_agree() {
    let dir = TempDir::new().unwrap();
    let run = skewjoin(dir.path(), &["demo", "--rows", "3000", "--keys", "100"]).success();
    let row_of = |label: &str| {
        run.stdout
            .lines()
            .find(|line| line.split_whitespace().next() == Some(label))
            .unwrap_or_else(|| panic!("no {label} line in:\n{}", run.stdout))
            .split_whitespace()
            .skip(1)
            .take(2)
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let shuffle = row_of("shuffle");
    let broadcast = row_of("bcast-R");
    assert_eq!(shuffle, broadcast, "rows and checksum of both strategies");
    assert!(run.stdout.contains("same checksum"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains(&format!("the exact {} rows", shuffle[0])),
        "{}",
        run.stdout
    );
    assert!(listing(dir.path()).is_empty(), "demo writes no files");
}

#[test]
fn gen_is_deterministic_in_its_seed() {
    let dir = TempDir::new().unwrap();
    let first = gen(dir.path(), "a", "csv", "7");
    let second = gen(dir.path(), "b", "csv", "7");
    let third = gen(dir.path(), "c", "csv", "8");
    assert_eq!(first, second);
    let read = |path: &str| std::fs::read(dir.path().join(path)).unwrap();
    for side in ["left.csv", "right.csv"] {
        let a = read(&format!("a/{side}"));
        assert!(a.starts_with(b"key,id,value\n"), "{side}");
        assert_eq!(a.iter().filter(|&&b| b == b'\n').count(), 2001, "{side}");
        assert_eq!(
            a,
            read(&format!("b/{side}")),
            "{side}: same seed, same bytes"
        );
        assert_ne!(
            a,
            read(&format!("c/{side}")),
            "{side}: another seed, other data"
        );
    }
    assert_ne!(first, third);
    assert_eq!(
        listing(&dir.path().join("a")),
        names(&["left.csv", "right.csv"])
    );
}

#[test]
fn helpers_read_null_alike() {
    // The Row helpers treat an empty CSV field and an Arrow NULL alike.
    let batch = RecordBatch::try_from_iter([(
        "s",
        Arc::new(StringArray::from(vec![Some("a"), None])) as ArrayRef,
    )])
    .unwrap();
    assert_eq!(
        text_rows(&[batch]),
        parse_csv("s\na\n\n").rows,
        "NULL reads back as None from both"
    );
}

// ---------------------------------------------------------------------------------------------
// 7. explain and progress
// ---------------------------------------------------------------------------------------------

#[test]
fn explain_predicts_what_analyze_measures() {
    let dir = tempfile::tempdir().unwrap();
    let counts = gen(dir.path(), "data", "parquet", "11");
    for (strategy, how) in [
        ("shuffle", "full"),
        ("broadcast", "left"),
        ("shuffle", "semi"),
    ] {
        let run = skewjoin(
            dir.path(),
            &[
                "explain",
                "data/left.parquet",
                "data/right.parquet",
                "--on",
                "key",
                "--how",
                how,
                "-s",
                strategy,
                "-w",
                "2",
                "-p",
                "6",
                "--analyze",
                "--json",
                "--top",
                "3",
            ],
        )
        .success();
        let plan: Value = serde_json::from_str(&run.stdout).expect("explain --json prints JSON");
        assert_eq!(plan["strategy"], strategy);
        assert_eq!(plan["hot_keys"].as_array().unwrap().len(), 3);
        let hottest = &plan["hot_keys"][0];
        assert!(
            hottest["pairs"].as_u64().unwrap() >= plan["hot_keys"][1]["pairs"].as_u64().unwrap()
        );
        let predicted = plan["predicted"].as_array().expect("a prediction");
        let measured = plan["measured"]["per_partition"]
            .as_array()
            .expect("measured load");
        assert_eq!(predicted.len(), 6);
        assert_eq!(
            predicted, measured,
            "{strategy} {how}: the cost model is exact here"
        );
        assert_eq!(plan["predicted_output_rows"].as_u64(), Some(counts[how]));
        assert_eq!(plan["measured"]["output_rows"].as_u64(), Some(counts[how]));
    }
}

#[test]
fn explain_without_analyze_runs_nothing_and_reads_as_text() {
    let dir = tempfile::tempdir().unwrap();
    gen(dir.path(), "data", "csv", "3");
    let run = skewjoin(
        dir.path(),
        &[
            "explain",
            "data/left.csv",
            "data/right.csv",
            "--on",
            "key",
            "--strategy",
            "shuffle",
            "-w",
            "2",
            "-p",
            "4",
        ],
    )
    .success();
    assert!(run.stdout.starts_with("strategy: "), "{}", run.stdout);
    assert!(run.stdout.contains("hottest keys"), "{}", run.stdout);
    assert!(run.stdout.contains("max/mean"), "{}", run.stdout);
    assert!(!run.stdout.contains("measured:"), "{}", run.stdout);
}

/// `explain` reads only the key columns: its plan is the one `explain --analyze` makes from the
/// whole files, and a column it does not need is never decoded (a corrupt one goes unnoticed,
/// where `--analyze`, which runs the join, reports it).
#[test]
fn explain_reads_only_the_keys_and_plans_as_a_whole_read_does() {
    let dir = tempfile::tempdir().unwrap();
    for format in ["parquet", "csv", "arrow"] {
        gen(dir.path(), format, format, "5");
        let (left, right) = (
            format!("{format}/left.{format}"),
            format!("{format}/right.{format}"),
        );
        for (strategy, how) in [("auto", "inner"), ("am", "full"), ("tree", "left")] {
            let plan = |analyze: bool| -> Value {
                let mut args = vec!["explain", &left, &right, "--on", "key", "--json"];
                args.extend(["-s", strategy, "--how", how, "-w", "3", "-p", "5", "-q"]);
                if analyze {
                    args.push("--analyze");
                }
                let run = skewjoin(dir.path(), &args).success();
                let mut plan: Value = serde_json::from_str(&run.stdout).unwrap();
                // What depends on the memory free at the time, and the run's own measures.
                let fields = plan.as_object_mut().unwrap();
                for field in ["broadcast_budget", "measured"] {
                    fields.remove(field);
                }
                for side in ["left", "right"] {
                    fields[side]
                        .as_object_mut()
                        .unwrap()
                        .remove("fits_broadcast");
                }
                plan
            };
            assert_eq!(plan(false), plan(true), "{format} {strategy} {how}");
        }
    }

    // A string column whose pages are garbage, beside a sound key column.
    let rows = 50_000;
    let batch = RecordBatch::try_from_iter([
        (
            "key",
            Arc::new(Int64Array::from_iter_values((0..rows).map(|row| row % 997))) as ArrayRef,
        ),
        (
            "pad",
            Arc::new(StringArray::from_iter_values(
                (0..rows).map(|row| format!("padding {row} {}", row * 7919)),
            )),
        ),
    ])
    .unwrap();
    let path = dir.path().join("padded.parquet");
    let mut writer =
        ArrowWriter::try_new(File::create(&path).unwrap(), batch.schema(), None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    let pad = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap())
        .unwrap()
        .metadata()
        .row_group(0)
        .column(1)
        .byte_range();
    let mut bytes = std::fs::read(&path).unwrap();
    let (start, len) = (pad.0 as usize, pad.1 as usize);
    bytes[start + len / 4..start + 3 * len / 4].fill(0xA5);
    std::fs::write(&path, &bytes).unwrap();
    let args = [
        "explain",
        "padded.parquet",
        "parquet/right.parquet",
        "--on",
        "key",
        "-q",
    ];
    let run = skewjoin(dir.path(), &args).success();
    assert!(run.stdout.contains("hottest keys"), "{}", run.stdout);
    let mut analyze = args.to_vec();
    analyze.push("--analyze");
    skewjoin(dir.path(), &analyze).fails(3, &["padded.parquet"]);
}

#[test]
fn progress_goes_to_stderr_and_quiet_silences_it() {
    let dir = tempfile::tempdir().unwrap();
    gen(dir.path(), "data", "csv", "5");
    let args = [
        "join",
        "data/left.csv",
        "data/right.csv",
        "--on",
        "key",
        "-w",
        "2",
    ];
    let run = skewjoin(dir.path(), &args).success();
    assert!(
        run.stderr.contains("reading data/left.csv"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("joining with the"), "{}", run.stderr);
    assert!(!run.stdout.contains("reading"), "progress stays off stdout");
    let quiet: Vec<&str> = args.iter().copied().chain(["--quiet"]).collect();
    let run = skewjoin(dir.path(), &quiet).success();
    assert!(
        run.stderr.is_empty(),
        "--quiet prints nothing: {}",
        run.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// 7. gen --kind pavlo: the web-log pair, joined on string URLs by VPRP and Shuffle-Join
// ---------------------------------------------------------------------------------------------

#[test]
fn pavlo_pair_joins_alike_with_vprp_and_shuffle() {
    let dir = TempDir::new().unwrap();
    let run = skewjoin(
        dir.path(),
        &[
            "gen", "--kind", "pavlo", "--keys", "300", "--rows", "6000", "--skew", "1.1",
            "--noise", "0.3", "--seed", "5", "--out", "web",
        ],
    )
    .success();
    assert!(
        run.stdout.contains("web/rankings.parquet")
            && run.stdout.contains("web/uservisits.parquet"),
        "gen names what it wrote:\n{}",
        run.stdout
    );
    let counts = printed_counts(&run.stdout);

    // Read the files back: the schema of the benchmark, and the join size computed here.
    let (rankings, types) = read_output(&dir.path().join("web/rankings.parquet"));
    assert_eq!(rankings.columns, ["pageURL", "pageRank", "avgDuration"]);
    assert_eq!(types.unwrap()[0], DataType::Utf8);
    assert_eq!(rankings.rows.len(), 300);
    let (visits, types) = read_output(&dir.path().join("web/uservisits.parquet"));
    assert_eq!(
        visits.columns,
        [
            "sourceIP",
            "destURL",
            "visitDate",
            "adRevenue",
            "userAgent",
            "countryCode",
            "languageCode",
            "searchWord",
            "duration"
        ]
    );
    assert_eq!(types.unwrap()[2], DataType::Date32);
    assert_eq!(visits.rows.len(), 6000);
    let page = rankings.column("pageURL");
    let urls: BTreeSet<String> = rankings
        .rows
        .iter()
        .map(|row| row[page].clone().unwrap())
        .collect();
    assert_eq!(urls.len(), 300, "pageURL is unique");
    let dest = visits.column("destURL");
    let matching = visits
        .rows
        .iter()
        .filter(|row| urls.contains(row[dest].as_ref().unwrap()))
        .count() as u64;
    assert_eq!(counts["inner"], matching);
    // The noise is there, and so is the skew: some page draws many visits.
    assert!(
        (1500..2100).contains(&(6000 - matching)),
        "about 30% of visits miss rankings: {matching} match"
    );

    let mut results = BTreeSet::new();
    for strategy in ["vprp", "shuffle", "vprp-t"] {
        let run = skewjoin(
            dir.path(),
            &[
                "join",
                "web/rankings.parquet",
                "web/uservisits.parquet",
                "--left-on",
                "pageURL",
                "--right-on",
                "destURL",
                "-s",
                strategy,
                "-w",
                "3",
                "-p",
                "5",
                "--sample-fraction",
                "0.2",
            ],
        )
        .success();
        assert_eq!(run.stdout_field("rows"), matching.to_string(), "{strategy}");
        results.insert((run.stdout_field("rows"), run.stdout_field("checksum")));
    }
    assert_eq!(results.len(), 1, "strategies disagree: {results:?}");
}

#[test]
fn pavlo_refuses_flags_of_the_plain_pair_and_keeps_the_default_kind() {
    let dir = TempDir::new().unwrap();
    skewjoin(
        dir.path(),
        &["gen", "--kind", "pavlo", "--left-skew", "1", "--out", "x"],
    )
    .fails(2, &["--left-skew", "--kind pavlo"]);
    let unknown = skewjoin(dir.path(), &["gen", "--kind", "tpch", "--out", "x"]);
    assert_eq!(unknown.code, Some(2), "{}", unknown.stderr);
    assert!(unknown.stderr.contains("pavlo"), "{}", unknown.stderr);
    // Without --kind, gen writes the plain pair as before.
    let run = skewjoin(
        dir.path(),
        &["gen", "--rows", "100", "--keys", "10", "--out", "plain"],
    )
    .success();
    assert!(run.stdout.contains("plain/left.parquet"), "{}", run.stdout);
}

// ---------------------------------------------------------------------------------------------
// 6. Interrupts
// ---------------------------------------------------------------------------------------------

/// Ctrl-C while the output is being written: the run exits with 130 and leaves neither the
/// output nor its temporary file behind.
#[cfg(unix)]
#[test]
fn ctrl_c_removes_the_unfinished_output() {
    use std::time::{Duration, Instant};
    let dir = TempDir::new().unwrap();
    // 50 keys of 4,000 rows a side: 800 million output rows, minutes of CSV writing.
    skewjoin(
        dir.path(),
        &[
            "gen", "--out", "d", "--rows", "200000", "--keys", "50", "--skew", "0",
        ],
    )
    .success();
    let mut child = Command::new(env!("CARGO_BIN_EXE_skewjoin"))
        .args([
            "join",
            "d/left.parquet",
            "d/right.parquet",
            "--on",
            "key",
            "--strategy",
            "shuffle",
            "-o",
            "out.csv",
            "--quiet",
        ])
        .current_dir(dir.path())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the skewjoin binary runs");
    // Wait until the temporary output file exists (the join is writing), then interrupt.
    let start = Instant::now();
    let temporary = || {
        listing(dir.path())
            .into_iter()
            .any(|name| name.starts_with(".out.csv") && name.ends_with(".tmp"))
    };
    while !temporary() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no temporary output appeared"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the join ended before it could be interrupted"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(60);
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("the join did not stop within 60 s of Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert_eq!(code, Some(130), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert_eq!(
        listing(dir.path()),
        names(&["d"]),
        "no output and no temporary file are left"
    );
}

/// `--memory-limit` sets the memory the broadcast budget is derived from, as explain shows; a
/// size that is not one is a usage error.
#[test]
fn the_memory_limit_sets_the_broadcast_budget() {
    let dir = TempDir::new().unwrap();
    gen(dir.path(), "d", "parquet", "1");
    let run = skewjoin(
        dir.path(),
        &[
            "explain",
            "d/left.parquet",
            "d/right.parquet",
            "--on",
            "key",
            "-w",
            "2",
            "--json",
            "--memory-limit",
            "1G",
        ],
    )
    .success();
    let plan: Value = serde_json::from_str(&run.stdout).unwrap();
    // A quarter of 1 GiB for two copies of 128-byte rows.
    assert_eq!(plan["broadcast_budget"]["rows"], 1 << 20, "{plan}");
    let source = plan["broadcast_budget"]["source"].as_str().unwrap();
    assert!(source.contains("--memory-limit"), "{source}");
    let bad = skewjoin(
        dir.path(),
        &[
            "join",
            "d/left.parquet",
            "d/right.parquet",
            "--on",
            "key",
            "--memory-limit",
            "lots",
        ],
    );
    assert_eq!(bad.code, Some(2), "{}", bad.stderr);
    assert!(
        bad.stderr.contains("--memory-limit") && bad.stderr.contains("not a size"),
        "{}",
        bad.stderr
    );
}
