"""A fleet's picture of what breaks, from torchdx finding rows.

    import torchdx.fleet
    s = torchdx.fleet.summary("out/")          # Parquet from torchdx.ray, a ray Dataset,
    print(s.to_text())                         # a pyarrow Table, a pandas DataFrame, ...
    s.write_html("fleet.html")                 # one self-contained page, inline SVG charts

    torchdx fleet summarize out/ [more.parquet report.json ...] [--html fleet.html]
    torchdx fleet diagnose /logs/2026-04-1*/ --out out/      # on Ray (torchdx[ray])

What it computes:

* **families**: jobs per failure family (the family of the job's initiating finding), the
  share of jobs, jobs where the family appears at all, findings; and the **trend** when
  the rows carry dates (a ``date``/``time`` column, or a ``date`` group of
  ``job_id_pattern`` matched against the path): counts per day (span up to 14 days) or
  ISO week, and the last period's share against the earlier periods' (one-sided binomial
  test; a rise or fall is claimed at p < 0.05 after Bonferroni over the families).
  Without dates it says ``no dates``.
* **culprit kinds**: jobs and findings per ``culprit.kind`` (collateral findings excluded).
* **hosts** (and ``node`` when such a column exists) over-represented in hardware faults
  and NCCL failures: for each host, ``k`` = jobs with a non-collateral finding of the
  group on that host, ``n`` = the sum over hosts, ``p0`` = the host's share of all job
  appearances (jobs whose rows name it / the sum over hosts). One-sided binomial
  ``P(X >= k | n, p0)``; flagged when ``p * m < 0.01`` (Bonferroni over the ``m`` hosts
  tested).
* **repeating jobs**: job ids that differ only by an attempt suffix (``-attempt2``,
  ``_retry1``, ``.try3``, ...; or ``repeat_key``), whose initiating failure has the same
  family and culprit in two or more attempts.
"""

from __future__ import annotations

import argparse
import datetime as dt
import html
import json
import math
import os
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from torchdx._rows import iso_date, rows_from_report

__all__ = ["summary", "FleetSummary", "load_rows", "binom_sf", "main"]

HOST_GROUPS: dict[str, Callable[[str], bool]] = {
    "hardware-fault": lambda fam: fam == "hardware-fault",
    "nccl": lambda fam: fam.startswith("nccl"),
}
ATTEMPT_SUFFIX = re.compile(r"(?i)[-_.]?(?:attempt|retry|restart|try|rerun)[-_]?\d+$")
ALPHA = 0.01
TREND_ALPHA = 0.05
_NEEDED = ("job_id", "path", "date", "time", "family", "rule_id", "role", "rank", "host", "node", "culprit_kind", "culprit_expr", "confidence", "finding_index", "torchdx_version", "first_line", "summary")


# ------------------------------------------------------------------ statistics


def _log_binom_pmf(k: int, n: int, p: float) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * math.log(p) + (n - k) * math.log1p(-p)


def binom_sf(k: int, n: int, p: float) -> float:
    """``P(X >= k)`` for ``X ~ Binomial(n, p)``, exact (log-space sum)."""
    if k <= 0:
        return 1.0
    if k > n or p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    logs = [_log_binom_pmf(i, n, p) for i in range(k, n + 1)]
    m = max(logs)
    return min(1.0, math.exp(m) * sum(math.exp(x - m) for x in logs))


