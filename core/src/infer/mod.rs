//! Inference: events become findings.
//!
//! Everything here is a pure function of what the grammars extracted: evidence
//! (captures, exception, failing frame and code, derived facts such as the ATen op
//! behind a codegen wrapper or how fragmented a CUDA heap was), the culprit of a
//! device-placement failure (from the op-argument role table and the call on the
//! failing line), the rule text bound to that evidence, and finally roles across
//! ranks: which failure initiated the collapse and which reports are its echoes.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::grammar::pycall;
use crate::grammar::traceback::{self, Frame, Link, Traceback};
use crate::ingest::Timestamp;
use crate::report::{value_text, Confidence, Culprit, Evidence, Finding, Location, Role};
use crate::rules::conditions::holds;
use crate::rules::evidence::{captures_to_evidence, derive, LogFacts};
use crate::rules::matching::{Event, Stream};
use crate::rules::pack::{CaseSpec, CulpritSpec, Pack, Rule};
use crate::rules::text::{self, Context};

mod culprit;
mod roles;

pub(crate) use roles::roles;

/// Id of the finding made for an exception no rule knows.
pub(crate) const UNRECOGNIZED: &str = "unrecognized-exception";

/// Longest `message` evidence, in characters.
const MAX_MESSAGE: usize = 600;

/// A finding before roles are assigned.
#[derive(Clone, Debug)]
pub(crate) struct Draft {
    pub finding: Finding,
    pub collateral: bool,
    pub recognized: bool,
    /// Printed by a logger and survived (`logger.exception(...)` then carried on).
    pub handled: bool,
    pub ts: Option<Timestamp>,
    /// For merged reports: each rank with its failing frame.
    pub per_rank: Vec<(u32, Option<String>)>,
    /// How many reports were merged into this one.
    pub reports: usize,
    key: String,
}

