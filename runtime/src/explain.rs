//! The plan `skewjoin explain` prints: the chosen strategy and why, the inputs' key statistics,
//! the hottest keys, and the predicted per-partition load, beside the measured load with
//! `--analyze`.

use std::fmt::Write;

use serde::Serialize;
use skewjoin_operators::PartitionLoad;

use crate::memory::BroadcastBudget;
use crate::metrics::Metrics;

/// One input, summarised.
#[derive(Clone, Debug, Serialize)]
pub struct SideSummary {
    /// The file.
    pub path: String,
    /// Rows.
    pub rows: u64,
    /// Distinct non-NULL keys.
    pub distinct_keys: u64,
    /// Rows with a NULL key.
    pub null_keys: u64,
    /// Whether its row count is within the broadcast budget.
    pub fits_broadcast: bool,
}

/// A key that produces much output.
#[derive(Clone, Debug, Serialize)]
pub struct HotKey {
    /// The key as text.
    pub key: String,
    /// Its rows on the left.
    pub left: u64,
    /// Its rows on the right.
    pub right: u64,
    /// left x right.
    pub pairs: u128,
}

/// The whole plan; the `--json` document.
#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    /// The strategy that runs.
    pub strategy: String,
    /// Why.
    pub reason: String,
    /// The join type.
    pub how: String,
    /// W.
    pub workers: usize,
    /// P.
    pub partitions: usize,
    /// The left input.
    pub left: SideSummary,
    /// The right input.
    pub right: SideSummary,
    /// The most rows `auto` and AM-Join copy to every worker, and where that figure came from.
    pub broadcast_budget: BroadcastBudget,
    /// The keys producing the most output, most first.
    pub hot_keys: Vec<HotKey>,
    /// Predicted output rows (absent for strategies the cost model does not cover).
    pub predicted_output_rows: Option<u64>,
    /// Predicted max/mean of input records per partition.
    pub predicted_input_imbalance: Option<f64>,
    /// Predicted max/mean of output rows per partition.
    pub predicted_output_imbalance: Option<f64>,
    /// Predicted load per partition.
    pub predicted: Option<Vec<PartitionLoad>>,
    /// With `--analyze`: what the run measured.
    pub measured: Option<Metrics>,
}

impl Plan {
    /// The plan as text for a terminal.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "strategy: {} ({})", self.strategy, self.reason);
        let _ = writeln!(
            out,
            "join: {} on {} workers, {} partitions",
            self.how, self.workers, self.partitions
        );
        for (name, side) in [("left", &self.left), ("right", &self.right)] {
            let _ = writeln!(
                out,
                "{name}:  {} - {} rows, {} distinct keys, {} NULL keys, {} the broadcast budget",
                side.path,
                side.rows,
                side.distinct_keys,
                side.null_keys,
                if side.fits_broadcast {
                    "within"
                } else {
                    "over"
                }
            );
        }
        let _ = writeln!(
            out,
            "broadcast budget: {} rows ({})",
            self.broadcast_budget.rows, self.broadcast_budget.source
        );
        if !self.hot_keys.is_empty() {
            let _ = writeln!(out, "\nhottest keys (by output pairs):");
            let _ = writeln!(
                out,
                "  {:<24} {:>10} {:>10} {:>16}",
                "key", "left", "right", "pairs"
            );
            for key in &self.hot_keys {
                let _ = writeln!(
                    out,
                    "  {:<24} {:>10} {:>10} {:>16}",
                    key.key, key.left, key.right, key.pairs
                );
            }
        }
        match &self.predicted {
            None => {
                let _ = writeln!(
                    out,
                    "\nno load prediction for the {} strategy yet",
                    self.strategy
                );
            }
            Some(predicted) => {
                let measured = self.measured.as_ref().map(|m| &m.load.per_partition);
                let _ = writeln!(
                    out,
                    "\nper-partition load (predicted{}):",
                    if measured.is_some() {
                        " | measured"
                    } else {
                        ""
                    }
                );
                let _ = write!(out, "  {:>9} {:>12} {:>14}", "partition", "input", "output");
                if measured.is_some() {
                    let _ = write!(out, " | {:>12} {:>14} {:>12}", "input", "output", "peak");
                }
                let _ = writeln!(out);
                for (index, load) in predicted.iter().enumerate() {
                    let _ = write!(
                        out,
                        "  {:>9} {:>12} {:>14}",
                        index, load.input_records, load.output_rows
                    );
                    if let Some(real) = measured.and_then(|m| m.get(index)) {
                        let _ = write!(
                            out,
                            " | {:>12} {:>14} {:>12}",
                            real.input_records, real.output_rows, real.peak_records
                        );
                    }
                    let _ = writeln!(out);
                }
                let _ = write!(
                    out,
                    "  {:>9} {:>12.2} {:>14.2}",
                    "max/mean",
                    self.predicted_input_imbalance.unwrap_or(1.0),
                    self.predicted_output_imbalance.unwrap_or(1.0)
                );
                if let Some(m) = &self.measured {
                    let _ = write!(
                        out,
                        " | {:>12.2} {:>14.2} {:>12.2}",
                        m.load.input_imbalance, m.load.output_imbalance, m.load.peak_imbalance
                    );
                }
                let _ = writeln!(out);
                if let Some(rows) = self.predicted_output_rows {
                    let _ = writeln!(out, "\npredicted output rows: {rows}");
                }
            }
        }
        if let Some(m) = &self.measured {
            let _ = writeln!(
                out,
                "measured: {} output rows, checksum {}, join {:.3}s, {} records received ({:.2}x the input rows){}",
                m.output_rows,
                m.checksum,
                m.elapsed_seconds,
                m.load.records_received,
                m.load.copying_factor,
                m.strategy_lines()
            );
        }
        out
    }
}
