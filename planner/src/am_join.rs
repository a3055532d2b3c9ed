//! AM-Join (Adaptive-Multistage-Join): every key is routed by its *class*, found from exact key
//! counts, so that no partition receives a hot key's records or output whole.
//!
//! - hot in both inputs: the key is *unravelled* into a grid of `a x b` cells; each left record
//!   picks one row `i` and is copied to the `b` cells `(i, *)`, each right record picks one column
//!   `j` and is copied to the `a` cells `(*, j)`, so each pair meets in exactly one cell. Cells are
//!   joined under the key `(key, cell)` (copies in one partition never pair across cells) and
//!   placed on partitions by the planner, largest first onto the least-loaded partition;
//! - hot in the left input only: left records stay at home, the right records of those keys
//!   (few, as the key is cold on the right) are broadcast; hot in the right only: symmetric;
//! - cold and NULL keys: Shuffle-Join by key hash.
//!
//! **A plan per timestamp.** The classes must be known on every worker before a record is
//! routed, and they hold only for the records they were counted from. Inside a dataflow, each
//! timestamp is planned from its own records ([`crate::am_plans`]): the routing operators hold a
//! timestamp's records until its plan has arrived, so nothing is routed by another timestamp's
//! classes. A plan made elsewhere ([`AmPlanning::Fixed`]) is checked against each timestamp's
//! records first. The command line, which joins one timestamp, counts keys in a dataflow of its
//! own first and passes the plan as [`AmPlanning::Exact`]: the join then routes records as they
//! come instead of holding them (inputs are re-read instead).
//!
//! **No deduplication, all join types.** Records of a hot-in-both key are copied to several cells,
//! so a cell cannot decide padding, semi or anti: a cell may miss one side altogether. It need
//! not: a key hot in both inputs has records on both sides (the counts are exact), so every one of
//! its records is matched. Cells are therefore joined as *inner* joins; for a semi join the
//! records of the semi side are emitted once, where they are read, and never sent to a cell; for
//! an anti join they are dropped. The same holds for the broadcast side of a one-side-hot key: a
//! key hot on the left has left records, so its right records all match; they are broadcast for
//! pairs (broadcast copies are never padded), emitted at the source for a right semi join, and
//! dropped for a right anti join, while the left records at home are decided by the kernel, which
//! sees every right record of the key. A key forced or planned hot on a side where the timestamp
//! has no records of it is treated as not hot there ([`AmPlan::new`] for counts,
//! [`AmPlan::restricted`] for a fixed plan), so a wrong or stale classification changes the cost,
//! never the result.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use serde::{Deserialize, Serialize};
use skewjoin_operators::join_logic::JoinLogic;
use skewjoin_operators::key_stats::{HotThresholds, KeyCount};
use skewjoin_operators::partitioned_join::{join_time, partitioned_join};
use skewjoin_operators::route::{Route, Routed};
use skewjoin_operators::tree_join::{tree_join, TreeParams, TreeRounds};
use skewjoin_operators::{Dest, JoinKey, JoinType, LoadRecorder, Partitioning, Side};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::generic::{OutputBuilder, Session};
use timely::dataflow::operators::vec::Map;
use timely::dataflow::operators::{Capability, Concat};
use timely::dataflow::StreamVec;
use timely::progress::Timestamp;
use timely::ExchangeData;

pub use crate::am_plans::AmPlanning;
use crate::compose::Home;

/// Which keys are hot: found from the counts, or forced (to test that classification only ever
/// changes the cost).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HotChoice {
    /// Hot where the count is above the threshold.
    #[default]
    Detect,
    /// No key is hot: AM-Join degenerates to Shuffle-Join.
    NoKey,
    /// Every key is hot on both sides.
    EveryKey,
    /// Every key is hot on the left only.
    EveryKeyLeft,
    /// Every key is hot on the right only.
    EveryKeyRight,
    /// The detected hot sets, swapped between the sides.
    Swapped,
}

/// AM-Join's tuning, all of it `Copy` so that it travels inside [`Resolved`](crate::Resolved).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AmParams {
    /// A key is hot on a side above this many thousandths of one partition's share of that side
    /// (see [`HotThresholds::from_sizes`]).
    pub hot_per_mille: u32,
    /// Explicit thresholds, overriding `hot_per_mille`.
    pub thresholds: Option<HotThresholds>,
    /// Grid cells are sized to about `1 / cells_per_partition` of a partition's fair load, so
    /// that placing them evens out.
    pub cells_per_partition: u32,
    /// The most cells one key is unravelled into; 0 means P.
    pub max_cells: u32,
    /// The broadcast budget: every partition receives every broadcast record, so the
    /// one-side-hot classes together may broadcast at most this many thousandths of one
    /// partition's fair share of the input (`(left + right) / P` records). Beyond it, the keys
    /// with the most records to broadcast move to the hot-in-both class (a grid, which copies a
    /// record to one row or column of cells, not to every partition). Applies to detected hot
    /// sets only: forced ones are taken as given.
    pub broadcast_per_mille: u32,
    /// Detected or forced hot sets.
    pub hot: HotChoice,
    /// How keys are counted.
    pub statistics: Statistics,
}

/// How AM-Join counts keys to find the hot ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Statistics {
    /// Exact counts of every key, combined per worker, then totalled by key
    /// ([`skewjoin_operators::key_stats`]): memory per worker grows with its distinct keys.
    #[default]
    Exact,
    /// Space-Saving summaries of a fixed number of counters per worker and side
    /// ([`skewjoin_operators::heavy_hitters`]): bounded memory, estimated counts; the hot keys
    /// are all found while the summaries' floors stay under the thresholds.
    SpaceSaving {
        /// Counters per worker and side; 0 chooses [`Statistics::default_capacity`].
        capacity: u32,
    },
}

impl Statistics {
    /// Counters per worker and side for Space-Saving: twice the most keys that can be above a
    /// threshold of `hot_per_mille` thousandths of a partition's share (`P * 1000 / per mille`),
    /// at least 1,024.
    pub fn default_capacity(partitions: usize, hot_per_mille: u32) -> usize {
        let most_hot = partitions.max(1) * 1000 / hot_per_mille.max(1) as usize;
        (2 * most_hot).max(1024)
    }
}

