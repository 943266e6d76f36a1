//! The rule pack: rule files and data files compiled and cross-checked.
//!
//! A pack is made of sources (a name and a text each). A source in a folder named
//! `data` is a data file, recognised by its stem (`ops`, `families`, `notices`); every
//! other source is a rule file. Data files load first, whatever their position, so a
//! rule's family is checked against the families of the whole pack.
//!
//! Loading is the only fallible step of the engine. Every problem is a [`PackError`]
//! naming the file, line and column, with a stable [`PackError::code`], so a rule author
//! sees `rules/cuda-oom.toml:14:23: unknown capture kind ...` rather than a panic, and
//! tools can filter by code.

use std::collections::BTreeSet;
use std::fmt;

use serde::de::DeserializeOwned;

use super::precompiled::{self, Decoded};
use super::spec::{CodesFile, FamiliesFile, FamilySpec, IngestFile, NoticesFile, OpSpec, OpsFile, RuleSpec};
use super::template::{Kind, Template};
use crate::report::Evidence;

/// What kind of problem a [`PackError`] is. Private: the public, stable face is
/// [`PackError::code`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Code {
    /// The text is not valid TOML.
    Toml,
    /// A key, a type or a value the format does not take.
    Format,
    /// A rule id that is not kebab-case, or not the file's stem.
    Id,
    /// The same rule id twice in one folder.
    DuplicateId,
    /// A family the families table does not list.
    Family,
    /// A template that does not compile.
    Template,
    /// A rule without templates, or a second fallback rule.
    Matches,
    /// A capture into a reserved evidence key with a kind of the wrong type.
    ReservedKey,
    /// A case name that is not kebab-case or is used twice; an example naming no case.
    Case,
    /// A data file the pack does not know.
    DataFile,
    /// A fact group no engine provides.
    Facts,
    /// A related id that names no rule.
    Related,
    /// A placeholder or condition key nothing provides.
    Placeholder,
    /// Text left from `torchdx rules new`.
    Scaffold,
    /// Too few examples, or examples that do not do what they declare.
    Examples,
    /// A list in a rendered finding that repeats an item.
    Duplicate,
    /// A `lookup` naming a table `data/codes.toml` does not hold, or a code row naming
    /// an unknown family.
    Lookup,
    /// A condition the engine cannot honour where it is written.
    Condition,
}

impl Code {
    fn as_str(self) -> &'static str {
        match self {
            Code::Toml => "toml",
            Code::Format => "format",
            Code::Id => "id",
            Code::DuplicateId => "duplicate-id",
            Code::Family => "family",
            Code::Template => "template",
            Code::Matches => "matches",
            Code::ReservedKey => "reserved-key",
            Code::Case => "case",
            Code::DataFile => "data-file",
            Code::Facts => "facts",
            Code::Related => "related",
            Code::Placeholder => "placeholder",
            Code::Scaffold => "scaffold",
            Code::Examples => "examples",
            Code::Duplicate => "duplicate",
            Code::Lookup => "lookup",
            Code::Condition => "condition",
        }
    }
}

/// Characters of the offending line a problem shows on each side of its column: a
/// window, so a megabyte-long line never travels into a message.
const SNIPPET_HALF: usize = 60;

/// The window of the offending line a problem shows.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Snippet {
    /// Characters of the line cut before the window.
    from: usize,
    /// The window, control characters replaced.
    text: String,
    /// Whether the line goes on after it.
    cut_end: bool,
}

impl Snippet {
    fn of(line: &str, col: usize) -> Snippet {
        let at = col.saturating_sub(1);
        let from = at.saturating_sub(SNIPPET_HALF);
        let mut text = String::new();
        let mut rest = line.chars().skip(from);
        for c in rest.by_ref().take(2 * SNIPPET_HALF) {
            text.push(if c.is_control() && c != '\t' { '\u{FFFD}' } else { c });
        }
        Snippet { from, text, cut_end: rest.next().is_some() }
    }
}

/// A rule pack problem, located in its file. Boxed, as regex-automata's errors are: it
/// travels in every `Result` of pack loading, and the happy path should stay small.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackError {
    inner: Box<Problem>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Problem {
    code: Code,
    file: String,
    line: usize,
    col: usize,
    message: String,
    snippet: Option<Snippet>,
    hint: Option<String>,
}

impl fmt::Display for PackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.inner;
        write!(f, "{}:{}:{}: {}", p.file, p.line, p.col, p.message)
    }
}

impl std::error::Error for PackError {}

