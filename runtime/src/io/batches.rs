//! Reads an input file a bounded batch at a time, for joins that stream their inputs: opening
//! it finds the schema and the row count (from the footer where the format has one, else by one
//! pass that decodes only the key columns), and each read decodes it again, [`CHUNK_ROWS`] rows
//! at a time, all columns or only the key columns. Memory stays at a few batches, whatever the
//! size of the file, besides the key columns that `auto`'s skew check keeps for the join within
//! a bound (`io/kept_keys.rs`).
//!
//! CSV column types are inferred from every record, as [`read_table`](crate::io::read_table)
//! does, by a first pass that keeps nothing but the types and the record count.
//!
//! A process of a cluster opens its share of a file ([`InputFile::open_share`], cut as
//! [`read_table_share`] cuts it) and streams only that: its run of
//! Parquet row groups or Arrow IPC record batches. A CSV share is the exception: it is found by
//! reading its byte range, whose records are checked and decoded when the share is opened, so a
//! CSV share is held whole and then handed out in chunks.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufReader, Read, Seek};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use arrow::csv::reader::Format as CsvFormat;
use arrow::datatypes::{Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::ipc::reader::{FileReader, StreamReader};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;
use skewjoin_planner::exec_stream::split_at_cuts;

use crate::error::{Error, Result};
use crate::io::kept_keys::{changed_between_reads, KeptKeys, KeyCollector, KeyMerge};
use crate::io::{
    arrow_read_error, csv_error, csv_syntax_of_file, fenced, find_field, ipc_file_batch_rows,
    ipc_file_bodies, key_kinds, open_input, parquet_read_error, read_error, read_table_share,
    row_group_rows, share_run, FileFormat, Share, ARROW_FILE_MAGIC,
};
use crate::threads::try_in_turn;

/// Rows in each batch a read yields (the last may be shorter), unless
/// [`set_batch_rows`](InputFile::set_batch_rows) says otherwise.
pub const CHUNK_ROWS: usize = 64 * 1024;

/// Decoded bytes in each batch a read for a join whose rows are counted, not kept, yields
/// ([`counted_batch_rows`]).
const COUNTED_BATCH_BYTES: usize = 2 << 20;

/// Rows in each batch of a join whose rows are counted, not kept, with the columns `schema`:
/// about 2 MiB of them (`COUNTED_BATCH_BYTES`), from 16 Ki to [`CHUNK_ROWS`] rows. Each batch's
/// columns are hashed for the checksum right after it is decoded, and a wide batch is no longer
/// in the caches then: TPC-H lineitem x orders counted (rows of about 180 bytes), alternating
/// runs, took 1.14 to 1.18 s with 64 Ki-row batches and 1.04 to 1.06 s with 16 Ki; but the
/// generated 10M x 10M uniform pair (24 bytes) took 1.62 to 1.71 s with 64 Ki and 1.66 to
/// 1.68 s with 16 Ki, where the batches' own costs weigh more than the misses. A column that
/// is not of fixed width is taken as 16 bytes a row.
pub fn counted_batch_rows(schema: &Schema) -> usize {
    (COUNTED_BATCH_BYTES / estimated_row_bytes(schema)).clamp(16 << 10, CHUNK_ROWS)
}

/// About how many bytes a row of `schema` takes decoded, at least 1: a column that is not of
/// fixed width is taken as 16 bytes a row.
pub fn estimated_row_bytes(schema: &Schema) -> usize {
    let row_bytes: usize = schema
        .fields()
        .iter()
        .map(|field| field.data_type().primitive_width().unwrap_or(16))
        .sum();
    row_bytes.max(1)
}

/// An input file, opened and checked: its schema, its row count and where its key columns are.
#[derive(Clone, Debug)]
pub struct InputFile {
    /// The file.
    pub path: PathBuf,
    /// Its format.
    pub format: FileFormat,
    /// Its columns.
    pub schema: SchemaRef,
    /// The columns it gives the join's output, in order: all of `schema`, or those
    /// [`select`](InputFile::select) chose.
    pub selected: SchemaRef,
    /// Its rows.
    pub rows: u64,
    /// The indices of the key columns in `schema`, in key order.
    pub key_indices: Vec<usize>,
    /// For CSV, the format the types were inferred with.
    csv: Option<CsvFormat>,
    /// Which of the file's rows are this input's.
    selection: Selection,
    /// The rows of each of this input's Parquet row groups, or Arrow IPC file record batches,
    /// in order: where it may be cut to be read by several workers at once. Empty for CSV and
    /// for an IPC stream, which has no index to start reading from a batch.
    group_rows: Vec<u64>,
    /// Where columns were selected: the indices in `schema` that a read of whole rows decodes
    /// (the selected and the key columns, ascending), and the positions of the selected ones
    /// among them, in output order. `None`: every column, as stored.
    projection: Option<(Vec<usize>, Vec<usize>)>,
    /// Rows in each batch a read yields but the last.
    batch_rows: usize,
    /// Key columns a keys-only read decoded, for the next read of whole rows of the same rows.
    kept_keys: Arc<KeptKeys>,
}

/// The rows of a file an [`InputFile`] reads: all of them, or a cluster process's share.
#[derive(Clone, Debug)]
enum Selection {
    /// Every row.
    All,
    /// A Parquet share: these row groups.
    RowGroups(Vec<usize>),
    /// An Arrow IPC share: these record batches.
    Batches(Range<usize>),
    /// A CSV share, read and decoded when opened.
    Loaded(RecordBatch),
}

/// An undecoded source of batches, boxed so that every format reads alike.
type RawBatches = Box<dyn Iterator<Item = std::result::Result<RecordBatch, ArrowError>> + Send>;

impl InputFile {
    /// Opens `path` as a table in `format` whose key columns are `key_columns`: reads the schema,
    /// checks that the key columns exist and can be keys, and counts the rows. Missing, empty,
    /// malformed or corrupt files are [`Error::Input`] naming the file.
    pub fn open(path: &Path, format: FileFormat, key_columns: &[String]) -> Result<InputFile> {
        let mut file = open_input(path)?;
        let mut group_rows = Vec::new();
        fenced(path, format, || {
            let (schema, rows, csv) = match format {
                FileFormat::Parquet => {
                    let builder = ParquetRecordBatchReaderBuilder::try_new(file)
                        .map_err(|error| parquet_read_error(path, error))?;
                    group_rows = row_group_rows(path, builder.metadata())?;
                    // The row groups' counts, not the footer's total: they are what the reader
                    // decodes, and where a faulty writer's total disagrees, the parts of the
                    // file would not end where the row groups do.
                    let rows = total_rows(path, &group_rows)?;
                    (builder.schema().clone(), rows, None)
                }
                FileFormat::Csv => {
                    let csv = csv_syntax_of_file(path, &mut file)?.format()?;
                    let (schema, records) = csv
                        .infer_schema(BufReader::new(file), None)
                        .map_err(|error| csv_error(path, error))?;
                    if schema.fields().is_empty() {
                        return Err(Error::Input(format!(
                            "{}: no header row; the first line must name the columns, \
                             separated by commas",
                            path.display()
                        )));
                    }
                    (Arc::new(schema), records as u64, Some(csv))
                }
                // Counted by `find_keys`.
                FileFormat::ArrowIpc => (ipc_reader(path, file, None, None)?.0, 0, None),
            };
            let mut input = InputFile {
                path: path.to_path_buf(),
                format,
                selected: Arc::clone(&schema),
                schema,
                rows,
                key_indices: Vec::new(),
                csv,
                selection: Selection::All,
                group_rows: std::mem::take(&mut group_rows),
                projection: None,
                batch_rows: CHUNK_ROWS,
                kept_keys: Arc::default(),
            };
            input.find_keys(key_columns)?;
            check_side_rows(&path.display().to_string(), input.rows)?;
            Ok(input)
        })
    }

    /// Opens share `share` of `path` (see [`read_table_share`] for how each format is cut): as
    /// [`open`](InputFile::open), but `rows` and every read cover only the share's rows. Opening
    /// reads the footer of a Parquet or Arrow IPC file and counts the share's rows from it (a
    /// Parquet footer's row groups) or from its record batches' headers (an Arrow IPC file; an
    /// IPC stream, which has no footer, is passed over whole, its key columns decoded); a CSV
    /// share is read and decoded.
    pub fn open_share(
        path: &Path,
        format: FileFormat,
        key_columns: &[String],
        share: Share,
    ) -> Result<InputFile> {
        share.check()?;
        if share.count == 1 {
            return InputFile::open(path, format, key_columns);
        }
        let mut group_rows = Vec::new();
        let (schema, rows, selection) = match format {
            FileFormat::Csv => {
                let batch = read_table_share(path, format, share)?;
                (
                    batch.schema(),
                    batch.num_rows() as u64,
                    Selection::Loaded(batch),
                )
            }
            FileFormat::Parquet => {
                let file = open_input(path)?;
                fenced(path, format, || {
                    let builder = ParquetRecordBatchReaderBuilder::try_new(file)
                        .map_err(|error| parquet_read_error(path, error))?;
                    let all_groups = row_group_rows(path, builder.metadata())?;
                    let run = share_run(&all_groups, share);
                    group_rows = all_groups[run.clone()].to_vec();
                    let rows = total_rows(path, &group_rows)?;
                    Ok((
                        builder.schema().clone(),
                        rows,
                        Selection::RowGroups(run.collect()),
                    ))
                })?
            }
            FileFormat::ArrowIpc => {
                let (schema, run) = ipc_share_run(path, share)?;
                (schema, 0, Selection::Batches(run))
            }
        };
        let mut input = InputFile {
            path: path.to_path_buf(),
            format,
            selected: Arc::clone(&schema),
            schema,
            rows,
            key_indices: Vec::new(),
            csv: None,
            selection,
            group_rows,
            projection: None,
            batch_rows: CHUNK_ROWS,
            kept_keys: Arc::default(),
        };
        input.find_keys(key_columns)?;
        let name = format!(
            "{} (the share of process {} of {})",
            path.display(),
            share.index,
            share.count
        );
        check_side_rows(&name, input.rows)?;
        Ok(input)
    }

    /// Checks that `key_columns` exist and can be keys, and notes where they are; for Arrow IPC,
    /// whose footer has no row counts, counts the rows ([`count_ipc_batches`]).
    ///
    /// [`count_ipc_batches`]: InputFile::count_ipc_batches
    fn find_keys(&mut self, key_columns: &[String]) -> Result<()> {
        let path = self.path.as_path();
        key_kinds(self.schema.as_ref(), key_columns, path)?;
        self.key_indices = key_columns
            .iter()
            .map(|name| find_field(&self.schema, name, path).map(|(index, _)| index))
            .collect::<Result<Vec<_>>>()?;
        if self.format == FileFormat::ArrowIpc {
            self.count_ipc_batches()?;
        }
        Ok(())
    }

    /// Gives the output only the columns `names`, in that order: a read of whole rows decodes
    /// those and the key columns, and no other (Parquet and Arrow IPC leave the rest undecoded,
    /// CSV unparsed). A name the file lacks, or names twice, is [`Error::Input`] listing the
    /// columns there are; a column named twice in `names` is [`Error::Usage`].
    pub fn select(&mut self, names: &[String], flag: &str) -> Result<()> {
        let path = self.path.as_path();
        let chosen = column_indices(&self.schema, names, path, flag)?;
        let mut read: Vec<usize> = chosen.iter().chain(&self.key_indices).copied().collect();
        read.sort_unstable();
        read.dedup();
        let positions = chosen
            .iter()
            .map(|index| read.binary_search(index).expect("a chosen column is read"))
            .collect();
        self.selected = Arc::new(self.schema.project(&chosen).map_err(|error| {
            Error::Internal(format!("selecting columns of {}: {error}", path.display()))
        })?);
        self.projection = Some((read, positions));
        Ok(())
    }

    /// The indices of the columns a read of whole rows decodes, ascending: the selected and the
    /// key columns where [`select`](InputFile::select) chose, else every column.
    pub fn read_columns(&self) -> Vec<usize> {
        match &self.projection {
            Some((read, _)) => read.clone(),
            None => (0..self.schema.fields().len()).collect(),
        }
    }

    /// The places of the selected columns ([`selected`](InputFile::selected)) among those a read
    /// of whole rows decodes ([`read_columns`](InputFile::read_columns)), in the selection's
    /// order; `None` where every column is read and selected.
    pub(crate) fn selected_positions(&self) -> Option<&[usize]> {
        self.projection
            .as_ref()
            .map(|(_, positions)| positions.as_slice())
    }

    /// The selected columns ([`selected`](InputFile::selected)) of a batch of whole rows that
    /// [`batches`](InputFile::batches) gave.
    pub fn selected_columns(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        match &self.projection {
            None => Ok(batch.clone()),
            Some((_, positions)) => batch.project(positions).map_err(|error| {
                Error::Internal(format!(
                    "selecting columns of {}: {error}",
                    self.path.display()
                ))
            }),
        }
    }

    /// The key columns' indices, ascending and once each: the columns a keys-only read decodes.
    pub(crate) fn key_projection(&self) -> Vec<usize> {
        let mut indices = self.key_indices.clone();
        indices.sort_unstable();
        indices.dedup();
        indices
    }

    /// Counts an Arrow IPC input's rows: an IPC file's, each of its record batches', from the
    /// batches' headers; a stream's, which has no footer to find them by, in a pass over its key
    /// columns.
    fn count_ipc_batches(&mut self) -> Result<()> {
        let path = self.path.as_path();
        let mut file = open_input(path)?;
        let indexed = is_ipc_file(path, &mut file)?;
        let run = match &self.selection {
            Selection::Batches(run) => Some(run.clone()),
            _ => None,
        };
        let format = FileFormat::ArrowIpc;
        if indexed {
            let corrupt = |error| arrow_read_error(path, format, error);
            let all = fenced(path, format, || {
                ipc_file_batch_rows(&mut file).map_err(corrupt)
            })?;
            let batch_rows = match run {
                None => all,
                // The file changed since its share was cut.
                Some(run) => all.get(run).map(<[u64]>::to_vec).ok_or_else(|| {
                    Error::Input(format!(
                        "{}: the footer lists fewer record batches than when the file was \
                         first opened; was it rewritten during the run?",
                        path.display()
                    ))
                })?,
            };
            self.rows = total_rows(path, &batch_rows)?;
            self.group_rows = batch_rows;
            return Ok(());
        }
        let projection = self.key_projection();
        let (_, mut raw) = fenced(path, format, || {
            ipc_reader(path, file, Some(projection), run)
        })?;
        let mut batch_rows = Vec::new();
        while let Some(batch) = fenced(path, format, || Ok(raw.next()))? {
            let batch = batch.map_err(|error| arrow_read_error(path, format, error))?;
            batch_rows.push(batch.num_rows() as u64);
        }
        self.rows = batch_rows.iter().sum();
        self.group_rows = Vec::new();
        Ok(())
    }

    /// The row numbers at which this input may be cut into parts read apart
    /// ([`batches_of_rows`](InputFile::batches_of_rows)): the starts of its Parquet row groups or
    /// Arrow IPC file record batches after the first. None for CSV and IPC streams.
    pub fn cuts(&self) -> Vec<u64> {
        let mut start = 0u64;
        let mut cuts = Vec::new();
        for &rows in self
            .group_rows
            .iter()
            .take(self.group_rows.len().saturating_sub(1))
        {
            start += rows;
            cuts.push(start);
        }
        cuts
    }

    /// The rows of each Parquet row group, or Arrow IPC file record batch, in order: the parts
    /// [`batches_of_rows`](InputFile::batches_of_rows) reads apart. Empty where the input
    /// cannot be read a part at a time (CSV, an IPC stream).
    pub fn group_rows(&self) -> &[u64] {
        &self.group_rows
    }

    /// Has every read yield batches of `rows` rows (at least 1; the last may be shorter).
    pub fn set_batch_rows(&mut self, rows: usize) {
        self.batch_rows = rows.max(1);
    }

    /// Rows in each batch a read yields but the last.
    pub fn batch_rows(&self) -> usize {
        self.batch_rows
    }

    /// The file's rows in order, [`batch_rows`](InputFile::batch_rows) to a batch (the last may
    /// be shorter); with
    /// `keys_only`, batches hold only the key columns, else the selected and the key columns
    /// (all columns unless [`select`](InputFile::select) chose; see
    /// [`selected_columns`](InputFile::selected_columns)). Decoding errors are [`Error::Input`]
    /// naming the file, and end the batches.
    pub fn batches(&self, keys_only: bool) -> Result<Batches> {
        self.batches_of_groups(self.columns_read(keys_only), None)
    }

    /// All this input's rows in order, as [`batches`](InputFile::batches) gives them (with
    /// `keys_only`, only the key columns), its parts (runs of Parquet row groups or Arrow IPC
    /// file record batches, [`cuts`](InputFile::cuts)) decoded on `threads` threads at once; a
    /// CSV file or IPC stream, which cannot be cut, on one. Setting `stop` ends the read with
    /// [`Error::Interrupted`]. Read on one thread, TPC-H's lineitem took longer than the join
    /// of it that followed. Returns the schema of the columns read (the batches' schema, also
    /// where there is no row) and the batches.
    pub fn read_all(
        &self,
        keys_only: bool,
        threads: usize,
        stop: Option<&AtomicBool>,
    ) -> Result<(SchemaRef, Vec<RecordBatch>)> {
        let batches = self.read_all_batches(keys_only, threads, stop)?;
        let schema = match batches.first() {
            Some(batch) => batch.schema(),
            None => {
                let columns = if keys_only {
                    self.key_projection()
                } else {
                    self.read_columns()
                };
                Arc::new(self.schema.project(&columns).map_err(|error| {
                    Error::Internal(format!(
                        "selecting columns of {}: {error}",
                        self.path.display()
                    ))
                })?)
            }
        };
        Ok((schema, batches))
    }

    /// The batches of [`read_all`](InputFile::read_all).
    fn read_all_batches(
        &self,
        keys_only: bool,
        threads: usize,
        stop: Option<&AtomicBool>,
    ) -> Result<Vec<RecordBatch>> {
        let read_part = |rows: Range<u64>| -> Result<Vec<RecordBatch>> {
            let mut batches = Vec::new();
            for batch in self.batches_of_rows(keys_only, rows)? {
                if stop.is_some_and(|stop| stop.load(Ordering::Relaxed)) {
                    return Err(Error::Interrupted);
                }
                batches.push(batch?);
            }
            Ok(batches)
        };
        // Four parts a thread, taken in turn: a thread that draws a slow part does not hold up
        // the others for long.
        const PARTS_PER_THREAD: usize = 4;
        let parts: Vec<Range<u64>> =
            split_at_cuts(&self.cuts(), self.rows, threads.max(1) * PARTS_PER_THREAD)
                .into_iter()
                .filter(|rows| !rows.is_empty())
                .collect();
        if parts.len() <= 1 {
            return read_part(0..self.rows);
        }
        let threads = threads.min(parts.len());
        let read = try_in_turn(parts, threads, Vec::new, |read, part, rows| {
            read.push((part, read_part(rows)?));
            Ok::<_, Error>(())
        })?;
        let mut parts: Vec<(usize, Vec<RecordBatch>)> = read.into_iter().flatten().collect();
        parts.sort_unstable_by_key(|(part, _)| *part);
        Ok(parts.into_iter().flat_map(|(_, batches)| batches).collect())
    }

    /// The rows `rows` in order, as [`batches`](InputFile::batches) gives them, for rows that
    /// begin and end at a cut ([`cuts`](InputFile::cuts)) or at the input's ends. Where a
    /// keys-only read of these rows kept its key columns (`key_collector`, as `auto`'s skew check
    /// does), they are used, no longer kept, and only the other columns are decoded.
    pub fn batches_of_rows(&self, keys_only: bool, rows: Range<u64>) -> Result<Batches> {
        let groups = match rows == (0..self.rows) {
            true => None,
            false => Some(self.groups_of(&rows)?),
        };
        match self.kept_keys.take(&rows) {
            Some(keys) => self.batches_around_keys(keys_only, groups, keys),
            None => self.batches_of_groups(self.columns_read(keys_only), groups),
        }
    }

    /// A collector of the key columns of a part as a keys-only
    /// [`batches_of_rows`](InputFile::batches_of_rows) yields them, kept for the next read of
    /// these rows while the input's kept key columns take at most `most` bytes.
    pub(crate) fn key_collector(&self, most: u64) -> KeyCollector<'_> {
        self.kept_keys.collector(most)
    }

    /// The key columns kept for rows `rows`, if any, left kept.
    pub(crate) fn kept_keys(&self, rows: &Range<u64>) -> Option<Vec<RecordBatch>> {
        self.kept_keys.peek(rows)
    }

    /// The run of row groups (or record batches) that rows `rows` are, where they begin and end
    /// at a cut.
    fn groups_of(&self, rows: &Range<u64>) -> Result<Range<usize>> {
        let mut start = 0u64;
        let mut groups = None::<Range<usize>>;
        for (index, &group) in self.group_rows.iter().enumerate() {
            if start >= rows.start && start + group <= rows.end {
                let run = groups.get_or_insert(index..index);
                run.end = index + 1;
            }
            start += group;
        }
        match groups {
            Some(run)
                if self.group_rows[run.clone()].iter().sum::<u64>() == rows.end - rows.start =>
            {
                Ok(run)
            }
            _ => Err(Error::Internal(format!(
                "{}: rows {} to {} do not begin and end at row groups",
                self.path.display(),
                rows.start,
                rows.end
            ))),
        }
    }

    /// The columns a read decodes: the key columns (`keys_only`), or those of whole rows
    /// (`None`: every column).
    fn columns_read(&self, keys_only: bool) -> Option<Vec<usize>> {
        match keys_only {
            true => Some(self.key_projection()),
            false => self.projection.as_ref().map(|(read, _)| read.clone()),
        }
    }

    /// The batches of row groups `groups` (all where `None`) whose key columns `keys` were kept:
    /// those alone for a keys-only read, else the other columns decoded and the kept ones put
    /// back among them.
    fn batches_around_keys(
        &self,
        keys_only: bool,
        groups: Option<Range<usize>>,
        keys: Vec<RecordBatch>,
    ) -> Result<Batches> {
        let kept: u64 = keys.iter().map(|batch| batch.num_rows() as u64).sum();
        let counted = match &groups {
            Some(run) => self.group_rows[run.clone()].iter().sum(),
            None => self.rows,
        };
        if kept != counted {
            return Err(changed_between_reads(&self.path));
        }
        let key_columns = self.key_projection();
        let read = match self.columns_read(keys_only) {
            Some(read) => read,
            None => (0..self.schema.fields().len()).collect(),
        };
        let others: Vec<usize> = read
            .iter()
            .copied()
            .filter(|column| !key_columns.contains(column))
            .collect();
        if others.is_empty() {
            let raw: RawBatches = Box::new(keys.into_iter().map(Ok));
            return Ok(Batches::new(raw, self, counted));
        }
        let mut batches = self.batches_of_groups(Some(others), groups)?;
        let from_keys = read
            .iter()
            .map(|column| key_columns.contains(column))
            .collect();
        batches.merge = Some(KeyMerge::new(keys, from_keys));
        Ok(batches)
    }

    /// The batches of all this input's rows, or of its row groups or record batches `groups`
    /// (indices into `group_rows`), of the columns `projection` (ascending; `None`: every
    /// column).
    fn batches_of_groups(
        &self,
        projection: Option<Vec<usize>>,
        groups: Option<Range<usize>>,
    ) -> Result<Batches> {
        let path = self.path.as_path();
        let counted = match &groups {
            Some(run) => self.group_rows[run.clone()].iter().sum(),
            None => self.rows,
        };
        let file = open_input(path)?;
        let raw: RawBatches = fenced(path, self.format, || match (&self.selection, self.format) {
            (Selection::Loaded(batch), _) => {
                let batch = match &projection {
                    Some(indices) => batch.project(indices).map_err(|error| {
                        Error::Internal(format!("projecting {}: {error}", path.display()))
                    })?,
                    None => batch.clone(),
                };
                Ok(Box::new(std::iter::once(Ok(batch))) as RawBatches)
            }
            (selection, FileFormat::Parquet) => {
                let builder = ParquetRecordBatchReaderBuilder::try_new(file)
                    .map_err(|error| parquet_read_error(path, error))?;
                let builder = match (selection, groups) {
                    (Selection::RowGroups(selected), Some(run)) => {
                        builder.with_row_groups(selected[run].to_vec())
                    }
                    (Selection::RowGroups(selected), None) => {
                        builder.with_row_groups(selected.clone())
                    }
                    (_, Some(run)) => builder.with_row_groups(run.collect()),
                    (_, None) => builder,
                };
                let builder = match &projection {
                    Some(indices) => {
                        let mask = ProjectionMask::roots(
                            builder.parquet_schema(),
                            indices.iter().copied(),
                        );
                        builder.with_projection(mask)
                    }
                    None => builder,
                };
                let reader = builder
                    .with_batch_size(self.batch_rows)
                    .build()
                    .map_err(|error| parquet_read_error(path, error))?;
                Ok(Box::new(reader) as RawBatches)
            }
            (selection, FileFormat::ArrowIpc) => {
                let run = match (selection, groups) {
                    (Selection::Batches(share), Some(run)) => {
                        Some(share.start + run.start..share.start + run.end)
                    }
                    (Selection::Batches(share), None) => Some(share.clone()),
                    (_, run) => run,
                };
                Ok(ipc_reader(path, file, projection.clone(), run)?.1)
            }
            (_, FileFormat::Csv) => {
                let mut builder = arrow::csv::ReaderBuilder::new(Arc::clone(&self.schema))
                    .with_format(self.csv.clone().unwrap_or_default().with_header(true))
                    .with_batch_size(self.batch_rows);
                if let Some(indices) = &projection {
                    builder = builder.with_projection(indices.clone());
                }
                let reader = builder
                    .build(BufReader::new(file))
                    .map_err(|error| csv_error(path, error))?;
                Ok(Box::new(reader) as RawBatches)
            }
        })?;
        Ok(Batches::new(raw, self, counted))
    }
}

