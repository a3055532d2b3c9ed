//! Key columns: their kinds, compatibility checks and conversion to [`Key`]s.

use std::fmt;
use std::fs::File;
use std::io::{self};
use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, BinaryViewArray, FixedSizeBinaryArray, Int64Array,
    LargeBinaryArray, LargeStringArray, RecordBatch, StringArray, StringViewArray,
};
use arrow::compute::cast;
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Date32Type, Decimal128Type, Decimal256Type, Decimal32Type,
    Decimal64Type, DecimalType, Field, Float16Type, Float32Type, Float64Type, Int64Type, Schema,
    TimeUnit, UInt64Type,
};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use skewjoin_operators::{Key, Side};
use skewjoin_planner::skew_check::KeySink;

use crate::error::{Error, Result};

use super::csv_input::{csv_dialect, csv_syntax_of_file};
use super::format::FileFormat;
use super::row_hash::float_word;

/// The kind of a key column: what its values are, whatever their width or encoding. Both sides'
/// key columns must be of one kind (checked by [`check_key_compat`]), because each kind is mapped
/// onto the few variants of [`Key`] and the variant alone does not say what a value was: a date
/// must never match the integer that happens to encode it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// Integers of any width, signed or unsigned, widened to `i64`.
    Int,
    /// UTF-8 strings (`Utf8`, `LargeUtf8`, `Utf8View`).
    Str,
    /// Booleans, as the integers 0 and 1.
    Bool,
    /// Floats of any width, compared as `f64` with SQL equality: `-0.0` is `0.0` and every NaN
    /// equals every NaN (as DuckDB has it); keyed by the bits of that canonical `f64`.
    Float,
    /// Decimals of any width, precision and scale, compared by value: keyed by canonical text
    /// (`15e-1` for 1.5 at any scale).
    Decimal,
    /// Dates (`Date32` days, `Date64` milliseconds), as milliseconds since the epoch.
    Date,
    /// Times of day of any unit, as nanoseconds since midnight.
    Time,
    /// Timestamps of any unit, as nanoseconds since the epoch. `zoned` is whether the column has
    /// a time zone: its values are then instants (UTC), and they join other zoned timestamps
    /// whatever the zone's name, but never a timestamp without a zone (a wall-clock reading).
    Timestamp {
        /// Whether the type names a time zone.
        zoned: bool,
    },
    /// Byte strings (`Binary`, `LargeBinary`, `BinaryView`, `FixedSizeBinary`).
    Bytes,
}

impl fmt::Display for KeyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyKind::Int => "integer",
            KeyKind::Str => "string",
            KeyKind::Bool => "boolean",
            KeyKind::Float => "float",
            KeyKind::Decimal => "decimal",
            KeyKind::Date => "date",
            KeyKind::Time => "time",
            KeyKind::Timestamp { zoned: false } => "timestamp without time zone",
            KeyKind::Timestamp { zoned: true } => "timestamp with time zone",
            KeyKind::Bytes => "binary",
        })
    }
}

/// The kind of each key column of a file with `schema`.
///
/// A missing column is [`Error::Input`] naming the file, the column and the file's columns; a
/// column of a type that cannot be a key (nested types, durations, ...) is [`Error::Input`]
/// suggesting a cast. A column of type `Null` (no values at all, as in a header-only CSV) holds
/// only NULL keys, which match nothing, so it is reported as [`KeyKind::Int`] and
/// [`check_key_compat`] accepts it against any kind.
pub fn key_kinds(schema: &Schema, columns: &[String], path: &Path) -> Result<Vec<KeyKind>> {
    columns
        .iter()
        .map(|name| {
            let (_, field) = find_field(schema, name, path)?;
            key_kind(field.data_type()).ok_or_else(|| unsupported_key(field, path))
        })
        .collect()
}

