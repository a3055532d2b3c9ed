//! Files as other tools write them, through the `skewjoin` binary: every Parquet and Arrow IPC
//! codec, every key type DuckDB joins (checked pair by pair against a nested-loop join, with the
//! output's key values unchanged), CSV dialects and CSV type errors, inputs that are not regular
//! files, Feather v1, and files written by pyarrow, Polars and DuckDB with their defaults
//! (checked against DuckDB's own join of each file).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BinaryArray, BinaryViewArray, BooleanArray, Date32Array, Date64Array,
    Decimal128Array, Decimal256Array, FixedSizeBinaryArray, Float32Array, Float64Array, Int64Array,
    LargeBinaryArray, RecordBatch, StringArray, Time32MillisecondArray, Time64MicrosecondArray,
    TimestampMicrosecondArray, TimestampMillisecondArray, TimestampNanosecondArray,
    TimestampSecondArray,
};
use arrow::compute::take;
use arrow::datatypes::i256;
use arrow::ipc::writer::{FileWriter, IpcWriteOptions};
use arrow::ipc::CompressionType;
use parquet::arrow::ArrowWriter;
use parquet::basic::{BrotliLevel, Compression, GzipLevel, ZstdLevel};
use parquet::file::properties::WriterProperties;
use serde_json::Value;
use tempfile::TempDir;

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

    /// Asserts exit status `code`, no panic, and every one of `needles` on stderr.
    fn fails(&self, code: i32, needles: &[&str]) {
        assert_eq!(
            self.code,
            Some(code),
            "skewjoin {:?}: expected exit code {code}\nstdout:\n{}\nstderr:\n{}",
            self.args,
            self.stdout,
            self.stderr
        );
        assert!(!self.stderr.contains("panicked"), "{}", self.stderr);
        for needle in needles {
            assert!(
                self.stderr.contains(needle),
                "skewjoin {:?}: stderr lacks {needle:?}:\n{}",
                self.args,
                self.stderr
            );
        }
    }

    /// The value of a `name<TAB>value` line on stdout (`rows`, `checksum`).
    fn field(&self, name: &str) -> String {
        let prefix = format!("{name}\t");
        self.stdout
            .lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no {name:?} line in stdout:\n{}", self.stdout))
            .to_string()
    }

    fn rows(&self) -> u64 {
        self.field("rows").parse().expect("a row count")
    }
}

fn run_with(dir: &Path, args: &[&str], stdin: Stdio) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_skewjoin"))
        .args(args)
        .current_dir(dir)
        .stdin(stdin)
        .output()
        .expect("the skewjoin binary runs");
    Run {
        args: args.iter().map(|arg| arg.to_string()).collect(),
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn skewjoin(dir: &Path, args: &[&str]) -> Run {
    run_with(dir, args, Stdio::null())
}

/// `skewjoin join left right --on key` plus `extra`.
fn join(dir: &Path, left: &str, right: &str, key: &str, extra: &[&str]) -> Run {
    let mut args = vec!["join", left, right, "--on", key];
    args.extend_from_slice(extra);
    skewjoin(dir, &args)
}

// ---------------------------------------------------------------------------------------------
// Writing files
// ---------------------------------------------------------------------------------------------

fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
    RecordBatch::try_from_iter(columns).expect("a valid batch")
}

fn write_parquet(path: &Path, batch: &RecordBatch, compression: Compression) {
    let properties = WriterProperties::builder()
        .set_compression(compression)
        // Several row groups, so that more than one page of each codec is decoded.
        .set_max_row_group_row_count(Some(700))
        .build();
    let mut writer = ArrowWriter::try_new(
        File::create(path).unwrap(),
        batch.schema(),
        Some(properties),
    )
    .unwrap();
    writer.write(batch).unwrap();
    writer.close().unwrap();
}

fn write_ipc(path: &Path, batch: &RecordBatch, compression: Option<CompressionType>) {
    let options = IpcWriteOptions::default()
        .try_with_compression(compression)
        .unwrap();
    let mut writer =
        FileWriter::try_new_with_options(File::create(path).unwrap(), &batch.schema(), options)
            .unwrap();
    for start in (0..batch.num_rows()).step_by(700) {
        let length = 700.min(batch.num_rows() - start);
        writer.write(&batch.slice(start, length)).unwrap();
    }
    writer.finish().unwrap();
}

