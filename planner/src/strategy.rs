//! The registry: every strategy a user can ask for by name, and what each resolves to. Each
//! strategy is a module of [`crate::strategies`]; the one list below makes [`Strategy`] (the
//! names) and [`Resolved`] (a strategy with every choice made) from them, and turns each of
//! [`JoinStrategy`]'s methods into one of theirs. How a strategy is chosen for a join is
//! [`mod@crate::choose`].

use std::fmt;
use std::hash::Hash;
use std::str::FromStr;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use skewjoin_operators::{JoinError, JoinKey, JoinType, PartitionLoad, Partitioning, Side};

use crate::am_join::params::AmParams;
use crate::report::Reports;
pub use crate::sizes::PlanInputs;
use crate::strategies;
use crate::strategies::join_dataflow;
pub use crate::strategies::{JoinSetup, JoinStrategy, VprpSettings};
pub use crate::tuning::Tuning;

/// Makes [`Strategy`] and [`Resolved`] from the list of strategies, each named by its type in
/// [`crate::strategies`].
macro_rules! registry {
    ($( $(#[$doc:meta])* $variant:ident, )*) => {
        /// A strategy as named on the command line.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Strategy {
            /// Let the planner choose from the input sizes, the join type and the keys.
            Auto,
            $( $(#[$doc])* $variant, )*
        }

        /// How many strategies run a join themselves.
        const CONCRETE_COUNT: usize = [$(stringify!($variant)),*].len();

        impl Strategy {
            /// Every strategy that runs a join itself (not `auto`).
            pub const CONCRETE: [Strategy; CONCRETE_COUNT] = [$(Strategy::$variant),*];

            /// The command-line name.
            pub const fn name(self) -> &'static str {
                match self {
                    Strategy::Auto => "auto",
                    $( Strategy::$variant => <strategies::$variant as JoinStrategy>::NAME, )*
                }
            }

            /// Other names accepted for it.
            pub const fn aliases(self) -> &'static [&'static str] {
                match self {
                    Strategy::Auto => &[],
                    $( Strategy::$variant => <strategies::$variant as JoinStrategy>::ALIASES, )*
                }
            }

            /// What it does, in two sentences.
            pub const fn about(self) -> &'static str {
                match self {
                    Strategy::Auto => AUTO_ABOUT,
                    $( Strategy::$variant => <strategies::$variant as JoinStrategy>::ABOUT, )*
                }
            }

            /// Where it sends records, drawn in text; empty for `auto`.
            pub const fn sketch(self) -> &'static str {
                match self {
                    Strategy::Auto => "",
                    $( Strategy::$variant => <strategies::$variant as JoinStrategy>::SKETCH, )*
                }
            }

            /// The strategy as asked for by name on these inputs (its module's
            /// [`JoinStrategy::choose`]); `None` where it cannot compute the join type, and for
            /// `auto`, whose choice is a policy ([`crate::choose::choose`]).
            pub(crate) fn asked(self, inputs: &PlanInputs) -> Option<Choice> {
                match self {
                    Strategy::Auto => None,
                    $( Strategy::$variant => {
                        <strategies::$variant as JoinStrategy>::choose(inputs).map(
                            |(plan, reason)| Choice {
                                resolved: Resolved::$variant(plan),
                                reason,
                            },
                        )
                    } )*
                }
            }
        }

        /// A strategy with every choice made: what the dataflow is built from.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Resolved {
            $( $(#[$doc])* $variant(strategies::$variant), )*
        }

        $(
            impl From<strategies::$variant> for Resolved {
                fn from(plan: strategies::$variant) -> Resolved {
                    Resolved::$variant(plan)
                }
            }
        )*

        impl Resolved {
            /// The strategy a user names to run this one.
            pub fn strategy(&self) -> Strategy {
                match self {
                    $( Resolved::$variant(_) => Strategy::$variant, )*
                }
            }

            /// Its short label in `skewjoin demo`'s table ([`JoinStrategy::LABEL`]).
            pub fn label(&self) -> &'static str {
                match self {
                    $( Resolved::$variant(_) => <strategies::$variant as JoinStrategy>::LABEL, )*
                }
            }

            /// Whether, as resolved, it can compute a `how` join ([`JoinStrategy::can_compute`]:
            /// a Broadcast-Join resolved by hand may copy a side the join type tracks).
            pub fn can_compute(&self, how: JoinType) -> Result<(), JoinError> {
                match self {
                    $( Resolved::$variant(plan) => plan.can_compute(how), )*
                }
            }

            /// The side every worker receives a whole copy of (Broadcast-Join's broadcast
            /// side, the IB family's small side), which `--metrics` and the browser report as
            /// `broadcast_side`; `None` for strategies that route each record to one place.
            pub fn copied_side(&self) -> Option<Side> {
                match self {
                    $( Resolved::$variant(plan) => plan.copied_side(), )*
                }
            }

            /// The same strategy with the settings `tuning` gives that concern it
            /// ([`JoinStrategy::tuned`]).
            pub fn tuned(self, tuning: &Tuning) -> Resolved {
                match self {
                    $( Resolved::$variant(plan) => Resolved::$variant(plan.tuned(tuning)), )*
                }
            }

            /// Whether the strategy probes the large side on the worker that feeds it (IB-Join
            /// and its baselines), so each of those records must be fed by the worker hosting
            /// its home.
            pub fn probes_in_place(&self) -> bool {
                match self {
                    $( Resolved::$variant(plan) => plan.probes_in_place(), )*
                }
            }

            /// Whether the strategy spreads kept NULL-key records over the partitions of the
            /// worker that routes them (VPRP and the basic Tree-Join), so they must be routed
            /// by the worker hosting their home for the loads to be those of an in-memory run.
            /// Shuffle-Join, Broadcast-Join and AM-Join send such records to their home
            /// partition themselves.
            pub fn spreads_nulls_locally(&self) -> bool {
                match self {
                    $( Resolved::$variant(plan) => plan.spreads_nulls_locally(), )*
                }
            }

            /// AM-Join's parameters when the strategy is planned from key statistics, counted
            /// in a first phase; `None` for strategies that need none.
            pub fn needs_key_stats(&self) -> Option<AmParams> {
                match self {
                    $( Resolved::$variant(plan) => plan.needs_key_stats(), )*
                }
            }

            /// The decisions its run reports beyond AM-Join's summary.
            pub fn reports(&self) -> Reports {
                match self {
                    $( Resolved::$variant(plan) => plan.reports(), )*
                }
            }

            /// Predicts per-partition input and output on these keys ([`JoinStrategy::predict`]);
            /// `None` for strategies the cost model does not cover. Peak records held equal
            /// input, the cost model's rule (a join that holds all of a timestamp's records until
            /// both inputs are complete; IB-Join holds less, as it probes the large side as it
            /// comes, and its load report counts by the same rule).
            pub fn predict<K: JoinKey + Hash>(
                &self,
                how: JoinType,
                left: &[K],
                right: &[K],
                partitioning: Partitioning,
            ) -> Option<Vec<PartitionLoad>> {
                let mut loads = match self {
                    $( Resolved::$variant(plan) => plan.predict(how, left, right, partitioning), )*
                }?;
                for load in &mut loads {
                    load.peak_records = load.input_records;
                }
                Some(loads)
            }

            join_dataflow!(
                /// Builds its dataflow over `left` and `right` ([`JoinStrategy::build`]).
                pub |self, left, right, setup, logic| {
                    match self {
                        $( Resolved::$variant(plan) => plan.build(left, right, setup, logic), )*
                    }
                }
            );
        }

        /// As `{"kind": name, ...its fields}`, the plan `--metrics` and the browser report.
        impl Serialize for Resolved {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                match self {
                    $( Resolved::$variant(plan) => Tagged {
                        kind: <strategies::$variant as JoinStrategy>::NAME,
                        plan,
                    }
                    .serialize(serializer), )*
                }
            }
        }

        /// From `{"kind": name, ...its fields}`, in any self-describing format.
        impl<'de> Deserialize<'de> for Resolved {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let (kind, fields) = tagged_fields(deserializer)?;
                $(
                    if kind == <strategies::$variant as JoinStrategy>::NAME {
                        return serde_json::from_value(fields)
                            .map(Resolved::$variant)
                            .map_err(D::Error::custom);
                    }
                )*
                Err(D::Error::custom(format!("unknown strategy kind {kind:?}")))
            }
        }
    };
}

