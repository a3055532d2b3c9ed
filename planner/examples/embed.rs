//! Embedding skewjoin's joins in a multi-worker timely program, over several epochs whose hot
//! keys appear, move and vanish, checked against a hash-join reference per epoch.
//!
//! ```text
//! cargo run --release -p skewjoin-planner --example embed -- -w 4 --strategy am --how full --drift
//! cargo run --release -p skewjoin-planner --example embed -- -w 3 --strategy all --how all --drift --rows 2000
//! ```
//!
//! Flags: `--strategy NAME|all` (default `auto`), `--how TYPE|all` (default `inner`),
//! `--epochs N` (3), `--rows N` per side and epoch (20,000), `--partitions P` (one per worker),
//! `--drift` (the hot keys change between epochs; without it they stay). Every other argument
//! goes to `timely::execute_from_args` (`-w` threads), which needs timely's `getopts` feature (on
//! in this workspace). The check adds up the rows of one process's workers, so run it as one
//! process (`-n`, `-p` and `-h` would each check a share). Each worker feeds its own share of
//! each epoch; every epoch is sent before any is waited for, so epochs overlap in the dataflow.
//!
//! Prints, per epoch, the rows and an order-independent checksum against the reference, and the
//! per-worker output max/mean; exits 1 if any epoch differs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use skewjoin_operators::hash::hash_u64;
use skewjoin_operators::join_logic::each_row;
use skewjoin_operators::{JoinConfig, JoinType};
use skewjoin_planner::{SkewJoin, Strategy};
use timely::dataflow::operators::{Input, Inspect, Probe};
use timely::dataflow::{InputHandle, ProbeHandle};

/// A key: `None` is SQL NULL.
type Key = Option<u64>;

struct Args {
    strategies: Vec<Strategy>,
    hows: Vec<JoinType>,
    epochs: u32,
    rows: u32,
    partitions: Option<usize>,
    drift: bool,
    timely: Vec<String>,
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        strategies: vec![Strategy::Auto],
        hows: vec![JoinType::Inner],
        epochs: 3,
        rows: 20_000,
        partitions: None,
        drift: false,
        timely: Vec::new(),
    };
    let mut given = std::env::args();
    args.timely.extend(given.next());
    while let Some(arg) = given.next() {
        let mut value = |name: &str| given.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--strategy" => {
                let name = value("--strategy")?;
                args.strategies = if name == "all" {
                    std::iter::once(Strategy::Auto)
                        .chain(Strategy::CONCRETE)
                        .collect()
                } else {
                    vec![name.parse()?]
                };
            }
            "--how" => {
                let name = value("--how")?;
                args.hows = if name == "all" {
                    JoinType::ALL.to_vec()
                } else {
                    vec![name.parse()?]
                };
            }
            "--epochs" => {
                args.epochs = value("--epochs")?
                    .parse()
                    .map_err(|e| format!("--epochs: {e}"))?
            }
            "--rows" => {
                args.rows = value("--rows")?
                    .parse()
                    .map_err(|e| format!("--rows: {e}"))?
            }
            "--partitions" => {
                args.partitions = Some(
                    value("--partitions")?
                        .parse()
                        .map_err(|e| format!("--partitions: {e}"))?,
                )
            }
            "--drift" => args.drift = true,
            _ => args.timely.push(arg),
        }
    }
    Ok(args)
}

/// Row `i` of side `left` (or right) in `epoch`: a tenth of each side on a key hot on both sides
/// (key 1000 + epoch with drift, else 1000), a twentieth on a key hot on this side only, one key
/// that is hot on both sides in epoch 0, on the left only in epoch 1 and gone after (with
/// drift), a few NULL keys, and cold keys for the rest.
fn key_of(left: bool, epoch: u32, i: u32, drift: bool) -> Key {
    let drifted = if drift { epoch as u64 } else { 0 };
    match i % 100 {
        0..=9 => Some(1000 + drifted),
        10..=14 if left => Some(2000 + drifted),
        10..=14 => Some(3000 + drifted),
        15..=17 if !drift || epoch == 0 || (epoch == 1 && left) => Some(4000),
        18 => None,
        _ => Some(hash_u64(((epoch as u64) << 40) | ((left as u64) << 32) | i as u64) % 50_000),
    }
}

/// One epoch's records of one side: `(key, row number)`.
fn side(left: bool, epoch: u32, rows: u32, drift: bool) -> impl Iterator<Item = (Key, u32)> {
    (0..rows).map(move |i| (key_of(left, epoch, i, drift), i))
}

/// An output row's hash: order-independent checksums sum them.
fn row_hash(key: &Key, left: Option<&u32>, right: Option<&u32>) -> u64 {
    let part = |v: Option<&u32>| v.map_or(u64::MAX, |&v| v as u64);
    hash_u64(key.map_or(7, |k| k) ^ hash_u64(part(left)) ^ hash_u64(part(right)).rotate_left(17))
}

