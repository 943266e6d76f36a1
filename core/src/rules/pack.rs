//! The rule pack: rule files (TOML, one rule per file) deserialized with serde,
//! compiled and validated.
//!
//! Loading is the only fallible step of the engine. Every problem is reported as a
//! [`PackError`] naming the file, line and column, so a rule author sees
//! `rules/cuda-oom.toml:14:23: unknown capture kind ...` rather than a panic.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::template::Template;
pub use crate::report::Confidence;

/// The family ids of the taxonomy (`shared/reference/taxonomy.md`).
pub const FAMILIES: &[&str] = &[
    "device-mismatch",
    "tensor-to-numpy-on-cuda",
    "generator-device",
    "deserialize-cuda-on-cpu",
    "weights-only-load",
    "state-dict-mismatch",
    "dtype-mismatch",
    "half-not-implemented-cpu",
    "mps-float64",
    "matmul-shape-mismatch",
    "broadcast-size-mismatch",
    "view-stride",
    "loss-target-mismatch",
    "index-out-of-range",
    "cuda-oom",
    "host-oom-killed",
    "shm-exhausted",
    "device-side-assert",
    "illegal-memory-access",
    "no-kernel-image",
    "cuda-unavailable",
    "cuda-fork",
    "cudnn-error",
    "cublas-error",
    "nccl-watchdog-timeout",
    "nccl-error",
    "collective-timeout-gloo",
    "elastic-child-failed",
    "ddp-unused-parameters",
    "ddp-ready-twice",
    "process-group-init",
    "autograd-inplace",
    "backward-twice",
    "no-grad-fn",
    "leaf-inplace",
    "numpy-requires-grad",
    "nan-anomaly",
    "amp-unscale-fp16",
    "dataloader-worker-error",
    "collate-size-mismatch",
    "dynamo-recompile",
    "other",
];

/// What an example expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Expect {
    Match,
    NoMatch,
}

/// A culprit declared by a rule or case (text with placeholders).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CulpritSpec {
    pub kind: String,
    #[serde(default)]
    pub expr: Option<String>,
    pub summary: String,
}

/// One `[[match]]` entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct MatchSpec {
    pub template: String,
    /// The torch releases that print this wording, e.g. `">=2.8"`, `"1.10-2.7"`.
    #[serde(default)]
    pub torch: Option<String>,
    /// Only when raised as one of these exception classes (module path ignored).
    #[serde(default)]
    pub exception: Vec<String>,
    /// Conditions on this match's own captures (`differ = ["devices"]`): the template
    /// only counts when they hold. Frame and log conditions are not available here.
    #[serde(default)]
    pub when: Option<When>,
    /// The op whose argument roles apply when the message names none
    /// (`Input type (...) and weight type (...)` is a convolution).
    #[serde(default)]
    pub role_op: Option<String>,
}

/// A string or a list of strings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn values(&self) -> Vec<&str> {
        match self {
            OneOrMany::One(s) => vec![s.as_str()],
            OneOrMany::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

/// Conditions of a `[[case]]`; all that are given must hold.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct When {
    #[serde(default)]
    pub present: Vec<String>,
    #[serde(default)]
    pub absent: Vec<String>,
    #[serde(default)]
    pub equals: BTreeMap<String, OneOrMany>,
    #[serde(default)]
    pub contains: BTreeMap<String, String>,
    #[serde(default)]
    pub differ: Vec<String>,
    #[serde(default)]
    pub frame_contains: Vec<String>,
    #[serde(default)]
    pub log_contains: Vec<String>,
    #[serde(default)]
    pub exception: Vec<String>,
}

/// Text fields a case may override.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CaseSpec {
    #[serde(default)]
    pub when: When,
    pub title: Option<String>,
    pub mechanism: Option<String>,
    pub checklist: Option<Vec<String>>,
    pub fix: Option<String>,
    pub verify: Option<String>,
    pub prevent: Option<String>,
    pub missing: Option<Vec<String>>,
    pub next_action: Option<String>,
    pub confidence: Option<Confidence>,
    pub culprit: Option<CulpritSpec>,
    /// Overrides the rule's `collateral` for this evidence (an OOM with a garbage size
    /// is the echo of a hang, not a failure of its own).
    pub collateral: Option<bool>,
}

/// An inline example: a log and what the rule must make of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Example {
    pub name: String,
    pub expect: Expect,
    #[serde(default)]
    pub source: Option<String>,
    pub log: String,
    #[serde(default)]
    pub evidence: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    pub culprit_kind: Option<String>,
}

