"""Flatten one ``torchdx/report@1`` report into fleet rows (no dependencies).

Shared by ``torchdx.ray`` (reports made on the workers) and ``torchdx.fleet`` (report
JSON files read back). The rows are computed from the report's JSON itself, so a row can
never disagree with the ``report_json`` stored beside it.
"""

from __future__ import annotations

import re
from typing import Any

COLUMNS = (
    "job_id",
    "path",
    "date",
    "finding_index",
    "family",
    "rule_id",
    "role",
    "rank",
    "host",
    "confidence",
    "culprit_kind",
    "culprit_expr",
    "first_line",
    "summary",
    "torchdx_version",
    "report_json",
)


_EMPTY = dict.fromkeys(COLUMNS)


def iso_date(s: Any) -> str | None:
    """``2026-04-06``, ``20260406``, ``2026-04-06T10:00`` or ``2026-04-06_10:00`` -> ``2026-04-06``."""
    if s is None:
        return None
    if hasattr(s, "isoformat"):
        return s.isoformat()[:10]
    s = str(s)
    m = re.fullmatch(r"(\d{4})-?(\d{2})-?(\d{2})(?:[T_ ].*)?", s)
    return f"{m.group(1)}-{m.group(2)}-{m.group(3)}" if m else None


def _hosts(findings: list[dict]) -> tuple[dict[int, str], set[str]]:
    by_rank: dict[int, str] = {}
    hosts: set[str] = set()
    for f in findings:
        ev = f.get("evidence") or {}
        h = ev.get("host")
        if isinstance(h, str) and h:
            hosts.add(h)
            r = ev.get("rank", f.get("rank"))
            if isinstance(r, int) and not isinstance(r, bool):
                by_rank.setdefault(r, h)
    return by_rank, hosts


def finding_host(f: dict, by_rank: dict[int, str], hosts: set[str], fallback: str | None) -> str | None:
    """The host a finding ran on, from the report's own facts only:

    1. the finding's ``evidence.host`` (the engine sets it where the log names the host
       of the finding itself: torchrun's ``Root Cause`` summary, ``host : X``);
    2. the host another finding of the same report names for this finding's rank (the
       summary's ``host : X`` with ``rank : N``, for the traceback of rank N);
    3. for a finding with no rank, the one host the report names, when it names exactly
       one (a finding with a rank the log places on no host stays without one);
    4. ``fallback`` (the path pattern's ``host`` group), else null.
    """
    h = (f.get("evidence") or {}).get("host")
    if isinstance(h, str) and h:
        return h
    r = f.get("rank")
    if isinstance(r, int) and not isinstance(r, bool):
        return by_rank.get(r, fallback)
    if len(hosts) == 1:
        return next(iter(hosts))
    return fallback


def rows_from_report(
    report: dict,
    report_json: str,
    *,
    job_id: str,
    path: str,
    date: str | None = None,
    host_fallback: str | None = None,
    version: str | None = None,
) -> list[dict]:
    """One row per finding; one ``role = "none"`` row for a report without findings."""
    findings = report.get("findings") or []
    base = {
        **_EMPTY,
        "job_id": job_id,
        "path": path,
        "date": date,
        "torchdx_version": version,
        "report_json": report_json,
    }
    if not findings:
        return [dict(base, role="none", host=host_fallback)]
    by_rank, hosts = _hosts(findings)
    rows = []
    for i, f in enumerate(findings):
        c = f.get("culprit") or None
        loc = f.get("location") or {}
        rows.append(
            dict(
                base,
                finding_index=i,
                family=f.get("family"),
                rule_id=f.get("id"),
                role=f.get("role"),
                rank=f.get("rank"),
                host=finding_host(f, by_rank, hosts, host_fallback),
                confidence=f.get("confidence"),
                culprit_kind=c.get("kind") if c else None,
                culprit_expr=c.get("expr") if c else None,
                first_line=loc.get("line"),
                summary=(c.get("summary") if c else None) or f.get("title"),
            )
        )
    return rows


def error_row(*, job_id: str, path: str, date: str | None, host: str | None, message: str, version: str | None) -> dict:
    """The row of a job whose log could not be read or diagnosed."""
    return {**_EMPTY, "job_id": job_id, "path": path, "date": date, "role": "error", "host": host, "summary": message, "torchdx_version": version}
