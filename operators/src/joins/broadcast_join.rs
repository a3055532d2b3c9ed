//! Broadcast-Join: one input is copied to every worker, the other stays where it is.
//!
//! No record of the large side moves, so a hot key on that side costs nothing extra. It cannot
//! preserve, semi-join or anti-join the broadcast side on its own (whether a broadcast row
//! matched is global knowledge); asking for that is an error at construction, never a wrong
//! answer. The IB-Join family handles those cases.

use crate::error::JoinError;
use crate::join_type::{JoinType, Side};
use crate::joins::extension::join_extension;
use crate::partitioned_join::partitioned_join;
use crate::route::{null_aware, route, Destination, RoundRobin};

/// Checks that `how` can be computed with `broadcast` as the broadcast side.
pub fn check_broadcast(how: JoinType, broadcast: Side) -> Result<(), JoinError> {
    if how.tracks_matches(broadcast) {
        Err(JoinError::BroadcastSideTracked { how, broadcast })
    } else {
        Ok(())
    }
}

join_extension! {
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
    pub trait BroadcastJoin {
        /// Joins, broadcasting side `broadcast`, and calls `logic(key, left, right, out)` once
        /// per output row.
        fn broadcast_join_with;
        /// Joins, broadcasting side `broadcast`, and emits `(key, left, right)` rows.
        fn broadcast_join;
    }
    params(broadcast: Side);
    built_by |left, right, how, config, logic| {
        check_broadcast(how, broadcast)?;
        let scope = left.scope();
        let partitioning = config.partitioning(scope.peers());
        // Each record's home is the next of this worker's partitions: the side that is not
        // broadcast stays.
        let mut spread_left = RoundRobin::local(&partitioning, scope.index());
        let mut spread_right = spread_left.clone();
        let (left_to, right_to) = match broadcast {
            Side::Right => (Destination::Home, Destination::Everywhere),
            Side::Left => (Destination::Everywhere, Destination::Home),
        };
        let left = route(
            left,
            "BroadcastJoinLeft",
            null_aware(left_to, how.keeps_unmatched(Side::Left), move |_, _| {
                spread_left.next_partition()
            }),
        );
        let right = route(
            right,
            "BroadcastJoinRight",
            null_aware(right_to, how.keeps_unmatched(Side::Right), move |_, _| {
                spread_right.next_partition()
            }),
        );
        Ok(partitioned_join(
            left,
            right,
            how,
            partitioning,
            config.loads.clone(),
            logic,
        ))
    }, fallible;
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