/// The indices in `schema` (the columns of `path`) of the columns `names`, in that order, as
/// `flag` chose them: a name `path` lacks is [`Error::Input`] listing its columns, a name given
/// twice [`Error::Usage`].
pub(crate) fn column_indices(
    schema: &Schema,
    names: &[String],
    path: &Path,
    flag: &str,
) -> Result<Vec<usize>> {
    let mut chosen = Vec::with_capacity(names.len());
    for name in names {
        let (index, _) = find_field(schema, name, path)?;
        if chosen.contains(&index) {
            return Err(Error::Usage(format!(
                "{flag} names `{name}` twice; name each column once"
            )));
        }
        chosen.push(index);
    }
    Ok(chosen)
}

/// Opens an Arrow IPC file or stream: its schema and its batches (those of `run` only, if given).
fn ipc_reader(
    path: &Path,
    mut file: File,
    projection: Option<Vec<usize>>,
    run: Option<Range<usize>>,
) -> Result<(SchemaRef, RawBatches)> {
    let is_file_format = is_ipc_file(path, &mut file)?;
    let corrupt = |error| arrow_read_error(path, FileFormat::ArrowIpc, error);
    if is_file_format {
        let mut reader = FileReader::try_new_buffered(file, projection).map_err(corrupt)?;
        let schema = reader.schema();
        match run {
            // A file's footer indexes its batches: the share's are read, no others.
            Some(run) if run.is_empty() => Ok((schema, Box::new(std::iter::empty()))),
            Some(run) => {
                reader.set_index(run.start).map_err(corrupt)?;
                Ok((schema, Box::new(reader.take(run.len()))))
            }
            None => Ok((schema, Box::new(reader))),
        }
    } else {
        let reader = StreamReader::try_new_buffered(file, projection).map_err(corrupt)?;
        let schema = reader.schema();
        match run {
            Some(run) => Ok((schema, Box::new(reader.skip(run.start).take(run.len())))),
            None => Ok((schema, Box::new(reader))),
        }
    }
}

