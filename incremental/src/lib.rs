//! A skew-resilient incremental join for [differential dataflow](https://docs.rs/differential-dataflow)
//! collections.
//!
//! Differential's `join` arranges both inputs by key, so every record of a key, and the whole
//! product of a key hot on both sides, is on one worker. [`SkewJoin::skew_join`] produces the
//! same collection at every time, and spreads hot keys the way the batch AM-Join does:
//!
//! 1. **Counting**: each side's records per key are counted as the collections change
//!    (`count_total`, after summing a batch's updates of a key on the worker that has them).
//! 2. **Planning**: a key whose load (`left + right + left * right`, see [`Tuning`]) reaches a
//!    threshold gets a [`Grid`] of cells on distinct workers; each left record of the key goes to
//!    one row of cells, each right record to one column, so every pair meets in exactly one cell.
//!    A key hot on one side only gets one row or column: the other side's records are copied to
//!    the cells that hold the hot side's. Cold keys stay on their home worker, as in `join`.
//!    The plan has hysteresis: a hot key goes home only below a quarter of the threshold, and its
//!    grid is chosen again only once a side's count has doubled or halved.
//! 3. **Moving**: the plan is a collection, and records reach their cells through a join with
//!    it; when a key's grid changes at time `t`, its records are retracted from the old cells and
//!    inserted in the new ones at `t`, and so are the pairs they made. The output never misses or
//!    doubles a pair, whatever the plan: [`join_with_plan`] takes any plan (at most one grid per
//!    key at a time), and the tests give it random ones that change at every time.
//!
//! Each worker's load (records held, updates and output updates processed, plan changes) is
//! counted into a [`LoadMeter`] where one is given.
//!
//! What it costs and needs:
//! - each record is held twice (arranged by `(key, salt)` to be routed, then in its cells),
//!   besides one count per key; a hot key's records are copied to a row or column of cells;
//! - a plan change retracts and re-inserts the pairs of the moved key from different workers,
//!   so the output is not consolidated: `.consolidate()` it where that matters;
//! - timestamps must be totally ordered (the plan of a key at `t` follows from its plan
//!   before `t`), which rules out use inside `iterate`;
//! - values must implement `Hash` (a hot key's records are split by a hash of their value), and
//!   both sides share one signed-integer difference type ([`Weight`]).
//!
//! Which joins: [`SkewJoin::skew_join`], [`SkewJoin::skew_join_map`], and the semijoin and
//! antijoin ([`SkewJoin::skew_semijoin`], [`SkewJoin::skew_antijoin`]) with differential's
//! semantics (multiplicities multiply; antijoin subtracts the semijoin), and the left and full
//! outer joins ([`SkewJoin::skew_left_join`], [`SkewJoin::skew_full_join`]), which differential
//! has no operators for: the join plus the records whose key has no record on the other side
//! (no positive count there), padded with `None`; in differential terms, the join plus the
//! antijoin with the other side's keys of positive count. One plan routes every part.
//!
//! ```
//! use differential_dataflow::input::Input;
//! use skewjoin_incremental::{LoadMeter, SkewJoin, Tuning};
//!
//! timely::example(|scope| {
//!     // (customer, order) and (customer, region)
//!     let (_, orders) = scope.new_collection_from(vec![(1u32, 10u32), (1, 11), (2, 12)]);
//!     let (_, regions) = scope.new_collection_from(vec![(1u32, 7u32), (2, 8)]);
//!     let expected = orders.clone().join(regions.clone());
//!     let meter = LoadMeter::new(); // after steps: meter.get().held, .updates, .output_updates, ...
//!     orders
//!         .skew_join(regions, Tuning { hot_load: 2 }, Some(meter))
//!         .assert_eq(expected);
//! });
//! ```

mod grid;
mod join;
mod load;
mod local;
mod plan;
mod route;

use std::hash::Hash;

use differential_dataflow::difference::{Abelian, Multiply};
use differential_dataflow::lattice::Lattice;
use differential_dataflow::{Data, ExchangeData, VecCollection};
use timely::order::TotalOrder;
use timely::progress::Timestamp;

pub use grid::{Grid, Tuning};
pub use join::{join_with_plan, skew_join_core};
pub use load::{max_over_mean, LoadMeter, WorkerLoad};

/// A left outer join's output: `(key, (left value, right value or None))`.
pub type LeftJoined<'s, T, K, V, V2, R> = VecCollection<'s, T, (K, (V, Option<V2>)), R>;

/// A full outer join's output: `(key, (left value or None, right value or None))`.
pub type FullJoined<'s, T, K, V, V2, R> = VecCollection<'s, T, (K, (Option<V>, Option<V2>)), R>;

/// A difference type the join can count records with: a signed integer.
pub trait Weight:
    ExchangeData + Abelian + Multiply<Self, Output = Self> + From<i8> + Ord + Copy
{
    /// The number of records this difference stands for (negative for a retraction).
    fn records(&self) -> i64;
}

macro_rules! integer_weight {
    ($($t:ty),*) => {$(
        impl Weight for $t {
            fn records(&self) -> i64 {
                i64::try_from(*self).unwrap_or(if *self < 0 { i64::MIN } else { i64::MAX })
            }
        }
    )*};
}
integer_weight!(i8, i16, i32, i64, i128, isize);

