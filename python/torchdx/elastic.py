"""torchdx for ``torchrun`` workers: the diagnosis in the error file torchrun reads.

>>> from torchdx.elastic import record
>>> @record
... def main():
...     ...

``record`` is torch's ``torch.distributed.elastic.multiprocessing.errors.record`` with a
:class:`TorchdxErrorHandler`. When the decorated function raises, torch's handler writes
the worker's error file (``$TORCHELASTIC_ERROR_FILE``) as usual; torchdx then diagnoses
the traceback and, when it recognises the failure:

* prefixes the error file's ``message`` with one line, ``rank 2: <title> (<family>)``;
* appends that line to ``extraInfo.py_callstack``, the text torchrun's
  ``ChildFailedError`` summary prints for the root-cause rank, so the launcher's
  summary names the failure (the traceback before it is unchanged);
* adds the whole report as ``extraInfo.torchdx_report`` (the ``torchdx/report@1`` JSON,
  as a string like the other ``extraInfo`` values);
* prints the diagnosis to the worker's standard error after the traceback, so it is in
  the worker's log (``--redirects``/``--tee``/``--log-dir``).

An exception no rule knows leaves the error file exactly as torch wrote it. Nothing here
raises: a failure inside torchdx leaves torch's behaviour unchanged.
``TORCHDX_DISABLE=1`` turns the torchdx part off.

Use ``@record(error_handler=TorchdxErrorHandler())`` from torch directly, or this module's
``record``.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any, Callable, Optional, TypeVar, Union, overload

from torch.distributed.elastic.multiprocessing.errors import ErrorHandler
from torch.distributed.elastic.multiprocessing.errors import record as _torch_record

from . import _hooks

__all__ = ["TorchdxErrorHandler", "record", "summary_line"]

_F = TypeVar("_F", bound=Callable[..., Any])
_TRAILER = "torchdx: "


def _env_rank() -> Optional[int]:
    try:
        return int(os.environ["RANK"])
    except (KeyError, ValueError):
        return None


def summary_line(report: Any, rank: Optional[int] = None) -> Optional[str]:
    """``rank 2: <title> (<family>)`` for a report's initiating finding (``None`` if none).

    ``rank`` defaults to the finding's rank; no ``rank N:`` when neither is known.
    """
    f = report.initiating or (report.findings[0] if report.findings else None)
    if f is None:
        return None
    if rank is None:
        rank = f.rank
    who = f"rank {rank}: " if rank is not None else ""
    return f"{who}{f.title} ({f.family})"


class TorchdxErrorHandler(ErrorHandler):
    """torch's ``ErrorHandler`` that adds torchdx's diagnosis to the error file and log."""

    def __init__(self, rules_dir: Union[str, "os.PathLike[str]", None] = None, print_report: bool = True) -> None:
        super().__init__()
        self.rules_dir = os.fspath(rules_dir) if rules_dir is not None else None
        self.print_report = print_report
        #: The report of the last exception recorded (``None`` when none, or unrecognised).
        self.report: Any = None

    def record_exception(self, e: BaseException) -> None:
        super().record_exception(e)  # torch's error file first, whatever happens below
        try:
            self._add_diagnosis(e)
        except BaseException:
            pass

    # -- internals --------------------------------------------------------------------

    def _add_diagnosis(self, e: BaseException) -> None:
        if _hooks.disabled():
            return
        from . import diagnose

        text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        report = diagnose(text, rules_dir=self.rules_dir)
        if not report.has_useful_finding():
            return
        self.report = report
        line = summary_line(report, _env_rank())
        if line is None:
            return
        path = self._get_error_file_path()
        if path and os.path.isfile(path):
            self._rewrite_error_file(path, line, report)
        if self.print_report:
            _print_after_traceback(e, report)

    def _rewrite_error_file(self, path: str, line: str, report: Any) -> None:
        with open(path, encoding="utf-8") as fp:
            data = json.load(fp)
        msg = data.get("message")
        if isinstance(msg, dict):
            original = msg.get("message", "")
            msg["message"] = f"{line}\n{original}" if original else line
            extra = msg.get("extraInfo")
            if isinstance(extra, dict):  # (never created: torch's reader needs its timestamp)
                stack = extra.get("py_callstack")
                if isinstance(stack, str):
                    extra["py_callstack"] = stack.rstrip("\n") + "\n\n" + _TRAILER + line + "\n"
                extra["torchdx_report"] = report.to_json()
        elif isinstance(msg, str):  # the newer plain-string format
            data["message"] = f"{line}\n{msg}"
        else:
            return
        tmp = f"{path}.torchdx.tmp"
        with open(tmp, "w", encoding="utf-8") as fp:
            json.dump(data, fp)
        os.replace(tmp, path)


def _print_after_traceback(exc: BaseException, report: Any) -> None:
    """Print the report once the interpreter has printed ``exc``'s traceback.

    ``record`` re-raises the exception: it reaches ``sys.excepthook`` (which prints the
    traceback) when nothing catches it. A one-shot hook prints the report right after
    it. When the exception is caught instead, nothing is printed (the error file still
    has the diagnosis).
    """
    prev = sys.excepthook

    def hook(t: Any, v: Any, tb: Any) -> None:
        sys.excepthook = prev
        try:
            prev(t, v, tb)  # torchdx.install()'s hook, if any, skips this exception
        except BaseException:
            sys.__excepthook__(t, v, tb)
        if v is exc:
            try:
                _hooks._emit(report, sys.stderr)
            except BaseException:
                pass

    try:
        exc._torchdx_diagnosed = True  # type: ignore[attr-defined]
    except Exception:
        pass
    sys.excepthook = hook


@overload
def record(fn: _F) -> _F: ...
@overload
def record(
    fn: None = None, *, rules_dir: Union[str, "os.PathLike[str]", None] = None, print_report: bool = True
) -> Callable[[_F], _F]: ...


def record(fn: Any = None, *, rules_dir: Any = None, print_report: bool = True) -> Any:
    """torch's ``@record`` with torchdx's error handler: ``@record`` or ``@record(rules_dir=...)``."""

    def wrap(f: Any) -> Any:
        return _torch_record(f, error_handler=TorchdxErrorHandler(rules_dir=rules_dir, print_report=print_report))

    return wrap(fn) if fn is not None else wrap
