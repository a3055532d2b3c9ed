//! The command line of the `skewjoin` binary.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use skewjoin_planner::am_join::Statistics;
use skewjoin_planner::Strategy;

pub mod checks;

/// Skew-resistant equi-joins of Parquet, Arrow IPC and CSV files.
#[derive(Debug, Parser)]
#[command(name = "skewjoin", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Join two files.
    Join(JoinArgs),
    /// Write a pair of skewed tables (left.parquet and right.parquet, or with --kind pavlo
    /// rankings.parquet and uservisits.parquet) and print their exact join sizes.
    Gen(GenArgs),
    /// Generate skewed data in memory and run every strategy on it, side by side.
    Demo(DemoArgs),
    /// Show the plan for a join: strategy and why, hot keys, predicted per-partition load.
    Explain(ExplainArgs),
    /// Run a join on N processes of this machine, connected as a timely cluster over loopback:
    /// `skewjoin cluster --processes 2 -- join LEFT RIGHT --on KEY ...`.
    Cluster(LaunchArgs),
}

/// `skewjoin explain`: the arguments of `join`, plus what to show.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    #[command(flatten)]
    pub join: JoinArgs,
    /// Also run the join and show measured load beside the prediction.
    #[arg(long)]
    pub analyze: bool,
    /// Print the plan as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// How many of the hottest keys to list.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
}

/// Flags shared by commands that run joins.
#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    /// Join type: inner, left, right, full, semi, anti, right-semi, right-anti.
    #[arg(long, default_value = "inner")]
    pub how: String,
    /// Worker threads (default: the number of CPU cores).
    #[arg(long, short = 'w')]
    pub workers: Option<usize>,
    /// Partitions the work is cut into (default: one per worker). Load is reported per partition.
    #[arg(long, short = 'p')]
    pub partitions: Option<usize>,
    /// VPRP: virtual key ranges per partition (the paper's alpha).
    #[arg(long, default_value_t = skewjoin_planner::vprp::DEFAULT_VIRTUAL_PER_PARTITION)]
    pub virtual_per_partition: u32,
    /// VPRP: the fraction of records sampled to plan the key ranges (0..1).
    #[arg(long, default_value_t = DEFAULT_SAMPLE_FRACTION)]
    pub sample_fraction: f64,
}

/// VPRP's default sampled fraction of the records.
pub const DEFAULT_SAMPLE_FRACTION: f64 = 0.05;

/// The flags' defaults, for callers that build a run without a command line
/// ([`crate::tables`]).
impl Default for RunArgs {
    fn default() -> RunArgs {
        RunArgs {
            how: "inner".into(),
            workers: None,
            partitions: None,
            virtual_per_partition: skewjoin_planner::vprp::DEFAULT_VIRTUAL_PER_PARTITION,
            sample_fraction: DEFAULT_SAMPLE_FRACTION,
        }
    }
}

