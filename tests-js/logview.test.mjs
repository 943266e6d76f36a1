// Unit tests of the page's log-excerpt helpers (no browser; the engine's WASM module,
// which cleans lines for display, is loaded the way the worker loads it).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { initSync } from "../wasm/www/pkg/torchdx_wasm.js";

initSync({ module: readFileSync(new URL("../wasm/www/pkg/torchdx_wasm_bg.wasm", import.meta.url)) });
const { displayLine, excerpts, lastLinesStart, splitLines } = await import("../wasm/www/logview.js");

test("splitLines numbers lines as the engine does", () => {
  assert.deepEqual(splitLines(""), []);
  assert.deepEqual(splitLines("a\nb\n"), ["a", "b"]);
  assert.deepEqual(splitLines("a\r\nb"), ["a\r", "b"]);
  assert.deepEqual(splitLines("a\n\n"), ["a", ""]);
});

test("lastLinesStart finds where the last n lines begin", () => {
  const tail = (text, n) => text.slice(lastLinesStart(text, n));
  assert.equal(tail("a\nb\nc\n", 2), "b\nc\n");
  assert.equal(tail("a\nb\nc", 2), "b\nc");
  assert.equal(tail("a\nb\nc\n", 3), "a\nb\nc\n");
  assert.equal(tail("a\nb\nc\n", 9), "a\nb\nc\n");
  assert.equal(tail("\nb\n", 1), "b\n");
  assert.equal(tail("\nb\n", 2), "\nb\n");
  assert.equal(tail("", 1), "");
  // As many lines as splitLines counts.
  const text = "x\n".repeat(50) + "\n\ny";
  assert.equal(splitLines(tail(text, 7)).length, 7);
});

test("displayLine shows what a terminal shows", () => {
  assert.equal(displayLine("line\r"), "line");
  assert.equal(displayLine(" 10%|#  \r 50%|### \r100%|#####|\r"), "100%|#####|");
  assert.equal(displayLine("\u001b[31mRuntimeError\u001b[0m: boom"), "RuntimeError: boom");
  assert.equal(displayLine("[31mRuntimeError[0m: lost ESC"), "RuntimeError: lost ESC");
  assert.equal(displayLine("[rank0]: [model] ok"), "[rank0]: [model] ok");
});

test("excerpts highlight the location with context and fold long ones", () => {
  const lines = Array.from({ length: 200 }, (_, i) => `line ${i + 1}`);
  lines[119] = '  File "/home/user/project/train.py", line 42, in main';
  lines[120] = "    loss = loss_fn(out, labels)";
  const finding = (line, end_line) => ({
    location: { line, end_line },
    evidence: { failing_frame: "train.py:42", failing_code: "loss = loss_fn(out, labels)" },
  });
  const [short, long, none] = excerpts(lines, { findings: [finding(10, 12), finding(20, 190), { location: null, evidence: {} }] });

  assert.deepEqual(short.rows.map((r) => r.n), [7, 8, 9, 10, 11, 12, 13, 14, 15]);
  assert.deepEqual(short.rows.filter((r) => r.hit).map((r) => r.n), [10, 11, 12]);

  const shown = long.rows.filter((r) => r.n).map((r) => r.n);
  assert.ok(shown.length < 60, `folded to ${shown.length} rows`);
  assert.ok(shown.includes(120) && shown.includes(121), "key lines in the fold are kept");
  assert.ok(long.rows.some((r) => r.gap), "a gap marks folded lines");
  assert.ok(long.rows.find((r) => r.n === 121).key);
  assert.equal(none, null);
});
