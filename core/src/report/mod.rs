//! The report: the public JSON contract `torchdx/report@1`.
//!
//! Field names and meanings follow the contract (`docs/report-v1.md`) exactly; fields
//! may be added (this crate adds `ranks`, `timeline`, `input.truncated_lines`), none
//! renamed or dropped without a new schema tag. The report imports nothing of the rest
//! of the crate: every layer reads it.

use serde::{Deserialize, Serialize};

mod evidence;
mod render;
mod term;

pub use term::terminal_text;

pub use evidence::Evidence;

/// How sure a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    /// The message and the log settle it.
    Certain,
    /// The usual cause for what the log shows; a fact the log lacks could change it.
    #[default]
    Likely,
    /// One plausible reading among others.
    Possible,
}

/// The JSON Schema of a report (`rules/schema/report.schema.json`, and the TypeScript
/// types of the WASM package).
#[cfg(feature = "schema")]
pub fn report_schema() -> String {
    let schema = schemars::schema_for!(Report);
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}

/// Schema tag of this report version.
pub const SCHEMA: &str = "torchdx/report@1";

/// The schema tag of a report: always [`SCHEMA`] (a report of another version does
/// not deserialize into this type).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Schema;

impl Serialize for Schema {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(SCHEMA)
    }
}

impl<'de> Deserialize<'de> for Schema {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Schema, D::Error> {
        let tag = String::deserialize(d)?;
        if tag == SCHEMA {
            Ok(Schema)
        } else {
            Err(serde::de::Error::custom(format!("report schema `{tag}`, expected `{SCHEMA}`")))
        }
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for Schema {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Schema".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "const": SCHEMA })
    }
}

/// What torchdx made of one log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Report {
    /// `torchdx/report@1`.
    pub schema: Schema,
    /// Facts about the input as a whole.
    pub input: Input,
    /// Index into `findings` of the failure that started the collapse; `None` when the
    /// log holds no failure.
    pub initiating: Option<usize>,
    /// The findings: the initiating one first, then in order of appearance.
    pub findings: Vec<Finding>,
    /// A short ordered account of what failed first and how others followed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<TimelineEntry>,
}

/// Facts about the input as a whole.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Input {
    /// Bytes read.
    pub bytes: u64,
    /// Lines read.
    pub lines: u64,
    /// Ranks seen, ascending.
    pub ranks: Vec<u32>,
    /// Lines longer than 64 KiB whose middle was dropped (added field).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub truncated_lines: u64,
    /// Lines of kept context dropped to stay within the memory bound (added field): the
    /// middle of a very long, failure-dense log. The earliest and the latest failures
    /// are kept; a failure whose lines were dropped is missing from the report.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_lines: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A finding's part in the collapse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The failure that started the run's collapse.
    Initiating,
    /// A downstream report of the initiating failure (a timeout, a launcher summary).
    Collateral,
    /// A failure of its own that did not start the collapse.
    Independent,
}

/// 1-based input lines a finding covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Location {
    /// First line.
    pub line: u64,
    /// Last line.
    pub end_line: u64,
}

/// The tensor or setting at fault.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Culprit {
    /// Kebab-case kind (the contract's vocabulary, or a rule's own).
    pub kind: String,
    /// The expression at fault in the user's code, when known.
    pub expr: Option<String>,
    /// One sentence on what is wrong, bound to this log.
    pub summary: String,
}

/// One diagnosed failure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Finding {
    /// The rule id (stable, kebab-case).
    pub id: String,
    /// The family id from the taxonomy.
    pub family: String,
    /// The headline.
    pub title: String,
    /// Its part in the collapse.
    pub role: Role,
    /// For a collateral finding: the index of the finding that caused it.
    pub collateral_of: Option<usize>,
    /// The global rank it came from; `None` when the log does not tell.
    pub rank: Option<u32>,
    /// Every rank that reported this same failure (added field).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<u32>,
    /// How sure it is.
    pub confidence: Confidence,
    /// The input lines it covers.
    pub location: Location,
    /// Only facts the log shows.
    pub evidence: Evidence,
    /// The tensor or setting at fault; `None` when the log cannot tell.
    pub culprit: Option<Culprit>,
    /// Why it happens.
    pub mechanism: String,
    /// How to confirm, each step checkable.
    pub checklist: Vec<String>,
    /// The fix (Markdown; may hold a code block).
    pub fix: String,
    /// How to show the fix worked.
    pub verify: String,
    /// The structural change that stops it coming back.
    pub prevent: String,
    /// Facts absent from the log that would settle it.
    pub missing: Vec<String>,
    /// The single most useful next step.
    pub next_action: String,
    /// Ids of related rules.
    pub related: Vec<String>,
    /// Which named cases of its rule made this finding. Not part of the JSON contract:
    /// rule authors' tests and snapshots read it.
    #[serde(skip)]
    #[cfg_attr(feature = "schema", schemars(skip))]
    pub trace: Trace,
}

