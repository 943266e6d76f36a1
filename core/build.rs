//! Embeds the built-in rule pack (`../rules/*.toml`, `../rules/data/*.toml`) at compile
//! time, so the crate itself never reads a file at run time.
//!
//! It also writes the pack's precompiled form: every file's TOML as JSON, which
//! serde_json decodes about six times faster than the TOML parses (pack load is on
//! every start of the CLI). The TOML stays embedded: it is what errors and examples
//! point into, and the fallback when a file does not parse here (then the engine
//! reports the located error at run time, as for any rule file).
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
    match precompile(&entries) {
        Ok(json) => {
            let path = Path::new(&env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("builtin_pack.json");
            fs::write(&path, json).expect("write builtin_pack.json");
            out.push_str(&format!(
                "/// The pack precompiled (see `Pack::from_precompiled`).\npub const PRECOMPILED: Option<&str> = Some(include_str!({:?}));\n",
                path.display().to_string()
            ));
        }
        Err(why) => {
            println!("cargo:warning=built-in rule pack not precompiled ({why}); it will be parsed at run time");
            out.push_str("/// Not precompiled: a rule file did not parse at build time.\npub const PRECOMPILED: Option<&str> = None;\n");
        }
    }
    let dest = Path::new(&env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("builtin_rules.rs");
    fs::write(dest, out).expect("write builtin_rules.rs");
}

/// `{"rules": [{"name", "spec"}...], "ops": [table...]}` in file order, the TOML of each
/// file converted to JSON as it stands (the crate's serde types then read it).
fn precompile(entries: &[(String, PathBuf)]) -> Result<String, String> {
    let mut rules = Vec::new();
    let mut ops = Vec::new();
    for (name, p) in entries {
        let text = fs::read_to_string(p).map_err(|e| format!("{name}: {e}"))?;
        let table: toml::Table = toml::from_str(&text).map_err(|_| format!("{name} does not parse"))?;
        let value = serde_json::to_value(&table).map_err(|e| format!("{name}: {e}"))?;
        if name.ends_with("ops.toml") {
            ops.push(value);
        } else {
            rules.push(serde_json::json!({ "name": name, "spec": value }));
        }
    }
    serde_json::to_string(&serde_json::json!({ "rules": rules, "ops": ops })).map_err(|e| e.to_string())
}