impl std::str::FromStr for Statistics {
    type Err = String;

    /// `exact`, `space-saving` (default capacity) or `space-saving:N` (N counters).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.split_once(':') {
            None if text == "exact" => Ok(Statistics::Exact),
            None if text == "space-saving" => Ok(Statistics::SpaceSaving { capacity: 0 }),
            Some(("space-saving", counters)) => match counters.parse::<u32>() {
                Ok(capacity) if capacity > 0 => Ok(Statistics::SpaceSaving { capacity }),
                _ => Err(format!(
                    "space-saving:{counters}: the counter count must be a whole number from 1"
                )),
            },
            _ => Err(format!(
                "unknown statistics {text:?}: expected exact, space-saving or space-saving:COUNTERS"
            )),
        }
    }
}

/// The default broadcast budget of AM-Join's one-side-hot classes: a tenth of a partition's share
/// of the input, so broadcasting adds at most 10% to any partition's input.
pub const DEFAULT_BROADCAST_PER_MILLE: u32 = 100;

impl Default for AmParams {
    fn default() -> Self {
        AmParams {
            hot_per_mille: (HotThresholds::DEFAULT_FRACTION * 1000.0).round() as u32,
            thresholds: None,
            cells_per_partition: 4,
            max_cells: 0,
            broadcast_per_mille: DEFAULT_BROADCAST_PER_MILLE,
            hot: HotChoice::Detect,
            statistics: Statistics::Exact,
        }
    }
}

impl AmParams {
    /// With forced hot sets.
    pub fn forced(hot: HotChoice) -> AmParams {
        AmParams {
            hot,
            ..AmParams::default()
        }
    }

    /// The thresholds the statistics phase reports keys above: forced choices need every key's
    /// counts (or none).
    pub fn stats_thresholds(
        &self,
        left_rows: u64,
        right_rows: u64,
        partitions: usize,
    ) -> HotThresholds {
        match self.hot {
            HotChoice::NoKey => HotThresholds {
                left: u64::MAX,
                right: u64::MAX,
            },
            HotChoice::EveryKey | HotChoice::EveryKeyLeft | HotChoice::EveryKeyRight => {
                HotThresholds::EVERY_KEY
            }
            HotChoice::Detect | HotChoice::Swapped => self.thresholds.unwrap_or_else(|| {
                HotThresholds::from_sizes(
                    left_rows,
                    right_rows,
                    partitions,
                    self.hot_per_mille as f64 / 1000.0,
                )
            }),
        }
    }
}

/// The class of a key that is not cold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Hot on this side only: its records stay at home, the other side's are broadcast.
    HotOn(Side),
    /// Hot on both sides: unravelled into the grid with this index in [`AmPlan::grids`].
    Both(u32),
}

/// One hot-in-both key's grid.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grid {
    /// Left and right record counts of the key.
    pub left: u64,
    /// Right records.
    pub right: u64,
    /// a: rows (a left record goes to one row, all its cells).
    pub rows: u32,
    /// b: columns.
    pub cols: u32,
    /// The partition of cell `i * cols + j`.
    pub cells: Vec<u32>,
}

/// Every worker's copy of the decisions: the class of each non-cold key and the grids.
#[derive(Clone, Debug)]
pub struct AmPlan<K> {
    classes: HashMap<K, Class>,
    /// The grids of the hot-in-both keys.
    pub grids: Vec<Grid>,
    /// The thresholds the statistics used.
    pub thresholds: HotThresholds,
    summary: AmSummary,
}

/// What a plan decided, for metrics and reports.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AmSummary {
    /// Keys hot on the left only, on the right only, on both.
    pub hot_left_only: u64,
    /// Keys hot on the right only.
    pub hot_right_only: u64,
    /// Keys hot on both sides (those moved by the broadcast budget included).
    pub hot_both: u64,
    /// Keys hot on one side only that the broadcast budget moved to the grid class.
    #[serde(default)]
    pub moved_to_grid: u64,
    /// With Space-Saving statistics: the most records a key the left and right summaries did not
    /// monitor can have. Every hot key was found when these are at most the thresholds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_floors: Option<(u64, u64)>,
    /// The thresholds a key's count had to pass on the left and on the right to be hot.
    #[serde(default)]
    pub thresholds: (u64, u64),
    /// Records of the left input in the hot-left-only, hot-right-only and hot-both classes.
    pub left_records: [u64; 3],
    /// The same for the right input.
    pub right_records: [u64; 3],
    /// The largest grids, largest output first: which key, its records and where its cells went.
    pub largest_grids: Vec<GridSummary>,
}

/// One hot-in-both key's grid, as reports show it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GridSummary {
    /// The key, printed as the join shows keys.
    pub key: String,
    /// Its left records.
    pub left: u64,
    /// Its right records.
    pub right: u64,
    /// Rows of cells (a left record goes to every cell of one row).
    pub rows: u32,
    /// Columns of cells (a right record goes to every cell of one column).
    pub cols: u32,
    /// The partition of cell `i * cols + j`.
    pub partitions: Vec<u32>,
}

