//! One builder for every strategy: what embedders, the command line, the cluster and the browser
//! build all call.
//!
//! ```
//! use skewjoin_operators::{JoinConfig, JoinType};
//! use skewjoin_planner::join::SkewJoin;
//! use skewjoin_planner::Strategy;
//! use timely::dataflow::operators::capture::Extract;
//! use timely::dataflow::operators::{Capture, ToStream};
//!
//! let captured = timely::example(|scope| {
//!     // Key 1 is hot on both sides: AM-Join unravels it into a grid of cells.
//!     let left = (0..100u32).map(|i| (u64::from(i % 3 == 0), i)).to_stream(scope).container::<Vec<_>>();
//!     let right = (0..50u32).map(|i| (u64::from(i % 2 == 0), i)).to_stream(scope).container::<Vec<_>>();
//!     left.skew_join(right)
//!         .how(JoinType::Full)
//!         .strategy(Strategy::Am)
//!         .config(&JoinConfig::new().with_partitions(4))
//!         .rows()
//!         .expect("AM-Join computes every join type")
//!         .capture()
//! });
//! let rows: Vec<_> = captured.extract().into_iter().flat_map(|(_, rows)| rows).collect();
//! // 34 left rows of key 1 x 25 right rows, and 66 x 25 of key 0.
//! assert_eq!(rows.len(), 34 * 25 + 66 * 25);
//! ```
//!
//! Every strategy plans inside the dataflow, per timestamp: AM-Join and Tree-Join count each
//! timestamp's keys ([`crate::am_join::planning`]), VPRP samples each timestamp's keys and
//! cuts its ranges, and a timestamp's records wait for its plan. Epochs may overlap, and a hot
//! key may appear, move or vanish between them: nothing is planned from another timestamp's
//! records.

use std::cell::RefCell;
use std::rc::Rc;

use skewjoin_operators::join_logic::{each_row, JoinLogic};
use skewjoin_operators::route::RoundRobin;
use skewjoin_operators::{
    JoinConfig, JoinError, JoinKey, JoinType, JoinedRow, LoadRecorder, Partitioning, Side,
};
use timely::dataflow::StreamVec;
use timely::progress::Timestamp;
use timely::ExchangeData;

use crate::am_join::params::AmParams;
use crate::am_join::plan::AmPlan;
use crate::am_join::planning::AmPlanning;
use crate::choose::{resolve, CannotCompute, KeyCheck};
use crate::compose::build_join;
use crate::home::Home;
use crate::report::Observers;
use crate::strategies::Am;
use crate::strategy::{PlanInputs, Resolved, Strategy, Tuning};
use crate::work_costs::WorkCosts;

/// The broadcast budget, in rows, `auto` assumes when the builder is told the input sizes but no
/// budget: a side of up to this many rows may be copied to every worker.
pub const DEFAULT_BROADCAST_ROWS: u64 = 1_000_000;

/// Starts a join of two streams of `(key, value)` pairs: [`SkewJoin::skew_join`].
pub trait SkewJoin<'s, T: Timestamp, K: JoinKey, L: ExchangeData + Clone> {
    /// A builder for the join of `self` (the left input) with `right`: an inner join, `auto`,
    /// one partition per worker, until told otherwise.
    fn skew_join<R: ExchangeData + Clone>(
        self,
        right: StreamVec<'s, T, (K, R)>,
    ) -> JoinBuilder<'s, T, K, L, R>;
}

impl<'s, T, K, L> SkewJoin<'s, T, K, L> for StreamVec<'s, T, (K, L)>
where
    T: Timestamp,
    K: JoinKey,
    L: ExchangeData + Clone,
{
    fn skew_join<R: ExchangeData + Clone>(
        self,
        right: StreamVec<'s, T, (K, R)>,
    ) -> JoinBuilder<'s, T, K, L, R> {
        JoinBuilder {
            left: self,
            right,
            how: JoinType::Inner,
            strategy: Asked::Strategy(Strategy::Auto),
            config: JoinConfig::new(),
            sizes: None,
            broadcast_rows: DEFAULT_BROADCAST_ROWS,
            costs: WorkCosts::THREADS,
            tuning: Tuning::default(),
            plan: None,
            homes: None,
            observers: None,
        }
    }
}

/// What was asked for: a strategy by name, or one with every choice made.
#[derive(Clone, Copy, Debug)]
enum Asked {
    Strategy(Strategy),
    Resolved(Resolved),
}

/// A join being set up; [`JoinBuilder::rows`] or [`JoinBuilder::with`] builds it.
pub struct JoinBuilder<'s, T: Timestamp, K: JoinKey, L, R> {
    left: StreamVec<'s, T, (K, L)>,
    right: StreamVec<'s, T, (K, R)>,
    how: JoinType,
    strategy: Asked,
    config: JoinConfig,
    sizes: Option<(u64, u64)>,
    broadcast_rows: u64,
    costs: WorkCosts,
    tuning: Tuning,
    plan: Option<AmPlanning<K>>,
    homes: Option<(Home<K, L>, Home<K, R>)>,
    observers: Option<Observers<K>>,
}

