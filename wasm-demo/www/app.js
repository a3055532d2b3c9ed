// The page: reads the controls, has a Web Worker (worker.js) generate the data and run the
// strategies with the WebAssembly module one at a time, and draws a summary of every strategy
// and each run's per-partition load with Chart.js (loaded as a global from vendor/, so the page
// makes no request outside its own origin). The page's thread only draws: it stays responsive
// during a run, which Cancel stops by terminating the worker.
//
// Every figure shown is also in <pre id="metrics-json"> and in data attributes on each run's card
// (data-strategy, data-output-rows, data-checksum, data-per-partition) and on the summary's rows
// (data-strategy, data-copying-factor), which the end-to-end test reads.

const $ = (id) => document.getElementById(id);
const form = $("controls");
const button = $("run");
const cancelButton = $("cancel");
const progress = $("progress");
const status = $("status");
const results = $("results");
const summary = $("summary");
const metricsJson = $("metrics-json");

const nf = new Intl.NumberFormat("en-US");
const fixed2 = (x) => x.toFixed(2);

// Okabe and Ito's colour-blind-safe palette: a partition's bar is blue, the busiest one
// vermillion, broadcast copies sky blue.
const COLOURS = {
  bar: "#0072B2", busiest: "#D55E00", copies: "#56B4E9", mean: "#1d2330",
  input: "#0072B2", output: "#E69F00", peak: "#009E73", copying: "#CC79A7",
};
// Partitions in VPRP's range map: Okabe and Ito's other colours (not the bars' blue and
// vermillion, which mean a partition and the busiest one elsewhere), a grey and a wine.
const PARTITION_COLOURS = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#CC79A7", "#000000", "#999999", "#882255"];

function setStatus(text, isError = false) {
  status.textContent = text;
  status.classList.toggle("error", isError);
}

function option(select, value, text) {
  const element = document.createElement("option");
  element.value = value;
  element.textContent = text;
  select.append(element);
}

function element(tag, attributes = {}, text) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

// ---------------------------------------------------------------------------------------------
// Settings: the form, the request it describes, the URL that restores it, the same run natively.

const CONTROLS = [
  "left_rows", "right_rows", "keys", "left_skew", "right_skew", "hot_keys", "noise", "seed",
  "partitions", "how", "strategy",
];

// The request the controls describe, in the module's DemoRequest shape.
function readRequest() {
  const number = (id) => Number($(id).value);
  const strategy = $("strategy").value;
  return {
    left_rows: number("left_rows"),
    right_rows: number("right_rows"),
    keys: number("keys"),
    left_skew: number("left_skew"),
    right_skew: number("right_skew"),
    independent: $("hot_keys").value === "independent",
    noise: number("noise"),
    seed: number("seed"),
    partitions: number("partitions"),
    how: $("how").value,
    strategies: strategy === "all" ? [] : [strategy],
  };
}

// The settings live in the URL's query, so that a run can be shared by its address.
function writeUrl() {
  const query = new URLSearchParams(CONTROLS.map((id) => [id, $(id).value]));
  history.replaceState(null, "", `${location.pathname}?${query}`);
}

// Restores the settings a URL names; a value a control cannot take is left at its default.
function readUrl() {
  const query = new URLSearchParams(location.search);
  for (const id of CONTROLS) {
    if (!query.has(id)) continue;
    const control = $(id);
    const value = query.get(id);
    if (control.tagName === "SELECT" && ![...control.options].some((o) => o.value === value)) continue;
    control.value = value;
  }
}

