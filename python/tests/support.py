"""Shared helpers for the torchdx package tests (imported by the test modules).

Run after building and installing the wheel into a fresh virtual environment::

    python -m venv /tmp/venv && /tmp/venv/bin/pip install target/wheels/torchdx-*.whl '.[test]'
    /tmp/venv/bin/python -m pytest python/tests

The tests use the installed package and its console script (the ``torchdx`` next to
``sys.executable``). The rule examples are read from the repository's ``rules/``
folder (``TORCHDX_RULES_DIR`` overrides it).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def rules_dir() -> Path:
    d = Path(os.environ.get("TORCHDX_RULES_DIR", REPO / "rules"))
    if not d.is_dir() or not list(d.glob("*.toml")):
        pytest.fail(f"no rule files in {d}: run from the repository or set TORCHDX_RULES_DIR", pytrace=False)
    return d


def examples_dir() -> Path:
    return Path(os.environ.get("TORCHDX_EXAMPLES_DIR", REPO / "examples"))


def load_toml(path: Path) -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        tomllib = pytest.importorskip("tomli")
    with open(path, "rb") as fp:
        return tomllib.load(fp)


def console_script() -> str:
    """The ``torchdx`` console script of the environment running the tests."""
    bindir = Path(sys.executable).parent
    for name in ("torchdx", "torchdx.exe"):
        p = bindir / name
        if p.exists():
            return str(p)
    found = shutil.which("torchdx")
    if found is None:
        pytest.fail("the torchdx console script is not installed next to " + sys.executable, pytrace=False)
    return found


def child_env(**extra: Optional[str]) -> Dict[str, str]:
    """The environment for a child process: this one, colour off, plus ``extra``."""
    env = dict(os.environ)
    env.pop("TORCHDX_DISABLE", None)
    env["NO_COLOR"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("PYTHONSTARTUP", None)
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def run(
    args: List[str],
    *,
    input: Optional[bytes] = None,
    env: Optional[Dict[str, str]] = None,
    cwd: Optional[Path] = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess:
    return subprocess.run(args, input=input, capture_output=True, env=env or child_env(), cwd=cwd, timeout=timeout)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_rule_dir(tmp: Path, rule: str = "device-mismatch") -> Path:
    """A rule folder holding a copy of one built-in rule (an extra pack that changes nothing)."""
    d = tmp / "extra-rules"
    d.mkdir(exist_ok=True)
    shutil.copy(rules_dir() / f"{rule}.toml", d / f"{rule}.toml")
    return d


# ---------------------------------------------------------------- fleet tests (torchdx.ray, torchdx.fleet)

#: Job logs laid out as ``<date>/<job id>/...`` (genlogs.py), for the path pattern.
JOB_PATTERN = r"(?P<date>\d{4}-\d{2}-\d{2})/(?P<job>[^/]+)"


def diagnose_json(cli: str, path: Optional[str] = None, data: Optional[bytes] = None, rules: Optional[str] = None) -> str:
    """``torchdx diagnose --format json`` of a file or folder (or of ``data`` on stdin): its stdout."""
    args = [cli, "diagnose", "--format", "json"] + (["--rules", rules] if rules else []) + [path or "-"]
    p = run(args, input=data)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {p.returncode}: {p.stderr.decode(errors='replace')}")
    return p.stdout.decode()
