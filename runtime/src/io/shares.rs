//! Per-process shares of an input: which row groups, record batches or bytes a process reads.

use std::io::{self, Read};
use std::ops::Range;

use arrow::error::ArrowError;
use arrow::ipc::reader::FileReader;

use crate::error::{Error, Result};

/// Which part of an input a process reads: share `index` of `count` (0-based).
///
/// In a cluster of `count` processes, process `index` reads share `index` of every input, so that
/// no process reads a whole file. Concatenating shares `0..count` in order gives exactly the rows
/// of the whole file, in order, with one schema; a share may hold no rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share {
    /// Which share, in `0..count`.
    pub index: usize,
    /// How many shares the input is cut into; at least 1.
    pub count: usize,
}

impl Share {
    /// The whole input: share 0 of 1.
    pub const WHOLE: Share = Share { index: 0, count: 1 };

    /// Refuses a share that does not exist ([`Error::Usage`]): `index` must be below `count`.
    pub fn check(self) -> Result<()> {
        if self.count == 0 || self.index >= self.count {
            return Err(Error::Usage(format!(
                "there is no share {} of {}; a process index must be below the number of \
                 processes",
                self.index, self.count
            )));
        }
        Ok(())
    }
}

/// How many bytes from the start of a CSV file every share reads to infer the column types, so
/// that all processes agree on them. The prefix is cut after its last whole record.
pub const CSV_PREFIX_BYTES: usize = 1 << 20;

/// How much further a CSV share reads at a time while looking for the end of a line.
pub(super) const CSV_TAIL_CHUNK: u64 = 64 * 1024;

/// The items (row groups, record batches) of share `share`, out of items of the given `weights`.
///
/// An item belongs to the share in whose `1/count` of the total weight the item starts, the rule
/// CSV shares follow with bytes: runs are contiguous and in order, each item is in exactly one of
/// them, and runs are balanced as well as whole items allow. An item heavier than a share leaves
/// the shares it covers empty.
pub(crate) fn share_run(weights: &[u64], share: Share) -> Range<usize> {
    let total: u128 = weights.iter().map(|&weight| u128::from(weight)).sum();
    let count = share.count as u128;
    let boundary = |cut: usize| -> usize {
        if cut == 0 {
            return 0;
        }
        if cut >= share.count {
            return weights.len();
        }
        // The first item whose start is at or after cut/count of the total weight.
        let mut start = 0u128;
        for (item, &weight) in weights.iter().enumerate() {
            if start * count >= total * cut as u128 {
                return item;
            }
            start += u128::from(weight);
        }
        weights.len()
    };
    boundary(share.index)..boundary(share.index + 1)
}

/// The rows of each row group of the Parquet file `path`, from its footer. A negative count is
/// corrupt; weighing it 0 leaves the error to the decoder. A footer whose total says no rows
/// while its row groups hold some is [`Error::Input`]: the parquet crate's reader decodes
/// batches of at most the total's rows, so it would decode none of them.
pub(crate) fn row_group_rows(
    path: &std::path::Path,
    metadata: &parquet::file::metadata::ParquetMetaData,
) -> Result<Vec<u64>> {
    let rows: Vec<u64> = metadata
        .row_groups()
        .iter()
        .map(|group| u64::try_from(group.num_rows()).unwrap_or(0))
        .collect();
    let total = metadata.file_metadata().num_rows();
    if total == 0 && rows.iter().any(|&rows| rows > 0) {
        return Err(Error::Input(format!(
            "{}: its footer says it holds 0 rows, but its row groups hold some; the file is \
             corrupt, re-export it",
            path.display()
        )));
    }
    Ok(rows)
}

/// The body length of each record batch of an Arrow IPC file, checked against the batches its
/// reader counts. The reader keeps the footer's blocks to itself, so they are read again.
pub(crate) fn ipc_file_bodies<R: Read + io::Seek>(
    reader: &mut FileReader<R>,
) -> std::result::Result<Vec<u64>, ArrowError> {
    let bodies = ipc_block_bodies(reader.get_mut())?;
    if bodies.len() != reader.num_batches() {
        return Err(ArrowError::ParseError(format!(
            "the footer lists {} record batches, then {}",
            reader.num_batches(),
            bodies.len()
        )));
    }
    Ok(bodies)
}

/// The body length of each record batch an Arrow IPC file's footer lists.
fn ipc_block_bodies<R: Read + io::Seek>(
    reader: &mut R,
) -> std::result::Result<Vec<u64>, ArrowError> {
    Ok(ipc_footer_blocks(reader)?
        .iter()
        .map(|block| u64::try_from(block.bodyLength()).unwrap_or(0))
        .collect())
}

/// The rows of each record batch an Arrow IPC file's footer lists, from each batch's message
/// header alone: no column is read or decoded (counting them by decoding the key columns read
/// those twice, once here and once for the join).
pub(crate) fn ipc_file_batch_rows<R: Read + io::Seek>(
    reader: &mut R,
) -> std::result::Result<Vec<u64>, ArrowError> {
    let file_len = reader.seek(io::SeekFrom::End(0))?;
    let bad = |what: &str| ArrowError::ParseError(format!("a record batch's header {what}"));
    ipc_footer_blocks(reader)?
        .iter()
        .map(|block| {
            let (offset, len) = (block.offset(), block.metaDataLength());
            let (Ok(offset), Ok(len)) = (u64::try_from(offset), u64::try_from(len)) else {
                return Err(bad("is at a negative place"));
            };
            if offset.saturating_add(len) > file_len || len < 8 {
                return Err(bad("lies outside the file"));
            }
            reader.seek(io::SeekFrom::Start(offset))?;
            let mut header = vec![0u8; len as usize];
            reader.read_exact(&mut header)?;
            // The message follows its length, which follows the continuation marker
            // (0xFFFFFFFF) in files of format 0.15 and later; padding may follow it. The block
            // bounds it, not the length, as arrow's reader has it: what that reader reads is
            // counted, whatever the length says.
            let start = if header[..4] == [0xff; 4] { 8 } else { 4 };
            let message = arrow::ipc::root_as_message(&header[start..])
                .map_err(|error| bad(&format!("is unreadable: {error}")))?;
            let batch = message
                .header_as_record_batch()
                .ok_or_else(|| bad("is not a record batch's"))?;
            u64::try_from(batch.length()).map_err(|_| bad("says a negative row count"))
        })
        .collect()
}

/// The record batches' blocks an Arrow IPC file's footer lists.
pub(super) fn ipc_footer_blocks<R: Read + io::Seek>(
    reader: &mut R,
) -> std::result::Result<Vec<arrow::ipc::Block>, ArrowError> {
    let mut tail = [0u8; 10];
    reader.seek(io::SeekFrom::End(-10))?;
    reader.read_exact(&mut tail)?;
    let footer_len = arrow::ipc::reader::read_footer_length(tail)?;
    let mut footer = vec![0u8; footer_len];
    reader.seek(io::SeekFrom::End(-10 - footer_len as i64))?;
    reader.read_exact(&mut footer)?;
    let footer = arrow::ipc::root_as_footer(&footer)
        .map_err(|error| ArrowError::ParseError(format!("unreadable footer: {error}")))?;
    let blocks = footer
        .recordBatches()
        .ok_or_else(|| ArrowError::ParseError("the footer lists no record batches".into()))?;
    Ok(blocks.iter().copied().collect())
}
