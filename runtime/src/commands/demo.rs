//! `skewjoin demo`: every strategy on generated pairs, with what each did.

use std::time::Instant;

use skewjoin_operators::Side;
use skewjoin_planner::datagen::{generate, GenSpec};
use skewjoin_planner::work_costs::WorkCosts;
use skewjoin_planner::{choose, Choice, PlanInputs, Strategy, Tuning};

use crate::cli::{DemoArgs, RunArgs};
use crate::engine::{self, JoinPlan};
use crate::error::{Error, Result};
use crate::generate::to_side;
use crate::metrics::checksum_hex;

use super::gen::{describe, gen_spec};
use super::write_stdout;
use crate::cli::checks::{check_vprp_flags, layout, parse_how, with_vprp_flags};

/// `skewjoin demo`.
pub fn demo(args: DemoArgs) -> Result<()> {
    let how = parse_how(&args.run.how)?;
    let run = RunArgs {
        workers: args.run.workers.or(Some(2)),
        partitions: args.run.partitions.or(Some(8)),
        ..args.run.clone()
    };
    let (workers, partitions) = layout(&run)?;
    check_vprp_flags(&run)?;
    let defaults = GenSpec {
        left_rows: 100_000,
        right_rows: 100_000,
        keys: 10_000,
        left_skew: 0.8,
        right_skew: 0.8,
        ..GenSpec::default()
    };
    let spec = gen_spec(&args.gen, defaults)?;
    outln!("skewjoin demo: {} join of generated data", how);
    outln!("data: {}", describe(&spec));
    let start = Instant::now();
    let pair = generate(&spec);
    let counts = pair.counts();
    let expected = counts.rows(how);
    let left = to_side("left", &pair.left);
    let right = to_side("right", &pair.right);
    outln!(
        "generated in {:.2}s; the exact {how} join has {expected} rows",
        start.elapsed().as_secs_f64()
    );
    outln!(
        "running each strategy on {workers} worker threads, {partitions} partitions; load is max/mean over partitions (1.00 = perfectly even); copies is records received over input rows (1.00x: no record copied)\n"
    );
    // The first column fits every strategy's name (the registry may grow).
    let width = Strategy::CONCRETE
        .iter()
        .map(|strategy| strategy.name().len())
        .max()
        .unwrap_or(0)
        .max(10);
    outln!(
        "{:<width$} {:>12} {:>16} {:>9} {:>13} {:>10} {:>10} {:>10} {:>8}",
        "strategy",
        "rows",
        "checksum",
        "time",
        "rows/s",
        "input",
        "output",
        "peak",
        "copies"
    );
    let mut checksums = Vec::new();
    let mut all_right = true;
    // Only VPRP's flags: the demo runs each strategy with its defaults otherwise.
    let vprp_flags = with_vprp_flags(&Tuning::default(), &run);
    for strategy in Strategy::CONCRETE {
        let inputs = PlanInputs {
            how,
            left_rows: spec.left_rows,
            right_rows: spec.right_rows,
            workers,
            // No budget: each strategy runs as named (AM-Join would run IB-Join on a side within
            // a budget, and the demo shows AM-Join's own key classes).
            broadcast_limit: 0,
            costs: WorkCosts::THREADS,
        };
        let choice = match choose(strategy, &inputs) {
            Ok(choice) => Choice {
                resolved: choice.resolved.tuned(&vprp_flags),
                ..choice
            },
            Err(_) => {
                outln!("{:<width$} (cannot compute a {how} join)", strategy.name());
                continue;
            }
        };
        let plan = JoinPlan {
            how,
            resolved: choice.resolved,
            partitions,
            workers,
        };
        let report = engine::run(left.clone(), right.clone(), plan, None, None, None)?;
        // A copying strategy's label says which side it copied: "ib-R", "bcast-L".
        let label = match choice.resolved.copied_side() {
            Some(side) => {
                let name = choice.resolved.label();
                format!("{name}-{}", if side == Side::Left { "L" } else { "R" })
            }
            None => choice.resolved.name().to_string(),
        };
        let checksum = report
            .checksum
            .ok_or_else(|| Error::Internal("a counted run reports its checksum".into()))?;
        let seconds = report.elapsed.as_secs_f64();
        outln!(
            "{:<width$} {:>12} {:>16} {:>8.3}s {:>13.3e} {:>10.2} {:>10.2} {:>10.2} {:>7.2}x",
            label,
            report.output_rows,
            checksum_hex(checksum),
            seconds,
            report.output_rows as f64 / seconds.max(1e-9),
            report.loads.input_imbalance(),
            report.loads.output_imbalance(),
            report.loads.peak_imbalance(),
            report
                .loads
                .copying_factor(spec.left_rows + spec.right_rows),
        );
        all_right &= report.output_rows == expected;
        checksums.push(checksum);
    }
    checksums.dedup();
    outln!("");
    if all_right && checksums.len() == 1 {
        outln!("every strategy produced the exact {expected} rows with the same checksum");
        Ok(())
    } else {
        Err(Error::Internal(
            "strategies disagree on the output; this is a bug, please report it".into(),
        ))
    }
}
