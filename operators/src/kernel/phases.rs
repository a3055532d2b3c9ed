//! The kernel's phases over one oriented pair of sides (a built table and the rows that probe
//! it), run from a [`Cursor`] until done or until a budget of output rows is spent.

use super::build_table::BuildTable;
use super::slots::LOOKUP_BATCH;
use crate::join_logic::JoinLogic;
use crate::join_type::{JoinType, Side};
use crate::key::JoinKey;

/// What the kernel emits, seen from the build and probe sides.
#[derive(Clone, Copy, Debug)]
pub(super) struct Emission {
    pairs: bool,
    pad_build: bool,
    pad_probe: bool,
    semi_build: bool,
    semi_probe: bool,
    anti_build: bool,
    anti_probe: bool,
}

impl Emission {
    pub(super) fn new(how: JoinType, build: Side) -> Self {
        let probe = build.other();
        Emission {
            pairs: how.emits_pairs(),
            pad_build: how.emits_pairs() && how.keeps_unmatched(build),
            pad_probe: how.emits_pairs() && how.keeps_unmatched(probe),
            semi_build: how.semi_side() == Some(build),
            semi_probe: how.semi_side() == Some(probe),
            anti_build: how.anti_side() == Some(build),
            anti_probe: how.anti_side() == Some(probe),
        }
    }

    pub(super) fn track_build(&self) -> bool {
        self.pad_build || self.semi_build || self.anti_build
    }
}

/// The values of a run of rows.
#[inline]
fn values<K, V>(rows: &[(K, V)]) -> impl ExactSizeIterator<Item = &V> {
    rows.iter().map(|(_, value)| value)
}

/// The most pairs handed to logic in one group call: a hot key's run of thousands of rows is
/// given in pieces, so that a budget of output rows
/// ([`SteppedJoin::step`](crate::kernel::SteppedJoin::step)) can stop inside it and the logic's
/// buffer never holds more than one piece past its own batch size. A piece this long still
/// amortises the call over a tight loop.
pub const GROUP_PIECE: usize = 4096;

/// Where a join of one oriented pair of sides stands: which phase, and in it which probe row or
/// group (`at`), which built row of that group (`row`), and how many of the current item's
/// output rows were already handed over (`done`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Cursor {
    pub(super) phase: Phase,
    at: usize,
    row: usize,
    done: usize,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Phase {
    /// Own probe rows look up the table and the broadcast build table.
    #[default]
    Probe,
    /// Own build groups look up the broadcast probe table.
    BroadcastProbe,
    /// Unmatched (or, for semi joins, matched) build groups are emitted alone.
    Pad,
    /// Build rows with NULL keys are emitted alone.
    PadNulls,
    Done,
}

impl Cursor {
    /// Starts `phase` from its first item.
    pub(super) fn enter(&mut self, phase: Phase) {
        *self = Cursor {
            phase,
            ..Cursor::default()
        };
    }
}

/// Hands `logic` the pairs of the rows of `run` with `probed` from the `done - before`th on, in
/// pieces of at most [`GROUP_PIECE`] and of what is left of `budget`; `before` is how many of
/// the probe row's output rows come before this run's. False if the budget ran out first.
#[inline]
#[allow(clippy::too_many_arguments)]
fn pairs_with_run<K, B, P, D, G>(
    logic: &mut G,
    key: &K,
    run: &[(K, B)],
    probed: &P,
    before: usize,
    done: &mut usize,
    budget: &mut usize,
    out: &mut Vec<D>,
) -> bool
where
    G: JoinLogic<K, B, P, D>,
{
    let end = before + run.len();
    while *done < end {
        if *budget == 0 {
            return false;
        }
        let from = *done - before;
        let take = (end - *done).min(*budget).min(GROUP_PIECE);
        logic.lefts_with(key, values(&run[from..from + take]), probed, out);
        *done += take;
        *budget -= take;
    }
    true
}

