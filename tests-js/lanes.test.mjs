// Unit tests of the timeline picture's layout (no browser, no engine): which lanes are
// drawn, which mark goes on which lane, which collateral mark links to which cause.
import assert from "node:assert/strict";
import { test } from "node:test";
import { MAX_LANES, UNRANKED, laneLayout } from "../wasm/www/lanes.js";

const finding = (role, rank, extra = {}) => ({ id: `rule-${role}`, role, rank, ranks: rank === null ? [] : [rank], collateral_of: role === "collateral" ? 0 : null, location: { line: 1, end_line: 1 }, ...extra });

/** Rank 2 fails; ranks 0 and 1 time out (one finding, two ranks); the launcher sends
 *  SIGTERMs (teardown, unranked) and summarises (collateral, unranked). */
function collapse() {
  const findings = [
    finding("initiating", 2, { location: { line: 20, end_line: 21 } }),
    finding("collateral", 0, { ranks: [0, 1], location: { line: 30, end_line: 30 } }),
    finding("collateral", null, { id: "launcher-sigterm", location: { line: 40, end_line: 40 } }),
    finding("collateral", null, { id: "elastic-child-failed", location: { line: 45, end_line: 60 } }),
  ];
  const timeline = [
    { time: "10:16:40", ranks: [2], finding: 0, text: "rank 2: OutOfMemoryError (cuda-oom)" },
    { time: "10:26:41", ranks: [0, 1], finding: 1, text: "ranks 0, 1: nccl timeout (nccl-watchdog-timeout)" },
    { time: "10:26:42", ranks: [], finding: 2, text: "launcher: SIGTERM (launcher-sigterm)" },
    { time: "10:26:42", ranks: [], finding: 3, text: "launcher: ChildFailedError (elastic-child-failed)" },
  ];
  return { input: { ranks: [0, 1, 2, 3] }, initiating: 0, findings, timeline };
}

const marksOf = (layout, column) => layout.columns[column].marks.map((m) => `${m.lane}:${m.kind}`);

test("one lane per rank with a report, ordered, then the unranked lane", () => {
  const layout = laneLayout(collapse(), 0, { isTeardown: (f) => f.id === "launcher-sigterm" });
  assert.deepEqual(layout.lanes, [0, 1, 2, UNRANKED]);
  assert.deepEqual(layout.silent, [3], "rank 3 reported nothing: no lane, but named");
  assert.deepEqual(layout.hidden, []);
  assert.deepEqual(marksOf(layout, 0), ["2:initiating"]);
  assert.deepEqual(marksOf(layout, 1), ["0:collateral", "1:collateral"]);
  assert.deepEqual(marksOf(layout, 2), [`${UNRANKED}:teardown`]);
  assert.deepEqual(marksOf(layout, 3), [`${UNRANKED}:collateral`]);
});

test("every collateral mark is linked to its cause's mark; teardown links say so", () => {
  const layout = laneLayout(collapse(), 0, { isTeardown: (f) => f.id === "launcher-sigterm" });
  const links = layout.links.map((l) => `${l.from.column}@${l.from.lane}->${l.to.column}@${l.to.lane}${l.teardown ? " teardown" : ""}`);
  assert.deepEqual(links, ["0@2->1@0", "0@2->1@1", `0@2->2@${UNRANKED} teardown`, `0@2->3@${UNRANKED}`]);
});

test("a suspect that printed nothing gets the initiating mark on its own lane", () => {
  // Ranks 1-3 time out; rank 0 never reported: the finding's rank is 0, its reporters 1-3.
  const report = {
    input: { ranks: [1, 2, 3] },
    initiating: 0,
    findings: [finding("initiating", 0, { ranks: [1, 2, 3] })],
    timeline: [{ time: null, ranks: [1, 2, 3], finding: 0, text: "ranks 1-3: timeout" }],
  };
  const layout = laneLayout(report, 0);
  assert.deepEqual(layout.lanes, [0, 1, 2, 3]);
  assert.deepEqual(marksOf(layout, 0), ["0:initiating", "1:also", "2:also", "3:also"]);
});

test("64 ranks: lanes capped, the initiating rank and each entry kept, the rest counted", () => {
  const all = Array.from({ length: 64 }, (_, r) => r);
  const others = all.filter((r) => r !== 41);
  const report = {
    input: { ranks: all },
    initiating: 0,
    findings: [finding("initiating", 41), finding("collateral", 0, { ranks: others }), finding("independent", 63)],
    timeline: [
      { time: null, ranks: [41], finding: 0, text: "rank 41: error" },
      { time: null, ranks: others, finding: 1, text: "ranks 0-40,42-63: timeout" },
      { time: null, ranks: [63], finding: 2, text: "rank 63: other" },
    ],
  };
  const layout = laneLayout(report, 0);
  assert.equal(layout.lanes.length, MAX_LANES);
  assert.ok(layout.lanes.includes(41) && layout.lanes.includes(63) && layout.lanes.includes(0), `lanes ${layout.lanes}`);
  assert.deepEqual(layout.lanes, [...layout.lanes].sort((a, b) => a - b), "ordered by rank");
  assert.equal(layout.hidden.length, 64 - MAX_LANES);
  assert.deepEqual([...layout.lanes, ...layout.hidden].sort((a, b) => a - b), all, "every rank drawn or counted");
  assert.deepEqual(marksOf(layout, 0), ["41:initiating"]);
  // Every drawn lane but rank 41's shows the timeout (rank 63 too), each linked to rank 41.
  assert.equal(layout.links.length, MAX_LANES - 1, "one link per drawn collateral mark");
  assert.ok(layout.links.every((l) => l.from.lane === 41));
});