/// The rows of a file whose parts (row groups, record batches) hold `counts` rows: counts read
/// from the file, so a sum past `u64::MAX` is a corrupt file, not a wrapped total.
pub(super) fn total_rows(path: &Path, counts: &[u64]) -> Result<u64> {
    counts
        .iter()
        .try_fold(0u64, |total, &rows| total.checked_add(rows))
        .ok_or_else(|| {
            Error::Input(format!(
                "{}: its parts' row counts add up past 2^64; the file is corrupt, re-export it",
                path.display()
            ))
        })
}

/// Checks that `rows` rows of `name` (a file, a share of one, a table) fit one side of a join:
/// row numbers are 32-bit, `u32::MAX` marking a missing side. Checked as an input is opened, so
/// that a file too large (or one whose counts claim so) is refused before the join reads it.
pub(crate) fn check_side_rows(name: &str, rows: u64) -> Result<()> {
    if rows >= u64::from(u32::MAX) {
        return Err(Error::Input(format!(
            "{name}: {rows} rows, more than one side of a join may have (4,294,967,294, \
             2^32 - 2); split it and join the parts"
        )));
    }
    Ok(())
}

/// Whether `file` is in the Arrow IPC file format (it opens with a magic; anything else may still
/// be an IPC stream); leaves it rewound.
fn is_ipc_file(path: &Path, file: &mut File) -> Result<bool> {
    let mut magic = [0u8; ARROW_FILE_MAGIC.len()];
    let is_file_format = file.read_exact(&mut magic).is_ok() && &magic == ARROW_FILE_MAGIC;
    file.rewind().map_err(|error| read_error(path, error))?;
    Ok(is_file_format)
}

