//! A written join's larger side read twice: its keys while the join runs, its rows after it.
//!
//! A join needs only the keys of its inputs; only the output needs their other columns. Kept as
//! Arrow for the whole run, as they were read, both sides' rows were most of a written join's
//! memory (TPC-H SF1's lineitem is 1.31 GB decoded). So where the larger side can be read again
//! a part at a time (a Parquet file's row groups, an Arrow IPC file's record batches) and is
//! output, the join reads only its key columns, and each worker holds its output rows as pairs of
//! row numbers (8 bytes a row) grouped by [unit](LateSide::units) of that side. When the join
//! is over, the workers' threads take the units in turn: each decodes a unit's rows (its
//! columns but the keys decoded once, as before), gathers the output rows that refer to it and
//! writes them. The smaller side is kept as before, for any unit to gather from.
//!
//! A side is read twice only where it is large ([`LateBounds`]): a small one is kept, which
//! costs little memory and writes a smaller output.
//!
//! The pairs are bounded: a worker that holds its share of [`LateBounds::pairs`] writes
//! them at once, alone, decoding the units they refer to (which a later write decodes again):
//! a join whose output is many times its inputs costs more decoding, not unbounded memory.
//!
//! The checksum of a row needs its hash, which only a decoded row gives: the late side's rows
//! are hashed when their unit is decoded, and the smaller side's hashes are kept with its rows
//! as it is read ([`RowStore::put`]). Where the checksum is not asked for, neither is.

use std::ops::{Range, RangeInclusive};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use skewjoin_operators::hash::pair_checksum;
use skewjoin_operators::{JoinType, Side};

use super::{Shared, SharedOutput, StreamSide, WRITE_BATCH_ROWS};
use crate::error::{Error, Result};
use crate::io::batches::{estimated_row_bytes, InputFile};
use crate::io::{row_hashes, take_output, RowStore};
use crate::output_rows::PAD;
use crate::threads::{on_threads, InTurn};

/// When a side is read twice, and how many pairs the workers hold.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LateBounds {
    /// Output pairs all the workers of a process hold before one of them writes its own.
    pub(crate) pairs: usize,
    /// A side whose selected columns take fewer bytes than this decoded (by
    /// [`estimated_row_bytes`]) is kept, not read twice.
    pub(crate) min_bytes: u64,
}

impl LateBounds {
    /// 16 Mi pairs, 128 MiB (and as much again while they are grouped by unit); sides of
    /// 256 MiB or more. A smaller side costs less kept than the window of pairs the workers
    /// would hold to write it in order (`output_rows::PROCESS_WINDOW_PAIRS`), and kept, the
    /// output's repeated rows come together, which a side read twice scatters over its row
    /// groups: TPC-H SF1's orders x customer written (orders about 150 MiB by this estimate)
    /// was 55 MB kept and 97 MB read twice, 1.16 and 1.21 s.
    pub(crate) const DEFAULT: LateBounds = LateBounds {
        pairs: 16 << 20,
        min_bytes: 256 << 20,
    };
}

/// A unit is at least this many rows of consecutive row groups (or record batches), so that a
/// file of many small groups is not read a few rows at a time.
const UNIT_ROWS: u64 = 64 * 1024;

/// The side of a written join that is read twice, and what the writing after the join needs.
pub(crate) struct LateSide {
    /// Which side.
    pub(crate) side: Side,
    /// Its file, to read again.
    input: InputFile,
    /// The runs of whole row groups (or record batches) it is read again in, in order.
    units: Vec<Range<u64>>,
    /// Whether the output's checksum is computed: the other side's row hashes are then kept
    /// with its rows as it is read ([`RowStore::put`]).
    hashing: bool,
    /// The pairs of every worker that has finished, grouped by unit.
    finished: Mutex<Vec<UnitPairs>>,
    /// How many pairs a worker holds before it writes them itself.
    pub(crate) worker_pairs: usize,
    /// Where output rows are counted as they are written, for progress.
    progress: Option<Arc<AtomicU64>>,
}

/// A worker's output rows, each `late row << 32 | held row` (either [`PAD`]), grouped by unit,
/// with those padded on the late side last.
pub(crate) struct UnitPairs {
    pairs: Vec<u64>,
    /// Where each unit's pairs start, then the padded ones', then the end.
    starts: Vec<usize>,
}

/// Output rows assembled and not yet written: less than a batch, carried to the next unit.
#[derive(Default)]
pub(crate) struct Pending {
    batches: Vec<RecordBatch>,
    rows: usize,
}

