"""Typed Python objects for a ``torchdx/report@1`` report.

Every class is a frozen dataclass built from the report's JSON, field for field (the
contract is ``shared/contracts/report-v1.md``): list fields are tuples, absent optional
fields (``ranks``, ``timeline``, ``input.truncated_lines``) take their empty value.
A :class:`Report` keeps the engine's own report, so ``to_json()`` returns exactly the
engine's JSON and ``to_text()``/``to_markdown()`` are the engine's renderings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import (  # typing.get_type_hints() works
    Any,
    Dict,
    Iterator,
    Mapping,
    Optional,
    Tuple,
)

# json and the Markdown renderer are imported on first use: `import torchdx` stays cheap.

__all__ = ["Report", "Finding", "Culprit", "Location", "Evidence", "TimelineEntry", "Input", "SCHEMA"]

#: The schema tag of the reports this package reads.
SCHEMA = "torchdx/report@1"

_RESERVED = ("exception", "message", "devices", "argument", "op", "kernel", "failing_frame", "failing_code")


@dataclass(frozen=True)
class Location:
    """1-based lines of the input a finding covers."""

    line: int
    end_line: int

    @classmethod
    def _from_json(cls, d: Mapping[str, Any]) -> Location:
        return cls(line=d["line"], end_line=d["end_line"])


@dataclass(frozen=True)
class Culprit:
    """The tensor or setting at fault."""

    kind: str
    """Kebab-case kind (``label-not-moved``, ``checkpoint-map-location``, ...)."""
    expr: Optional[str]
    """The expression at fault in the user's code, when known (``labels``)."""
    summary: str
    """One sentence on what is wrong, bound to this log."""

    @classmethod
    def _from_json(cls, d: Mapping[str, Any]) -> Culprit:
        return cls(kind=d["kind"], expr=d.get("expr"), summary=d["summary"])


