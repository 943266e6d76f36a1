// Parity: the WebAssembly build must print byte for byte what the native CLI prints.
//
//   node tests-js/parity.mjs                 # default inputs (below)
//   node tests-js/parity.mjs FILE|DIR ...    # these logs (DIRs: every *.log, *.txt inside)
//
// Default inputs: every corpus log (../shared/corpus/*/log.txt, or $TORCHDX_CORPUS, when
// the folder exists), every rule example (dumped by `torchdx rules examples --out DIR`)
// and tests-js/fixtures/*.log; plus, for every rule, `torchdx explain ID --format json`
// against explainJson(id) and `torchdx explain ID` against explainMarkdown(id); plus the
// fixtures with the extra rule pack tests-js/rules (`--rules` against options.rules).
//
// For each file, `torchdx diagnose --format json FILE` (stdout minus its final newline)
// must equal, byte for byte:
//   - diagnoseJson(text)        from wasm/pkg-node  (text = the file decoded as UTF-8)
//   - diagnoseBytesJson(bytes)  from wasm/pkg-node
//   - diagnoseJson(text)        from wasm/pkg       (the web build, loaded with initSync)
// A file that is not valid UTF-8 is compared through the bytes functions only: decoding
// it to a JS string replaces bytes, so the text variant sees a different input.
//
// Prints `N passed, M failed`; exits non-zero when anything failed or nothing ran.
// $TORCHDX_BIN overrides the CLI path (default target/release/torchdx).

import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { basename, dirname, join, relative, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const bin = resolve(root, process.env.TORCHDX_BIN || "target/release/torchdx");
const require = createRequire(import.meta.url);

function fail(message) {
  console.error(`parity: ${message}`);
  console.log("0 passed, 1 failed");
  process.exit(1);
}

if (!existsSync(bin)) fail(`no CLI at ${bin}: run cargo build --release -p torchdx`);
const nodePkg = join(root, "wasm/pkg-node/torchdx_wasm.js");
const webPkg = join(root, "wasm/pkg/torchdx_wasm.js");
if (!existsSync(nodePkg) || !existsSync(webPkg)) fail("no wasm/pkg-node or wasm/pkg: run wasm/build.sh");

const node = require(nodePkg);
const web = await import(pathToFileURL(webPkg).href);
web.initSync({ module: readFileSync(join(root, "wasm/pkg/torchdx_wasm_bg.wasm")) });

// ---------------------------------------------------------------- inputs

function filesUnder(dir, accept) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...filesUnder(p, accept));
    else if (accept(entry.name)) out.push(p);
  }
  return out.sort();
}

const groups = []; // [label, files]
let tmp = null;
const args = process.argv.slice(2);
if (args.length) {
  const files = args.flatMap((a) => {
    const p = resolve(a);
    return statSync(p).isDirectory() ? filesUnder(p, (n) => /\.(log|txt)$/.test(n)) : [p];
  });
  groups.push(["given", files]);
} else {
  const corpus = resolve(root, process.env.TORCHDX_CORPUS || "../shared/corpus");
  if (existsSync(corpus)) groups.push(["corpus", filesUnder(corpus, (n) => n === "log.txt")]);
  else console.log(`parity: no corpus at ${corpus}, skipping it`);

  tmp = mkdtempSync(join(tmpdir(), "torchdx-examples-"));
  const dump = spawnSync(bin, ["rules", "examples", "--out", tmp], { encoding: "utf8" });
  if (dump.status !== 0) fail(`torchdx rules examples --out ${tmp} failed (${dump.status}): ${dump.stderr}`);
  const examples = filesUnder(tmp, (n) => n.endsWith(".log"));
  if (!examples.length) fail(`torchdx rules examples wrote no .log file into ${tmp}`);
  groups.push(["rule examples", examples]);

  const fixtures = join(root, "tests-js/fixtures");
  if (existsSync(fixtures)) groups.push(["fixtures", filesUnder(fixtures, (n) => n.endsWith(".log"))]);
}

// ---------------------------------------------------------------- compare

/** Where two strings first differ, as a few lines of context. */
function firstDifference(a, b) {
  const la = a.split("\n");
  const lb = b.split("\n");
  for (let i = 0; i < Math.max(la.length, lb.length); i++) {
    if (la[i] !== lb[i]) {
      return `line ${i + 1}:\n    native: ${JSON.stringify(la[i] ?? "<end>")}\n    wasm:   ${JSON.stringify(lb[i] ?? "<end>")}`;
    }
  }
  return "(equal)";
}

