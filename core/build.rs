//! Embeds the built-in rule pack (`../rules/*.toml`, `../rules/data/*.toml`) at compile
//! time, so the crate itself never reads a file at run time.
//!
//! The WASM packages do not embed the pack: `wasm/rules-bundle.mjs` writes the same files
//! (same names, same order) beside the `.wasm`. Keep the two listings in step.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let rules = manifest.join("..").join("rules");
    println!("cargo:rerun-if-changed={}", rules.display());
    let mut entries = Vec::new();
    for (dir, prefix) in [(rules.clone(), ""), (rules.join("data"), "data/")] {
        println!("cargo:rerun-if-changed={}", dir.display());
        let Ok(read) = fs::read_dir(&dir) else { continue };
        for e in read.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "toml") && p.is_file() {
                println!("cargo:rerun-if-changed={}", p.display());
                let name = format!("{prefix}{}", p.file_name().unwrap_or_default().to_string_lossy());
                entries.push((name, p));
            }
        }
    }
    entries.sort();
    let mut out = String::from(
        "/// The built-in rule pack: (name, text) per file, sorted by name.\npub const BUILTIN: &[(&str, &str)] = &[\n",
    );
    for (name, p) in &entries {
        let abs = fs::canonicalize(p).unwrap_or_else(|_| p.clone());
        out.push_str(&format!("    ({name:?}, include_str!({:?})),\n", abs.display().to_string()));
    }
    out.push_str("];\n");
    let dest = Path::new(&env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("builtin_rules.rs");
    fs::write(dest, out).expect("write builtin_rules.rs");
}
