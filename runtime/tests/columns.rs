//! End-to-end tests of choosing output columns (`--left-columns`, `--right-columns`,
//! `--select`): on Parquet (several row groups), Arrow IPC and CSV inputs, for every join type,
//! the output holds exactly the chosen columns of the rows the whole join gives, key columns
//! left out included; the checksum is that of joining inputs holding only those columns;
//! `--select` resolves names to sides and refuses ambiguous ones; bad names are errors that
//! name the file or flag.

use std::fs::File;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::ipc::writer::FileWriter;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use tempfile::TempDir;

fn skewjoin(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skewjoin"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the skewjoin binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn assert_success(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what} failed ({:?})\nstderr:\n{}",
        output.status,
        text(&output.stderr)
    );
}

/// Asserts exit `code`, a one-line error and no panic, and each of `needles` in it.
fn assert_fails(output: &Output, code: i32, needles: &[&str]) {
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "stderr:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let error = stderr
        .lines()
        .find(|line| line.contains("error:"))
        .unwrap_or_else(|| panic!("no error line in {stderr}"));
    assert!(
        !error.contains("  "),
        "the message's lines are joined: {error}"
    );
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "stderr lacks {needle:?}:\n{stderr}"
        );
    }
}

/// The left table: `id`, `key` (NULL every 50th row, a hot key 0, 40 to 136: 130 and up only on
/// this side), `name`, `price`.
fn left_table() -> RecordBatch {
    let rows = 3000i64;
    let key: Int64Array = (0..rows)
        .map(|i| (i % 50 != 7).then_some(if i % 3 == 0 { 0 } else { 40 + i % 97 }))
        .collect();
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("key", DataType::Int64, true),
        Field::new("name", DataType::Utf8, false),
        Field::new("price", DataType::Float64, false),
    ]);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(0..rows)),
        Arc::new(key),
        Arc::new(StringArray::from_iter_values(
            (0..rows).map(|i| format!("n{}", i % 211)),
        )),
        Arc::new(Float64Array::from_iter_values(
            (0..rows).map(|i| i as f64 / 4.0),
        )),
    ];
    RecordBatch::try_new(Arc::new(schema), columns).unwrap()
}

/// The right table: `key` (0 to 129, 1 to 39 only on this side; some NULL), `id`, `city`, `qty`.
fn right_table() -> RecordBatch {
    let rows = 400i64;
    let key: Int64Array = (0..rows)
        .map(|i| (i % 40 != 3).then_some(i % 130))
        .collect();
    let schema = Schema::new(vec![
        Field::new("key", DataType::Int64, true),
        Field::new("id", DataType::Int64, false),
        Field::new("city", DataType::Utf8, false),
        Field::new("qty", DataType::Int32, false),
    ]);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(key),
        Arc::new(Int64Array::from_iter_values((0..rows).map(|i| 10_000 + i))),
        Arc::new(StringArray::from_iter_values(
            (0..rows).map(|i| format!("c{}", i % 17)),
        )),
        Arc::new(Int32Array::from_iter_values(
            (0..rows).map(|i| i as i32 % 9),
        )),
    ];
    RecordBatch::try_new(Arc::new(schema), columns).unwrap()
}

/// Writes `batch` to `path` in the format of its extension: Parquet in row groups of 500 rows
/// (so that two workers read it apart), an Arrow IPC file in batches of 700, or CSV.
fn write(path: &Path, batch: &RecordBatch) {
    let file = File::create(path).unwrap();
    match path.extension().and_then(|e| e.to_str()) {
        Some("parquet") => {
            let props = WriterProperties::builder()
                .set_max_row_group_row_count(Some(500))
                .build();
            let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
            writer.write(batch).unwrap();
            writer.close().unwrap();
        }
        Some("arrow") => {
            let mut writer = FileWriter::try_new(file, &batch.schema()).unwrap();
            for start in (0..batch.num_rows()).step_by(700) {
                writer
                    .write(&batch.slice(start, 700.min(batch.num_rows() - start)))
                    .unwrap();
            }
            writer.finish().unwrap();
        }
        Some("csv") => {
            let mut writer = arrow::csv::Writer::new(file);
            writer.write(batch).unwrap();
        }
        other => panic!("no writer for {other:?}"),
    }
}