// The same run on the command line, so a visitor can check a figure natively. The page runs
// one worker over P partitions (a browser tab gives it one thread); plans made from per-worker
// key samples and summaries (VPRP's ranges, AM-Join's and Tree-Join's hot keys) depend on the
// number of workers, so `-w 1 -p P` is what gives the page's figures partition by partition.
function describeCli(request, names) {
  const gen = [
    "skewjoin gen --out data",
    `--left-rows ${request.left_rows} --right-rows ${request.right_rows}`,
    `--keys ${request.keys} --left-skew ${request.left_skew} --right-skew ${request.right_skew}`,
    request.independent ? "--independent" : "",
    `--noise ${request.noise} --seed ${request.seed}`,
  ].filter(Boolean).join(" ");
  const join = (strategy, metrics) =>
    `skewjoin join data/left.parquet data/right.parquet --on key --how ${request.how}` +
    ` --strategy ${strategy} -w 1 -p ${request.partitions} --metrics ${metrics}`;
  if (request.strategies.length === 1) return `${gen} && ${join(request.strategies[0], "metrics.json")}`;
  return `${gen} && for s in ${names.join(" ")}; do ${join("$s", "metrics-$s.json")}; done`;
}

// ---------------------------------------------------------------------------------------------
// What each strategy does, where it is shown: two sentences and a sketch of where records go,
// by name, from the module's registry (each strategy's module in planner/src/strategies/).
const EXPLAIN = {};

const sideName = (side) => `${side} side`;
const partitionList = (parts) => {
  const distinct = [...new Set(parts)].sort((a, b) => a - b);
  const shown = distinct.slice(0, 12).map((p) => `p${p}`).join(", ");
  return distinct.length > 12 ? `${shown} and ${distinct.length - 12} more` : shown;
};

// The plan as sentences: what the planner decided, in the terms of the explanation above.
function readablePlan(run) {
  const plan = run.plan;
  const lines = [];
  if (plan.side) lines.push(`Copies the ${sideName(plan.side)} to every partition.`);
  if (plan.small) lines.push(`The small side is the ${plan.small}; it is copied to every partition.`);
  if (plan.virtual_per_partition !== undefined) {
    lines.push(`${plan.virtual_per_partition} virtual ranges per partition, cut from a ` +
      `${(plan.sample_per_million / 1e4).toFixed(1)}% sample of the records.`);
  }
  if (plan.tree) lines.push(`Leaves hold at most ${nf.format(plan.tree.leaf)} records a side; ` +
    `each round cuts a longer list into ${plan.tree.fanout}.`);
  if (run.am) {
    const am = run.am;
    lines.push(`A key is hot above ${nf.format(am.thresholds[0])} left or ` +
      `${nf.format(am.thresholds[1])} right records.`);
    for (const grid of am.largest_grids) {
      lines.push(`Key ${grid.key}: ${nf.format(grid.left)} × ${nf.format(grid.right)} records → ` +
        `${grid.rows} × ${grid.cols} cells on ${partitionList(grid.partitions)}.`);
    }
  }
  if (run.tree_rounds !== undefined) {
    lines.push(`It ran ${run.tree_rounds} ${run.tree_rounds === 1 ? "round" : "rounds"}.`);
  }
  return lines;
}

// ---------------------------------------------------------------------------------------------
// Charts.

// Charts drawn, with what the shared y scale needs: [chart, series name].
let charts = [];
// Per series, the largest value of any card: the shared y scale's top.
let seriesMax = {};

function sharedScale() {
  return $("shared_scale").checked;
}

function applySharedScale() {
  for (const [chart, series] of charts) {
    if (!series || !chart.options.scales?.y) continue;
    chart.options.scales.y.max = sharedScale() ? seriesMax[series] : undefined;
    chart.update("none");
  }
}