@dataclass(frozen=True)
class Evidence(Mapping[str, Any]):
    """The facts a finding rests on, as the log shows them.

    The contract's eight reserved keys are attributes (``None`` when the log does not
    give them); every other fact (a rule's captures such as ``tried_bytes``, derived
    facts such as ``dispatch_key``) is in :attr:`extra`. It is also a read-only mapping
    over all of them, in the JSON's order: ``ev["devices"]``, ``ev.get("tried")``,
    ``dict(ev)``.
    """

    exception: Optional[str] = None
    message: Optional[str] = None
    devices: Optional[Tuple[str, ...]] = None
    argument: Optional[str] = None
    op: Optional[str] = None
    kernel: Optional[str] = None
    failing_frame: Optional[str] = None
    failing_code: Optional[str] = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Every other fact, by name."""
    _all: Dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        merged = {k: getattr(self, k) for k in _RESERVED if getattr(self, k) is not None}
        merged.update(self.extra)
        # The JSON object's order: keys sorted, reserved and extra alike.
        object.__setattr__(self, "_all", {k: merged[k] for k in sorted(merged)})

    @classmethod
    def _from_json(cls, d: Mapping[str, Any]) -> Evidence:
        typed = {k: d[k] for k in _RESERVED if k in d}
        if typed.get("devices") is not None:
            typed["devices"] = tuple(typed["devices"])
        extra = {k: v for k, v in d.items() if k not in _RESERVED}
        return cls(**typed, extra=extra)

    def __getitem__(self, key: str) -> Any:
        return self._all[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all)

    def __len__(self) -> int:
        return len(self._all)

    def __contains__(self, key: object) -> bool:
        return key in self._all

    def to_dict(self) -> Dict[str, Any]:
        """The evidence as the JSON object (a new dict)."""
        import json

        out: Dict[str, Any] = json.loads(json.dumps(self._all))
        return out


@dataclass(frozen=True)
class Finding:
    """One diagnosed failure."""

    id: str
    """The rule id (stable, kebab-case): ``device-mismatch``, ``unrecognized-exception``."""
    family: str
    """The family id from the taxonomy (``other`` for an unrecognised exception)."""
    title: str
    role: str
    """``initiating``, ``collateral`` or ``independent``."""
    collateral_of: Optional[int]
    """For a collateral finding, the index in ``Report.findings`` of its cause."""
    rank: Optional[int]
    """The global rank it came from; ``None`` when the log does not tell."""
    ranks: Tuple[int, ...]
    """Every rank that reported this same failure (empty when only one or none)."""
    confidence: str
    """``certain``, ``likely`` or ``possible``."""
    location: Location
    evidence: Evidence
    culprit: Optional[Culprit]
    mechanism: str
    checklist: Tuple[str, ...]
    fix: str
    """Markdown; may hold a code block."""
    verify: str
    prevent: str
    missing: Tuple[str, ...]
    next_action: str
    related: Tuple[str, ...]

    @property
    def is_initiating(self) -> bool:
        return self.role == "initiating"

    @property
    def is_collateral(self) -> bool:
        return self.role == "collateral"

    @property
    def is_recognized(self) -> bool:
        """False for an exception no rule knows (``unrecognized-exception``)."""
        return self.id != "unrecognized-exception"

    def summary_line(self) -> str:
        """One line for logs and launcher summaries: ``rank 2: <title> (<family>)``."""
        who = f"rank {self.rank}: " if self.rank is not None else ""
        return f"{who}{self.title} ({self.family})"

    @classmethod
    def _from_json(cls, d: Mapping[str, Any]) -> Finding:
        culprit = d.get("culprit")
        return cls(
            id=d["id"],
            family=d["family"],
            title=d["title"],
            role=d["role"],
            collateral_of=d.get("collateral_of"),
            rank=d.get("rank"),
            ranks=tuple(d.get("ranks", ())),
            confidence=d["confidence"],
            location=Location._from_json(d["location"]),
            evidence=Evidence._from_json(d.get("evidence", {})),
            culprit=Culprit._from_json(culprit) if culprit is not None else None,
            mechanism=d["mechanism"],
            checklist=tuple(d.get("checklist", ())),
            fix=d["fix"],
            verify=d["verify"],
            prevent=d["prevent"],
            missing=tuple(d.get("missing", ())),
            next_action=d["next_action"],
            related=tuple(d.get("related", ())),
        )


@dataclass(frozen=True)
class TimelineEntry:
    """One line of the timeline: who failed when, in order."""

    time: Optional[str]
    """``HH:MM:SS`` when the log carries a timestamp."""
    ranks: Tuple[int, ...]
    """Ranks involved (empty for the launcher)."""
    finding: int
    """Index in ``Report.findings``."""
    text: str
    """``who: what (rule id)``."""

    @classmethod
    def _from_json(cls, d: Mapping[str, Any]) -> TimelineEntry:
        return cls(time=d.get("time"), ranks=tuple(d.get("ranks", ())), finding=d["finding"], text=d["text"])


@dataclass(frozen=True)
class Input:
    """Facts about the input as a whole."""

    bytes: int
    lines: int
    ranks: Tuple[int, ...]
    """Ranks seen, ascending; empty if none."""
    truncated_lines: int = 0
    """Lines longer than 64 KiB whose middle was dropped."""

    @classmethod
    def _from_json(cls, d: Mapping[str, Any]) -> Input:
        return cls(
            bytes=d["bytes"],
            lines=d["lines"],
            ranks=tuple(d.get("ranks", ())),
            truncated_lines=d.get("truncated_lines", 0),
        )


@dataclass(frozen=True, eq=False)
class Report:
    """What torchdx made of one log.

    ``findings`` holds the initiating finding first, then the others in order of
    appearance. ``initiating`` is that finding (``None`` when the log holds no failure)
    and ``initiating_index`` its index, the JSON's ``initiating``.
    """

    schema: str
    input: Input
    initiating_index: Optional[int]
    findings: Tuple[Finding, ...]
    timeline: Tuple[TimelineEntry, ...]
    _native: Any = field(repr=False)

    @classmethod
    def _from_native(cls, native: Any) -> Report:
        import json

        d = json.loads(native.to_json())
        schema = d.get("schema")
        if schema != SCHEMA:
            raise ValueError(f"report schema {schema!r}, expected {SCHEMA!r}")
        return cls(
            schema=schema,
            input=Input._from_json(d["input"]),
            initiating_index=d.get("initiating"),
            findings=tuple(Finding._from_json(f) for f in d["findings"]),
            timeline=tuple(TimelineEntry._from_json(t) for t in d.get("timeline", ())),
            _native=native,
        )

    @property
    def initiating(self) -> Optional[Finding]:
        """The finding that started the run's collapse; ``None`` if the log has no failure."""
        i = self.initiating_index
        return self.findings[i] if i is not None else None

    def has_useful_finding(self) -> bool:
        """False when there is no finding, or only exceptions no rule knows with nothing specific."""
        return bool(self._native.has_useful_finding())

    def to_json(self) -> str:
        """The ``torchdx/report@1`` JSON exactly as the engine wrote it (compact)."""
        return str(self._native.to_json())

    def to_dict(self) -> Dict[str, Any]:
        """The JSON report as a new dict."""
        import json

        out: Dict[str, Any] = json.loads(self._native.to_json())
        return out

    def to_text(self, color: bool = False, width: int = 100) -> str:
        """The report for a terminal, as ``torchdx diagnose`` prints it."""
        return str(self._native.to_text(color=color, width=width))

    def to_markdown(self) -> str:
        """The report as Markdown, as ``torchdx diagnose --format md`` prints it."""
        return str(self._native.to_markdown())

    def to_html(self) -> str:
        """The Markdown report rendered to a self-contained HTML fragment."""
        from . import _markdown

        return _markdown.to_html(self.to_markdown(), css_class="torchdx-report")

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        n = len(self.findings)
        head = self.initiating
        what = f", initiating {head.id!r}" + (f" on rank {head.rank}" if head.rank is not None else "") if head else ""
        return f"<torchdx.Report: {n} finding{'' if n == 1 else 's'}{what}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Report):
            return NotImplemented
        return self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]

    # IPython / Jupyter rich display
    def _repr_markdown_(self) -> str:
        return self.to_markdown()

    def _repr_html_(self) -> str:
        return self.to_html()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self) if cycle else self.to_text().rstrip("\n"))