impl Finding {
    /// Every rank that reported it: `ranks`, or the one `rank` when it was not merged.
    pub(crate) fn reporting_ranks(&self) -> Vec<u32> {
        if self.ranks.is_empty() {
            self.rank.into_iter().collect()
        } else {
            self.ranks.clone()
        }
    }
}

/// The named `[[case]]` and `[[culprit_case]]` of a rule that made a finding.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// The text case.
    pub case: Option<String>,
    /// The culprit decision.
    pub culprit_case: Option<String>,
}

/// One line of the timeline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TimelineEntry {
    /// `HH:MM:SS` when the log carries a timestamp.
    pub time: Option<String>,
    /// Ranks involved (empty for the launcher).
    pub ranks: Vec<u32>,
    /// Index of the finding.
    pub finding: usize,
    /// `who: what (rule id)`.
    pub text: String,
}

impl Report {
    /// The report as pretty JSON: exactly what `torchdx diagnose --format json` prints
    /// (without the final newline) and what the WASM `diagnoseJson` returns.
    pub fn to_json(&self) -> String {
        // Every field is a string, a number, a list or a map with string keys: serde_json
        // cannot fail on it, so a failure is a bug and says so as valid JSON.
        serde_json::to_string_pretty(self)
            .unwrap_or_else(|e| serde_json::json!({ "error": format!("report serialization: {e}") }).to_string())
    }

    /// The initiating finding, if any.
    pub fn primary(&self) -> Option<&Finding> {
        self.initiating.and_then(|i| self.findings.get(i))
    }

    /// The report for a person at a terminal: headline, culprit, evidence, checklist,
    /// fix, verify; collateral findings in brief; the timeline. `color` adds ANSI styles;
    /// prose is wrapped to 100 columns (see [`Report::to_text_width`]).
    pub fn to_text(&self, color: bool) -> String {
        render::text(self, color, Self::TEXT_WIDTH)
    }

    /// [`Report::to_text`] wrapped to `width` columns (a terminal's width; code lines
    /// are never broken, and no column is narrower than 24 characters).
    pub fn to_text_width(&self, color: bool, width: usize) -> String {
        render::text(self, color, width)
    }

    /// The width text is wrapped to when no terminal says otherwise.
    pub const TEXT_WIDTH: usize = 100;

    /// The report as Markdown, for an issue or a chat message.
    pub fn to_markdown(&self) -> String {
        render::markdown(self)
    }
}

/// How an evidence value reads in prose: strings as is, lists of strings joined with
/// `, `, lists of numbers as a shape `[64, 128]`.
pub fn value_text(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(a) if a.iter().all(Value::is_number) => {
            format!("[{}]", a.iter().map(value_text).collect::<Vec<_>>().join(", "))
        }
        Value::Array(a) => a.iter().map(value_text).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

/// `[0,1,2,3,5,7]` → `0-3,5,7`.
pub fn compress_ranks(r: &[u32]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < r.len() {
        let mut j = i;
        while j + 1 < r.len() && r[j + 1] == r[j] + 1 {
            j += 1;
        }
        parts.push(if j > i + 1 {
            format!("{}-{}", r[i], r[j])
        } else if j == i + 1 {
            format!("{},{}", r[i], r[j])
        } else {
            r[i].to_string()
        });
        i = j + 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An evidence key longer than the key column (a third-party rule's) never runs into
    /// its value, with colour on or off.
    #[cfg(feature = "builtin")]
    #[test]
    fn a_long_evidence_key_keeps_its_gap() {
        let log = "Traceback (most recent call last):\n  File \"t.py\", line 3, in <module>\n    y = x @ w\nRuntimeError: mat1 and mat2 shapes cannot be multiplied (4x3 and 5x6)\n";
        let mut r = crate::Engine::builtin().diagnose(log);
        let key = "a_third_party_evidence_key_of_40_letters";
        r.findings[0].evidence.insert(key, serde_json::Value::from("its value"));
        for color in [false, true] {
            let t = r.to_text_width(color, 100);
            let line = t.lines().find(|l| l.contains(key)).unwrap_or_else(|| panic!("{t}"));
            let plain: String = term::shown_chars(line).collect();
            assert!(plain.contains(&format!("{key}  its value")), "{plain:?}");
        }
    }

    #[test]
    fn rank_ranges() {
        assert_eq!(compress_ranks(&[0, 1, 2, 3, 5, 7, 8]), "0-3,5,7,8");
        assert_eq!(compress_ranks(&[4]), "4");
    }
}