// A (stacked) bar per partition, the mean as a dashed line, the busiest partition vermillion.
// `stacks` is [[label, values, colour], ...]; their sum per partition is the load.
function loadChart(canvas, title, unit, stacks, series) {
  const totals = stacks[0][1].map((_, p) => stacks.reduce((sum, [, values]) => sum + values[p], 0));
  const mean = totals.reduce((a, b) => a + b, 0) / Math.max(totals.length, 1);
  const max = Math.max(...totals, 0);
  const ratio = mean > 0 ? max / mean : 1;
  seriesMax[series] = Math.max(seriesMax[series] ?? 0, max);
  // Mark the busiest partition only where it stands out.
  const busiest = totals.map((v) => v === max && ratio >= 1.1);
  const datasets = stacks.map(([label, values, colour], index) => ({
    type: "bar", label, data: values, stack: "load", order: 2,
    backgroundColor: index === 0 ? busiest.map((b) => (b ? COLOURS.busiest : colour)) : colour,
  }));
  datasets.push({
    // One partition has no line to draw between points: show the mean as a marker there.
    type: "line", label: `mean ${nf.format(Math.round(mean))}`, data: totals.map(() => mean),
    borderColor: COLOURS.mean, borderDash: [6, 4], borderWidth: 1.5, order: 1,
    pointRadius: totals.length === 1 ? 10 : 0, pointStyle: "line",
  });
  return new Chart(canvas, {
    data: { labels: totals.map((_, p) => `p${p}`), datasets },
    options: {
      animation: false,
      maintainAspectRatio: false,
      plugins: {
        title: { display: true, text: `${title}: max/mean ${fixed2(ratio)}` },
        subtitle: {
          display: ratio >= 1.1,
          text: "vermillion: the busiest partition",
          color: "#5b6475",
        },
        legend: { display: true, labels: { boxWidth: 12 } },
      },
      scales: {
        x: { stacked: true, title: { display: true, text: "partition" }, ticks: { maxRotation: 0, autoSkip: true } },
        y: {
          stacked: true, beginAtZero: true, max: sharedScale() ? seriesMax[series] : undefined,
          title: { display: true, text: unit }, ticks: { callback: (v) => nf.format(v) },
        },
      },
    },
  });
}

// A colour per partition: the eight above where they suffice, else a blue-to-yellow
// ramp (a heatmap of partition numbers, readable without telling red from green).
function partitionColour(partition, partitions) {
  if (partitions <= PARTITION_COLOURS.length) return PARTITION_COLOURS[partition];
  const t = partitions > 1 ? partition / (partitions - 1) : 0;
  const stops = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  const x = t * (stops.length - 1);
  const i = Math.min(Math.floor(x), stops.length - 2);
  const f = x - i;
  const c = stops[i].map((v, k) => Math.round(v + (stops[i + 1][k] - v) * f));
  return `rgb(${c.join(",")})`;
}

// The keys each virtual range covers: runs of keys map to virtual ranges, and run j starts at
// boundaries[j - 1].
function rangeKeys(ranges) {
  const spans = ranges.virtual_ranges.map(() => []);
  ranges.virtual_of_run.forEach((virtual, run) => {
    const from = run === 0 ? "−∞" : ranges.boundaries[run - 1];
    const to = run < ranges.boundaries.length ? ranges.boundaries[run] : "∞";
    spans[virtual].push(`[${from}, ${to})`);
  });
  return spans;
}

