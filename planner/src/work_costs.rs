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
//! // is a smaller part of one.
//! assert!(WorkCosts::CLUSTER.pair_1024ths < WorkCosts::THREADS.pair_1024ths);
//! // On two threads, copying a tenth-size side to each pays where the output is counted, not
//! // where it is written: IB-Join's output is not grouped by key, and encodes slower.
//! assert!(WorkCosts::of_run(1, false).copying_pays(100_000, 1_000_000, 2));
//! assert!(!WorkCosts::of_run(1, true).copying_pays(100_000, 1_000_000, 2));
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
    /// The network time of a record sent to a worker of another process, in thousandths of a
    /// shuffled record's CPU time, averaged over the records a shuffle sends (a share of
    /// `1 / N` stays in its process): 0 where the link is not weighed, else from the link's
    /// speed ([`WorkCosts::over_link`]).
    pub crossing_per_mille: u32,
}

/// CPU nanoseconds of a shuffled input record on one core of a cluster's machine: 250 to 370 ns
/// on the emulated machines of benches/cluster (BENCHMARKS.md, "How `auto` weighs work").
pub const CLUSTER_RECORD_NANOS: u64 = 300;

/// Bytes a record takes on the wire between processes when the output is counted (its key, its
/// row's hash and timely's framing): 164 MB for the 5M records a shuffle of a uniform 5M x 5M
/// pair sends at N = 2, 83 MB for Small-Large's 2.55M. Written output carries the whole row too.
pub const COUNTED_RECORD_BYTES: u64 = 32;

/// AM-Join's traffic beyond a shuffle's, in thousandths of it: its key counts and the copies its
/// grids make of hot keys' records (1.5 to 1.65x a shuffle's bytes on uniform, Zipf 0.8 and 1.0
/// pairs at N = 2 to 8).
const AM_EXTRA_TRAFFIC_PER_MILLE: u128 = 600;

