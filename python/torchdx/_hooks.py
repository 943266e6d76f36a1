"""Diagnose uncaught exceptions where they happen.

``torchdx.install()`` wraps ``sys.excepthook`` and ``threading.excepthook``: the normal
traceback is printed first, unchanged, by the hook that was there before; then, when the
engine recognises the failure, its diagnosis follows on standard error. In IPython and
Jupyter it registers with IPython's exception handling and shows the report (rendered
Markdown/HTML) under the cell's traceback. An exception no rule knows adds nothing, and
nothing in torchdx ever raises from a hook.

``TORCHDX_DISABLE=1`` turns it all off (checked at install and at each exception).

Without code changes::

    python -m torchdx.install --enable     # writes torchdx-autoinstall.pth into site-packages
    python -m torchdx.install --status
    python -m torchdx.install --disable

This module holds the implementation; ``torchdx.install`` is the public name (a module
that is also callable, so that ``torchdx.install()`` and ``python -m torchdx.install``
are one name).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing, re, traceback are imported only when needed
    from typing import IO, Any, Callable, List, Optional, Union

__all__ = ["install", "uninstall", "is_installed", "disabled", "ENV_DISABLE", "PTH_NAME", "main"]

#: Set to anything but ``""``/``0``/``false``/``no``/``off`` to turn torchdx's hooks off.
ENV_DISABLE = "TORCHDX_DISABLE"
#: The file ``python -m torchdx.install --enable`` writes into site-packages.
PTH_NAME = "torchdx-autoinstall.pth"
# One line (site.py runs a .pth line that starts with "import"); harmless if torchdx has
# been uninstalled and the file left behind.
_PTH_LINE = (
    'import sys; exec("try:\\n    from torchdx._hooks import _autoinstall\\nexcept ImportError:\\n'
    '    pass\\nelse:\\n    _autoinstall()\\n")\n'
)

_HEADER = "torchdx: diagnosis of the exception above (set TORCHDX_DISABLE=1 to turn this off)"
_ANSI = r"\x1b\[[0-9;?]*[ -/]*[@-~]"


class _State:
    active = False
    rules_dir: Optional[str] = None
    file: Optional[IO[str]] = None
    prev_excepthook: Optional[Callable[..., Any]] = None
    prev_threading_excepthook: Optional[Callable[..., Any]] = None
    shell: Any = None
    prev_custom: Any = None  # (exc_tuple, CustomTB) of the IPython shell before us


_state = _State()


def disabled() -> bool:
    """True when ``TORCHDX_DISABLE`` turns the hooks off."""
    v = os.environ.get(ENV_DISABLE, "")
    return v.strip().lower() not in ("", "0", "false", "no", "off")


def is_installed() -> bool:
    return _state.active


# ---------------------------------------------------------------------------- engine


def _diagnose_text(text: str) -> Any:
    from . import diagnose  # the package is imported already: this module lives in it

    return diagnose(text, rules_dir=_state.rules_dir)


def _skip(exc_type: Any) -> bool:
    return (
        not _state.active
        or exc_type is None
        or not isinstance(exc_type, type)
        or issubclass(exc_type, (KeyboardInterrupt, SystemExit, GeneratorExit))
        or disabled()
    )


def _format(exc_type: Any, exc: Any, tb: Any) -> str:
    import traceback

    return "".join(traceback.format_exception(exc_type, exc, tb))


def _stream() -> Optional[IO[str]]:
    return _state.file if _state.file is not None else sys.stderr


def _emit(report: Any, stream: Optional[IO[str]]) -> None:
    if stream is None:  # pythonw, or stderr closed
        return
    tty = False
    try:
        tty = stream.isatty()
    except Exception:
        pass
    color = tty and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"
    width = 100
    if tty:
        import shutil

        width = max(40, shutil.get_terminal_size((100, 24)).columns)
    text = report.to_text(color=color, width=width)
    try:
        stream.flush()  # whatever the traceback hook left buffered comes first
    except Exception:
        pass
    stream.write("\n" + _HEADER + "\n\n" + text + ("" if text.endswith("\n") else "\n"))
    stream.flush()


def _after(exc_type: Any, exc: Any, tb: Any) -> None:
    """Diagnose an exception whose traceback was just printed; never raises."""
    try:
        if _skip(exc_type) or getattr(exc, "_torchdx_diagnosed", False):
            return  # (torchdx.elastic prints its own report of that exception)
        report = _diagnose_text(_format(exc_type, exc, tb))
        if report.has_useful_finding():
            _emit(report, _stream())
    except BaseException:  # never let torchdx turn one failure into two
        pass


# ----------------------------------------------------------------------- the hooks


def _excepthook(exc_type: Any, exc: Any, tb: Any) -> None:
    prev = _state.prev_excepthook or sys.__excepthook__
    try:
        prev(exc_type, exc, tb)
    except BaseException:
        try:  # the traceback is shown whatever the previous hook did
            sys.__excepthook__(exc_type, exc, tb)
        except BaseException:
            pass
    _after(exc_type, exc, tb)


def _threading_excepthook(args: Any) -> None:
    import threading

    prev = _state.prev_threading_excepthook or threading.__excepthook__
    try:
        prev(args)
    except BaseException:
        try:
            threading.__excepthook__(args)
        except BaseException:
            pass
    _after(args.exc_type, args.exc_value, args.exc_traceback)


# -------------------------------------------------------------------------- IPython


def _ipython_shell() -> Any:
    mod = sys.modules.get("IPython")  # never import IPython just to look for it
    if mod is None:
        return None
    try:
        return mod.get_ipython()
    except Exception:
        return None


def _ipython_traceback_text(shell: Any, etype: Any, value: Any, tb: Any, tb_offset: Any) -> str:
    """The traceback as the cell shows it (``Cell In[3], line 7``), without colour."""
    try:
        stb = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
        text = shell.InteractiveTB.stb2text(stb)
        import re

        return re.sub(_ANSI, "", text) + "\n"
    except Exception:
        return _format(etype, value, tb)


def _ipython_handler(shell: Any, etype: Any, value: Any, tb: Any, tb_offset: Any = None) -> None:
    # 1. The traceback, exactly as IPython would have shown it (or the handler that was
    #    registered before ours, for its exception types).
    prev = _state.prev_custom
    try:
        if prev is not None and prev[0] and issubclass(etype, prev[0]):
            prev[1](etype, value, tb, tb_offset=tb_offset)  # its return value is ignored, as IPython does
        elif issubclass(etype, SyntaxError):
            shell.showsyntaxerror()
        else:
            shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
    except BaseException:
        try:
            shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        except BaseException:
            pass
    # 2. The diagnosis under it.
    try:
        if _skip(etype) or issubclass(etype, SyntaxError):
            return None
        report = _diagnose_text(_ipython_traceback_text(shell, etype, value, tb, tb_offset))
        if not report.has_useful_finding():
            return None
        from IPython.display import display

        display(report)  # type: ignore[no-untyped-call]
    except BaseException:
        pass
    return None


def _install_ipython(shell: Any) -> bool:
    if shell is None or not hasattr(shell, "set_custom_exc"):
        return False
    if _state.shell is shell:
        return True
    custom = getattr(shell, "custom_exceptions", ())
    _state.prev_custom = (tuple(custom), shell.CustomTB) if custom else None
    shell.set_custom_exc((BaseException,), _ipython_handler)
    _state.shell = shell
    return True


def _uninstall_ipython() -> None:
    shell, _state.shell = _state.shell, None
    prev, _state.prev_custom = _state.prev_custom, None
    if shell is None:
        return
    try:
        if prev is not None:
            shell.custom_exceptions, shell.CustomTB = prev
        else:
            shell.set_custom_exc((), None)
    except Exception:
        pass


# ------------------------------------------------------------------------------ API


def install(
    *,
    threads: bool = True,
    ipython: bool = True,
    rules_dir: Union[str, "os.PathLike[str]", None] = None,
    file: Optional[IO[str]] = None,
    _shell: Any = None,
) -> None:
    """Print torchdx's diagnosis after the traceback of every uncaught exception.

    ``threads`` also hooks ``threading.excepthook``; ``ipython`` registers with the
    running IPython/Jupyter shell, if any; ``rules_dir`` adds rules as
    ``torchdx diagnose --rules``; ``file`` receives the diagnosis instead of
    ``sys.stderr``. Calling it again updates these settings. Does nothing when
    ``TORCHDX_DISABLE`` is set.
    """
    if disabled():
        return
    _state.rules_dir = os.fspath(rules_dir) if rules_dir is not None else None
    _state.file = file
    if sys.excepthook is not _excepthook:
        _state.prev_excepthook = sys.excepthook
        sys.excepthook = _excepthook
    if threads:
        import threading

        if threading.excepthook is not _threading_excepthook:
            _state.prev_threading_excepthook = threading.excepthook
            threading.excepthook = _threading_excepthook
    if ipython:
        _install_ipython(_shell if _shell is not None else _ipython_shell())
    _state.active = True


def uninstall() -> None:
    """Undo :func:`install`: the hooks that were there before are back."""
    _state.active = False
    if sys.excepthook is _excepthook:
        sys.excepthook = _state.prev_excepthook or sys.__excepthook__
    _state.prev_excepthook = None
    import threading

    if threading.excepthook is _threading_excepthook:
        threading.excepthook = _state.prev_threading_excepthook or threading.__excepthook__
    _state.prev_threading_excepthook = None
    _uninstall_ipython()
    # A hook someone else chained after ours stays in place but passes through
    # (``_state.active`` is False).


def _autoinstall() -> None:
    """Called by ``torchdx-autoinstall.pth`` at interpreter start; never raises."""
    try:
        install()
    except BaseException:
        pass


# -------------------------------------------------------------- python -m torchdx.install


def _default_site_dir() -> str:
    """The site-packages folder torchdx is installed in (else the interpreter's)."""
    import site
    import sysconfig

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sites: List[str] = []
    try:
        sites.extend(site.getsitepackages())
    except Exception:
        pass
    try:
        sites.append(site.getusersitepackages())
    except Exception:
        pass
    norm = {os.path.realpath(s) for s in sites}
    if os.path.realpath(here) in norm:
        return here
    return sysconfig.get_paths()["purelib"]


def main(argv: Optional[List[str]] = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m torchdx.install",
        description="Turn torchdx's exception hook on for every Python run of this environment, "
        f"without code changes, by writing {PTH_NAME} into site-packages. "
        f"{ENV_DISABLE}=1 still turns it off for one run.",
    )
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--enable", action="store_true", help=f"write {PTH_NAME}")
    g.add_argument("--disable", action="store_true", help=f"remove {PTH_NAME}")
    g.add_argument("--status", action="store_true", help="say whether it is enabled (the default)")
    ap.add_argument("--site-dir", help="the folder for the .pth file (default: torchdx's site-packages)")
    a = ap.parse_args(argv)
    site_dir = a.site_dir or _default_site_dir()
    path = os.path.join(site_dir, PTH_NAME)
    if a.enable:
        os.makedirs(site_dir, exist_ok=True)
        with open(path, "w", encoding="utf-8") as fp:
            fp.write("# torchdx: diagnose uncaught exceptions (python -m torchdx.install --disable removes it)\n")
            fp.write(_PTH_LINE)
        print(f"enabled: {path}")
    elif a.disable:
        if os.path.exists(path):
            os.remove(path)
            print(f"disabled: removed {path}")
        else:
            print(f"disabled: {path} was not there")
    else:
        state = "enabled" if os.path.exists(path) else "disabled"
        note = f" ({ENV_DISABLE} is set in this environment)" if disabled() else ""
        print(f"{state}: {path}{note}")
    return 0