/// A rule file as written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    pub id: String,
    pub family: String,
    pub title: String,
    pub summary: String,
    #[serde(default)]
    pub collateral: bool,
    #[serde(default)]
    pub priority: i32,
    #[serde(default)]
    pub confidence: Confidence,
    pub mechanism: String,
    pub checklist: Vec<String>,
    pub fix: String,
    pub verify: String,
    pub prevent: String,
    #[serde(default)]
    pub missing: Vec<String>,
    pub next_action: String,
    #[serde(default)]
    pub related: Vec<String>,
    #[serde(default)]
    pub culprit: Option<CulpritSpec>,
    #[serde(rename = "match")]
    pub matches: Vec<MatchSpec>,
    #[serde(default, rename = "case")]
    pub cases: Vec<CaseSpec>,
    #[serde(default, rename = "example")]
    pub examples: Vec<Example>,
}

/// A compiled rule.
#[derive(Clone, Debug)]
pub struct Rule {
    /// The file name it came from (for messages).
    pub source_name: String,
    /// The file's text (for locating examples and spans).
    pub source_text: String,
    pub spec: RuleSpec,
    /// One compiled template per `[[match]]`.
    pub templates: Vec<Template>,
}

impl Rule {
    pub fn id(&self) -> &str {
        &self.spec.id
    }
    pub fn family(&self) -> &str {
        &self.spec.family
    }
}

/// The JSON Schema of a rule file, for editors (`#:schema schema/rule.schema.json`).
#[cfg(feature = "schema")]
pub fn rule_schema() -> String {
    let schema = schemars::schema_for!(RuleSpec);
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}

/// The JSON Schema of the op-argument role table (`rules/data/ops.toml`).
#[cfg(feature = "schema")]
pub fn ops_schema() -> String {
    let schema = schemars::schema_for!(OpsFile);
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}

/// A rule file's text and the name to report problems under.
#[derive(Clone, Copy, Debug)]
pub struct RuleSource<'a> {
    pub name: &'a str,
    pub text: &'a str,
}

/// One entry of the op-argument role table (`rules/data/ops.toml`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct OpSpec {
    /// ATen op names (as they appear in the message, without wrapper and key).
    pub names: Vec<String>,
    /// What the user called, for the report (`nn.CrossEntropyLoss / F.cross_entropy`).
    pub user_call: String,
    /// Substrings of callee names on the failing line that make this op
    /// (`loss`, `criterion`, `cross_entropy`), to find the right call.
    #[serde(default)]
    pub callees: Vec<String>,
    /// Tensor arguments in schema order (the first one sets the "common" device).
    pub args: Vec<ArgRole>,
}

/// The role of one op argument.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ArgRole {
    /// The schema argument name (`target`, `mat1`).
    pub name: String,
    /// What the tensor is to the user (`the labels`).
    pub role: String,
    /// The culprit kind when this tensor is the misplaced one.
    pub kind: String,
    /// Which positional argument of the call on the failing line holds it; absent when
    /// it belongs to the module (a parameter or buffer).
    #[serde(default)]
    pub call_arg: Option<usize>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
struct OpsFile {
    #[serde(default)]
    op: Vec<OpSpec>,
}

/// A rule pack problem, located in its file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackError {
    pub file: String,
    pub line: usize,
    pub col: usize,
    pub message: String,
    /// The offending text, when there is one.
    pub snippet: Option<String>,
    /// How to fix it.
    pub hint: Option<String>,
}

impl fmt::Display for PackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: {}", self.file, self.line, self.col, self.message)
    }
}

impl std::error::Error for PackError {}

impl PackError {
    /// The problem rustc-style: message, location, the offending line with a caret
    /// under the column, and the hint.
    pub fn report(&self) -> String {
        let mut f = format!("error: {}\n  --> {}:{}:{}\n", self.message, self.file, self.line, self.col);
        if let Some(s) = &self.snippet {
            f.push_str(&format!("   |\n{:>3}| {}\n   | {}^\n", self.line, s, " ".repeat(self.col.saturating_sub(1))));
        }
        if let Some(h) = &self.hint {
            f.push_str(&format!("   = hint: {h}\n"));
        }
        f
    }
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let mut o = offset;
    while o > 0 && !text.is_char_boundary(o) {
        o -= 1;
    }
    let before = &text[..o];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0) + 1;
    (line, col)
}

