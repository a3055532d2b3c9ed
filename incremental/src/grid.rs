//! The planning rule: which keys are hot, the grid of cells each hot key is spread over, and
//! when a key's grid changes (with hysteresis, so that a key near a threshold stays put).

use serde::{Deserialize, Serialize};

/// The cells of one hot key: `rows x cols` cells, each on its own worker. A left update of
/// the key goes to every cell of one row, a right update to every cell of one column, so each
/// pair of a left and a right record meets in exactly one cell (AM-Join's grid).
///
/// A key hot on the left only gets one column (its left records spread over the rows, each
/// right record copied to every row: a broadcast of the cold side), and the other way round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Grid {
    /// Rows: how many ways the left records of the key are split.
    pub rows: u32,
    /// Columns: how many ways the right records of the key are split.
    pub cols: u32,
}

impl Grid {
    /// The number of cells, each on a distinct worker.
    pub fn cells(self) -> u32 {
        self.rows * self.cols
    }

    /// The load of one cell of this grid for a key with `left` and `right` records: the left
    /// records it holds (`left / rows`), the right records (`right / cols`) and the output pairs
    /// it produces (`left * right / cells`).
    pub fn cost(self, left: u64, right: u64) -> f64 {
        let (l, r) = (left as f64, right as f64);
        let (rows, cols) = (f64::from(self.rows.max(1)), f64::from(self.cols.max(1)));
        l / rows + r / cols + l * r / (rows * cols)
    }

    /// The grid with at most `workers` cells of least [`Grid::cost`]. Ties go to fewer rows.
    pub fn best(left: u64, right: u64, workers: u32) -> Grid {
        let mut best = Grid { rows: 1, cols: 1 };
        let mut best_cost = f64::INFINITY;
        for rows in 1..=workers.max(1) {
            let grid = Grid {
                rows,
                cols: workers.max(1) / rows,
            };
            let cost = grid.cost(left, right);
            // Only a strict improvement (beyond float noise) replaces the grid found first.
            if cost < best_cost * (1.0 - 1e-12) {
                best = grid;
                best_cost = cost;
            }
        }
        best
    }
}

/// When keys become hot and cold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tuning {
    /// A key becomes hot when its load, `left + right + left * right` (records held on either
    /// side plus the pairs they make), reaches this; it goes back to its home worker when the
    /// load falls below a quarter of it.
    pub hot_load: u64,
}

impl Default for Tuning {
    /// 2^16: a key with 256 records on each side, or 65,536 on one.
    fn default() -> Self {
        Tuning { hot_load: 1 << 16 }
    }
}

/// A hot key is moved back home once its load is below `hot_load / COOL_DIVISOR`.
const COOL_DIVISOR: u64 = 4;

/// A hot key's grid is chosen again once either side's count has doubled or halved since the
/// grid was chosen.
const DRIFT_FACTOR: u64 = 2;

/// A hot key keeps its grid unless the best one's cell load is lower by more than this factor:
/// moving a key moves all its pairs, so a small gain is not worth it.
const REGRID_GAIN: f64 = 1.25;

/// What the planner knows of one hot key: its grid, and the counts it was chosen for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Planned {
    /// The key's cells.
    pub grid: Grid,
    /// The left count when the grid was chosen.
    pub left: u64,
    /// The right count when the grid was chosen.
    pub right: u64,
}

/// `left + right + left * right`, saturating.
pub fn load(left: u64, right: u64) -> u64 {
    left.saturating_add(right)
        .saturating_add(left.saturating_mul(right))
}

/// Whether a count moved by at least [`DRIFT_FACTOR`] from `then`.
fn drifted(then: u64, now: u64) -> bool {
    let (low, high) = (then.min(now), then.max(now));
    high >= DRIFT_FACTOR * low.max(1)
}

