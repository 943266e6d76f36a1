"""Diagnose a fleet of job logs on Ray Data (``pip install "torchdx[ray]"``).

One job's log -- a file (plain, ``.gz`` or ``.zst``) or a torchrun ``--log-dir`` folder --
becomes rows, one per finding, so a warehouse or a notebook can count what breaks::

    import ray, torchdx.ray

    ds = ray.data.read_binary_files(paths, include_paths=True)
    rows = ds.map_batches(torchdx.ray.Diagnose, batch_format="pyarrow",
                          compute=ray.data.ActorPoolStrategy(size=2),
                          fn_constructor_kwargs={"job_id_pattern": r"/(?P<job>[^/]+)/train\\.log$"})
    rows.write_parquet("s3://bucket/torchdx/")          # or any sink Ray has

    # or, folders and globs included (concurrency= becomes an ActorPoolStrategy):
    torchdx.ray.diagnose_to_parquet("/logs/**", "out/", concurrency=2)

Columns (``SCHEMA``): ``job_id``, ``path``, ``date``, ``finding_index``, ``family``,
``rule_id``, ``role``, ``rank``, ``host``, ``confidence``, ``culprit_kind``,
``culprit_expr``, ``first_line``, ``summary``, ``torchdx_version``, ``report_json``. A job
without any finding gives one row with ``role = "none"`` and null finding fields; a job
that could not be read gives one row with ``role = "error"`` and the error in ``summary``,
so every job is accounted for. ``report_json`` is the whole ``torchdx/report@1`` report
(``Report.to_json()``: the same JSON as ``torchdx diagnose --format json``, compact),
repeated on each row of the job.

``ray`` is imported lazily: ``Diagnose`` itself needs only ``pyarrow`` (pandas or numpy
batches are read, an Arrow table is returned); ``read_jobs``/``diagnose_to_parquet``
need ``ray[data]``. Each ``Diagnose`` actor builds one :class:`torchdx.Engine` and
reuses it for every job (gzip and zstd content is decompressed by the engine), and every
row is computed from the report's JSON.
"""

from __future__ import annotations

import glob as _glob
import json
import os
import re
from pathlib import Path, PurePosixPath
from typing import Any, Iterable

import pyarrow as pa

import torchdx
from torchdx._rows import error_row, finding_host, iso_date, rows_from_report

__all__ = ["Diagnose", "SCHEMA", "read_jobs", "diagnose_to_parquet", "find_jobs", "is_log_dir", "report_rows", "finding_host"]

SCHEMA = pa.schema(
    [
        ("job_id", pa.string()),
        ("path", pa.string()),
        ("date", pa.string()),  # ISO date from the pattern's `date` group, else null
        ("finding_index", pa.int32()),  # index into the report's findings; null for none/error rows
        ("family", pa.string()),
        ("rule_id", pa.string()),
        ("role", pa.string()),  # initiating | collateral | independent | none | error
        ("rank", pa.int64()),
        ("host", pa.string()),
        ("confidence", pa.string()),
        ("culprit_kind", pa.string()),
        ("culprit_expr", pa.string()),
        ("first_line", pa.int64()),
        ("summary", pa.string()),
        ("torchdx_version", pa.string()),
        ("report_json", pa.large_string()),
    ]
)

_STATS_FIELDS = [("worker_pid", pa.int64()), ("worker_maxrss_kb", pa.int64())]

LOG_EXTENSIONS = (".log", ".txt", ".out", ".err", ".gz", ".zst")
_ATTEMPT = re.compile(r"attempt_\d+")
_RUN_ID = re.compile(r".+_[a-z0-9_]{8}")
_RANK_FILES = ("stdout.log", "stderr.log", "error.json")


# ------------------------------------------------------------------ job discovery


def _has_attempts_or_ranks(p: Path) -> bool:
    for c in p.iterdir():
        if c.is_dir() and _ATTEMPT.fullmatch(c.name):
            return True
        if c.is_dir() and c.name.isdigit() and any((c / f).is_file() for f in _RANK_FILES):
            return True
    return False


