//! Rule-pack checks for authors: everything a reviewer would verify, each problem
//! located at `file:line:col` with the offending text and a hint.
//!
//! Used by `torchdx rules check` and `torchdx rules test`, and by the test suite on the
//! built-in pack. Pure: sources in, diagnostics out.

use std::collections::{BTreeMap, BTreeSet};

use crate::report::Report;
use crate::rules::pack::{self, compile_rule, line_col, Expect, Pack, Rule, RuleSource, Seg};
use crate::rules::text;
use crate::Engine;

/// Evidence keys the engine provides to every rule's text, beyond its own captures.
pub const ENGINE_KEYS: &[&str] = &[
    "exception",
    "message",
    "failing_frame",
    "failing_code",
    "op",
    "kernel",
    "dispatch_key",
    "torch_versions",
    "rank",
    "ranks",
    "dtypes",
    "devices",
    "argument",
    "culprit_expr",
    "culprit_kind",
    "culprit_summary",
    "culprit_role",
    "target_device",
    "stray_device",
    "reference_expr",
    "fragmentation",
    "reserved_unallocated_bytes",
    "reserved_unallocated",
    "suspect_rank",
    "code_target",
    "code_callee",
    "code_arg0",
    "code_arg1",
    "code_arg2",
    "common_device",
    "argument_device",
];

/// Marks scaffold text that `torchdx rules new` writes and `rules check` rejects.
pub const SCAFFOLD_MARK: &str = "Replace this with";

/// One problem found in a rule file: the same located error the pack loader returns,
/// shown rustc-style by [`PackError::report`](crate::pack::PackError::report).
pub use crate::rules::pack::PackError as Diagnostic;

/// Outcome of one example.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// It did what it declares.
    Validated,
    /// A `match` example the rule did not (fully) diagnose.
    Missing,
    /// A `no-match` example the rule fired on.
    Noisy,
}

/// One example's run.
#[derive(Clone, Debug)]
pub struct ExampleRun {
    pub rule: String,
    pub name: String,
    pub file: String,
    pub line: usize,
    pub status: Status,
    /// What differed, one line each (`evidence.argument: want "target", got "mat1"`).
    pub diffs: Vec<String>,
    /// The evidence the primary finding had (for `--bless`).
    pub evidence: crate::Evidence,
    pub report: Option<Report>,
}

/// Everything `rules check` reports.
#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    pub diagnostics: Vec<Diagnostic>,
    pub examples: Vec<ExampleRun>,
}

impl CheckReport {
    /// Whether nothing failed (and at least one example ran).
    pub fn ok(&self) -> bool {
        self.diagnostics.is_empty()
            && !self.examples.is_empty()
            && self.examples.iter().all(|e| e.status == Status::Validated)
    }
}

fn diag(src: &RuleSource<'_>, offset: usize, message: impl Into<String>, hint: Option<&str>) -> Diagnostic {
    let (line, col) = line_col(src.text, offset);
    Diagnostic {
        file: src.name.to_string(),
        line,
        col,
        message: message.into(),
        snippet: src.text.lines().nth(line - 1).map(str::to_string),
        hint: hint.map(str::to_string),
    }
}

