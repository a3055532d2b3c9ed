//! The `--metrics` JSON document and the human summary printed to stderr.

use serde::Serialize;
use skewjoin_operators::LoadFigures;

use skewjoin_planner::report::StrategyReport;

use crate::engine::RunReport;

/// Everything a run reports. Field names are stable: scripts read them.
#[derive(Clone, Debug, Serialize)]
pub struct Metrics {
    /// The strategy that ran (`auto` resolved).
    pub strategy: String,
    /// Why the planner chose it.
    pub strategy_reason: String,
    /// The side copied whole to every worker: Broadcast-Join's, and the small side of IB-Join,
    /// DER and DDR (`Resolved::copied_side`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broadcast_side: Option<String>,
    /// The join type.
    pub how: String,
    /// Worker threads (in a cluster, of every process together).
    pub workers: usize,
    /// In a cluster, the number of processes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processes: Option<usize>,
    /// Partitions.
    pub partitions: usize,
    /// Input rows on each side.
    pub left_rows: u64,
    /// Input rows on the right.
    pub right_rows: u64,
    /// Output rows.
    pub output_rows: u64,
    /// The output checksum as 16 hex digits (a JSON number would lose bits).
    pub checksum: String,
    /// Wall time of the join; with streamed inputs it includes reading them.
    pub elapsed_seconds: f64,
    /// Wall time of reading inputs before the join: the row counts and `auto`'s key pass when
    /// they stream, everything when they are loaded whole (`explain --analyze`, a cluster).
    pub read_seconds: f64,
    /// Per-partition load: `per_partition`, `records_received`, `copying_factor` and the
    /// max/mean figures.
    #[serde(flatten)]
    pub load: LoadFigures,
    /// What the strategy decided, where it applies: `am` (AM-Join and Tree-Join: hot key counts
    /// per class, records of each side per class, the grids of the hottest keys), `tree_rounds`
    /// (Tree-Join) and `ranges` (VPRP: boundaries, and each virtual range's partition, planned
    /// and actual weight).
    #[serde(flatten)]
    pub strategy_report: StrategyReport,
}

/// What metrics say for the checksum of a written output no one asked to see (see
/// [`OutputTarget::File`](crate::engine::OutputTarget::File)).
pub const NOT_COMPUTED: &str = "not computed";

/// Formats a checksum the way metrics and summaries show it.
pub fn checksum_hex(checksum: u64) -> String {
    format!("{checksum:016x}")
}

impl Metrics {
    /// The metrics of a finished run.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        strategy: &str,
        strategy_reason: &str,
        broadcast_side: Option<String>,
        how: &str,
        workers: usize,
        partitions: usize,
        rows: (u64, u64),
        read_seconds: f64,
        report: &RunReport,
    ) -> Metrics {
        Metrics {
            strategy: strategy.to_string(),
            strategy_reason: strategy_reason.to_string(),
            broadcast_side,
            how: how.to_string(),
            workers,
            processes: None,
            partitions,
            left_rows: rows.0,
            right_rows: rows.1,
            output_rows: report.output_rows,
            checksum: report
                .checksum
                .map_or_else(|| NOT_COMPUTED.to_string(), checksum_hex),
            elapsed_seconds: report.elapsed.as_secs_f64(),
            read_seconds,
            load: report.loads.figures(rows.0 + rows.1),
            strategy_report: report.strategy_report.clone(),
        }
    }

    /// The one-paragraph summary for stderr.
    pub fn summary(&self) -> String {
        let rate = if self.elapsed_seconds > 0.0 {
            self.output_rows as f64 / self.elapsed_seconds
        } else {
            0.0
        };
        format!(
            "{how} join, {strategy} strategy ({reason}), {workers} workers, {partitions} partitions\n\
             {left} x {right} input rows -> {rows} output rows, checksum {checksum}\n\
             join {elapsed:.3}s ({rate:.3e} rows/s), reading {read:.3}s\n\
             max/mean per partition: input {input:.2}, output {output:.2}, peak held {peak:.2}\n\
             records received {received} ({copying:.2}x the input rows)",
            how = self.how,
            strategy = self.strategy,
            reason = self.strategy_reason,
            workers = self.workers,
            partitions = self.partitions,
            left = self.left_rows,
            right = self.right_rows,
            rows = self.output_rows,
            checksum = self.checksum,
            elapsed = self.elapsed_seconds,
            read = self.read_seconds,
            input = self.load.input_imbalance,
            output = self.load.output_imbalance,
            peak = self.load.peak_imbalance,
            received = self.load.records_received,
            copying = self.load.copying_factor,
        ) + &self.strategy_lines()
    }

    /// The summary lines of what the strategy decided.
    pub fn strategy_lines(&self) -> String {
        let report = &self.strategy_report;
        let mut lines = String::new();
        if let Some(am) = &report.am {
            lines += &format!(
                "\nAM-Join hot keys: {} left only, {} right only, {} both ({} of them moved there by the broadcast budget)",
                am.hot_left_only, am.hot_right_only, am.hot_both, am.moved_to_grid
            );
            for grid in &am.largest_grids {
                lines += &format!(
                    "\n  key {}: {} x {} records -> {} x {} cells on partitions {:?}",
                    grid.key, grid.left, grid.right, grid.rows, grid.cols, grid.partitions
                );
            }
        }
        if let Some(rounds) = report.tree_rounds {
            lines += &format!("\nTree-Join rounds: {rounds}");
        }
        if let Some(ranges) = &report.ranges {
            let actual = ranges.virtual_ranges.iter().map(|r| r.actual_records);
            lines += &format!(
                "\nVPRP ranges: {} virtual ranges in {} key runs; records per virtual range max/mean {:.2}",
                ranges.virtual_ranges.len(),
                ranges.virtual_of_run.len(),
                skewjoin_operators::load::imbalance(actual),
            );
        }
        lines
    }
}
