//! How a strategy is chosen for a join, for one process, a cluster, `explain`, the Python package
//! and the browser build: `auto`'s whole policy; an asked-for strategy is its module's choice
//! ([`JoinStrategy::choose`](crate::strategies::JoinStrategy::choose): the side it copies, whether
//! it can compute the join type).
//!
//! `auto` decides in two steps, and only here:
//!
//! 1. **By the sizes** ([`choose`]): IB-Join on a Small-Large join, where the smaller side fits
//!    the broadcast budget and a copy of it on every worker costs less than a shuffle by the
//!    machines' [`WorkCosts`](crate::work_costs::WorkCosts) ([`small_large`]); else Shuffle-Join.
//! 2. **By the keys** ([`resolve`]), only where step 1 would shuffle: a look at the keys
//!    ([`KeyCheck`]: counted on one process, sampled on every process of a cluster, see
//!    [`crate::skew_check`]) that finds a key Shuffle-Join would overload hands the join to what
//!    `-s am` runs on these inputs: AM-Join, or IB-Join where copying
//!    the small side costs less than AM-Join's shuffle and key count.
//!
//! Then the user's tuning is applied ([`Resolved::tuned`]: each strategy takes what concerns it),
//! once.

use std::fmt;

use skewjoin_operators::JoinType;

use crate::am_join::params::AmParams;
// The rules of the sizes, under their paths from before they had a module of their own.
pub use crate::sizes::{broadcast_side, fits_broadcast, small_large, smaller_side, Instead};
use crate::skew_check::{Skew, SkewFinding};
use crate::strategies::{Am, Ib, Shuffle};
use crate::strategy::{Choice, PlanInputs, Resolved, Strategy, Tuning};

#[cfg(test)]
mod tests;

/// Bytes one broadcast row is estimated to take in a worker's copy of the index: the row itself
/// (a key and a row reference, about 40 bytes), its share of the key table (key, id and row span
/// at a load factor below 7/8) and of the exchange buffers it passed through, rounded up to leave
/// room for string keys.
pub const INDEXED_ROW_BYTES: u64 = 128;

/// The share of available memory, as a divisor, that all workers' copies of a broadcast side may
/// take together: a quarter, leaving the rest to the large side held for the probe, the output
/// and everything else on the machine.
pub const BROADCAST_MEMORY_DIVISOR: u64 = 4;

/// The broadcast budget in rows for `available_bytes` of memory and `workers` workers in one
/// process: a side may be broadcast when `rows x INDEXED_ROW_BYTES x W` fits in a quarter of the
/// available memory, since every worker builds its own copy of the index. The planner does no IO;
/// the caller measures the memory (the `skewjoin` binary reads `MemAvailable`).
///
/// ```
/// use skewjoin_planner::choose::broadcast_limit_for_memory;
/// // 16 GiB available, 8 workers: 4 GiB for 8 copies of 128-byte rows.
/// assert_eq!(broadcast_limit_for_memory(16 << 30, 8), 4 << 20);
/// assert_eq!(broadcast_limit_for_memory(0, 8), 0);
/// ```
pub fn broadcast_limit_for_memory(available_bytes: u64, workers: usize) -> u64 {
    available_bytes / BROADCAST_MEMORY_DIVISOR / (INDEXED_ROW_BYTES * workers.max(1) as u64)
}

/// Resolves `strategy` for these inputs: `auto` by its policy, `am` on a Small-Large join by
/// IB-Join, any other strategy by its module ([`JoinStrategy::choose`](crate::strategies::JoinStrategy::choose)).
/// An explicit strategy that cannot compute this join type is an error naming the alternatives.
pub fn choose(strategy: Strategy, inputs: &PlanInputs) -> Result<Choice, CannotCompute> {
    if strategy == Strategy::Auto {
        return Ok(choose_auto(inputs));
    }
    // The AM-Join paper sends Small-Large joins to IB-Join: with a whole side within the
    // broadcast budget there is nothing for key classes to balance, and IB-Join can index
    // either side for every join type.
    if strategy == Strategy::Am {
        if let Some((small, why)) = small_large(inputs, Instead::AmJoin) {
            return Ok(Choice {
                resolved: Resolved::Ib(Ib { small }),
                reason: format!(
                    "asked for AM-Join, which runs IB-Join on Small-Large joins: {why}"
                ),
            });
        }
    }
    strategy.asked(inputs).ok_or(CannotCompute {
        strategy,
        how: inputs.how,
    })
}

/// IB-Join on a Small-Large join ([`small_large`]), else Shuffle-Join (which the runtime replaces
/// with AM-Join when the key counts say it pays). IB-Join rather than a plain Broadcast-Join even
/// where the join type allows one: it probes its index as the large side streams in, where
/// Broadcast-Join holds both sides until the input ends (100,000 x 5M, inner, W = 2: 0.43
/// against 0.48 s; on 2, 4 and 8 emulated machines 0.44, 0.56 and 0.83 s against 0.49, 0.63 and
/// 0.94 s), and it
/// copies the same records.
fn choose_auto(inputs: &PlanInputs) -> Choice {
    match small_large(inputs, Instead::Shuffle) {
        Some((small, why)) => Choice {
            resolved: Resolved::Ib(Ib { small }),
            reason: format!("{why}: IB-Join copies it"),
        },
        None => Choice {
            resolved: Resolved::Shuffle(Shuffle),
            reason: "no side is small enough to copy profitably".into(),
        },
    }
}

