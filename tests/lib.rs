//! Shared helpers for the workspace tests.

use torchdx_core::Engine;

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
pub fn rule_ids(report: &torchdx_core::Report) -> Vec<String> {
    let mut ids: Vec<String> = report.findings.iter().map(|f| f.id.clone()).collect();
    ids.sort();
    ids.dedup();
    ids
}