/// Builds one draft per event (one per traceback chain) and one per chain no rule knows.
pub(crate) fn findings(pack: &Pack, streams: &[Stream<'_>], log: &LogFacts<'_>) -> Vec<Draft> {
    let mut drafts = Vec::new();
    let mut cache: BTreeMap<String, Finding> = BTreeMap::new();
    let mut chosen: Vec<BTreeMap<usize, Event>> = Vec::new();
    let mut loose: Vec<(usize, Event)> = Vec::new();
    for (si, s) in streams.iter().enumerate() {
        // One event per traceback chain: the best by priority, then the earliest.
        let mut best_per_chain: BTreeMap<usize, Event> = BTreeMap::new();
        for e in &s.events {
            match e.tb {
                Some(t) => {
                    let chain = s.tracebacks[t].chain;
                    let better = match best_per_chain.get(&chain) {
                        None => true,
                        Some(cur) => pack.rules()[e.rule].spec.priority > pack.rules()[cur.rule].spec.priority,
                    };
                    if better {
                        best_per_chain.insert(chain, e.clone());
                    }
                }
                None => loose.push((si, e.clone())),
            }
        }
        // Other matches of the chosen rule in the chain add their captures (a message
        // matched by two templates, like the DDP indices line).
        for e in &s.events {
            if let Some(t) = e.tb {
                if let Some(best) = best_per_chain.get_mut(&s.tracebacks[t].chain) {
                    if best.rule == e.rule && best.m.start != e.m.start {
                        merge_captures(best, e);
                    }
                }
            }
        }
        chosen.push(best_per_chain);
    }
    // A loose line of the same failure outside the traceback (a CUDA assertion line,
    // the launcher's `failed (exitcode ...)`) joins it: in its own stream first, else,
    // for unranked lines, the same failure on any rank.
    let mut unmerged: Vec<(usize, Event)> = Vec::new();
    for (si, e) in loose {
        let same = chosen[si].values_mut().find(|b| b.rule == e.rule);
        if let Some(b) = same {
            merge_captures(b, &e);
            continue;
        }
        if streams[si].rank.is_none() {
            if let Some(b) = chosen.iter_mut().flat_map(|m| m.values_mut()).find(|b| b.rule == e.rule) {
                merge_captures(b, &e);
                continue;
            }
        }
        unmerged.push((si, e));
    }
    for (si, m) in chosen.iter().enumerate() {
        for e in m.values() {
            drafts.push(from_event(pack, &streams[si], e, log, &mut cache));
        }
    }
    for (si, e) in &unmerged {
        drafts.push(from_event(pack, &streams[*si], e, log, &mut cache));
    }
    for (si, s) in streams.iter().enumerate() {
        let chains: BTreeSet<usize> = s.tracebacks.iter().map(|t| t.chain).collect();
        for c in chains {
            if chosen[si].contains_key(&c) {
                continue;
            }
            if let Some(d) = unrecognized(s, c) {
                drafts.push(d);
            }
        }
    }
    drafts.sort_by_key(|d| d.finding.location.line);
    drafts
}

/// Adds `from`'s captures whose keys `into` lacks (all elements of a list).
fn merge_captures(into: &mut Event, from: &Event) {
    let present: BTreeSet<String> = into.m.captures.iter().map(|(k, _)| k.clone()).collect();
    for (k, v) in &from.m.captures {
        if !present.contains(k) {
            into.m.captures.push((k.clone(), v.clone()));
        }
    }
}

fn from_event(
    pack: &Pack,
    s: &Stream<'_>,
    e: &Event,
    log: &LogFacts<'_>,
    cache: &mut BTreeMap<String, Finding>,
) -> Draft {
    let rule = &pack.rules()[e.rule];
    // A message printed before its own frames (Streamlit's error panel: the message,
    // then `Traceback:`) takes the exception-less traceback right after it.
    let tb = e
        .tb
        .map(|t| &s.tracebacks[t])
        .or_else(|| s.tracebacks.iter().find(|t| t.exception.is_none() && t.start > e.last && t.start <= e.last + 2));
    let mut ev = Evidence::new();
    captures_to_evidence(&e.m, &mut ev);
    let (first, last) = match tb {
        Some(t) => (t.start.min(e.first), t.end.max(e.last)),
        None => (e.first, e.last),
    };
    // Exception and message.
    if let Some(x) = tb.and_then(|t| t.exception.as_ref()) {
        ev.insert("exception".into(), Value::from(x.short_class()));
        ev.insert("message".into(), Value::from(clip(&flatten(&x.message))));
    } else {
        // A message outside a parsed traceback: the class is what precedes it on its
        // line (a one-line paste, an application log line), the message what follows.
        let line = &s.lines[e.first].text;
        let col = e.m.start.saturating_sub(s.line_start(e.first)).min(line.len());
        let col = (0..=col).rev().find(|&c| line.is_char_boundary(c)).unwrap_or(0);
        let class = traceback::class_before(&line[..col])
            .or_else(|| traceback::exception_line(line[..col].trim()).map(|(c, _)| c))
            .or_else(|| {
                // A C++ `terminate called after throwing an instance of 'T'` then `what():  msg`.
                if !line.trim_start().starts_with("what():") {
                    return None;
                }
                (e.first.saturating_sub(2)..e.first).rev().find_map(|i| traceback::terminate_class(&s.lines[i].text))
            });
        if let Some(class) = class {
            ev.insert("exception".into(), Value::from(class.rsplit('.').next().unwrap_or(class)));
        }
        let mut text: Vec<&str> = vec![line[col..].trim()];
        text.extend((e.first + 1..=e.last).map(|i| s.lines[i].text.trim()));
        ev.insert("message".into(), Value::from(clip(&flatten(&text.join("\n")))));
    }
    let frames: Vec<&Frame> = tb.map(|t| s.chain_frames(t)).unwrap_or_default();
    if let Some(f) = s.user_frame(tb) {
        ev.insert("failing_frame".into(), Value::from(f.short()));
        if let Some(code) = &f.code {
            ev.insert("failing_code".into(), Value::from(code.clone()));
        }
    }
    derive(&mut ev);
    scrub(&mut ev);
    if let Some(v) = &rule.spec.matches[e.template].torch {
        ev.insert("torch_versions".into(), Value::from(v.clone()));
    }
    let ts = (first..=last).find_map(|i| s.lines.get(i).and_then(|l| l.ts));
    let location = s.span(first, last);
    let role_op = rule.spec.matches[e.template].role_op.as_deref();
    let rank = s
        .rank_at(e.first)
        .or_else(|| tb.and_then(|t| s.rank_from_intro(t.start)))
        .or_else(|| ev.get("rank").and_then(Value::as_u64).and_then(|r| u32::try_from(r).ok()));
    // The same failure reported by many ranks is bound to its rule text once: later
    // reports reuse that text and keep only their own rank, place and location.
    let key = key_of(rule.id(), &ev);
    let place = place_of(&ev);
    let finding = match cache.get(&key) {
        Some(first) => {
            let mut f = first.clone();
            f.rank = rank;
            f.location = location;
            f
        }
        None => {
            let f = bind(pack, rule, ev, &frames, log, rank, location, role_op);
            cache.insert(key.clone(), f.clone());
            f
        }
    };
    let handled = tb.is_some_and(|t| s.logged(t.start));
    let per_rank = rank.map(|r| (r, place)).into_iter().collect();
    let mut finding = finding;
    let collateral = match finding.evidence.remove("collateral_by_evidence") {
        Some(Value::Bool(b)) => b,
        _ => rule.spec.collateral,
    };
    Draft { collateral, recognized: true, handled, ts, per_rank, reports: 1, key, finding }
}

fn unrecognized(s: &Stream<'_>, chain: usize) -> Option<Draft> {
    let members: Vec<&Traceback> = s.tracebacks.iter().filter(|t| t.chain == chain).collect();
    // In a chain (`During handling ...`, `raise ... from ...`) the first exception is
    // the original failure; the last one is what ended the program.
    let top: Vec<&&Traceback> = members.iter().filter(|t| t.link != Link::Nested).collect();
    let tb = top
        .iter()
        .find(|t| t.exception.is_some())
        .copied()
        .or_else(|| members.iter().find(|t| t.exception.is_some()))
        .or_else(|| members.last())?;
    let final_exc = top.iter().rev().find_map(|t| t.exception.as_ref()).filter(|x| Some(*x) != tb.exception.as_ref());
    let mut ev = Evidence::new();
    let x = tb.exception.as_ref();
    if let Some(x) = x {
        ev.insert("exception".into(), Value::from(x.short_class()));
        ev.insert("message".into(), Value::from(clip(&flatten(&x.message))));
    }
    if x.is_none() && tb.frames.is_empty() {
        return None;
    }
    // A traceback without an exception line is a cut paste only at the end of the log;
    // elsewhere it is a stack printed on purpose (anomaly mode's forward trace, warnings).
    if x.is_none() && s.tracebacks.iter().any(|t| t.start > tb.end) {
        return None;
    }
    // Frames printed after their message belong to that message's finding.
    if x.is_none() && s.events.iter().any(|e| e.tb.is_none() && tb.start > e.last && tb.start <= e.last + 2) {
        return None;
    }
    if let Some(fx) = final_exc {
        ev.insert("final_exception".into(), Value::from(fx.short_class()));
        ev.insert("final_message".into(), Value::from(clip(&flatten(&fx.message))));
    }
    scrub(&mut ev);
    let f = s.user_frame(Some(tb));
    if let Some(f) = f {
        ev.insert("failing_frame".into(), Value::from(f.short()));
        if let Some(code) = &f.code {
            ev.insert("failing_code".into(), Value::from(code.clone()));
        }
    }
    let first = members.iter().map(|t| t.start).min().unwrap_or(tb.start);
    let last = members.iter().map(|t| t.end).max().unwrap_or(tb.end).min(s.lines.len() - 1);
    let class = x.map(|x| x.short_class().to_string());
    let title = match &class {
        Some(c) => format!("{c} that no torchdx rule recognises"),
        None => "A traceback cut short before its exception line".to_string(),
    };
    let where_ = f.map(|f| f.short()).unwrap_or_else(|| "the traceback".into());
    let next_action = match &class {
        Some(c) => format!("Read the `{c}` message and the code at {where_}; if it is a PyTorch failure, paste the full log (all ranks, from the first error) into a new torchdx rule with `torchdx rules new`."),
        None => "The paste ends before the exception line: copy the log again up to and including the line that names the exception.".to_string(),
    };
    let finding = Finding {
        id: UNRECOGNIZED.into(),
        family: "other".into(),
        title,
        role: Role::Independent,
        collateral_of: None,
        rank: s.rank_at(first).or_else(|| s.rank_from_intro(tb.start)),
        ranks: Vec::new(),
        confidence: Confidence::Possible,
        location: s.span(first, last),
        evidence: ev,
        culprit: None,
        mechanism: "The grammars found a Python traceback, but no rule in the pack knows its message, so torchdx can only report what the traceback itself shows.".into(),
        checklist: vec![
            format!("Open {where_} and check the values the failing line uses."),
            "Check whether an earlier warning or error in the log explains this exception.".into(),
        ],
        fix: "No rule applies, so there is no specific fix: start from the failing frame and the exception message above.".into(),
        verify: "Rerun the same command; the exception should not reappear.".into(),
        prevent: "Once understood, add a rule for this failure so the next occurrence is diagnosed.".into(),
        missing: vec!["A rule for this exception message".into()],
        next_action,
        related: Vec::new(),
    };
    let key = dedupe_key(&finding);
    let ts = s.lines.get(first).and_then(|l| l.ts);
    let handled = s.logged(tb.start);
    let per_rank = per_rank_of(&finding);
    Some(Draft { finding, collateral: false, recognized: false, handled, ts, per_rank, reports: 1, key })
}

/// Where a report says its rank stood: its failing frame, or for a collective timeout
/// its sequence number (a rank at another collective is the straggler candidate).
fn place_of(ev: &Evidence) -> Option<String> {
    ev.get("failing_frame").map(value_text).or_else(|| ev.get("seq").map(|s| format!("seq {}", value_text(s))))
}

/// Identity of a failure across ranks: rule and message without numbers.
pub(super) fn key_of(id: &str, ev: &Evidence) -> String {
    let msg = ev.get("message").map(value_text).unwrap_or_default();
    let norm: String = msg.chars().map(|c| if c.is_ascii_digit() { '#' } else { c }).collect();
    format!("{id}\u{1}{norm}")
}

/// A report never repeats a credential the log happened to contain (a token in a
/// failing command line, an `Authorization` header in an HTTP error message).
fn scrub(ev: &mut Evidence) {
    for v in ev.values_mut() {
        if let Value::String(s) = v {
            let clean = crate::redact::scrub_secrets(s);
            if clean != *s {
                *s = clean;
            }
        }
    }
}

fn per_rank_of(f: &Finding) -> Vec<(u32, Option<String>)> {
    f.rank.map(|r| (r, place_of(&f.evidence))).into_iter().collect()
}

/// Identity of a failure across ranks.
fn dedupe_key(f: &Finding) -> String {
    key_of(&f.id, &f.evidence)
}

/// Whitespace-normalised one-line text.
fn flatten(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn clip(s: &str) -> String {
    if s.chars().count() <= MAX_MESSAGE {
        return s.to_string();
    }
    let mut out: String = s.chars().take(MAX_MESSAGE).collect();
    out.push_str(" ...");
    out
}

/// Rule text bound to the evidence: culprit, case, placeholders.
#[allow(clippy::too_many_arguments)]
fn bind(
    pack: &Pack,
    rule: &Rule,
    mut ev: Evidence,
    frames: &[&Frame],
    log: &LogFacts<'_>,
    rank: Option<u32>,
    location: Location,
    role_op: Option<&str>,
) -> Finding {
    let mut ctx: Context = ev.clone();
    // A rank the message itself names (a launcher's root-cause block) stands in for
    // the stream's when the line carried no rank prefix.
    let rank = rank.or_else(|| ev.get("rank").and_then(Value::as_u64).and_then(|r| u32::try_from(r).ok()));
    if let Some(r) = rank {
        ctx.insert("rank".into(), Value::from(r));
    }
    // The failing line's outermost call, for rule text (`{code_arg1}` is the loss target).
    if let Some(code) = ev.get("failing_code").and_then(Value::as_str).map(str::to_string) {
        let line = pycall::parse_line(&code);
        // A message that names one device, raised by a move on the failing line
        // (`model.to("cpu")` → meta to cpu): the move's target is the other device.
        if let Some(Value::Array(devs)) = ev.get("devices") {
            if devs.len() == 1 {
                let target = line.calls.iter().filter(|k| k.name() == "to" || k.name() == "to_empty").find_map(|k| {
                    k.args
                        .iter()
                        .chain(k.kwargs.iter().filter(|(n, _)| n == "device").map(|(_, v)| v))
                        .find_map(|a| culprit::device_literal(a))
                });
                if let Some(t) = target {
                    let mut d = devs.clone();
                    d.push(Value::from(t));
                    ev.insert("devices".into(), Value::Array(d.clone()));
                    ctx.insert("devices".into(), Value::Array(d));
                }
            }
        }
        if let Some(t) = line.targets.first() {
            ctx.insert("code_target".into(), Value::from(t.clone()));
        }
        if let Some(k) = line.calls.first() {
            ctx.insert("code_callee".into(), Value::from(k.callee.clone()));
            for (i, a) in k.args.iter().take(3).enumerate() {
                ctx.insert(format!("code_arg{i}"), Value::from(pycall::base_name(a).to_string()));
            }
        }
    }
    let computed = if rule.family() == "device-mismatch" {
        culprit::device_culprit(pack, &ev, frames, log, role_op)
    } else {
        None
    };
    if let Some(c) = &computed {
        for (k, v) in &c.ctx {
            ctx.insert(k.clone(), Value::from(v.clone()));
        }
        ctx.insert("culprit_kind".into(), Value::from(c.kind.clone()));
        if let Some(e) = &c.expr {
            ctx.insert("culprit_expr".into(), Value::from(e.clone()));
        }
    }
    let case = rule.spec.cases.iter().find(|c| holds(&c.when, &ctx, frames, log));
    let pick = |f: fn(&CaseSpec) -> Option<&String>, base: &String| case.and_then(f).unwrap_or(base).clone();
    let culprit_spec: Option<&CulpritSpec> = case.and_then(|c| c.culprit.as_ref()).or(rule.spec.culprit.as_ref());
    let mut confidence = case.and_then(|c| c.confidence).unwrap_or(rule.spec.confidence);
    let culprit = match (culprit_spec, &computed) {
        (Some(spec), _) => {
            let expr = spec.expr.as_ref().and_then(|e| text::render(e, &ctx));
            if let Some(e) = &expr {
                ctx.insert("culprit_expr".into(), Value::from(e.clone()));
            }
            ctx.insert("culprit_kind".into(), Value::from(spec.kind.clone()));
            Some(Culprit { kind: spec.kind.clone(), expr, summary: text::render_lossy(&spec.summary, &ctx) })
        }
        (None, Some(c)) => {
            if case.and_then(|c| c.confidence).is_none() {
                confidence = c.confidence;
            }
            Some(Culprit { kind: c.kind.clone(), expr: c.expr.clone(), summary: c.summary.clone() })
        }
        (None, None) => None,
    };
    if let Some(c) = &culprit {
        ctx.insert("culprit_summary".into(), Value::from(c.summary.clone()));
    }
    let list = |items: &[String]| {
        items.iter().filter_map(|t| text::render(t, &ctx)).filter(|t| !t.trim().is_empty()).collect::<Vec<_>>()
    };
    let checklist = list(case.and_then(|c| c.checklist.as_deref()).unwrap_or(&rule.spec.checklist));
    let mut missing = list(case.and_then(|c| c.missing.as_deref()).unwrap_or(&rule.spec.missing));
    let mut next_action = text::render_lossy(&pick(|c| c.next_action.as_ref(), &rule.spec.next_action), &ctx);
    if let Some(c) = &computed {
        if c.confidence == Confidence::Certain {
            // The message and the source line settle it: nothing is missing.
            missing.clear();
        }
        missing.extend(c.missing.iter().cloned());
        if let Some(a) = &c.next_action {
            next_action = a.clone();
        }
    }
    if let Some(Value::String(x)) = ev.get("exception") {
        ev.insert("exception".into(), Value::from(x.clone()));
    }
    if let Some(c) = case.and_then(|c| c.collateral) {
        ev.insert("collateral_by_evidence".into(), Value::from(c));
    }
    Finding {
        id: rule.id().to_string(),
        family: rule.family().to_string(),
        title: text::render_lossy(&pick(|c| c.title.as_ref(), &rule.spec.title), &ctx),
        role: Role::Independent,
        collateral_of: None,
        rank,
        ranks: Vec::new(),
        confidence,
        location,
        evidence: ev,
        culprit,
        mechanism: text::render_lossy(&pick(|c| c.mechanism.as_ref(), &rule.spec.mechanism), &ctx),
        checklist,
        fix: text::render_lossy(&pick(|c| c.fix.as_ref(), &rule.spec.fix), &ctx),
        verify: text::render_lossy(&pick(|c| c.verify.as_ref(), &rule.spec.verify), &ctx),
        prevent: text::render_lossy(&pick(|c| c.prevent.as_ref(), &rule.spec.prevent), &ctx),
        missing,
        next_action,
        related: rule.spec.related.clone(),
    }
}
