//! Stable row hashes over every column, for checksums.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::buffer::NullBuffer;
use arrow::compute::cast;
use arrow::datatypes::{
    ArrowPrimitiveType, BinaryType, BinaryViewType, ByteArrayType, ByteViewType, DataType,
    Date32Type, Date64Type, Decimal128Type, Decimal32Type, Decimal64Type, DecimalType,
    DurationMicrosecondType, DurationMillisecondType, DurationNanosecondType, DurationSecondType,
    Float16Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type,
    LargeBinaryType, LargeUtf8Type, StringViewType, Time32MillisecondType, Time32SecondType,
    Time64MicrosecondType, Time64NanosecondType, TimeUnit, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type, Utf8Type,
};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use skewjoin_operators::hash::StableHasher;

/// What [`row_hashes`] feeds for a NULL value, so that NULL differs from every integer it could be
/// confused with in practice (0 in particular).
const NULL_WORD: u64 = 0x6e75_6c6c_7661_6c21;

/// The bits every NaN is hashed as, whatever its payload.
const CANONICAL_NAN: u64 = 0x7ff8_0000_0000_0000;

/// A stable 64-bit hash of each row of `batch` over all its columns.
///
/// Each value is fed in a canonical, type-independent encoding, so that the same logical row
/// hashes the same whether it was read from Parquet, Arrow IPC or CSV: NULL is a fixed marker
/// word; integers of every width, booleans (0/1), dates, times, timestamps and durations are their
/// value as `i64` bits; floats are their `f64` bits with `-0.0` as `0.0` and one NaN; strings and
/// binaries are their bytes; decimals up to 128 bits wide are their value as `i128` and their
/// scale. Other types (256-bit decimals, nested types, ...) hash their display string.
pub fn row_hashes(batch: &RecordBatch) -> Vec<u64> {
    // A dictionary-encoded column holds the same logical values as its plain form: decoded once.
    let columns: Vec<ArrayRef> = batch
        .columns()
        .iter()
        .map(|column| match column.data_type() {
            DataType::Dictionary(_, value_type) => {
                cast(column, value_type).unwrap_or_else(|_| Arc::clone(column))
            }
            _ => Arc::clone(column),
        })
        .collect();
    // A block of rows at a time through every column, so that the block's hashers stay in the
    // L1 cache rather than a whole batch's being read and written back once per column.
    let rows = batch.num_rows();
    let mut hashes = Vec::with_capacity(rows);
    let mut hashers = [StableHasher::new(); HASH_BLOCK_ROWS];
    for start in (0..rows).step_by(HASH_BLOCK_ROWS) {
        let block = &mut hashers[..HASH_BLOCK_ROWS.min(rows - start)];
        block.fill(StableHasher::new());
        for column in &columns {
            feed_column(&column.slice(start, block.len()), block);
        }
        hashes.extend(block.iter().map(StableHasher::finish));
    }
    hashes
}

/// Rows hashed at a time by [`row_hashes`]: 8 KiB of hashers.
const HASH_BLOCK_ROWS: usize = 1024;

