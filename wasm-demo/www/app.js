// The page: reads the controls, asks the WebAssembly module to generate the data and run the
// strategies, and draws each run's per-partition load with Chart.js (loaded as a global from
// vendor/, so the page makes no request outside its own origin).
//
// Every figure shown is also in <pre id="metrics-json"> and in data attributes on each run's card
// (data-strategy, data-output-rows, data-checksum), which the end-to-end test reads.

import init, { strategies, join_types, run } from "./pkg/skewjoin_wasm_demo.js";

const $ = (id) => document.getElementById(id);
const form = $("controls");
const button = $("run");
const status = $("status");
const results = $("results");
const metricsJson = $("metrics-json");
let charts = [];

const nf = new Intl.NumberFormat("en-US");
const fixed2 = (x) => x.toFixed(2);

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

function element(tag, attributes = {}, text) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function figures(list) {
  const dl = element("dl");
  for (const [term, value, className] of list) {
    const pair = element("div");
    pair.append(element("dt", {}, term), element("dd", className ? { class: className } : {}, value));
    dl.append(pair);
  }
  return dl;
}

// What the planner decided beyond the strategy's name (a broadcast side, a grid, ranges...),
// shown as the planner serialised it, so new strategies need nothing here.
function planDetails(plan) {
  const parts = Object.entries(plan)
    .filter(([name]) => name !== "kind")
    .map(([name, value]) => `${name.replaceAll("_", " ")}: ${typeof value === "object" ? JSON.stringify(value) : value}`);
  return parts.join(", ");
}

// A bar per partition, the mean as a dashed line, the busiest partition in red.
function barChart(canvas, title, values) {
  const mean = values.reduce((a, b) => a + b, 0) / Math.max(values.length, 1);
  const max = Math.max(...values, 0);
  const ratio = mean > 0 ? max / mean : 1;
  // Mark the busiest partition only where it stands out.
  const colors = values.map((v) => (v === max && ratio >= 1.1 ? "#c8372d" : "#2f6fdb"));
  return new Chart(canvas, {
    data: {
      labels: values.map((_, p) => String(p)),
      datasets: [
        { type: "bar", label: title, data: values, backgroundColor: colors, order: 2 },
        {
          type: "line", label: `mean ${nf.format(Math.round(mean))}`, data: values.map(() => mean),
          borderColor: "#1d2330", borderDash: [6, 4], borderWidth: 1.5, pointRadius: 0, order: 1,
        },
      ],
    },
    options: {
      animation: false,
      maintainAspectRatio: false,
      plugins: {
        title: { display: true, text: `${title}: max/mean ${fixed2(ratio)}` },
        legend: { display: true, labels: { boxWidth: 12 } },
      },
      scales: {
        x: { title: { display: true, text: "partition" } },
        y: { beginAtZero: true, ticks: { callback: (v) => nf.format(v) } },
      },
    },
  });
}

// Distinct colours for partitions in the VPRP range map (cycled past twelve partitions).
const PALETTE = [
  "#2f6fdb", "#e07b22", "#2e9e5b", "#b8418f", "#7a5cd6", "#c8a21d",
  "#1f9bb0", "#c8372d", "#5f7d2a", "#8a5a44", "#d45f9a", "#4b5a78",
];

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
  if (am.largest_grids.length > 0) {
    const grids = am.largest_grids
      .map(([l, r, rowsOf, cols]) => `${nf.format(l)} × ${nf.format(r)} rows → ${rowsOf} × ${cols} cells`)
      .join("; ");
    box.append(element("p", { class: "note" }, `Largest keys hot on both sides: ${grids}.`));
  }
  return box;
}

// VPRP's range map: one bar per virtual range, coloured by the partition it is mapped to, with
// the records the sample planned for it beside those it received.
function rangeChart(canvas, run) {
  const ranges = run.ranges.virtual_ranges;
  const planned = ranges.reduce((a, r) => a + r.planned_weight, 0);
  const actual = ranges.reduce((a, r) => a + r.actual_records, 0);
  const scale = planned > 0 ? actual / planned : 0;
  return new Chart(canvas, {
    data: {
      labels: ranges.map((r, i) => `v${i}→p${r.partition}`),
      datasets: [
        {
          type: "bar", label: "records received", order: 2,
          data: ranges.map((r) => r.actual_records),
          backgroundColor: ranges.map((r) => PALETTE[r.partition % PALETTE.length]),
        },
        {
          type: "line", label: "planned from the sample", order: 1,
          data: ranges.map((r) => r.planned_weight * scale),
          borderColor: "#1d2330", borderWidth: 1.5, pointRadius: 2, showLine: false,
        },
      ],
    },
    options: {
      animation: false,
      maintainAspectRatio: false,
      plugins: {
        title: { display: true, text: `VPRP ranges: virtual range → partition (${ranges.length} ranges, ${run.ranges.virtual_of_run.length} key runs)` },
        legend: { display: true, labels: { boxWidth: 12 } },
      },
      scales: {
        x: { title: { display: true, text: "virtual range → partition (colour: partition)" } },
        y: { beginAtZero: true, ticks: { callback: (v) => nf.format(v) } },
      },
    },
  });
}

