//! The basic Tree-Join: every key, hot or not, grouped and split round after round until its
//! pieces are leaves; no key counts, no classes.

use serde::{Deserialize, Serialize};
use skewjoin_operators::tree_join::{tree_join, TreeParams};

use super::am::tune_tree;
use super::kind::{join_dataflow, JoinStrategy};
use crate::report::Reports;
use crate::sizes::PlanInputs;
use crate::tuning::Tuning;

/// Basic Tree-Join over all keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeBasic {
    /// Leaf size and fan-out.
    pub tree: TreeParams,
}

impl JoinStrategy for TreeBasic {
    const NAME: &'static str = "tree-basic";
    const ABOUT: &'static str = "Basic Tree-Join: every key, hot or not, goes through the \
        rounds of splitting; no key counts, no classes.";
    const SKETCH: &'static str = "every key ──hash──▶ round 1 ──split long lists──▶ … ──▶ leaves";

    fn choose(_inputs: &PlanInputs) -> Option<(Self, String)> {
        Some((
            TreeBasic {
                tree: TreeParams::default(),
            },
            "asked for".into(),
        ))
    }

    fn tuned(self, tuning: &Tuning) -> Self {
        TreeBasic {
            tree: tune_tree(self.tree, tuning),
        }
    }

    fn spreads_nulls_locally(&self) -> bool {
        true
    }

    fn reports(&self) -> Reports {
        Reports {
            tree_rounds: true,
            ..Reports::default()
        }
    }

    join_dataflow!(|self, left, right, setup, logic| {
        tree_join(
            left,
            right,
            setup.how,
            setup.partitioning,
            self.tree,
            |_: &K| None,
            setup.observers.loads.clone(),
            setup.observers.rounds.clone(),
            logic,
        )
    });
}