/// Checks rule sources. `base` rules (the built-in pack, when checking an extra pack)
/// take part in cross-rule checks but are not themselves reported.
pub fn check(sources: &[RuleSource<'_>], base: &[RuleSource<'_>]) -> CheckReport {
    let mut out = CheckReport::default();
    let mut good: Vec<RuleSource<'_>> = Vec::new();
    let mut ids: BTreeMap<String, String> = BTreeMap::new();
    for src in sources {
        if src.name.ends_with("ops.toml") {
            if let Err(e) = Pack::new(&[*src]) {
                out.diagnostics.push(pack_diag(e, None));
            } else {
                good.push(*src);
            }
            continue;
        }
        match compile_rule(*src) {
            Err(e) => out.diagnostics.push(pack_diag(e, None)),
            Ok(rule) => {
                if let Some(prev) = ids.insert(rule.id().to_string(), src.name.to_string()) {
                    out.diagnostics.push(diag(
                        src,
                        pack::locate(src.text, &[Seg::Key("id")]).unwrap_or(0),
                        format!("duplicate rule id `{}` (also in {prev})", rule.id()),
                        None,
                    ));
                    continue;
                }
                check_text(src, &rule, &mut out.diagnostics);
                good.push(*src);
            }
        }
    }
    // Cross-rule: related ids, examples.
    let mut all: Vec<RuleSource<'_>> = base.to_vec();
    all.extend(good.iter().copied());
    let pack = match Pack::new(&all) {
        Ok(p) => p,
        Err(e) => {
            out.diagnostics.push(pack_diag(e, None));
            return out;
        }
    };
    let ids: BTreeSet<&str> = pack.rules().iter().map(|r| r.id()).collect();
    for r in pack.rules().iter().filter(|r| good.iter().any(|g| g.name == r.source_name)) {
        let src = RuleSource { name: &r.source_name, text: &r.source_text };
        for (i, rel) in r.spec.related.iter().enumerate() {
            if !ids.contains(rel.as_str()) {
                out.diagnostics.push(diag(
                    &src,
                    pack::locate(src.text, &[Seg::Key("related"), Seg::Index(i)]).unwrap_or(0),
                    format!("related rule `{rel}` does not exist"),
                    Some("`related` must name ids of rules in the pack"),
                ));
            }
        }
    }
    let engine = Engine::new(pack);
    let ours: BTreeSet<&str> = good.iter().map(|s| s.name).collect();
    for rule in engine.pack().rules().iter().filter(|r| ours.contains(r.source_name.as_str())) {
        let src = RuleSource { name: &rule.source_name, text: &rule.source_text };
        if rule.spec.examples.is_empty() {
            out.diagnostics.push(diag(
                &src,
                0,
                format!("rule `{}` has no examples", rule.id()),
                Some("add at least two `expect = \"match\"` and one `expect = \"no-match\"` [[example]]"),
            ));
            continue;
        }
        let mut any_match = false;
        for ex in &rule.spec.examples {
            let run = run_example(&engine, rule, ex);
            if ex.expect == Expect::Match && run.status == Status::Validated {
                any_match = true;
            }
            out.examples.push(run);
        }
        let positives = rule.spec.examples.iter().filter(|e| e.expect == Expect::Match).count();
        let negatives = rule.spec.examples.len() - positives;
        if positives < 2 || negatives < 1 {
            out.diagnostics.push(diag(
                &src,
                0,
                format!(
                    "rule `{}` has {positives} match and {negatives} no-match examples; it needs at least 2 and 1",
                    rule.id()
                ),
                None,
            ));
        }
        if !any_match && positives > 0 {
            out.diagnostics.push(diag(
                &src,
                0,
                format!("rule `{}` matches none of its examples", rule.id()),
                Some("run `torchdx rules test` to see what each example produced"),
            ));
        }
    }
    out
}

fn pack_diag(mut e: pack::PackError, hint: Option<String>) -> Diagnostic {
    e.hint = hint.or(e.hint);
    e
}

