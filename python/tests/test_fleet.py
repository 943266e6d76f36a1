"""torchdx.fleet: the weekly picture, its statistics, its command, and its offline HTML
page rendered in headless Chromium (screenshot saved; every request the browser makes
goes through a logging proxy, and only the page itself may be requested).

Most of it needs nothing but the package: rows are plain dicts, and the no-Ray path
(report JSON files from ``torchdx diagnose --format json``) is summarized without
pyarrow. The tests of Arrow, pandas, Parquet and Ray inputs skip without them.
"""

from __future__ import annotations

import datetime as dt
import http.server
import json
import math
import random
import re
import shutil
import struct
import subprocess
import sys
import threading
import urllib.parse
import zlib
from pathlib import Path

import genlogs
import pytest
from support import JOB_PATTERN, diagnose_json, run

import torchdx
import torchdx.fleet as fleet
from torchdx._rows import rows_from_report

BAD = "gpu-node-17"
BAR_BLUE = (0x4C, 0x78, 0xA8)
FLAG_RED = (0xE4, 0x57, 0x56)


# ---------------------------------------------------------------- statistics


def test_binomial_tail_is_exact():
    # small cases by hand
    assert fleet.binom_sf(2, 3, 0.5) == pytest.approx(0.5)
    assert fleet.binom_sf(0, 10, 0.3) == 1.0
    assert fleet.binom_sf(11, 10, 0.3) == 0.0
    assert fleet.binom_sf(3, 3, 0.1) == pytest.approx(0.001)
    # against a direct sum
    n, p, k = 40, 0.03, 5
    direct = sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))
    assert fleet.binom_sf(k, n, p) == pytest.approx(direct, rel=1e-9)
    assert fleet.binom_cdf(k - 1, n, p) == pytest.approx(1 - direct, rel=1e-9)
    # tiny tails stay positive and ordered
    a, b = fleet.binom_sf(30, 100, 0.03), fleet.binom_sf(40, 100, 0.03)
    assert 0 < b < a < 1e-15


def _synthetic_rows(n_jobs=1200, hosts=32, hw_share=0.08, bad_hw=0.30, bad_jobs=0.03, seed=3, dates=True):
    """Rows as torchdx.ray makes them: BAD carries ~30% of hardware faults and ~3% of jobs."""
    rng = random.Random(seed)
    names = [f"gpu-node-{i:02d}" for i in range(1, hosts + 1)]
    others = [h for h in names if h != BAD]
    q = (bad_jobs - hw_share * bad_hw) / (1 - hw_share)
    fams = ["cuda-oom", "device-mismatch", "nccl-watchdog-timeout", "dtype-mismatch", "store-timeout"]
    rows = []
    start = dt.date(2026, 4, 6)
    for j in range(n_jobs):
        hw = rng.random() < hw_share
        host = BAD if rng.random() < (bad_hw if hw else q) else rng.choice(others)
        fam = "hardware-fault" if hw else rng.choice(fams)
        day = (start + dt.timedelta(days=rng.randrange(28))).isoformat()
        base = dict(job_id=f"job-{j:05d}", path=f"/logs/{day}/job-{j:05d}/train.log", date=day if dates else None, torchdx_version="0.1.0")
        rows.append(dict(base, finding_index=0, family=fam, rule_id=fam, role="initiating", rank=0, host=host, culprit_kind="gpu-hardware" if hw else None))
        # the launcher's echo: collateral, must not count as the host's failure
        rows.append(dict(base, finding_index=1, family="elastic-child-failed", rule_id="elastic-child-failed", role="collateral", rank=0, host=host))
    return rows


