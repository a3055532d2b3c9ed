//! The balance tables of issue 5 (VPRP), at small scale, W = 2 worker threads; loads are counts of
//! records received and output rows produced per partition, reported as max/mean.
//!
//! `cargo run --release -p skewjoin-measure --bin vprp_balance -- [rows]`
//! (default 200000 rows per side). BENCHMARKS.md's "VPRP's balance" keeps a run's tables and what
//! they show.
//!
//! a. The second experiment of the VPRP paper: a share of each side (15..95 %) is join data,
//!    Zipf (s = 0.6) over 2000 join keys ranked independently on each side, padded with join
//!    noise (keys on one side only, uniform over 20000 keys per side) to a constant size per side. The noise keys sort
//!    above the join keys, in a key block of their own, as noise from another source (other
//!    hosts' URLs, other customers) would: where noise and join keys interleave evenly, every
//!    range of equal weight gets an equal share of join data anyway, and VPRP-T cannot differ
//!    from VPRP (the last table shows that case).
//! b. Zipf joins where no key is heavier than a partition's share: VPRP's input balance, and
//!    where it stops holding.
//! c. Zipf joins with one key heavier than a partition's share: VPRP never splits a key, AM-Join
//!    does.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use skewjoin_measure::RowCount;
use skewjoin_operators::load::LoadReport;
use skewjoin_operators::JoinType;
use skewjoin_planner::datagen::{generate, GenSpec, GeneratedPair, JoinCounts};
use skewjoin_planner::exec::{execute, JoinJob};
use skewjoin_planner::strategies::Vprp;
use skewjoin_planner::strategy::VprpSettings;
use skewjoin_planner::work_costs::WorkCosts;
use skewjoin_planner::{choose, PlanInputs, Resolved, Strategy};

const WORKERS: usize = 2;

/// One run's figures.
struct Measured {
    loads: LoadReport,
    elapsed: Duration,
}

impl Measured {
    fn io(&self) -> String {
        format!(
            "{:.2} / {:.2}",
            self.loads.input_imbalance(),
            self.loads.output_imbalance()
        )
    }
}

/// Inner-joins `left` and `right` with `strategy` on P partitions and W = 2 workers, checking the
/// row count against the exact one.
fn run(strategy: Strategy, left: &[i64], right: &[i64], partitions: usize) -> Measured {
    let inputs = PlanInputs {
        how: JoinType::Inner,
        left_rows: left.len() as u64,
        right_rows: right.len() as u64,
        workers: WORKERS,
        broadcast_limit: 0,
        costs: WorkCosts::THREADS,
    };
    let resolved = choose(strategy, &inputs)
        .expect("every strategy computes inner")
        .resolved;
    run_resolved(resolved, left, right, partitions)
}

/// VPRP sampling `fraction` of the records.
fn run_vprp_sampling(fraction: f64, left: &[i64], right: &[i64], partitions: usize) -> Measured {
    let settings = VprpSettings::default().with_sample_fraction(fraction);
    run_resolved(Resolved::Vprp(Vprp(settings)), left, right, partitions)
}

fn run_resolved(resolved: Resolved, left: &[i64], right: &[i64], partitions: usize) -> Measured {
    let strategy = resolved.name();
    let job = JoinJob {
        left: left.into(),
        right: right.into(),
        left_hashes: Arc::new([]),
        right_hashes: Arc::new([]),
        how: JoinType::Inner,
        resolved,
        partitions,
        workers: WORKERS,
    };
    let output = execute(job, |_| RowCount::default()).expect("the join runs");
    assert_eq!(
        output.summaries.iter().sum::<u64>(),
        JoinCounts::of(left, right).inner,
        "{strategy} row count"
    );
    Measured {
        loads: output.loads,
        elapsed: output.elapsed,
    }
}

/// Join keys of experiment a, and the noise keys of each side.
const JOIN_KEYS: u64 = 2_000;
const NOISE_KEYS: u64 = 20_000;
/// Zipf exponent of the join data.
const JOIN_SKEW: f64 = 0.6;