// VPRP's ranges: one bar per virtual range in key order, coloured by the partition it is
// mapped to, with the records the sample planned for it beside those it received.
function rangeChart(canvas, run) {
  const ranges = run.ranges.virtual_ranges;
  const partitions = run.partitions;
  const planned = ranges.reduce((a, r) => a + r.planned_weight, 0);
  const actual = ranges.reduce((a, r) => a + r.actual_records, 0);
  const scale = planned > 0 ? actual / planned : 0;
  const spans = rangeKeys(run.ranges);
  return new Chart(canvas, {
    data: {
      labels: ranges.map((r, i) => `v${i}`),
      datasets: [
        {
          type: "bar", label: "records received", order: 2,
          data: ranges.map((r) => r.actual_records),
          backgroundColor: ranges.map((r) => partitionColour(r.partition, partitions)),
        },
        {
          type: "line", label: "planned from the sample", order: 1,
          data: ranges.map((r) => r.planned_weight * scale),
          borderColor: COLOURS.mean, borderWidth: 1.5, pointRadius: 2, showLine: false,
        },
      ],
    },
    options: {
      animation: false,
      maintainAspectRatio: false,
      plugins: {
        title: { display: true, text: `VPRP: ${ranges.length} virtual ranges over ${run.ranges.virtual_of_run.length} key runs` },
        subtitle: {
          display: true, color: "#5b6475",
          text: partitions > PARTITION_COLOURS.length
            ? `colour: the partition, from p0 (dark blue) to p${partitions - 1} (yellow)`
            : "colour: the partition the range is mapped to",
        },
        legend: { display: true, labels: { boxWidth: 12 } },
        tooltip: {
          callbacks: {
            title: (items) => {
              const i = items[0].dataIndex;
              return `virtual range ${i} → p${ranges[i].partition}`;
            },
            afterTitle: (items) => `keys ${spans[items[0].dataIndex].join(" ∪ ")}`,
          },
        },
      },
      scales: {
        x: { title: { display: true, text: "virtual range, in key order" }, ticks: { maxRotation: 0, autoSkip: true } },
        y: { beginAtZero: true, title: { display: true, text: "records" }, ticks: { callback: (v) => nf.format(v) } },
      },
    },
  });
}

// The summary chart: every strategy's max/mean of input, output and peak held, and its copying
// factor, side by side (1.00 is perfect balance and no copies).
function summaryChart(canvas, runs) {
  return new Chart(canvas, {
    data: {
      labels: runs.map((r) => r.requested),
      datasets: [
        ["input max/mean", "input_imbalance", COLOURS.input],
        ["output max/mean", "output_imbalance", COLOURS.output],
        ["peak held max/mean", "peak_imbalance", COLOURS.peak],
        ["copying factor", "copying_factor", COLOURS.copying],
      ].map(([label, field, colour]) => ({
        type: "bar", label, data: runs.map((r) => r[field]), backgroundColor: colour,
      })),
    },
    options: {
      animation: false,
      maintainAspectRatio: false,
      plugins: {
        title: { display: true, text: "Balance and copies per strategy (1.00: even, nothing copied)" },
        legend: { display: true, labels: { boxWidth: 12 } },
      },
      scales: {
        // Every strategy named, turned on a narrow screen rather than skipped.
        x: { title: { display: true, text: "strategy" }, ticks: { maxRotation: 90, autoSkip: false } },
        y: { beginAtZero: true, title: { display: true, text: "ratio" } },
      },
    },
  });
}

// ---------------------------------------------------------------------------------------------
// Results: a summary of every strategy, then a card per strategy.

function figures(list) {
  const dl = element("dl");
  for (const [term, value, className] of list) {
    const pair = element("div");
    pair.append(element("dt", {}, term), element("dd", className ? { class: className } : {}, value));
    dl.append(pair);
  }
  return dl;
}

// AM-Join's key classes: how many keys and records of each side went to each route. Cold keys
// (and NULLs) are whatever the hot classes leave.
function amClasses(run) {
  const am = run.am;
  const left = am.left_records, right = am.right_records;
  const sum = (list) => list.reduce((a, b) => a + b, 0);
  const rows = [
    ["hot on the left only", am.hot_left_only, left[0], right[0], "left stays, right's rows broadcast"],
    ["hot on the right only", am.hot_right_only, left[1], right[1], "right stays, left's rows broadcast"],
    ["hot on both", am.hot_both, left[2], right[2],
      (run.tree_rounds ? "grid cells, then Tree-Join" : "grid cells") +
      (am.moved_to_grid > 0 ? ` (${nf.format(am.moved_to_grid)} one-side-hot keys moved here by the broadcast budget)` : "")],
    ["cold or NULL", "rest", run.left_rows - sum(left), run.right_rows - sum(right), "Shuffle-Join"],
  ];
  const table = element("table", { class: "classes", "data-testid": "am-classes" });
  table.append(element("caption", {}, "AM-Join key classes"));
  const head = element("tr");
  for (const name of ["class", "keys", "left rows", "right rows", "route"]) head.append(element("th", { scope: "col" }, name));
  table.append(head);
  for (const [name, keys, l, r, route] of rows) {
    const tr = element("tr");
    tr.append(
      element("th", { scope: "row" }, name),
      element("td", {}, typeof keys === "number" ? nf.format(keys) : keys),
      element("td", {}, nf.format(l)),
      element("td", {}, nf.format(r)),
      element("td", {}, route),
    );
    table.append(tr);
  }
  const box = element("div", { class: "table-box" });
  box.append(table);
  return box;
}

