//! Per-partition load counters: input records received, output rows produced, peak records held.
//!
//! Load is the figure of merit of every strategy: the max over partitions divided by the mean
//! (1.0 is perfect balance). Operators count into a [`LoadRecorder`] shared by all operators of
//! one worker, so a plan made of several joins reports the total load of each partition.

use std::cell::RefCell;
use std::rc::Rc;

use serde::{Deserialize, Serialize};

/// What one partition did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionLoad {
    /// Records received by this partition (a broadcast copy counts once for every partition).
    pub input_records: u64,
    /// Output rows this partition produced (pairs and padded or semi/anti rows).
    pub output_rows: u64,
    /// The most input records this partition held at once.
    pub peak_records: u64,
    /// Records and bytes moved by a broadcast and by unmatched-row tracking (IB-Join family).
    #[serde(default)]
    pub traffic: TrafficCounters,
}

/// What one partition received by broadcast and sent for unmatched-row tracking.
///
/// Bytes are estimates: a broadcast row counts `size_of::<(K, V)>()` (its in-memory size, the
/// same for every strategy), a tracking message counts its payload (bitset words, id lists or
/// padded rows) plus a fixed header, so strategies compare on what they would put on a wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrafficCounters {
    /// Broadcast records this partition received.
    pub broadcast_records: u64,
    /// Their bytes.
    pub broadcast_bytes: u64,
    /// Tracking messages (IB-Join, DER, DDR) this partition sent.
    pub tracking_records: u64,
    /// Their bytes.
    pub tracking_bytes: u64,
}

impl TrafficCounters {
    /// Adds `other` to these counts.
    pub fn add(&mut self, other: &TrafficCounters) {
        self.broadcast_records += other.broadcast_records;
        self.broadcast_bytes += other.broadcast_bytes;
        self.tracking_records += other.tracking_records;
        self.tracking_bytes += other.tracking_bytes;
    }
}

#[derive(Debug, Default)]
struct LoadState {
    loads: Vec<PartitionLoad>,
    held: Vec<u64>,
    touched: Vec<bool>,
}

impl LoadState {
    fn grow(&mut self, partition: u32) -> usize {
        let index = partition as usize;
        if index >= self.loads.len() {
            self.loads.resize(index + 1, PartitionLoad::default());
            self.held.resize(index + 1, 0);
            self.touched.resize(index + 1, false);
        }
        self.touched[index] = true;
        index
    }
}

/// One worker's counters, cheap to clone into every operator of that worker.
#[derive(Clone, Debug, Default)]
pub struct LoadRecorder {
    state: Rc<RefCell<LoadState>>,
}

impl LoadRecorder {
    /// A recorder with no counts.
    pub fn new() -> LoadRecorder {
        LoadRecorder::default()
    }

    /// `partition` received `records` records and now holds them.
    pub fn receive(&self, partition: u32, records: u64) {
        let mut state = self.state.borrow_mut();
        let index = state.grow(partition);
        state.loads[index].input_records += records;
        state.held[index] += records;
        let held = state.held[index];
        let peak = &mut state.loads[index].peak_records;
        *peak = (*peak).max(held);
    }

    /// `partition` took `records` more records into memory without receiving them (for example
    /// state an operator derived from its input).
    pub fn hold(&self, partition: u32, records: u64) {
        let mut state = self.state.borrow_mut();
        let index = state.grow(partition);
        state.held[index] += records;
        let held = state.held[index];
        let peak = &mut state.loads[index].peak_records;
        *peak = (*peak).max(held);
    }

    /// `partition` released `records` records it held.
    pub fn release(&self, partition: u32, records: u64) {
        let mut state = self.state.borrow_mut();
        let index = state.grow(partition);
        state.held[index] = state.held[index].saturating_sub(records);
    }

    /// `partition` produced `rows` output rows.
    pub fn output(&self, partition: u32, rows: u64) {
        let mut state = self.state.borrow_mut();
        let index = state.grow(partition);
        state.loads[index].output_rows += rows;
    }

    /// `partition` received `records` broadcast records of `bytes` bytes.
    pub fn broadcast(&self, partition: u32, records: u64, bytes: u64) {
        let mut state = self.state.borrow_mut();
        let index = state.grow(partition);
        state.loads[index].traffic.broadcast_records += records;
        state.loads[index].traffic.broadcast_bytes += bytes;
    }

    /// `partition` sent `records` tracking messages of `bytes` bytes.
    pub fn tracking(&self, partition: u32, records: u64, bytes: u64) {
        let mut state = self.state.borrow_mut();
        let index = state.grow(partition);
        state.loads[index].traffic.tracking_records += records;
        state.loads[index].traffic.tracking_bytes += bytes;
    }

    /// Marks `partition` as hosted here, so it is reported even with zero load.
    pub fn register(&self, partition: u32) {
        self.state.borrow_mut().grow(partition);
    }

    /// The counts of every partition this worker touched, as `(partition, load)`.
    pub fn snapshot(&self) -> Vec<(u32, PartitionLoad)> {
        let state = self.state.borrow();
        state
            .loads
            .iter()
            .enumerate()
            .filter(|(index, _)| state.touched[*index])
            .map(|(index, load)| (index as u32, *load))
            .collect()
    }
}