/// Feeds one value of `column` into each row's hasher, column by column so that each column is
/// downcast once.
fn feed_column(column: &ArrayRef, hashers: &mut [StableHasher]) {
    fn int<T: ArrowPrimitiveType>(
        column: &ArrayRef,
        hashers: &mut [StableHasher],
        word: impl Fn(T::Native) -> i64,
    ) {
        let values = column.as_primitive::<T>().values();
        feed_each(column, hashers, |hasher, row| {
            hasher.write_u64(word(values[row]) as u64)
        });
    }
    fn float<T: ArrowPrimitiveType>(
        column: &ArrayRef,
        hashers: &mut [StableHasher],
        to_f64: impl Fn(T::Native) -> f64,
    ) {
        let values = column.as_primitive::<T>().values();
        feed_each(column, hashers, |hasher, row| {
            hasher.write_u64(float_word(to_f64(values[row])))
        });
    }
    fn bytes<T: ByteArrayType>(column: &ArrayRef, hashers: &mut [StableHasher]) {
        let values = column.as_bytes::<T>();
        feed_each(column, hashers, |hasher, row| {
            hasher.write_bytes(values.value(row).as_ref())
        });
    }
    fn byte_view<T: ByteViewType>(column: &ArrayRef, hashers: &mut [StableHasher]) {
        let values = column.as_byte_view::<T>();
        let views = values.views();
        feed_each(column, hashers, |hasher, row| {
            // A string of up to 12 bytes is inline in its view, after its length.
            let view = views[row];
            let len = view as u32 as usize;
            if len <= 12 {
                hasher.write_short(view >> 32, len);
            } else {
                hasher.write_bytes(values.value(row).as_ref());
            }
        });
    }

    fn decimal<T: DecimalType>(
        column: &ArrayRef,
        hashers: &mut [StableHasher],
        scale: i8,
        to_i128: impl Fn(T::Native) -> i128,
    ) {
        let values = column.as_primitive::<T>().values();
        feed_each(column, hashers, |hasher, row| {
            let value = to_i128(values[row]);
            hasher.write_u64(value as u64);
            hasher.write_u64((value >> 64) as u64);
            hasher.write_u64(scale as u64);
        });
    }

    match column.data_type() {
        DataType::Null => hashers
            .iter_mut()
            .for_each(|hasher| hasher.write_u64(NULL_WORD)),
        // Formatting each value to hash its text was a tenth of the CPU of a TPC-H join.
        DataType::Decimal32(_, scale) => {
            decimal::<Decimal32Type>(column, hashers, *scale, i128::from)
        }
        DataType::Decimal64(_, scale) => {
            decimal::<Decimal64Type>(column, hashers, *scale, i128::from)
        }
        DataType::Decimal128(_, scale) => {
            decimal::<Decimal128Type>(column, hashers, *scale, |value| value)
        }
        DataType::Boolean => {
            let values = column.as_boolean();
            feed_each(column, hashers, |hasher, row| {
                hasher.write_u64(u64::from(values.value(row)))
            });
        }
        DataType::Int8 => int::<Int8Type>(column, hashers, i64::from),
        DataType::Int16 => int::<Int16Type>(column, hashers, i64::from),
        DataType::Int32 => int::<Int32Type>(column, hashers, i64::from),
        DataType::Int64 => int::<Int64Type>(column, hashers, |value| value),
        DataType::UInt8 => int::<UInt8Type>(column, hashers, i64::from),
        DataType::UInt16 => int::<UInt16Type>(column, hashers, i64::from),
        DataType::UInt32 => int::<UInt32Type>(column, hashers, i64::from),
        // Bit-preserving: values above i64::MAX keep their bits, so they still hash distinctly.
        DataType::UInt64 => int::<UInt64Type>(column, hashers, |value| value as i64),
        DataType::Date32 => int::<Date32Type>(column, hashers, i64::from),
        DataType::Date64 => int::<Date64Type>(column, hashers, |value| value),
        DataType::Time32(TimeUnit::Second) => int::<Time32SecondType>(column, hashers, i64::from),
        DataType::Time32(TimeUnit::Millisecond) => {
            int::<Time32MillisecondType>(column, hashers, i64::from)
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            int::<Time64MicrosecondType>(column, hashers, |value| value)
        }
        DataType::Time64(TimeUnit::Nanosecond) => {
            int::<Time64NanosecondType>(column, hashers, |value| value)
        }
        DataType::Timestamp(TimeUnit::Second, _) => {
            int::<TimestampSecondType>(column, hashers, |value| value)
        }
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            int::<TimestampMillisecondType>(column, hashers, |value| value)
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            int::<TimestampMicrosecondType>(column, hashers, |value| value)
        }
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            int::<TimestampNanosecondType>(column, hashers, |value| value)
        }
        DataType::Duration(TimeUnit::Second) => {
            int::<DurationSecondType>(column, hashers, |value| value)
        }
        DataType::Duration(TimeUnit::Millisecond) => {
            int::<DurationMillisecondType>(column, hashers, |value| value)
        }
        DataType::Duration(TimeUnit::Microsecond) => {
            int::<DurationMicrosecondType>(column, hashers, |value| value)
        }
        DataType::Duration(TimeUnit::Nanosecond) => {
            int::<DurationNanosecondType>(column, hashers, |value| value)
        }
        DataType::Float16 => float::<Float16Type>(column, hashers, |value| value.to_f64()),
        DataType::Float32 => float::<Float32Type>(column, hashers, f64::from),
        DataType::Float64 => float::<Float64Type>(column, hashers, |value| value),
        DataType::Utf8 => bytes::<Utf8Type>(column, hashers),
        DataType::LargeUtf8 => bytes::<LargeUtf8Type>(column, hashers),
        DataType::Binary => bytes::<BinaryType>(column, hashers),
        DataType::LargeBinary => bytes::<LargeBinaryType>(column, hashers),
        DataType::Utf8View => byte_view::<StringViewType>(column, hashers),
        DataType::BinaryView => byte_view::<BinaryViewType>(column, hashers),
        DataType::FixedSizeBinary(_) => {
            let values = column.as_fixed_size_binary();
            feed_each(column, hashers, |hasher, row| {
                hasher.write_bytes(values.value(row))
            });
        }
        // A dictionary-encoded column holds the same logical values as its plain form.
        DataType::Dictionary(_, value_type) => match cast(column, value_type) {
            Ok(plain) => feed_column(&plain, hashers),
            Err(_) => feed_display(column, hashers),
        },
        _ => feed_display(column, hashers),
    }
}

