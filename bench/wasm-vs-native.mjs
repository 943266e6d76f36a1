// Times the WASM build (Node) and the native engine on the same log, in one run.
// usage: node bench/wasm-vs-native.mjs LOG NATIVE_BIN
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
const best = (f) => { let b = Infinity; for (let i = 0; i < 5; i++) { const t = process.hrtime.bigint(); f(); b = Math.min(b, Number(process.hrtime.bigint() - t) / 1e6); } return b; };
wasm.diagnoseJson("warm up");
const w = best(() => wasm.diagnoseJson(text));
// Native: the CLI on the same file, minus its start-up measured on an empty input.
const run = (args, input) => () => execFileSync(bin, args, { input, maxBuffer: 1 << 28 });
const n = best(run(["diagnose", "--format", "json", log]));
const n0 = best(run(["diagnose", "--format", "json", "-"], ""));
const native = Math.max(n - n0, 0.001);
console.log(`  wasm ${w.toFixed(1)} ms, native ${native.toFixed(1)} ms (CLI ${n.toFixed(1)} ms minus ${n0.toFixed(1)} ms start-up): wasm/native ${(w / native).toFixed(2)}`);