impl PackError {
    /// A problem at byte `offset` of `src`.
    pub(crate) fn at(code: Code, src: &RuleSource<'_>, offset: usize, message: impl Into<String>) -> PackError {
        let (line, col) = line_col(src.text, offset);
        let snippet = src.text.lines().nth(line - 1).map(|l| Snippet::of(l, col));
        let p = Problem { code, file: src.name.to_string(), line, col, message: message.into(), snippet, hint: None };
        PackError { inner: Box::new(p) }
    }

    /// The same problem with a hint on how to fix it.
    pub(crate) fn with_hint(mut self, hint: impl Into<String>) -> PackError {
        self.inner.hint = Some(hint.into());
        self
    }

    /// A stable, machine-readable name of the problem (`toml`, `template`, `family`,
    /// `placeholder`, ...), for editors and CI filters.
    pub fn code(&self) -> &'static str {
        self.inner.code.as_str()
    }

    /// The file it is in.
    pub fn file(&self) -> &str {
        &self.inner.file
    }

    /// 1-based line.
    pub fn line(&self) -> usize {
        self.inner.line
    }

    /// 1-based column, in characters of the line.
    pub fn column(&self) -> usize {
        self.inner.col
    }

    /// What is wrong.
    pub fn message(&self) -> &str {
        &self.inner.message
    }

    /// How to fix it, when there is a common fix.
    pub fn hint(&self) -> Option<&str> {
        self.inner.hint.as_deref()
    }

    /// The problem rustc-style: message, location, the offending line (a window of it
    /// around the column) with a caret under the column, and the hint.
    pub fn report(&self) -> String {
        let p = &self.inner;
        let mut f = format!("error[{}]: {}\n  --> {}:{}:{}\n", self.code(), p.message, p.file, p.line, p.col);
        if let Some(s) = &p.snippet {
            let lead = if s.from > 0 { "…" } else { "" };
            let tail = if s.cut_end { "…" } else { "" };
            let caret = p.col.saturating_sub(1) - s.from + usize::from(s.from > 0);
            f.push_str(&format!("   |\n{:>3}| {lead}{}{tail}\n   | {}^\n", p.line, s.text, " ".repeat(caret)));
        }
        if let Some(h) = &p.hint {
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

const HINT_KEYS: &str = "rules/README.md lists the keys a rule file takes; top-level keys must come before any [[match]], [[case]] or [[example]] table";
const HINT_TEMPLATE: &str =
    "the template language: literal text, `{kind:name}` captures, `{?optional}`, `{a|b}`; see rules/README.md";

/// A rule file's text and the name to report problems under.
#[derive(Clone, Copy, Debug)]
pub struct RuleSource<'a> {
    /// The file's name (a path, or `NAME.toml` / `data/NAME.toml`).
    pub name: &'a str,
    /// Its text.
    pub text: &'a str,
}

/// What a source is, by its folder and stem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SourceKind {
    Rule,
    Ops,
    Families,
    Notices,
    Ingest,
    Codes,
    UnknownData,
}

/// A source in a folder named `data` is a data file, known by its stem; anything else
/// is a rule file (`custom-ops.toml` is a rule, `x/data/ops.toml` the op table).
pub(crate) fn source_kind(name: &str) -> SourceKind {
    let mut parts = name.rsplit(['/', '\\']);
    let file = parts.next().unwrap_or(name);
    if parts.next() != Some("data") {
        return SourceKind::Rule;
    }
    match file.strip_suffix(".toml").unwrap_or(file) {
        "ops" => SourceKind::Ops,
        "families" => SourceKind::Families,
        "notices" => SourceKind::Notices,
        "ingest" => SourceKind::Ingest,
        "codes" => SourceKind::Codes,
        _ => SourceKind::UnknownData,
    }
}

/// A compiled rule.
#[derive(Clone, Debug)]
pub struct Rule {
    /// The file name it came from (for messages).
    pub source_name: String,
    /// The file's text (for locating examples and spans; empty when decoded from a
    /// precompiled pack without its sources).
    pub source_text: String,
    /// The rule as written.
    pub spec: RuleSpec,
    /// One compiled template per `[[match]]`.
    pub(crate) templates: Vec<Template>,
}

impl Rule {
    /// The rule id.
    pub fn id(&self) -> &str {
        &self.spec.id
    }

    /// The family id.
    pub fn family(&self) -> &str {
        &self.spec.family
    }

    /// The compiled templates (for the workspace's fuzz targets).
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    pub fn templates(&self) -> &[Template] {
        &self.templates
    }

    /// The leading words of each template: what the prefilter searches for, and what
    /// `explain --list` shows a user to tell whether a message is known.
    pub fn leads(&self) -> Vec<String> {
        self.templates.iter().map(|t| t.lead_text()).collect()
    }
}
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
    parse(src)
}

