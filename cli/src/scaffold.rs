//! Rule-author commands that write files: `rules new`, `rules test --bless`,
//! `rules fmt`, `rules docs`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use torchdx_core::authoring::check::Status;
use torchdx_core::authoring::docs;
use torchdx_core::Engine;

use crate::{check_dir, out, read_rule_dir, Fail};

/// Canonical order of a rule file's top-level keys.
const KEY_ORDER: &[&str] = &[
    "id",
    "family",
    "title",
    "summary",
    "collateral",
    "priority",
    "confidence",
    "mechanism",
    "checklist",
    "fix",
    "verify",
    "prevent",
    "missing",
    "next_action",
    "related",
    "culprit",
    "match",
    "case",
    "example",
];
const EXAMPLE_ORDER: &[&str] = &["name", "expect", "source", "log", "evidence", "culprit_kind"];
const MATCH_ORDER: &[&str] = &["template", "torch", "exception"];

pub(crate) fn new_rule(id: &str, dir: &Path) -> Result<ExitCode, Fail> {
    if !torchdx_core::spec::is_kebab(id) {
        return Err(Fail(format!("rule id `{id}` must be kebab-case (lowercase words joined by `-`)")));
    }
    let path = dir.join(format!("{id}.toml"));
    if path.exists() {
        return Err(Fail(format!("{} already exists", path.display())));
    }
    let text = format!(
        r#"#:schema schema/rule.schema.json
# A torchdx rule. `rules/README.md` explains every key and the template language.
# Fill in each section, paste a real-shaped log into the first example, then run
#   torchdx rules test rules --bless   (records the evidence the engine extracts)
#   torchdx rules check rules          (every check a reviewer would make)
id = "{id}"
# The taxonomy family this failure belongs to (`other` when none fits).
family = "other"
title = "What went wrong, as a headline"
summary = "The mechanism in one line."
mechanism = """
Why this happens: the real mechanism, in a paragraph.
"""
checklist = [
  "A step the reader can check and answer yes or no, e.g. print a value.",
]
fix = """
The specific change, naming the expression at fault: {{failing_code|the failing line}}.
"""
verify = "A command or check that proves the fix worked."
prevent = "The structural change that stops this coming back."
missing = ["A fact the log cannot show that would settle the diagnosis."]
next_action = "The single most useful next step."
related = []

[[match]]
# The message as PyTorch prints it, variable parts as typed captures ({{int:n}}, {{shape:s}}, ...).
template = "Replace this with the message text {{text:detail}}"
torch = ">=2.0"

[[example]]
name = "first-real-shaped-log"
expect = "match"
log = '''
Traceback (most recent call last):
  File "/home/user/project/train.py", line 10, in <module>
    main()
RuntimeError: Replace this with the message text of the failure
'''

[[example]]
name = "second-wording-or-prefix"
expect = "match"
log = '''
[rank0]: RuntimeError: Replace this with the message text as another release prints it
'''

[[example]]
name = "near-miss"
expect = "no-match"
log = '''
RuntimeError: a similar message that is a different failure
'''
"#
    );
    fs::create_dir_all(dir).map_err(|e| Fail(format!("{}: {e}", dir.display())))?;
    fs::write(&path, text).map_err(|e| Fail(format!("{}: {e}", path.display())))?;
    out(&format!(
        "wrote {}\nnext: edit it, then `torchdx rules test {} --bless` and `torchdx rules check {}`\n",
        path.display(),
        dir.display(),
        dir.display()
    ))?;
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
        };
        s.push_str(&format!("{mark} {}::{}\n", e.rule, e.name));
        for d in &e.diffs {
            s.push_str(&format!("        - {d}\n"));
        }
        if e.status != Status::Validated {
            failed += 1;
        }
    }
    if bless {
        let Some(d) = crate::rule_dir(dir) else {
            return Err(Fail("--bless needs a rule folder".into()));
        };
        let mut written = 0;
        for (name, text) in read_rule_dir(&d)? {
            let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e| Fail(format!("{name}: {e}")))?;
            let mut changed = false;
            if let Some(examples) = doc.get_mut("example").and_then(|e| e.as_array_of_tables_mut()) {
                for ex in examples.iter_mut() {
                    let ex_name = ex.get("name").and_then(|v| v.as_str()).unwrap_or("").to_string();
                    let expect = ex.get("expect").and_then(|v| v.as_str()).unwrap_or("");
                    if expect != "match" {
                        continue;
                    }
                    let Some(run) = report.examples.iter().find(|r| r.file == name && r.name == ex_name) else {
                        continue;
                    };
                    if run.evidence.is_empty() {
                        continue;
                    }
                    let mut t = toml_edit::Table::new();
                    for (k, v) in run.evidence.iter() {
                        if k == "message" {
                            continue;
                        }
                        if let Some(tv) = json_to_toml(&v) {
                            t.insert(k, toml_edit::value(tv));
                        }
                    }
                    ex.insert("evidence", toml_edit::Item::Table(t));
                    changed = true;
                }
            }
            if changed {
                fs::write(&name, doc.to_string()).map_err(|e| Fail(format!("{name}: {e}")))?;
                written += 1;
            }
        }
        s.push_str(&format!("blessed: rewrote the expected evidence in {written} files\n"));
    }
    s.push_str(&format!(
        "{} examples: {} passed, {failed} failed\n",
        report.examples.len(),
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

/// The canonical layout of one rule file: keys in [`KEY_ORDER`], example and match keys
/// in their orders, one blank line before each array-of-tables entry.
pub(crate) fn canonical(text: &str) -> Result<String, String> {
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| e.to_string())?;
    let root = doc.as_table_mut();
    root.sort_values_by(|a, _, b, _| rank(KEY_ORDER, a.get()).cmp(&rank(KEY_ORDER, b.get())));
    for (key, order) in [("match", MATCH_ORDER), ("example", EXAMPLE_ORDER)] {
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
    for (name, text) in read_rule_dir(&d)? {
        if name.contains("/data/") {
            continue;
        }
        let c = canonical(&text).map_err(|e| Fail(format!("{name}: {e}")))?;
        if c != text {
            if check {
                bad.push(name);
            } else {
                fs::write(&name, c).map_err(|e| Fail(format!("{name}: {e}")))?;
                bad.push(name);
            }
        }
    }
    if check {
        for b in &bad {
            out(&format!("would reformat {b}\n"))?;
        }
        out(&format!("{} files need formatting\n", bad.len()))?;
        return Ok(if bad.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) });
    }
    out(&format!("reformatted {} files\n", bad.len()))?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn docs(dir: &Path, check: bool) -> Result<ExitCode, Fail> {
    let engine = Engine::builtin();
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
                fs::write(&p, text).map_err(|e| Fail(format!("{}: {e}", p.display())))?;
            }
        }
    }
    if check && !stale.is_empty() {
        out(&format!("stale: {}\nrun `{regen}` to regenerate\n", stale.join(", ")))?;
        return Ok(ExitCode::from(1));
    }
    out(&format!("{} {} files in {}\n", if check { "checked" } else { "wrote" }, files.len(), dir.display()))?;
    Ok(ExitCode::SUCCESS)
}