/// The reference: `(rows, checksum)` of one epoch's join, by hashing.
fn reference(how: JoinType, epoch: u32, rows: u32, drift: bool) -> (u64, u64) {
    let left: Vec<(Key, u32)> = side(true, epoch, rows, drift).collect();
    let right: Vec<(Key, u32)> = side(false, epoch, rows, drift).collect();
    let mut right_by_key: HashMap<u64, Vec<u32>> = HashMap::new();
    let mut left_keys: HashMap<u64, u64> = HashMap::new();
    for (key, row) in &right {
        if let Some(key) = key {
            right_by_key.entry(*key).or_default().push(*row);
        }
    }
    for (key, _) in &left {
        if let Some(key) = key {
            *left_keys.entry(*key).or_default() += 1;
        }
    }
    let (mut count, mut sum) = (0u64, 0u64);
    let mut emit = |key: &Key, l: Option<&u32>, r: Option<&u32>| {
        count += 1;
        sum = sum.wrapping_add(row_hash(key, l, r));
    };
    for (key, row) in &left {
        let matches = key.and_then(|k| right_by_key.get(&k));
        match (how, matches) {
            (JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full, Some(rights)) => {
                rights.iter().for_each(|r| emit(key, Some(row), Some(r)))
            }
            (JoinType::Left | JoinType::Full | JoinType::LeftAnti, None) => {
                emit(key, Some(row), None)
            }
            (JoinType::LeftSemi, Some(_)) => emit(key, Some(row), None),
            _ => {}
        }
    }
    for (key, row) in &right {
        let matched = key.is_some_and(|k| left_keys.contains_key(&k));
        match how {
            JoinType::Right | JoinType::Full | JoinType::RightAnti if !matched => {
                emit(key, None, Some(row))
            }
            JoinType::RightSemi if matched => emit(key, None, Some(row)),
            _ => {}
        }
    }
    (count, sum)
}

/// Per epoch and worker: output rows and the sum of their hashes.
type Tallies = Vec<Vec<(u64, u64)>>;

/// Runs one strategy and join type; returns whether every epoch was exact.
fn run(args: &Args, strategy: Strategy, how: JoinType) -> Result<bool, String> {
    let (epochs, rows, drift, partitions) = (args.epochs, args.rows, args.drift, args.partitions);
    let tallies: Arc<Mutex<Tallies>> = Arc::new(Mutex::new(Vec::new()));
    let shared = Arc::clone(&tallies);
    let refused: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let refusal = Arc::clone(&refused);
    let guards = timely::execute_from_args(args.timely.clone().into_iter(), move |worker| {
        let (index, peers) = (worker.index(), worker.peers());
        let mut left_input = InputHandle::new();
        let mut right_input = InputHandle::new();
        let probe = ProbeHandle::new();
        let tallies = Arc::clone(&shared);
        let refusal = Arc::clone(&refusal);
        {
            let mut tallies = tallies.lock().unwrap();
            if tallies.is_empty() {
                *tallies = vec![vec![(0, 0); peers]; epochs as usize];
            }
        }
        worker.dataflow::<u32, _, _>(|scope| {
            let left = scope.input_from(&mut left_input);
            let right = scope.input_from(&mut right_input);
            let mut config = JoinConfig::new();
            if let Some(partitions) = partitions {
                config = config.with_partitions(partitions);
            }
            // Each output row becomes its hash here; a program would write or aggregate it.
            let joined = left
                .skew_join(right)
                .how(how)
                .strategy(strategy)
                .config(&config)
                .with(each_row(
                    |key: &Key, l: Option<&u32>, r: Option<&u32>, out: &mut Vec<u64>| {
                        out.push(row_hash(key, l, r))
                    },
                ));
            match joined {
                Ok(hashes) => {
                    hashes
                        .inspect_core(move |event| {
                            if let Ok((stamp, hashes)) = event {
                                let epoch = *stamp.elements().first().expect("a time") as usize;
                                let mut tallies = tallies.lock().unwrap();
                                let tally = &mut tallies[epoch][index];
                                tally.0 += hashes.len() as u64;
                                for hash in hashes {
                                    tally.1 = tally.1.wrapping_add(*hash);
                                }
                            }
                        })
                        .probe_with(&probe);
                }
                Err(error) => *refusal.lock().unwrap() = Some(error.to_string()),
            }
        });
        for epoch in 0..epochs {
            left_input.advance_to(epoch);
            right_input.advance_to(epoch);
            for record in side(true, epoch, rows, drift).skip(index).step_by(peers) {
                left_input.send(record);
            }
            for record in side(false, epoch, rows, drift).skip(index).step_by(peers) {
                right_input.send(record);
            }
            worker.step();
        }
        left_input.close();
        right_input.close();
        // Park rather than spin while waiting on other workers: an idle worker then costs no CPU.
        while !probe.done() {
            worker.step_or_park(None);
        }
    })?;
    drop(guards);
    if let Some(error) = refused.lock().unwrap().take() {
        println!("{strategy} {how}: refused: {error}");
        return Ok(true);
    }
    let tallies = tallies.lock().unwrap();
    let mut exact = true;
    for (epoch, workers) in tallies.iter().enumerate() {
        let (count, sum) = workers
            .iter()
            .fold((0u64, 0u64), |(c, s), t| (c + t.0, s.wrapping_add(t.1)));
        let expected = reference(how, epoch as u32, rows, drift);
        let max = workers.iter().map(|t| t.0).max().unwrap_or(0) as f64;
        let mean = count as f64 / workers.len().max(1) as f64;
        let ok = (count, sum) == expected;
        exact &= ok;
        println!(
            "{strategy} {how} epoch {epoch}: {count} rows ({}), per-worker output max/mean {:.2}",
            if ok {
                "exact".to_string()
            } else {
                format!("WRONG: expected {} rows and another checksum", expected.0)
            },
            if mean > 0.0 { max / mean } else { 1.0 },
        );
    }
    Ok(exact)
}

fn main() {
    let args = match parse() {
        Ok(args) => args,
        Err(error) => {
            eprintln!("embed: {error}");
            std::process::exit(2);
        }
    };
    let mut exact = true;
    for &strategy in &args.strategies {
        for &how in &args.hows {
            match run(&args, strategy, how) {
                Ok(ok) => exact &= ok,
                Err(error) => {
                    eprintln!("embed: {error}");
                    std::process::exit(2);
                }
            }
        }
    }
    if !exact {
        eprintln!("embed: some epochs differ from the reference");
        std::process::exit(1);
    }
}