/// An asked-for strategy that cannot compute the join type: Broadcast-Join, for a join that
/// keeps or filters the rows of both sides by whether they matched anywhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CannotCompute {
    /// The strategy asked for.
    pub strategy: Strategy,
    /// The join type it cannot compute.
    pub how: JoinType,
}

impl fmt::Display for CannotCompute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the {} strategy cannot compute a {} join: it keeps or filters rows of both sides by whether they matched anywhere; use --strategy shuffle",
            self.strategy, self.how
        )
    }
}

impl std::error::Error for CannotCompute {}

impl From<CannotCompute> for String {
    fn from(error: CannotCompute) -> String {
        error.to_string()
    }
}

/// What a look at the keys found, where the sizes alone would have `auto` shuffle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyCheck {
    /// A key that would overload a Shuffle-Join partition.
    Skewed(SkewFinding),
    /// No key would: Shuffle-Join it is. `Some(reason)` replaces the sizes' reason with what was
    /// looked at (a cluster's sample); `None` keeps it.
    Even(Option<String>),
    /// Not looked at before the join: AM-Join counts each timestamp's keys inside the dataflow
    /// and splits the hot ones itself (the builder's `auto`), so it is what a copy of a small
    /// side is weighed against.
    PerTimestamp,
}

impl KeyCheck {
    /// What one process's count of every key found.
    pub fn counted(finding: Option<SkewFinding>) -> KeyCheck {
        match finding {
            Some(finding) => KeyCheck::Skewed(finding),
            None => KeyCheck::Even(None),
        }
    }

    /// What the skew check on every process's key sample found ([`crate::skew_check::sampled_skew`]):
    /// no process sees every key before a cluster's join, so the reason says it was a sample.
    pub fn sampled(skew: Option<Skew>) -> KeyCheck {
        match skew {
            Some(skew) => KeyCheck::Skewed(SkewFinding {
                am_pays: skew.am_pays(),
                reason: format!(
                    "a sample of every process's keys finds a key of about {}{} {}",
                    skew.described(),
                    if skew.am_pays() { ":" } else { ", but" },
                    skew.verdict()
                ),
            }),
            None => KeyCheck::Even(Some(
                "a sample of every process's keys finds no key that would unbalance Shuffle-Join"
                    .into(),
            )),
        }
    }
}

/// `auto`'s choice once the keys are looked at, one rule for one process and a cluster: with
/// a hot key that makes AM-Join pay, what `-s am` runs on these inputs (AM-Join, or IB-Join
/// where copying the small side costs less than AM-Join's shuffle and key count), else
/// `shuffle`, the choice made on the sizes alone, with this finding added to its reason.
fn decide(finding: SkewFinding, shuffle: Choice, inputs: &PlanInputs) -> Choice {
    if !finding.am_pays {
        return Choice {
            resolved: shuffle.resolved,
            reason: format!("{}; {}", shuffle.reason, finding.reason),
        };
    }
    match small_large(inputs, Instead::AmJoin) {
        Some((small, why)) => Choice {
            resolved: Resolved::Ib(Ib { small }),
            reason: format!(
                "{}; but {why}, so IB-Join copies the {small} side rather than AM-Join \
                 splitting the hot keys",
                finding.reason
            ),
        },
        None => Choice {
            resolved: Resolved::Am(Am {
                params: AmParams::default(),
            }),
            reason: format!(
                "{}; AM-Join counts the keys exactly, splits the hot ones and shuffles the rest",
                finding.reason
            ),
        },
    }
}

/// Chooses the strategy of a join, `auto`'s whole policy: [`choose`] by the sizes; where `auto`
/// would then shuffle, `keys` looks at the keys (it is called only then, as it may read every
/// key) and a skewed key hands the join to AM-Join or IB-Join (what `-s am` runs); last,
/// the tuning. An asked-for strategy that cannot compute the join type is an error.
pub fn resolve<E: From<CannotCompute>>(
    strategy: Strategy,
    inputs: &PlanInputs,
    tuning: &Tuning,
    keys: impl FnOnce() -> Result<KeyCheck, E>,
) -> Result<Choice, E> {
    let mut choice = choose(strategy, inputs)?;
    if strategy == Strategy::Auto && choice.resolved == Resolved::Shuffle(Shuffle) {
        choice = match keys()? {
            KeyCheck::Skewed(finding) => decide(finding, choice, inputs),
            KeyCheck::Even(Some(reason)) => Choice { reason, ..choice },
            KeyCheck::Even(None) => choice,
            KeyCheck::PerTimestamp => decide(
                SkewFinding {
                    am_pays: true,
                    reason: "AM-Join counts each timestamp's keys in the dataflow".into(),
                },
                choice,
                inputs,
            ),
        };
    }
    choice.resolved = choice.resolved.tuned(tuning);
    Ok(choice)
}
