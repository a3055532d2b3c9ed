// End-to-end test of the in-browser demo in a real browser: Debian's Chromium, driven headless by
// playwright-core (never a downloaded browser), loads the built page from a local server, runs a
// fixed-seed join with P = 8 for every strategy, and checks that each strategy's per-partition
// figures, row count and checksum on the page equal the `--metrics` of `skewjoin join` on the
// files `skewjoin gen` writes with the same seed, with the summary, the data-movement stacks and
// AM-Join's plan. It cancels a long run and checks the page answers clicks meanwhile, checks a
// refusal, the URL that restores the settings and the file:// advice, times a 100,000-row-per-side
// run and saves screenshots at laptop and phone widths.
//
// Run by e2e.sh after a build: node --test wasm-demo/e2e/test.mjs
// Environment: SKEWJOIN (the native binary, required), CHROMIUM (default /usr/bin/chromium),
// E2E_OUT (where screenshots and timings go; default wasm-demo/e2e/out).

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createServer } from "node:http";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, extname, join, normalize, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));
const dist = resolve(here, "..", "dist");
const out = resolve(process.env.E2E_OUT ?? join(here, "out"));
const skewjoin = process.env.SKEWJOIN;
const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";

// The fixed workload: skewed on both sides, the right side smaller, some rows without partners.
const DATA = {
  left_rows: 20000, right_rows: 12000, keys: 2000,
  left_skew: 1.1, right_skew: 0.9, independent: false, noise: 0.1, seed: 7,
};
const PARTITIONS = 8;
const HOW = "inner";

const MIME = {
  ".html": "text/html; charset=utf-8", ".js": "text/javascript", ".css": "text/css",
  ".wasm": "application/wasm", ".md": "text/markdown; charset=utf-8",
};

let server, origin, context, page, workdir;
// The page's answer for every strategy on DATA, kept for the tests after the one that runs it.
let allStrategies;
const requests = [];
const problems = [];

function serve() {
  return new Promise((resolvePromise) => {
    const s = createServer((req, res) => {
      const path = normalize(decodeURIComponent(new URL(req.url, "http://x").pathname));
      const file = join(dist, path.endsWith("/") ? join(path, "index.html") : path);
      if (!file.startsWith(dist)) { res.writeHead(403).end(); return; }
      try {
        const body = readFileSync(file);
        res.writeHead(200, { "content-type": MIME[extname(file)] ?? "application/octet-stream" });
        res.end(body);
      } catch {
        res.writeHead(404).end();
      }
    });
    s.listen(0, "127.0.0.1", () => resolvePromise(s));
  });
}

async function setControls(values) {
  for (const [id, value] of Object.entries(values)) {
    const selector = `#${id}`;
    const tag = await page.$eval(selector, (el) => el.tagName);
    if (tag === "SELECT") await page.selectOption(selector, String(value));
    else await page.fill(selector, String(value));
  }
}

// Presses Run and waits until the page has drawn the new results; returns the page's JSON.
async function runOnPage() {
  const done = await page.$eval("#results", (el) => Number(el.dataset.done ?? 0));
  await page.click("#run");
  await page.waitForFunction(
    (n) => Number(document.getElementById("results").dataset.done ?? 0) > n,
    done, { timeout: 120_000 },
  );
  const text = await page.$eval("#metrics-json", (el) => el.textContent);
  const renderMs = Number(await page.$eval("#results", (el) => el.dataset.renderMs));
  return { response: JSON.parse(text), renderMs };
}

function nativeMetrics(strategy) {
  const metrics = join(workdir, `metrics-${strategy}.json`);
  execFileSync(skewjoin, [
    "join", join(workdir, "left.parquet"), join(workdir, "right.parquet"), "--on", "key",
    "--how", HOW, "--strategy", strategy,
    // One worker over P partitions, as the page runs (and as its printed command says).
    "-w", "1", "-p", String(PARTITIONS), "--metrics", metrics, "--quiet",
  ]);
  return JSON.parse(readFileSync(metrics, "utf8"));
}