/// The schema of an Arrow IPC file or stream and the record batches of share `share`: runs
/// balanced by body length from a file's footer, or by row count for a stream, which has no
/// footer and so is passed over whole (decoding its first column only).
fn ipc_share_run(path: &Path, share: Share) -> Result<(SchemaRef, Range<usize>)> {
    let mut file = open_input(path)?;
    let corrupt = |error| arrow_read_error(path, FileFormat::ArrowIpc, error);
    fenced(path, FileFormat::ArrowIpc, || {
        if is_ipc_file(path, &mut file)? {
            let mut reader = FileReader::try_new_buffered(file, None).map_err(corrupt)?;
            let bodies = ipc_file_bodies(&mut reader).map_err(corrupt)?;
            return Ok((reader.schema(), share_run(&bodies, share)));
        }
        let schema = StreamReader::try_new_buffered(&mut file, None)
            .map_err(corrupt)?
            .schema();
        file.rewind().map_err(|error| read_error(path, error))?;
        let first = (!schema.fields().is_empty()).then(|| vec![0]);
        let mut rows = Vec::new();
        for batch in StreamReader::try_new_buffered(file, first).map_err(corrupt)? {
            rows.push(batch.map_err(corrupt)?.num_rows() as u64);
        }
        Ok((schema, share_run(&rows, share)))
    })
}