function addChart(card, label, make, className = "chart") {
  const box = element("div", { class: className });
  const canvas = element("canvas", { role: "img", "aria-label": label });
  box.append(canvas);
  card.append(box);
  return () => make(canvas);
}

// Broadcast copies each partition received. The IB family counts them as it probes; a
// Broadcast-Join (the plan that names a copied `side` rather than a `small` one) delivers the
// whole copied side to every partition, so each received that side's rows. AM-Join's broadcasts
// of one-side-hot keys' rows and its grid copies are not counted apart from the records routed
// by key.
function broadcastCopies(run) {
  const counted = run.per_partition.map((p) => p.traffic.broadcast_records);
  if (counted.some((c) => c > 0) || run.plan.side === undefined) return counted;
  const copied = run.plan.side === "left" ? run.left_rows : run.right_rows;
  return run.per_partition.map(() => copied);
}

// A run's card; returns it and the charts to draw once it is in the page.
function renderRun(run, expectedRows) {
  const card = element("article", { class: "run", "data-strategy": run.requested });
  const explain = EXPLAIN[run.requested] ?? EXPLAIN[run.strategy];
  if (run.error) {
    card.classList.add("refused");
    card.append(element("h2", {}, run.requested));
    card.append(element("p", { class: "reason" }, `Not run: ${run.error}`));
    return { card, draw: [] };
  }
  card.dataset.outputRows = String(run.output_rows);
  card.dataset.checksum = run.checksum;
  card.dataset.perPartition = JSON.stringify(run.per_partition);
  card.append(element("h2", {}, run.strategy === run.requested ? run.strategy : `${run.requested}: ${run.strategy}`));
  if (explain) {
    card.append(element("p", { class: "explain" }, explain.text));
    card.append(element("pre", { class: "sketch", "aria-label": `where ${run.strategy} sends records` }, explain.sketch));
  }
  card.append(element("p", { class: "reason" }, `Planner: ${run.strategy_reason}`));
  const plan = readablePlan(run);
  if (plan.length > 0) {
    const list = element("ul", { class: "plan" });
    for (const line of plan) list.append(element("li", {}, line));
    card.append(list);
  }
  const right = run.output_rows === expectedRows;
  // Every record received beyond one per input row is a copy: a broadcast's, or a grid's
  // (AM-Join and Tree-Join send a hot key's record to a row or column of cells).
  const copies = Math.max(0, run.records_received - run.left_rows - run.right_rows);
  const tracking = run.per_partition.reduce((a, p) => a + p.traffic.tracking_records, 0);
  card.append(figures([
    ["output rows", nf.format(run.output_rows), right ? "ok" : "wrong"],
    ["exact answer", right ? "yes" : `no: expected ${nf.format(expectedRows)}`, right ? "ok" : "wrong"],
    ["checksum", run.checksum, "mono"],
    ["join time", `${run.elapsed_ms.toFixed(1)} ms`],
    ["input max/mean", fixed2(run.input_imbalance)],
    ["output max/mean", fixed2(run.output_imbalance)],
    ["peak held max/mean", fixed2(run.peak_imbalance)],
    // A broadcast's even max/mean hides its copies; this shows them.
    ["records received", `${nf.format(run.records_received)} (${fixed2(run.copying_factor)}x the input rows)`],
    ["copies made", nf.format(copies)],
    ...(tracking > 0 ? [["tracking messages", nf.format(tracking)]] : []),
    ["makespan on P machines", `${run.predicted_makespan_ms.toFixed(1)} ms (${fixed2(run.makespan_over_ideal)}x ideal)`],
    ...(run.tree_rounds !== undefined ? [["Tree-Join rounds", String(run.tree_rounds), "tree-rounds"]] : []),
  ]));
  const name = run.strategy;
  const parts = run.per_partition;
  const copied = broadcastCopies(run);
  const draw = [
    [addChart(card, `${name}: input records received per partition, by how they arrived`, (canvas) =>
      loadChart(canvas, "input records received", "records", [
        ["routed by key (hash, range or grid cells)", parts.map((p, i) => p.input_records - copied[i]), COLOURS.bar],
        ["copied side (Broadcast, IB family)", copied, COLOURS.copies],
      ], "input")), "input"],
    [addChart(card, `${name}: output rows produced per partition`, (canvas) =>
      loadChart(canvas, "output rows produced", "rows", [["output rows", parts.map((p) => p.output_rows), COLOURS.bar]], "output")), "output"],
    [addChart(card, `${name}: peak records held per partition`, (canvas) =>
      loadChart(canvas, "peak records held", "records", [["peak held", parts.map((p) => p.peak_records), COLOURS.bar]], "peak")), "peak"],
  ];
  if (run.am) card.append(amClasses(run));
  if (run.ranges && run.ranges.virtual_ranges.length > 0) {
    draw.push([addChart(card, `${name}: records per virtual range, coloured by partition`,
      (canvas) => rangeChart(canvas, run), "chart range-map"), null]);
  }
  return { card, draw };
}

