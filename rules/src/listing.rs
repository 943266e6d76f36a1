//! The one listing of a rule folder: which files it holds and in which order.
//!
//! Shared by this crate's build script (the built-in pack), by the CLI (a rule author's
//! folder, `--rules DIR`) and by the WASM bundle, so that a folder means the same pack
//! everywhere. A folder holds rule files (`*.toml` at its top, one rule each) and data
//! files (`data/*.toml`: the families, the op-argument role table, the error-code
//! tables). A file's kind is decided by its folder, never by its name's suffix.

/// The crate manifest that sits beside the built-in rules; it is not a rule.
pub const MANIFEST: &str = "Cargo.toml";

/// Whether a top-level file name is a rule file of the folder.
pub fn is_rule_name(name: &str) -> bool {
    name.ends_with(".toml") && name != ".toml" && name != MANIFEST
}

/// Whether a file name inside `data/` is a data file of the folder.
pub fn is_data_name(name: &str) -> bool {
    name.ends_with(".toml") && name != ".toml"
}

/// Sorts relative names (`amp-unscale-fp16.toml`, `data/ops.toml`) into the pack's
/// order: by name, as bytes. Later files override earlier ones with the same rule id,
/// so the order is part of what a folder means.
pub fn order(names: &mut [String]) {
    names.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
}
