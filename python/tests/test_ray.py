"""torchdx.ray on a real local Ray cluster: every row agrees with the CLI's report.

``ray.init(num_cpus=2, include_dashboard=False)`` over >= 500 generated job logs
(genlogs.py: the rule pack's example logs with rank prefixes, launcher lines, training
noise and damage; plain, gzip and torchrun log folders). Every row is checked against
``torchdx diagnose --format json`` of the same log, and the rows against what the
generator planted: the initiating family, rank and host. Throughput (one process, Ray
with 1 and 2 workers) is measured and printed, never asserted.

Skipped as a whole when Ray Data or pyarrow is not installed (``pip install "torchdx[ray]"``).
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("ray")
pytest.importorskip("ray.data")

import genlogs  # noqa: E402
from support import JOB_PATTERN, child_env, diagnose_json, run  # noqa: E402

import torchdx  # noqa: E402
import torchdx.ray as tdray  # noqa: E402

# Ray Data's own deprecation notices, on the first dataset a process runs
RAY_DEPRECATIONS = "ignore::DeprecationWarning:ray.data.context"
pytestmark = pytest.mark.filterwarnings(RAY_DEPRECATIONS)

FIELDS = ("job_id", "date", "finding_index", "family", "rule_id", "role", "rank", "host", "confidence", "culprit_kind", "culprit_expr", "first_line", "summary", "torchdx_version")
# damage that leaves every line of the log whole
GENTLE = {"ansi", "crlf", "gzip"}


# ---------------------------------------------------------------- the oracle


def expected_rows(report_text: str, job_id: str, path: str, date: str | None, version: str) -> list[dict]:
    """What the rows of one job must be, written from the report contract and the
    documented column rules (not from torchdx.ray's code): one row per finding, in
    order, or one `none` row."""
    rep = json.loads(report_text)
    fs = rep["findings"]
    by_rank: dict[int, str] = {}
    hosts = set()
    for f in fs:
        h = f["evidence"].get("host")
        if h:
            hosts.add(h)
            r = f["evidence"].get("rank", f["rank"])
            if isinstance(r, int):
                by_rank.setdefault(r, h)
    base = dict(job_id=job_id, path=path, date=date, torchdx_version=version)
    if not fs:
        return [dict(base, finding_index=None, family=None, rule_id=None, role="none", rank=None, host=None, confidence=None, culprit_kind=None, culprit_expr=None, first_line=None, summary=None)]
    out = []
    for i, f in enumerate(fs):
        c = f.get("culprit")
        if f["evidence"].get("host"):
            host = f["evidence"]["host"]
        elif f["rank"] is not None:
            host = by_rank.get(f["rank"])
        else:
            host = next(iter(hosts)) if len(hosts) == 1 else None
        out.append(
            dict(
                base,
                finding_index=i,
                family=f["family"],
                rule_id=f["id"],
                role=f["role"],
                rank=f["rank"],
                host=host,
                confidence=f["confidence"],
                culprit_kind=c["kind"] if c else None,
                culprit_expr=c.get("expr") if c else None,
                first_line=f["location"]["line"],
                summary=(c.get("summary") if c else None) or f["title"],
            )
        )
    return out


def by_path(table) -> dict[str, list[dict]]:
    rows = defaultdict(list)
    for r in table.to_pylist():
        rows[r["path"]].append(r)
    for v in rows.values():
        v.sort(key=lambda r: -1 if r["finding_index"] is None else r["finding_index"])
    return rows


def materialize(ds):
    import ray

    tables = ray.get(ds.to_arrow_refs())
    return pa.concat_tables(tables) if tables else None


def ordered(text: str):
    """JSON with objects as lists of pairs: equality then checks key order too."""
    return json.loads(text, object_pairs_hook=lambda pairs: [(k, v) for k, v in pairs])


# ---------------------------------------------------------------- the cluster


@pytest.fixture(scope="module")
def ray_rows(ray_cluster, fleet_logs):
    """Every generated job through read_jobs on 2 workers (timed, with worker stats)."""
    out, manifest = fleet_logs
    t0 = time.perf_counter()
    ds = tdray.read_jobs(out, job_id_pattern=JOB_PATTERN, concurrency=2, num_cpus=0.5, read_num_cpus=0.5, worker_stats=True, batch_size=8)
    table = materialize(ds)
    return table, time.perf_counter() - t0


@pytest.fixture(scope="module")
def cli_json(cli, fleet_logs) -> dict[str, str]:
    """The CLI's JSON report of every job (the console script, a process per job: files
    as they are, .gz included, and torchrun log folders as folders)."""
    out, manifest = fleet_logs
    with ThreadPoolExecutor(2) as ex:
        return dict(zip([e["path"] for e in manifest], ex.map(lambda e: diagnose_json(cli, path=e["path"]), manifest)))


def test_generated_fleet_is_varied(fleet_logs):
    out, manifest = fleet_logs
    assert len(manifest) >= 500
    fams = {e["family"] for e in manifest if e["family"]}
    assert len(fams) >= 30, fams
    assert {e["kind"] for e in manifest} == {"file", "folder"}
    assert sum(e["kind"] == "folder" for e in manifest) >= 20
    damage = {d for e in manifest for d in e["damage"]}
    assert {"ansi", "crlf", "cut", "latin1", "gzip"} <= damage
    assert any(e["family"] is None for e in manifest), "some jobs must be clean"
    assert any(e["attempt"] > 1 for e in manifest), "some jobs must repeat"
    assert len({e["world"] for e in manifest}) >= 4
    assert sum(len(e["hosts_in_log"]) > 1 for e in manifest) >= 10, "some logs hold two nodes' summaries"


def test_every_row_agrees_with_the_cli(ray_rows, fleet_logs, cli_json):
    table, _ = ray_rows
    out, manifest = fleet_logs
    rows = by_path(table)
    version = torchdx.__version__
    # every job is accounted for, by its path, exactly once
    assert set(rows) == {e["path"] for e in manifest}
    assert len(rows) == len(manifest)
    n_rows = 0
    for e in manifest:
        got = rows[e["path"]]
        cli_text = cli_json[e["path"]]
        want = expected_rows(cli_text, e["job_id"], e["path"], e["date"], version)
        assert [{k: r[k] for k in FIELDS} for r in got] == [{k: w[k] for k in FIELDS} for w in want], e["path"]
        # the full report rides on every row: the CLI's JSON, field for field, in order
        for r in got:
            assert ordered(r["report_json"]) == ordered(cli_text), e["path"]
        n_rows += max(1, len(json.loads(cli_text)["findings"]))
    assert n_rows == table.num_rows
    roles = Counter(table.column("role").to_pylist())
    assert {"initiating", "collateral", "none"} <= set(roles) and "error" not in roles, roles
    assert roles["none"] == sum(1 for t in cli_json.values() if not json.loads(t)["findings"])
    assert roles["initiating"] == sum(1 for t in cli_json.values() if json.loads(t)["initiating"] is not None)
    assert len({f for f in table.column("family").to_pylist() if f}) >= 30
    assert len({h for h in table.column("host").to_pylist() if h}) >= 25, "hosts come from torchrun's Root Cause summaries"
    print(f"\n{n_rows} rows of {len(manifest)} jobs agree with `torchdx diagnose --format json`")


def test_rows_find_the_planted_failures(ray_rows, fleet_logs):
    """The initiating row of each job against what genlogs.py planted: the family, the
    rank where the log states it, the host where the log names it, and no host the log
    does not name."""
    table, _ = ray_rows
    out, manifest = fleet_logs
    rows = by_path(table)

    def initiating(e):
        ini = [r for r in rows[e["path"]] if r["role"] == "initiating"]
        assert len(ini) <= 1, e["path"]
        return ini[0] if ini else None

    clean = [e for e in manifest if e["family"] is None]
    assert clean and all([r["role"] for r in rows[e["path"]]] == ["none"] for e in clean)
    failing = [e for e in manifest if e["family"] is not None]
    fam_miss = [(e["job_id"], e["rule"], e["family"], (initiating(e) or {}).get("family"), e["damage"]) for e in failing if (initiating(e) or {}).get("family") != e["family"]]
    assert len(fam_miss) <= 0.05 * len(failing), fam_miss
    # a failure in a log whose lines are all whole: its family nearly always (the misses
    # are rule examples that read differently inside a torchrun log: a second Root Cause
    # summary, a DataLoader worker envelope around the snippet)
    whole = [e for e in failing if set(e["damage"]) <= GENTLE]
    whole_miss = [m for m in fam_miss if set(m[4]) <= GENTLE]
    assert len(whole) >= 300 and len(whole_miss) <= 0.04 * len(whole), whole_miss

    found = [e for e in failing if (initiating(e) or {}).get("family") == e["family"]]
    # the rank, where the failure's own lines carry it (a [rankN]: prefix, a rank folder);
    # the misses are timeouts whose snippet names a peer rank: the engine says no rank
    prefixed = [e for e in found if e["rank_prefixed"]]
    rank_miss = [(e["job_id"], e["rule"], e["rank"], initiating(e)["rank"]) for e in prefixed if initiating(e)["rank"] != e["rank"]]
    assert len(prefixed) >= 300 and len(rank_miss) <= 0.08 * len(prefixed), rank_miss
    assert sum(e["kind"] == "folder" for e in prefixed) >= 20
    # where only the launcher's Root Cause summary states it (`rank : N (local_rank: L)`)
    summary_only = [e for e in found if e["rank_stated"] and not e["rank_prefixed"]]
    summary_miss = [(e["job_id"], e["rule"], e["rank"], initiating(e)["rank"]) for e in summary_only if initiating(e)["rank"] != e["rank"]]
    assert len(summary_only) >= 30 and len(summary_miss) <= 0.2 * len(summary_only), summary_miss

    # the host: wherever the rank is right and the log names hosts, whole, it is the
    # failing rank's host, exactly (two-node logs included)
    hosted = [e for e in found if e["kind"] == "file" and e["hosts_in_log"] and set(e["damage"]) <= GENTLE and initiating(e)["rank"] == e["rank"]]
    host_miss = [(e["job_id"], e["host"], initiating(e)["host"], e["hosts_in_log"]) for e in hosted if initiating(e)["host"] != e["host"]]
    assert len(hosted) >= 200 and sum(len(e["hosts_in_log"]) > 1 for e in hosted) >= 10 and not host_miss, host_miss
    # and never a host the log does not name
    for e in manifest:
        named = set(e["hosts_in_log"])
        assert {r["host"] for r in rows[e["path"]] if r["host"]} <= named, e["path"]
    print(
        f"\ninitiating family as planted: {len(failing) - len(fam_miss)}/{len(failing)} jobs ({len(whole) - len(whole_miss)}/{len(whole)} with whole lines); "
        f"rank: {len(prefixed) - len(rank_miss)}/{len(prefixed)} prefixed, {len(summary_only) - len(summary_miss)}/{len(summary_only)} from the summary only; "
        f"host: {len(hosted)}/{len(hosted)}"
    )


def _local_addresses() -> set:
    import psutil

    out = set()
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family.name in ("AF_INET", "AF_INET6"):
                out.add(ipaddress.ip_address(a.address.split("%")[0]))
    return out


def test_workers_are_built_once_and_stay_on_this_machine(ray_rows, ray_cluster):
    """Two actors did all the work, and no Ray process talks to another machine: every
    connection's peer is one of this machine's own addresses. Under ``unshare -n`` (only
    ``lo`` up) the node address itself is 127.0.0.1."""
    psutil = pytest.importorskip("psutil")

    table, _ = ray_rows
    pids = set(table.column("worker_pid").to_pylist())
    assert len(pids) == 2, f"two Diagnose actors expected, rows came from {pids}"
    local = _local_addresses()
    loopback_only = all(ip.is_loopback for ip in local)
    for n in ray_cluster.nodes():
        ip = ipaddress.ip_address(n["NodeManagerAddress"])
        assert ip in local or ip.is_loopback, n["NodeManagerAddress"]
        if loopback_only:
            assert ip.is_loopback, n["NodeManagerAddress"]
    procs = psutil.Process().children(recursive=True)
    assert procs, "no Ray processes found under this test process"
    remote, peers = [], set()
    for p in procs:
        try:
            conns = p.net_connections(kind="inet")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        for c in conns:
            if c.status != psutil.CONN_LISTEN and c.raddr:
                ip = ipaddress.ip_address(c.raddr.ip.split("%")[0])
                if getattr(ip, "ipv4_mapped", None):
                    ip = ip.ipv4_mapped
                peers.add(str(ip))
                if not (ip.is_loopback or ip in local):
                    remote.append((p.name(), c))
    assert not remote, remote
    assert peers, "expected the Ray processes to hold connections"


def test_map_batches_formats_agree(ray_cluster, ray_rows, fleet_logs):
    """The documented form ``read_binary_files(...).map_batches(Diagnose, ...)`` with
    pandas, numpy and Arrow batches gives the same rows as read_jobs."""
    import ray

    table, _ = ray_rows
    out, manifest = fleet_logs
    files = [e["path"] for e in manifest if e["kind"] == "file"][:60]
    ref = {p: [{k: r[k] for k in FIELDS + ("report_json",)} for r in rs] for p, rs in by_path(table).items() if p in set(files)}
    assert len(ref) == len(files)
    for fmt in ("pandas", "numpy", "pyarrow"):
        ds = ray.data.read_binary_files(files, include_paths=True).map_batches(
            tdray.Diagnose, fn_constructor_kwargs={"job_id_pattern": JOB_PATTERN}, batch_format=fmt, batch_size=7, num_cpus=0.5, **tdray._actor_pool(2)
        )
        got = {p: [{k: r[k] for k in FIELDS + ("report_json",)} for r in rs] for p, rs in by_path(materialize(ds)).items()}
        assert got == ref, fmt


def test_parquet_sink_round_trip(ray_cluster, fleet_logs, cli_json, tmp_path):
    import pyarrow.parquet as pq

    import torchdx.fleet

    out, manifest = fleet_logs
    sub = [e for e in manifest if e["date"] <= "2026-04-09"]
    assert len(sub) >= 30
    pq_dir = tmp_path / "parquet"
    tdray.diagnose_to_parquet([e["path"] for e in sub], pq_dir, job_id_pattern=JOB_PATTERN, concurrency=2, num_cpus=0.5)
    assert list(pq_dir.glob("*.parquet")), "write_parquet wrote nothing"
    t = pq.read_table(pq_dir)
    assert t.schema.field("rank").type == pa.int64() and t.schema.field("finding_index").type == pa.int32()
    assert set(tdray.SCHEMA.names) == set(t.column_names)
    assert sorted(t.column("path").to_pylist()) == sorted(p for e in sub for p in [e["path"]] * max(1, len(json.loads(cli_json[e["path"]])["findings"])))
    # and the fleet summary reads it back: the CLI's initiating families, job for job
    s = torchdx.fleet.summary(pq_dir)
    assert s.jobs == len(sub)
    want = Counter()
    for e in sub:
        rep = json.loads(cli_json[e["path"]])
        if rep["initiating"] is not None:
            want[rep["findings"][rep["initiating"]]["family"]] += 1
    assert {f.family: f.jobs for f in s.families if f.jobs} == dict(want)
    assert s.clean_jobs == sum(1 for e in sub if not json.loads(cli_json[e["path"]])["findings"])


def test_fleet_command_diagnoses_on_the_cluster(ray_cluster, fleet_logs, cli_json, cli, tmp_path):
    """``torchdx fleet diagnose`` (a driver process of its own, connected to this
    cluster) writes Parquet; ``torchdx fleet summarize`` reads it back."""
    out, manifest = fleet_logs
    day = "2026-04-10"
    sub = [e for e in manifest if e["date"] == day]
    assert len(sub) >= 10
    env = child_env(RAY_ADDRESS=ray_cluster.get_runtime_context().gcs_address)
    p = run([cli, "fleet", "diagnose", str(out / day), "--out", str(tmp_path / "pq"), "--job-id-pattern", JOB_PATTERN, "--concurrency", "1", "--num-cpus", "0.5"], env=env, timeout=600)
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    assert f"{len(sub)} jobs".encode() in p.stderr
    p = run([cli, "fleet", "summarize", str(tmp_path / "pq"), "--json"])
    assert p.returncode == 0, p.stderr.decode()
    s = json.loads(p.stdout)
    assert s["jobs"] == len(sub) and s["periods"] == [day] and s["jobs_per_period"] == [len(sub)]
    want = Counter()
    for e in sub:
        rep = json.loads(cli_json[e["path"]])
        if rep["initiating"] is not None:
            want[rep["findings"][rep["initiating"]]["family"]] += 1
    assert {f["family"]: f["jobs"] for f in s["families"] if f["jobs"]} == dict(want)
    # errors are said, with exit status 2
    p = run([cli, "fleet", "diagnose", str(tmp_path / "missing"), "--out", str(tmp_path / "x")], env=env)
    assert p.returncode == 2 and b"missing" in p.stderr


def _job_bytes(e) -> int:
    p = Path(e["path"])
    if p.is_dir():
        return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    return p.stat().st_size


SINGLE = r"""
import json, sys, time
import torchdx.ray as tdray
files, dirs = tdray.find_jobs(sys.argv[1])
t0 = time.perf_counter()
d = tdray.Diagnose(job_id_pattern=sys.argv[2])
n = 0
for p in files:
    with open(p, "rb") as fh:
        n += len(d.diagnose_one(p, fh.read()))
