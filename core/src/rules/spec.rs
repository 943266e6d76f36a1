//! The rule file format: what a rule file and a data file deserialize into.
//!
//! These are the types rule authors write in TOML (`rules/README.md` documents every
//! key; `torchdx rules schema` writes their JSON Schema for editors). Unknown keys are
//! errors, so a typo never silently drops text. Compiling and checking them is
//! [`super::pack`]'s job.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::report::Confidence;

/// What an example expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Expect {
    /// The rule makes the primary finding of this log.
    Match,
    /// The rule makes no finding of this log (a near miss of a neighbouring rule).
    NoMatch,
}

/// A culprit declared by a rule or case (text with placeholders).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CulpritSpec {
    /// Culprit kind (kebab-case; the contract's vocabulary or the rule's own).
    pub kind: String,
    /// The expression at fault, with placeholders; left out when a placeholder has no value.
    #[serde(default)]
    pub expr: Option<String>,
    /// One sentence on what is wrong, with placeholders.
    pub summary: String,
}

/// One `[[match]]` entry: a message template.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct MatchSpec {
    /// The message as PyTorch prints it, variable parts replaced by typed captures.
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
    /// Evidence this wording implies, as constants (`set = { nccl_code =
    /// "ncclSystemError" }`): what a fixed text says without a capture to hold it.
    #[serde(default)]
    pub set: BTreeMap<String, String>,
    /// Only a match in full counts, never one cut short by the end of a paste: for a
    /// template whose head is structure every traceback prints (`Traceback (most recent
    /// call last):` then a frame), which a cut paste would otherwise match.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub whole: bool,
}

/// A string or a list of strings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum OneOrMany {
    /// One value.
    One(String),
    /// Any of several values.
    Many(Vec<String>),
}

impl OneOrMany {
    /// The values, one or many.
    pub fn values(&self) -> Vec<&str> {
        match self {
            OneOrMany::One(s) => vec![s.as_str()],
            OneOrMany::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

/// Conditions; all that are given must hold.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct When {
    /// Each key has a value.
    #[serde(default)]
    pub present: Vec<String>,
    /// No key has a value.
    #[serde(default)]
    pub absent: Vec<String>,
    /// The value equals (a list: equals one of them).
    #[serde(default)]
    pub equals: BTreeMap<String, OneOrMany>,
    /// The value contains the text.
    #[serde(default)]
    pub contains: BTreeMap<String, String>,
    /// The list holds at least two distinct values.
    #[serde(default)]
    pub differ: Vec<String>,
    /// The number under the key is greater than the number under the other key
    /// (`exceeds = { workers_joined = "world_size" }`); false when either is not a number.
    #[serde(default)]
    pub exceeds: BTreeMap<String, String>,
    /// Some traceback frame's path or function contains one of these.
    #[serde(default)]
    pub frame_contains: Vec<String>,
    /// The log contains one of these texts anywhere.
    #[serde(default)]
    pub log_contains: Vec<String>,
    /// The exception class is one of these.
    #[serde(default)]
    pub exception: Vec<String>,
    /// At least one of these conditions holds (besides all the others above).
    #[serde(default)]
    pub any: Vec<When>,
}

impl When {
    /// Whether these conditions (nested ones included) name only values: what a
    /// `[[match]]`'s `when` can test, before frames, log and class are known.
    pub fn on_values_only(&self) -> bool {
        self.frame_contains.is_empty()
            && self.log_contains.is_empty()
            && self.exception.is_empty()
            && self.any.iter().all(When::on_values_only)
    }

    /// Every `log_contains` text of these conditions, nested ones included.
    pub fn log_texts(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self.log_contains.iter().map(String::as_str).collect();
        for a in &self.any {
            out.extend(a.log_texts());
        }
        out
    }
}

/// A `[[case]]`: text bound to what this log shows. The first case whose `when` holds
/// overrides the rule's fields that it sets.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CaseSpec {
    /// Kebab-case name, unique in the rule: examples say which case they expect.
    pub name: String,
    /// When it applies.
    #[serde(default)]
    pub when: When,
    /// Overrides the rule's title.
    pub title: Option<String>,
    /// Overrides the rule's mechanism.
    pub mechanism: Option<String>,
    /// Overrides the rule's checklist.
    pub checklist: Option<Vec<String>>,
    /// Overrides the rule's fix.
    pub fix: Option<String>,
    /// Overrides the rule's verification.
    pub verify: Option<String>,
    /// Overrides the rule's prevention.
    pub prevent: Option<String>,
    /// Overrides the rule's missing facts.
    pub missing: Option<Vec<String>>,
    /// Overrides the rule's next action.
    pub next_action: Option<String>,
    /// Overrides the rule's confidence.
    pub confidence: Option<Confidence>,
    /// Sets the culprit.
    pub culprit: Option<CulpritSpec>,
    /// Overrides the rule's `collateral` for this evidence (an OOM with a garbage size
    /// is the echo of a hang, not a failure of its own).
    pub collateral: Option<bool>,
    /// Overrides the rule's `teardown` for this evidence (a worker's SIGABRT is the NCCL
    /// watchdog taking the process down when the log shows the watchdog's timeout: no
    /// cascade to follow).
    pub teardown: Option<bool>,
}

/// A `[[culprit_case]]`: one named, ordered culprit decision of a rule that declares
/// `facts`. The first whose `when` holds (on the evidence and the facts) names the
/// culprit; its `missing` and `next_action` replace the rule's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CulpritCase {
    /// Kebab-case name, unique in the rule.
    pub name: String,
    /// When it decides.
    #[serde(default)]
    pub when: When,
    /// Culprit kind; may be a placeholder (`{role_kind}`) that renders to one.
    pub kind: String,
    /// The expression at fault; left out when a placeholder has no value.
    #[serde(default)]
    pub expr: Option<String>,
    /// One sentence on what is wrong.
    pub summary: String,
    /// How sure the decision is.
    pub confidence: Confidence,
    /// What the log does not show that would settle it (replaces the rule's list).
    #[serde(default)]
    pub missing: Option<Vec<String>>,
    /// The next step (replaces the rule's when every placeholder has a value).
    #[serde(default)]
    pub next_action: Option<String>,
    /// Values this decision gives the rule's text (`culprit_role = "{role}"`), each
    /// set only when its placeholders have values.
    #[serde(default)]
    pub set: BTreeMap<String, String>,
}

