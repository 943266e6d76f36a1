"""torchdx.elastic: the diagnosis in the worker's error file, log and torchrun's summary.

The main test runs a real ``torchrun --nproc-per-node 4`` job with the gloo backend on
127.0.0.1: rank 2 raises a real shape error while the other ranks wait in a collective.
What torch 2.x does with an error file (read from torch's source,
``torch/distributed/elastic/multiprocessing/errors/{error_handler,__init__}.py``):

* ``ErrorHandler.record_exception`` writes ``$TORCHELASTIC_ERROR_FILE`` as
  ``{"message": {"message": "<Type>: <msg>", "extraInfo": {"py_callstack": <traceback>,
  "timestamp": "<epoch seconds>"}}}``;
* the agent reads each failed worker's file; the root cause is the failure with the
  smallest timestamp; ``ChildFailedError`` prints, per failure,
  ``rank : N (local_rank: N)``, ``error_file: <path>`` (``<N/A>`` without one) and
  ``traceback : <extraInfo.py_callstack>`` (the message only when there is no callstack),
  under ``Root Cause (first observed failure):`` for the root cause.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from support import child_env, console_script, free_port, run

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("this torch build has no gloo backend", allow_module_level=True)

HEADER = "torchdx: diagnosis of the exception above (set TORCHDX_DISABLE=1 to turn this off)"
RULE = "matmul-shape-mismatch"

WORKER = """\
import datetime, os, sys, time, traceback
import torch
import torch.distributed as dist
import torchdx.elastic


@torchdx.elastic.record
def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    rank = dist.get_rank()
    if rank == 2:
        time.sleep(1.0)  # the others are in the collective by now
        layer = torch.nn.Linear(8, 4)
        x = torch.randn(2, 16)
        layer(x)
    t = torch.ones(1)
    try:
        dist.all_reduce(t)
        dist.barrier()
    except RuntimeError:
        # gloo notices the dead peer at once; an NCCL job would hang here until its
        # timeout. Wait like it, so that torchrun stops this rank with SIGTERM.
        traceback.print_exc()
        sys.stderr.flush()
        time.sleep(120)
        raise


if __name__ == "__main__":
    main()
"""


def _torchrun() -> list:
    script = Path(sys.executable).parent / "torchrun"
    return [str(script)] if script.exists() else [sys.executable, "-m", "torch.distributed.run"]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("elastic")
    worker = tmp / "worker.py"
    worker.write_text(WORKER)
    logdir = tmp / "logs"
    env = child_env(OMP_NUM_THREADS="1", TORCHELASTIC_ERROR_FILE=None)
    cmd = _torchrun() + [
        "--nproc-per-node", "4", "--nnodes", "1",
        "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
        "--log-dir", str(logdir), "--redirects", "3", "--tee", "3",
        str(worker),
    ]  # fmt: skip
    p = run(cmd, env=env, cwd=tmp, timeout=600)
    return p, logdir


def _attempt_dir(logdir: Path) -> Path:
    found = sorted(logdir.glob("*/attempt_0"))
    assert found, f"no attempt_0 under {logdir}: {[str(p) for p in logdir.rglob('*')]}"
    return found[-1]


def test_job_failed(job) -> None:
    p, logdir = job
    assert p.returncode != 0
    assert b"ChildFailedError" in p.stderr, p.stderr.decode()[-3000:]


def test_error_file_carries_the_diagnosis(job) -> None:
    _, logdir = job
    path = _attempt_dir(logdir) / "2" / "error.json"
    data = json.loads(path.read_text())
    msg = data["message"]
    first, _, rest = msg["message"].partition("\n")
    assert re.fullmatch(rf"rank 2: .+ \({RULE}\)", first), first
    assert rest.startswith("RuntimeError: ") and "mat1 and mat2 shapes cannot be multiplied (2x16 and 8x4)" in rest
    extra = msg["extraInfo"]
    assert extra["timestamp"].isdigit()  # as torch writes it
    stack = extra["py_callstack"]
    assert stack.startswith("Traceback (most recent call last):\n")
    assert "mat1 and mat2 shapes cannot be multiplied" in stack
    assert stack.endswith(f"\n\ntorchdx: {first}\n")  # the traceback, then one line
    report = json.loads(extra["torchdx_report"])
    assert report["schema"] == "torchdx/report@1"
    assert report["findings"][report["initiating"]]["id"] == RULE


def test_launcher_summary_names_rank_2(job) -> None:
    p, logdir = job
    err = p.stderr.decode()
    summary = err[err.rindex("ChildFailedError") :]
    root = summary[summary.index("Root Cause (first observed failure):") :]
    assert re.search(r"rank\s+: 2 \(local_rank: 2\)", root), root
    assert "error_file: <N/A>" not in root
    assert re.search(r"error_file: .*attempt_0/2/error\.json", root), root
    assert re.search(rf"torchdx: rank 2: .+ \({RULE}\)", root), root
    # the other ranks were stopped while waiting: signals, no error file
    others = summary[: summary.index("Root Cause")]
    assert others.count("SIGTERM") >= 1


def test_worker_log_has_diagnosis_after_traceback(job) -> None:
    p, logdir = job
    log = (_attempt_dir(logdir) / "2" / "stderr.log").read_text()
    tb = log.index("Traceback (most recent call last):")
    exc = log.index("mat1 and mat2 shapes cannot be multiplied")
    hdr = log.index(HEADER)
    assert tb < exc < hdr
    assert f"[{RULE}]" in log[hdr:]
    # the launcher's tee carries it too
    assert HEADER in p.stderr.decode() + p.stdout.decode()


def test_cli_on_log_dir_names_rank_2_initiating(job) -> None:
    _, logdir = job
    q = run([console_script(), "diagnose", str(logdir), "--format", "json"])
    assert q.returncode == 0, q.stderr.decode()
    report = json.loads(q.stdout)
    head = report["findings"][report["initiating"]]
    assert (head["rank"], head["id"]) == (2, RULE)
    assert 2 in report["input"]["ranks"]
    import torchdx

    r = torchdx.diagnose_file(logdir)
    assert r.initiating is not None and (r.initiating.rank, r.initiating.id) == (2, RULE)
    assert json.loads(r.to_json()) == report


def test_cli_on_launcher_output_names_rank_2_initiating(job) -> None:
    p, _ = job
    import torchdx

    r = torchdx.diagnose(p.stdout + p.stderr)
    assert r.initiating is not None and (r.initiating.rank, r.initiating.id) == (2, RULE)


# --------------------------------------------------------- the handler without torchrun

HANDLER_SCRIPT = """\
import sys, torch
from torch.distributed.elastic.multiprocessing.errors import record as torch_record
import torchdx.elastic