/// The kernel with fixed roles, from `cursor` on, until it is done (true) or has handed `logic`
/// `budget` output rows (false; `cursor` and the table's matched flags then say where to go
/// on). `build` rows are in `table`, `probe` rows look up; `logic` sees the build side as its
/// left. Broadcast tables: `broadcast_build` holds rows of the build side's type (probed by own
/// probe rows), `broadcast_probe` rows of the probe side's type (looked up by own build keys).
///
/// Every output row comes from one item of a phase (a probe row, a build row, a group), and
/// an item's rows come in a fixed order, so the cursor resumes exactly after the last row given:
/// a stop may fall inside a hot key's run. Marks of a group as matched are idempotent, so an
/// item whose lookups are redone on resuming marks nothing twice.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_oriented<K, B, P, D, G>(
    table: &mut BuildTable<'_, K, B>,
    probe: &[(K, P)],
    broadcast_build: Option<&BuildTable<'_, K, B>>,
    broadcast_probe: Option<&BuildTable<'_, K, P>>,
    emission: Emission,
    cursor: &mut Cursor,
    logic: &mut G,
    out: &mut Vec<D>,
    budget: &mut usize,
) -> bool
where
    K: JoinKey,
    G: JoinLogic<K, B, P, D>,
{
    if cursor.phase == Phase::Probe {
        // Probe rows look up in batches: the lookups of a batch do not depend on each other, so
        // their cache misses overlap when no emitting runs between them. A resumed batch starts
        // at the row the last one stopped in.
        let mut found = [None; LOOKUP_BATCH];
        while cursor.at < probe.len() {
            let batch = &probe[cursor.at..(cursor.at + LOOKUP_BATCH).min(probe.len())];
            table.groups_of_batch(batch, &mut found);
            for ((key, value), group) in batch.iter().zip(found) {
                let other = broadcast_build.and_then(|other| other.group_of(key));
                let own_rows = group.map_or(0, |group| group.rows().len());
                if let Some(group) = group {
                    table.mark(group);
                    if emission.pairs {
                        let run = table.group_rows(group);
                        let done = &mut cursor.done;
                        if !pairs_with_run(logic, key, run, value, 0, done, budget, out) {
                            return false;
                        }
                    }
                }
                if let (Some(other_group), Some(other)) = (other, broadcast_build) {
                    if emission.pairs {
                        let run = other.group_rows(other_group);
                        let done = &mut cursor.done;
                        if !pairs_with_run(logic, key, run, value, own_rows, done, budget, out) {
                            return false;
                        }
                    }
                }
                let keep = if group.is_some() || other.is_some() {
                    emission.semi_probe
                } else {
                    emission.pad_probe || emission.anti_probe
                };
                if keep {
                    if *budget == 0 {
                        return false;
                    }
                    logic.row(key, None, Some(value), out);
                    *budget -= 1;
                }
                cursor.at += 1;
                cursor.done = 0;
            }
        }
        cursor.enter(Phase::BroadcastProbe);
    }

    if cursor.phase == Phase::BroadcastProbe {
        if let Some(other) = broadcast_probe {
            while cursor.at < table.group_count() {
                let group = table.group_at(cursor.at);
                let key = table.group_key(group);
                if let Some(other_group) = other.group_of(key) {
                    table.mark(group);
                    if emission.pairs {
                        let probed = other.group_rows(other_group);
                        let built = table.group_rows(group);
                        while cursor.row < built.len() {
                            let value = &built[cursor.row].1;
                            while cursor.done < probed.len() {
                                if *budget == 0 {
                                    return false;
                                }
                                let take =
                                    (probed.len() - cursor.done).min(*budget).min(GROUP_PIECE);
                                let piece = &probed[cursor.done..cursor.done + take];
                                logic.left_with_rights(key, value, values(piece), out);
                                cursor.done += take;
                                *budget -= take;
                            }
                            cursor.row += 1;
                            cursor.done = 0;
                        }
                    }
                }
                cursor.at += 1;
                cursor.row = 0;
            }
        }
        cursor.enter(Phase::Pad);
    }

    if cursor.phase == Phase::Pad {
        if emission.track_build() {
            while cursor.at < table.group_count() {
                let group = table.group_at(cursor.at);
                let keep = if table.is_matched(group) {
                    emission.semi_build
                } else {
                    emission.pad_build || emission.anti_build
                };
                if keep {
                    let rows = table.group_rows(group);
                    while cursor.row < rows.len() {
                        if *budget == 0 {
                            return false;
                        }
                        let (key, built) = &rows[cursor.row];
                        logic.row(key, Some(built), None, out);
                        *budget -= 1;
                        cursor.row += 1;
                    }
                }
                cursor.at += 1;
                cursor.row = 0;
            }
        }
        cursor.enter(Phase::PadNulls);
    }

    if cursor.phase == Phase::PadNulls {
        if emission.pad_build || emission.anti_build {
            let nulls = table.null_rows();
            while cursor.at < nulls.len() {
                if *budget == 0 {
                    return false;
                }
                let (key, built) = &nulls[cursor.at];
                logic.row(key, Some(built), None, out);
                *budget -= 1;
                cursor.at += 1;
            }
        }
        cursor.enter(Phase::Done);
    }
    true
}