function renderRun(run, expectedRows) {
  const card = element("article", { class: "run", "data-strategy": run.requested });
  if (run.error) {
    card.classList.add("refused");
    card.append(element("h2", {}, run.requested));
    card.append(element("p", { class: "reason" }, `Not run: ${run.error}`));
    return card;
  }
  card.dataset.outputRows = String(run.output_rows);
  card.dataset.checksum = run.checksum;
  card.dataset.perPartition = JSON.stringify(run.per_partition);
  const details = planDetails(run.plan);
  card.append(element("h2", {}, details ? `${run.strategy} (${details})` : run.strategy));
  card.append(element("p", { class: "reason" }, run.strategy_reason));
  const right = run.output_rows === expectedRows;
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
    ...(run.tree_rounds !== undefined ? [["Tree-Join rounds", String(run.tree_rounds), "tree-rounds"]] : []),
  ]));
  const series = [
    ["input records received", run.per_partition.map((p) => p.input_records)],
    ["output rows produced", run.per_partition.map((p) => p.output_rows)],
  ];
  for (const [title, values] of series) {
    const box = element("div", { class: "chart" });
    const canvas = element("canvas", { role: "img", "aria-label": `${run.strategy}: ${title} per partition` });
    box.append(canvas);
    card.append(box);
    charts.push(() => barChart(canvas, title, values));
  }
  if (run.am) card.append(amClasses(run));
  if (run.ranges && run.ranges.virtual_ranges.length > 0) {
    const box = element("div", { class: "chart range-map" });
    const canvas = element("canvas", { role: "img", "aria-label": `${run.strategy}: records per virtual range, coloured by partition` });
    box.append(canvas);
    card.append(box);
    charts.push(() => rangeChart(canvas, run));
  }
  return card;
}

// Every strategy the module knows, in its order (filled once the module has loaded).
let strategyNames = [];

const nextFrame = () => new Promise((resolve) => requestAnimationFrame(() => resolve()));

async function runJoin(event) {
  event?.preventDefault();
  if (!form.reportValidity()) return;
  const request = readRequest();
  $("cli").textContent = describeCli(request, strategyNames);
  button.disabled = true;
  results.removeAttribute("data-render-ms");
  setStatus("Generating the data and running the join…");
  // Let the status paint before the (blocking) run.
  await nextFrame();
  const start = performance.now();
  let response;
  try {
    response = JSON.parse(run(JSON.stringify(request)));
  } catch (error) {
    setStatus(`Error: ${error}`, true);
    button.disabled = false;
    return;
  }
  for (const chart of charts) if (chart.destroy) chart.destroy();
  charts = [];
  results.replaceChildren(...response.runs.map((r) => renderRun(r, response.expected_rows)));
  charts = charts.map((make) => make());
  metricsJson.textContent = JSON.stringify(response, null, 2);
  await nextFrame();
  const renderMs = performance.now() - start;
  results.dataset.renderMs = renderMs.toFixed(1);
  const ran = response.runs.filter((r) => !r.error);
  const joinMs = ran.reduce((total, r) => total + r.elapsed_ms, 0);
  setStatus(
    `${nf.format(request.left_rows)} × ${nf.format(request.right_rows)} rows, ${request.how} join: ` +
    `exact answer ${nf.format(response.expected_rows)} rows. Generated in ${response.generate_ms.toFixed(0)} ms, ` +
    `${ran.length} ${ran.length === 1 ? "strategy" : "strategies"} joined in ${joinMs.toFixed(0)} ms, ` +
    `rendered in ${renderMs.toFixed(0)} ms in all.`,
  );
  results.dataset.done = String(Number(results.dataset.done ?? 0) + 1);
  button.disabled = false;
}

async function main() {
  try {
    await init();
  } catch (error) {
    setStatus(`Could not load the WebAssembly module: ${error}`, true);
    return;
  }
  for (const how of JSON.parse(join_types())) option($("how"), how, how);
  strategyNames = JSON.parse(strategies());
  for (const name of strategyNames) option($("strategy"), name, name);
  form.addEventListener("submit", runJoin);
  button.disabled = false;
  button.textContent = "Run";
  document.body.dataset.ready = "true";
  setStatus("Ready: choose the data and press Run.");
  const showCli = () => { $("cli").textContent = describeCli(readRequest(), strategyNames); };
  // The command follows the form as it is edited, not only on Run.
  form.addEventListener("input", showCli);
  showCli();
}

main();
