//! The browser build of skewjoin: generates the same skewed tables as `skewjoin gen`, runs the
//! real join dataflow of each strategy on one timely worker hosting all P partitions
//! ([`skewjoin_planner::exec_local`]), and reports the same figures as `skewjoin join --metrics`.
//!
//! The JavaScript side calls [`strategies`], [`join_types`] and [`run`] with JSON text; the same
//! logic is available to Rust as [`run_request`], which is what the tests call natively. Every
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

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use skewjoin_operators::{JoinType, Key, PartitionLoad};
use skewjoin_planner::datagen::{generate, GenSpec, JoinCounts};
use skewjoin_planner::exec::JoinJob;
use skewjoin_planner::exec_local::{execute_local, CountSink};
use skewjoin_planner::report::StrategyReport;
use skewjoin_planner::row_hash::table_row_hashes;
use skewjoin_planner::strategy::broadcast_limit_for_memory;
use skewjoin_planner::work_costs::WorkCosts;
use skewjoin_planner::{choose, PlanInputs, Resolved, Strategy};
use wasm_bindgen::prelude::*;

/// The most rows per side the page may ask for: the generated tables, keys and hashes of two
/// sides of this size take about 100 MB of the browser's memory.
pub const MAX_ROWS: u64 = 2_000_000;

/// The most partitions the page may ask for (bars stay readable).
pub const MAX_PARTITIONS: usize = 256;

/// The most output rows a request may produce. Every output row is counted and checksummed, at
/// roughly 100 million rows a second in a browser, and two hot keys with 100,000 rows on each side
/// already make 10^10; beyond this the page would freeze for many seconds.
pub const MAX_OUTPUT_ROWS: u64 = 300_000_000;

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
    /// Per partition: input records received, output rows produced, peak records held.
    pub per_partition: Vec<PartitionLoad>,
    /// Input records received over all partitions.
    pub records_received: u64,
    /// `records_received` over the input rows (`LoadReport::copying_factor`).
    pub copying_factor: f64,
    /// Max over mean of input records received.
    pub input_imbalance: f64,
    /// Max over mean of output rows produced.
    pub output_imbalance: f64,
    /// Max over mean of peak records held.
    pub peak_imbalance: f64,
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

