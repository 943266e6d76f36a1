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