def binom_cdf(k: int, n: int, p: float) -> float:
    """``P(X <= k)``."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return max(0.0, 1.0 - binom_sf(k + 1, n, p))


# ------------------------------------------------------------------ loading


def _clean(v):
    if v is None:
        return None
    if isinstance(v, float) and v != v:  # NaN from pandas
        return None
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):  # numpy scalar
        try:
            return v.item()
        except Exception:
            return v
    return v


def _from_arrow(table) -> list[dict]:
    cols = [c for c in table.column_names if c in _NEEDED]
    return table.select(cols).to_pylist()


def _report_json_rows(path: Path) -> list[dict]:
    text = path.read_text()
    d = json.loads(text)
    if d.get("schema", "").split("@")[0] != "torchdx/report":
        raise ValueError(f"{path}: not a torchdx report (schema {d.get('schema')!r})")
    job = path.name[: -len(".json")] if path.name.endswith(".json") else path.stem
    if job.endswith(".report"):
        job = job[: -len(".report")]
    return rows_from_report(d, "", job_id=job, path=str(path))


def _read_path(p: Path) -> list[dict]:
    if p.is_dir():
        parquet = sorted(p.rglob("*.parquet"))
        jsons = sorted(p.rglob("*.json"))
        rows: list[dict] = []
        if parquet:
            rows += _from_arrow(_read_parquet_files(parquet))
        for j in jsons:
            try:
                rows += _report_json_rows(j)
            except (ValueError, json.JSONDecodeError):
                continue  # not a report (a manifest, ray metadata): skip
        if not parquet and not jsons:
            raise FileNotFoundError(f"{p}: no .parquet or report .json files")
        return rows
    if p.suffix == ".parquet":
        return _from_arrow(_read_parquet_files([p]))
    if p.suffix == ".json":
        return _report_json_rows(p)
    raise ValueError(f"{p}: expected Parquet files/folders or torchdx report JSON files")


def _read_parquet_files(files: list[Path]):
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    tables = []
    for f in files:
        t = pq.read_table(f)
        tables.append(t.select([c for c in t.column_names if c in _NEEDED]))
    return pa.concat_tables(tables, promote_options="default")


def load_rows(source: Any) -> list[dict]:
    """Rows as dicts from any accepted source (see :func:`summary`)."""
    if isinstance(source, (str, os.PathLike)):
        return _read_path(Path(source))
    mod = type(source).__module__
    if mod.startswith("ray.data") or hasattr(source, "to_arrow_refs"):
        import pyarrow as pa  # noqa: PLC0415
        import ray  # noqa: PLC0415

        cols = [c for c in source.columns() if c in _NEEDED]
        tables = ray.get(source.select_columns(cols).to_arrow_refs())
        return _from_arrow(pa.concat_tables(tables)) if tables else []
    if mod.startswith("pyarrow"):
        return _from_arrow(source)
    if mod.startswith("pandas"):
        cols = [c for c in source.columns if c in _NEEDED]
        return [{k: _clean(v) for k, v in r.items()} for r in source[cols].to_dict("records")]
    if isinstance(source, (list, tuple)):
        if source and all(isinstance(x, (str, os.PathLike)) for x in source):
            out: list[dict] = []
            for x in source:
                out += _read_path(Path(x))
            return out
        return [{k: _clean(v) for k, v in dict(r).items() if k != "report_json"} for r in source]
    raise TypeError(f"cannot summarize a {type(source)!r}")


# ------------------------------------------------------------------ model


@dataclass
class FamilyStat:
    family: str
    jobs: int  # jobs this family initiated (or, without an initiating finding, was first)
    share: float  # of all jobs
    jobs_any: int  # jobs where it appears in any role
    findings: int
    per_period: list[int] = field(default_factory=list)
    trend: str = ""  # "up", "down", "flat", or "" without dates
    trend_pp: float | None = None  # last period's share minus the earlier periods', points
    trend_p: float | None = None  # one-sided binomial p of the last period's count
    trend_p_adjusted: float | None = None  # Bonferroni over the families tested


@dataclass
class CulpritStat:
    kind: str
    jobs: int
    findings: int
    families: list[str]
    example_expr: str | None


@dataclass
class HostStat:
    group: str  # hardware-fault | nccl
    key: str  # host | node
    host: str
    events: int  # k: jobs with a group finding on this host
    total_events: int  # n
    jobs: int  # jobs that name this host
    share: float  # p0
    expected: float  # n * p0
    p_value: float
    p_adjusted: float  # Bonferroni
    flagged: bool


@dataclass
class RepeatStat:
    base: str
    attempts: int  # jobs under this base
    repeats: int  # attempts with this same failure
    family: str
    culprit_kind: str | None
    culprit_expr: str | None
    jobs: list[str]
    first_date: str | None
    last_date: str | None


@dataclass
class FleetSummary:
    jobs: int
    rows: int
    failed_jobs: int
    clean_jobs: int
    error_jobs: int
    periods: list[str]
    period_kind: str  # "day", "week" or "none"
    jobs_per_period: list[int]
    families: list[FamilyStat]
    culprits: list[CulpritStat]
    hosts: list[HostStat]
    host_groups_tested: dict[str, dict]  # group/key -> {"n": events, "m": hosts tested, "unknown": jobs without host}
    repeats: list[RepeatStat]
    versions: list[str]
    alpha: float = ALPHA

    # -------------------------------------------------------------- output

    @property
    def flagged_hosts(self) -> list[HostStat]:
        return [h for h in self.hosts if h.flagged]

    def to_dict(self) -> dict:
        from dataclasses import asdict  # noqa: PLC0415

        return asdict(self)

    def to_text(self, top: int = 20) -> str:
        out: list[str] = []
        head = f"torchdx fleet summary: {self.jobs} jobs ({self.failed_jobs} with a failure, {self.clean_jobs} without, {self.error_jobs} unreadable), {self.rows} rows"
        if self.versions:
            head += f"; torchdx {', '.join(self.versions)}"
        out.append(head)
        if self.period_kind == "none":
            out.append("Trend: no dates (add a `date` column, or a `date` group to the job id pattern)")
        else:
            out.append(f"Periods ({self.period_kind}): " + ", ".join(f"{p} ({n} jobs)" for p, n in zip(self.periods, self.jobs_per_period)))
        out.append("")
        out.append("Families (by jobs they initiated)")
        rows = []
        for f in self.families[:top]:
            tr = "no dates" if self.period_kind == "none" else _trend_text(f)
            rows.append([f.family, f.jobs, f"{100 * f.share:.1f}%", f.jobs_any, f.findings, " ".join(map(str, f.per_period)) or "-", tr])
        out += _table(["family", "jobs", "share", "jobs(any)", "findings", f"per {self.period_kind}" if self.period_kind != "none" else "per period", "trend"], rows, "lrrrrll")
        if len(self.families) > top:
            out.append(f"  ... {len(self.families) - top} more families")
        out.append("")
        out.append("Top culprit kinds")
        out += _table(
            ["culprit kind", "jobs", "findings", "families", "example"],
            [[c.kind, c.jobs, c.findings, ", ".join(c.families), _short(c.example_expr or "", 40)] for c in self.culprits[:top]],
            "lrrll",
        )
        out.append("")
        out.append(f"Hosts over-represented in hardware faults and NCCL failures (one-sided binomial, Bonferroni, flagged at p_adj < {self.alpha})")
        for g, info in self.host_groups_tested.items():
            out.append(f"  {g}: n={info['n']} events over m={info['m']} {info['key']}s tested; {info['unknown']} events without a {info['key']}")
        hs = sorted(self.hosts, key=lambda h: (not h.flagged, h.p_value))[: max(top, len(self.flagged_hosts))]
        if hs:
            out += _table(
                ["group", "host", "events", "expected", "jobs", "share", "p", "p_adj", "flag"],
                [[f"{h.group}/{h.key}" if h.key != "host" else h.group, h.host, h.events, f"{h.expected:.2f}", h.jobs, f"{100 * h.share:.1f}%", _p(h.p_value), _p(h.p_adjusted), "FLAG" if h.flagged else ""] for h in hs],
                "llrrrrrrl",
            )
        else:
            out.append("  no host information in the rows (hosts come from torchrun's Root Cause summary, or the job id pattern's `host` group)")
        out.append("")
        out.append("Jobs whose failure repeats across attempts")
        if self.repeats:
            out += _table(
                ["job", "attempts", "same failure", "family", "culprit", "first", "last"],
                [[r.base, r.attempts, r.repeats, r.family, _short(" ".join(x for x in (r.culprit_kind, r.culprit_expr) if x) or "-", 40), r.first_date or "-", r.last_date or "-"] for r in self.repeats[:top]],
                "lrrllll",
            )
            if len(self.repeats) > top:
                out.append(f"  ... {len(self.repeats) - top} more")
        else:
            out.append("  none")
        return "\n".join(out) + "\n"

    def to_html(self, title: str = "torchdx fleet summary") -> str:
        return _render_html(self, title)

    def write_html(self, path: str | os.PathLike, title: str = "torchdx fleet summary") -> str:
        Path(path).write_text(self.to_html(title), encoding="utf-8")
        return os.fspath(path)


def _trend_text(f: FamilyStat) -> str:
    if f.trend_pp is None:
        return "-"
    arrow = {"up": "up", "down": "down"}.get(f.trend, "flat")
    return f"{arrow} {f.trend_pp:+.1f}pp (p_adj={_p(f.trend_p_adjusted)})" if f.trend in ("up", "down") else f"flat {f.trend_pp:+.1f}pp"


def _p(p: float | None) -> str:
    if p is None:
        return "-"
    if p >= 0.001:
        return f"{p:.3f}"
    return f"{p:.1e}"


def _short(s: str, n: int) -> str:
    s = s.replace("\n", " ")
    return s if len(s) <= n else s[: n - 1] + "…"


def _table(headers: list[str], rows: list[list], align: str) -> list[str]:
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def fmt(r):
        return "  " + "  ".join((c.rjust(w) if a == "r" else c.ljust(w)) for c, w, a in zip(r, widths, align)).rstrip()

    return [fmt(cells[0]), "  " + "  ".join("-" * w for w in widths)] + [fmt(r) for r in cells[1:]]


# ------------------------------------------------------------------ summary


def _period_of(date: str, kind: str) -> str:
    d = dt.date.fromisoformat(date)
    if kind == "day":
        return date
    y, w, _ = d.isocalendar()
    return f"{y}-W{w:02d}"


def _all_periods(dates: list[str], kind: str) -> list[str]:
    lo, hi = dt.date.fromisoformat(min(dates)), dt.date.fromisoformat(max(dates))
    out, d = [], lo
    while d <= hi:
        p = _period_of(d.isoformat(), kind)
        if not out or out[-1] != p:
            out.append(p)
        d += dt.timedelta(days=1)
    return out


def summary(
    rows: Any,
    *,
    job_id_pattern: str | None = None,
    period: str = "auto",
    repeat_key: Callable[[str], str] | str | None = None,
    host_groups: dict[str, Callable[[str], bool]] | None = None,
    host_roles: Iterable[str] = ("initiating", "independent"),
    alpha: float = ALPHA,
) -> FleetSummary:
    """Summarize finding rows (the output of ``torchdx.ray``).

    ``rows``: a ``ray.data.Dataset``, a ``pyarrow.Table``, a ``pandas.DataFrame``, a list
    of row dicts, or a path (or list of paths) to Parquet files/folders or report JSON
    files. ``job_id_pattern``: a regex with an optional named group ``date`` searched in
    ``path`` (then ``job_id``) for rows without a ``date``/``time``. ``period``: ``"day"``,
    ``"week"`` or ``"auto"`` (days up to a 14-day span, else ISO weeks). ``repeat_key``:
    maps a job id to the id its attempts share (a callable, or a regex whose match is
    removed); default strips an attempt suffix. ``host_roles``: the roles counted as a
    host's own failure (collateral echoes excluded by default).
    """
    data = load_rows(rows)
    pat = re.compile(job_id_pattern) if job_id_pattern else None
    host_groups = host_groups or HOST_GROUPS
    host_roles = set(host_roles)
    if repeat_key is None:
        base_of = lambda j: ATTEMPT_SUFFIX.sub("", j) or j  # noqa: E731
    elif isinstance(repeat_key, str):
        rk = re.compile(repeat_key)
        base_of = lambda j: rk.sub("", j) or j  # noqa: E731
    else:
        base_of = repeat_key

    # group rows by job
    jobs: dict[tuple, list[dict]] = defaultdict(list)
    for r in data:
        jobs[(r.get("job_id"), r.get("path"))].append(r)
    versions = sorted({r["torchdx_version"] for r in data if r.get("torchdx_version")})

    # dates
    def job_date(rs: list[dict]) -> str | None:
        for r in rs:
            d = iso_date(r.get("date")) or iso_date(r.get("time"))
            if d:
                return d
        if pat is not None:
            for k in ("path", "job_id"):
                v = rs[0].get(k)
                m = pat.search(str(v).replace(os.sep, "/")) if v else None
                if m and "date" in m.groupdict() and iso_date(m.group("date")):
                    return iso_date(m.group("date"))
        return None

    jdate = {k: job_date(rs) for k, rs in jobs.items()}
    dated = [d for d in jdate.values() if d]
    if not dated:
        kind = "none"
        periods: list[str] = []
    else:
        span = (dt.date.fromisoformat(max(dated)) - dt.date.fromisoformat(min(dated))).days + 1
        kind = period if period in ("day", "week") else ("day" if span <= 14 else "week")
        periods = _all_periods(dated, kind)
    pidx = {p: i for i, p in enumerate(periods)}
    jobs_per_period = [0] * len(periods)
    for k, d in jdate.items():
        if d:
            jobs_per_period[pidx[_period_of(d, kind)]] += 1

    # the failure of each job
    def primary(rs: list[dict]) -> dict | None:
        fs = [r for r in rs if r.get("family")]
        if not fs:
            return None
        for role in ("initiating", "independent", "collateral"):
            c = [r for r in fs if r.get("role") == role]
            if c:
                return min(c, key=lambda r: r.get("finding_index") if r.get("finding_index") is not None else 0)
        return fs[0]

    prim = {k: primary(rs) for k, rs in jobs.items()}
    n_jobs = len(jobs)
    failed = sum(1 for p in prim.values() if p)
    errors = sum(1 for rs in jobs.values() if any(r.get("role") == "error" for r in rs))
    clean = sum(1 for k, rs in jobs.items() if not prim[k] and not any(r.get("role") == "error" for r in rs))

    # families
    fam_jobs: Counter = Counter()
    fam_any: Counter = Counter()
    fam_findings: Counter = Counter()
    fam_period: dict[str, list[int]] = defaultdict(lambda: [0] * len(periods))
    for k, rs in jobs.items():
        p = prim[k]
        if p:
            fam_jobs[p["family"]] += 1
            if jdate[k]:
                fam_period[p["family"]][pidx[_period_of(jdate[k], kind)]] += 1
        for fam in {r["family"] for r in rs if r.get("family")}:
            fam_any[fam] += 1
        for r in rs:
            if r.get("family"):
                fam_findings[r["family"]] += 1
    families = []
    for fam in sorted(fam_any, key=lambda f: (-fam_jobs[f], -fam_any[f], f)):
        fs = FamilyStat(fam, fam_jobs[fam], fam_jobs[fam] / n_jobs if n_jobs else 0.0, fam_any[fam], fam_findings[fam])
        if periods:
            fs.per_period = list(fam_period[fam])
            _trend(fs, jobs_per_period)
        families.append(fs)
    # a rise or fall is claimed only past Bonferroni over the families tested
    m_trend = sum(1 for f in families if f.trend_p is not None)
    for f in families:
        if f.trend_p is not None:
            f.trend_p_adjusted = min(1.0, f.trend_p * m_trend)
            if f.trend_p_adjusted >= TREND_ALPHA:
                f.trend = "flat"

    # culprit kinds
    ck_jobs: Counter = Counter()
    ck_findings: Counter = Counter()
    ck_fams: dict[str, Counter] = defaultdict(Counter)
    ck_expr: dict[str, Counter] = defaultdict(Counter)
    for k, rs in jobs.items():
        seen = set()
        for r in rs:
            ck = r.get("culprit_kind")
            if not ck or r.get("role") == "collateral":
                continue
            ck_findings[ck] += 1
            ck_fams[ck][r.get("family")] += 1
            if r.get("culprit_expr"):
                ck_expr[ck][r["culprit_expr"]] += 1
            seen.add(ck)
        for ck in seen:
            ck_jobs[ck] += 1
    def top(c: Counter, n: int) -> list:  # by count, ties by name: the same whatever the rows' order
        return [k for k, _ in sorted(c.items(), key=lambda kv: (-kv[1], str(kv[0])))[:n]]

    culprits = [
        CulpritStat(ck, ck_jobs[ck], ck_findings[ck], top(ck_fams[ck], 3), (top(ck_expr[ck], 1) or [None])[0])
        for ck in sorted(ck_jobs, key=lambda c: (-ck_jobs[c], -ck_findings[c], c))
    ]

    # hosts / nodes
    hosts: list[HostStat] = []
    tested: dict[str, dict] = {}
    for key in ("host", "node"):
        exposure: Counter = Counter()
        for rs in jobs.values():
            for h in {r.get(key) for r in rs if r.get(key)}:
                exposure[h] += 1
        if not exposure:
            continue
        total_exp = sum(exposure.values())
        for g, pred in host_groups.items():
            events: Counter = Counter()
            unknown = 0
            for rs in jobs.values():
                hit = [r for r in rs if r.get("family") and pred(r["family"]) and r.get("role") in host_roles]
                hs = {r.get(key) for r in hit if r.get(key)}
                if hit and not hs:
                    unknown += 1
                for h in hs:
                    events[h] += 1
            n = sum(events.values())
            m = len(exposure)
            label = g if key == "host" else f"{g}/{key}"
            tested[label] = {"n": n, "m": m, "unknown": unknown, "key": key}
            if n == 0:
                continue
            for h, ex in exposure.items():
                p0 = ex / total_exp
                k_ = events.get(h, 0)
                pv = binom_sf(k_, n, p0)
                pa = min(1.0, pv * m)
                if k_ == 0:
                    continue
                hosts.append(HostStat(g, key, h, k_, n, ex, p0, n * p0, pv, pa, pa < alpha))
    hosts.sort(key=lambda h: (h.group, h.key, h.p_value, h.host))

    # repeats
    by_base: dict[str, list[tuple]] = defaultdict(list)
    for k in jobs:
        if k[0] is not None:
            by_base[base_of(str(k[0]))].append(k)
    repeats = []
    for base, ks in by_base.items():
        if len(ks) < 2:
            continue
        sig: dict[tuple, list[tuple]] = defaultdict(list)
        for k in ks:
            p = prim[k]
            if p:
                sig[(p["family"], p.get("culprit_kind"), p.get("culprit_expr"))].append(k)
        for (fam, ck, ce), kk in sig.items():
            if len(kk) >= 2:
                ds = sorted(d for d in (jdate[x] for x in kk) if d)
                repeats.append(RepeatStat(base, len(ks), len(kk), fam, ck, ce, sorted(str(x[0]) for x in kk), ds[0] if ds else None, ds[-1] if ds else None))
    repeats.sort(key=lambda r: (-r.repeats, r.base))

    return FleetSummary(
        jobs=n_jobs,
        rows=len(data),
        failed_jobs=failed,
        clean_jobs=clean,
        error_jobs=errors,
        periods=periods,
        period_kind=kind,
        jobs_per_period=jobs_per_period,
        families=families,
        culprits=culprits,
        hosts=hosts,
        host_groups_tested=tested,
        repeats=repeats,
        versions=versions,
        alpha=alpha,
    )


def _trend(fs: FamilyStat, jobs_per_period: list[int]) -> None:
    """Last period's share against the earlier periods' (one-sided binomial)."""
    if len(jobs_per_period) < 2 or jobs_per_period[-1] == 0:
        fs.trend = "flat"
        return
    k_last, n_last = fs.per_period[-1], jobs_per_period[-1]
    k_prev, n_prev = sum(fs.per_period[:-1]), sum(jobs_per_period[:-1])
    if n_prev == 0:
        fs.trend = "flat"
        return
    rate = k_prev / n_prev
    fs.trend_pp = 100 * (k_last / n_last - rate)
    # a family never seen before is tested against half a job's worth of earlier rate,
    # so one new job is not a "rise" by itself
    rate = max(rate, 0.5 / (n_prev + 1))
    if k_last / n_last >= rate:
        p, up = binom_sf(k_last, n_last, rate), True
    else:
        p, up = binom_cdf(k_last, n_last, rate), False
    fs.trend_p = p
    fs.trend = "up" if up else "down"  # summary() sets "flat" unless Bonferroni-significant


# ------------------------------------------------------------------ HTML

_PALETTE = ["#4c78a8", "#f58518", "#54a24b", "#b279a2", "#72b7b2", "#eeca3b", "#9d755d", "#bab0ac"]
_FLAG = "#e45756"
_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1180px;color:#222;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta{color:#555}.note{color:#666;font-size:12.5px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}th,td{padding:3px 10px;border-bottom:1px solid #eee;text-align:left}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}td:first-child{white-space:nowrap}tr.flag td{background:#fde8e8;font-weight:600}
svg.chart{display:block;margin:6px 0 10px;background:#fcfcfc;border:1px solid #eee}
svg text{font:12px system-ui,sans-serif;fill:#333}svg .axis{stroke:#999;stroke-width:1}
.legend span{display:inline-block;margin-right:14px;font-size:12.5px}.legend i{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px}
.callout{border-left:4px solid #e45756;background:#fff6f5;padding:6px 14px;margin:12px 0}.callout ul{margin:4px 0;padding-left:20px}
code{font:12.5px ui-monospace,monospace;background:#f4f4f4;padding:0 3px}
"""


