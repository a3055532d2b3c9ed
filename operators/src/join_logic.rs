//! What a join does with its output rows: [`JoinLogic`], called row by row, or with a whole
//! group of one side's rows that pair with one row of the other.
//!
//! A hot key's output is most of a skewed join's work: millions of pairs, each handed over by a
//! call. When each call borrows shared state (a `RefCell` of the consumer's sink, its counters),
//! those borrows and counters, not the pairs, bound the speed. The group calls let a consumer
//! borrow once and run one tight loop over the group with its sums in registers. Closures, which
//! see one row at a time, become logic through [`each_row`].

/// The consumer of a join's output rows. `out` is the output stream's buffer: logic pushes there
/// what the stream should carry (possibly nothing, when it folds rows into a summary instead).
///
/// The group calls must have the effect of calling [`JoinLogic::row`] once per pair, in order;
/// their default implementations do just that.
pub trait JoinLogic<K, L, R, D> {
    /// One output row: both sides for a pair, one side for a padded, semi or anti row.
    fn row(&mut self, key: &K, left: Option<&L>, right: Option<&R>, out: &mut Vec<D>);

    /// The pairs of every row of `lefts` with `right`, all of key `key`.
    #[inline]
    fn lefts_with<'v>(
        &mut self,
        key: &K,
        lefts: impl ExactSizeIterator<Item = &'v L>,
        right: &R,
        out: &mut Vec<D>,
    ) where
        L: 'v,
    {
        for left in lefts {
            self.row(key, Some(left), Some(right), out);
        }
    }

    /// The pairs of `left` with every row of `rights`, all of key `key`.
    #[inline]
    fn left_with_rights<'v>(
        &mut self,
        key: &K,
        left: &L,
        rights: impl ExactSizeIterator<Item = &'v R>,
        out: &mut Vec<D>,
    ) where
        R: 'v,
    {
        for right in rights {
            self.row(key, Some(left), Some(right), out);
        }
    }
}

/// A closure called once per output row, as [`JoinLogic`]; made by [`each_row`].
#[derive(Clone, Debug)]
pub struct EachRow<F>(F);

/// Makes `logic(key, left, right, out)`, called once per output row, a [`JoinLogic`].
///
/// ```
/// use skewjoin_operators::join_logic::{each_row, JoinLogic};
///
/// let mut logic = each_row(|key: &u64, l: Option<&char>, r: Option<&char>, out: &mut Vec<_>| {
///     out.push((*key, l.copied(), r.copied()))
/// });
/// let mut out = Vec::new();
/// logic.lefts_with(&7, ['a', 'b'].iter(), &'x', &mut out);
/// assert_eq!(out, vec![(7, Some('a'), Some('x')), (7, Some('b'), Some('x'))]);
/// ```
pub fn each_row<K, L, R, D, F>(logic: F) -> EachRow<F>
where
    F: FnMut(&K, Option<&L>, Option<&R>, &mut Vec<D>),
{
    EachRow(logic)
}

impl<K, L, R, D, F> JoinLogic<K, L, R, D> for EachRow<F>
where
    F: FnMut(&K, Option<&L>, Option<&R>, &mut Vec<D>),
{
    #[inline]
    fn row(&mut self, key: &K, left: Option<&L>, right: Option<&R>, out: &mut Vec<D>) {
        (self.0)(key, left, right, out)
    }
}

/// Logic seen with the sides swapped: `L` and `R` trade places, so a kernel can call its build
/// side "left" whichever input it built, and IB-Join its small side.
pub(crate) struct Swapped<G>(pub(crate) G);

impl<K, L, R, D, G> JoinLogic<K, R, L, D> for Swapped<G>
where
    G: JoinLogic<K, L, R, D>,
{
    #[inline]
    fn row(&mut self, key: &K, right: Option<&R>, left: Option<&L>, out: &mut Vec<D>) {
        self.0.row(key, left, right, out)
    }

    #[inline]
    fn lefts_with<'v>(
        &mut self,
        key: &K,
        rights: impl ExactSizeIterator<Item = &'v R>,
        left: &L,
        out: &mut Vec<D>,
    ) where
        R: 'v,
    {
        self.0.left_with_rights(key, left, rights, out)
    }

    #[inline]
    fn left_with_rights<'v>(
        &mut self,
        key: &K,
        right: &R,
        lefts: impl ExactSizeIterator<Item = &'v L>,
        out: &mut Vec<D>,
    ) where
        L: 'v,
    {
        self.0.lefts_with(key, lefts, right, out)
    }
}

/// Logic borrowed is logic: a caller can lend its logic to a join and keep it.
impl<K, L, R, D, G> JoinLogic<K, L, R, D> for &mut G
where
    G: JoinLogic<K, L, R, D>,
{
    #[inline]
    fn row(&mut self, key: &K, left: Option<&L>, right: Option<&R>, out: &mut Vec<D>) {
        (**self).row(key, left, right, out)
    }

    #[inline]
    fn lefts_with<'v>(
        &mut self,
        key: &K,
        lefts: impl ExactSizeIterator<Item = &'v L>,
        right: &R,
        out: &mut Vec<D>,
    ) where
        L: 'v,
    {
        (**self).lefts_with(key, lefts, right, out)
    }

    #[inline]
    fn left_with_rights<'v>(
        &mut self,
        key: &K,
        left: &L,
        rights: impl ExactSizeIterator<Item = &'v R>,
        out: &mut Vec<D>,
    ) where
        R: 'v,
    {
        (**self).left_with_rights(key, left, rights, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Logic that records which call each row came through.
    #[derive(Default)]
    struct Calls(Vec<(&'static str, u8, Option<char>, Option<char>)>);

    impl JoinLogic<u8, char, char, ()> for Calls {
        fn row(&mut self, key: &u8, l: Option<&char>, r: Option<&char>, _: &mut Vec<()>) {
            self.0.push(("row", *key, l.copied(), r.copied()));
        }
        fn lefts_with<'v>(
            &mut self,
            key: &u8,
            lefts: impl ExactSizeIterator<Item = &'v char>,
            right: &char,
            _: &mut Vec<()>,
        ) {
            for l in lefts {
                self.0.push(("lefts_with", *key, Some(*l), Some(*right)));
            }
        }
    }

    #[test]
    fn swapped_logic_trades_sides_and_keeps_group_calls() {
        let mut calls = Calls::default();
        let mut out = Vec::new();
        let mut swapped = Swapped(&mut calls);
        // Seen swapped, `right_with_lefts` of the inner logic is `lefts_with` of the outer.
        swapped.left_with_rights(&1, &'r', ['a', 'b'].iter(), &mut out);
        swapped.row(&2, Some(&'r'), None, &mut out);
        // The default `left_with_rights` of the inner logic goes row by row.
        swapped.lefts_with(&3, ['x'].iter(), &'l', &mut out);
        assert_eq!(
            calls.0,
            vec![
                ("lefts_with", 1, Some('a'), Some('r')),
                ("lefts_with", 1, Some('b'), Some('r')),
                ("row", 2, None, Some('r')),
                ("row", 3, Some('l'), Some('x')),
            ]
        );
    }
}