fn error_at(src: &RuleSource<'_>, offset: usize, message: impl Into<String>) -> PackError {
    let (line, col) = line_col(src.text, offset);
    let snippet = src.text.lines().nth(line - 1).map(|l| l.to_string());
    PackError { file: src.name.to_string(), line, col, message: message.into(), snippet, hint: None }
}

fn with_hint(mut e: PackError, hint: &str) -> PackError {
    e.hint = Some(hint.to_string());
    e
}

const HINT_KEYS: &str = "rules/README.md lists the keys a rule file takes; top-level keys must come before any [[match]], [[case]] or [[example]] table";
const HINT_TEMPLATE: &str =
    "the template language: literal text, `{kind:name}` captures, `{?optional}`, `{a|b}`; see rules/README.md";

/// One step of a path into a TOML document: a key or an array index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

/// The byte offset of the value at `path` in a TOML text (`[Key("match"), Index(2),
/// Key("template")]` is the third `[[match]]`'s template), or `None` when the text does
/// not parse or has no such value.
///
/// Rule specs hold plain values, not spans: a pack decoded from its precompiled form
/// has no text positions, and only a problem needs one. So positions are found again,
/// from the text, when a problem is reported.
pub fn locate(text: &str, path: &[Seg<'_>]) -> Option<usize> {
    use toml::de::{DeTable, DeValue};
    let root = DeTable::parse(text).ok()?;
    let mut table = root.get_ref();
    let mut value: Option<&toml::Spanned<DeValue<'_>>> = None;
    for seg in path {
        let next = match (seg, value) {
            (Seg::Key(k), None) => table.get(*k)?,
            (Seg::Key(k), Some(v)) => match v.get_ref() {
                DeValue::Table(t) => {
                    table = t;
                    t.get(*k)?
                }
                _ => return None,
            },
            (Seg::Index(i), Some(v)) => match v.get_ref() {
                DeValue::Array(a) => a.get(*i)?,
                _ => return None,
            },
            (Seg::Index(_), None) => return None,
        };
        if let DeValue::Table(t) = next.get_ref() {
            table = t;
        }
        value = Some(next);
    }
    value.map(|v| v.span().start)
}

/// Parses one rule file (TOML) into its spec.
pub fn parse_rule(src: RuleSource<'_>) -> Result<RuleSpec, PackError> {
    toml::from_str(src.text).map_err(|e| {
        let off = e.span().map(|s| s.start).unwrap_or(0);
        with_hint(error_at(&src, off, e.message().trim_end().to_string()), HINT_KEYS)
    })
}

/// Parses and compiles one rule file. Cross-rule checks live in [`Pack::new`].
pub fn compile_rule(src: RuleSource<'_>) -> Result<Rule, PackError> {
    compile_spec(src, parse_rule(src)?)
}

/// Compiles a parsed rule: checks its id, family and templates. `src` is the file the
/// spec came from (its name and text locate problems).
pub fn compile_spec(src: RuleSource<'_>, spec: RuleSpec) -> Result<Rule, PackError> {
    let at = |path: &[Seg<'_>]| locate(src.text, path).unwrap_or(0);
    let id = spec.id.as_str();
    if !is_kebab(id) {
        return Err(error_at(&src, at(&[Seg::Key("id")]), format!("rule id `{id}` is not kebab-case")));
    }
    let stem = src.name.rsplit(['/', '\\']).next().unwrap_or(src.name);
    let stem = stem.strip_suffix(".toml").unwrap_or(stem);
    if stem != id && src.name.ends_with(".toml") {
        return Err(error_at(
            &src,
            at(&[Seg::Key("id")]),
            format!("rule id `{id}` differs from its file name `{stem}.toml`"),
        ));
    }
    if !FAMILIES.contains(&spec.family.as_str()) {
        return Err(with_hint(
            error_at(&src, at(&[Seg::Key("family")]), format!("unknown family `{}`", spec.family)),
            &format!("use one of: {}", FAMILIES.join(", ")),
        ));
    }
    if spec.matches.is_empty() {
        return Err(error_at(&src, 0, "a rule needs at least one [[match]] template"));
    }
    let mut templates = Vec::new();
    for (i, m) in spec.matches.iter().enumerate() {
        let t = Template::parse(&m.template).map_err(|e| {
            // Offset of the template text inside the file: skip the opening quotes.
            let start = at(&[Seg::Key("match"), Seg::Index(i), Seg::Key("template")]).min(src.text.len());
            let raw = &src.text[start..];
            let quote = if raw.starts_with("'''") || raw.starts_with("\"\"\"") { 3 } else { 1 };
            let nl = if raw[quote.min(raw.len())..].starts_with('\n') { 1 } else { 0 };
            with_hint(error_at(&src, start + quote + nl + e.offset, format!("template: {}", e.message)), HINT_TEMPLATE)
        })?;
        templates.push(t);
    }
    Ok(Rule { source_name: src.name.to_string(), source_text: src.text.to_string(), spec, templates })
}

/// Whether `s` is a valid rule id: lowercase words and digits joined by `-`.
pub fn is_kebab(s: &str) -> bool {
    !s.is_empty()
        && s.split('-').all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()))
}

