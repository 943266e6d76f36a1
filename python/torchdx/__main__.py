"""The ``torchdx`` command: the same CLI as the Rust binary, every subcommand, in process.

Installed as the console script ``torchdx`` and runnable as ``python -m torchdx``. One
subcommand is the Python package's own: ``torchdx fleet`` (``torchdx.fleet``, a summary of
many jobs' findings); everything else goes to the native CLI.
"""

import os
import signal
import sys
import tempfile
from typing import List, Optional

#: Subcommands implemented in Python, with their line in ``torchdx --help``.
PYTHON_COMMANDS = {
    "fleet": "Diagnose many jobs' logs on Ray, and summarize what breaks across them",
}
_HELP_ARGS = ([], ["-h"], ["--help"], ["help"])


def _flush() -> None:
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except Exception:
            pass


def _python_command(argv: List[str]) -> Optional[int]:
    """Run a Python subcommand (``fleet ...``, ``help fleet``), or None for the native CLI."""
    if argv[:1] == ["fleet"]:
        rest = argv[1:]
    elif argv[:2] == ["help", "fleet"]:
        rest = ["--help"]
    else:
        return None
    from . import fleet

    try:
        return int(fleet.main(rest, prog="torchdx fleet"))
    except SystemExit as e:  # argparse: --help, a usage error
        code = e.code
        return code if isinstance(code, int) else (0 if code is None else 2)
    finally:
        _flush()


def _with_python_commands(text: bytes) -> bytes:
    """The native help with a line for each Python subcommand, before ``help``."""
    lines = text.split(b"\n")
    try:
        start = lines.index(b"Commands:") + 1
    except ValueError:
        return text
    end = start
    while end < len(lines) and lines[end].startswith(b"  "):
        end += 1
    block = lines[start:end]
    width = max(len(ln[2:].split(b" ", 1)[0]) for ln in block) if block else 8
    width = max([width] + [len(n) for n in PYTHON_COMMANDS])
    extra = [f"  {name:<{width}}  {about}".encode() for name, about in PYTHON_COMMANDS.items()]
    at = next((i for i in range(start, end) if lines[i].split()[:1] == [b"help"]), end)
    return b"\n".join(lines[:at] + extra + lines[at:])


def _native_help(cli_main, argv: List[str]) -> int:
    """``torchdx --help`` (and a bare ``torchdx``): the native text, listing ``fleet`` too.

    The native CLI writes to file descriptors 1 and 2; both are caught in temporary files
    for the length of the call, then written out with the Python subcommands added.
    """
    saved, caught = [], []
    try:
        for fd in (1, 2):
            f = tempfile.TemporaryFile()
            saved.append(os.dup(fd))
            caught.append(f)
            os.dup2(f.fileno(), fd)
    except OSError:  # no such descriptor: plain help
        for fd, old in zip((1, 2), saved):
            os.dup2(old, fd)
            os.close(old)
        return int(cli_main(list(argv)))
    try:
        rc = int(cli_main(list(argv)))
    finally:
        for fd, old in zip((1, 2), saved):
            os.dup2(old, fd)
            os.close(old)
    for fd, f in zip((1, 2), caught):
        f.seek(0)
        data = _with_python_commands(f.read())
        f.close()
        while data:
            data = data[os.write(fd, data) :]
    return rc


def main(argv: Optional[List[str]] = None) -> int:
    if argv is None:  # the console script: this process is the command
        argv = sys.argv[1:]
        # Behave like the native binary: Ctrl-C ends the command at once (the engine
        # does not return to Python while it reads a large log), with no traceback.
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
        except (ValueError, OSError, AttributeError):  # no signals here
            pass
    argv = list(argv)
    rc = _python_command(argv)
    if rc is not None:
        return rc
    from ._native import cli_main

    # The CLI writes to file descriptors 1 and 2 itself: nothing buffered in Python may
    # come after it.
    _flush()
    if argv in _HELP_ARGS:
        return _native_help(cli_main, argv)
    return int(cli_main(argv))


if __name__ == "__main__":
    sys.exit(main())
