import os
from typing import IO, Any, Optional, Union

from . import elastic as elastic
from ._report import SCHEMA as SCHEMA
from ._report import Culprit as Culprit
from ._report import Evidence as Evidence
from ._report import Finding as Finding
from ._report import Input as Input
from ._report import Location as Location
from ._report import Report as Report
from ._report import TimelineEntry as TimelineEntry

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

__version__: str

_Log = Union[str, bytes, bytearray, memoryview]
_Path = Union[str, os.PathLike[str]]

def diagnose(log: _Log, *, rules_dir: Optional[_Path] = None) -> Report: ...
def diagnose_file(path: _Path, *, rules_dir: Optional[_Path] = None) -> Report: ...

class Diagnoser:
    def __init__(self, rules_dir: Optional[_Path] = None) -> None: ...
    def feed(self, data: _Log) -> None: ...
    def finish(self) -> Report: ...

class Engine:
    def __init__(self, rules_dir: Optional[_Path] = None) -> None: ...
    @property
    def rules_dir(self) -> Optional[str]: ...
    def diagnose(self, log: _Log) -> Report: ...
    def diagnose_file(self, path: _Path) -> Report: ...
    def diagnoser(self) -> Diagnoser: ...

def install(
    *,
    threads: bool = True,
    ipython: bool = True,
    rules_dir: Optional[_Path] = None,
    file: Optional[IO[str]] = None,
    _shell: Any = None,
) -> None: ...
def uninstall() -> None: ...
def load_ipython_extension(ipython: Any) -> None: ...
def unload_ipython_extension(ipython: Any) -> None: ...
