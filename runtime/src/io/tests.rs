use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, Int64Array, RecordBatch, StringArray, StringViewArray, UInt32Array,
};
use arrow::compute::{cast, concat_batches, take};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow::ipc::writer::FileWriter;
use parquet::arrow::ArrowWriter;
use parquet::errors::ParquetError;
use parquet::file::properties::WriterProperties;
use skewjoin_operators::{JoinType, Key, Side};

use crate::error::{Error, Result};

use super::csv_input::{csv_syntax, read_csv_share};
use super::decode::concat;
use super::keys::canonical_decimal;
use super::shares::CSV_TAIL_CHUNK;
use super::*;
use crate::output_rows::PAD;
use arrow::array::{BooleanArray, Float64Array, Int16Array, Int32Array, UInt64Array};
use skewjoin_planner::skew_check::KeyTally;
use skewjoin_planner::work_costs::WorkCosts;
use tempfile::TempDir;

const ALL_FORMATS: [(FileFormat, &str); 3] = [
    (FileFormat::Parquet, "parquet"),
    (FileFormat::ArrowIpc, "arrow"),
    (FileFormat::Csv, "csv"),
];

/// A small table with the column types every format round-trips: Int64, Utf8, Float64, with
/// NULLs. Every field is nullable because CSV inference cannot know better.
fn sample() -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
        Field::new("score", DataType::Float64, true),
        Field::new("qty", DataType::Int64, true),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(vec![1, 2, 3, -4])),
            Arc::new(StringArray::from(vec![
                Some("ann"),
                None,
                Some("c, with comma"),
                Some("dé \"quoted\""),
            ])),
            Arc::new(Float64Array::from(vec![
                Some(1.5),
                Some(2.0),
                None,
                Some(-1e-3),
            ])),
            Arc::new(Int64Array::from(vec![Some(10), None, Some(0), Some(7)])),
        ],
    )
    .unwrap()
}

fn write_bytes(dir: &TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn input_message(result: Result<RecordBatch>) -> String {
    match result {
        Err(Error::Input(message)) => message,
        other => panic!("expected an input error, got {other:?}"),
    }
}

fn strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|name| name.to_string()).collect()
}

#[test]
fn formats_parse_and_detect() {
    assert_eq!(FileFormat::parse("PARQUET").unwrap(), FileFormat::Parquet);
    assert_eq!(FileFormat::parse("feather").unwrap(), FileFormat::ArrowIpc);
    assert_eq!(FileFormat::parse("Csv").unwrap(), FileFormat::Csv);
    assert!(matches!(FileFormat::parse("xlsx"), Err(Error::Usage(_))));

    let detect = |name: &str| FileFormat::detect(Path::new(name), None);
    assert_eq!(detect("a/b.PQ").unwrap(), FileFormat::Parquet);
    assert_eq!(detect("b.ipc").unwrap(), FileFormat::ArrowIpc);
    assert_eq!(detect("b.csv").unwrap(), FileFormat::Csv);
    let explicit = FileFormat::detect(Path::new("b.txt"), Some(FileFormat::Csv));
    assert_eq!(explicit.unwrap(), FileFormat::Csv);
    match detect("data.txt") {
        Err(Error::Usage(message)) => {
            assert!(message.contains("data.txt"), "{message}");
            assert!(message.contains("--format"), "{message}");
        }
        other => panic!("expected a usage error, got {other:?}"),
    }
}

#[test]
fn round_trip_through_every_format() {
    let dir = TempDir::new().unwrap();
    let table = sample();
    let expected_hashes = row_hashes(&table);
    for (format, extension) in ALL_FORMATS {
        let path = dir.path().join(format!("table.{extension}"));
        write_table(&path, format, &table).unwrap();
        let back = read_table(&path, FileFormat::detect(&path, None).unwrap()).unwrap();
        assert_eq!(back.schema().fields(), table.schema().fields(), "{format}");
        assert_eq!(back.columns(), table.columns(), "{format}");
        assert_eq!(row_hashes(&back), expected_hashes, "{format}");
    }
    let mut distinct = expected_hashes.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        table.num_rows(),
        "different rows hash apart"
    );
}

/// Every codec a format has round-trips, and is the codec the file says it was written
/// with: Parquet's column chunks name it; an Arrow IPC file compressed is smaller than one
/// that is not, for a column that repeats.
#[test]
fn view_columns_written_to_ipc_hold_only_their_rows_bytes() {
    let dir = TempDir::new().unwrap();
    // 100,000 strings of 40 bytes (past the 12 a view holds inline): 4 MB of data.
    let strings: Vec<String> = (0..100_000).map(|row| format!("{row:040}")).collect();
    let column: ArrayRef = Arc::new(StringViewArray::from_iter_values(&strings));
    let table = RecordBatch::try_from_iter([("s", column)]).unwrap();
    // Ten rows taken, as a join's output takes them: views into the 4 MB buffer.
    let rows = UInt32Array::from_iter_values((0..10).map(|row| row * 9_999));
    let taken = RecordBatch::try_new(
        table.schema(),
        vec![take(table.column(0).as_ref(), &rows, None).unwrap()],
    )
    .unwrap();
    let path = dir.path().join("out.arrow");
    let compression = OutputCompression::for_output(None, FileFormat::ArrowIpc).unwrap();
    let mut writer =
        OutputWriter::create(&path, FileFormat::ArrowIpc, compression, table.schema()).unwrap();
    writer.write(&taken).unwrap();
    writer.finish().unwrap();
    assert!(std::fs::metadata(&path).unwrap().len() < 16 * 1024);
    let back = read_table(&path, FileFormat::ArrowIpc).unwrap();
    assert_eq!(back.column(0).as_string_view().value(3), strings[3 * 9_999]);
    assert_eq!(back.num_rows(), 10);
}

#[test]
fn every_output_codec_round_trips() {
    let dir = TempDir::new().unwrap();
    let repeated: Vec<i64> = (0..20_000).map(|row| row % 7).collect();
    let table =
        RecordBatch::try_from_iter([("value", Arc::new(Int64Array::from(repeated)) as ArrayRef)])
            .unwrap();
    let write = |format: FileFormat, codec: &str| {
        let compression = OutputCompression::for_output(Some(codec), format).unwrap();
        let path = dir.path().join(format!("{codec}.{format}"));
        let mut writer = OutputWriter::create(&path, format, compression, table.schema()).unwrap();
        writer.write(&table).unwrap();
        writer.finish().unwrap();
        let back = read_table(&path, format).unwrap();
        assert_eq!(back.columns(), table.columns(), "{format} {codec}");
        path
    };
    for (codec, expected) in [
        ("zstd", "ZSTD"),
        ("snappy", "SNAPPY"),
        ("lz4", "LZ4_RAW"),
        ("none", "UNCOMPRESSED"),
    ] {
        let path = write(FileFormat::Parquet, codec);
        let reader =
            parquet::file::reader::SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
        use parquet::file::reader::FileReader as _;
        let written = reader.metadata().row_group(0).column(0).compression();
        assert!(
            written.to_string().starts_with(expected),
            "{codec}: {written}"
        );
    }
    let size = |path: PathBuf| std::fs::metadata(path).unwrap().len();
    let plain = size(write(FileFormat::ArrowIpc, "none"));
    for codec in ["zstd", "lz4"] {
        let compressed = size(write(FileFormat::ArrowIpc, codec));
        assert!(
            compressed * 4 < plain,
            "{codec}: {compressed} of {plain} bytes"
        );
    }
}

/// Nothing asked, Parquet is zstd and the others plain; a codec a format has no place for,
/// or no codec at all, is a usage error that says what to give instead.
#[test]
fn compression_defaults_and_refusals() {
    let default = |format| OutputCompression::for_output(None, format).unwrap();
    assert_eq!(default(FileFormat::Parquet), OutputCompression::Zstd);
    assert_eq!(default(FileFormat::ArrowIpc), OutputCompression::None);
    assert_eq!(default(FileFormat::Csv), OutputCompression::None);
    assert_eq!(
        OutputCompression::for_output(Some("NONE"), FileFormat::Csv).unwrap(),
        OutputCompression::None
    );
    for (codec, format, says) in [
        ("snappy", FileFormat::ArrowIpc, "use zstd, lz4 or none"),
        (
            "zstd",
            FileFormat::Csv,
            "CSV output is written uncompressed",
        ),
        ("gzip", FileFormat::Parquet, "zstd, snappy, lz4, none"),
    ] {
        match OutputCompression::for_output(Some(codec), format) {
            Err(Error::Usage(message)) => {
                assert!(message.contains(says), "{codec} {format}: {message}")
            }
            other => panic!("{codec} {format}: expected a usage error, got {other:?}"),
        }
    }
}

