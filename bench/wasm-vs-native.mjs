// Times the WASM build (Node) and the native engine on the same log, in one run.
// usage: node bench/wasm-vs-native.mjs LOG TIME_DIAGNOSE_BIN
//
// Both sides do the same work on an engine built beforehand: diagnose the text and
// write the report's JSON (`diagnoseJson`; natively `time-diagnose`, in process, so no
// process start-up is in the figure). V8 first runs WebAssembly with its baseline
// compiler and re-compiles hot functions with its optimising one as they run, so the
// steady-state figure (best of 10) comes after 30 warm-up diagnoses; the first diagnosis (baseline
// code, engine already built) is printed beside it.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import path from "node:path";

const [log, bin] = process.argv.slice(2);
const root = path.join(path.dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);
const wasm = require(path.join(root, "wasm/pkg-node/torchdx_wasm.js"));
const text = readFileSync(log, "utf8");
const ms = (f) => { const t = process.hrtime.bigint(); f(); return Number(process.hrtime.bigint() - t) / 1e6; };
const load = ms(() => wasm.diagnoseJson("engine start"));
const first = ms(() => wasm.diagnoseJson(text));
for (let i = 0; i < 30; i++) wasm.diagnoseJson(text);
let w = Infinity;
for (let i = 0; i < 10; i++) w = Math.min(w, ms(() => wasm.diagnoseJson(text)));
const native = Number(execFileSync(bin, [log], { encoding: "utf8" }).trim());
console.log(`  wasm ${w.toFixed(1)} ms, native ${native.toFixed(1)} ms: wasm/native ${(w / native).toFixed(2)}` +
  ` (first WASM diagnosis ${first.toFixed(1)} ms, ${(first / native).toFixed(2)}x; engine start ${load.toFixed(1)} ms)`);
