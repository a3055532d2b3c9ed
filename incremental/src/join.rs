//! The skew-resilient join of two collections: count keys, plan, route through the plan, join
//! in cells.

use std::hash::Hash;

use differential_dataflow::operators::arrange::arrangement::arrange_core;
use differential_dataflow::operators::arrange::{Arranged, TraceAgent};
use differential_dataflow::operators::CountTotal;
use differential_dataflow::trace::implementations::{ValBatcher, ValSpine};
use differential_dataflow::{AsCollection, Data, ExchangeData, Hashable, VecCollection};
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::{Exchange, Inspect};
use timely::order::TotalOrder;
use timely::progress::Timestamp;

use differential_dataflow::lattice::Lattice;

use crate::grid::{Grid, Tuning};
use crate::load::LoadMeter;
use crate::local::consolidate_here;
use crate::plan::plan;
use crate::route::{cells, salt, worker, Side};
use crate::Weight;

/// Records arranged by `(key, salt)` or `(key, cell)`.
type Spine<K, V, T, R> = ValSpine<(K, u32), V, T, R>;
type ByPart<'s, K, V, T, R> = Arranged<'s, TraceAgent<Spine<K, V, T, R>>>;

/// `left` joined with `right`, each matching pair of a key's records passed to `logic`:
/// the collection `left.join_map(right, logic)` is, at every time.
pub fn skew_join_core<'s, T, K, V, V2, R, D, L>(
    left: VecCollection<'s, T, (K, V), R>,
    right: VecCollection<'s, T, (K, V2), R>,
    tuning: Tuning,
    meter: Option<LoadMeter>,
    mut logic: L,
) -> VecCollection<'s, T, D, R>
where
    T: Timestamp + Lattice + TotalOrder,
    K: ExchangeData + Hash,
    V: ExchangeData + Hash,
    V2: ExchangeData + Hash,
    R: Weight,
    D: Data,
    L: FnMut(&K, &V, &V2) -> D + 'static,
{
    let workers = left.inner.scope().peers();
    let salts = workers as u32;

    // Each side's count of every key, as it changes. A hot key's updates are summed within
    // each batch on the worker that has them before they go to the key's counting worker.
    let left_counts = left
        .clone()
        .map(|(key, _)| key)
        .consolidate_stream()
        .count_total();
    let right_counts = right
        .clone()
        .map(|(key, _)| key)
        .consolidate_stream()
        .count_total();
    let planned = plan(
        left_counts,
        right_counts,
        tuning,
        workers as u32,
        meter.clone(),
    );
    // The plan once per salt: the records of a hot key meet its plan on as many workers.
    let plan_by_salt = planned
        .flat_map(move |(key, grid)| (0..salts).map(move |s| ((key.clone(), s), grid)))
        .arrange_by_key();

    let left_cells = in_cells(left, plan_by_salt.clone(), Side::Left, salts, meter.clone());
    let right_cells = in_cells(right, plan_by_salt, Side::Right, salts, meter.clone());
    let output = left_cells.join_core(right_cells, move |(key, _cell), v, v2| {
        Some(logic(key, v, v2))
    });
    match meter {
        Some(meter) => output
            .inner
            .inspect(move |_| meter.update(|load| load.output_updates += 1))
            .as_collection(),
        None => output,
    }
}

/// One side's records arranged in the cells the plan gives them: the home worker of their key,
/// or for a hot key the row (left) or column (right) of its grid their value hashes to.
///
/// A record is routed on the worker of its `(key, salt)`: home, less home where its key has a
/// grid (the two summed on that worker before anything is sent, so a hot key's records reach
/// its home worker only when the key moves), plus the cells of the grid.
fn in_cells<'s, T, K, V, R>(
    records: VecCollection<'s, T, (K, V), R>,
    plan_by_salt: ByPart<'s, K, Grid, T, R>,
    side: Side,
    salts: u32,
    meter: Option<LoadMeter>,
) -> ByPart<'s, K, V, T, R>
where
    T: Timestamp + Lattice + TotalOrder,
    K: ExchangeData + Hash,
    V: ExchangeData + Hash,
    R: Weight,
{
    let workers = records.inner.scope().peers();
    let salted = records
        .map(move |(key, value)| {
            let s = salt(value.hashed(), salts);
            ((key, s), value)
        })
        .arrange_by_key();
    let home = salted
        .clone()
        .as_collection(|(key, _), value| ((key.clone(), 0), value.clone()));
    let leaving_home = salted
        .clone()
        .join_core(plan_by_salt.clone(), |(key, _), value, _grid| {
            Some(((key.clone(), 0), value.clone()))
        })
        .negate();
    let at_home = consolidate_here(home.concat(leaving_home));
    let in_grid = salted.join_core(plan_by_salt, move |(key, _), value, grid| {
        let (key, value) = (key.clone(), value.clone());
        cells(side, value.hashed(), *grid).map(move |cell| ((key.clone(), cell), value.clone()))
    });
    let routed = at_home.concat(in_grid).inner.exchange(
        move |((key_cell, _), _, _): &(((K, u32), V), T, R)| {
            worker(key_cell.0.hashed(), key_cell.1, workers) as u64
        },
    );
    let routed = match meter {
        Some(meter) => routed.inspect(move |(_, _, diff): &(((K, u32), V), T, R)| {
            let records = diff.records();
            meter.update(|load| {
                load.updates += 1;
                load.held += records;
            })
        }),
        None => routed,
    };
    arrange_core::<_, _, ValBatcher<(K, u32), V, T, R>, Spine<K, V, T, R>>(
        routed,
        Pipeline,
        "SkewCells",
        ValBatcher::new,
    )
}
