"""Generate a fleet of failed-job logs for the torchdx.ray / torchdx.fleet tests.

The failure snippets are the rule pack's own example logs (``rules/*.toml``,
``[[example]] expect = "match"``), so every family the engine knows appears. Around
each snippet the generator writes what a torchrun job log holds: launcher lines, per-rank
training noise (step lines, tqdm ``\\r`` bars, NCCL INFO chatter, warnings) interleaved
with the traceback, ``[rankN]:`` prefixes, and the launcher's ChildFailedError summary
naming the host. Some logs are damaged (ANSI colour codes, CRLF line ends, a cut last
line, stray non-UTF-8 bytes, gzip), some jobs are clean (no failure), some repeat across
attempts (same base job id, same snippet, later days), and some are torchrun
``--log-dir`` folders (``attempt_N/RANK/stdout.log|stderr.log|error.json``).

Layout: ``OUT/<YYYY-MM-DD>/<job_id>/train.log[.gz]`` for a file job,
``OUT/<YYYY-MM-DD>/<job_id>/[<run_id>/]attempt_0/<local rank>/...`` for a folder job,
and ``OUT/manifest.json`` describing every job: what was planted, not what torchdx says.
A manifest entry's ``rank`` is the global rank of the failing process, and
``rank_stated`` says whether the log states it (a ``[rankN]:`` prefix, the launcher's
``rank : N``, a log folder's rank folder: one node, so local ranks are global), and
``rank_prefixed`` whether the failure's own lines carry it (a prefix, a rank folder);
without either (one process, no prefix) the log does not say. ``host`` is the failing process's
host, named in the log when ``host_in_log`` (the launcher's Root Cause summary; a
snippet's own ``host :`` lines are rewritten to it, so a log never names two hosts for
one failure); ``hosts_in_log`` lists every host the log names.

    python python/tests/genlogs.py OUT [N_JOBS] [SEED]

Rules folder: env ``TORCHDX_RULES_DIR``, else the repository's ``rules/``.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import math
import os
import random
import re
import sys
from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

RANK_PREFIX = re.compile(r"^\[(?:rank|default)\d+\]:\s?")
# a torchrun Root Cause summary's host line, in a snippet (maybe rank-prefixed)
HOST_LINE = re.compile(r"^((?:\[(?:rank|default)\d+\]:)?\s*host\s*:\s*)\S.*$")
# An MPI launcher names the node of the process that died (`... with PID 118842 on node
# node17 exited on signal 11`): rewritten to the planted host like a summary's `host :`.
NODE_TEXT = re.compile(r"(noticed that process rank \d+ with PID \d+ on node )(\S+)")


def _rehost(ln: str, host: str) -> str:
    ln = HOST_LINE.sub(lambda m: m.group(1) + host, ln)
    return NODE_TEXT.sub(lambda m: m.group(1) + host, ln)


def _names_host(ln: str) -> bool:
    return bool(HOST_LINE.match(ln) or NODE_TEXT.search(ln))
START_DATE = dt.date(2026, 4, 6)  # a Monday: four ISO weeks follow


def rules_dir() -> Path:
    env = os.environ.get("TORCHDX_RULES_DIR")
    cands = [Path(env)] if env else []
    cands.append(Path(__file__).resolve().parent.parent.parent / "rules")
    for c in cands:
        if c.is_dir() and any(c.glob("*.toml")):
            return c
    raise FileNotFoundError(f"no rules folder found (tried {', '.join(map(str, cands))}); set TORCHDX_RULES_DIR")


@dataclass
class Snippet:
    rule: str
    family: str
    name: str
    log: str


def load_snippets(rdir: Path | None = None) -> list[Snippet]:
    rdir = rdir or rules_dir()
    out = []
    for f in sorted(rdir.glob("*.toml")):
        d = tomllib.loads(f.read_text(encoding="utf-8"))
        for e in d.get("example", []):
            if e.get("expect") == "match" and e.get("log", "").strip():
                out.append(Snippet(d["id"], d["family"], e.get("name", ""), e["log"]))
    if len(out) < 50:
        raise RuntimeError(f"only {len(out)} example logs in {rdir}")
    return out


# ---------------------------------------------------------------- noise


def _noise_line(rng: random.Random, rank: int, world: int, host: str, step: int) -> str:
    k = rng.random()
    if k < 0.62:
        return (
            f"[rank{rank}]:step {step} epoch {step // 5000} loss {2 + rng.random():.4f} "
            f"lr 3.00e-04 grad_norm {rng.random() * 5:.3f} tokens/s {180000 + rng.randrange(20000)}"
        )
    if k < 0.75:
        pct = rng.randrange(100)
        bar = "#" * (pct // 5)
        return (
            f"[rank{rank}]:Epoch {step // 5000}: {pct:>3}%|{bar:<20}| {pct * 50}/5000 [12:{rng.randrange(60):02}<04:00, 3.1it/s]"
            f"\r[rank{rank}]:Epoch {step // 5000}: {pct + 1:>3}%|{bar:<20}| {pct * 50 + 50}/5000"
        )
    if k < 0.88:
        return (
            f"{host}:{4000 + rank}:{4100 + rank} [{rank % 8}] NCCL INFO Channel {rng.randrange(32):02}/0 : "
            f"{rank} -> {(rank + 1) % max(world, 1)} via P2P/CUMEM/read"
        )
    if k < 0.95:
        return (
            f"[rank{rank}]:/opt/conda/lib/python3.11/site-packages/torch/utils/checkpoint.py:{90 + rng.randrange(10)}: "
            "UserWarning: torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly."
        )
    return (
        f"2026-04-06 10:{rng.randrange(60):02}:{rng.randrange(60):02},{rng.randrange(1000):03} INFO [trainer] "
        f"rank {rank} saved checkpoint shard {rng.randrange(64)} to /mnt/ckpt/step_{step}/shard_{rank}.pt"
    )


def _launcher_head(rng: random.Random, world: int, day: dt.date) -> list[str]:
    md = day.strftime("%m%d")
    pid = 700 + rng.randrange(300)
    return [
        f"W{md} 09:00:01.000000 {pid} torch/distributed/run.py:793] ",
        f"W{md} 09:00:01.000000 {pid} torch/distributed/run.py:793] *****************************************",
        f"W{md} 09:00:01.000000 {pid} torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. ",
        f"W{md} 09:00:01.000000 {pid} torch/distributed/run.py:793] *****************************************",
        f"I{md} 09:00:02.000000 {pid} torch/distributed/elastic/agent/server/api.py:525] [default] starting workers for entrypoint: python3 (nproc_per_node={min(world, 8)})",
    ]


def _other_node_tail(rng: random.Random, rank: int, host: str, day: dt.date) -> list[str]:
    """Another node's torchrun agent: its workers were stopped after the real failure."""
    pid = 5000 + rng.randrange(3000)
    return [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "train.py FAILED",
        "------------------------------------------------------------",
        "Failures:",
        "  <NO_OTHER_FAILURES>",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        f"  time      : {day.isoformat()}_10:12:46",
        f"  host      : {host}",
        f"  rank      : {rank} (local_rank: {rank % 8})",
        f"  exitcode  : -15 (pid: {pid})",
        "  error_file: <N/A>",
        f"  traceback : Signal 15 (SIGTERM) received by PID {pid}",
        "============================================================",
    ]


