//! Shared helpers for the workspace tests.

use std::fmt::Write;

use torchdx_core::{Engine, Report};

/// Every (rule id, example name, log, expects a match) of the built-in pack.
pub fn examples(engine: &Engine) -> Vec<(String, String, String, bool)> {
    let mut out = Vec::new();
    for r in engine.pack().rules() {
        for e in &r.spec.examples {
            out.push((
                r.id().to_string(),
                e.name.clone(),
                e.log.clone(),
                e.expect == torchdx_core::spec::Expect::Match,
            ));
        }
    }
    out
}

/// The sorted rule ids a report's findings carry.
pub fn rule_ids(report: &Report) -> Vec<String> {
    let mut ids: Vec<String> = report.findings.iter().map(|f| f.id.clone()).collect();
    ids.sort();
    ids.dedup();
    ids
}

/// What a report computed, without the rule prose: per finding its id, role, rank,
/// confidence, lines, the cases that made it, the culprit and every evidence value;
/// then the timeline. Snapshots of this change only when a diagnosis changes, so a
/// reviewer reads facts, not copied rule text (which the generated docs check once).
pub fn facts(report: &Report) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "input: {} lines, ranks {:?}", report.input.lines, report.input.ranks);
    if report.findings.is_empty() {
        let _ = writeln!(o, "no finding");
    }
    for (i, f) in report.findings.iter().enumerate() {
        let rank = f.rank.map(|r| r.to_string()).unwrap_or_else(|| "-".into());
        let _ = write!(
            o,
            "[{i}] {} ({}) {:?} rank {rank} {:?} lines {}-{}",
            f.id, f.family, f.role, f.confidence, f.location.line, f.location.end_line
        );
        if let Some(c) = f.collateral_of {
            let _ = write!(o, " of [{c}]");
        }
        if !f.ranks.is_empty() {
            let _ = write!(o, " ranks {:?}", f.ranks);
        }
        let _ = writeln!(o);
        for (what, name) in [("case", &f.trace.case), ("culprit case", &f.trace.culprit_case)] {
            if let Some(n) = name {
                let _ = writeln!(o, "    {what}: {n}");
            }
        }
        if let Some(c) = &f.culprit {
            let _ = writeln!(o, "    culprit: {} {} | {}", c.kind, c.expr.as_deref().unwrap_or("-"), c.summary);
        }
        for (k, v) in f.evidence.iter() {
            let _ = writeln!(o, "    {k} = {v}");
        }
    }
    for t in &report.timeline {
        let _ = writeln!(o, "timeline: {} {} -> [{}]", t.time.as_deref().unwrap_or("-"), t.text, t.finding);
    }
    o
}