impl<K: JoinKey> AmPlan<K> {
    /// Plans from the statistics phase's list (in any order: it is sorted here, so every worker
    /// computes the same plan).
    pub fn new(
        mut stats: Vec<KeyCount<K>>,
        params: &AmParams,
        partitioning: &Partitioning,
        left_rows: u64,
        right_rows: u64,
    ) -> AmPlan<K> {
        stats.sort();
        stats.dedup();
        let partitions = partitioning.partitions();
        let detected = params.stats_thresholds(left_rows, right_rows, partitions);
        let mut classes = HashMap::new();
        let mut both = Vec::new();
        let mut one_side = Vec::new();
        let mut summary = AmSummary::default();
        for (key, l, r) in stats {
            // A NULL key matches nothing: in a cell or broadcast it would pair by equality, and
            // a hand-made plan may list one.
            if key.is_null() {
                continue;
            }
            let (hot_l, hot_r) = match params.hot {
                HotChoice::Detect => (l > detected.left, r > detected.right),
                HotChoice::Swapped => (r > detected.right, l > detected.left),
                HotChoice::NoKey => (false, false),
                HotChoice::EveryKey => (true, true),
                HotChoice::EveryKeyLeft => (true, false),
                HotChoice::EveryKeyRight => (false, true),
            };
            // Hot where it has no records would break "every record of the other side matches".
            let (hot_l, hot_r) = (hot_l && l > 0, hot_r && r > 0);
            match (hot_l, hot_r) {
                (true, true) => both.push((key, l, r)),
                (true, false) => one_side.push((key, l, r, Side::Left)),
                (false, true) => one_side.push((key, l, r, Side::Right)),
                (false, false) => {}
            }
        }

        // The broadcast budget: the keys with the most records to broadcast go to the grid
        // instead, until the rest fit. A key moved has records on both sides, so the grid's
        // "every record matches" holds.
        if params.hot == HotChoice::Detect {
            let budget = (left_rows + right_rows) as u128 * params.broadcast_per_mille as u128
                / (1000 * partitions.max(1) as u128);
            let broadcast = |&(_, l, r, hot): &(K, u64, u64, Side)| match hot {
                Side::Left => r,
                Side::Right => l,
            };
            let mut total: u128 = one_side.iter().map(|k| broadcast(k) as u128).sum();
            if total > budget {
                one_side.sort_by_key(|k| std::cmp::Reverse(broadcast(k)));
                let mut moved = 0;
                while total > budget && moved < one_side.len() {
                    total -= broadcast(&one_side[moved]) as u128;
                    moved += 1;
                }
                for (key, l, r, _) in one_side.drain(..moved) {
                    summary.moved_to_grid += 1;
                    both.push((key, l, r));
                }
                // Every worker must place the grids alike: back to key order.
                both.sort();
            }
        }
        for (key, l, r, hot) in one_side {
            let index = match hot {
                Side::Left => 0,
                Side::Right => 1,
            };
            if hot == Side::Left {
                summary.hot_left_only += 1;
            } else {
                summary.hot_right_only += 1;
            }
            summary.left_records[index] += l;
            summary.right_records[index] += r;
            classes.insert(key, Class::HotOn(hot));
        }

        // Cells are sized against the fair share of all work: inputs plus the outputs known.
        let known_output: u64 = both.iter().map(|(_, l, r)| l * r).sum();
        let total = (left_rows + right_rows + known_output) as f64;
        let cells_per_partition = params.cells_per_partition.max(1) as f64;
        let target = (total / (partitions as f64 * cells_per_partition)).max(1.0);
        let max_cells = if params.max_cells == 0 {
            partitions as u64
        } else {
            params.max_cells as u64
        };
        // The keys of the five largest outputs, named before the keys move into `classes`
        // (naming every hot key would format a string per key, under a forced plan every key).
        // Largest output first; the sort is stable, so ties stay in key order on every worker.
        let mut largest: Vec<usize> = (0..both.len()).collect();
        largest.sort_by_key(|&index| std::cmp::Reverse(both[index].1 * both[index].2));
        largest.truncate(5);
        let largest: Vec<(usize, String)> = largest
            .into_iter()
            .map(|index| (index, format!("{:?}", both[index].0)))
            .collect();
        let mut grids = Vec::with_capacity(both.len());
        for (key, l, r) in both {
            let work = (l * r + l + r) as f64;
            let cells = ((work / target).ceil() as u64).clamp(1, max_cells);
            let (rows, cols) = grid_shape(l, r, cells);
            classes.insert(key, Class::Both(grids.len() as u32));
            grids.push(Grid {
                left: l,
                right: r,
                rows,
                cols,
                cells: Vec::new(),
            });
        }
        place_cells(&mut grids, partitions);
        summary.hot_both = grids.len() as u64;
        summary.thresholds = (detected.left, detected.right);
        for grid in &grids {
            summary.left_records[2] += grid.left;
            summary.right_records[2] += grid.right;
        }
        summary.largest_grids = largest
            .into_iter()
            .map(|(index, key)| {
                let grid = &grids[index];
                GridSummary {
                    key,
                    left: grid.left,
                    right: grid.right,
                    rows: grid.rows,
                    cols: grid.cols,
                    partitions: grid.cells.clone(),
                }
            })
            .collect();
        AmPlan {
            classes,
            grids,
            thresholds: detected,
            summary,
        }
    }

    /// The plan with every key cold: AM-Join runs as Shuffle-Join.
    pub fn cold() -> AmPlan<K> {
        AmPlan {
            classes: HashMap::new(),
            grids: Vec::new(),
            thresholds: HotThresholds {
                left: u64::MAX,
                right: u64::MAX,
            },
            summary: AmSummary::default(),
        }
    }

    /// This plan for records where `present(key)` says whether a key has records on the left
    /// and on the right: a key stays hot only on the sides where it has records, which is what
    /// every class relies on (a hot-in-both key's cells are inner joins; a one-side-hot key's
    /// broadcast records are never padded). A key hot on both sides that lost one side is hot
    /// on the other only; a key that lost its hot side is cold. Grids and cells are kept, so the
    /// keys that stay hot on both sides are placed as planned.
    pub fn restricted(&self, present: impl Fn(&K) -> (bool, bool)) -> AmPlan<K> {
        let mut classes = HashMap::with_capacity(self.classes.len());
        for (key, &class) in &self.classes {
            let (left, right) = present(key);
            let kept = match class {
                Class::Both(_) if left && right => Some(class),
                Class::Both(_) if left => Some(Class::HotOn(Side::Left)),
                Class::Both(_) if right => Some(Class::HotOn(Side::Right)),
                Class::HotOn(Side::Left) if left => Some(class),
                Class::HotOn(Side::Right) if right => Some(class),
                _ => None,
            };
            if let Some(class) = kept {
                classes.insert(key.clone(), class);
            }
        }
        AmPlan {
            classes,
            grids: self.grids.clone(),
            thresholds: self.thresholds,
            summary: self.summary.clone(),
        }
    }