/// A decimal hashes as its value and scale, whatever its width: the same numbers at 32,
/// 64 and 128 bits hash alike, another value, another scale or a NULL apart.
#[test]
fn decimals_hash_by_value_and_scale_at_every_width() {
    use arrow::array::{Decimal128Array, Decimal32Array, Decimal64Array};
    let hashes = |array: ArrayRef| row_hashes(&RecordBatch::try_from_iter([("d", array)]).unwrap());
    let values = [Some(150), Some(-1), Some(0), None];
    let narrow = hashes(Arc::new(
        Decimal32Array::from(values.to_vec())
            .with_precision_and_scale(9, 2)
            .unwrap(),
    ));
    let middle = hashes(Arc::new(
        Decimal64Array::from(values.map(|v| v.map(i64::from)).to_vec())
            .with_precision_and_scale(15, 2)
            .unwrap(),
    ));
    let wide = hashes(Arc::new(
        Decimal128Array::from(values.map(|v| v.map(i128::from)).to_vec())
            .with_precision_and_scale(38, 2)
            .unwrap(),
    ));
    assert_eq!(narrow, middle);
    assert_eq!(narrow, wide);
    let mut distinct = wide.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "150, -1, 0 and NULL hash apart");
    let rescaled = hashes(Arc::new(
        Decimal128Array::from(values.map(|v| v.map(i128::from)).to_vec())
            .with_precision_and_scale(38, 3)
            .unwrap(),
    ));
    assert_ne!(rescaled[0], wide[0], "1.50 and 0.150 differ");
    // Values past 64 bits hash apart from the values of their low word alone.
    let past = [
        5i128,
        (1 << 64) + 5,
        5 - (1 << 64),
        i64::MIN.into(),
        i128::from(i64::MIN) - 1,
    ];
    let past = hashes(Arc::new(
        Decimal128Array::from(past.to_vec())
            .with_precision_and_scale(38, 2)
            .unwrap(),
    ));
    let mut distinct = past.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), past.len(), "{past:?}");
}

#[test]
fn arrow_ipc_streams_are_read_too() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("stream.arrows");
    let table = sample();
    let mut writer =
        arrow::ipc::writer::StreamWriter::try_new(File::create(&path).unwrap(), &table.schema())
            .unwrap();
    writer.write(&table).unwrap();
    writer.write(&table).unwrap();
    writer.finish().unwrap();
    let back = read_table(&path, FileFormat::ArrowIpc).unwrap();
    assert_eq!(back.num_rows(), 2 * table.num_rows());
    assert_eq!(back.slice(4, 4).columns(), table.columns());
}

#[test]
fn an_ipc_files_rows_are_counted_from_its_headers_not_its_columns() {
    use arrow::ipc::writer::{IpcWriteOptions, StreamWriter};
    use arrow::ipc::CompressionType;
    let dir = TempDir::new().unwrap();
    let table = numbered(100);
    let options = IpcWriteOptions::default()
        .try_with_compression(Some(CompressionType::ZSTD))
        .unwrap();
    // Batches of 7, 30, 0 and 63 rows, compressed, so that garbage cannot decode.
    let parts = [(0, 7), (7, 30), (37, 0), (37, 63)];
    let path = dir.path().join("parts.arrow");
    let mut writer =
        FileWriter::try_new_with_options(File::create(&path).unwrap(), &table.schema(), options)
            .unwrap();
    for (start, rows) in parts {
        writer.write(&table.slice(start, rows)).unwrap();
    }
    writer.finish().unwrap();
    let stream = dir.path().join("parts.arrows");
    let mut writer =
        StreamWriter::try_new(File::create(&stream).unwrap(), &table.schema()).unwrap();
    for (start, rows) in parts {
        writer.write(&table.slice(start, rows)).unwrap();
    }
    writer.finish().unwrap();
    for path in [&path, &stream] {
        let input = batches::InputFile::open(path, FileFormat::ArrowIpc, &["id".into()]).unwrap();
        assert_eq!(input.rows, 100, "{}", path.display());
        let (schema, read) = input.read_all(false, 2, None).unwrap();
        assert_eq!(concat_batches(&schema, &read).unwrap(), table);
    }
    let input = batches::InputFile::open(&path, FileFormat::ArrowIpc, &["id".into()]).unwrap();
    assert_eq!(input.group_rows(), [7, 30, 0, 63]);
    assert_eq!(input.cuts(), [7, 37, 37]);
    // The second batch's body garbled: the file opens and counts its rows, having decoded no
    // column; reading the batch names the file.
    let blocks = super::shares::ipc_footer_blocks(&mut File::open(&path).unwrap()).unwrap();
    let second = blocks[1];
    let start = (second.offset() + i64::from(second.metaDataLength())) as usize;
    let len = second.bodyLength() as usize;
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[start..start + len].fill(0xA5);
    std::fs::write(&path, &bytes).unwrap();
    let input = batches::InputFile::open(&path, FileFormat::ArrowIpc, &["id".into()]).unwrap();
    assert_eq!(input.rows, 100);
    let Err(Error::Input(message)) = input.read_all(true, 2, None) else {
        panic!("a garbled body is an input error");
    };
    assert!(message.contains("parts.arrow"), "{message}");
}

