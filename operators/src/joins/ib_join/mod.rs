//! IB-Join (Index-Broadcast-Join): broadcast the small side as a key index and track matches by
//! key id, so that joins preserving, semi-joining or anti-joining the small side can broadcast it.
//!
//! The small side S is copied to every worker and grouped by key; each distinct key gets a dense
//! id, its rank among the sorted distinct keys, so every worker (which receives the same set)
//! assigns the same id to the same key without talking to the others. The large side stays in
//! place and probes. When the join type needs to know which S rows matched anywhere, each
//! partition records the ids it matched; the id space is cut into P contiguous ranges, range `r`
//! owned by partition `r`, and each partition sends every owner only its range (a bitset, or a
//! sorted id list when that is smaller). The owner ORs what it receives and emits the S rows of
//! its never-matched ids (padded, or as is for anti) or, for semi joins, of its matched ids, each
//! exactly once. Matching is a property of the key, so no row ids and no padded rows move.
//!
//! The large side does not move: [`ib_join_in_place`] probes each large record on the worker
//! that holds it, with no routing operator and no exchange, straight from the batches it
//! arrived in (only with fewer partitions than workers, where some workers host none, are large
//! records exchanged to their home partitions). [`ib_join_routed`] takes a large side routed
//! anywhere, for callers that move it on purpose.
//!
//! The dataflow has no loop: the tracking step is a second exchange after the probe at the same
//! timestamp, so the output at `t` is complete once the tracking operator's frontier passes `t`.
//! Traffic is counted per partition into the [`LoadRecorder`]: broadcast rows received and
//! tracking messages sent ([`TrafficCounters`](crate::load::TrafficCounters)).

mod baseline;
mod dataflow;
mod index;
mod large_input;
mod owners;
mod probe;
mod tracking;

pub use baseline::baseline_join;
pub use tracking::{id_range, MatchSet, TrackPayload, TrackingMode, MESSAGE_HEADER_BYTES};

use timely::dataflow::StreamVec;
use timely::progress::Timestamp;
use timely::ExchangeData;

use crate::join_logic::{each_row, JoinLogic, Swapped};
use crate::join_type::{JoinType, Side};
use crate::joins::extension::join_extension;
use crate::key::JoinKey;
use crate::load::LoadRecorder;
use crate::partition::Partitioning;
use crate::route::{null_aware, route, Destination, RoundRobin, Routed};
use dataflow::{ib_core, ib_with_home};
use index::by_key;
use large_input::routed_large;

join_extension! {
    /// An equi-join that broadcasts the small side as a key index and tracks its matches by key id.
    ///
    /// ```
    /// use skewjoin_operators::{IbJoin, JoinConfig, JoinType, Side};
    /// use timely::dataflow::operators::{Capture, ToStream};
    /// use timely::dataflow::operators::capture::Extract;
    ///
    /// let captured = timely::example(|scope| {
    ///     let large = (0..6u64).map(|i| (i % 2, i)).to_stream(scope).container::<Vec<_>>();
    ///     let small = vec![(1u64, 'o'), (5, 'x')].to_stream(scope).container::<Vec<_>>();
    ///     // A full join preserves the broadcast side: key 5 matches nothing and comes out padded.
    ///     large
    ///         .ib_join(small, JoinType::Full, Side::Right, &JoinConfig::new())
    ///         .capture()
    /// });
    /// let rows: Vec<_> = captured.extract().into_iter().flat_map(|(_, rows)| rows).collect();
    /// assert_eq!(rows.len(), 7);
    /// assert!(rows.contains(&(5, None, Some('x'))));
    /// ```
    pub trait IbJoin {
        /// Joins with `small` as the broadcast side and calls `logic(key, left, right, out)` once
        /// per output row.
        fn ib_join_with;
        /// Joins with `small` as the broadcast side and emits `(key, left, right)` rows.
        fn ib_join;
    }
    params(small: Side);
    built_by |left, right, how, config, logic| {
        let scope = left.scope();
        let partitioning = config.partitioning(scope.peers());
        let mut spread_left = RoundRobin::local(&partitioning, scope.index());
        let mut spread_right = spread_left.clone();
        ib_join_in_place(
            left,
            right,
            how,
            small,
            partitioning,
            (
                move |_: &K, _: &L| spread_left.next_partition(),
                move |_: &K, _: &R| spread_right.next_partition(),
            ),
            config.loads.clone(),
            logic,
        )
    };
}