def _e(s: Any) -> str:
    return html.escape("" if s is None else str(s), quote=True)


def _hbar(chart: str, items: list[tuple[str, float, str]], width: int = 1100, label_w: int = 260, fmt=lambda v: f"{v:g}") -> str:
    """Horizontal bar chart: items are (label, value, colour)."""
    if not items:
        return ""
    bar_h, gap, top = 18, 6, 8
    h = top * 2 + len(items) * (bar_h + gap)
    vmax = max(v for _, v, _ in items) or 1
    plot_w = width - label_w - 70
    parts = [f'<svg class="chart" data-chart="{_e(chart)}" width="{width}" height="{h}" viewBox="0 0 {width} {h}" role="img">']
    for i, (lab, v, col) in enumerate(items):
        y = top + i * (bar_h + gap)
        w = max(1.0, plot_w * v / vmax) if v > 0 else 0.0
        parts.append(f'<text x="{label_w - 8}" y="{y + 13}" text-anchor="end">{_e(_short(lab, 38))}</text>')
        parts.append(f'<rect class="bar" data-label="{_e(lab)}" data-value="{v:g}" x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{col}"><title>{_e(lab)}: {_e(fmt(v))}</title></rect>')
        parts.append(f'<text x="{label_w + w + 6:.1f}" y="{y + 13}">{_e(fmt(v))}</text>')
    parts.append(f'<line class="axis" x1="{label_w}" y1="{top - 2}" x2="{label_w}" y2="{h - top + 2}"/>')
    parts.append("</svg>")
    return "".join(parts)


