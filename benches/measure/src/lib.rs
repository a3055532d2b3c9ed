//! What the measuring programs in `src/bin/` share: the sink they join into.

use skewjoin_planner::exec::{PairSink, RowRef};

/// Counts output rows and does nothing else, so that a program's time is the join's.
///
/// ```
/// use skewjoin_measure::RowCount;
/// use skewjoin_planner::exec::PairSink;
///
/// let mut sink = RowCount::default();
/// sink.emit(Some(&(0, 7)), None);
/// sink.lefts_with([(1, 7), (2, 7)].iter(), &(3, 7));
/// assert_eq!(sink.finish(), Ok(3));
/// ```
#[derive(Default)]
pub struct RowCount(u64);

impl PairSink for RowCount {
    type Summary = u64;
    fn emit(&mut self, _left: Option<&RowRef>, _right: Option<&RowRef>) {
        self.0 += 1;
    }
    fn finish(self) -> Result<u64, String> {
        Ok(self.0)
    }
}