def test_planted_bad_host_is_flagged_and_uniform_hosts_are_not():
    rows = _synthetic_rows()
    s = fleet.summary(rows)
    hw = [h for h in s.hosts if h.group == "hardware-fault" and h.key == "host"]
    flagged = [h.host for h in hw if h.flagged]
    assert flagged == [BAD], [(h.host, h.events, h.p_adjusted) for h in hw[:5]]
    bad = next(h for h in hw if h.host == BAD)
    assert bad.p_adjusted < 1e-6
    # p0 is the host's share of all job appearances
    jobs_on = {}
    for r in rows:
        jobs_on.setdefault(r["host"], set()).add(r["job_id"])
    assert bad.jobs == len(jobs_on[BAD])
    assert bad.share == pytest.approx(len(jobs_on[BAD]) / sum(len(v) for v in jobs_on.values()))
    assert bad.events == len({r["job_id"] for r in rows if r["host"] == BAD and r["family"] == "hardware-fault"})
    assert bad.share < 0.05 and bad.events / bad.total_events > 0.2
    assert bad.p_adjusted == pytest.approx(min(1.0, fleet.binom_sf(bad.events, bad.total_events, bad.share) * s.host_groups_tested["hardware-fault"]["m"]))
    # a uniform host: present, tested, not flagged
    uni = [h for h in hw if h.host != BAD]
    assert uni and all(not h.flagged and h.p_adjusted >= 0.01 for h in uni)
    # NCCL timeouts here are spread uniformly: nothing flagged
    assert not [h for h in s.hosts if h.group == "nccl" and h.flagged]
    # collateral echoes are not the host's failures: only initiating hardware-fault rows count
    n_hw_jobs = sum(1 for r in rows if r["family"] == "hardware-fault")
    assert s.host_groups_tested["hardware-fault"]["n"] == n_hw_jobs
    text = s.to_text()
    line = next(ln for ln in text.splitlines() if BAD in ln and "hardware-fault" in ln)
    assert "FLAG" in line
    assert sum("FLAG" in ln for ln in text.splitlines() if ln.startswith("  ") and "gpu-node" in ln) == 1


def test_no_flag_without_signal():
    # the same fleet with the bad host behaving like the others
    rows = _synthetic_rows(bad_hw=1 / 32, bad_jobs=1 / 32, seed=11)
    s = fleet.summary(rows)
    assert not s.flagged_hosts, [(h.host, h.p_adjusted) for h in s.flagged_hosts]


# ---------------------------------------------------------------- trend, repeats, dates


def _trend_rows():
    rows = []
    rng = random.Random(5)
    start = dt.date(2026, 4, 6)
    j = 0
    for week in range(4):
        for i in range(200):
            j += 1
            day = (start + dt.timedelta(days=7 * week + i % 7)).isoformat()
            if week == 3 and i < 50:
                fam = "cuda-oom"  # 25% in the last week
            elif week < 3 and i < 4:
                fam = "cuda-oom"  # 2% before
            else:
                fam = rng.choice(["device-mismatch", "dtype-mismatch", "store-timeout", "nccl-error"])
            rows.append(dict(job_id=f"j{j}", path=f"/l/{day}/j{j}/train.log", date=day, finding_index=0, family=fam, rule_id=fam, role="initiating"))
    return rows


def test_trend_per_iso_week_finds_the_rise():
    s = fleet.summary(_trend_rows())
    assert s.period_kind == "week"
    assert s.periods == ["2026-W15", "2026-W16", "2026-W17", "2026-W18"]
    assert s.jobs_per_period == [200, 200, 200, 200]
    oom = next(f for f in s.families if f.family == "cuda-oom")
    assert oom.per_period == [4, 4, 4, 50]
    assert oom.trend == "up" and oom.trend_p_adjusted < 1e-6
    assert oom.trend_pp == pytest.approx(25 - 2, abs=0.01)
    for f in s.families:
        if f.family != "cuda-oom":
            assert f.trend in ("flat", "down"), (f.family, f.trend, f.trend_p_adjusted)
    assert "up +23.0pp" in s.to_text()
    # per day when the span is short
    short = [r for r in _trend_rows() if r["date"] <= "2026-04-12"]
    s2 = fleet.summary(short)
    assert s2.period_kind == "day" and len(s2.periods) == 7


def test_no_dates_is_said_honestly_and_dates_come_from_the_pattern():
    rows = [dict(r, date=None) for r in _trend_rows()]
    s = fleet.summary(rows)
    assert s.period_kind == "none" and s.periods == []
    assert all(f.trend == "" and f.per_period == [] for f in s.families)
    assert "no dates" in s.to_text()
    assert 'id="no-dates"' in s.to_html()
    # the job id pattern's `date` group, searched in the path, restores them
    s2 = fleet.summary(rows, job_id_pattern=JOB_PATTERN)
    assert s2.period_kind == "week" and s2.jobs_per_period == [200, 200, 200, 200]


