// The page: input (paste, drop, open), running the engine, rendering the report.
// Everything is built with DOM calls; log text never goes through innerHTML.

import { Engine, WORKER_THRESHOLD } from "./engine.js";
import { drawLanes, geometry, laneLayout } from "./lanes.js";
import { lastLinesStart, splitLines } from "./logview.js";
import { SAMPLES } from "./samples.js";

const $ = (sel) => document.querySelector(sel);
const els = {
  log: $("#log"),
  run: $("#run"),
  stats: $("#input-stats"),
  dropzone: $("#dropzone"),
  fileNote: $("#file-note"),
  fileInput: $("#file-input"),
  progress: $("#progress"),
  progressFill: $("#progress .fill"),
  progressLabel: $("#progress .label"),
  cancel: $("#cancel"),
  result: $("#result"),
  version: $("#version"),
  rulesInput: $("#rules-input"),
  rulesState: $("#rules-state"),
  rulesError: $("#rules-error"),
  rulesClear: $("#rules-clear"),
  rulesDialog: $("#rules-dialog"),
  rulesFilter: $("#rules-filter"),
  rulesList: $("#rules-list"),
  ruleDetail: $("#rule-detail"),
};

/** Files at most this large (and long) are shown whole in the text box; of a larger
 *  one, its end. A text box of 200,000 lines takes seconds to lay out. */
const SHOW_FILE_LIMIT = 1024 * 1024;
const SHOW_LINE_LIMIT = 20_000;

let engine = null;
/** The input to diagnose: `{ text }` or `{ file }`; a file shown in part has `shown`
 *  (`{ lines, bytes }`: the end of the file in the text box). */
let current = { text: "" };
let runSeq = 0;
/** Per rule id, whether it reports the job's teardown (see `isTeardown`). */
const ruleFlags = new Map();

// ------------------------------------------------------------------ DOM helpers

/** `h("div", { class: "x", onclick }, child, ...)`: children are nodes or text. */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function formatBytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

const plural = (n, word, many = `${word}s`) => `${n.toLocaleString("en")} ${n === 1 ? word : many}`;

/** `0–3`, `0, 1, 5`, `11–40, 42–63`: runs of three or more ranks as a range. */
function rankList(ranks) {
  if (!ranks || !ranks.length) return "";
  const sorted = [...new Set(ranks)].sort((a, b) => a - b);
  const runs = [];
  for (const r of sorted) {
    const run = runs[runs.length - 1];
    if (run && r === run[1] + 1) run[1] = r;
    else runs.push([r, r]);
  }
  return runs.flatMap(([a, b]) => (b - a >= 2 ? [`${a}–${b}`] : a === b ? [String(a)] : [String(a), String(b)])).join(", ");
}

// ------------------------------------------------------------------ clipboard

async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const ta = h("textarea", { class: "offscreen", readonly: true });
    ta.value = text;
    document.body.append(ta);
    ta.select();
    let ok = false;
    try {
      ok = document.execCommand("copy");
    } catch {
      ok = false;
    }
    ta.remove();
    return ok;
  }
}

function copyButton(getText, label = "Copy") {
  const btn = h("button", { type: "button", class: "copy", title: "Copy to the clipboard" }, label);
  btn.addEventListener("click", async () => {
    const ok = await copyText(getText());
    btn.textContent = ok ? "Copied ✓" : "Copy failed";
    btn.classList.toggle("done", ok);
    setTimeout(() => {
      btn.textContent = label;
      btn.classList.remove("done");
    }, 1600);
  });
  return btn;
}

// ------------------------------------------------------------------ Markdown (small, safe)

/** Renders the rules' Markdown subset: paragraphs, lists, fenced code, inline code,
 *  bold, emphasis and links. Builds DOM nodes; never parses HTML. */