const utf8 = new TextDecoder("utf-8", { fatal: true });
let passed = 0;
let failed = 0;
for (const [label, files] of groups) {
  let groupFailed = 0;
  for (const file of files) {
    const name = relative(root, file).startsWith("..") ? file : relative(root, file);
    const shown = label === "rule examples" ? `example ${basename(file)}` : name;
    const run = spawnSync(bin, ["diagnose", "--format", "json", file], { maxBuffer: 1 << 28 });
    if (run.error) fail(`running ${bin}: ${run.error.message}`);
    let native = run.stdout.toString("utf8");
    if (native.endsWith("\n")) native = native.slice(0, -1);
    const problems = [];
    if (!native.trim().startsWith("{")) {
      problems.push(`the CLI printed no JSON (exit ${run.status}): ${run.stderr.toString().trim().slice(0, 400)}`);
    } else {
      const bytes = readFileSync(file);
      let text = null;
      try {
        text = utf8.decode(bytes);
      } catch {
        text = null; // not UTF-8: bytes variants only
      }
      const variants = [["pkg-node diagnoseBytesJson(bytes)", () => node.diagnoseBytesJson(bytes)]];
      if (text !== null) {
        variants.unshift(["pkg-node diagnoseJson(text)", () => node.diagnoseJson(text)]);
        variants.push(["pkg (web) diagnoseJson(text)", () => web.diagnoseJson(text)]);
      } else {
        variants.push(["pkg (web) diagnoseBytesJson(bytes)", () => web.diagnoseBytesJson(bytes)]);
      }
      for (const [what, call] of variants) {
        let out;
        try {
          out = call();
        } catch (e) {
          problems.push(`${what} threw: ${e && e.message}`);
          continue;
        }
        if (out !== native) problems.push(`${what} differs at ${firstDifference(native, out)}`);
      }
    }
    if (problems.length) {
      failed++;
      groupFailed++;
      console.log(`FAIL ${shown}\n  ${problems.join("\n  ")}`);
    } else {
      passed++;
    }
  }
  console.log(`parity: ${label}: ${files.length - groupFailed}/${files.length} identical`);
}
// An extra rule pack: `torchdx diagnose --rules tests-js/rules` against options.rules.
const extraDir = join(root, "tests-js/rules");
if (!args.length && existsSync(extraDir)) {
  const rules = readdirSync(extraDir)
    .filter((n) => n.endsWith(".toml"))
    .sort()
    .map((n) => ({ name: n, text: readFileSync(join(extraDir, n), "utf8") }));
  const logs = filesUnder(join(root, "tests-js/fixtures"), (n) => n.endsWith(".log"));
  let groupFailed = 0;
  for (const file of logs) {
    let native = spawnSync(bin, ["diagnose", "--rules", extraDir, "--format", "json", file], { encoding: "utf8" }).stdout;
    if (native.endsWith("\n")) native = native.slice(0, -1);
    const wasm = node.diagnoseJson(readFileSync(file, "utf8"), { rules });
    if (wasm === native && native.startsWith("{")) passed++;
    else {
      failed++;
      groupFailed++;
      console.log(`FAIL --rules ${relative(root, file)}\n  diagnoseJson(text, { rules }) differs at ${firstDifference(native, wasm)}`);
    }
  }
  console.log(`parity: extra rule pack: ${logs.length - groupFailed}/${logs.length} identical`);
}

// `explain`: every rule, as JSON (`explain ID --format json`) and Markdown (`explain ID`).
if (!args.length) {
  const list = spawnSync(bin, ["rules", "list"], { encoding: "utf8" });
  const cliIds = list.stdout.split("\n").filter(Boolean).map((l) => l.split(/\s+/)[0]);
  const ids = node.rules().map((r) => r.id);
  let groupFailed = 0;
  const check = (what, ok, detail) => {
    if (ok) passed++;
    else {
      failed++;
      groupFailed++;
      console.log(`FAIL ${what}\n  ${detail}`);
    }
  };
  check("rules(): the same ids as `torchdx rules list`", JSON.stringify(ids) === JSON.stringify(cliIds), `wasm ${ids.length} ids, CLI ${cliIds.length}`);
  // Each package loads the built-in pack from its own torchdx_rules.js (ESM / CommonJS).
  check("rules(): pkg (web) equals pkg-node", JSON.stringify(web.rules()) === JSON.stringify(node.rules()), "the two packages' rule packs differ");
  for (const id of ids) {
    let json = spawnSync(bin, ["explain", id, "--format", "json"], { encoding: "utf8" }).stdout;
    if (json.endsWith("\n")) json = json.slice(0, -1);
    const md = spawnSync(bin, ["explain", id], { encoding: "utf8" }).stdout;
    const wj = node.explainJson(id);
    const wm = node.explainMarkdown(id);
    check(`explain ${id}`, wj === json && wm === md && JSON.stringify(node.explain(id)) === JSON.stringify(JSON.parse(json)),
      wj !== json ? `explainJson differs at ${firstDifference(json, wj ?? "")}` : `explainMarkdown differs at ${firstDifference(md, wm ?? "")}`);
  }
  console.log(`parity: explain: ${ids.length + 2 - groupFailed}/${ids.length + 2} identical`);
}

if (tmp) rmSync(tmp, { recursive: true, force: true });
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed || !passed ? 1 : 0);
