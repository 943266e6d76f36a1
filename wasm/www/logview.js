// Log lines for display: shared by the page and the worker (no DOM here).
//
// Line numbers follow the engine's: the input split on "\n", 1-based, a final empty line
// after a trailing newline not counted. For display a line is cleaned the way a terminal
// shows it, by the engine itself (`displayLine` of the WASM package: "\r" progress-bar
// overwrites reduced to the last non-empty segment, ANSI colour codes removed, also
// those whose ESC byte a paste lost), so the page shows what the engine read.

import { displayLine as clean } from "./pkg/torchdx_wasm.js";

/** Longest line shown; longer lines are cut with an ellipsis. */
export const MAX_SHOWN = 2000;

/** What a terminal would show for one raw line. */
export function displayLine(raw) {
  const s = clean(raw);
  return s.length > MAX_SHOWN ? s.slice(0, MAX_SHOWN) + " …" : s;
}

/** The input's lines (raw, without "\n"). */
export function splitLines(text) {
  if (text === "") return [];
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  return lines;
}

/** Where the last `n` lines of `text` start (0 when it has no more than `n`). */
export function lastLinesStart(text, n) {
  let at = text.endsWith("\n") ? text.length - 1 : text.length;
  for (let i = 0; i < n; i++) {
    if (at <= 0) return 0;
    at = text.lastIndexOf("\n", at - 1);
    if (at < 0) return 0;
  }
  return at + 1;
}

/**
 * The lines to show for each finding: its location with `context` lines around it. A
 * location longer than `fullUpTo` lines keeps its first and last lines and its key lines
 * (the frame in user code and its code line, the message); the rest (library frames)
 * is folded into gaps.
 *
 * Returns, per finding, `null` (no location) or `{ rows }` where a row is
 * `{ n, text, hit, key }` or `{ gap: count }`.
 */
export function excerpts(lines, report, { context = 3, fullUpTo = 14, head = 3, tail = 4 } = {}) {
  return report.findings.map((finding) => excerptFor(lines, finding, { context, fullUpTo, head, tail }));
}

function excerptFor(lines, finding, { context, fullUpTo, head, tail }) {
  const loc = finding.location;
  if (!loc || !loc.line || loc.line > lines.length) return null;
  const first = loc.line;
  const last = Math.min(Math.max(loc.end_line || first, first), lines.length);
  const lo = Math.max(1, first - context);
  const hi = Math.min(lines.length, last + context);
  const needles = keyNeedles(finding);
  const isKey = (text) => needles.length > 0 && needles.some((n) => text.includes(n));

  const wanted = new Set();
  if (last - first + 1 <= fullUpTo) {
    for (let n = lo; n <= hi; n++) wanted.add(n);
  } else {
    for (let n = lo; n < first + head; n++) wanted.add(n);
    for (let n = last - tail + 1; n <= hi; n++) wanted.add(n);
    for (let n = first + head; n <= last - tail; n++) {
      if (isKey(displayLine(lines[n - 1] ?? ""))) {
        wanted.add(n);
        if (n + 1 <= last) wanted.add(n + 1); // the code line under a frame
      }
    }
    // Folding a single line saves nothing.
    for (let n = lo + 1; n < hi; n++) {
      if (!wanted.has(n) && wanted.has(n - 1) && wanted.has(n + 1)) wanted.add(n);
    }
  }
  const rows = [];
  let prev = lo - 1;
  for (const n of [...wanted].sort((a, b) => a - b)) {
    if (n > prev + 1) rows.push({ gap: n - prev - 1 });
    // `lines` may be sparse (a large file's worker keeps only the lines shown).
    const text = displayLine(lines[n - 1] ?? "");
    const hit = n >= first && n <= last;
    rows.push({ n, text, hit, key: hit && isKey(text) });
    prev = n;
  }
  return { rows };
}

/** Texts that mark a finding's key lines: its user frame, failing code and message. */
function keyNeedles(finding) {
  const ev = finding.evidence || {};
  const needles = [];
  if (typeof ev.failing_frame === "string") {
    const m = /^(.*):(\d+)$/.exec(ev.failing_frame);
    if (m) needles.push(`${m[1]}", line ${m[2]}`);
  }
  if (typeof ev.failing_code === "string" && ev.failing_code.trim().length >= 4) {
    needles.push(ev.failing_code.trim());
  }
  if (typeof ev.message === "string" && ev.message.trim().length >= 8) {
    needles.push(ev.message.trim().slice(0, 60));
  }
  return needles;
}