/// The batches of an [`InputFile`], its batch rows ([`CHUNK_ROWS`] unless set) each but the
/// last.
pub struct Batches {
    raw: RawBatches,
    path: PathBuf,
    format: FileFormat,
    /// Decoded rows not yet handed out, in order.
    pending: VecDeque<RecordBatch>,
    pending_rows: usize,
    /// Rows in each batch handed out but the last.
    batch_rows: usize,
    /// Whether the decoder has nothing more (or failed).
    done: bool,
    /// The rows the read covers as counted when the file was opened (from a Parquet file's row
    /// groups, an Arrow IPC file's batch headers, a pass over a CSV file or IPC stream), which
    /// place every row; and those decoded so far.
    counted: u64,
    decoded: u64,
    /// Key columns decoded before, put back among the columns decoded now.
    merge: Option<KeyMerge>,
}

impl Batches {
    /// The batches of `raw`, `counted` rows of `input`.
    fn new(raw: RawBatches, input: &InputFile, counted: u64) -> Batches {
        Batches {
            raw,
            path: input.path.clone(),
            format: input.format,
            pending: VecDeque::new(),
            pending_rows: 0,
            batch_rows: input.batch_rows,
            done: false,
            counted,
            decoded: 0,
            merge: None,
        }
    }

    /// The next batch handed out: [`take_chunk`](Self::take_chunk)'s, with kept key columns put
    /// back.
    fn next_chunk(&mut self) -> Result<RecordBatch> {
        let chunk = self.take_chunk()?;
        match self.merge.as_mut() {
            Some(merge) => merge.merge(&self.path, chunk),
            None => Ok(chunk),
        }
    }

    /// The next `batch_rows` pending rows (fewer at the end) as one batch.
    fn take_chunk(&mut self) -> Result<RecordBatch> {
        let want = self.batch_rows.min(self.pending_rows);
        self.pending_rows -= want;
        if self.pending.front().map(RecordBatch::num_rows) == Some(want) {
            return Ok(self.pending.pop_front().expect("a pending batch"));
        }
        let mut parts = Vec::new();
        let mut missing = want;
        while missing > 0 {
            let first = self.pending.pop_front().expect("pending rows");
            let rows = first.num_rows();
            if rows <= missing {
                missing -= rows;
                parts.push(first);
            } else {
                parts.push(first.slice(0, missing));
                self.pending
                    .push_front(first.slice(missing, rows - missing));
                missing = 0;
            }
        }
        concat_batches(&parts[0].schema(), &parts).map_err(|error| {
            Error::Input(format!(
                "{}: its batches do not fit together ({error}); re-export the file",
                self.path.display()
            ))
        })
    }

