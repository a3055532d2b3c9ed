//! A skew join maintained over a stream of updates, beside differential's own `join`.
//!
//! Both sides receive inserts in batches (one batch per epoch, keys drawn from the same Zipf
//! ranking on both sides, so the hottest keys are hot on both), then deletes of a tenth of
//! what was inserted. A *drifting* key, absent at first, takes a share of every batch in the
//! middle third of the inserts (it becomes hot and stays) and is deleted at the end of it (it
//! cools down). Every epoch prints each worker's load as max/mean: records held now, and the
//! updates and output updates processed so far.
//!
//! ```text
//! cargo run --release -p skewjoin-incremental --example incremental -- --workers 4 --check
//! ```
//!
//! `--join skew` (default) is the skew join, `--join home` the same operator with no key ever
//! hot (every key on its hash's worker: where differential's `join` puts it), `--join
//! differential` differential's `join` itself (no load figures: it has no meter), and
//! `--check` runs the skew join and differential's `join` in one dataflow and stops with an
//! error unless their outputs have the same count and checksum at every epoch.

use std::sync::{Arc, Barrier, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use clap::{Parser, ValueEnum};
use differential_dataflow::input::Input;
use differential_dataflow::VecCollection;
use skewjoin_incremental::{max_over_mean, LoadMeter, SkewJoin, Tuning, WorkerLoad};
use timely::dataflow::operators::Probe;
use timely::dataflow::ProbeHandle;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Join {
    /// The skew join.
    Skew,
    /// The skew join with no hot keys: differential's placement, measured.
    Home,
    /// Differential's `join`.
    Differential,
}

/// A skew join over epochs of inserts and deletes, beside differential's `join`.
#[derive(Parser, Debug, Clone)]
struct Args {
    /// Worker threads.
    #[arg(short, long, default_value_t = 4)]
    workers: usize,
    /// Records inserted on each side, in all.
    #[arg(long, default_value_t = 40_000)]
    inserts: u64,
    /// Records inserted on each side per epoch.
    #[arg(long, default_value_t = 2_000)]
    batch: u64,
    /// Distinct keys of the Zipf ranking.
    #[arg(long, default_value_t = 10_000)]
    keys: u64,
    /// Zipf exponent of the key ranking (0: uniform).
    #[arg(long, default_value_t = 1.0)]
    zipf: f64,
    /// Share of each batch given to the drifting key in the middle third of the inserts.
    #[arg(long, default_value_t = 0.05)]
    drift: f64,
    /// Share of the inserted records deleted after the inserts, a batch per epoch.
    #[arg(long, default_value_t = 0.1)]
    deletes: f64,
    /// A key is hot once left + right + left * right reaches this.
    #[arg(long, default_value_t = Tuning::default().hot_load)]
    hot_load: u64,
    #[arg(long, value_enum, default_value = "skew")]
    join: Join,
    /// Also run differential's `join` and compare outputs at every epoch.
    #[arg(long)]
    check: bool,
    /// Print only the summary.
    #[arg(long, short)]
    quiet: bool,
    /// Processes of a timely cluster (each with --workers threads); the others are started
    /// with the same arguments and their own --process.
    #[arg(long, default_value_t = 1)]
    processes: usize,
    /// This process's index in the cluster.
    #[arg(long, default_value_t = 0)]
    process: usize,
    /// A file of one host:port per process, in process order (timely's own protocol, no
    /// authentication: for a private network such as benches/incremental/emulate.py's).
    #[arg(long)]
    hostfile: Option<std::path::PathBuf>,
}

/// The timely configuration: threads in this process, or one process of a cluster.
fn timely_config(args: &Args) -> Result<timely::Config, String> {
    if args.processes <= 1 {
        return Ok(timely::Config::process(args.workers));
    }
    let path = args
        .hostfile
        .as_ref()
        .ok_or("--processes above 1 needs --hostfile")?;
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let addresses: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    if addresses.len() != args.processes || args.process >= args.processes {
        return Err(format!(
            "{}: {} addresses for --processes {} and --process {}",
            path.display(),
            addresses.len(),
            args.processes,
            args.process
        ));
    }
    Ok(timely::Config {
        communication: timely::CommunicationConfig::Cluster {
            threads: args.workers,
            process: args.process,
            addresses,
            report: false,
            zerocopy: false,
        },
        worker: timely::WorkerConfig::default(),
    })
}

/// splitmix64: a small deterministic generator, enough to draw keys.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Draws key ranks `0..keys` with probability proportional to `1 / (rank + 1)^s`.
struct Zipf {
    cumulative: Vec<f64>,
}

impl Zipf {
    fn new(keys: u64, s: f64) -> Self {
        let mut total = 0.0;
        let cumulative = (0..keys.max(1))
            .map(|rank| {
                total += 1.0 / ((rank + 1) as f64).powf(s);
                total
            })
            .collect();
        Zipf { cumulative }
    }

    fn draw(&self, rng: &mut Rng) -> u64 {
        let target = rng.unit() * self.cumulative.last().copied().unwrap_or(0.0);
        self.cumulative.partition_point(|&c| c < target) as u64
    }
}

/// One output row's contribution to the checksum.
fn mix(key: u64, left: u64, right: u64) -> u64 {
    let mut rng = Rng(key ^ left.rotate_left(21) ^ right.rotate_left(42));
    rng.next()
}

/// Count and checksum of the output so far, per worker.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
struct Tally {
    rows: i64,
    checksum: u64,
}

impl Tally {
    fn add(&mut self, row: u64, diff: isize) {
        self.rows += diff as i64;
        self.checksum = self.checksum.wrapping_add(row.wrapping_mul(diff as u64));
    }

    fn sum(tallies: &[Tally]) -> Tally {
        tallies.iter().fold(Tally::default(), |mut all, t| {
            all.rows += t.rows;
            all.checksum = all.checksum.wrapping_add(t.checksum);
            all
        })
    }
}

/// What each worker shares after an epoch.
#[derive(Clone, Default)]
struct Shared {
    loads: Vec<WorkerLoad>,
    skew: Vec<Tally>,
    reference: Vec<Tally>,
    /// Input updates each worker fed.
    fed: Vec<u64>,
    failure: Option<String>,
}

fn main() {
    let args = Args::parse();
    if args.workers == 0 || args.batch == 0 {
        eprintln!("error: --workers and --batch must be at least 1");
        std::process::exit(2);
    }
    if args.check && args.join == Join::Differential {
        eprintln!("error: --check compares the skew join with differential's; use it with --join skew or home");
        std::process::exit(2);
    }
    if args.check && args.processes > 1 {
        eprintln!("error: --check compares outputs within one process; compare the processes' summed rows and checksums instead");
        std::process::exit(2);
    }
    let config = timely_config(&args).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2);
    });
    let workers = args.workers;
    let shared = Arc::new(Mutex::new(Shared {
        loads: vec![WorkerLoad::default(); workers],
        skew: vec![Tally::default(); workers],
        reference: vec![Tally::default(); workers],
        fed: vec![0; workers],
        failure: None,
    }));
    let barrier = Arc::new(Barrier::new(workers));
    let zipf = Arc::new(Zipf::new(args.keys, args.zipf));
    // When this process's workers started, after the cluster's connections were made.
    let started: Arc<Mutex<Option<(Instant, SystemTime)>>> = Arc::new(Mutex::new(None));
    let first_step = Arc::clone(&started);
    let arguments = args.clone();
    let outcome = Arc::clone(&shared);
    let guards = timely::execute(config, move |worker| {
        let args = arguments.clone();
        first_step
            .lock()
            .unwrap()
            .get_or_insert_with(|| (Instant::now(), SystemTime::now()));
        let (index, peers) = (worker.index(), worker.peers());
        // This process's workers share `shared` and `barrier`; a cluster's others have their own.
        let local = index % args.workers;
        let meter = LoadMeter::new();
        let mut probe = ProbeHandle::new();
        let skew_tally = Arc::new(Mutex::new(Tally::default()));
        let reference_tally = Arc::new(Mutex::new(Tally::default()));
        let (mut left_in, mut right_in) = worker.dataflow::<u64, _, _>(|scope| {
            let (left_in, left) = scope.new_collection::<(u64, u64), isize>();
            let (right_in, right) = scope.new_collection::<(u64, u64), isize>();
            let tally = |output: VecCollection<'_, u64, u64, isize>,
                         into: &Arc<Mutex<Tally>>,
                         probe: &mut ProbeHandle<u64>| {
                let into = Arc::clone(into);
                output
                    .inspect(move |(row, _, diff)| into.lock().unwrap().add(*row, *diff))
                    .inner
                    .probe_with(probe);
            };
            let hot_load = match args.join {
                Join::Home => u64::MAX,
                _ => args.hot_load,
            };
            let tuning = Tuning { hot_load };
            if args.join != Join::Differential {
                let joined = left.clone().skew_join_map(
                    right.clone(),
                    tuning,
                    Some(meter.clone()),
                    |k, l, r| mix(*k, *l, *r),
                );
                tally(joined, &skew_tally, &mut probe);
            }
            if args.join == Join::Differential || args.check {
                let joined = left.join_map(right, |k, l, r| mix(*k, *l, *r));
                tally(joined, &reference_tally, &mut probe);
            }
            (left_in, right_in)
        });

        // This worker's share of each batch, and what it inserted (to delete a share of it).
        let share =
            |total: u64| total / peers as u64 + u64::from((index as u64) < total % peers as u64);
        let mut rng = Rng(0x5eed ^ (index as u64) << 32);
        let mut inserted: [Vec<(u64, u64)>; 2] = [Vec::new(), Vec::new()];
        let mut next_value = (index as u64) << 40;
        let drift_key = args.keys; // outside the ranking: absent until it drifts in
        let epochs = args.inserts.div_ceil(args.batch);
        let (drift_from, drift_to) = (epochs / 3, 2 * epochs / 3);
        let delete_total = (args.inserts as f64 * args.deletes) as u64;
        let delete_epochs = delete_total.div_ceil(args.batch);
        let mut epoch = 0u64;
        let mut last = Instant::now();
        let mut fed = 0u64;
        while epoch < epochs + 1 + delete_epochs {
            let phase = if epoch < epochs && (drift_from..drift_to).contains(&epoch) {
                "drift"
            } else if epoch < epochs {
                "insert"
            } else if epoch == epochs {
                "cool"
            } else {
                "delete"
            };
            for (side, input) in [&mut left_in, &mut right_in].into_iter().enumerate() {
                let inserted = &mut inserted[side];
                match phase {
                    "insert" | "drift" => {
                        for _ in 0..share(args.batch.min(args.inserts - epoch * args.batch)) {
                            let key = if phase == "drift" && rng.unit() < args.drift {
                                drift_key
                            } else {
                                zipf.draw(&mut rng)
                            };
                            next_value += 1;
                            input.update((key, next_value), 1);
                            inserted.push((key, next_value));
                            fed += 1;
                        }
                    }
                    "cool" => {
                        // The drifting key cools down: all its records go at once.
                        for &(key, value) in inserted.iter().filter(|(k, _)| *k == drift_key) {
                            input.update((key, value), -1);
                            fed += 1;
                        }
                        inserted.retain(|(k, _)| *k != drift_key);
                    }
                    _ => {
                        let done = (epoch - epochs - 1) * args.batch;
                        let count = share(args.batch.min(delete_total - done));
                        for _ in 0..count.min(inserted.len() as u64) {
                            let at = (rng.next() % inserted.len() as u64) as usize;
                            let (key, value) = inserted.swap_remove(at);
                            input.update((key, value), -1);
                            fed += 1;
                        }
                    }
                }
                input.advance_to(epoch + 1);
                input.flush();
            }
            // Parks when idle: a spinning worker would take the cores (or the cgroup quota of an
            // emulated machine) that the busy ones need.
            worker.step_or_park_while(None, || probe.less_than(left_in.time()));
            {
                let mut all = shared.lock().unwrap();
                all.loads[local] = meter.get();
                all.skew[local] = *skew_tally.lock().unwrap();
                all.reference[local] = *reference_tally.lock().unwrap();
                all.fed[local] = fed;
            }
            barrier.wait();
            if local == 0 {
                let mut all = shared.lock().unwrap();
                let (skew, reference) = (Tally::sum(&all.skew), Tally::sum(&all.reference));
                if args.check && skew != reference && all.failure.is_none() {
                    all.failure = Some(format!(
                        "epoch {epoch}: the skew join has {} rows (checksum {:x}), differential's join {} ({:x})",
                        skew.rows, skew.checksum, reference.rows, reference.checksum
                    ));
                }
                if !args.quiet && args.processes == 1 {
                    let rows = if args.join == Join::Differential {
                        reference.rows
                    } else {
                        skew.rows
                    };
                    print_epoch(
                        epoch,
                        phase,
                        rows,
                        &all.loads,
                        args.join,
                        last.elapsed().as_secs_f64(),
                    );
                }
                last = Instant::now();
            }
            barrier.wait();
            epoch += 1;
        }
    });
    if let Err(e) = guards.and_then(|g| g.join().into_iter().collect::<Result<Vec<_>, _>>()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
    let (started, started_at) = started.lock().unwrap().expect("the workers ran");
    let seconds = started.elapsed().as_secs_f64();
    let since_epoch = |at: SystemTime| {
        at.duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    };
    if args.processes > 1 {
        // For a harness: the cluster's join runs from its first start to its last end.
        println!(
            "join from {:.6} to {:.6}",
            since_epoch(started_at),
            since_epoch(SystemTime::now())
        );
    }
    let all = outcome.lock().unwrap();
    if let Some(failure) = &all.failure {
        eprintln!("error: outputs differ at {failure}");
        std::process::exit(1);
    }
    summarise(&args, &all, seconds);
}