// The summary table's columns: heading, value, how it is shown, the sort it offers.
const SUMMARY_COLUMNS = [
  ["strategy", (r) => r.requested, (v) => v],
  ["output rows", (r) => r.output_rows, (v) => nf.format(v)],
  ["join ms", (r) => r.elapsed_ms, (v) => v.toFixed(0)],
  ["input max/mean", (r) => r.input_imbalance, fixed2],
  ["output max/mean", (r) => r.output_imbalance, fixed2],
  ["peak max/mean", (r) => r.peak_imbalance, fixed2],
  ["records received", (r) => r.records_received, (v) => nf.format(v)],
  ["copying factor", (r) => r.copying_factor, fixed2],
  ["makespan on P machines, ms", (r) => r.predicted_makespan_ms, (v) => v.toFixed(1)],
  ["makespan / ideal", (r) => r.makespan_over_ideal, fixed2],
];

const SORTS = {
  order: null,
  makespan: (r) => r.predicted_makespan_ms,
  output: (r) => r.output_imbalance,
  input: (r) => r.input_imbalance,
  copying: (r) => r.copying_factor,
  time: (r) => r.elapsed_ms,
};

let summaryChartInstance = null;
// The runs the summary shows (of the run in progress, or the last one), for re-sorting.
let shown = { runs: [], expected: 0 };

function renderSummary(runs, expectedRows) {
  shown = { runs, expected: expectedRows };
  const ran = runs.filter((r) => !r.error);
  const key = SORTS[$("sort").value];
  const sorted = key ? [...ran].sort((a, b) => key(a) - key(b)) : ran;
  const table = element("table", { class: "classes summary-table" });
  table.append(element("caption", {}, `Every strategy on the same data (exact answer: ${nf.format(expectedRows)} rows)`));
  const head = element("tr");
  for (const [name] of SUMMARY_COLUMNS) head.append(element("th", { scope: "col" }, name));
  table.append(head);
  for (const run of sorted) {
    const tr = element("tr", { "data-strategy": run.requested, "data-copying-factor": fixed2(run.copying_factor) });
    SUMMARY_COLUMNS.forEach(([name, value, show], index) => {
      const text = show(value(run));
      const cell = index === 0 ? element("th", { scope: "row" }, text) : element("td", {}, text);
      if (name === "output rows" && run.output_rows !== expectedRows) cell.classList.add("wrong");
      tr.append(cell);
    });
    table.append(tr);
  }
  const refused = runs.filter((r) => r.error).map((r) => r.requested);
  const box = element("div", { class: "table-box" });
  box.append(table);
  if (refused.length > 0) box.append(element("p", { class: "note" }, `Cannot compute this join type: ${refused.join(", ")}.`));
  summary.querySelector(".summary-body").replaceChildren(box);
  summaryChartInstance?.destroy();
  summaryChartInstance = null;
  const canvas = summary.querySelector("canvas");
  if (sorted.length > 1) {
    canvas.parentElement.hidden = false;
    summaryChartInstance = summaryChart(canvas, sorted);
  } else {
    canvas.parentElement.hidden = true;
  }
  summary.hidden = false;
}