function markdown(text) {
  const frag = document.createDocumentFragment();
  if (!text) return frag;
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  let para = [];
  const flush = () => {
    if (para.length) frag.append(h("p", {}, inline(para.join(" "))));
    para = [];
  };
  while (i < lines.length) {
    const line = lines[i];
    const fence = /^\s*(```+|~~~+)\s*([\w+-]*)\s*$/.exec(line);
    if (fence) {
      flush();
      const close = fence[1];
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(close)) body.push(lines[i++]);
      i++;
      const code = body.join("\n");
      frag.append(
        h("div", { class: "codeblock" }, h("pre", {}, h("code", { "data-lang": fence[2] || null }, code)), copyButton(() => code)),
      );
      continue;
    }
    const item = /^\s*(?:([-*+])|(\d+)[.)])\s+(.*)$/.exec(line);
    if (item) {
      flush();
      const ordered = !!item[2];
      const list = h(ordered ? "ol" : "ul");
      while (i < lines.length) {
        const m = /^\s*(?:([-*+])|(\d+)[.)])\s+(.*)$/.exec(lines[i]);
        if (m && !!m[2] === ordered) {
          list.append(h("li", {}, inline(m[3])));
          i++;
        } else if (lines[i].trim() !== "" && /^\s{2,}/.test(lines[i]) && list.lastChild) {
          append(list.lastChild, [" ", inline(lines[i].trim())]);
          i++;
        } else break;
      }
      frag.append(list);
      continue;
    }
    const heading = /^\s*#{1,6}\s+(.*)$/.exec(line);
    if (heading) {
      flush();
      frag.append(h("p", { class: "md-heading" }, inline(heading[1])));
    } else if (line.trim() === "") flush();
    else para.push(line.trim());
    i++;
  }
  flush();
  return frag;
}

const INLINE = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([^*]+)\*\*|\[([^\]]+)\]\((https?:\/\/[^)\s]+)\)|(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])|(?<!\w)_([^_\s][^_]*?)_(?!\w)/g;

function inline(text) {
  const out = [];
  let last = 0;
  for (const m of text.matchAll(INLINE)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    if (m[1]) out.push(h("code", {}, m[2].trim()));
    else if (m[3]) out.push(h("strong", {}, inline(m[3])));
    else if (m[4]) out.push(h("a", { href: m[5], target: "_blank", rel: "noopener noreferrer" }, m[4]));
    else if (m[6]) out.push(h("em", {}, m[6]));
    else if (m[7]) out.push(h("em", {}, m[7]));
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

// ------------------------------------------------------------------ input

function setInputText(text) {
  els.log.value = text;
  els.log.readOnly = false;
  current = { text };
  setFileNote(null);
  updateStats();
}

/** The note above the text box saying which part of a large file it shows. */
function setFileNote(text) {
  els.fileNote.hidden = !text;
  els.fileNote.textContent = text || "";
}

/** `total`: the file's line count, once the engine has read it. */
function partNote(file, shown, total) {
  const part = total
    ? `lines ${(total - shown.lines + 1).toLocaleString("en")}–${total.toLocaleString("en")} of ${total.toLocaleString("en")}, its last ${formatBytes(shown.bytes)}`
    : `its last ${formatBytes(shown.bytes)}`;
  return `${file.name} is ${formatBytes(file.size)}: the box shows ${part} (read-only). The whole file is diagnosed.`;
}

function updateStats() {
  if (current.file) {
    els.stats.textContent = `${current.file.name} · ${formatBytes(current.file.size)}`;
  } else {
    const text = els.log.value;
    const lines = text ? text.split("\n").length - (text.endsWith("\n") ? 1 : 0) : 0;
    els.stats.textContent = text ? `${plural(lines, "line")} · ${formatBytes(new Blob([text]).size)}` : "";
  }
  els.run.disabled = !engine || (!current.file && !els.log.value.trim());
}

function insertAtCursor(textarea, text) {
  const { selectionStart: s, selectionEnd: e, value } = textarea;
  textarea.value = value.slice(0, s) + text + value.slice(e);
  const pos = s + text.length;
  textarea.setSelectionRange(pos, pos);
}

els.log.addEventListener("paste", (event) => {
  const text = event.clipboardData && event.clipboardData.getData("text/plain");
  if (!text) return;
  event.preventDefault();
  // Into the end of a large file (read-only): the paste replaces it.
  if (els.log.readOnly) els.log.value = "";
  insertAtCursor(els.log, text);
  setInputText(els.log.value);
  run();
});

let typingTimer = 0;
els.log.addEventListener("input", () => {
  current = { text: els.log.value };
  setFileNote(null);
  updateStats();
  clearTimeout(typingTimer);
  typingTimer = setTimeout(() => {
    if (els.log.value.trim()) run({ reveal: false });
  }, 600);
});

async function openFile(file) {
  const input = { file };
  current = input;
  let whole = file.size <= SHOW_FILE_LIMIT;
  // Of a large file, the end (where a failure is), from the start of a line.
  let text = await (whole ? file : file.slice(file.size - SHOW_FILE_LIMIT)).text();
  if (!whole) text = text.slice(text.indexOf("\n") + 1);
  const cut = lastLinesStart(text, SHOW_LINE_LIMIT);
  if (cut > 0) {
    text = text.slice(cut);
    whole = false;
  }
  if (current !== input) return; // another input came meanwhile
  els.log.value = text;
  els.log.readOnly = !whole;
  els.log.scrollTop = whole ? 0 : els.log.scrollHeight; // a part: its end, the failure
  if (!whole) input.shown = { lines: splitLines(text).length, bytes: new Blob([text]).size };
  setFileNote(whole ? null : partNote(file, input.shown));
  updateStats();
  run();
}

els.fileInput.addEventListener("change", () => {
  const file = els.fileInput.files && els.fileInput.files[0];
  if (file) openFile(file);
  els.fileInput.value = "";
});

// Drop a file (or dragged text) anywhere on the page.
let dragDepth = 0;
const hasPayload = (event) => {
  const types = event.dataTransfer ? [...event.dataTransfer.types] : [];
  return types.includes("Files") || types.includes("text/plain");
};
window.addEventListener("dragenter", (event) => {
  if (!hasPayload(event)) return;
  event.preventDefault();
  dragDepth++;
  document.body.classList.add("dragging");
});
window.addEventListener("dragover", (event) => {
  if (!hasPayload(event)) return;
  event.preventDefault();
  event.dataTransfer.dropEffect = "copy";
});
window.addEventListener("dragleave", () => {
  dragDepth = Math.max(0, dragDepth - 1);
  if (!dragDepth) document.body.classList.remove("dragging");
});
window.addEventListener("drop", (event) => {
  event.preventDefault();
  dragDepth = 0;
  document.body.classList.remove("dragging");
  const dt = event.dataTransfer;
  if (!dt) return;
  const file = dt.files && dt.files[0];
  if (file) openFile(file);
  else {
    const text = dt.getData("text/plain");
    if (text) {
      setInputText(text);
      run();
    }
  }
});

$("#sample-device").addEventListener("click", () => {
  setInputText(SAMPLES["device-mismatch.log"]);
  run();
});
$("#sample-ranks").addEventListener("click", () => {
  setInputText(SAMPLES["two-ranks.log"]);
  run();
});
$("#clear").addEventListener("click", () => {
  setInputText("");
  showEmpty();
  els.log.focus();
});
els.run.addEventListener("click", () => run());
document.addEventListener("keydown", (event) => {
  if ((event.ctrlKey || event.metaKey) && event.key === "Enter") run();
});
els.cancel.addEventListener("click", () => engine && engine.cancel());

// ------------------------------------------------------------------ progress

function showProgress(p, size) {
  els.progress.hidden = false;
  els.progress.dataset.phase = p.phase;
  const fill = els.progressFill;
  if (p.phase === "read" && p.total) {
    const pct = Math.min(100, (100 * (p.loaded || 0)) / p.total);
    fill.classList.remove("indeterminate");
    fill.style.width = `${pct.toFixed(1)}%`;
    els.progressLabel.textContent = `Reading ${formatBytes(p.loaded || 0)} of ${formatBytes(p.total)}…`;
  } else if (p.phase === "diagnose" && p.loaded !== undefined && p.total) {
    // A file streamed through the worker: read and diagnosed together, slice by slice.
    const pct = Math.min(100, (100 * p.loaded) / p.total);
    fill.classList.remove("indeterminate");
    fill.style.width = `${pct.toFixed(1)}%`;
    els.progressLabel.textContent = `Diagnosing ${formatBytes(p.loaded)} of ${formatBytes(p.total)} in a background worker…`;
  } else if (p.phase === "diagnose") {
    fill.classList.add("indeterminate");
    fill.style.width = "";
    els.progressLabel.textContent = `Diagnosing ${formatBytes(p.total || size)} ${p.via === "main" ? "on the page" : "in a background worker"}…`;
  } else if (p.phase === "render") {
    fill.classList.remove("indeterminate");
    fill.style.width = "100%";
    els.progressLabel.textContent = "Preparing the report…";
  }
}

function hideProgress() {
  els.progress.hidden = true;
  els.progressFill.classList.remove("indeterminate");
  els.progressFill.style.width = "0";
}

// ------------------------------------------------------------------ running

/** Diagnoses the current input; `reveal`: then scroll the result into view (not while
 *  the user types). */
async function run({ reveal = true } = {}) {
  if (!engine) return;
  const from = current;
  const input = current.file ? { file: current.file } : { text: els.log.value };
  if (!input.file && !input.text.trim()) {
    showEmpty();
    return;
  }
  const seq = ++runSeq;
  const size = input.file ? input.file.size : input.text.length;
  const big = size >= WORKER_THRESHOLD;
  els.result.dataset.state = "running";
  els.run.disabled = true;
  if (big) showProgress({ phase: input.file ? "read" : "diagnose", loaded: 0, total: size }, size);
  try {
    const result = await engine.diagnose(input, (p) => {
      if (seq === runSeq && big) showProgress(p, size);
    });
    if (seq !== runSeq) return;
    renderResult(result, input.file ? input.file.name : null);
    if (from.shown && current === from) setFileNote(partNote(from.file, from.shown, result.lineCount));
    if (reveal) revealResult();
  } catch (e) {
    if (seq !== runSeq) return;
    if (e.cancelled) showEmpty("Diagnosis cancelled.");
    else {
      showError(e);
      if (reveal) revealResult();
    }
  } finally {
    if (seq === runSeq) {
      hideProgress();
      updateStats();
    }
  }
}

/** Scrolls to the result when it is not in sight (below the input, on a narrow screen). */
function revealResult() {
  const top = els.result.getBoundingClientRect().top;
  if (top >= 0 && top < window.innerHeight / 2) return;
  const smooth = !matchMedia("(prefers-reduced-motion: reduce)").matches;
  els.result.scrollIntoView({ block: "start", behavior: smooth ? "smooth" : "auto" });
}

// ------------------------------------------------------------------ links within the report

// Links to a finding (`#finding-3`) or to its log lines (`#finding-3-log`): the marks
// and the list of the timeline, the cards' line links. A fragment alone would land on a
// folded finding's summary, its lines hidden; this opens it first.
els.result.addEventListener("click", (event) => {
  const a = event.target.closest("a[href^='#finding-']");
  if (!a || event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey || event.altKey) return;
  const target = document.getElementById(a.getAttribute("href").slice(1));
  if (!target) return;
  event.preventDefault();
  showTarget(target);
});

/** The finding or log excerpt last followed to (it keeps a quiet outline). */
let spotlit = null;

/** Unfolds the findings around `target`, scrolls it (its highlighted log lines, when it
 *  has them) into view, and marks it as the place just followed to. */
function showTarget(target) {
  for (let d = target.closest("details"); d; d = d.parentElement && d.parentElement.closest("details")) d.open = true;
  // Log lines: the first highlighted one, centred; a finding: its top.
  const line = target.classList.contains("log") && target.querySelector(".ln.hit");
  const smooth = !matchMedia("(prefers-reduced-motion: reduce)").matches;
  (line || target).scrollIntoView({ block: line ? "center" : "start", behavior: smooth ? "smooth" : "auto" });
  if (spotlit) spotlit.classList.remove("spotlight");
  void target.offsetWidth; // restarts the flash when the same place is followed again
  target.classList.add("spotlight");
  spotlit = target;
  // Keyboard users land where they went (the excerpt scrolls with the arrow keys).
  const box = target.querySelector(".excerpt");
  if (box) box.focus({ preventScroll: true });
}

function showEmpty(note) {
  runSeq++;
  hideProgress();
  els.result.dataset.state = "empty";
  els.result.replaceChildren(
    h(
      "div",
      { class: "empty-state" },
      h("h2", {}, "Paste a log to see what went wrong"),
      h(
        "ol",
        {},
        h("li", {}, h("strong", {}, "The failure that started it"), ": on multi-GPU runs, the rank that failed first, not the timeouts that followed."),
        h("li", {}, h("strong", {}, "The culprit"), ": the expression in your code at fault, with the log lines that show it."),
        h("li", {}, h("strong", {}, "How to confirm, fix and verify"), ": a checklist, a fix you can copy, and a check that proves it worked."),
      ),
      note ? h("p", { class: "muted" }, note) : null,
    ),
  );
}

function showError(e) {
  els.result.dataset.state = "error";
  els.result.replaceChildren(
    h("div", { class: "card error-card" }, h("h2", {}, "The diagnosis failed"), h("pre", { class: "error-box" }, String(e && e.message ? e.message : e))),
  );
}

// ------------------------------------------------------------------ report rendering

const ROLE_LABEL = { initiating: "Initiating failure", collateral: "Collateral", independent: "Independent failure" };
const EVIDENCE_ORDER = ["exception", "message", "devices", "argument", "op", "kernel", "failing_frame", "failing_code"];

function renderResult({ report, excerpts, ms, via }, fileName) {
  els.result.dataset.state = "done";
  els.result.dataset.via = via;
  const findings = report.findings || [];
  const primaryIndex = report.initiating ?? (findings.length ? 0 : null);
  const children = [];

  const ranks = report.input.ranks || [];
  children.push(
    h(
      "div",
      { class: "summary-strip" },
      h("span", { class: "stat" }, plural(findings.length, "finding")),
      ranks.length ? h("span", { class: "stat" }, `${ranks.length > 1 ? "ranks" : "rank"} ${rankList(ranks)}`) : null,
      h("span", { class: "stat" }, plural(report.input.lines, "line")),
      h("span", { class: "stat" }, formatBytes(report.input.bytes)),
      fileName ? h("span", { class: "stat file" }, fileName) : null,
      h("span", { class: "stat muted", title: via === "worker" ? "Diagnosed in a Web Worker" : "Diagnosed on the page" }, `${ms < 10 ? ms.toFixed(1) : Math.round(ms)} ms${via === "worker" ? " · worker" : ""}`),
    ),
  );

  if (primaryIndex === null) {
    children.push(
      h(
        "div",
        { class: "card clean-card", id: "no-failure" },
        h("h2", { id: "headline" }, "No failure found in this log"),
        h("p", {}, "torchdx found no exception or error message it knows in this text."),
        h(
          "ul",
          {},
          h("li", {}, "Paste the whole output: the traceback and the lines above it."),
          h("li", {}, "For multi-GPU runs, include the output of every rank (torchrun's `--redirects` / `--log-dir`)."),
          h("li", {}, "A run killed from outside (OOM killer, scheduler) may leave no traceback: check `dmesg` and the job scheduler's log."),
        ),
      ),
    );
  } else {
    if (report.timeline && report.timeline.length > 1) children.push(timeline(report, primaryIndex, excerpts));
    children.push(findingCard(report, primaryIndex, excerpts[primaryIndex], { primary: true }));
    const collateral = findings.map((f, i) => [f, i]).filter(([f, i]) => i !== primaryIndex && f.role === "collateral");
    const independent = findings.map((f, i) => [f, i]).filter(([f, i]) => i !== primaryIndex && f.role !== "collateral");
    if (collateral.length) {
      children.push(
        h(
          "section",
          { class: "group collateral-group", id: "collateral" },
          h("h3", { class: "group-title" }, `Collateral · ${plural(collateral.length, "downstream report")}`, h("span", { class: "muted" }, " caused by the failure above, not separate bugs")),
          collateral.map(([, i]) => findingCard(report, i, excerpts[i], { primary: false })),
        ),
      );
    }
    if (independent.length) {
      children.push(
        h(
          "section",
          { class: "group independent-group", id: "independent" },
          h("h3", { class: "group-title" }, `Also in this log · ${plural(independent.length, "independent failure")}`),
          independent.map(([, i]) => findingCard(report, i, excerpts[i], { primary: false })),
        ),
      );
    }
  }

  const json = JSON.stringify(report, null, 2);
  children.push(
    h(
      "details",
      { class: "raw-json" },
      h("summary", {}, "Report JSON (torchdx/report@1)"),
      h(
        "div",
        { class: "raw-actions" },
        copyButton(() => json, "Copy JSON"),
        h("button", { type: "button", class: "copy", onclick: () => download("torchdx-report.json", json) }, "Download"),
      ),
      h("pre", {}, json),
    ),
  );
  els.result.replaceChildren(...children);
  els.result.scrollTop = 0;
}

function download(name, text) {
  const url = URL.createObjectURL(new Blob([text], { type: "application/json" }));
  const a = h("a", { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

function timeline(report, primaryIndex, excerpts) {
  return h(
    "section",
    { class: "timeline", "aria-label": "Timeline" },
    h("h3", {}, "What happened, in order"),
    timelinePicture(report, primaryIndex, excerpts),
    h(
      "ol",
      {},
      report.timeline.map((t) => {
        const f = report.findings[t.finding];
        return h(
          "li",
          { class: `role-${f ? f.role : "independent"}${t.finding === primaryIndex ? " first" : ""}` },
          t.time ? h("span", { class: "time" }, t.time) : null,
          t.ranks && t.ranks.length && !/\brank/.test(t.text) ? h("span", { class: "rank-chip" }, `${t.ranks.length > 1 ? "ranks" : "rank"} ${rankList(t.ranks)}`) : null,
          h("a", { href: `#finding-${t.finding}`, class: "tl-text" }, t.text),
        );
      }),
    ),
  );
}

/** The timeline drawn per rank (the list under it says the same in words): a lane per
 *  rank, each mark a link to its finding's log lines. */
function timelinePicture(report, primaryIndex, excerpts) {
  const layout = laneLayout(report, primaryIndex, { isTeardown });
  if (!layout.columns.some((c) => c.marks.length)) return null;
  const svg = drawLanes(layout, { linkOf: (i) => (excerpts[i] ? `#finding-${i}-log` : `#finding-${i}`), caption: `Timeline by rank: ${plural(layout.lanes.length, "lane")}, one mark per report, in log order` });
  // At most its natural size; below four fifths of it the text would be too small, and
  // the figure scrolls sideways instead (style.css).
  svg.style.setProperty("--tl-w", String(geometry(layout).width));
  return h(
    "figure",
    { class: "tl-picture" },
    h("div", { class: "tl-figure", role: "region", "aria-label": "Timeline by rank", tabindex: "0" }, svg),
    h(
      "figcaption",
      {},
      h(
        "ul",
        { class: "tl-legend", "aria-label": "Legend" },
        h("li", { class: "tl-key initiating" }, "initiating"),
        h("li", { class: "tl-key collateral" }, "collateral, arrow from its cause"),
        h("li", { class: "tl-key teardown" }, "teardown"),
        h("li", { class: "tl-key independent" }, "independent"),
      ),
      laneNote(layout),
    ),
  );
}

/** What the picture leaves out: ranks beyond the lanes drawn, ranks that reported nothing. */
function laneNote(layout) {
  const parts = [];
  if (layout.hidden.length) {
    parts.push(`${plural(layout.hidden.length, "more rank")} with reports not drawn (${layout.hidden.length > 1 ? "ranks" : "rank"} ${rankList(layout.hidden)}): the list below names them.`);
  }
  if (layout.silent.length) {
    parts.push(`No lane for ${layout.silent.length > 1 ? "ranks" : "rank"} ${rankList(layout.silent)}: seen in the log, no failure reported.`);
  }
  return parts.length ? h("p", { class: "tl-note muted small", "data-hidden": layout.hidden.length }, parts.join(" ")) : null;
}

/** Whether a finding's rule reports the job's teardown (asked of the rule pack once
 *  per rule; the report itself does not say). */
function isTeardown(finding) {
  if (!ruleFlags.has(finding.id)) {
    let rule = null;
    try {
      rule = engine && engine.explain(finding.id);
    } catch {
      rule = null;
    }
    ruleFlags.set(finding.id, !!(rule && rule.teardown));
  }
  return ruleFlags.get(finding.id);
}

function confidenceChip(c) {
  return h("span", { class: `chip confidence c-${c}`, title: "How sure the rule is, given what the log shows" }, c);
}

function findingCard(report, index, excerpt, { primary }) {
  const f = report.findings[index];
  const rankKnown = f.rank !== null && f.rank !== undefined;
  const otherRanks = (f.ranks || []).filter((r) => r !== f.rank);
  const loc = f.location || {};
  const head = [
    h(
      "div",
      { class: "eyebrow" },
      h("span", { class: "role" }, primary ? ROLE_LABEL.initiating : ROLE_LABEL[f.role] || f.role),
      rankKnown
        ? h("span", { class: "rank-badge", title: "Global rank this failure came from" }, "rank ", h("b", primary ? { id: "initiating-rank", "data-rank": f.rank } : {}, String(f.rank)))
        : (report.input.ranks || []).length
          ? h("span", { class: "rank-badge unknown", id: primary ? "initiating-rank" : null, "data-rank": "" }, "rank unknown")
          : null,
      otherRanks.length ? h("span", { class: "muted" }, `also on ${otherRanks.length > 1 ? "ranks" : "rank"} ${rankList(otherRanks)}`) : null,
      confidenceChip(f.confidence),
    ),
    h(primary ? "h2" : "h4", { class: "headline", id: primary ? "headline" : null }, f.title),
    h(
      "div",
      { class: "meta" },
      h("code", { class: "rule-id", title: "Rule id" }, f.id),
      f.family && f.family !== f.id ? h("span", { class: "family" }, f.family) : null,
      loc.line ? h("a", { href: `#finding-${index}-log`, class: "lines" }, loc.end_line && loc.end_line !== loc.line ? `lines ${loc.line}–${loc.end_line}` : `line ${loc.line}`) : null,
      f.role === "collateral" && f.collateral_of !== null && f.collateral_of !== undefined
        ? h("a", { href: `#finding-${f.collateral_of}`, class: "echo" }, `echo of: ${report.findings[f.collateral_of] ? report.findings[f.collateral_of].title : `finding ${f.collateral_of}`}`)
        : null,
    ),
  ];

  const body = [
    culpritBox(f, primary),
    excerpt ? logExcerpt(excerpt, f, index) : null,
    h(
      "div",
      { class: "columns" },
      h("section", { class: "mechanism" }, h("h3", {}, "Why it happens"), markdown(f.mechanism)),
      evidenceBox(f.evidence),
    ),
    f.checklist && f.checklist.length
      ? h(
          "section",
          { class: "checklist" },
          h("h3", {}, "Confirm"),
          h(
            "ul",
            {},
            f.checklist.map((item, k) =>
              h("li", {}, h("label", {}, h("input", { type: "checkbox", "aria-label": `checked step ${k + 1}` }), h("span", {}, inline(item)))),
            ),
          ),
        )
      : null,
    h(
      "section",
      { class: "fix" },
      h("div", { class: "section-head" }, h("h3", {}, "Fix"), copyButton(() => f.fix, "Copy fix")),
      h("div", { class: "md" }, markdown(f.fix)),
    ),
    f.verify
      ? h(
          "section",
          { class: "verify" },
          h("div", { class: "section-head" }, h("h3", {}, "Verify"), copyButton(() => f.verify, "Copy")),
          h("div", { class: "md" }, markdown(f.verify)),
        )
      : null,
    f.next_action ? h("section", { class: "next" }, h("h3", {}, "Next step"), h("div", { class: "md" }, markdown(f.next_action))) : null,
    moreBox(f),
  ];

  if (primary) {
    return h("article", { class: `card finding primary role-initiating`, id: `finding-${index}`, "data-index": index }, head, body);
  }
  return h(
    "details",
    { class: `card finding compact role-${f.role}`, id: `finding-${index}`, "data-index": index },
    h("summary", {}, head),
    h("div", { class: "finding-body" }, body),
  );
}

function culpritBox(f, primary) {
  const c = f.culprit;
  if (!c) {
    return h(
      "section",
      { class: "culprit none", "data-testid": primary ? "culprit" : null, id: primary ? "culprit" : null },
      h("h3", {}, "Culprit"),
      h("p", {}, "The log does not show which expression is at fault."),
      f.missing && f.missing.length ? h("p", { class: "muted" }, "What would settle it: ", inline(f.missing.join("; "))) : null,
    );
  }
  return h(
    "section",
    { class: "culprit", "data-testid": primary ? "culprit" : null, id: primary ? "culprit" : null },
    h("h3", {}, "Culprit"),
    h("p", { class: "culprit-summary" }, inline(c.summary)),
    h(
      "div",
      { class: "culprit-meta" },
      // Label and value wrap together.
      c.expr ? h("span", { class: "pair" }, h("span", { class: "muted" }, "expression"), h("code", { class: "expr", title: "Expression at fault" }, c.expr)) : null,
      h("span", { class: "pair" }, h("span", { class: "muted" }, "kind"), h("span", { class: "chip kind", title: "Culprit kind" }, c.kind)),
    ),
  );
}

function logExcerpt(excerpt, f, index) {
  const expr = f.culprit && f.culprit.expr;
  const rows = excerpt.rows.map((r) => {
    if (r.gap) return h("div", { class: "ln gap" }, h("span", { class: "no" }, "⋮"), h("span", { class: "tx" }, `${plural(r.gap, "line")} not shown`));
    return h(
      "div",
      { class: `ln${r.hit ? " hit" : ""}${r.key ? " key" : ""}`, "data-line": r.n },
      h("span", { class: "no" }, String(r.n)),
      h("span", { class: "tx" }, r.key && expr ? markExpr(r.text, expr) : r.text || " "),
    );
  });
  const loc = f.location;
  const box = h("div", { class: "excerpt", role: "region", "aria-label": "Log lines of this finding", tabindex: "0" }, rows);
  // The number column fits the longest number shown (set through CSSOM: the CSP refuses
  // style attributes).
  box.style.setProperty("--digits", String(Math.max(...excerpt.rows.map((r) => (r.gap ? 1 : String(r.n).length)))));
  return h(
    "section",
    { class: "log", id: `finding-${index}-log` },
    h("h3", {}, "In the log", h("span", { class: "muted" }, loc.end_line !== loc.line ? ` · lines ${loc.line}–${loc.end_line}` : ` · line ${loc.line}`)),
    box,
  );
}

/** The text with whole-word occurrences of `expr` wrapped in <mark>. */
function markExpr(text, expr) {
  const out = [];
  let from = 0;
  for (;;) {
    const at = text.indexOf(expr, from);
    if (at < 0) break;
    const before = at > 0 ? text[at - 1] : " ";
    const after = text[at + expr.length] || " ";
    if (/[\w.]/.test(before) || /\w/.test(after)) {
      out.push(text.slice(from, at + expr.length));
    } else {
      out.push(text.slice(from, at), h("mark", {}, expr));
    }
    from = at + expr.length;
  }
  out.push(text.slice(from));
  return out;
}

function evidenceBox(evidence) {
  const keys = Object.keys(evidence || {});
  if (!keys.length) return null;
  keys.sort((a, b) => {
    const ia = EVIDENCE_ORDER.indexOf(a);
    const ib = EVIDENCE_ORDER.indexOf(b);
    return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib) || a.localeCompare(b);
  });
  return h(
    "section",
    { class: "evidence" },
    h("h3", {}, "Evidence from the log"),
    h(
      "dl",
      {},
      keys.map((k) => [h("dt", {}, k.replace(/_/g, " ")), h("dd", {}, evidenceValue(evidence[k]))]),
    ),
  );
}

function evidenceValue(v) {
  if (Array.isArray(v)) {
    if (!v.length) return h("span", { class: "muted" }, "none");
    if (v.every((x) => typeof x !== "object" || x === null)) return v.map((x) => h("code", { class: "val" }, String(x)));
  }
  if (typeof v === "string") return h("code", { class: "val" }, v);
  if (typeof v === "number" || typeof v === "boolean") return h("code", { class: "val" }, String(v));
  if (v === null) return h("span", { class: "muted" }, "null");
  return h("code", { class: "val" }, JSON.stringify(v));
}

function moreBox(f) {
  const parts = [];
  if (f.prevent) parts.push(h("section", {}, h("h3", {}, "Prevent it"), h("div", { class: "md" }, markdown(f.prevent))));
  if (f.missing && f.missing.length)
    parts.push(h("section", {}, h("h3", {}, "Not in the log (would settle it)"), h("ul", {}, f.missing.map((m) => h("li", {}, inline(m))))));
  if (f.related && f.related.length)
    parts.push(
      h(
        "section",
        {},
        h("h3", {}, "Related rules"),
        h(
          "div",
          { class: "related" },
          f.related.map((id) => h("button", { type: "button", class: "chip link-chip", onclick: () => openRules(id) }, id)),
        ),
      ),
    );
  if (!parts.length) return null;
  return h("details", { class: "more" }, h("summary", {}, "Prevention, open questions and related rules"), parts);
}

// ------------------------------------------------------------------ rule catalog

function openRules(id) {
  if (!engine) return;
  renderRuleList();
  if (id) showRule(id);
  else els.ruleDetail.hidden = true;
  if (!els.rulesDialog.open) els.rulesDialog.showModal();
}

function ruleText(r, key) {
  return r && typeof r[key] === "string" ? r[key] : "";
}

function renderRuleList() {
  let list;
  try {
    list = engine.rules();
  } catch (e) {
    els.rulesList.replaceChildren(h("pre", { class: "error-box" }, String(e.message || e)));
    return;
  }
  const q = els.rulesFilter.value.trim().toLowerCase();
  const shown = list.filter((r) => !q || JSON.stringify(r).toLowerCase().includes(q));
  els.rulesList.replaceChildren(
    h("p", { class: "muted small" }, `${shown.length} of ${plural(list.length, "rule")}`),
    ...shown.map((r) =>
      h(
        "button",
        { type: "button", class: "rule-row", onclick: () => showRule(r.id) },
        h("code", {}, r.id),
        h("span", { class: "rule-title" }, ruleText(r, "title")),
        ruleText(r, "family") && r.family !== r.id ? h("span", { class: "chip" }, r.family) : null,
      ),
    ),
  );
}

function showRule(id) {
  let rule;
  let entry;
  try {
    rule = engine.explain(id);
    entry = engine.explainMarkdown(id);
  } catch (e) {
    rule = undefined;
  }
  els.ruleDetail.hidden = false;
  if (!rule || !entry) {
    els.ruleDetail.replaceChildren(h("p", {}, "No rule with id ", h("code", {}, id), "."));
    return;
  }
  // The encyclopedia entry as the engine renders it (placeholders shown as their
  // fallback or ‹name›, as `torchdx explain` prints them); the examples below it get a
  // button that diagnoses them.
  const body = entry.split("\n## Examples")[0];
  els.ruleDetail.replaceChildren(
    h(
      "div",
      { class: "section-head" },
      h(
        "div",
        { class: "meta" },
        h("code", {}, rule.id),
        rule.family !== rule.id ? h("span", { class: "family" }, rule.family) : null,
        confidenceChip(rule.confidence),
        rule.collateral ? h("span", { class: "chip" }, "usually collateral") : null,
      ),
      h("button", { type: "button", class: "link", onclick: () => (els.ruleDetail.hidden = true) }, "Back to the list"),
    ),
    h("div", { class: "md rule-entry" }, markdown(body)),
    rule.related && rule.related.length
      ? h("section", {}, h("h4", {}, "Related"), h("div", { class: "related" }, rule.related.map((r) => h("button", { type: "button", class: "chip link-chip", onclick: () => showRule(r) }, r))))
      : null,
    rule.example && rule.example.length
      ? h(
          "section",
          {},
          h("h4", {}, `Examples (${rule.example.length})`),
          rule.example.map((e) =>
            h(
              "details",
              { class: "example" },
              h("summary", {}, e.name, h("span", { class: "muted" }, e.expect === "match" ? " · diagnosed by this rule" : " · not this rule")),
              h("pre", {}, e.log),
              h("button", { type: "button", class: "copy", onclick: () => { els.rulesDialog.close(); setInputText(e.log); run(); } }, "Diagnose this example"),
            ),
          ),
        )
      : null,
  );
  els.ruleDetail.scrollIntoView({ block: "nearest" });
}

$("#open-rules").addEventListener("click", () => openRules());
els.rulesFilter.addEventListener("input", () => renderRuleList());

// ------------------------------------------------------------------ extra rule pack

els.rulesInput.addEventListener("change", async () => {
  const files = [...(els.rulesInput.files || [])];
  els.rulesInput.value = "";
  if (!files.length || !engine) return;
  const sources = await Promise.all(files.map(async (f) => ({ name: f.name, text: await f.text() })));
  try {
    const list = engine.setExtraRules(sources);
    ruleFlags.clear();
    els.rulesError.hidden = true;
    els.rulesState.textContent = `· ${plural(sources.length, "file")} loaded, ${plural(list.length, "rule")} in total`;
    els.rulesClear.hidden = false;
    run();
  } catch (e) {
    els.rulesError.hidden = false;
    els.rulesError.textContent = String(e.message || e);
    els.rulesState.textContent = "· not loaded";
  }
});
els.rulesClear.addEventListener("click", () => {
  engine.setExtraRules([]);
  ruleFlags.clear();
  els.rulesState.textContent = "";
  els.rulesClear.hidden = true;
  els.rulesError.hidden = true;
  run();
});

// ------------------------------------------------------------------ start

async function start() {
  try {
    engine = await Engine.load();
  } catch (e) {
    showError(new Error(`The diagnosis engine could not be loaded: ${e.message || e}. Serve this folder over HTTP (see the README).`));
    document.body.dataset.ready = "error";
    return;
  }
  els.version.textContent = `v${engine.version()}`;
  showEmpty();
  document.body.dataset.ready = "1";
  updateStats();
  if (els.log.value.trim()) run({ reveal: false });
  // Compile the built-in rule pack while the user is still reading, so that the first
  // diagnosis does not pay for it.
  const warm = () => {
    try {
      engine.rules();
    } catch {
      /* reported when used */
    }
  };
  if ("requestIdleCallback" in window) requestIdleCallback(warm, { timeout: 1000 });
  else setTimeout(warm, 200);
}

start();
