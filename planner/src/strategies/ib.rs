//! IB-Join and the baselines it is measured against, DER and DDR: the small side broadcast, the
//! large side probed where it lies, and the small side's matches tracked for the joins that keep
//! or filter its rows: by key id (IB-Join, the small side as a key index), by the row ids of
//! unmatched rows (DER) or by the unmatched rows themselves (DDR), each sent to its owner.

use serde::{Deserialize, Serialize};
use skewjoin_operators::ib_join::{baseline_join, ib_join_in_place, TrackingMode};
use skewjoin_operators::Side;

use super::kind::{join_dataflow, JoinStrategy};
use crate::sizes::{smaller_side, PlanInputs};

/// IB-Join with `small` broadcast as a key index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ib {
    /// The side copied to every worker.
    pub small: Side,
}

/// The DER baseline with `small` broadcast.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Der {
    /// The side copied to every worker.
    pub small: Side,
}

/// The DDR baseline with `small` broadcast.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ddr {
    /// The side copied to every worker.
    pub small: Side,
}

/// What the three share (they copy the smaller side and probe the other in place, so its records
/// must be fed at home); they differ in how matches are tracked, `$mode`.
macro_rules! index_broadcast {
    (
        $strategy:ident,
        $mode:expr,
        name: $name:literal,
        $(alias: $alias:literal,)?
        about: $about:literal,
        sketch: $sketch:literal $(,)?
    ) => {
        impl JoinStrategy for $strategy {
            const NAME: &'static str = $name;
            $(const ALIASES: &'static [&'static str] = &[$alias];)?
            const ABOUT: &'static str = $about;
            const SKETCH: &'static str = $sketch;

            fn choose(inputs: &PlanInputs) -> Option<(Self, String)> {
                let small = smaller_side(inputs);
                Some((
                    $strategy { small },
                    format!("asked for; the {small} side is the smaller side"),
                ))
            }

            fn copied_side(&self) -> Option<Side> {
                Some(self.small)
            }

            fn probes_in_place(&self) -> bool {
                true
            }

            // The large side stays on the worker that feeds it: no routing, no exchange.
            join_dataflow!(|self, left, right, setup, logic| {
                let (home_left, home_right) = setup.homes;
                let homes = (
                    move |k: &K, v: &L| home_left(k, v),
                    move |k: &K, v: &R| home_right(k, v),
                );
                let (how, partitioning) = (setup.how, setup.partitioning);
                let loads = setup.observers.loads.clone();
                match $mode {
                    TrackingMode::Ib => ib_join_in_place(
                        left, right, how, self.small, partitioning, homes, loads, logic,
                    ),
                    mode => baseline_join(
                        left, right, how, self.small, mode, partitioning, homes, loads, logic,
                    ),
                }
            });
        }
    };
}

index_broadcast!(
    Ib,
    TrackingMode::Ib,
    name: "ib",
    alias: "ib-join",
    about: "IB-Join (Small-Large): copies the small side to every partition as an index of its \
        keys; the large side probes it where it lies. For outer joins, matched key ids travel \
        as bitsets.",
    sketch: "small side ──copy (key index)──▶ every partition\nlarge side ── stays, probes ──▶ \
        its partition\nmatched key ids ──bitsets──▶ owner pads the never matched",
);
index_broadcast!(
    Der,
    TrackingMode::Der,
    name: "der",
    about: "DER, a baseline for IB-Join: copies the small side with row ids; each partition \
        sends the ids of its unmatched small rows to their owner, which pads those all P sent.",
    sketch: "small side ──copy with row ids──▶ every partition\nunmatched row ids ──▶ owner: \
        unmatched everywhere → padded",
);
index_broadcast!(
    Ddr,
    TrackingMode::Ddr,
    name: "ddr",
    about: "DDR, a baseline for IB-Join: as DER, but each partition sends its unmatched small \
        rows themselves, already padded; a row received from all P partitions is emitted.",
    sketch: "small side ──copy──▶ every partition\nunmatched padded rows ──▶ owner: received P \
        times → emitted",
);
