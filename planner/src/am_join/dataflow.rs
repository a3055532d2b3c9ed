//! AM-Join's dataflow: routes each side's records by their timestamp's plan and joins the main
//! (Shuffle/Broadcast) part and the grid's cells.

use std::cell::RefCell;
use std::rc::Rc;

use skewjoin_operators::join_logic::JoinLogic;
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

use super::plan::{AmPlan, Class};
use crate::am_join::planning::AmPlanning;
use crate::home::Home;

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
/// records gets a plan on every worker ([`crate::am_join::planning`]); should none come, its records are
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
    let plans = crate::am_join::planning::plans(&left, &right, &planning, partitioning);
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