fn read_ipc(path: &Path) -> RecordBatch {
    let reader = arrow::ipc::reader::FileReader::try_new(File::open(path).unwrap(), None).unwrap();
    let schema = reader.schema();
    let batches: Vec<RecordBatch> = reader.map(Result::unwrap).collect();
    arrow::compute::concat_batches(&schema, &batches).unwrap()
}

// ---------------------------------------------------------------------------------------------
// 1. Every codec
// ---------------------------------------------------------------------------------------------

/// A table with a skewed integer key and columns of several types, compressible enough that the
/// codecs really compress.
fn codec_table(rows: usize, seed: i64) -> RecordBatch {
    let key: Int64Array = (0..rows as i64)
        .map(|i| ((i * 7 + seed) % 13 != 0).then_some((i * i + seed) % 97))
        .collect();
    let text: StringArray = (0..rows)
        .map(|i| Some(format!("text value number {} of many", i % 50)))
        .collect();
    let float: Float64Array = (0..rows).map(|i| Some(i as f64 / 8.0)).collect();
    let date: Date32Array = (0..rows as i32).map(|i| Some(19_000 + i % 30)).collect();
    batch(vec![
        ("k", Arc::new(key) as ArrayRef),
        ("text", Arc::new(text)),
        ("float", Arc::new(float)),
        ("date", Arc::new(date)),
    ])
}

#[test]
fn every_parquet_and_ipc_codec_joins_like_the_uncompressed_file() {
    let dir = TempDir::new().unwrap();
    let left = codec_table(3_000, 1);
    let right = codec_table(800, 5);
    write_parquet(
        &dir.path().join("right.parquet"),
        &right,
        Compression::UNCOMPRESSED,
    );

    let parquet_codecs = [
        ("uncompressed", Compression::UNCOMPRESSED),
        ("snappy", Compression::SNAPPY),
        ("gzip", Compression::GZIP(GzipLevel::default())),
        ("lz4", Compression::LZ4),
        ("lz4_raw", Compression::LZ4_RAW),
        ("zstd", Compression::ZSTD(ZstdLevel::default())),
        ("brotli", Compression::BROTLI(BrotliLevel::default())),
    ];
    let mut files = Vec::new();
    for (name, codec) in parquet_codecs {
        let file = format!("left-{name}.parquet");
        write_parquet(&dir.path().join(&file), &left, codec);
        files.push(file);
    }
    let ipc_codecs = [
        ("uncompressed", None),
        ("lz4", Some(CompressionType::LZ4_FRAME)),
        ("zstd", Some(CompressionType::ZSTD)),
    ];
    for (name, codec) in ipc_codecs {
        let file = format!("left-{name}.arrow");
        write_ipc(&dir.path().join(&file), &left, codec);
        files.push(file);
    }

    let baseline = join(dir.path(), &files[0], "right.parquet", "k", &[]).success();
    assert!(baseline.rows() > 1_000, "{}", baseline.stdout);
    for file in &files {
        // `auto` reads the key columns once more, to count keys, before the join reads them all.
        for strategy in ["shuffle", "auto"] {
            let run = join(
                dir.path(),
                file,
                "right.parquet",
                "k",
                &["-s", strategy, "-w", "2"],
            )
            .success();
            assert_eq!(run.rows(), baseline.rows(), "{file} {strategy}");
            assert_eq!(
                run.field("checksum"),
                baseline.field("checksum"),
                "{file} {strategy}"
            );
        }
    }
}