impl LateSide {
    /// The side of a join of `left` and `right` written as `how` by `workers` workers to read
    /// twice: the one with more rows (the left on a tie), where it is output, its file can be
    /// read a part at a time, and it is at least `bounds.min_bytes` decoded; `hashing` where the
    /// output's checksum is computed.
    pub(crate) fn choose(
        left: &StreamSide,
        right: &StreamSide,
        how: JoinType,
        workers: usize,
        bounds: LateBounds,
        hashing: bool,
    ) -> Option<LateSide> {
        let (side, late) = if left.input.rows >= right.input.rows {
            (Side::Left, left)
        } else {
            (Side::Right, right)
        };
        let groups = late.input.group_rows();
        let bytes = late.input.rows as u128 * estimated_row_bytes(&late.input.selected) as u128;
        if !how.outputs_side(side) || groups.is_empty() || bytes < u128::from(bounds.min_bytes) {
            return None;
        }
        let mut units: Vec<Range<u64>> = Vec::new();
        let mut start = 0u64;
        for &rows in groups {
            match units.last_mut() {
                Some(unit) if unit.end - unit.start < UNIT_ROWS => unit.end += rows,
                _ => units.push(start..start + rows),
            }
            start += rows;
        }
        // A unit is decoded as one batch, which arrow's `take` gathers from faster than
        // `interleave` from several.
        let mut input = late.input.clone();
        let largest = units.iter().map(|unit| unit.end - unit.start).max();
        input.set_batch_rows(largest.unwrap_or(1) as usize);
        Some(LateSide {
            side,
            input,
            units,
            hashing,
            finished: Mutex::new(Vec::new()),
            worker_pairs: (bounds.pairs / workers.max(1)).max(1),
            progress: None,
        })
    }

    /// Counts output rows in `progress` as they are written.
    pub(crate) fn counting(mut self, progress: Option<Arc<AtomicU64>>) -> LateSide {
        self.progress = progress;
        self
    }

    /// An output row of (`left`, `right`), either [`PAD`], packed as [`UnitPairs`] holds it.
    #[inline]
    pub(crate) fn pack(&self, left: u32, right: u32) -> u64 {
        let (late, held) = match self.side {
            Side::Left => (left, right),
            Side::Right => (right, left),
        };
        (u64::from(late) << 32) | u64::from(held)
    }

    /// `pairs` grouped by unit (a counting sort).
    pub(crate) fn group(&self, pairs: &[u64]) -> UnitPairs {
        let padded = self.units.len();
        let unit_of = |pair: u64| match (pair >> 32) as u32 {
            PAD => padded,
            row => self
                .units
                .partition_point(|unit| unit.end <= u64::from(row))
                .min(padded),
        };
        let mut starts = vec![0usize; padded + 2];
        for &pair in pairs {
            starts[unit_of(pair) + 1] += 1;
        }
        for index in 1..starts.len() {
            starts[index] += starts[index - 1];
        }
        let mut next = starts.clone();
        let mut grouped = vec![0u64; pairs.len()];
        for &pair in pairs {
            let slot = &mut next[unit_of(pair)];
            grouped[*slot] = pair;
            *slot += 1;
        }
        UnitPairs {
            pairs: grouped,
            starts,
        }
    }

    /// Sets a finished worker's pairs aside for [`write_finished`](Self::write_finished).
    pub(crate) fn finish(&self, pairs: UnitPairs) -> Result<()> {
        self.finished
            .lock()
            .map_err(|_| Error::Internal("a worker panicked while finishing".into()))?
            .push(pairs);
        Ok(())
    }

    /// Writes the output rows of every finished worker, on `threads` threads that take the
    /// units in turn; returns their checksum.
    pub(crate) fn write_finished(&self, shared: &Shared, threads: usize) -> Result<u64> {
        let finished = std::mem::take(
            &mut *self
                .finished
                .lock()
                .map_err(|_| Error::Internal("a worker panicked while finishing".into()))?,
        );
        let units = self.units_in_turn();
        let results = on_threads(threads, || {
            let mut pending = Pending::default();
            let written = self
                .write(&finished, &units, shared, &mut pending)
                .and_then(|checksum| {
                    self.write_rest(shared, &mut pending)?;
                    Ok(checksum)
                });
            // The other threads stop at the first error, not after every unit.
            if let Err(error) = &written {
                if !matches!(error, Error::Interrupted) {
                    shared.failure.record(error.clone());
                }
            }
            written
        });
        let mut checksum = 0u64;
        for result in results {
            let written =
                result.unwrap_or_else(|_| Err(Error::Internal("an output writer panicked".into())));
            checksum = checksum.wrapping_add(written?);
        }
        Ok(checksum)
    }

    /// The units of this side and, after them, the rows padded on it (`units.len()`), for
    /// threads to [`write`](Self::write) in turn.
    pub(crate) fn units_in_turn(&self) -> InTurn<RangeInclusive<usize>> {
        InTurn::new(0..=self.units.len())
    }