#[test]
fn an_ipc_file_is_counted_where_arrow_reads_it() {
    // Files in the format before 0.15 (no continuation marker before a message's length), and
    // messages whose length overstates them (arrow's reader goes by the footer's block, not the
    // length): both are read, so both are counted.
    use arrow::ipc::writer::IpcWriteOptions;
    use arrow::ipc::MetadataVersion;
    let dir = TempDir::new().unwrap();
    let table = numbered(100);
    let path = dir.path().join("old.arrow");
    for legacy in [true, false] {
        let options = IpcWriteOptions::try_new(8, legacy, MetadataVersion::V4).unwrap();
        let mut writer = FileWriter::try_new_with_options(
            File::create(&path).unwrap(),
            &table.schema(),
            options,
        )
        .unwrap();
        writer.write(&table.slice(0, 40)).unwrap();
        writer.write(&table.slice(40, 60)).unwrap();
        writer.finish().unwrap();
        let blocks = super::shares::ipc_footer_blocks(&mut File::open(&path).unwrap()).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        let at = blocks[1].offset() as usize;
        assert_eq!(
            bytes[at..at + 4] == [0xff; 4],
            !legacy,
            "the continuation marker"
        );
        let length = at + if legacy { 0 } else { 4 };
        bytes[length..length + 4].copy_from_slice(&(1u32 << 30).to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let arrow_rows: usize =
            arrow::ipc::reader::FileReader::try_new(File::open(&path).unwrap(), None)
                .unwrap()
                .map(|batch| batch.unwrap().num_rows())
                .sum();
        assert_eq!(arrow_rows, 100, "legacy {legacy}");
        let input = batches::InputFile::open(&path, FileFormat::ArrowIpc, &["id".into()]).unwrap();
        assert_eq!(input.group_rows(), [40, 60], "legacy {legacy}");
        let (schema, read) = input.read_all(false, 2, None).unwrap();
        assert_eq!(
            concat_batches(&schema, &read).unwrap(),
            table,
            "legacy {legacy}"
        );
    }
}

#[test]
fn row_counts_that_add_up_past_u64_are_a_corrupt_file() {
    let path = Path::new("parts.arrow");
    assert_eq!(batches::total_rows(path, &[7, 30, 0, 63]).unwrap(), 100);
    assert_eq!(batches::total_rows(path, &[u64::MAX]).unwrap(), u64::MAX);
    match batches::total_rows(path, &[u64::MAX - 1, 1, 1]) {
        Err(Error::Input(message)) => assert!(message.contains("parts.arrow"), "{message}"),
        other => panic!("expected an input error, got {other:?}"),
    }
}

#[test]
fn malformed_csv_names_the_line_and_the_counts() {
    let dir = TempDir::new().unwrap();
    let path = write_bytes(&dir, "left.csv", b"a,b,c\n1,2,3\n\"x\ny\",5,6\n7,8,9,10\n");
    let message = input_message(read_table(&path, FileFormat::Csv));
    // The quoted field spans lines 3 and 4, so the bad record starts on line 5.
    assert!(message.contains("left.csv: line 5:"), "{message}");
    assert!(message.contains("expected 3 fields, found 4"), "{message}");
}

#[test]
fn empty_and_missing_files_are_input_errors() {
    let dir = TempDir::new().unwrap();
    for (format, extension) in ALL_FORMATS {
        let path = write_bytes(&dir, &format!("empty.{extension}"), b"");
        let message = input_message(read_table(&path, format));
        assert!(message.contains("is empty"), "{message}");
        assert!(message.contains(&format!("empty.{extension}")), "{message}");
    }
    let missing = dir.path().join("nope.csv");
    let message = input_message(read_table(&missing, FileFormat::Csv));
    assert!(message.contains("nope.csv: no such file"), "{message}");
}

#[test]
fn header_only_csv_is_a_table_of_zero_rows() {
    let dir = TempDir::new().unwrap();
    let path = write_bytes(&dir, "h.csv", b"id,name\n");
    let batch = read_table(&path, FileFormat::Csv).unwrap();
    assert_eq!(batch.num_rows(), 0);
    let names: Vec<&str> = batch
        .schema_ref()
        .fields()
        .iter()
        .map(|field| field.name().as_str())
        .collect();
    assert_eq!(names, ["id", "name"]);
    // Its all-NULL key column joins a key of either kind.
    let int_schema = Schema::new(vec![Field::new("id", DataType::Int64, false)]);
    let key = strings(&["id"]);
    check_key_compat(
        (&path, batch.schema_ref(), &key),
        (Path::new("r.parquet"), &int_schema, &key),
    )
    .unwrap();
}

#[test]
fn a_line_without_header_is_rejected() {
    let dir = TempDir::new().unwrap();
    let path = write_bytes(&dir, "blank.csv", b"\n\n");
    let message = input_message(read_table(&path, FileFormat::Csv));
    assert!(message.contains("no header row"), "{message}");
}

#[test]
fn truncated_files_are_input_errors_not_panics() {
    let dir = TempDir::new().unwrap();
    for (format, extension) in [
        (FileFormat::Parquet, "parquet"),
        (FileFormat::ArrowIpc, "arrow"),
    ] {
        let path = dir.path().join(format!("cut.{extension}"));
        write_table(&path, format, &sample()).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        let message = input_message(read_table(&path, format));
        assert!(message.contains(&format!("cut.{extension}")), "{message}");
        assert!(message.contains("truncated or corrupt"), "{message}");
    }
    // Bytes that are not the format at all.
    let path = write_bytes(&dir, "text.parquet", b"id,name\n1,a\n");
    input_message(read_table(&path, FileFormat::Parquet));
    let path = write_bytes(&dir, "text.arrow", b"id,name\n1,a\n");
    input_message(read_table(&path, FileFormat::ArrowIpc));
}

/// Rewrites the count `rows` in the Parquet footer of `path` as `claimed`: of the places the
/// footer holds `rows` as a thrift i64 field (compact protocol: the header byte 0x16, then the
/// zigzag varint), the one where `count` (read back from the patched footer) becomes `claimed`,
/// with the footer's length mended; the file is left so patched. The parquet crate's own
/// metadata writer recomputes the counts, so a lying footer is made by hand.
pub(crate) fn patch_parquet_count(
    path: &Path,
    rows: i64,
    claimed: i64,
    count: impl Fn(&parquet::file::metadata::ParquetMetaData) -> i64,
) {
    let varint = |value: i64| {
        let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
        let mut bytes = Vec::new();
        while zigzag >= 0x80 {
            bytes.push(0x80 | (zigzag & 0x7f) as u8);
            zigzag >>= 7;
        }
        bytes.push(zigzag as u8);
        bytes
    };
    let bytes = std::fs::read(path).unwrap();
    let footer = u32::from_le_bytes(bytes[bytes.len() - 8..bytes.len() - 4].try_into().unwrap());
    let start = bytes.len() - 8 - footer as usize;
    let end = bytes.len() - 8;
    // A short field header: field id delta 1, type i64.
    let field: Vec<u8> = [vec![0x16], varint(rows)].concat();
    let patched = (start..end - field.len())
        .filter(|&at| bytes[at..at + field.len()] == field[..])
        .find_map(|at| {
            let mut footer = bytes[start..at + 1].to_vec();
            footer.extend(varint(claimed));
            footer.extend(&bytes[at + field.len()..end]);
            let mut patched = bytes[..start].to_vec();
            patched.extend(&footer);
            patched.extend((footer.len() as u32).to_le_bytes());
            patched.extend(b"PAR1");
            std::fs::write(path, &patched).unwrap();
            let metadata = parquet::file::metadata::ParquetMetaDataReader::new()
                .parse_and_finish(&File::open(path).unwrap())
                .ok()?;
            (count(&metadata) == claimed).then_some(())
        });
    assert!(patched.is_some(), "the count {rows} in the footer");
}

/// Rewrites the total row count in the footer of `path` from `rows` to `claimed`.
fn claim_parquet_rows(path: &Path, rows: i64, claimed: i64) {
    patch_parquet_count(path, rows, claimed, |metadata| {
        metadata.file_metadata().num_rows()
    });
}

#[test]
fn a_footers_row_count_gives_way_to_its_row_groups() {
    // A writer that miscounts in the footer's total still wrote every row group's count, and
    // those rows are what the reader decodes: a file read whole reads them, and so must a file
    // read in parts, where the parts are cut by the footer's counts.
    let dir = TempDir::new().unwrap();
    let table = numbered(100);
    let path = dir.path().join("groups.parquet");
    let mut writer = ArrowWriter::try_new(
        File::create(&path).unwrap(),
        table.schema(),
        Some(
            WriterProperties::builder()
                .set_max_row_group_row_count(Some(7))
                .build(),
        ),
    )
    .unwrap();
    writer.write(&table).unwrap();
    writer.close().unwrap();
    let mut says = 100;
    for claimed in [93, 107] {
        claim_parquet_rows(&path, says, claimed);
        says = claimed;
        assert_eq!(read_table(&path, FileFormat::Parquet).unwrap(), table);
        let input = batches::InputFile::open(&path, FileFormat::Parquet, &["id".into()]).unwrap();
        assert_eq!(input.rows, 100, "footer says {claimed}");
        for threads in [1, 2, 3] {
            let (schema, batches) = input.read_all(false, threads, None).unwrap();
            assert_eq!(
                concat_batches(&schema, &batches).unwrap(),
                table,
                "footer says {claimed}, {threads} threads"
            );
        }
    }
    // A total of 0 is the one the reader cannot read past: it decodes batches of at most the
    // total's rows.
    claim_parquet_rows(&path, 107, 0);
    match batches::InputFile::open(&path, FileFormat::Parquet, &["id".into()]) {
        Err(Error::Input(message)) => {
            assert!(message.contains("groups.parquet"), "{message}");
            assert!(message.contains("footer says it holds 0 rows"), "{message}");
        }
        other => panic!("a footer of 0 rows: expected an input error, got {other:?}"),
    }
}

#[test]
fn a_row_group_that_holds_other_rows_than_it_claims_is_a_corrupt_file() {
    // Every row is placed by its row group's count before it is decoded (the part of the file
    // a worker reads, its slot in the output), so a count that the pages do not bear out is a
    // corrupt file, named, not a misplaced batch found deep in the join.
    let dir = TempDir::new().unwrap();
    let table = numbered(100);
    let path = dir.path().join("claims.parquet");
    let write_parquet = |path: &Path, table: &RecordBatch| {
        let mut writer =
            ArrowWriter::try_new(File::create(path).unwrap(), table.schema(), None).unwrap();
        writer.write(table).unwrap();
        writer.close().unwrap();
    };
    for (claimed, decoded) in [
        (120, "but 100 were decoded"),
        (80, "but more than 80 were decoded"),
    ] {
        write_parquet(&path, &table);
        patch_parquet_count(&path, 100, claimed, |metadata| {
            metadata.row_group(0).num_rows()
        });
        let input = batches::InputFile::open(&path, FileFormat::Parquet, &["id".into()]).unwrap();
        assert_eq!(input.rows, claimed as u64);
        for (keys_only, threads) in [(true, 1), (false, 1), (false, 2)] {
            let Err(Error::Input(message)) = input.read_all(keys_only, threads, None) else {
                panic!("claims {claimed}: a miscounted row group is an input error");
            };
            assert!(message.contains("claims.parquet"), "{message}");
            assert!(
                message.contains(&format!("say {claimed} rows, {decoded}")),
                "{message}"
            );
        }
    }
    // A claim of 2^32 - 1 rows or more is refused as the file is opened, before any of it is
    // read.
    for claimed in [u32::MAX as i64, 1 << 40] {
        write_parquet(&path, &table);
        patch_parquet_count(&path, 100, claimed, |metadata| {
            metadata.row_group(0).num_rows()
        });
        match batches::InputFile::open(&path, FileFormat::Parquet, &["id".into()]) {
            Err(Error::Input(message)) => {
                assert!(message.contains("claims.parquet"), "{message}");
                assert!(
                    message.contains(&format!("{claimed} rows, more than")),
                    "{message}"
                );
            }
            other => panic!("claims {claimed}: expected an input error, got {other:?}"),
        }
    }
}

#[test]
fn invalid_utf8_in_csv_names_the_line() {
    let dir = TempDir::new().unwrap();
    let path = write_bytes(&dir, "latin.csv", b"id,name\n1,ok\n2,caf\xe9\n");
    let message = input_message(read_table(&path, FileFormat::Csv));
    assert!(message.contains("latin.csv: line 3:"), "{message}");
    assert!(message.contains("UTF-8"), "{message}");
}

/// CSV-like bytes: a header and rows of a fixed field count whose fields are numbers, words,
/// empty, quoted (with separators and line ends inside) or not UTF-8, then a few bytes
/// overwritten with anything, so that both well-formed and broken files come out.
fn csv_like_bytes() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
    use proptest::prelude::*;
    let field = prop_oneof![
        4 => (-50i64..50).prop_map(|n| n.to_string().into_bytes()),
        2 => "[a-c]{0,3}".prop_map(String::into_bytes),
        1 => Just(b"\"x,\ny\"".to_vec()),
        1 => Just(b"1.5".to_vec()),
        1 => Just(vec![b'c', 0xe9]),
    ];
    let table = (1usize..4).prop_flat_map(move |columns| {
        proptest::collection::vec(proptest::collection::vec(field.clone(), columns), 0..8)
    });
    let corruption = proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3);
    (table, corruption, any::<bool>()).prop_map(|(rows, corruption, crlf)| {
        let mut bytes = Vec::new();
        let columns = rows.first().map_or(1, Vec::len);
        let header: Vec<String> = (0..columns).map(|c| format!("c{c}")).collect();
        bytes.extend_from_slice(header.join(",").as_bytes());
        for row in rows {
            bytes.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
            bytes.extend_from_slice(&row.join(&b',')[..]);
        }
        for (at, byte) in corruption {
            if !bytes.is_empty() {
                let at = at.index(bytes.len());
                bytes[at] = byte;
            }
        }
        bytes
    })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 2000, ..Default::default() })]
    /// The CSV path never panics: any bytes are read as a table or rejected as bad input that
    /// names the file; a table read is joinable by any of its columns or rejected likewise.
    #[test]
    fn csv_reading_never_panics(bytes in csv_like_bytes()) {
        let dir = TempDir::new().unwrap();
        let path = write_bytes(&dir, "fuzz.csv", &bytes);
        match read_table(&path, FileFormat::Csv) {
            Ok(batch) => {
                let _ = row_hashes(&batch);
                let columns: Vec<String> =
                    batch.schema().fields().iter().map(|f| f.name().clone()).collect();
                for column in &columns {
                    if let Err(error) = extract_keys(&batch, std::slice::from_ref(column), &path) {
                        let message = error.to_string();
                        proptest::prop_assert!(message.contains("fuzz.csv"), "{}", message);
                    }
                }
            }
            Err(Error::Input(message)) => {
                proptest::prop_assert!(message.contains("fuzz.csv"), "{}", message);
            }
            Err(other) => proptest::prop_assert!(false, "not an input error: {:?}", other),
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 500, ..Default::default() })]
    /// Streaming a CSV file gives exactly the table that reading it whole gives, in chunks;
    /// a file that cannot be read whole fails when opened or while streamed, never panics.
    #[test]
    fn streamed_csv_is_the_whole_table(bytes in csv_like_bytes()) {
        use crate::io::batches::{InputFile, CHUNK_ROWS};
        let dir = TempDir::new().unwrap();
        let path = write_bytes(&dir, "fuzz.csv", &bytes);
        let whole = read_table(&path, FileFormat::Csv);
        let key = whole.as_ref().ok().and_then(|batch| {
            batch.schema().fields().iter().map(|f| f.name().clone()).find(|name| {
                extract_keys(batch, std::slice::from_ref(name), &path).is_ok()
            })
        });
        let streamed = InputFile::open(&path, FileFormat::Csv, &[key.clone().unwrap_or_else(|| "c0".into())])
            .and_then(|input| {
                let batches = input.batches(false)?.collect::<Result<Vec<_>>>()?;
                Ok((input, batches))
            });
        match (whole, key, streamed) {
            (Ok(batch), Some(_), Ok((input, batches))) => {
                proptest::prop_assert_eq!(input.rows, batch.num_rows() as u64);
                proptest::prop_assert!(batches.iter().rev().skip(1).all(|b| b.num_rows() == CHUNK_ROWS));
                let joined = concat(&path, &input.schema, &batches).unwrap();
                proptest::prop_assert_eq!(joined, batch);
            }
            (Ok(_), Some(_), Err(error)) => {
                proptest::prop_assert!(false, "read whole but not streamed: {}", error);
            }
            (_, _, Err(Error::Input(message))) => {
                proptest::prop_assert!(message.contains("fuzz.csv"), "{}", message);
            }
            (Err(_), _, Ok(_)) => proptest::prop_assert!(false, "streamed a file that cannot be read"),
            (_, _, Err(other)) => proptest::prop_assert!(false, "not an input error: {:?}", other),
            (Ok(_), None, Ok(_)) => {}
        }
    }
}