fn expected_rows(counts: &JoinCounts, how: JoinType) -> u64 {
    match how {
        JoinType::Inner => counts.inner,
        JoinType::Left => counts.left,
        JoinType::Right => counts.right,
        JoinType::Full => counts.full,
        JoinType::LeftSemi => counts.left_semi,
        JoinType::LeftAnti => counts.left_anti,
        JoinType::RightSemi => counts.right_semi,
        JoinType::RightAnti => counts.right_anti,
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

/// Why a join with `expected` output rows is refused, and what would bring it under the limit.
/// Above a Zipf exponent of 1 the hottest keys keep most of the rows however many keys there
/// are, so widening the key domain is offered only where it helps.
fn too_many_output_rows(how: JoinType, expected: u64, spec: &GenSpec) -> String {
    let advice = if spec.left_skew.max(spec.right_skew) > 1.0 {
        "lower the skew (above 1 the hottest keys keep most rows whatever the key domain) or the rows"
    } else {
        "lower the skew or the rows, or widen the key domain"
    };
    format!(
        "this {how} join has {} output rows; the browser runs joins of at most {}: {advice}",
        grouped(expected),
        grouped(MAX_OUTPUT_ROWS)
    )
}

/// Generates the data and runs every strategy asked for.
pub fn run_request(request: &DemoRequest) -> Result<DemoResponse, String> {
    let how: JoinType = request.how.parse()?;
    if request.left_rows > MAX_ROWS || request.right_rows > MAX_ROWS {
        return Err(format!(
            "at most {MAX_ROWS} rows per side in the browser; use the skewjoin command for more"
        ));
    }
    if request.partitions == 0 || request.partitions > MAX_PARTITIONS {
        return Err(format!(
            "the partition count must be between 1 and {MAX_PARTITIONS}"
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

    let start = now_ms();
    let pair = generate(&spec);
    let expected = expected_rows(&pair.counts(), how);
    if expected > MAX_OUTPUT_ROWS {
        return Err(too_many_output_rows(how, expected, &spec));
    }
    let left: Arc<[Key]> = pair.left.key.iter().map(|&k| Key::Int(k)).collect();
    let right: Arc<[Key]> = pair.right.key.iter().map(|&k| Key::Int(k)).collect();
    let left_hashes: Arc<[u64]> = table_row_hashes(&pair.left).into();
    let right_hashes: Arc<[u64]> = table_row_hashes(&pair.right).into();
    drop(pair);
    let generate_ms = now_ms() - start;

    let inputs = PlanInputs {
        how,
        left_rows: spec.left_rows,
        right_rows: spec.right_rows,
        // Each partition stands for a worker of a native run with P = W.
        workers: request.partitions,
        broadcast_limit: broadcast_limit_for_memory(ASSUMED_MEMORY_BYTES, request.partitions),
        // As a native run of P threads.
        costs: WorkCosts::THREADS,
    };
    let mut runs = Vec::with_capacity(strategies.len());
    for (requested, strategy) in strategies {
        let choice = match choose(strategy, &inputs) {
            Ok(choice) => choice,
            Err(error) => {
                runs.push(RunOutcome::Refused { requested, error });
                continue;
            }
        };
        let job = JoinJob {
            left: Arc::clone(&left),
            right: Arc::clone(&right),
            left_hashes: Arc::clone(&left_hashes),
            right_hashes: Arc::clone(&right_hashes),
            how,
            resolved: choice.resolved,
            partitions: request.partitions,
            workers: 1,
        };
        let start = now_ms();
        let output = execute_local(&job, CountSink::default())?;
        let elapsed_ms = now_ms() - start;
        let broadcast_side = choice.resolved.copied_side().map(|side| side.to_string());
        let loads = &output.loads;
        runs.push(RunOutcome::Ran(Box::new(RunMetrics {
            requested,
            strategy: choice.resolved.name().to_string(),
            strategy_reason: choice.reason,
            broadcast_side,
            plan: choice.resolved,
            how: how.name().to_string(),
            workers: 1,
            partitions: request.partitions,
            left_rows: spec.left_rows,
            right_rows: spec.right_rows,
            output_rows: output.summary.rows,
            checksum: format!("{:016x}", output.summary.checksum),
            elapsed_ms,
            per_partition: loads.per_partition.clone(),
            records_received: loads.total_input(),
            copying_factor: loads.copying_factor(spec.left_rows + spec.right_rows),
            input_imbalance: loads.input_imbalance(),
            output_imbalance: loads.output_imbalance(),
            peak_imbalance: loads.peak_imbalance(),
            strategy_report: output.report,
        })));
    }
    Ok(DemoResponse {
        request: request.clone(),
        expected_rows: expected,
        generate_ms,
        runs,
    })
}

/// The concrete strategies, as a JSON array of their `--strategy` names.
#[wasm_bindgen]
pub fn strategies() -> String {
    let names: Vec<&str> = Strategy::CONCRETE.iter().map(|s| s.name()).collect();
    serde_json::to_string(&names).expect("names encode")
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
            panic!("a join of more than the limit's output rows ran");
        };
        assert!(error.contains("at most 300,000,000:"), "{error}");
        assert!(!error.contains("widen the key domain"), "{error}");
        let spec = GenSpec {
            left_skew: 0.9,
            right_skew: 0.5,
            ..request.spec()
        };
        let milder = too_many_output_rows(JoinType::Inner, 400_000_000, &spec);
        assert!(
            milder.contains("400,000,000 output rows") && milder.contains("widen the key domain"),
            "{milder}"
        );
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
                    assert_eq!(metrics.per_partition.len(), 8);
                    let produced: u64 = metrics.per_partition.iter().map(|p| p.output_rows).sum();
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
}
