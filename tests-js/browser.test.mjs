// The page in a real browser: Debian's Chromium, driven by playwright-core.
//
//   node --test tests-js/            (after wasm/build.sh)
//
// Serves wasm/www on 127.0.0.1 with a tiny static server started here, then:
//  - pastes a device-mismatch log and checks the culprit shown names `labels` (and, with
//    the devices the other way round, `out`);
//  - drops a multi-rank log (rank 1 fails first, rank 0 then times out in gloo) and checks
//    the initiating rank shown is 1;
//  - drops a four-rank torchrun log and checks the timeline picture: a lane per rank, the
//    initiating mark on the initiating rank's lane, collateral marks linked to it, a mark
//    that opens and highlights its finding's log lines; 64 ranks draw a capped number of
//    lanes and name the rest;
//  - drops a large log, which must go through the Web Worker with progress shown;
//  - lists the rule catalog, loads an extra rule pack (and shows a broken one's error);
//  - checks that no request leaves 127.0.0.1 (during or after load), with no page errors;
//  - saves screenshots to target/screenshot.png (and target/screenshot-ranks.png);
//  - stops its server after load, then diagnoses a 1.5 MB file in the worker (twice: a
//    Cancel replaces the worker), with no request at all;
//  - at 1280 and 390 px wide: no chip or evidence box overflows its card, the timeline
//    picture stays in its card (scrolling inside its own box) at a readable scale, evidence values
//    get at least 40% of the card, the result scrolls into view, a large file's displayed
//    part is named, seven-digit line numbers clear the hit marker and the text; screenshots
//    go to $TORCHDX_SCREENSHOTS (default: a new folder under the temp dir, printed).

import assert from "node:assert/strict";
import { createServer } from "node:http";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, extname, join, normalize, resolve, sep } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const www = join(root, "wasm/www");
const fixtures = join(root, "tests-js/fixtures");
const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";

const TYPES = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".wasm": "application/wasm",
  ".ts": "text/plain; charset=utf-8",
  ".md": "text/plain; charset=utf-8",
  ".png": "image/png",
  ".svg": "image/svg+xml",
};

/** A static file server for `dir` on 127.0.0.1 (random port). */
function serve(dir) {
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url, "http://x").pathname);
    let file = normalize(join(dir, path));
    if (file !== dir && !file.startsWith(dir + sep)) {
      res.writeHead(403).end();
      return;
    }
    if (existsSync(file) && statSync(file).isDirectory()) file = join(file, "index.html");
    if (!existsSync(file)) {
      res.writeHead(404).end("not found");
      return;
    }
    res.writeHead(200, { "content-type": TYPES[extname(file)] || "application/octet-stream", "cache-control": "no-store" });
    res.end(readFileSync(file));
  });
  return new Promise((ok) => server.listen(0, "127.0.0.1", () => ok(server)));
}

/** Stops `server` for good: open keep-alive connections too. */
async function stop(server) {
  const closed = new Promise((ok) => server.close(ok));
  server.closeAllConnections();
  await closed;
}

let server;
let browser;
let base;

before(async () => {
  assert.ok(existsSync(join(www, "pkg/torchdx_wasm.js")), "wasm/www/pkg is missing: run wasm/build.sh first");
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install chromium`);
  server = await serve(www);
  base = `http://127.0.0.1:${server.address().port}`;
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
      "--disable-quic",
    ],
  });
});

after(async () => {
  if (browser) await browser.close();
  if (server) await new Promise((ok) => server.close(ok));
});