/// Skew-resilient joins of a collection of `(key, value)` records.
pub trait SkewJoin<'s, T, K, V, R>: Sized
where
    T: Timestamp + Lattice + TotalOrder,
    K: ExchangeData + Hash,
    V: ExchangeData + Hash,
    R: Weight,
{
    /// The collection `self.join(other)`, with hot keys spread over grids of workers.
    fn skew_join<V2>(
        self,
        other: VecCollection<'s, T, (K, V2), R>,
        tuning: Tuning,
        meter: Option<LoadMeter>,
    ) -> VecCollection<'s, T, (K, (V, V2)), R>
    where
        V2: ExchangeData + Hash,
    {
        self.skew_join_map(other, tuning, meter, |key, v, v2| {
            (key.clone(), (v.clone(), v2.clone()))
        })
    }

    /// The collection `self.join_map(other, logic)`, with hot keys spread over grids of workers.
    fn skew_join_map<V2, D, L>(
        self,
        other: VecCollection<'s, T, (K, V2), R>,
        tuning: Tuning,
        meter: Option<LoadMeter>,
        logic: L,
    ) -> VecCollection<'s, T, D, R>
    where
        V2: ExchangeData + Hash,
        D: Data,
        L: FnMut(&K, &V, &V2) -> D + 'static;

    /// The left outer join: every pair of `self.join(other)` as `(key, (v, Some(v2)))`, and each
    /// record of `self` whose key has no record in `other` (no positive count) as
    /// `(key, (v, None))`. Hot keys are spread for both parts by one plan.
    fn skew_left_join<V2>(
        self,
        other: VecCollection<'s, T, (K, V2), R>,
        tuning: Tuning,
        meter: Option<LoadMeter>,
    ) -> LeftJoined<'s, T, K, V, V2, R>
    where
        V2: ExchangeData + Hash;

    /// The full outer join: the left outer join, and each record of `other` whose key has no
    /// record in `self` as `(key, (None, Some(v2)))`; every value is an `Option`.
    fn skew_full_join<V2>(
        self,
        other: VecCollection<'s, T, (K, V2), R>,
        tuning: Tuning,
        meter: Option<LoadMeter>,
    ) -> FullJoined<'s, T, K, V, V2, R>
    where
        V2: ExchangeData + Hash;

    /// The collection `self.semijoin(keys)`: each record once per occurrence of its key in
    /// `keys`. A key frequent in `self` spreads its records, and `keys`' records of it are
    /// copied to where they went.
    fn skew_semijoin(
        self,
        keys: VecCollection<'s, T, K, R>,
        tuning: Tuning,
        meter: Option<LoadMeter>,
    ) -> VecCollection<'s, T, (K, V), R> {
        self.skew_join_map(keys.map(|key| (key, ())), tuning, meter, |key, v, ()| {
            (key.clone(), v.clone())
        })
    }

    /// The collection `self.antijoin(keys)`: `self` less its semijoin with `keys` (for `keys`
    /// with multiplicities 0 or 1, the records whose key is not in `keys`).
    fn skew_antijoin(
        self,
        keys: VecCollection<'s, T, K, R>,
        tuning: Tuning,
        meter: Option<LoadMeter>,
    ) -> VecCollection<'s, T, (K, V), R>;
}

impl<'s, T, K, V, R> SkewJoin<'s, T, K, V, R> for VecCollection<'s, T, (K, V), R>
where
    T: Timestamp + Lattice + TotalOrder,
    K: ExchangeData + Hash,
    V: ExchangeData + Hash,
    R: Weight,
{
    fn skew_join_map<V2, D, L>(
        self,
        other: VecCollection<'s, T, (K, V2), R>,
        tuning: Tuning,
        meter: Option<LoadMeter>,
        logic: L,
    ) -> VecCollection<'s, T, D, R>
    where
        V2: ExchangeData + Hash,
        D: Data,
        L: FnMut(&K, &V, &V2) -> D + 'static,
    {
        skew_join_core(self, other, tuning, meter, logic)
    }

    fn skew_left_join<V2>(
        self,
        other: VecCollection<'s, T, (K, V2), R>,
        tuning: Tuning,
        meter: Option<LoadMeter>,
    ) -> LeftJoined<'s, T, K, V, V2, R>
    where
        V2: ExchangeData + Hash,
    {
        let (matched, left_only, _) = join::outer_parts(self, other, tuning, meter, false);
        matched
            .map(|(key, (v, v2))| (key, (v, Some(v2))))
            .concat(left_only.map(|(key, v)| (key, (v, None))))
    }

    fn skew_full_join<V2>(
        self,
        other: VecCollection<'s, T, (K, V2), R>,
        tuning: Tuning,
        meter: Option<LoadMeter>,
    ) -> FullJoined<'s, T, K, V, V2, R>
    where
        V2: ExchangeData + Hash,
    {
        let (matched, left_only, right_only) = join::outer_parts(self, other, tuning, meter, true);
        let right_only = right_only.expect("asked for");
        matched
            .map(|(key, (v, v2))| (key, (Some(v), Some(v2))))
            .concat(left_only.map(|(key, v)| (key, (Some(v), None))))
            .concat(right_only.map(|(key, v2)| (key, (None, Some(v2)))))
    }

    fn skew_antijoin(
        self,
        keys: VecCollection<'s, T, K, R>,
        tuning: Tuning,
        meter: Option<LoadMeter>,
    ) -> VecCollection<'s, T, (K, V), R> {
        let matched = self.clone().skew_semijoin(keys, tuning, meter);
        self.concat(matched.negate())
    }
}
