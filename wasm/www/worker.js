// Diagnoses large inputs off the main thread, reporting progress.
//
// Started from a blob: URL that engine.js makes at page load from this file and the
// modules it imports, rewriting their specifiers: keep imports static and relative.
//
// Messages in:  { type: "init", module }                      (a compiled WebAssembly.Module)
//               { type: "diagnose", id, file?, text?, options }
// Messages out: { type: "ready" }
//               { type: "progress", id, phase: "read" | "diagnose" | "render", loaded?, total?, lines? }
//               { type: "result", id, report, excerpts, lineCount, ms }
//               { type: "error", id, message }

import { initSync, diagnose, diagnoseBytes } from "./pkg/torchdx_wasm.js";
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
      const bytes = await readWithProgress(msg.file, (loaded, total) =>
        self.postMessage({ type: "progress", id, phase: "read", loaded, total }),
      );
      self.postMessage({ type: "progress", id, phase: "diagnose", total: bytes.length });
      report = diagnoseBytes(bytes, options);
      text = new TextDecoder("utf-8").decode(bytes);
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

/** The whole file as bytes, calling `onProgress(loaded, total)` at most every 50 ms. */
async function readWithProgress(file, onProgress) {
  const total = file.size;
  const bytes = new Uint8Array(total);
  const reader = file.stream().getReader();
  let loaded = 0;
  let last = 0;
  onProgress(0, total);
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    bytes.set(value, loaded);
    loaded += value.length;
    const now = performance.now();
    if (now - last > 50) {
      onProgress(loaded, total);
      last = now;
    }
  }
  onProgress(loaded, total);
  return loaded === total ? bytes : bytes.subarray(0, loaded);
}
