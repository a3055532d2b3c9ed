//! AM-Join's plan: every worker's copy of the class of each key that is not cold and of the
//! grids of the keys hot on both sides, made from key counts alone (no dataflow).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use skewjoin_operators::key_stats::{HotThresholds, KeyCount};
use skewjoin_operators::{JoinKey, Partitioning, Side};

use super::params::{AmParams, HotChoice};

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
            let index = hot.index();
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

#[cfg(test)]
mod tests;