/// An inline example: a log and what the rule must make of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Example {
    /// Kebab-case name, unique in the rule.
    pub name: String,
    /// Whether the rule must diagnose it.
    pub expect: Expect,
    /// Where the wording comes from (a torch version, a launcher, a thread).
    #[serde(default)]
    pub source: Option<String>,
    /// The log.
    pub log: String,
    /// Facts the report's primary finding must carry.
    #[serde(default)]
    pub evidence: BTreeMap<String, serde_json::Value>,
    /// The culprit kind the finding must name.
    #[serde(default)]
    pub culprit_kind: Option<String>,
    /// The `[[case]]` (or `[[culprit_case]]`) the finding must come from.
    #[serde(default)]
    pub case: Option<String>,
    /// A known miss: the example states what should happen, the engine does not do it
    /// yet, and `rules check` reports it as a known miss instead of a failure.
    #[serde(default)]
    pub todo: bool,
}

/// A rule file as written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// Kebab-case id, equal to the file stem.
    pub id: String,
    /// A family id from `data/families.toml`.
    pub family: String,
    /// Headline of a finding.
    pub title: String,
    /// The mechanism in one line (the docs hub).
    pub summary: String,
    /// This message is normally the echo of a failure elsewhere.
    #[serde(default)]
    pub collateral: bool,
    /// This message is printed while the job is torn down after a failure (the agent's
    /// SIGTERMs to healthy workers, a process group's abort notice, a store's broken
    /// pipe after its server died): it never initiates and is no cascade to follow.
    #[serde(default)]
    pub teardown: bool,
    /// An `int` capture of this rule's templates that counts how far the rank printing
    /// the message got (`last enqueued NCCL work: 41`). When every report in a log is an
    /// echo, the one rank whose count is below every other rank's is the suspect: it
    /// never issued the collective the others wait in.
    #[serde(default)]
    pub progress: Option<String>,
    /// This message is the launcher's summary of failed workers (torchrun's
    /// `ChildFailedError`): it names ranks, and a worker's own report is its cause.
    #[serde(default)]
    pub launcher_summary: bool,
    /// The rule for exceptions no other rule recognises: it has no templates, and the
    /// engine applies it to every traceback chain no template matched.
    #[serde(default)]
    pub fallback: bool,
    /// When templates of two rules match overlapping text, the higher priority wins.
    #[serde(default)]
    pub priority: i32,
    /// Default confidence of a finding.
    #[serde(default)]
    pub confidence: Confidence,
    /// Groups of facts the engine computes for this rule's conditions and text
    /// (`torchdx explain --facts` lists them).
    #[serde(default)]
    pub facts: Vec<String>,
    /// Why it happens.
    pub mechanism: String,
    /// How to confirm, each step checkable.
    pub checklist: Vec<String>,
    /// The fix (Markdown).
    pub fix: String,
    /// How to show the fix worked.
    pub verify: String,
    /// The structural change that stops it coming back.
    pub prevent: String,
    /// Facts absent from the log that would settle it.
    #[serde(default)]
    pub missing: Vec<String>,
    /// The single most useful next step.
    pub next_action: String,
    /// Ids of related rules.
    #[serde(default)]
    pub related: Vec<String>,
    /// A culprit the rule always names.
    #[serde(default)]
    pub culprit: Option<CulpritSpec>,
    /// Read a captured error code through the code tables of `data/codes.toml`.
    #[serde(default)]
    pub lookup: Option<LookupSpec>,
    /// Message templates.
    #[serde(default, rename = "match")]
    pub matches: Vec<MatchSpec>,
    /// Culprit decisions (rules with `facts`).
    #[serde(default, rename = "culprit_case")]
    pub culprit_cases: Vec<CulpritCase>,
    /// Text bound to evidence.
    #[serde(default, rename = "case")]
    pub cases: Vec<CaseSpec>,
    /// Examples, run as tests.
    #[serde(default, rename = "example")]
    pub examples: Vec<Example>,
}

