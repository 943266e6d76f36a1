"""torchdx.Diagnoser: a log fed in chunks of any size gives the report of the whole log."""

from __future__ import annotations

import random
from typing import List

import pytest
from support import examples_dir, load_toml, one_rule_dir, rules_dir

import torchdx


def _logs() -> List[bytes]:
    logs = [p.read_bytes() for p in sorted(examples_dir().glob("*.log"))]
    # a few rule examples of different shapes: rank prefixes, watchdog lines, envelopes
    for name in (
        "device-mismatch",
        "cuda-oom",
        "nccl-watchdog-timeout",
        "dataloader-worker-error",
        "elastic-child-failed",
    ):
        path = rules_dir() / f"{name}.toml"
        if path.exists():
            logs.extend(ex["log"].encode("utf-8") for ex in load_toml(path).get("example", [])[:2])
    assert len(logs) >= 5
    return logs


def _multirank(n_ranks: int = 8, filler: int = 400) -> bytes:
    """A larger log: many ranks of ordinary output, then one rank's failure and echoes."""
    rnd = random.Random(7)
    lines = []
    for step in range(filler):
        r = rnd.randrange(n_ranks)
        lines.append(f"[rank{r}]: step {step} loss {rnd.random():.4f} lr 3e-4 tokens/s 81234 ü€\n")
    lines.append("[rank5]: Traceback (most recent call last):\n")
    lines.append('[rank5]:   File "/job/train.py", line 88, in <module>\n')
    lines.append("[rank5]:     loss = loss_fn(out, labels)\n")
    lines.append(
        "[rank5]: RuntimeError: Expected all tensors to be on the same device, but found at least two devices, "
        "cuda:5 and cpu! (when checking argument for argument target in method wrapper_CUDA_nll_loss_forward)\n"
    )
    for r in range(n_ranks):
        if r != 5:
            lines.append(
                f"[rank{r}]:[E ProcessGroupNCCL.cpp:563] [Rank {r}] Watchdog caught collective operation timeout: "
                f"WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600054 "
                "milliseconds before timing out.\r\n"
            )
    return "".join(lines).encode("utf-8")


LOGS = _logs() + [_multirank()]


def _chunked(data: bytes, sizes: List[int]) -> List[bytes]:
    out, i, k = [], 0, 0
    while i < len(data):
        n = sizes[k % len(sizes)]
        out.append(data[i : i + n])
        i += n
        k += 1
    return out


@pytest.mark.parametrize("index", range(len(LOGS)))
@pytest.mark.parametrize("sizes", [[1], [2, 3], [7], [64], [4096], [1 << 20], "random"], ids=str)
def test_chunks_equal_whole(index: int, sizes) -> None:
    data = LOGS[index]
    if sizes == "random":
        rnd = random.Random(index)
        sizes = [rnd.randint(1, 300) for _ in range(50)]
    if sizes == [1] and len(data) > 20000:
        sizes = [1, 1, 1, 997]  # keep byte-by-byte feeding affordable on the large log
    d = torchdx.Diagnoser()
    for chunk in _chunked(data, sizes):
        d.feed(chunk)
    streamed = d.finish()
    whole = torchdx.diagnose(data)
    assert streamed.to_json() == whole.to_json()
    assert streamed == whole


def test_split_inside_utf8_and_crlf() -> None:
    data = LOGS[-1]
    cut = data.index("€".encode()) + 1  # in the middle of a 3-byte character
    d = torchdx.Diagnoser()
    d.feed(data[:cut])
    d.feed(data[cut:])
    assert d.finish().to_json() == torchdx.diagnose(data).to_json()
    crlf = data.index(b"\r\n") + 1  # between \r and \n
    d = torchdx.Diagnoser()
    d.feed(data[:crlf])
    d.feed(data[crlf:])
    assert d.finish().to_json() == torchdx.diagnose(data).to_json()


def test_feed_accepts_str_bytearray_memoryview() -> None:
    text = LOGS[0].decode("utf-8")
    d = torchdx.Diagnoser()
    third = len(LOGS[0]) // 3
    d.feed(text[:10])
    d.feed(bytearray(text[10:third].encode()))
    d.feed(memoryview(text[third:].encode()))
    assert d.finish().to_json() == torchdx.diagnose(text).to_json()


def test_empty_stream_and_second_finish() -> None:
    d = torchdx.Diagnoser()
    r = d.finish()
    assert r.findings == () and r.initiating is None and r.initiating_index is None
    assert r.to_json() == torchdx.diagnose(b"").to_json()
    with pytest.raises(RuntimeError):
        d.finish()


def test_rules_dir_applies_to_stream(tmp_path) -> None:
    extra = one_rule_dir(tmp_path)
    d = torchdx.Diagnoser(rules_dir=extra)
    d.feed(LOGS[0])
    assert d.finish().to_json() == torchdx.diagnose(LOGS[0], rules_dir=extra).to_json()


def test_feed_rejects_other_types() -> None:
    d = torchdx.Diagnoser()
    with pytest.raises(TypeError):
        d.feed(12)  # type: ignore[arg-type]