/// `skewjoin join`.
#[derive(Debug, Args)]
pub struct JoinArgs {
    /// The left input (.parquet, .arrow/.ipc/.feather or .csv with a header).
    pub left: PathBuf,
    /// The right input.
    pub right: PathBuf,
    /// Key columns, the same names on both sides, comma-separated.
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["left_on", "right_on"])]
    pub on: Vec<String>,
    /// Key columns of the left input, comma-separated.
    #[arg(long, value_delimiter = ',', requires = "right_on")]
    pub left_on: Vec<String>,
    /// Key columns of the right input, comma-separated.
    #[arg(long, value_delimiter = ',', requires = "left_on")]
    pub right_on: Vec<String>,
    /// The left input's columns to output, in this order, comma-separated (default: all). The
    /// others are never decoded (Parquet, Arrow IPC) or converted (CSV); key columns are read
    /// for the join whether output or not.
    #[arg(long, value_delimiter = ',')]
    pub left_columns: Option<Vec<String>>,
    /// The right input's columns to output, as --left-columns.
    #[arg(long, value_delimiter = ',')]
    pub right_columns: Option<Vec<String>>,
    /// Columns to output by name, from whichever input has them, comma-separated; the left's
    /// come first in the output. A name both inputs have is refused unless it is a key column
    /// of both at the same place (`--on id`: taken from the side every output row has); name
    /// such columns with --left-columns and --right-columns instead.
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["left_columns", "right_columns"])]
    pub select: Option<Vec<String>>,
    // The help lists the strategies' names from the planner, where each is written once.
    #[arg(long, short = 's', default_value = Strategy::Auto.name(), help = strategy_help())]
    pub strategy: String,
    #[command(flatten)]
    pub run: RunArgs,
    /// Input format for both files, overriding their extensions: parquet, arrow, csv.
    #[arg(long)]
    pub format: Option<String>,
    #[command(flatten)]
    pub csv: CsvArgs,
    /// Write the joined rows here (format from the extension, or --output-format). Without it the
    /// output is produced and summarised as a row count and checksum.
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    /// Output format, overriding the output's extension: parquet, arrow, csv.
    #[arg(long)]
    pub output_format: Option<String>,
    /// Output compression: zstd, snappy, lz4 or none. Default: zstd for Parquet (as Polars and
    /// DataFusion write it), none for Arrow IPC (so that readers can memory-map it; IPC has no
    /// snappy) and CSV (which is always written plain).
    #[arg(long)]
    pub compression: Option<String>,
    /// Write run metrics (per-partition load, imbalance, timings) as JSON here.
    #[arg(long)]
    pub metrics: Option<PathBuf>,
    /// The broadcast budget: the most rows `auto` and AM-Join copy to every worker (as an index
    /// for IB-Join). Default: a side fits when rows x 128 bytes x workers is within a quarter
    /// of the available memory (MemAvailable; 4 GiB assumed where unreadable).
    #[arg(long)]
    pub broadcast_limit: Option<u64>,
    /// The memory a run may plan with, per process (e.g. 8G, 512M): the broadcast budget, and
    /// the key columns auto's skew check keeps for the join (a sixteenth, at most 256 MiB a
    /// side), are derived from it instead of the available memory. Default: MemAvailable.
    #[arg(long, value_parser = crate::memory::parse_size)]
    pub memory_limit: Option<u64>,
    /// AM-Join and tree: a key is hot on a side above this many thousandths of one partition's
    /// share of that side's rows (default 5).
    #[arg(long)]
    pub hot_per_mille: Option<u32>,
    /// AM-Join and tree: the keys hot on one side only may broadcast at most this many
    /// thousandths of one partition's share of the input; beyond it, the keys with the most
    /// records to broadcast go to the grid (default 100).
    #[arg(long)]
    pub broadcast_per_mille: Option<u32>,
    /// AM-Join and tree: how keys are counted: `exact` (default), or `space-saving` summaries
    /// of a bounded number of counters per worker (`space-saving:N` for N counters).
    #[arg(long)]
    pub statistics: Option<Statistics>,
    /// Tree-Join (tree, tree-basic): leaf size c, the most records of each side a leaf holds
    /// (default 1024).
    #[arg(long)]
    pub leaf: Option<u32>,
    /// Tree-Join (tree, tree-basic): fan-out f, the sub-lists a large list is cut into per
    /// round (default 4).
    #[arg(long)]
    pub fanout: Option<u32>,
    /// Print nothing but errors.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

impl JoinArgs {
    /// The output columns `--left-columns`, `--right-columns` and `--select` choose.
    pub fn columns(&self) -> checks::ColumnChoice {
        checks::ColumnChoice {
            left: self.left_columns.clone(),
            right: self.right_columns.clone(),
            select: self.select.clone(),
        }
    }

    /// AM-Join's and Tree-Join's settings from the flags.
    pub fn tuning(&self) -> skewjoin_planner::Tuning {
        skewjoin_planner::Tuning {
            hot_per_mille: self.hot_per_mille,
            broadcast_per_mille: self.broadcast_per_mille,
            leaf: self.leaf,
            fanout: self.fanout,
            statistics: self.statistics,
            // VPRP's come from `RunArgs` (`checks::with_vprp_flags`), which `demo` has too.
            ..skewjoin_planner::Tuning::default()
        }
    }
}

/// The data generator's flags, shared by `gen` and `demo`.
#[derive(Debug, Args, Clone)]
pub struct GenFlags {
    /// Rows per side.
    #[arg(long)]
    pub rows: Option<u64>,
    /// Rows on the left (overrides --rows).
    #[arg(long)]
    pub left_rows: Option<u64>,
    /// Rows on the right (overrides --rows).
    #[arg(long)]
    pub right_rows: Option<u64>,
    /// Size of the key domain.
    #[arg(long)]
    pub keys: Option<u64>,
    /// Zipf exponent of both sides (0 = uniform).
    #[arg(long)]
    pub skew: Option<f64>,
    /// Zipf exponent of the left side (overrides --skew).
    #[arg(long)]
    pub left_skew: Option<f64>,
    /// Zipf exponent of the right side (overrides --skew).
    #[arg(long)]
    pub right_skew: Option<f64>,
    /// Rank hot keys independently on each side (by default the same keys are hot on both).
    #[arg(long)]
    pub independent: bool,
    /// Share of each side's rows whose keys exist on that side only (0..1).
    #[arg(long, default_value_t = 0.0)]
    pub noise: f64,
    /// Random seed; the same seed gives the same tables.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

/// `skewjoin gen`.
#[derive(Debug, Args)]
pub struct GenArgs {
    /// Directory to write left.parquet and right.parquet into (created if missing).
    #[arg(long)]
    pub out: PathBuf,
    /// What to generate. `zipf` (default): left and right with an Int64 `key`. `pavlo`: the
    /// web-log pair of the Pavlo et al. benchmark, rankings (one row per page, --keys pages,
    /// unique string pageURL) and uservisits (--rows visits, destURL Zipf over the pages with
    /// exponent --skew, a share --noise of visits to pages absent from rankings); join them on
    /// rankings.pageURL = uservisits.destURL.
    #[arg(long, default_value = "zipf", value_parser = ["zipf", "pavlo"])]
    pub kind: String,
    /// File format: parquet (default), arrow or csv; the extension follows.
    #[arg(long, default_value = "parquet")]
    pub format: String,
    #[command(flatten)]
    pub gen: GenFlags,
}

/// `skewjoin demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    #[command(flatten)]
    pub gen: GenFlags,
    #[command(flatten)]
    pub run: RunArgs,
}