#[test]
fn key_type_mismatch_names_both_columns() {
    let left = Schema::new(vec![Field::new("id", DataType::Int64, false)]);
    let right = Schema::new(vec![Field::new("uid", DataType::Utf8, true)]);
    let result = check_key_compat(
        (Path::new("left.parquet"), &left, &strings(&["id"])),
        (Path::new("right.csv"), &right, &strings(&["uid"])),
    );
    match result {
        Err(Error::Input(message)) => {
            assert!(
                message.contains("left.parquet column `id` is integer (Int64)"),
                "{message}"
            );
            assert!(
                message.contains("right.csv column `uid` is string (Utf8)"),
                "{message}"
            );
        }
        other => panic!("expected an input error, got {other:?}"),
    }
    let counts = check_key_compat(
        (Path::new("l.csv"), &left, &strings(&["id"])),
        (Path::new("r.csv"), &right, &strings(&["uid", "uid"])),
    );
    assert!(matches!(counts, Err(Error::Usage(_))), "{counts:?}");
}

#[test]
fn bad_key_columns_are_explained() {
    let schema = Schema::new(vec![
        Field::new("Id", DataType::Int64, false),
        Field::new("price", DataType::Duration(TimeUnit::Second), false),
    ]);
    let path = Path::new("t.parquet");
    match key_kinds(&schema, &strings(&["id"]), path) {
        Err(Error::Input(message)) => {
            assert!(
                message.contains("t.parquet has no column `id`"),
                "{message}"
            );
            assert!(message.contains("did you mean `Id`"), "{message}");
            assert!(message.contains("`Id`, `price`"), "{message}");
        }
        other => panic!("expected an input error, got {other:?}"),
    }
    match key_kinds(&schema, &strings(&["price"]), path) {
        Err(Error::Input(message)) => {
            assert!(message.contains("`price`"), "{message}");
            assert!(message.contains("Duration"), "{message}");
            assert!(message.contains("cast"), "{message}");
        }
        other => panic!("expected an input error, got {other:?}"),
    }
    assert_eq!(
        key_kinds(&schema, &strings(&["Id"]), path).unwrap(),
        [KeyKind::Int]
    );
}

#[test]
fn a_missing_decoder_feature_is_not_called_corruption() {
    let path = Path::new("t.parquet");
    let missing = ParquetError::General("Disabled feature at compile time: zstd".into());
    let message = parquet_read_error(path, missing).to_string();
    assert!(
        message.contains("uses a feature skewjoin cannot read"),
        "{message}"
    );
    assert!(message.contains("zstd"), "{message}");
    assert!(!message.contains("may be truncated"), "{message}");
    let bad = ParquetError::General("Invalid Parquet file. Corrupt footer".into());
    let message = parquet_read_error(path, bad).to_string();
    assert!(message.contains("may be truncated or corrupt"), "{message}");
}

#[test]
fn equal_decimals_at_any_scale_are_one_text() {
    assert_eq!(canonical_decimal("150", 2), "15e-1");
    assert_eq!(canonical_decimal("1500", 3), "15e-1");
    assert_eq!(canonical_decimal("-1", 2), "-1e-2");
    assert_eq!(canonical_decimal("0", 5), "0e0");
    assert_eq!(canonical_decimal("12", -2), "12e2");
    assert_eq!(canonical_decimal("1200", 0), "12e2");
    assert_ne!(canonical_decimal("15", 1), canonical_decimal("15", 0));
}

#[test]
fn the_csv_delimiter_is_the_commonest_in_the_header() {
    let delimiter = |head: &str| csv_syntax(head.as_bytes()).delimiter;
    assert_eq!(delimiter("a,b,c\n1;2;3;4;5\n"), b',');
    assert_eq!(delimiter("a\tb\tc\n"), b'\t');
    assert_eq!(delimiter("a;b,c;d\n"), b';');
    assert_eq!(delimiter("\"a;b\",c\n"), b',');
    assert_eq!(delimiter("a|b\n"), b'|');
    assert_eq!(delimiter("a;b,c\n"), b',', "a tie is a comma");
    assert_eq!(delimiter("only\n"), b',');
    assert_eq!(parse_csv_byte("tab"), Ok(b'\t'));
    assert_eq!(parse_csv_byte(";"), Ok(b';'));
    assert!(parse_csv_byte(";;").is_err());
    assert!(parse_csv_byte("é").is_err());
}

#[test]
fn int32_and_int64_keys_are_compatible_and_equal() {
    let narrow = RecordBatch::try_from_iter([(
        "k",
        Arc::new(Int32Array::from(vec![Some(5), None, Some(-2)])) as ArrayRef,
    )])
    .unwrap();
    let wide = RecordBatch::try_from_iter([(
        "k",
        Arc::new(Int64Array::from(vec![Some(5), None, Some(-2)])) as ArrayRef,
    )])
    .unwrap();
    let key = strings(&["k"]);
    check_key_compat(
        (Path::new("a.arrow"), narrow.schema_ref(), &key),
        (Path::new("b.arrow"), wide.schema_ref(), &key),
    )
    .unwrap();
    let narrow_keys = extract_keys(&narrow, &key, Path::new("a.arrow")).unwrap();
    let wide_keys = extract_keys(&wide, &key, Path::new("b.arrow")).unwrap();
    assert_eq!(narrow_keys, [Key::Int(5), Key::Null, Key::Int(-2)]);
    assert_eq!(narrow_keys, wide_keys);
}

#[test]
fn composite_keys_with_a_null_part_are_null() {
    let batch = RecordBatch::try_from_iter([
        (
            "a",
            Arc::new(Int64Array::from(vec![Some(1), None, Some(3)])) as ArrayRef,
        ),
        (
            "b",
            Arc::new(StringArray::from(vec![Some("x"), Some("y"), None])) as ArrayRef,
        ),
    ])
    .unwrap();
    let keys = extract_keys(&batch, &strings(&["a", "b"]), Path::new("t.csv")).unwrap();
    assert_eq!(
        keys,
        [
            Key::composite(vec![Key::Int(1), Key::str("x")]),
            Key::Null,
            Key::Null,
        ]
    );
    let single = extract_keys(&batch, &strings(&["b"]), Path::new("t.csv")).unwrap();
    assert_eq!(single, [Key::str("x"), Key::str("y"), Key::Null]);
}