/// The loads of all P partitions, merged from every worker's [`LoadRecorder`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    /// Indexed by partition.
    pub per_partition: Vec<PartitionLoad>,
}

impl LoadReport {
    /// An all-zero report for `partitions` partitions.
    pub fn new(partitions: usize) -> LoadReport {
        LoadReport {
            per_partition: vec![PartitionLoad::default(); partitions],
        }
    }

    /// Adds one worker's snapshot.
    pub fn add(&mut self, snapshot: &[(u32, PartitionLoad)]) {
        for (partition, load) in snapshot {
            let index = *partition as usize;
            if index >= self.per_partition.len() {
                self.per_partition
                    .resize(index + 1, PartitionLoad::default());
            }
            let entry = &mut self.per_partition[index];
            entry.input_records += load.input_records;
            entry.output_rows += load.output_rows;
            entry.peak_records = entry.peak_records.max(load.peak_records);
            entry.traffic.add(&load.traffic);
        }
    }

    /// Broadcast and tracking traffic summed over all partitions.
    pub fn total_traffic(&self) -> TrafficCounters {
        let mut total = TrafficCounters::default();
        for load in &self.per_partition {
            total.add(&load.traffic);
        }
        total
    }

    /// Total input records over all partitions.
    pub fn total_input(&self) -> u64 {
        self.per_partition.iter().map(|l| l.input_records).sum()
    }

    /// Total output rows over all partitions.
    pub fn total_output(&self) -> u64 {
        self.per_partition.iter().map(|l| l.output_rows).sum()
    }

    /// Records received over the join's input rows: 1.0 where every record went to one
    /// partition (a shuffle), more where a strategy copies records (a broadcast sends the
    /// small side to every partition). The max/mean figures do not show copying: a broadcast
    /// spreads its copies evenly. 1.0 when there is no input.
    pub fn copying_factor(&self, input_rows: u64) -> f64 {
        if input_rows == 0 {
            return 1.0;
        }
        self.total_input() as f64 / input_rows as f64
    }

    /// Max over mean of input records received.
    pub fn input_imbalance(&self) -> f64 {
        imbalance(self.per_partition.iter().map(|l| l.input_records))
    }

    /// Max over mean of output rows produced.
    pub fn output_imbalance(&self) -> f64 {
        imbalance(self.per_partition.iter().map(|l| l.output_rows))
    }

    /// Max over mean of peak records held.
    pub fn peak_imbalance(&self) -> f64 {
        imbalance(self.per_partition.iter().map(|l| l.peak_records))
    }

    /// The figures a run reports of these loads, for a join of `input_rows` rows in all.
    pub fn figures(&self, input_rows: u64) -> LoadFigures {
        LoadFigures {
            per_partition: self.per_partition.clone(),
            records_received: self.total_input(),
            copying_factor: self.copying_factor(input_rows),
            input_imbalance: self.input_imbalance(),
            output_imbalance: self.output_imbalance(),
            peak_imbalance: self.peak_imbalance(),
        }
    }
}

/// What a run reports of its per-partition load, under the names `skewjoin join --metrics` and
/// the browser build both use.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadFigures {
    /// Per partition: input records received, output rows produced, peak records held.
    pub per_partition: Vec<PartitionLoad>,
    /// Input records received over all partitions: the input rows, and every copy a strategy
    /// made of them.
    pub records_received: u64,
    /// `records_received` over the input rows (1.00 for a shuffle; a broadcast of the small
    /// side to P partitions adds P - 1 times that side's rows).
    pub copying_factor: f64,
    /// Max over mean of input records received.
    pub input_imbalance: f64,
    /// Max over mean of output rows produced.
    pub output_imbalance: f64,
    /// Max over mean of peak records held.
    pub peak_imbalance: f64,
}

/// Max over mean; 1.0 when everything is zero (nothing to balance).
pub fn imbalance(values: impl Iterator<Item = u64> + Clone) -> f64 {
    let count = values.clone().count();
    let total: u128 = values.clone().map(|v| v as u128).sum();
    let max = values.max().unwrap_or(0);
    if count == 0 || total == 0 {
        return 1.0;
    }
    max as f64 * count as f64 / total as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_tracks_the_high_water_mark() {
        let recorder = LoadRecorder::new();
        recorder.receive(3, 10);
        recorder.release(3, 10);
        recorder.receive(3, 4);
        recorder.output(3, 7);
        let snapshot = recorder.snapshot();
        assert_eq!(
            snapshot,
            vec![(
                3,
                PartitionLoad {
                    input_records: 14,
                    output_rows: 7,
                    peak_records: 10,
                    traffic: TrafficCounters::default(),
                }
            )]
        );
        let mut report = LoadReport::new(4);
        report.add(&snapshot);
        assert_eq!(report.total_input(), 14);
        assert!((report.input_imbalance() - 4.0).abs() < 1e-9);
        assert!((report.copying_factor(7) - 2.0).abs() < 1e-9);
        assert_eq!(LoadReport::new(2).copying_factor(0), 1.0);
    }

    #[test]
    fn imbalance_of_nothing_is_one() {
        assert_eq!(imbalance([0u64, 0].into_iter()), 1.0);
        assert_eq!(imbalance([2u64, 2].into_iter()), 1.0);
        assert_eq!(imbalance([3u64, 1].into_iter()), 1.5);
    }
}
