//! What work costs on the machines a join runs on, for `auto`: how much an output pair, AM-Join's
//! key count, and a copied or unmoved record cost against a shuffled input record (read, hashed,
//! sent to its worker and indexed or probed there).
//!
//! The figures are measured (BENCHMARKS.md, "How `auto` weighs work") and differ between the
//! threads of one process and a cluster, where a shuffled record is serialized and sent over a
//! socket, and between output counted with a checksum and output written to a file. They are
//! integers, so that every process of a cluster reaches the same verdict to the last bit.
//!
//! ```
//! use skewjoin_planner::work_costs::WorkCosts;
//!
//! // On a cluster a shuffled record costs more (it crosses a socket), so a counted output pair
//! // is a smaller part of one, and copying a small side pays sooner.
//! assert!(WorkCosts::CLUSTER.pair_1024ths < WorkCosts::THREADS.pair_1024ths);
//! assert!(WorkCosts::CLUSTER.copying_pays(100_000, 1_500_000, 2));
//! assert!(!WorkCosts::THREADS.copying_pays(100_000, 1_500_000, 2));
//! ```

use serde::{Deserialize, Serialize};

/// What work costs, in the cost of a shuffled input record. See the module's documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct WorkCosts {
    /// An output pair's cost in 1,024ths of an input record's.
    pub pair_1024ths: u32,
    /// AM-Join's key count (and its grid's extra routing), in thousandths of a worker's fair
    /// share of the input records.
    pub key_count_per_mille: u32,
    /// A record of the small side copied to a worker and indexed there (IB-Join, Broadcast-Join),
    /// in thousandths of a shuffled record: every worker builds the whole index.
    pub copy_per_mille: u32,
    /// A record of the large side read and probed where it is, never sent, in thousandths of a
    /// shuffled record.
    pub in_place_per_mille: u32,
}

impl Default for WorkCosts {
    /// The threads of one process, output counted.
    fn default() -> Self {
        Self::THREADS
    }
}

impl WorkCosts {
    /// Threads of one process, output counted (W = 2 on the 2-core machine): a shuffled record
    /// 154 to 184 ns of CPU; a counted pair 1/256 of one (same-rank Zipf 1.2, 150,000 rows a
    /// side, 1.1 x 10^9 pairs balanced by AM-Join in 0.37 s); AM-Join's key count 0.75 of a
    /// fair share (0.45 s more than Shuffle-Join's 0.62 s on a uniform 4M x 4M pair); a copied
    /// record 1.95 and a large-side record probed in place 0.86 (IB-Join on 100,000 x 5M and
    /// 600,000 x 3M: 0.43 to 0.45 and 0.45 s, Shuffle-Join 0.47 and 0.33 s). Moving a record between
    /// threads is cheap, so copying a small side pays only where the large one is 21 times
    /// larger at W = 2 and 49 times at W = 4.
    pub const THREADS: WorkCosts = WorkCosts {
        pair_1024ths: 4,
        key_count_per_mille: 750,
        copy_per_mille: 1950,
        in_place_per_mille: 860,
    };
    /// A cluster, output counted (2 to 8 emulated machines of benches/cluster): a shuffled
    /// record 250 to 370 ns of CPU, a counted pair 0.65 ns (1/341); AM-Join's processes used 0.3
    /// to 0.5 µs more CPU per input record than Shuffle-Join's (1.5 fair shares); IB-Join on
    /// 100,000 x 5M used 0.87, 1.00 and 1.39 CPU seconds at N = 2, 4 and 8, a copied record 2.64
    /// shuffled ones and a record probed in place 0.5. Copying pays where the large side is 9
    /// times larger at N = 2 and 40 times at N = 8.
    pub const CLUSTER: WorkCosts = WorkCosts {
        pair_1024ths: 3,
        key_count_per_mille: 1500,
        copy_per_mille: 2640,
        in_place_per_mille: 500,
    };

    /// The costs of a run on `processes` processes, its output written to a file or not.
    /// Written, a pair is assembled into Arrow columns and encoded on the worker that produced
    /// it: 120 ns of CPU for a row of six integer columns to Parquet (W = 1, 2 x 10^7 rows),
    /// about 3/4 of an input record on one process and 1/2 on a cluster.
    pub fn of_run(processes: usize, written: bool) -> WorkCosts {
        let costs = if processes > 1 {
            Self::CLUSTER
        } else {
            Self::THREADS
        };
        if !written {
            return costs;
        }
        WorkCosts {
            pair_1024ths: if processes > 1 { 512 } else { 768 },
            ..costs
        }
    }

    /// The weight of `records` input records and `pairs` output pairs, in 1,024ths of a record.
    pub fn work(&self, records: u64, pairs: u128) -> u128 {
        u128::from(records) * 1024 + pairs * u128::from(self.pair_1024ths)
    }

    /// Whether copying a side of `small` rows to each of `workers` workers, the `large` side
    /// probed where it is, costs each worker less than shuffling both sides: `S W c + L p < S + L`
    /// (each side's work over W workers, times W), never on one worker, where nothing moves.
    pub fn copying_pays(&self, small: u64, large: u64, workers: u64) -> bool {
        self.copying_costs_less(small, large, workers, 1000)
    }

    /// [`copying_pays`](Self::copying_pays) against AM-Join rather than Shuffle-Join: a shuffle
    /// of both sides and AM-Join's key count. A copy balances a key hot on the large side as
    /// well as AM-Join does (that side stays where it is), so where AM-Join is the other choice
    /// it pays sooner: on two threads from about 2.4:1 rather than 21:1.
    pub fn copying_beats_am_join(&self, small: u64, large: u64, workers: u64) -> bool {
        self.copying_costs_less(small, large, workers, 1000 + self.key_count_per_mille)
    }

    /// Whether the copy costs less than `per_mille` thousandths of a shuffled record for each
    /// record of both sides.
    fn copying_costs_less(&self, small: u64, large: u64, workers: u64, per_mille: u32) -> bool {
        let (small, large, workers) = (small as u128, large as u128, workers as u128);
        workers > 1
            && small * workers * u128::from(self.copy_per_mille)
                + large * u128::from(self.in_place_per_mille)
                < (small + large) * u128::from(per_mille)
    }

    /// How a pair is weighed, for a reason: "1/256 of an input record".
    pub fn pair_weight(&self) -> String {
        let weight = f64::from(self.pair_1024ths) / 1024.0;
        if weight == 0.0 {
            "nothing".into()
        } else if weight >= 0.1 {
            format!("{weight:.2} of an input record")
        } else {
            format!("1/{:.0} of an input record", 1.0 / weight)
        }
    }
}