/// Parses a TOML source into `T`, located errors on failure.
///
/// The TOML is read as a generic document, then decoded into the rule format through
/// the same JSON decoder the precompiled pack uses ([`decode`]): one deserializer for
/// every spec type, which keeps the `.wasm` small (each deserializer monomorphizes every
/// visitor of the format), and one wording of every format error, natively and in WASM.
/// A format error is located from the path of the value that failed.
fn parse<T: DeserializeOwned>(src: RuleSource<'_>) -> Result<T, PackError> {
    let doc: serde_json::Value = toml::from_str(src.text).map_err(|e| {
        let off = e.span().map(|s| s.start).unwrap_or(0);
        PackError::at(Code::Toml, &src, off, e.message().trim_end().to_string()).with_hint(toml_hint(
            src.text,
            off,
            Code::Toml,
        ))
    })?;
    let json = serde_json::to_string(&doc).map_err(|e| PackError::at(Code::Format, &src, 0, e.to_string()))?;
    decode(&json).map_err(|(message, path)| {
        let segs: Vec<Seg<'_>> = path
            .iter()
            .map(|p| match p {
                PathSeg::Key(k) => Seg::Key(k),
                PathSeg::Index(i) => Seg::Index(*i),
            })
            .collect();
        // The failing value, or the table that holds it (an unknown or missing key).
        let mut off = (0..=segs.len()).rev().find_map(|n| locate(src.text, &segs[..n])).unwrap_or(0);
        if message.starts_with("unknown field") {
            // Point at the key, not at its value.
            let line = src.text[..off.min(src.text.len())].rfind('\n').map_or(0, |p| p + 1);
            off = line + src.text[line..].len() - src.text[line..].trim_start().len();
        }
        // A rule-level key written after a `[[match]]`/`[[example]]` header belongs, for
        // TOML, to that table: say so, it is the usual way to get here.
        let table = match segs.first() {
            Some(Seg::Key(t)) if segs.len() >= 2 && matches!(*t, "match" | "case" | "culprit_case" | "example") => Some(*t),
            _ => None,
        };
        let hint = match (message.strip_prefix("unknown field `").and_then(|m| m.split_once('`')), table) {
            (Some((key, _)), Some(table)) => format!(
                "`{key}` is not a key of `[[{table}]]`; if it is one of the rule's own keys, move it above the first `[[...]]` table: TOML gives every key after a table header to that table"
            ),
            _ => toml_hint(src.text, off, Code::Format),
        };
        PackError::at(Code::Format, &src, off, message).with_hint(hint)
    })
}

/// One step of the path to a value that failed to decode.
#[derive(Clone, Debug, PartialEq, Eq)]
enum PathSeg {
    Key(String),
    Index(usize),
}

/// Decodes a JSON document into `T`; on failure, the message and the path of the value
/// that failed.
fn decode<T: DeserializeOwned>(json: &str) -> Result<T, (String, Vec<PathSeg>)> {
    let de = &mut serde_json::Deserializer::from_str(json);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e
            .path()
            .iter()
            .filter_map(|s| match s {
                serde_path_to_error::Segment::Map { key } => Some(PathSeg::Key(key.clone())),
                serde_path_to_error::Segment::Seq { index } => Some(PathSeg::Index(*index)),
                _ => None,
            })
            .collect();
        // serde_json ends its messages with a position in the JSON, not in the file.
        let message = e.inner().to_string();
        let message = match message.rfind(" at line ") {
            Some(i) => message[..i].to_string(),
            None => message,
        };
        (message, path)
    })
}

/// Decodes a precompiled file in the `.wasm`, which was checked when it was made: a
/// failure only says the pack must be compiled from its TOML instead, so the path
/// [`decode`] tracks is dropped. The `.wasm` keeps the one deserializer [`decode`]
/// instantiates (each one more is tens of KB of the module); natively the files are
/// decoded as they are read ([`super::precompiled`]).
#[cfg(target_arch = "wasm32")]
pub(crate) fn decode_known<T: DeserializeOwned>(json: &str) -> Option<T> {
    decode(json).ok()
}

/// The hint for a TOML or format error: the common mistakes first.
fn toml_hint(text: &str, off: usize, code: Code) -> String {
    let line = text[..off.min(text.len())].rsplit('\n').next().unwrap_or("");
    let quotes = line.matches('"').count() % 2 == 1 && !line.contains("'''") && !line.contains("\"\"\"");
    if code == Code::Toml && quotes {
        return "a string opened with `\"` is not closed on its line; use '''...''' for text with quotes or line breaks".into();
    }
    HINT_KEYS.into()
}

