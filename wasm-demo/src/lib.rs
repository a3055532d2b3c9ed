//! The browser build of skewjoin: generates the same skewed tables as `skewjoin gen`, runs the
//! real join dataflow of each strategy on one timely worker hosting all P partitions
//! ([`skewjoin_planner::exec_local`]), and reports the same figures as `skewjoin join --metrics`.
//!
//! The page's Web Worker calls [`strategies`], [`join_types`], then [`prepare`] (generate the data
//! once) and [`run_prepared`] for each strategy, so that it can report progress between them;
//! [`run`] does all of it in one call. Arguments and answers are JSON text; the same logic is
//! available to Rust as [`Prepared`] and [`run_request`], which is what the tests call natively. Every
//! strategy in [`Strategy::CONCRETE`] is offered and resolved with [`choose`], so a strategy added
//! to the planner appears in the page without a change here; whatever choices it makes are
//! reported verbatim as the run's `plan` (the serialised [`Resolved`]).
//!
//! ```
//! use skewjoin_wasm_demo::{run_request, DemoRequest};
//!
//! let request = DemoRequest { left_rows: 2000, right_rows: 2000, keys: 100, ..DemoRequest::default() };
//! let response = run_request(&request).unwrap();
//! assert!(response.runs.iter().all(|run| run.output_rows() == Some(response.expected_rows)));
//! ```
//!
//! (Not run as a doc test, to spare CI a native build of this crate; the unit test
//! `every_strategy_that_runs_produces_the_exact_rows_and_one_checksum` makes the same check.)

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use skewjoin_operators::{JoinType, Key, LoadFigures, PartitionLoad};
use skewjoin_planner::choose::broadcast_limit_for_memory;
use skewjoin_planner::count_sink::CountSink;
use skewjoin_planner::datagen::{generate, GenSpec};
use skewjoin_planner::exec::JoinJob;
use skewjoin_planner::exec_local::execute_local;
use skewjoin_planner::report::StrategyReport;
use skewjoin_planner::row_hash::table_row_hashes;
use skewjoin_planner::work_costs::{WorkCosts, CLUSTER_RECORD_NANOS};
use skewjoin_planner::{choose, PlanInputs, Resolved, Strategy};
use wasm_bindgen::prelude::*;

/// The most rows per side the page may ask for: the generated tables, keys and hashes of two
/// sides of this size take about 100 MB of the browser's memory.
pub const MAX_ROWS: u64 = 2_000_000;

/// The largest key domain the page may ask for (the form's limit): the estimate of a request's
/// work sums over every key.
pub const MAX_KEYS: u64 = 10_000_000;

/// The most partitions the page may ask for (bars stay readable).
pub const MAX_PARTITIONS: usize = 256;

/// The most work a request may ask for, in records: for each strategy, the input records it
/// reads plus the output rows it counts and checksums (at roughly 100 million a second in a
/// browser, some 20 seconds). The page runs in a Web Worker and can be cancelled, so this bounds
/// a mistake, not a freeze; it is checked on an estimate before the data is generated and on the
/// exact count after.
pub const MAX_WORK: u64 = 2_000_000_000;

/// The memory the broadcast budget is computed for: a page cannot read the machine's memory, so
/// it uses the native binary's fallback for machines whose memory it cannot read.
pub const ASSUMED_MEMORY_BYTES: u64 = 4 << 30;

/// What the page asks for: the data (the flags of `skewjoin gen`), the join and the strategies.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DemoRequest {
    /// Rows of the left table.
    pub left_rows: u64,
    /// Rows of the right table.
    pub right_rows: u64,
    /// Size of the key domain.
    pub keys: u64,
    /// Zipf exponent of the left keys (0 = uniform).
    pub left_skew: f64,
    /// Zipf exponent of the right keys.
    pub right_skew: f64,
    /// Rank hot keys independently on each side (false: the same keys are hot on both).
    pub independent: bool,
    /// Share of each side's rows whose keys exist on that side only.
    pub noise: f64,
    /// Random seed; `skewjoin gen --seed` with the same value writes the same tables.
    pub seed: u64,
    /// P.
    pub partitions: usize,
    /// Join type, as `skewjoin join --how` takes it.
    pub how: String,
    /// Strategy names as `--strategy` takes them; empty means every concrete strategy.
    pub strategies: Vec<String>,
}