/// Two integer key columns make the same keys whatever their widths, held inline where
/// both values fit in 32 bits.
#[test]
fn two_integer_key_columns_make_the_same_keys_at_any_width() {
    let narrow = RecordBatch::try_from_iter([
        (
            "a",
            Arc::new(Int32Array::from(vec![Some(1), Some(-7), None])) as ArrayRef,
        ),
        (
            "b",
            Arc::new(Int16Array::from(vec![Some(2), Some(3), Some(4)])) as ArrayRef,
        ),
    ])
    .unwrap();
    let wide = RecordBatch::try_from_iter([
        (
            "a",
            Arc::new(Int64Array::from(vec![
                Some(1),
                Some(-7),
                None,
                Some(1 << 40),
            ])) as ArrayRef,
        ),
        (
            "b",
            Arc::new(Int64Array::from(vec![Some(2), Some(3), Some(4), Some(2)])) as ArrayRef,
        ),
    ])
    .unwrap();
    let columns = strings(&["a", "b"]);
    let narrow = extract_keys(&narrow, &columns, Path::new("n.parquet")).unwrap();
    let wide = extract_keys(&wide, &columns, Path::new("w.csv")).unwrap();
    assert_eq!(narrow, [Key::IntPair(1, 2), Key::IntPair(-7, 3), Key::Null]);
    assert_eq!(wide[..3], narrow[..]);
    assert_eq!(
        wide[3],
        Key::composite(vec![Key::Int(1 << 40), Key::Int(2)])
    );
    assert!(matches!(wide[3], Key::Composite(_)));
}

/// A batch with every key shape the fast paths must agree on, and the key columns of each:
/// nullable Int64, Int32 (normalised to Int64), strings and a composite. Key 3 (`"k3"`) is
/// on half of the rows; a NULL on every tenth of the nullable columns.
fn key_shapes() -> (RecordBatch, [Vec<String>; 4]) {
    let ints: Vec<Option<i64>> = (0..400i64)
        .map(|i| match i {
            _ if i % 10 == 0 => None,
            _ if i % 2 == 0 => Some(3),
            _ => Some(i),
        })
        .collect();
    let dense: Vec<i32> = (0..400).map(|i| if i % 2 == 0 { 3 } else { i }).collect();
    let text: Vec<Option<String>> = ints
        .iter()
        .map(|key| key.map(|key| format!("k{key}")))
        .collect();
    let batch = RecordBatch::try_from_iter([
        ("nullable", Arc::new(Int64Array::from(ints)) as ArrayRef),
        ("narrow", Arc::new(Int32Array::from(dense)) as ArrayRef),
        ("text", Arc::new(StringArray::from(text)) as ArrayRef),
    ])
    .unwrap();
    let columns = [
        strings(&["nullable"]),
        strings(&["narrow"]),
        strings(&["text"]),
        strings(&["narrow", "text"]),
    ];
    (batch, columns)
}

/// The integer fast path counts what counting each row's [`Key`] counts: the same hot key,
/// share and loads, NULLs included in the rows, for every key shape.
#[test]
fn tallied_keys_find_the_skew_that_extracted_keys_find() {
    let (batch, shapes) = key_shapes();
    let path = Path::new("t.parquet");
    for columns in shapes {
        let mut fast = KeyTally::with_room_for(400);
        let mut by_key = KeyTally::default();
        for side in [Side::Left, Side::Right] {
            tally_keys(&batch, &columns, path, side, &mut fast).unwrap();
            for key in extract_keys(&batch, &columns, path).unwrap() {
                by_key.add(side, &key);
            }
        }
        let found = fast.skew(4, 2, WorkCosts::THREADS);
        assert!(found.is_some(), "{columns:?}: key 3 is hot");
        assert_eq!(found, by_key.skew(4, 2, WorkCosts::THREADS), "{columns:?}");
    }
}

/// The keys given one at a time are the keys collected, for every key shape.
#[test]
fn keys_given_one_at_a_time_are_the_keys_extracted() {
    let (batch, shapes) = key_shapes();
    let path = Path::new("t.parquet");
    for columns in shapes {
        let mut given = Vec::new();
        for_each_key(&batch, &columns, path, |key| given.push(key)).unwrap();
        let extracted = extract_keys(&batch, &columns, path).unwrap();
        assert_eq!(given, extracted, "{columns:?}");
    }
}

#[test]
fn unsigned_keys_above_i64_max_are_rejected_when_met() {
    let fits = RecordBatch::try_from_iter([(
        "k",
        Arc::new(UInt64Array::from(vec![7, i64::MAX as u64])) as ArrayRef,
    )])
    .unwrap();
    let keys = extract_keys(&fits, &strings(&["k"]), Path::new("u.parquet")).unwrap();
    assert_eq!(keys, [Key::Int(7), Key::Int(i64::MAX)]);

    let too_big = RecordBatch::try_from_iter([(
        "k",
        Arc::new(UInt64Array::from(vec![7, u64::MAX])) as ArrayRef,
    )])
    .unwrap();
    match extract_keys(&too_big, &strings(&["k"]), Path::new("u.parquet")) {
        Err(Error::Input(message)) => {
            assert!(message.contains("u.parquet column `k` row 2"), "{message}");
            assert!(message.contains(&u64::MAX.to_string()), "{message}");
        }
        other => panic!("expected an input error, got {other:?}"),
    }
}

#[test]
fn row_hashes_are_canonical_across_types() {
    let hash_of =
        |column: ArrayRef| row_hashes(&RecordBatch::try_from_iter([("c", column)]).unwrap());
    let ints = hash_of(Arc::new(Int64Array::from(vec![Some(0), Some(1), None])));
    assert_eq!(
        ints,
        hash_of(Arc::new(Int32Array::from(vec![Some(0), Some(1), None])))
    );
    assert_eq!(
        ints[..2],
        hash_of(Arc::new(BooleanArray::from(vec![false, true])))[..]
    );
    assert_ne!(ints[0], ints[2], "NULL is not 0");

    let floats = hash_of(Arc::new(Float64Array::from(vec![
        0.0,
        -0.0,
        f64::NAN,
        -f64::NAN,
        1.0,
    ])));
    assert_eq!(floats[0], floats[1]);
    assert_eq!(floats[2], floats[3]);
    assert_ne!(floats[0], floats[4]);

    let text = hash_of(Arc::new(StringArray::from(vec!["a", "b"])));
    assert_eq!(
        text,
        hash_of(Arc::new(StringViewArray::from(vec!["a", "b"])))
    );
    assert_ne!(text[0], text[1]);
}

#[test]
fn output_schema_renames_collisions_and_drops_unoutput_sides() {
    let left = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
    ]);
    let right = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("id_right", DataType::Utf8, false),
        Field::new("name", DataType::Utf8, false),
    ]);
    let names = |schema: &SchemaRef| -> Vec<String> {
        schema
            .fields()
            .iter()
            .map(|field| field.name().clone())
            .collect()
    };

    let inner = output_schema(&left, &right, JoinType::Inner);
    assert_eq!(
        names(&inner),
        ["id", "name", "id_right2", "id_right", "name_right"]
    );
    assert!(inner.fields().iter().all(|field| !field.is_nullable()));

    let left_join = output_schema(&left, &right, JoinType::Left);
    let nullable: Vec<bool> = left_join.fields().iter().map(|f| f.is_nullable()).collect();
    assert_eq!(nullable, [false, false, true, true, true]);

    let semi = output_schema(&left, &right, JoinType::LeftSemi);
    assert_eq!(names(&semi), ["id", "name"]);
    let anti = output_schema(&left, &right, JoinType::RightAnti);
    assert_eq!(names(&anti), ["id", "id_right", "name"]);
}

#[test]
fn output_schema_keeps_a_repeated_input_name_once() {
    // A CSV header may repeat a name; the output must not, or it cannot be read back by name.
    let field = |name: &str| Field::new(name, DataType::Int64, false);
    let left = Schema::new(vec![field("k"), field("a"), field("a"), field("a_2")]);
    let right = Schema::new(vec![field("k"), field("a"), field("b"), field("b")]);
    let schema = output_schema(&left, &right, JoinType::Inner);
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(
        names,
        ["k", "a", "a_3", "a_2", "k_right", "a_right", "b", "b_2"]
    );
    let distinct: std::collections::HashSet<&&str> = names.iter().collect();
    assert_eq!(distinct.len(), names.len());
}

#[test]
fn output_schema_drops_the_inputs_parquet_field_ids_and_keeps_other_metadata() {
    // Both inputs number their columns from 1: kept, the ids would name two output columns alike.
    let with_id = |name: &str, id: &str| {
        let mut field = Field::new(name, DataType::Int64, false);
        field.metadata_mut().insert("PARQUET:field_id", id);
        field
            .metadata_mut()
            .insert("comment", format!("{name} as written"));
        field
    };
    let left = Schema::new(vec![with_id("k", "1"), with_id("a", "2")]);
    let right = Schema::new(vec![with_id("k", "1"), with_id("b", "2")]);
    let schema = output_schema(&left, &right, JoinType::Inner);
    for field in schema.fields() {
        assert!(
            !field.metadata().contains_key("PARQUET:field_id"),
            "{field:?}"
        );
        let base = field.name().trim_end_matches("_right");
        assert_eq!(field.metadata()["comment"], format!("{base} as written"));
    }
}

