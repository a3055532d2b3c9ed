//! The kernel run to the end in one call: the smaller own side built, the other probing.

use super::build_table::BuildTable;
use super::phases::{run_oriented, Cursor, Emission};
use crate::join_logic::{each_row, JoinLogic, Swapped};
use crate::join_type::{JoinType, Side};
use crate::key::JoinKey;

/// Joins one partition's own rows, plus optional tables of broadcast rows, and calls `emit` once
/// per output row with `(key, left, right)`: both present for a pair, one present for a padded
/// row or a semi/anti row.
///
/// The smaller own side is built (and reordered by key); the other probes. Own rows are complete for their keys (every
/// own record of a key is in this partition), so padding and semi/anti decisions about them are
/// final here. Broadcast rows only ever pair with own rows of the other side.
///
/// ```
/// use skewjoin_operators::{kernel::hash_join, JoinType};
///
/// let mut left = vec![(1u64, "a"), (2, "b"), (2, "c")];
/// let mut right = vec![(2u64, 'x'), (3, 'y')];
/// let mut out = Vec::new();
/// hash_join(&mut left, &mut right, JoinType::Full, |k, l, r| out.push((*k, l.copied(), r.copied())));
/// out.sort();
/// assert_eq!(out, vec![
///     (1, Some("a"), None),
///     (2, Some("b"), Some('x')),
///     (2, Some("c"), Some('x')),
///     (3, None, Some('y')),
/// ]);
/// ```
pub fn local_join<K, L, R, E>(
    left: &mut [(K, L)],
    right: &mut [(K, R)],
    broadcast_left: Option<&BuildTable<'_, K, L>>,
    broadcast_right: Option<&BuildTable<'_, K, R>>,
    how: JoinType,
    mut emit: E,
) where
    K: JoinKey,
    E: FnMut(&K, Option<&L>, Option<&R>),
{
    let mut logic =
        each_row(|key: &K, l: Option<&L>, r: Option<&R>, _: &mut Vec<()>| emit(key, l, r));
    local_join_logic(
        left,
        right,
        broadcast_left,
        broadcast_right,
        how,
        &mut logic,
        &mut Vec::new(),
    )
}

/// [`local_join`] handing its output to [`JoinLogic`]: a key's rows matching one row of the
/// other side go to `logic` as one group call. `out` is passed through to `logic`.
pub fn local_join_logic<K, L, R, D, G>(
    left: &mut [(K, L)],
    right: &mut [(K, R)],
    broadcast_left: Option<&BuildTable<'_, K, L>>,
    broadcast_right: Option<&BuildTable<'_, K, R>>,
    how: JoinType,
    logic: &mut G,
    out: &mut Vec<D>,
) where
    K: JoinKey,
    G: JoinLogic<K, L, R, D>,
{
    if left.is_empty() && right.is_empty() {
        return;
    }
    if left.len() <= right.len() {
        join_oriented(
            left,
            right,
            broadcast_left,
            broadcast_right,
            Emission::new(how, Side::Left),
            logic,
            out,
        );
    } else {
        join_oriented(
            right,
            left,
            broadcast_right,
            broadcast_left,
            Emission::new(how, Side::Right),
            &mut Swapped(logic),
            out,
        );
    }
}

/// Joins two slices of rows in memory: [`local_join`] without broadcast rows.
pub fn hash_join<K, L, R, E>(left: &mut [(K, L)], right: &mut [(K, R)], how: JoinType, emit: E)
where
    K: JoinKey,
    E: FnMut(&K, Option<&L>, Option<&R>),
{
    local_join(left, right, None, None, how, emit)
}

/// The kernel with fixed roles, run to the end: [`run_oriented`] on a table built here.
fn join_oriented<K, B, P, D, G>(
    build: &mut [(K, B)],
    probe: &[(K, P)],
    broadcast_build: Option<&BuildTable<'_, K, B>>,
    broadcast_probe: Option<&BuildTable<'_, K, P>>,
    emission: Emission,
    logic: &mut G,
    out: &mut Vec<D>,
) where
    K: JoinKey,
    G: JoinLogic<K, B, P, D>,
{
    let mut table = BuildTable::new(build, emission.track_build());
    let mut budget = usize::MAX;
    run_oriented(
        &mut table,
        probe,
        broadcast_build,
        broadcast_probe,
        emission,
        &mut Cursor::default(),
        logic,
        out,
        &mut budget,
    );
}