before(async () => {
  assert.ok(skewjoin, "set SKEWJOIN to the path of the skewjoin binary");
  statSync(join(dist, "pkg", "skewjoin_wasm_demo_bg.wasm"));
  mkdirSync(out, { recursive: true });
  workdir = mkdtempSync(join(tmpdir(), "skewjoin-e2e-"));
  execFileSync(skewjoin, [
    "gen", "--out", workdir,
    "--left-rows", String(DATA.left_rows), "--right-rows", String(DATA.right_rows),
    "--keys", String(DATA.keys), "--left-skew", String(DATA.left_skew),
    "--right-skew", String(DATA.right_skew), "--noise", String(DATA.noise),
    "--seed", String(DATA.seed),
  ], { stdio: "ignore" });
  server = await serve();
  origin = `http://127.0.0.1:${server.address().port}`;
  context = await chromium.launchPersistentContext(join(workdir, "profile"), {
    executablePath,
    headless: true,
    chromiumSandbox: false,
    args: [
      "--no-sandbox", "--disable-gpu", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--no-first-run",
    ],
    viewport: { width: 1280, height: 900 },
  });
  page = context.pages()[0] ?? await context.newPage();
  page.on("request", (request) => requests.push(request.url()));
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  page.on("console", (message) => {
    if (message.type() === "error") problems.push(`console error: ${message.text()}`);
  });
  await page.goto(`${origin}/`);
  await page.waitForSelector("body[data-ready=true]", { timeout: 60_000 });
});

after(async () => {
  await context?.close();
  server?.close();
  if (workdir) rmSync(workdir, { recursive: true, force: true });
});

test("the page offers every strategy and join type of the module", async () => {
  const strategies = await page.$$eval("#strategy option", (os) => os.map((o) => o.value));
  assert.deepEqual(strategies.slice(0, 1), ["all"]);
  for (const name of ["shuffle", "broadcast", "ib", "vprp", "am", "tree"]) {
    assert.ok(strategies.includes(name), `${name} in ${strategies}`);
  }
  const hows = await page.$$eval("#how option", (os) => os.map((o) => o.value));
  assert.equal(hows.length, 8);
  for (const id of ["left_rows", "right_rows", "keys", "left_skew", "right_skew", "hot_keys", "noise", "partitions", "how", "strategy", "seed"]) {
    const label = await page.$eval(`label[for=${id}]`, (el) => el.textContent.trim());
    assert.ok(label.length > 0, `#${id} has a label`);
  }
});