def test_repeating_jobs():
    def row(job, fam, ck=None, ce=None, day="2026-04-07"):
        return dict(job_id=job, path=f"/l/{day}/{job}/train.log", date=day, finding_index=0, family=fam, role="initiating", culprit_kind=ck, culprit_expr=ce)

    rows = [
        row("pretrain-7b-attempt1", "cuda-oom", "batch-size", "batch_size=64", "2026-04-07"),
        row("pretrain-7b-attempt2", "cuda-oom", "batch-size", "batch_size=64", "2026-04-08"),
        row("pretrain-7b-attempt3", "cuda-oom", "batch-size", "batch_size=64", "2026-04-09"),
        row("finetune_retry1", "device-mismatch", "label-not-moved", "labels"),
        row("finetune_retry2", "dtype-mismatch", None, None),  # a different failure: no repeat
        row("eval-3", "nccl-error"),  # one attempt only
        row("sweep.try1", "store-timeout"),
        row("sweep.try2", "store-timeout"),
    ]
    s = fleet.summary(rows)
    got = {(r.base, r.attempts, r.repeats, r.family) for r in s.repeats}
    assert got == {("pretrain-7b", 3, 3, "cuda-oom"), ("sweep", 2, 2, "store-timeout")}
    top = s.repeats[0]
    assert top.base == "pretrain-7b" and top.first_date == "2026-04-07" and top.last_date == "2026-04-09"
    assert top.jobs == ["pretrain-7b-attempt1", "pretrain-7b-attempt2", "pretrain-7b-attempt3"]
    # a user key: everything before the first dot or dash-number
    s2 = fleet.summary(rows, repeat_key=r"-\d+$")
    assert not any(r.base == "pretrain-7b" for r in s2.repeats)


# ---------------------------------------------------------------- end to end on generated logs


def test_host_of_a_finding_follows_the_documented_rules():
    """evidence.host, else the host named for the same rank, else (a finding without a
    rank) the report's only host, else the path pattern's host, else null."""

    def f(id_, rank, host=None, ev_rank=None, role="collateral"):
        ev = {"host": host} if host else {}
        if ev_rank is not None:
            ev["rank"] = ev_rank
        return {"id": id_, "family": id_, "title": id_, "role": role, "rank": rank, "confidence": "likely", "location": {"line": 1, "end_line": 1}, "evidence": ev, "culprit": None}

    two = {"findings": [f("hardware-fault", 12, role="initiating"), f("cuda-oom", None, role="independent"), f("elastic-child-failed", 12, "node-b", 12), f("worker-signal", 3, "node-a", 3), f("nccl-error", 7)]}
    rows = rows_from_report(two, "{}", job_id="j", path="/p", host_fallback=None)
    assert [r["host"] for r in rows] == ["node-b", None, "node-b", "node-a", None]
    rows = rows_from_report(two, "{}", job_id="j", path="/p", host_fallback="from-path")
    assert [r["host"] for r in rows] == ["node-b", "from-path", "node-b", "node-a", "from-path"]
    # one host named: a finding without a rank is on it; one with another rank is not
    one = {"findings": [f("hardware-fault", None, role="initiating"), f("elastic-child-failed", 5, "node-c", 5), f("nccl-error", 9)]}
    assert [r["host"] for r in rows_from_report(one, "{}", job_id="j", path="/p")] == ["node-c", "node-c", None]
    none = rows_from_report({"findings": []}, "{}", job_id="j", path="/p", host_fallback="h")
    assert len(none) == 1 and none[0]["role"] == "none" and none[0]["host"] == "h" and none[0]["family"] is None


# ---------------------------------------------------------------- end to end on generated logs


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """500 generated logs with a planted bad host, diagnosed by one engine in this
    process; the reports written as JSON files ``json/<date>/<job>.json`` (what
    ``torchdx diagnose --format json`` prints), the input of the no-Ray path."""
    out = tmp_path_factory.mktemp("planted")
    manifest = genlogs.generate(out / "logs", n_jobs=500, seed=21, folder_share=0.04, family_weights={"hardware-fault": 0.06}, bad_host=(BAD, 0.30, 0.03), max_noise_lines=150)
    engine = torchdx.Engine()
    reports = out / "json"
    for e in manifest:
        p = reports / e["date"] / f"{e['job_id']}.json"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(engine.diagnose_file(e["path"]).to_json())
    return out, manifest, reports


