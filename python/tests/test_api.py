"""The Python API gives the CLI's report on every rule example, and typed objects lose nothing.

For each ``[[example]]`` of each ``rules/*.toml``: ``torchdx.diagnose(log).to_json()`` and
``torchdx diagnose --format json -`` (the installed console script) describe the same
report, field for field and in the same order; the typed ``Report`` carries every field
of the JSON; a ``match`` example makes its rule the initiating finding with the evidence
and culprit the example lists, and a ``no-match`` example produces no finding of its rule.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, List

import pytest
from support import examples_dir, load_toml, rules_dir, run

import torchdx


def _examples() -> List[Any]:
    out = []
    for path in sorted(rules_dir().glob("*.toml")):
        rule = load_toml(path)
        for i, ex in enumerate(rule.get("example", [])):
            out.append(pytest.param(rule["id"], ex, id=f"{rule['id']}--{ex.get('name', i)}"))
    assert len(out) > 100, "expected the rule pack's examples"
    return out


EXAMPLES = _examples()
# A `todo = true` example states what should happen and is a known miss: XPASS when fixed.
EXPECTATIONS = [
    pytest.param(*p.values, id=p.id, marks=[pytest.mark.xfail(reason="todo = true: a known miss", strict=False)])
    if p.values[1].get("todo")
    else p
    for p in EXAMPLES
]


def ordered(text: str) -> Any:
    """JSON with objects as lists of pairs: equality then checks key order too."""
    return json.loads(text, object_pairs_hook=lambda pairs: [(k, v) for k, v in pairs])


def typed_to_dict(report: torchdx.Report) -> dict:
    """Rebuild the JSON object from the typed fields alone (absent optional fields omitted)."""

    def plain(v: Any) -> Any:
        if isinstance(v, tuple):
            return [plain(x) for x in v]
        if isinstance(v, torchdx.Evidence):
            return {k: plain(x) for k, x in v.items()}
        if dataclasses.is_dataclass(v):
            return {f.name: plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
        return v

    findings = []
    for f in report.findings:
        d = plain(f)
        if not d["ranks"]:
            del d["ranks"]
        findings.append(d)
    inp = plain(report.input)
    if not inp["truncated_lines"]:
        del inp["truncated_lines"]
    out = {"schema": report.schema, "input": inp, "initiating": report.initiating_index, "findings": findings}
    if report.timeline:
        out["timeline"] = plain(report.timeline)
    return out


@pytest.mark.parametrize("rule_id, example", EXAMPLES)
def test_api_equals_cli(cli: str, rule_id: str, example: dict) -> None:
    log = example["log"]
    report = torchdx.diagnose(log)
    p = run([cli, "diagnose", "--format", "json", "-"], input=log.encode("utf-8"))
    assert p.returncode == 0, p.stderr.decode()
    cli_json = p.stdout.decode("utf-8")
    assert ordered(report.to_json()) == ordered(cli_json)
    # bytes in, same report
    assert torchdx.diagnose(log.encode("utf-8")).to_json() == report.to_json()
    # the typed objects carry every field of the JSON, with the same values
    assert typed_to_dict(report) == json.loads(cli_json)


@pytest.mark.parametrize("rule_id, example", EXPECTATIONS)
def test_example_expectations(rule_id: str, example: dict) -> None:
    report = torchdx.diagnose(example["log"])
    if example["expect"] == "no-match":
        assert all(f.id != rule_id for f in report.findings)
        return
    head = report.initiating
    assert head is not None and head.id == rule_id
    assert report.findings[report.initiating_index] is head

    def norm(v: Any) -> Any:
        return [norm(x) for x in v] if isinstance(v, (list, tuple)) else str(v)

    for key, want in example.get("evidence", {}).items():
        assert norm(head.evidence.get(key)) == norm(want), key
    if "culprit_kind" in example:
        assert head.culprit is not None and head.culprit.kind == example["culprit_kind"]


def _example_logs() -> List[Any]:
    d = examples_dir()
    logs = sorted(d.glob("*.log"))
    if not logs:
        return [pytest.param(None, id="no-examples", marks=pytest.mark.xfail(reason=f"no *.log in {d}", strict=True))]
    return [pytest.param(p, id=p.name) for p in logs]


@pytest.mark.parametrize("path", _example_logs())
def test_diagnose_file_equals_cli(cli: str, tmp_path: Path, path: Path) -> None:
    assert path is not None, "set TORCHDX_EXAMPLES_DIR to the repository's examples/ folder"
    data = path.read_bytes()
    via_file = torchdx.diagnose_file(path)  # os.PathLike
    p = run([cli, "diagnose", "--format", "json", str(path)])
    assert p.returncode == 0, p.stderr.decode()
    assert ordered(via_file.to_json()) == ordered(p.stdout.decode())
    assert via_file.to_json() == torchdx.diagnose_file(str(path)).to_json() == torchdx.diagnose(data).to_json()
    p = run([cli, "diagnose", "--format", "text", "--color", "never", str(path)])
    assert via_file.to_text() == str(via_file) == p.stdout.decode()
    p = run([cli, "diagnose", "--format", "md", str(path)])
    assert via_file.to_markdown() == via_file._repr_markdown_() == p.stdout.decode()