    /// Writes the output rows of `pairs`, taking units (and last the rows padded on this side)
    /// from `units` until none is left; rows short of a batch are left in `pending`. Returns
    /// their checksum.
    pub(crate) fn write(
        &self,
        pairs: &[UnitPairs],
        units: &InTurn<RangeInclusive<usize>>,
        shared: &Shared,
        pending: &mut Pending,
    ) -> Result<u64> {
        let Some(output) = &shared.output else {
            return Ok(0);
        };
        let mut checksum = 0u64;
        let mut local = Vec::new();
        while let Some(unit) = units.take() {
            if shared.stopped() {
                return Err(Error::Interrupted);
            }
            // The unit's pairs as `held row << 32 | row in the unit`, in order: the gathers
            // from the held side walk forward, and its repeated rows come together (which
            // Parquet's dictionaries and zstd then compress).
            let first = self.units.get(unit).map_or(0, |unit| unit.start);
            local.clear();
            for worker in pairs {
                let (start, end) = (worker.starts[unit], worker.starts[unit + 1]);
                local.extend(worker.pairs[start..end].iter().map(|&pair| {
                    let late = match (pair >> 32) as u32 {
                        PAD => PAD,
                        row => (u64::from(row) - first) as u32,
                    };
                    ((pair & u64::from(u32::MAX)) << 32) | u64::from(late)
                }));
            }
            if local.is_empty() {
                continue;
            }
            local.sort_unstable();
            let (rows, hashes) = match self.units.get(unit) {
                Some(range) => self.read_unit(range.clone())?,
                None => (
                    RowStore::batches(self.input.selected.clone(), Vec::new()),
                    Vec::new(),
                ),
            };
            if self.hashing {
                let held_store = match self.side {
                    Side::Left => &shared.right,
                    Side::Right => &shared.left,
                };
                for &pair in &local {
                    let held = match pair >> 32 {
                        row if row == u64::from(PAD) => None,
                        row => Some(held_store.hash(row)?),
                    };
                    let late = match pair as u32 {
                        PAD => None,
                        row => Some(hashes[row as usize]),
                    };
                    let (left, right) = match self.side {
                        Side::Left => (late, held),
                        Side::Right => (held, late),
                    };
                    checksum = checksum.wrapping_add(pair_checksum(left, right));
                }
            }
            let (mut late_rows, mut held_rows) = (Vec::new(), Vec::new());
            for chunk in local.chunks(WRITE_BATCH_ROWS) {
                if shared.stopped() {
                    return Err(Error::Interrupted);
                }
                late_rows.clear();
                held_rows.clear();
                for &pair in chunk {
                    held_rows.push((pair >> 32) as u32);
                    late_rows.push(pair as u32);
                }
                let (left, right, left_rows, right_rows) = match self.side {
                    Side::Left => (&rows, shared.right.as_ref(), &late_rows, &held_rows),
                    Side::Right => (shared.left.as_ref(), &rows, &held_rows, &late_rows),
                };
                let batch = take_output(
                    output.schema(),
                    shared.how,
                    left,
                    right,
                    left_rows,
                    right_rows,
                )?;
                if let Some(progress) = &self.progress {
                    progress.fetch_add(batch.num_rows() as u64, Ordering::Relaxed);
                }
                if batch.num_rows() == WRITE_BATCH_ROWS {
                    output.take(batch, false)?;
                } else {
                    self.carry(output, pending, batch)?;
                }
            }
        }
        Ok(checksum)
    }

    /// Adds `batch` (shorter than a batch) to the rows carried in `pending`, writing them as
    /// whole batches once they make one: as they are, not joined (which copied half of an
    /// output's rows again), the last sliced where the whole batches end.
    fn carry(
        &self,
        output: &SharedOutput,
        pending: &mut Pending,
        batch: RecordBatch,
    ) -> Result<()> {
        pending.rows += batch.num_rows();
        pending.batches.push(batch);
        if pending.rows < WRITE_BATCH_ROWS {
            return Ok(());
        }
        let rest = pending.rows % WRITE_BATCH_ROWS;
        let last = pending.batches.pop().expect("a batch was just carried");
        // The rows carried before `last` were fewer than a batch, so the rest lies in `last`.
        let written = last.num_rows() - rest;
        pending.batches.push(last.slice(0, written));
        output.take_all(&pending.batches)?;
        pending.batches.clear();
        pending.rows = rest;
        if rest > 0 {
            pending.batches.push(last.slice(written, rest));
        }
        Ok(())
    }

    /// Hands the rows carried in `pending` to the output as a worker's last.
    pub(crate) fn write_rest(&self, shared: &Shared, pending: &mut Pending) -> Result<()> {
        let Some(output) = &shared.output else {
            return Ok(());
        };
        if pending.batches.is_empty() {
            return Ok(());
        }
        let rest = concat_batches(output.schema(), &pending.batches).map_err(|error| {
            Error::Internal(format!("joining output rows into a batch failed: {error}"))
        })?;
        *pending = Pending::default();
        output.take(rest, true)
    }

    /// The selected columns of the rows `range` of the late side, and their hashes (none
    /// without a checksum): read again, all of them, or an error saying the file changed since
    /// the join read it.
    fn read_unit(&self, range: Range<u64>) -> Result<(RowStore, Vec<u64>)> {
        let mut batches = Vec::new();
        let mut hashes = Vec::new();
        // Rows other than those counted when the file was opened (it changed since the join
        // read it) end the read with an input error naming the file.
        for batch in self.input.batches_of_rows(false, range)? {
            let selected = self.input.selected_columns(&batch?)?;
            if self.hashing {
                hashes.extend(row_hashes(&selected));
            }
            batches.push(selected);
        }
        Ok((
            RowStore::batches(self.input.selected.clone(), batches),
            hashes,
        ))
    }
}
