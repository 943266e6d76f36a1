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
use crate::grammar::traceback::Frame;
use crate::ingest::Timestamp;
use crate::report::{value_text, Confidence, Culprit, Evidence, Finding, Location, Role};
use crate::rules::conditions::holds;
use crate::rules::evidence::{captures_to_evidence, derive, LogFacts};
use crate::rules::matching::{one_line, Event, Stream};
use crate::rules::pack::{CaseSpec, CulpritSpec, Pack, Rule};
use crate::rules::text::{self, Context};

mod culprit;
mod roles;

pub(crate) use roles::roles;

/// Id of the finding made for an exception no rule knows.
pub(crate) const UNRECOGNIZED: &str = "unrecognized-exception";

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
    let mut cache: BTreeMap<String, Bound> = BTreeMap::new();
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
    let present: BTreeSet<String> = into.m.captures.iter().map(|c| c.name.clone()).collect();
    for c in &from.m.captures {
        if !present.contains(&c.name) {
            into.m.captures.push(c.clone());
        }
    }
}

/// A finding bound once per repeated failure, with the collateral verdict of its case.
type Bound = (Finding, Option<bool>);

fn from_event(
    pack: &Pack,
    s: &Stream<'_>,
    e: &Event,
    log: &LogFacts<'_>,
    cache: &mut BTreeMap<String, Bound>,
) -> Draft {
    let rule = &pack.rules()[e.rule];
    let inc = s.incident(e);
    let mut ev = Evidence::new();
    captures_to_evidence(&e.m, &mut ev);
    ev.exception = inc.exception.clone();
    ev.message = inc.message.clone();
    if let Some(f) = inc.user_frame {
        ev.failing_frame = Some(f.short());
        ev.failing_code = f.code.clone();
    }
    derive(&mut ev);
    scrub(&mut ev);
    if let Some(v) = &rule.spec.matches[e.template].torch {
        ev.insert("torch_versions", Value::from(v.clone()));
    }
    let role_op = rule.spec.matches[e.template].role_op.as_deref();
    let rank = inc.rank.or_else(|| evidence_rank(&ev));
    // The same failure reported by many ranks is bound to its rule text once: later
    // reports reuse that text and keep only their own rank, place and location.
    let key = key_of(rule.id(), &ev);
    let place = place_of(&ev);
    let (mut finding, case_collateral) = match cache.get(&key) {
        Some((first, c)) => (first.clone(), *c),
        None => {
            let b = bind(pack, rule, ev, &inc.frames, log, rank, inc.location, role_op);
            cache.insert(key.clone(), b.clone());
            b
        }
    };
    finding.rank = rank;
    finding.location = inc.location;
    let per_rank = rank.map(|r| (r, place)).into_iter().collect();
    let collateral = case_collateral.unwrap_or(rule.spec.collateral);
    Draft { collateral, recognized: true, handled: inc.handled, ts: inc.ts, per_rank, reports: 1, key, finding }
}

/// A rank the message itself names (a launcher's root-cause block).
fn evidence_rank(ev: &Evidence) -> Option<u32> {
    ev.extra.get("rank").and_then(Value::as_u64).and_then(|r| u32::try_from(r).ok())
}

fn unrecognized(s: &Stream<'_>, chain: usize) -> Option<Draft> {
    let (inc, final_exc) = s.chain_incident(chain)?;
    let mut ev = Evidence::new();
    ev.exception = inc.exception.clone();
    ev.message = inc.message.clone();
    if let Some(fx) = final_exc {
        ev.insert("final_exception", Value::from(fx.short_class()));
        ev.insert("final_message", Value::from(one_line(&fx.message)));
    }
    scrub(&mut ev);
    let f = inc.user_frame;
    if let Some(f) = f {
        ev.failing_frame = Some(f.short());
        ev.failing_code = f.code.clone();
    }
    let class = inc.exception.clone();
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
        rank: inc.rank,
        ranks: Vec::new(),
        confidence: Confidence::Possible,
        location: inc.location,
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
    let per_rank = per_rank_of(&finding);
    Some(Draft {
        finding,
        collateral: false,
        recognized: false,
        handled: inc.handled,
        ts: inc.ts,
        per_rank,
        reports: 1,
        key,
    })
}

/// Where a report says its rank stood: its failing frame, or for a collective timeout
/// its sequence number (a rank at another collective is the straggler candidate).
fn place_of(ev: &Evidence) -> Option<String> {
    ev.failing_frame.clone().or_else(|| ev.extra.get("seq").map(|s| format!("seq {}", value_text(s))))
}

/// Identity of a failure across ranks: rule and message without numbers.
pub(super) fn key_of(id: &str, ev: &Evidence) -> String {
    let msg = ev.message.as_deref().unwrap_or_default();
    let norm: String = msg.chars().map(|c| if c.is_ascii_digit() { '#' } else { c }).collect();
    format!("{id}\u{1}{norm}")
}

/// A report never repeats a credential the log happened to contain (a token in a
/// failing command line, an `Authorization` header in an HTTP error message).
fn scrub(ev: &mut Evidence) {
    let clean = |s: &mut String| {
        let c = crate::redact::scrub_secrets(s);
        if c != *s {
            *s = c;
        }
    };
    let texts = [
        &mut ev.exception,
        &mut ev.message,
        &mut ev.argument,
        &mut ev.op,
        &mut ev.kernel,
        &mut ev.failing_frame,
        &mut ev.failing_code,
    ];
    for t in texts.into_iter().flatten() {
        clean(t);
    }
    for d in ev.devices.iter_mut().flatten() {
        clean(d);
    }
    for v in ev.extra.values_mut() {
        if let Value::String(s) = v {
            clean(s);
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
) -> Bound {
    let mut ctx: Context = ev.to_map();
    // A rank the message itself names (a launcher's root-cause block) stands in for
    // the stream's when the line carried no rank prefix.
    let rank = rank.or_else(|| evidence_rank(&ev));
    if let Some(r) = rank {
        ctx.insert("rank".into(), Value::from(r));
    }
    // The failing line's outermost call, for rule text (`{code_arg1}` is the loss target).
    if let Some(code) = ev.failing_code.clone() {
        let line = pycall::parse_line(&code);
        // A message that names one device, raised by a move on the failing line
        // (`model.to("cpu")` → meta to cpu): the move's target is the other device.
        if let Some(devs) = ev.devices.clone() {
            if devs.len() == 1 {
                let target = line.calls.iter().filter(|k| k.name() == "to" || k.name() == "to_empty").find_map(|k| {
                    k.args
                        .iter()
                        .chain(k.kwargs.iter().filter(|(n, _)| n == "device").map(|(_, v)| v))
                        .find_map(|a| culprit::device_literal(a))
                });
                if let Some(t) = target {
                    let mut d = devs.clone();
                    d.push(t);
                    ctx.insert("devices".into(), Value::from(d.clone()));
                    ev.devices = Some(d);
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
    let finding = Finding {
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
    };
    (finding, case.and_then(|c| c.collateral))
}
