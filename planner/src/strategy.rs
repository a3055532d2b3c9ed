//! The strategies a user can ask for by name, and how `auto` chooses among them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use skewjoin_operators::broadcast_join::check_broadcast;
use skewjoin_operators::tree_join::TreeParams;
use skewjoin_operators::{JoinType, Side};

use crate::am_join::params::{AmParams, Statistics};
use crate::work_costs::WorkCosts;

/// A strategy as named on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// Let the planner choose from the input sizes and the join type.
    Auto,
    /// Hash-partition both sides.
    Shuffle,
    /// Broadcast the smaller side whose broadcast the join type allows.
    Broadcast,
    /// Sampled virtual-range partitioning, join data and noise cut separately.
    Vprp,
    /// VPRP without the join-data/noise separation (the paper's ablation).
    VprpT,
    /// IB-Join: broadcast the smaller side as a key index, tracking its matches by key id.
    Ib,
    /// DER baseline: broadcast the smaller side with row ids, report unmatched row ids.
    Der,
    /// DDR baseline: broadcast the smaller side, send unmatched rows themselves.
    Ddr,
    /// AM-Join: count keys first, then shuffle cold keys, broadcast for keys hot on one side and
    /// unravel keys hot on both into a grid of cells.
    Am,
    /// Load-balanced Tree-Join inside AM-Join: keys hot on both sides unravelled into a grid,
    /// cells still larger than a leaf split further round after round.
    Tree,
    /// Basic Tree-Join for every key: group by key, split large entries round after round.
    TreeBasic,
}

impl Strategy {
    /// Every strategy that runs a join itself (not `auto`).
    pub const CONCRETE: [Strategy; 10] = [
        Strategy::Shuffle,
        Strategy::Broadcast,
        Strategy::Ib,
        Strategy::Der,
        Strategy::Ddr,
        Strategy::Vprp,
        Strategy::VprpT,
        Strategy::Am,
        Strategy::Tree,
        Strategy::TreeBasic,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Auto => "auto",
            Strategy::Shuffle => "shuffle",
            Strategy::Broadcast => "broadcast",
            Strategy::Vprp => "vprp",
            Strategy::VprpT => "vprp-t",
            Strategy::Ib => "ib",
            Strategy::Der => "der",
            Strategy::Ddr => "ddr",
            Strategy::Am => "am",
            Strategy::Tree => "tree",
            Strategy::TreeBasic => "tree-basic",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Strategy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Strategy::Auto),
            "shuffle" | "hash" => Ok(Strategy::Shuffle),
            "broadcast" => Ok(Strategy::Broadcast),
            "vprp" => Ok(Strategy::Vprp),
            "vprp-t" | "vprpt" => Ok(Strategy::VprpT),
            "ib" | "ib-join" => Ok(Strategy::Ib),
            "der" => Ok(Strategy::Der),
            "ddr" => Ok(Strategy::Ddr),
            "am" | "am-join" => Ok(Strategy::Am),
            "tree" | "tree-join" => Ok(Strategy::Tree),
            "tree-basic" => Ok(Strategy::TreeBasic),
            other => Err(format!(
                "unknown strategy {other:?}: expected one of auto, shuffle, broadcast, ib, der, ddr, vprp, vprp-t, am, tree, tree-basic"
            )),
        }
    }
}

/// A strategy with every choice made: what the dataflow is built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Resolved {
    /// Shuffle-Join.
    Shuffle,
    /// Broadcast-Join broadcasting `side`.
    Broadcast {
        /// The side copied to every worker.
        side: Side,
    },
    /// VPRP: ranges cut separately over join data and noise.
    Vprp(VprpSettings),
    /// VPRP-T: ranges cut over all sampled keys.
    VprpT(VprpSettings),
    /// IB-Join with `small` broadcast as a key index.
    Ib {
        /// The side copied to every worker.
        small: Side,
    },
    /// The DER baseline with `small` broadcast.
    Der {
        /// The side copied to every worker.
        small: Side,
    },
    /// The DDR baseline with `small` broadcast.
    Ddr {
        /// The side copied to every worker.
        small: Side,
    },
    /// AM-Join with these parameters (its plan is made from key counts when it runs).
    Am {
        /// Thresholds, grid sizing, forced hot sets.
        params: AmParams,
    },
    /// AM-Join whose grid cells go through Tree-Join rounds.
    Tree {
        /// AM-Join's parameters.
        params: AmParams,
        /// Leaf size and fan-out.
        tree: TreeParams,
    },
    /// Basic Tree-Join over all keys.
    TreeBasic {
        /// Leaf size and fan-out.
        tree: TreeParams,
    },
}

