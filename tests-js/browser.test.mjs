// The page in a real browser: Debian's Chromium, driven by playwright-core.
//
//   node --test tests-js/            (after wasm/build.sh)
//
// Serves wasm/www on 127.0.0.1 with a tiny static server started here, then:
//  - pastes a device-mismatch log and checks the culprit shown names `labels` (and, with
//    the devices the other way round, `out`);
//  - drops a multi-rank log (rank 1 fails first, rank 0 then times out in gloo) and checks
//    the initiating rank shown is 1;
//  - drops a large log, which must go through the Web Worker with progress shown;
//  - lists the rule catalog, loads an extra rule pack (and shows a broken one's error);
//  - checks that no request leaves 127.0.0.1 (during or after load), with no page errors;
//  - saves screenshots to target/screenshot.png (and target/screenshot-ranks.png);
//  - stops its server after load, then diagnoses a 1.5 MB file in the worker (twice: a
//    Cancel replaces the worker), with no request at all;
//  - at 1280 and 390 px wide: no chip or evidence box overflows its card, evidence values
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
    const items = ".chip, .stat, .rank-badge, .rank-chip, .eyebrow > *, .meta > *, .culprit-meta > *, .evidence dt, .evidence dd, .evidence code, .finding code, .headline";
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
