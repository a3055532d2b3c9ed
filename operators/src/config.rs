//! Settings shared by the join operators.

use crate::load::LoadRecorder;
use crate::partition::Partitioning;

/// How a join operator partitions its work and where it counts load.
///
/// ```
/// use skewjoin_operators::{JoinConfig, LoadRecorder};
///
/// let loads = LoadRecorder::new();
/// let config = JoinConfig::new().with_partitions(32).with_loads(loads.clone());
/// assert_eq!(config.partitioning(2).partitions(), 32);
/// ```
#[derive(Clone, Debug, Default)]
pub struct JoinConfig {
    /// The number of partitions P; `None` means one per worker.
    pub partitions: Option<usize>,
    /// Where the operator counts per-partition load; keep a clone to read it afterwards.
    pub loads: LoadRecorder,
}

impl JoinConfig {
    /// One partition per worker, counting into a fresh recorder.
    pub fn new() -> JoinConfig {
        JoinConfig::default()
    }

    /// Uses `partitions` partitions.
    pub fn with_partitions(mut self, partitions: usize) -> JoinConfig {
        self.partitions = Some(partitions);
        self
    }

    /// Counts load into `loads`.
    pub fn with_loads(mut self, loads: LoadRecorder) -> JoinConfig {
        self.loads = loads;
        self
    }

    /// The partitioning for a computation with `workers` workers.
    pub fn partitioning(&self, workers: usize) -> Partitioning {
        Partitioning::new(self.partitions.unwrap_or(workers), workers)
    }
}