#[test]
fn take_output_pads_with_nulls() {
    let left = RecordBatch::try_from_iter([
        ("id", Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef),
        (
            "l",
            Arc::new(StringArray::from(vec!["a", "b", "c"])) as ArrayRef,
        ),
    ])
    .unwrap();
    let right = RecordBatch::try_from_iter([
        ("id", Arc::new(Int64Array::from(vec![3, 1])) as ArrayRef),
        ("r", Arc::new(StringArray::from(vec!["x", "y"])) as ArrayRef),
    ])
    .unwrap();
    let schema = output_schema(left.schema_ref(), right.schema_ref(), JoinType::Full);
    let (left_store, right_store) = (
        RowStore::whole(left.clone()),
        RowStore::whole(right.clone()),
    );
    let out = take_output(
        &schema,
        JoinType::Full,
        &left_store,
        &right_store,
        &[0, 1, 2, PAD],
        &[1, PAD, 0, PAD],
    )
    .unwrap();
    assert_eq!(out.num_columns(), 4);
    assert_eq!(
        out.column(0).as_ref(),
        &Int64Array::from(vec![Some(1), Some(2), Some(3), None])
    );
    assert_eq!(
        out.column(3).as_ref(),
        &StringArray::from(vec![Some("y"), None, Some("x"), None])
    );

    // An empty right side pads everything; semi joins ignore the right rows entirely.
    let empty = RowStore::whole(RecordBatch::new_empty(right.schema()));
    let schema = output_schema(left.schema_ref(), right.schema_ref(), JoinType::Left);
    let out = take_output(&schema, JoinType::Left, &left_store, &empty, &[2], &[PAD]).unwrap();
    assert_eq!(out.column(2).null_count(), 1);
    let schema = output_schema(left.schema_ref(), right.schema_ref(), JoinType::LeftSemi);
    let out = take_output(
        &schema,
        JoinType::LeftSemi,
        &left_store,
        &right_store,
        &[2, 0],
        &[],
    )
    .unwrap();
    assert_eq!(out.num_rows(), 2);
    assert_eq!(out.num_columns(), 2);

    let bad = take_output(
        &schema,
        JoinType::LeftSemi,
        &left_store,
        &right_store,
        &[3],
        &[],
    );
    assert!(matches!(bad, Err(Error::Internal(_))), "{bad:?}");
}

#[test]
fn a_store_filled_by_parts_gives_the_rows_of_the_whole_batch() {
    let ids: Vec<Option<i64>> = (0..10).map(|i| (i % 4 != 3).then_some(i)).collect();
    let names: Vec<String> = (0..10).map(|i| format!("n{i}")).collect();
    let whole = RecordBatch::try_from_iter([
        ("id", Arc::new(Int64Array::from(ids)) as ArrayRef),
        ("name", Arc::new(StringArray::from(names)) as ArrayRef),
    ])
    .unwrap();
    // Three parts, one empty, read in chunks of 4 rows from each part's start: rows 0..3,
    // 3..7 and 7..10.
    let chunked = RowStore::parts(whole.schema(), &[0..3, 3..3, 3..10], 4);
    // Chunks arrive in any order; a chunk that does not start where one does, of the wrong size,
    // or a second copy is refused.
    // Each row's hash is kept with it, here its number times 3.
    let hashes =
        |start: usize, len: usize| Some((start..start + len).map(|row| row as u64 * 3).collect());
    for (start, len) in [(7, 3), (0, 3), (3, 4)] {
        let batch = whole.slice(start, len);
        assert!(chunked.put(start as u64, whole.slice(0, 1), None).is_err());
        assert!(chunked
            .put(start as u64 + 1, whole.slice(start + 1, 1), None)
            .is_err());
        assert!(chunked
            .put(start as u64, batch.clone(), hashes(start, len - 1))
            .is_err());
        chunked
            .put(start as u64, batch.clone(), hashes(start, len))
            .unwrap();
        assert!(chunked.put(start as u64, batch, None).is_err());
    }
    assert!(chunked.put(10, whole.slice(0, 0), None).is_err());
    for row in 0..10 {
        assert_eq!(chunked.hash(row).unwrap(), row * 3);
    }
    assert!(matches!(chunked.hash(10), Err(Error::Internal(_))));
    let rows = [9, PAD, 0, 4, 3, 7, 8, PAD, 1];
    let right = RowStore::whole(RecordBatch::new_empty(whole.schema()));
    let schema = output_schema(whole.schema_ref(), whole.schema_ref(), JoinType::Full);
    let pads = vec![PAD; rows.len()];
    let expected = take_output(
        &schema,
        JoinType::Full,
        &RowStore::whole(whole.clone()),
        &right,
        &rows,
        &pads,
    )
    .unwrap();
    let got = take_output(&schema, JoinType::Full, &chunked, &right, &rows, &pads).unwrap();
    assert_eq!(got, expected);
    assert_eq!(got.column(0).null_count(), 4, "two pads and two NULL ids");

    // A row whose chunk has not been read is a bug, reported as such.
    let partial = RowStore::parts(whole.schema(), &[0..4, 4..10], 4);
    partial.put(0, whole.slice(0, 4), None).unwrap();
    let early = take_output(&schema, JoinType::Full, &partial, &right, &[5], &[PAD]);
    assert!(matches!(early, Err(Error::Internal(_))), "{early:?}");
    // So is the hash of a row whose chunk was kept without its hashes, or not read.
    assert!(matches!(partial.hash(1), Err(Error::Internal(_))));
    assert!(matches!(partial.hash(5), Err(Error::Internal(_))));
}

#[test]
fn dropped_writer_leaves_nothing_behind() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("out.parquet");
    let table = sample();
    let mut writer = OutputWriter::create(
        &path,
        FileFormat::Parquet,
        OutputCompression::Zstd,
        table.schema(),
    )
    .unwrap();
    writer.write(&table).unwrap();
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "the temporary file"
    );
    drop(writer);
    assert!(!path.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn writing_into_a_missing_directory_is_an_io_error() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("no/such/dir/out.csv");
    match OutputWriter::create(
        &path,
        FileFormat::Csv,
        OutputCompression::None,
        sample().schema(),
    ) {
        Err(Error::Io(message)) => {
            assert!(message.contains("out.csv"), "{message}");
            assert!(message.contains("does not exist"), "{message}");
            assert!(
                !message.contains(".out.csv."),
                "no temporary name: {message}"
            );
        }
        Err(other) => panic!("expected an io error, got {other:?}"),
        Ok(_) => panic!("expected an io error, got a writer"),
    }
}

#[test]
fn finished_writer_replaces_the_target_even_when_empty() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("out.csv");
    std::fs::write(&path, "old contents\n").unwrap();
    let table = sample();
    OutputWriter::create(
        &path,
        FileFormat::Csv,
        OutputCompression::None,
        table.schema(),
    )
    .unwrap()
    .finish()
    .unwrap();
    let back = read_table(&path, FileFormat::Csv).unwrap();
    assert_eq!(back.num_rows(), 0);
    assert_eq!(
        back.num_columns(),
        table.num_columns(),
        "the header was written"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_ne!(
            mode & 0o044,
            0,
            "readable beyond the owner, as a normal new file"
        );
    }
}

// -----------------------------------------------------------------------------------------
// Shares
// -----------------------------------------------------------------------------------------

/// `rows` rows of an Int64 id, a Utf8 name with NULLs and a Float64.
fn numbered(rows: usize) -> RecordBatch {
    let ids: Vec<i64> = (0..rows as i64).collect();
    let names: Vec<Option<String>> = (0..rows)
        .map(|row| (row % 7 != 3).then(|| format!("n{row}, x")))
        .collect();
    let scores: Vec<f64> = (0..rows).map(|row| row as f64 / 4.0).collect();
    RecordBatch::try_from_iter([
        ("id", Arc::new(Int64Array::from(ids)) as ArrayRef),
        ("name", Arc::new(StringArray::from(names)) as ArrayRef),
        ("score", Arc::new(Float64Array::from(scores)) as ArrayRef),
    ])
    .unwrap()
}

/// Every share of `count` through the public API, concatenated in order.
fn all_shares(path: &Path, format: FileFormat, count: usize) -> Result<RecordBatch> {
    let parts = (0..count)
        .map(|index| read_table_share(path, format, Share { index, count }))
        .collect::<Result<Vec<_>>>()?;
    for part in &parts {
        assert_eq!(
            part.schema(),
            parts[0].schema(),
            "one schema on every share"
        );
    }
    Ok(concat_batches(&parts[0].schema(), &parts).unwrap())
}

fn shares_equal_whole(path: &Path, format: FileFormat, counts: &[usize]) {
    let whole = read_table(path, format).unwrap();
    for &count in counts {
        let shares = all_shares(path, format, count).unwrap();
        assert_eq!(shares.schema(), whole.schema(), "{format} count {count}");
        assert_eq!(shares.columns(), whole.columns(), "{format} count {count}");
    }
}