registry! {
    /// Hash-partition both sides.
    Shuffle,
    /// Broadcast the smaller side whose broadcast the join type allows.
    Broadcast,
    /// IB-Join: broadcast the smaller side as a key index, tracking its matches by key id.
    Ib,
    /// DER baseline: broadcast the smaller side with row ids, report unmatched row ids.
    Der,
    /// DDR baseline: broadcast the smaller side, send unmatched rows themselves.
    Ddr,
    /// Sampled virtual-range partitioning, join data and noise cut separately.
    Vprp,
    /// VPRP without the join-data/noise separation (the paper's ablation).
    VprpT,
    /// AM-Join: count keys first, then shuffle cold keys, broadcast for keys hot on one side and
    /// unravel keys hot on both into a grid of cells.
    Am,
    /// Load-balanced Tree-Join inside AM-Join: keys hot on both sides unravelled into a grid,
    /// cells still larger than a leaf split further round after round.
    Tree,
    /// Basic Tree-Join for every key: group by key, split large entries round after round.
    TreeBasic,
}

/// What `auto` does, in two sentences.
const AUTO_ABOUT: &str = "Chooses from the input sizes, the join type and the keys: IB-Join \
    where one side is small enough to copy, AM-Join where a hot key would overload a shuffle, \
    else Shuffle-Join.";