/// Placeholders in text must refer to something a template captures or the engine
/// provides.
fn check_text(src: &RuleSource<'_>, rule: &Rule, out: &mut Vec<Diagnostic>) {
    let mut known: BTreeSet<String> = ENGINE_KEYS.iter().map(|s| s.to_string()).collect();
    for t in &rule.templates {
        for (name, kind) in t.captures() {
            known.insert(name.to_string());
            if kind == crate::rules::template::Kind::Size {
                known.insert(format!("{name}_bytes"));
            }
        }
    }
    let s = &rule.spec;
    let mut texts: Vec<&str> = vec![&s.title, &s.mechanism, &s.fix, &s.verify, &s.prevent, &s.next_action];
    texts.extend(s.checklist.iter().map(String::as_str));
    texts.extend(s.missing.iter().map(String::as_str));
    if let Some(c) = &s.culprit {
        texts.push(&c.summary);
        texts.extend(c.expr.as_deref());
    }
    for c in &s.cases {
        texts.extend(
            [&c.title, &c.mechanism, &c.fix, &c.verify, &c.prevent, &c.next_action]
                .into_iter()
                .flatten()
                .map(String::as_str),
        );
        texts.extend(c.checklist.iter().flatten().map(String::as_str));
        texts.extend(c.missing.iter().flatten().map(String::as_str));
        if let Some(cu) = &c.culprit {
            texts.push(&cu.summary);
            texts.extend(cu.expr.as_deref());
        }
    }
    // Text left from `torchdx rules new` that was never filled in.
    for (i, line) in src.text.lines().enumerate() {
        if !line.trim_start().starts_with('#')
            && (line.contains(SCAFFOLD_MARK) || line.contains("What went wrong, as a headline"))
        {
            let off = src.text.lines().take(i).map(|l| l.len() + 1).sum::<usize>();
            out.push(diag(
                src,
                off,
                "this is still the text `torchdx rules new` wrote",
                Some("replace it with the real message, example log or explanation"),
            ));
        }
    }
    for text in texts {
        for p in text::placeholders(text) {
            if !known.contains(p.key) {
                let off = locate(src.text, text).map(|o| o + p.offset).unwrap_or(0);
                out.push(diag(
                    src,
                    off,
                    format!("placeholder `{{{}}}` names nothing a template captures or the engine provides", p.key),
                    Some("capture it in a [[match]] template (`{kind:name}`), use an engine key (exception, message, failing_code, ...), or write `{{` `}}` for literal braces"),
                ));
            }
        }
    }
}

/// Byte offset of `needle`'s text inside the file (first occurrence).
fn locate(hay: &str, needle: &str) -> Option<usize> {
    let first_line = needle.lines().next().filter(|l| !l.is_empty())?;
    hay.find(first_line)
}

/// Runs one example against the whole pack.
pub fn run_example(engine: &Engine, rule: &Rule, ex: &pack::Example) -> ExampleRun {
    let report = engine.diagnose(&ex.log);
    let line =
        rule.source_text.find(&format!("\"{}\"", ex.name)).map(|o| line_col(&rule.source_text, o).0).unwrap_or(1);
    let mut diffs = Vec::new();
    let primary = report.primary();
    let evidence = primary.filter(|p| p.id == rule.id()).map(|p| p.evidence.clone()).unwrap_or_default();
    let status = match ex.expect {
        Expect::Match => {
            match primary {
                None => diffs.push("no finding at all".to_string()),
                Some(p) if p.id != rule.id() => diffs.push(format!("claimed by rule `{}` first", p.id)),
                Some(p) => {
                    for (k, want) in &ex.evidence {
                        let got = p.evidence.get(k);
                        if got.as_ref() != Some(want) {
                            diffs.push(format!(
                                "evidence.{k}: want {want}, got {}",
                                got.map(|g| g.to_string()).unwrap_or_else(|| "nothing".into())
                            ));
                        }
                    }
                    if let Some(kind) = &ex.culprit_kind {
                        let got = p.culprit.as_ref().map(|c| c.kind.as_str());
                        if got != Some(kind.as_str()) {
                            diffs.push(format!("culprit_kind: want {kind:?}, got {got:?}"));
                        }
                    }
                }
            }
            if diffs.is_empty() {
                Status::Validated
            } else {
                Status::Missing
            }
        }
        Expect::NoMatch => {
            if report.findings.iter().any(|f| f.id == rule.id()) {
                diffs.push(format!("rule `{}` fired on a no-match example", rule.id()));
                Status::Noisy
            } else {
                Status::Validated
            }
        }
    };
    ExampleRun {
        rule: rule.id().to_string(),
        name: ex.name.clone(),
        file: rule.source_name.clone(),
        line,
        status,
        diffs,
        evidence,
        report: Some(report),
    }
}
