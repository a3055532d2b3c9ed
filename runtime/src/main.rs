//! `skewjoin`: skew-resistant equi-joins of Parquet, Arrow IPC and CSV files.

use std::process::ExitCode;

use clap::Parser;
use skewjoin_runtime::cli::{Cli, Command};
use skewjoin_runtime::commands;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Before any thread starts: a written join's batches reuse freed memory instead of
    // faulting in fresh pages.
    if cli.command.writes_output() {
        skewjoin_runtime::allocator::tune_for_batches();
    }
    // Ctrl-C removes unfinished output files and exits with 130.
    skewjoin_runtime::interrupt::install();
    // A decoder's panic on a corrupt file is reported as an input error naming the file.
    skewjoin_runtime::io::quiet_fenced_panics();
    // Every CSV reader of this process reads the dialect from there.
    if let Some(csv) = cli.command.csv_args() {
        skewjoin_runtime::io::set_csv_dialect(csv.dialect());
    }
    let result = match cli.command {
        Command::Join(args) => commands::join(args),
        Command::Gen(args) => commands::gen(args),
        Command::Demo(args) => commands::demo(args),
        Command::Explain(args) => commands::explain(args),
        Command::Cluster(args) => skewjoin_runtime::cluster::launch(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of our output went away (`| head -1`): end quietly, as tools do.
        Err(error @ skewjoin_runtime::error::Error::ClosedPipe) => {
            skewjoin_runtime::interrupt::end_quietly(error.exit_code())
        }
        // Worker threads may still hold unfinished output files when the error reaches here;
        // they are removed before the process exits, as on Ctrl-C.
        Err(error) => skewjoin_runtime::interrupt::abort(error.exit_code(), &error.to_string()),
    }
}
