//! Shuffle-Join: exchange both inputs by the hash of their key, then join each partition locally.
//!
//! The baseline, and the path for cold keys in the skew-aware strategies. Every record of a key
//! lands in one partition, which is what makes outer, semi and anti joins local decisions, and
//! also why one hot key overloads one partition.

use timely::dataflow::StreamVec;
use timely::progress::Timestamp;
use timely::ExchangeData;

use crate::config::JoinConfig;
use crate::join_logic::JoinLogic;
use crate::join_type::{JoinType, Side};
use crate::joins::extension::join_extension;
use crate::key::JoinKey;
use crate::partitioned_join::partitioned_join;
use crate::route::{by_key_hash, route};

join_extension! {
    /// Hash-partitioned equi-join of two streams of `(key, value)` pairs.
    ///
    /// ```
    /// use skewjoin_operators::{JoinConfig, JoinType, ShuffleJoin};
    /// use timely::dataflow::operators::{Capture, ToStream};
    /// use timely::dataflow::operators::capture::Extract;
    ///
    /// let captured = timely::example(|scope| {
    ///     let left = vec![(1u64, 'a'), (2, 'b')].to_stream(scope).container::<Vec<_>>();
    ///     let right = vec![(2u64, 20), (3, 30)].to_stream(scope).container::<Vec<_>>();
    ///     left.shuffle_join(right, JoinType::Full, &JoinConfig::new()).capture()
    /// });
    /// let mut rows: Vec<_> = captured.extract().into_iter().flat_map(|(_, rows)| rows).collect();
    /// rows.sort();
    /// assert_eq!(rows, vec![(1, Some('a'), None), (2, Some('b'), Some(20)), (3, None, Some(30))]);
    /// ```
    pub trait ShuffleJoin {
        /// Joins, calling `logic(key, left, right, out)` once per output row; `logic` pushes what
        /// the output stream should carry into `out`.
        fn shuffle_join_with;
        /// Joins and emits `(key, left, right)` rows.
        fn shuffle_join;
    }
    params();
    built_by |left, right, how, config, logic| {
        shuffle_join_logic(left, right, how, config, logic)
    };
}

/// [`ShuffleJoin::shuffle_join_with`] handing output rows to [`JoinLogic`], which may take a hot
/// key's pairs a group at a time.
pub fn shuffle_join_logic<'s, T, K, L, R, D, F>(
    left: StreamVec<'s, T, (K, L)>,
    right: StreamVec<'s, T, (K, R)>,
    how: JoinType,
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
    let worker = scope.index();
    let left = route(
        left,
        "ShuffleLeft",
        by_key_hash(partitioning, worker, how.keeps_unmatched(Side::Left)),
    );
    let right = route(
        right,
        "ShuffleRight",
        by_key_hash(partitioning, worker, how.keeps_unmatched(Side::Right)),
    );
    partitioned_join(left, right, how, partitioning, config.loads.clone(), logic)
}