/// Overrides of AM-Join's and Tree-Join's settings (`None`: keep the default), as the command
/// line gives them.
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
}

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
}

impl Resolved {
    /// The name reported in metrics.
    pub fn name(&self) -> &'static str {
        match self {
            Resolved::Shuffle => "shuffle",
            Resolved::Broadcast { .. } => "broadcast",
            Resolved::Vprp(_) => "vprp",
            Resolved::VprpT(_) => "vprp-t",
            Resolved::Ib { .. } => "ib",
            Resolved::Der { .. } => "der",
            Resolved::Ddr { .. } => "ddr",
            Resolved::Am { .. } => "am",
            Resolved::Tree { .. } => "tree",
            Resolved::TreeBasic { .. } => "tree-basic",
        }
    }

    /// The side every worker receives a whole copy of (Broadcast-Join's broadcast side, the IB
    /// family's small side), which `--metrics` and the browser report as `broadcast_side`;
    /// `None` for strategies that route each record to one place.
    pub fn copied_side(&self) -> Option<Side> {
        match *self {
            Resolved::Broadcast { side }
            | Resolved::Ib { small: side }
            | Resolved::Der { small: side }
            | Resolved::Ddr { small: side } => Some(side),
            Resolved::Shuffle
            | Resolved::Vprp(_)
            | Resolved::VprpT(_)
            | Resolved::Am { .. }
            | Resolved::Tree { .. }
            | Resolved::TreeBasic { .. } => None,
        }
    }

    /// The same strategy with AM-Join's and Tree-Join's settings replaced where `tuning` gives
    /// them; strategies without those settings are returned unchanged.
    pub fn tuned(self, tuning: &Tuning) -> Resolved {
        let Tuning {
            hot_per_mille,
            broadcast_per_mille,
            leaf,
            fanout,
            statistics,
        } = *tuning;
        let tune_am = |mut params: AmParams| {
            if let Some(per_mille) = hot_per_mille {
                params.hot_per_mille = per_mille;
            }
            if let Some(per_mille) = broadcast_per_mille {
                params.broadcast_per_mille = per_mille;
            }
            if let Some(statistics) = statistics {
                params.statistics = statistics;
            }
            params
        };
        let tune_tree = |mut tree: TreeParams| {
            tree.leaf = leaf.unwrap_or(tree.leaf).max(1);
            tree.fanout = fanout.unwrap_or(tree.fanout).max(2);
            tree
        };
        match self {
            Resolved::Am { params } => Resolved::Am {
                params: tune_am(params),
            },
            Resolved::Tree { params, tree } => Resolved::Tree {
                params: tune_am(params),
                tree: tune_tree(tree),
            },
            Resolved::TreeBasic { tree } => Resolved::TreeBasic {
                tree: tune_tree(tree),
            },
            other => other,
        }
    }

    /// Whether the strategy probes the large side on the worker that feeds it (IB-Join and its
    /// baselines), so each of those records must be fed by the worker hosting its home.
    pub fn probes_in_place(&self) -> bool {
        matches!(
            self,
            Resolved::Ib { .. } | Resolved::Der { .. } | Resolved::Ddr { .. }
        )
    }

    /// Whether the strategy spreads kept NULL-key records over the partitions of the worker that
    /// routes them (VPRP and the basic Tree-Join), so they must be routed by the worker hosting
    /// their home for the loads to be those of an in-memory run. Shuffle-Join, Broadcast-Join
    /// and AM-Join send such records to their home partition themselves.
    pub fn spreads_nulls_locally(&self) -> bool {
        matches!(
            self,
            Resolved::Vprp(_) | Resolved::VprpT(_) | Resolved::TreeBasic { .. }
        )
    }

    /// AM-Join's parameters when the strategy is planned from key statistics, counted in a
    /// first phase; `None` for strategies that need none.
    pub fn needs_key_stats(&self) -> Option<AmParams> {
        match self {
            Resolved::Am { params } | Resolved::Tree { params, .. } => Some(*params),
            _ => None,
        }
    }
}

