// The timeline as a picture: one lane per rank, one column per timeline entry, the
// initiating event marked and each collateral event linked to its cause.
//
// `laneLayout` decides what goes where (pure data, testable without a browser);
// `drawLanes` turns that into an inline SVG (DOM calls only, no markup parsed, no
// style attributes: the page's CSP refuses them, colours come from style.css).

/** At most this many lanes are drawn: a 64-rank collapse would otherwise be a wall of
 *  empty lanes. The ranks left out are returned (`hidden`) for the page to name. */
export const MAX_LANES = 12;

/** The lane of entries that carry no rank (the launcher, an unranked traceback). */
export const UNRANKED = "unranked";

/**
 * Where every mark of the timeline goes.
 *
 * `isTeardown(finding)`: the finding's rule reports the job being torn down (SIGTERMs,
 * abort notices), drawn apart from the cascade.
 *
 * Returns `{ lanes, columns, links, hidden, silent }`:
 * - `lanes`: lane keys in drawing order, ranks ascending then `UNRANKED`;
 * - `columns`: per timeline entry, in timeline order, `{ entry, finding, kind, main,
 *   marks }` where `marks` are `{ lane, kind }` on drawn lanes only and `main` is the
 *   lane of the finding's own rank;
 * - `links`: `{ from, to, teardown }`, each end `{ column, lane }`: collateral → its cause;
 * - `hidden`: ranks that have marks but no drawn lane; `silent`: ranks of the input
 *   with no entry at all.
 */
export function laneLayout(report, primaryIndex, { isTeardown = () => false, maxLanes = MAX_LANES } = {}) {
  const findings = report.findings || [];
  const entries = (report.timeline || []).map((entry) => column(entry, findings[entry.finding], entry.finding === primaryIndex, isTeardown));
  const marked = new Set(entries.flatMap((c) => c.lanes));
  const lanes = chooseLanes(entries, maxLanes);
  const drawn = new Set(lanes);
  const columns = entries.map(({ lanes: own, ...c }) => ({ ...c, marks: own.filter((lane) => drawn.has(lane)).map((lane) => ({ lane, kind: markKind(c, lane) })) }));
  const ranks = (set) => [...set].filter((r) => r !== UNRANKED).sort((a, b) => a - b);
  return {
    lanes,
    columns,
    links: collateralLinks(columns),
    hidden: ranks(marked).filter((r) => !drawn.has(r)),
    silent: (report.input && report.input.ranks ? report.input.ranks : []).filter((r) => !marked.has(r)),
  };
}

/** One timeline entry: its lanes (the ranks that reported it and the finding's own
 *  rank, which for a suspect that printed nothing is not among the reporters). */
function column(entry, finding, initiating, isTeardown) {
  const own = finding && isRank(finding.rank) ? finding.rank : null;
  const ranks = new Set([...(entry.ranks || []), ...((finding && finding.ranks) || [])].filter(isRank));
  if (own !== null) ranks.add(own);
  const lanes = ranks.size ? [...ranks].sort((a, b) => a - b) : [UNRANKED];
  return { entry, finding, kind: entryKind(finding, initiating, isTeardown), main: own ?? lanes[0], lanes };
}

function isRank(r) {
  return typeof r === "number" && Number.isInteger(r) && r >= 0;
}

function entryKind(finding, initiating, isTeardown) {
  if (initiating) return "initiating";
  if (!finding) return "independent";
  if (isTeardown(finding)) return "teardown";
  return finding.role === "collateral" ? "collateral" : "independent";
}

/** The initiating finding is marked once, on its own rank; other ranks that printed
 *  the same report get a lesser mark. Other entries look alike on every rank. */
function markKind(c, lane) {
  return c.kind === "initiating" && lane !== c.main ? "also" : c.kind;
}

/**
 * The lanes to draw: every rank with a mark when they fit; otherwise the initiating
 * rank and each entry's own rank first (so that no entry vanishes while lanes remain),
 * then the lowest ranks.
 */
function chooseLanes(columns, maxLanes) {
  const all = new Set(columns.flatMap((c) => c.lanes));
  const unranked = all.delete(UNRANKED);
  const budget = Math.max(1, maxLanes - (unranked ? 1 : 0));
  const ranks = [...all].sort((a, b) => a - b);
  let keep = ranks;
  if (ranks.length > budget) {
    const first = columns.filter((c) => c.kind === "initiating").concat(columns.filter((c) => c.kind !== "initiating"));
    const wanted = [...first.map((c) => c.main), ...ranks].filter((r) => r !== UNRANKED);
    keep = [...new Set(wanted)].slice(0, budget).sort((a, b) => a - b);
  }
  return unranked ? [...keep, UNRANKED] : keep;
}

