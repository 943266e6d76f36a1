//! The report: the public JSON contract `torchdx/report@1`.
//!
//! Field names and meanings follow `shared/contracts/report-v1.md` exactly; fields may
//! be added (this crate adds `ranks`, `timeline`, `torch_versions` evidence), none renamed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::pack::Confidence;

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

/// Evidence: only facts the log shows. Reserved keys are listed in the contract.
pub type Evidence = BTreeMap<String, serde_json::Value>;

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
}