for p in dirs:
    n += len(d.diagnose_one(p, None))
print(json.dumps({"secs": time.perf_counter() - t0, "rows": n, "maxrss_kb": tdray.peak_rss_kb()}))
"""


def test_throughput(ray_cluster, ray_rows, fleet_logs, artifacts):
    """logs/s and MB/s: one process without Ray, Ray with 1 worker, with 2 workers; peak
    RSS per worker. Printed and saved (``TORCHDX_ARTIFACTS``), not asserted."""
    table2, _ = ray_rows
    out, manifest = fleet_logs
    n_jobs = len(manifest)
    mb = sum(_job_bytes(e) for e in manifest) / 1e6

    p = subprocess.run([sys.executable, "-c", SINGLE, str(out), JOB_PATTERN], capture_output=True, text=True, env=os.environ.copy())
    assert p.returncode == 0, p.stderr
    single = json.loads(p.stdout.strip().splitlines()[-1])
    assert single["rows"] == table2.num_rows

    results = {"one process, no Ray": {"secs": single["secs"], "peak_rss_mb": [single["maxrss_kb"] / 1024]}}
    for workers in (1, 2):
        t0 = time.perf_counter()
        ds = tdray.read_jobs(out, job_id_pattern=JOB_PATTERN, concurrency=workers, num_cpus=0.5, read_num_cpus=0.5, worker_stats=True, batch_size=8)
        t = materialize(ds)
        secs = time.perf_counter() - t0
        assert t.num_rows == table2.num_rows
        peak: dict[int, int] = defaultdict(int)
        for pid, kb in zip(t.column("worker_pid").to_pylist(), t.column("worker_maxrss_kb").to_pylist()):
            peak[pid] = max(peak[pid], kb)
        assert len(peak) == workers
        results[f"Ray, {workers} worker{'s' if workers > 1 else ''}"] = {"secs": secs, "peak_rss_mb": sorted(v / 1024 for v in peak.values())}
    lines = [f"throughput over {n_jobs} jobs, {mb:.1f} MB (torchdx {torchdx.__version__}, {os.cpu_count()} CPUs)"]
    lines.append(f"  {'setup':<22} {'secs':>7} {'logs/s':>8} {'MB/s':>7}  peak RSS per worker (MB)")
    for k, v in results.items():
        v["logs_per_s"] = n_jobs / v["secs"]
        v["mb_per_s"] = mb / v["secs"]
        lines.append(f"  {k:<22} {v['secs']:7.2f} {v['logs_per_s']:8.1f} {v['mb_per_s']:7.2f}  {', '.join(f'{x:.0f}' for x in v['peak_rss_mb'])}")
    lines.append("  (Ray figures include starting the actors and reading the files into the object store)")
    print("\n" + "\n".join(lines))
    (artifacts / "throughput.json").write_text(json.dumps({"jobs": n_jobs, "mb": mb, "results": results, "cpus": os.cpu_count()}, indent=1))
    (artifacts / "throughput.txt").write_text("\n".join(lines) + "\n")


# ---------------------------------------------------------------- the UDF alone

OOM = (
    b'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    y = model(x)\n'
    b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.02 GiB is free.\n"
)


def test_udf_batches_and_edge_cases(tmp_path, cli):
    clean = tmp_path / "2026-04-07" / "job-clean" / "train.log"
    clean.parent.mkdir(parents=True)
    clean.write_bytes(b"[rank0]:step 1 loss 2.0\n[rank0]:step 2 loss 1.9\n")
    bad = tmp_path / "2026-04-07" / "job-bad" / "train.log.gz"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"\x1f\x8b\x08\x00not really gzip")
    oom = tmp_path / "2026-04-08" / "job-oom" / "train.log"
    oom.parent.mkdir(parents=True)
    oom.write_bytes(OOM)
    paths = [str(clean), str(bad), str(oom)]
    blobs = [Path(p).read_bytes() for p in paths]
    d = tdray.Diagnose(job_id_pattern=JOB_PATTERN)
    assert isinstance(d.engine, torchdx.Engine)
    t = d(pa.table({"bytes": blobs, "path": paths}))
    assert t.schema.equals(tdray.SCHEMA)
    rows = t.to_pylist()
    byjob = defaultdict(list)
    for r in rows:
        byjob[r["job_id"]].append(r)
    assert set(byjob) == {"job-clean", "job-bad", "job-oom"}
    (c,) = byjob["job-clean"]
    assert c["role"] == "none" and c["family"] is None and c["finding_index"] is None and c["date"] == "2026-04-07"
    assert json.loads(c["report_json"])["findings"] == []
    (b,) = byjob["job-bad"]
    assert b["role"] == "error" and b["family"] is None and b["report_json"] is None
    assert b["summary"].startswith("ValueError: ") and "compressed" in b["summary"], b["summary"]
    o = byjob["job-oom"]
    assert o[0]["family"] == "cuda-oom" and o[0]["role"] == "initiating" and o[0]["first_line"] == 1 and o[0]["date"] == "2026-04-08"
    assert ordered(o[0]["report_json"]) == ordered(diagnose_json(cli, path=str(oom)))
    # pandas and numpy batches give the same rows, as a typed Arrow table
    pd = pytest.importorskip("pandas")
    import numpy as np

    tp = d(pd.DataFrame({"bytes": blobs, "path": paths}))
    assert tp.schema.equals(tdray.SCHEMA) and tp.to_pylist() == rows
    tn = d({"bytes": np.array(blobs, dtype=object), "path": np.array(paths)})
    assert tn.to_pylist() == rows
    # the default job id is the parent folder's name; a folder job is the folder's name
    assert tdray.Diagnose().job_of("/x/2026-04-07/job-9/train.log", False) == ("job-9", None, None)
    assert tdray.Diagnose().job_of("/x/2026-04-07/job-9", True) == ("job-9", None, None)
    assert tdray.Diagnose(job_id_pattern=r"/(?P<host>gpu-[^/]+)/(?P<job>\w+)\.log$").job_of("/l/gpu-a1/j42.log", False) == ("j42", None, "gpu-a1")
    with pytest.raises(ValueError, match="named group `job`"):
        tdray.Diagnose(job_id_pattern=r"/(\w+)\.log$")


def test_compressed_jobs_are_the_plain_ones(tmp_path, cli):
    """gzip and zstd files give the plain file's report (decompressed by the engine)."""
    import gzip

    plain = tmp_path / "j1" / "train.log"
    plain.parent.mkdir()
    plain.write_bytes(OOM)
    (tmp_path / "j2").mkdir()
    gz = tmp_path / "j2" / "train.log.gz"
    gz.write_bytes(gzip.compress(OOM))
    paths = [plain, gz]
    if shutil.which("zstd"):
        (tmp_path / "j3").mkdir()
        zst = tmp_path / "j3" / "train.log.zst"
        subprocess.run(["zstd", "-q", "-o", str(zst), str(plain)], check=True)
        paths.append(zst)
    t = tdray.Diagnose()(pa.table({"bytes": [p.read_bytes() for p in paths], "path": [str(p) for p in paths]}))
    rows = t.to_pylist()
    assert [r["job_id"] for r in rows] == [p.parent.name for p in paths]
    want = ordered(diagnose_json(cli, path=str(plain)))
    for r, p in zip(rows, paths):
        assert r["family"] == "cuda-oom" and ordered(r["report_json"]) == want, p
        assert ordered(diagnose_json(cli, path=str(p))) == want, p


