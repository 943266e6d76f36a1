//! Rule-author commands that write files: `rules new`, `rules test --bless`,
//! `rules fmt`, `rules docs`.

use crate::ExitCode;
use std::fs;
use std::path::{Path, PathBuf};

use torchdx_core::authoring::check::Status;
use torchdx_core::authoring::docs;
use torchdx_core::Engine;

use crate::{check_dir, out, read_rule_dir, Fail};

use torchdx_core::spec::{CASE_KEYS, CULPRIT_CASE_KEYS, EXAMPLE_KEYS, MATCH_KEYS, RULE_KEYS};

pub(crate) fn new_rule(id: &str, dir: &Path) -> Result<ExitCode, Fail> {
    if !torchdx_core::spec::is_kebab(id) {
        return Err(Fail(format!("rule id `{id}` must be kebab-case (lowercase words joined by `-`)")));
    }
    let path = dir.join(format!("{id}.toml"));
    // `exists` follows links: a dangling link there is something too.
    if fs::symlink_metadata(&path).is_ok() {
        return Err(Fail(format!("{} already exists", path.display())));
    }
    let text = torchdx_core::authoring::scaffold::new_rule(id)
        .replace("torchdx rules test rules", &format!("torchdx rules test {}", dir.display()))
        .replace("torchdx rules check rules", &format!("torchdx rules check {}", dir.display()));
    fs::create_dir_all(dir).map_err(|e| Fail(format!("{}: {e}", dir.display())))?;
    crate::create_new(&path, &text)?;
    // The file's `#:schema schema/rule.schema.json` line must resolve from its folder.
    let schema = dir.join("schema/rule.schema.json");
    let wrote_schema = fs::symlink_metadata(&schema).is_err();
    if wrote_schema {
        fs::create_dir_all(dir.join("schema")).map_err(|e| Fail(format!("{}: {e}", dir.display())))?;
        crate::create_new(&schema, &torchdx_core::spec::rule_schema())?;
    }
    let overrides = Engine::builtin().pack().rule(id).is_some();
    let mut msg = format!("wrote {}\n", path.display());
    if wrote_schema {
        msg.push_str(&format!("wrote {} (editors validate the rule file against it)\n", schema.display()));
    }
    if overrides {
        msg.push_str(&format!(
            "warning: `{id}` is a built-in rule: this file replaces it wherever the folder is used (`--rules {}`); pick another id to add a rule beside it\n",
            dir.display()
        ));
    }
    msg.push_str(&format!(
        "next: edit it, then `torchdx rules test {} --bless` and `torchdx rules check {}`\n",
        dir.display(),
        dir.display()
    ));
    out(&msg)?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn test(dir: &Option<PathBuf>, bless: bool) -> Result<ExitCode, Fail> {
    let (report, _) = check_dir(dir)?;
    let mut s = String::new();
    let mut failed = 0;
    for e in &report.examples {
        let mark = match e.status {
            Status::Validated => "ok     ",
            Status::Missing => "MISSING",
            Status::Noisy => "NOISY  ",
            Status::KnownMiss => "todo   ",
            Status::Fixed => "FIXED  ",
        };
        s.push_str(&format!("{mark} {}::{}\n", e.rule, e.name));
        for d in &e.diffs {
            s.push_str(&format!("        - {d}\n"));
        }
        if !matches!(e.status, Status::Validated | Status::KnownMiss) {
            failed += 1;
        }
    }
    if bless {
        let Some(d) = crate::rule_dir(dir) else {
            return Err(Fail("--bless needs a rule folder".into()));
        };
        let mut written = 0;
        let mut suggested = 0;
        for (name, text) in read_rule_dir(&d)? {
            let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e| Fail(format!("{name}: {e}")))?;
            let mut changed = false;
            if let Some(examples) = doc.get_mut("example").and_then(|e| e.as_array_of_tables_mut()) {
                for ex in examples.iter_mut() {
                    let ex_name = ex.get("name").and_then(|v| v.as_str()).unwrap_or("").to_string();
                    if ex.get("expect").and_then(|v| v.as_str()) != Some("match") {
                        continue;
                    }
                    let Some(run) = report.examples.iter().find(|r| r.file == name && r.name == ex_name) else {
                        continue;
                    };
                    if run.evidence.is_empty() {
                        continue;
                    }
                    // Only the keys the example already lists are rewritten: what an example
                    // tests is its author's decision. The rest is printed as a suggestion, and
                    // a culprit kind is never written (the engine's answer is not the truth).
                    let listed: Vec<String> = ex
                        .get("evidence")
                        .and_then(|e| e.as_table_like())
                        .map(|t| t.iter().map(|(k, _)| k.to_string()).collect())
                        .unwrap_or_default();
                    if let Some(t) = ex.get_mut("evidence").and_then(|e| e.as_table_like_mut()) {
                        for k in &listed {
                            match run.evidence.get(k).and_then(|v| json_to_toml(&v)) {
                                Some(tv) => {
                                    let old = t.get(k).and_then(|i| i.as_value()).map(|v| v.to_string());
                                    if old.as_deref().map(str::trim) != Some(tv.to_string().trim()) {
                                        s.push_str(&format!(
                                            "blessed {}::{ex_name}: {k} = {} (was {})\n",
                                            run.rule,
                                            tv.to_string().trim(),
                                            old.as_deref().map(str::trim).unwrap_or("nothing")
                                        ));
                                        t.insert(k, toml_edit::Item::Value(tv));
                                        changed = true;
                                    }
                                }
                                None => s.push_str(&format!(
                                    "kept {}::{ex_name}: {k} (the engine no longer reports it; remove it by hand if that is right)\n",
                                    run.rule
                                )),
                            }
                        }
                    }
                    for (k, v) in run.evidence.iter() {
                        if k != "message" && !listed.iter().any(|l| l == k) {
                            if let Some(tv) = json_to_toml(&v) {
                                s.push_str(&format!(
                                    "not tested {}::{ex_name}: {k} = {} (add it to [example.evidence] to test it)\n",
                                    run.rule,
                                    tv.to_string().trim()
                                ));
                                suggested += 1;
                            }
                        }
                    }
                }
            }
            if changed {
                crate::write_inside(&d, Path::new(&name), &doc.to_string())?;
                written += 1;
            }
        }
        s.push_str(&format!(
            "blessed: rewrote listed evidence in {}; {} not tested (listed above)\n",
            crate::count(written, "file", "files"),
            crate::count(suggested, "fact is", "facts are")
        ));
    }
    s.push_str(&format!(
        "{}: {} passed, {failed} failed\n",
        crate::count(report.examples.len(), "example", "examples"),
        report.examples.len() - failed
    ));
    out(&s)?;
    Ok(if failed == 0 || bless { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn json_to_toml(v: &serde_json::Value) -> Option<toml_edit::Value> {
    Some(match v {
        serde_json::Value::String(s) => toml_edit::Value::from(s.as_str()),
        serde_json::Value::Bool(b) => toml_edit::Value::from(*b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => toml_edit::Value::from(i),
            None => toml_edit::Value::from(n.as_f64()?),
        },
        serde_json::Value::Array(a) => {
            let mut arr = toml_edit::Array::new();
            for x in a {
                arr.push(json_to_toml(x)?);
            }
            toml_edit::Value::Array(arr)
        }
        _ => return None,
    })
}

fn rank(order: &[&str], k: &str) -> usize {
    order.iter().position(|x| *x == k).unwrap_or(order.len())
}

/// The canonical layout of one rule file: keys in `RULE_KEYS` order, each table's keys
/// in their orders, one blank line before each array-of-tables entry.
pub(crate) fn canonical(text: &str) -> Result<String, String> {
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| e.to_string())?;
    let root = doc.as_table_mut();
    root.sort_values_by(|a, _, b, _| rank(RULE_KEYS, a.get()).cmp(&rank(RULE_KEYS, b.get())));
    for (key, order) in
        [("match", MATCH_KEYS), ("culprit_case", CULPRIT_CASE_KEYS), ("case", CASE_KEYS), ("example", EXAMPLE_KEYS)]
    {
        if let Some(arr) = root.get_mut(key).and_then(|i| i.as_array_of_tables_mut()) {
            for t in arr.iter_mut() {
                t.sort_values_by(|a, _, b, _| rank(order, a.get()).cmp(&rank(order, b.get())));
            }
        }
    }
    let mut s = doc.to_string();
    while s.contains("\n\n\n") {
        s = s.replace("\n\n\n", "\n\n");
    }
    if !s.ends_with('\n') {
        s.push('\n');
    }
    Ok(s)
}

pub(crate) fn fmt(dir: &Option<PathBuf>, check: bool) -> Result<ExitCode, Fail> {
    let Some(d) = dir.clone() else {
        return Err(Fail("no rule folder (give DIR, or run where ./rules exists)".into()));
    };
    let mut bad = Vec::new();
    let data = d.join("data");
    for (name, text) in read_rule_dir(&d)? {
        // Data files have their own layout; only the folder's own `data/` holds them.
        if Path::new(&name).parent() == Some(data.as_path()) {
            continue;
        }
        let c = canonical(&text).map_err(|e| Fail(format!("{name}: {e}")))?;
        if c != text {
            if check {
                bad.push(name);
            } else {
                crate::write_inside(&d, Path::new(&name), &c)?;
                bad.push(name);
            }
        }
    }
    if check {
        for b in &bad {
            out(&format!("would reformat {b}\n"))?;
        }
        out(&format!("{} formatting\n", crate::count(bad.len(), "file needs", "files need")))?;
        return Ok(if bad.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) });
    }
    out(&format!("reformatted {}\n", crate::count(bad.len(), "file", "files")))?;
    Ok(ExitCode::SUCCESS)
}

