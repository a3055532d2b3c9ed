//! Choosing a join's strategy (one rule for files and tables) and describing its plan.

use std::ops::Range;

use skewjoin_operators::load::imbalance;
use skewjoin_operators::{JoinType, Key, Partitioning, Side};
use skewjoin_planner::choose::KeyCheck;
use skewjoin_planner::cost::KeyStats;
use skewjoin_planner::exec_stream::split_at_cuts;
use skewjoin_planner::skew_check::{KeySink, KeyTally, SkewFinding};
use skewjoin_planner::work_costs::WorkCosts;
use skewjoin_planner::{resolve, Choice, PlanInputs, Strategy, Tuning};

use crate::cli::RunArgs;
use crate::engine::{self, SideData, StreamSide};
use crate::error::Result;
use crate::explain::{HotKey, Plan, SideSummary};
use crate::io::{extract_keys, tally_keys};
use crate::memory::{broadcast_budget, BroadcastBudget};
use crate::metrics::Metrics;
use crate::threads::try_in_turn;

use crate::cli::checks::{check_vprp_flags, with_vprp_flags};

/// Passes each key of a streamed input to `visit`, a batch at a time, until it returns `false`.
fn visit_keys(input: &StreamSide, mut visit: impl FnMut(&Key) -> bool) -> Result<()> {
    for batch in input.input.batches(true)? {
        let keys = extract_keys(&batch?, &input.key_columns, &input.input.path)?;
        if !keys.iter().all(&mut visit) {
            break;
        }
    }
    Ok(())
}

/// Counts every key of a streamed side in `tally`: one pass over its key columns.
pub(crate) fn tally_stream(input: &StreamSide, side: Side, tally: &mut impl KeySink) -> Result<()> {
    tally_rows(input, side, 0..input.input.rows, tally, 0)
}

/// Counts the keys of rows `rows` of a streamed side in `tally`, for rows that begin and end at
/// a cut of the side or at its ends: from the key columns kept for them, if any, else decoded,
/// and then kept for the join's read of these rows while the side keeps at most `keep` bytes
/// (see [`InputFile::key_collector`]).
///
/// [`InputFile::key_collector`]: crate::io::batches::InputFile::key_collector
fn tally_rows(
    input: &StreamSide,
    side: Side,
    rows: Range<u64>,
    tally: &mut impl KeySink,
    keep: u64,
) -> Result<()> {
    let (columns, path) = (&input.key_columns, &input.input.path);
    if let Some(kept) = input.input.kept_keys(&rows) {
        return kept
            .iter()
            .try_for_each(|batch| tally_keys(batch, columns, path, side, tally));
    }
    let mut kept = input.input.key_collector(keep);
    for batch in input.input.batches_of_rows(true, rows.clone())? {
        let batch = batch?;
        tally_keys(&batch, columns, path, side, tally)?;
        kept.add(&batch);
    }
    kept.finish(rows);
    Ok(())
}

/// Gives every part of `parts` to `count` on `threads` threads, each taking the largest part
/// left and counting it in a sink of its own (`new_sink`): the sinks, or the error of the
/// failing part that comes first in `parts` (largest first), after which no thread takes another.
fn on_parts<S: Send>(
    parts: &[(&StreamSide, Side, Range<u64>)],
    threads: usize,
    new_sink: impl Fn() -> S + Sync,
    count: impl Fn(&mut S, &StreamSide, Side, Range<u64>) -> Result<()> + Sync,
) -> Result<Vec<S>> {
    try_in_turn(
        parts,
        threads.min(parts.len()),
        new_sink,
        |sink, _, (input, side, rows)| count(sink, input, *side, rows.clone()),
    )
}

