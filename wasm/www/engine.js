// The diagnosis engine as the page uses it: small inputs on the main thread (instant),
// large ones in a Web Worker so the page stays responsive, with progress reported.
// The .wasm is fetched and compiled once; the worker gets the compiled module.

import init, * as dx from "./pkg/torchdx_wasm.js";
import { excerpts, splitLines } from "./logview.js";

/** Inputs at least this large (bytes) are diagnosed in the worker. */
export const WORKER_THRESHOLD = 256 * 1024;

export class Engine {
  static async load() {
    const url = new URL("./pkg/torchdx_wasm_bg.wasm", import.meta.url);
    let module;
    try {
      module = await WebAssembly.compileStreaming(fetch(url));
    } catch {
      // Servers that send .wasm without `application/wasm`.
      const response = await fetch(url);
      module = await WebAssembly.compile(await response.arrayBuffer());
    }
    await init({ module_or_path: module });
    return new Engine(module);
  }

  constructor(module) {
    this.module = module;
    this.worker = null;
    this.workerReady = null;
    this.pending = null; // { id, resolve, reject, onProgress }
    this.nextId = 1;
    this.options = undefined; // { rules: [{ name, text }] } or undefined
  }

  version() {
    return dx.version();
  }

  rules() {
    return dx.rules(this.options);
  }

  explain(id) {
    return dx.explain(id, this.options);
  }

  /** A rule's encyclopedia entry as Markdown, rendered by the engine. */
  explainMarkdown(id) {
    return dx.explainMarkdown(id, this.options);
  }

  /** Checks and installs an extra rule pack (throws with `file:line:col: message`). */
  setExtraRules(files) {
    const options = files && files.length ? { rules: files } : undefined;
    const list = dx.rules(options); // compiles the pack; throws on error
    this.options = options;
    return list;
  }

  /**
   * Diagnoses `{ text }` or `{ file }`. Resolves to
   * `{ report, excerpts, lineCount, ms, via, text? }`.
   */
  async diagnose(input, onProgress = () => {}) {
    const size = input.file ? input.file.size : input.text.length;
    if (size >= WORKER_THRESHOLD && typeof Worker !== "undefined") {
      return this.#inWorker(input, onProgress);
    }
    const t0 = performance.now();
    let text = input.text;
    let report;
    if (input.file) {
      onProgress({ phase: "read", loaded: 0, total: size });
      const bytes = new Uint8Array(await input.file.arrayBuffer());
      onProgress({ phase: "diagnose", total: size });
      report = dx.diagnoseBytes(bytes, this.options);
      text = new TextDecoder("utf-8").decode(bytes);
    } else {
      onProgress({ phase: "diagnose", total: size });
      report = dx.diagnose(text, this.options);
    }
    const ms = performance.now() - t0;
    const lines = splitLines(text);
    return { report, excerpts: excerpts(lines, report), lineCount: lines.length, ms, via: "main", text };
  }

  /** Stops a diagnosis running in the worker (the worker is replaced). */
  cancel() {
    if (!this.pending) return;
    const { reject } = this.pending;
    this.pending = null;
    this.#dropWorker();
    reject(Object.assign(new Error("cancelled"), { cancelled: true }));
  }

  #dropWorker() {
    if (this.worker) this.worker.terminate();
    this.worker = null;
    this.workerReady = null;
  }

  #startWorker() {
    if (this.workerReady) return this.workerReady;
    const worker = new Worker(new URL("./worker.js", import.meta.url), { type: "module", name: "torchdx" });
    this.worker = worker;
    this.workerReady = new Promise((resolve, reject) => {
      worker.onmessage = (event) => {
        const msg = event.data;
        if (msg.type === "ready") return resolve(worker);
        if (msg.type === "error" && msg.id === null) {
          this.#dropWorker();
          return reject(new Error(msg.message));
        }
        const p = this.pending;
        if (!p || (msg.id !== null && msg.id !== p.id)) return;
        if (msg.type === "progress") p.onProgress(msg);
        else if (msg.type === "result") {
          this.pending = null;
          p.resolve({ ...msg, via: "worker" });
        } else if (msg.type === "error") {
          this.pending = null;
          // An engine panic leaves the instance unusable: start afresh next time.
          this.#dropWorker();
          p.reject(new Error(msg.message));
        }
      };
      worker.onerror = (event) => {
        event.preventDefault();
        const message = `worker failed: ${event.message || "could not start"}`;
        this.#dropWorker();
        reject(new Error(message));
        if (this.pending) {
          const p = this.pending;
          this.pending = null;
          p.reject(new Error(message));
        }
      };
    });
    worker.postMessage({ type: "init", module: this.module });
    return this.workerReady;
  }

  async #inWorker(input, onProgress) {
    if (this.pending) this.cancel();
    const worker = await this.#startWorker();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending = { id, resolve, reject, onProgress };
      worker.postMessage({ type: "diagnose", id, file: input.file, text: input.text, options: this.options });
    });
  }
}