/// What the planner knows when it chooses.
#[derive(Clone, Copy, Debug)]
pub struct PlanInputs {
    /// The join type.
    pub how: JoinType,
    /// Rows on each side.
    pub left_rows: u64,
    /// Rows on the right.
    pub right_rows: u64,
    /// Worker count W.
    pub workers: usize,
    /// The most rows the planner may copy to every worker (the broadcast budget): `auto` and
    /// AM-Join broadcast a side only when its row count is within it. The runtime derives a
    /// default from the machine's memory with [`broadcast_limit_for_memory`].
    pub broadcast_limit: u64,
    /// What work costs on the machines the join runs on ([`WorkCosts::of_run`]).
    pub costs: WorkCosts,
}

/// Bytes one broadcast row is estimated to take in a worker's copy of the index: the row itself
/// (a key and a row reference, about 40 bytes), its share of the key table (key, id and row span
/// at a load factor below 7/8) and of the exchange buffers it passed through, rounded up to leave
/// room for string keys.
pub const INDEXED_ROW_BYTES: u64 = 128;

/// The share of available memory, as a divisor, that all workers' copies of a broadcast side may
/// take together: a quarter, leaving the rest to the large side held for the probe, the output
/// and everything else on the machine.
pub const BROADCAST_MEMORY_DIVISOR: u64 = 4;

/// The broadcast budget in rows for `available_bytes` of memory and `workers` workers in one
/// process: a side may be broadcast when `rows x INDEXED_ROW_BYTES x W` fits in a quarter of the
/// available memory, since every worker builds its own copy of the index. The planner does no IO;
/// the caller measures the memory (the `skewjoin` binary reads `MemAvailable`).
///
/// ```
/// use skewjoin_planner::strategy::broadcast_limit_for_memory;
/// // 16 GiB available, 8 workers: 4 GiB for 8 copies of 128-byte rows.
/// assert_eq!(broadcast_limit_for_memory(16 << 30, 8), 4 << 20);
/// assert_eq!(broadcast_limit_for_memory(0, 8), 0);
/// ```
pub fn broadcast_limit_for_memory(available_bytes: u64, workers: usize) -> u64 {
    available_bytes / BROADCAST_MEMORY_DIVISOR / (INDEXED_ROW_BYTES * workers.max(1) as u64)
}

/// Whether a side of `rows` rows fits the broadcast budget.
pub fn fits_broadcast(inputs: &PlanInputs, rows: u64) -> bool {
    rows <= inputs.broadcast_limit
}

/// What a Small-Large join's copy is weighed against: the strategy that runs if it does not pay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Instead {
    /// Shuffle-Join: `auto` before its skew check.
    Shuffle,
    /// AM-Join: a shuffle and a key count ([`WorkCosts::copying_beats_am_join`]).
    AmJoin,
}

/// A Small-Large join: the smaller side fits the broadcast budget and copying it to every worker
/// (each worker indexing all of it, the large side probed where it is) costs each worker less
/// than the strategy that would run `instead`, by the machines' [`WorkCosts`]: against a
/// shuffle, on the threads of one process where moving a record is cheap, only when the large
/// side is 21 times the small one at W = 2, on a cluster 9 times; against AM-Join, from 2.4 and
/// 1.4 times. Two equal sides are never a small and a large one. Returns that side and the
/// reason's common part. `auto` and AM-Join decide the same way, so they agree on what is
/// Small-Large.
pub fn small_large(inputs: &PlanInputs, instead: Instead) -> Option<(Side, String)> {
    let small = smaller_side(inputs);
    let (small_rows, large_rows) = match small {
        Side::Left => (inputs.left_rows, inputs.right_rows),
        Side::Right => (inputs.right_rows, inputs.left_rows),
    };
    if !fits_broadcast(inputs, small_rows) {
        return None;
    }
    let workers = inputs.workers.max(1) as u64;
    let (pays, than) = match instead {
        Instead::Shuffle => (
            inputs.costs.copying_pays(small_rows, large_rows, workers),
            "shuffling both",
        ),
        Instead::AmJoin => (
            inputs
                .costs
                .copying_beats_am_join(small_rows, large_rows, workers),
            "AM-Join's shuffle and key count",
        ),
    };
    pays.then(|| {
        (
            small,
            format!(
                "the {small} side ({small_rows} rows) is within the broadcast budget ({} rows), and the {} side ({large_rows} rows) is large enough that a copy of the {small} side indexed on each of {workers} workers, the {} side probed where it is, costs less than {than}{}",
                inputs.broadcast_limit,
                small.other(),
                small.other(),
                inputs.costs.link_note()
            ),
        )
    })
}