fn print_epoch(epoch: u64, phase: &str, rows: i64, loads: &[WorkerLoad], join: Join, seconds: f64) {
    if epoch == 0 {
        println!("epoch  phase   output rows  hot keys  replans  held max/mean  updates max/mean  output max/mean  seconds");
    }
    if join == Join::Differential {
        println!("{epoch:>5}  {phase:<6} {rows:>12}  {:>8}  {:>7}  {:>13}  {:>16}  {:>15}  {seconds:>7.3}", "-", "-", "-", "-", "-");
        return;
    }
    let ratio = |f: fn(&WorkerLoad) -> f64| max_over_mean(loads.iter().map(f));
    println!(
        "{epoch:>5}  {phase:<6} {rows:>12}  {:>8}  {:>7}  {:>13.2}  {:>16.2}  {:>15.2}  {seconds:>7.3}",
        loads.iter().map(|l| l.hot_keys).sum::<u64>(),
        loads.iter().map(|l| l.replans).sum::<u64>(),
        ratio(|l| l.held as f64),
        ratio(|l| l.updates as f64),
        ratio(|l| l.output_updates as f64),
    );
}

fn summarise(args: &Args, all: &Shared, seconds: f64) {
    let input_updates: u64 = all.fed.iter().sum();
    println!(
        "{:?} join, {} workers{}: {} input updates in {seconds:.3} s ({:.0} updates/s){}",
        args.join,
        args.workers,
        if args.processes > 1 {
            format!(" in process {} of {}", args.process, args.processes)
        } else {
            String::new()
        },
        input_updates,
        input_updates as f64 / seconds,
        if args.check {
            "; outputs equal to differential's join at every epoch"
        } else {
            ""
        },
    );
    let tally = if args.join == Join::Differential {
        Tally::sum(&all.reference)
    } else {
        Tally::sum(&all.skew)
    };
    if args.processes > 1 {
        // One line per figure for a harness to sum over processes.
        println!(
            "process {} output rows {} checksum {}",
            args.process, tally.rows, tally.checksum
        );
        if args.join != Join::Differential {
            for (local, load) in all.loads.iter().enumerate() {
                println!(
                    "worker {} peak_held {} updates {} output_updates {}",
                    args.process * args.workers + local,
                    load.peak_held,
                    load.updates,
                    load.output_updates
                );
            }
        }
        return;
    }
    println!("output rows {} checksum {}", tally.rows, tally.checksum);
    if args.join != Join::Differential {
        let ratio = |f: fn(&WorkerLoad) -> f64| max_over_mean(all.loads.iter().map(f));
        println!(
            "per worker, max/mean: peak held {:.2}, updates {:.2}, output updates {:.2}; output updates in all {}",
            ratio(|l| l.peak_held as f64),
            ratio(|l| l.updates as f64),
            ratio(|l| l.output_updates as f64),
            all.loads.iter().map(|l| l.output_updates).sum::<u64>(),
        );
    }
}