    /// The class of `key`, `None` for a cold (or NULL) key.
    #[inline]
    pub fn class(&self, key: &K) -> Option<Class> {
        if self.classes.is_empty() {
            None
        } else {
            self.classes.get(key).copied()
        }
    }

    /// Records the Space-Saving floors the statistics phase reported, for the summary.
    pub fn set_summary_floors(&mut self, floors: Option<(u64, u64)>) {
        self.summary.summary_floors = floors;
    }

    /// Counts of keys and records per class.
    pub fn summary(&self) -> &AmSummary {
        &self.summary
    }
}

/// The `rows x cols` grid of at most `cells` cells for a key with `l` left and `r` right records.
/// Every shape with `rows * cols <= cells` is tried, and the one whose cells carry the least work
/// each wins: output `l*r / (rows*cols)` plus the copies `l*cols + r*rows` spread over the cells.
/// That keeps the ratio near `l / r` (a side with more records is cut into more pieces) and never
/// makes more rows than left records nor more columns than right records.
pub fn grid_shape(l: u64, r: u64, cells: u64) -> (u32, u32) {
    let mut best = (1u64, 1u64);
    let mut best_cost = f64::INFINITY;
    for rows in 1..=cells.min(l.max(1)) {
        let cols = (cells / rows).min(r.max(1)).max(1);
        let n = (rows * cols) as f64;
        let cost = ((l * r) as f64 + (l * cols) as f64 + (r * rows) as f64) / n;
        if cost < best_cost {
            best_cost = cost;
            best = (rows, cols);
        }
    }
    (best.0 as u32, best.1 as u32)
}

/// How many partitions a cell is weighed against: the least loaded ones. Up to this many
/// partitions every one is a candidate, so the placement is the exact greedy one; beyond, a cell
/// costs `log P` plus this, not `P` (at 10^5 partitions the full scan took minutes, since the cell
/// count grows with P too).
const PLACEMENT_CANDIDATES: usize = 256;

/// Places every cell of every grid, largest first, where it least raises the larger of the
/// partition's two shares: of the grids' output and of their input records. Output alone would
/// dominate (it is the product of the counts) and leave the input uneven; both are balanced.
/// Cold keys and one-side-hot keys spread evenly, so they are left out of the packing.
///
/// A cell is weighed against the [`PLACEMENT_CANDIDATES`] partitions whose larger share is the
/// smallest (all of them at up to that many partitions); ties go to the lowest partition.
fn place_cells(grids: &mut [Grid], partitions: usize) {
    let mut cells: Vec<(u64, u64, usize, usize)> = Vec::new();
    for (index, grid) in grids.iter_mut().enumerate() {
        let count = (grid.rows * grid.cols) as usize;
        grid.cells = vec![0; count];
        let l = grid.left.div_ceil(grid.rows as u64);
        let r = grid.right.div_ceil(grid.cols as u64);
        for cell in 0..count {
            cells.push((l * r, l + r, index, cell));
        }
    }
    let total_out = cells.iter().map(|c| c.0).sum::<u64>().max(1) as f64;
    let total_in = cells.iter().map(|c| c.1).sum::<u64>().max(1) as f64;
    let weight = |c: &(u64, u64, usize, usize)| c.0 as f64 / total_out + c.1 as f64 / total_in;
    cells.sort_by(|a, b| {
        weight(b)
            .total_cmp(&weight(a))
            .then(a.2.cmp(&b.2))
            .then(a.3.cmp(&b.3))
    });
    let partitions = partitions.max(1);
    let mut out = vec![0u64; partitions];
    let mut input = vec![0u64; partitions];
    // The larger share of each partition, as the bits of a non-negative f64 (which order as the
    // values do), with the partition: the least loaded come first.
    let larger_share = |out: u64, input: u64| {
        (out as f64 / total_out)
            .max(input as f64 / total_in)
            .to_bits()
    };
    let mut by_load: std::collections::BTreeSet<(u64, usize)> =
        (0..partitions).map(|p| (0f64.to_bits(), p)).collect();
    for (cell_out, cell_in, index, cell) in cells {
        let cost = |p: usize| {
            let o = (out[p] + cell_out) as f64 / total_out;
            let i = (input[p] + cell_in) as f64 / total_in;
            o.max(i)
        };
        let partition = by_load
            .iter()
            .take(PLACEMENT_CANDIDATES)
            .map(|&(_, p)| p)
            .min_by(|&a, &b| cost(a).total_cmp(&cost(b)).then(a.cmp(&b)))
            .expect("at least one partition");
        by_load.remove(&(larger_share(out[partition], input[partition]), partition));
        out[partition] += cell_out;
        input[partition] += cell_in;
        by_load.insert((larger_share(out[partition], input[partition]), partition));
        grids[index].cells[cell] = partition as u32;
    }
}

/// What happens to a record outside the grid, in the main (Shuffle/Broadcast) join.
fn main_route(class: Class, side: Side, how: JoinType) -> Option<Route> {
    let Class::HotOn(hot) = class else {
        // Hot in both: the grid, the source, or nowhere (anti).
        return Some(Route::Drop);
    };
    let other = side.other();
    if side == hot {
        // The other side's records all match: if only they are output, this side is not needed.
        if how.semi_side() == Some(other) || how.anti_side() == Some(other) {
            Some(Route::Drop)
        } else {
            None // stays at home
        }
    } else if how.semi_side() == Some(side) || how.anti_side() == Some(side) {
        // Always matched: emitted at the source (semi) or never (anti).
        Some(Route::Drop)
    } else {
        Some(Route::Broadcast)
    }
}

/// A grid cell's key: the record's key with `(cell, partition)`. The partition travels in the
/// key so that Tree-Join can place a cell's round-0 entry without the timestamp's plan; copies
/// meeting in one partition never pair across cells.
pub type CellKey<K> = (K, (u32, u32));