fn key_kind(data_type: &DataType) -> Option<KeyKind> {
    match data_type {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Null => Some(KeyKind::Int),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Some(KeyKind::Str),
        DataType::Boolean => Some(KeyKind::Bool),
        DataType::Float16 | DataType::Float32 | DataType::Float64 => Some(KeyKind::Float),
        DataType::Decimal32(..)
        | DataType::Decimal64(..)
        | DataType::Decimal128(..)
        | DataType::Decimal256(..) => Some(KeyKind::Decimal),
        DataType::Date32 | DataType::Date64 => Some(KeyKind::Date),
        DataType::Time32(_) | DataType::Time64(_) => Some(KeyKind::Time),
        DataType::Timestamp(_, zone) => Some(KeyKind::Timestamp {
            zoned: zone.is_some(),
        }),
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => Some(KeyKind::Bytes),
        // Parquet files often dictionary-encode strings; the key is the value, not the code.
        DataType::Dictionary(_, values) => key_kind(values),
        _ => None,
    }
}

/// The index and field of column `name`, or an error listing the columns there are.
pub(crate) fn find_field<'a>(
    schema: &'a Schema,
    name: &str,
    path: &Path,
) -> Result<(usize, &'a Field)> {
    if let Some(found) = schema.column_with_name(name) {
        // A column named twice is ambiguous: taking the first would be a guess.
        let named = schema
            .fields()
            .iter()
            .filter(|field| field.name() == name)
            .count();
        if named > 1 {
            return Err(Error::Input(format!(
                "{} has {named} columns named `{name}`, so the name is ambiguous; rename all \
                 but one",
                path.display()
            )));
        }
        return Ok(found);
    }
    let names: Vec<String> = schema
        .fields()
        .iter()
        .map(|field| format!("`{}`", field.name()))
        .collect();
    let hint = similar_column(schema, name)
        .map(|similar| format!(" ({similar})"))
        .unwrap_or_default();
    Err(Error::Input(format!(
        "{} has no column `{name}`{hint}; its columns are: {}",
        path.display(),
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    )))
}

/// A column of `schema` that `name` was likely meant to be, said as a question: one that differs
/// in case only, or in spaces around it (`--left-columns "a, b"` names ` b`; a CSV header
/// written `a, b` names its second column ` b`).
pub(crate) fn similar_column(schema: &Schema, name: &str) -> Option<String> {
    let fields = schema.fields();
    if let Some(field) = fields
        .iter()
        .find(|field| field.name().eq_ignore_ascii_case(name))
    {
        return Some(format!("did you mean `{}`?", field.name()));
    }
    fields
        .iter()
        .find(|field| field.name().trim().eq_ignore_ascii_case(name.trim()))
        .map(|field| {
            format!(
                "did you mean `{}`? The names differ in spaces: a list is separated by commas \
                 alone",
                field.name()
            )
        })
}

fn unsupported_key(field: &Field, path: &Path) -> Error {
    Error::Input(format!(
        "{} column `{}` has type {}, which cannot be a join key; keys may be integers, strings, \
         booleans, floats, decimals, dates, times, timestamps or binary: cast it to one of \
         those before joining",
        path.display(),
        field.name(),
        field.data_type()
    ))
}

/// Checks that the left and right key columns exist, are usable as keys and pair up: both key
/// columns of each pair must be of one [`KeyKind`] (an integer key cannot join a string or a date
/// key: [`Error::Input`] naming both columns and types), while widths, units, scales and zone
/// names within a kind may differ. Different numbers of key columns is [`Error::Usage`].
pub fn check_key_compat(
    left: (&Path, &Schema, &[String]),
    right: (&Path, &Schema, &[String]),
) -> Result<()> {
    let (left_path, left_schema, left_columns) = left;
    let (right_path, right_schema, right_columns) = right;
    if left_columns.is_empty() || right_columns.is_empty() {
        return Err(Error::Usage(
            "no join key columns given; name at least one key column for each side".to_string(),
        ));
    }
    if left_columns.len() != right_columns.len() {
        return Err(Error::Usage(format!(
            "the left side has {} key columns ({}) but the right side has {} ({}); give both \
             sides the same number of key columns, in matching order",
            left_columns.len(),
            left_columns.join(", "),
            right_columns.len(),
            right_columns.join(", ")
        )));
    }
    let left_kinds = key_kinds(left_schema, left_columns, left_path)?;
    let right_kinds = key_kinds(right_schema, right_columns, right_path)?;
    for (i, (left_kind, right_kind)) in left_kinds.iter().zip(&right_kinds).enumerate() {
        let (_, left_field) = find_field(left_schema, &left_columns[i], left_path)?;
        let (_, right_field) = find_field(right_schema, &right_columns[i], right_path)?;
        let all_null = |field: &Field| field.data_type() == &DataType::Null;
        if left_kind != right_kind && !all_null(left_field) && !all_null(right_field) {
            let describe = |path: &Path, field: &Field, kind: KeyKind| {
                format!(
                    "{} column `{}` is {kind} ({})",
                    path.display(),
                    field.name(),
                    field.data_type()
                )
            };
            // A CSV column's type is inferred from its values: one odd value makes it text (or
            // float), and that value, not the type, is what the user has to find.
            let culprit = first_csv_value_not_of(left_path, left_field, right_field.data_type())
                .or_else(|| first_csv_value_not_of(right_path, right_field, left_field.data_type()))
                .map(|culprit| {
                    format!(
                        "; {culprit}: fix that value, pass `--null <value>` if it stands for \
                         NULL, or"
                    )
                })
                .unwrap_or_else(|| ";".to_string());
            return Err(Error::Input(format!(
                "key types differ: {}, {}{culprit} cast one side",
                describe(left_path, left_field, *left_kind),
                describe(right_path, right_field, *right_kind)
            )));
        }
    }
    Ok(())
}

