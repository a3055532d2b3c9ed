//! What a run reports beyond its output rows and per-partition load: the decisions a strategy
//! made while it ran (AM-Join's key classes, Tree-Join's rounds, VPRP's range table with the
//! planned and actual weight of every virtual range), gathered from every worker into one
//! [`StrategyReport`] for the metrics JSON, `explain --analyze` and the browser demo.

use serde::{Deserialize, Serialize};
use skewjoin_operators::range_pact::{RangeObservation, RangeObserver};
use skewjoin_operators::tree_join::TreeRounds;
use skewjoin_operators::{JoinKey, LoadRecorder};

use crate::am_join::plan::AmSummary;

/// The handles a join's operators fill while it runs, one set per worker.
#[derive(Clone, Debug)]
pub struct Observers<K> {
    /// Per-partition input, output and peak.
    pub loads: LoadRecorder,
    /// Tree-Join's rounds.
    pub rounds: TreeRounds,
    /// VPRP's table and the records routed to each virtual range.
    pub ranges: RangeObserver<K>,
}

impl<K> Default for Observers<K> {
    fn default() -> Self {
        Observers {
            loads: LoadRecorder::new(),
            rounds: TreeRounds::new(),
            ranges: RangeObserver::new(),
        }
    }
}

impl<K: JoinKey> Observers<K> {
    /// Fresh handles.
    pub fn new() -> Observers<K> {
        Observers::default()
    }

    /// What this worker saw of the strategy's decisions: the parts `reports` names (see
    /// [`JoinStrategy::reports`](crate::strategies::JoinStrategy::reports)) and `am`, the plan's
    /// summary, if any.
    pub fn report(&self, reports: Reports, am: Option<AmSummary>) -> StrategyReport {
        StrategyReport {
            am,
            tree_rounds: reports.tree_rounds.then(|| self.rounds.get()),
            ranges: reports
                .ranges
                .then(|| RangeReport::from_observation(self.ranges.observation())),
        }
    }
}

/// The parts of a [`StrategyReport`] a strategy fills besides AM-Join's summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reports {
    /// Tree-Join's rounds.
    pub tree_rounds: bool,
    /// VPRP's range table.
    pub ranges: bool,
}

/// A strategy's decisions, for the whole run. Absent parts do not apply to the strategy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StrategyReport {
    /// AM-Join and Tree-Join: hot key counts per class, records per class, the largest grids.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub am: Option<AmSummary>,
    /// Tree-Join: the rounds of its loop (1 when every entry was a leaf from the start).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tree_rounds: Option<u32>,
    /// VPRP and VPRP-T: the range table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ranges: Option<RangeReport>,
}

impl StrategyReport {
    /// Adds another worker's report: the plan is the same on every worker, rounds are the most
    /// any worker ran, and the records routed to each virtual range add up.
    pub fn merge(&mut self, other: StrategyReport) {
        self.am = self.am.take().or(other.am);
        self.tree_rounds = match (self.tree_rounds, other.tree_rounds) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        match (&mut self.ranges, other.ranges) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            (mine @ None, theirs) => *mine = theirs,
            (Some(_), None) => {}
        }
    }
}

/// VPRP's routing table: the key runs and, per virtual range, its partition and its planned and
/// actual weight.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RangeReport {
    /// The first key of every run of keys but the first (keys printed as the join shows them),
    /// in increasing order: run `i` holds the keys from `boundaries[i-1]` up to `boundaries[i]`.
    pub boundaries: Vec<String>,
    /// The virtual range of each run (one more entry than `boundaries`).
    pub virtual_of_run: Vec<u32>,
    /// The virtual ranges, in order.
    pub virtual_ranges: Vec<VirtualRange>,
}

/// One virtual range of a [`RangeReport`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VirtualRange {
    /// The partition it is mapped to.
    pub partition: u32,
    /// Its weight in the samples (sampled records of both sides), what the cut balanced.
    pub planned_weight: u64,
    /// The records of both sides (NULL keys aside) actually routed to it.
    pub actual_records: u64,
}

impl RangeReport {
    fn from_observation<K: JoinKey>(seen: RangeObservation<K>) -> RangeReport {
        let Some(table) = seen.table else {
            return RangeReport::default();
        };
        RangeReport {
            boundaries: table.boundaries.iter().map(|k| format!("{k:?}")).collect(),
            virtual_of_run: table.virtual_of_run.clone(),
            virtual_ranges: table
                .partition_of_virtual
                .iter()
                .enumerate()
                .map(|(range, &partition)| VirtualRange {
                    partition,
                    planned_weight: table.planned.get(range).copied().unwrap_or(0),
                    actual_records: seen.routed.get(range).copied().unwrap_or(0),
                })
                .collect(),
        }
    }