#[test]
fn parquet_shares_are_runs_of_row_groups() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("groups.parquet");
    let table = numbered(1000);
    let properties = WriterProperties::builder()
        .set_max_row_group_row_count(Some(100))
        .build();
    let mut writer = ArrowWriter::try_new(
        File::create(&path).unwrap(),
        table.schema(),
        Some(properties),
    )
    .unwrap();
    writer.write(&table).unwrap();
    writer.close().unwrap();
    shares_equal_whole(&path, FileFormat::Parquet, &[1, 2, 3, 4, 5, 7, 10, 11, 25]);
    // Ten groups of 100 rows: five shares take two groups each.
    for index in 0..5 {
        let share = read_table_share(&path, FileFormat::Parquet, Share { index, count: 5 });
        assert_eq!(share.unwrap().num_rows(), 200, "share {index}");
    }
    // More shares than groups: the groups are spread out, the other shares are empty.
    let sizes: Vec<usize> = (0..25)
        .map(|index| {
            read_table_share(&path, FileFormat::Parquet, Share { index, count: 25 })
                .unwrap()
                .num_rows()
        })
        .collect();
    assert_eq!(sizes.iter().filter(|&&rows| rows == 100).count(), 10);
    assert_eq!(sizes.iter().filter(|&&rows| rows == 0).count(), 15);
}

#[test]
fn arrow_file_and_stream_shares_are_runs_of_batches() {
    let dir = TempDir::new().unwrap();
    let table = numbered(900);
    let slices = [
        (0, 100),
        (100, 250),
        (350, 50),
        (400, 300),
        (700, 0),
        (700, 200),
    ];
    let file_path = dir.path().join("batches.arrow");
    let mut writer =
        FileWriter::try_new(File::create(&file_path).unwrap(), &table.schema()).unwrap();
    let stream_path = dir.path().join("batches.arrows");
    let mut stream = arrow::ipc::writer::StreamWriter::try_new(
        File::create(&stream_path).unwrap(),
        &table.schema(),
    )
    .unwrap();
    for (offset, rows) in slices {
        writer.write(&table.slice(offset, rows)).unwrap();
        stream.write(&table.slice(offset, rows)).unwrap();
    }
    writer.finish().unwrap();
    stream.finish().unwrap();
    for path in [&file_path, &stream_path] {
        shares_equal_whole(path, FileFormat::ArrowIpc, &[1, 2, 3, 4, 5, 6, 9]);
    }
    // Two halves of the body bytes: the first share holds the batches that start in the
    // first half, which the batch of rows 400..700 does (rows 0..400 hold under half of the
    // bytes, their names being the shorter).
    let first = read_table_share(
        &file_path,
        FileFormat::ArrowIpc,
        Share { index: 0, count: 2 },
    );
    assert_eq!(first.unwrap().num_rows(), 700);
}

#[test]
fn shares_of_corrupt_files_are_input_errors() {
    let dir = TempDir::new().unwrap();
    for (format, extension) in ALL_FORMATS {
        let path = dir.path().join(format!("cut.{extension}"));
        write_table(&path, format, &numbered(50)).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        for index in 0..3 {
            // A CSV cut in half is still CSV; the binary formats must fail cleanly.
            match read_table_share(&path, format, Share { index, count: 3 }) {
                Err(Error::Input(message)) => {
                    assert!(message.contains(&format!("cut.{extension}")), "{message}")
                }
                Ok(_) => assert_eq!(format, FileFormat::Csv),
                Err(other) => panic!("expected an input error, got {other:?}"),
            }
        }
    }
    let path = write_bytes(&dir, "t.csv", b"a\n1\n");
    for share in [Share { index: 2, count: 2 }, Share { index: 0, count: 0 }] {
        let result = read_table_share(&path, FileFormat::Csv, share);
        assert!(matches!(result, Err(Error::Usage(_))), "{result:?}");
    }
}

