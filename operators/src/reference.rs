//! The reference every strategy is checked against: a plain nested-loop join, written for
//! obviousness rather than speed.

use crate::join_type::JoinType;
use crate::key::JoinKey;

/// One output row: the key, the left value and the right value (`None` where padded, or absent
/// for semi and anti joins).
pub type JoinedRow<K, L, R> = (K, Option<L>, Option<R>);

/// Joins by comparing every left row with every right row.
pub fn nested_loop_join<K, L, R>(
    left: &[(K, L)],
    right: &[(K, R)],
    how: JoinType,
) -> Vec<JoinedRow<K, L, R>>
where
    K: JoinKey,
    L: Clone,
    R: Clone,
{
    let mut left_matched = vec![false; left.len()];
    let mut right_matched = vec![false; right.len()];
    let mut out = Vec::new();
    for (i, (lk, lv)) in left.iter().enumerate() {
        for (j, (rk, rv)) in right.iter().enumerate() {
            if !lk.is_null() && lk == rk {
                left_matched[i] = true;
                right_matched[j] = true;
                if how.emits_pairs() {
                    out.push((lk.clone(), Some(lv.clone()), Some(rv.clone())));
                }
            }
        }
    }
    use JoinType::*;
    for (i, (lk, lv)) in left.iter().enumerate() {
        let keep = match how {
            Left | Full | LeftAnti => !left_matched[i],
            LeftSemi => left_matched[i],
            _ => false,
        };
        if keep {
            out.push((lk.clone(), Some(lv.clone()), None));
        }
    }
    for (j, (rk, rv)) in right.iter().enumerate() {
        let keep = match how {
            Right | Full | RightAnti => !right_matched[j],
            RightSemi => right_matched[j],
            _ => false,
        };
        if keep {
            out.push((rk.clone(), None, Some(rv.clone())));
        }
    }
    out
}