function clearResults() {
  for (const [chart] of charts) chart.destroy();
  charts = [];
  seriesMax = {};
  summaryChartInstance?.destroy();
  summaryChartInstance = null;
  results.replaceChildren();
  summary.hidden = true;
  shown = { runs: [], expected: 0 };
  metricsJson.textContent = "";
}

// ---------------------------------------------------------------------------------------------
// The worker: started once the module is compiled, replaced when a run is cancelled.

let wasmModule = null;
let worker = null;
let workerReady = null;
let strategyNames = [];
// The run in progress: its request, the runs so far, when it started.
let current = null;

function startWorker() {
  const started = new Worker(new URL("./worker.js", import.meta.url), { type: "module" });
  worker = started;
  workerReady = new Promise((resolve, reject) => {
    worker.onmessage = ({ data }) => {
      // A message a replaced worker sent before it was terminated belongs to no run.
      if (started !== worker) return;
      if (data.type === "ready") resolve(data);
      else if (data.type === "init-error") reject(new Error(data.message));
      else onWorkerMessage(data);
    };
    worker.onerror = (event) => reject(new Error(event.message || "the worker failed to start"));
  });
  worker.postMessage({ type: "init", module: wasmModule });
  return workerReady;
}

function finishRun() {
  current = null;
  button.disabled = false;
  cancelButton.disabled = true;
  progress.hidden = true;
}

function onWorkerMessage(data) {
  if (!current) return;
  if (data.type === "prepared") {
    current.summary = data.summary;
    progress.max = data.summary.strategies.length;
    progress.value = 0;
    setStatus(`Generated ${nf.format(current.request.left_rows)} × ${nf.format(current.request.right_rows)} rows in ` +
      `${data.summary.generate_ms.toFixed(0)} ms; exact answer ${nf.format(data.summary.expected_rows)} rows.`);
  } else if (data.type === "progress") {
    progress.value = data.index;
    setStatus(`Running ${data.name} (${data.index + 1} of ${data.total})… the page stays usable; Cancel stops the run.`);
  } else if (data.type === "run") {
    current.runs.push(data.run);
    progress.value = data.index + 1;
    const { card, draw } = renderRun(data.run, current.summary.expected_rows);
    results.append(card);
    for (const [make, series] of draw) charts.push([make(), series]);
    // Every card's charts share a top only once every card is drawn.
    if (sharedScale()) applySharedScale();
    renderSummary(current.runs, current.summary.expected_rows);
  } else if (data.type === "done") {
    const runs = current.runs;
    const response = {
      request: current.summary.request,
      expected_rows: current.summary.expected_rows,
      generate_ms: current.summary.generate_ms,
      runs,
    };
    metricsJson.textContent = JSON.stringify(response, null, 2);
    const renderMs = performance.now() - current.start;
    results.dataset.renderMs = renderMs.toFixed(1);
    const ran = runs.filter((r) => !r.error);
    const joinMs = ran.reduce((total, r) => total + r.elapsed_ms, 0);
    setStatus(
      `${nf.format(current.request.left_rows)} × ${nf.format(current.request.right_rows)} rows, ${current.request.how} join: ` +
      `exact answer ${nf.format(response.expected_rows)} rows. Generated in ${response.generate_ms.toFixed(0)} ms, ` +
      `${ran.length} ${ran.length === 1 ? "strategy" : "strategies"} joined in ${joinMs.toFixed(0)} ms, ` +
      `${renderMs.toFixed(0)} ms in all.`,
    );
    finishRun();
    results.dataset.done = String(Number(results.dataset.done ?? 0) + 1);
  } else if (data.type === "error") {
    // An earlier run's results were cleared when this one started; this run's finished
    // strategies stay. The worker is replaced: after a trap (the module aborts on a panic, an
    // allocation failure included) its state cannot be trusted.
    setStatus(`Error: ${data.message}`, true);
    finishRun();
    results.dataset.failed = String(Number(results.dataset.failed ?? 0) + 1);
    restartWorker();
  }
}

