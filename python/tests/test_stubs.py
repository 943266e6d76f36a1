"""The type stubs match the runtime: ``torchdx/__init__.pyi``, ``torchdx/_native.pyi``, ``py.typed``."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest

import torchdx

PKG = Path(torchdx.__file__).resolve().parent


def _stub(name: str) -> Dict[str, ast.AST]:
    tree = ast.parse((PKG / name).read_text())
    out: Dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                if a.asname and a.asname == a.name:  # `from x import y as y`: a re-export
                    out[a.asname] = node
    return out


def _params(fn: ast.FunctionDef):
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args]
    if names and names[0] == "self":
        names = names[1:]
    return names, [x.arg for x in a.kwonlyargs]


def _runtime_params(obj):
    sig = inspect.signature(obj)
    pos = [p.name for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    kw = [p.name for p in sig.parameters.values() if p.kind == p.KEYWORD_ONLY]
    return pos, kw


def test_py_typed_is_installed() -> None:
    assert (PKG / "py.typed").is_file()
    assert (PKG / "__init__.pyi").is_file() and (PKG / "_native.pyi").is_file()


def test_init_stub_names() -> None:
    stub = _stub("__init__.pyi")
    public = {n for n in stub if not n.startswith("_")} | {"__version__"}
    runtime = set(torchdx.__all__) | {"elastic", "load_ipython_extension", "unload_ipython_extension"}
    assert public == runtime
    tree = ast.parse((PKG / "__init__.pyi").read_text())
    (all_node,) = [n for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "__all__"]  # type: ignore[attr-defined]
    assert ast.literal_eval(all_node.value) == torchdx.__all__


@pytest.mark.parametrize("name", ["diagnose", "diagnose_file", "install", "uninstall", "load_ipython_extension"])
def test_init_stub_signatures(name: str) -> None:
    fn = _stub("__init__.pyi")[name]
    assert isinstance(fn, ast.FunctionDef)
    assert _params(fn) == _runtime_params(getattr(torchdx, name))


def test_diagnoser_stub() -> None:
    cls = _stub("__init__.pyi")["Diagnoser"]
    methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}  # type: ignore[attr-defined]
    assert set(methods) == {"__init__", "feed", "finish"}
    for m, f in methods.items():
        assert _params(f)[0] == _runtime_params(getattr(torchdx.Diagnoser, m))[0][1:]


def test_engine_stub() -> None:
    cls = _stub("__init__.pyi")["Engine"]
    methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}  # type: ignore[attr-defined]
    assert set(methods) == {"__init__", "rules_dir", "diagnose", "diagnose_file", "diagnoser"}
    assert isinstance(inspect.getattr_static(torchdx.Engine, "rules_dir"), property)
    for m, f in methods.items():
        if m != "rules_dir":
            assert _params(f)[0] == _runtime_params(getattr(torchdx.Engine, m))[0][1:], m


def test_native_stub_matches_module() -> None:
    from torchdx import _native

    stub = _stub("_native.pyi")
    public = {n for n in dir(_native) if not n.startswith("_")}
    assert set(stub) <= public, "the stub declares what the module lacks"
    assert {"VERSION", "NativeReport", "diagnose", "diagnose_file", "Diagnoser", "Engine", "cli_main"} <= public
    for cls_name in ("NativeReport", "Diagnoser", "Engine"):
        cls = stub[cls_name]
        for f in cls.body:  # type: ignore[attr-defined]
            if isinstance(f, ast.FunctionDef) and not f.name.startswith("__"):
                assert callable(getattr(getattr(_native, cls_name), f.name)), f"{cls_name}.{f.name}"


def test_mypy_accepts_typical_use(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    code = tmp_path / "use.py"
    code.write_text(
        "import torchdx\n"
        "r: torchdx.Report = torchdx.diagnose(b'log')\n"
        "f = r.initiating\n"
        "if f is not None:\n"
        "    fam: str = f.family\n"
        "    rank: 'int | None' = f.rank\n"
        "    kind = f.culprit.kind if f.culprit else None\n"
        "    dev = f.evidence.devices\n"
        "    extra = f.evidence['tried_bytes']\n"
        "t: str = r.to_json() + r.to_markdown() + r.to_text(color=True)\n"
        "d = torchdx.Diagnoser()\n"
        "d.feed('chunk')\n"
        "r2 = d.finish()\n"
        "torchdx.install(threads=False)\n"
        "r3 = torchdx.diagnose_file('train.log', rules_dir='rules')\n"
        "e = torchdx.Engine(rules_dir=None)\n"
        "r4: torchdx.Report = e.diagnose(b'log')\n"
        "r5: torchdx.Report = e.diagnose_file('train.log')\n"
        "d2: torchdx.Diagnoser = e.diagnoser()\n"
        "rd: 'str | None' = e.rules_dir\n"
    )
    p = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / ".mypy_cache"), str(code)], capture_output=True, text=True
    )
    assert p.returncode == 0, p.stdout + p.stderr