/// Parses and compiles one rule file against a families table (empty: any family).
/// Cross-rule checks live in [`Pack::new`] and `authoring::check`.
pub fn compile_rule(src: RuleSource<'_>, families: &[FamilySpec]) -> Result<Rule, PackError> {
    compile_spec(src, parse_rule(src)?, families)
}

/// Compiles a parsed rule: checks its id, family, templates, captures, cases and
/// examples' case names. `src` is the file the spec came from (its name and text locate
/// problems; a precompiled pack without its text locates them at the file's start).
pub fn compile_spec(src: RuleSource<'_>, spec: RuleSpec, families: &[FamilySpec]) -> Result<Rule, PackError> {
    let at = |path: &[Seg<'_>]| locate(src.text, path).unwrap_or(0);
    let err = |code: Code, path: &[Seg<'_>], msg: String| PackError::at(code, &src, at(path), msg);
    let id = spec.id.as_str();
    if !is_kebab(id) {
        return Err(err(Code::Id, &[Seg::Key("id")], format!("rule id `{id}` is not kebab-case")));
    }
    let stem = src.name.rsplit(['/', '\\']).next().unwrap_or(src.name);
    let stem = stem.strip_suffix(".toml").unwrap_or(stem);
    if stem != id && src.name.ends_with(".toml") {
        return Err(err(
            Code::Id,
            &[Seg::Key("id")],
            format!("rule id `{id}` differs from its file name `{stem}.toml`"),
        ));
    }
    if !families.is_empty() && !families.iter().any(|f| f.id == spec.family) {
        let ids: Vec<&str> = families.iter().map(|f| f.id.as_str()).collect();
        return Err(err(Code::Family, &[Seg::Key("family")], format!("unknown family `{}`", spec.family))
            .with_hint(format!("use one of: {} (or add it to data/families.toml)", ids.join(", "))));
    }
    for (i, g) in spec.facts.iter().enumerate() {
        if !super::facts::GROUPS.contains(&g.as_str()) {
            return Err(err(Code::Facts, &[Seg::Key("facts"), Seg::Index(i)], format!("unknown fact group `{g}`"))
                .with_hint(format!("the engine computes: {}", super::facts::GROUPS.join(", "))));
        }
    }
    if spec.matches.is_empty() && !spec.fallback {
        return Err(PackError::at(Code::Matches, &src, 0, "a rule needs at least one [[match]] template"));
    }
    if spec.fallback && !spec.matches.is_empty() {
        return Err(err(
            Code::Matches,
            &[Seg::Key("fallback")],
            "the fallback rule has no [[match]] templates: it applies where no template matched".into(),
        ));
    }
    let mut templates = Vec::new();
    for (i, m) in spec.matches.iter().enumerate() {
        let t = Template::parse(&m.template).map(|t| t.whole_only(m.whole)).map_err(|e| {
            // Offset of the template text inside the file: skip the opening quotes.
            let start = at(&[Seg::Key("match"), Seg::Index(i), Seg::Key("template")]).min(src.text.len());
            let raw = &src.text[start..];
            let quote = if raw.starts_with("'''") || raw.starts_with("\"\"\"") { 3 } else { 1 };
            let nl = if raw[quote.min(raw.len())..].starts_with('\n') { 1 } else { 0 };
            PackError::at(Code::Template, &src, start + quote + nl + e.offset, format!("template: {}", e.message))
                .with_hint(HINT_TEMPLATE)
        })?;
        // A reserved evidence key holds one type: `devices` a list of devices, the
        // others text.
        for (name, kind, list) in t.capture_specs() {
            let path = [Seg::Key("match"), Seg::Index(i), Seg::Key("template")];
            let wrong = if name == "devices" {
                !(list && matches!(kind, Kind::Device | Kind::TensorType))
            } else {
                Evidence::RESERVED.contains(&name) && (list || matches!(kind, Kind::Int | Kind::Shape))
            };
            if wrong {
                return Err(err(
                    Code::ReservedKey,
                    &path,
                    format!("`{name}` is a reserved evidence key and cannot hold a {}{}", kind.name(), if list { " list" } else { "" }),
                )
                .with_hint("`devices` takes `{device:devices[]}` or `{tensortype:devices[]}`; exception, message, argument, op, kernel, failing_frame and failing_code take text; capture other facts under another name"));
            }
        }
        templates.push(t);
    }
    if let Some(k) = &spec.progress {
        let counts =
            |t: &Template| t.capture_specs().into_iter().any(|(n, kind, list)| n == k && kind == Kind::Int && !list);
        if !templates.iter().any(counts) {
            return Err(err(
                Code::Placeholder,
                &[Seg::Key("progress")],
                format!("`progress = \"{k}\"` names no `int` capture of this rule's templates"),
            )
            .with_hint("capture the count in a [[match]] template as `{int:NAME}` and name it here"));
        }
    }
    let mut names = BTreeSet::new();
    let cases = spec.cases.iter().enumerate().map(|(i, c)| (&c.name, Seg::Key("case"), i));
    let decisions = spec.culprit_cases.iter().enumerate().map(|(i, c)| (&c.name, Seg::Key("culprit_case"), i));
    for (name, table, i) in cases.chain(decisions) {
        let path = [table, Seg::Index(i), Seg::Key("name")];
        if !is_kebab(name) {
            return Err(err(Code::Case, &path, format!("case name `{name}` is not kebab-case")));
        }
        if !names.insert(name.as_str()) {
            return Err(err(Code::Case, &path, format!("case name `{name}` is used twice in this rule")));
        }
    }
    // A condition that cannot be honoured is refused, never ignored.
    for (i, m) in spec.matches.iter().enumerate() {
        if m.when.as_ref().is_some_and(|w| !w.on_values_only()) {
            return Err(err(
                Code::Condition,
                &[Seg::Key("match"), Seg::Index(i), Seg::Key("when")],
                "a [[match]] `when` sees only the match's own captures: `frame_contains`, `log_contains` and `exception` are not known yet there".into(),
            )
            .with_hint("move the condition to a [[case]], or use the template's `exception = [...]` filter"));
        }
    }
    let whens = spec.cases.iter().enumerate().map(|(i, c)| (&c.when, Seg::Key("case"), i));
    let decided = spec.culprit_cases.iter().enumerate().map(|(i, c)| (&c.when, Seg::Key("culprit_case"), i));
    for (w, table, i) in whens.chain(decided) {
        if let Some(n) = w.log_texts().into_iter().find(|n| n.contains('\n') || n.is_empty()) {
            return Err(err(
                Code::Condition,
                &[table, Seg::Index(i), Seg::Key("when")],
                format!("`log_contains` text {n:?} is empty or spans lines: the log is searched line by line"),
            )
            .with_hint("give one line's text (a distinctive part of it)"));
        }
    }
    for (i, ex) in spec.examples.iter().enumerate() {
        if let Some(c) = &ex.case {
            if !names.contains(c.as_str()) {
                return Err(err(
                    Code::Case,
                    &[Seg::Key("example"), Seg::Index(i), Seg::Key("case")],
                    format!("example `{}` expects case `{c}`, which this rule does not have", ex.name),
                ));
            }
        }
    }
    Ok(Rule { source_name: src.name.to_string(), source_text: src.text.to_string(), spec, templates })
}

/// Whether `s` is a valid rule id: lowercase words and digits joined by `-`.
pub fn is_kebab(s: &str) -> bool {
    !s.is_empty()
        && s.split('-').all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()))
}

