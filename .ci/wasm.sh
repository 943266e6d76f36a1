#!/usr/bin/env bash
# The browser side of CI: WebAssembly packages, native/WASM parity, the page in Chromium.
# Called by .ci/run after `cargo build --release -p torchdx` (the parity script runs that
# binary) and after .ci/tools.sh (wasm32 target, wasm-bindgen-cli, chromium). Runs as root
# in a fresh clone. The last step is the node test runner, so the last lines are its
# summary (# pass N / # fail 0).
set -euo pipefail
cd "$(dirname "$0")/.."

# No `npm ci` here: wasm/build.sh installs node_modules itself (playwright-core + binaryen),
# as it must on a new user's fresh clone.
export TORCHDX_SCREENSHOTS=${TORCHDX_SCREENSHOTS:-$PWD/target/screenshots}   # CI artefacts
mkdir -p "$TORCHDX_SCREENSHOTS"
wasm/build.sh                                          # wasm/pkg, wasm/pkg-node, wasm/www/pkg + size budget
node tests-js/parity.mjs                               # CLI JSON == diagnoseJson, byte for byte
node --test tests-js/                                  # the page in headless Chromium
