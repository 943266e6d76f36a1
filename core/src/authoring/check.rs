//! Rule-pack checks for authors: everything a reviewer would verify, each problem
//! located at `file:line:col` with the offending text, a hint and a stable code.
//!
//! Used by `torchdx rules check` and `torchdx rules test`, and by the test suite on the
//! built-in pack. Pure: sources in, diagnostics out. Beyond what loading a pack checks,
//! it verifies that every placeholder and condition names a key something provides,
//! that no scaffold text is left, that `related` ids exist, and it runs every example:
//! each does what it declares (finding, evidence, culprit kind, case), every named
//! case is exercised by some example, and no rendered finding repeats a list item.

use std::collections::{BTreeMap, BTreeSet};

use super::scaffold;
use crate::report::Report;
use crate::rules::facts;
use crate::rules::pack::{self, compile_rule, line_col, source_kind, Code, Pack, PackError, Rule, RuleSource, Seg};
use crate::rules::spec::{Example, Expect, FamilySpec, When};
use crate::rules::text;
use crate::Engine;

/// One problem found in a rule file: the same located error the pack loader returns.
pub type Diagnostic = PackError;

/// Outcome of one example.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// It did what it declares.
    Validated,
    /// A `match` example the rule did not (fully) diagnose.
    Missing,
    /// A `no-match` example the rule fired on.
    Noisy,
    /// A `todo = true` example that fails as its author knows it does.
    KnownMiss,
    /// A `todo = true` example that now passes: drop the mark.
    Fixed,
}

/// One example's run.
#[derive(Clone, Debug)]
pub struct ExampleRun {
    /// The rule id.
    pub rule: String,
    /// The example's name.
    pub name: String,
    /// The rule file.
    pub file: String,
    /// The example's line in it.
    pub line: usize,
    /// What happened.
    pub status: Status,
    /// What differed, one line each (`evidence.argument: want "target", got "mat1"`).
    pub diffs: Vec<String>,
    /// The evidence the primary finding had, when it is this rule's.
    pub evidence: crate::Evidence,
    /// The case and culprit case that made the finding, when it is this rule's.
    pub cases: (Option<String>, Option<String>),
    /// The whole report.
    pub report: Option<Report>,
}

/// Everything `rules check` reports.
#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    /// Problems, in file order.
    pub diagnostics: Vec<Diagnostic>,
    /// Every example run.
    pub examples: Vec<ExampleRun>,
    /// How many files were read.
    pub files: usize,
}

impl CheckReport {
    /// Whether nothing failed (and at least one example ran). Known misses pass.
    pub fn ok(&self) -> bool {
        self.diagnostics.is_empty()
            && !self.examples.is_empty()
            && self.examples.iter().all(|e| matches!(e.status, Status::Validated | Status::KnownMiss))
    }
}

fn diag(src: &RuleSource<'_>, code: Code, offset: usize, message: impl Into<String>, hint: Option<&str>) -> Diagnostic {
    let d = PackError::at(code, src, offset, message);
    match hint {
        Some(h) => d.with_hint(h),
        None => d,
    }
}

/// The families `sources` and `base` define (their `data/families.toml` files).
fn families_of(sources: &[RuleSource<'_>], base: &[RuleSource<'_>]) -> Vec<FamilySpec> {
    let data: Vec<RuleSource<'_>> =
        base.iter().chain(sources).filter(|s| source_kind(s.name) != pack::SourceKind::Rule).copied().collect();
    Pack::new(&data).map(|p| p.families().to_vec()).unwrap_or_default()
}

