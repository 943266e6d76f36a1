"""The typed report objects, their renderings and the API's argument handling."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
from pathlib import Path

import pytest
from support import examples_dir, one_rule_dir

import torchdx
from torchdx import _markdown

MULTIRANK = examples_dir() / "multirank-nccl.log"
DEVICE = examples_dir() / "device-mismatch.log"

SCRIPTED = (
    "Traceback (most recent call last):\n"
    '  File "/home/u/train.py", line 42, in main\n'
    "    loss = loss_fn(out, labels)\n"
    "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu! "
    "(when checking argument for argument target in method wrapper_CUDA_nll_loss_forward)\n"
)


def test_typed_fields() -> None:
    r = torchdx.diagnose(SCRIPTED)
    assert r.schema == torchdx.SCHEMA == "torchdx/report@1"
    f = r.initiating
    assert isinstance(f, torchdx.Finding)
    assert (f.id, f.family, f.role, f.rank, f.collateral_of) == (
        "device-mismatch",
        "device-mismatch",
        "initiating",
        None,
        None,
    )
    assert f.is_initiating and not f.is_collateral and f.is_recognized
    assert f.confidence in ("certain", "likely", "possible")
    assert isinstance(f.location, torchdx.Location) and 1 <= f.location.line <= f.location.end_line
    assert isinstance(f.culprit, torchdx.Culprit) and f.culprit.kind == "label-not-moved" and f.culprit.expr == "labels"
    ev = f.evidence
    assert isinstance(ev, torchdx.Evidence)
    assert ev.exception == "RuntimeError" and ev.devices == ("cuda:0", "cpu") and ev.argument == "target"
    assert ev.failing_frame == "train.py:42" and ev.failing_code == "loss = loss_fn(out, labels)"
    assert ev["devices"] == ("cuda:0", "cpu") and "op" in ev and ev.get("nope") is None
    assert list(ev) == sorted(ev)  # the JSON's order
    assert ev.to_dict() == r.to_dict()["findings"][0]["evidence"]
    assert all(k not in ev.extra for k in ("exception", "message", "devices"))
    assert isinstance(f.checklist, tuple) and all(isinstance(c, str) for c in f.checklist)
    assert f.fix and f.verify and f.prevent and f.next_action
    assert r.input.bytes == len(SCRIPTED.encode()) and r.input.lines == 4 and r.input.ranks == ()
    assert isinstance(r.timeline[0], torchdx.TimelineEntry) and r.timeline[0].finding == 0
    assert f.summary_line() == f"{f.title} (device-mismatch)"
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.rank = 3  # type: ignore[misc]


def test_multirank_roles_and_ranks() -> None:
    r = torchdx.diagnose_file(MULTIRANK)
    head = r.initiating
    assert head is not None and head.rank is not None
    assert r.findings[0] is head and r.initiating_index == 0
    assert r.input.ranks == tuple(sorted(r.input.ranks)) and head.rank in r.input.ranks
    echoes = [f for f in r.findings if f.is_collateral]
    assert echoes and all(f.collateral_of == 0 for f in echoes)
    assert any(len(f.ranks) > 1 for f in echoes)
    assert head.summary_line().startswith(f"rank {head.rank}: ")
    assert f"on rank {head.rank}" in repr(r)


def test_no_failure() -> None:
    r = torchdx.diagnose("epoch 1 loss 0.3\nepoch 2 loss 0.2\n")
    assert r.findings == () and r.initiating is None and not r.has_useful_finding()
    assert repr(r) == "<torchdx.Report: 0 findings>"
    assert "No failure found" in str(r)


def test_useful_finding() -> None:
    assert torchdx.diagnose(SCRIPTED).has_useful_finding()
    plain = 'Traceback (most recent call last):\n  File "x.py", line 3, in <module>\n    raise ValueError("x")\nValueError: x\n'
    r = torchdx.diagnose(plain)
    assert r.initiating is not None and r.initiating.id == "unrecognized-exception" and not r.initiating.is_recognized
    assert not r.has_useful_finding()


def test_json_is_the_engines() -> None:
    r = torchdx.diagnose(SCRIPTED)
    j = r.to_json()
    assert isinstance(j, str) and json.loads(j)["schema"] == "torchdx/report@1"
    assert r.to_dict() == json.loads(j) and r.to_dict() is not r.to_dict()
    assert r == torchdx.diagnose(SCRIPTED.encode()) and r != torchdx.diagnose("")


def test_renderings() -> None:
    r = torchdx.diagnose_file(DEVICE)
    assert str(r) == r.to_text() == r.to_text(color=False)
    colored = r.to_text(color=True)
    assert "\x1b[" in colored and "\x1b[" not in r.to_text()
    md = r.to_markdown()
    assert r._repr_markdown_() == md and md.startswith("## ")
    html = r._repr_html_()
    assert html == r.to_html() and html.startswith('<div class="torchdx-report">')
    assert "<h2>" in html and "<table>" in html and "<pre><code" in html and 'type="checkbox"' in html
    assert r.initiating is not None and r.initiating.title.replace("'", "&#x27;") in html

    class P:  # IPython's pretty printer, for the terminal
        def __init__(self) -> None:
            self.out = ""

        def text(self, s: str) -> None:
            self.out += s

    p = P()
    r._repr_pretty_(p, False)
    assert p.out == r.to_text().rstrip("\n")


def test_html_escapes_log_text() -> None:
    evil = SCRIPTED.replace("labels)\n", 'labels)  # <script>alert(1)</script> & "q"\n', 1)
    html = torchdx.diagnose(evil).to_html()
    assert "<script>" not in html and "&lt;script&gt;" in html


@pytest.mark.parametrize(
    "md, want",
    [
        ("# T `a<b>`", "<h1>T <code>a&lt;b&gt;</code></h1>"),
        ("**Why.** x *y* `*z*`", "<p><strong>Why.</strong> x <em>y</em> <code>*z*</code></p>"),
        ("<img src=x onerror=alert(1)>", "<p>&lt;img src=x onerror=alert(1)&gt;</p>"),
        ("```python\nx = a < b\n```", '<pre><code class="language-python">x = a &lt; b\n</code></pre>'),
        ("| k | v |\n|---|---|\n| m | `a\\|b` |", "<td><code>a|b</code></td>"),
        (
            "- [ ] check\n- [x] done",
            '<li><input type="checkbox" disabled> check</li>\n<li><input type="checkbox" disabled checked> done</li>',
        ),
        ("1. one\n2. two", "<ol>\n<li>one</li>\n<li>two</li>\n</ol>"),
        ("* a\n* b", "<ul>\n<li>a</li>\n<li>b</li>\n</ul>"),
        ("[doc](https://pytorch.org/x?a=1&b=2)", '<a href="https://pytorch.org/x?a=1&amp;b=2">doc</a>'),
        ("[bad](javascript:alert(1))", "<p>[bad](javascript:alert(1))</p>"),
        ("a\\*b\\* tried_bytes x_y_z", "<p>a*b* tried_bytes x_y_z</p>"),
        ("\"q\" & 's'", "<p>&quot;q&quot; &amp; &#x27;s&#x27;</p>"),
    ],
)
def test_markdown_renderer(md: str, want: str) -> None:
    assert want in _markdown.to_html(md)


def test_diagnose_file_errors_and_paths(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        torchdx.diagnose_file(tmp_path / "missing.log")
    gz = tmp_path / "train.log.gz"
    gz.write_bytes(gzip.compress(SCRIPTED.encode()))
    assert torchdx.diagnose_file(gz).to_json() == torchdx.diagnose(SCRIPTED).to_json()
    plain = tmp_path / "train.log"
    plain.write_text(SCRIPTED)
    assert torchdx.diagnose_file(os.fspath(plain)) == torchdx.diagnose_file(plain)


def test_diagnose_types() -> None:
    assert torchdx.diagnose(bytearray(SCRIPTED.encode())) == torchdx.diagnose(memoryview(SCRIPTED.encode()))
    with pytest.raises(TypeError):
        torchdx.diagnose(42)  # type: ignore[arg-type]
    # a str with lone surrogates (a log decoded with errors="surrogateescape") is accepted
    raw = SCRIPTED.encode() + b"\xff\xfe tail\n"
    assert torchdx.diagnose(raw.decode("utf-8", "surrogateescape")) == torchdx.diagnose(raw)


def test_rules_dir(tmp_path: Path) -> None:
    extra = one_rule_dir(tmp_path)
    assert torchdx.diagnose(SCRIPTED, rules_dir=extra) == torchdx.diagnose(SCRIPTED, rules_dir=str(extra))
    assert torchdx.diagnose(SCRIPTED, rules_dir=extra).initiating.id == "device-mismatch"  # type: ignore[union-attr]
    bad = tmp_path / "rules"
    bad.mkdir()
    (bad / "broken.toml").write_text('id = "broken"\nfamily = \n')
    with pytest.raises(ValueError) as e:
        torchdx.diagnose(SCRIPTED, rules_dir=bad)
    assert "broken.toml" in str(e.value)
    with pytest.raises(ValueError):  # at construction or, at the latest, at finish()
        d = torchdx.Diagnoser(rules_dir=bad)
        d.feed(SCRIPTED)
        d.finish()


def test_version() -> None:
    assert isinstance(torchdx.__version__, str) and torchdx.__version__[0].isdigit()
    assert torchdx.__version__ == torchdx._native.VERSION


def test_public_names() -> None:
    for name in torchdx.__all__:
        assert hasattr(torchdx, name), name
    assert callable(torchdx.install) and callable(torchdx.uninstall)


def test_type_hints_resolve() -> None:
    import typing

    for cls in (
        torchdx.Report,
        torchdx.Finding,
        torchdx.Evidence,
        torchdx.Culprit,
        torchdx.Input,
        torchdx.TimelineEntry,
    ):
        assert typing.get_type_hints(cls)
    assert dataclasses.is_dataclass(torchdx.Finding) and dataclasses.is_dataclass(torchdx.Report)
