// The built npm packages (after wasm/build.sh): shape, API, generated types.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);
const read = (p) => readFileSync(join(root, p), "utf8");

test("both packages are npm-shaped", () => {
  for (const dir of ["wasm/pkg", "wasm/pkg-node"]) {
    const pkg = JSON.parse(read(`${dir}/package.json`));
    for (const file of [pkg.main, pkg.types, "torchdx_wasm_bg.wasm"]) {
      assert.ok(existsSync(join(root, dir, file)), `${dir}/${file}`);
    }
    assert.match(pkg.version, /^\d+\.\d+\.\d+/);
  }
  assert.equal(JSON.parse(read("wasm/pkg/package.json")).type, "module");
  assert.equal(JSON.parse(read("wasm/pkg-node/package.json")).type, "commonjs");
});

test("the built-in rule pack ships precompiled beside the .wasm, not in it", async () => {
  // The same pack in both packages (ES module for pkg, CommonJS for pkg-node), as the
  // JSON text torchdx-rules builds: no TOML is parsed before the first diagnosis.
  const esm = (await import(pathToFileURL(join(root, "wasm/pkg/torchdx_rules.js")).href)).default;
  const cjs = require(join(root, "wasm/pkg-node/torchdx_rules.js"));
  assert.equal(esm, cjs);
  const pack = JSON.parse(esm);
  const names = pack.files.map((f) => f.name);
  assert.ok(names.includes("data/ops.toml") && names.includes("data/families.toml"), "the data files");
  for (const dir of ["wasm/pkg", "wasm/pkg-node"]) {
    const pkg = JSON.parse(read(`${dir}/package.json`));
    assert.ok(pkg.files.includes("torchdx_rules.js") && pkg.files.includes("snippets/"), `${dir}/package.json files`);
    // The .wasm embeds none of it (wasm/build.sh checks the same before binding).
    const bin = join(root, "target/release/torchdx");
    const check = spawnSync(bin, ["rules", "bundle", "--absent-from", join(root, dir, "torchdx_wasm_bg.wasm")], { encoding: "utf8" });
    assert.equal(check.status, 0, check.stderr);
  }
  // The engine sees every rule file of the pack, under its name.
  const dx = require(join(root, "wasm/pkg-node/torchdx_wasm.js"));
  const sources = dx.rules().map((r) => r.source).sort();
  assert.deepEqual(sources, names.filter((n) => !n.startsWith("data/")).sort());
});

test("the .d.ts declares the report types generated from Rust, and optional options", () => {
  const dts = read("wasm/pkg/torchdx_wasm.d.ts");
  for (const decl of ["export interface Report", "export interface Finding", "export type Role", "export interface RuleSpec", "export interface RuleSummary", "export interface DiagnoseOptions"]) {
    assert.ok(dts.includes(decl), decl);
  }
  assert.match(dts, /collateral_of: number \| null;/);
  assert.match(dts, /export function diagnose\(text: string, options\?: DiagnoseOptions \| null\): Report;/);
});

test("pkg-node API: diagnose, diagnoseJson, explain, rules, version, extra rules", () => {
  const dx = require(join(root, "wasm/pkg-node/torchdx_wasm.js"));
  const log = read("tests-js/fixtures/device-mismatch.log");
  const report = dx.diagnose(log);
  assert.equal(report.schema, "torchdx/report@1");
  assert.deepEqual(report, JSON.parse(dx.diagnoseJson(log)));
  assert.deepEqual(report, dx.diagnoseBytes(readFileSync(join(root, "tests-js/fixtures/device-mismatch.log"))));
  assert.equal(Object.getPrototypeOf(report.findings[0].evidence), Object.prototype, "evidence is a plain object");

  const ids = dx.rules().map((r) => r.id);
  assert.ok(ids.includes("device-mismatch"));
  assert.equal(dx.explain("device-mismatch").id, "device-mismatch");
  assert.equal(dx.explain("no-such-rule"), undefined);
  assert.match(dx.explainMarkdown("device-mismatch"), /^# device-mismatch: /);
  assert.equal(dx.displayLine("\u001b[31mRuntimeError\u001b[0m: x\r"), "RuntimeError: x");
  assert.equal(dx.displayLine("epoch 1  10%\repoch 1 100%"), "epoch 1 100%");
  assert.match(dx.version(), /^\d+\.\d+\.\d+/);

  const rules = [{ name: "frobnicator-failed.toml", text: read("tests-js/rules/frobnicator-failed.toml") }];
  const frob = dx.diagnose(read("tests-js/fixtures/frobnicator.log"), { rules });
  assert.equal(frob.findings[0].id, "frobnicator-failed");
  assert.ok(dx.rules({ rules }).some((r) => r.id === "frobnicator-failed" && r.source === "frobnicator-failed.toml"));
  assert.throws(() => dx.diagnose("x", { rules: [{ name: "broken.toml", text: "id = 1\n" }] }), (e) => e instanceof Error && /^broken\.toml:1:\d+: /.test(e.message));
  assert.throws(() => dx.diagnose("x", { rule: [] }), /unknown field `rule`/);
});

test("pkg (web target) loads in Node through initSync", async () => {
  const web = await import(pathToFileURL(join(root, "wasm/pkg/torchdx_wasm.js")).href);
  web.initSync({ module: readFileSync(join(root, "wasm/pkg/torchdx_wasm_bg.wasm")) });
  const log = read("tests-js/fixtures/multi-rank.log");
  const report = web.diagnose(log);
  assert.equal(report.findings[report.initiating].rank, 1);
});

test("pkg-node streaming Diagnoser: any slicing gives diagnoseBytes' report; misuse throws", () => {
  const dx = require(join(root, "wasm/pkg-node/torchdx_wasm.js"));
  const bytes = new TextEncoder().encode(read("tests-js/fixtures/multi-rank.log"));
  const whole = dx.diagnoseBytesJson(bytes);
  assert.ok(JSON.parse(whole).findings.length > 0, "the fixture has findings");
  for (const size of [1, 7, 4096, bytes.length]) {
    const d = new dx.Diagnoser();
    for (let at = 0; at < bytes.length; at += size) d.feed(bytes.subarray(at, at + size));
    assert.equal(d.finishJson(), whole, `slices of ${size} bytes`);
  }
  const d = new dx.Diagnoser();
  d.feed(bytes);
  assert.deepEqual(d.finish(), JSON.parse(whole));
  assert.throws(() => d.feed(bytes), /finished/);
  assert.throws(() => d.finish(), /finished/);
  assert.throws(() => new dx.Diagnoser().feed("a string"), /Uint8Array/);
  assert.throws(() => new dx.Diagnoser({ rules: [{ name: "broken.toml", text: "id = \n" }] }), /broken\.toml:/);
});

test("pkg-node diagnoseBytes takes bytes only: a string or a number is an error, not an empty log", () => {
  const dx = require(join(root, "wasm/pkg-node/torchdx_wasm.js"));
  const text = "RuntimeError: CUDA error: an illegal memory access was encountered\n";
  for (const f of [dx.diagnoseBytes, dx.diagnoseBytesJson]) {
    assert.throws(() => f(text), /expected a Uint8Array/);
    assert.throws(() => f(42), /expected a Uint8Array/);
    assert.throws(() => f({}), /expected a Uint8Array/);
  }
  const bytes = new TextEncoder().encode(text);
  assert.deepEqual(dx.diagnoseBytes(bytes), dx.diagnose(text));
  assert.equal(dx.diagnoseBytes(bytes).findings[0].family, "illegal-memory-access");
});
