#!/usr/bin/env bash
# The crates as crates.io would ship them: package torchdx-rules and torchdx-core, then
# build a throwaway crate that depends on the packaged sources (not the workspace) and
# diagnose the README's example with it. Catches a crate that packages without its rules.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(awk -F'"' '/^version = /{print $2; exit}' Cargo.toml)
cargo package -p torchdx-rules -p torchdx-core --allow-dirty --no-verify --locked -q
probe=target/package-probe
rm -rf "$probe" && mkdir -p "$probe/src"
for c in torchdx-rules torchdx-core; do tar xzf "target/package/$c-$version.crate" -C "$probe"; done
cp examples/device-mismatch.log "$probe/src/example.log"
cat > "$probe/Cargo.toml" <<TOML
[package]
name = "probe"
version = "0.0.0"
edition = "2021"
publish = false

[workspace]

[dependencies]
torchdx-core = "=$version"

[patch.crates-io]
torchdx-core = { path = "torchdx-core-$version" }
torchdx-rules = { path = "torchdx-rules-$version" }
TOML
cat > "$probe/src/main.rs" <<'RS'
fn main() {
    let engine = torchdx_core::Engine::builtin();
    let rules = engine.pack().rules().len();
    let report = engine.diagnose(include_str!("example.log"));
    let f = report.primary().expect("the packaged crate diagnoses the README example");
    let kind = f.culprit.as_ref().map(|c| c.kind.as_str());
    assert_eq!((f.family.as_str(), kind), ("device-mismatch", Some("label-not-moved")), "{}", report.to_json());
    assert!(rules > 40, "the packaged crate embeds its rules ({rules})");
    println!("packaged crates: {rules} rules; the README example is {} ({})", f.id, kind.unwrap_or("-"));
}
RS
CARGO_TARGET_DIR=target/package-probe/target cargo run -q --manifest-path "$probe/Cargo.toml"
