#!/usr/bin/env bash
# Installs the tools CI and developers need, skipping each one already present.
# Idempotent: safe to run on a machine that has everything (it then takes a few seconds).
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive

# wasm-bindgen-cli must equal the wasm-bindgen crate pinned in Cargo.lock (a mismatch is a
# hard error). No --locked: its own lockfile pins a crate version the registry lacks.
WBG_VERSION=$(awk '$0=="name = \"wasm-bindgen\""{getline; gsub(/"/,"",$3); print $3; exit}' Cargo.lock 2>/dev/null || true)
WBG_VERSION=${WBG_VERSION:-0.2.130}

rustup component list --installed | grep -q '^rustfmt' || rustup component add rustfmt
rustup component list --installed | grep -q '^clippy' || rustup component add clippy
rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
[ "$(wasm-bindgen --version 2>/dev/null)" = "wasm-bindgen $WBG_VERSION" ] ||
  cargo install wasm-bindgen-cli --version "$WBG_VERSION" --force
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --version 0.13.2
if ! { command -v chromium && command -v chromedriver; } >/dev/null 2>&1; then
  apt-get update && apt-get install -y chromium chromium-driver
fi
command -v rg >/dev/null || { apt-get update >/dev/null && apt-get install -y ripgrep; } || true
# node_modules: wasm/build.sh runs `npm ci` itself (the fresh-clone path a user takes).