/// A compiled, cross-checked set of rules plus the op-argument role table.
#[derive(Clone, Debug)]
pub struct Pack {
    rules: Vec<Rule>,
    ops: Vec<OpSpec>,
}

/// Whether a source is the op-argument role table rather than a rule.
fn is_ops_file(name: &str) -> bool {
    name.ends_with("ops.toml")
}

/// A pack decoded ahead of time, as JSON: every file of the pack by name, in source
/// order, each TOML document as JSON (written by the `torchdx-rules` build script).
/// serde_json decodes it about three times faster than the TOML parses, and the TOML
/// is still what rule authors write and what errors point into. Each file's value is
/// kept raw until its name says what it is.
#[derive(Deserialize)]
struct Precompiled<'a> {
    #[serde(borrow)]
    files: Vec<PrecompiledFile<'a>>,
}

#[derive(Deserialize)]
struct PrecompiledFile<'a> {
    name: String,
    #[serde(borrow)]
    value: &'a serde_json::value::RawValue,
}

impl Pack {
    /// Compiles rule files; a source named `data/ops.toml` (or ending in `/ops.toml`)
    /// is the op-argument role table. Later sources override earlier ones with the
    /// same rule id. Cross-rule consistency (`related` ids) is checked by
    /// [`crate::authoring::check`], not here: a dangling reference does not stop diagnosis.
    pub fn new(sources: &[RuleSource<'_>]) -> Result<Pack, PackError> {
        Pack { rules: Vec::new(), ops: Vec::new() }.with(sources)
    }

    /// This pack plus `sources`, compiled as [`Pack::new`] does: a rule with an existing
    /// id replaces it.
    pub fn with(mut self, sources: &[RuleSource<'_>]) -> Result<Pack, PackError> {
        for src in sources {
            if is_ops_file(src.name) {
                let f: OpsFile = toml::from_str(src.text).map_err(|e| {
                    error_at(src, e.span().map(|s| s.start).unwrap_or(0), e.message().trim_end().to_string())
                })?;
                self.ops.extend(f.op);
            } else {
                self.insert(compile_rule(*src)?);
            }
        }
        Ok(self)
    }

    /// The pack from its precompiled form (JSON written by the build script: each rule
    /// file's TOML as JSON, by file name, and the op tables) and the files it was
    /// made from: the same pack [`Pack::new`] makes of `sources`, without parsing TOML.
    /// `None` when the two disagree (a file added, removed or renamed since), so the
    /// caller can fall back to [`Pack::new`].
    pub fn from_precompiled(sources: &[RuleSource<'_>], json: &str) -> Option<Pack> {
        let pre: Precompiled<'_> = serde_json::from_str(json).ok()?;
        if pre.files.len() != sources.len() {
            return None;
        }
        let mut pack = Pack { rules: Vec::new(), ops: Vec::new() };
        for (src, file) in sources.iter().zip(&pre.files) {
            if file.name != src.name {
                return None;
            }
            if is_ops_file(src.name) {
                let f: OpsFile = serde_json::from_str(file.value.get()).ok()?;
                pack.ops.extend(f.op);
            } else {
                let spec: RuleSpec = serde_json::from_str(file.value.get()).ok()?;
                pack.insert(compile_spec(*src, spec).ok()?);
            }
        }
        Some(pack)
    }

    /// Adds a rule; one with the same id is replaced where it stands.
    fn insert(&mut self, rule: Rule) {
        if let Some(existing) = self.rules.iter_mut().find(|r| r.id() == rule.id()) {
            *existing = rule;
        } else {
            self.rules.push(rule);
        }
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn rule(&self, id: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| r.id() == id)
    }

    pub fn ops(&self) -> &[OpSpec] {
        &self.ops
    }

    /// The role table entry for an ATen op name.
    pub fn op(&self, name: &str) -> Option<&OpSpec> {
        self.ops.iter().find(|o| o.names.iter().any(|n| n == name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: &str = r#"id = "demo-rule"
family = "cuda-oom"
related = ["cuda-oom", "no-such-rule"]
title = "t"
summary = "s"
mechanism = "m"
checklist = ["c"]
fix = "f"
verify = "v"
prevent = "p"
next_action = "n"

[[match]]
template = "CUDA out of memory"

[[match]]
template = '''
Tried to allocate {bogus:req}'''
"#;

    #[test]
    fn locate_finds_values_by_path() {
        let at = |path: &[Seg<'_>]| locate(RULE, path).map(|o| &RULE[o..o + 12]);
        let table: &[(&[Seg<'_>], Option<&str>)] = &[
            (&[Seg::Key("id")], Some("\"demo-rule\"\n")),
            (&[Seg::Key("family")], Some("\"cuda-oom\"\nr")),
            (&[Seg::Key("related"), Seg::Index(1)], Some("\"no-such-rul")),
            (&[Seg::Key("match"), Seg::Index(0), Seg::Key("template")], Some("\"CUDA out of")),
            (&[Seg::Key("match"), Seg::Index(1), Seg::Key("template")], Some("'''\nTried to")),
            (&[Seg::Key("match"), Seg::Index(2), Seg::Key("template")], None),
            (&[Seg::Key("related"), Seg::Key("x")], None),
            (&[Seg::Index(0)], None),
            (&[Seg::Key("nope")], None),
        ];
        for (path, want) in table {
            assert_eq!(at(path), *want, "{path:?}");
        }
        assert_eq!(locate("id = [", &[Seg::Key("id")]), None, "a text that does not parse has no positions");
    }

    #[test]
    fn template_errors_point_into_multiline_strings() {
        let src = RuleSource { name: "demo-rule.toml", text: RULE };
        let e = compile_rule(src).unwrap_err();
        assert_eq!((e.line, e.col), (18, 20), "{}", e.report());
        assert!(e.message.contains("template"), "{}", e.message);
    }

    fn precompiled_json(sources: &[RuleSource<'_>]) -> String {
        let files: Vec<serde_json::Value> = sources
            .iter()
            .map(|s| serde_json::json!({ "name": s.name, "value": toml::from_str::<serde_json::Value>(s.text).unwrap() }))
            .collect();
        serde_json::json!({ "files": files }).to_string()
    }

    #[test]
    fn precompiled_form_decodes_to_the_same_pack_or_to_none() {
        let ok = "id = \"demo-rule\"\nfamily = \"cuda-oom\"\ntitle = \"t\"\nsummary = \"s\"\nmechanism = \"m\"\nchecklist = [\"c\"]\nfix = \"f\"\nverify = \"v\"\nprevent = \"p\"\nnext_action = \"n\"\n[[match]]\ntemplate = \"CUDA out of memory\"\n";
        let ops = "[[op]]\nnames = [\"mm\"]\nuser_call = \"a @ b\"\nargs = [{ name = \"self\", role = \"a\", kind = \"input\" }]\n";
        let sources =
            [RuleSource { name: "data/ops.toml", text: ops }, RuleSource { name: "demo-rule.toml", text: ok }];
        let json = precompiled_json(&sources);
        let pre = Pack::from_precompiled(&sources, &json).expect("decodes");
        let parsed = Pack::new(&sources).unwrap();
        assert_eq!(pre.rules()[0].spec, parsed.rules()[0].spec);
        assert_eq!(pre.ops(), parsed.ops());
        // Files that are not the ones precompiled: the caller must parse them.
        assert!(Pack::from_precompiled(&sources[..1], &json).is_none(), "a file removed");
        let renamed = [sources[0], RuleSource { name: "other.toml", text: ok }];
        assert!(Pack::from_precompiled(&renamed, &json).is_none(), "a file renamed");
        assert!(Pack::from_precompiled(&sources, "{").is_none(), "not JSON");
        let bad = json.replace("\"fix\":\"f\"", "\"fixx\":\"f\"");
        assert!(Pack::from_precompiled(&sources, &bad).is_none(), "an unknown key is refused as in TOML");
    }
}
