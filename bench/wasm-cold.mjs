// Cold start of the WASM package in Node: a fresh process loads the package (the
// module compiled and instantiated, the precompiled pack's JSON text required) and
// gives its first report for a paste. Issue "Speed" asks for <= 15 ms from the load to
// the first report of a 100 KB paste.
// usage: node bench/wasm-cold.mjs LOG [RUNS]
//
// Each run is its own `node` process (a module cache or a warm V8 would hide the cost),
// which prints three figures measured from just before it loads the package: the
// package loaded, the engine built (the first call builds it from the pack, then
// diagnoses an empty text), and the first report of LOG written as JSON. The best and
// the median of RUNS runs are printed; the process start itself (about 40 ms of Node)
// is not in the figures.
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import path from "node:path";

const [log, runs = "7"] = process.argv.slice(2);
const root = path.join(path.dirname(fileURLToPath(import.meta.url)), "..");
const child = `
const { performance } = require("node:perf_hooks");
const text = require("node:fs").readFileSync(process.argv[1], "utf8");
const t0 = performance.now();
const wasm = require(process.argv[2]);
const t1 = performance.now();
wasm.diagnoseJson("");
const t2 = performance.now();
const json = wasm.diagnoseJson(text);
const t3 = performance.now();
if (!json.includes('"findings"')) throw new Error("no report");
console.log(JSON.stringify([t1 - t0, t2 - t0, t3 - t0, t3 - t2]));
`;
const pkg = path.join(root, "wasm/pkg-node/torchdx_wasm.js");
const rows = [];
for (let i = 0; i < Number(runs); i++) {
  rows.push(JSON.parse(execFileSync(process.execPath, ["-e", child, log, pkg], { encoding: "utf8" })));
}
const col = (k) => rows.map((r) => r[k]).sort((a, b) => a - b);
const fmt = (k) => { const c = col(k); return `${c[0].toFixed(1)} (median ${c[c.length >> 1].toFixed(1)})`; };
console.log(`  WASM cold start, ${rows.length} fresh Node processes, ms from the package's load, best (median):` +
  ` package loaded ${fmt(0)}, engine built ${fmt(1)}, first report ${fmt(2)}; the report alone ${fmt(3)}`);