    /// The error of a read that decoded other than the rows counted when the file was opened:
    /// every row was placed by that count (its partition, its slot in the output), so the read
    /// ends here, its undelivered rows dropped.
    fn miscounted(&mut self) -> Error {
        self.done = true;
        self.pending.clear();
        self.pending_rows = 0;
        let counts = match self.format {
            FileFormat::Parquet => "its row groups' counts say",
            FileFormat::ArrowIpc => "its record batches' counts when it was opened said",
            FileFormat::Csv => "a count of its records when it was opened said",
        };
        let decoded = match self.decoded > self.counted {
            true => format!("more than {}", self.counted),
            false => self.decoded.to_string(),
        };
        Error::Input(format!(
            "{}: {counts} {} rows, but {decoded} were decoded: the file is corrupt or was \
             rewritten while skewjoin read it; re-export it, or run again on a file that is not \
             being written",
            self.path.display(),
            self.counted
        ))
    }
}

impl Iterator for Batches {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Result<RecordBatch>> {
        loop {
            if self.pending_rows >= self.batch_rows || (self.done && self.pending_rows > 0) {
                return Some(self.next_chunk());
            }
            if self.done {
                // Kept key columns of rows not read again: the file has fewer rows now.
                if self.merge.take().is_some_and(|merge| !merge.is_done()) {
                    return Some(Err(changed_between_reads(&self.path)));
                }
                return None;
            }
            let (path, format) = (self.path.clone(), self.format);
            let raw = &mut self.raw;
            match fenced(&path, format, || Ok(raw.next())) {
                Ok(None) if self.decoded != self.counted => return Some(Err(self.miscounted())),
                Ok(None) => self.done = true,
                Ok(Some(Ok(batch))) => {
                    self.decoded += batch.num_rows() as u64;
                    if self.decoded > self.counted {
                        return Some(Err(self.miscounted()));
                    }
                    if batch.num_rows() > 0 {
                        self.pending_rows += batch.num_rows();
                        self.pending.push_back(batch);
                    }
                }
                Ok(Some(Err(error))) => {
                    self.done = true;
                    return Some(Err(decode_error(&path, format, error)));
                }
                Err(error) => {
                    self.done = true;
                    return Some(Err(error));
                }
            }
        }
    }
}

/// A failed decode, in our message style for the format.
fn decode_error(path: &Path, format: FileFormat, error: ArrowError) -> Error {
    match format {
        FileFormat::Csv => csv_error(path, error),
        _ => arrow_read_error(path, format, error),
    }
}

