// The page's worker: runs the WebAssembly module off the page's thread, so that the page stays
// responsive during a run and a run can be cancelled (the page terminates this worker and starts
// another). It generates the data once, then runs one strategy per call and reports each, so the
// page can show progress and draw results as they come.
//
// Messages in:  { type: "init", module }   the compiled WebAssembly.Module, shared by every worker
//               { type: "run", request }   a DemoRequest
// Messages out: { type: "ready", strategies, joinTypes }   strategies: [{ name, about, sketch }]
//               { type: "prepared", summary }              data generated (PreparedSummary)
//               { type: "progress", index, total, name }   strategy `index` starts
//               { type: "run", index, run }                its RunOutcome
//               { type: "done" } or { type: "error", message }
//               { type: "init-error", message }           the module could not start

import init, { prepare, run_prepared, strategies, join_types } from "./pkg/skewjoin_wasm_demo.js";

let ready;

self.onmessage = async ({ data }) => {
  if (data.type === "init") {
    ready = init({ module_or_path: data.module });
    try {
      await ready;
    } catch (error) {
      self.postMessage({ type: "init-error", message: `could not start the WebAssembly module: ${error}` });
      return;
    }
    self.postMessage({
      type: "ready",
      strategies: JSON.parse(strategies()),
      joinTypes: JSON.parse(join_types()),
    });
    return;
  }
  if (data.type === "run") {
    await ready;
    try {
      const summary = JSON.parse(prepare(JSON.stringify(data.request)));
      self.postMessage({ type: "prepared", summary });
      const total = summary.strategies.length;
      for (let index = 0; index < total; index++) {
        self.postMessage({ type: "progress", index, total, name: summary.strategies[index] });
        const run = JSON.parse(run_prepared(index));
        self.postMessage({ type: "run", index, run });
      }
      self.postMessage({ type: "done" });
    } catch (error) {
      self.postMessage({ type: "error", message: String(error) });
    }
  }
};