/// True when a record of `side` in `class` is matched for sure and emitted where it is read:
/// the semi side of a semi join, for keys hot in both or hot on the other side only.
fn emitted_at_source(class: Option<Class>, side: Side, how: JoinType) -> bool {
    how.semi_side() == Some(side)
        && match class {
            Some(Class::Both(_)) => true,
            Some(Class::HotOn(hot)) => hot != side,
            None => false,
        }
}

/// Routes one side's records by a plan: to the main join (cold keys by hash, one-side-hot keys
/// at home or broadcast), to the grid's cells (hot-in-both keys), or out at once (the semi side
/// of a semi join where the plan says every record matches).
struct PlanRouter<K, V, E> {
    side: Side,
    how: JoinType,
    partitioning: Partitioning,
    worker: usize,
    workers: u32,
    home: Home<K, V>,
    loads: LoadRecorder,
    emit: E,
    /// The plan the counters belong to, and the next row or column each grid's records pick:
    /// round-robin per key, starting at the worker's index, so copies spread evenly and
    /// deterministically for a given input order.
    counters_of: Option<Rc<AmPlan<K>>>,
    next: Vec<u64>,
}

impl<K: JoinKey, V: Clone, E> PlanRouter<K, V, E> {
    /// Routes `batch` by `plan` into the three outputs' buffers.
    fn route<D>(
        &mut self,
        plan: &Rc<AmPlan<K>>,
        batch: &mut Vec<(K, V)>,
        main: &mut Vec<Routed<K, V>>,
        grid: &mut Vec<Routed<CellKey<K>, V>>,
        emitted: &mut Vec<D>,
    ) where
        E: FnMut(&K, &V, &mut Vec<D>),
    {
        if !self
            .counters_of
            .as_ref()
            .is_some_and(|p| Rc::ptr_eq(p, plan))
        {
            self.next = vec![self.worker as u64; plan.grids.len()];
            self.counters_of = Some(Rc::clone(plan));
        }
        let keep_nulls = self.how.keeps_unmatched(self.side);
        main.reserve(batch.len());
        for (key, value) in batch.drain(..) {
            let Some(class) = plan.class(&key) else {
                // Cold: by key hash; kept NULL keys stay at home, since they never match.
                if !key.is_null() {
                    let partition = self.partitioning.partition_of_hash(key.stable_hash());
                    main.push((Dest::partition(partition), (key, value)));
                } else if keep_nulls {
                    let home = (self.home)(&key, &value);
                    main.push((Dest::partition(home), (key, value)));
                }
                continue;
            };
            if emitted_at_source(Some(class), self.side, self.how) {
                (self.emit)(&key, &value, emitted);
                self.loads.output((self.home)(&key, &value), 1);
                continue;
            }
            if let Class::Both(index) = class {
                if self.how.emits_pairs() {
                    self.copy_to_cells(plan, index, &key, &value, grid);
                }
            }
            match main_route(class, self.side, self.how) {
                None => {
                    let home = (self.home)(&key, &value);
                    main.push((Dest::partition(home), (key, value)));
                }
                Some(Route::To(partition)) => main.push((Dest::partition(partition), (key, value))),
                Some(Route::Broadcast) => {
                    for worker in 1..self.workers {
                        main.push((Dest::all_of_worker(worker), (key.clone(), value.clone())));
                    }
                    main.push((Dest::all_of_worker(0), (key, value)));
                }
                Some(Route::Drop) => {}
            }
        }
    }

    /// The copies of a hot-in-both record: a left record to every cell of the row it picks, a
    /// right record to every cell of the column it picks.
    fn copy_to_cells(
        &mut self,
        plan: &AmPlan<K>,
        index: u32,
        key: &K,
        value: &V,
        grid: &mut Vec<Routed<CellKey<K>, V>>,
    ) {
        let cells = &plan.grids[index as usize];
        let counter = &mut self.next[index as usize];
        *counter += 1;
        let mut copy = |cell: u32| {
            let partition = cells.cells[cell as usize];
            grid.push((
                Dest::partition(partition),
                ((key.clone(), (cell, partition)), value.clone()),
            ));
        };
        match self.side {
            Side::Left => {
                let row = (*counter % cells.rows as u64) as u32;
                (0..cells.cols).for_each(|col| copy(row * cells.cols + col));
            }
            Side::Right => {
                let col = (*counter % cells.cols as u64) as u32;
                (0..cells.rows).for_each(|row| copy(row * cells.cols + col));
            }
        }
    }
}

/// One side's routed outputs: the main join's records, the grid's cell copies, and the rows
/// emitted at once.
type PlanRouted<'s, T, K, V, D> = (
    StreamVec<'s, T, Routed<K, V>>,
    StreamVec<'s, T, Routed<CellKey<K>, V>>,
    StreamVec<'s, T, D>,
);