def _summary_dict(s) -> dict:
    """A summary as a dict, without what differs between inputs of the same reports (the
    version: report JSON files do not carry it)."""
    d = s.to_dict()
    d.pop("versions")
    return d


def test_planted_host_found_through_the_engine(planted):
    out, manifest, reports = planted
    hw_jobs = [e for e in manifest if e["family"] == "hardware-fault" and e["kind"] == "file"]
    on_bad = [e for e in hw_jobs if e["host"] == BAD]
    share = sum(e["host"] == BAD for e in manifest) / len(manifest)
    # as planted, up to sampling: ~3% of jobs, ~30% of the hardware faults
    assert 0.015 < share < 0.05 and len(on_bad) / len(hw_jobs) > 0.15, (share, len(on_bad), len(hw_jobs))
    s = fleet.summary(reports, job_id_pattern=JOB_PATTERN)
    assert s.jobs == 500 and s.rows >= 500
    assert s.clean_jobs == sum(e["family"] is None for e in manifest)
    assert s.error_jobs == 0 and s.failed_jobs == 500 - s.clean_jobs
    hw = [h for h in s.hosts if h.group == "hardware-fault" and h.key == "host"]
    assert [h.host for h in hw if h.flagged] == [BAD], [(h.host, h.events, h.expected, h.p_adjusted) for h in hw[:5]]
    assert not [h for h in s.flagged_hosts if h.host != BAD]
    bad = next(h for h in hw if h.host == BAD)
    assert bad.share < 0.07 and bad.events / bad.total_events > 0.15, bad
    # the hardware-fault events on the bad host are the planted ones the engine found
    found_on_bad = set()
    for e in on_bad:
        rep = json.loads((reports / e["date"] / f"{e['job_id']}.json").read_text())
        rows = rows_from_report(rep, "", job_id=e["job_id"], path=e["path"])
        if any(r["family"] == "hardware-fault" and r["role"] != "collateral" and r["host"] == BAD for r in rows):
            found_on_bad.add(e["job_id"])
    assert len(found_on_bad) >= 0.8 * len(on_bad) and bad.events >= len(found_on_bad), (len(found_on_bad), len(on_bad), bad.events)
    # families: the jobs each one initiated, as the reports say, job for job
    want = {}
    for e in manifest:
        rep = json.loads((reports / e["date"] / f"{e['job_id']}.json").read_text())
        if rep["initiating"] is not None:
            fam = rep["findings"][rep["initiating"]]["family"]
            want[fam] = want.get(fam, 0) + 1
    assert {f.family: f.jobs for f in s.families if f.jobs} == want
    assert sum(f.jobs for f in s.families) == s.failed_jobs
    assert next(f for f in s.families if f.family == "hardware-fault").jobs >= 0.8 * sum(e["family"] == "hardware-fault" for e in manifest)
    # repeats: the generator's attempts that the engine diagnosed the same way
    assert s.repeats, "the generator repeats some jobs across attempts"
    bases = {e["base"] for e in manifest if e["attempt"] > 1}
    assert {r.base for r in s.repeats} <= bases
    assert len(s.repeats) >= 0.7 * len(bases), (len(s.repeats), len(bases))
    assert s.period_kind == "week" and sum(s.jobs_per_period) == 500