impl Default for DemoRequest {
    /// The defaults of `skewjoin demo`.
    fn default() -> Self {
        DemoRequest {
            left_rows: 100_000,
            right_rows: 100_000,
            keys: 10_000,
            left_skew: 0.8,
            right_skew: 0.8,
            independent: false,
            noise: 0.0,
            seed: 42,
            partitions: 8,
            how: "inner".into(),
            strategies: Vec::new(),
        }
    }
}

impl DemoRequest {
    /// The generator spec.
    pub fn spec(&self) -> GenSpec {
        GenSpec {
            left_rows: self.left_rows,
            right_rows: self.right_rows,
            keys: self.keys,
            left_skew: self.left_skew,
            right_skew: self.right_skew,
            independent: self.independent,
            noise: self.noise,
            seed: self.seed,
        }
    }
}

/// One strategy's run, with the fields of `skewjoin join --metrics` (the names are the same) plus
/// what the page shows besides.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunMetrics {
    /// The strategy as asked for.
    pub requested: String,
    /// The strategy that ran (`auto` resolved).
    pub strategy: String,
    /// Why the planner chose it.
    pub strategy_reason: String,
    /// The side copied whole to every worker: Broadcast-Join's, and the small side of IB-Join,
    /// DER and DDR (`Resolved::copied_side`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broadcast_side: Option<String>,
    /// Every choice the planner made, as the planner serialises it.
    pub plan: Resolved,
    /// The join type.
    pub how: String,
    /// Timely workers: one, hosting every partition.
    pub workers: usize,
    /// Partitions.
    pub partitions: usize,
    /// Input rows on the left.
    pub left_rows: u64,
    /// Input rows on the right.
    pub right_rows: u64,
    /// Output rows.
    pub output_rows: u64,
    /// The output checksum as 16 hex digits, defined as the runtime defines it.
    pub checksum: String,
    /// Wall time of the join in milliseconds, measured with the page's clock.
    pub elapsed_ms: f64,
    /// Per-partition load under `--metrics`'s names: `per_partition`, `records_received`,
    /// `copying_factor` and the max/mean figures.
    #[serde(flatten)]
    pub load: LoadFigures,
    /// The busiest partition's work on P machines of a cluster, in milliseconds
    /// ([`predicted_makespan`]).
    pub predicted_makespan_ms: f64,
    /// That makespan over the time of a perfect spread of the same work.
    pub makespan_over_ideal: f64,
    /// What the strategy decided, under the names `--metrics` uses: `am` (AM-Join's key classes
    /// and largest grids), `tree_rounds` (Tree-Join), `ranges` (VPRP's range table).
    #[serde(flatten)]
    pub strategy_report: StrategyReport,
}

/// A strategy's outcome: it ran, or it cannot compute this join type.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum RunOutcome {
    /// It ran.
    Ran(Box<RunMetrics>),
    /// The planner refused it, saying why.
    Refused {
        /// The strategy as asked for.
        requested: String,
        /// The planner's message.
        error: String,
    },
}

impl RunOutcome {
    /// Output rows, if it ran.
    pub fn output_rows(&self) -> Option<u64> {
        match self {
            RunOutcome::Ran(metrics) => Some(metrics.output_rows),
            RunOutcome::Refused { .. } => None,
        }
    }
}

/// What [`run`] answers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DemoResponse {
    /// The request, with defaults filled in.
    pub request: DemoRequest,
    /// The exact output row count of this join type on this data, from key counts alone.
    pub expected_rows: u64,
    /// Time to generate and hash the tables, in milliseconds.
    pub generate_ms: f64,
    /// One entry per strategy asked for, in order.
    pub runs: Vec<RunOutcome>,
}

/// Milliseconds from an arbitrary origin: `performance.now()` in the browser (std's clock panics
/// on wasm32-unknown-unknown), a monotonic clock natively.
fn now_ms() -> f64 {
    #[cfg(target_arch = "wasm32")]
    {
        #[wasm_bindgen]
        extern "C" {
            #[wasm_bindgen(js_namespace = performance, js_name = now)]
            fn performance_now() -> f64;
        }
        performance_now()
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        use std::sync::OnceLock;
        use std::time::Instant;
        static ORIGIN: OnceLock<Instant> = OnceLock::new();
        ORIGIN.get_or_init(Instant::now).elapsed().as_secs_f64() * 1000.0
    }
}

