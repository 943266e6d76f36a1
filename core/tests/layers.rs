//! The layering of `core/src`, stated as a test: data flows one way, from the faces
//! down to ingest, and the report types are read by all and import none.
//!
//! Every `crate::<module>` path in a module's non-test code must name a lower layer
//! (or the module itself). A cycle or an upward arrow fails here with the file and line.

use std::path::{Path, PathBuf};

/// Top-level modules, lowest first. `report` and `redact` import nothing of the crate.
const LAYERS: &[&[&str]] =
    &[&["report", "redact"], &["ingest"], &["grammar"], &["rules"], &["infer"], &["engine"], &["authoring"]];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module a file belongs to: its first path component under `src/`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
    first.trim_end_matches(".rs").to_string()
}

/// The file's lines before its unit-test module.
fn non_test_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .windows(2)
        .position(|w| {
            let attr = w[0].trim();
            attr.starts_with("#[cfg(") && attr.contains("test") && w[1].trim_start().starts_with("mod tests")
        })
        .unwrap_or(lines.len());
    lines.into_iter().take(end).enumerate().map(|(i, l)| (i + 1, l))
}

#[test]
fn no_module_imports_a_higher_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut problems = Vec::new();
    let mut checked = 0;
    for f in &files {
        let module = module_of(&src, f);
        if module == "lib" {
            continue; // the crate root re-exports the curated surface
        }
        let Some(own) = layer_of(&module) else {
            problems.push(format!("{}: module `{module}` has no layer in LAYERS", f.display()));
            continue;
        };
        let text = std::fs::read_to_string(f).unwrap();
        for (no, line) in non_test_lines(&text) {
            if line.trim_start().starts_with("//") {
                continue;
            }
            let mut rest = line;
            while let Some(i) = rest.find("crate::") {
                let after = &rest[i + 7..];
                let name: String = after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                rest = &after[name.len()..];
                assert!(!name.is_empty(), "{}:{no}: write `use crate::x` paths one module at a time", f.display());
                checked += 1;
                if name == module || name.chars().next().is_some_and(|c| c.is_ascii_uppercase()) && module == "engine" {
                    continue;
                }
                match layer_of(&name) {
                    Some(l) if l < own => {}
                    Some(_) => problems.push(format!(
                        "{}:{no}: `{module}` (layer {own}) uses `crate::{name}` (layer {}), which is not below it",
                        f.display(),
                        layer_of(&name).unwrap_or(0)
                    )),
                    // Crate-root items (`crate::Engine`, `crate::VERSION`) are the engine's surface.
                    None if own >= layer_of("engine").unwrap() => {}
                    None => {
                        problems.push(format!("{}:{no}: `{module}` uses the crate root `crate::{name}`", f.display()))
                    }
                }
            }
        }
    }
    assert!(checked > 30, "the scan saw the crate's paths ({checked})");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// String literals of a line (`"..."`, escapes kept as written).
fn literals(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = line.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut end = None;
        let mut escaped = false;
        for (j, d) in chars.by_ref() {
            if escaped {
                escaped = false;
            } else if d == '\\' {
                escaped = true;
            } else if d == '"' {
                end = Some(j);
                break;
            }
        }
        if let Some(j) = end {
            out.push(line[i + 1..j].to_string());
        }
    }
    out
}

/// Rule knowledge lives in rule files: no rule id, family id or template wording of
/// the built-in pack is spelled in `core/src` outside tests (a rule author must be able
/// to change every diagnostic decision without touching Rust). The scaffold of a new
/// rule is itself a rule file's text, and is exempt.
#[test]
fn no_rule_id_family_or_message_wording_in_core() {
    let pack = torchdx_core::builtin_pack().expect("the built-in pack");
    let mut ids: Vec<String> = pack.rules().iter().map(|r| r.id().to_string()).collect();
    ids.extend(pack.families().iter().map(|f| f.id.clone()));
    // Distinctive pieces of every template: its literal text up to the first capture,
    // when that is at least three words long.
    let mut wordings: Vec<String> = Vec::new();
    for r in pack.rules() {
        for m in &r.spec.matches {
            let lead: String = m.template.split(['{']).next().unwrap_or("").trim().to_string();
            // A template that quotes grammar structure (the 1.x DataLoader re-raise embeds
            // a traceback header) is not message wording.
            let structural = lead.starts_with("Traceback (most recent call last)");
            if lead.split_whitespace().count() >= 3 && lead.len() >= 16 && !structural {
                wordings.push(lead);
            }
        }
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut problems = Vec::new();
    let mut seen = 0;
    for f in files.iter().filter(|f| !f.ends_with("authoring/scaffold.rs")) {
        let text = std::fs::read_to_string(f).unwrap();
        for (no, line) in non_test_lines(&text) {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for lit in literals(line) {
                seen += 1;
                if ids.contains(&lit) {
                    problems.push(format!("{}:{no}: the rule or family id \"{lit}\"", f.display()));
                }
                // A template's wording in Rust, whole or in part.
                let words = lit.split_whitespace().count();
                if let Some(w) = wordings
                    .iter()
                    .find(|w| lit.contains(w.as_str()) || (words >= 3 && lit.len() >= 16 && w.contains(&lit)))
                {
                    problems.push(format!("{}:{no}: the message wording \"{w}\"", f.display()));
                }
            }
        }
    }
    assert!(seen > 200 && ids.len() > 80 && wordings.len() > 50, "the scan saw literals {seen}, ids {}", ids.len());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
