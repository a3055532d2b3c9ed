//! What a strategy is: the trait every strategy module implements, and what its dataflow is
//! built with.

use std::fmt;
use std::hash::Hash;

use serde::de::DeserializeOwned;
use serde::Serialize;
use skewjoin_operators::join_logic::JoinLogic;
use skewjoin_operators::partitioned_join::partitioned_join;
use skewjoin_operators::route::{null_aware, route, Destination};
use skewjoin_operators::{JoinError, JoinKey, JoinType, PartitionLoad, Partitioning, Side};
use timely::dataflow::StreamVec;
use timely::progress::Timestamp;
use timely::ExchangeData;

use crate::am_join::params::AmParams;
use crate::am_join::planning::AmPlanning;
use crate::home::Home;
use crate::report::{Observers, Reports};
use crate::sizes::PlanInputs;
use crate::tuning::Tuning;

/// What a strategy's dataflow is built with, besides its inputs and its output logic.
pub struct JoinSetup<'a, K, L, R> {
    /// The join type.
    pub how: JoinType,
    /// Partitions and the workers hosting them.
    pub partitioning: Partitioning,
    /// Each record's home partition: the partition whose share of the input it is.
    pub homes: (Home<K, L>, Home<K, R>),
    /// How AM-Join and Tree-Join plan: `None` plans every timestamp inside the dataflow with the
    /// strategy's parameters (see [`crate::am_join::planning`]).
    pub planning: Option<AmPlanning<K>>,
    /// Where the operators count their load and record their decisions.
    pub observers: &'a Observers<K>,
}

/// A join strategy with every choice made: what its module says about it, from its name to its
/// dataflow. The registry in [`crate::strategy`] lists every strategy and turns each method into
/// one of [`Resolved`](crate::strategy::Resolved)'s.
pub trait JoinStrategy: Copy + fmt::Debug + PartialEq + Eq + Serialize + DeserializeOwned {
    /// The name on the command line, in `--metrics`, in the Python package and in the browser:
    /// the one place it is written.
    const NAME: &'static str;
    /// Other names accepted for it (its paper's name, a spelling without the hyphen).
    const ALIASES: &'static [&'static str] = &[];
    /// What it does, in two sentences, for the browser's card.
    const ABOUT: &'static str;
    /// Where it sends records, drawn in text, for the browser's card.
    const SKETCH: &'static str;
    /// Its short label in `skewjoin demo`'s table, before the copied side's letter.
    const LABEL: &'static str = Self::NAME;

    /// The strategy asked for by name on these inputs, with the reason for its choices; `None`
    /// when it cannot compute the join type.
    fn choose(inputs: &PlanInputs) -> Option<(Self, String)>;

    /// Whether, as resolved, it can compute a `how` join (a strategy resolved by hand may copy a
    /// side whose matches the join type tracks).
    fn can_compute(&self, _how: JoinType) -> Result<(), JoinError> {
        Ok(())
    }

    /// The side every worker receives a whole copy of; `None` for strategies that route each
    /// record to one place.
    fn copied_side(&self) -> Option<Side> {
        None
    }

    /// The same strategy with the settings `tuning` gives that concern it.
    fn tuned(self, _tuning: &Tuning) -> Self {
        self
    }

    /// Whether it probes the large side on the worker that feeds it, so each of those records
    /// must be fed by the worker hosting its home.
    fn probes_in_place(&self) -> bool {
        false
    }

    /// Whether it spreads kept NULL-key records over the partitions of the worker that routes
    /// them, so they must be routed by the worker hosting their home for the loads to be those
    /// of an in-memory run.
    fn spreads_nulls_locally(&self) -> bool {
        false
    }

    /// AM-Join's parameters when it is planned from key statistics counted in a first phase.
    fn needs_key_stats(&self) -> Option<AmParams> {
        None
    }

    /// The decisions its run reports beyond AM-Join's summary.
    fn reports(&self) -> Reports {
        Reports::default()
    }

    /// Per-partition input and output on these keys, predicted before it runs; `None` where the
    /// cost model does not cover it.
    fn predict<K: JoinKey + Hash>(
        &self,
        _how: JoinType,
        _left: &[K],
        _right: &[K],
        _partitioning: Partitioning,
    ) -> Option<Vec<PartitionLoad>> {
        None
    }

    /// Its dataflow over `left` and `right`, handing every output row to `logic`.
    fn build<'s, T, K, L, R, D, F>(
        self,
        left: StreamVec<'s, T, (K, L)>,
        right: StreamVec<'s, T, (K, R)>,
        setup: JoinSetup<'_, K, L, R>,
        logic: F,
    ) -> StreamVec<'s, T, D>
    where
        T: Timestamp,
        K: JoinKey,
        L: ExchangeData + Clone,
        R: ExchangeData + Clone,
        D: Clone + 'static,
        F: JoinLogic<K, L, R, D> + 'static;
}

/// Routes each side by its [`Destination`] under the one NULL rule ([`null_aware`]: a NULL key
/// goes home where its side keeps unmatched rows, else is dropped) and joins each partition's
/// records in the local kernel: Shuffle-Join and Broadcast-Join, which differ only in where each
/// side goes.
pub(crate) fn route_and_join<'s, T, K, L, R, D, F>(
    left: StreamVec<'s, T, (K, L)>,
    right: StreamVec<'s, T, (K, R)>,
    (left_to, right_to): (Destination, Destination),
    names: [&str; 2],
    setup: JoinSetup<'_, K, L, R>,
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
    let JoinSetup {
        how,
        partitioning,
        homes: (home_left, home_right),
        observers,
        ..
    } = setup;
    let left = route(
        left,
        names[0],
        null_aware(left_to, how.keeps_unmatched(Side::Left), move |k, v| {
            home_left(k, v)
        }),
    );
    let right = route(
        right,
        names[1],
        null_aware(right_to, how.keeps_unmatched(Side::Right), move |k, v| {
            home_right(k, v)
        }),
    );
    partitioned_join(
        left,
        right,
        how,
        partitioning,
        observers.loads.clone(),
        logic,
    )
}

/// Writes a strategy's [`JoinStrategy::build`] around its body, so that the signature, with its
/// generic parameters and their bounds, is written once: `join_dataflow!(|self, left, right,
/// setup, logic| { ... })`, where the body may name the parameters `T`, `K`, `L`, `R`, `D`, `F`
/// (the registry's `Resolved::build` is written with it too, with its docs and `pub`).
macro_rules! join_dataflow {
    (
        $(#[$attr:meta])*
        $($vis:ident)? |$self:ident, $left:ident, $right:ident, $setup:ident, $logic:ident|
        $body:block
    ) => {
        $(#[$attr])*
        $($vis)? fn build<'s, T, K, L, R, D, F>(
            $self,
            $left: timely::dataflow::StreamVec<'s, T, (K, L)>,
            $right: timely::dataflow::StreamVec<'s, T, (K, R)>,
            $setup: $crate::strategies::JoinSetup<'_, K, L, R>,
            $logic: F,
        ) -> timely::dataflow::StreamVec<'s, T, D>
        where
            T: timely::progress::Timestamp,
            K: skewjoin_operators::JoinKey,
            L: timely::ExchangeData + Clone,
            R: timely::ExchangeData + Clone,
            D: Clone + 'static,
            F: skewjoin_operators::join_logic::JoinLogic<K, L, R, D> + 'static,
        $body
    };
}
pub(crate) use join_dataflow;