def test_find_jobs_treats_a_log_folder_as_one_job(fleet_logs):
    out, manifest = fleet_logs
    files, dirs = tdray.find_jobs(out)
    assert set(files) == {e["path"] for e in manifest if e["kind"] == "file"}
    assert set(dirs) == {e["path"] for e in manifest if e["kind"] == "folder"}
    # a glob reaches the same jobs
    f2, d2 = tdray.find_jobs(str(out / "*" / "*"))
    assert set(f2) | set(d2) == set(files) | set(dirs)
    with pytest.raises(FileNotFoundError):
        tdray.find_jobs(out / "no-such-folder")


def test_rules_dir_reaches_the_engine(tmp_path, cli):
    import re

    src = (genlogs.rules_dir() / "cuda-oom.toml").read_text()
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "cuda-oom.toml").write_text(re.sub(r'(?m)^title = ".*"$', 'title = "CUSTOM OOM TITLE"', src, count=1))
    log = tmp_path / "2026-04-07" / "job-x" / "train.log"
    log.parent.mkdir(parents=True)
    log.write_bytes(OOM)
    row = tdray.Diagnose(rules_dir=rules)(pa.table({"bytes": [OOM], "path": [str(log)]})).to_pylist()[0]
    assert row["family"] == "cuda-oom" and json.loads(row["report_json"])["findings"][0]["title"] == "CUSTOM OOM TITLE"
    assert ordered(row["report_json"]) == ordered(diagnose_json(cli, path=str(log), rules=str(rules)))
    plain = tdray.Diagnose()(pa.table({"bytes": [OOM], "path": [str(log)]})).to_pylist()[0]
    assert json.loads(plain["report_json"])["findings"][0]["title"] != "CUSTOM OOM TITLE"
    (rules / "broken.toml").write_text("id = \n")
    with pytest.raises(ValueError, match="broken.toml"):
        tdray.Diagnose(rules_dir=rules)


