"""The ``torchdx`` console script is the CLI itself: every subcommand, same exit codes.

With ``TORCHDX_BINARY`` pointing at a native ``torchdx`` build, each command's output is
also compared byte for byte with the binary's.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from support import examples_dir, run

import torchdx

SUBCOMMANDS = ["diagnose", "redact", "explain", "rules", "eval"]
RULES_SUB = ["list", "check", "test", "new", "fmt", "literals", "bundle", "examples", "schema", "docs"]


def test_version(cli: str) -> None:
    p = run([cli, "--version"])
    assert p.returncode == 0
    assert p.stdout.decode().split() == ["torchdx", torchdx.__version__]
    q = run([sys.executable, "-m", "torchdx", "--version"])
    assert (q.returncode, q.stdout) == (0, p.stdout)


def test_help_lists_every_subcommand(cli: str) -> None:
    p = run([cli, "--help"])
    assert p.returncode == 0
    out = p.stdout.decode()
    for sub in SUBCOMMANDS + ["fleet"]:
        assert f"\n  {sub} " in out, sub


@pytest.mark.parametrize(
    "args", [[s, "--help"] for s in SUBCOMMANDS] + [["rules", s, "--help"] for s in RULES_SUB], ids=" ".join
)
def test_subcommand_help(cli: str, args) -> None:
    p = run([cli, *args])
    assert p.returncode == 0, p.stderr.decode()
    assert b"Usage:" in p.stdout


def test_exit_codes(cli: str, tmp_path: Path) -> None:
    p = run([cli, "diagnose", str(tmp_path / "missing.log")])
    assert p.returncode == 2 and b"missing.log" in p.stderr
    p = run([cli, "no-such-command"])
    assert p.returncode == 2
    p = run([cli, "diagnose", "-"], input=b"all good\n")
    assert p.returncode == 0 and b"No failure found" in p.stdout


def test_commands_run(cli: str) -> None:
    p = run([cli, "explain", "--list"])
    assert p.returncode == 0 and b"device-mismatch" in p.stdout
    p = run([cli, "explain", "cuda-oom"])
    assert p.returncode == 0 and p.stdout.startswith(b"#")
    p = run([cli, "rules", "list"])
    assert p.returncode == 0 and b"device-mismatch" in p.stdout
    p = run([cli, "redact", "-"], input=b"user alice@example.com at /home/alice/x.py\n")
    assert p.returncode == 0 and b"alice@example.com" not in p.stdout


def test_diagnose_stdin_equals_api(cli: str) -> None:
    data = (examples_dir() / "device-mismatch.log").read_bytes()
    p = run([cli, "diagnose", "--format", "md", "-"], input=data)
    assert p.stdout.decode() == torchdx.diagnose(data).to_markdown()


def test_python_output_before_cli_output_is_kept(cli: str) -> None:
    """The in-process CLI writes to the file descriptors; Python's buffers are flushed first."""
    code = "import sys; print('before', flush=False); from torchdx.__main__ import main; sys.exit(main(['--version']))"
    p = run([sys.executable, "-c", code])
    assert p.returncode == 0
    assert p.stdout.decode().splitlines() == ["before", f"torchdx {torchdx.__version__}"]


NATIVE = os.environ.get("TORCHDX_BINARY")


@pytest.mark.skipif(not NATIVE, reason="TORCHDX_BINARY (a native torchdx build to compare with) is not set")
@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["explain", "--list"],
        ["explain", "device-mismatch"],
        ["explain", "--facts"],
        ["rules", "list"],
        ["diagnose", "--format", "json", "EXAMPLE"],
        ["diagnose", "--format", "text", "--color", "never", "EXAMPLE"],
        ["diagnose", "--format", "md", "--redact", "EXAMPLE"],
        ["diagnose", "MISSING"],
    ],
    ids=" ".join,
)
def test_same_as_native_binary(cli: str, args, tmp_path: Path) -> None:
    example = str(examples_dir() / "multirank-nccl.log")
    args = [example if a == "EXAMPLE" else str(tmp_path / "missing.log") if a == "MISSING" else a for a in args]
    mine, native = run([cli, *args]), run([str(NATIVE), *args])
    assert mine.returncode == native.returncode
    mine_out = mine.stdout
    if args == ["--help"]:  # the console script adds its Python subcommand, and only that
        fleet = re.compile(rb"^  fleet +\S.*\n", re.M)
        assert len(fleet.findall(mine_out)) == 1
        mine_out = fleet.sub(b"", mine_out)
    usage = re.compile(rb"^Usage: \S+ ", re.M)  # the program's name differs
    assert usage.sub(b"Usage: torchdx ", mine_out) == usage.sub(b"Usage: torchdx ", native.stdout)
    assert mine.stderr == native.stderr