/// A pair with `share` of each side's `rows` as join data, Zipf(`JOIN_SKEW`) over `JOIN_KEYS`
/// keys ranked independently on each side (so a key's output, left count times right count, is
/// no more concentrated than its input), padded with one-side-only noise keys uniform over
/// `NOISE_KEYS` keys per side: in a block above the join keys (`interleaved == false`), or
/// spread evenly among them.
fn noisy_pair(rows: u64, share: f64, interleaved: bool) -> GeneratedPair {
    let join_rows = (rows as f64 * share).round() as u64;
    let join = generate(&GenSpec {
        left_rows: join_rows,
        right_rows: join_rows,
        keys: JOIN_KEYS,
        left_skew: JOIN_SKEW,
        right_skew: JOIN_SKEW,
        independent: true,
        seed: 11,
        ..GenSpec::default()
    });
    // noise = 1.0: left keys in [n, 2n), right keys in [2n, 3n) for n = NOISE_KEYS.
    let noise = generate(&GenSpec {
        left_rows: rows - join_rows,
        right_rows: rows - join_rows,
        keys: NOISE_KEYS,
        left_skew: 0.0,
        right_skew: 0.0,
        noise: 1.0,
        seed: 12,
        ..GenSpec::default()
    });
    let (j, n) = (JOIN_KEYS as i64, NOISE_KEYS as i64);
    // Interleaved: join key k becomes 3 (k n / j), left noise n + i becomes 3i + 1, right noise
    // 2n + i becomes 3i + 2, so every stretch of the key space holds all three kinds alike.
    let place = |key: i64| {
        if !interleaved {
            key
        } else if key < j {
            3 * (key * n / j)
        } else if key < 2 * n {
            3 * (key - n) + 1
        } else {
            3 * (key - 2 * n) + 2
        }
    };
    let side = |join: &[i64], noise: &[i64]| -> Vec<i64> {
        join.iter().chain(noise).map(|&key| place(key)).collect()
    };
    let mut pair = join;
    pair.left.key = side(&pair.left.key, &noise.left.key);
    pair.right.key = side(&pair.right.key, &noise.right.key);
    pair
}

fn ms(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1e3)
}

fn experiment_two(rows: u64, interleaved: bool, shares: &[u32]) {
    println!(
        "| join data | P | heaviest key's output / partition share | Shuffle in / out | VPRP-T in / out | VPRP in / out | VPRP, sample 25 % \
         | VPRP, sample 100 % | wall ms (Shuffle, VPRP-T, VPRP) |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for &share in shares {
        let pair = noisy_pair(rows, f64::from(share) / 100.0, interleaved);
        for partitions in [8usize, 32] {
            let [shuffle, vprp_t, vprp] = [Strategy::Shuffle, Strategy::VprpT, Strategy::Vprp]
                .map(|s| run(s, &pair.left.key, &pair.right.key, partitions));
            let [quarter, full] = [0.25, 1.0].map(|fraction| {
                run_vprp_sampling(fraction, &pair.left.key, &pair.right.key, partitions)
            });
            println!(
                "| {share} % | {partitions} | {:.2} | {} | {} | {} | {} | {} | {}, {}, {} |",
                heaviest_output_over_share(&pair, partitions),
                shuffle.io(),
                vprp_t.io(),
                vprp.io(),
                quarter.io(),
                full.io(),
                ms(shuffle.elapsed),
                ms(vprp_t.elapsed),
                ms(vprp.elapsed)
            );
        }
    }
}

/// The largest key's rows (both sides) over a partition's share of all rows (both sides).
fn heaviest_over_share(pair: &GeneratedPair, partitions: usize) -> f64 {
    let mut keys: Vec<i64> = pair
        .left
        .key
        .iter()
        .chain(&pair.right.key)
        .copied()
        .collect();
    keys.sort_unstable();
    let heaviest = keys
        .chunk_by(|a, b| a == b)
        .map(<[i64]>::len)
        .max()
        .unwrap_or(0);
    heaviest as f64 * partitions as f64 / keys.len() as f64
}