// Each strategy's figures on the page against the metrics the printed command wrote into `dir`.
async function compareWithPage(response, compared, dir) {
  const checksums = new Set();
  for (const strategy of compared) {
    const run = response.runs.find((r) => r.requested === strategy);
    assert.ok(run && !run.error, `${strategy} ran on the page`);
    const native = JSON.parse(readFileSync(join(dir, `metrics-${strategy}.json`), "utf8"));
    assert.equal(run.strategy, native.strategy, strategy);
    assert.equal(run.broadcast_side, native.broadcast_side, strategy);
    assert.equal(run.left_rows, native.left_rows);
    assert.equal(run.right_rows, native.right_rows);
    assert.equal(run.output_rows, native.output_rows, strategy);
    assert.equal(run.output_rows, response.expected_rows, strategy);
    assert.equal(run.checksum, native.checksum, strategy);
    assert.equal(run.per_partition.length, PARTITIONS);
    if (strategy === "tree-basic") {
      // Its peak held depends on when each round's batches arrive, which varies from run to run
      // natively too (three `-w 1` runs gave three different peaks); the rest is exact.
      const withoutPeak = (parts) => parts.map(({ peak_records, ...rest }) => {
        assert.ok(peak_records > 0, strategy);
        return rest;
      });
      assert.deepEqual(withoutPeak(run.per_partition), withoutPeak(native.per_partition), strategy);
    } else {
      assert.deepEqual(run.per_partition, native.per_partition, strategy);
    }
    assert.equal(run.records_received, native.records_received, strategy);
    const fields = ["input_imbalance", "output_imbalance", "peak_imbalance", "copying_factor"];
    for (const field of fields.filter((f) => strategy !== "tree-basic" || f !== "peak_imbalance")) {
      assert.ok(Math.abs(run[field] - native[field]) < 1e-9, `${strategy} ${field}: ${run[field]} vs ${native[field]}`);
    }
    // What the cards carry is what the JSON says, and each run draws at least its two charts
    // (input and output per partition; VPRP adds its range map).
    const card = `#results article[data-strategy="${strategy}"]`;
    const shown = await page.$eval(card, (el) => ({ ...el.dataset }));
    assert.equal(shown.checksum, native.checksum);
    assert.equal(Number(shown.outputRows), native.output_rows);
    assert.deepEqual(JSON.parse(shown.perPartition), run.per_partition);
    assert.ok(await page.$$eval(`${card} canvas`, (cs) => cs.length) >= 3, strategy);
    // Its description comes from the strategy's module through the registry.
    const described = await page.$eval(card, (el) => [el.querySelector(".explain")?.textContent ?? "",
      el.querySelector(".sketch")?.textContent ?? ""]);
    assert.ok(described[0].length > 40 && described[1].includes("──"), `${strategy} is described: ${described}`);
    // The input chart draws where records came from: its copied-side stack is the native run's
    // broadcast traffic (the IB family counts it) or, for Broadcast-Join, the whole copied side
    // on every partition; both stacks add up to what each partition received.
    const stacks = await page.$eval(`${card} canvas`, (canvas) =>
      Chart.getChart(canvas).data.datasets.filter((d) => d.type === "bar").map((d) => d.data));
    const copiedRows = native.broadcast_side === "left" ? native.left_rows : native.right_rows;
    const expectedCopies = strategy === "broadcast"
      ? native.per_partition.map(() => copiedRows)
      : native.per_partition.map((p) => p.traffic.broadcast_records);
    assert.deepEqual(stacks[1], expectedCopies, strategy);
    if (["broadcast", "ib", "der", "ddr"].includes(strategy)) assert.ok(stacks[1].every((c) => c > 0), strategy);
    assert.ok(stacks[0].every((routed) => routed >= 0), `${strategy}: ${stacks[0]}`);
    assert.deepEqual(stacks[0].map((routed, p) => routed + stacks[1][p]), native.per_partition.map((p) => p.input_records), strategy);
    // The summary has a row for it with the copying factor the native run reports.
    const row = await page.$eval(`#summary tr[data-strategy="${strategy}"]`, (tr) => ({
      copying: tr.dataset.copyingFactor, cells: [...tr.children].map((c) => c.textContent),
    }));
    assert.equal(row.copying, native.copying_factor.toFixed(2), strategy);
    assert.ok(row.cells.includes(native.copying_factor.toFixed(2)), `${strategy}: ${row.cells}`);
    checksums.add(run.checksum);
  }
  assert.equal(checksums.size, 1, "every strategy produces the same output");
}

