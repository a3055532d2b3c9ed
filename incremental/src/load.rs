//! Per-worker load of the incremental join, reported as the batch strategies report theirs.

use std::cell::RefCell;
use std::rc::Rc;

/// One worker's figures so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkerLoad {
    /// Records this worker's arrangements hold now, counted with their multiplicity: those
    /// arranged by `(key, salt)` to be routed, and those in its cells (left and right). The
    /// key counts (one per key) are not included.
    pub held: i64,
    /// The most `held` has been, counted as updates arrive (an insertion that arrives before
    /// the retraction it cancels counts until the retraction arrives, as the arrangement's
    /// batcher holds both until their time is complete).
    pub peak_held: i64,
    /// Updates that arrived in those arrangements (each a record inserted or retracted, by
    /// salt or in a cell): the join's input work.
    pub updates: u64,
    /// Output updates this worker's cells produced: the join's output work.
    pub output_updates: u64,
    /// Hot keys whose plan this worker decides that have a grid now.
    pub hot_keys: u64,
    /// Times a key's plan changed here (hot, cold or a new grid), each moving the key's records.
    pub replans: u64,
}

/// A handle on one worker's [`WorkerLoad`], shared between the join's operators and the
/// program that reads it. Each worker makes its own; gather them as the program sees fit.
#[derive(Clone, Debug, Default)]
pub struct LoadMeter(Rc<RefCell<WorkerLoad>>);

impl LoadMeter {
    /// A meter at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// The figures so far.
    pub fn get(&self) -> WorkerLoad {
        *self.0.borrow()
    }

    pub(crate) fn update(&self, change: impl FnOnce(&mut WorkerLoad)) {
        let mut load = self.0.borrow_mut();
        change(&mut load);
        load.peak_held = load.peak_held.max(load.held);
    }
}

/// `max / mean` of `values`: 1.0 is perfect balance; 1.0 for all zeros.
pub fn max_over_mean(values: impl IntoIterator<Item = f64>) -> f64 {
    let values: Vec<f64> = values.into_iter().collect();
    let max = values.iter().cloned().fold(0.0, f64::max);
    let mean = values.iter().sum::<f64>() / values.len().max(1) as f64;
    if mean > 0.0 {
        max / mean
    } else {
        1.0
    }
}
