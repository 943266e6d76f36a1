#!/usr/bin/env bash
# The Python package: build the abi3 manylinux2014 wheel, install it into a fresh virtual
# environment, run python/tests (the API against the CLI's JSON on every rule example,
# the exception hook in a real subprocess raising real PyTorch errors, a real 4-process
# torchrun job on gloo, the notebook path). Called by .ci/run after the release build.
#
# The test dependencies (torch, IPython, pytest, mypy; maturin and zig to build) live in
# a cached environment outside the clone, installed once: torch alone is a 95 s, multi-GB
# install. The package itself always goes into a fresh environment, which sees those
# dependencies through a .pth file and nothing else of the cache.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${TORCHDX_CI_CACHE:-$HOME/.cache/torchdx-ci}
DEPS=$CACHE/py-deps
mkdir -p "$CACHE"
if [ ! -x "$DEPS/bin/python" ]; then
  python3 -m venv "$DEPS" 2>/dev/null || {
    apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null && python3 -m venv "$DEPS"
  }
fi
"$DEPS/bin/python" -c "import maturin, ziglang" 2>/dev/null || "$DEPS/bin/pip" install -q "maturin>=1.7,<2" ziglang
"$DEPS/bin/python" -c "import torch, IPython, pytest, mypy" 2>/dev/null || "$DEPS/bin/pip" install -q torch ipython pytest mypy
# Ray and Arrow for the fleet tests (python/tests/test_ray.py, test_fleet.py)
"$DEPS/bin/python" -c "import ray, pyarrow, pandas" 2>/dev/null || "$DEPS/bin/pip" install -q "ray[data]>=2.9" "pyarrow>=14" pandas

rm -rf target/wheels
(cd python && PATH="$DEPS/bin:$PATH" maturin build --release --locked --zig --compatibility manylinux2014 -o ../target/wheels)
wheel=$(ls target/wheels/torchdx-*-cp39-abi3-*manylinux2014*.whl)
echo "wheel: $wheel ($(du -k "$wheel" | cut -f1) KiB)"

venv=target/venv-python
rm -rf "$venv"
"$DEPS/bin/python" -m venv "$venv"
"$DEPS/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" \
  > "$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/_torchdx_ci_deps.pth"
"$venv/bin/pip" install -q --no-deps "$wheel"
"$venv/bin/python" -X importtime -c "import torchdx" 2>&1 | tail -1 | sed 's/^/import: /'
TORCHDX_BINARY="$PWD/target/release/torchdx" "$venv/bin/python" -m pytest python/tests -q -p no:cacheprovider
