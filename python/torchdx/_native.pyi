"""The Rust engine (PyO3 extension, abi3). Use the typed API in ``torchdx`` instead."""

from typing import List, Optional

VERSION: str
"""The engine crate's version, e.g. ``"0.1.0"``."""

class NativeReport:
    """An engine report."""

    def to_json(self, pretty: bool = False) -> str:
        """The ``torchdx/report@1`` JSON (compact, or indented with ``pretty=True``)."""
    def to_text(self, color: bool = False, width: int = 100) -> str: ...
    def to_markdown(self) -> str: ...
    def has_useful_finding(self) -> bool:
        """False when there is no finding, or only unrecognised exceptions with nothing specific."""
    @staticmethod
    def from_json(json: str) -> "NativeReport":
        """A report read back from its JSON; raises ``ValueError``."""

def diagnose(data: bytes, rules_dir: Optional[str] = None) -> NativeReport:
    """Raises ``ValueError`` (naming file and line) for a bad rules folder."""

def diagnose_file(path: str, rules_dir: Optional[str] = None) -> NativeReport:
    """Streams the file (also ``.gz``/``.zst``, or a ``torchrun --log-dir`` folder); raises ``OSError``."""

class Diagnoser:
    def __init__(self, rules_dir: Optional[str] = None) -> None: ...
    def feed(self, data: bytes) -> None: ...
    def finish(self) -> NativeReport:
        """A second call raises ``RuntimeError``."""

class Engine:
    """An engine built once and shared by every diagnosis made with it (thread-safe)."""

    def __init__(self, rules_dir: Optional[str] = None) -> None: ...
    def diagnose(self, data: bytes) -> NativeReport:
        """gzip or zstd bytes are decompressed first; a corrupt stream raises ``ValueError``."""
    def diagnose_file(self, path: str) -> NativeReport: ...
    def diagnoser(self) -> Diagnoser: ...

def cli_main(argv: List[str]) -> int:
    """Run the ``torchdx`` CLI in process (``argv`` without the program name); the exit status."""