/// A choice and the reason for it, for `explain` and the run summary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice {
    /// The strategy to run.
    pub resolved: Resolved,
    /// Why, in words.
    pub reason: String,
}

/// The side a Broadcast-Join should copy: the smaller one the join type allows.
pub fn broadcast_side(inputs: &PlanInputs) -> Option<Side> {
    let mut candidates = [Side::Right, Side::Left]
        .into_iter()
        .filter(|side| check_broadcast(inputs.how, *side).is_ok())
        .collect::<Vec<_>>();
    candidates.sort_by_key(|side| match side {
        Side::Left => inputs.left_rows,
        Side::Right => inputs.right_rows,
    });
    candidates.first().copied()
}

/// Resolves `strategy` for these inputs. An explicit strategy that cannot compute this join type
/// is an error naming the alternatives.
pub fn choose(strategy: Strategy, inputs: &PlanInputs) -> Result<Choice, String> {
    match strategy {
        Strategy::Shuffle => Ok(Choice {
            resolved: Resolved::Shuffle,
            reason: "asked for".into(),
        }),
        Strategy::Broadcast => match broadcast_side(inputs) {
            Some(side) => Ok(Choice {
                resolved: Resolved::Broadcast { side },
                reason: format!("asked for; the {side} side is the smaller side the join type lets us copy"),
            }),
            None => Err(format!(
                "the broadcast strategy cannot compute a {} join: it keeps or filters rows of both sides by whether they matched anywhere; use --strategy shuffle",
                inputs.how
            )),
        },
        Strategy::Vprp => Ok(Choice {
            resolved: Resolved::Vprp(VprpSettings::default()),
            reason: "asked for".into(),
        }),
        Strategy::VprpT => Ok(Choice {
            resolved: Resolved::VprpT(VprpSettings::default()),
            reason: "asked for".into(),
        }),
        Strategy::Ib | Strategy::Der | Strategy::Ddr => {
            let small = smaller_side(inputs);
            Ok(Choice {
                resolved: match strategy {
                    Strategy::Ib => Resolved::Ib { small },
                    Strategy::Der => Resolved::Der { small },
                    _ => Resolved::Ddr { small },
                },
                reason: format!("asked for; the {small} side is the smaller side"),
            })
        }
        // The AM-Join paper sends Small-Large joins to IB-Join: with a whole side within the
        // broadcast budget there is nothing for key classes to balance, and IB-Join can index
        // either side for every join type.
        Strategy::Am => Ok(match small_large(inputs, Instead::AmJoin) {
            Some((small, why)) => Choice {
                resolved: Resolved::Ib { small },
                reason: format!("asked for AM-Join, which runs IB-Join on Small-Large joins: {why}"),
            },
            None => Choice {
                resolved: Resolved::Am {
                    params: AmParams::default(),
                },
                reason: "asked for; no side fits the broadcast budget profitably".into(),
            },
        }),
        Strategy::Tree => Ok(Choice {
            resolved: Resolved::Tree {
                params: AmParams::default(),
                tree: TreeParams::default(),
            },
            reason: "asked for".into(),
        }),
        Strategy::TreeBasic => Ok(Choice {
            resolved: Resolved::TreeBasic {
                tree: TreeParams::default(),
            },
            reason: "asked for".into(),
        }),
        Strategy::Auto => Ok(choose_auto(inputs)),
    }
}

/// The side with fewer rows (the right one on a tie).
pub fn smaller_side(inputs: &PlanInputs) -> Side {
    if inputs.left_rows < inputs.right_rows {
        Side::Left
    } else {
        Side::Right
    }
}