// Batches move to the worker thread that reads them.
const _: fn() = || {
    fn assert_send<T: Send>() {}
    assert_send::<Batches>();
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{read_table, write_table};
    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use arrow::ipc::writer::{FileWriter, StreamWriter};
    use tempfile::TempDir;

    /// Counted batches hold about 2 MiB: narrow rows come 64 Ki to a batch, wide rows 16 Ki,
    /// and rows between in between.
    #[test]
    fn counted_batches_are_smaller_for_wider_rows() {
        use arrow::datatypes::{DataType, Field};
        let schema = |types: &[DataType]| {
            Schema::new(
                types
                    .iter()
                    .enumerate()
                    .map(|(index, data_type)| {
                        Field::new(format!("c{index}"), data_type.clone(), true)
                    })
                    .collect::<Vec<_>>(),
            )
        };
        let narrow = schema(&vec![DataType::Int64; 3]);
        assert_eq!(counted_batch_rows(&narrow), CHUNK_ROWS);
        // Eight 8-byte columns: 64 bytes a row, 32 Ki rows.
        assert_eq!(
            counted_batch_rows(&schema(&vec![DataType::Int64; 8])),
            32 << 10
        );
        // Like TPC-H's lineitem: integers, decimals, dates and strings (taken as 16 bytes).
        let mut wide = vec![DataType::Int64; 3];
        wide.extend(vec![DataType::Decimal128(15, 2); 4]);
        wide.extend(vec![DataType::Utf8View; 5]);
        wide.extend(vec![DataType::Date32; 3]);
        assert_eq!(counted_batch_rows(&schema(&wide)), 16 << 10);
        assert_eq!(counted_batch_rows(&schema(&[])), CHUNK_ROWS);
    }

    /// 150,000 rows (two full chunks and a short one), with NULL keys and text.
    fn table() -> RecordBatch {
        let rows = 2 * CHUNK_ROWS + 18_928;
        let keys: Vec<Option<i64>> = (0..rows as i64)
            .map(|i| (i % 97 != 0).then_some(i % 1000))
            .collect();
        let names: Vec<String> = (0..rows).map(|i| format!("row {i}")).collect();
        RecordBatch::try_from_iter([
            ("key", Arc::new(Int64Array::from(keys)) as ArrayRef),
            ("name", Arc::new(StringArray::from(names)) as ArrayRef),
        ])
        .unwrap()
    }

    fn key() -> Vec<String> {
        vec!["key".to_string()]
    }

    /// Streams `path` and checks it against reading it whole: the row count, full chunks but
    /// the last, the same rows in order, and key-only batches of the key column alone.
    fn check_streams_the_whole_table(path: &Path, format: FileFormat) {
        let whole = read_table(path, format).unwrap();
        let input = InputFile::open(path, format, &key()).unwrap();
        assert_eq!(input.rows, whole.num_rows() as u64, "{format}");
        let batches: Vec<RecordBatch> = input.batches(false).unwrap().map(Result::unwrap).collect();
        let sizes: Vec<usize> = batches.iter().map(RecordBatch::num_rows).collect();
        assert_eq!(sizes, [CHUNK_ROWS, CHUNK_ROWS, 18_928], "{format}");
        assert_eq!(
            concat_batches(&input.schema, &batches).unwrap(),
            whole,
            "{format}"
        );
        let keys: Vec<RecordBatch> = input.batches(true).unwrap().map(Result::unwrap).collect();
        assert!(
            keys.iter().all(|batch| batch.num_columns() == 1),
            "{format}"
        );
        let keys = concat_batches(&keys[0].schema(), &keys).unwrap();
        assert_eq!(keys.column(0), whole.column(0), "{format}");
    }

    #[test]
    fn every_format_streams_the_whole_table_in_chunks() {
        let dir = TempDir::new().unwrap();
        for (name, format) in [
            ("t.parquet", FileFormat::Parquet),
            ("t.csv", FileFormat::Csv),
            ("t.arrow", FileFormat::ArrowIpc),
        ] {
            let path = dir.path().join(name);
            write_table(&path, format, &table()).unwrap();
            check_streams_the_whole_table(&path, format);
        }
    }

    /// Keeps `batches` as the key columns of rows `rows` of `input`, as the skew check does, if
    /// the input keeps at most `most` bytes.
    fn keep_keys(input: &InputFile, rows: Range<u64>, batches: &[RecordBatch], most: u64) {
        let mut collector = input.key_collector(most);
        batches.iter().for_each(|batch| collector.add(batch));
        collector.finish(rows);
    }

    /// The rows of `input`'s part `rows` as a read of whole rows gives them, concatenated.
    fn rows_of(input: &InputFile, rows: Range<u64>) -> RecordBatch {
        let batches: Vec<RecordBatch> = input
            .batches_of_rows(false, rows)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        concat_batches(&batches[0].schema(), &batches).unwrap()
    }

    /// Key columns kept by a keys-only read of a part are used by the next read of whole rows of
    /// it, which gives what decoding every column gives (the key between other columns, some of
    /// them not selected, in every format, in batches of the keys' size or smaller or larger)
    /// and leaves none kept; the read after decodes all.
    #[test]
    fn a_part_whose_keys_were_kept_reads_the_same_rows() {
        let dir = TempDir::new().unwrap();
        let base = table();
        let rows = base.num_rows();
        let table = RecordBatch::try_from_iter([
            ("name", Arc::clone(base.column(1))),
            ("key", Arc::clone(base.column(0))),
            (
                "other",
                Arc::new(Int64Array::from_iter_values(
                    (0..rows as i64).map(|i| i * 7),
                )) as ArrayRef,
            ),
        ])
        .unwrap();
        for (name, format) in [
            ("t.parquet", FileFormat::Parquet),
            ("t.csv", FileFormat::Csv),
            ("t.arrow", FileFormat::ArrowIpc),
        ] {
            let path = dir.path().join(name);
            write_table(&path, format, &table).unwrap();
            let selections = [None, Some(vec!["other".to_string(), "name".to_string()])];
            for (selection, batch_rows) in selections.iter().flat_map(|selection| {
                [
                    (selection, CHUNK_ROWS),
                    (selection, 10_000),
                    (selection, 100_000),
                ]
            }) {
                let case = format!("{format}, selecting {selection:?}, {batch_rows} rows a batch");
                let open = || {
                    let mut input = InputFile::open(&path, format, &key()).unwrap();
                    if let Some(names) = selection {
                        input.select(names, "--left-columns").unwrap();
                    }
                    input
                };
                let (mut input, mut fresh) = (open(), open());
                fresh.set_batch_rows(batch_rows);
                let parts = split_at_cuts(&input.cuts(), input.rows, 2);
                if format == FileFormat::Parquet {
                    assert!(parts.iter().all(|part| !part.is_empty()), "{case}");
                }
                let parts: Vec<Range<u64>> =
                    parts.into_iter().filter(|part| !part.is_empty()).collect();
                for part in &parts {
                    let keys: Vec<RecordBatch> = input
                        .batches_of_rows(true, part.clone())
                        .unwrap()
                        .map(Result::unwrap)
                        .collect();
                    // Beyond the bytes allowed, they are not kept.
                    keep_keys(&input, part.clone(), &keys, 1000);
                    assert_eq!(input.kept_keys(part), None, "{case}: over the bound");
                    keep_keys(&input, part.clone(), &keys, u64::MAX);
                    // Counting again (the check's exact pass) leaves them kept.
                    assert_eq!(input.kept_keys(part), Some(keys), "{case}");
                }
                // As a counted join reads wide rows after the check: in other batches.
                input.set_batch_rows(batch_rows);
                for part in parts {
                    let expected = rows_of(&fresh, part.clone());
                    assert_eq!(rows_of(&input, part.clone()), expected, "{case}");
                    assert_eq!(input.kept_keys(&part), None, "{case}: used once");
                    assert_eq!(rows_of(&input, part.clone()), expected, "{case}");
                }
            }
        }
    }

    /// Kept key columns that do not fit the rows read again (the file changed between the
    /// reads) are an input error naming the file.
    #[test]
    fn kept_keys_of_other_rows_are_an_input_error() {
        let dir = TempDir::new().unwrap();
        let path = dir.path().join("t.parquet");
        write_table(&path, FileFormat::Parquet, &table()).unwrap();
        let input = InputFile::open(&path, FileFormat::Parquet, &key()).unwrap();
        let part = 0..input.rows;
        let keys: Vec<RecordBatch> = input.batches(true).unwrap().map(Result::unwrap).collect();
        let mut shorter_first = keys.clone();
        shorter_first[0] = keys[0].slice(0, 1000);
        let mut longer_last = keys.clone();
        longer_last.push(keys[0].slice(0, 10));
        for kept in [shorter_first, keys[..keys.len() - 1].to_vec(), longer_last] {
            keep_keys(&input, part.clone(), &kept, u64::MAX);
            let error = match input.batches_of_rows(false, part.clone()) {
                Err(error) => error,
                Ok(mut batches) => batches.find_map(Result::err).expect("the read fails"),
            };
            assert!(matches!(error, Error::Input(_)), "{error}");
            let message = error.to_string();
            assert!(message.contains("t.parquet"), "{message}");
            assert!(message.contains("changed between two reads"), "{message}");
        }
    }

    /// Every share of `path`, for 1 to 4 shares, streams the rows `read_table_share` gives it,
    /// in full chunks, and the shares together are the whole table.
    fn check_shares_stream_the_whole_table(path: &Path, format: FileFormat) {
        let whole = read_table(path, format).unwrap();
        for count in 1..=4 {
            let mut all = Vec::new();
            for index in 0..count {
                let share = Share { index, count };
                let case = format!("{format} share {index} of {count}");
                let input = InputFile::open_share(path, format, &key(), share).unwrap();
                let expected = read_table_share(path, format, share).unwrap();
                assert_eq!(input.rows, expected.num_rows() as u64, "{case}");
                let batches: Vec<RecordBatch> =
                    input.batches(false).unwrap().map(Result::unwrap).collect();
                let sizes: Vec<usize> = batches.iter().map(RecordBatch::num_rows).collect();
                assert!(
                    sizes.iter().rev().skip(1).all(|&rows| rows == CHUNK_ROWS),
                    "{case}: {sizes:?}"
                );
                let got = concat_batches(&input.schema, &batches).unwrap();
                assert_eq!(got, expected, "{case}");
                let keys: usize = input
                    .batches(true)
                    .unwrap()
                    .map(|batch| batch.unwrap().num_rows())
                    .sum();
                assert_eq!(keys as u64, input.rows, "{case}");
                all.extend(batches);
            }
            assert_eq!(
                concat_batches(&whole.schema(), &all).unwrap(),
                whole,
                "{format}"
            );
        }
    }

    #[test]
    fn every_format_streams_each_share() {
        let dir = TempDir::new().unwrap();
        for (name, format) in [
            ("t.parquet", FileFormat::Parquet),
            ("t.csv", FileFormat::Csv),
        ] {
            let path = dir.path().join(name);
            write_table(&path, format, &table()).unwrap();
            check_shares_stream_the_whole_table(&path, format);
        }
        // Arrow IPC files and streams of several record batches of different sizes.
        let whole = table();
        let cuts = [0, 10_000, 70_000, 71_000, 140_000, whole.num_rows()];
        let file_path = dir.path().join("t.arrow");
        let mut writer =
            FileWriter::try_new(File::create(&file_path).unwrap(), &whole.schema()).unwrap();
        let stream_path = dir.path().join("s.arrows");
        let mut stream =
            StreamWriter::try_new(File::create(&stream_path).unwrap(), &whole.schema()).unwrap();
        for cut in cuts.windows(2) {
            writer.write(&whole.slice(cut[0], cut[1] - cut[0])).unwrap();
            stream.write(&whole.slice(cut[0], cut[1] - cut[0])).unwrap();
        }
        writer.finish().unwrap();
        stream.finish().unwrap();
        check_shares_stream_the_whole_table(&file_path, FileFormat::ArrowIpc);
        check_shares_stream_the_whole_table(&stream_path, FileFormat::ArrowIpc);
    }

    /// The rows of `input` from `rows.start` to `rows.end`, key column only, as batches_of_rows
    /// gives them.
    fn keys_of_rows(input: &InputFile, rows: Range<u64>) -> Vec<Option<i64>> {
        input
            .batches_of_rows(true, rows)
            .unwrap()
            .flat_map(|batch| {
                let batch = batch.unwrap();
                let keys = batch
                    .column(0)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap();
                keys.iter().collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn parquet_row_groups_and_ipc_file_batches_are_cuts_read_apart() {
        let dir = TempDir::new().unwrap();
        let whole = table();
        let whole_keys = whole
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        let expected = |rows: Range<u64>| -> Vec<Option<i64>> {
            (rows.start..rows.end)
                .map(|row| whole_keys.iter().nth(row as usize).unwrap())
                .collect()
        };
        // IPC: batches at these rows; a file is cut at each, a stream nowhere.
        let bounds = [0, 10_000, 70_000, 71_000, 140_000, whole.num_rows()];
        let file_path = dir.path().join("t.arrow");
        let stream_path = dir.path().join("s.arrows");
        let mut writer =
            FileWriter::try_new(File::create(&file_path).unwrap(), &whole.schema()).unwrap();
        let mut stream =
            StreamWriter::try_new(File::create(&stream_path).unwrap(), &whole.schema()).unwrap();
        for pair in bounds.windows(2) {
            writer
                .write(&whole.slice(pair[0], pair[1] - pair[0]))
                .unwrap();
            stream
                .write(&whole.slice(pair[0], pair[1] - pair[0]))
                .unwrap();
        }
        writer.finish().unwrap();
        stream.finish().unwrap();
        let file = InputFile::open(&file_path, FileFormat::ArrowIpc, &key()).unwrap();
        assert_eq!(file.rows, whole.num_rows() as u64);
        assert_eq!(file.cuts(), vec![10_000, 70_000, 71_000, 140_000]);
        assert_eq!(
            keys_of_rows(&file, 10_000..71_000),
            expected(10_000..71_000)
        );
        assert_eq!(
            keys_of_rows(&file, 140_000..150_000),
            expected(140_000..150_000)
        );
        assert!(file.batches_of_rows(true, 5..70_000).is_err());
        let stream = InputFile::open(&stream_path, FileFormat::ArrowIpc, &key()).unwrap();
        assert_eq!(stream.cuts(), Vec::<u64>::new());
        // Each share of an IPC file is cut at its own batches: its parts, read apart, are its
        // rows.
        let mut share_cuts = 0;
        for index in 0..2 {
            let share = Share { index, count: 2 };
            let part =
                InputFile::open_share(&file_path, FileFormat::ArrowIpc, &key(), share).unwrap();
            let cuts = part.cuts();
            share_cuts += cuts.len();
            let bounds: Vec<u64> = [0].into_iter().chain(cuts).chain([part.rows]).collect();
            let parts: Vec<Option<i64>> = bounds
                .windows(2)
                .flat_map(|pair| keys_of_rows(&part, pair[0]..pair[1]))
                .collect();
            assert_eq!(parts, keys_of_rows(&part, 0..part.rows), "share {index}");
        }
        assert_eq!(share_cuts, 3, "five batches in two shares: three cuts");
        // Parquet as `write_table` writes it: row groups of 64 Ki rows.
        let parquet = dir.path().join("t.parquet");
        write_table(&parquet, FileFormat::Parquet, &whole).unwrap();
        let input = InputFile::open(&parquet, FileFormat::Parquet, &key()).unwrap();
        let chunk = CHUNK_ROWS as u64;
        assert_eq!(input.cuts(), vec![chunk, 2 * chunk]);
        assert_eq!(
            keys_of_rows(&input, chunk..2 * chunk),
            expected(chunk..2 * chunk)
        );
        assert_eq!(
            keys_of_rows(&input, 2 * chunk..input.rows),
            expected(2 * chunk..input.rows)
        );
    }

    #[test]
    fn batches_of_any_size_are_cut_into_chunks() {
        // An IPC file of batches that straddle chunk boundaries, and some empty ones.
        let dir = TempDir::new().unwrap();
        let path = dir.path().join("odd.arrow");
        let whole = table();
        let mut writer =
            FileWriter::try_new(File::create(&path).unwrap(), &whole.schema()).unwrap();
        let mut offset = 0;
        for size in [0, 1, 40_000, 0, 65_535, 3, 44_386].into_iter().cycle() {
            let size = size.min(whole.num_rows() - offset);
            writer.write(&whole.slice(offset, size)).unwrap();
            offset += size;
            if offset == whole.num_rows() {
                break;
            }
        }
        writer.finish().unwrap();
        check_streams_the_whole_table(&path, FileFormat::ArrowIpc);
    }

    #[test]
    fn a_corrupt_page_is_an_input_error_while_streaming() {
        let dir = TempDir::new().unwrap();
        let path = dir.path().join("t.parquet");
        write_table(&path, FileFormat::Parquet, &table()).unwrap();
        // Overwrite the middle of the file, well inside the data pages: the footer still opens.
        let mut bytes = std::fs::read(&path).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle..middle + 4096].fill(0xA5);
        std::fs::write(&path, &bytes).unwrap();
        let input = InputFile::open(&path, FileFormat::Parquet, &key()).unwrap();
        let results: Vec<Result<RecordBatch>> = input.batches(false).unwrap().collect();
        let error = results
            .into_iter()
            .find_map(Result::err)
            .expect("a corrupt page is reported");
        match error {
            Error::Input(message) => assert!(message.contains("t.parquet"), "{message}"),
            other => panic!("not an input error: {other:?}"),
        }
    }

    #[test]
    fn opening_checks_the_key_columns_and_counts_rows() {
        let dir = TempDir::new().unwrap();
        let path = dir.path().join("t.csv");
        std::fs::write(&path, "key,name\n").unwrap();
        let input = InputFile::open(&path, FileFormat::Csv, &key()).unwrap();
        assert_eq!(input.rows, 0);
        assert_eq!(input.batches(false).unwrap().count(), 0);
        let missing = InputFile::open(&path, FileFormat::Csv, &["nope".to_string()]).unwrap_err();
        assert!(
            matches!(&missing, Error::Input(m) if m.contains("nope")),
            "{missing:?}"
        );
        std::fs::write(&path, "").unwrap();
        let empty = InputFile::open(&path, FileFormat::Csv, &key()).unwrap_err();
        assert!(
            matches!(&empty, Error::Input(m) if m.contains("empty")),
            "{empty:?}"
        );
    }
}