def test_all_input_kinds_give_the_same_summary(planted, tmp_path, cli):
    """Rows from torchdx.ray.Diagnose, as a list, an Arrow table, a DataFrame, a Parquet
    file and a folder of them, summarize as the report JSON files do."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    import torchdx.ray as tdray

    out, manifest, reports = planted
    ref = _summary_dict(fleet.summary(reports, job_id_pattern=JOB_PATTERN))
    d = tdray.Diagnose(job_id_pattern=JOB_PATTERN)
    files, dirs = tdray.find_jobs(out / "logs")
    assert len(files) + len(dirs) == 500
    rows = []
    for p in files:
        rows += d.diagnose_one(p, Path(p).read_bytes())
    for p in dirs:
        rows += d.diagnose_one(p, None)
    s = fleet.summary(rows)
    assert s.versions == [torchdx.__version__]
    assert _summary_dict(s) == ref
    table = pa.Table.from_pylist(rows, schema=tdray.SCHEMA)
    assert _summary_dict(fleet.summary(table)) == ref
    pq.write_table(table, tmp_path / "rows.parquet")
    assert _summary_dict(fleet.summary(tmp_path / "rows.parquet")) == ref
    part = tmp_path / "ds"
    part.mkdir()
    third = table.num_rows // 3
    for i in range(3):
        pq.write_table(table.slice(i * third, third if i < 2 else None), part / f"part-{i}.parquet")
    assert _summary_dict(fleet.summary(str(part))) == ref
    pytest.importorskip("pandas")
    assert _summary_dict(fleet.summary(table.to_pandas())) == ref
    # a report written by the CLI itself is read as the engine's own
    e = next(e for e in manifest if e["kind"] == "file" and e["family"] == "hardware-fault")
    j = tmp_path / "one" / f"{e['job_id']}.json"
    j.parent.mkdir()
    j.write_text(diagnose_json(cli, path=e["path"]))
    (one,) = [r for r in fleet.summary(j).families if r.jobs]
    assert one.family == "hardware-fault"


@pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")  # Ray Data's own
def test_ray_dataset_input(ray_cluster, planted):
    pa = pytest.importorskip("pyarrow")
    import ray

    out, manifest, reports = planted
    rows = fleet.load_rows(reports)
    cols = sorted({k for r in rows for k in r})
    ds = ray.data.from_arrow(pa.Table.from_pylist([{k: r.get(k) for k in cols} for r in rows]))
    assert _summary_dict(fleet.summary(ds, job_id_pattern=JOB_PATTERN)) == _summary_dict(fleet.summary(rows, job_id_pattern=JOB_PATTERN))


def test_fleet_command(planted, tmp_path, cli):
    """``torchdx fleet summarize`` on report JSON files (no pyarrow needed), its HTML,
    its JSON, its errors; ``python -m torchdx.fleet`` is the same; ``torchdx --help``
    lists it."""
    out, manifest, reports = planted
    html_out = tmp_path / "fleet.html"
    p = run([cli, "fleet", "summarize", str(reports), "--job-id-pattern", JOB_PATTERN, "--html", str(html_out)])
    assert p.returncode == 0, p.stderr.decode()
    text = p.stdout.decode()
    assert text.startswith("torchdx fleet summary: 500 jobs")
    assert "Families (by jobs they initiated)" in text and "Top culprit kinds" in text and "Periods (week)" in text
    flag_lines = [ln for ln in text.splitlines() if ln.rstrip().endswith("FLAG")]
    assert len(flag_lines) == 1 and BAD in flag_lines[0] and "hardware-fault" in flag_lines[0]
    assert html_out.is_file() and "<svg" in html_out.read_text() and f"wrote {html_out}".encode() in p.stderr
    q = run([sys.executable, "-m", "torchdx.fleet", "summarize", str(reports), "--job-id-pattern", JOB_PATTERN])
    assert (q.returncode, q.stdout) == (0, p.stdout)
    p = run([cli, "fleet", "summarize", str(reports), "--json"])
    assert p.returncode == 0
    d = json.loads(p.stdout)
    assert d["jobs"] == 500 and d["period_kind"] == "none"  # no pattern: report files carry no date
    assert [h["host"] for h in d["hosts"] if h["flagged"]] == [BAD]
    p = run([cli, "fleet", "summarize", str(tmp_path / "missing")])
    assert p.returncode == 2 and b"missing" in p.stderr
    p = run([cli, "fleet", "frobnicate"])
    assert p.returncode == 2 and b"usage: torchdx fleet" in p.stderr
    for args in (["fleet", "--help"], ["help", "fleet"]):
        p = run([cli, *args])
        assert p.returncode == 0 and b"usage: torchdx fleet" in p.stdout and b"summarize" in p.stdout and b"diagnose" in p.stdout, args
    p = run([cli, "fleet", "summarize", "--help"])
    assert p.returncode == 0 and b"--html" in p.stdout
    # the native commands' help, with `fleet` among them
    p = run([cli, "--help"])
    commands = p.stdout.decode().split("Commands:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [c.split()[0] for c in commands] == ["diagnose", "redact", "explain", "rules", "eval", "fleet", "help"]
    p = run([cli])
    assert p.returncode == 2 and b"\n  fleet " in p.stderr and p.stdout == b""

# ---------------------------------------------------------------- the page, offline, in Chromium


def _chromium() -> str:
    for c in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if shutil.which(c):
            return shutil.which(c)
    pytest.skip("headless Chromium is not installed (Debian: apt-get install -y chromium)")


class _Proxy:
    """A loopback HTTP server that is also the browser's proxy for every request
    (`--proxy-server`, `--proxy-bypass-list=<-loopback>`): it serves the files of one
    folder at its own address and logs, and refuses, everything else."""

    def __init__(self, root: Path):
        self.root = root
        self.log: list[dict] = []
        proxy = self

        class H(http.server.BaseHTTPRequestHandler):
            def _handle(self):
                u = urllib.parse.urlsplit(self.path)
                host = u.netloc or self.headers.get("Host", "")
                proxy.log.append({"method": self.command, "url": self.path, "host": host, "referer": self.headers.get("Referer")})
                f = proxy.root / u.path.lstrip("/")
                if host == proxy.origin and f.is_file() and f.resolve().parent == proxy.root.resolve():
                    b = f.read_bytes()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html; charset=utf-8" if f.suffix == ".html" else "application/octet-stream")
                    self.send_header("Content-Length", str(len(b)))
                    self.end_headers()
                    self.wfile.write(b)
                else:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()

            do_GET = do_POST = do_HEAD = _handle

            def do_CONNECT(self):
                proxy.log.append({"method": "CONNECT", "url": self.path, "host": self.path, "referer": None})
                self.send_response(403)
                self.end_headers()

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.origin = f"127.0.0.1:{self.srv.server_address[1]}"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


# The browser's own background services (component updates, sign-in): not the page's
# requests. They go to the proxy too and are refused; a page request never goes there.
_BROWSER_SERVICES = ("update.googleapis.com", "accounts.google.com", "clients2.google.com", "redirector.gvt1.com", "optimizationguide-pa.googleapis.com", "content-autofill.googleapis.com", "safebrowsingohttpgateway.googleapis.com", "edgedl.me.gvt1.com", "www.google.com")


def _browser(chromium: str, proxy: _Proxy, page: str, profile: Path, extra: list[str], size: str = "1280,2000") -> subprocess.CompletedProcess:
    cmd = [
        chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
        f"--proxy-server=http://{proxy.origin}", "--proxy-bypass-list=<-loopback>",
        f"--user-data-dir={profile}", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-pings", "--disable-default-apps",
        "--disable-extensions", "--disable-domain-reliability", "--disable-breakpad",
        "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,MediaRouter,Translate",
        f"--window-size={size}", *extra, f"http://{proxy.origin}/{page}",
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def _page_requests(log: list[dict], origin: str) -> list[dict]:
    """The requests the page caused: everything but the browser's own services, which
    must never carry our page as referer."""
    out = []
    for r in log:
        service = r["host"].split(":")[0] in _BROWSER_SERVICES
        from_page = origin in (r["referer"] or "")
        if service and not from_page:
            continue
        out.append(r)
    return out


def _png_pixels(path: Path):
    """Decode an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes): (w, h, rows)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        ln, typ = struct.unpack(">I4s", data[pos : pos + 8])
        chunk = data[pos + 8 : pos + 8 + ln]
        if typ == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
            bpp = 3 if ctype == 2 else 4
        elif typ == b"IDAT":
            idat += chunk
        pos += 12 + ln
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(h):
        f = raw[i]
        line = bytearray(raw[i + 1 : i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 0xFF
            elif f == 2:
                line[x] = (line[x] + b) & 0xFF
            elif f == 3:
                line[x] = (line[x] + ((a + b) >> 1)) & 0xFF
            elif f == 4:
                pa_, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[x] = (line[x] + (a if pa_ <= pb and pa_ <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def _count_colour(png: Path, rgb: tuple[int, int, int], tol: int = 6) -> int:
    w, h, bpp, rows = _png_pixels(png)
    n = 0
    for row in rows:
        for x in range(0, w * bpp, bpp):
            if abs(row[x] - rgb[0]) <= tol and abs(row[x + 1] - rgb[1]) <= tol and abs(row[x + 2] - rgb[2]) <= tol:
                n += 1
    return n


def test_html_is_self_contained_and_renders_offline(planted, tmp_path, artifacts):
    out, manifest, reports = planted
    s = fleet.summary(reports, job_id_pattern=JOB_PATTERN)
    assert [h.host for h in s.flagged_hosts] == [BAD]
    site = tmp_path / "site"
    site.mkdir()
    page = Path(s.write_html(site / "fleet.html"))
    text = page.read_text()
    # static: nothing that could fetch
    low = text.lower()
    for bad in ("http://", "https://", "<script", "url(", "@import", "<iframe", "<img", "<object", "<embed", "srcset"):
        assert bad not in low, bad
    assert "src=" not in low
    hrefs = re.findall(r'href="([^"]*)"', text)
    assert "data:," in hrefs and all(h == "data:," or h.startswith("#") for h in hrefs), hrefs
    assert 'id="attention"' in text and BAD in text[text.index('id="attention"') : text.index("</div>", text.index('id="attention"'))]
    assert "content-security-policy" in low
    # the same page without its CSP: a reference the policy would hide would show here
    (site / "nocsp.html").write_text(text.replace(text[text.index("<meta http-equiv") : text.index(">", text.index("<meta http-equiv")) + 1], ""))
    # a control page that does fetch: proves the proxy sees requests
    (site / "control.html").write_text('<!DOCTYPE html><html><head><link rel="icon" href="data:,"></head><body><img src="http://example.invalid/x.png"><img src="https://cdn.example.invalid/y.png"><img src="/local.png"></body></html>')

    chromium = _chromium()
    proxy = _Proxy(site)
    try:
        shot = artifacts / "fleet-summary.png"
        if shot.exists():
            shot.unlink()
        r = _browser(chromium, proxy, "fleet.html", tmp_path / "profile", [f"--screenshot={shot}"])
        assert shot.is_file() and shot.stat().st_size > 10_000, r.stderr[-2000:]
        reqs = _page_requests(proxy.log, proxy.origin)
        assert [x["url"] for x in reqs] == [f"http://{proxy.origin}/fleet.html"], reqs

        proxy.log.clear()
        full = artifacts / "fleet-summary-full.png"
        _browser(chromium, proxy, "fleet.html", tmp_path / "profile", [f"--screenshot={full}"], size="1280,7000")
        assert [x["url"] for x in _page_requests(proxy.log, proxy.origin)] == [f"http://{proxy.origin}/fleet.html"]

        proxy.log.clear()
        dom = _browser(chromium, proxy, "fleet.html", tmp_path / "profile", ["--dump-dom"]).stdout
        assert [x["url"] for x in _page_requests(proxy.log, proxy.origin)] == [f"http://{proxy.origin}/fleet.html"]

        proxy.log.clear()
        _browser(chromium, proxy, "nocsp.html", tmp_path / "profile", ["--dump-dom"])
        assert [x["url"] for x in _page_requests(proxy.log, proxy.origin)] == [f"http://{proxy.origin}/nocsp.html"]

        proxy.log.clear()
        _browser(chromium, proxy, "control.html", tmp_path / "profile", ["--dump-dom"])
        seen = {x["host"] for x in _page_requests(proxy.log, proxy.origin)}
        assert {"example.invalid", "cdn.example.invalid:443", proxy.origin} <= seen, proxy.log
    finally:
        proxy.close()

    # the DOM the browser built holds every chart, with one bar per item
    for chart in ("families", "trend", "culprits", "hosts-hardware-fault"):
        assert f'data-chart="{chart}"' in dom, chart
    fam_svg = dom[dom.index('data-chart="families"') : dom.index("</svg>", dom.index('data-chart="families"'))]
    assert fam_svg.count('class="bar"') == len([f for f in s.families[:25] if f.jobs > 0])
    hw_svg = dom[dom.index('data-chart="hosts-hardware-fault"') : dom.index("</svg>", dom.index('data-chart="hosts-hardware-fault"'))]
    assert f'data-label="{BAD} observed"' in hw_svg and FLAG_RED_HEX in hw_svg
    assert 'class="flag"' in dom
    # and it painted: bar colours in the screenshots (the flagged host's red bar is
    # further down the page than the 2000 px the first one shows)
    blue = _count_colour(shot, BAR_BLUE)
    assert blue > 5_000, blue
    red = _count_colour(full, FLAG_RED)
    assert red > 200, red
    (artifacts / "fleet-summary.html").write_text(text)
    print(f"\nscreenshots {shot} ({shot.stat().st_size} bytes, {blue} bar pixels) and {full} ({red} flagged-host pixels)")


FLAG_RED_HEX = "#e45756"