def _launcher_tail(rng: random.Random, rank: int, world: int, host: str, day: dt.date) -> list[str]:
    md = day.strftime("%m%d")
    pid = 5000 + rng.randrange(3000)
    lines = [
        f"W{md} 10:12:44.101000 {pid} torch/distributed/elastic/multiprocessing/api.py:897] Sending process {pid + r + 1} closing signal SIGTERM"
        for r in range(min(world, 8))
        if r != rank % 8
    ][:4]
    lines += [
        f"E{md} 10:12:44.120000 {pid} torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: 1) local_rank: {rank % 8} (pid: {pid + 30}) of binary: /usr/bin/python3",
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/torchrun", line 8, in <module>',
        "    sys.exit(main())",
        '  File "/usr/local/lib/python3.11/dist-packages/torch/distributed/launcher/api.py", line 263, in launch_agent',
        "    raise ChildFailedError(",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "train.py FAILED",
        "------------------------------------------------------------",
        "Failures:",
        "  <NO_OTHER_FAILURES>",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        f"  time      : {day.isoformat()}_10:12:44",
        f"  host      : {host}",
        f"  rank      : {rank} (local_rank: {rank % 8})",
        f"  exitcode  : 1 (pid: {pid + 30})",
        "  error_file: <N/A>",
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
        "============================================================",
    ]
    return lines