/// In a CSV file (by its name), the first value of `field`'s column that does not convert to
/// `wanted`, as `<file> line <L> has the value <V> in column <C>, which is not of type ...`;
/// `None` when the file is not CSV, cannot be read, or every value converts.
fn first_csv_value_not_of(path: &Path, field: &Field, wanted: &DataType) -> Option<String> {
    /// Values converted at a time.
    const CHUNK: usize = 4096;
    let wanted = match wanted {
        DataType::Dictionary(_, values) => values.as_ref(),
        other => other,
    };
    if FileFormat::detect(path, None).ok()? != FileFormat::Csv
        || matches!(wanted, DataType::Null)
        || field.data_type() == wanted
    {
        return None;
    }
    let mut file = File::open(path).ok()?;
    let syntax = csv_syntax_of_file(path, &mut file).ok()?;
    let null = csv_dialect().null.as_deref();
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(syntax.delimiter)
        .quote(syntax.quote)
        .flexible(true)
        .from_reader(io::BufReader::new(file));
    let index = reader
        .headers()
        .ok()?
        .iter()
        .position(|name| name == field.name())?;
    let mut record = csv::StringRecord::new();
    let (mut values, mut lines) = (Vec::with_capacity(CHUNK), Vec::with_capacity(CHUNK));
    loop {
        let more = reader.read_record(&mut record).ok()?;
        if more {
            let value = record.get(index).unwrap_or_default();
            if !value.is_empty() && Some(value) != null {
                values.push(value.to_string());
                lines.push(record.position().map_or(0, csv::Position::line));
            }
        }
        if values.len() == CHUNK || !more {
            // A safe cast gives NULL for each value that does not convert.
            let texts = StringArray::from_iter_values(&values);
            let converted = cast(&texts, wanted).ok()?;
            if let Some(at) = (0..converted.len()).find(|&at| converted.is_null(at)) {
                return Some(format!(
                    "{} line {} has the value {:?} in column `{}`, which is not of type {} and \
                     made the whole column {}",
                    path.display(),
                    lines[at],
                    values[at],
                    field.name(),
                    key_kind(wanted).map_or_else(|| wanted.to_string(), |kind| kind.to_string()),
                    field.data_type()
                ));
            }
            values.clear();
            lines.clear();
        }
        if !more {
            return None;
        }
    }
}

