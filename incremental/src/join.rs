//! The skew-resilient join of two collections: count keys, plan, route through the plan, join
//! in cells.

use std::hash::Hash;

use differential_dataflow::lattice::Lattice;
use differential_dataflow::operators::arrange::arrangement::arrange_core;
use differential_dataflow::operators::arrange::{Arranged, TraceAgent};
use differential_dataflow::operators::CountTotal;
use differential_dataflow::trace::implementations::{ValBatcher, ValSpine};
use differential_dataflow::{AsCollection, Data, ExchangeData, Hashable, VecCollection};
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::vec::Map;
use timely::dataflow::operators::{Exchange, Inspect};
use timely::order::TotalOrder;
use timely::progress::Timestamp;

use crate::grid::{Grid, Tuning};
use crate::load::LoadMeter;
use crate::local::consolidate_here;
use crate::plan::plan;
use crate::route::{cells, salt, worker, Side};
use crate::Weight;

/// Records arranged by `(key, part)`, where the part is a salt or a cell.
type Spine<K, V, T, R> = ValSpine<(K, u32), V, T, R>;
type ByPart<'s, K, V, T, R> = Arranged<'s, TraceAgent<Spine<K, V, T, R>>>;

/// `left` joined with `right`, each matching pair of a key's records passed to `logic`:
/// the collection `left.join_map(right, logic)` is, at every time. Keys are counted and
/// planned as they change ([`Tuning`]).
pub fn skew_join_core<'s, T, K, V, V2, R, D, L>(
    left: VecCollection<'s, T, (K, V), R>,
    right: VecCollection<'s, T, (K, V2), R>,
    tuning: Tuning,
    meter: Option<LoadMeter>,
    logic: L,
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
    let workers = left.inner.scope().peers() as u32;
    let planned = plan(
        key_counts(left.clone()),
        key_counts(right.clone()),
        tuning,
        workers,
        meter.clone(),
    );
    join_with_plan(left, right, planned, meter, logic)
}

/// Each key's number of records, as it changes, counted in `i64` whatever the diff type. A
/// hot key's updates are summed within each batch on the worker that has them before they go
/// to the key's counting worker.
fn key_counts<'s, T, K, V, R>(
    records: VecCollection<'s, T, (K, V), R>,
) -> VecCollection<'s, T, (K, i64), isize>
where
    T: Timestamp + Lattice + TotalOrder,
    K: ExchangeData + Hash,
    V: ExchangeData,
    R: Weight,
{
    records
        .inner
        .map(|((key, _), time, diff)| (key, time, diff.records()))
        .as_collection()
        .consolidate_stream()
        .count_total()
}

/// `left` joined with `right` through a given plan: a collection of `(key, grid)` with at most
/// one grid per key at any time (multiplicity 1), each key with a grid spread over its cells,
/// the others at home. The output is `left.join_map(right, logic)` for any such plan; the plan
/// decides only where the work is done. [`skew_join_core`] makes the plan from key counts.
pub fn join_with_plan<'s, T, K, V, V2, R, D, L>(
    left: VecCollection<'s, T, (K, V), R>,
    right: VecCollection<'s, T, (K, V2), R>,
    plan: VecCollection<'s, T, (K, Grid), R>,
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
    let salts = left.inner.scope().peers() as u32;
    // The plan once per salt, each salt of a key on its own worker: the records of a hot key
    // meet its plan on as many workers as there are salts.
    let plan_by_salt = arrange_by_part(
        plan.flat_map(move |(key, grid)| (0..salts).map(move |s| ((key.clone(), s), grid))),
        None,
        "SkewPlanBySalt",
    );
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
    let salted = arrange_by_part(
        records.map(move |(key, value)| {
            let s = salt(value.hashed(), salts);
            ((key, s), value)
        }),
        meter.clone(),
        "SkewBySalt",
    );
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
    arrange_by_part(at_home.concat(in_grid), meter, "SkewCells")
}