/** A fresh page with the app loaded, recording every request and every error. */
async function openPage({ url = base, width = 1440, height = 1000 } = {}) {
  const context = await browser.newContext({ viewport: { width, height } });
  const requests = [];
  const errors = [];
  // The context sees the page's and its worker's requests; the page listener is the
  // belt to those braces.
  context.on("request", (r) => requests.push(r.url()));
  const page = await context.newPage();
  page.on("request", (r) => requests.push(r.url()));
  page.on("pageerror", (e) => errors.push(`pageerror: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(`console.error: ${m.text()}`);
  });
  await page.goto(`${url}/index.html`);
  await page.waitForSelector("body[data-ready='1']", { timeout: 30_000 });
  const loaded = requests.length;
  return {
    page,
    context,
    errors,
    requests,
    /** Requests made after the page had loaded. */
    laterRequests: () => requests.slice(loaded),
    async close() {
      await context.close();
    },
  };
}

/** Every request went to the test server (data: and blob: URLs stay in the page). */
function assertLocalOnly(requests) {
  const outside = requests.filter((u) => {
    if (u.startsWith("data:") || u.startsWith("blob:")) return false;
    return new URL(u).hostname !== "127.0.0.1";
  });
  assert.deepEqual(outside, [], "requests left 127.0.0.1");
}

/** Pastes `text` into the log box: a real paste event, carrying the text the way the
 *  clipboard does (the page's handler inserts it and diagnoses at once). */
async function paste(page, text) {
  await page.focus("#log");
  await page.evaluate((t) => {
    const dt = new DataTransfer();
    dt.setData("text/plain", t);
    const ev = new ClipboardEvent("paste", { clipboardData: dt, bubbles: true, cancelable: true });
    document.querySelector("#log").dispatchEvent(ev);
  }, text);
}

/** Drops a file on the page's drop zone, as a user dragging it from a file manager would. */
async function dropFile(page, name, text) {
  const dataTransfer = await page.evaluateHandle(
    ([n, t]) => {
      const dt = new DataTransfer();
      dt.items.add(new File([t], n, { type: "text/plain" }));
      return dt;
    },
    [name, text],
  );
  for (const type of ["dragenter", "dragover", "drop"]) {
    await page.dispatchEvent("#dropzone", type, { dataTransfer });
  }
}

/** The timeline picture as drawn: lanes (data-rank, "" for the unranked lane), marks,
 *  columns (one per entry, by x), links (finding indices), the lane note. */
function picture(page) {
  return page.$eval(".timeline .tl-figure svg", (svg) => {
    const lanes = [...svg.querySelectorAll(".tl-lane")];
    const marks = [...svg.querySelectorAll(".tl-mark")].map((m) => ({
      lane: m.dataset.lane,
      kind: m.dataset.kind,
      finding: Number(m.dataset.finding),
      x: Number(m.querySelector(".tl-target").getAttribute("cx")),
      y: Number(m.querySelector(".tl-target").getAttribute("cy")),
      tag: m.querySelector(".tl-tag") ? m.querySelector(".tl-tag").textContent : null,
    }));
    const columns = [];
    for (const m of marks) {
      if (!columns.some((c) => c.x === m.x)) columns.push({ x: m.x, finding: m.finding });
    }
    columns.sort((a, b) => a.x - b.x);
    const note = document.querySelector(".tl-note");
    return {
      lanes: lanes.map((l) => l.dataset.rank),
      laneY: Object.fromEntries(lanes.map((l) => [l.dataset.rank, Number(l.querySelector(".tl-rail").getAttribute("y1"))])),
      // A label on two lines is two tspans.
      labels: lanes.map((l) => {
        const label = l.querySelector(".tl-lane-label");
        const parts = [...label.querySelectorAll("tspan")].map((t) => t.textContent);
        return parts.length ? parts.join(" ") : label.textContent;
      }),
      initiatingLane: (svg.querySelector(".tl-lane.initiating") || { dataset: {} }).dataset.rank,
      marks,
      columns,
      // The lane a mark is drawn on, by its position (not by what its attributes say).
      initiating: marks.filter((m) => m.kind === "initiating").map(({ y, finding, tag }) => ({ lane: lanes.find((l) => Number(l.querySelector(".tl-rail").getAttribute("y1")) === y)?.dataset.rank, finding, tag })),
      links: [...svg.querySelectorAll(".tl-link")].map((l) => ({ from: Number(l.dataset.from), to: Number(l.dataset.to) })),
      note: note ? note.textContent : "",
      hidden: note ? Number(note.dataset.hidden) : 0,
      height: svg.getBoundingClientRect().height,
    };
  });
}

/** Waits until `selector`'s log line `line` is shown highlighted (a hit row) inside the
 *  window and inside its scrolling excerpt. */
async function inView(page, selector, line) {
  await page.waitForFunction(
    ([sel, n]) => {
      const row = document.querySelector(`${sel} .ln.hit[data-line="${n}"]`);
      if (!row || !row.checkVisibility()) return false;
      const r = row.getBoundingClientRect();
      const box = row.closest(".excerpt").getBoundingClientRect();
      return r.top >= 0 && r.bottom <= window.innerHeight && r.top >= box.top - 1 && r.bottom <= box.bottom + 1;
    },
    [selector, line],
    { timeout: 5_000 },
  );
}

/** A 64-rank collapse: rank `bad` raises a real error, every other rank then times out
 *  in the NCCL watchdog. */
function sixtyFourRanks(bad) {
  const lines = [];
  lines.push(`[rank${bad}]: Traceback (most recent call last):`);
  lines.push(`[rank${bad}]:   File "/home/user/project/train_ddp.py", line 74, in main`);
  lines.push(`[rank${bad}]:     logits = head(features)`);
  lines.push(`[rank${bad}]: RuntimeError: mat1 and mat2 shapes cannot be multiplied (32x2048 and 512x10)`);
  for (let r = 0; r < 64; r++) {
    if (r === bad) continue;
    const us = String(204817 + r * 37).padStart(9, "0");
    lines.push(
      `[rank${r}]:[E1129 10:26:41.${us} ProcessGroupNCCL.cpp:616] [Rank ${r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1204, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600046 milliseconds before timing out.`,
    );
  }
  return lines.join("\n") + "\n";
}

describe("torchdx page in Chromium", () => {
  test("pasted device-mismatch log: the culprit shown is `labels`", { timeout: 90_000 }, async () => {
    const s = await openPage();
    const { page } = s;
    // `cuda:0 and cpu ... argument target`: the common device is cuda:0 and the target
    // (the labels) is the tensor left on cpu.
    const log = readFileSync(join(fixtures, "device-mismatch.log"), "utf8");
    await paste(page, log);
    await page.waitForSelector("#result[data-state='done']", { timeout: 30_000 });

    assert.equal(await page.inputValue("#log"), log, "the pasted text is in the text box");
    const culprit = await page.innerText("#culprit");
    assert.match(culprit, /\blabels\b/, `culprit shown: ${culprit}`);
    const headline = (await page.textContent("#headline")).trim();
    assert.ok(headline.length > 0);
    assert.match(await page.textContent(".finding.primary .eyebrow"), /Initiating failure/);

    // The culprit's log lines are highlighted, and include the failing line of user code.
    const hits = await page.$$eval(".finding.primary .excerpt .ln.hit", (rows) => rows.map((r) => r.textContent));
    assert.ok(hits.length > 0, "highlighted log lines");
    assert.ok(hits.some((t) => t.includes("Expected all tensors to be on the same device")), `hit lines: ${hits.join("\n")}`);

    // Checklist as ticks, fix with a copy button, verification step.
    const boxes = await page.$$(".finding.primary .checklist input[type=checkbox]");
    assert.ok(boxes.length > 0, "checklist items");
    await boxes[0].check();
    assert.ok(await boxes[0].isChecked());
    assert.ok(await page.isVisible(".finding.primary .fix button.copy"));
    assert.ok((await page.textContent(".finding.primary .fix .md")).trim().length > 0, "fix text");
    assert.ok((await page.textContent(".finding.primary .verify .md")).trim().length > 0, "verify step");
    await s.context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: base });
    await page.click(".finding.primary .fix button.copy");
    await page.waitForSelector(".finding.primary .fix button.copy.done", { timeout: 5_000 });

    mkdirSync(join(root, "target"), { recursive: true });
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: join(root, "target/screenshot.png"), fullPage: true });

    // The devices the other way round (`cpu and cuda:0 ... argument target`): now the
    // first argument, the model output `out`, is the one on cpu, and the page says so.
    await page.click("#clear");
    await paste(page, readFileSync(join(fixtures, "device-mismatch-model-on-cpu.log"), "utf8"));
    await page.waitForSelector("#result[data-state='done']", { timeout: 30_000 });
    assert.equal(await page.textContent("#culprit .expr"), "out");
    assert.match(await page.innerText("#culprit"), /\bout\b.*\bcpu\b/);

    assertLocalOnly(s.requests);
    assert.deepEqual(s.laterRequests().filter((u) => !u.startsWith(base)), []);
    assert.deepEqual(s.errors, []);
    await s.close();
  });

  test("dropped multi-rank log: the initiating rank shown is 1", { timeout: 90_000 }, async () => {
    const s = await openPage();
    const { page } = s;
    await dropFile(page, "multi-rank.log", readFileSync(join(fixtures, "multi-rank.log"), "utf8"));
    await page.waitForSelector("#result[data-state='done']", { timeout: 30_000 });

    assert.equal((await page.textContent("#initiating-rank")).trim(), "1");
    assert.equal(await page.getAttribute("#initiating-rank", "data-rank"), "1");
    assert.match(await page.textContent("#input-stats"), /multi-rank\.log/);
    // The gloo timeout on rank 0 is shown as collateral, not as the cause.
    const collateral = await page.$$eval("#collateral .finding", (cards) => cards.map((c) => c.textContent));
    assert.ok(collateral.length > 0, "collateral findings shown");

    await page.screenshot({ path: join(root, "target/screenshot-ranks.png"), fullPage: true });
    assertLocalOnly(s.requests);
    assert.deepEqual(s.errors, []);
    await s.close();
  });

  test("timeline picture: a lane per rank, the initiating mark on its rank, collateral linked, marks open their log lines", { timeout: 90_000 }, async () => {
    const s = await openPage({ width: 1280, height: 800 });
    const { page } = s;
    await dropFile(page, "four-ranks-torchrun.log", readFileSync(join(fixtures, "four-ranks-torchrun.log"), "utf8"));
    await page.waitForSelector("#result[data-state='done']", { timeout: 30_000 });
    const report = await shownReport(page);
    const shown = await picture(page);

    // A lane per rank that reported (or is named by a finding), in rank order, then the
    // launcher's lane for entries without a rank.
    const ranks = new Set();
    let unranked = false;
    for (const t of report.timeline) {
      const f = report.findings[t.finding];
      const own = [...t.ranks, ...(f.ranks || []), ...(f.rank === null ? [] : [f.rank])];
      own.forEach((r) => ranks.add(String(r)));
      unranked ||= own.length === 0;
    }
    const expected = [...ranks].sort((a, b) => a - b).concat(unranked ? [""] : []);
    assert.ok(ranks.size >= 3, `ranks in the timeline: ${[...ranks]}`);
    assert.deepEqual(shown.lanes, expected, "lanes drawn");
    assert.deepEqual(shown.labels, expected.map((r) => (r === "" ? "launcher / unranked" : `rank ${r}`)));

    // One mark per entry and rank, in timeline order.
    assert.equal(shown.columns.length, report.timeline.length, "a column per timeline entry");
    shown.columns.forEach((c, k) => assert.equal(c.finding, report.timeline[k].finding, `column ${k}`));
    assert.ok(shown.columns.every((c, k) => k === 0 || c.x > shown.columns[k - 1].x), "left to right in timeline order");

    // The initiating mark: once, labelled, on the lane of the rank the card names.
    const rank = await page.getAttribute("#initiating-rank", "data-rank");
    assert.equal(rank, "2", "rank 2 ran out of memory before ranks 0 and 1 timed out");
    assert.deepEqual(shown.initiating, [{ lane: rank, finding: report.initiating, tag: "initiating" }]);
    assert.ok(shown.initiatingLane === rank, `the highlighted lane is ${shown.initiatingLane}`);

    // Every collateral finding drawn is linked to the finding it is collateral of.
    const collateral = report.findings.map((f, i) => [f, i]).filter(([f]) => f.role === "collateral").map(([, i]) => i);
    assert.ok(collateral.length >= 2, `collateral findings: ${collateral}`);
    for (const i of collateral) {
      const links = shown.links.filter((l) => l.to === i);
      assert.ok(links.length > 0, `finding ${i} (${report.findings[i].id}) has a link`);
      assert.ok(links.every((l) => l.from === report.findings[i].collateral_of), `finding ${i} links to its cause`);
    }
    assert.ok(shown.links.every((l) => report.findings[l.to].role === "collateral"), "only collateral marks are linked");
    // The watchdog timeouts of ranks 0 and 1 are collateral marks on their own lanes.
    const timeout = report.findings.findIndex((f) => f.id === "nccl-watchdog-timeout");
    assert.ok(timeout >= 0, report.findings.map((f) => f.id).join(", "));
    const timeoutMarks = shown.marks.filter((m) => m.finding === timeout);
    assert.deepEqual(timeoutMarks.map((m) => `${m.lane}:${m.kind}`), ["0:collateral", "1:collateral"]);
    assert.deepEqual(timeoutMarks.map((m) => m.y), [shown.laneY["0"], shown.laneY["1"]], "drawn on the lanes of ranks 0 and 1");

    // A mark's tooltip is its entry's text; clicking it unfolds that finding and brings its
    // log lines into view, highlighted.
    const entry = report.timeline.find((t) => t.finding === timeout);
    assert.ok((await page.textContent(`.tl-hit[data-finding="${timeout}"] title`)).includes(entry.text));
    const log = `#finding-${timeout}-log`;
    assert.equal(await page.isVisible(log), false, "the timeout's lines are folded at first");
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.click(`.tl-hit[data-finding="${timeout}"] .tl-target`);
    await inView(page, log, report.findings[timeout].location.line);
    assert.ok(await page.$eval(log, (el) => el.classList.contains("spotlight")), "the lines followed to are highlighted");

    // The initiating mark leads to the initiating finding's lines, which take the highlight.
    await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
    await page.click(`.tl-mark[data-kind="initiating"] .tl-target`);
    const primary = `#finding-${report.initiating}-log`;
    await inView(page, primary, report.findings[report.initiating].location.line);
    assert.deepEqual(await page.$$eval(".spotlight", (els) => els.map((e) => e.id)), [primary.slice(1)]);

    // The launcher's SIGTERMs are teardown, on the unranked lane; from the keyboard too,
    // a mark leads to its lines.
    const sigterm = report.findings.findIndex((f) => f.id === "launcher-sigterm");
    assert.ok(sigterm >= 0);
    assert.deepEqual(shown.marks.filter((m) => m.finding === sigterm).map((m) => `${m.lane}:${m.kind}`), [":teardown"]);
    await page.focus(`.tl-hit[data-finding="${sigterm}"]`);
    await page.keyboard.press("Enter");
    await inView(page, `#finding-${sigterm}-log`, report.findings[sigterm].location.line);
    assert.deepEqual(await page.$$eval(".spotlight", (els) => els.map((e) => e.id)), [`finding-${sigterm}-log`]);

    await page.screenshot({ path: join(root, "target/screenshot-timeline.png"), fullPage: true });
    assertLocalOnly(s.requests);
    assert.deepEqual(s.errors, []);
    await s.close();
  });

  test("timeline picture of 64 ranks: a capped number of lanes, the others counted", { timeout: 90_000 }, async () => {
    const s = await openPage({ width: 1280, height: 800 });
    const { page } = s;
    await paste(page, sixtyFourRanks(41));
    await page.waitForSelector("#result[data-state='done']", { timeout: 30_000 });
    const report = await shownReport(page);
    const shown = await picture(page);
    const reported = new Set(report.timeline.flatMap((t) => [...t.ranks, ...(report.findings[t.finding].ranks || [])]));
    assert.ok(reported.size >= 60, `${reported.size} ranks reported`);
    const drawn = shown.lanes.filter((r) => r !== "");
    assert.ok(drawn.length >= 4 && drawn.length <= 12, `${drawn.length} lanes drawn`);
    assert.ok(drawn.includes("41"), "the initiating rank has its lane");
    assert.deepEqual(shown.initiating.map((m) => m.lane), [await page.getAttribute("#initiating-rank", "data-rank")]);
    assert.equal(shown.hidden, reported.size - drawn.length, "the note counts the ranks not drawn");
    assert.match(shown.note, new RegExp(`^${reported.size - drawn.length} more ranks with reports not drawn`));
    assert.ok(shown.height < 460, `picture ${shown.height} px tall`);
    assertLocalOnly(s.requests);
    assert.deepEqual(s.errors, []);
    await s.close();
  });

  test("rule catalog: lists the pack and explains a rule", { timeout: 60_000 }, async () => {
    const s = await openPage();
    const { page } = s;
    await page.click("#open-rules");
    await page.waitForSelector("#rules-list .rule-row");
    const rows = await page.$$("#rules-list .rule-row");
    assert.ok(rows.length >= 10, `${rows.length} rules listed`);
    // The entry is core's rendering (explainMarkdown): a placeholder reads as its fallback
    // or ‹name›, never as raw `{module|model}` (state-dict-mismatch's text has it).
    for (const name of ["device-mismatch", "state-dict-mismatch", "unrecognized-exception"]) {
      await page.fill("#rules-filter", name);
      await page.click(`#rules-list .rule-row >> text=${name}`);
      await page.waitForSelector("#rule-detail:not([hidden]) .rule-entry");
      const text = await page.textContent("#rule-detail .rule-entry");
      assert.match(text, /Messages/, `${name}: the message templates are listed`);
      // Templates are shown as written; the prose after them is rendered.
      const prose = text.split("Mechanism").slice(1).join("Mechanism");
      assert.ok(prose.length > 100, `${name}: the entry has its prose`);
      assert.doesNotMatch(prose, /\{[a-z_0-9.]+(\|[^}]*)?\}/, `${name}: no raw placeholder in the rendered entry`);
      const title = await page.textContent("#rules-list .rule-row .rule-title");
      assert.doesNotMatch(title, /\{[a-z_]+/, `${name}: the list shows rendered titles`);
    }
    await page.screenshot({ path: join(root, "target/screenshot-rules.png") });
    assertLocalOnly(s.requests);
    assert.deepEqual(s.errors, []);
    await s.close();
  });

  test("extra rule pack: loaded from a file, used, and errors shown with file:line:col", { timeout: 60_000 }, async () => {
    const s = await openPage();
    const { page } = s;
    await page.click(".extra-rules summary");
    await page.setInputFiles("#rules-input", join(root, "tests-js/rules/frobnicator-failed.toml"));
    await page.waitForFunction(() => /1 file loaded/.test(document.querySelector("#rules-state").textContent));
    await paste(page, readFileSync(join(fixtures, "frobnicator.log"), "utf8"));
    await page.waitForSelector("#result[data-state='done']");
    assert.equal((await page.textContent("#headline")).trim(), "The frobnicator failed");

    const broken = 'id = "broken"\nfamily = "other"\ntitle = 42\n';
    await page.setInputFiles("#rules-input", { name: "broken.toml", mimeType: "text/plain", buffer: Buffer.from(broken) });
    await page.waitForSelector("#rules-error:not([hidden])");
    assert.match(await page.textContent("#rules-error"), /^broken\.toml:\d+:\d+: /);
    assertLocalOnly(s.requests);
    assert.deepEqual(s.errors, []);
    await s.close();
  });

  test("large dropped log: diagnosed in the worker, with progress", { timeout: 120_000 }, async () => {
    const s = await openPage();
    const { page } = s;
    const rankLog = readFileSync(join(fixtures, "multi-rank.log"), "utf8");
    const [head, ...rest] = rankLog.split("[rank1]: Traceback");
    let noise = "";
    for (let step = 0; noise.length < 1.5 * 1024 * 1024; step++) {
      noise += `rank ${step % 2} step ${step} loss ${(2.3 - step / 1e5).toFixed(4)} lr 0.000300 throughput 1843.2 samples/s\n`;
    }
    const big = head + noise + "[rank1]: Traceback" + rest.join("[rank1]: Traceback");
    await page.evaluate(() => {
      window.__phases = [];
      new MutationObserver(() => {
        const p = document.querySelector("#progress");
        if (!p.hidden) window.__phases.push(p.dataset.phase);
      }).observe(document.querySelector("#progress"), { attributes: true, subtree: true, characterData: true, childList: true });
    });
    await dropFile(page, "big-run.log", big);
    await page.waitForSelector("#result[data-state='done']", { timeout: 60_000 });

    assert.equal(await page.getAttribute("#result", "data-via"), "worker");
    const phases = await page.evaluate(() => window.__phases);
    assert.ok(phases.includes("diagnose"), `progress phases seen: ${phases}`);
    assert.ok(await page.isHidden("#progress"), "progress hidden when done");
    assert.equal((await page.textContent("#initiating-rank")).trim(), "1");
    assertLocalOnly(s.requests);
    assert.deepEqual(s.errors, []);
    await s.close();
  });
});

// ---------------------------------------------------------------- the page keeps its promise

const SHOTS = process.env.TORCHDX_SCREENSHOTS || mkdtempSync(join(tmpdir(), "torchdx-page-"));
mkdirSync(SHOTS, { recursive: true });

/** A training run's output of about `bytes`, then `failure` (a log's own lines). */
function trainingLog(bytes, failure) {
  const out = [];
  let size = 0;
  for (let step = 0; size < bytes; step++) {
    const line =
      step % 500 === 0
        ? `Epoch ${step / 500 + 1}/200`
        : `[2024-11-29 10:${String(Math.floor(step / 600) % 60).padStart(2, "0")}:${String(step % 60).padStart(2, "0")}] step ${step} loss ${(2.3 - step / 1e5).toFixed(4)} lr 3.0e-04 grad_norm 0.84 throughput 1843.2 samples/s`;
    out.push(line);
    size += line.length + 1;
  }
  return out.join("\n") + "\n" + failure;
}

/** The report as the page shows it in its raw JSON. */
async function shownReport(page) {
  return JSON.parse(await page.textContent(".raw-json pre"));
}

/** Clears the page and pastes `text`; resolves when the result is shown. */
async function pasteAndWait(page, text) {
  await page.click("#clear");
  await page.evaluate(() => window.scrollTo(0, 0));
  await paste(page, text);
  await page.waitForSelector("#result[data-state='done']", { timeout: 60_000 });
}

/**
 * Layout problems of the shown result, as text (none: []). Opens every folded finding
 * first, so that their bodies are measured too. Checks that every chip, badge, meta item
 * and evidence element lies inside its card (elements inside a scrolling box, the log
 * excerpt and code blocks, are allowed to scroll), that the page has no horizontal
 * scroll, that each evidence value is at least `minValueShare` of its card's width, and
 * that line numbers keep 6 px from the row's hit marker and from the line's text.
 */
function layoutProblems(page, { minValueShare }) {
  return page.evaluate((minValueShare) => {
    for (const d of document.querySelectorAll("#result details")) d.open = true;
    const problems = [];
    const px = (n) => Math.round(n);
    const describe = (el) => `${el.tagName.toLowerCase()}.${[...el.classList].join(".")} "${el.textContent.trim().slice(0, 40)}"`;
    if (document.documentElement.scrollWidth > window.innerWidth) {
      problems.push(`the page scrolls sideways: ${document.documentElement.scrollWidth} px wide in ${window.innerWidth}`);
    }
    const result = document.querySelector("#result");
    const items = ".chip, .stat, .rank-badge, .rank-chip, .eyebrow > *, .meta > *, .culprit-meta > *, .evidence dt, .evidence dd, .evidence code, .finding code, .headline, .tl-legend > *, .tl-note";
    let checked = 0;
    for (const el of result.querySelectorAll(items)) {
      if (el.closest(".excerpt, pre")) continue;
      const r = el.getBoundingClientRect();
      if (!r.width && !r.height) continue;
      const card = el.closest(".card, .timeline") || result;
      const c = card.getBoundingClientRect();
      checked++;
      if (r.left < c.left - 0.5 || r.right > c.right + 0.5 || r.top < c.top - 0.5 || r.bottom > c.bottom + 0.5) {
        problems.push(`${describe(el)} [${px(r.left)}, ${px(r.right)}] outside its card [${px(c.left)}, ${px(c.right)}]`);
      }
      const style = getComputedStyle(el);
      if (style.display !== "inline" && el.scrollWidth > el.clientWidth + 1) {
        problems.push(`${describe(el)}: its text overflows it (${el.scrollWidth} px in ${el.clientWidth})`);
      }
    }
    if (!checked) problems.push("nothing measured");
    for (const dd of result.querySelectorAll(".evidence dd")) {
      const card = dd.closest(".card").getBoundingClientRect();
      const share = dd.getBoundingClientRect().width / card.width;
      if (share < minValueShare) {
        problems.push(`evidence value ${describe(dd)} is ${px(dd.getBoundingClientRect().width)} px, ${(100 * share).toFixed(0)}% of its card`);
      }
    }
    for (const timeline of result.querySelectorAll(".timeline")) {
      const fig = timeline.querySelector(".tl-figure");
      const svg = fig && fig.querySelector("svg");
      if (!svg || !svg.querySelector(".tl-mark")) {
        problems.push("a timeline without its picture");
        continue;
      }
      const card = timeline.getBoundingClientRect();
      const box = fig.getBoundingClientRect();
      if (box.left < card.left - 0.5 || box.right > card.right + 0.5) {
        problems.push(`timeline picture [${px(box.left)}, ${px(box.right)}] outside its card [${px(card.left)}, ${px(card.right)}]`);
      }
      // Wider than its box is allowed only when the box scrolls; shrunk below 4/5 its
      // text is unreadable.
      const drawn = svg.getBoundingClientRect();
      const scale = drawn.width / svg.viewBox.baseVal.width;
      if (scale < 0.79) problems.push(`timeline picture drawn at ${scale.toFixed(2)} of its size`);
      if (drawn.width > fig.clientWidth + 1 && getComputedStyle(fig).overflowX !== "auto") {
        problems.push(`timeline picture ${px(drawn.width)} px wide in a ${fig.clientWidth} px box that does not scroll`);
      }
      if (box.height > 520) problems.push(`timeline picture ${px(box.height)} px tall`);
    }
    for (const row of result.querySelectorAll(".excerpt .ln:not(.gap)")) {
      const no = row.querySelector(".no");
      const range = document.createRange();
      range.selectNodeContents(no);
      const digits = range.getBoundingClientRect();
      const rowBox = row.getBoundingClientRect();
      const text = row.querySelector(".tx").getBoundingClientRect();
      if (digits.left - rowBox.left < 6 || text.left - digits.right < 6) {
        problems.push(`line number ${no.textContent}: ${px(digits.left - rowBox.left)} px from the marker, ${px(text.left - digits.right)} px from the text`);
      }
    }
    return problems;
  }, minValueShare);
}

describe("the page keeps its promise", () => {
  test("offline: the server stops after load, then a 1.5 MB file is diagnosed in the worker", { timeout: 120_000 }, async () => {
    const own = await serve(www);
    const url = `http://127.0.0.1:${own.address().port}`;
    const s = await openPage({ url });
    const { page } = s;
    await stop(own);
    await assert.rejects(fetch(`${url}/index.html`), "the server is gone");

    const device = readFileSync(join(fixtures, "device-mismatch.log"), "utf8");
    const big = trainingLog(1.5 * 1024 * 1024, device);
    assert.ok(big.length > 1.5 * 1024 * 1024);
    await dropFile(page, "big-run.log", big);
    await page.waitForSelector("#result[data-state='done'], #result[data-state='error']", { timeout: 60_000 });
    assert.equal(await page.getAttribute("#result", "data-state"), "done", await page.textContent("#result"));
    assert.equal(await page.getAttribute("#result", "data-via"), "worker");
    let report = await shownReport(page);
    assert.equal(report.findings[report.initiating].family, "device-mismatch");
    assert.equal(report.input.lines, big.split("\n").length - 1);
    assert.match(await page.innerText("#culprit"), /\blabels\b/);

    // Cancel ends the worker (a diagnosis cannot be interrupted otherwise); the next
    // large file needs a new one, started without the server too.
    await page.evaluate(() => {
      const progress = document.querySelector("#progress");
      const observer = new MutationObserver(() => {
        if (!progress.hidden && progress.dataset.phase === "diagnose") {
          observer.disconnect();
          document.querySelector("#cancel").click();
        }
      });
      observer.observe(progress, { attributes: true, attributeFilter: ["data-phase", "hidden"] });
    });
    await dropFile(page, "big-run-2.log", big);
    await page.waitForFunction(() => /Diagnosis cancelled/.test(document.querySelector("#result").textContent), null, { timeout: 60_000 });
    await dropFile(page, "big-run-3.log", big);
    await page.waitForSelector("#result[data-state='done'], #result[data-state='error']", { timeout: 60_000 });
    assert.equal(await page.getAttribute("#result", "data-state"), "done", await page.textContent("#result"));
    assert.equal(await page.getAttribute("#result", "data-via"), "worker");
    report = await shownReport(page);
    assert.equal(report.findings[report.initiating].family, "device-mismatch");

    await page.screenshot({ path: join(SHOTS, "offline.png"), fullPage: true });
    // After load the page asked for nothing but the worker's scripts it had made itself.
    assert.deepEqual(s.laterRequests().filter((u) => !u.startsWith("blob:")), []);
    assertLocalOnly(s.requests);
    assert.deepEqual(s.errors, []);
    await s.close();
  });

  for (const [name, width, height] of [
    ["desktop", 1280, 800],
    ["wide", 1440, 900], // here the evidence once shared the card's width with the prose
    ["mobile", 390, 844],
  ]) {
    test(`layout at ${width} px (${name}): cards hold their chips, evidence has room, the result is in view`, { timeout: 180_000 }, async (t) => {
      const s = await openPage({ width, height });
      const { page } = s;

      // A multi-rank result: timeline, rank badges, collateral findings.
      await pasteAndWait(page, readFileSync(join(fixtures, "multi-rank.log"), "utf8"));
      // Measured, then shot (with every finding open, as measured; on failure too).
      let problems = await layoutProblems(page, { minValueShare: 0.4 });
      await page.screenshot({ path: join(SHOTS, `${name}-${width}-ranks.png`), fullPage: true });
      assert.deepEqual(problems, [], "multi-rank result");

      // Four ranks under torchrun: a wider timeline picture.
      await pasteAndWait(page, readFileSync(join(fixtures, "four-ranks-torchrun.log"), "utf8"));
      assert.ok(await page.$(".timeline .tl-figure svg"), "the timeline picture is drawn");
      problems = await layoutProblems(page, { minValueShare: 0.4 });
      await page.screenshot({ path: join(SHOTS, `${name}-${width}-four-ranks.png`), fullPage: true });
      assert.deepEqual(problems, [], "four-rank result");

      // Two attempts pasted together (a restart): eight entries, wider than a phone; the
      // picture then scrolls inside its own box.
      const twoRuns = ["multi-rank.log", "four-ranks-torchrun.log"].map((f) => readFileSync(join(fixtures, f), "utf8")).join("");
      await pasteAndWait(page, twoRuns);
      problems = await layoutProblems(page, { minValueShare: 0.4 });
      await page.screenshot({ path: join(SHOTS, `${name}-${width}-two-runs.png`), fullPage: true });
      assert.deepEqual(problems, [], "two-run result");
      const [scrolls, independent] = await page.$eval(".tl-figure", (fig) => [fig.scrollWidth > fig.clientWidth + 1, !!fig.querySelector(".tl-mark.independent")]);
      assert.equal(scrolls, width < 600, `the picture ${scrolls ? "scrolls" : "fits"} at ${width} px`);
      assert.ok(independent, "the second run's failure is an independent mark");

      // A device mismatch: a long message in the evidence.
      await pasteAndWait(page, readFileSync(join(fixtures, "device-mismatch.log"), "utf8"));
      // The result is in view (scrolled to, on one column), and not under the input panel.
      await page.waitForFunction(() => {
        const top = document.querySelector("#result").getBoundingClientRect().top;
        return top > -2 && top < window.innerHeight / 2;
      }, null, { timeout: 5_000 });
      const covered = await page.evaluate(async () => {
        const hit = () => {
          const box = document.querySelector("#headline").getBoundingClientRect();
          const el = document.elementFromPoint(Math.min(box.left + 20, window.innerWidth - 1), box.top + box.height / 2);
          return el && el.closest("#result") ? null : `${el && el.outerHTML.slice(0, 80)}`;
        };
        const first = hit();
        // Scrolled further down, the input does not follow and cover the result.
        window.scrollBy(0, 400);
        await new Promise((ok) => requestAnimationFrame(() => requestAnimationFrame(ok)));
        const el = document.elementFromPoint(window.innerWidth / 2, 120);
        const later = el && el.closest("#result") ? null : `${el && el.outerHTML.slice(0, 80)}`;
        window.scrollBy(0, -400);
        return [first, later].filter(Boolean);
      });
      assert.deepEqual(covered, [], "what is on top of the result");
      const evidence = await page.$$eval(".finding.primary .evidence dd", (dds) => dds.length);
      assert.ok(evidence >= 3, `${evidence} evidence values`);
      problems = await layoutProblems(page, { minValueShare: 0.4 });
      await page.screenshot({ path: join(SHOTS, `${name}-${width}.png`), fullPage: true });
      assert.deepEqual(problems, [], "device-mismatch result");

      // A large file whose failure is past line 1,000,000: the box names the part it
      // shows (the end: the last MB, and of so many short lines only the last ones), and
      // seven-digit line numbers fit their column.
      const blank = "\n".repeat(1_000_000);
      const device = readFileSync(join(fixtures, "device-mismatch.log"), "utf8");
      const long = trainingLog(100_000, "") + blank + device;
      assert.ok(long.length > 1024 * 1024);
      const lines = long.split("\n");
      lines.pop(); // the final newline ends the last line
      await page.click("#clear");
      await dropFile(page, "long-run.log", long);
      await page.waitForSelector("#result[data-state='done']", { timeout: 60_000 });
      const note = await page.waitForSelector("#file-note:not([hidden])");
      await page.waitForFunction(() => / of [\d,]+/.test(document.querySelector("#file-note").textContent));
      const m = /lines ([\d,]+)–([\d,]+) of ([\d,]+)/.exec(await note.textContent());
      assert.ok(m, `file note: ${await note.textContent()}`);
      const [first, last, total] = m.slice(1).map((n) => Number(n.replace(/,/g, "")));
      assert.equal(total, lines.length);
      assert.equal(last, total);
      const shown = await page.inputValue("#log");
      assert.ok(first > 1 && shown.length > 0 && shown.length <= 1024 * 1024, `${shown.length} characters shown, from line ${first}`);
      assert.equal(shown, lines.slice(first - 1).join("\n") + "\n", `the box shows lines ${first}–${last}`);
      assert.ok(await page.$eval("#log", (el) => el.readOnly), "the part shown is read-only");
      const numbers = await page.$$eval(".finding.primary .excerpt .ln .no", (els) => els.map((e) => e.textContent));
      assert.ok(numbers.some((n) => n.length === 7), `line numbers: ${numbers.join(" ")}`);
      problems = await layoutProblems(page, { minValueShare: 0.4 });
      await page.screenshot({ path: join(SHOTS, `${name}-${width}-large.png`), fullPage: true });
      assert.deepEqual(problems, [], "large-file result");

      t.diagnostic(`screenshots in ${SHOTS}`);
      assertLocalOnly(s.requests);
      assert.deepEqual(s.errors, []);
      await s.close();
    });
  }
});
