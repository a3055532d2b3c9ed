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