test("per-partition figures on the page equal skewjoin join --metrics", async () => {
  await setControls({
    left_rows: DATA.left_rows, right_rows: DATA.right_rows, keys: DATA.keys,
    left_skew: DATA.left_skew, right_skew: DATA.right_skew,
    hot_keys: DATA.independent ? "independent" : "shared", noise: DATA.noise, seed: DATA.seed,
    partitions: PARTITIONS, how: HOW, strategy: "all",
  });
  const { response } = await runOnPage();
  allStrategies = response;
  assert.equal(response.request.partitions, PARTITIONS);
  // The command the page prints for its settings, run as printed in a fresh directory, gives
  // every strategy's figures partition by partition.
  const cli = await page.$eval("#cli", (el) => el.textContent);
  const compared = response.runs.map((r) => r.requested);
  assert.ok(cli.includes(`for s in ${compared.join(" ")}; do `), cli);
  // The text runs unchanged: the binary under test is first on PATH, as `skewjoin`.
  assert.equal(basename(skewjoin), "skewjoin", "SKEWJOIN names a binary called skewjoin");
  const cliDir = mkdtempSync(join(tmpdir(), "skewjoin-e2e-cli-"));
  try {
    execFileSync("bash", ["-e", "-c", cli], {
      cwd: cliDir,
      env: { ...process.env, PATH: `${dirname(resolve(skewjoin))}:${process.env.PATH}` },
      stdio: ["ignore", "ignore", "pipe"],
    });
    await compareWithPage(response, compared, cliDir);
  } finally {
    rmSync(cliDir, { recursive: true, force: true });
  }
  // The skew is visible: the shuffle's busiest partition does well above the mean.
  const shuffle = response.runs.find((r) => r.requested === "shuffle");
  assert.ok(shuffle.output_imbalance > 1.5, `shuffle output max/mean ${shuffle.output_imbalance}`);
  // Copying is visible: Broadcast-Join's even input hides copies that the summary shows.
  const broadcast = response.runs.find((r) => r.requested === "broadcast");
  assert.ok(broadcast.copying_factor > 1.5 && broadcast.input_imbalance < shuffle.input_imbalance);
  // Sorting the summary by makespan puts the smallest predicted makespan first.
  await page.selectOption("#sort", "makespan");
  const order = await page.$$eval("#summary tr[data-strategy]", (trs) => trs.map((tr) => tr.dataset.strategy));
  const byMakespan = response.runs.filter((r) => !r.error)
    .sort((a, b) => a.predicted_makespan_ms - b.predicted_makespan_ms).map((r) => r.requested);
  assert.deepEqual(order, byMakespan);
  await page.selectOption("#sort", "order");
  // The shared y scale puts every card's output chart on one top: the largest output anywhere.
  await page.check("#shared_scale");
  const tops = await page.$$eval("#results article canvas", (canvases) =>
    canvases.map((c) => Chart.getChart(c)).filter((c) => c.options.plugins.title.text.startsWith("output rows"))
      .map((c) => c.scales.y.max));
  const largest = Math.max(...response.runs.filter((r) => !r.error).flatMap((r) => r.per_partition.map((p) => p.output_rows)));
  assert.ok(tops.length >= 9 && tops.every((top) => top === largest), `${tops} vs ${largest}`);
  await page.uncheck("#shared_scale");
  await page.locator("#summary").screenshot({ path: join(out, "summary.png") });
  for (const strategy of ["shuffle", "ib", "am", "tree"]) {
    await page.locator(`#results article[data-strategy="${strategy}"]`).screenshot({ path: join(out, `card-${strategy}.png`) });
  }
  await page.screenshot({ path: join(out, "screenshot.png"), fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  // Chart.js resizes its canvases on the next frames; let it before measuring.
  await page.waitForTimeout(500);
  await page.screenshot({ path: join(out, "screenshot-phone.png"), fullPage: true });
  await page.locator("#summary").scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(out, "phone.png") });
  // Nothing is wider than a phone's screen.
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `the page is ${overflow}px wider than a 390px screen`);
  await page.setViewportSize({ width: 1280, height: 900 });
});