/// `lookup = { tables = [...], keys = [...] }`: the first of `keys` (evidence keys) whose
/// value names a row of one of `tables` (by the code's name, its number, the message
/// its library prints, or, for `[[line]]` tables, a pattern the value contains) adds the
/// row to the evidence: `code`, `code_table`, `code_number`, `code_meaning`,
/// `code_causes`, `code_check`, `code_family`; rule text uses them as placeholders.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct LookupSpec {
    /// Table names (`cuda`, `cuda-legacy`, `cublas`, `cudnn`, `nccl`, `nccl-line`, `signal`, ...).
    pub tables: Vec<String>,
    /// Evidence keys to read, in order.
    pub keys: Vec<String>,
    /// The row's family becomes the finding's: one generic rule then gives every code
    /// its own family.
    #[serde(default)]
    pub family: bool,
}

/// `data/codes.toml`: error codes of CUDA, its libraries and NCCL, signals, and the NCCL
/// log lines that explain a failure. Generated from the libraries' enums
/// (`tools/codes/build_codes.py`); a test checks that no enum value is missing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CodesFile {
    /// One row per code of a table.
    #[serde(default)]
    pub code: Vec<CodeRow>,
    /// One row per explanatory log line (the `nccl-line` table).
    #[serde(default)]
    pub line: Vec<LineRow>,
}

/// One error code.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CodeRow {
    /// The enum it belongs to (`cuda`, `cublas`, ...; `cuda-legacy` for old numberings).
    pub table: String,
    /// The enum value's name (`cudaErrorIllegalAddress`).
    pub name: String,
    /// Its number.
    #[serde(default)]
    pub number: Option<i64>,
    /// The text the library's string function prints for it.
    #[serde(default)]
    pub message: Option<String>,
    /// Texts older versions print.
    #[serde(default)]
    pub older_messages: Vec<String>,
    /// The failure family it usually means.
    pub family: String,
    /// What it means.
    pub meaning: String,
    /// Its usual causes.
    pub causes: Vec<String>,
    /// The first thing to check.
    pub first_check: String,
}