def _stacked(chart: str, periods: list[str], series: list[tuple[str, list[int], str]], totals: list[int], width: int = 1100, height: int = 300) -> str:
    """Stacked columns per period; series: (name, counts per period, colour)."""
    if not periods:
        return ""
    left, bottom, top = 50, 40, 12
    plot_w, plot_h = width - left - 20, height - bottom - top
    vmax = max(totals) or 1
    step = plot_w / len(periods)
    bw = max(2.0, min(60.0, step * 0.7))
    parts = [f'<svg class="chart" data-chart="{_e(chart)}" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">']
    for t in range(5):
        v = vmax * t / 4
        y = top + plot_h - plot_h * t / 4
        parts.append(f'<line class="axis" x1="{left}" y1="{y:.1f}" x2="{width - 20}" y2="{y:.1f}" stroke-opacity="0.25"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{v:.0f}</text>')
    every = max(1, math.ceil(len(periods) / 16))
    for i, p in enumerate(periods):
        x = left + i * step + (step - bw) / 2
        y = top + plot_h
        for name, counts, col in series:
            c = counts[i]
            if c <= 0:
                continue
            hh = plot_h * c / vmax
            y -= hh
            parts.append(f'<rect class="bar" data-label="{_e(name)}" data-period="{_e(p)}" data-value="{c}" x="{x:.1f}" y="{y:.1f}" width="{bw:.1f}" height="{hh:.1f}" fill="{col}"><title>{_e(p)} {_e(name)}: {c}</title></rect>')
        if i % every == 0:
            parts.append(f'<text x="{x + bw / 2:.1f}" y="{top + plot_h + 16}" text-anchor="middle">{_e(p[5:] if len(p) == 10 else p)}</text>')
    parts.append(f'<line class="axis" x1="{left}" y1="{top + plot_h}" x2="{width - 20}" y2="{top + plot_h}"/>')
    parts.append("</svg>")
    return "".join(parts)