/// `n` with a comma between each group of three digits: 12,407,662,170.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// The output rows the generator's distribution gives this join type on average (not those of
/// one draw): matched rows pair up with probability `sum_k p_left(k) p_right(k)`, the Zipf
/// probabilities of the shared ranking, or `1 / keys` where either side is uniform or the hot
/// keys are drawn independently (the average over the permutations). Outer, semi and anti joins
/// add at most their input rows.
pub fn estimated_output_rows(spec: &GenSpec, how: JoinType) -> f64 {
    let keys = spec.keys.max(1);
    let shared = spec.left_skew > 0.0 && spec.right_skew > 0.0 && !spec.independent;
    let overlap = if shared {
        let (mut left, mut right, mut both) = (0.0f64, 0.0f64, 0.0f64);
        for rank in 1..=keys {
            let r = rank as f64;
            let (l, rr) = (r.powf(-spec.left_skew), r.powf(-spec.right_skew));
            left += l;
            right += rr;
            both += l * rr;
        }
        both / (left * right)
    } else {
        1.0 / keys as f64
    };
    let matched = 1.0 - spec.noise;
    let pairs = spec.left_rows as f64 * spec.right_rows as f64 * matched * matched * overlap;
    let (l, r) = (spec.left_rows as f64, spec.right_rows as f64);
    match how {
        JoinType::Inner => pairs,
        JoinType::Left => pairs + l,
        JoinType::Right => pairs + r,
        JoinType::Full => pairs + l + r,
        JoinType::LeftSemi | JoinType::LeftAnti => l,
        JoinType::RightSemi | JoinType::RightAnti => r,
    }
}

/// The work of running `strategies` strategies, in records ([`MAX_WORK`]).
fn work(spec: &GenSpec, strategies: usize, output_rows: f64) -> f64 {
    strategies as f64 * ((spec.left_rows + spec.right_rows) as f64 + output_rows)
}

/// Why a request of `work` records is refused, and what would bring it under the limit. Above a
/// Zipf exponent of 1 the hottest keys keep most of the rows however many keys there are, so
/// widening the key domain is offered only where it helps.
fn too_much_work(
    how: JoinType,
    output_rows: u64,
    strategies: usize,
    spec: &GenSpec,
    estimated: bool,
) -> String {
    let total = work(spec, strategies, output_rows as f64) as u64;
    let mut advice = Vec::new();
    if strategies > 1 {
        advice.push(format!(
            "run one strategy instead of {strategies} (1/{strategies} of the work)"
        ));
    }
    advice.push(if spec.left_skew.max(spec.right_skew) > 1.0 {
        "lower the skew (above 1 the hottest keys keep most rows whatever the key domain) or the rows".to_string()
    } else {
        "lower the skew or the rows, or widen the key domain".to_string()
    });
    format!(
        "this {how} join has {}{} output rows; with the input rows, {} would handle {} records \
         and the browser takes at most {} (about 20 seconds): {}",
        if estimated { "about " } else { "" },
        grouped(output_rows),
        if strategies == 1 {
            "one strategy".to_string()
        } else {
            format!("{strategies} strategies")
        },
        grouped(total),
        grouped(MAX_WORK),
        advice.join(", or ")
    )
}

/// A request's data, generated and hashed once, and what it will run.
pub struct Prepared {
    request: DemoRequest,
    how: JoinType,
    spec: GenSpec,
    expected: u64,
    generate_ms: f64,
    strategies: Vec<(String, Strategy)>,
    left: Arc<[Key]>,
    right: Arc<[Key]>,
    left_hashes: Arc<[u64]>,
    right_hashes: Arc<[u64]>,
}

/// What [`prepare`] answers: everything of a [`DemoResponse`] but the runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PreparedSummary {
    /// The request, with defaults filled in.
    pub request: DemoRequest,
    /// The exact output row count of this join type on this data.
    pub expected_rows: u64,
    /// Time to generate and hash the tables, in milliseconds.
    pub generate_ms: f64,
    /// The strategies to run, in order, as asked for.
    pub strategies: Vec<String>,
}