impl<'s, T, K, L, R> JoinBuilder<'s, T, K, L, R>
where
    T: Timestamp,
    K: JoinKey,
    L: ExchangeData + Clone,
    R: ExchangeData + Clone,
{
    /// The join type (inner unless told).
    pub fn how(mut self, how: JoinType) -> Self {
        self.how = how;
        self
    }

    /// A strategy by name. `auto` plans AM-Join per timestamp (Shuffle-Join for every key that
    /// is not hot), unless [`JoinBuilder::sizes`] says a side is small enough to copy, as the
    /// command line's `auto` would. Strategies that copy a side (broadcast, IB-Join, DER, DDR)
    /// copy the smaller one when the sizes are known, and the right one otherwise.
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = Asked::Strategy(strategy);
        self
    }

    /// A strategy with every choice made (side, parameters), as the planner resolved it.
    pub fn resolved(mut self, resolved: Resolved) -> Self {
        self.strategy = Asked::Resolved(resolved);
        self
    }

    /// Partitions and the load recorder.
    pub fn config(mut self, config: &JoinConfig) -> Self {
        self.config = config.clone();
        self
    }

    /// The input sizes in rows (over all workers), for `auto` and for the side a strategy
    /// copies. Not needed for correctness.
    pub fn sizes(mut self, left_rows: u64, right_rows: u64) -> Self {
        self.sizes = Some((left_rows, right_rows));
        self
    }

    /// The most rows `auto` may copy to every worker ([`DEFAULT_BROADCAST_ROWS`] unless told).
    pub fn broadcast_rows(mut self, rows: u64) -> Self {
        self.broadcast_rows = rows;
        self
    }

    /// What work costs where the dataflow runs, for `auto`'s choice with [`JoinBuilder::sizes`]
    /// ([`WorkCosts::THREADS`] unless told; [`WorkCosts::CLUSTER`] for workers in several
    /// processes, where a shuffled record crosses a socket and copying a small side pays sooner;
    /// [`WorkCosts::over_link`] for processes on a slow network).
    pub fn costs(mut self, costs: WorkCosts) -> Self {
        self.costs = costs;
        self
    }

    /// AM-Join's and Tree-Join's settings (hot threshold, broadcast budget, statistics, leaf
    /// size, fan-out).
    pub fn tuning(mut self, tuning: Tuning) -> Self {
        self.tuning = tuning;
        self
    }

    /// A plan made in advance for AM-Join and Tree-Join, instead of counting every timestamp.
    /// It is checked against each timestamp's records (a key planned hot where the timestamp
    /// has none of its records is demoted for that timestamp), so a stale plan costs time,
    /// never rows. Other strategies ignore it.
    pub fn plan(mut self, plan: AmPlan<K>) -> Self {
        self.plan = Some(AmPlanning::Fixed(Rc::new(plan)));
        self
    }

    /// How AM-Join and Tree-Join plan ([`AmPlanning`]); [`JoinBuilder::plan`] is
    /// `AmPlanning::Fixed`. `AmPlanning::Exact` is for plans counted from exactly the records
    /// of the dataflow's one timestamp, as the command line makes them. The parameters of
    /// `AmPlanning::PerTimestamp(params)` are used as given ([`JoinBuilder::tuning`] does not
    /// change them).
    pub fn planning(mut self, planning: AmPlanning<K>) -> Self {
        self.plan = Some(planning);
        self
    }

    /// Each record's home partition: where strategies that leave records in place keep them.
    /// It must be a partition of the worker that feeds the record. Unless told, records are
    /// spread round-robin over the feeding worker's partitions.
    pub fn homes(mut self, left: Home<K, L>, right: Home<K, R>) -> Self {
        self.homes = Some((left, right));
        self
    }

    /// Where the operators report their load (the configuration's recorder is replaced), Tree-
    /// Join's rounds and VPRP's ranges.
    pub fn observers(mut self, observers: &Observers<K>) -> Self {
        self.observers = Some(observers.clone());
        self
    }

    /// The strategy with every choice made, for `workers` workers: what [`JoinBuilder::with`]
    /// builds.
    pub fn resolve(&self, workers: usize) -> Result<Resolved, JoinError> {
        let refused = |broadcast| JoinError::BroadcastSideTracked {
            how: self.how,
            broadcast,
        };
        let resolved = match (self.strategy, self.sizes) {
            (Asked::Resolved(resolved), _) => resolved,
            (Asked::Strategy(Strategy::Auto | Strategy::Am), None) => Resolved::Am(Am {
                params: AmParams::default(),
            }),
            (Asked::Strategy(strategy), sizes) => {
                let (left_rows, right_rows) = sizes.unwrap_or((0, 0));
                let inputs = PlanInputs {
                    how: self.how,
                    left_rows,
                    right_rows,
                    workers,
                    broadcast_limit: self.broadcast_rows,
                    costs: self.costs,
                };
                // The command line's `auto` looks at the keys before it settles on
                // Shuffle-Join; in a dataflow, AM-Join's counts of each timestamp's keys do.
                resolve(strategy, &inputs, &self.tuning, || {
                    Ok::<_, CannotCompute>(KeyCheck::PerTimestamp)
                })
                .map_err(|_| refused(Side::Right))?
                .resolved
            }
        };
        resolved.can_compute(self.how)?;
        Ok(resolved.tuned(&self.tuning))
    }

    /// Builds the join, handing every output row to `logic` (a [`JoinLogic`], or a closure
    /// `(key, left, right, out)` through [`each_row`]); `logic` pushes what the output stream
    /// should carry into `out`.
    pub fn with<D, F>(self, logic: F) -> Result<StreamVec<'s, T, D>, JoinError>
    where
        D: Clone + 'static,
        F: JoinLogic<K, L, R, D> + 'static,
    {
        let workers = self.left.scope().peers();
        let worker = self.left.scope().index();
        let resolved = self.resolve(workers)?;
        let partitioning = self.config.partitioning(workers);
        let observers = self.observers.unwrap_or_else(|| Observers {
            loads: self.config.loads.clone(),
            ..Observers::default()
        });
        let homes = self.homes.unwrap_or_else(|| {
            (
                spread_home(&partitioning, worker),
                spread_home(&partitioning, worker),
            )
        });
        Ok(build_join(
            self.left,
            self.right,
            resolved,
            self.how,
            partitioning,
            homes,
            self.plan,
            &observers,
            logic,
        ))
    }

    /// Builds the join, emitting `(key, left, right)` rows (`None` for a padded side, and for the
    /// other side of a semi or anti join).
    pub fn rows(self) -> Result<StreamVec<'s, T, JoinedRow<K, L, R>>, JoinError> {
        self.with(each_row(
            |key: &K, left: Option<&L>, right: Option<&R>, out: &mut Vec<_>| {
                out.push((key.clone(), left.cloned(), right.cloned()))
            },
        ))
    }

    /// The load recorder the join counts into.
    pub fn loads(&self) -> LoadRecorder {
        match &self.observers {
            Some(observers) => observers.loads.clone(),
            None => self.config.loads.clone(),
        }
    }
}

