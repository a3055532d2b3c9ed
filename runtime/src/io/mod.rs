//! Table files in and out: reading Parquet, Arrow IPC and CSV into one [`RecordBatch`](arrow::array::RecordBatch), turning
//! key columns into [`Key`](skewjoin_operators::Key)s, hashing rows for checksums, assembling join output and writing it
//! atomically.
//!
//! Everything that can go wrong with a user's file is an [`Error::Input`](crate::error::Error::Input) whose message names the
//! file (and the line or column) and says what to do; only failures of the operating system are
//! [`Error::Io`](crate::error::Error::Io). Bad bytes never panic: decoders of third-party crates are fenced with
//! `catch_unwind`, because a corrupt file must be reported, not crash a worker.

pub mod batches;
mod csv_input;
mod decode;
mod diagnose;
mod fence;
mod format;
mod kept_keys;
mod keys;
mod output;
mod read;
mod row_hash;
mod shares;
#[cfg(test)]
pub(crate) mod tests;
mod write;

pub(crate) use csv_input::csv_syntax_of_file;
pub use csv_input::{parse_csv_byte, set_csv_dialect, CsvDialect};
pub(crate) use diagnose::{arrow_read_error, csv_error, parquet_read_error, read_error};
pub use fence::quiet_fenced_panics;
pub(crate) use fence::{fenced, in_fenced};
pub(crate) use format::ARROW_FILE_MAGIC;
pub use format::{FileFormat, OutputCompression};
pub use keys::{check_key_compat, extract_keys, for_each_key, key_kinds, tally_keys, KeyKind};
pub(crate) use keys::{find_field, similar_column};
pub use output::{output_schema, take_output, RowStore};
pub(crate) use read::open_input;
pub use read::{read_table, read_table_share};
pub use row_hash::row_hashes;
pub(crate) use shares::{ipc_file_batch_rows, ipc_file_bodies, row_group_rows, share_run};
pub use shares::{Share, CSV_PREFIX_BYTES};
pub use write::{
    compact_views, write_table, BatchEncoder, EncodedBatch, OutputWriter, WRITE_ROW_GROUP_ROWS,
};