/// One NCCL `WARN`/`INFO` line that explains a failure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct LineRow {
    /// A literal of the line's text.
    pub pattern: String,
    /// A real line.
    pub example: String,
    /// The NCCL versions whose sources print it.
    pub versions: String,
    /// The failure family it usually means.
    pub family: String,
    /// What it means.
    pub meaning: String,
    /// Its usual causes.
    pub causes: Vec<String>,
    /// The first thing to check.
    pub first_check: String,
}

/// One entry of the op-argument role table (`data/ops.toml`).
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

/// `data/ops.toml`: the op-argument role table and the call shapes device-placement
/// facts read on a failing line.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct OpsFile {
    /// Substrings of a callee that computes a loss, for messages that name no op.
    #[serde(default)]
    pub loss_callees: Vec<String>,
    /// Tensor factories (`torch.zeros`) that create on the default device unless given
    /// `device=`.
    #[serde(default)]
    pub factories: Vec<String>,
    /// Callees (by last name) that run no tensor op of their own (`print`, `view`, `to`,
    /// `gelu`): never the call a device message's op belongs to.
    #[serde(default)]
    pub inert_callees: Vec<String>,
    /// Top-level packages of installed libraries, for tracebacks pasted with
    /// package-relative paths (`diffusers/models/embeddings.py`, no `site-packages`).
    #[serde(default)]
    pub library_packages: Vec<String>,
    /// The role table.
    #[serde(default)]
    pub op: Vec<OpSpec>,
}

/// One failure family (`data/families.toml`): the taxonomy rules are labelled with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct FamilySpec {
    /// Kebab-case family id.
    pub id: String,
    /// The area the docs hub groups it under (`devices`, `memory`, `distributed` ...).
    pub area: String,
    /// Its typical message text.
    pub text: String,
}

/// `data/families.toml`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct FamiliesFile {
    /// The families.
    #[serde(default)]
    pub family: Vec<FamilySpec>,
}

/// A note the engine adds to the initiating finding in a situation only the whole run
/// shows (`data/notices.toml`). `{next_action}` in `next_action` is the finding's own.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct NoticeSpec {
    /// Added to the finding's missing facts.
    #[serde(default)]
    pub missing: Option<String>,
    /// Replaces the finding's next action.
    #[serde(default)]
    pub next_action: Option<String>,
}

/// `data/notices.toml`: the run-level notices, by situation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct NoticesFile {
    /// The initiating traceback of a multi-process run carries no rank.
    #[serde(default)]
    pub unranked_initiator: Option<NoticeSpec>,
    /// The log holds only echoes (timeouts, closed connections, launcher summaries).
    /// `{rank}` is the rank they point at.
    #[serde(default)]
    pub only_echoes: Option<NoticeSpec>,
    /// A rank caught and logged an exception before the echoes began. `{line}` is
    /// where it was logged.
    #[serde(default)]
    pub caught_before_echoes: Option<NoticeSpec>,
    /// Only echoes are present and they point at no rank (every rank that reported was
    /// waiting): the log cannot tell which rank started it.
    #[serde(default)]
    pub echoes_without_suspect: Option<NoticeSpec>,
    /// Only echoes are present and one rank's progress count (a rule's `progress`) is
    /// below every other rank's: `{rank}`, its count `{value}`, the others' lowest
    /// `{others}`, its report's line `{line}`.
    #[serde(default)]
    pub lagging_rank: Option<NoticeSpec>,
}

/// The canonical order of a rule file's top-level keys (`rules fmt`), as the fields of
/// [`RuleSpec`] are declared; a test checks the two agree.
pub const RULE_KEYS: &[&str] = &[
    "id",
    "family",
    "title",
    "summary",
    "collateral",
    "teardown",
    "progress",
    "launcher_summary",
    "fallback",
    "priority",
    "confidence",
    "facts",
    "mechanism",
    "checklist",
    "fix",
    "verify",
    "prevent",
    "missing",
    "next_action",
    "related",
    "culprit",
    "lookup",
    "match",
    "culprit_case",
    "case",
    "example",
];
/// The canonical order of a `[[match]]`'s keys.
pub const MATCH_KEYS: &[&str] = &["template", "torch", "exception", "when", "role_op", "set", "whole"];
/// The canonical order of a `[[culprit_case]]`'s keys.
pub const CULPRIT_CASE_KEYS: &[&str] =
    &["name", "when", "kind", "expr", "summary", "confidence", "missing", "next_action", "set"];
