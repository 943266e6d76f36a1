// The diagnosis engine as the page uses it: small inputs on the main thread (instant),
// large ones in a Web Worker so the page stays responsive, with progress reported.
//
// Everything is loaded with the page, so that a file dropped after the server is gone
// (or a second worker, after Cancel) needs no request: the .wasm is fetched and compiled
// once, and the worker gets the compiled module; the worker's scripts (worker.js and the
// modules it imports, the rule pack included) become blob: URLs at load.

import init, * as dx from "./pkg/torchdx_wasm.js";
import rulePack from "./pkg/torchdx_rules.js";
import { excerpts, splitLines } from "./logview.js";

/** Inputs at least this large (bytes) are diagnosed in the worker. */
export const WORKER_THRESHOLD = 256 * 1024;

export class Engine {
  static async load() {
    const [module, workerUrl] = await Promise.all([
      compileModule(),
      // Without a worker, large inputs run on the page: slower to paint, same report.
      workerScript().catch((e) => {
        console.warn(`torchdx: no background worker (${e.message || e}); large logs are diagnosed on the page`);
        return null;
      }),
    ]);
    await init({ module_or_path: module });
    return new Engine(module, workerUrl);
  }

  constructor(module, workerUrl = null) {
    this.module = module;
    this.workerUrl = workerUrl;
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
    if (size >= WORKER_THRESHOLD && this.workerUrl && typeof Worker !== "undefined") {
      try {
        return await this.#inWorker(input, onProgress);
      } catch (e) {
        if (!e.workerStart) throw e;
        // A browser that cannot start it (no module workers): the page diagnoses instead.
        console.warn(`torchdx: ${e.message}; diagnosing on the page`);
        this.workerUrl = null;
      }
    }
    const t0 = performance.now();
    let text = input.text;
    let report;
    if (input.file) {
      onProgress({ phase: "read", loaded: 0, total: size });
      const bytes = new Uint8Array(await input.file.arrayBuffer());
      onProgress({ phase: "diagnose", total: size, via: "main" });
      report = dx.diagnoseBytes(bytes, this.options);
      text = new TextDecoder("utf-8").decode(bytes);
    } else {
      onProgress({ phase: "diagnose", total: size, via: "main" });
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
    const worker = new Worker(this.workerUrl, { type: "module", name: "torchdx" });
    this.worker = worker;
    // Rejections before "ready" say the worker could not start (not that a log failed).
    const startFailed = (message) => Object.assign(new Error(message), { workerStart: true });
    this.workerReady = new Promise((resolve, reject) => {
      worker.onmessage = (event) => {
        const msg = event.data;
        if (msg.type === "ready") return resolve(worker);
        if (msg.type === "error" && msg.id === null) {
          this.#dropWorker();
          return reject(startFailed(msg.message));
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
        reject(startFailed(message)); // a no-op once started
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

/** The engine's .wasm, fetched and compiled once for the page and its workers. */
async function compileModule() {
  const url = new URL("./pkg/torchdx_wasm_bg.wasm", import.meta.url);
  try {
    return await WebAssembly.compileStreaming(fetch(url));
  } catch {
    // Servers that send .wasm without `application/wasm`.
    const response = await fetch(url);
    return WebAssembly.compile(await response.arrayBuffer());
  }
}

/** Static imports of a module: `import "x"`, `import a, { b } from "x"`, `export * from "x"`. */
const IMPORT =
  /^[ \t]*(?:import[ \t]*(['"])([^'"\n]+)\1|(?:import|export)[ \t]+(?:[\w$]+[ \t]*,?[ \t]*)?(?:\{[^}]*\}|\*[ \t]*as[ \t]+[\w$]+|\*)?[ \t]*from[ \t]*(['"])([^'"\n]+)\3)/gm;

/**
 * worker.js as a blob: URL, with each module it imports (transitively) a blob: URL too,
 * its import specifiers rewritten to them. The sources are fetched now, while the page
 * loads; the rule pack, which the page has already imported, is not fetched again.
 * (A worker fetches its scripts when it starts, and the browser may not have kept them.)
 */
async function workerScript() {
  const known = new Map([[new URL("./pkg/torchdx_rules.js", import.meta.url).href, `export default ${JSON.stringify(rulePack)};\n`]]);
  const urls = new Map(); // module URL -> Promise of its blob: URL (one per module, as imports share instances)
  const load = (url) => {
    if (!urls.has(url)) {
      urls.set(
        url,
        (async () => {
          let source = known.get(url);
          if (source === undefined) {
            const response = await fetch(url);
            if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
            source = await response.text();
          }
          const specs = [...source.matchAll(IMPORT)].map((m) => m[2] || m[4]);
          const blobs = await Promise.all(specs.map((spec) => load(new URL(spec, url).href)));
          const to = new Map(specs.map((spec, i) => [spec, blobs[i]]));
          source = source.replace(IMPORT, (m, q1, s1, q2, s2) => {
            const spec = s1 || s2;
            return m.slice(0, m.length - spec.length - 1) + to.get(spec) + (q1 || q2);
          });
          return URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
        })(),
      );
    }
    return urls.get(url);
  };
  return load(new URL("./worker.js", import.meta.url).href);
}
