//! The kernel run a budget of output rows at a time, over two sides that it owns.

use super::build_table::{BuildTable, TableIndex};
use super::phases::{run_oriented, Cursor, Emission, Phase};
use crate::join_logic::{JoinLogic, Swapped};
use crate::join_type::{JoinType, Side};
use crate::key::JoinKey;

/// One join of two sides that it owns, run a budget of output rows at a time:
/// [`step`](Self::step) hands rows to the logic until the budget is spent and returns, keeping
/// the built table and its place, and the next call goes on from the row after the last one
/// given.
/// Joining in steps yields the same rows as
/// [`local_join_logic`](crate::kernel::local_join_logic), in the same order.
///
/// This is what lets a timely operator bound its output per activation: it joins a step, gives
/// the step's rows to the stream, and asks to be scheduled again, so downstream operators
/// consume the output while the join runs instead of after it.
///
/// ```
/// use skewjoin_operators::join_logic::each_row;
/// use skewjoin_operators::kernel::SteppedJoin;
/// use skewjoin_operators::JoinType;
///
/// // One key: 300 x 200 pairs, handed over at most 1,000 per step.
/// let mut join = SteppedJoin::new();
/// join.load((0..300).map(|i| (7u64, i)).collect(), (0..200).map(|i| (7u64, i)).collect());
/// let mut pairs = 0;
/// let mut logic = each_row(|_: &u64, _: Option<&i32>, _: Option<&i32>, _: &mut Vec<()>| pairs += 1);
/// let mut steps = 0;
/// loop {
///     let mut budget = 1_000;
///     steps += 1;
///     if join.step(None, None, JoinType::Inner, &mut logic, &mut Vec::new(), &mut budget) {
///         break;
///     }
///     assert_eq!(budget, 0, "a step stops only when its budget is spent");
/// }
/// assert_eq!((pairs, steps), (60_000, 60));
/// ```
#[derive(Debug)]
pub struct SteppedJoin<K, L, R> {
    left: Vec<(K, L)>,
    right: Vec<(K, R)>,
    /// Whether the left side is built (it is the smaller); otherwise the right is.
    left_builds: bool,
    /// The built side's table once the first step built it.
    index: Option<TableIndex>,
    cursor: Cursor,
}

impl<K: JoinKey, L, R> Default for SteppedJoin<K, L, R> {
    fn default() -> Self {
        SteppedJoin {
            left: Vec::new(),
            right: Vec::new(),
            left_builds: true,
            index: None,
            cursor: Cursor::default(),
        }
    }
}

impl<K: JoinKey, L, R> SteppedJoin<K, L, R> {
    /// A join with no rows: it is done at once.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a join of `left` and `right`, dropping what is left of the one before.
    pub fn load(&mut self, left: Vec<(K, L)>, right: Vec<(K, R)>) {
        self.left = left;
        self.right = right;
        self.restart();
    }

    /// Starts a join of the rows that `fill` puts into the two sides, which it is handed empty
    /// but with the room of the last join's rows: joins one after another reuse their memory.
    pub fn load_with(&mut self, fill: impl FnOnce(&mut Vec<(K, L)>, &mut Vec<(K, R)>)) {
        self.left.clear();
        self.right.clear();
        fill(&mut self.left, &mut self.right);
        self.restart();
    }

    fn restart(&mut self) {
        self.left_builds = self.left.len() <= self.right.len();
        self.index = None;
        self.cursor = Cursor::default();
    }

    /// Lets go of the rows and their memory.
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// Joins on from where the last step stopped, as
    /// [`local_join_logic`](crate::kernel::local_join_logic) joins, handing `logic` at most
    /// `budget` output rows (and taking them off it). True once every row is given; then the
    /// sides are emptied (their room kept for [`load_with`](Self::load_with)). False when the
    /// budget ran out first: call again, with the same broadcast tables, to go on.
    #[allow(clippy::too_many_arguments)]
    pub fn step<D, G>(
        &mut self,
        broadcast_left: Option<&BuildTable<'_, K, L>>,
        broadcast_right: Option<&BuildTable<'_, K, R>>,
        how: JoinType,
        logic: &mut G,
        out: &mut Vec<D>,
        budget: &mut usize,
    ) -> bool
    where
        G: JoinLogic<K, L, R, D>,
    {
        if self.cursor.phase == Phase::Done || (self.left.is_empty() && self.right.is_empty()) {
            self.cursor.enter(Phase::Done);
            return true;
        }
        let done = if self.left_builds {
            let emission = Emission::new(how, Side::Left);
            let mut table = match self.index.take() {
                Some(index) => BuildTable::with_index(&self.left, index),
                None => BuildTable::new(&mut self.left, emission.track_build()),
            };
            let done = run_oriented(
                &mut table,
                &self.right,
                broadcast_left,
                broadcast_right,
                emission,
                &mut self.cursor,
                logic,
                out,
                budget,
            );
            self.index = (!done).then(|| table.into_index());
            done
        } else {
            let emission = Emission::new(how, Side::Right);
            let mut table = match self.index.take() {
                Some(index) => BuildTable::with_index(&self.right, index),
                None => BuildTable::new(&mut self.right, emission.track_build()),
            };
            let done = run_oriented(
                &mut table,
                &self.left,
                broadcast_right,
                broadcast_left,
                emission,
                &mut self.cursor,
                &mut Swapped(&mut *logic),
                out,
                budget,
            );
            self.index = (!done).then(|| table.into_index());
            done
        };
        if done {
            self.left.clear();
            self.right.clear();
            self.cursor.enter(Phase::Done);
        }
        done
    }
}