/// A CSV output: its header's names and its rows (fields as text), rows sorted.
fn read_csv(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header = lines
        .next()
        .expect("a header")
        .split(',')
        .map(str::to_string)
        .collect();
    let mut rows: Vec<Vec<String>> = lines
        .map(|line| line.split(',').map(str::to_string).collect())
        .collect();
    rows.sort();
    (header, rows)
}

/// `rows` of a table with columns `header`, cut to the columns `names`, sorted.
fn project(header: &[String], rows: &[Vec<String>], names: &[&str]) -> Vec<Vec<String>> {
    let at: Vec<usize> = names
        .iter()
        .map(|name| header.iter().position(|h| h == name).expect("a column"))
        .collect();
    let mut cut: Vec<Vec<String>> = rows
        .iter()
        .map(|row| at.iter().map(|&i| row[i].clone()).collect())
        .collect();
    cut.sort();
    cut
}

/// The `rows` and `checksum` lines of a counted join.
fn rows_and_checksum(output: &Output, what: &str) -> (String, String) {
    assert_success(output, what);
    let stdout = text(&output.stdout);
    let field = |name: &str| {
        stdout
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{name}\t")))
            .unwrap_or_else(|| panic!("{what}: no {name} in {stdout}"))
            .to_string()
    };
    (field("rows"), field("checksum"))
}

fn inputs(dir: &Path) {
    for extension in ["parquet", "arrow", "csv"] {
        write(&dir.join(format!("left.{extension}")), &left_table());
        write(&dir.join(format!("right.{extension}")), &right_table());
    }
}

/// For each format, join type and a strategy of each kind, `--left-columns name,id` and
/// `--right-columns qty,city` (key columns left out, an order that is not the files') give
/// the whole join's rows cut to those columns.
#[test]
fn chosen_columns_are_the_whole_joins_rows_cut_to_them() {
    let dir = TempDir::new().unwrap();
    let path = dir.path();
    inputs(path);
    let hows = [
        "inner",
        "left",
        "right",
        "full",
        "semi",
        "anti",
        "right-semi",
        "right-anti",
    ];
    for extension in ["parquet", "arrow", "csv"] {
        let (left, right) = (format!("left.{extension}"), format!("right.{extension}"));
        for how in hows {
            let mut shuffled = None;
            // `auto` with nothing copied checks the keys for skew first: the key columns it
            // decodes are kept, and the join decodes only the others.
            for strategy in ["shuffle", "ib", "am", "auto"] {
                if strategy == "ib" && !matches!(how, "inner" | "left" | "semi" | "anti") {
                    continue;
                }
                let what = format!("{extension} {how} {strategy}");
                let mut base = vec![
                    "join", &left, &right, "--on", "key", "--how", how, "-s", strategy, "-w", "2",
                    "-q",
                ];
                if strategy == "auto" {
                    base.extend(["--broadcast-limit", "0"]);
                }
                let mut whole = base.to_vec();
                whole.extend(["-o", "whole.csv"]);
                assert_success(&skewjoin(path, &whole), &what);
                let (header, rows) = read_csv(&path.join("whole.csv"));
                assert!(!rows.is_empty(), "{what}: no rows");
                match strategy {
                    "shuffle" => shuffled = Some(rows.clone()),
                    "auto" => assert_eq!(Some(&rows), shuffled.as_ref(), "{what}: as shuffled"),
                    _ => {}
                }

                let right_only = how.starts_with("right-");
                let left_out = !right_only;
                let right_out = !matches!(how, "semi" | "anti") && !right_only;
                let mut chosen = base.to_vec();
                let mut names: Vec<&str> = Vec::new();
                if left_out {
                    chosen.extend(["--left-columns", "name,id"]);
                    names.extend(["name", "id"]);
                }
                if right_out {
                    chosen.extend(["--right-columns", "qty,city"]);
                    names.extend(["qty", "city"]);
                }
                if right_only {
                    chosen.extend(["--right-columns", "city,id"]);
                    names.extend(["city", "id"]);
                }
                chosen.extend(["-o", "chosen.csv"]);
                assert_success(&skewjoin(path, &chosen), &what);
                let (got_header, got) = read_csv(&path.join("chosen.csv"));
                assert_eq!(got_header, names, "{what}: the chosen columns in order");
                assert_eq!(got, project(&header, &rows, &names), "{what}");
            }
        }
    }
}