/** Each collateral mark linked to the mark of the finding it is collateral of. */
function collateralLinks(columns) {
  const links = [];
  columns.forEach((c, k) => {
    const f = c.finding;
    if (!f || f.role !== "collateral" || f.collateral_of === null || f.collateral_of === undefined) return;
    const cause = columns.findIndex((x) => x.entry.finding === f.collateral_of);
    if (cause < 0 || cause === k || !columns[cause].marks.length) return;
    const from = { column: cause, lane: causeLane(columns[cause]) };
    for (const m of c.marks) links.push({ from, to: { column: k, lane: m.lane }, teardown: c.kind === "teardown" });
  });
  return links;
}

function causeLane(c) {
  return c.marks.some((m) => m.lane === c.main) ? c.main : c.marks[0].lane;
}

// ------------------------------------------------------------------ drawing

const SVG = "http://www.w3.org/2000/svg";

/** Sizes in viewBox units (CSS pixels at scale 1). */
const G = { label: 84, step: 58, tightStep: 34, lane: 30, top: 8, tagTop: 24, axis: 24, right: 18, tick: 56 };

/** `s("circle", { r: 4 }, child, ...)`: an SVG element; children are nodes or text. */
function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v !== null && v !== undefined && v !== false) el.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c !== null && c !== undefined && c !== false) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** The geometry of a layout: positions of lanes and columns, and the picture's size. */
export function geometry(layout) {
  const step = layout.columns.length > 24 ? G.tightStep : G.step;
  // Room above the first lane for the "initiating" tag, when it is drawn there.
  const tagged = layout.columns.some((c) => c.marks.some((m) => m.kind === "initiating" && m.lane === layout.lanes[0]));
  const top = tagged ? G.tagTop : G.top;
  const laneY = new Map(layout.lanes.map((lane, i) => [lane, top + i * G.lane + G.lane / 2]));
  const x = (column) => G.label + column * step + step / 2;
  const width = G.label + layout.columns.length * step + G.right;
  const height = top + layout.lanes.length * G.lane + G.axis;
  return { step, laneY, x, width, height, axisY: top + layout.lanes.length * G.lane + 15 };
}

const laneLabel = (lane) => (lane === UNRANKED ? "launcher / unranked" : `rank ${lane}`);

/**
 * The SVG of a layout. `linkOf(findingIndex)`: the href a mark links to (the page
 * follows it to the finding's log lines). `caption`: the accessible name.
 */
export function drawLanes(layout, { linkOf, caption }) {
  const g = geometry(layout);
  return s(
    "svg",
    { class: "tl-svg", viewBox: `0 0 ${g.width} ${g.height}`, width: g.width, height: g.height, role: "group", "aria-label": caption },
    s("defs", {}, s("marker", { id: "tl-arrow", viewBox: "0 0 10 10", refX: 18, refY: 5, markerWidth: 7, markerHeight: 7, markerUnits: "userSpaceOnUse", orient: "auto" }, s("path", { class: "tl-arrow", d: "M0,0 L10,5 L0,10 z" }))),
    layout.lanes.map((lane, i) => drawLane(layout, lane, i, g)),
    drawAxis(layout, g),
    layout.columns.map((c, k) => drawJoin(c, k, g)),
    layout.links.map((l) => drawLink(l, layout, g)),
    layout.columns.map((c, k) => c.marks.map((m) => drawMark(c, k, m, g, linkOf))),
  );
}

function drawLane(layout, lane, i, g) {
  const y = g.laneY.get(lane);
  const top = y - G.lane / 2;
  const initiating = layout.columns.some((c) => c.marks.some((m) => m.lane === lane && m.kind === "initiating"));
  return s(
    "g",
    { class: `tl-lane${i % 2 ? " odd" : ""}${initiating ? " initiating" : ""}`, "data-rank": lane === UNRANKED ? "" : lane },
    s("rect", { class: "tl-band", x: 0, y: top, width: g.width, height: G.lane }),
    s("line", { class: "tl-rail", x1: G.label - 6, x2: g.width - G.right / 2, y1: y, y2: y }),
    laneText(lane, y),
  );
}

/** The lane's name; the unranked lane's on two lines, to keep the label column narrow. */
function laneText(lane, y) {
  if (lane !== UNRANKED) return s("text", { class: "tl-lane-label", x: 8, y: y + 4 }, laneLabel(lane));
  return s("text", { class: "tl-lane-label", x: 8, y: y - 2 }, s("tspan", { x: 8 }, "launcher /"), s("tspan", { x: 8, dy: 12 }, "unranked"));
}

