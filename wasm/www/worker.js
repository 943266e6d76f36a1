// Diagnoses large inputs off the main thread, reporting progress.
//
// Started from a blob: URL that engine.js makes at page load from this file and the
// modules it imports, rewriting their specifiers: keep imports static and relative.
//
// Messages in:  { type: "init", module }                      (a compiled WebAssembly.Module)
//               (a `file` is streamed through the engine's Diagnoser, never held whole)
//               { type: "diagnose", id, file?, text?, options }
// Messages out: { type: "ready" }
//               { type: "progress", id, phase: "diagnose" | "render", loaded?, total?, lines? }
//               (a file's "diagnose" carries `loaded`: it is read and diagnosed at once)
//               { type: "result", id, report, excerpts, lineCount, ms }
//               { type: "error", id, message }

import { initSync, diagnose, Diagnoser } from "./pkg/torchdx_wasm.js";
import { excerpts, splitLines } from "./logview.js";

let ready = false;

self.onmessage = async (event) => {
  const msg = event.data;
  if (msg.type === "init") {
    try {
      initSync({ module: msg.module });
      ready = true;
      self.postMessage({ type: "ready" });
    } catch (e) {
      self.postMessage({ type: "error", id: null, message: `engine failed to start: ${e}` });
    }
    return;
  }
  if (msg.type !== "diagnose") return;
  const { id, options } = msg;
  try {
    if (!ready) throw new Error("engine not initialised");
    const t0 = performance.now();
    let text;
    let report;
    if (msg.file) {
      // A file is diagnosed as it is read, slice by slice, and never held whole: a 2 GB
      // log costs the engine's bounded window, not its size. The excerpts then come
      // from a second read that keeps only the lines the findings show.
      const d = new Diagnoser(options);
      await readSlices(msg.file, (slice) => d.feed(slice), (loaded, total) =>
        self.postMessage({ type: "progress", id, phase: "diagnose", loaded, total }),
      );
      report = d.finish();
      const ms = performance.now() - t0;
      self.postMessage({ type: "progress", id, phase: "render" });
      const lines = await linesShown(msg.file, report);
      self.postMessage({ type: "result", id, report, excerpts: excerpts(lines, report), lineCount: report.input.lines, ms });
      return;
    } else {
      text = msg.text;
      self.postMessage({ type: "progress", id, phase: "diagnose", total: text.length });
      report = diagnose(text, options);
    }
    const ms = performance.now() - t0;
    self.postMessage({ type: "progress", id, phase: "render" });
    const lines = splitLines(text);
    self.postMessage({ type: "result", id, report, excerpts: excerpts(lines, report), lineCount: lines.length, ms });
  } catch (e) {
    self.postMessage({ type: "error", id, message: e && e.message ? e.message : String(e) });
  }
};

/** Reads `file` in slices, giving each to `onSlice` and calling `onProgress(loaded,
 * total)` at most every 50 ms. */
async function readSlices(file, onSlice, onProgress) {
  const total = file.size;
  const reader = file.stream().getReader();
  let loaded = 0;
  let last = 0;
  onProgress(0, total);
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    onSlice(value);
    loaded += value.length;
    const now = performance.now();
    if (now - last > 50) {
      onProgress(loaded, total);
      last = now;
    }
  }
  onProgress(loaded, total);
}

/** Lines around each finding (what `excerpts` reads): [first, last] line numbers, with
 * the same context `excerpts` shows. */
function shownRanges(report, context = 3) {
  return report.findings
    .map((f) => f.location)
    .filter((loc) => loc && loc.line)
    .map((loc) => [Math.max(1, loc.line - context), Math.max(loc.end_line || loc.line, loc.line) + context]);
}

/** The file's lines as a sparse array of `report.input.lines` entries, holding only the
 * lines some finding shows: read again, decoded as it streams, stopping after the last
 * line needed. */
async function linesShown(file, report) {
  const ranges = shownRanges(report);
  const lines = [];
  lines.length = report.input.lines;
  if (!ranges.length) return lines;
  // Sorted and merged, walked with the line count: constant work per line.
  ranges.sort((x, y) => x[0] - y[0]);
  const merged = [];
  for (const r of ranges) {
    const top = merged[merged.length - 1];
    if (top && r[0] <= top[1] + 1) top[1] = Math.max(top[1], r[1]);
    else merged.push([...r]);
  }
  const lastWanted = merged[merged.length - 1][1];
  let k = 0;
  const wanted = (n) => {
    while (k < merged.length && merged[k][1] < n) k += 1;
    return k < merged.length && n >= merged[k][0];
  };
  const decoder = new TextDecoder("utf-8");
  const reader = file.stream().getReader();
  let partial = "";
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    const text = partial + (done ? decoder.decode() : decoder.decode(value, { stream: true }));
    let from = 0;
    for (let nl = text.indexOf("\n", from); nl !== -1; nl = text.indexOf("\n", from)) {
      n += 1;
      if (wanted(n)) lines[n - 1] = text.slice(from, nl);
      from = nl + 1;
      if (n >= lastWanted) {
        reader.cancel();
        return lines;
      }
    }
    partial = text.slice(from);
    if (done) break;
  }
  if (partial !== "" && wanted(n + 1)) lines[n] = partial;
  return lines;
}
