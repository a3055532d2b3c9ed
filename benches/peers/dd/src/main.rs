//! `dd-join`: differential dataflow's `join` on a benches/peers workload, reduced to the row
//! count and checksum every peer in run.py computes (issue 8).
//!
//! Each worker reads its share of the Parquet row groups of both sides, all of them wait at a
//! barrier, and only then does the clock start: `seconds` is the join (feeding the collections,
//! exchanging, arranging, joining and accumulating every output row), not the reading.

use std::cell::Cell;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::{Arc, Barrier};
use std::time::Instant;

use arrow::array::{Array, Int64Array};
use clap::{Parser, ValueEnum};
use differential_dataflow::input::Input;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum How {
    Inner,
    Full,
}

/// Differential dataflow's join on two Parquet files with Int64 `key`, `id` and `value`
/// columns; prints `rows`, `checksum` and `seconds` (the join, without reading) as tab-separated
/// lines.
#[derive(Parser, Debug)]
#[command(name = "dd-join")]
struct Args {
    #[arg(long)]
    left: PathBuf,
    #[arg(long)]
    right: PathBuf,
    #[arg(long, value_enum, default_value = "inner")]
    how: How,
    #[arg(long, default_value_t = 2)]
    workers: usize,
}

/// One row: (key, (id, value)), the shape `join` wants.
type Row = (i64, (i64, i64));

/// run.py's checksum term for one output row; a NULL-padded side passes 0 for its id and value.
/// Rust's `%` truncates like SQL's, so negative inputs would agree too.
fn term(lid: i64, lvalue: i64, rid: i64, rvalue: i64) -> i128 {
    ((lvalue % 1009) * (rvalue % 1013) + 3 * (lid % 1019) + 7 * (rid % 1021)) as i128
}

/// The rows of the row groups `index`, `index + peers`, ... of `path`.
fn read_share(path: &Path, index: usize, peers: usize) -> Result<Vec<Row>, String> {
    let fail = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let file = File::open(path).map_err(|e| fail(&e))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| fail(&e))?;
    let groups: Vec<usize> = (index..builder.metadata().num_row_groups())
        .step_by(peers)
        .collect();
    let reader = builder
        .with_row_groups(groups)
        .build()
        .map_err(|e| fail(&e))?;
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| fail(&e))?;
        let column = |name: &str| -> Result<&Int64Array, String> {
            let array = batch.column_by_name(name).ok_or_else(|| {
                format!("{}: no column `{name}`; the file needs Int64 key, id and value (as `skewjoin gen` writes)", path.display())
            })?;
            let ints = array.as_any().downcast_ref::<Int64Array>().ok_or_else(|| {
                format!(
                    "{}: column `{name}` is {}, not Int64",
                    path.display(),
                    array.data_type()
                )
            })?;
            if ints.null_count() > 0 {
                return Err(format!(
                    "{}: column `{name}` has NULLs, which this benchmark does not handle",
                    path.display()
                ));
            }
            Ok(ints)
        };
        let (key, id, value) = (column("key")?, column("id")?, column("value")?);
        rows.extend((0..batch.num_rows()).map(|i| (key.value(i), (id.value(i), value.value(i)))));
    }
    Ok(rows)
}

/// One worker's part: (output rows, checksum, seconds of join) or why it failed.
type WorkerResult = Result<(i128, i128, f64), String>;

fn main() {
    let args = Args::parse();
    if args.workers == 0 {
        eprintln!("error: --workers must be at least 1");
        std::process::exit(2);
    }
    let (left, right, how) = (args.left.clone(), args.right.clone(), args.how);
    // Every worker waits here after reading, so the clock starts when all inputs are in memory.
    let barrier = Arc::new(Barrier::new(args.workers));
    let guards = timely::execute(
        timely::Config::process(args.workers),
        move |worker| -> WorkerResult {
            let (index, peers) = (worker.index(), worker.peers());
            // This worker's share of the output: inspect sees every update the join emits.
            let rows = Rc::new(Cell::new(0i128));
            let sum = Rc::new(Cell::new(0i128));
            let (rows_in, sum_in) = (rows.clone(), sum.clone());
            let (mut linput, mut rinput, probe) = worker.dataflow::<u64, _, _>(|scope| {
                let (linput, lrows) = scope.new_collection::<Row, isize>();
                let (rinput, rrows) = scope.new_collection::<Row, isize>();
                let matched = lrows
                    .clone()
                    .join(rrows.clone())
                    .map(|(_key, ((lid, lvalue), (rid, rvalue)))| term(lid, lvalue, rid, rvalue));
                let output = match how {
                    How::Inner => matched,
                    How::Full => {
                        // The rows of each side whose key the other side lacks, padded with 0
                        // (run.py's NULL): an antijoin against the other side's distinct keys.
                        let lkeys = lrows.clone().map(|(key, _)| key).distinct();
                        let rkeys = rrows.clone().map(|(key, _)| key).distinct();
                        let left_only = lrows
                            .antijoin(rkeys)
                            .map(|(_key, (lid, lvalue))| term(lid, lvalue, 0, 0));
                        let right_only = rrows
                            .antijoin(lkeys)
                            .map(|(_key, (rid, rvalue))| term(0, 0, rid, rvalue));
                        matched.concat(left_only).concat(right_only)
                    }
                };
                // Count and checksum are sums over rows, so each update's term weighted by its
                // diff adds up to the same totals as the consolidated output would: antijoin's
                // retractions (it subtracts the semijoin) cancel the rows they retract.
                let (probe, _) = output
                    .inspect(move |(t, _time, diff)| {
                        let diff = *diff as i128;
                        rows_in.set(rows_in.get() + diff);
                        sum_in.set(sum_in.get() + *t * diff);
                    })
                    .probe();
                (linput, rinput, probe)
            });
            let lshare = read_share(&left, index, peers);
            let rshare = read_share(&right, index, peers);
            // Wait even after a failed read, or the other workers would wait for this one forever;
            // a failed worker then feeds nothing and reports its error.
            barrier.wait();
            let started = Instant::now();
            let (lshare, rshare) = match (lshare, rshare) {
                (Ok(l), Ok(r)) => (l, r),
                (Err(e), _) | (_, Err(e)) => return Err(e),
            };
            for row in lshare {
                linput.insert(row);
            }
            for row in rshare {
                rinput.insert(row);
            }
            linput.advance_to(1);
            rinput.advance_to(1);
            linput.flush();
            rinput.flush();
            worker.step_while(|| probe.less_than(linput.time()));
            Ok((rows.get(), sum.get(), started.elapsed().as_secs_f64()))
        },
    );
    let guards = guards.unwrap_or_else(|e| {
        eprintln!("error: could not start timely: {e}");
        std::process::exit(1);
    });
    let (mut rows, mut sum, mut seconds) = (0i128, 0i128, 0f64);
    for result in guards.join() {
        match result.and_then(|r| r) {
            Ok((r, s, t)) => {
                rows += r;
                sum += s;
                seconds = seconds.max(t);
            }
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(1);
            }
        }
    }
    println!("rows\t{rows}");
    println!("checksum\t{sum}");
    println!("seconds\t{seconds:.6}");
}

#[cfg(test)]
mod tests {
    use super::term;

    #[test]
    fn padded_side_counts_as_zero() {
        assert_eq!(term(1020, 1010, 0, 0), 3);
        assert_eq!(term(0, 0, 1022, 2000), 7);
        assert_eq!(term(1, 1009 + 2, 2, 1013 + 5), 2 * 5 + 3 + 14);
    }
}