# ---------------------------------------------------------------- damage


def _damage(rng: random.Random, data: bytes, kinds: list[str]) -> bytes:
    if "ansi" in kinds:
        lines = data.split(b"\n")
        for i in range(len(lines)):
            if rng.random() < 0.3:
                lines[i] = b"\x1b[1;31m" + lines[i] + b"\x1b[0m"
        data = b"\n".join(lines)
    if "latin1" in kinds:
        lines = data.split(b"\n")
        for _ in range(3):
            i = rng.randrange(len(lines))
            lines[i] = lines[i] + b" caf\xe9 \xff\xfe"
        data = b"\n".join(lines)
    if "crlf" in kinds:
        data = data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    if "cut" in kinds:
        data = data.rstrip(b"\r\n")
        last = data.rfind(b"\n")
        # Half the last line, but never fewer than 48 characters of it: a log whose
        # failure is one short line (`Segmentation fault (core dumped)`) cut to
        # `Segmentation fau` holds no failure any reader could name.
        tail = len(data) - last - 1
        cut = last + 1 + min(tail, max(48, tail // 2))
        data = data[:cut]
    return data


# ---------------------------------------------------------------- jobs


def _prefix(lines: list[str], rank: int) -> list[str]:
    return [f"[rank{rank}]:{ln}" for ln in lines]


def _strip_prefix(lines: list[str]) -> list[str]:
    return [RANK_PREFIX.sub("", ln) for ln in lines]


def _snippet_rank(snippet: Snippet) -> int | None:
    m = re.search(r"^\[rank(\d+)\]:", snippet.log, re.M)
    return int(m.group(1)) if m else None


def _body(rng, snippet, world, rank, host, noise_lines, with_prefix, interleave):
    """Noise lines, then the snippet (optionally rank-prefixed and interleaved)."""
    out, step = [], rng.randrange(1, 50_000)
    for _ in range(noise_lines):
        step += 1
        out.append(_noise_line(rng, rng.randrange(world), world, host, step))
    if snippet is None:
        return out
    snip = [_rehost(ln, host) for ln in snippet.log.rstrip("\n").split("\n")]
    if with_prefix and _snippet_rank(snippet) is None:
        snip = _prefix(snip, rank)
    for ln in snip:
        out.append(ln)
        if interleave and world > 1 and rng.random() < 0.15:
            other = (rank + 1 + rng.randrange(world - 1)) % world
            step += 1
            out.append(_noise_line(rng, other, world, host, step))
    return out


def generate(
    out: str | os.PathLike,
    n_jobs: int = 520,
    seed: int = 7,
    folder_share: float = 0.08,
    clean_share: float = 0.06,
    repeat_share: float = 0.10,
    hosts: int = 32,
    family_weights: dict[str, float] | None = None,
    bad_host: tuple[str, float, float] | None = None,
    max_noise_lines: int = 6000,
    days: int = 28,
) -> list[dict]:
    """Write ``n_jobs`` job logs under ``out``; returns (and writes) the manifest.

    ``family_weights``: probability of a job drawing a snippet of that family (the rest
    draw uniformly over all snippets). ``bad_host=(name, share_of_hw, share_of_jobs)``
    plants a host that carries ``share_of_hw`` of the hardware-fault jobs but about
    ``share_of_jobs`` of all jobs.
    """
    rng = random.Random(seed)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    snippets = load_snippets()
    by_family: dict[str, list[Snippet]] = {}
    for s in snippets:
        by_family.setdefault(s.family, []).append(s)
    family_weights = family_weights or {}
    host_names = [f"gpu-node-{i:02d}" for i in range(1, hosts + 1)]
    natural_hw = sum(1 for s in snippets if s.family == "hardware-fault") / len(snippets)
    rest = max(0.0, 1.0 - sum(family_weights.values()))
    # the chance that a failing job draws a hardware fault: its own weight plus its share
    # of the uniform draws
    hw_weight = family_weights.get("hardware-fault", 0.0) + rest * natural_hw
    bad_other = 0.0
    if bad_host:
        name, share_hw, share_jobs = bad_host
        bad_other = max(0.0, (share_jobs - hw_weight * share_hw) / max(1e-9, 1 - hw_weight))

    def pick_host(family: str | None) -> str:
        if bad_host:
            name, share_hw, _ = bad_host
            others = [h for h in host_names if h != name]
            p = share_hw if family == "hardware-fault" else bad_other
            return name if rng.random() < p else rng.choice(others)
        return rng.choice(host_names)

    def pick_snippet() -> Snippet | None:
        if rng.random() < clean_share:
            return None
        r = rng.random()
        acc = 0.0
        for fam, w in family_weights.items():
            acc += w
            if r < acc and fam in by_family:
                return rng.choice(by_family[fam])
        return rng.choice(snippets)

    manifest: list[dict] = []
    i = 0
    job_no = 0
    while i < n_jobs:
        job_no += 1
        snippet = pick_snippet()
        family = snippet.family if snippet else None
        attempts = 1
        if snippet is not None and rng.random() < repeat_share:
            attempts = rng.choice([2, 2, 3])
        attempts = min(attempts, n_jobs - i)
        host = pick_host(family)
        world = rng.choice([1, 2, 4, 8, 8, 16, 32])
        srank = _snippet_rank(snippet) if snippet else None
        rank = srank if srank is not None else rng.randrange(world)
        world = max(world, rank + 1)
        day0 = START_DATE + dt.timedelta(days=rng.randrange(days - attempts))
        is_folder = rng.random() < folder_share
        noise = int(math.exp(rng.uniform(math.log(20), math.log(max_noise_lines))))
        for a in range(1, attempts + 1):
            day = day0 + dt.timedelta(days=a - 1)
            base = f"train-{job_no:05d}"
            job_id = base if attempts == 1 else f"{base}-attempt{a}"
            jdir = out / day.isoformat() / job_id
            jdir.mkdir(parents=True, exist_ok=True)
            entry = {
                "job_id": job_id,
                "base": base,
                "attempt": a,
                "date": day.isoformat(),
                "rule": snippet.rule if snippet else None,
                "family": family,
                "example": snippet.name if snippet else None,
                "host": host,
                "rank": rank if snippet else None,
                "world": world,
                "damage": [],
            }
            if is_folder:
                entry.update(kind="folder", path=str(jdir))
                _write_folder(rng, jdir, snippet, world, rank, host, noise, day, entry)
            else:
                with_prefix = world > 1 and rng.random() < 0.8
                head = rng.random() < 0.7
                lines = _launcher_head(rng, world, day) if head else []
                lines += _body(rng, snippet, world, rank, host, noise, with_prefix, interleave=rng.random() < 0.3)
                summary = snippet is not None and (family == "hardware-fault" or rng.random() < 0.7)
                hosts_in_log = []
                if summary:
                    lines += _launcher_tail(rng, rank, world, host, day)
                    hosts_in_log.append(host)
                    if world >= 16 and rng.random() < 0.6:
                        # a multi-node job: a second node's agent reports its own stopped rank
                        host2 = rng.choice([h for h in host_names if h != host])
                        rank2 = (rank + 8) % world
                        other = _other_node_tail(rng, rank2, host2, day)
                        lines = (other + lines) if rng.random() < 0.5 else (lines + other)
                        hosts_in_log.append(host2)
                if not summary and snippet is not None and any(_names_host(ln) for ln in snippet.log.split("\n")):
                    hosts_in_log.append(host)  # the snippet's own summary, host rewritten
                entry["host_in_log"] = bool(hosts_in_log)
                entry["hosts_in_log"] = hosts_in_log
                # does the log state the rank: the snippet's own prefix, the prefix
                # written here, or the launcher's `rank : N`
                entry["rank_prefixed"] = snippet is not None and (srank is not None or with_prefix)
                entry["rank_stated"] = entry["rank_prefixed"] or summary
                data = ("\n".join(lines) + "\n").encode()
                kinds = [k for k, p in (("ansi", 0.12), ("crlf", 0.12), ("cut", 0.10), ("latin1", 0.06)) if rng.random() < p]
                # A failure of one or two lines ending the log (DeepSpeed's `['python3', ...]
                # exits with return code = -9`) cut in half names nothing any reader could:
                # such a log is not cut (after the draws, so the sequence is unchanged).
                short = snippet is not None and sum(1 for ln in snippet.log.split("\n") if ln.strip()) <= 2
                if "cut" in kinds and short and not summary:
                    kinds.remove("cut")
                data = _damage(rng, data, kinds)
                entry["damage"] = kinds
                name = "train.log"
                if rng.random() < 0.05:
                    data, name = gzip.compress(data, mtime=0), "train.log.gz"
                    entry["damage"].append("gzip")
                p = jdir / name
                p.write_bytes(data)
                entry.update(kind="file", path=str(p), bytes=len(data))
            manifest.append(entry)
            i += 1
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def _snippet_lines(snippet, host):
    """A snippet's lines without rank prefixes (a rank folder's own output), its hosts
    rewritten to ``host``."""
    return [_rehost(ln, host) for ln in _strip_prefix(snippet.log.rstrip("\n").split("\n"))]


def _write_folder(rng, jdir, snippet, world, rank, host, noise, day, entry):
    """A torchrun --log-dir: attempt_N/RANK/{stdout.log,stderr.log,error.json}."""
    n_att = rng.choice([1, 1, 2])
    world = min(world, 8)
    rank = rank % world
    total = 0
    # torch >= 2.x puts a run-id folder between --log-dir and attempt_N
    top = jdir / f"none_{rng.randrange(16**8):08x}" if rng.random() < 0.6 else jdir
    for att in range(n_att):
        for r in range(world):
            rd = top / f"attempt_{att}" / str(r)
            rd.mkdir(parents=True, exist_ok=True)
            steps = [
                _noise_line(rng, r, world, host, s).split("]:", 1)[-1]
                for s in range(max(1, noise // world))
            ]
            (rd / "stdout.log").write_text("\n".join(steps) + "\n")
            err = ""
            if snippet is not None and r == rank and att == n_att - 1:
                snip = _snippet_lines(snippet, host)
                err = "\n".join(snip) + "\n"
                tb = [ln for ln in snip if ln.strip()]
                (rd / "error.json").write_text(
                    json.dumps(
                        {
                            "message": {
                                "message": tb[-1] if tb else "",
                                "extraInfo": {"py_callstack": "\n".join(snip), "timestamp": "1775466764"},
                            }
                        }
                    )
                )
            elif snippet is not None and att < n_att - 1 and r == rank:
                # an earlier attempt that died the same way
                err = "\n".join(_snippet_lines(snippet, host)) + "\n"
            (rd / "stderr.log").write_text(err)
            total += sum(f.stat().st_size for f in rd.iterdir())
    entry["bytes"] = total
    # rank folders are local ranks; on one node (world <= 8 here) they are the global ranks
    entry["rank"] = rank if snippet else None
    entry["rank_stated"] = entry["rank_prefixed"] = snippet is not None
    named = snippet is not None and any(_names_host(ln) for ln in _snippet_lines(snippet, host))
    entry["host_in_log"] = named
    entry["hosts_in_log"] = [host] if named else []
    entry["world"] = world
    entry["attempts_in_folder"] = n_att


if __name__ == "__main__":
    o = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 520
    s = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    m = generate(o, n, s)
    print(f"{len(m)} jobs, {sum(e.get('bytes', 0) for e in m) / 1e6:.1f} MB in {o}")