impl Prepared {
    /// Checks the request, estimates its work, generates and hashes the tables.
    pub fn new(request: &DemoRequest) -> Result<Prepared, String> {
        let how: JoinType = request.how.parse()?;
        if request.left_rows > MAX_ROWS || request.right_rows > MAX_ROWS {
            return Err(format!(
                "at most {} rows per side in the browser (its memory); use the skewjoin command for more",
                grouped(MAX_ROWS)
            ));
        }
        if request.partitions == 0 || request.partitions > MAX_PARTITIONS {
            return Err(format!(
                "the partition count must be between 1 and {MAX_PARTITIONS}"
            ));
        }
        if request.keys > MAX_KEYS {
            return Err(format!(
                "at most {} keys in the browser; use the skewjoin command for more",
                grouped(MAX_KEYS)
            ));
        }
        let strategies: Vec<(String, Strategy)> = if request.strategies.is_empty() {
            Strategy::CONCRETE
                .iter()
                .map(|s| (s.name().to_string(), *s))
                .collect()
        } else {
            request
                .strategies
                .iter()
                .map(|name| Ok((name.clone(), name.parse::<Strategy>()?)))
                .collect::<Result<_, String>>()?
        };
        let spec = request.spec();
        spec.validate()?;
        // Refuse before generating what would be refused after: the estimate is an average, so
        // it is given a margin, and the exact count below decides the rest.
        let estimate = estimated_output_rows(&spec, how);
        if work(&spec, strategies.len(), estimate) > 1.25 * MAX_WORK as f64 {
            return Err(too_much_work(
                how,
                estimate as u64,
                strategies.len(),
                &spec,
                true,
            ));
        }

        let start = now_ms();
        let pair = generate(&spec);
        let expected = pair.counts().rows(how);
        if work(&spec, strategies.len(), expected as f64) > MAX_WORK as f64 {
            return Err(too_much_work(how, expected, strategies.len(), &spec, false));
        }
        let left: Arc<[Key]> = pair.left.key.iter().map(|&k| Key::Int(k)).collect();
        let right: Arc<[Key]> = pair.right.key.iter().map(|&k| Key::Int(k)).collect();
        let left_hashes: Arc<[u64]> = table_row_hashes(&pair.left).into();
        let right_hashes: Arc<[u64]> = table_row_hashes(&pair.right).into();
        drop(pair);
        Ok(Prepared {
            request: request.clone(),
            how,
            spec,
            expected,
            generate_ms: now_ms() - start,
            strategies,
            left,
            right,
            left_hashes,
            right_hashes,
        })
    }

    /// What the page shows before the first run.
    pub fn summary(&self) -> PreparedSummary {
        PreparedSummary {
            request: self.request.clone(),
            expected_rows: self.expected,
            generate_ms: self.generate_ms,
            strategies: self
                .strategies
                .iter()
                .map(|(name, _)| name.clone())
                .collect(),
        }
    }

    /// Runs the `index`th strategy asked for.
    pub fn run(&self, index: usize) -> Result<RunOutcome, String> {
        let (requested, strategy) = self
            .strategies
            .get(index)
            .cloned()
            .ok_or_else(|| format!("there is no strategy number {index}"))?;
        let partitions = self.request.partitions;
        let inputs = PlanInputs {
            how: self.how,
            left_rows: self.spec.left_rows,
            right_rows: self.spec.right_rows,
            // Each partition stands for a worker of a native run with P = W.
            workers: partitions,
            broadcast_limit: broadcast_limit_for_memory(ASSUMED_MEMORY_BYTES, partitions),
            // As a native run of P threads.
            costs: WorkCosts::THREADS,
        };
        let choice = match choose(strategy, &inputs) {
            Ok(choice) => choice,
            Err(error) => {
                return Ok(RunOutcome::Refused {
                    requested,
                    error: error.to_string(),
                })
            }
        };
        let job = JoinJob {
            left: Arc::clone(&self.left),
            right: Arc::clone(&self.right),
            left_hashes: Arc::clone(&self.left_hashes),
            right_hashes: Arc::clone(&self.right_hashes),
            how: self.how,
            resolved: choice.resolved,
            partitions,
            workers: 1,
        };
        let start = now_ms();
        let output = execute_local(&job, CountSink::default())?;
        let elapsed_ms = now_ms() - start;
        let broadcast_side = choice.resolved.copied_side().map(|side| side.to_string());
        let loads = &output.loads;
        let (predicted_makespan_ms, makespan_over_ideal) = predicted_makespan(&loads.per_partition);
        Ok(RunOutcome::Ran(Box::new(RunMetrics {
            requested,
            strategy: choice.resolved.name().to_string(),
            strategy_reason: choice.reason,
            broadcast_side,
            plan: choice.resolved,
            how: self.how.name().to_string(),
            workers: 1,
            partitions,
            left_rows: self.spec.left_rows,
            right_rows: self.spec.right_rows,
            output_rows: output.summary.rows,
            checksum: format!("{:016x}", output.summary.checksum),
            elapsed_ms,
            load: loads.figures(self.spec.left_rows + self.spec.right_rows),
            predicted_makespan_ms,
            makespan_over_ideal,
            strategy_report: output.report,
        })))
    }
}

