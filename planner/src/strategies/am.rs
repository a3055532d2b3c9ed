//! AM-Join and the load-balanced Tree-Join inside it: keys counted first, cold keys shuffled,
//! a key hot on one side joined by broadcasting the other side's few rows, a key hot on both
//! unravelled into a grid of cells (which Tree-Join splits further, round after round).

use serde::{Deserialize, Serialize};
use skewjoin_operators::tree_join::TreeParams;

use super::kind::{join_dataflow, JoinStrategy};
use crate::am_join::dataflow::am_join;
use crate::am_join::params::AmParams;
use crate::am_join::planning::AmPlanning;
use crate::report::Reports;
use crate::sizes::PlanInputs;
use crate::tuning::Tuning;

/// AM-Join with these parameters (its plan is made from key counts when it runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Am {
    /// Thresholds, grid sizing, forced hot sets.
    pub params: AmParams,
}

/// AM-Join whose grid cells go through Tree-Join rounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tree {
    /// AM-Join's parameters.
    pub params: AmParams,
    /// Leaf size and fan-out.
    pub tree: TreeParams,
}

impl JoinStrategy for Am {
    const NAME: &'static str = "am";
    const ALIASES: &'static [&'static str] = &["am-join"];
    const ABOUT: &'static str = "AM-Join: counts keys first. A key hot on one side keeps that \
        side in place and broadcasts the other side's few rows; a key hot on both is cut into a \
        grid of cells.";
    const SKETCH: &'static str = "cold key ──hash──▶ one partition\nhot on one side ──broadcast \
        the other side\nhot on both ──rows × columns of cells──▶ many partitions";

    /// AM-Join itself; `choose` hands Small-Large joins to IB-Join before it is asked
    /// ([`crate::choose::choose`]).
    fn choose(_inputs: &PlanInputs) -> Option<(Self, String)> {
        Some((
            Am {
                params: AmParams::default(),
            },
            "asked for; no side fits the broadcast budget profitably".into(),
        ))
    }

    fn tuned(self, tuning: &Tuning) -> Self {
        Am {
            params: tune_am(self.params, tuning),
        }
    }

    fn needs_key_stats(&self) -> Option<AmParams> {
        Some(self.params)
    }

    join_dataflow!(|self, left, right, setup, logic| {
        // Planned as `setup.planning` says, else per timestamp with the parameters.
        am_join(
            left,
            right,
            setup.how,
            setup.partitioning,
            setup.homes,
            setup
                .planning
                .unwrap_or(AmPlanning::PerTimestamp(self.params)),
            None,
            setup.observers.loads.clone(),
            logic,
        )
    });
}

impl JoinStrategy for Tree {
    const NAME: &'static str = "tree";
    const ALIASES: &'static [&'static str] = &["tree-join"];
    const ABOUT: &'static str = "Tree-Join: AM-Join whose grid cells are split further in \
        rounds, each cutting long record lists into sub-lists, until every piece is a small \
        leaf joined in one go.";
    const SKETCH: &'static str =
        "hot on both ──cells──▶ round 1 ──split──▶ round 2 … ──▶ leaves\nthe rest as AM-Join";

    fn choose(_inputs: &PlanInputs) -> Option<(Self, String)> {
        Some((
            Tree {
                params: AmParams::default(),
                tree: TreeParams::default(),
            },
            "asked for".into(),
        ))
    }

    fn tuned(self, tuning: &Tuning) -> Self {
        Tree {
            params: tune_am(self.params, tuning),
            tree: tune_tree(self.tree, tuning),
        }
    }

    fn needs_key_stats(&self) -> Option<AmParams> {
        Some(self.params)
    }

    fn reports(&self) -> Reports {
        Reports {
            tree_rounds: true,
            ..Reports::default()
        }
    }

    join_dataflow!(|self, left, right, setup, logic| {
        // AM-Join's dataflow, its grid cells through Tree-Join's rounds.
        am_join(
            left,
            right,
            setup.how,
            setup.partitioning,
            setup.homes,
            setup
                .planning
                .unwrap_or(AmPlanning::PerTimestamp(self.params)),
            Some((self.tree, setup.observers.rounds.clone())),
            setup.observers.loads.clone(),
            logic,
        )
    });
}

/// AM-Join's parameters with the user's hot threshold, broadcast budget and way of counting.
fn tune_am(mut params: AmParams, tuning: &Tuning) -> AmParams {
    if let Some(per_mille) = tuning.hot_per_mille {
        params.hot_per_mille = per_mille;
    }
    if let Some(per_mille) = tuning.broadcast_per_mille {
        params.broadcast_per_mille = per_mille;
    }
    if let Some(statistics) = tuning.statistics {
        params.statistics = statistics;
    }
    params
}

/// Tree-Join's parameters with the user's leaf size (at least 1) and fan-out (at least 2).
pub(crate) fn tune_tree(mut tree: TreeParams, tuning: &Tuning) -> TreeParams {
    tree.leaf = tuning.leaf.unwrap_or(tree.leaf).max(1);
    tree.fanout = tuning.fanout.unwrap_or(tree.fanout).max(2);
    tree
}