/// Checks rule sources. `base` rules (the built-in pack, when checking an extra pack)
/// take part in cross-rule checks but are not themselves reported.
pub fn check(sources: &[RuleSource<'_>], base: &[RuleSource<'_>]) -> CheckReport {
    let mut out = CheckReport { files: sources.len(), ..CheckReport::default() };
    let families = families_of(sources, base);
    let mut good: Vec<RuleSource<'_>> = Vec::new();
    let mut ids: BTreeMap<String, String> = BTreeMap::new();
    // A data file is compiled with the families (a code row names one).
    let family_files: Vec<RuleSource<'_>> =
        base.iter().chain(sources).filter(|s| source_kind(s.name) == pack::SourceKind::Families).copied().collect();
    for src in sources {
        if source_kind(src.name) != pack::SourceKind::Rule {
            let mut with: Vec<RuleSource<'_>> = family_files.iter().filter(|f| f.name != src.name).copied().collect();
            with.push(*src);
            match Pack::new(&with) {
                Err(e) => out.diagnostics.push(e),
                Ok(_) => good.push(*src),
            }
            continue;
        }
        match compile_rule(*src, &families) {
            Err(e) => out.diagnostics.push(e),
            Ok(rule) => {
                if let Some(prev) = ids.insert(rule.id().to_string(), src.name.to_string()) {
                    out.diagnostics.push(diag(
                        src,
                        Code::DuplicateId,
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
            out.diagnostics.push(e);
            return out;
        }
    };
    let known: BTreeSet<&str> = pack.rules().iter().map(|r| r.id()).collect();
    let ours: BTreeSet<&str> = good.iter().map(|s| s.name).collect();
    for r in pack.rules().iter().filter(|r| ours.contains(r.source_name.as_str())) {
        let src = RuleSource { name: &r.source_name, text: &r.source_text };
        for (i, rel) in r.spec.related.iter().enumerate() {
            if !known.contains(rel.as_str()) {
                out.diagnostics.push(diag(
                    &src,
                    Code::Related,
                    pack::locate(src.text, &[Seg::Key("related"), Seg::Index(i)]).unwrap_or(0),
                    format!("related rule `{rel}` does not exist"),
                    Some("`related` must name ids of rules in the pack"),
                ));
            }
        }
    }
    let engine = Engine::new(pack);
    let mut exercised: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for rule in engine.pack().rules().iter().filter(|r| ours.contains(r.source_name.as_str())) {
        check_examples(&engine, rule, &mut out, &mut exercised);
    }
    for rule in engine.pack().rules().iter().filter(|r| ours.contains(r.source_name.as_str())) {
        check_coverage(rule, exercised.get(rule.id()), &mut out);
    }
    out
}

/// Every named case and culprit case of a rule must be exercised by some example of the
/// pack: a finding of this rule that came from it, in the report of a passing example
/// (of any rule: a case that shapes an echo shows in the example of the failure it
/// echoes), or the declared case of a known miss.
fn check_coverage(rule: &Rule, exercised: Option<&BTreeSet<String>>, out: &mut CheckReport) {
    let src = RuleSource { name: &rule.source_name, text: &rule.source_text };
    let named = rule.spec.cases.iter().enumerate().map(|(i, c)| (i, &c.name, "case", Seg::Key("case")));
    let decisions =
        rule.spec.culprit_cases.iter().enumerate().map(|(i, c)| (i, &c.name, "culprit case", Seg::Key("culprit_case")));
    for (i, name, what, table) in named.chain(decisions) {
        if !exercised.is_some_and(|e| e.contains(name)) {
            out.diagnostics.push(diag(
                &src,
                Code::Examples,
                pack::locate(src.text, &[table, Seg::Index(i), Seg::Key("name")]).unwrap_or(0),
                format!("{what} `{name}` is exercised by no example"),
                Some("add an `expect = \"match\"` example with `case = \"...\"` that reaches it (or `todo = true` when it cannot yet)"),
            ));
        }
    }
}

/// Runs a rule's examples, checks each, and records which cases their findings used.
fn check_examples(
    engine: &Engine,
    rule: &Rule,
    out: &mut CheckReport,
    exercised: &mut BTreeMap<String, BTreeSet<String>>,
) {
    let src = RuleSource { name: &rule.source_name, text: &rule.source_text };
    if rule.spec.examples.is_empty() {
        out.diagnostics.push(diag(
            &src,
            Code::Examples,
            0,
            format!("rule `{}` has no examples", rule.id()),
            Some("add at least two `expect = \"match\"` and one `expect = \"no-match\"` [[example]]"),
        ));
        return;
    }
    let mut any_match = false;
    for ex in &rule.spec.examples {
        let run = run_example(engine, rule, ex);
        if ex.expect == Expect::Match && run.status == Status::Validated {
            any_match = true;
        }
        if run.status == Status::Validated {
            for f in run.report.iter().flat_map(|r| &r.findings) {
                let used = f.trace.case.iter().chain(&f.trace.culprit_case).cloned();
                exercised.entry(f.id.clone()).or_default().extend(used);
            }
        }
        if run.status == Status::KnownMiss {
            // A known miss exercises the case it declares, by intent.
            exercised.entry(rule.id().to_string()).or_default().extend(ex.case.iter().cloned());
        }
        if let Some(f) = run.report.as_ref().and_then(Report::primary).filter(|p| p.id == rule.id()) {
            for (what, items) in [("checklist", &f.checklist), ("missing", &f.missing)] {
                let mut seen = BTreeSet::new();
                if let Some(dup) = items.iter().find(|i| !seen.insert(i.trim())) {
                    out.diagnostics.push(diag(
                        &src,
                        Code::Duplicate,
                        example_offset(rule, ex),
                        format!("example `{}`: the finding's {what} lists `{dup}` twice", ex.name),
                        Some("a rule's list and a case's or culprit case's list repeat an item: keep it in one place"),
                    ));
                }
            }
        }
        if let Some(w) = contradicted_kind(ex) {
            out.diagnostics.push(diag(&src, Code::Examples, example_offset(rule, ex), w, None));
        }
        out.examples.push(run);
    }
    let positives = rule.spec.examples.iter().filter(|e| e.expect == Expect::Match).count();
    let negatives = rule.spec.examples.len() - positives;
    if positives < 2 || negatives < 1 {
        out.diagnostics.push(diag(
            &src,
            Code::Examples,
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
            Code::Examples,
            0,
            format!("rule `{}` matches none of its examples", rule.id()),
            Some("run `torchdx rules test` to see what each example produced"),
        ));
    }
}

/// Byte offset of an example's name in its rule file.
fn example_offset(rule: &Rule, ex: &Example) -> usize {
    rule.source_text.find(&format!("\"{}\"", ex.name)).unwrap_or(0)
}

/// Words in an example's name or source that say which culprit it is about. An example
/// whose expected culprit kind is another one contradicts itself (a `--bless` once
/// wrote `wrong-local-rank` into an example named `checkpoint-saved-on-gpu0-...`).
const KIND_WORDS: &[(&str, &[&str])] = &[
    ("checkpoint-map-location", &["checkpoint", "map_location", "map-location", "torch.load"]),
    ("optimizer-state", &["optimizer"]),
    ("dataparallel-replica", &["dataparallel", "data-parallel", "replica"]),
    ("meta-weights", &["meta-device", "meta-weights", "on-meta"]),
    ("hf-device-map", &["device-map", "device_map", "accelerate"]),
    ("generator", &["generator"]),
];

/// The contradiction between an example's name or source and its expected culprit kind.
fn contradicted_kind(ex: &Example) -> Option<String> {
    let want = ex.culprit_kind.as_deref()?;
    let text = format!("{} {}", ex.name, ex.source.as_deref().unwrap_or("")).to_ascii_lowercase();
    let said: Vec<&str> =
        KIND_WORDS.iter().filter(|(_, words)| words.iter().any(|w| text.contains(w))).map(|(k, _)| *k).collect();
    (said.len() == 1 && said[0] != want).then(|| {
        format!("example `{}` is about `{}` by its name or source, but expects culprit_kind `{want}`", ex.name, said[0])
    })
}

/// Unknown placeholders one file reports one by one.
const PLACEHOLDER_PROBLEMS: usize = 20;

/// Placeholders in text and keys in conditions must name something a template
/// captures or the engine provides; scaffold text must be gone.
fn check_text(src: &RuleSource<'_>, rule: &Rule, out: &mut Vec<Diagnostic>) {
    let mut captured: BTreeSet<String> = BTreeSet::new();
    captured.extend(rule.spec.matches.iter().flat_map(|m| m.set.keys().cloned()));
    for t in &rule.templates {
        for (name, kind, _) in t.capture_specs() {
            captured.insert(name.to_string());
            for (k, _) in kind.derived() {
                captured.insert(k.replace("{name}", name));
            }
        }
    }
    let s = &rule.spec;
    let set: BTreeSet<&str> = s.culprit_cases.iter().flat_map(|c| c.set.keys().map(String::as_str)).collect();
    let known = |k: &str| captured.contains(k) || set.contains(k) || facts::provided(k, &s.facts, s.lookup.is_some());
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
    for c in &s.culprit_cases {
        texts.extend([&c.kind, &c.summary].into_iter().map(String::as_str));
        texts.extend(c.expr.as_deref());
        texts.extend(c.next_action.as_deref());
        texts.extend(c.missing.iter().flatten().map(String::as_str));
        texts.extend(c.set.values().map(String::as_str));
    }
    // Text left from `torchdx rules new` that was never filled in.
    for (i, line) in src.text.lines().enumerate() {
        if !line.trim_start().starts_with('#') && scaffold::is_scaffold_line(line) {
            let off = src.text.lines().take(i).map(|l| l.len() + 1).sum::<usize>();
            out.push(diag(
                src,
                Code::Scaffold,
                off,
                "this is still the text `torchdx rules new` wrote",
                Some("replace it with the real message, example log or explanation"),
            ));
        }
    }
    // Each text is located once, and one file reports at most PLACEHOLDER_PROBLEMS
    // unknown placeholders, then how many more (a line of 20,000 of them asked for
    // 20,000 searches of the whole file and as many snippets).
    let mut unknown = 0usize;
    let mut first_past_cap = None;
    for text in texts {
        let base = std::cell::OnceCell::new();
        for p in text::placeholders(text) {
            if !known(p.key) {
                unknown += 1;
                let off = base.get_or_init(|| locate_text(src.text, text)).map(|o| o + p.offset).unwrap_or(0);
                if unknown > PLACEHOLDER_PROBLEMS {
                    first_past_cap.get_or_insert(off);
                    continue;
                }
                out.push(diag(
                    src,
                    Code::Placeholder,
                    off,
                    format!("placeholder `{{{}}}` names nothing a template captures or the engine provides", p.key),
                    Some("capture it in a [[match]] template (`{kind:name}`), use an engine key (`torchdx explain --facts`), or write `{{` `}}` for literal braces"),
                ));
            }
        }
    }
    if let Some(off) = first_past_cap {
        let more = unknown - PLACEHOLDER_PROBLEMS;
        out.push(diag(
            src,
            Code::Placeholder,
            off,
            format!("{more} more unknown placeholder{} in this file, from here on", if more == 1 { "" } else { "s" }),
            Some("fix the ones above first; `torchdx rules check` reports the rest again"),
        ));
    }
    let whens = s
        .cases
        .iter()
        .map(|c| (&c.when, "case", &c.name))
        .chain(s.culprit_cases.iter().map(|c| (&c.when, "culprit case", &c.name)));
    for (w, what, name) in whens {
        for key in when_keys(w) {
            if !known(key) {
                let off = src.text.find(&format!("\"{name}\"")).unwrap_or(0);
                out.push(diag(
                    src,
                    Code::Placeholder,
                    off,
                    format!(
                        "{what} `{name}` tests `{key}`, which no template captures and the engine does not provide"
                    ),
                    Some("a condition on a key nothing provides never holds; see `torchdx explain --facts`"),
                ));
            }
        }
    }
}

/// The keys a condition reads.
fn when_keys(w: &When) -> Vec<&str> {
    let mut keys: Vec<&str> = w.present.iter().chain(&w.absent).chain(&w.differ).map(String::as_str).collect();
    keys.extend(w.equals.keys().chain(w.contains.keys()).map(String::as_str));
    keys.extend(w.exceeds.iter().flat_map(|(a, b)| [a.as_str(), b.as_str()]));
    for a in &w.any {
        keys.extend(when_keys(a));
    }
    keys
}

/// Byte offset of `needle`'s text inside the file (first occurrence).
fn locate_text(hay: &str, needle: &str) -> Option<usize> {
    let first_line = needle.lines().next().filter(|l| !l.is_empty())?;
    hay.find(first_line)
}

/// Runs one example against the whole pack.
pub fn run_example(engine: &Engine, rule: &Rule, ex: &Example) -> ExampleRun {
    let report = engine.diagnose(&ex.log);
    let line =
        rule.source_text.find(&format!("\"{}\"", ex.name)).map(|o| line_col(&rule.source_text, o).0).unwrap_or(1);
    let mut diffs = Vec::new();
    let primary = report.primary();
    let ours = primary.filter(|p| p.id == rule.id());
    let evidence = ours.map(|p| p.evidence.clone()).unwrap_or_default();
    let cases = ours.map(|p| (p.trace.case.clone(), p.trace.culprit_case.clone())).unwrap_or_default();
    let passed = match ex.expect {
        Expect::Match => {
            match primary {
                None => diffs.push("no finding at all".to_string()),
                Some(p) if p.id != rule.id() => {
                    let theirs = engine.pack().rule(&p.id).map_or(0, |r| r.spec.priority);
                    diffs.push(format!(
                        "claimed by rule `{}` first (priority {theirs}); to resolve: give this rule a `priority` above {theirs} if it is the more specific diagnosis, make its template more specific than `{}`'s, or, to replace `{}` entirely, name this file `{}.toml`",
                        p.id, p.id, p.id, p.id
                    ))
                }
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
                    if let Some(c) = &ex.case {
                        let (case, decision) = (&p.trace.case, &p.trace.culprit_case);
                        if case.as_ref() != Some(c) && decision.as_ref() != Some(c) {
                            diffs.push(format!("case: want {c:?}, got {case:?} (culprit case {decision:?})"));
                        }
                    }
                }
            }
            diffs.is_empty()
        }
        Expect::NoMatch => {
            let fired = report.findings.iter().any(|f| f.id == rule.id());
            if fired {
                diffs.push(format!("rule `{}` fired on a no-match example", rule.id()));
            }
            !fired
        }
    };
    let status = match (passed, ex.todo, ex.expect) {
        (true, false, _) => Status::Validated,
        (true, true, _) => Status::Fixed,
        (false, true, _) => Status::KnownMiss,
        (false, false, Expect::Match) => Status::Missing,
        (false, false, Expect::NoMatch) => Status::Noisy,
    };
    ExampleRun {
        rule: rule.id().to_string(),
        name: ex.name.clone(),
        file: rule.source_name.clone(),
        line,
        status,
        diffs,
        evidence,
        cases,
        report: Some(report),
    }
}