/// The time P machines of a cluster would take for these loads, in milliseconds, and its ratio to
/// the time of a perfect spread of the same work: each partition's records received, every one
/// weighed as a shuffled record, and its output rows weighed as `auto` weighs an output pair on a
/// cluster ([`WorkCosts::CLUSTER`], a record at [`CLUSTER_RECORD_NANOS`]); the busiest
/// partition's work is the makespan. Copies count as the records they are, so a broadcast's
/// even spread of copied work shows its cost here.
pub fn predicted_makespan(per_partition: &[PartitionLoad]) -> (f64, f64) {
    let works: Vec<u128> = per_partition
        .iter()
        .map(|p| WorkCosts::CLUSTER.work(p.input_records, u128::from(p.output_rows)))
        .collect();
    let max = works.iter().copied().max().unwrap_or(0);
    let total: u128 = works.iter().sum();
    let to_ms = |work: f64| work / 1024.0 * CLUSTER_RECORD_NANOS as f64 / 1e6;
    let mean = total as f64 / works.len().max(1) as f64;
    let ratio = if mean > 0.0 { max as f64 / mean } else { 1.0 };
    (to_ms(max as f64), ratio)
}

/// Generates the data and runs every strategy asked for.
pub fn run_request(request: &DemoRequest) -> Result<DemoResponse, String> {
    let prepared = Prepared::new(request)?;
    let runs = (0..prepared.strategies.len())
        .map(|index| prepared.run(index))
        .collect::<Result<_, String>>()?;
    let summary = prepared.summary();
    Ok(DemoResponse {
        request: summary.request,
        expected_rows: summary.expected_rows,
        generate_ms: summary.generate_ms,
        runs,
    })
}

thread_local! {
    /// The data [`prepare`] made, which [`run_prepared`] joins (the page's worker runs one
    /// strategy a call, so that it can report progress between them).
    static PREPARED: std::cell::RefCell<Option<Prepared>> = const { std::cell::RefCell::new(None) };
}

/// Generates a request's data (JSON, as [`run`] takes it) and keeps it for [`run_prepared`];
/// answers a [`PreparedSummary`] as JSON, or throws the error message.
#[wasm_bindgen]
pub fn prepare(request: &str) -> Result<String, JsValue> {
    prepare_json(request).map_err(|message| JsValue::from_str(&message))
}

/// [`prepare`] without the JavaScript types.
pub fn prepare_json(request: &str) -> Result<String, String> {
    let request: DemoRequest =
        serde_json::from_str(request).map_err(|e| format!("bad request: {e}"))?;
    // The last request's data goes first: two copies of 2M-row tables would not fit.
    PREPARED.with(|slot| slot.borrow_mut().take());
    let prepared = Prepared::new(&request)?;
    let summary = serde_json::to_string(&prepared.summary()).map_err(|e| e.to_string())?;
    PREPARED.with(|slot| *slot.borrow_mut() = Some(prepared));
    Ok(summary)
}

/// Runs the `index`th strategy of the last [`prepare`]d request; answers its [`RunOutcome`] as
/// JSON, or throws the error message.
#[wasm_bindgen]
pub fn run_prepared(index: usize) -> Result<String, JsValue> {
    run_prepared_json(index).map_err(|message| JsValue::from_str(&message))
}

/// [`run_prepared`] without the JavaScript types.
pub fn run_prepared_json(index: usize) -> Result<String, String> {
    PREPARED.with(|slot| {
        let slot = slot.borrow();
        let prepared = slot.as_ref().ok_or("nothing is prepared")?;
        let outcome = prepared.run(index)?;
        serde_json::to_string(&outcome).map_err(|e| e.to_string())
    })
}

/// A strategy as the page offers and describes it: its `--strategy` name and its module's
/// description ([`Strategy::about`], [`Strategy::sketch`]).
#[derive(Serialize)]
struct StrategyCard {
    name: &'static str,
    about: &'static str,
    sketch: &'static str,
}

/// The concrete strategies, as a JSON array of `{name, about, sketch}`, in the registry's order.
#[wasm_bindgen]
pub fn strategies() -> String {
    let cards: Vec<StrategyCard> = Strategy::CONCRETE
        .iter()
        .map(|s| StrategyCard {
            name: s.name(),
            about: s.about(),
            sketch: s.sketch(),
        })
        .collect();
    serde_json::to_string(&cards).expect("descriptions encode")
}

