//! VPRP and its ablation VPRP-T: both sides sampled, the key space cut into virtual ranges of
//! equal sampled weight mapped to partitions, every record routed by its key's range through the
//! range pact (the range planning is [`crate::vprp`]'s).

use serde::{Deserialize, Serialize};
use skewjoin_operators::partitioned_join::partitioned_join;
use skewjoin_operators::range_pact::{plan_tables, route_by_ranges, RangeObserver};
use skewjoin_operators::route::Routed;
use skewjoin_operators::sample::{sample_summaries, SampleConfig};
use skewjoin_operators::{JoinKey, JoinType, Partitioning, Side};
use timely::dataflow::operators::vec::Broadcast;
use timely::dataflow::StreamVec;
use timely::progress::Timestamp;
use timely::ExchangeData;

use super::kind::{join_dataflow, JoinStrategy};
use crate::report::Reports;
use crate::sizes::PlanInputs;
use crate::tuning::Tuning;
use crate::vprp::{plan_ranges, RangeParams, DEFAULT_THETA};

/// VPRP: ranges cut separately over join data and noise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vprp(pub VprpSettings);

/// VPRP-T: ranges cut over all sampled keys (the paper's ablation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VprpT(pub VprpSettings);

/// What VPRP and VPRP-T share; they differ in whether the noise is cut apart.
macro_rules! vprp {
    ($strategy:ident, separate_noise: $separate:literal, name: $name:literal, $(alias: $alias:literal,)? about: $about:literal, sketch: $sketch:literal) => {
        impl JoinStrategy for $strategy {
            const NAME: &'static str = $name;
            $(const ALIASES: &'static [&'static str] = &[$alias];)?
            const ABOUT: &'static str = $about;
            const SKETCH: &'static str = $sketch;

            fn choose(_inputs: &PlanInputs) -> Option<(Self, String)> {
                Some(($strategy(VprpSettings::default()), "asked for".into()))
            }

            fn tuned(self, tuning: &Tuning) -> Self {
                $strategy(self.0.tuned(tuning))
            }

            fn spreads_nulls_locally(&self) -> bool {
                true
            }

            fn reports(&self) -> Reports {
                Reports {
                    ranges: true,
                    ..Reports::default()
                }
            }

            join_dataflow!(|self, left, right, setup, logic| {
                let (left, right) = vprp_route(
                    left,
                    right,
                    self.0,
                    $separate,
                    setup.how,
                    setup.partitioning,
                    &setup.observers.ranges,
                );
                partitioned_join(
                    left,
                    right,
                    setup.how,
                    setup.partitioning,
                    setup.observers.loads.clone(),
                    logic,
                )
            });
        }
    };
}

vprp!(
    Vprp,
    separate_noise: true,
    name: "vprp",
    about: "VPRP: samples the keys, cuts the key space into 2P virtual ranges of equal sampled \
        weight and maps them to partitions. It never splits a key: a key heavier than a \
        partition's share stays on one.",
    sketch: "sample ──▶ cut key ranges of equal weight\nrecord ──range(key)──▶ its range's partition"
);
vprp!(
    VprpT,
    separate_noise: false,
    name: "vprp-t",
    alias: "vprpt",
    about: "VPRP-T: VPRP with its ranges cut over all sampled keys at once, rows without \
        partners included (VPRP cuts join data and noise separately).",
    sketch: "sample (all keys) ──▶ cut key ranges\nrecord ──range(key)──▶ its range's partition"
);

/// The choices of a VPRP run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VprpSettings {
    /// Virtual ranges per partition (the paper's alpha).
    pub virtual_per_partition: u32,
    /// The sampled fraction of records, in millionths (an integer keeps `Resolved` `Eq`).
    pub sample_per_million: u32,
    /// The seed of the sampling decisions.
    pub seed: u64,
}

impl Default for VprpSettings {
    fn default() -> Self {
        VprpSettings {
            virtual_per_partition: crate::vprp::DEFAULT_VIRTUAL_PER_PARTITION,
            sample_per_million: 50_000,
            seed: 0x5eed,
        }
    }
}

impl VprpSettings {
    /// Samples `fraction` of the records (clamped to `[0, 1]`).
    pub fn with_sample_fraction(mut self, fraction: f64) -> Self {
        self.sample_per_million = (fraction.clamp(0.0, 1.0) * 1e6).round() as u32;
        self
    }

    /// The sampled fraction.
    pub fn sample_fraction(&self) -> f64 {
        self.sample_per_million as f64 / 1e6
    }

    /// These settings with those `tuning` gives.
    pub fn tuned(mut self, tuning: &Tuning) -> Self {
        if let Some(per_partition) = tuning.virtual_per_partition {
            self.virtual_per_partition = per_partition;
        }
        if let Some(per_million) = tuning.sample_per_million {
            self.sample_per_million = per_million;
        }
        self
    }
}

/// Both inputs, routed.
type RoutedPair<'s, T, K, L, R> = (
    StreamVec<'s, T, Routed<K, L>>,
    StreamVec<'s, T, Routed<K, R>>,
);

/// VPRP's routing: sample both sides, gather the summaries on every worker, plan the range
/// table, then route each record by its key's range (records wait for the table).
fn vprp_route<'s, T, K, L, R>(
    left: StreamVec<'s, T, (K, L)>,
    right: StreamVec<'s, T, (K, R)>,
    settings: VprpSettings,
    separate_noise: bool,
    how: JoinType,
    partitioning: Partitioning,
    observer: &RangeObserver<K>,
) -> RoutedPair<'s, T, K, L, R>
where
    T: Timestamp,
    K: JoinKey,
    L: ExchangeData + Clone,
    R: ExchangeData + Clone,
{
    let config = SampleConfig {
        fraction: settings.sample_fraction(),
        seed: settings.seed,
        ..SampleConfig::default()
    };
    let params = RangeParams {
        partitions: partitioning.partitions(),
        virtual_per_partition: settings.virtual_per_partition.max(1) as usize,
        theta: DEFAULT_THETA,
        separate_noise,
    };
    let left_sample = sample_summaries(left.clone(), &config).broadcast();
    let right_sample = sample_summaries(right.clone(), &config).broadcast();
    let tables = plan_tables(left_sample, right_sample, move |l, r| {
        plan_ranges(l, r, &params)
    });
    (
        route_by_ranges(
            left,
            tables.clone(),
            "VprpLeft",
            partitioning,
            how.keeps_unmatched(Side::Left),
            observer.clone(),
        ),
        route_by_ranges(
            right,
            tables,
            "VprpRight",
            partitioning,
            how.keeps_unmatched(Side::Right),
            observer.clone(),
        ),
    )
}
