"""The notebook path: IPython's InteractiveShell in process, a failing cell, the report after it.

Every output of the shell is recorded in order, the traceback (IPython writes it to
standard output) and the rich display data (a display publisher that records what a
Jupyter kernel would send), so the test sees what a notebook shows under the cell.
"""

from __future__ import annotations

import sys
from typing import Any, List, Tuple

import pytest

IPython = pytest.importorskip("IPython")
from IPython.core.displaypub import DisplayPublisher  # noqa: E402
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

import torchdx  # noqa: E402

Event = Tuple[str, Any]


class _Recorder(DisplayPublisher):
    def __init__(self, events: List[Event], **kw: Any) -> None:
        super().__init__(**kw)
        self.events = events

    def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kw) -> None:  # type: ignore[override]
        self.events.append(("display", dict(data)))


class _Stream:
    def __init__(self, name: str, events: List[Event]) -> None:
        self.name, self.events = name, events

    def write(self, s: str) -> int:
        if s:
            self.events.append((self.name, s))
        return len(s)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _session(cells: List[str], install: bool, before=None) -> Tuple[List[Event], List[Any], InteractiveShell]:
    """Run cells in a fresh shell; return the ordered outputs and each cell's result."""
    InteractiveShell.clear_instance()
    ip = InteractiveShell.instance(colors="nocolor") if _accepts_colors() else InteractiveShell.instance()
    events: List[Event] = []
    ip.display_pub = _Recorder(events, shell=ip)
    if before is not None:
        before(ip)
    if install:
        torchdx.install()
    results = []
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Stream("stdout", events), _Stream("stderr", events)
    try:
        for cell in cells:
            results.append(ip.run_cell(cell, store_history=True))
    finally:
        sys.stdout, sys.stderr = out, err
        torchdx.uninstall()
    return events, results, ip


def _accepts_colors() -> bool:
    return "colors" in InteractiveShell.class_traits()


@pytest.fixture(autouse=True)
def _fresh_shell():
    yield
    torchdx.uninstall()
    InteractiveShell.clear_instance()


def _text(events: List[Event]) -> str:
    return "".join(v for k, v in events if k in ("stdout", "stderr"))


def _displays(events: List[Event]) -> List[dict]:
    return [v for k, v in events if k == "display"]


OOM = 'raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.20 GiB is free.")'


def test_report_after_traceback_real_torch() -> None:
    pytest.importorskip("torch")
    cells = ["import torch", "layer = torch.nn.Linear(8, 4)\nx = torch.randn(2, 16)\ny = layer(x)\n"]
    events, results, _ = _session(cells, install=True)
    assert isinstance(results[1].error_in_exec, RuntimeError)  # IPython still records the error
    kinds = [k for k, _ in events]
    assert "display" in kinds
    first_display = kinds.index("display")
    before = "".join(v for k, v in events[:first_display] if k != "display")
    assert "Traceback" in before and "mat1 and mat2 shapes cannot be multiplied" in before  # the traceback first
    assert "Cell In[2], line 3" in before
    (shown,) = _displays(events)
    md = shown["text/markdown"]
    assert md.startswith("## ") and "(`matmul-shape-mismatch`" in md
    assert "In[2]:3" in md  # the failing frame is the cell's own line
    assert shown["text/html"].startswith('<div class="torchdx-report">') and "<h2>" in shown["text/html"]
    assert "[matmul-shape-mismatch]" in shown["text/plain"]
    # the traceback is the one IPython shows without torchdx
    plain_events, _, _ = _session(cells, install=False)
    assert _text(plain_events) == _text(events)
    assert not _displays(plain_events)


def test_report_after_traceback_without_torch() -> None:
    events, results, _ = _session([OOM], install=True)
    assert isinstance(results[0].error_in_exec, RuntimeError)
    kinds = [k for k, _ in events]
    assert kinds[-1] == "display" and "stdout" in kinds[: kinds.index("display")]
    (shown,) = _displays(events)
    assert "(`cuda-oom`" in shown["text/markdown"]
    report = torchdx.diagnose(_text(events))
    assert report.initiating is not None and report.initiating.id == "cuda-oom"


def test_nothing_extra_for_unknown_errors_and_good_cells() -> None:
    cells = ["x = 1", 'raise ValueError("x")', "1 +", "x + 1"]
    events, results, _ = _session(cells, install=True)
    plain, _, _ = _session(cells, install=False)
    assert not _displays(events)
    assert _text(events) == _text(plain)
    assert isinstance(results[1].error_in_exec, ValueError)
    assert isinstance(results[2].error_before_exec, SyntaxError)


def test_previous_custom_handler_is_chained_and_restored() -> None:
    seen = []

    def mine(self, etype, value, tb, tb_offset=None):
        seen.append(etype.__name__)
        print("MY HANDLER")

    def before(ip):
        ip.set_custom_exc((RuntimeError,), mine)

    cells = [OOM, 'raise KeyError("k")']
    events, _, ip = _session(cells, install=True, before=before)
    assert seen == ["RuntimeError"]
    text = _text(events)
    assert "MY HANDLER" in text and "KeyError" in text
    assert len(_displays(events)) == 1  # the diagnosis of the RuntimeError
    assert ip.custom_exceptions == (RuntimeError,)  # uninstall() put it back
    seen.clear()
    plain, _, _ = _session(cells, install=False, before=before)
    assert _text(plain) == text and seen == ["RuntimeError"]


def test_load_ext() -> None:
    InteractiveShell.clear_instance()
    ip = InteractiveShell.instance()
    events: List[Event] = []
    ip.display_pub = _Recorder(events, shell=ip)
    out = sys.stdout
    sys.stdout = _Stream("stdout", events)
    try:
        ip.run_line_magic("load_ext", "torchdx")
        ip.run_cell(OOM, store_history=True)
        ip.run_line_magic("unload_ext", "torchdx")
        ip.run_cell(OOM, store_history=True)
    finally:
        sys.stdout = out
    assert len(_displays(events)) == 1
    assert ip.custom_exceptions == ()
