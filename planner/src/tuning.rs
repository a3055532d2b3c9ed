//! What a user may set of a strategy's parameters: each strategy applies what concerns it
//! ([`JoinStrategy::tuned`](crate::strategies::JoinStrategy::tuned)), once, after the choice
//! ([`crate::choose::resolve`]; the command line passes its VPRP flags in the same tuning).

use crate::am_join::params::Statistics;

/// Overrides of AM-Join's, Tree-Join's and VPRP's settings (`None`: keep the default), as the
/// command line gives them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tuning {
    /// AM-Join's hot threshold, in thousandths of a partition's share of a side.
    pub hot_per_mille: Option<u32>,
    /// AM-Join's broadcast budget, in thousandths of a partition's share of the input.
    pub broadcast_per_mille: Option<u32>,
    /// Tree-Join's leaf size c.
    pub leaf: Option<u32>,
    /// Tree-Join's fan-out f.
    pub fanout: Option<u32>,
    /// How AM-Join counts keys.
    pub statistics: Option<Statistics>,
    /// VPRP's virtual ranges per partition (the paper's alpha).
    pub virtual_per_partition: Option<u32>,
    /// VPRP's sampled fraction of the records, in millionths.
    pub sample_per_million: Option<u32>,
}