/// Routes `records` of `side` by each timestamp's plan from `plans`, holding a timestamp's
/// records until its plan has arrived; with `exact`, by that plan at once. Every timestamp with
/// records gets a plan on every worker ([`crate::am_plans`]); should none come, its records are
/// routed as all cold, which is exact for any records.
#[allow(clippy::too_many_arguments)]
fn route_by_plan<'s, T, K, V, D, E>(
    records: StreamVec<'s, T, (K, V)>,
    plans: StreamVec<'s, T, Rc<AmPlan<K>>>,
    exact: Option<Rc<AmPlan<K>>>,
    side: Side,
    how: JoinType,
    partitioning: Partitioning,
    home: Home<K, V>,
    loads: LoadRecorder,
    emit: E,
) -> PlanRouted<'s, T, K, V, D>
where
    T: Timestamp,
    K: JoinKey,
    V: ExchangeData + Clone,
    D: Clone + 'static,
    E: FnMut(&K, &V, &mut Vec<D>) + 'static,
{
    let scope = records.scope();
    let name = match side {
        Side::Left => "AmRouteLeft",
        Side::Right => "AmRouteRight",
    };
    let mut builder = OperatorBuilder::new(name.to_owned(), scope);
    let mut records_input = builder.new_input(records, Pipeline);
    let mut plans_input = builder.new_input(plans, Pipeline);
    let (main_output, main_stream) = builder.new_output();
    let (grid_output, grid_stream) = builder.new_output();
    let (emit_output, emit_stream) = builder.new_output();
    let mut main_output = OutputBuilder::from(main_output);
    let mut grid_output = OutputBuilder::from(grid_output);
    let mut emit_output = OutputBuilder::from(emit_output);
    let mut router = PlanRouter {
        side,
        how,
        partitioning,
        worker: scope.index(),
        workers: scope.peers() as u32,
        home,
        loads,
        emit,
        counters_of: None,
        next: Vec::new(),
    };
    builder.build(move |initial| {
        drop(initial);
        let cold = Rc::new(AmPlan::cold());
        let mut known: Vec<(T, Rc<AmPlan<K>>)> = Vec::new();
        let mut held: Vec<HeldRecords<T, K, V>> = Vec::new();
        let (mut main, mut grid, mut emitted) = (Vec::new(), Vec::new(), Vec::new());
        move |frontiers| {
            let (records_frontier, plans_frontier) = (&frontiers[0], &frontiers[1]);
            let mut main_handle = main_output.activate();
            let mut grid_handle = grid_output.activate();
            let mut emit_handle = emit_output.activate();
            plans_input.for_each_stamp(|stamp, data| {
                for batch in data {
                    for plan in batch.drain(..) {
                        known.push((join_time(&stamp).clone(), plan));
                    }
                }
            });
            records_input.for_each_stamp(|stamp, data| {
                let time = join_time(&stamp).clone();
                match &exact {
                    Some(plan) => {
                        for batch in data {
                            router.route(plan, batch, &mut main, &mut grid, &mut emitted);
                            give(&mut main_handle.session(&stamp), &mut main);
                            give(&mut grid_handle.session(&stamp), &mut grid);
                            give(&mut emit_handle.session(&stamp), &mut emitted);
                        }
                    }
                    None => {
                        let index = match held.iter().position(|h| *h.0[0].time() == time) {
                            Some(index) => index,
                            None => {
                                let capabilities = [0, 1, 2].map(|port| stamp.delayed(&time, port));
                                held.push((capabilities, Vec::new()));
                                held.len() - 1
                            }
                        };
                        // Kept as the batches they came in, so that routing them later hands
                        // timely one batch at a time, not a copy of the whole timestamp.
                        for batch in data {
                            held[index].1.push(std::mem::take(batch));
                        }
                    }
                }
            });
            let mut index = 0;
            while index < held.len() {
                let time = held[index].0[0].time().clone();
                let plan = match known.iter().find(|(t, _)| *t == time) {
                    Some((_, plan)) => Rc::clone(plan),
                    None if !plans_frontier.less_equal(&time) => Rc::clone(&cold),
                    None => {
                        index += 1;
                        continue;
                    }
                };
                let ([main_cap, grid_cap, emit_cap], batches) = held.swap_remove(index);
                let mut main_session = main_handle.session(&main_cap);
                let mut grid_session = grid_handle.session(&grid_cap);
                let mut emit_session = emit_handle.session(&emit_cap);
                for mut batch in batches {
                    router.route(&plan, &mut batch, &mut main, &mut grid, &mut emitted);
                    give(&mut main_session, &mut main);
                    give(&mut grid_session, &mut grid);
                    give(&mut emit_session, &mut emitted);
                }
            }
            // A plan is needed while records of its time may still arrive.
            known.retain(|(time, _)| records_frontier.less_equal(time));
        }
    });
    (main_stream, grid_stream, emit_stream)
}

/// A timestamp's records held until its plan arrives, as the batches they came in, with a
/// capability for each output.
type HeldRecords<T, K, V> = ([Capability<T>; 3], Vec<Vec<(K, V)>>);

/// Hands a non-empty buffer to a session whole.
fn give<T, C, D>(
    session: &mut Session<'_, '_, T, CapacityContainerBuilder<Vec<D>>, C>,
    buffer: &mut Vec<D>,
) where
    T: Timestamp,
    C: timely::dataflow::operators::CapabilityTrait<T>,
    D: Clone + 'static,
{
    if !buffer.is_empty() {
        session.give_container(buffer);
        buffer.clear();
    }
}

/// Builds AM-Join over `left` and `right`, planned as `planning` says (per timestamp inside the
/// dataflow, a fixed plan checked per timestamp, or an exact plan of these very records),
/// calling `logic` for every output row. With `tree`, the grid's cells go through Tree-Join
/// rounds (cells larger than a leaf are split further, counting rounds into the
/// [`TreeRounds`]); without, each cell is joined in one round.
#[allow(clippy::too_many_arguments)]
pub fn am_join<'s, T, K, L, R, D, F>(
    left: StreamVec<'s, T, (K, L)>,
    right: StreamVec<'s, T, (K, R)>,
    how: JoinType,
    partitioning: Partitioning,
    homes: (Home<K, L>, Home<K, R>),
    planning: AmPlanning<K>,
    tree: Option<(TreeParams, TreeRounds)>,
    loads: LoadRecorder,
    logic: F,
) -> StreamVec<'s, T, D>
where
    T: Timestamp,
    K: JoinKey,
    L: ExchangeData + Clone,
    R: ExchangeData + Clone,
    D: Clone + 'static,
    F: JoinLogic<K, L, R, D> + 'static,
{
    let (home_left, home_right) = homes;
    let logic = SharedLogic(Rc::new(RefCell::new(logic)));
    let plans = crate::am_plans::plans(&left, &right, &planning, partitioning);
    let exact = match &planning {
        AmPlanning::Exact(plan) => Some(Rc::clone(plan)),
        _ => None,
    };
    // An exact plan without grids needs no grid join: the CLI's common case on cold data.
    let grids = how.emits_pairs() && exact.as_ref().is_none_or(|plan| !plan.grids.is_empty());

    let shared = logic.clone();
    let (main_left, grid_left, emitted_left) = route_by_plan(
        left,
        plans.clone(),
        exact.clone(),
        Side::Left,
        how,
        partitioning,
        home_left,
        loads.clone(),
        move |key: &K, value: &L, out: &mut Vec<D>| {
            shared.0.borrow_mut().row(key, Some(value), None, out)
        },
    );
    let shared = logic.clone();
    let (main_right, grid_right, emitted_right) = route_by_plan(
        right,
        plans,
        exact,
        Side::Right,
        how,
        partitioning,
        home_right,
        loads.clone(),
        move |key: &K, value: &R, out: &mut Vec<D>| {
            shared.0.borrow_mut().row(key, None, Some(value), out)
        },
    );
    let mut output = partitioned_join(
        main_left,
        main_right,
        how,
        partitioning,
        loads.clone(),
        logic.clone(),
    );

    // Hot in both: the grid of cells, joined as inner joins (every record of such a key
    // matches: the timestamp's plan has it hot on both sides only where it has records on both),
    // in one round or with Tree-Join rounds for cells still larger than a leaf.
    if grids {
        let cell_logic = CellLogic(logic.clone());
        let cells = match tree {
            None => partitioned_join(
                grid_left,
                grid_right,
                JoinType::Inner,
                partitioning,
                loads.clone(),
                cell_logic,
            ),
            Some((params, rounds)) => tree_join(
                grid_left.map(|(_, record)| record),
                grid_right.map(|(_, record)| record),
                JoinType::Inner,
                partitioning,
                params,
                |cell: &CellKey<K>| Some(cell.1 .1),
                loads.clone(),
                rounds,
                cell_logic,
            ),
        };
        output = output.concat(cells);
    }
    if how.semi_side().is_some() {
        output = output.concat(emitted_left).concat(emitted_right);
    }
    output
}