    fn merge(&mut self, other: RangeReport) {
        if self.virtual_ranges.is_empty() {
            *self = other;
            return;
        }
        for (mine, theirs) in self.virtual_ranges.iter_mut().zip(other.virtual_ranges) {
            mine.actual_records += theirs.actual_records;
        }
    }

    /// Each virtual range's share of the planned weight times the records actually routed: what
    /// the sample predicted each range would receive.
    pub fn planned_records(&self) -> Vec<f64> {
        let planned: u64 = self.virtual_ranges.iter().map(|r| r.planned_weight).sum();
        let actual: u64 = self.virtual_ranges.iter().map(|r| r.actual_records).sum();
        self.virtual_ranges
            .iter()
            .map(|r| {
                if planned == 0 {
                    0.0
                } else {
                    r.planned_weight as f64 * actual as f64 / planned as f64
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use skewjoin_operators::tree_join::TreeParams;
    use skewjoin_operators::JoinType;

    use super::*;
    use crate::count_sink::CountSink;
    use crate::exec::{execute, JoinJob};
    use crate::exec_local::execute_local;
    use crate::strategies::{Shuffle, TreeBasic, Vprp};
    use crate::strategy::{Resolved, VprpSettings};

    fn job(left: Vec<i64>, right: Vec<i64>, resolved: Resolved, workers: usize) -> JoinJob<i64> {
        JoinJob {
            left: left.into(),
            right: right.into(),
            left_hashes: Arc::new([]),
            right_hashes: Arc::new([]),
            how: JoinType::Inner,
            resolved,
            partitions: 4,
            workers,
        }
    }

    #[test]
    fn vprp_reports_its_table_and_every_routed_record() {
        let left: Vec<i64> = (0..3000).map(|i| (i * i) % 977).collect();
        let right: Vec<i64> = (0..2000).map(|i| (i * 7) % 1200).collect();
        let resolved = Resolved::Vprp(Vprp(VprpSettings::default().with_sample_fraction(0.2)));
        for workers in [1, 3] {
            let output = execute(job(left.clone(), right.clone(), resolved, workers), |_| {
                CountSink::default()
            })
            .unwrap();
            let ranges = output.report.ranges.expect("VPRP reports its ranges");
            // alpha = 2 virtual ranges per partition, mapped round-robin.
            assert_eq!(ranges.virtual_ranges.len(), 8);
            for (index, range) in ranges.virtual_ranges.iter().enumerate() {
                assert_eq!(range.partition as usize, index % 4);
            }
            assert_eq!(ranges.virtual_of_run.len(), ranges.boundaries.len() + 1);
            let routed: u64 = ranges.virtual_ranges.iter().map(|r| r.actual_records).sum();
            assert_eq!(routed, 5000, "W = {workers}: every record is routed once");
            // What each partition received is what its virtual ranges were sent.
            for partition in 0..4u32 {
                let sent: u64 = ranges
                    .virtual_ranges
                    .iter()
                    .filter(|r| r.partition == partition)
                    .map(|r| r.actual_records)
                    .sum();
                assert_eq!(
                    sent,
                    output.loads.per_partition[partition as usize].input_records
                );
            }
            assert!(output.report.tree_rounds.is_none() && output.report.am.is_none());
        }
    }

    #[test]
    fn tree_join_reports_its_rounds() {
        // One key with 64 records a side: leaves of 4, fan-out 4 take 1 + log_4(64 / 4) = 3 rounds.
        let tree = TreeParams { leaf: 4, fanout: 4 };
        let resolved = Resolved::TreeBasic(TreeBasic { tree });
        let keys = vec![7i64; 64];
        for workers in [1, 2] {
            let output = execute(job(keys.clone(), keys.clone(), resolved, workers), |_| {
                CountSink::default()
            })
            .unwrap();
            assert_eq!(output.report.tree_rounds, Some(tree.rounds_for(64)));
            assert_eq!(output.report.tree_rounds, Some(3));
        }
        let local = execute_local(&job(keys.clone(), keys, resolved, 1), CountSink::default());
        assert_eq!(local.unwrap().report.tree_rounds, Some(3));
    }

    #[test]
    fn strategies_without_decisions_report_nothing() {
        let output = execute(
            job(vec![1, 2], vec![2], Resolved::Shuffle(Shuffle), 2),
            |_| CountSink::default(),
        )
        .unwrap();
        assert_eq!(output.report, StrategyReport::default());
        assert_eq!(
            serde_json::to_string(&output.report).unwrap(),
            "{}",
            "nothing is written for what does not apply"
        );
    }
}
