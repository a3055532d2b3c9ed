//! The strategies a user can ask for by name, and what each resolves to (how one is chosen for a
//! join is [`mod@crate::choose`]).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
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

    /// Every strategy a user can name: `auto` and the concrete ones.
    pub const ALL: [Strategy; 11] = {
        let mut all = [Strategy::Auto; 11];
        let mut index = 0;
        while index < Strategy::CONCRETE.len() {
            all[index + 1] = Strategy::CONCRETE[index];
            index += 1;
        }
        all
    };

    /// Other names accepted for a strategy (its paper's name, a spelling without the hyphen).
    const ALIASES: [(&'static str, Strategy); 5] = [
        ("hash", Strategy::Shuffle),
        ("vprpt", Strategy::VprpT),
        ("ib-join", Strategy::Ib),
        ("am-join", Strategy::Am),
        ("tree-join", Strategy::Tree),
    ];

    /// The command-line name: the one place each name is written.
    pub const fn name(self) -> &'static str {
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
        let asked = s.to_ascii_lowercase();
        let named = Strategy::ALL
            .into_iter()
            .find(|strategy| strategy.name() == asked);
        let aliased = || {
            Strategy::ALIASES
                .into_iter()
                .find(|(alias, _)| *alias == asked)
                .map(|(_, strategy)| strategy)
        };
        named.or_else(aliased).ok_or_else(|| {
            let names: Vec<&str> = Strategy::ALL
                .iter()
                .map(|strategy| strategy.name())
                .collect();
            format!(
                "unknown strategy {asked:?}: expected one of {}",
                names.join(", ")
            )
        })
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
    /// The strategy a user names to run this one.
    pub fn strategy(&self) -> Strategy {
        match self {
            Resolved::Shuffle => Strategy::Shuffle,
            Resolved::Broadcast { .. } => Strategy::Broadcast,
            Resolved::Vprp(_) => Strategy::Vprp,
            Resolved::VprpT(_) => Strategy::VprpT,
            Resolved::Ib { .. } => Strategy::Ib,
            Resolved::Der { .. } => Strategy::Der,
            Resolved::Ddr { .. } => Strategy::Ddr,
            Resolved::Am { .. } => Strategy::Am,
            Resolved::Tree { .. } => Strategy::Tree,
            Resolved::TreeBasic { .. } => Strategy::TreeBasic,
        }
    }

    /// The name reported in metrics: the strategy's command-line name.
    pub fn name(&self) -> &'static str {
        self.strategy().name()
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
    /// default from the machine's memory with
    /// [`broadcast_limit_for_memory`](crate::choose::broadcast_limit_for_memory).
    pub broadcast_limit: u64,
    /// What work costs on the machines the join runs on ([`WorkCosts::of_run`]).
    pub costs: WorkCosts,
}

/// A choice and the reason for it, for `explain` and the run summary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice {
    /// The strategy to run.
    pub resolved: Resolved,
    /// Why, in words.
    pub reason: String,
}