def is_log_dir(path: str | os.PathLike) -> bool:
    """True for a torchrun ``--log-dir`` folder: ``attempt_N/`` subfolders (or numeric
    rank subfolders holding ``stdout.log``, ``stderr.log`` or ``error.json``), directly
    or under the run-id folder torchrun puts between them
    (``LOG_DIR/<run_id>/attempt_0/3/stderr.log``)."""
    p = Path(path)
    if not p.is_dir():
        return False
    try:
        if _has_attempts_or_ranks(p):
            return True
        # LOG_DIR/<run_id>_<8 random chars> (tempfile.mkdtemp(prefix=f"{run_id}_")):
        # the name tells it from a folder of old-style log dirs of several jobs
        subs = [c for c in p.iterdir() if c.is_dir()]
        return bool(subs) and all(_RUN_ID.fullmatch(c.name) and _has_attempts_or_ranks(c) for c in subs)
    except PermissionError:
        return False


def find_jobs(paths_or_glob: str | os.PathLike | Iterable[str | os.PathLike], extensions=LOG_EXTENSIONS) -> tuple[list[str], list[str]]:
    """Expand files, folders and globs into ``(log_files, log_dirs)``, both sorted.

    A torchrun log folder is one job and is not descended into; any other folder is
    walked for files whose name ends with one of ``extensions``.
    """
    if isinstance(paths_or_glob, (str, os.PathLike)):
        items = [paths_or_glob]
    else:
        items = list(paths_or_glob)
    files: set[str] = set()
    dirs: set[str] = set()
    for item in items:
        s = os.fspath(item)
        expanded = sorted(_glob.glob(s, recursive=True)) if _glob.has_magic(s) else [s]
        if not expanded and not _glob.has_magic(s):
            raise FileNotFoundError(s)
        for e in expanded:
            p = Path(e)
            if p.is_file():
                files.add(str(p.resolve()))
            elif is_log_dir(p):
                dirs.add(str(p.resolve()))
            elif p.is_dir():
                for root, subdirs, names in os.walk(p):
                    if is_log_dir(root):
                        dirs.add(str(Path(root).resolve()))
                        subdirs[:] = []
                        continue
                    subdirs.sort()
                    for n in names:
                        if n.endswith(tuple(extensions)):
                            files.add(str((Path(root) / n).resolve()))
            elif not p.exists():
                raise FileNotFoundError(e)
    # a file inside a log folder belongs to that folder's job
    files = {f for f in files if not any(f.startswith(d + os.sep) for d in dirs)}
    return sorted(files), sorted(dirs)


# ------------------------------------------------------------------ rows


def report_rows(report, job_id: str, path: str, date: str | None = None, host_fallback: str | None = None, version: str | None = None) -> list[dict]:
    """The rows of one job's ``torchdx.Report``, computed from ``report.to_json()`` (so a
    row always agrees with the ``report_json`` beside it). See ``finding_host`` for how
    the ``host`` column is found."""
    text = report.to_json()
    return rows_from_report(json.loads(text), text, job_id=job_id, path=path, date=date, host_fallback=host_fallback, version=version or torchdx.__version__)