def _html_table(headers: list[str], rows: list[list], numeric: str = "", row_class: list[str] | None = None) -> str:
    h = "".join(f'<th class="n">{_e(x)}</th>' if i < len(numeric) and numeric[i] == "r" else f"<th>{_e(x)}</th>" for i, x in enumerate(headers))
    body = []
    for j, r in enumerate(rows):
        cls = f' class="{row_class[j]}"' if row_class and row_class[j] else ""
        tds = "".join(f'<td class="n">{_e(c)}</td>' if i < len(numeric) and numeric[i] == "r" else f"<td>{_e(c)}</td>" for i, c in enumerate(r))
        body.append(f"<tr{cls}>{tds}</tr>")
    return f"<table><thead><tr>{h}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _render_html(s: FleetSummary, title: str) -> str:
    P = []
    P.append("<!DOCTYPE html>")
    P.append('<html lang="en"><head><meta charset="utf-8">')
    # No request may leave the page: the policy forbids every fetch, and the icon link
    # stops the browser from asking for /favicon.ico.
    P.append("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">")
    P.append('<link rel="icon" href="data:,">')
    P.append(f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>")
    P.append(f"<h1>{_e(title)}</h1>")
    meta = f"{s.jobs} jobs: {s.failed_jobs} with a failure, {s.clean_jobs} without, {s.error_jobs} unreadable; {s.rows} rows"
    if s.versions:
        meta += f"; torchdx {', '.join(s.versions)}"
    P.append(f'<p class="meta">{_e(meta)}</p>')
    # what needs a person first: flagged hosts, the families on the rise, repeats
    notes = []
    for h in sorted(s.flagged_hosts, key=lambda h: h.p_adjusted):
        notes.append(f"<li><b>{_e(h.host)}</b> is over-represented in {_e(h.group)} failures: {h.events} of {h.total_events} events where {h.expected:.1f} were expected from its {100 * h.share:.1f}% of jobs (p<sub>Bonferroni</sub> = {_e(_p(h.p_adjusted))}).</li>")
    for f in s.families:
        if f.trend == "up":
            notes.append(f"<li><b>{_e(f.family)}</b> is rising: {f.trend_pp:+.1f} points of jobs in {_e(s.periods[-1])} (p<sub>Bonferroni</sub> = {_e(_p(f.trend_p_adjusted))}).</li>")
    if s.repeats:
        notes.append(f'<li>{len(s.repeats)} job{"s" if len(s.repeats) != 1 else ""} failed the same way in two or more attempts (<a href="#repeats">below</a>).</li>')
    if notes:
        P.append('<div class="callout" id="attention"><b>Needs attention</b><ul>' + "".join(notes) + "</ul></div>")

    # families
    P.append('<h2 id="families">Failure families</h2>')
    fams = s.families[:25]
    P.append(_hbar("families", [(f.family, f.jobs, _PALETTE[0]) for f in fams if f.jobs > 0]))
    P.append(
        _html_table(
            ["family", "jobs", "share", "jobs (any role)", "findings", "trend"],
            [[f.family, f.jobs, f"{100 * f.share:.1f}%", f.jobs_any, f.findings, "no dates" if s.period_kind == "none" else _trend_text(f)] for f in fams],
            "lrrrrl",
        )
    )

    # trend
    P.append(f'<h2 id="trend">Trend{" per " + s.period_kind if s.period_kind != "none" else ""}</h2>')
    if s.period_kind == "none":
        P.append('<p class="note" id="no-dates">No dates: the rows have no <code>date</code>/<code>time</code> column and the job id pattern has no <code>date</code> group, so no trend is shown.</p>')
    else:
        top = [f for f in s.families if f.jobs > 0][:7]
        series = [(f.family, f.per_period, _PALETTE[i % len(_PALETTE)]) for i, f in enumerate(top)]
        other = [sum(x) for x in zip(*[f.per_period for f in s.families[len(top):]])] if len(s.families) > len(top) else [0] * len(s.periods)
        if any(other):
            series.append(("other families", other, "#cccccc"))
        totals = [sum(c[i] for _, c, _ in series) for i in range(len(s.periods))]
        P.append('<div class="legend">' + "".join(f'<span><i style="background:{c}"></i>{_e(n)}</span>' for n, _, c in series) + "</div>")
        P.append(_stacked("trend", s.periods, series, totals))
        P.append(f'<p class="note">Jobs per {s.period_kind}: ' + ", ".join(f"{_e(p)}: {n}" for p, n in zip(s.periods, s.jobs_per_period)) + ". Trend: the last period's share of jobs against the earlier periods' (one-sided binomial test; a rise or fall is claimed when p × families &lt; 0.05, Bonferroni).</p>")

    # culprits
    P.append('<h2 id="culprits">Top culprit kinds</h2>')
    cs = s.culprits[:20]
    if cs:
        P.append(_hbar("culprits", [(c.kind, c.jobs, _PALETTE[2]) for c in cs]))
        P.append(_html_table(["culprit kind", "jobs", "findings", "families", "example"], [[c.kind, c.jobs, c.findings, ", ".join(c.families), _short(c.example_expr or "", 60)] for c in cs], "lrrll"))
    else:
        P.append('<p class="note">No finding names a culprit.</p>')

    # hosts
    P.append('<h2 id="hosts">Hosts in hardware faults and NCCL failures</h2>')
    P.append(
        f'<p class="note">For each host: events = jobs with a non-collateral finding of the group on it; expected = events over all hosts × the host\'s share of all job appearances. '
        f"p = P(X ≥ events) for a binomial; flagged when p × (hosts tested) &lt; {s.alpha} (Bonferroni).</p>"
    )
    if not s.host_groups_tested:
        P.append('<p class="note" id="no-hosts">No host information in the rows.</p>')
    for g, info in s.host_groups_tested.items():
        hs = [h for h in s.hosts if (h.group if h.key == "host" else f"{h.group}/{h.key}") == g]
        hs.sort(key=lambda h: h.p_value)
        P.append(f"<h3>{_e(g)}: {info['n']} events, {info['m']} {_e(info['key'])}s tested, {info['unknown']} events without a {_e(info['key'])}</h3>")
        if not hs:
            P.append('<p class="note">No events.</p>')
            continue
        shown = hs[: max(12, sum(h.flagged for h in hs))]
        items = []
        for h in shown:
            items.append((f"{h.host} observed", h.events, _FLAG if h.flagged else _PALETTE[0]))
            items.append((f"{h.host} expected", round(h.expected, 2), "#bbbbbb"))
        P.append(_hbar(f"hosts-{g}", items, fmt=lambda v: f"{v:g}"))
        P.append(
            _html_table(
                ["host", "events", "expected", "jobs", "share of jobs", "p", "p (Bonferroni)", ""],
                [[h.host, h.events, f"{h.expected:.2f}", h.jobs, f"{100 * h.share:.1f}%", _p(h.p_value), _p(h.p_adjusted), "FLAGGED" if h.flagged else ""] for h in shown],
                "lrrrrrrl",
                ["flag" if h.flagged else "" for h in shown],
            )
        )

    # repeats
    P.append('<h2 id="repeats">Jobs whose failure repeats across attempts</h2>')
    if s.repeats:
        P.append(
            _html_table(
                ["job", "attempts", "same failure", "family", "culprit", "first", "last", "attempt ids"],
                [[r.base, r.attempts, r.repeats, r.family, " ".join(x for x in (r.culprit_kind, r.culprit_expr) if x) or "-", r.first_date or "-", r.last_date or "-", ", ".join(r.jobs)] for r in s.repeats[:50]],
                "lrrlllll",
            )
        )
    else:
        P.append('<p class="note">None.</p>')
    P.append('<p class="note">Generated by torchdx.fleet; self-contained (no scripts, no external resources).</p>')
    P.append("</body></html>")
    return "\n".join(P)


# ------------------------------------------------------------------ CLI


def main(argv: list[str] | None = None, prog: str = "python -m torchdx.fleet") -> int:
    """``torchdx fleet ...`` (the console script hands ``fleet`` here) and
    ``python -m torchdx.fleet ...``: ``summarize`` and, with Ray, ``diagnose``."""
    ap = argparse.ArgumentParser(prog=prog, description="Diagnose many jobs' logs on Ray, and summarize what breaks across a fleet.")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    sp = sub.add_parser(
        "summarize",
        help="families and trend, culprit kinds, suspicious hosts, repeating jobs",
        description="Summarize finding rows: families by count and trend, top culprit kinds, hosts over-represented in hardware-fault and NCCL findings, jobs whose failure repeats.",
    )
    sp.add_argument("reports", nargs="+", help="Parquet files/folders written by `torchdx fleet diagnose` or torchdx.ray, or report JSON files (`torchdx diagnose --format json`, one per job; job id = file stem)")
    sp.add_argument("--html", metavar="FILE", help="also write a self-contained HTML page here (inline SVG charts, no script, no network)")
    sp.add_argument("--job-id-pattern", metavar="REGEX", help="a regex with a `date` group, searched in each row's path, for rows without dates")
    sp.add_argument("--period", choices=["auto", "day", "week"], default="auto")
    sp.add_argument("--top", type=int, default=20, help="rows per table in the text output (default 20)")
    sp.add_argument("--json", action="store_true", help="print the summary as JSON instead of tables")
    dp = sub.add_parser(
        "diagnose",
        help="diagnose every job's log on Ray Data and write the finding rows as Parquet",
        description="Diagnose every job under PATHS (log files, plain/.gz/.zst, and torchrun --log-dir folders, one job each) on a Ray cluster, and write one row per finding with Ray's Parquet sink. Needs `pip install \"torchdx[ray]\"`.",
    )
    dp.add_argument("paths", nargs="+", help="log files, folders (walked) and globs")
    dp.add_argument("--out", required=True, metavar="DIR", help="where to write the Parquet files (any path Ray's write_parquet takes)")
    dp.add_argument("--job-id-pattern", metavar="REGEX", help="a regex searched in each path with a named group `job` (optional `date` and `host`); default: the parent folder's name")
    dp.add_argument("--rules", metavar="DIR", help="add or override rules from this folder, as `torchdx diagnose --rules`")
    dp.add_argument("--address", help="the Ray cluster to connect to (default: RAY_ADDRESS, else a local Ray started for this run)")
    dp.add_argument("--concurrency", type=int, default=None, help="Diagnose actors (default: Ray's autoscaling pool)")
    dp.add_argument("--num-cpus", type=float, default=1, help="CPUs per actor (default 1)")
    a = ap.parse_args(argv)
    if a.cmd == "diagnose":
        return _diagnose_cmd(a)
    try:
        s = summary(list(a.reports), job_id_pattern=a.job_id_pattern, period=a.period)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ImportError as e:
        print(f"error: {e.name or 'a module'} is needed to read Parquet: pip install \"torchdx[fleet]\"", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(s.to_dict(), indent=1))
    else:
        sys.stdout.write(s.to_text(top=a.top))
    if a.html:
        s.write_html(a.html)
        print(f"wrote {a.html}", file=sys.stderr)
    return 0


def _diagnose_cmd(a: argparse.Namespace) -> int:
    try:
        import ray  # noqa: PLC0415

        import torchdx.ray as tdray  # noqa: PLC0415
    except ImportError as e:
        print(f"error: `torchdx fleet diagnose` needs Ray Data ({e}): pip install \"torchdx[ray]\"", file=sys.stderr)
        return 2
    try:
        files, dirs = tdray.find_jobs(a.paths)
    except FileNotFoundError as e:
        print(f"error: {e}: no such file or folder", file=sys.stderr)
        return 2
    if not files and not dirs:
        print(f"error: no job logs under {' '.join(a.paths)}", file=sys.stderr)
        return 2
    try:
        tdray.Diagnose(job_id_pattern=a.job_id_pattern, rules_dir=a.rules)  # a bad pattern or rules folder, before Ray starts
    except (ValueError, re.error) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    started = not ray.is_initialized()
    if started:
        ray.init(address=a.address or os.environ.get("RAY_ADDRESS") or None, logging_level="warning", log_to_driver=False)
    try:
        ds = tdray.read_jobs(files + dirs, job_id_pattern=a.job_id_pattern, rules_dir=a.rules, concurrency=a.concurrency, num_cpus=a.num_cpus)
        ds.write_parquet(a.out)
    finally:
        if started:
            ray.shutdown()
    print(f"{len(files) + len(dirs)} jobs ({len(dirs)} torchrun log folders) diagnosed into {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