/// The network between a cluster's processes, as far as `auto` weighs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    /// Each process's link rate, bits per second in each direction.
    pub bits_per_second: u64,
    /// Bytes a record takes on the wire.
    pub record_bytes: u64,
    /// Processes in the cluster.
    pub processes: u64,
    /// Worker threads per process, which share its link.
    pub workers: u64,
    /// Cores each process may use, in thousandths (a cgroup's quota may give part of one).
    pub cores_milli: u64,
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
    /// record 1.72 and a large-side record probed in place 0.65: IB-Join's time over
    /// Shuffle-Join's was 0.69 to 0.73 on 100,000 x 5M and 1.52 to 1.65 on 2.5M x 5M, and they
    /// crossed between 6:1 and 10:1 (BENCHMARKS.md, "How `auto` weighs work"). Moving a record
    /// between threads is cheap, so copying a small side pays only where the large one is 7
    /// times larger at W = 2 and 17 times at W = 4.
    pub const THREADS: WorkCosts = WorkCosts {
        pair_1024ths: 4,
        key_count_per_mille: 750,
        copy_per_mille: 1720,
        in_place_per_mille: 650,
        crossing_per_mille: 0,
    };
    /// Threads of one process, output written: as [`THREADS`](Self::THREADS), but a copy
    /// pays later, from 11:1 at W = 2. IB-Join's output comes in the large side's order, where
    /// a Shuffle-Join's comes grouped by key, each small row's columns repeated in a run that
    /// Parquet's dictionary and run-length encodings compress: TPC-H orders x customer (10:1)
    /// written by IB-Join was 74 MB against 55 MB and took 11 % longer, where counted it took
    /// 9 % less. On narrow generated pairs written, the two were level at 10:1. Measured on
    /// Parquet output; CSV, Arrow IPC and batches handed back in memory (the Python package's
    /// tables) are weighed alike, unmeasured.
    pub const THREADS_WRITTEN: WorkCosts = WorkCosts {
        pair_1024ths: 768,
        copy_per_mille: 2780,
        in_place_per_mille: 580,
        ..Self::THREADS
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
        crossing_per_mille: 0,
    };

    /// The costs of a run on `processes` processes, its output written to a file or not.
    /// Written, a pair is assembled into Arrow columns and encoded on the worker that produced
    /// it: 120 ns of CPU for a row of six integer columns to Parquet (W = 1, 2 x 10^7 rows),
    /// about 3/4 of an input record on one process and 1/2 on a cluster. On one process a copy
    /// pays later where the output is written ([`THREADS_WRITTEN`](Self::THREADS_WRITTEN)).
    pub fn of_run(processes: usize, written: bool) -> WorkCosts {
        match (processes > 1, written) {
            (false, false) => Self::THREADS,
            (false, true) => Self::THREADS_WRITTEN,
            (true, false) => Self::CLUSTER,
            (true, true) => WorkCosts {
                pair_1024ths: 512,
                ..Self::CLUSTER
            },
        }
    }

    /// These costs on `link`: each record a shuffle sends costs its CPU and its time on the
    /// link. A process's workers share its link, and a worker's record takes longer where the
    /// process has fewer cores than workers; a record stays in its process with a chance of
    /// `1 / N`. On 4 processes of half a core each linked at 100 Mbit/s, a counted record (32
    /// bytes) takes 2.6 µs to cross and 0.6 µs of CPU: 3.2 records of CPU a shuffled record.
    /// Timely sends while the workers compute, so this overstates a link that is not the
    /// bottleneck; where the link is, it is what the makespan is made of.
    pub fn over_link(self, link: &Link) -> WorkCosts {
        let processes = u128::from(link.processes.max(1));
        let workers = u128::from(link.workers.max(1));
        let cores_milli = u128::from(link.cores_milli.max(1));
        // 1000 x (a record's nanoseconds on the link, shared by the process's workers, for the
        // (N - 1) / N of records that leave) / (a worker's CPU nanoseconds for a record, on its
        // share of the process's cores), divided once so that nothing is rounded on the way.
        let numerator = [
            u128::from(link.record_bytes),
            8 * 1_000_000_000,
            workers,
            processes - 1,
            cores_milli,
        ]
        .into_iter()
        .fold(1000u128, u128::saturating_mul);
        let denominator = [
            processes,
            u128::from(CLUSTER_RECORD_NANOS),
            workers.saturating_mul(1000).max(cores_milli),
        ]
        .into_iter()
        .fold(
            u128::from(link.bits_per_second.max(1)),
            u128::saturating_mul,
        );
        WorkCosts {
            crossing_per_mille: (numerator / denominator).min(u128::from(u32::MAX)) as u32,
            ..self
        }
    }

    /// The weight of `records` shuffled input records and `pairs` output pairs, in 1,024ths of a
    /// record's CPU.
    pub fn work(&self, records: u64, pairs: u128) -> u128 {
        u128::from(records) * self.shuffled_1024ths() + pairs * u128::from(self.pair_1024ths)
    }

    /// A shuffled record's CPU and network time, in 1,024ths of its CPU.
    fn shuffled_1024ths(&self) -> u128 {
        1024 + u128::from(self.crossing_per_mille) * 1024 / 1000
    }

    /// AM-Join's cost beyond Shuffle-Join's on each worker, for `fair_share` records a worker:
    /// its key count, and the time its key counts and grid copies spend on the link.
    pub fn am_join_extra(&self, fair_share: u128) -> u128 {
        let per_mille = u128::from(self.key_count_per_mille)
            + AM_EXTRA_TRAFFIC_PER_MILLE * u128::from(self.crossing_per_mille) / 1000;
        fair_share * per_mille / 1000
    }

    /// Whether copying a side of `small` rows to each of `workers` workers, the `large` side
    /// probed where it is, costs each worker less than shuffling both sides: `S W c + L p < S + L`
    /// (each side's work over W workers, times W), never on one worker, where nothing moves.
    pub fn copying_pays(&self, small: u64, large: u64, workers: u64) -> bool {
        self.copying_costs_less(small, large, workers, 1000)
    }

    /// [`copying_pays`](Self::copying_pays) against AM-Join rather than Shuffle-Join: a shuffle
    /// of both sides and AM-Join's key count (and its extra traffic on a link). A copy balances
    /// a key hot on the large side as well as AM-Join does (that side stays where it is), so
    /// where AM-Join is the other choice it pays sooner: on two threads, output counted, from
    /// about 1.5:1 rather than 7:1.
    pub fn copying_beats_am_join(&self, small: u64, large: u64, workers: u64) -> bool {
        let extra = self.am_join_extra(1000).min(u128::from(u32::MAX)) as u32;
        self.copying_costs_less(small, large, workers, extra.saturating_add(1000))
    }

    /// Whether the copy costs less than `per_mille` thousandths of a shuffled record's CPU for
    /// each record of both sides. On a link, a copied record crosses to every worker as a
    /// shuffled one crosses to one: `S W (c + x) + L p < (S + L) (m + x)`.
    fn copying_costs_less(&self, small: u64, large: u64, workers: u64, per_mille: u32) -> bool {
        let (small, large, workers) = (small as u128, large as u128, workers as u128);
        let crossing = u128::from(self.crossing_per_mille);
        workers > 1
            && small * workers * (u128::from(self.copy_per_mille) + crossing)
                + large * u128::from(self.in_place_per_mille)
                < (small + large) * (u128::from(per_mille) + crossing)
    }

    /// What the link adds, for a reason: "" where it is not weighed, else ", a shuffled record
    /// weighed as 4.20 records' CPU on the link given".
    pub fn link_note(&self) -> String {
        if self.crossing_per_mille == 0 {
            return String::new();
        }
        format!(
            ", a shuffled record weighed as {:.2} records' CPU on the link given",
            self.shuffled_1024ths() as f64 / 1024.0
        )
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `processes` processes of one worker and `cores_milli` thousandths of a core, linked at
    /// `bits` bits per second, moving counted records.
    fn link(processes: u64, cores_milli: u64, bits: u64) -> Link {
        Link {
            bits_per_second: bits,
            record_bytes: COUNTED_RECORD_BYTES,
            processes,
            workers: 1,
            cores_milli,
        }
    }

    #[test]
    fn a_record_crossing_a_slow_link_costs_more_than_its_cpu() {
        // 4 machines of half a core at 100 Mbit/s: 2.56 µs on the wire against 0.6 µs of CPU,
        // for the three records in four that leave their machine.
        let slow = WorkCosts::CLUSTER.over_link(&link(4, 500, 100_000_000));
        assert_eq!(slow.crossing_per_mille, 3200);
        assert_eq!(slow.work(1, 0), 1024 + 3276);
        assert!(
            slow.link_note().contains("4.20 records' CPU"),
            "{}",
            slow.link_note()
        );
        assert_eq!(WorkCosts::CLUSTER.link_note(), "");
        // A hundred times the rate, a hundredth of the cost; one process sends nothing.
        let fast = WorkCosts::CLUSTER.over_link(&link(4, 500, 10_000_000_000));
        assert_eq!(fast.crossing_per_mille, 32);
        assert_eq!(
            WorkCosts::CLUSTER
                .over_link(&link(1, 500, 100_000_000))
                .crossing_per_mille,
            0
        );
        // Four workers on two cores share the link and each runs at half a core's speed.
        let shared = WorkCosts::CLUSTER.over_link(&Link {
            workers: 4,
            cores_milli: 2000,
            ..link(4, 500, 100_000_000)
        });
        assert_eq!(shared.crossing_per_mille, 4 * 3200);
        // AM-Join's key counts and grid copies cross the link too.
        assert_eq!(
            slow.am_join_extra(1000),
            u128::from(WorkCosts::CLUSTER.key_count_per_mille) + 600 * 3200 / 1000
        );
        assert_eq!(
            WorkCosts::CLUSTER.am_join_extra(1000),
            u128::from(WorkCosts::CLUSTER.key_count_per_mille)
        );
    }

    #[test]
    fn on_a_slow_link_copying_a_small_side_pays_sooner() {
        // 250,000 x 5M on 8 machines of a quarter core: by CPU alone copying pays from 40:1; at
        // 100 Mbit/s a shuffle's traffic costs more than the copy's CPU from 14:1.
        let cpu = WorkCosts::CLUSTER;
        let slow = cpu.over_link(&link(8, 250, 100_000_000));
        assert!(!cpu.copying_pays(250_000, 5_000_000, 8));
        assert!(slow.copying_pays(250_000, 5_000_000, 8));
        assert!(!slow.copying_pays(500_000, 5_000_000, 8));
        // A fast link changes little.
        let fast = cpu.over_link(&link(8, 250, 10_000_000_000));
        assert!(!fast.copying_pays(250_000, 5_000_000, 8));
        // Against AM-Join, whose key counts and grid copies cross the link too: 700,000 x 5M.
        assert!(slow.copying_beats_am_join(700_000, 5_000_000, 8));
        assert!(!cpu.copying_beats_am_join(700_000, 5_000_000, 8));
    }
}
