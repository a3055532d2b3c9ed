//! DER and DDR, the published baselines IB-Join is measured against: IB-Join's dataflow with
//! the small side's matches tracked by row instead of by key, each in its own
//! [`TrackingMode`]. Each keeps its extension trait in a module of its own; both run
//! [`join_in_mode`].

use timely::dataflow::StreamVec;
use timely::progress::Timestamp;
use timely::ExchangeData;

use crate::config::JoinConfig;
use crate::ib_join::{baseline_join, TrackingMode};
use crate::join_logic::JoinLogic;
use crate::join_type::{JoinType, Side};
use crate::joins::extension::join_extension;
use crate::key::JoinKey;
use crate::route::RoundRobin;

pub mod der_join {
    //! DER (Duplication and Efficient Redistribution): a published baseline for Small-Large joins that preserve the small side, built
    //! to measure IB-Join against.
    //!
    //! The small side is broadcast with a unique id per row and the large side stays in place and
    //! probes, as in IB-Join; then each partition sends the ids of the broadcast rows it did not match to the owner of each id (P ranges of row ids, range r owned by partition r); a row reported unmatched by all P partitions is globally unmatched and is emitted by its owner, padded (or as is for anti joins; the others, for semi joins).
    //! "All" means all P partitions, not the W workers: every partition probes and reports, so the
    //! figures do not depend on how partitions are spread over workers. The shared machinery is
    //! [`ib_join::baseline_join`](crate::ib_join::baseline_join); tracking traffic is counted per
    //! partition like IB-Join's.

    use super::*;

    join_extension! {
        /// The Der baseline join, `small` side broadcast.
        ///
        /// ```
        /// use skewjoin_operators::der_join::DerJoin;
        /// use skewjoin_operators::{JoinConfig, JoinType, Side};
        /// use timely::dataflow::operators::{Capture, ToStream};
        /// use timely::dataflow::operators::capture::Extract;
        ///
        /// let captured = timely::example(|scope| {
        ///     let large = (0..6u64).map(|i| (i % 2, i)).to_stream(scope).container::<Vec<_>>();
        ///     let small = vec![(1u64, 'o'), (5, 'x')].to_stream(scope).container::<Vec<_>>();
        ///     large
        ///         .der_join(small, JoinType::Full, Side::Right, &JoinConfig::new().with_partitions(3))
        ///         .capture()
        /// });
        /// let rows: Vec<_> = captured.extract().into_iter().flat_map(|(_, rows)| rows).collect();
        /// assert_eq!(rows.len(), 7);
        /// assert!(rows.contains(&(5, None, Some('x'))));
        /// ```
        pub trait DerJoin {
            /// Joins with `small` broadcast and calls `logic(key, left, right, out)` per output row.
            fn der_join_with;
            /// Joins with `small` broadcast and emits `(key, left, right)` rows.
            fn der_join;
        }
        params(small: Side);
        built_by |left, right, how, config, logic| {
            join_in_mode(TrackingMode::Der, left, right, how, small, config, logic)
        };
    }
}

pub mod ddr_join {
    //! DDR (Duplication and Direct Redistribution): a published baseline for Small-Large joins that preserve the small side, built
    //! to measure IB-Join against.
    //!
    //! The small side is broadcast with a unique id per row and the large side stays in place and
    //! probes, as in IB-Join; then each partition sends the broadcast rows it did not match, themselves, to the owner of each row id (P ranges, range r owned by partition r); a row received from all P partitions is emitted by its owner, padded (or as is for anti joins; the others, for semi joins).
    //! "All" means all P partitions, not the W workers: every partition probes and reports, so the
    //! figures do not depend on how partitions are spread over workers. The shared machinery is
    //! [`ib_join::baseline_join`](crate::ib_join::baseline_join); tracking traffic is counted per
    //! partition like IB-Join's.

    use super::*;

    join_extension! {
        /// The Ddr baseline join, `small` side broadcast.
        ///
        /// ```
        /// use skewjoin_operators::ddr_join::DdrJoin;
        /// use skewjoin_operators::{JoinConfig, JoinType, Side};
        /// use timely::dataflow::operators::{Capture, ToStream};
        /// use timely::dataflow::operators::capture::Extract;
        ///
        /// let captured = timely::example(|scope| {
        ///     let large = (0..6u64).map(|i| (i % 2, i)).to_stream(scope).container::<Vec<_>>();
        ///     let small = vec![(1u64, 'o'), (5, 'x')].to_stream(scope).container::<Vec<_>>();
        ///     large
        ///         .ddr_join(small, JoinType::Full, Side::Right, &JoinConfig::new().with_partitions(3))
        ///         .capture()
        /// });
        /// let rows: Vec<_> = captured.extract().into_iter().flat_map(|(_, rows)| rows).collect();
        /// assert_eq!(rows.len(), 7);
        /// assert!(rows.contains(&(5, None, Some('x'))));
        /// ```
        pub trait DdrJoin {
            /// Joins with `small` broadcast and calls `logic(key, left, right, out)` per output row.
            fn ddr_join_with;
            /// Joins with `small` broadcast and emits `(key, left, right)` rows.
            fn ddr_join;
        }
        params(small: Side);
        built_by |left, right, how, config, logic| {
            join_in_mode(TrackingMode::Ddr, left, right, how, small, config, logic)
        };
    }
}

/// Joins `left` and `right` with `small` broadcast and its matches tracked in `mode`; every
/// record's home is the next of its worker's partitions, so the large side stays.
fn join_in_mode<'s, T, K, L, R, D, F>(
    mode: TrackingMode,
    left: StreamVec<'s, T, (K, L)>,
    right: StreamVec<'s, T, (K, R)>,
    how: JoinType,
    small: Side,
    config: &JoinConfig,
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
    let scope = left.scope();
    let partitioning = config.partitioning(scope.peers());
    let mut spread_left = RoundRobin::local(&partitioning, scope.index());
    let mut spread_right = spread_left.clone();
    let home_left = move |_: &K, _: &L| spread_left.next_partition();
    let home_right = move |_: &K, _: &R| spread_right.next_partition();
    baseline_join(
        left,
        right,
        how,
        small,
        mode,
        partitioning,
        (home_left, home_right),
        config.loads.clone(),
        logic,
    )
}