/// `rules docs`: the pages of `engine`'s pack (the rules on disk over the built-in
/// ones), so a rule added on disk is documented, and `--check` fails until it is.
pub(crate) fn docs(engine: &Engine, dir: &Path, check: bool) -> Result<ExitCode, Fail> {
    write_or_check(dir, &docs::files(engine.pack()), check, "torchdx rules docs")
}

/// Writes generated files, or (`check`) fails listing those whose content differs.
pub(crate) fn write_or_check<S: AsRef<str>>(
    dir: &Path,
    files: &[(S, String)],
    check: bool,
    regen: &str,
) -> Result<ExitCode, Fail> {
    let mut stale = Vec::new();
    for (name, text) in files {
        let p = dir.join(name.as_ref());
        let cur = fs::read_to_string(&p).unwrap_or_default();
        if cur != *text {
            stale.push(p.display().to_string());
            if !check {
                fs::create_dir_all(dir).map_err(|e| Fail(format!("{}: {e}", dir.display())))?;
                crate::write_inside(dir, &p, text)?;
            }
        }
    }
    if check && !stale.is_empty() {
        out(&format!("stale: {}\nrun `{regen}` to regenerate\n", stale.join(", ")))?;
        return Ok(ExitCode::from(1));
    }
    out(&format!(
        "{} {} in {}\n",
        if check { "checked" } else { "wrote" },
        crate::count(files.len(), "file", "files"),
        dir.display()
    ))?;
    Ok(ExitCode::SUCCESS)
}