/// IB-Join over routed inputs: the `small` side must be broadcast (its NULL-keyed rows, if kept,
/// routed to a partition; see [`null_aware`]), the other side routed to partitions (any rule:
/// each large record is probed where it lands).
pub fn ib_join_routed<'s, T, K, L, R, D, F>(
    left: StreamVec<'s, T, Routed<K, L>>,
    right: StreamVec<'s, T, Routed<K, R>>,
    how: JoinType,
    small: Side,
    partitioning: Partitioning,
    loads: LoadRecorder,
    logic: F,
) -> StreamVec<'s, T, D>
where
    T: Timestamp,
    K: JoinKey,
    L: ExchangeData + Clone,
    R: ExchangeData + Clone,
    D: Clone + 'static,
    F: FnMut(&K, Option<&L>, Option<&R>, &mut Vec<D>) + 'static,
{
    match small {
        Side::Left => ib_core(
            left,
            routed_large(right),
            how,
            small,
            TrackingMode::Ib,
            by_key,
            partitioning,
            loads,
            each_row(logic),
        ),
        Side::Right => ib_core(
            right,
            routed_large(left),
            how,
            small,
            TrackingMode::Ib,
            by_key,
            partitioning,
            loads,
            Swapped(each_row(logic)),
        ),
    }
}

/// IB-Join whose large side stays where it is: the `small` side is broadcast as an index (its
/// NULL-keyed rows, when kept, go to their home), and each large record is probed on the worker
/// that holds it, with no routing operator and no exchange, counted under its home partition.
/// `homes` name each record's partition and must name one of the worker the record enters on,
/// as they do when every worker feeds the rows of its own partitions. With fewer partitions
/// than workers some workers host none, and their large records are exchanged to their homes.
#[allow(clippy::too_many_arguments)]
pub fn ib_join_in_place<'s, T, K, L, R, HL, HR, D, F>(
    left: StreamVec<'s, T, (K, L)>,
    right: StreamVec<'s, T, (K, R)>,
    how: JoinType,
    small: Side,
    partitioning: Partitioning,
    homes: (HL, HR),
    loads: LoadRecorder,
    logic: F,
) -> StreamVec<'s, T, D>
where
    T: Timestamp,
    K: JoinKey,
    L: ExchangeData + Clone,
    R: ExchangeData + Clone,
    HL: FnMut(&K, &L) -> u32 + 'static,
    HR: FnMut(&K, &R) -> u32 + 'static,
    D: Clone + 'static,
    F: JoinLogic<K, L, R, D> + 'static,
{
    let (home_left, home_right) = homes;
    let keep_left = how.keeps_unmatched(Side::Left);
    let keep_right = how.keeps_unmatched(Side::Right);
    match small {
        Side::Left => ib_with_home(
            route(
                left,
                "IndexLeft",
                null_aware(Destination::Everywhere, keep_left, home_left),
            ),
            right,
            home_right,
            keep_right,
            how,
            small,
            TrackingMode::Ib,
            by_key,
            partitioning,
            loads,
            logic,
        ),
        Side::Right => ib_with_home(
            route(
                right,
                "IndexRight",
                null_aware(Destination::Everywhere, keep_right, home_right),
            ),
            left,
            home_left,
            keep_left,
            how,
            small,
            TrackingMode::Ib,
            by_key,
            partitioning,
            loads,
            Swapped(logic),
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use timely::dataflow::operators::{Input, Inspect};
    use timely::dataflow::InputHandle;

    use super::IbJoin;
    use crate::{JoinConfig, JoinType, Side};

    #[test]
    fn large_records_are_probed_as_they_come_once_the_small_side_is_complete() {
        timely::execute_directly(|worker| {
            let mut large = InputHandle::new();
            let mut small = InputHandle::new();
            let rows = Rc::new(RefCell::new(Vec::new()));
            let seen = Rc::clone(&rows);
            worker.dataflow::<u32, _, _>(|scope| {
                let large = scope.input_from(&mut large);
                let small = scope.input_from(&mut small);
                large
                    .ib_join(small, JoinType::Left, Side::Right, &JoinConfig::new())
                    .inspect(move |row| seen.borrow_mut().push(*row));
            });
            let mut step = |large: &mut InputHandle<u32, _>, rows: &Rc<RefCell<Vec<_>>>| {
                // What was sent goes in now, without closing or advancing the large input.
                large.flush();
                for _ in 0..50 {
                    worker.step();
                }
                let mut taken: Vec<(u64, Option<u64>, Option<char>)> = rows.take();
                taken.sort();
                taken
            };
            small.send((1u64, 'a'));
            large.send((1u64, 10u64));
            // The small side is still open at time 0: nothing can be probed yet.
            assert_eq!(step(&mut large, &rows), []);
            small.advance_to(1);
            // Complete at time 0 now: the large record held so far is probed, and each that
            // comes after as it comes, though the large side is still open at time 0.
            assert_eq!(step(&mut large, &rows), [(1, Some(10), Some('a'))]);
            large.send((1, 11));
            large.send((2, 12));
            assert_eq!(
                step(&mut large, &rows),
                [(1, Some(11), Some('a')), (2, Some(12), None)]
            );
            // The next time, with another small row.
            small.send((2, 'b'));
            small.advance_to(2);
            large.advance_to(1);
            large.send((2, 13));
            assert_eq!(step(&mut large, &rows), [(2, Some(13), Some('b'))]);
        });
    }
}