/// `auto`'s skew check over streamed inputs: a pass over the keys of each side; another where
/// the sample asks for an exact count ([`exact_pass`]: a key is common, or hot);
/// and when a key is hot, another until it is found (a hot key comes early), to name it. The
/// first pass keeps the key columns of each part it reads for the join's read of that part, up
/// to `kept_bytes` a side ([`memory::kept_keys_bytes`]).
///
/// [`exact_pass`]: skewjoin_planner::skew_check::TallyCounts::exact_pass
/// [`memory::kept_keys_bytes`]: crate::memory::kept_keys_bytes
pub(crate) fn streamed_skew(
    left: &StreamSide,
    right: &StreamSide,
    partitions: usize,
    workers: usize,
    costs: WorkCosts,
    kept_bytes: u64,
) -> Result<Option<SkewFinding>> {
    // Reading and hashing the keys is most of the check's time, so `workers` threads read at
    // once, each taking the largest part left: a side is cut where the join's workers cut it
    // (one part for a side that cannot be cut). With one thread a side, the larger side of
    // TPC-H's lineitem x orders (6M rows against 1.5M) kept one core busy alone.
    let threads = workers.max(1);
    let mut parts: Vec<(&StreamSide, Side, Range<u64>)> =
        [(left, Side::Left), (right, Side::Right)]
            .into_iter()
            .flat_map(|(input, side)| {
                split_at_cuts(&input.input.cuts(), input.input.rows, threads)
                    .into_iter()
                    .filter(|part| !part.is_empty())
                    .map(move |part| (input, side, part))
            })
            .collect();
    parts.sort_by_key(|(_, _, part)| std::cmp::Reverse(part.end - part.start));
    // Every tally samples alike (one row in 2^s past skew_check::SAMPLE_ROWS rows in all, chosen
    // by row number), so that merged they are one tally of both sides.
    let both = left.input.rows + right.input.rows;
    let tallies = on_parts(
        &parts,
        threads,
        || KeyTally::for_join(both, both / threads as u64),
        |tally, input, side, rows| {
            tally.continue_at(side, rows.start);
            // The join's workers read these parts next: the first read of each (its rows, or
            // its keys where the strategy counts them first) decodes only the columns not kept.
            tally_rows(input, side, rows, tally, kept_bytes)
        },
    )?;
    let mut tallies = tallies.into_iter();
    let mut tally = tallies.next().expect("at least one thread counts");
    for other in tallies {
        tally.merge(other);
    }
    // Counted on as many threads as the join will run.
    let counts = tally.counts(partitions, workers, costs, workers);
    let exact = match counts.exact_pass() {
        Some(pass) => {
            let passes = on_parts(
                &parts,
                threads,
                || pass.clone(),
                |pass, input, side, rows| tally_rows(input, side, rows, pass, 0),
            )?;
            passes.into_iter().reduce(|mut all, other| {
                all.merge(other);
                all
            })
        }
        None => None,
    };
    let Some(skew) = counts.skew(exact.as_ref()) else {
        return Ok(None);
    };
    let mut found = None;
    for input in [left, right] {
        visit_keys(input, |key| {
            if skew.is_of(key) {
                found = Some(skew.finding(key));
            }
            found.is_none()
        })?;
        if found.is_some() {
            break;
        }
    }
    Ok(found)
}

/// What a join's strategy is chosen from, whatever its inputs are (files or tables in memory).
pub(crate) struct PlanRequest<'a> {
    /// The strategy asked for.
    pub strategy: Strategy,
    /// The join type.
    pub how: JoinType,
    /// W.
    pub workers: usize,
    /// The row counts of the two sides.
    pub rows: (u64, u64),
    /// Whether the output rows are written (a pair then costs nearly what an input record
    /// does), not only counted.
    pub written: bool,
    /// VPRP's settings.
    pub run: &'a RunArgs,
    /// AM-Join's and Tree-Join's settings.
    pub tuning: &'a Tuning,
    /// `--broadcast-limit`.
    pub broadcast_limit: Option<u64>,
    /// `--memory-limit`.
    pub memory_limit: Option<u64>,
}