def test_log_dir_detection(tmp_path):
    # torch >= 2: LOG_DIR/<run_id>/attempt_0/<rank>/...
    a = tmp_path / "a" / "none_1234abcd" / "attempt_0" / "0"
    a.mkdir(parents=True)
    (a / "stderr.log").write_text("x\n")
    # older or explicit: LOG_DIR/attempt_0/<rank>/...
    b = tmp_path / "b" / "attempt_1" / "3"
    b.mkdir(parents=True)
    (b / "error.json").write_text("{}")
    # a plain folder of logs is not a log dir
    c = tmp_path / "c" / "job-1"
    c.mkdir(parents=True)
    (c / "train.log").write_text("x\n")
    # a day's folder of old-style log dirs is several jobs, not one
    for j in ("job-7", "job-8"):
        (tmp_path / "d" / j / "attempt_0" / "0").mkdir(parents=True)
        (tmp_path / "d" / j / "attempt_0" / "0" / "stdout.log").write_text("x\n")
    assert tdray.is_log_dir(tmp_path / "a") and tdray.is_log_dir(tmp_path / "b")
    assert not tdray.is_log_dir(tmp_path / "c") and not tdray.is_log_dir(tmp_path)
    assert not tdray.is_log_dir(tmp_path / "d") and tdray.is_log_dir(tmp_path / "d" / "job-7")
    files, dirs = tdray.find_jobs(tmp_path)
    assert dirs == [str((tmp_path / x).resolve()) for x in ("a", "b", "d/job-7", "d/job-8")]
    assert files == [str((c / "train.log").resolve())]
    assert tdray.Diagnose().job_of(dirs[0], True)[0] == "a"