/// One key column, downcast once so that the per-row loop is monomorphic.
enum KeyColumn<'a> {
    Null,
    Int(&'a Int64Array),
    Utf8(&'a StringArray),
    LargeUtf8(&'a LargeStringArray),
    Utf8View(&'a StringViewArray),
    Binary(&'a BinaryArray),
    LargeBinary(&'a LargeBinaryArray),
    BinaryView(&'a BinaryViewArray),
    FixedSizeBinary(&'a FixedSizeBinaryArray),
}

impl KeyColumn<'_> {
    fn of(array: &ArrayRef) -> KeyColumn<'_> {
        match array.data_type() {
            DataType::Int64 => KeyColumn::Int(array.as_primitive::<Int64Type>()),
            DataType::Utf8 => KeyColumn::Utf8(array.as_string::<i32>()),
            DataType::LargeUtf8 => KeyColumn::LargeUtf8(array.as_string::<i64>()),
            DataType::Utf8View => KeyColumn::Utf8View(array.as_string_view()),
            DataType::Binary => KeyColumn::Binary(array.as_binary::<i32>()),
            DataType::LargeBinary => KeyColumn::LargeBinary(array.as_binary::<i64>()),
            DataType::BinaryView => KeyColumn::BinaryView(array.as_binary_view()),
            DataType::FixedSizeBinary(_) => {
                KeyColumn::FixedSizeBinary(array.as_fixed_size_binary())
            }
            _ => KeyColumn::Null,
        }
    }

    fn is_null(&self, row: usize) -> bool {
        match self {
            KeyColumn::Null => true,
            KeyColumn::Int(array) => array.is_null(row),
            KeyColumn::Utf8(array) => array.is_null(row),
            KeyColumn::LargeUtf8(array) => array.is_null(row),
            KeyColumn::Utf8View(array) => array.is_null(row),
            KeyColumn::Binary(array) => array.is_null(row),
            KeyColumn::LargeBinary(array) => array.is_null(row),
            KeyColumn::BinaryView(array) => array.is_null(row),
            KeyColumn::FixedSizeBinary(array) => array.is_null(row),
        }
    }

    fn key(&self, row: usize) -> Key {
        if self.is_null(row) {
            return Key::Null;
        }
        let bytes = |value: &[u8]| Key::Bytes(value.into());
        match self {
            KeyColumn::Null => Key::Null,
            KeyColumn::Int(array) => Key::Int(array.value(row)),
            KeyColumn::Utf8(array) => Key::str(array.value(row)),
            KeyColumn::LargeUtf8(array) => Key::str(array.value(row)),
            KeyColumn::Utf8View(array) => Key::str(array.value(row)),
            KeyColumn::Binary(array) => bytes(array.value(row)),
            KeyColumn::LargeBinary(array) => bytes(array.value(row)),
            KeyColumn::BinaryView(array) => bytes(array.value(row)),
            KeyColumn::FixedSizeBinary(array) => bytes(array.value(row)),
        }
    }
}

/// Brings a key column to one of the types [`KeyColumn`] reads, so that equal values of one
/// [`KeyKind`] give equal [`Key`]s whatever their width, unit or scale: integers, booleans,
/// dates (to milliseconds), times and timestamps (to nanoseconds) and floats (to the bits of
/// their canonical `f64`) to `Int64`; decimals to canonical text; dictionaries to their values.
/// A value that does not fit (an unsigned 64-bit integer above `i64::MAX`, a timestamp outside
/// the years 1677 to 2262 in nanoseconds) is [`Error::Input`] naming the row.
fn normalise_key_column(array: &ArrayRef, field: &Field, path: &Path) -> Result<ArrayRef> {
    let cast_to = |to: &DataType| {
        cast(array, to).map_err(|error| {
            Error::Internal(format!(
                "{} column `{}`: converting {} to {to} failed: {error}",
                path.display(),
                field.name(),
                field.data_type()
            ))
        })
    };
    let too_big = |row: usize, value: &dyn fmt::Display, limit: &str| {
        Error::Input(format!(
            "{} column `{}` row {}: value {value} of type {} is outside {limit}, which keys of \
             its kind must fit; cast the column to a string",
            path.display(),
            field.name(),
            row + 1,
            field.data_type()
        ))
    };
    match array.data_type() {
        DataType::Int64
        | DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_)
        | DataType::Null => Ok(array.clone()),
        DataType::UInt64 => {
            let values = array.as_primitive::<UInt64Type>();
            let too_big_row = (0..values.len())
                .find(|&row| values.is_valid(row) && values.value(row) > i64::MAX as u64);
            if let Some(row) = too_big_row {
                return Err(too_big(row, &values.value(row), "a signed 64-bit integer"));
            }
            Ok(Arc::new(values.unary::<_, Int64Type>(|value| value as i64)))
        }
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::Boolean => cast_to(&DataType::Int64),
        DataType::Float16 => Ok(float_keys::<Float16Type>(array, |value| value.to_f64())),
        DataType::Float32 => Ok(float_keys::<Float32Type>(array, f64::from)),
        DataType::Float64 => Ok(float_keys::<Float64Type>(array, |value| value)),
        DataType::Decimal32(_, scale) => Ok(decimal_keys::<Decimal32Type>(array, *scale)),
        DataType::Decimal64(_, scale) => Ok(decimal_keys::<Decimal64Type>(array, *scale)),
        DataType::Decimal128(_, scale) => Ok(decimal_keys::<Decimal128Type>(array, *scale)),
        DataType::Decimal256(_, scale) => Ok(decimal_keys::<Decimal256Type>(array, *scale)),
        DataType::Date32 => Ok(Arc::new(
            array
                .as_primitive::<Date32Type>()
                .unary::<_, Int64Type>(|days| i64::from(days) * MILLIS_PER_DAY),
        )),
        DataType::Date64 => cast_to(&DataType::Int64),
        DataType::Time32(unit) | DataType::Time64(unit) => {
            // A time of day is below 86,400 s, so no unit overflows in nanoseconds.
            let values = cast_to(&DataType::Int64)?;
            let factor = nanos_per(*unit);
            Ok(Arc::new(
                values
                    .as_primitive::<Int64Type>()
                    .unary::<_, Int64Type>(|value| value * factor),
            ))
        }
        DataType::Timestamp(unit, _) => {
            let values = cast_to(&DataType::Int64)?;
            let values = values.as_primitive::<Int64Type>();
            let factor = nanos_per(*unit);
            let overflow = (0..values.len()).find(|&row| {
                values.is_valid(row) && values.value(row).checked_mul(factor).is_none()
            });
            if let Some(row) = overflow {
                let shown = ArrayFormatter::try_new(array.as_ref(), &FormatOptions::default())
                    .map(|formatter| formatter.value(row).to_string())
                    .unwrap_or_else(|_| values.value(row).to_string());
                return Err(too_big(
                    row,
                    &shown,
                    "the nanosecond range (years 1677 to 2262)",
                ));
            }
            Ok(Arc::new(
                values.unary::<_, Int64Type>(|value| value * factor),
            ))
        }
        DataType::Dictionary(_, values) if key_kind(values).is_some() => {
            let plain = cast_to(values)?;
            normalise_key_column(&plain, field, path)
        }
        _ => Err(unsupported_key(field, path)),
    }
}

const MILLIS_PER_DAY: i64 = 86_400_000;

fn nanos_per(unit: TimeUnit) -> i64 {
    match unit {
        TimeUnit::Second => 1_000_000_000,
        TimeUnit::Millisecond => 1_000_000,
        TimeUnit::Microsecond => 1_000,
        TimeUnit::Nanosecond => 1,
    }
}

/// Float keys as the bits of their canonical `f64` ([`float_word`]), which are equal exactly
/// when SQL (as DuckDB has it) calls the values equal. A `float32` widens to `f64` exactly, so it
/// matches the `float64` of the same value, as DuckDB's implicit cast does.
fn float_keys<T: ArrowPrimitiveType>(
    array: &ArrayRef,
    to_f64: impl Fn(T::Native) -> f64,
) -> ArrayRef {
    Arc::new(
        array
            .as_primitive::<T>()
            .unary::<_, Int64Type>(|value| float_word(to_f64(value)) as i64),
    )
}

/// Decimal keys as canonical text: the unscaled value without trailing zeros, and the power of
/// ten it is scaled by (`15e-1` for 1.5 whether stored as 15 at scale 1 or 150 at scale 2), so
/// that equal values at different scales are one key and no width is too narrow.
fn decimal_keys<T: DecimalType>(array: &ArrayRef, scale: i8) -> ArrayRef
where
    T::Native: fmt::Display,
{
    let values = array.as_primitive::<T>();
    let texts: StringArray = values
        .iter()
        .map(|value| value.map(|value| canonical_decimal(&value.to_string(), scale)))
        .collect();
    Arc::new(texts)
}

/// `unscaled` (decimal digits with an optional `-`) times ten to the `-scale`, as
/// `<digits>e<exponent>` with no trailing zeros in the digits; zero is `0e0`.
pub(super) fn canonical_decimal(unscaled: &str, scale: i8) -> String {
    let digits = unscaled.trim_end_matches('0');
    if digits.is_empty() || digits == "-" {
        return "0e0".to_string();
    }
    let stripped = (unscaled.len() - digits.len()) as i64;
    format!("{digits}e{}", stripped - i64::from(scale))
}

/// The key column of `batch`, normalised to `Int64`, when the key is one integer column: the
/// fast paths below read its values without making a [`Key`] per row.
fn single_int_key(
    batch: &RecordBatch,
    columns: &[String],
    path: &Path,
) -> Result<Option<ArrayRef>> {
    let [column] = columns else {
        return Ok(None);
    };
    let schema = batch.schema();
    let (index, field) = find_field(&schema, column, path)?;
    let normalised = normalise_key_column(batch.column(index), field, path)?;
    Ok((normalised.data_type() == &DataType::Int64).then_some(normalised))
}

/// Calls `each` with the key of every row of `batch`, in order: the keys of [`extract_keys`],
/// without collecting them into a `Vec` per batch (on 10^6 uniform integer keys a side, 7 % of
/// the instructions of reading the rows for the join).
pub fn for_each_key(
    batch: &RecordBatch,
    columns: &[String],
    path: &Path,
    mut each: impl FnMut(Key),
) -> Result<()> {
    if let Some(column) = single_int_key(batch, columns, path)? {
        let values = column.as_primitive::<Int64Type>();
        if values.null_count() == 0 {
            values.values().iter().for_each(|&key| each(Key::Int(key)));
        } else {
            values
                .iter()
                .for_each(|key| each(key.map_or(Key::Null, Key::Int)));
        }
        return Ok(());
    }
    extract_keys(batch, columns, path)?
        .into_iter()
        .for_each(each);
    Ok(())
}

/// Counts the key of every row of `batch` in `tally` (a [`KeyTally`](skewjoin_planner::skew_check::KeyTally) or a
/// [`KeySample`](skewjoin_planner::skew_check::KeySample)) as `side`'s. A single integer key column
/// is counted from its values, with no [`Key`] made per row: making and dropping them was a
/// third of `auto`'s skew check on integer keys (hashing a `Key::Int` instead of the `i64`
/// itself, through [`for_each_key`], costs the check a quarter more instructions).
pub fn tally_keys(
    batch: &RecordBatch,
    columns: &[String],
    path: &Path,
    side: Side,
    tally: &mut impl KeySink,
) -> Result<()> {
    if let Some(column) = single_int_key(batch, columns, path)? {
        // An `i64` and an `Option<i64>` hash as `Key::Int` does; `None` is NULL.
        let values = column.as_primitive::<Int64Type>();
        if values.null_count() == 0 {
            tally.add_keys(side, values.values());
        } else {
            tally.add_keys(side, &values.iter().collect::<Vec<_>>());
        }
        return Ok(());
    }
    tally.add_keys(side, &extract_keys(batch, columns, path)?);
    Ok(())
}

/// One [`Key`] per row of `batch` from the key `columns`, each read by the rules of
/// [`KeyKind`]: `Key::Int`, `Key::Str` or `Key::Bytes` for one column, [`Key::composite`] for
/// several; a NULL in any key column gives [`Key::Null`].
pub fn extract_keys(batch: &RecordBatch, columns: &[String], path: &Path) -> Result<Vec<Key>> {
    if columns.is_empty() {
        return Err(Error::Usage(
            "no join key columns given; name at least one key column".to_string(),
        ));
    }
    let schema = batch.schema();
    let normalised = columns
        .iter()
        .map(|name| {
            let (index, field) = find_field(&schema, name, path)?;
            normalise_key_column(batch.column(index), field, path)
        })
        .collect::<Result<Vec<ArrayRef>>>()?;
    let key_columns: Vec<KeyColumn<'_>> = normalised.iter().map(KeyColumn::of).collect();

    let rows = 0..batch.num_rows();
    Ok(match key_columns.as_slice() {
        [single] => rows.map(|row| single.key(row)).collect(),
        [first, second] => rows
            .map(|row| Key::pair(first.key(row), second.key(row)))
            .collect(),
        several => rows
            .map(|row| {
                // Check for NULL first: a NULL key allocates no parts at all.
                if several.iter().any(|column| column.is_null(row)) {
                    Key::Null
                } else {
                    Key::composite(several.iter().map(|column| column.key(row)).collect())
                }
            })
            .collect(),
    })
}

// ---------------------------------------------------------------------------------------------
// Row hashes
// ---------------------------------------------------------------------------------------------