/// The join's logic, shared by the operators that emit rows: the main join, the grid's cells and
/// the rows a semi join emits where they are read. A group call borrows it once for the group.
struct SharedLogic<F>(Rc<RefCell<F>>);

impl<F> Clone for SharedLogic<F> {
    fn clone(&self) -> Self {
        SharedLogic(Rc::clone(&self.0))
    }
}

impl<K, L, R, D, F: JoinLogic<K, L, R, D>> JoinLogic<K, L, R, D> for SharedLogic<F> {
    #[inline]
    fn row(&mut self, key: &K, left: Option<&L>, right: Option<&R>, out: &mut Vec<D>) {
        self.0.borrow_mut().row(key, left, right, out)
    }

    #[inline]
    fn lefts_with<'v>(
        &mut self,
        key: &K,
        lefts: impl ExactSizeIterator<Item = &'v L>,
        right: &R,
        out: &mut Vec<D>,
    ) where
        L: 'v,
    {
        self.0.borrow_mut().lefts_with(key, lefts, right, out)
    }

    #[inline]
    fn left_with_rights<'v>(
        &mut self,
        key: &K,
        left: &L,
        rights: impl ExactSizeIterator<Item = &'v R>,
        out: &mut Vec<D>,
    ) where
        R: 'v,
    {
        self.0.borrow_mut().left_with_rights(key, left, rights, out)
    }
}

/// The shared logic as the grid's cells see it: keyed by `(key, cell)`, reporting the key.
struct CellLogic<F>(SharedLogic<F>);

impl<K, C, L, R, D, F: JoinLogic<K, L, R, D>> JoinLogic<(K, C), L, R, D> for CellLogic<F> {
    #[inline]
    fn row(&mut self, cell: &(K, C), left: Option<&L>, right: Option<&R>, out: &mut Vec<D>) {
        self.0.row(&cell.0, left, right, out)
    }

