//! Broadcast-Join: one input is copied to every worker, the other stays where it is.
//!
//! No record of the large side moves, so a hot key on that side costs nothing extra. It cannot
//! preserve, semi-join or anti-join the broadcast side on its own (whether a broadcast row
//! matched is global knowledge); asking for that is an error at construction, never a wrong
//! answer. The IB-Join family handles those cases.

use timely::dataflow::StreamVec;
use timely::progress::Timestamp;
use timely::ExchangeData;

use crate::config::JoinConfig;
use crate::error::JoinError;
use crate::join_logic::each_row;
use crate::join_type::{JoinType, Side};
use crate::key::JoinKey;
use crate::partitioned_join::partitioned_join;
use crate::reference::JoinedRow;
use crate::route::{route, RoundRobin, Route};

/// Checks that `how` can be computed with `broadcast` as the broadcast side.
pub fn check_broadcast(how: JoinType, broadcast: Side) -> Result<(), JoinError> {
    if how.tracks_matches(broadcast) {
        Err(JoinError::BroadcastSideTracked { how, broadcast })
    } else {
        Ok(())
    }
}

/// An equi-join that broadcasts one input.
///
/// ```
/// use skewjoin_operators::{BroadcastJoin, JoinConfig, JoinType, Side};
/// use timely::dataflow::operators::{Capture, ToStream};
/// use timely::dataflow::operators::capture::Extract;
///
/// let captured = timely::example(|scope| {
///     let large = (0..6u64).map(|i| (i % 2, i)).to_stream(scope).container::<Vec<_>>();
///     let small = vec![(1u64, 'o')].to_stream(scope).container::<Vec<_>>();
///     // A left outer join keeps every large-side row; broadcasting the right side is fine.
///     large
///         .broadcast_join(small, JoinType::Left, Side::Right, &JoinConfig::new())
///         .expect("the broadcast side is not preserved")
///         .capture()
/// });
/// let rows: Vec<_> = captured.extract().into_iter().flat_map(|(_, rows)| rows).collect();
/// assert_eq!(rows.len(), 6);
/// assert_eq!(rows.iter().filter(|(_, _, small)| small.is_some()).count(), 3);
/// ```
pub trait BroadcastJoin<'s, T: Timestamp, K: JoinKey, L: ExchangeData + Clone> {
    /// Joins, broadcasting side `broadcast`, and calls `logic(key, left, right, out)` once per
    /// output row.
    fn broadcast_join_with<R, D, F>(
        self,
        right: StreamVec<'s, T, (K, R)>,
        how: JoinType,
        broadcast: Side,
        config: &JoinConfig,
        logic: F,
    ) -> Result<StreamVec<'s, T, D>, JoinError>
    where
        R: ExchangeData + Clone,
        D: Clone + 'static,
        F: FnMut(&K, Option<&L>, Option<&R>, &mut Vec<D>) + 'static;

    /// Joins, broadcasting side `broadcast`, and emits `(key, left, right)` rows.
    fn broadcast_join<R>(
        self,
        right: StreamVec<'s, T, (K, R)>,
        how: JoinType,
        broadcast: Side,
        config: &JoinConfig,
    ) -> Result<StreamVec<'s, T, JoinedRow<K, L, R>>, JoinError>
    where
        R: ExchangeData + Clone,
        Self: Sized,
    {
        self.broadcast_join_with(right, how, broadcast, config, |key, left, right, out| {
            out.push((key.clone(), left.cloned(), right.cloned()))
        })
    }
}

/// The rule for the side that stays: round-robin over this worker's partitions; NULL keys are
/// dropped unless the side keeps its unmatched rows.
pub fn stay_in_place<K: JoinKey, V>(
    spread: RoundRobin,
    keep_nulls: bool,
) -> impl FnMut(&K, &V) -> Route + 'static {
    let mut spread = spread;
    move |key, _| {
        if key.is_null() && !keep_nulls {
            Route::Drop
        } else {
            Route::To(spread.next_partition())
        }
    }
}

/// The rule for the broadcast side: NULL keys match nothing and are not kept, so they are dropped.
pub fn broadcast_all<K: JoinKey, V>(key: &K, _value: &V) -> Route {
    if key.is_null() {
        Route::Drop
    } else {
        Route::Broadcast
    }
}

impl<'s, T, K, L> BroadcastJoin<'s, T, K, L> for StreamVec<'s, T, (K, L)>
where
    T: Timestamp,
    K: JoinKey,
    L: ExchangeData + Clone,
{
    fn broadcast_join_with<R, D, F>(
        self,
        right: StreamVec<'s, T, (K, R)>,
        how: JoinType,
        broadcast: Side,
        config: &JoinConfig,
        logic: F,
    ) -> Result<StreamVec<'s, T, D>, JoinError>
    where
        R: ExchangeData + Clone,
        D: Clone + 'static,
        F: FnMut(&K, Option<&L>, Option<&R>, &mut Vec<D>) + 'static,
    {
        check_broadcast(how, broadcast)?;
        let scope = self.scope();
        let partitioning = config.partitioning(scope.peers());
        let spread = RoundRobin::local(&partitioning, scope.index());
        let (left, right) = match broadcast {
            Side::Right => (
                route(
                    self,
                    "StayLeft",
                    stay_in_place(spread, how.keeps_unmatched(Side::Left)),
                ),
                route(right, "BroadcastRight", broadcast_all),
            ),
            Side::Left => (
                route(self, "BroadcastLeft", broadcast_all),
                route(
                    right,
                    "StayRight",
                    stay_in_place(spread, how.keeps_unmatched(Side::Right)),
                ),
            ),
        };
        Ok(partitioned_join(
            left,
            right,
            how,
            partitioning,
            config.loads.clone(),
            each_row(logic),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preserving_the_broadcast_side_is_refused() {
        assert!(check_broadcast(JoinType::Left, Side::Left).is_err());
        assert!(check_broadcast(JoinType::Full, Side::Right).is_err());
        assert!(check_broadcast(JoinType::LeftSemi, Side::Left).is_err());
        assert!(check_broadcast(JoinType::RightAnti, Side::Right).is_err());
        assert!(check_broadcast(JoinType::Left, Side::Right).is_ok());
        assert!(check_broadcast(JoinType::LeftSemi, Side::Right).is_ok());
        assert!(check_broadcast(JoinType::Inner, Side::Left).is_ok());
        let message = check_broadcast(JoinType::Full, Side::Left)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("full join cannot broadcast the left side"),
            "{message}"
        );
    }
}