def shape():
    torch.nn.Linear(8, 4)(torch.randn(2, 16))

def plain():
    raise ValueError("x")

fn = {"shape": shape, "plain": plain}[sys.argv[1]]
deco = torch_record if sys.argv[2] == "torch" else torchdx.elastic.record
deco(fn)()
"""


def _run_handler(tmp_path: Path, case: str, which: str, **env):
    script = tmp_path / "h.py"
    script.write_text(HANDLER_SCRIPT)
    err_file = tmp_path / f"{case}-{which}.json"
    p = run(
        [sys.executable, str(script), case, which],
        env=child_env(TORCHELASTIC_ERROR_FILE=str(err_file), RANK="5", **env),
    )
    return p, json.loads(err_file.read_text())


def test_handler_rewrites_error_file(tmp_path: Path) -> None:
    p, data = _run_handler(tmp_path, "shape", "torchdx")
    _, torch_data = _run_handler(tmp_path, "shape", "torch")
    msg, tmsg = data["message"], torch_data["message"]
    assert msg["message"] == f"rank 5: {msg['message'].splitlines()[0][len('rank 5: ') :]}\n{tmsg['message']}"
    assert msg["message"].splitlines()[0].endswith(f"({RULE})")
    assert msg["extraInfo"]["py_callstack"].startswith(tmsg["extraInfo"]["py_callstack"].rstrip("\n"))
    assert set(msg["extraInfo"]) == set(tmsg["extraInfo"]) | {"torchdx_report"}
    err = p.stderr.decode()
    assert err.index("Traceback (most recent call last):") < err.index(HEADER)
    assert err.count(HEADER) == 1


def test_handler_leaves_unrecognized_and_disabled_alone(tmp_path: Path) -> None:
    p, data = _run_handler(tmp_path, "plain", "torchdx")
    q, torch_data = _run_handler(tmp_path, "plain", "torch")
    assert data["message"]["message"] == torch_data["message"]["message"] == "ValueError: x"
    assert set(data["message"]["extraInfo"]) == set(torch_data["message"]["extraInfo"])
    assert p.stderr == q.stderr and HEADER.encode() not in p.stderr
    p, data = _run_handler(tmp_path, "shape", "torchdx", TORCHDX_DISABLE="1")
    assert data["message"]["message"].startswith("RuntimeError: ")
    assert HEADER.encode() not in p.stderr


def test_handler_with_install_prints_once(tmp_path: Path) -> None:
    script = tmp_path / "both.py"
    script.write_text(
        "import torch, torchdx, torchdx.elastic\ntorchdx.install()\n"
        "@torchdx.elastic.record\ndef main():\n    torch.nn.Linear(8, 4)(torch.randn(2, 16))\nmain()\n"
    )
    p = run([sys.executable, str(script)], env=child_env(TORCHELASTIC_ERROR_FILE=str(tmp_path / "e.json"), RANK="1"))
    assert p.returncode == 1 and p.stderr.decode().count(HEADER) == 1


def test_error_handler_class_is_torchs() -> None:
    from torch.distributed.elastic.multiprocessing.errors import ErrorHandler

    import torchdx.elastic

    assert issubclass(torchdx.elastic.TorchdxErrorHandler, ErrorHandler)
    h = torchdx.elastic.TorchdxErrorHandler(print_report=False)
    h.record_exception(RuntimeError("no error file set: must not raise"))
    import torchdx

    assert torchdx.elastic is sys.modules["torchdx.elastic"]
