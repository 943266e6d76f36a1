//! The report: the public JSON contract `torchdx/report@1`.
//!
//! Field names and meanings follow `shared/contracts/report-v1.md` exactly; fields may
//! be added (this crate adds `ranks`, `timeline`, `torch_versions` evidence), none renamed.

use serde::{Deserialize, Serialize};

mod evidence;
mod render;

pub use evidence::Evidence;

/// How sure a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    Certain,
    #[default]
    Likely,
    Possible,
}

/// Schema tag of this report version.
pub const SCHEMA: &str = "torchdx/report@1";

/// What torchdx made of one log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub input: Input,
    /// Index into `findings` of the failure that started the collapse.
    pub initiating: Option<usize>,
    pub findings: Vec<Finding>,
    /// A short ordered account of what failed first and how others followed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<TimelineEntry>,
}

/// Facts about the input as a whole.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Input {
    pub bytes: u64,
    pub lines: u64,
    /// Ranks seen, ascending.
    pub ranks: Vec<u32>,
    /// Lines longer than 64 KiB whose middle was dropped (added field).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub truncated_lines: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A finding's part in the collapse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Initiating,
    Collateral,
    Independent,
}

/// 1-based input lines a finding covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Location {
    pub line: u32,
    pub end_line: u32,
}

/// The tensor or setting at fault.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Culprit {
    pub kind: String,
    pub expr: Option<String>,
    pub summary: String,
}

/// One diagnosed failure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub id: String,
    pub family: String,
    pub title: String,
    pub role: Role,
    pub collateral_of: Option<usize>,
    pub rank: Option<u32>,
    /// Every rank that reported this same failure (added field).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<u32>,
    pub confidence: Confidence,
    pub location: Location,
    pub evidence: Evidence,
    pub culprit: Option<Culprit>,
    pub mechanism: String,
    pub checklist: Vec<String>,
    pub fix: String,
    pub verify: String,
    pub prevent: String,
    pub missing: Vec<String>,
    pub next_action: String,
    pub related: Vec<String>,
    /// Which named cases of its rule made this finding. Not part of the JSON contract:
    /// rule authors' tests and snapshots read it.
    #[serde(skip)]
    pub trace: Trace,
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
pub struct TimelineEntry {
    /// `HH:MM:SS` when the log carries a timestamp.
    pub time: Option<String>,
    /// Ranks involved (empty for the launcher).
    pub ranks: Vec<u32>,
    /// Index of the finding.
    pub finding: usize,
    pub text: String,
}

impl Report {
    /// The report as pretty JSON: exactly what `torchdx diagnose --format json` prints
    /// (without the final newline) and what the WASM `diagnoseJson` returns.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// The initiating finding, if any.
    pub fn primary(&self) -> Option<&Finding> {
        self.initiating.and_then(|i| self.findings.get(i))
    }

    /// The report for a person at a terminal: headline, culprit, evidence, checklist,
    /// fix, verify; collateral findings in brief; the timeline. `color` adds ANSI styles.
    pub fn to_text(&self, color: bool) -> String {
        render::text(self, color)
    }

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

    #[test]
    fn rank_ranges() {
        assert_eq!(compress_ranks(&[0, 1, 2, 3, 5, 7, 8]), "0-3,5,7,8");
        assert_eq!(compress_ranks(&[4]), "4");
    }
}