/// The largest key's output rows (left count times right count) over a partition's share of
/// all output rows: above 1, no strategy that keeps a key whole can balance the output.
fn heaviest_output_over_share(pair: &GeneratedPair, partitions: usize) -> f64 {
    let counts = |keys: &[i64]| {
        let mut counts: HashMap<i64, u64> = HashMap::new();
        for &key in keys {
            *counts.entry(key).or_default() += 1;
        }
        counts
    };
    let right = counts(&pair.right.key);
    let outputs: Vec<u64> = counts(&pair.left.key)
        .into_iter()
        .map(|(key, l)| l * right.get(&key).copied().unwrap_or(0))
        .collect();
    let total: u64 = outputs.iter().sum();
    let heaviest = outputs.into_iter().max().unwrap_or(0);
    heaviest as f64 * partitions as f64 / total.max(1) as f64
}

fn zipf(rows: u64, keys: u64, skew: f64) -> GeneratedPair {
    generate(&GenSpec {
        left_rows: rows,
        right_rows: rows,
        keys,
        left_skew: skew,
        right_skew: skew,
        seed: 5,
        ..GenSpec::default()
    })
}

fn main() {
    let rows = std::env::args()
        .nth(1)
        .map(|a| a.parse::<u64>().expect("rows per side, a number"))
        .unwrap_or(200_000);

    println!(
        "## a. Join data padded with noise to {rows} rows per side (noise in its own key block)\n"
    );
    println!(
        "Join data: Zipf s = {JOIN_SKEW} over {JOIN_KEYS} keys, ranked independently on each \
         side; noise: uniform over {NOISE_KEYS} keys per side. W = {WORKERS}, sample 5 %, 2 \
         virtual ranges per partition. max/mean per partition.\n"
    );
    experiment_two(rows, false, &[15, 35, 55, 75, 95]);

    println!("\n## a'. The same with noise keys spread evenly among the join keys\n");
    experiment_two(rows, true, &[15, 55]);

    println!("\n## b. Zipf, {rows} rows per side: VPRP input max/mean\n");
    println!(
        "| keys | s | P | heaviest key / partition share | VPRP in / out | Shuffle in / out |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: |");
    for (keys, skew) in [
        (100_000u64, 0.5),
        (100_000, 0.8),
        (100_000, 1.0),
        (10_000, 0.8),
        (10_000, 1.0),
    ] {
        let pair = zipf(rows, keys, skew);
        for partitions in [8usize, 32] {
            let vprp = run(Strategy::Vprp, &pair.left.key, &pair.right.key, partitions);
            let shuffle = run(
                Strategy::Shuffle,
                &pair.left.key,
                &pair.right.key,
                partitions,
            );
            println!(
                "| {keys} | {skew} | {partitions} | {:.2} | {} | {} |",
                heaviest_over_share(&pair, partitions),
                vprp.io(),
                shuffle.io()
            );
        }
    }

    println!(
        "\n## c. One key heavier than a partition's share, {} rows per side: VPRP beside \
         AM-Join\n",
        rows / 4
    );
    println!(
        "| keys | s | P | heaviest key / partition share | VPRP in / out | AM-Join in / out | \
         Shuffle in / out | wall ms (VPRP, AM) |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    // A quarter of the rows: the hottest key alone joins to (rows * its share)^2 output rows.
    for (keys, skew) in [(10_000u64, 1.2), (10_000, 1.5)] {
        let pair = zipf(rows / 4, keys, skew);
        for partitions in [8usize, 32] {
            let vprp = run(Strategy::Vprp, &pair.left.key, &pair.right.key, partitions);
            let am = run(Strategy::Am, &pair.left.key, &pair.right.key, partitions);
            let shuffle = run(
                Strategy::Shuffle,
                &pair.left.key,
                &pair.right.key,
                partitions,
            );
            println!(
                "| {keys} | {skew} | {partitions} | {:.2} | {} | {} | {} | {}, {} |",
                heaviest_over_share(&pair, partitions),
                vprp.io(),
                am.io(),
                shuffle.io(),
                ms(vprp.elapsed),
                ms(am.elapsed)
            );
        }
    }
}