test("the page shows Tree-Join's rounds, AM-Join's key classes and VPRP's range map", async () => {
  assert.ok(allStrategies, "the comparison test ran first");
  const ran = (strategy) => {
    const run = allStrategies.runs.find((r) => r.requested === strategy);
    assert.ok(run && !run.error, `${strategy} ran on the page`);
    return run;
  };
  const card = (strategy) => `#results article[data-strategy="${strategy}"]`;

  // Rounds and classes come from exact key counts, so the native run agrees for any W.
  const tree = ran("tree");
  const nativeTree = nativeMetrics("tree");
  assert.ok(Number.isInteger(nativeTree.tree_rounds) && nativeTree.tree_rounds >= 1);
  assert.equal(tree.tree_rounds, nativeTree.tree_rounds);
  assert.equal(await page.$eval(`${card("tree")} dd.tree-rounds`, (el) => el.textContent), String(nativeTree.tree_rounds));

  const am = ran("am");
  const nativeAm = nativeMetrics("am");
  assert.deepEqual(am.am, nativeAm.am);
  assert.ok(nativeAm.am.hot_both > 0, "the workload has keys hot on both sides");
  const rows = await page.$$eval(`${card("am")} table.classes tr`, (trs) =>
    trs.slice(1).map((tr) => [...tr.children].map((cell) => cell.textContent)));
  assert.equal(rows.length, 4);
  const shownCount = (text) => Number(text.replaceAll(",", ""));
  assert.equal(shownCount(rows[2][1]), nativeAm.am.hot_both);
  // The plan names the largest grids' keys and the partitions their cells landed on.
  const planLines = await page.$$eval(`${card("am")} ul.plan li`, (lis) => lis.map((li) => li.textContent));
  for (const grid of nativeAm.am.largest_grids) {
    const line = planLines.find((l) => l.startsWith(`Key ${grid.key}:`));
    assert.ok(line, `key ${grid.key} in ${planLines}`);
    for (const partition of new Set(grid.partitions)) assert.match(line, new RegExp(`\\bp${partition}\\b`), line);
  }
  assert.ok(nativeAm.am.largest_grids.length > 0);
  // The hot classes' rows are the native run's; the cold row is what they leave.
  const classRows = rows.map((row) => shownCount(row[2]));
  assert.deepEqual(classRows.slice(0, 3), nativeAm.am.left_records);
  assert.deepEqual(rows.slice(0, 3).map((row) => shownCount(row[3])), nativeAm.am.right_records);
  assert.equal(classRows.reduce((a, b) => a + b, 0), DATA.left_rows, "the classes hold every left row");

  // VPRP samples per worker, so its ranges depend on W: check the map's shape and totals.
  const vprp = ran("vprp");
  const ranges = vprp.ranges.virtual_ranges;
  assert.equal(ranges.length, 2 * PARTITIONS);
  ranges.forEach((range, index) => assert.equal(range.partition, index % PARTITIONS));
  const routed = ranges.reduce((a, r) => a + r.actual_records, 0);
  assert.equal(routed, DATA.left_rows + DATA.right_rows);
  const received = vprp.per_partition.reduce((a, p) => a + p.input_records, 0);
  assert.equal(routed, received);
  assert.equal(await page.$$eval(`${card("vprp")} canvas`, (cs) => cs.length), 4);
  assert.equal(await page.$$eval(`${card("shuffle")} table.classes`, (ts) => ts.length), 0);
  await page.locator(card("vprp")).screenshot({ path: join(out, "card-vprp.png") });
});

test("a 100,000-row-per-side join renders (timed)", async () => {
  await setControls({
    left_rows: 100000, right_rows: 100000, keys: 10000, left_skew: 0.8, right_skew: 0.8,
    hot_keys: "shared", noise: 0, seed: 42, partitions: 8, how: "inner",
  });
  const timings = { wasm_bytes: statSync(join(dist, "pkg", "skewjoin_wasm_demo_bg.wasm")).size };
  for (const strategy of ["shuffle", "all"]) {
    await setControls({ strategy });
    const { response, renderMs } = await runOnPage();
    assert.ok(response.runs.length >= 1);
    for (const run of response.runs) {
      if (!run.error) assert.equal(run.output_rows, response.expected_rows, run.requested);
    }
    timings[`render_ms_${strategy}`] = renderMs;
    timings[`generate_ms_${strategy}`] = response.generate_ms;
    timings[`join_ms_${strategy}`] = Object.fromEntries(
      response.runs.filter((r) => !r.error).map((r) => [r.requested, r.elapsed_ms]),
    );
  }
  writeFileSync(join(out, "timings.json"), JSON.stringify(timings, null, 2) + "\n");
  console.log(`timings: ${JSON.stringify(timings)}`);
});

