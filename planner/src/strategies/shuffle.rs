//! Shuffle-Join: both sides hash-partitioned by key, the baseline that skew breaks.

use std::hash::Hash;

use serde::{Deserialize, Serialize};
use skewjoin_operators::route::Destination;
use skewjoin_operators::{JoinKey, JoinType, PartitionLoad, Partitioning, Side};

use super::kind::{join_dataflow, route_and_join, JoinStrategy};
use crate::cost::{key_output, spread, KeyStats};
use crate::sizes::PlanInputs;

/// Shuffle-Join.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shuffle;

impl JoinStrategy for Shuffle {
    const NAME: &'static str = "shuffle";
    const ALIASES: &'static [&'static str] = &["hash"];
    const ABOUT: &'static str = "Every record goes to the partition its key hashes to, so equal \
        keys meet. A hot key's records all land on one partition: the baseline skew breaks.";
    const SKETCH: &'static str = "left, right ──hash(key) mod P──▶ one partition per key";

    fn choose(_inputs: &PlanInputs) -> Option<(Self, String)> {
        Some((Shuffle, "asked for".into()))
    }

    /// Exact: each key's records and output on the partition its hash names, kept NULL keys
    /// spread evenly (they are spread round-robin at run time).
    fn predict<K: JoinKey + Hash>(
        &self,
        how: JoinType,
        left: &[K],
        right: &[K],
        partitioning: Partitioning,
    ) -> Option<Vec<PartitionLoad>> {
        let stats = KeyStats::from_keys(left, right);
        let mut loads = vec![PartitionLoad::default(); partitioning.partitions()];
        for key in &stats.keys {
            let partition = partitioning.partition_of_hash(key.key.stable_hash()) as usize;
            loads[partition].input_records += key.left + key.right;
            loads[partition].output_rows += key_output(how, key.left, key.right);
        }
        for (side, nulls) in [
            (Side::Left, stats.left_nulls),
            (Side::Right, stats.right_nulls),
        ] {
            if how.keeps_unmatched(side) {
                spread(&mut loads, nulls, true);
            }
        }
        Some(loads)
    }

    // Kept NULL keys go to their home partitions: the rows need not be at home before they
    // are routed.
    join_dataflow!(|self, left, right, setup, logic| {
        let to = Destination::KeyHash(setup.partitioning);
        route_and_join(
            left,
            right,
            (to, to),
            ["ShuffleLeft", "ShuffleRight"],
            setup,
            logic,
        )
    });
}