function runJoin(event) {
  event?.preventDefault();
  if (!form.reportValidity() || current) return;
  const request = readRequest();
  $("cli").textContent = describeCli(request, strategyNames);
  writeUrl();
  clearResults();
  results.removeAttribute("data-render-ms");
  current = { request, runs: [], start: performance.now(), summary: null };
  button.disabled = true;
  cancelButton.disabled = false;
  progress.hidden = false;
  progress.removeAttribute("value");
  setStatus("Generating the data…");
  worker.postMessage({ type: "run", request });
}

// Stops the run: the worker is terminated (a WebAssembly call cannot be interrupted) and a new
// one started from the compiled module, which takes milliseconds.
function cancelRun(event) {
  if (!current) return;
  // How long the click waited for the page's thread: the end-to-end test reads it.
  document.body.dataset.cancelLatencyMs = (performance.now() - event.timeStamp).toFixed(1);
  const done = current.runs.length;
  finishRun();
  setStatus(`Cancelled after ${done} ${done === 1 ? "strategy" : "strategies"}; the results so far stay below.`);
  results.dataset.cancelled = String(Number(results.dataset.cancelled ?? 0) + 1);
  restartWorker();
}

// Terminates the worker and starts another from the compiled module; Run waits for it.
function restartWorker() {
  worker.terminate();
  button.disabled = true;
  startWorker().then(() => { button.disabled = false; }, (error) => setStatus(`Error: ${error.message}`, true));
}

async function main() {
  // From file:// this module never loads; index.html's classic script says so.
  try {
    const bytes = await fetch(new URL("./pkg/skewjoin_wasm_demo_bg.wasm", import.meta.url));
    if (!bytes.ok) throw new Error(`${bytes.status} ${bytes.statusText} for ${bytes.url}`);
    wasmModule = await WebAssembly.compile(await bytes.arrayBuffer());
    const { strategies, joinTypes } = await startWorker();
    for (const how of joinTypes) option($("how"), how, how);
    strategyNames = strategies.map((strategy) => strategy.name);
    for (const { name, about, sketch } of strategies) EXPLAIN[name] = { text: about, sketch };
    for (const name of strategyNames) option($("strategy"), name, name);
  } catch (error) {
    setStatus(`Could not load the WebAssembly module: ${error.message ?? error}`, true);
    return;
  }
  readUrl();
  form.addEventListener("submit", runJoin);
  cancelButton.addEventListener("click", cancelRun);
  $("shared_scale").addEventListener("change", applySharedScale);
  $("sort").addEventListener("change", () => {
    if (shown.runs.length > 0) renderSummary(shown.runs, shown.expected);
  });
  button.disabled = false;
  button.textContent = "Run";
  document.body.dataset.ready = "true";
  setStatus("Ready: choose the data and press Run.");
  const showCli = () => {
    $("cli").textContent = describeCli(readRequest(), strategyNames);
    writeUrl();
  };
  // The command and the URL follow the form as it is edited, not only on Run.
  form.addEventListener("input", showCli);
  showCli();
}

main();
