"""torchdx: diagnose PyTorch training failures from their logs, offline.

>>> import torchdx
>>> report = torchdx.diagnose(open("train.log", "rb").read())
>>> report.initiating.family, report.initiating.rank
('device-mismatch', 3)
>>> print(report)                     # the same text as `torchdx diagnose train.log`

The engine is the Rust crate ``torchdx-core``, compiled into ``torchdx._native``; every
report is the ``torchdx/report@1`` contract, byte for byte what the CLI prints.
"""

from __future__ import annotations

import os

from . import _native
from ._hooks import install, uninstall
from ._report import (
    SCHEMA,
    Culprit,
    Evidence,
    Finding,
    Input,
    Location,
    Report,
    TimelineEntry,
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # names for type checkers only (torchdx.elastic imports torch)
    from typing import Any, Optional, Union

    from . import elastic as elastic

    _Log = Union[str, bytes, bytearray, memoryview]
    _Path = Union[str, os.PathLike[str]]

__all__ = [
    "__version__",
    "SCHEMA",
    "diagnose",
    "diagnose_file",
    "Diagnoser",
    "Engine",
    "Report",
    "Finding",
    "Culprit",
    "Location",
    "Evidence",
    "TimelineEntry",
    "Input",
    "install",
    "uninstall",
]

#: The engine's version (the Rust crate's).
__version__: str = _native.VERSION


def _as_bytes(log: _Log) -> bytes:
    if isinstance(log, str):
        # A str from a decoded log may carry lone surrogates (errors="surrogateescape"):
        # give the engine back the original bytes rather than failing.
        try:
            return log.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:  # other lone surrogates
            return log.encode("utf-8", "replace")
    if isinstance(log, (bytes, bytearray, memoryview)):
        return bytes(log)
    raise TypeError(f"torchdx: a log is str or bytes, not {type(log).__name__}")


def _rules(rules_dir: Optional[_Path]) -> Optional[str]:
    return os.fspath(rules_dir) if rules_dir is not None else None


def diagnose(log: _Log, *, rules_dir: Optional[_Path] = None) -> Report:
    """Diagnose a log given as text or bytes (gzip or zstd bytes are decompressed first;
    a corrupt stream raises ``ValueError``).

    Each call builds the engine afresh (a few milliseconds); to diagnose many logs, build
    an :class:`Engine` once. ``rules_dir`` adds or overrides rules from a folder of rule
    files, as ``torchdx diagnose --rules DIR``; a bad folder raises ``ValueError`` naming
    the file and line.
    """
    return Report._from_native(_native.diagnose(_as_bytes(log), _rules(rules_dir)))


def diagnose_file(path: _Path, *, rules_dir: Optional[_Path] = None) -> Report:
    """Diagnose a log file without reading it into memory first.

    Also reads ``.gz`` and ``.zst`` files and a ``torchrun --log-dir`` folder (every
    rank's log). Raises ``OSError`` when the file cannot be read.
    """
    return Report._from_native(_native.diagnose_file(os.fspath(path), _rules(rules_dir)))


class Diagnoser:
    """Diagnose a log as it arrives, in chunks of any size.

    >>> d = torchdx.Diagnoser()
    >>> for chunk in stream:
    ...     d.feed(chunk)
    >>> report = d.finish()

    The report equals ``diagnose()`` of the concatenated chunks. ``finish()`` may be
    called once.
    """

    __slots__ = ("_inner",)

    def __init__(self, rules_dir: Optional[_Path] = None) -> None:
        self._inner = _native.Diagnoser(_rules(rules_dir))

    def feed(self, data: _Log) -> None:
        """Add the next chunk of the log (a chunk may end in the middle of a line)."""
        self._inner.feed(_as_bytes(data))

    def finish(self) -> Report:
        """The report of everything fed; a second call raises ``RuntimeError``."""
        return Report._from_native(self._inner.finish())


class Engine:
    """A diagnosis engine built once and reused: for many logs, a server, a worker pool.

    >>> engine = torchdx.Engine()                     # or Engine(rules_dir="my-rules/")
    >>> reports = [engine.diagnose_file(p) for p in paths]

    Building compiles the rule pack (a few milliseconds, more with ``rules_dir``), which
    ``torchdx.diagnose`` does on every call. One engine may be used from many threads at
    once: the engine is immutable and releases the GIL while it reads a log. The reports
    are the same as ``torchdx.diagnose``'s. An engine pickles as its ``rules_dir`` (the
    receiving process builds its own).
    """

    __slots__ = ("_inner", "_rules_dir")

    def __init__(self, rules_dir: Optional[_Path] = None) -> None:
        self._rules_dir = _rules(rules_dir)
        self._inner = _native.Engine(self._rules_dir)

    @property
    def rules_dir(self) -> Optional[str]:
        """The rules folder this engine adds to the built-in pack, or ``None``."""
        return self._rules_dir

    def diagnose(self, log: _Log) -> Report:
        """Diagnose a log given as text or bytes; gzip or zstd bytes are decompressed
        first (a corrupt stream raises ``ValueError``)."""
        return Report._from_native(self._inner.diagnose(_as_bytes(log)))

    def diagnose_file(self, path: _Path) -> Report:
        """Diagnose a file (plain, ``.gz``, ``.zst``) or a ``torchrun --log-dir`` folder,
        streamed; raises ``OSError`` when it cannot be read."""
        return Report._from_native(self._inner.diagnose_file(os.fspath(path)))

    def diagnoser(self) -> Diagnoser:
        """A :class:`Diagnoser` (chunks in, one report out) on this engine."""
        d = Diagnoser.__new__(Diagnoser)
        d._inner = self._inner.diagnoser()
        return d

    def __reduce__(self) -> Any:
        return (Engine, (self._rules_dir,))

    def __repr__(self) -> str:
        return f"torchdx.Engine(rules_dir={self._rules_dir!r})"


def __getattr__(name: str) -> Any:  # PEP 562: torchdx.elastic imports torch, so only on use
    if name == "elastic":
        import importlib

        return importlib.import_module(".elastic", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext torchdx``: diagnose failing cells in this IPython session."""
    install(ipython=True, _shell=ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext torchdx``."""
    uninstall()
