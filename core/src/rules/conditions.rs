//! Conditions: when a `[[match]]` counts and which `[[case]]` applies.
//!
//! A [`When`] holds on a context of values (evidence, plus the facts the engine
//! computed for the rule), on the frames of the failure's traceback chain and on what
//! the whole log showed ([`LogFacts`]). Every key a condition names is data: the
//! conditions are how rule files, not Rust, decide.

use std::collections::BTreeSet;

use serde_json::Value;

use super::evidence::LogFacts;
use super::spec::When;
use super::text::Context;
use crate::grammar::traceback::Frame;
use crate::report::value_text;

/// Whether conditions hold on values alone (a match-time `when`, which sees no frames
/// and no log).
pub(crate) fn holds_on_evidence(w: &When, ev: &Context) -> bool {
    values_hold(w, ev) && (w.any.is_empty() || w.any.iter().any(|a| holds_on_evidence(a, ev)))
}

/// The value conditions of `w` (all but `frame_contains`, `log_contains`, `exception`
/// and `any`).
fn values_hold(w: &When, ev: &Context) -> bool {
    let has = |k: &str| ev.get(k).is_some_and(|v| !value_text(v).is_empty());
    let text = |k: &str| ev.get(k).map(value_text).unwrap_or_default();
    w.present.iter().all(|k| has(k))
        && w.absent.iter().all(|k| !has(k))
        && w.equals.iter().all(|(k, v)| has(k) && v.values().contains(&text(k).as_str()))
        && w.contains.iter().all(|(k, v)| text(k).contains(v.as_str()))
        && w.differ.iter().all(|k| match ev.get(k) {
            Some(Value::Array(a)) => a.iter().map(value_text).collect::<BTreeSet<_>>().len() >= 2,
            _ => false,
        })
        && w.exceeds.iter().all(|(a, b)| match (number(ev, a), number(ev, b)) {
            (Some(x), Some(y)) => x > y,
            _ => false,
        })
}

/// A value as a number: a JSON number, or text that parses as one.
fn number(ev: &Context, k: &str) -> Option<f64> {
    match ev.get(k)? {
        Value::Number(n) => n.as_f64(),
        v => value_text(v).trim().parse().ok(),
    }
}

/// Whether a case's conditions hold: the value conditions, then frames and log.
pub(crate) fn holds(w: &When, ctx: &Context, frames: &[&Frame], log: &LogFacts<'_>) -> bool {
    values_hold(w, ctx)
        && (w.frame_contains.is_empty()
            || frames.iter().any(|f| {
                w.frame_contains.iter().any(|n| {
                    f.file.replace('\\', "/").contains(n.as_str())
                        || f.func.as_deref().is_some_and(|x| x.contains(n.as_str()))
                })
            }))
        && (w.log_contains.is_empty() || w.log_contains.iter().any(|n| log.contains(n)))
        && (w.exception.is_empty()
            || w.exception.iter().any(|x| ctx.get("exception").map(value_text).as_deref() == Some(x.as_str())))
        && (w.any.is_empty() || w.any.iter().any(|a| holds(a, ctx, frames, log)))
}