#[test]
fn a_feather_v1_file_is_refused_with_how_to_convert_it() {
    let dir = TempDir::new().unwrap();
    // Feather v1: the magic, the columns, a flatbuffer footer, its length and the magic again.
    let mut bytes = b"FEA1".to_vec();
    bytes.extend_from_slice(&[0; 24]);
    bytes.extend_from_slice(&8u32.to_le_bytes());
    bytes.extend_from_slice(b"FEA1");
    std::fs::write(dir.path().join("old.feather"), bytes).unwrap();
    write_parquet(
        &dir.path().join("right.parquet"),
        &codec_table(10, 1),
        Compression::SNAPPY,
    );
    for strategy in ["shuffle", "auto"] {
        join(
            dir.path(),
            "old.feather",
            "right.parquet",
            "k",
            &["-s", strategy],
        )
        .fails(3, &["old.feather", "Feather v1", "version=2"]);
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Every key type
// ---------------------------------------------------------------------------------------------

/// One key type: the key column of each side, and each row's value in a canonical text that is
/// equal exactly when SQL (as DuckDB has it) calls the keys equal, written out by hand.
struct KeyCase {
    name: &'static str,
    left: ArrayRef,
    right: ArrayRef,
    left_values: Vec<Option<&'static str>>,
    right_values: Vec<Option<&'static str>>,
}

fn key_cases() -> Vec<KeyCase> {
    vec![
        KeyCase {
            name: "date32 = date64",
            left: Arc::new(Date32Array::from(vec![
                Some(0),
                Some(19_000),
                None,
                Some(-1),
            ])),
            right: Arc::new(Date64Array::from(vec![
                Some(19_000 * 86_400_000),
                Some(0),
                Some(-86_400_000),
                None,
                Some(1),
            ])),
            left_values: vec![Some("0"), Some("19000"), None, Some("-1")],
            right_values: vec![Some("19000"), Some("0"), Some("-1"), None, Some("1ms")],
        },
        KeyCase {
            name: "time32(ms) = time64(us)",
            left: Arc::new(Time32MillisecondArray::from(vec![
                Some(1_500),
                Some(0),
                None,
            ])),
            right: Arc::new(Time64MicrosecondArray::from(vec![
                Some(1_500_000),
                Some(1_500_001),
                Some(0),
            ])),
            left_values: vec![Some("1.5s"), Some("0"), None],
            right_values: vec![Some("1.5s"), Some("1.500001s"), Some("0")],
        },
        KeyCase {
            name: "timestamp(s) = timestamp(ns)",
            left: Arc::new(TimestampSecondArray::from(vec![
                Some(1_700_000_000),
                Some(-5),
                None,
            ])),
            right: Arc::new(TimestampNanosecondArray::from(vec![
                Some(1_700_000_000_000_000_000),
                Some(-5_000_000_000),
                Some(-5_000_000_001),
            ])),
            left_values: vec![Some("1700000000"), Some("-5"), None],
            right_values: vec![Some("1700000000"), Some("-5"), Some("-5.000000001")],
        },
        KeyCase {
            name: "timestamp(ms, UTC) = timestamp(us, +01:00)",
            left: Arc::new(
                TimestampMillisecondArray::from(vec![Some(1_000), Some(2_000), None])
                    .with_timezone("UTC"),
            ),
            right: Arc::new(
                TimestampMicrosecondArray::from(vec![Some(2_000_000), Some(1_000_001)])
                    .with_timezone("+01:00"),
            ),
            left_values: vec![Some("1"), Some("2"), None],
            right_values: vec![Some("2"), Some("1.000001")],
        },
        KeyCase {
            name: "decimal128(10,2) = decimal128(12,3)",
            left: Arc::new(
                Decimal128Array::from(vec![Some(150), Some(-1), Some(0), None, Some(100)])
                    .with_precision_and_scale(10, 2)
                    .unwrap(),
            ),
            right: Arc::new(
                Decimal128Array::from(vec![Some(1_500), Some(-10), Some(0), Some(1_001)])
                    .with_precision_and_scale(12, 3)
                    .unwrap(),
            ),
            left_values: vec![Some("1.5"), Some("-0.01"), Some("0"), None, Some("1")],
            right_values: vec![Some("1.5"), Some("-0.01"), Some("0"), Some("1.001")],
        },
        KeyCase {
            name: "decimal256(40,1) = decimal128(10,2)",
            left: Arc::new(
                Decimal256Array::from(vec![
                    Some(i256::from_i128(15)),
                    Some(i256::from_i128(10).wrapping_pow(38)),
                    None,
                ])
                .with_precision_and_scale(40, 1)
                .unwrap(),
            ),
            right: Arc::new(
                Decimal128Array::from(vec![Some(150), Some(15)])
                    .with_precision_and_scale(10, 2)
                    .unwrap(),
            ),
            left_values: vec![Some("1.5"), Some("1e37"), None],
            right_values: vec![Some("1.5"), Some("0.15")],
        },
        KeyCase {
            name: "bool",
            left: Arc::new(BooleanArray::from(vec![Some(true), Some(false), None])),
            right: Arc::new(BooleanArray::from(vec![
                Some(false),
                Some(true),
                Some(true),
                None,
            ])),
            left_values: vec![Some("t"), Some("f"), None],
            right_values: vec![Some("f"), Some("t"), Some("t"), None],
        },
        KeyCase {
            name: "binary = large binary",
            left: Arc::new(BinaryArray::from(vec![
                Some(&b"\x00\xff"[..]),
                Some(b""),
                None,
                Some(b"ab"),
            ])),
            right: Arc::new(LargeBinaryArray::from(vec![
                Some(&b"ab"[..]),
                Some(b"\x00\xff"),
                Some(b""),
                Some(b"\x00"),
            ])),
            left_values: vec![Some("00ff"), Some(""), None, Some("6162")],
            right_values: vec![Some("6162"), Some("00ff"), Some(""), Some("00")],
        },
        KeyCase {
            name: "binary view = fixed-size binary",
            left: Arc::new(BinaryViewArray::from(vec![
                Some(&b"abcd"[..]),
                Some(b"a much longer value than twelve bytes"),
                None,
            ])),
            right: Arc::new(
                FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                    vec![Some(b"abcd"), None, Some(b"abce")].into_iter(),
                    4,
                )
                .unwrap(),
            ),
            left_values: vec![Some("abcd"), Some("long"), None],
            right_values: vec![Some("abcd"), None, Some("abce")],
        },
        KeyCase {
            name: "float32 = float64, -0.0 = 0.0, NaN = NaN",
            left: Arc::new(Float32Array::from(vec![
                Some(0.0),
                Some(-0.0),
                Some(f32::NAN),
                Some(1.5),
                Some(0.1),
                None,
            ])),
            right: Arc::new(Float64Array::from(vec![
                Some(-0.0),
                Some(f64::NAN),
                Some(-f64::NAN),
                Some(1.5),
                Some(0.1),
                Some(f64::from(0.1f32)),
                None,
            ])),
            left_values: vec![
                Some("0"),
                Some("0"),
                Some("nan"),
                Some("1.5"),
                Some("0.1f32"),
                None,
            ],
            right_values: vec![
                Some("0"),
                Some("nan"),
                Some("nan"),
                Some("1.5"),
                Some("0.1"),
                Some("0.1f32"),
                None,
            ],
        },
    ]
}

/// The (left row, right row) pairs of a nested-loop inner join on the canonical values.
fn nested_loop(left: &[Option<&str>], right: &[Option<&str>]) -> BTreeSet<(i64, i64)> {
    let mut pairs = BTreeSet::new();
    for (l, left_value) in left.iter().enumerate() {
        for (r, right_value) in right.iter().enumerate() {
            if left_value.is_some() && left_value == right_value {
                pairs.insert((l as i64, r as i64));
            }
        }
    }
    pairs
}

fn side(key: &ArrayRef, first_row: i64) -> RecordBatch {
    let rows: Int64Array = (first_row..first_row + key.len() as i64)
        .map(Some)
        .collect();
    batch(vec![("k", key.clone()), ("row", Arc::new(rows))])
}

#[test]
fn every_key_type_joins_as_a_nested_loop_does_and_keeps_its_values() {
    let dir = TempDir::new().unwrap();
    for case in key_cases() {
        let left = side(&case.left, 0);
        let right = side(&case.right, 0);
        // Parquet cannot hold every type as is (view types, time units), Arrow IPC can.
        write_ipc(&dir.path().join("l.arrow"), &left, None);
        write_ipc(&dir.path().join("r.arrow"), &right, None);
        let expected = nested_loop(&case.left_values, &case.right_values);
        for strategy in ["shuffle", "broadcast", "auto"] {
            // Arrow IPC output holds every type as it is.
            let run = join(
                dir.path(),
                "l.arrow",
                "r.arrow",
                "k",
                &["-s", strategy, "-o", "out.arrow"],
            )
            .success();
            assert!(run.stdout.is_empty(), "{}", run.stdout);
            let out = read_ipc(&dir.path().join("out.arrow"));
            assert_eq!(out.num_rows(), expected.len(), "{}", case.name);
            let column = |name: &str| out.column_by_name(name).unwrap().clone();
            let left_rows = column("row");
            let right_rows = column("row_right");
            let pairs: BTreeSet<(i64, i64)> = (0..out.num_rows())
                .map(|at| {
                    let value = |array: &ArrayRef| {
                        array
                            .as_any()
                            .downcast_ref::<Int64Array>()
                            .unwrap()
                            .value(at)
                    };
                    (value(&left_rows), value(&right_rows))
                })
                .collect();
            assert_eq!(pairs, expected, "{} with {strategy}", case.name);
            // The output holds each side's key values as they were in the input.
            for (key, rows, input) in [
                ("k", &left_rows, &case.left),
                ("k_right", &right_rows, &case.right),
            ] {
                let original = take(input.as_ref(), rows.as_ref(), None).unwrap();
                let written = arrow::compute::cast(&column(key), input.data_type()).unwrap();
                assert_eq!(
                    original.to_data(),
                    written.to_data(),
                    "{}: output column {key}",
                    case.name
                );
            }
        }
    }
}

#[test]
fn float_keys_keep_negative_zero_and_nan_in_the_output() {
    // The key is matched as -0.0 = 0.0, but each row keeps its own sign bit.
    let dir = TempDir::new().unwrap();
    let left = side(
        &(Arc::new(Float64Array::from(vec![-0.0, f64::NAN])) as ArrayRef),
        0,
    );
    let right = side(
        &(Arc::new(Float64Array::from(vec![0.0, f64::NAN])) as ArrayRef),
        0,
    );
    write_parquet(&dir.path().join("l.parquet"), &left, Compression::SNAPPY);
    write_parquet(&dir.path().join("r.parquet"), &right, Compression::SNAPPY);
    join(
        dir.path(),
        "l.parquet",
        "r.parquet",
        "k",
        &["-o", "out.arrow"],
    )
    .success();
    let out = read_ipc(&dir.path().join("out.arrow"));
    assert_eq!(out.num_rows(), 2);
    let bits = |name: &str| -> BTreeSet<u64> {
        let column = out.column_by_name(name).unwrap();
        let values = column.as_any().downcast_ref::<Float64Array>().unwrap();
        values
            .values()
            .iter()
            .map(|value| value.to_bits())
            .collect()
    };
    assert_eq!(bits("k"), [(-0.0f64).to_bits(), f64::NAN.to_bits()].into());
    assert_eq!(
        bits("k_right"),
        [0.0f64.to_bits(), f64::NAN.to_bits()].into()
    );
}

#[test]
fn keys_of_different_kinds_are_refused_naming_both_types() {
    let dir = TempDir::new().unwrap();
    let arrays: Vec<(&str, ArrayRef)> = vec![
        ("int", Arc::new(Int64Array::from(vec![1, 2]))),
        ("date", Arc::new(Date32Array::from(vec![1, 2]))),
        ("float", Arc::new(Float64Array::from(vec![1.0, 2.0]))),
        (
            "decimal",
            Arc::new(
                Decimal128Array::from(vec![1, 2])
                    .with_precision_and_scale(5, 0)
                    .unwrap(),
            ),
        ),
        ("naive", Arc::new(TimestampSecondArray::from(vec![1, 2]))),
        (
            "zoned",
            Arc::new(TimestampSecondArray::from(vec![1, 2]).with_timezone("UTC")),
        ),
        ("bool", Arc::new(BooleanArray::from(vec![true, false]))),
        ("bytes", Arc::new(BinaryArray::from(vec![&b"1"[..], b"2"]))),
        ("text", Arc::new(StringArray::from(vec!["1", "2"]))),
    ];
    for (name, array) in &arrays {
        write_ipc(
            &dir.path().join(format!("{name}.arrow")),
            &side(array, 0),
            None,
        );
    }
    let pairs = [
        ("date", "int", "date (Date32)", "integer (Int64)"),
        ("float", "int", "float (Float64)", "integer (Int64)"),
        (
            "decimal",
            "int",
            "decimal (Decimal128(5, 0))",
            "integer (Int64)",
        ),
        (
            "naive",
            "zoned",
            "timestamp without time zone",
            "timestamp with time zone",
        ),
        ("bool", "int", "boolean (Boolean)", "integer (Int64)"),
        ("bytes", "text", "binary (Binary)", "string (Utf8)"),
        (
            "date",
            "naive",
            "date (Date32)",
            "timestamp without time zone",
        ),
    ];
    for (left, right, left_type, right_type) in pairs {
        let (left, right) = (format!("{left}.arrow"), format!("{right}.arrow"));
        join(dir.path(), &left, &right, "k", &[]).fails(
            3,
            &[
                "key types differ",
                &left,
                &right,
                left_type,
                right_type,
                "cast one side",
            ],
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 3. CSV dialects and type errors
// ---------------------------------------------------------------------------------------------

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

#[test]
fn csv_delimiters_are_detected_from_the_header_or_given() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    write(d, "comma.csv", "k,v\n1,a\n2,b\n2,c\n3,\"x,y\"\n");
    write(d, "tab.csv", "k\tw\n2\tp;q\n3\tr,s\n4\tt\n");
    write(d, "semi.csv", "k;w\n2;p,q\n3;\"r;s\"\n4;t\n");
    write(d, "pipe.csv", "k|w\n2|p\n3|r\n4|t\n");
    write(d, "named.csv", "k:w\n2:'a:b'\n3:c\n");
    for file in ["tab.csv", "semi.csv", "pipe.csv"] {
        // 2 matches two left rows, 3 one: three rows, all with their second column intact.
        join(d, "comma.csv", file, "k", &["-o", "out.csv"]).success();
        let out = std::fs::read_to_string(d.join("out.csv")).unwrap();
        assert_eq!(out.lines().count(), 1 + 3, "{file}:\n{out}");
        let expected_w = match file {
            "tab.csv" => ["p;q", "r,s"],
            "semi.csv" => ["p,q", "r;s"],
            _ => ["p", "r"],
        };
        for w in expected_w {
            assert!(out.contains(w), "{file}: {w:?} missing from\n{out}");
        }
    }
    let run = join(
        d,
        "named.csv",
        "named.csv",
        "k",
        &["--delimiter", ":", "--quote", "'"],
    )
    .success();
    assert_eq!(run.rows(), 2);
    // A header of one column detects nothing and is read with commas.
    write(d, "one.csv", "k\n2\n3\n");
    assert_eq!(join(d, "one.csv", "tab.csv", "k", &[]).success().rows(), 2);
    skewjoin(
        d,
        &[
            "join",
            "comma.csv",
            "tab.csv",
            "--on",
            "k",
            "--delimiter",
            "ab",
        ],
    )
    .fails(2, &["--delimiter", "one ASCII character"]);
}

#[test]
fn csv_null_text_is_null() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    write(d, "l.csv", "k,v\n1,a\nNA,b\n2,c\n");
    write(d, "r.csv", "k,w\nNA,x\n1,y\n2,z\n");
    // Without --null, "NA" makes the key text, and the integer side refuses it.
    let run = join(d, "l.csv", "r.csv", "k", &["--null", "NA"]).success();
    assert_eq!(run.rows(), 2, "NULL keys match nothing");
    write(d, "n.csv", "k,w\n1,y\n");
    join(d, "l.csv", "n.csv", "k", &[]).fails(
        3,
        &["l.csv line 3 has the value \"NA\" in column `k`", "--null"],
    );
}

#[test]
fn a_late_text_value_in_a_csv_key_is_named_with_its_line() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let mut text = String::from("id,k\n");
    for i in 0..5_000 {
        text.push_str(&format!("{i},{}\n", i % 100));
    }
    text.push_str("5000,12a\n5001,7\n");
    write(d, "late.csv", &text);
    write_parquet(
        &d.join("ints.parquet"),
        &batch(vec![(
            "k",
            Arc::new(Int64Array::from(vec![1, 7])) as ArrayRef,
        )]),
        Compression::SNAPPY,
    );
    for (left, right) in [("late.csv", "ints.parquet"), ("ints.parquet", "late.csv")] {
        join(d, left, right, "k", &[]).fails(
            3,
            &[
                "late.csv line 5002 has the value \"12a\" in column `k`",
                "not of type integer",
                "fix that value",
            ],
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 4. Inputs that are not regular files
// ---------------------------------------------------------------------------------------------

#[test]
fn pipes_fifos_and_devices_are_refused_as_not_regular_files() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    write(d, "r.csv", "k\n1\n");
    let fifo = d.join("fifo.csv");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    for input in [fifo.to_str().unwrap(), "/dev/zero"] {
        let run = join(d, input, "r.csv", "k", &["--format", "csv"]);
        run.fails(3, &[input, "not a regular file", "write it to one first"]);
        assert!(!run.stderr.contains("empty"), "{}", run.stderr);
    }
    // A pipe as standard input: refused, not read as an empty file.
    let mut child = Command::new(env!("CARGO_BIN_EXE_skewjoin"))
        .args([
            "join",
            "/dev/stdin",
            "r.csv",
            "--on",
            "k",
            "--format",
            "csv",
        ])
        .current_dir(d)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdin.take());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("not a regular file"), "{stderr}");
    // A regular file given as standard input is read as any file is.
    let stdin = File::open(d.join("r.csv")).unwrap();
    let run = run_with(
        d,
        &[
            "join",
            "/dev/stdin",
            "r.csv",
            "--on",
            "k",
            "--format",
            "csv",
        ],
        Stdio::from(stdin),
    );
    assert_eq!(run.success().rows(), 1);
}

// ---------------------------------------------------------------------------------------------
// 5. Files written by pyarrow, Polars and DuckDB with their defaults
// ---------------------------------------------------------------------------------------------

/// Writes the files with `runtime/tests/interop/make_files.py` (pyarrow, Polars and DuckDB
/// under the interpreter named by `SKEWJOIN_TEST_PYTHON`; skipped without it, and `.ci/run`
/// always sets it) and joins each pair on each key: the row count must be DuckDB's, and files
/// of one format written by different tools must give one checksum.
#[test]
fn files_from_pyarrow_polars_and_duckdb_join_as_duckdb_joins_them() {
    let Some(python) = std::env::var_os("SKEWJOIN_TEST_PYTHON") else {
        println!("skipped: set SKEWJOIN_TEST_PYTHON to a Python with pyarrow, polars and duckdb");
        return;
    };
    let dir = TempDir::new().unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/make_files.py");
    let made = Command::new(&python)
        .arg(&script)
        .arg(dir.path())
        .output()
        .expect("SKEWJOIN_TEST_PYTHON runs");
    assert!(
        made.status.success(),
        "{} failed:\n{}",
        script.display(),
        String::from_utf8_lossy(&made.stderr)
    );
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("manifest.json")).unwrap()).unwrap();
    let joins = manifest["joins"].as_array().unwrap();
    assert!(joins.len() >= 40, "{manifest}");

    let mut checksums: BTreeMap<(String, String), BTreeMap<String, String>> = BTreeMap::new();
    for entry in joins {
        let text = |name: &str| entry[name].as_str().unwrap().to_string();
        let (tool, format, key) = (text("tool"), text("format"), text("key"));
        let expected = entry["duckdb_rows"].as_u64().unwrap();
        assert!(expected > 0, "{entry}");
        for strategy in ["shuffle", "auto"] {
            let run = join(
                dir.path(),
                &text("left"),
                &text("right"),
                &key,
                &["-s", strategy],
            );
            assert_eq!(run.code, Some(0), "{tool} {format} {key}: {}", run.stderr);
            assert_eq!(
                run.rows(),
                expected,
                "{tool} {format} on {key} with {strategy}: skewjoin's rows against DuckDB's"
            );
            let seen = checksums.entry((format.clone(), key.clone())).or_default();
            seen.insert(format!("{tool} {strategy}"), run.field("checksum"));
        }
    }
    // CSV holds text: each tool writes timestamps, decimals and floats in its own way, so
    // only the binary formats must agree on every value.
    for ((format, key), seen) in &checksums {
        if format == "csv" {
            continue;
        }
        let distinct: BTreeSet<&String> = seen.values().collect();
        assert_eq!(
            distinct.len(),
            1,
            "{format} on {key}: checksums differ: {seen:?}"
        );
    }

    join(
        dir.path(),
        "v1.feather",
        "pyarrow-right.parquet",
        "k_int",
        &[],
    )
    .fails(3, &["v1.feather", "Feather v1", "version=2"]);
}