/// `records` of `((key, part), value)` arranged on the worker of each part: part `p` of a key
/// on the worker `p` places after the key's home ([`worker`]), so a key's salts, or the cells of
/// its grid, are on distinct workers. Counts what arrives into `meter`.
fn arrange_by_part<'s, T, K, V, R>(
    records: VecCollection<'s, T, ((K, u32), V), R>,
    meter: Option<LoadMeter>,
    name: &str,
) -> ByPart<'s, K, V, T, R>
where
    T: Timestamp + Lattice + TotalOrder,
    K: ExchangeData + Hash,
    V: ExchangeData,
    R: Weight,
{
    let workers = records.inner.scope().peers();
    let arrived = records
        .inner
        .exchange(move |((key_part, _), _, _): &(((K, u32), V), T, R)| {
            worker(key_part.0.hashed(), key_part.1, workers) as u64
        });
    let arrived = match meter {
        Some(meter) => arrived.inspect(move |(_, _, diff): &(((K, u32), V), T, R)| {
            let records = diff.records();
            meter.update(|load| {
                load.updates += 1;
                load.held += records;
            })
        }),
        None => arrived,
    };
    arrange_core::<_, _, ValBatcher<(K, u32), V, T, R>, Spine<K, V, T, R>>(
        arrived,
        Pipeline,
        name,
        ValBatcher::new,
    )
}

/// The records of `counts` whose key has a positive count, as `(key, ())` once each.
fn present_keys<'s, T, K, R>(
    counts: VecCollection<'s, T, (K, i64), isize>,
) -> VecCollection<'s, T, (K, ()), R>
where
    T: Timestamp + Lattice + TotalOrder,
    K: ExchangeData + Hash,
    R: Weight,
{
    // `count_total` retracts a key's old count and inserts its new one: keeping only positive
    // counts leaves each present key once.
    counts
        .inner
        .flat_map(|((key, count), time, diff)| {
            let diff = R::from(if diff > 0 { 1 } else { -1 });
            (count > 0).then_some(((key, ()), time, diff))
        })
        .as_collection()
}

/// A full outer join's three parts: matching pairs, left records whose key has no right record
/// (a positive count), and right records whose key has no left record; the last two only where
/// asked. One plan, from both sides' counts, routes all three.
#[allow(clippy::type_complexity)]
pub(crate) fn outer_parts<'s, T, K, V, V2, R>(
    left: VecCollection<'s, T, (K, V), R>,
    right: VecCollection<'s, T, (K, V2), R>,
    tuning: Tuning,
    meter: Option<LoadMeter>,
    keep_right: bool,
) -> (
    VecCollection<'s, T, (K, (V, V2)), R>,
    VecCollection<'s, T, (K, V), R>,
    Option<VecCollection<'s, T, (K, V2), R>>,
)
where
    T: Timestamp + Lattice + TotalOrder,
    K: ExchangeData + Hash,
    V: ExchangeData + Hash,
    V2: ExchangeData + Hash,
    R: Weight,
{
    let workers = left.inner.scope().peers() as u32;
    let (left_counts, right_counts) = (key_counts(left.clone()), key_counts(right.clone()));
    let planned = plan(
        left_counts.clone(),
        right_counts.clone(),
        tuning,
        workers,
        meter.clone(),
    );
    let matched = join_with_plan(
        left.clone(),
        right.clone(),
        planned.clone(),
        meter,
        |key, v, v2| (key.clone(), (v.clone(), v2.clone())),
    );
    let left_matched = join_with_plan(
        left.clone(),
        present_keys(right_counts),
        planned.clone(),
        None,
        |key, v, ()| (key.clone(), v.clone()),
    );
    let left_only = left.concat(left_matched.negate());
    let right_only = keep_right.then(|| {
        let right_matched = join_with_plan(
            present_keys(left_counts),
            right.clone(),
            planned,
            None,
            |key, (), v2| (key.clone(), v2.clone()),
        );
        right.concat(right_matched.negate())
    });
    (matched, left_only, right_only)
}