class Diagnose:
    """Ray Data batch UDF: a batch of job logs in, one row per finding out.

    Use as a callable class so each worker builds its engine once::

        ds.map_batches(Diagnose, compute=ray.data.ActorPoolStrategy(size=2), batch_format="pyarrow",
                       fn_constructor_kwargs={"job_id_pattern": r"(?P<date>\\d{4}-\\d{2}-\\d{2})/(?P<job>[^/]+)"})

    Input columns: ``path`` (required) and ``bytes`` (the file's content, as
    ``read_binary_files(..., include_paths=True)`` gives, plain, gzip or zstd; null or
    absent for a torchrun log folder, which is read from ``path`` on the worker).

    ``job_id_pattern``: a regex searched in the path (``/`` separators) with a named
    group ``job``; optional groups ``date`` (per-day/week trends in ``torchdx.fleet``) and
    ``host`` (used when the report names no host for a finding). Default: the parent
    folder's name for a file, the folder's own name for a log folder. A path the
    pattern does not match keeps the default.
    ``rules_dir``: a folder of extra rule files (``torchdx diagnose --rules``).
    ``worker_stats``: add ``worker_pid`` and ``worker_maxrss_kb`` columns (the worker
    process's peak RSS so far, see ``peak_rss_kb``), for capacity planning.

    Returns a ``pyarrow.Table`` (schema ``SCHEMA``) whatever the input batch format: Ray
    takes any batch type back, and Arrow keeps the nullable integer columns (``rank``,
    ``first_line``) integers where pandas would turn them into floats.
    """

    def __init__(self, job_id_pattern: str | None = None, rules_dir: str | os.PathLike | None = None, worker_stats: bool = False):
        self.pattern = re.compile(job_id_pattern) if job_id_pattern else None
        if self.pattern is not None and "job" not in self.pattern.groupindex:
            raise ValueError("job_id_pattern needs a named group `job`, e.g. r'/(?P<job>[^/]+)/[^/]+$'")
        self.rules_dir = os.fspath(rules_dir) if rules_dir else None
        self.worker_stats = worker_stats
        self.version = torchdx.__version__
        # one engine per worker, built here (Ray builds the callable class once per actor)
        self.engine = torchdx.Engine(rules_dir=self.rules_dir)
        self.schema = pa.schema(list(SCHEMA) + ([pa.field(n, t) for n, t in _STATS_FIELDS] if worker_stats else []))

    # -- identity of a job from its path
    def job_of(self, path: str, is_dir: bool) -> tuple[str, str | None, str | None]:
        """``(job_id, date, host)`` for a path."""
        posix = path.replace(os.sep, "/").rstrip("/")
        pp = PurePosixPath(posix)
        job = pp.name if is_dir else pp.parent.name
        date = host = None
        if self.pattern is not None:
            m = self.pattern.search(posix)
            if m:
                job = m.group("job") or job
                gd = m.groupdict()
                date = iso_date(gd.get("date")) or gd.get("date")
                host = gd.get("host")
        return job, date, host

    def diagnose_one(self, path: str, data: bytes | None) -> list[dict]:
        is_dir = data is None and os.path.isdir(path)
        job, date, host = self.job_of(path, is_dir)
        try:
            # bytes: the file's content as read (gzip and zstd are decompressed by the
            # engine); None: a torchrun log folder, read on this worker
            report = self.engine.diagnose_file(path) if data is None else self.engine.diagnose(bytes(data))
        except Exception as e:  # one bad job must not sink the batch
            return [error_row(job_id=job, path=path, date=date, host=host, message=f"{type(e).__name__}: {e}", version=self.version)]
        return report_rows(report, job, path, date, host, self.version)

    def __call__(self, batch: Any):
        _, paths, blobs = _columns(batch)
        rows: list[dict] = []
        for path, data in zip(paths, blobs):
            rows.extend(self.diagnose_one(path, data))
        if self.worker_stats:
            me = peak_rss_kb()
            for r in rows:
                r.update(worker_pid=os.getpid(), worker_maxrss_kb=me)
        return pa.Table.from_pylist(rows, schema=self.schema)