/// Homes spread round-robin over the partitions of `worker` (over all partitions when it hosts
/// none, with fewer partitions than workers).
fn spread_home<K, V>(partitioning: &Partitioning, worker: usize) -> Home<K, V> {
    let spread = RefCell::new(RoundRobin::local(partitioning, worker));
    Rc::new(move |_: &K, _: &V| spread.borrow_mut().next_partition())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategies::{Am, Ib};
    use timely::dataflow::operators::ToStream;

    /// What `auto` resolves to with `sizes` on `workers` workers, weighed by `costs`.
    fn auto_with(sizes: (u64, u64), workers: usize, costs: WorkCosts) -> Resolved {
        timely::example(move |scope| {
            let left = vec![(1u64, 1u32)].to_stream(scope).container::<Vec<_>>();
            let right = vec![(1u64, 2u32)].to_stream(scope).container::<Vec<_>>();
            left.skew_join(right)
                .sizes(sizes.0, sizes.1)
                .costs(costs)
                .resolve(workers)
                .expect("auto resolves for every join type")
        })
    }

    /// In a dataflow `auto` runs AM-Join, so a small side's copy is weighed against AM-Join's
    /// shuffle and key count, not a shuffle alone: on two threads, output counted, it pays from
    /// about 1.5:1, where against a shuffle it would not below 7:1; and sooner on a cluster.
    #[test]
    fn auto_with_sizes_weighs_a_copy_against_am_join_on_the_machines_given() {
        let copy = Resolved::Ib(Ib { small: Side::Left });
        assert_eq!(auto_with((100_000, 1_000_000), 4, WorkCosts::THREADS), copy);
        assert!(matches!(
            auto_with((500_000, 1_000_000), 4, WorkCosts::THREADS),
            Resolved::Am(Am { .. })
        ));
        assert!(matches!(
            auto_with((100_000, 150_000), 2, WorkCosts::THREADS),
            Resolved::Am(Am { .. })
        ));
        assert_eq!(auto_with((100_000, 150_000), 2, WorkCosts::CLUSTER), copy);
        assert_eq!(auto_with((100_000, 200_000), 2, WorkCosts::THREADS), copy);
    }
}