/// IB-Join on a Small-Large join ([`small_large`]), else Shuffle-Join (which the runtime replaces
/// with AM-Join when the key counts say it pays). IB-Join rather than a plain Broadcast-Join even
/// where the join type allows one: it probes its index as the large side streams in, where
/// Broadcast-Join holds both sides until the input ends (100,000 x 5M, inner, W = 2: 0.43
/// against 0.48 s; on 2, 4 and 8 emulated machines 0.44, 0.56 and 0.83 s against 0.49, 0.63 and
/// 0.94 s), and it
/// copies the same records.
fn choose_auto(inputs: &PlanInputs) -> Choice {
    match small_large(inputs, Instead::Shuffle) {
        Some((small, why)) => Choice {
            resolved: Resolved::Ib { small },
            reason: format!("{why}: IB-Join copies it"),
        },
        None => Choice {
            resolved: Resolved::Shuffle,
            reason: "no side is small enough to copy profitably".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(how: JoinType, left_rows: u64, right_rows: u64) -> PlanInputs {
        PlanInputs {
            how,
            left_rows,
            right_rows,
            workers: 4,
            broadcast_limit: 1_000_000,
            costs: WorkCosts::THREADS,
        }
    }

    #[test]
    fn auto_runs_ib_join_on_a_small_side_it_may_copy() {
        // IB-Join, not a plain broadcast, even where the join type allows one: it probes as the
        // large side streams in.
        let choice = choose(Strategy::Auto, &inputs(JoinType::Inner, 1_000_000, 100)).unwrap();
        assert_eq!(choice.resolved, Resolved::Ib { small: Side::Right });
        // A left join cannot plainly broadcast the left side; IB-Join can.
        let choice = choose(Strategy::Auto, &inputs(JoinType::Left, 100, 1_000_000)).unwrap();
        assert_eq!(choice.resolved, Resolved::Ib { small: Side::Left });
        let choice = choose(Strategy::Auto, &inputs(JoinType::RightSemi, 1_000_000, 10)).unwrap();
        assert_eq!(choice.resolved, Resolved::Ib { small: Side::Right });
        let choice = choose(Strategy::Auto, &inputs(JoinType::Full, 1000, 1000)).unwrap();
        assert_eq!(choice.resolved, Resolved::Shuffle);
        let choice = choose(Strategy::Auto, &inputs(JoinType::Inner, 1000, 1000)).unwrap();
        assert_eq!(choice.resolved, Resolved::Shuffle);
        // On two threads a copied record costs about two shuffled ones and a record probed in
        // place nearly one: copying pays only where the large side is over 21 times the small
        // one. On a cluster, where a shuffled record crosses a socket, from 8.6 times.
        let mut pair = inputs(JoinType::Inner, 100_000, 2_000_000);
        pair.workers = 2;
        assert_eq!(
            choose(Strategy::Auto, &pair).unwrap().resolved,
            Resolved::Shuffle
        );
        pair.right_rows = 2_200_000;
        assert_eq!(
            choose(Strategy::Auto, &pair).unwrap().resolved,
            Resolved::Ib { small: Side::Left }
        );
        let mut cluster = inputs(JoinType::Inner, 100_000, 800_000);
        cluster.workers = 2;
        cluster.costs = WorkCosts::CLUSTER;
        assert_eq!(
            choose(Strategy::Auto, &cluster).unwrap().resolved,
            Resolved::Shuffle
        );
        cluster.right_rows = 900_000;
        assert_eq!(
            choose(Strategy::Auto, &cluster).unwrap().resolved,
            Resolved::Ib { small: Side::Left }
        );
        // Equal sides are never Small-Large, and one worker moves nothing.
        let mut equal = inputs(JoinType::Inner, 1000, 1000);
        equal.costs = WorkCosts::CLUSTER;
        assert_eq!(
            choose(Strategy::Auto, &equal).unwrap().resolved,
            Resolved::Shuffle
        );
        let mut one = inputs(JoinType::Inner, 1, 1_000_000);
        one.workers = 1;
        assert_eq!(
            choose(Strategy::Auto, &one).unwrap().resolved,
            Resolved::Shuffle
        );
    }

    #[test]
    fn am_join_runs_ib_join_when_a_side_fits_the_budget() {
        // Small-Large: the right side fits and copying it is cheaper than a shuffle, for every
        // join type (IB-Join indexes either side whatever the join keeps or filters).
        for how in JoinType::ALL {
            let choice = choose(Strategy::Am, &inputs(how, 1_000_000, 100)).unwrap();
            assert_eq!(
                choice.resolved,
                Resolved::Ib { small: Side::Right },
                "{how}"
            );
            assert!(choice.reason.contains("IB-Join"), "{}", choice.reason);
            let choice = choose(Strategy::Am, &inputs(how, 100, 1_000_000)).unwrap();
            assert_eq!(choice.resolved, Resolved::Ib { small: Side::Left }, "{how}");
        }
        // Over the budget: AM-Join's own plan, even though the side is much the smaller.
        let mut over = inputs(JoinType::Full, 200_000_000, 2_000_000);
        over.broadcast_limit = 1_999_999;
        let choice = choose(Strategy::Am, &over).unwrap();
        assert!(matches!(choice.resolved, Resolved::Am { .. }), "{choice:?}");
        over.broadcast_limit = 2_000_000;
        let choice = choose(Strategy::Am, &over).unwrap();
        assert_eq!(choice.resolved, Resolved::Ib { small: Side::Right });
        // Within the budget but not Small-Large: copying 1000 rows to 3 more workers costs more
        // than shuffling both sides would.
        let choice = choose(Strategy::Am, &inputs(JoinType::Inner, 1000, 1000)).unwrap();
        assert!(matches!(choice.resolved, Resolved::Am { .. }), "{choice:?}");
        // Two equal sides on two workers: not Small-Large; nor a side half the other's. A
        // third is: against AM-Join's shuffle and key count, copying it pays, though against a
        // shuffle alone (auto, before its skew check) it does not.
        let mut equal = inputs(JoinType::Inner, 300_000, 300_000);
        equal.workers = 2;
        let choice = choose(Strategy::Am, &equal).unwrap();
        assert!(matches!(choice.resolved, Resolved::Am { .. }), "{choice:?}");
        equal.left_rows = 600_000;
        let choice = choose(Strategy::Am, &equal).unwrap();
        assert!(matches!(choice.resolved, Resolved::Am { .. }), "{choice:?}");
        equal.left_rows = 900_000;
        let choice = choose(Strategy::Am, &equal).unwrap();
        assert_eq!(choice.resolved, Resolved::Ib { small: Side::Right });
        assert!(
            choice.reason.contains("AM-Join's shuffle and key count"),
            "{}",
            choice.reason
        );
        let choice = choose(Strategy::Auto, &equal).unwrap();
        assert_eq!(choice.resolved, Resolved::Shuffle);
        // A zero budget keeps AM-Join's own plan whatever the sizes.
        let mut none = inputs(JoinType::Full, 1_000_000, 1);
        none.broadcast_limit = 0;
        assert!(matches!(
            choose(Strategy::Am, &none).unwrap().resolved,
            Resolved::Am { .. }
        ));
        // Tree keeps its grid: the rule is AM-Join's.
        let choice = choose(Strategy::Tree, &inputs(JoinType::Full, 1_000_000, 100)).unwrap();
        assert!(matches!(choice.resolved, Resolved::Tree { .. }));
    }

    #[test]
    fn the_budget_follows_memory_and_workers() {
        // A quarter of the memory, shared by one 128-byte copy per worker.
        assert_eq!(broadcast_limit_for_memory(1 << 30, 1), (1 << 28) / 128);
        assert_eq!(broadcast_limit_for_memory(1 << 30, 4), (1 << 28) / 512);
        assert_eq!(broadcast_limit_for_memory(1 << 30, 0), (1 << 28) / 128);
        assert_eq!(broadcast_limit_for_memory(100, 1), 0);
        let fits = inputs(JoinType::Inner, 10, 1_000_001);
        assert!(fits_broadcast(&fits, 1_000_000));
        assert!(!fits_broadcast(&fits, 1_000_001));
    }

    #[test]
    fn broadcast_of_a_full_join_is_an_error() {
        let error = choose(Strategy::Broadcast, &inputs(JoinType::Full, 10, 10)).unwrap_err();
        assert!(error.contains("--strategy shuffle"), "{error}");
        let choice = choose(Strategy::Ib, &inputs(JoinType::Full, 10, 20)).unwrap();
        assert_eq!(choice.resolved, Resolved::Ib { small: Side::Left });
        let choice = choose(Strategy::Der, &inputs(JoinType::Full, 30, 20)).unwrap();
        assert_eq!(choice.resolved, Resolved::Der { small: Side::Right });
        for name in [
            "auto",
            "shuffle",
            "broadcast",
            "ib",
            "der",
            "ddr",
            "vprp",
            "vprp-t",
            "am",
            "tree",
            "tree-basic",
        ] {
            assert_eq!(name.parse::<Strategy>().unwrap().name(), name);
        }
    }
}