test("a long run can be cancelled, and the page answers clicks meanwhile", async () => {
  const done = await page.$eval("#results", (el) => Number(el.dataset.done ?? 0));
  // Several seconds in a browser: 2M rows a side, every strategy (18 s on a busy 2-core machine).
  await setControls({
    left_rows: 2000000, right_rows: 2000000, keys: 1000000, left_skew: 0.5, right_skew: 0.5,
    hot_keys: "shared", noise: 0, seed: 1, partitions: 8, how: "inner", strategy: "all",
  });
  await page.click("#run");
  await page.waitForFunction(() => document.getElementById("status").textContent.startsWith("Running"), null, { timeout: 60_000 });
  // The page's thread is free while the worker runs: a real click on the raw figures (a
  // <details>) is handled at once, timed from the click's creation to its handler (a click
  // that waited for a busy thread carries the earlier time stamp).
  for (let i = 0; i < 3; i++) {
    await page.evaluate(() => {
      document.querySelector("#raw summary").addEventListener("click", (event) => {
        document.body.dataset.clickLatencyMs = (performance.now() - event.timeStamp).toFixed(1);
      }, { once: true });
    });
    await page.click("#raw summary");
    const latency = Number(await page.$eval("body", (b) => b.dataset.clickLatencyMs));
    assert.ok(latency < 200, `a click waited ${latency} ms for the page`);
  }
  assert.ok(await page.$eval("#cancel", (b) => !b.disabled));
  await page.click("#cancel");
  await page.waitForFunction(() => Number(document.getElementById("results").dataset.cancelled ?? 0) > 0);
  const latency = Number(await page.$eval("body", (b) => b.dataset.cancelLatencyMs));
  assert.ok(latency < 200, `Cancel was handled after ${latency} ms`);
  const status = await page.$eval("#status", (el) => el.textContent);
  assert.match(status, /^Cancelled after \d+ strateg/);
  // The run did not finish, and the page takes the next one with a fresh worker.
  assert.equal(await page.$eval("#results", (el) => Number(el.dataset.done ?? 0)), done);
  const shown = await page.$$eval("#results article", (cards) => cards.length);
  assert.ok(shown < 10, `${shown} cards after cancelling`);
  await page.waitForFunction(() => !document.getElementById("run").disabled);
  await setControls({ left_rows: 3000, right_rows: 3000, keys: 300, strategy: "shuffle" });
  const { response } = await runOnPage();
  assert.equal(response.runs.length, 1);
  assert.equal(response.runs[0].output_rows, response.expected_rows);
});

test("too much work is refused before generating, with numbers a reader can read, and clears old results", async () => {
  assert.ok(await page.$$eval("#results article", (cards) => cards.length) > 0);
  const failed = await page.$eval("#results", (el) => Number(el.dataset.failed ?? 0));
  await setControls({ left_rows: 2000000, right_rows: 2000000, keys: 10000, left_skew: 1.2, right_skew: 1.2, strategy: "all" });
  await page.click("#run");
  await page.waitForFunction((n) => Number(document.getElementById("results").dataset.failed ?? 0) > n, failed);
  const status = await page.$eval("#status", (el) => el.textContent);
  assert.match(status, /has about \d{1,3}(,\d{3})+ output rows/);
  assert.match(status, /run one strategy instead of 10/);
  assert.equal(await page.$$eval("#results article", (cards) => cards.length), 0);
  assert.ok(await page.$eval("#summary", (el) => el.hidden));
});

test("the URL carries the settings, and opening it restores them", async () => {
  const settings = {
    left_rows: "30000", right_rows: "5000", keys: "700", left_skew: "1.15", right_skew: "0",
    hot_keys: "independent", noise: "0.1", seed: "9", partitions: "5", how: "left", strategy: "vprp",
  };
  await setControls(settings);
  const url = page.url();
  for (const [id, value] of Object.entries(settings)) assert.ok(url.includes(`${id}=${value}`), `${id} in ${url}`);
  const cli = await page.$eval("#cli", (el) => el.textContent);
  const second = await context.newPage();
  try {
    await second.goto(url);
    await second.waitForSelector("body[data-ready=true]", { timeout: 60_000 });
    for (const [id, value] of Object.entries(settings)) {
      assert.equal(await second.$eval(`#${id}`, (el) => el.value), value, id);
    }
    assert.equal(await second.$eval("#cli", (el) => el.textContent), cli);
  } finally {
    await second.close();
  }
});

test("a page opened from file:// says how to serve it instead of hanging", async () => {
  const local = await context.newPage();
  try {
    await local.goto(`file://${join(dist, "index.html")}`);
    await local.waitForFunction(() => document.getElementById("status").classList.contains("error"));
    assert.match(await local.$eval("#status", (el) => el.textContent), /served over HTTP.*http\.server/);
  } finally {
    await local.close();
  }
});

test("the page made no request outside its own origin and logged no error", () => {
  const foreign = requests.filter((url) => !url.startsWith(origin));
  assert.deepEqual(foreign, []);
  assert.ok(requests.some((url) => url.endsWith(".wasm")));
  assert.deepEqual(problems, []);
});