/// Chooses the strategy of a join (one rule for files and tables): the one asked for, or
/// `auto`'s choice from the sizes and the broadcast budget, and where that would shuffle, from
/// the keys' skew (`skew` looks at them, given the costs of the run; it is called only then),
/// tuned; then VPRP's settings (their flags checked before anything else). Returns the choice
/// and the budget it was made with.
pub(crate) fn choose_strategy(
    request: &PlanRequest,
    skew: impl FnOnce(WorkCosts) -> Result<Option<SkewFinding>>,
) -> Result<(Choice, BroadcastBudget)> {
    let budget = broadcast_budget(
        request.broadcast_limit,
        request.memory_limit,
        request.workers,
    );
    let costs = WorkCosts::of_run(1, request.written);
    let plan_inputs = PlanInputs {
        how: request.how,
        left_rows: request.rows.0,
        right_rows: request.rows.1,
        workers: request.workers,
        broadcast_limit: budget.rows,
        costs,
    };
    check_vprp_flags(request.run)?;
    let tuning = with_vprp_flags(request.tuning, request.run);
    let choice = resolve(request.strategy, &plan_inputs, &tuning, || {
        skew(costs).map(KeyCheck::counted)
    })?;
    Ok((choice, budget))
}

/// A key as text for the plan.
fn key_text(key: &Key) -> String {
    key.to_string()
}

/// What a plan is made of besides the inputs: the choice and the layout it runs with.
pub(crate) struct PlanFacts<'a> {
    pub choice: &'a Choice,
    pub how: JoinType,
    pub workers: usize,
    pub partitions: usize,
    pub budget: &'a BroadcastBudget,
}

/// The plan of a join of two loaded sides (each with its name for the plan): key statistics,
/// the `top` hottest keys and the predicted per-partition load; `measured` is left empty.
pub(crate) fn plan_of(
    facts: &PlanFacts,
    (left_name, left): (&str, &SideData),
    (right_name, right): (&str, &SideData),
    top: usize,
) -> Plan {
    let partitioning = Partitioning::new(facts.partitions, facts.workers);
    let stats = KeyStats::from_keys(&left.keys, &right.keys);
    let predicted = facts
        .choice
        .resolved
        .predict(facts.how, &left.keys, &right.keys, partitioning);
    let (left_distinct, right_distinct) = stats.distinct();
    let hot: Vec<HotKey> = stats
        .hottest(top)
        .into_iter()
        .map(|count| HotKey {
            key: key_text(&count.key),
            left: count.left,
            right: count.right,
            pairs: count.pairs(),
        })
        .collect();
    Plan {
        strategy: facts.choice.resolved.name().to_string(),
        reason: facts.choice.reason.clone(),
        how: facts.how.name().to_string(),
        workers: facts.workers,
        partitions: facts.partitions,
        left: SideSummary {
            path: left_name.to_string(),
            rows: stats.left_rows,
            distinct_keys: left_distinct,
            null_keys: stats.left_nulls,
            fits_broadcast: stats.left_rows <= facts.budget.rows,
        },
        right: SideSummary {
            path: right_name.to_string(),
            rows: stats.right_rows,
            distinct_keys: right_distinct,
            null_keys: stats.right_nulls,
            fits_broadcast: stats.right_rows <= facts.budget.rows,
        },
        broadcast_budget: facts.budget.clone(),
        hot_keys: hot,
        predicted_output_rows: predicted
            .as_ref()
            .map(|loads| loads.iter().map(|l| l.output_rows).sum()),
        predicted_input_imbalance: predicted
            .as_ref()
            .map(|loads| imbalance(loads.iter().map(|l| l.input_records))),
        predicted_output_imbalance: predicted
            .as_ref()
            .map(|loads| imbalance(loads.iter().map(|l| l.output_rows))),
        predicted,
        measured: None,
    }
}

