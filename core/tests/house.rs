//! Regressions of the bugs the house issue named, each failing before its fix.

use torchdx_core::{Engine, Pack, RuleSource};

fn rule(exception: &str) -> String {
    format!(
        r#"id = "boom"
family = "other"
title = "Boom"
summary = "s"
mechanism = "m"
checklist = ["c"]
fix = "f"
verify = "v"
prevent = "p"
next_action = "n"

[[match]]
template = "boom happened {{text:rest}}"
{exception}
"#
    )
}

/// The exception filter of a template and the evidence of its finding read the class
/// through one lookup: a C++ `terminate ... 'c10::DistBackendError'` / `what():` block
/// reports `DistBackendError`, so a filter on that class keeps the match.
#[test]
fn an_exception_filter_sees_the_class_its_evidence_reports() {
    let log = "terminate called after throwing an instance of 'c10::DistBackendError'\n  what():  boom happened here\n";
    for filter in ["", r#"exception = ["DistBackendError"]"#] {
        let text = rule(filter);
        let pack = Pack::new(&[RuleSource { name: "boom.toml", text: &text }]).expect("the rule compiles");
        let report = Engine::new(pack).diagnose(log);
        let f = report.primary().unwrap_or_else(|| panic!("no finding with filter {filter:?}"));
        assert_eq!((f.id.as_str(), f.evidence.exception.as_deref()), ("boom", Some("DistBackendError")), "{filter}");
    }
}