/// The plan for a key whose counts are now `left` and `right`, given its current plan:
/// `None` means the key goes (or stays) home. A returned plan with the same grid as `current`
/// only re-anchors the counts; the key's records do not move. A hot key keeps its grid unless
/// a side's count has doubled or halved and another grid is better by [`REGRID_GAIN`].
pub fn replan(
    current: Option<Planned>,
    left: u64,
    right: u64,
    tuning: Tuning,
    workers: u32,
) -> Option<Planned> {
    let load = load(left, right);
    let chosen = |current: Option<Grid>| {
        let best = Grid::best(left, right, workers);
        let keep =
            current.filter(|grid| grid.cost(left, right) <= REGRID_GAIN * best.cost(left, right));
        let grid = keep.unwrap_or(best);
        (grid.cells() > 1).then_some(Planned { grid, left, right })
    };
    match current {
        // A key with no records has nothing to spread, whatever the threshold.
        _ if left == 0 && right == 0 => None,
        None if load >= tuning.hot_load.max(1) => chosen(None),
        None => None,
        Some(_) if load.saturating_mul(COOL_DIVISOR) < tuning.hot_load => None,
        Some(planned) if drifted(planned.left, left) || drifted(planned.right, right) => {
            chosen(Some(planned.grid))
        }
        Some(planned) => Some(planned),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_hot_on_both_sides_gets_a_full_grid_shaped_by_its_counts() {
        assert_eq!(Grid::best(1000, 1000, 4), Grid { rows: 2, cols: 2 });
        assert_eq!(Grid::best(1000, 1000, 8).cells(), 8);
        // Many more left records than right: more rows than columns.
        let grid = Grid::best(100_000, 1000, 8);
        assert!(grid.rows > grid.cols, "{grid:?}");
    }

    #[test]
    fn a_key_hot_on_one_side_broadcasts_the_other() {
        assert_eq!(Grid::best(100_000, 0, 4), Grid { rows: 4, cols: 1 });
        assert_eq!(Grid::best(100_000, 1, 4), Grid { rows: 4, cols: 1 });
        assert_eq!(Grid::best(0, 100_000, 3), Grid { rows: 1, cols: 3 });
    }

    #[test]
    fn one_worker_never_plans() {
        assert_eq!(Grid::best(1 << 30, 1 << 30, 1), Grid { rows: 1, cols: 1 });
        assert_eq!(replan(None, 1 << 30, 1 << 30, Tuning::default(), 1), None);
    }

    #[test]
    fn hot_and_cold_have_hysteresis() {
        let tuning = Tuning { hot_load: 1000 };
        // Below the threshold: stays home.
        assert_eq!(replan(None, 20, 20, tuning, 4), None);
        // At it (31 + 31 + 961 = 1023): hot.
        let hot = replan(None, 31, 31, tuning, 4).expect("hot");
        assert_eq!(hot.grid, Grid { rows: 2, cols: 2 });
        // Falling back a little below the threshold keeps the grid: no records move.
        assert_eq!(replan(Some(hot), 25, 25, tuning, 4), Some(hot));
        // Still above a quarter of it (16 + 16 + 256 = 288 >= 250) and not halved: kept.
        assert_eq!(replan(Some(hot), 16, 16, tuning, 4), Some(hot));
        // Below a quarter (14 + 14 + 196 = 224 < 250): home again.
        assert_eq!(replan(Some(hot), 14, 14, tuning, 4), None);
        // Halved but still hot: the grid is chosen again (the same one) and re-anchored.
        let anchored = replan(Some(hot), 15, 15, tuning, 4).expect("hot");
        assert_eq!((anchored.grid, anchored.left), (hot.grid, 15));
    }

    #[test]
    fn a_key_with_no_records_has_no_grid_whatever_the_threshold() {
        for hot_load in [0, 1, 2, 3] {
            let tuning = Tuning { hot_load };
            assert_eq!(replan(None, 0, 0, tuning, 4), None);
            let hot = replan(None, 5, 5, tuning, 4).expect("hot");
            assert_eq!(
                replan(Some(hot), 0, 0, tuning, 4),
                None,
                "hot_load {hot_load}"
            );
        }
    }

    #[test]
    fn a_grid_is_chosen_again_only_when_a_count_doubles_or_halves() {
        let tuning = Tuning { hot_load: 1000 };
        let hot = replan(None, 1000, 1000, tuning, 8).expect("hot");
        // Less than doubled: same plan, same anchor.
        assert_eq!(replan(Some(hot), 1900, 1000, tuning, 8), Some(hot));
        // Both sides doubled: 2 x 4 is still the best grid; re-anchored, not moved.
        let doubled = replan(Some(hot), 2000, 2000, tuning, 8).expect("hot");
        assert_eq!((doubled.grid, doubled.left), (hot.grid, 2000));
        // The left side grew ten times: 4 x 2 is better than 2 x 4 but by less than
        // REGRID_GAIN, so the key stays where it is.
        let grown = replan(Some(hot), 10_000, 1000, tuning, 8).expect("hot");
        assert_eq!(grown.grid, hot.grid);
        // The right side vanished: the grid turns into one column over all rows.
        let again = replan(Some(hot), 1000, 0, tuning, 8).expect("still hot");
        assert_eq!(again.grid, Grid { rows: 8, cols: 1 });
        assert_eq!((again.left, again.right), (1000, 0));
    }
}
