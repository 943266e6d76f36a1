//! Every piece of code the reports show a user is valid Python: the fenced blocks of a
//! fix (the page puts a Copy button on them) and the call-shaped code spans of the
//! checklist, fix, verify, prevent and next action (`model.to("cuda:0")`, never
//! `model.to(cuda:0)`). The reports are those of every rule example and every pasted
//! fixture, so the snippets are checked as rendered for real logs, placeholders bound.
//!
//! The check is Python's own parser (`ast.parse`), run once over all snippets. Without
//! `python3` on the machine the test says so and checks nothing, unless
//! `TORCHDX_REQUIRE_PYTHON=1` (CI sets it), where its absence is a failure.

use std::io::Write;
use std::process::{Command, Stdio};

use torchdx_core::{Engine, Report};

/// The Python code of one report: (where, code) for fenced `python` blocks and for
/// inline spans shaped like a call or an assignment.
fn snippets(report: &Report, origin: &str, out: &mut Vec<(String, String)>) {
    for f in &report.findings {
        let texts = [("fix", &f.fix), ("verify", &f.verify), ("prevent", &f.prevent), ("next_action", &f.next_action)];
        let checks = f.checklist.iter().map(|c| ("checklist", c));
        for (field, text) in texts.into_iter().chain(checks) {
            let at = format!("{origin}: {} {field}", f.id);
            let mut rest = text.as_str();
            // Fenced blocks first; what is left is prose with inline spans.
            let mut prose = String::new();
            while let Some(i) = rest.find("```") {
                prose.push_str(&rest[..i]);
                let after = &rest[i + 3..];
                let (lang, body) = after.split_once('\n').unwrap_or((after, ""));
                let end = body.find("```").unwrap_or(body.len());
                if lang.trim() == "python" {
                    out.push((at.clone(), body[..end].to_string()));
                }
                rest = body.get(end + 3..).unwrap_or("");
            }
            prose.push_str(rest);
            for (k, span) in prose.split('`').enumerate() {
                if k % 2 == 1 && looks_like_python(span) {
                    out.push((at.clone(), span.to_string()));
                }
            }
        }
    }
}

/// A span is checked when it is a call or an assignment in Python's shape: a `)`
/// last, and before the first `(` a callee written without spaces (`model.to`,
/// `.to`) or an assignment (`x = x.to`). Quoted log text (`Root Cause (first observed
/// failure)`), statement headers (`with torch.device("meta")`), shell commands, paths
/// and environment variables are not.
fn looks_like_python(s: &str) -> bool {
    let s = s.trim();
    let first = s.chars().next().unwrap_or(' ');
    let Some((head, _)) = s.split_once('(') else { return false };
    let callee = !head.is_empty() && !head.contains(' ');
    let assignment = head.contains(" = ") && !head.starts_with("export ");
    (first.is_alphabetic() || first == '_' || first == '.')
        && s.ends_with(')')
        && (callee || assignment)
        && !s.contains(" --")
        && !s.contains("...")
}

const CHECKER: &str = r#"
import ast, json, sys
bad = []
for where, code in json.load(sys.stdin):
    src = code.strip("\n")
    lines = src.split("\n")
    indent = min((len(l) - len(l.lstrip()) for l in lines if l.strip()), default=0)
    src = "\n".join(l[indent:] for l in lines)
    for attempt in (src, "x" + src if src.startswith(".") else None):
        if attempt is None:
            continue
        try:
            ast.parse(attempt)
            break
        except SyntaxError:
            pass
    else:
        bad.append(f"{where}: {src!r}")
print("\n".join(sorted(set(bad))))
"#;

#[test]
fn every_code_snippet_in_a_report_is_python() {
    let engine = Engine::builtin();
    let mut all: Vec<(String, String)> = Vec::new();
    for rule in engine.pack().rules() {
        for ex in &rule.spec.examples {
            snippets(&engine.diagnose(&ex.log), &format!("{}::{}", rule.id(), ex.name), &mut all);
        }
    }
    let pasted = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/pasted");
    for case in std::fs::read_dir(&pasted).expect("pasted fixtures") {
        let log = case.expect("entry").path().join("log.txt");
        if let Ok(text) = std::fs::read_to_string(&log) {
            snippets(&engine.diagnose(&text), &log.display().to_string(), &mut all);
        }
    }
    assert!(all.len() > 500, "only {} snippets found: the extraction is broken", all.len());
    assert!(all.iter().any(|(_, c)| c.contains('\n')), "no multi-line fenced block found");
    let python = Command::new("python3").arg("-c").arg(CHECKER).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn();
    let mut child = match python {
        Ok(c) => c,
        Err(e) => {
            assert!(std::env::var_os("TORCHDX_REQUIRE_PYTHON").is_none(), "python3 is required here: {e}");
            eprintln!("python3 not found ({e}): {} snippets not checked", all.len());
            return;
        }
    };
    let input = serde_json::to_vec(&all).expect("JSON");
    child.stdin.take().expect("stdin").write_all(&input).expect("write snippets");
    let out = child.wait_with_output().expect("python3 ran");
    assert!(out.status.success(), "the checker failed: {}", String::from_utf8_lossy(&out.stderr));
    let bad = String::from_utf8_lossy(&out.stdout);
    assert!(bad.trim().is_empty(), "code a report shows that is not Python:\n{bad}");
}

/// The extraction itself, on shapes that must and must not be checked.
#[test]
fn spans_that_are_python_are_recognised() {
    for s in ["model.to(\"cuda:0\")", "x = x.to(device)", ".to(device)", "torch.cuda.set_device(local_rank)"] {
        assert!(looks_like_python(s), "{s}");
    }
    let not = [
        "CUDA_VISIBLE_DEVICES=0",
        "torchrun --nproc_per_node 8 train.py",
        "site-packages",
        "cuda:0",
        "pip show torch",
        "Root Cause (first observed failure)",
        "with torch.device(\"meta\")",
    ];
    for s in not {
        assert!(!looks_like_python(s), "{s}");
    }
}