/** Under the lanes, each column's time (or log line when the log has no time),
 *  skipped where it would repeat the previous one or touch it. */
function drawAxis(layout, g) {
  const timed = layout.columns.some((c) => c.entry.time);
  const untimed = layout.columns.some((c) => !c.entry.time);
  const labels = [];
  let last = null;
  let lastX = -Infinity;
  layout.columns.forEach((c, k) => {
    const f = c.finding;
    const line = f && f.location ? String(f.location.line) : "";
    const text = c.entry.time || (line && timed ? `line ${line}` : line);
    const x = g.x(k);
    if (!text || text === last || x - lastX < G.tick) return;
    labels.push(s("text", { class: "tl-tick", x, y: g.axisY, "text-anchor": "middle" }, text));
    last = text;
    lastX = x;
  });
  return s("g", { class: "tl-axis" }, s("text", { class: "tl-axis-label", x: 8, y: g.axisY }, timed ? (untimed ? "time / line" : "time") : "log line"), labels);
}

/** One report printed by several ranks: its marks joined top to bottom. */
function drawJoin(c, k, g) {
  if (c.marks.length < 2) return null;
  const ys = c.marks.map((m) => g.laneY.get(m.lane));
  return s("line", { class: `tl-join ${c.kind}`, x1: g.x(k), x2: g.x(k), y1: Math.min(...ys), y2: Math.max(...ys) });
}

/** A curve from the cause to the collateral mark, ending in an arrow head short of
 *  the mark; on one lane it bows upwards so that it does not run through the marks
 *  in between. */
function drawLink(l, layout, g) {
  const x0 = g.x(l.from.column);
  const y0 = g.laneY.get(l.from.lane);
  const x1 = g.x(l.to.column);
  const y1 = g.laneY.get(l.to.lane);
  const d =
    y0 === y1
      ? `M${x0},${y0} Q${(x0 + x1) / 2},${y0 - G.lane * 0.8} ${x1},${y1}`
      : `M${x0},${y0} C${(x0 + x1) / 2},${y0} ${(x0 + x1) / 2},${y1} ${x1},${y1}`;
  const from = layout.columns[l.from.column].entry.finding;
  const to = layout.columns[l.to.column].entry.finding;
  return s("path", { class: `tl-link${l.teardown ? " teardown" : ""}`, d, "marker-end": "url(#tl-arrow)", "data-from": from, "data-to": to });
}

const KIND_LABEL = { initiating: "initiating", also: "same report", collateral: "collateral", teardown: "teardown", independent: "independent" };

function drawMark(c, k, m, g, linkOf) {
  const x = g.x(k);
  const y = g.laneY.get(m.lane);
  const f = c.finding;
  const line = f && f.location ? ` · line ${f.location.line}` : "";
  const tip = `${laneLabel(m.lane)} · ${KIND_LABEL[m.kind]}${c.entry.time ? ` · ${c.entry.time}` : ""}${line}\n${c.entry.text}`;
  return s(
    "a",
    { class: "tl-hit", href: linkOf(c.entry.finding), "aria-label": tip.replace("\n", ": "), "data-finding": c.entry.finding },
    s("title", {}, tip),
    s(
      "g",
      { class: `tl-mark ${m.kind}`, "data-kind": m.kind, "data-lane": m.lane === UNRANKED ? "" : m.lane, "data-finding": c.entry.finding },
      s("circle", { class: "tl-target", cx: x, cy: y, r: 13 }),
      shape(m.kind, x, y),
      m.kind === "initiating" ? s("text", { class: "tl-tag", x, y: y - 13, "text-anchor": "middle" }, "initiating") : null,
    ),
  );
}

function shape(kind, x, y) {
  switch (kind) {
    case "initiating":
      return [s("circle", { class: "tl-ring", cx: x, cy: y, r: 9.5 }), s("circle", { class: "tl-dot", cx: x, cy: y, r: 6 })];
    case "teardown":
      return s("rect", { class: "tl-dot", x: x - 4.5, y: y - 4.5, width: 9, height: 9, rx: 1.5 });
    case "independent":
      return s("polygon", { class: "tl-dot", points: `${x},${y - 7} ${x + 7},${y} ${x},${y + 7} ${x - 7},${y}` });
    case "also":
      return s("circle", { class: "tl-dot", cx: x, cy: y, r: 5 });
    default:
      return s("circle", { class: "tl-dot", cx: x, cy: y, r: 5.5 });
  }
}