    #[inline]
    fn lefts_with<'v>(
        &mut self,
        cell: &(K, C),
        lefts: impl ExactSizeIterator<Item = &'v L>,
        right: &R,
        out: &mut Vec<D>,
    ) where
        L: 'v,
    {
        self.0.lefts_with(&cell.0, lefts, right, out)
    }

    #[inline]
    fn left_with_rights<'v>(
        &mut self,
        cell: &(K, C),
        left: &L,
        rights: impl ExactSizeIterator<Item = &'v R>,
        out: &mut Vec<D>,
    ) where
        R: 'v,
    {
        self.0.left_with_rights(&cell.0, left, rights, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_shapes_follow_the_ratio() {
        assert_eq!(grid_shape(2000, 2000, 8), (2, 4));
        assert_eq!(grid_shape(2000, 2000, 9), (3, 3));
        // Many more left records: more rows than columns.
        let (rows, cols) = grid_shape(100_000, 1_000, 16);
        assert!(rows > cols, "{rows}x{cols}");
        // Never more rows than records.
        assert_eq!(grid_shape(1, 50, 8).0, 1);
        assert_eq!(grid_shape(1, 1, 8), (1, 1));
    }

    /// Grids of uneven keys: a few large ones and many small ones, with varied shapes.
    fn uneven_grids(keys: u64) -> Vec<Grid> {
        (0..keys)
            .map(|k| {
                let (left, right) = (50 + (k * 7919) % 400, 30 + (k * 104_729) % 600);
                let (rows, cols) = grid_shape(left, right, 1 + k % 12);
                Grid {
                    left,
                    right,
                    rows,
                    cols,
                    cells: Vec::new(),
                }
            })
            .collect()
    }

    /// The placement as it was before the candidate set: every partition weighed for every cell.
    fn place_by_full_scan(grids: &mut [Grid], partitions: usize) {
        let mut cells = Vec::new();
        for (index, grid) in grids.iter_mut().enumerate() {
            let count = (grid.rows * grid.cols) as usize;
            grid.cells = vec![0; count];
            let l = grid.left.div_ceil(grid.rows as u64);
            let r = grid.right.div_ceil(grid.cols as u64);
            cells.extend((0..count).map(|cell| (l * r, l + r, index, cell)));
        }
        let total_out = cells.iter().map(|c| c.0).sum::<u64>().max(1) as f64;
        let total_in = cells.iter().map(|c| c.1).sum::<u64>().max(1) as f64;
        let weight = |c: &(u64, u64, usize, usize)| c.0 as f64 / total_out + c.1 as f64 / total_in;
        cells.sort_by(|a, b| {
            weight(b)
                .total_cmp(&weight(a))
                .then(a.2.cmp(&b.2))
                .then(a.3.cmp(&b.3))
        });
        let (mut out, mut input) = (vec![0u64; partitions], vec![0u64; partitions]);
        for (cell_out, cell_in, index, cell) in cells {
            let cost = |p: usize| {
                ((out[p] + cell_out) as f64 / total_out).max((input[p] + cell_in) as f64 / total_in)
            };
            let p = (0..partitions)
                .min_by(|&a, &b| cost(a).total_cmp(&cost(b)).then(a.cmp(&b)))
                .unwrap();
            out[p] += cell_out;
            input[p] += cell_in;
            grids[index].cells[cell] = p as u32;
        }
    }

    #[test]
    fn up_to_the_candidate_count_cells_are_placed_as_by_a_full_scan() {
        for partitions in [1, 3, 8, 64, PLACEMENT_CANDIDATES] {
            let mut fast = uneven_grids(300);
            let mut full = fast.clone();
            place_cells(&mut fast, partitions);
            place_by_full_scan(&mut full, partitions);
            assert_eq!(fast, full, "P = {partitions}");
        }
    }

    #[test]
    fn many_partitions_are_filled_evenly_from_the_least_loaded() {
        let partitions = 5_000;
        let mut grids = uneven_grids(3_000);
        place_cells(&mut grids, partitions);
        let (mut out, mut input) = (vec![0u64; partitions], vec![0u64; partitions]);
        let (mut largest_out, mut largest_in) = (0u64, 0u64);
        for grid in &grids {
            let l = grid.left.div_ceil(grid.rows as u64);
            let r = grid.right.div_ceil(grid.cols as u64);
            largest_out = largest_out.max(l * r);
            largest_in = largest_in.max(l + r);
            for &p in &grid.cells {
                out[p as usize] += l * r;
                input[p as usize] += l + r;
            }
        }
        // The least loaded partition is always a candidate, and its larger share is at most
        // 2 / P (the two shares each sum to 1), so no partition ends above that plus one cell.
        let (total_out, total_in) = (out.iter().sum::<u64>(), input.iter().sum::<u64>());
        let bound = 2.0 / partitions as f64
            + (largest_out as f64 / total_out as f64).max(largest_in as f64 / total_in as f64);
        for p in 0..partitions {
            let share = (out[p] as f64 / total_out as f64).max(input[p] as f64 / total_in as f64);
            assert!(share <= bound + 1e-12, "partition {p}: {share} > {bound}");
        }
        assert!(out.iter().all(|&o| o > 0), "every partition gets a cell");
    }

    #[test]
    fn a_single_hot_key_fills_every_partition_once() {
        let partitioning = Partitioning::new(8, 2);
        let plan = AmPlan::new(
            vec![(7u64, 2000, 2000)],
            &AmParams::default(),
            &partitioning,
            2000,
            2000,
        );
        assert_eq!(plan.class(&7), Some(Class::Both(0)));
        let grid = &plan.grids[0];
        assert_eq!(grid.rows * grid.cols, 8);
        let mut cells = grid.cells.clone();
        cells.sort();
        assert_eq!(cells, (0..8).collect::<Vec<u32>>());
    }

    #[test]
    fn the_broadcast_budget_moves_the_largest_broadcasts_to_the_grid() {
        // 40,000 rows a side on 8 partitions: a share is 10,000 records, the budget a tenth of
        // it, 1,000 broadcast records. Hot on the left only (above 100 left, at most 1,000
        // right): key 1 would broadcast 600 right records, key 2 500, key 3 300, key 4 none.
        let partitioning = Partitioning::new(8, 2);
        let stats = vec![
            (1u64, 9000, 600),
            (2, 8000, 500),
            (3, 7000, 300),
            (4, 6000, 0),
        ];
        let thresholds = Some(HotThresholds {
            left: 100,
            right: 1000,
        });
        let params = AmParams {
            thresholds,
            ..AmParams::default()
        };
        let plan = AmPlan::new(stats.clone(), &params, &partitioning, 40_000, 40_000);
        // 1,400 > 1,000: key 1 (the most to broadcast) moves, 800 fit.
        assert!(matches!(plan.class(&1), Some(Class::Both(_))));
        for key in [2, 3, 4] {
            assert_eq!(
                plan.class(&key),
                Some(Class::HotOn(Side::Left)),
                "key {key}"
            );
        }
        let summary = plan.summary();
        assert_eq!(
            (
                summary.moved_to_grid,
                summary.hot_both,
                summary.hot_left_only
            ),
            (1, 1, 3)
        );
        assert_eq!(summary.right_records, [800, 0, 600]);

        // A larger budget keeps them all; forced hot sets ignore the budget.
        let generous = AmParams {
            broadcast_per_mille: 150,
            ..params
        };
        let plan = AmPlan::new(stats.clone(), &generous, &partitioning, 40_000, 40_000);
        assert_eq!(plan.summary().moved_to_grid, 0);
        let forced = AmPlan::new(
            stats,
            &AmParams {
                hot: HotChoice::EveryKeyLeft,
                ..params
            },
            &partitioning,
            40_000,
            40_000,
        );
        assert_eq!(forced.summary().hot_left_only, 4);
    }

    #[test]
    fn forced_hot_sets_respect_the_counts() {
        let partitioning = Partitioning::new(4, 2);
        let stats = vec![(1u64, 5, 0), (2, 0, 5), (3, 5, 5)];
        let plan = AmPlan::new(
            stats.clone(),
            &AmParams::forced(HotChoice::EveryKey),
            &partitioning,
            10,
            10,
        );
        assert_eq!(plan.class(&1), Some(Class::HotOn(Side::Left)));
        assert_eq!(plan.class(&2), Some(Class::HotOn(Side::Right)));
        assert!(matches!(plan.class(&3), Some(Class::Both(_))));
        let plan = AmPlan::new(
            stats,
            &AmParams::forced(HotChoice::EveryKeyRight),
            &partitioning,
            10,
            10,
        );
        assert_eq!(plan.class(&1), None);
        assert_eq!(plan.class(&3), Some(Class::HotOn(Side::Right)));
    }
}