pub(crate) fn metrics_for(
    choice: &Choice,
    how: JoinType,
    workers: usize,
    partitions: usize,
    rows: (u64, u64),
    read_seconds: f64,
    report: &engine::RunReport,
) -> Metrics {
    let broadcast_side = choice.resolved.copied_side().map(|side| side.to_string());
    Metrics::new(
        choice.resolved.name(),
        &choice.reason,
        broadcast_side,
        how.name(),
        workers,
        partitions,
        rows,
        read_seconds,
        report,
    )
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use arrow::array::{Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;
    use skewjoin_operators::hash::mix64;
    use skewjoin_planner::skew_check::{skew_reason, SAMPLE_ROWS};

    use super::*;
    use crate::io::FileFormat;

    /// Writes `keys` (NULL where `None`) as a Parquet file of one column, `key`, in row groups
    /// of 100,000 rows.
    fn write_keys(path: &Path, keys: &[Option<i64>]) {
        let schema = Arc::new(Schema::new(vec![Field::new("key", DataType::Int64, true)]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(Int64Array::from(keys.to_vec()))],
        )
        .unwrap();
        let properties = WriterProperties::builder()
            .set_max_row_group_row_count(Some(100_000))
            .build();
        let mut writer = ArrowWriter::try_new(
            std::fs::File::create(path).unwrap(),
            schema,
            Some(properties),
        )
        .unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
    }

    /// On inputs past `SAMPLE_ROWS`, which are sampled, the check of two files (read in parts
    /// on several threads, with the second pass over the keys where the sample asks for it)
    /// reaches the verdict of the check of the same keys in memory, to the record: no skew on
    /// uniform keys, and the same hot key, reason and excess where a key is hot on both sides,
    /// on one, or only in the output.
    #[test]
    fn the_streamed_check_of_sampled_files_is_the_check_of_their_keys() {
        const ROWS: u64 = 1_300_000;
        const { assert!(2 * ROWS > SAMPLE_ROWS, "the inputs are sampled") };
        let side = |salt: u64, hot: &dyn Fn(u64) -> Option<Option<i64>>| -> Vec<Option<i64>> {
            (0..ROWS)
                .map(|row| hot(row).unwrap_or(Some((mix64(row ^ salt) % ROWS) as i64)))
                .collect()
        };
        let none = |_: u64| None;
        let both = |row: u64| match row % 20 {
            0 => Some(Some(7)),
            1 => Some(None),
            _ => None,
        };
        let one = |row: u64| row.is_multiple_of(4).then_some(Some(7));
        // 3,000 rows a side: 9 million pairs, most of the output, yet a sliver of each input.
        let output_only = |row: u64| row.is_multiple_of(433).then_some(Some(7));
        type Hot<'a> = &'a dyn Fn(u64) -> Option<Option<i64>>;
        let cases: [(&str, Hot, Hot); 4] = [
            ("uniform", &none, &none),
            ("hot on both sides", &both, &both),
            ("hot on one side", &one, &none),
            ("hot in the output", &output_only, &output_only),
        ];
        let dir = tempfile::tempdir().unwrap();
        let keys = ["key".to_string()];
        for (name, left_hot, right_hot) in cases {
            let (left, right) = (side(1, left_hot), side(2, right_hot));
            let (left_path, right_path) =
                (dir.path().join("l.parquet"), dir.path().join("r.parquet"));
            write_keys(&left_path, &left);
            write_keys(&right_path, &right);
            let open = |path: &Path| StreamSide::open(path, FileFormat::Parquet, &keys).unwrap();
            let as_keys = |keys: &[Option<i64>]| -> Vec<Key> {
                keys.iter()
                    .map(|key| key.map_or(Key::Null, Key::Int))
                    .collect()
            };
            for (partitions, workers) in [(2, 2), (8, 3)] {
                let costs = WorkCosts::of_run(1, false);
                // Its exact pass counts the key columns its first pass kept.
                let streamed = streamed_skew(
                    &open(&left_path),
                    &open(&right_path),
                    partitions,
                    workers,
                    costs,
                    crate::memory::kept_keys_bytes(None),
                )
                .unwrap();
                let in_memory = skew_reason(
                    &as_keys(&left),
                    &as_keys(&right),
                    partitions,
                    workers,
                    costs,
                );
                let case = format!("{name}, P = {partitions}, W = {workers}");
                assert_eq!(streamed, in_memory, "{case}");
                assert_eq!(
                    streamed.is_some(),
                    name != "uniform",
                    "{case}: {streamed:?}"
                );
            }
        }
    }
}