/// A compiled, cross-checked set of rules with its data: the op-argument role table,
/// the families and the run-level notices.
#[derive(Clone, Debug, Default)]
pub struct Pack {
    rules: Vec<Rule>,
    ops: OpsFile,
    families: Vec<FamilySpec>,
    notices: NoticesFile,
    ingest: IngestFile,
    codes: CodesFile,
}

/// Text with every run of whitespace one space.
fn normalize_space(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl Pack {
    /// Compiles rule and data files. Later sources override earlier ones with the same
    /// rule id. Cross-rule consistency (`related` ids, examples) is checked by
    /// `authoring::check`, not here: a dangling reference does not stop diagnosis.
    pub fn new(sources: &[RuleSource<'_>]) -> Result<Pack, PackError> {
        Pack::default().with(sources)
    }

    /// This pack plus `sources`, compiled as [`Pack::new`] does: a rule with an existing
    /// id replaces it; data files add to the pack's tables.
    pub fn with(mut self, sources: &[RuleSource<'_>]) -> Result<Pack, PackError> {
        for src in sources {
            match source_kind(src.name) {
                SourceKind::Rule => {}
                SourceKind::Ops => self.add_ops(parse(*src)?),
                SourceKind::Families => self.add_families(parse(*src)?),
                SourceKind::Notices => self.add_notices(parse(*src)?),
                SourceKind::Ingest => self.add_ingest(parse(*src)?),
                SourceKind::Codes => self.add_codes(parse(*src)?),
                SourceKind::UnknownData => return Err(unknown_data(src)),
            }
        }
        for src in sources.iter().filter(|s| source_kind(s.name) == SourceKind::Codes) {
            self.check_code_families(src)?;
        }
        for src in sources.iter().filter(|s| source_kind(s.name) == SourceKind::Rule) {
            let rule = compile_rule(*src, &self.families)?;
            self.check_lookup(src, &rule)?;
            self.insert(src, rule)?;
        }
        self.settle_entries();
        Ok(self)
    }

    /// A later sentence of a template names its message alone only if no other rule's
    /// message holds its text (a hint many CUDA errors end with names none of them):
    /// turns each template's later entries on or off for the pack as it now stands.
    fn settle_entries(&mut self) {
        let common = &self.ingest.common_words;
        for t in self.rules.iter_mut().flat_map(|r| r.templates.iter_mut()) {
            t.choose_anchors(|w| common.iter().any(|c| c.eq_ignore_ascii_case(w)));
        }
        // Every template's text in one string (NUL between them, which no lead holds),
        // each lead searched once over all of it: a search per (lead, template) pair was
        // a fifth of the pack's load.
        let mut all = String::new();
        let mut owners: Vec<(usize, usize)> = Vec::new(); // (end in `all`, rule)
        for (ri, r) in self.rules.iter().enumerate() {
            for t in &r.templates {
                all.push_str(&normalize_space(t.source()));
                all.push('\0');
                owners.push((all.len(), ri));
            }
        }
        let owner = |at: usize| owners[owners.partition_point(|&(end, _)| end <= at)].1;
        for (ri, rule) in self.rules.iter_mut().enumerate() {
            for t in &mut rule.templates {
                t.set_live_entries(|lead| {
                    let lead = normalize_space(lead);
                    !memchr::memmem::find_iter(all.as_bytes(), lead.as_bytes()).any(|at| owner(at) != ri)
                });
            }
        }
    }

    /// The pack from its precompiled form (every file's TOML as JSON, written by the
    /// `torchdx-rules` build script) and the files it was made from: the same pack
    /// [`Pack::new`] makes of `sources`, without parsing TOML. `None` when the two
    /// disagree (a file added, removed or renamed since, a value that does not decode),
    /// so the caller can fall back to [`Pack::new`] and its located error.
    pub fn from_precompiled(sources: &[RuleSource<'_>], json: &str) -> Option<Pack> {
        let files = precompiled::files(json)?;
        if files.len() != sources.len() || sources.iter().zip(&files).any(|(s, f)| s.name != f.name) {
            return None;
        }
        Pack::decode(files, |name| sources.iter().find(|s| s.name == name).map(|s| s.text))
    }

    /// The pack from its precompiled form alone (the WASM engine, which downloads no
    /// TOML): rules carry no source text, so a problem found later points at line 1.
    pub fn from_precompiled_json(json: &str) -> Option<Pack> {
        Pack::decode(precompiled::files(json)?, |_| None)
    }

    /// Data files first, whatever their place: rules are compiled against the families.
    fn decode<'t>(files: Vec<precompiled::File>, text: impl Fn(&str) -> Option<&'t str>) -> Option<Pack> {
        let mut pack = Pack::default();
        let mut rules = Vec::new();
        for f in files {
            match f.value {
                Decoded::Rule(spec) => rules.push((f.name, spec)),
                Decoded::Ops(v) => pack.add_ops(v),
                Decoded::Families(v) => pack.add_families(v),
                Decoded::Notices(v) => pack.add_notices(v),
                Decoded::Ingest(v) => pack.add_ingest(v),
                Decoded::Codes(v) => pack.add_codes(v),
            }
        }
        for (name, spec) in rules {
            let src = RuleSource { name: &name, text: text(&name).unwrap_or("") };
            let rule = compile_spec(src, *spec, &pack.families).ok()?;
            pack.insert(&src, rule).ok()?;
        }
        pack.settle_entries();
        Some(pack)
    }

    fn add_ops(&mut self, f: OpsFile) {
        self.ops.op.extend(f.op);
        self.ops.loss_callees.extend(f.loss_callees);
        self.ops.factories.extend(f.factories);
        self.ops.library_packages.extend(f.library_packages);
        self.ops.inert_callees.extend(f.inert_callees);
    }

    fn add_families(&mut self, f: FamiliesFile) {
        for fam in f.family {
            match self.families.iter_mut().find(|x| x.id == fam.id) {
                Some(x) => *x = fam,
                None => self.families.push(fam),
            }
        }
    }

    fn add_ingest(&mut self, f: IngestFile) {
        let i = &mut self.ingest;
        i.continuations.extend(f.continuations);
        i.message_tails.extend(f.message_tails);
        i.tails_after_blank.extend(f.tails_after_blank);
        i.exception_classes.extend(f.exception_classes);
        i.exception_parents.extend(f.exception_parents);
        i.common_words.extend(f.common_words);
    }

    /// Every row of a codes file names a known family (checked once the families of
    /// every data file are in).
    fn check_code_families(&self, src: &RuleSource<'_>) -> Result<(), PackError> {
        let f: CodesFile = parse(*src)?;
        let known = |fam: &str| self.families.iter().any(|x| x.id == fam);
        let bad = f
            .code
            .iter()
            .enumerate()
            .map(|(i, r)| ("code", i, &r.family))
            .chain(f.line.iter().enumerate().map(|(i, r)| ("line", i, &r.family)))
            .find(|(_, _, fam)| !known(fam));
        match bad {
            None => Ok(()),
            Some((table, i, fam)) => {
                let at = locate(src.text, &[Seg::Key(table), Seg::Index(i), Seg::Key("family")]).unwrap_or(0);
                Err(PackError::at(Code::Lookup, src, at, format!("unknown family `{fam}`")))
            }
        }
    }

    /// A rule's `lookup` names tables the pack holds.
    fn check_lookup(&self, src: &RuleSource<'_>, rule: &Rule) -> Result<(), PackError> {
        let Some(l) = &rule.spec.lookup else { return Ok(()) };
        let known =
            |t: &str| t == "nccl-line" && !self.codes.line.is_empty() || self.codes.code.iter().any(|r| r.table == t);
        if let Some((i, t)) = l.tables.iter().enumerate().find(|(_, t)| !known(t)) {
            let at = locate(src.text, &[Seg::Key("lookup"), Seg::Key("tables"), Seg::Index(i)]).unwrap_or(0);
            let mut tables: Vec<&str> = self.codes.code.iter().map(|r| r.table.as_str()).collect();
            tables.dedup();
            return Err(PackError::at(
                Code::Lookup,
                src,
                at,
                format!("no table `{t}` in data/codes.toml (it has {}, nccl-line)", tables.join(", ")),
            ));
        }
        Ok(())
    }

    fn add_codes(&mut self, f: CodesFile) {
        // A later row with the same table and name (or pattern) replaces the earlier one.
        for r in f.code {
            match self.codes.code.iter_mut().find(|x| x.table == r.table && x.name == r.name) {
                Some(x) => *x = r,
                None => self.codes.code.push(r),
            }
        }
        for r in f.line {
            match self.codes.line.iter_mut().find(|x| x.pattern == r.pattern) {
                Some(x) => *x = r,
                None => self.codes.line.push(r),
            }
        }
    }

    fn add_notices(&mut self, f: NoticesFile) {
        let n = &mut self.notices;
        n.unranked_initiator = f.unranked_initiator.or(n.unranked_initiator.take());
        n.only_echoes = f.only_echoes.or(n.only_echoes.take());
        n.caught_before_echoes = f.caught_before_echoes.or(n.caught_before_echoes.take());
        n.echoes_without_suspect = f.echoes_without_suspect.or(n.echoes_without_suspect.take());
        n.lagging_rank = f.lagging_rank.or(n.lagging_rank.take());
    }

    /// Adds a rule; one with the same id is replaced where it stands. A second fallback
    /// rule under another id is refused.
    fn insert(&mut self, src: &RuleSource<'_>, rule: Rule) -> Result<(), PackError> {
        if rule.spec.fallback {
            if let Some(other) = self.rules.iter().find(|r| r.spec.fallback && r.id() != rule.id()) {
                return Err(PackError::at(
                    Code::Matches,
                    src,
                    locate(src.text, &[Seg::Key("fallback")]).unwrap_or(0),
                    format!("`{}` is already the fallback rule; a pack has one", other.id()),
                ));
            }
        }
        if let Some(existing) = self.rules.iter_mut().find(|r| r.id() == rule.id()) {
            *existing = rule;
        } else {
            self.rules.push(rule);
        }
        Ok(())
    }

    /// The rules, in pack order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The rule with this id.
    pub fn rule(&self, id: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| r.id() == id)
    }

    /// The fallback rule, applied to exceptions no template matched.
    pub fn fallback(&self) -> Option<&Rule> {
        self.rules.iter().find(|r| r.spec.fallback)
    }

    /// The op-argument role table.
    pub fn ops(&self) -> &[OpSpec] {
        &self.ops.op
    }

    /// The role table entry for an ATen op name.
    pub fn op(&self, name: &str) -> Option<&OpSpec> {
        self.ops.op.iter().find(|o| o.names.iter().any(|n| n == name))
    }

    /// Substrings of a callee that computes a loss (`data/ops.toml`).
    pub(crate) fn loss_callees(&self) -> &[String] {
        &self.ops.loss_callees
    }

    /// Callees that run no tensor op of their own (`data/ops.toml`).
    pub(crate) fn inert_callees(&self) -> &[String] {
        &self.ops.inert_callees
    }

    /// Top-level packages of installed libraries (`data/ops.toml`).
    pub(crate) fn library_packages(&self) -> &[String] {
        &self.ops.library_packages
    }

    /// Tensor factories that create on the default device (`data/ops.toml`).
    pub(crate) fn factories(&self) -> &[String] {
        &self.ops.factories
    }

    /// The failure families.
    pub fn families(&self) -> &[FamilySpec] {
        &self.families
    }

    /// How lines continuing a C++ log record begin (`data/ingest.toml`).
    pub(crate) fn continuations(&self) -> &[String] {
        &self.ingest.continuations
    }

    /// What the traceback grammar needs of the library's messages (`data/ingest.toml`).
    pub(crate) fn ingest(&self) -> &IngestFile {
        &self.ingest
    }

    /// A class, then its parents as `data/ingest.toml` lists them (bounded: a cycle in a
    /// third-party table ends the walk).
    pub(crate) fn class_and_parents<'a>(&'a self, class: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        let mut next = Some(class);
        (0..16).map_while(move |_| {
            let c = next?;
            next = self.ingest.exception_parents.get(c).map(String::as_str);
            Some(c)
        })
    }

    /// The code tables (`data/codes.toml`).
    pub(crate) fn codes(&self) -> &CodesFile {
        &self.codes
    }

    /// The run-level notices.
    pub(crate) fn notices(&self) -> &NoticesFile {
        &self.notices
    }
}

fn unknown_data(src: &RuleSource<'_>) -> PackError {
    PackError::at(Code::DataFile, src, 0, format!("unknown data file `{}`", src.name)).with_hint(
        "a `data/` folder holds ops.toml, families.toml, notices.toml, ingest.toml and codes.toml; rule files go beside it",
    )
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
        let e = compile_rule(src, &[]).unwrap_err();
        assert_eq!((e.line(), e.column(), e.code()), (18, 20, "template"), "{}", e.report());
        assert!(e.message().contains("template"), "{}", e.message());
    }

    #[test]
    fn data_files_are_known_by_their_folder_not_a_suffix() {
        let table = [
            ("data/ops.toml", SourceKind::Ops),
            ("my/rules/data/families.toml", SourceKind::Families),
            ("data\\notices.toml", SourceKind::Notices),
            ("data/other.toml", SourceKind::UnknownData),
            ("custom-ops.toml", SourceKind::Rule),
            ("dataloader-drops.toml", SourceKind::Rule),
            ("/home/u/data/rules/x.toml", SourceKind::Rule),
        ];
        for (name, want) in table {
            assert_eq!(source_kind(name), want, "{name}");
        }
    }

    #[test]
    fn a_family_must_be_in_the_packs_families() {
        let fams = "[[family]]\nid = \"cuda-oom\"\narea = \"memory\"\ntext = \"t\"\n";
        let ok = RULE.replace("Tried to allocate {bogus:req}", "Tried to allocate {size:req}");
        let sources =
            [RuleSource { name: "demo-rule.toml", text: &ok }, RuleSource { name: "data/families.toml", text: fams }];
        assert!(Pack::new(&sources).is_ok(), "families load before rules, whatever the order");
        let bad = ok.replace("family = \"cuda-oom\"", "family = \"cuda-omm\"");
        let e = Pack::new(&[
            RuleSource { name: "data/families.toml", text: fams },
            RuleSource { name: "demo-rule.toml", text: &bad },
        ])
        .unwrap_err();
        assert_eq!((e.code(), e.line()), ("family", 2), "{}", e.report());
        let e = Pack::new(&[RuleSource { name: "data/extra.toml", text: "" }]).unwrap_err();
        assert_eq!(e.code(), "data-file");
    }

    #[test]
    fn a_long_line_is_shown_as_a_window_around_the_column() {
        let line = format!("title = \"{}{{nope}}{}\"", "x".repeat(5000), "y".repeat(5000));
        let src = RuleSource { name: "r.toml", text: &line };
        let e = PackError::at(Code::Placeholder, &src, 5009, "placeholder");
        let report = e.report();
        assert!(report.len() < 600, "{} bytes", report.len());
        let caret_line = report.lines().find(|l| l.trim_end().ends_with('^')).unwrap();
        let text_line = report.lines().find(|l| l.contains("{nope}")).unwrap();
        let caret = caret_line.chars().count() - 1;
        assert_eq!(text_line.chars().nth(caret), Some('{'), "{report}");
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
