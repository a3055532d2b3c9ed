//! Peak memory of a join whose output is large and dropped as it arrives: one hot key of
//! `rows` left and `rows` right records (`rows^2` output rows, 10^8 by default), or `--keys N`
//! keys spread uniformly, joined on two workers by any strategy through the builder
//! ([`SkewJoin`]), into a sink that counts the `(key, left, right)` rows it is handed and drops
//! them.
//!
//! Run under `/usr/bin/time -v` and read "Maximum resident set size": the join's output should
//! reach the sink while the join runs, so the peak is the input plus a bounded amount of output
//! in flight, not the whole output.
//!
//! ```text
//! cargo build --release -p skewjoin-measure --bin output_memory
//! /usr/bin/time -v target/release/output_memory shuffle [rows] [--keys N] [--partitions P]
//! ```
//!
//! Strategies by their command-line names: `shuffle`, `tree-basic` (basic Tree-Join), `am`
//! (AM-Join, keys counted and planned inside the dataflow, the hot key gridded over the
//! partitions), `tree` (AM-Join's grid through Tree-Join rounds), and the others.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

use skewjoin_operators::{JoinConfig, JoinLogic};
use skewjoin_planner::{SkewJoin, Strategy};
use timely::dataflow::operators::{Inspect, ToStream};

/// One output row as the joins' default logic makes it: 40 bytes.
type Row = (u64, Option<u64>, Option<u64>);

/// Makes the `(key, left, right)` rows, as `rows()` does.
struct Rows;

impl JoinLogic<u64, u64, u64, Row> for Rows {
    #[inline]
    fn row(&mut self, key: &u64, left: Option<&u64>, right: Option<&u64>, out: &mut Vec<Row>) {
        out.push((*key, left.copied(), right.copied()));
    }
}

fn main() {
    let mut strategy = None;
    let mut rows = 10_000u64;
    let mut keys = 1u64;
    let mut partitions = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = |what: &str| -> u64 {
            args.next()
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{what} takes a number"))
        };
        match arg.as_str() {
            "--keys" => keys = number("--keys").max(1),
            "--partitions" => partitions = Some(number("--partitions") as usize),
            other => match (other.parse::<u64>(), other.parse::<Strategy>()) {
                (Ok(number), _) => rows = number,
                (_, Ok(named)) => strategy = Some(named),
                _ => panic!("{other}: neither a row count nor a strategy"),
            },
        }
    }
    let strategy = strategy.expect("a strategy: shuffle, am, tree, tree-basic, ...");
    let expected = if keys == 1 {
        rows * rows
    } else {
        // Record i has key i % keys on both sides.
        (0..keys)
            .map(|k| {
                let n = rows / keys + u64::from(k < rows % keys);
                n * n
            })
            .sum()
    };
    let started = Instant::now();
    let strategy_name = strategy;
    let counts = timely::execute(timely::Config::process(2), move |worker| {
        let (index, peers) = (worker.index() as u64, worker.peers() as u64);
        let seen = Rc::new(Cell::new(0u64));
        let partitions = partitions.unwrap_or(peers as usize);
        let config = JoinConfig::new().with_partitions(partitions);
        let counted = Rc::clone(&seen);
        worker.dataflow::<u32, _, _>(|scope| {
            // Each worker feeds every `peers`-th record of each side.
            let mine = (index..rows).step_by(peers as usize);
            let left = mine
                .clone()
                .map(move |i| (i % keys, i))
                .to_stream(scope)
                .container::<Vec<_>>();
            let right = mine
                .map(move |i| (i % keys, i))
                .to_stream(scope)
                .container::<Vec<_>>();
            // Every strategy through the builder, as an embedder writes it; AM-Join and
            // Tree-Join count the keys and plan inside the dataflow.
            let output = left
                .skew_join(right)
                .strategy(strategy)
                .config(&config)
                .with(Rows)
                .expect("an inner join runs with every strategy");
            output.inspect_core(move |event| {
                if let Ok((_, rows)) = event {
                    counted.set(counted.get() + rows.len() as u64);
                }
            });
        });
        while worker.step_or_park(None) {}
        seen.get()
    })
    .expect("timely runs")
    .join()
    .into_iter()
    .map(|count| count.expect("a worker finished"))
    .sum::<u64>();
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(counts, expected, "every output row reached the sink once");
    println!("{strategy_name}: {counts} rows in {seconds:.2} s");
}