def peak_rss_kb() -> int:
    """This process's peak resident set (KiB): ``VmHWM`` from ``/proc/self/status``, which
    starts afresh at ``exec`` (``getrusage``'s ``ru_maxrss`` keeps the peak of the process
    that forked it), else ``ru_maxrss``."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    import resource  # noqa: PLC0415

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _columns(batch) -> tuple[str, list[str], list[bytes | None]]:
    if isinstance(batch, pa.Table):
        paths = batch.column("path").to_pylist()
        blobs = batch.column("bytes").to_pylist() if "bytes" in batch.column_names else [None] * len(paths)
        return "arrow", paths, blobs
    mod = type(batch).__module__
    if mod.startswith("pandas"):
        paths = list(batch["path"])
        blobs = list(batch["bytes"]) if "bytes" in batch.columns else [None] * len(paths)
        return "pandas", paths, [None if _isnull(b) else b for b in blobs]
    if isinstance(batch, dict):  # "numpy" batches: dict of arrays
        paths = [str(p) for p in batch["path"]]
        blobs = list(batch["bytes"]) if "bytes" in batch else [None] * len(paths)
        return "numpy", paths, [None if _isnull(b) else b for b in blobs]
    raise TypeError(f"unsupported batch type {type(batch)!r}")


def _isnull(v) -> bool:
    if v is None:
        return True
    try:
        return isinstance(v, float) and v != v
    except Exception:  # pragma: no cover
        return False


# ------------------------------------------------------------------ datasets


def read_jobs(
    paths_or_glob,
    *,
    job_id_pattern: str | None = None,
    rules_dir: str | os.PathLike | None = None,
    worker_stats: bool = False,
    concurrency: int | tuple[int, int] | None = None,
    batch_size: int | None = 16,
    num_cpus: float = 1,
    read_num_cpus: float | None = None,
    extensions=LOG_EXTENSIONS,
    **map_batches_kwargs,
):
    """A ``ray.data.Dataset`` of finding rows for files, folders and globs.

    Files are read with ``ray.data.read_binary_files(..., include_paths=True)``; each
    torchrun log folder is one job, an item of ``ray.data.from_items`` read on the worker
    by the actor's ``Engine.diagnose_file(folder)`` (so the folder must be visible to the
    workers: a shared or local file system). The two inputs are united first, then go through
    one pool of :class:`Diagnose` workers (``concurrency`` of them, ``num_cpus`` each;
    ``read_num_cpus`` for the read tasks). On a small cluster keep
    ``concurrency * num_cpus + read_num_cpus`` within the CPUs, or reads starve.
    """
    import ray  # noqa: PLC0415
    import ray.data  # noqa: PLC0415,F401

    files, dirs = find_jobs(paths_or_glob, extensions)
    if not files and not dirs:
        raise FileNotFoundError(f"no job logs in {paths_or_glob!r}")
    inputs = []
    if files:
        inputs.append(ray.data.read_binary_files(files, include_paths=True, **({"num_cpus": read_num_cpus} if read_num_cpus is not None else {})))
    if dirs:
        # one item per folder, with a typed null `bytes` so the union has one schema;
        # Diagnose reads the folder on the worker with its Engine.diagnose_file(folder)
        inputs.append(ray.data.from_items([{"path": d} for d in dirs]).map_batches(_folder_items, batch_format="pyarrow", **({"num_cpus": read_num_cpus} if read_num_cpus is not None else {})))
    ds = inputs[0] if len(inputs) == 1 else inputs[0].union(*inputs[1:])
    kw = dict(
        fn_constructor_kwargs={"job_id_pattern": job_id_pattern, "rules_dir": rules_dir, "worker_stats": worker_stats},
        batch_size=batch_size,
        batch_format="pyarrow",
        num_cpus=num_cpus,
        **map_batches_kwargs,
    )
    if concurrency is not None and "compute" not in kw:
        kw.update(_actor_pool(concurrency))
    return ds.map_batches(Diagnose, **kw)


def _actor_pool(concurrency) -> dict:
    """``compute=ActorPoolStrategy(...)`` (Ray >= 2.51 deprecates ``concurrency=``)."""
    import ray.data  # noqa: PLC0415

    strategy = getattr(ray.data, "ActorPoolStrategy", None)
    if strategy is None:  # pragma: no cover - old Ray
        return {"concurrency": concurrency}
    if isinstance(concurrency, tuple):
        return {"compute": strategy(min_size=concurrency[0], max_size=concurrency[1])}
    return {"compute": strategy(size=int(concurrency))}


def _folder_items(batch: pa.Table) -> pa.Table:
    paths = batch.column("path")
    return pa.table({"bytes": pa.nulls(len(paths), pa.binary()), "path": paths.cast(pa.string())})


def diagnose_to_parquet(paths, out_dir: str | os.PathLike, **kw) -> str:
    """Diagnose every job under ``paths`` (see :func:`read_jobs`) and write the rows with
    Ray's Parquet sink to ``out_dir`` (any path ``write_parquet`` takes). Returns it."""
    ds = read_jobs(paths, **kw)
    ds.write_parquet(os.fspath(out_dir))
    return os.fspath(out_dir)


def rows_from_json(report_json: str) -> list[dict]:
    """Plain dict findings of a stored ``report_json`` (for notebooks)."""
    return json.loads(report_json).get("findings", [])