/// The canonical order of a `[[case]]`'s keys.
pub const CASE_KEYS: &[&str] = &[
    "name",
    "when",
    "title",
    "mechanism",
    "checklist",
    "fix",
    "verify",
    "prevent",
    "missing",
    "next_action",
    "confidence",
    "culprit",
    "collateral",
    "teardown",
];
/// The canonical order of an `[[example]]`'s keys.
pub const EXAMPLE_KEYS: &[&str] = &["name", "expect", "case", "todo", "source", "log", "evidence", "culprit_kind"];

/// `data/ingest.toml`: what reading lines needs to know of library output.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct IngestFile {
    /// How a line that continues a ranked C++ log record begins (the record's lines
    /// after the first carry no `[rankN]:` prefix, and stay with its rank).
    #[serde(default)]
    pub continuations: Vec<String>,
    /// How a line that continues a Python exception message begins although it is not
    /// indented (PyTorch's multi-line messages: DDP's hints, the CUDA error tail): a
    /// message otherwise ends at the first line that does not belong to it.
    #[serde(default)]
    pub message_tails: Vec<String>,
    /// Tails that may follow a blank line inside one message (dynamo's `from user
    /// code:` block).
    #[serde(default)]
    pub tails_after_blank: Vec<String>,
    /// Exception classes whose names do not end in `Error`, `Exception`, `Exit` or
    /// `Interrupt` (`Unsupported`, `StopIteration`): a line `Class: message` with one of
    /// them is a raised exception too.
    #[serde(default)]
    pub exception_classes: Vec<String>,
    /// Each exception class's parent (`OutOfMemoryError = "RuntimeError"`): a rule
    /// filtered on a class also takes its subclasses.
    #[serde(default)]
    pub exception_parents: BTreeMap<String, String>,
    /// Words a healthy training log prints on a great many of its lines (`rank` in
    /// every `[rankN]:` prefix, `NCCL` in every `NCCL INFO` line). The prefilter searches
    /// each template for one of its leading words; it takes another than these where the
    /// template has one, and does not also search these in their other case: the scan
    /// then stops only where an error can be. Compared without case.
    #[serde(default)]
    pub common_words: Vec<String>,
}

/// The JSON Schema of `data/codes.toml`.
#[cfg(feature = "schema")]
pub fn codes_schema() -> String {
    let schema = schemars::schema_for!(CodesFile);
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
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

/// The JSON Schema of the families table (`rules/data/families.toml`).
#[cfg(feature = "schema")]
pub fn families_schema() -> String {
    let schema = schemars::schema_for!(FamiliesFile);
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}

/// The JSON Schema of the ingest table (`rules/data/ingest.toml`).
#[cfg(feature = "schema")]
pub fn ingest_schema() -> String {
    let schema = schemars::schema_for!(IngestFile);
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}

/// The JSON Schema of the run-level notices (`rules/data/notices.toml`).
#[cfg(feature = "schema")]
pub fn notices_schema() -> String {
    let schema = schemars::schema_for!(NoticesFile);
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}

#[cfg(all(test, feature = "schema"))]
mod tests {
    use super::*;

    /// The key orders `rules fmt` uses name exactly the fields of the types.
    #[test]
    fn key_orders_list_every_field() {
        let schema: serde_json::Value = serde_json::from_str(&rule_schema()).unwrap();
        let keys = |v: &serde_json::Value| {
            let mut k: Vec<String> = v["properties"].as_object().unwrap().keys().cloned().collect();
            k.sort();
            k
        };
        let sorted = |k: &[&str]| {
            let mut k: Vec<String> = k.iter().map(|s| s.to_string()).collect();
            k.sort();
            k
        };
        assert_eq!(keys(&schema), sorted(RULE_KEYS));
        let defs = &schema["$defs"];
        for (def, order) in [
            ("MatchSpec", MATCH_KEYS),
            ("CulpritCase", CULPRIT_CASE_KEYS),
            ("CaseSpec", CASE_KEYS),
            ("Example", EXAMPLE_KEYS),
        ] {
            assert_eq!(keys(&defs[def]), sorted(order), "{def}");
        }
    }
}
