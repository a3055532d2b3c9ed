//! AM-Join's tuning: which keys are hot, how they are counted, how large grids and broadcasts
//! may grow. Plain `Copy` data, below everything that plans or runs AM-Join.

use serde::{Deserialize, Serialize};
use skewjoin_operators::key_stats::HotThresholds;

/// Which keys are hot: found from the counts, or forced (to test that classification only ever
/// changes the cost).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HotChoice {
    /// Hot where the count is above the threshold.
    #[default]
    Detect,
    /// No key is hot: AM-Join degenerates to Shuffle-Join.
    NoKey,
    /// Every key is hot on both sides.
    EveryKey,
    /// Every key is hot on the left only.
    EveryKeyLeft,
    /// Every key is hot on the right only.
    EveryKeyRight,
    /// The detected hot sets, swapped between the sides.
    Swapped,
}

/// AM-Join's tuning, all of it `Copy` so that it travels inside [`Resolved`](crate::Resolved).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AmParams {
    /// A key is hot on a side above this many thousandths of one partition's share of that side
    /// (see [`HotThresholds::from_sizes`]).
    pub hot_per_mille: u32,
    /// Explicit thresholds, overriding `hot_per_mille`.
    pub thresholds: Option<HotThresholds>,
    /// Grid cells are sized to about `1 / cells_per_partition` of a partition's fair load, so
    /// that placing them evens out.
    pub cells_per_partition: u32,
    /// The most cells one key is unravelled into; 0 means P.
    pub max_cells: u32,
    /// The broadcast budget: every partition receives every broadcast record, so the
    /// one-side-hot classes together may broadcast at most this many thousandths of one
    /// partition's fair share of the input (`(left + right) / P` records). Beyond it, the keys
    /// with the most records to broadcast move to the hot-in-both class (a grid, which copies a
    /// record to one row or column of cells, not to every partition). Applies to detected hot
    /// sets only: forced ones are taken as given.
    pub broadcast_per_mille: u32,
    /// Detected or forced hot sets.
    pub hot: HotChoice,
    /// How keys are counted.
    pub statistics: Statistics,
}

/// How AM-Join counts keys to find the hot ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Statistics {
    /// Exact counts of every key, combined per worker, then totalled by key
    /// ([`skewjoin_operators::key_stats`]): memory per worker grows with its distinct keys.
    #[default]
    Exact,
    /// Space-Saving summaries of a fixed number of counters per worker and side
    /// ([`skewjoin_operators::heavy_hitters`]): bounded memory, estimated counts; the hot keys
    /// are all found while the summaries' floors stay under the thresholds.
    SpaceSaving {
        /// Counters per worker and side; 0 chooses [`Statistics::default_capacity`].
        capacity: u32,
    },
}

impl Statistics {
    /// Counters per worker and side for Space-Saving: twice the most keys that can be above a
    /// threshold of `hot_per_mille` thousandths of a partition's share (`P * 1000 / per mille`),
    /// at least 1,024.
    pub fn default_capacity(partitions: usize, hot_per_mille: u32) -> usize {
        let most_hot = partitions.max(1) * 1000 / hot_per_mille.max(1) as usize;
        (2 * most_hot).max(1024)
    }
}

impl std::str::FromStr for Statistics {
    type Err = String;

    /// `exact`, `space-saving` (default capacity) or `space-saving:N` (N counters).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.split_once(':') {
            None if text == "exact" => Ok(Statistics::Exact),
            None if text == "space-saving" => Ok(Statistics::SpaceSaving { capacity: 0 }),
            Some(("space-saving", counters)) => match counters.parse::<u32>() {
                Ok(capacity) if capacity > 0 => Ok(Statistics::SpaceSaving { capacity }),
                _ => Err(format!(
                    "space-saving:{counters}: the counter count must be a whole number from 1"
                )),
            },
            _ => Err(format!(
                "unknown statistics {text:?}: expected exact, space-saving or space-saving:COUNTERS"
            )),
        }
    }
}

/// The default broadcast budget of AM-Join's one-side-hot classes: a tenth of a partition's share
/// of the input, so broadcasting adds at most 10% to any partition's input.
pub const DEFAULT_BROADCAST_PER_MILLE: u32 = 100;

impl Default for AmParams {
    fn default() -> Self {
        AmParams {
            hot_per_mille: (HotThresholds::DEFAULT_FRACTION * 1000.0).round() as u32,
            thresholds: None,
            cells_per_partition: 4,
            max_cells: 0,
            broadcast_per_mille: DEFAULT_BROADCAST_PER_MILLE,
            hot: HotChoice::Detect,
            statistics: Statistics::Exact,
        }
    }
}

impl AmParams {
    /// With forced hot sets.
    pub fn forced(hot: HotChoice) -> AmParams {
        AmParams {
            hot,
            ..AmParams::default()
        }
    }

    /// The thresholds the statistics phase reports keys above: forced choices need every key's
    /// counts (or none).
    pub fn stats_thresholds(
        &self,
        left_rows: u64,
        right_rows: u64,
        partitions: usize,
    ) -> HotThresholds {
        match self.hot {
            HotChoice::NoKey => HotThresholds {
                left: u64::MAX,
                right: u64::MAX,
            },
            HotChoice::EveryKey | HotChoice::EveryKeyLeft | HotChoice::EveryKeyRight => {
                HotThresholds::EVERY_KEY
            }
            HotChoice::Detect | HotChoice::Swapped => self.thresholds.unwrap_or_else(|| {
                HotThresholds::from_sizes(
                    left_rows,
                    right_rows,
                    partitions,
                    self.hot_per_mille as f64 / 1000.0,
                )
            }),
        }
    }
}