/// Calls `feed` for every non-NULL row and feeds the NULL marker for the others.
#[inline(always)]
fn feed_each(
    column: &ArrayRef,
    hashers: &mut [StableHasher],
    mut feed: impl FnMut(&mut StableHasher, usize),
) {
    let nulls: Option<NullBuffer> = column
        .logical_nulls()
        .filter(|nulls| nulls.null_count() > 0);
    // One call of `feed`, so that it is inlined into the loop: with a loop for columns with
    // NULLs and one without, a string column's feed was called per row, not inlined.
    for (row, hasher) in hashers.iter_mut().enumerate() {
        if nulls.as_ref().is_some_and(|nulls| nulls.is_null(row)) {
            hasher.write_u64(NULL_WORD);
        } else {
            feed(hasher, row);
        }
    }
}

/// Hashes the display string of each value, for types without a canonical encoding above.
fn feed_display(column: &ArrayRef, hashers: &mut [StableHasher]) {
    let options = FormatOptions::default();
    let Ok(formatter) = ArrayFormatter::try_new(column.as_ref(), &options) else {
        // No display either: all that is left to tell rows apart is NULL or not.
        let type_name = column.data_type().to_string();
        feed_each(column, hashers, |hasher, _| {
            hasher.write_bytes(type_name.as_bytes())
        });
        return;
    };
    let mut text = String::new();
    feed_each(column, hashers, |hasher, row| {
        text.clear();
        // A value that fails to format still hashes what was written of it.
        let _ = formatter.value(row).write(&mut text);
        hasher.write_bytes(text.as_bytes());
    });
}

/// The canonical 64-bit word of a float: `-0.0` equals `0.0` and all NaNs are one NaN.
pub(super) fn float_word(value: f64) -> u64 {
    if value.is_nan() {
        CANONICAL_NAN
    } else if value == 0.0 {
        0
    } else {
        value.to_bits()
    }
}

// ---------------------------------------------------------------------------------------------
// Join output
// ---------------------------------------------------------------------------------------------
