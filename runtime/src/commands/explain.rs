//! `skewjoin explain`: the plan of a join without running it, or with `--analyze` beside the run's measures.

use crate::cli::ExplainArgs;
use crate::error::{Error, Result};
use crate::progress::Progress;

use super::join::{prepare, run_prepared, Inputs, Reading};
use super::write_stdout;
use crate::plan::{plan_of, PlanFacts};

/// `skewjoin explain`.
pub fn explain(args: ExplainArgs) -> Result<()> {
    if args.join.cluster.is_cluster() {
        return Err(Error::Usage(
            "explain runs on one process; leave out --processes (the plan of a cluster run is in \
             its --metrics)"
                .into(),
        ));
    }
    let mut progress = Progress::new(args.join.quiet);
    // Without --analyze nothing but the keys is looked at, and nothing else is read.
    let reading = if args.analyze {
        Reading::Whole
    } else {
        Reading::Keys
    };
    let prepared = prepare(&args.join, &progress, reading)?;
    let Inputs::Loaded(left, right) = &prepared.inputs else {
        return Err(Error::Internal("explain reads its inputs' keys".into()));
    };
    let mut plan = plan_of(
        &PlanFacts {
            choice: &prepared.choice,
            how: prepared.how,
            workers: prepared.workers,
            partitions: prepared.partitions,
            budget: &prepared.budget,
        },
        (&args.join.left.display().to_string(), left),
        (&args.join.right.display().to_string(), right),
        args.top,
    );
    if args.analyze {
        plan.measured = Some(run_prepared(&args.join, prepared, &mut progress, true)?);
    }
    if args.json {
        let text = serde_json::to_string_pretty(&plan)
            .map_err(|e| Error::Internal(format!("cannot encode the plan: {e}")))?;
        outln!("{text}");
    } else {
        write_stdout(format_args!("{}", plan.render()))?;
    }
    Ok(())
}