/// Every CSV share of `count`, with the types inferred from `prefix` bytes, concatenated.
fn csv_shares(path: &Path, count: usize, prefix: usize) -> Result<RecordBatch> {
    let parts = (0..count)
        .map(|index| {
            let file = open_input(path)?;
            read_csv_share(path, file, Share { index, count }, prefix).map(|(part, _)| part)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(concat_batches(&parts[0].schema(), &parts).unwrap())
}

/// The shares hold the rows of the whole file: with the same types where the prefix held the
/// whole file, else with the whole file's values cast to the prefix's types.
fn assert_csv_shares_whole(path: &Path, count: usize, prefix: usize) {
    let whole = read_table(path, FileFormat::Csv).unwrap();
    let shares = match csv_shares(path, count, prefix) {
        Ok(shares) => shares,
        Err(error) => panic!("count {count} prefix {prefix}: {error}"),
    };
    let len = std::fs::metadata(path).unwrap().len() as usize;
    if prefix >= len {
        assert_eq!(shares.schema(), whole.schema(), "count {count}");
    }
    assert_eq!(
        shares.num_rows(),
        whole.num_rows(),
        "count {count} prefix {prefix}"
    );
    for (index, field) in shares.schema().fields().iter().enumerate() {
        let expected = cast(whole.column(index), field.data_type()).unwrap();
        assert_eq!(
            shares.column(index),
            &expected,
            "count {count} prefix {prefix} column {}",
            field.name()
        );
    }
}

#[test]
fn csv_shares_concatenate_to_the_whole_file() {
    let dir = TempDir::new().unwrap();
    let cases: [(&str, &[u8]); 10] = [
        ("plain", b"id,name\n1,a\n2,b\n3,c\n4,d\n5,e\n6,f\n7,g\n"),
        ("no_trailing_newline", b"id,name\n1,a\n2,b\n3,c\n4,d\n5,e"),
        ("crlf", b"id,name\r\n1,a\r\n2,b\r\n3,c\r\n4,d\r\n5,e\r\n"),
        ("empty_lines_at_end", b"id,name\n1,a\n2,b\n3,c\n\n\n\n"),
        ("crlf_empty_lines", b"id,name\r\n1,a\r\n\r\n2,b\r\n\r\n"),
        ("header_only", b"id,name\n"),
        ("header_only_unterminated", b"id,name"),
        ("fewer_lines_than_shares", b"id,name\n1,a\n"),
        (
            "quoted_commas",
            b"id,name,v\n1,\"a, b\",2\n2,\"\"\"q\"\", r\",3\n3,,4\n4,\"x,,y\",\n",
        ),
        ("empty_column", b"id,gap,name\n1,,a\n2,,b\n3,,c\n"),
    ];
    for (name, bytes) in cases {
        let path = write_bytes(&dir, &format!("{name}.csv"), bytes);
        for count in 1..=12 {
            for prefix in [1, 9, 17, 30, CSV_PREFIX_BYTES] {
                if count == 1 {
                    // One share is the whole file, read as `read_table` does.
                    let whole = read_table(&path, FileFormat::Csv).unwrap();
                    let share = read_table_share(&path, FileFormat::Csv, Share::WHOLE);
                    assert_eq!(share.unwrap(), whole);
                } else {
                    assert_csv_shares_whole(&path, count, prefix);
                }
            }
        }
        shares_equal_whole(&path, FileFormat::Csv, &[1, 2, 3, 4, 5, 8]);
    }
}

#[test]
fn small_csv_with_quoted_line_breaks_is_split_at_records() {
    let dir = TempDir::new().unwrap();
    let path = write_bytes(
        &dir,
        "multi.csv",
        b"id,text\n1,\"a\nb\"\n2,\"c,\r\nd\"\n3,e\n4,\"\n\n\"\n5,f\n",
    );
    // The whole file is in the prefix, so every share knows the exact record starts.
    shares_equal_whole(&path, FileFormat::Csv, &[1, 2, 3, 4, 5, 6, 7, 30]);
}

#[test]
fn csv_quoted_line_breaks_are_refused_when_split_at_lines() {
    let dir = TempDir::new().unwrap();
    // In the prefix: every share refuses the file.
    let path = write_bytes(&dir, "early.csv", b"id,text\n1,\"a\nb\"\n2,c\n3,d\n4,e\n");
    for index in 0..3 {
        let file = open_input(&path).unwrap();
        let result = read_csv_share(&path, file, Share { index, count: 3 }, 20);
        let message = input_message(result.map(|(batch, _)| batch));
        assert!(message.contains("early.csv: line 2 (byte 8)"), "{message}");
        assert!(message.contains("line break"), "{message}");
        assert!(message.contains("one process"), "{message}");
    }
    // After the prefix: whichever way the file is cut, some share reports it rather than
    // every share returning rows.
    let mut bytes = b"id,text,more\n".to_vec();
    for row in 0..40 {
        bytes.extend_from_slice(format!("{row},w{row},x\n").as_bytes());
    }
    bytes.extend_from_slice(b"40,\"a,b\nc,d\ne,f\ng,h\",x\n41,z,x\n");
    let path = write_bytes(&dir, "late.csv", &bytes);
    for count in 2..=40 {
        let result = csv_shares(&path, count, 30);
        let message = input_message(result);
        assert!(message.contains("late.csv"), "{message}");
        assert!(message.contains("line break"), "count {count}: {message}");
    }
}

#[test]
fn csv_type_mismatch_after_the_prefix_says_how_to_fix_it() {
    let dir = TempDir::new().unwrap();
    let path = write_bytes(
        &dir,
        "late.csv",
        b"id,name\n1,a\n2,b\n3,c\n4,d\nx5,e\n6,f\n",
    );
    let file = open_input(&path).unwrap();
    let result = read_csv_share(&path, file, Share { index: 1, count: 2 }, 12);
    let message = input_message(result.map(|(batch, _)| batch));
    assert!(message.contains("late.csv: byte 24:"), "{message}");
    assert!(
        message.contains("\"x5\" in column `id` is not a valid Int64"),
        "{message}"
    );
    assert!(message.contains("first 12 bytes"), "{message}");
    assert!(message.contains("one process"), "{message}");
    // With the whole file in the prefix the column is text.
    let file = open_input(&path).unwrap();
    let result = read_csv_share(&path, file, Share { index: 1, count: 2 }, 100);
    assert!(result.is_ok(), "{result:?}");
    // Share 0 holds the file from its start, so it names the line too.
    let path = write_bytes(
        &dir,
        "early.csv",
        b"id,name\n1,a\nx2,b\n3,c\n4,d\n5,e\n6,f\n",
    );
    let file = open_input(&path).unwrap();
    let result = read_csv_share(&path, file, Share { index: 0, count: 2 }, 12);
    let message = input_message(result.map(|(batch, _)| batch));
    assert!(
        message.contains("early.csv: line 3 (byte 12):"),
        "{message}"
    );

    // The same through the public API, after the real prefix of 1 MiB.
    let mut bytes = b"id,name\n".to_vec();
    let mut row = 0;
    while bytes.len() <= CSV_PREFIX_BYTES + 1000 {
        bytes.extend_from_slice(format!("{row},name{row}\n").as_bytes());
        row += 1;
    }
    bytes.extend_from_slice(b"1.5,late\n");
    let path = write_bytes(&dir, "big.csv", &bytes);
    let message = input_message(read_table_share(
        &path,
        FileFormat::Csv,
        Share { index: 1, count: 2 },
    ));
    assert!(message.contains("big.csv: byte "), "{message}");
    assert!(message.contains("\"1.5\" in column `id`"), "{message}");
    assert!(message.contains("are inferred from its first"), "{message}");
    let first = read_table_share(&path, FileFormat::Csv, Share { index: 0, count: 2 });
    assert_eq!(
        first.unwrap().schema().field(0).data_type(),
        &DataType::Int64
    );
    let whole = read_table(&path, FileFormat::Csv).unwrap();
    assert_eq!(whole.schema().field(0).data_type(), &DataType::Float64);
}

#[test]
fn csv_shares_read_little_more_than_their_bytes() {
    let dir = TempDir::new().unwrap();
    let mut bytes = b"id,name\n".to_vec();
    for row in 0..200_000 {
        bytes.extend_from_slice(format!("{row},some name {row}\n").as_bytes());
    }
    let path = write_bytes(&dir, "long.csv", &bytes);
    let len = bytes.len() as u64;
    let count = 8;
    let prefix = 64 * 1024;
    let mut rows = 0;
    for index in 0..count {
        let file = open_input(&path).unwrap();
        let (part, read) = read_csv_share(&path, file, Share { index, count }, prefix).unwrap();
        rows += part.num_rows();
        // The prefix, the share's bytes from the one before them (to see whether they start
        // a line), and at most one chunk to finish the last line.
        let bound = prefix as u64 + len.div_ceil(count as u64) + 1 + CSV_TAIL_CHUNK;
        assert!(read <= bound, "share {index} read {read} bytes of {len}");
    }
    assert_eq!(rows, 200_000);
    assert_csv_shares_whole(&path, count, prefix);
}

#[test]
fn csv_field_count_errors_in_a_share_name_the_byte() {
    let dir = TempDir::new().unwrap();
    let path = write_bytes(&dir, "bad.csv", b"a,b\n1,2\n3,4\n5,6\n7,8,9\n10,11\n");
    let file = open_input(&path).unwrap();
    let result = read_csv_share(&path, file, Share { index: 1, count: 2 }, 8);
    let message = input_message(result.map(|(batch, _)| batch));
    assert!(
        message.contains("bad.csv: byte 16: expected 2 fields, found 3"),
        "{message}"
    );
    assert!(
        message.contains("first record of share 1 of 2"),
        "{message}"
    );
}

/// CSV text from simple fields: per column integers (or empty), words, or quoted words with
/// commas; `\n` or `\r\n`; with or without a final line end and empty lines at the end.
fn simple_csv() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
    use proptest::prelude::*;
    let kinds = proptest::collection::vec(0u8..3, 1..4);
    kinds
        .prop_flat_map(|kinds| {
            let row = kinds
                .iter()
                .map(|&kind| match kind {
                    0 => prop_oneof![
                        3 => (-1000i64..1000).prop_map(|n| n.to_string()),
                        1 => Just(String::new()),
                    ]
                    .boxed(),
                    1 => "[a-c]{1,4}".boxed(),
                    _ => "[a-c ,]{0,4}"
                        .prop_map(|text| format!("\"{text}\""))
                        .boxed(),
                })
                .collect::<Vec<_>>();
            (
                Just(kinds.len()),
                proptest::collection::vec(row, 0..30),
                any::<bool>(),
                any::<bool>(),
                0usize..3,
            )
        })
        .prop_map(|(columns, rows, crlf, final_end, empty_lines)| {
            let end: &[u8] = if crlf { b"\r\n" } else { b"\n" };
            let header: Vec<String> = (0..columns).map(|c| format!("c{c}")).collect();
            let mut bytes = header.join(",").into_bytes();
            for row in rows {
                bytes.extend_from_slice(end);
                bytes.extend_from_slice(row.join(",").as_bytes());
            }
            if final_end {
                bytes.extend_from_slice(end);
            }
            for _ in 0..empty_lines {
                bytes.extend_from_slice(end);
            }
            bytes
        })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 300, ..Default::default() })]
    /// Whatever the contents and the number of shares, and whether the types come from the
    /// whole file or a prefix of it, the shares concatenate to the whole file.
    #[test]
    fn csv_shares_always_concatenate_to_the_whole(
        bytes in simple_csv(),
        count in 2usize..9,
        prefix in proptest::prop_oneof![1usize..80, proptest::strategy::Just(CSV_PREFIX_BYTES)],
    ) {
        let dir = TempDir::new().unwrap();
        let path = write_bytes(&dir, "random.csv", &bytes);
        assert_csv_shares_whole(&path, count, prefix);
    }
}

/// Columns encoded on several threads make the file one thread makes, byte for byte, row
/// groups spanning batches, a struct's two leaves written by one thread.
#[test]
fn columns_encoded_on_several_threads_make_the_file_one_thread_makes() {
    use arrow::array::StructArray;
    let dir = TempDir::new().unwrap();
    let inner = Arc::new(Schema::new(vec![
        Field::new("a", DataType::Int32, true),
        Field::new("b", DataType::Utf8, true),
    ]));
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8View, true),
        Field::new("score", DataType::Float64, true),
        Field::new("pair", DataType::Struct(inner.fields().clone()), true),
    ]));
    let batch = |first: i64, rows: i64| {
        let ids: Vec<i64> = (first..first + rows).collect();
        let names: Vec<Option<String>> = ids
            .iter()
            .map(|id| (id % 5 != 0).then(|| format!("name {}", id % 997)))
            .collect();
        let pair = StructArray::try_new(
            inner.fields().clone(),
            vec![
                Arc::new(Int32Array::from_iter(
                    ids.iter().map(|id| (id % 3 != 0).then_some(*id as i32)),
                )) as ArrayRef,
                Arc::new(StringArray::from_iter(
                    ids.iter().map(|id| Some(format!("{}", id * 7))),
                )),
            ],
            None,
        )
        .unwrap();
        RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from(ids.clone())),
                Arc::new(StringViewArray::from_iter(names)),
                Arc::new(Float64Array::from_iter(
                    ids.iter()
                        .map(|id| (id % 11 != 0).then_some(*id as f64 / 3.0)),
                )),
                Arc::new(pair),
            ],
        )
        .unwrap()
    };
    let batches = [
        batch(0, 50_000),
        batch(50_000, 30_000),
        batch(80_000, 70_000),
    ];
    let write = |threads: usize| {
        let path = dir.path().join(format!("on-{threads}.parquet"));
        let mut writer = OutputWriter::create(
            &path,
            FileFormat::Parquet,
            OutputCompression::Zstd,
            Arc::clone(&schema),
        )
        .unwrap();
        let encoded = writer.encoder().encode_all_on(&batches, threads).unwrap();
        writer.append(encoded).unwrap();
        writer.finish().unwrap();
        std::fs::read(&path).unwrap()
    };
    let one = write(1);
    for threads in [2, 3, 8] {
        assert!(
            write(threads) == one,
            "{threads} threads wrote another file"
        );
    }
    let path = dir.path().join("on-3.parquet");
    let reader =
        parquet::file::reader::SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
    use parquet::file::reader::FileReader as _;
    let groups: Vec<i64> = (0..reader.metadata().num_row_groups())
        .map(|group| reader.metadata().row_group(group).num_rows())
        .collect();
    assert_eq!(groups, [65_536, 65_536, 18_928]);
    let back = read_table(&path, FileFormat::Parquet).unwrap();
    let expected = concat_batches(&schema, &batches).unwrap();
    assert_eq!(back.num_rows(), expected.num_rows());
    for (column, (read, written)) in back.columns().iter().zip(expected.columns()).enumerate() {
        let read = cast(read, written.data_type()).unwrap();
        assert_eq!(&read, written, "column {column}");
    }
}
