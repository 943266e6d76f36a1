"""torchdx.install() in real subprocesses that raise real PyTorch errors.

Each script is run twice, with ``TORCHDX_DISABLE=1`` and without: standard error with
torchdx must start with exactly the standard error without it (the traceback unchanged),
and the diagnosis must follow it; standard output and the exit status never change.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Tuple

import pytest
from support import child_env, run

HEADER = "torchdx: diagnosis of the exception above (set TORCHDX_DISABLE=1 to turn this off)"

PRELUDE = """\
import torch
import torch.nn as nn
import torchdx
torchdx.install()
"""

TORCH_CASES = {
    "shape-linear": (
        """
        layer = nn.Linear(8, 4)
        x = torch.randn(2, 16)
        y = layer(x)
        """,
        "matmul-shape-mismatch",
        "mat1 and mat2 shapes cannot be multiplied",
    ),
    "embedding-index": (
        """
        emb = nn.Embedding(10, 4)
        ids = torch.tensor([1, 12])
        h = emb(ids)
        """,
        "index-out-of-range",
        "IndexError: index out of range in self",
    ),
    "dtype": (
        """
        layer = nn.Linear(4, 2)
        x = torch.randn(3, 4, dtype=torch.float64)
        y = layer(x)
        """,
        "dtype-mismatch",
        "must have the same dtype",
    ),
    "backward-twice": (
        """
        x = torch.randn(3, requires_grad=True)
        loss = (x.exp() * 2).sum()
        loss.backward()
        loss.backward()
        """,
        "backward-twice",
        "Trying to backward through the graph a second time",
    ),
    "load-state-dict": (
        """
        model = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 1))
        model.load_state_dict({"0.weight": torch.zeros(2, 2), "0.bias": torch.zeros(2)})
        """,
        "state-dict-mismatch",
        "Missing key(s) in state_dict",
    ),
}


def _script(tmp_path: Path, name: str, body: str, prelude: str = PRELUDE) -> Path:
    p = tmp_path / f"{name}.py"
    p.write_text(prelude + textwrap.dedent(body))
    return p


def _both(path: Path, *args: str) -> Tuple:
    plain = run([sys.executable, str(path), *args], env=child_env(TORCHDX_DISABLE="1"))
    dx = run([sys.executable, str(path), *args], env=child_env())
    return plain, dx


def _assert_diagnosis_follows(plain, dx, rule_id: str) -> str:
    assert dx.returncode == plain.returncode
    assert dx.stdout == plain.stdout
    err, base = dx.stderr.decode(), plain.stderr.decode()
    assert err.startswith(base), "the original traceback changed"
    extra = err[len(base) :]
    assert extra.startswith("\n" + HEADER + "\n"), extra[:300]
    assert f"[{rule_id}]" in extra.splitlines()[3], extra[:500]
    return extra


@pytest.mark.parametrize("case", sorted(TORCH_CASES))
def test_real_torch_errors(tmp_path: Path, case: str) -> None:
    pytest.importorskip("torch")
    body, rule_id, message = TORCH_CASES[case]
    plain, dx = _both(_script(tmp_path, case, body))
    assert plain.returncode == 1
    base = plain.stderr.decode()
    assert base.startswith("Traceback (most recent call last):") or "Traceback (most recent call last):" in base
    assert message in base and HEADER not in base
    extra = _assert_diagnosis_follows(plain, dx, rule_id)
    assert f"{case}.py:" in extra  # the failing frame is the script's own line


def test_unrecognized_exception_adds_nothing(tmp_path: Path) -> None:
    path = _script(tmp_path, "plain", 'raise ValueError("x")\n', prelude="import torchdx\ntorchdx.install()\n")
    plain, dx = _both(path)
    assert plain.returncode == dx.returncode == 1
    assert dx.stderr == plain.stderr and dx.stdout == plain.stdout
    assert dx.stderr.decode().endswith("ValueError: x\n")


def test_no_torch_needed_for_the_hook(tmp_path: Path) -> None:
    body = 'raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.20 GiB is free.")\n'
    path = _script(tmp_path, "oom", body, prelude="import torchdx\ntorchdx.install()\n")
    plain, dx = _both(path)
    _assert_diagnosis_follows(plain, dx, "cuda-oom")


def test_keyboard_interrupt_and_system_exit_add_nothing(tmp_path: Path) -> None:
    pre = "import torchdx\ntorchdx.install()\n"
    for name, body in (
        ("kbd", "raise KeyboardInterrupt\n"),
        ("exit", "import sys\nsys.exit('CUDA out of memory. Tried to allocate 2.00 GiB')\n"),
    ):
        plain, dx = _both(_script(tmp_path, name, body, prelude=pre))
        assert (dx.returncode, dx.stdout, dx.stderr) == (plain.returncode, plain.stdout, plain.stderr)


def test_threading_excepthook(tmp_path: Path) -> None:
    body = """
    import threading
    def work():
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.20 GiB is free.")
    t = threading.Thread(target=work, name="loader")
    t.start(); t.join()
    print("main thread goes on")
    """
    plain, dx = _both(_script(tmp_path, "thread", body, prelude="import torchdx\ntorchdx.install()\n"))
    assert plain.returncode == 0 and b"main thread goes on" in dx.stdout
    assert plain.stderr.decode().startswith("Exception in thread loader")
    _assert_diagnosis_follows(plain, dx, "cuda-oom")


def test_chains_to_previous_hook_and_uninstall(tmp_path: Path) -> None:
    body = """
    import sys
    def mine(t, v, tb):
        sys.stderr.write("MY HOOK: %s\\n" % t.__name__)
    sys.excepthook = mine
    import torchdx
    torchdx.install()
    torchdx.install()  # idempotent
    assert (sys.excepthook is mine) == torchdx._hooks.disabled()
    if len(sys.argv) > 1:
        torchdx.uninstall()
        assert sys.excepthook is mine
    raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.20 GiB is free.")
    """
    path = _script(tmp_path, "chain", body, prelude="")
    plain, dx = _both(path)
    assert plain.stderr == b"MY HOOK: RuntimeError\n"
    _assert_diagnosis_follows(plain, dx, "cuda-oom")
    plain, dx = _both(path, "uninstall")
    assert dx.stderr == plain.stderr == b"MY HOOK: RuntimeError\n"


def test_never_raises_when_the_engine_fails(tmp_path: Path) -> None:
    body = """
    import torchdx, torchdx._hooks
    def broken(*a, **k):
        raise MemoryError("engine failure")
    torchdx.diagnose = broken
    torchdx.install()
    raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB.")
    """
    plain, dx = _both(_script(tmp_path, "broken", body, prelude=""))
    assert (dx.returncode, dx.stdout, dx.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert b"Error in sys.excepthook" not in dx.stderr


def test_disable_at_install_and_at_exception(tmp_path: Path) -> None:
    body = """
    import os, sys, torchdx
    torchdx.install()
    assert torchdx._hooks.is_installed()
    os.environ["TORCHDX_DISABLE"] = "1"   # set after install: still honoured
    raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB.")
    """
    p = run([sys.executable, str(_script(tmp_path, "late", body, prelude=""))])
    assert HEADER.encode() not in p.stderr and b"CUDA out of memory" in p.stderr
    body = "import sys, torchdx\ntorchdx.install()\nassert sys.excepthook is sys.__excepthook__\n"
    p = run([sys.executable, str(_script(tmp_path, "early", body, prelude=""))], env=child_env(TORCHDX_DISABLE="1"))
    assert p.returncode == 0, p.stderr.decode()


def test_install_module_is_callable() -> None:
    code = textwrap.dedent(
        """
        import sys, torchdx
        f = torchdx.install
        import torchdx.install as m          # rebinds torchdx.install to the module ...
        assert torchdx.install is m and callable(m)
        m()                                  # ... which installs all the same
        assert torchdx._hooks.is_installed()
        m.uninstall()
        assert not torchdx._hooks.is_installed() and sys.excepthook is sys.__excepthook__
        """
    )
    p = run([sys.executable, "-c", code])
    assert p.returncode == 0, p.stderr.decode()


def test_pth_autoinstall(tmp_path: Path) -> None:
    """``python -m torchdx.install --enable`` turns the hook on without code changes."""
    site_dir = tmp_path / "site"
    p = run([sys.executable, "-m", "torchdx.install", "--status", "--site-dir", str(site_dir)])
    assert p.returncode == 0 and p.stdout.decode().startswith("disabled: ")
    assert b"RuntimeWarning" not in p.stderr, p.stderr.decode()
    p = run([sys.executable, "-m", "torchdx.install", "--enable", "--site-dir", str(site_dir)])
    assert p.returncode == 0 and (site_dir / "torchdx-autoinstall.pth").is_file()
    p = run([sys.executable, "-m", "torchdx.install", "--status", "--site-dir", str(site_dir)])
    assert p.stdout.decode().startswith("enabled: ")

    user = tmp_path / "user.py"  # no torchdx in it
    user.write_text(
        'raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.20 GiB is free.")\n'
    )
    # the folder is processed as a site dir, as site-packages is at start-up
    boot = f"import site, runpy; site.addsitedir({str(site_dir)!r}); runpy.run_path({str(user)!r}, run_name='__main__')"
    plain = run([sys.executable, "-c", boot], env=child_env(TORCHDX_DISABLE="1"))
    dx = run([sys.executable, "-c", boot])
    assert plain.returncode == dx.returncode == 1
    assert dx.stderr.startswith(plain.stderr) and HEADER.encode() in dx.stderr[len(plain.stderr) :]

    # a .pth left behind after torchdx is gone does nothing, says nothing
    gone = (
        "import sys; sys.path = [p for p in sys.path if 'site-packages' not in p and p != '']; "
        f"import site; site.addsitedir({str(site_dir)!r}); assert 'torchdx' not in sys.modules; print('ok')"
    )
    p = run([sys.executable, "-S", "-c", gone], env=child_env(PYTHONPATH=None))
    assert (p.returncode, p.stdout, p.stderr) == (0, b"ok\n", b""), p.stderr.decode()

    p = run([sys.executable, "-m", "torchdx.install", "--disable", "--site-dir", str(site_dir)])
    assert p.returncode == 0 and not (site_dir / "torchdx-autoinstall.pth").exists()
    dx = run([sys.executable, "-c", boot])
    assert dx.stderr == plain.stderr


def test_pth_default_location_is_torchdx_site_packages() -> None:
    code = "import torchdx, torchdx._hooks as h, os; print(h._default_site_dir()); print(os.path.dirname(os.path.dirname(torchdx.__file__)))"
    p = run([sys.executable, "-c", code])
    site_dir, parent = p.stdout.decode().split("\n")[:2]
    import site
    import sysconfig

    assert site_dir in (parent, sysconfig.get_paths()["purelib"]) or site_dir in site.getsitepackages()
    p = run([sys.executable, "-m", "torchdx.install", "--status"])
    assert p.returncode == 0 and site_dir in p.stdout.decode()