/// The join types, as a JSON array of their `--how` names.
#[wasm_bindgen]
pub fn join_types() -> String {
    let names: Vec<&str> = JoinType::ALL.iter().map(|how| how.name()).collect();
    serde_json::to_string(&names).expect("names encode")
}

/// The default request, as JSON.
#[wasm_bindgen]
pub fn default_request() -> String {
    serde_json::to_string(&DemoRequest::default()).expect("a request encodes")
}

/// Runs a request given as JSON ([`DemoRequest`]; missing fields take their defaults) and answers
/// a [`DemoResponse`] as JSON, or throws the error message.
#[wasm_bindgen]
pub fn run(request: &str) -> Result<String, JsValue> {
    run_json(request).map_err(|message| JsValue::from_str(&message))
}

/// [`run`] without the JavaScript types.
pub fn run_json(request: &str) -> Result<String, String> {
    let request: DemoRequest =
        serde_json::from_str(request).map_err(|e| format!("bad request: {e}"))?;
    let response = run_request(&request)?;
    serde_json::to_string(&response).map_err(|e| format!("cannot encode the result: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> DemoRequest {
        DemoRequest {
            left_rows: 4000,
            right_rows: 3000,
            keys: 500,
            left_skew: 1.2,
            right_skew: 0.9,
            noise: 0.05,
            seed: 5,
            partitions: 8,
            ..DemoRequest::default()
        }
    }

    #[test]
    fn a_refused_join_says_its_size_in_groups_of_digits_and_advice_that_fits_its_skew() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(12_407_662_170), "12,407,662,170");
        let request = DemoRequest {
            left_rows: 100_000,
            right_rows: 100_000,
            keys: 10_000,
            left_skew: 1.2,
            right_skew: 1.2,
            ..small()
        };
        let Err(error) = run_request(&request) else {
            panic!("a join of more than the limit's work ran");
        };
        // Refused on the estimate, before generating anything.
        assert!(error.contains("has about 5"), "{error}");
        assert!(error.contains("at most 2,000,000,000"), "{error}");
        assert!(error.contains("run one strategy instead of"), "{error}");
        assert!(!error.contains("widen the key domain"), "{error}");
        let spec = GenSpec {
            left_skew: 0.9,
            right_skew: 0.5,
            ..request.spec()
        };
        let milder = too_much_work(JoinType::Inner, 4_000_000_000, 1, &spec, false);
        assert!(
            milder.contains("has 4,000,000,000 output rows")
                && milder.contains("one strategy would handle")
                && milder.contains("widen the key domain")
                && !milder.contains("run one strategy"),
            "{milder}"
        );
    }

    /// The estimate that refuses a request before generating it is the generator's average: close
    /// to the exact count of a draw, on every shape of data the page offers.
    #[test]
    fn the_work_estimate_is_close_to_the_exact_count() {
        for (left_skew, right_skew, independent, noise) in [
            (0.0, 0.0, false, 0.0),
            (0.8, 0.8, false, 0.0),
            (1.2, 0.9, false, 0.1),
            (1.1, 0.0, false, 0.0),
            (1.0, 1.0, true, 0.2),
        ] {
            let spec = GenSpec {
                left_rows: 200_000,
                right_rows: 100_000,
                keys: 5_000,
                left_skew,
                right_skew,
                independent,
                noise,
                seed: 3,
            };
            let exact = generate(&spec).counts();
            let inputs = (spec.left_rows + spec.right_rows) as f64;
            // Independent rankings: the average over permutations, not this one's overlap.
            let tolerance = if independent { 0.5 } else { 0.1 };
            let estimate = estimated_output_rows(&spec, JoinType::Inner);
            let inner = exact.inner as f64;
            assert!(
                (estimate - inner).abs() <= tolerance * inner.max(1.0),
                "{spec:?}: estimate {estimate} vs exact {inner}"
            );
            // Rows without partners are counted as if every input row had none: an
            // overestimate by at most the input rows, never an underestimate.
            for how in [JoinType::Full, JoinType::LeftSemi, JoinType::RightAnti] {
                let estimate = estimated_output_rows(&spec, how);
                let exact = exact.rows(how) as f64;
                assert!(
                    estimate >= (1.0 - tolerance) * exact
                        && estimate <= (1.0 + tolerance) * exact + inputs,
                    "{spec:?} {how}: estimate {estimate} vs exact {exact}"
                );
            }
        }
    }

    /// The page's worker runs a request one strategy at a time; that gives the same runs as
    /// running it whole, and the makespan follows the busiest partition.
    #[test]
    fn preparing_then_running_each_strategy_equals_one_run() {
        let request = DemoRequest {
            strategies: vec!["shuffle".into(), "broadcast".into(), "am".into()],
            ..small()
        };
        let whole = run_request(&request).unwrap();
        prepare_json(&serde_json::to_string(&request).unwrap()).unwrap();
        for (index, run) in whole.runs.iter().enumerate() {
            let alone: serde_json::Value =
                serde_json::from_str(&run_prepared_json(index).unwrap()).unwrap();
            let mut expected = serde_json::to_value(run).unwrap();
            let mut alone = alone;
            // The one figure measured by the clock.
            expected["elapsed_ms"] = serde_json::Value::Null;
            alone["elapsed_ms"] = serde_json::Value::Null;
            assert_eq!(alone, expected, "strategy {index}");
        }
        assert!(run_prepared_json(whole.runs.len()).is_err());
        let ran = |index: usize| match &whole.runs[index] {
            RunOutcome::Ran(metrics) => metrics.as_ref().clone(),
            RunOutcome::Refused { error, .. } => panic!("{error}"),
        };
        let (shuffle, broadcast) = (ran(0), ran(1));
        // Skewed on the left (1.2): a shuffle's busiest partition sets a makespan above ideal.
        assert!(
            shuffle.makespan_over_ideal > 1.2,
            "{}",
            shuffle.makespan_over_ideal
        );
        // The broadcast spreads its work evenly but copies the right side to every partition.
        assert!(broadcast.load.copying_factor > 2.0);
        let (even, ratio) = predicted_makespan(
            &[PartitionLoad {
                input_records: 1000,
                output_rows: 0,
                ..PartitionLoad::default()
            }; 4],
        );
        assert!((ratio - 1.0).abs() < 1e-12 && even > 0.0);
        let (uneven, ratio) = predicted_makespan(&[
            PartitionLoad {
                input_records: 4000,
                ..PartitionLoad::default()
            },
            PartitionLoad::default(),
            PartitionLoad::default(),
            PartitionLoad::default(),
        ]);
        assert!((ratio - 4.0).abs() < 1e-12 && (uneven - 4.0 * even).abs() < 1e-9);
    }

    #[test]
    fn every_strategy_that_runs_produces_the_exact_rows_and_one_checksum() {
        for how in JoinType::ALL {
            let request = DemoRequest {
                how: how.name().into(),
                ..small()
            };
            let response = run_request(&request).unwrap();
            assert_eq!(response.runs.len(), Strategy::CONCRETE.len());
            let mut checksums = Vec::new();
            for run in &response.runs {
                if let RunOutcome::Ran(metrics) = run {
                    assert_eq!(metrics.output_rows, response.expected_rows, "{how}");
                    assert_eq!(metrics.load.per_partition.len(), 8);
                    let produced: u64 = metrics
                        .load
                        .per_partition
                        .iter()
                        .map(|p| p.output_rows)
                        .sum();
                    assert_eq!(produced, metrics.output_rows);
                    checksums.push(metrics.checksum.clone());
                }
            }
            assert!(!checksums.is_empty());
            checksums.dedup();
            assert_eq!(checksums.len(), 1, "{how}: {checksums:?}");
        }
    }

    #[test]
    fn refusals_and_bad_requests_are_reported() {
        let response = run_request(&DemoRequest {
            how: "full".into(),
            strategies: vec!["broadcast".into(), "shuffle".into()],
            ..small()
        })
        .unwrap();
        assert!(
            matches!(&response.runs[0], RunOutcome::Refused { requested, .. } if requested == "broadcast")
        );
        assert!(matches!(&response.runs[1], RunOutcome::Ran(_)));

        for bad in [
            r#"{"how": "sideways"}"#,
            r#"{"strategies": ["nope"]}"#,
            r#"{"partitions": 0}"#,
            r#"{"noise": 2}"#,
            r#"{"left_rows": 1e12}"#,
            r#"{"keys": 10000001}"#,
            r#"{"rows": 5}"#,
            // 20,000 rows of one key on each side: 4 * 10^8 output rows.
            r#"{"left_rows": 20000, "right_rows": 20000, "keys": 1}"#,
        ] {
            assert!(run_json(bad).is_err(), "{bad}");
        }
    }

    /// The JSON the page reads carries the metrics file's field names.
    #[test]
    fn json_has_the_metrics_fields() {
        let text = run_json(
            r#"{"left_rows": 300, "right_rows": 200, "keys": 20, "partitions": 3, "strategies": ["broadcast"]}"#,
        )
        .unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let run = &value["runs"][0];
        for field in [
            "strategy",
            "strategy_reason",
            "how",
            "partitions",
            "output_rows",
            "checksum",
            "per_partition",
            "records_received",
            "copying_factor",
            "input_imbalance",
            "output_imbalance",
            "peak_imbalance",
            "predicted_makespan_ms",
            "makespan_over_ideal",
        ] {
            assert!(!run[field].is_null(), "{field} in {run}");
        }
        assert_eq!(run["broadcast_side"], "right");
        // The right side is copied to every partition: more records received than input rows.
        assert!(run["copying_factor"].as_f64().unwrap() > 1.0, "{run}");
        assert_eq!(run["plan"]["kind"], "broadcast");
        assert!(run["per_partition"][0]["input_records"].as_u64().is_some());
        assert_eq!(run["checksum"].as_str().unwrap().len(), 16);
        assert_eq!(value["request"]["seed"], 42);
    }

    /// The IB family copies its small side as Broadcast-Join does, and the page says which, as
    /// `--metrics` does; a shuffle copies nothing.
    #[test]
    fn the_ib_family_reports_its_copied_side() {
        let text = run_json(
            r#"{"left_rows": 300, "right_rows": 200, "keys": 20, "partitions": 3, "strategies": ["ib", "der", "ddr", "shuffle"]}"#,
        )
        .unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let sides: Vec<Option<&str>> = value["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|run| run["broadcast_side"].as_str())
            .collect();
        assert_eq!(sides, [Some("right"), Some("right"), Some("right"), None]);
    }

    /// The page draws Tree-Join's rounds, AM-Join's key classes and VPRP's range map from these.
    #[test]
    fn each_strategy_reports_its_decisions() {
        let response = run_request(&DemoRequest {
            strategies: vec!["tree".into(), "am".into(), "vprp".into(), "shuffle".into()],
            ..small()
        })
        .unwrap();
        let runs: Vec<&RunMetrics> = response
            .runs
            .iter()
            .map(|run| match run {
                RunOutcome::Ran(metrics) => metrics.as_ref(),
                RunOutcome::Refused { error, .. } => panic!("{error}"),
            })
            .collect();
        let (tree, am, vprp, shuffle) = (runs[0], runs[1], runs[2], runs[3]);
        assert!(tree.strategy_report.tree_rounds.is_some_and(|r| r >= 1));
        let classes = am.strategy_report.am.as_ref().expect("AM-Join's classes");
        // Left skew 1.2 on 4,000 rows over 500 keys: some key is hot on the left.
        assert!(classes.hot_left_only + classes.hot_both > 0);
        assert!(classes.left_records.iter().sum::<u64>() <= 4000);
        let ranges = vprp.strategy_report.ranges.as_ref().expect("VPRP's ranges");
        assert_eq!(ranges.virtual_ranges.len(), 2 * 8);
        let routed: u64 = ranges.virtual_ranges.iter().map(|r| r.actual_records).sum();
        assert_eq!(routed, 4000 + 3000);
        assert_eq!(shuffle.strategy_report, StrategyReport::default());

        let value: serde_json::Value = serde_json::to_value(&response).unwrap();
        assert!(value["runs"][0]["tree_rounds"].as_u64().is_some());
        assert!(value["runs"][1]["am"]["hot_both"].as_u64().is_some());
        assert!(value["runs"][2]["ranges"]["virtual_ranges"][0]["partition"].is_u64());
        assert!(value["runs"][3].get("ranges").is_none());
    }

    #[test]
    fn the_page_is_offered_every_concrete_strategy_with_its_modules_description() {
        let cards: Vec<serde_json::Value> = serde_json::from_str(&strategies()).unwrap();
        assert_eq!(cards.len(), Strategy::CONCRETE.len());
        for (card, strategy) in cards.iter().zip(Strategy::CONCRETE) {
            assert_eq!(card["name"], strategy.name());
            assert!(card["about"].as_str().unwrap().len() > 40, "{strategy}");
            assert!(card["sketch"].as_str().unwrap().contains('▶'), "{strategy}");
        }
    }
}