/// A resolved strategy's `kind` and its other fields, as JSON to read the strategy's plan from
/// (`null` where there are none, as a plan without fields is a unit struct).
fn tagged_fields<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<(String, serde_json::Value), D::Error> {
    let mut fields = serde_json::Map::deserialize(deserializer)?;
    let kind = match fields.remove("kind") {
        Some(serde_json::Value::String(kind)) => kind,
        _ => return Err(D::Error::custom("a resolved strategy needs its \"kind\"")),
    };
    let fields = if fields.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::Value::Object(fields)
    };
    Ok((kind, fields))
}

/// A resolved strategy's plan behind its `kind`.
#[derive(Serialize)]
struct Tagged<'a, P> {
    kind: &'static str,
    #[serde(flatten)]
    plan: &'a P,
}

impl Strategy {
    /// Every strategy a user can name: `auto` and the concrete ones.
    pub const ALL: [Strategy; CONCRETE_COUNT + 1] = {
        let mut all = [Strategy::Auto; CONCRETE_COUNT + 1];
        let mut index = 0;
        while index < Strategy::CONCRETE.len() {
            all[index + 1] = Strategy::CONCRETE[index];
            index += 1;
        }
        all
    };
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Strategy {
    type Err = String;

    /// A strategy by its name or one of its aliases, in any case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let asked = s.to_ascii_lowercase();
        Strategy::ALL
            .into_iter()
            .find(|strategy| strategy.name() == asked || strategy.aliases().contains(&&*asked))
            .ok_or_else(|| {
                let names: Vec<&str> = Strategy::ALL
                    .iter()
                    .map(|strategy| strategy.name())
                    .collect();
                format!(
                    "unknown strategy {asked:?}: expected one of {}",
                    names.join(", ")
                )
            })
    }
}

/// As its name.
impl Serialize for Strategy {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// From its name or an alias.
impl<'de> Deserialize<'de> for Strategy {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

impl Resolved {
    /// The name reported in metrics: the strategy's command-line name.
    pub fn name(&self) -> &'static str {
        self.strategy().name()
    }
}

/// A choice and the reason for it, for `explain` and the run summary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice {
    /// The strategy to run.
    pub resolved: Resolved,
    /// Why, in words.
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_and_alias_parses_to_its_strategy_and_no_two_strategies_share_one() {
        let mut seen = std::collections::HashSet::new();
        for strategy in Strategy::ALL {
            for name in std::iter::once(strategy.name()).chain(strategy.aliases().iter().copied()) {
                assert!(seen.insert(name), "{name} names two strategies");
                assert_eq!(name.parse::<Strategy>(), Ok(strategy));
                assert_eq!(name.to_uppercase().parse::<Strategy>(), Ok(strategy));
            }
        }
        assert!("hashjoin".parse::<Strategy>().is_err());
    }

    #[test]
    fn a_resolved_strategy_serialises_as_its_kind_and_fields() {
        let plans = [
            (Resolved::from(strategies::Shuffle), r#"{"kind":"shuffle"}"#),
            (
                strategies::Broadcast { side: Side::Left }.into(),
                r#"{"kind":"broadcast","side":"left"}"#,
            ),
            (
                strategies::Vprp(VprpSettings::default()).into(),
                r#"{"kind":"vprp","virtual_per_partition":2,"sample_per_million":50000,"seed":24301}"#,
            ),
        ];
        for (plan, json) in plans {
            assert_eq!(serde_json::to_string(&plan).unwrap(), json);
            assert_eq!(serde_json::from_str::<Resolved>(json).unwrap(), plan);
            assert_eq!(plan.strategy().name(), plan.name());
        }
    }

    #[test]
    fn every_strategy_as_chosen_reads_back_from_its_json() {
        let inputs = PlanInputs {
            how: JoinType::Inner,
            left_rows: 1_000,
            right_rows: 100_000,
            workers: 2,
            broadcast_limit: u64::MAX,
            costs: crate::work_costs::WorkCosts::THREADS,
        };
        for strategy in Strategy::CONCRETE {
            let choice = strategy
                .asked(&inputs)
                .expect("every strategy computes inner joins");
            let json = serde_json::to_string(&choice).unwrap();
            assert_eq!(
                serde_json::from_str::<Choice>(&json).unwrap(),
                choice,
                "{json}"
            );
        }
        for bad in [
            r#"{"kind":"hash-join"}"#,
            r#"{"side":"left"}"#,
            r#"{"kind":"ib"}"#,
        ] {
            assert!(serde_json::from_str::<Resolved>(bad).is_err(), "{bad}");
        }
    }
}
