//! Broadcast-Join: one side copied whole to every partition, the other left where it is.

use std::hash::Hash;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use skewjoin_operators::broadcast_join::check_broadcast;
use skewjoin_operators::route::Destination;
use skewjoin_operators::{JoinError, JoinKey, JoinType, PartitionLoad, Partitioning, Side};

use super::kind::{join_dataflow, route_and_join, JoinStrategy};
use crate::sizes::{broadcast_side, PlanInputs};

/// Broadcast-Join broadcasting `side`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Broadcast {
    /// The side copied to every worker.
    pub side: Side,
}

impl JoinStrategy for Broadcast {
    const NAME: &'static str = "broadcast";
    const ABOUT: &'static str = "One side, the smaller one the join type lets it copy, goes \
        whole to every partition; the other stays where it is. Even load, but every partition \
        holds and reads the copied side.";
    const SKETCH: &'static str =
        "copied side ──copy──▶ every partition\nother side ── stays ──▶ its own partition";
    const LABEL: &'static str = "bcast";

    /// The smaller side the join type lets it copy; none for a join that keeps or filters the
    /// rows of both sides by whether they matched anywhere.
    fn choose(inputs: &PlanInputs) -> Option<(Self, String)> {
        broadcast_side(inputs).map(|side| {
            (
                Broadcast { side },
                format!(
                    "asked for; the {side} side is the smaller side the join type lets us copy"
                ),
            )
        })
    }

    fn can_compute(&self, how: JoinType) -> Result<(), JoinError> {
        check_broadcast(how, self.side)
    }

    fn copied_side(&self) -> Option<Side> {
        Some(self.side)
    }

    /// Exact: every partition receives the whole copied side (NULL keys aside) and its share of
    /// the other, and produces that share's output.
    fn predict<K: JoinKey + Hash>(
        &self,
        how: JoinType,
        left: &[K],
        right: &[K],
        partitioning: Partitioning,
    ) -> Option<Vec<PartitionLoad>> {
        let (stay, copied) = match self.side {
            Side::Right => (left, right),
            Side::Left => (right, left),
        };
        let stay_side = self.side.other();
        let mut copies: FxHashMap<&K, u64> = FxHashMap::default();
        for key in copied.iter().filter(|k| !k.is_null()) {
            *copies.entry(key).or_default() += 1;
        }
        let copied_rows: u64 = copies.values().sum();
        let keep = how.keeps_unmatched(stay_side);
        let semi = how.semi_side() == Some(stay_side);
        let mut loads = vec![PartitionLoad::default(); partitioning.partitions()];
        for (partition, load) in loads.iter_mut().enumerate() {
            load.input_records += copied_rows;
            let rows = partitioning.rows_of_partition(partition as u32, stay.len() as u64);
            for key in &stay[rows.start as usize..rows.end as usize] {
                if key.is_null() {
                    if keep {
                        load.input_records += 1;
                        load.output_rows += 1;
                    }
                    continue;
                }
                load.input_records += 1;
                let partners = copies.get(key).copied().unwrap_or(0);
                load.output_rows += if partners > 0 {
                    if how.emits_pairs() {
                        partners
                    } else {
                        u64::from(semi)
                    }
                } else {
                    u64::from(keep)
                };
            }
        }
        Some(loads)
    }

    join_dataflow!(|self, left, right, setup, logic| {
        let destinations = match self.side {
            Side::Right => (Destination::Home, Destination::Everywhere),
            Side::Left => (Destination::Everywhere, Destination::Home),
        };
        route_and_join(
            left,
            right,
            destinations,
            ["BroadcastJoinLeft", "BroadcastJoinRight"],
            setup,
            logic,
        )
    });
}