/// The checksum of a counted join with chosen columns is that of the same join of files that
/// hold only those columns (and the keys); `explain --analyze` measures the same.
#[test]
fn the_checksum_is_of_the_chosen_columns() {
    let dir = TempDir::new().unwrap();
    let path = dir.path();
    inputs(path);
    let cut = |batch: RecordBatch, names: &[&str]| {
        let schema = batch.schema();
        let indices: Vec<usize> = names
            .iter()
            .map(|name| schema.index_of(name).unwrap())
            .collect();
        batch.project(&indices).unwrap()
    };
    write(
        &path.join("left_cut.parquet"),
        &cut(left_table(), &["name", "key"]),
    );
    write(
        &path.join("right_cut.parquet"),
        &cut(right_table(), &["key", "qty"]),
    );
    for how in ["inner", "full"] {
        let cut_files = skewjoin(
            path,
            &[
                "join",
                "left_cut.parquet",
                "right_cut.parquet",
                "--on",
                "key",
                "--how",
                how,
                "-w",
                "2",
            ],
        );
        let expected = rows_and_checksum(&cut_files, "the cut files");
        let flags = [
            "left.parquet",
            "right.parquet",
            "--on",
            "key",
            "--how",
            how,
            "-w",
            "2",
            "--left-columns",
            "name,key",
            "--right-columns",
            "key,qty",
        ];
        let mut join = vec!["join"];
        join.extend(flags);
        let chosen = rows_and_checksum(&skewjoin(path, &join), "chosen columns");
        assert_eq!(chosen, expected, "{how}");
        let mut whole = vec!["join", "left.parquet", "right.parquet", "--on", "key"];
        whole.extend(["--how", how, "-w", "2"]);
        let whole = rows_and_checksum(&skewjoin(path, &whole), "all columns");
        assert_eq!(whole.0, expected.0, "{how}: the same rows");
        assert_ne!(
            whole.1, expected.1,
            "{how}: the checksum covers the columns"
        );

        let mut explain = vec!["explain", "--analyze", "--json", "-q"];
        explain.extend(flags);
        let output = skewjoin(path, &explain);
        assert_success(&output, "explain --analyze");
        let plan: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(
            plan["measured"]["checksum"].as_str().unwrap(),
            expected.1,
            "{how}: explain --analyze"
        );
    }
}

