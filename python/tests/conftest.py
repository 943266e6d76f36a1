import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

try:
    import torchdx  # noqa: F401
except ImportError as e:  # pragma: no cover
    pytest.exit(
        f"cannot import torchdx ({e}). Install the wheel into this environment and run the tests from the "
        "repository root (`python -m pytest python/tests`): run from python/, the source folder python/torchdx, "
        "which has no compiled _native, shadows the installed package.",
        returncode=4,
    )

from support import console_script  # noqa: E402


@pytest.fixture(scope="session")
def cli() -> str:
    """Path of the installed ``torchdx`` console script."""
    return console_script()


# ---------------------------------------------------------------- fleet tests


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory) -> Path:
    """Where screenshots and measurements go: ``TORCHDX_ARTIFACTS``, else a temporary folder."""
    d = os.environ.get("TORCHDX_ARTIFACTS")
    p = Path(d) if d else tmp_path_factory.mktemp("artifacts")
    p.mkdir(parents=True, exist_ok=True)
    return p


@pytest.fixture(scope="session")
def fleet_logs(tmp_path_factory):
    """``TORCHDX_FLEET_JOBS`` (default 520) generated job logs, files and torchrun log
    folders, and their manifest (genlogs.py)."""
    import genlogs

    out = tmp_path_factory.mktemp("fleet-logs")
    n = int(os.environ.get("TORCHDX_FLEET_JOBS", "520"))
    manifest = genlogs.generate(out, n_jobs=n, seed=7, folder_share=0.1)
    return out, manifest


@pytest.fixture(scope="session")
def ray_cluster():
    """A real local Ray cluster: 2 CPUs, no dashboard, no usage statistics.

    Ray advertises the machine's address even when asked for 127.0.0.1; for a strictly
    loopback cluster run the tests in a network namespace with only ``lo``:
    ``unshare -n sh -c 'ip link set lo up && python -m pytest python/tests/test_ray.py'``.
    The workers inherit this process's environment (``PYTHONPATH`` included).
    """
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage report leaves the machine
    import logging

    ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=512 * 1024 * 1024,
        log_to_driver=False,
        logging_level="warning",
    )
    import ray.data

    ray.data.DataContext.get_current().enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    try:
        yield ray
    finally:
        ray.shutdown()
