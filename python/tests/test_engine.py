"""torchdx.Engine: built once, the same reports as ``torchdx.diagnose``, from many threads."""

from __future__ import annotations

import gzip
import json
import pickle
import shutil
import subprocess
import threading
from pathlib import Path
from typing import List

import pytest
from support import examples_dir, load_toml, one_rule_dir, rules_dir, run

import torchdx


def _logs() -> List[bytes]:
    """Every example log, and the first example of every rule."""
    logs = [p.read_bytes() for p in sorted(examples_dir().glob("*.log"))]
    for path in sorted(rules_dir().glob("*.toml")):
        ex = load_toml(path).get("example", [])
        if ex:
            logs.append(ex[0]["log"].encode("utf-8"))
    assert len(logs) > 50
    return logs


LOGS = _logs()


def test_engine_reports_equal_diagnose() -> None:
    engine = torchdx.Engine()
    for log in LOGS:
        got = engine.diagnose(log)
        assert isinstance(got, torchdx.Report)
        want = torchdx.diagnose(log)
        assert got.to_json() == want.to_json()
        assert got == want and got.initiating == want.initiating and got.findings == want.findings
    # str in, same report
    text = LOGS[0].decode("utf-8")
    assert engine.diagnose(text) == torchdx.diagnose(text)
    assert engine.rules_dir is None
    assert repr(engine) == "torchdx.Engine(rules_dir=None)"


def test_engine_files_folders_and_compressed_logs(tmp_path: Path, cli: str) -> None:
    engine = torchdx.Engine()
    path = examples_dir() / "multirank-nccl.log"
    data = path.read_bytes()
    want = torchdx.diagnose_file(path)
    assert want.initiating is not None
    assert engine.diagnose_file(path) == want == engine.diagnose_file(str(path))
    # gzip (and zstd) bytes are decompressed: the same report, input bytes included
    assert engine.diagnose(gzip.compress(data)) == want
    gz = tmp_path / "train.log.gz"
    gz.write_bytes(gzip.compress(data))
    assert engine.diagnose_file(gz) == want
    if shutil.which("zstd"):
        zst = tmp_path / "train.log.zst"
        subprocess.run(["zstd", "-q", "-o", str(zst), str(path)], check=True)
        assert engine.diagnose(zst.read_bytes()) == want == engine.diagnose_file(zst)
    # a torchrun --log-dir folder, as the CLI reads it
    rank = tmp_path / "logdir" / "none_abcd1234" / "attempt_0" / "1"
    rank.mkdir(parents=True)
    (rank / "stderr.log").write_bytes(LOGS[1])
    (rank.parent / "0").mkdir()
    (rank.parent / "0" / "stdout.log").write_text("step 1 loss 2.0\n")
    folder = engine.diagnose_file(tmp_path / "logdir")
    p = run([cli, "diagnose", "--format", "json", str(tmp_path / "logdir")])
    assert p.returncode == 0, p.stderr.decode()
    assert json.loads(folder.to_json(), object_pairs_hook=list) == json.loads(p.stdout, object_pairs_hook=list)
    assert folder == torchdx.diagnose_file(tmp_path / "logdir") and folder.initiating is not None
    # errors: a corrupt stream, a missing file
    with pytest.raises(ValueError, match="compressed"):
        engine.diagnose(b"\x1f\x8b\x08\x00not gzip at all")
    with pytest.raises(OSError, match="missing.log"):
        engine.diagnose_file(tmp_path / "missing.log")
    with pytest.raises(TypeError):
        engine.diagnose(12)  # type: ignore[arg-type]


def test_engine_rules_dir(tmp_path: Path) -> None:
    extra = one_rule_dir(tmp_path)
    engine = torchdx.Engine(extra)
    assert engine.rules_dir == str(extra)
    for log in LOGS[:20]:
        assert engine.diagnose(log) == torchdx.diagnose(log, rules_dir=extra)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "broken.toml").write_text("id = \n")
    with pytest.raises(ValueError, match="broken.toml"):
        torchdx.Engine(rules_dir=bad)


def test_engine_diagnoser_streams() -> None:
    engine = torchdx.Engine()
    log = (examples_dir() / "multirank-nccl.log").read_bytes()
    d = engine.diagnoser()
    assert isinstance(d, torchdx.Diagnoser)
    for i in range(0, len(log), 37):
        d.feed(log[i : i + 37])
    assert d.finish() == torchdx.diagnose(log)
    with pytest.raises(RuntimeError):
        d.finish()
    # two diagnosers of one engine are independent
    a, b = engine.diagnoser(), engine.diagnoser()
    a.feed(LOGS[0])
    b.feed(LOGS[1])
    assert a.finish() == torchdx.diagnose(LOGS[0]) and b.finish() == torchdx.diagnose(LOGS[1])


def test_engine_is_shared_by_threads() -> None:
    """One engine, 8 threads, every log each: every report is the one-thread report."""
    engine = torchdx.Engine()
    want = [engine.diagnose(log).to_json() for log in LOGS]
    errors: List[str] = []
    start = threading.Barrier(8)

    def work(k: int) -> None:
        start.wait()
        order = list(range(len(LOGS)))[k:] + list(range(len(LOGS)))[:k]
        for i in order:
            got = engine.diagnose(LOGS[i]).to_json()
            if got != want[i]:
                errors.append(f"thread {k}, log {i}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:5]


def test_engine_pickles_as_its_rules_dir(tmp_path: Path) -> None:
    extra = one_rule_dir(tmp_path)
    for engine in (torchdx.Engine(), torchdx.Engine(rules_dir=extra)):
        copy = pickle.loads(pickle.dumps(engine))
        assert isinstance(copy, torchdx.Engine) and copy is not engine
        assert copy.rules_dir == engine.rules_dir
        assert copy.diagnose(LOGS[2]) == engine.diagnose(LOGS[2])