/// `--select` takes each name from the side that has it, the left's first; a key both sides
/// have under one name comes from the side every output row has; ambiguous and unknown names
/// are refused with what to write instead.
#[test]
fn select_resolves_names_to_sides_and_refuses_ambiguous_ones() {
    let dir = TempDir::new().unwrap();
    let path = dir.path();
    inputs(path);
    let join = |how: &str, select: &str, output: &str| {
        skewjoin(
            path,
            &[
                "join",
                "left.csv",
                "right.csv",
                "--on",
                "key",
                "--how",
                how,
                "-w",
                "3",
                "-q",
                "--select",
                select,
                "-o",
                output,
            ],
        )
    };
    let whole = skewjoin(
        path,
        &[
            "join",
            "left.csv",
            "right.csv",
            "--on",
            "key",
            "--how",
            "right",
            "-q",
            "-o",
            "whole.csv",
        ],
    );
    assert_success(&whole, "whole right join");
    let (header, rows) = read_csv(&path.join("whole.csv"));

    // Inner: `key` from the left (equal to the right's on every row).
    assert_success(&join("inner", "qty,key,name", "inner.csv"), "inner");
    let (got_header, _) = read_csv(&path.join("inner.csv"));
    assert_eq!(
        got_header,
        ["key", "name", "qty"],
        "the left's columns first"
    );

    // Left: `key` from the left, so rows the right does not match keep theirs.
    assert_success(&join("left", "key,city", "left_out.csv"), "left");
    let (_, got) = read_csv(&path.join("left_out.csv"));
    assert!(
        got.iter()
            .any(|row| !row[0].is_empty() && row[1].is_empty()),
        "an unmatched left row keeps its key"
    );

    // Right: `key` from the right, so rows the left does not match keep their key.
    assert_success(&join("right", "name,key,city", "right_out.csv"), "right");
    let (got_header, got) = read_csv(&path.join("right_out.csv"));
    assert_eq!(got_header, ["name", "key", "city"]);
    assert_eq!(got, project(&header, &rows, &["name", "key_right", "city"]));
    assert!(
        got.iter()
            .any(|row| row[0].is_empty() && !row[1].is_empty()),
        "an unmatched right row keeps its key"
    );

    // Only the left's columns: the right side gives none.
    assert_success(&join("inner", "name", "names.csv"), "left columns only");
    let (got_header, got) = read_csv(&path.join("names.csv"));
    assert_eq!(got_header, ["name"]);
    let inner = skewjoin(
        path,
        &["join", "left.csv", "right.csv", "--on", "key", "-w", "2"],
    );
    let (inner_rows, _) = rows_and_checksum(&inner, "inner");
    assert_eq!(got.len().to_string(), inner_rows);

    assert_fails(
        &join("full", "key,name", "full.csv"),
        2,
        &["both inputs have a column `key`", "--left-columns"],
    );
    assert_fails(
        &join("inner", "id", "id.csv"),
        2,
        &["both inputs have a column `id`", "--right-columns"],
    );
    assert_fails(
        &join("inner", "name,nope", "nope.csv"),
        3,
        &["no input has a column `nope`", "`city`", "`price`"],
    );
    assert_fails(
        &join("inner", "name,qty,name", "twice.csv"),
        2,
        &["--select names `name` twice"],
    );
    assert_fails(
        &join("semi", "name,qty", "semi.csv"),
        2,
        &[
            "`qty` is a column of the right input",
            "outputs only the left input's columns",
        ],
    );
    for file in ["full.csv", "id.csv", "nope.csv", "twice.csv", "semi.csv"] {
        assert!(!path.join(file).exists(), "{file}: no output on error");
    }
}

#[test]
fn bad_column_flags_are_refused_with_the_fix() {
    let dir = TempDir::new().unwrap();
    let path = dir.path();
    inputs(path);
    let join = |more: &[&str]| {
        let mut args = vec![
            "join",
            "left.parquet",
            "right.parquet",
            "--on",
            "key",
            "-o",
            "out.parquet",
        ];
        args.extend_from_slice(more);
        skewjoin(path, &args)
    };
    assert_fails(
        &join(&["--left-columns", "name,Price"]),
        3,
        &["left.parquet has no column `Price`", "did you mean `price`"],
    );
    assert_fails(
        &join(&["--right-columns", "qty,qty"]),
        2,
        &["--right-columns names `qty` twice"],
    );
    assert_fails(
        &join(&["--how", "semi", "--right-columns", "qty"]),
        2,
        &["--right-columns: a semi join outputs no column of the right input"],
    );
    assert_fails(
        &join(&["--select", "name", "--left-columns", "name"]),
        2,
        &["--select"],
    );
    for flag in ["--left-columns", "--select"] {
        assert_fails(
            &join(&[flag, "name,,price"]),
            2,
            &[flag, "empty column name (a stray comma?)"],
        );
    }
    assert_fails(
        &join(&["--left-columns", "name, price"]),
        3,
        &[
            "no column ` price`",
            "did you mean `price`? The names differ in spaces",
        ],
    );
    assert_fails(
        &join(&["--select", "name,id_right"]),
        3,
        &[
            "no input has a column `id_right`",
            "--left-columns and --right-columns instead, `id` among the right's",
        ],
    );
    assert_fails(
        &join(&["--select", "NAME"]),
        3,
        &["no input has a column `NAME`", "did you mean `name`?"],
    );
    assert!(!path.join("out.parquet").exists(), "no output on error");
    // `explain` checks the flags against the footers too, before it decodes a row.
    let explain = skewjoin(
        path,
        &[
            "explain",
            "left.parquet",
            "right.parquet",
            "--on",
            "key",
            "--left-columns",
            "name,name",
        ],
    );
    assert_fails(&explain, 2, &["--left-columns names `name` twice"]);
}