/// How CSV inputs are read (both files alike).
#[derive(Debug, Args, Clone, Default)]
pub struct CsvArgs {
    /// The character between CSV fields: one ASCII character, or `tab`. Default: detected from
    /// each file's header line (comma, tab, `;` or `|`).
    #[arg(long, value_parser = crate::io::parse_csv_byte)]
    pub delimiter: Option<u8>,
    /// The character that quotes CSV fields. Default: `"`.
    #[arg(long, value_parser = crate::io::parse_csv_byte)]
    pub quote: Option<u8>,
    /// The text that stands for NULL in CSV inputs, e.g. `NA` or `\N`. Default: an empty field.
    #[arg(long)]
    pub null: Option<String>,
}

impl CsvArgs {
    /// The dialect these flags give.
    pub fn dialect(&self) -> crate::io::CsvDialect {
        crate::io::CsvDialect {
            delimiter: self.delimiter,
            quote: self.quote,
            null: self.null.clone(),
        }
    }
}

impl Command {
    /// The CSV flags of a command that reads tables (`join`, `explain`); `None` for the others.
    pub fn csv_args(&self) -> Option<&CsvArgs> {
        match self {
            Command::Join(args) => Some(&args.csv),
            Command::Explain(args) => Some(&args.join.csv),
            _ => None,
        }
    }

    /// Whether the command joins and writes the output to a file (or standard output).
    pub fn writes_output(&self) -> bool {
        matches!(self, Command::Join(args) if args.output.is_some())
    }
}

/// The flags of `join` that make it one process of a cluster.
#[derive(Debug, Args, Clone, Default)]
pub struct ClusterArgs {
    /// Cluster mode: the number of processes (timely's -n). Each process reads only its share of
    /// the inputs; start every process with the same arguments but --process.
    #[arg(long, short = 'n', requires_all = ["process", "hostfile"])]
    pub processes: Option<usize>,
    /// Cluster mode: this process's index, 0 to N-1 (timely's -p). Process 0 writes the
    /// metrics and the output manifest.
    #[arg(long, requires = "processes")]
    pub process: Option<usize>,
    /// Cluster mode: a file with one host:port per process, in process order (timely's -h).
    #[arg(long, requires = "processes")]
    pub hostfile: Option<PathBuf>,
    /// Cluster mode: seconds to wait for every process to connect before giving up (exit 5).
    #[arg(long, default_value_t = 30)]
    pub connect_timeout: u64,
    /// Cluster mode: a file holding the cluster's shared secret (at least 16 bytes, not
    /// readable by others): processes prove they hold it before they join. Or set
    /// SKEWJOIN_CLUSTER_SECRET; `skewjoin cluster` makes one for each run.
    #[arg(long, value_name = "PATH", requires = "processes")]
    pub cluster_secret_file: Option<PathBuf>,
    /// Cluster mode without a secret: anyone who can reach a process's port can join the
    /// cluster or feed it data; only on a trusted private network.
    #[arg(long, requires = "processes")]
    pub insecure: bool,
    /// Cluster mode: write this process's own figures as JSON to PATH (its workers' output rows,
    /// its join time, CPU seconds during the join and in all, peak memory), where `--metrics`
    /// describes the whole cluster. `{process}` in PATH is replaced by the process index, so
    /// processes sharing a file system write different files.
    #[arg(long, value_name = "PATH", requires = "processes")]
    pub process_metrics: Option<PathBuf>,
    /// Cluster mode: each process's link rate in each direction, such as 100mbit, 1gbit or
    /// 10gbit, for `auto`: on a slow link a record sent costs more than its CPU, so a small
    /// side's copy and AM-Join's extra traffic weigh more. Unset, the link is not weighed (it was
    /// never the bottleneck at 1.25 Gbit/s a core).
    #[arg(long, value_name = "RATE", value_parser = crate::link::parse_bandwidth, requires = "processes")]
    pub bandwidth: Option<u64>,
}

/// `skewjoin cluster`: the flags of the launcher.
#[derive(Debug, Args)]
pub struct LaunchArgs {
    /// How many processes to start on this machine.
    #[arg(long, short = 'n')]
    pub processes: usize,
    /// The command each process runs, after `--`: `join LEFT RIGHT --on KEY ...` (--processes,
    /// --process and --hostfile are added).
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// `--strategy`'s help: every strategy's name.
fn strategy_help() -> String {
    let names: Vec<&str> = Strategy::ALL
        .iter()
        .map(|strategy| strategy.name())
        .collect();
    format!(
        "Strategy: {} (see the README's table of strategies)",
        names.join(", ")
    )
}
