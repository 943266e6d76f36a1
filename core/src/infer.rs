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

use crate::engine::{captures_to_evidence, Engine, Event, Stream};
use crate::grammar::pycall;
use crate::grammar::traceback::{Frame, Traceback};
use crate::ingest::Timestamp;
use crate::pack::{CaseSpec, Confidence, CulpritSpec, Pack, Rule, When};
use crate::render::{self, Context};
use crate::report::{Culprit, Evidence, Finding, Location, Role, TimelineEntry};

/// Id of the finding made for an exception no rule knows.
pub const UNRECOGNIZED: &str = "unrecognized-exception";

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

/// The rank a line's failure belongs to: its stream's, else the `ChildFailedError`
/// entry quoting it.
fn rank_at(s: &Stream<'_>, line: usize) -> Option<u32> {
    s.rank.or_else(|| s.elastic.iter().find(|e| e.first <= line && line <= e.last).map(|e| e.rank))
}

/// An unranked traceback introduced by a log line that names a rank
/// (`ERROR [train] rank 2: skipping bad batch`) belongs to that rank.
fn rank_from_intro(s: &Stream<'_>, start: usize) -> Option<u32> {
    let prev_line = s.lines.get(start.checked_sub(1)?)?;
    // Only a logger line (timestamp and level), not a training print like `[rank 0] step 3`.
    if !prev_line.logger || prev_line.level.is_none() {
        return None;
    }
    let prev = &prev_line.text;
    let lower = prev.to_ascii_lowercase();
    let at = lower.find("rank")?;
    let rest = lower[at + 4..].trim_start_matches([' ', '=', ':', '#']);
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Whether the traceback starting at `start` was printed by a logger (`logger.exception`),
/// i.e. caught and reported rather than fatal.
fn logged(s: &Stream<'_>, start: usize) -> bool {
    start > 0 && {
        let prev = s.lines[start - 1];
        prev.logger && matches!(prev.level, Some('E') | Some('W')) && !prev.text.contains("Traceback")
    }
}

/// Builds one draft per event (one per traceback chain) and one per chain no rule knows.
pub(crate) fn findings(engine: &Engine, streams: &[Stream<'_>], log: &LogText<'_>) -> Vec<Draft> {
    let pack = engine.pack();
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

/// What is known about the whole log beyond the retained windows: which of the
/// engine's needles occurred anywhere, and whether ranks were seen.
pub(crate) struct LogText<'a> {
    pub engine: &'a Engine,
    pub seen: &'a [bool],
    pub distributed: bool,
}

impl LogText<'_> {
    fn contains(&self, needle: &str) -> bool {
        self.engine.needle_seen(self.seen, needle)
    }
}

fn from_event(
    pack: &Pack,
    s: &Stream<'_>,
    e: &Event,
    log: &LogText<'_>,
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
        let class = crate::grammar::traceback::class_before(&line[..col])
            .or_else(|| crate::grammar::traceback::exception_line(line[..col].trim()).map(|(c, _)| c))
            .or_else(|| {
                // A C++ `terminate called after throwing an instance of 'T'` then `what():  msg`.
                if !line.trim_start().starts_with("what():") {
                    return None;
                }
                (e.first.saturating_sub(2)..e.first)
                    .rev()
                    .find_map(|i| crate::grammar::traceback::terminate_class(&s.lines[i].text))
            });
        if let Some(class) = class {
            ev.insert("exception".into(), Value::from(class.rsplit('.').next().unwrap_or(class)));
        }
        let mut text: Vec<&str> = vec![line[col..].trim()];
        text.extend((e.first + 1..=e.last).map(|i| s.lines[i].text.trim()));
        ev.insert("message".into(), Value::from(clip(&flatten(&text.join("\n")))));
    }
    let frames: Vec<&Frame> = tb.map(|t| chain_frames(s, t)).unwrap_or_default();
    if let Some(f) = user_frame(s, tb) {
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
    let location = span(s, first, last);
    let role_op = rule.spec.matches[e.template].role_op.as_deref();
    let rank = rank_at(s, e.first)
        .or_else(|| tb.and_then(|t| rank_from_intro(s, t.start)))
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
    let handled = tb.is_some_and(|t| logged(s, t.start));
    let per_rank = rank.map(|r| (r, place)).into_iter().collect();
    let mut finding = finding;
    let collateral = match finding.evidence.remove("collateral_by_evidence") {
        Some(Value::Bool(b)) => b,
        _ => rule.spec.collateral,
    };
    Draft { collateral, recognized: true, handled, ts, per_rank, reports: 1, key, finding }
}

/// Frames of a traceback and of the tracebacks nested in it (a DataLoader worker's).
fn chain_frames<'a>(s: &'a Stream<'_>, tb: &'a Traceback) -> Vec<&'a Frame> {
    s.tracebacks.iter().filter(|t| t.chain == tb.chain).flat_map(|t| t.frames.iter()).collect()
}

/// The last user frame: in a traceback nested in this one (a DataLoader worker's
/// `Original Traceback`, where the error really happened), else in the traceback
/// itself, else anywhere in its chain.
fn user_frame<'a>(s: &'a Stream<'_>, tb: Option<&'a Traceback>) -> Option<&'a Frame> {
    let tb = tb?;
    let chain: Vec<&Traceback> = s.tracebacks.iter().filter(|t| t.chain == tb.chain).collect();
    chain
        .iter()
        .rev()
        .filter(|t| t.link == crate::grammar::traceback::Link::Nested && t.start > tb.start)
        .find_map(|t| t.user_frame())
        .or_else(|| tb.user_frame())
        .or_else(|| chain.iter().rev().find_map(|t| t.user_frame()))
}

/// The input lines that stream lines `first..=last` cover. Gap markers between kept
/// windows have no input line, and a garbled log can interleave a stream's lines out of
/// input order (a fuzzed input did), so the span is the least and greatest line number
/// in the range, never a reversed or zero one.
fn span(s: &Stream<'_>, first: usize, last: usize) -> Location {
    let last = last.min(s.lines.len().saturating_sub(1));
    let nos = || s.lines.get(first.min(last)..=last).into_iter().flatten().map(|l| l.no).filter(|&n| n > 0);
    let line = nos().min().unwrap_or(1);
    Location { line, end_line: nos().max().unwrap_or(line) }
}

fn unrecognized(s: &Stream<'_>, chain: usize) -> Option<Draft> {
    let members: Vec<&Traceback> = s.tracebacks.iter().filter(|t| t.chain == chain).collect();
    // In a chain (`During handling ...`, `raise ... from ...`) the first exception is
    // the original failure; the last one is what ended the program.
    let top: Vec<&&Traceback> = members.iter().filter(|t| t.link != crate::grammar::traceback::Link::Nested).collect();
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
    let f = user_frame(s, Some(tb));
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
        rank: rank_at(s, first).or_else(|| rank_from_intro(s, tb.start)),
        ranks: Vec::new(),
        confidence: Confidence::Possible,
        location: span(s, first, last),
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
    let handled = logged(s, tb.start);
    let per_rank = per_rank_of(&finding);
    Some(Draft { finding, collateral: false, recognized: false, handled, ts, per_rank, reports: 1, key })
}

/// Where a report says its rank stood: its failing frame, or for a collective timeout
/// its sequence number (a rank at another collective is the straggler candidate).
fn place_of(ev: &Evidence) -> Option<String> {
    ev.get("failing_frame")
        .map(render::value_text)
        .or_else(|| ev.get("seq").map(|s| format!("seq {}", render::value_text(s))))
}

/// Identity of a failure across ranks: rule and message without numbers.
fn key_of(id: &str, ev: &Evidence) -> String {
    let msg = ev.get("message").map(render::value_text).unwrap_or_default();
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

/// Facts derived from captures.
pub(crate) fn derive(ev: &mut Evidence) {
    if let Some(Value::String(k)) = ev.get("kernel").cloned() {
        let (key, op) = split_kernel(&k);
        if let Some(key) = key {
            ev.entry("dispatch_key".into()).or_insert(Value::from(key));
        }
        // Legacy TH wrappers: `_th_addmm` is addmm.
        let op = op.trim_start_matches("_thnn_").trim_start_matches("_th_").to_string();
        ev.entry("op".into()).or_insert(Value::from(op));
    }
    // Which device belongs to the named argument and which is the common one. Messages
    // name them in different orders; `devices` keeps the message's order.
    let dev = |ev: &Evidence, k: &str| ev.get(k).and_then(Value::as_str).map(str::to_string);
    match (dev(ev, "argument_device"), dev(ev, "common_device")) {
        (Some(a), Some(c)) => {
            if !ev.contains_key("devices") {
                ev.insert("devices".into(), Value::from(vec![a, c]));
            }
        }
        _ => {
            if let Some(Value::Array(d)) = ev.get("devices").cloned() {
                if d.len() == 2 && ev.contains_key("argument") {
                    ev.insert("common_device".into(), d[0].clone());
                    ev.insert("argument_device".into(), d[1].clone());
                }
            }
        }
    }
    // `but device 1 does not equal 0`: CUDA device indices.
    if let (Some(a), Some(b)) =
        (ev.get("device_index_a").and_then(Value::as_i64), ev.get("device_index_b").and_then(Value::as_i64))
    {
        ev.entry("devices".into()).or_insert(Value::from(vec![format!("cuda:{a}"), format!("cuda:{b}")]));
        ev.remove("device_index_a");
        ev.remove("device_index_b");
    }
    // CUDA heap fragmentation: reserved-but-unallocated memory that is large relative
    // to the GPU makes `expandable_segments` the right advice.
    let get = |k: &str| ev.get(k).and_then(Value::as_u64);
    let unalloc =
        get("unallocated_bytes").or_else(|| Some(get("reserved_bytes")?.saturating_sub(get("allocated_bytes")?)));
    if let (Some(u), Some(total)) = (unalloc, get("total_bytes")) {
        let tried = get("tried_bytes").unwrap_or(0);
        // Large: a tenth of the card, or enough to serve the request and a
        // twentieth of the card (PyTorch's own hint says only "large").
        let high = total > 0 && (u * 10 >= total || (tried > 0 && u >= tried && u * 20 >= total));
        ev.insert("fragmentation".into(), Value::from(if high { "high" } else { "low" }));
        ev.insert("reserved_unallocated_bytes".into(), Value::from(u));
        ev.insert("reserved_unallocated".into(), Value::from(human_bytes(u)));
    }
}

/// A device written as a literal argument: `"cpu"`, `'cuda:1'`, `torch.device("cuda", 0)`.
fn device_literal(arg: &str) -> Option<String> {
    let a = arg.trim();
    let inner = a.strip_prefix("torch.device(").and_then(|x| x.strip_suffix(')')).unwrap_or(a);
    let mut parts = inner.split(',').map(|p| p.trim().trim_matches(['"', '\'']));
    let kind = parts.next()?;
    let idx = parts.next().filter(|i| i.chars().all(|c| c.is_ascii_digit()) && !i.is_empty());
    let text = match idx {
        Some(i) => format!("{kind}:{i}"),
        None => kind.to_string(),
    };
    let quoted = a.starts_with('"') || a.starts_with('\'') || a.starts_with("torch.device(");
    match crate::atoms::device(&text) {
        Ok(("", d)) if quoted => Some(d),
        _ => None,
    }
}

/// Bytes as the CUDA allocator prints them: `512.00 KiB`, `20.00 MiB`, `1.25 GiB`.
pub fn human_bytes(n: u64) -> String {
    const K: f64 = 1024.0;
    let f = n as f64;
    if n <= 1024 {
        format!("{n} bytes")
    } else if f <= K * K {
        format!("{:.2} KiB", f / K)
    } else if f <= K * K * K {
        format!("{:.2} MiB", f / (K * K))
    } else {
        format!("{:.2} GiB", f / (K * K * K))
    }
}

/// `wrapper_CUDA__index_select` → (Some("CUDA"), "index_select");
/// `wrapper_addmm` → (None, "addmm"); `wrapper___cat` → (None, "_cat").
pub fn split_kernel(k: &str) -> (Option<&str>, String) {
    let Some(rest) = k.strip_prefix("wrapper_") else {
        return (None, k.to_string());
    };
    let (key, rest) = match rest.split_once('_') {
        Some((key, r)) if !key.is_empty() && key.chars().next().is_some_and(|c| c.is_ascii_uppercase()) => {
            (Some(key), r)
        }
        _ => (None, rest),
    };
    let op = match rest.strip_prefix('_') {
        Some(r) => r.to_string(),
        None => rest.to_string(),
    };
    (key, op)
}

/// Rule text bound to the evidence: culprit, case, placeholders.
#[allow(clippy::too_many_arguments)]
fn bind(
    pack: &Pack,
    rule: &Rule,
    mut ev: Evidence,
    frames: &[&Frame],
    log: &LogText<'_>,
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
                        .find_map(|a| device_literal(a))
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
    let computed =
        if rule.family() == "device-mismatch" { device_culprit(pack, &ev, frames, log, role_op) } else { None };
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
            let expr = spec.expr.as_ref().and_then(|e| render::render(e, &ctx));
            if let Some(e) = &expr {
                ctx.insert("culprit_expr".into(), Value::from(e.clone()));
            }
            ctx.insert("culprit_kind".into(), Value::from(spec.kind.clone()));
            Some(Culprit { kind: spec.kind.clone(), expr, summary: render::render_lossy(&spec.summary, &ctx) })
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
        items.iter().filter_map(|t| render::render(t, &ctx)).filter(|t| !t.trim().is_empty()).collect::<Vec<_>>()
    };
    let checklist = list(case.and_then(|c| c.checklist.as_deref()).unwrap_or(&rule.spec.checklist));
    let mut missing = list(case.and_then(|c| c.missing.as_deref()).unwrap_or(&rule.spec.missing));
    let mut next_action = render::render_lossy(&pick(|c| c.next_action.as_ref(), &rule.spec.next_action), &ctx);
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
        title: render::render_lossy(&pick(|c| c.title.as_ref(), &rule.spec.title), &ctx),
        role: Role::Independent,
        collateral_of: None,
        rank,
        ranks: Vec::new(),
        confidence,
        location,
        evidence: ev,
        culprit,
        mechanism: render::render_lossy(&pick(|c| c.mechanism.as_ref(), &rule.spec.mechanism), &ctx),
        checklist,
        fix: render::render_lossy(&pick(|c| c.fix.as_ref(), &rule.spec.fix), &ctx),
        verify: render::render_lossy(&pick(|c| c.verify.as_ref(), &rule.spec.verify), &ctx),
        prevent: render::render_lossy(&pick(|c| c.prevent.as_ref(), &rule.spec.prevent), &ctx),
        missing,
        next_action,
        related: rule.spec.related.clone(),
    }
}

/// Whether conditions hold on evidence alone (match-time `when`).
pub(crate) fn holds_on_evidence(w: &When, ev: &Evidence) -> bool {
    let has = |k: &str| ev.get(k).is_some_and(|v| !render::value_text(v).is_empty());
    let text = |k: &str| ev.get(k).map(render::value_text).unwrap_or_default();
    w.present.iter().all(|k| has(k))
        && w.absent.iter().all(|k| !has(k))
        && w.equals.iter().all(|(k, v)| has(k) && v.values().contains(&text(k).as_str()))
        && w.contains.iter().all(|(k, v)| text(k).contains(v.as_str()))
        && w.differ.iter().all(|k| match ev.get(k) {
            Some(Value::Array(a)) => a.iter().map(render::value_text).collect::<BTreeSet<_>>().len() >= 2,
            _ => false,
        })
}

/// Whether a case's conditions hold: the evidence conditions, then frames and log.
fn holds(w: &When, ctx: &Context, frames: &[&Frame], log: &LogText<'_>) -> bool {
    holds_on_evidence(w, ctx)
        && (w.frame_contains.is_empty()
            || frames.iter().any(|f| {
                w.frame_contains.iter().any(|n| {
                    f.file.replace('\\', "/").contains(n.as_str())
                        || f.func.as_deref().is_some_and(|x| x.contains(n.as_str()))
                })
            }))
        && (w.log_contains.is_empty() || w.log_contains.iter().any(|n| log.contains(n)))
        && (w.exception.is_empty()
            || w.exception.iter().any(|x| ctx.get("exception").map(render::value_text).as_deref() == Some(x.as_str())))
}

/// What the engine inferred about a device-placement culprit.
#[derive(Clone, Debug)]
struct DeviceCulprit {
    kind: String,
    expr: Option<String>,
    summary: String,
    confidence: Confidence,
    missing: Vec<String>,
    next_action: Option<String>,
    /// Extra placeholder values: `stray_device`, `target_device`, `culprit_role`, `reference_expr`.
    ctx: Vec<(String, String)>,
}

fn is_accel(d: &str) -> bool {
    !(d == "cpu" || d == "meta")
}

/// Factory calls that create a tensor on the default device unless told otherwise.
const FACTORIES: &[&str] = &[
    "zeros",
    "ones",
    "arange",
    "tensor",
    "full",
    "randn",
    "rand",
    "randint",
    "empty",
    "eye",
    "linspace",
    "zeros_like_cpu",
    "as_tensor",
    "from_numpy",
];

fn device_culprit(
    pack: &Pack,
    ev: &Evidence,
    frames: &[&Frame],
    log: &LogText<'_>,
    role_op: Option<&str>,
) -> Option<DeviceCulprit> {
    let devices: Vec<String> = match ev.get("devices") {
        Some(Value::Array(a)) => a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
        _ => Vec::new(),
    };
    let s = |k: &str| ev.get(k).and_then(Value::as_str).map(str::to_string);
    let argument = s("argument");
    let op = s("op");
    let code = s("failing_code").unwrap_or_default();
    let line = pycall::parse_line(&code);
    // Whether the failing user frame is a module's `forward`.
    let in_forward = frames
        .iter()
        .rev()
        .find(|f| f.is_user())
        .and_then(|f| f.func.as_deref())
        .is_some_and(|f| f.contains("forward"));
    let frame_has = |n: &str| {
        frames.iter().any(|f| f.file.replace('\\', "/").contains(n) || f.func.as_deref().is_some_and(|x| x.contains(n)))
    };
    let mut c = DeviceCulprit {
        kind: "other".into(),
        expr: None,
        summary: String::new(),
        confidence: Confidence::Possible,
        missing: Vec::new(),
        next_action: None,
        ctx: Vec::new(),
    };
    // The device the computation runs on, and the stray one.
    let (target, stray) = match devices.as_slice() {
        [a, b, ..] if a == "meta" || b == "meta" => {
            let other = if a == "meta" { b } else { a };
            (other.clone(), "meta".to_string())
        }
        [a, b, ..] if is_accel(a) && !is_accel(b) => (a.clone(), b.clone()),
        [a, b, ..] if !is_accel(a) && is_accel(b) => (b.clone(), a.clone()),
        [a, b, ..] => (a.clone(), b.clone()),
        _ => (String::new(), String::new()),
    };
    if !target.is_empty() {
        c.ctx.push(("target_device".into(), target.clone()));
        c.ctx.push(("stray_device".into(), stray.clone()));
    }
    let audit = audit_snippet(&line);
    // Meta tensors: parameters never materialised.
    if stray == "meta" || ev.get("message").and_then(Value::as_str).is_some_and(|m| m.contains("device meta")) {
        c.kind = "meta-weights".into();
        c.expr = if log.contains("load_state_dict") { Some("model.load_state_dict(state_dict)".into()) } else { None };
        c.summary = format!(
            "some parameters or buffers are still on the meta device (no data) while the computation runs on {}: the model was built under `torch.device(\"meta\")` or with `low_cpu_mem_usage`/`init_empty_weights`, and its weights were never materialised{}",
            if target.is_empty() { "a real device".into() } else { target.clone() },
            if log.contains("load_state_dict") { "; `load_state_dict` without `assign=True` copies into meta tensors, which is a no-op" } else { "" }
        );
        c.confidence = Confidence::Likely;
        c.next_action = Some("Print the parameters still on meta: `print([n for n, p in model.named_parameters() if p.is_meta] + [n for n, b in model.named_buffers() if b.is_meta])`.".into());
        return Some(c);
    }
    // Two different accelerators: a rank or device-index problem.
    if is_accel(&target) && is_accel(&stray) && target != stray {
        let distributed = log.distributed
            || log.contains("LOCAL_RANK")
            || log.contains("local_rank")
            || log.contains("init_process_group")
            || frame_has("torch/distributed")
            || frame_has("torch/nn/parallel/distributed");
        let loads =
            frame_has("torch/serialization.py") || (code.contains("torch.load(") && !code.contains("map_location"));
        if loads {
            c.kind = "checkpoint-map-location".into();
            c.summary = format!("tensors loaded from a checkpoint came back on the device they were saved from ({stray}) while this process computes on {target}: `torch.load` without `map_location` restores each tensor to its original device");
            c.expr = Some("torch.load(...)".into());
        } else if frame_has("data_parallel") || frame_has("replicate") || frame_has("parallel_apply") {
            c.kind = "dataparallel-replica".into();
            c.summary = format!("inside `nn.DataParallel` a tensor on {stray} meets a replica on {target}: something the module's forward uses is not a registered parameter or buffer, so it was not copied to each replica");
        } else if distributed {
            c.kind = "wrong-local-rank".into();
            c.summary = format!("one process uses both {target} and {stray}: a tensor was placed with a hardcoded or global device index instead of this process's local rank");
        } else {
            c.kind = "hardcoded-device".into();
            c.summary = format!("tensors on {target} and {stray} meet in one operation: one of them was placed with a hardcoded device index");
        }
        c.confidence = Confidence::Likely;
        c.missing.push("The device of each operand on the failing line".into());
        c.next_action = audit.clone();
        return Some(c);
    }
    // Library internals: optimizer state, DataParallel, HF device maps.
    // Raised inside an optimizer step: the optimizer's own state is on the wrong device.
    if frames.last().is_some_and(|f| f.file.replace('\\', "/").contains("torch/optim/")) {
        c.kind = "optimizer-state".into();
        c.expr = Some("optimizer.state".into());
        c.summary = format!("the optimizer's state tensors (exp_avg, momentum_buffer, step) are on {stray} while the parameters are on {target}: the optimizer state was loaded or created before `model.to(...)`, or loaded from a checkpoint without `map_location`");
        c.confidence = Confidence::Likely;
        c.next_action = Some("Print the devices of the optimizer state: `print({k: v.device for s in optimizer.state.values() for k, v in s.items() if torch.is_tensor(v)})`.".into());
        return Some(c);
    }
    if frame_has("accelerate/hooks") || frame_has("accelerate/big_modeling") {
        c.kind = "hf-device-map".into();
        c.summary = format!("an accelerate/transformers `device_map` hook placed part of the model on {stray} and part on {target}, and an input or a manually added module did not follow the map");
        c.confidence = Confidence::Likely;
        c.next_action = Some("Print `model.hf_device_map` and move the inputs to the device of the first module (`inputs.to(model.device)`).".into());
        return Some(c);
    }
    if frame_has("data_parallel") || frame_has("parallel_apply") || frame_has("replicate.py") {
        c.kind = "dataparallel-replica".into();
        c.summary = format!("inside `nn.DataParallel` a tensor on {stray} meets a replica on {target}: a tensor the forward uses is a plain attribute, not a registered buffer, so it is not copied to each replica");
        c.confidence = Confidence::Likely;
        c.next_action = Some(
            "Register the tensor with `self.register_buffer(name, tensor)` (or use DistributedDataParallel).".into(),
        );
        return Some(c);
    }
    // A factory call on the failing line without `device=`.
    if let Some(fc) = line.calls.iter().find(|k| {
        let n = k.name();
        (k.callee.starts_with("torch.") || k.callee.starts_with("np."))
            && FACTORIES.contains(&n)
            && !k.kwargs.iter().any(|(k, _)| k == "device")
    }) {
        c.kind = "created-without-device".into();
        let text = format!("{}({})", fc.callee, fc.args.join(", "));
        c.summary = format!("`{text}` on the failing line creates a tensor on the default device ({stray}) while the rest of the computation is on {target}");
        c.expr = Some(text);
        c.confidence = Confidence::Likely;
        c.ctx.push(("culprit_role".into(), "a tensor created on the failing line".into()));
        return Some(c);
    }
    // The op-argument role table.
    let op_name = op.as_deref().or(role_op);
    let spec = op_name.and_then(|o| pack.op(o));
    let call = spec
        .and_then(|s| {
            line.calls.iter().find(|k| s.callees.iter().any(|n| k.callee.to_ascii_lowercase().contains(n.as_str())))
        })
        .or_else(|| line.calls.first());
    if let Some(spec) = spec {
        let argument_device = s("argument_device");
        // The misplaced tensor: the named argument when it is on the stray device,
        // else the first tensor argument (it set the "common" device). Without a
        // named argument, devices are listed in the op's argument order.
        let named = argument.as_deref().and_then(|a| spec.args.iter().find(|r| r.name == a));
        let role = if argument.is_some() {
            if argument_device.as_deref() == Some(stray.as_str()) {
                named
            } else {
                spec.args.first()
            }
        } else {
            devices.iter().position(|d| *d == stray).and_then(|i| spec.args.get(i))
        };
        if let Some(role) = role.filter(|_| !stray.is_empty()) {
            c.kind = role.kind.clone();
            c.ctx.push(("culprit_role".into(), role.role.clone()));
            let expr = match (role.call_arg, call) {
                (Some(i), Some(k)) => k.args.get(i).map(|a| pycall::base_name(a).to_string()),
                (None, Some(k)) if !k.callee.starts_with("torch.") && !k.callee.starts_with("F.") => {
                    Some(k.callee.clone())
                }
                _ => None,
            };
            let reference = call.and_then(|k| {
                spec.args
                    .iter()
                    .filter(|a| a.name != role.name)
                    .find_map(|a| a.call_arg.and_then(|i| k.args.get(i)).map(|x| pycall::base_name(x).to_string()))
            });
            if let Some(r) = &reference {
                c.ctx.push(("reference_expr".into(), r.clone()));
            }
            c.summary = match &expr {
                Some(e) if role.call_arg.is_some() => {
                    format!("`{e}` ({}) is still on {stray} while {} runs on {target}", role.role, spec.user_call)
                }
                Some(e) => format!(
                    "`{e}` has {} on {stray} while its input is on {target}: the module was not moved",
                    role.role
                ),
                None => format!("{} is on {stray} while the computation runs on {target}", role.role),
            };
            let settled = expr.is_some() && (named.is_some() || role_op.is_some()) && !code.is_empty();
            c.confidence = if settled { Confidence::Certain } else { Confidence::Likely };
            // Refinements from what the expression is.
            if let Some(e) = &expr {
                if role.call_arg.is_some() && e.starts_with("self.") && !e.contains('(') {
                    // A tensor kept in a plain attribute: `model.to()` does not move it.
                    c.kind = "unregistered-tensor-attribute".into();
                    c.summary = format!("`{e}` is a tensor stored as a plain attribute, still on {stray}: `model.to()` moves parameters and registered buffers only");
                    c.confidence = Confidence::Likely;
                } else if role.call_arg.is_none()
                    && (e.contains('[') || (in_forward && !e.starts_with("self.") && !e.contains('.')))
                {
                    // A submodule reached through a Python list (or a loop over one).
                    c.kind = "submodule-not-registered".into();
                    c.summary = format!("`{e}` is a submodule on {stray} while its input is on {target}: modules kept in a plain Python list or dict are not registered, so `model.to()` skips them");
                    c.confidence = Confidence::Likely;
                }
            }
            if expr.is_none() {
                c.missing.push(format!("Which expression on the failing line is {}", role.role));
                c.next_action = audit.clone();
            }
            c.expr = expr;
            return Some(c);
        }
    }
    // No argument named (TensorIterator wording): the failing line is the only guide.
    if let Some(k) = call {
        let lower = k.callee.to_ascii_lowercase();
        if ["loss", "criterion", "cross_entropy", "nll", "mse", "bce"].iter().any(|n| lower.contains(n))
            && k.args.len() >= 2
        {
            c.kind = "label-not-moved".into();
            let e = pycall::base_name(&k.args[1]).to_string();
            c.summary = format!("the loss mixes {target} and {stray}; the usual suspect is the target `{e}`, which the data loader returns on the CPU");
            c.ctx.push(("reference_expr".into(), pycall::base_name(&k.args[0]).to_string()));
            c.expr = Some(e);
            c.confidence = Confidence::Possible;
            c.missing.push("The device of each loss input (the message names no argument)".into());
            c.next_action = audit.clone();
            return Some(c);
        }
    }
    if target.is_empty() {
        return None;
    }
    // A tensor attribute used as an operand inside `forward` (`x * self.mask`).
    if let Some(attr) = plain_self_attribute(&code) {
        if in_forward {
            c.kind = "unregistered-tensor-attribute".into();
            c.summary = format!("`{attr}` is used as a tensor in `forward`; if it was assigned as a plain attribute (not `register_buffer`), `model.to()` left it on {stray} while the input is on {target}");
            c.expr = Some(attr);
            c.confidence = Confidence::Possible;
            c.missing.push("Whether that attribute is a registered buffer or parameter".into());
            c.next_action = audit.clone();
            return Some(c);
        }
    }
    c.summary = format!(
        "two operands of one operation are on {target} and {stray}; the message does not say which is misplaced"
    );
    c.missing.push("The device of each operand on the failing line".into());
    c.next_action = audit
        .or(Some("Rerun with the failing line's operands printed: `print(t.device)` for each tensor it uses.".into()));
    Some(c)
}

/// The first `self.name` on a source line used as a value, not called (`x * self.mask`).
fn plain_self_attribute(code: &str) -> Option<String> {
    let mut from = 0;
    while let Some(i) = code[from..].find("self.") {
        let start = from + i;
        let rest = &code[start + 5..];
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '.').collect();
        let after = rest[name.len()..].trim_start();
        let name = name.trim_end_matches('.');
        if !name.is_empty() && !after.starts_with('(') && !after.starts_with('=') {
            return Some(format!("self.{name}"));
        }
        from = start + 5;
    }
    None
}

/// A ready-to-paste audit of the tensors on the failing line.
fn audit_snippet(line: &pycall::Line) -> Option<String> {
    let mut names: Vec<String> = Vec::new();
    for k in &line.calls {
        for a in k.args.iter().chain(k.kwargs.iter().map(|(_, v)| v)) {
            let b = pycall::base_name(a);
            if !b.is_empty()
                && b.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
                && !b.contains('(')
                && !names.iter().any(|n| n == b)
            {
                names.push(b.to_string());
            }
        }
    }
    if names.is_empty() {
        return None;
    }
    let pairs: Vec<String> = names.iter().map(|n| format!("(\"{}\", {n})", n.replace('"', "'"))).collect();
    Some(format!(
        "Print the device of each operand just before the failing line: `for name, t in [{}]: print(name, getattr(t, \"device\", type(t)))`",
        pairs.join(", ")
    ))
}

/// Identity of a failure across ranks.
fn dedupe_key(f: &Finding) -> String {
    key_of(&f.id, &f.evidence)
}

/// Merges the same failure reported by several ranks, assigns roles and orders the
/// findings: initiating first, then in order of appearance.
pub(crate) fn roles(drafts: Vec<Draft>, ranks_seen: &[u32]) -> (Option<usize>, Vec<Finding>, Vec<TimelineEntry>) {
    // Merge duplicates across ranks (and repeated identical reports). A rule matched
    // twice on the same lines of the same rank is one report too: a garbled line
    // (`Killed Killed`) or two processes' output run together on one line
    // (`task 0: Killedsrun: error: ... task 1: Killed`) names one failure.
    let same_report = |m: &Draft, d: &Draft| {
        let (a, b) = (&m.finding, &d.finding);
        m.key == d.key
            || (a.id == b.id
                && a.rank == b.rank
                && a.location.line <= b.location.end_line
                && b.location.line <= a.location.end_line)
    };
    let mut merged: Vec<Draft> = Vec::new();
    for d in drafts {
        if let Some(m) = merged.iter_mut().find(|m| same_report(m, &d)) {
            if let Some(r) = d.finding.rank {
                m.finding.ranks.push(r);
            }
            m.per_rank.extend(d.per_rank.iter().cloned());
            m.reports += 1;
            if d.ts.is_some() && (m.ts.is_none() || d.ts < m.ts) && m.finding.rank.is_some() {
                m.ts = m.ts.or(d.ts);
            }
            continue;
        }
        let mut d = d;
        if let Some(r) = d.finding.rank {
            d.finding.ranks.push(r);
        }
        merged.push(d);
    }
    for m in &mut merged {
        m.finding.ranks.sort_unstable();
        m.finding.ranks.dedup();
        if m.finding.ranks.len() < 2 {
            m.finding.ranks.clear();
        }
    }
    if merged.is_empty() {
        return (None, Vec::new(), Vec::new());
    }
    // The earliest non-collateral failure; a recognised one beats an unknown exception.
    let earlier = |a: &Draft, b: &Draft| match (a.ts, b.ts) {
        (Some(x), Some(y)) if x != y => x < y,
        _ => a.finding.location.line < b.finding.location.line,
    };
    let pick = |pred: &dyn Fn(&Draft) -> bool| {
        let mut best: Option<usize> = None;
        for (i, d) in merged.iter().enumerate() {
            if pred(d) && best.is_none_or(|b| earlier(d, &merged[b])) {
                best = Some(i);
            }
        }
        best
    };
    // A rule unsure of its own match (`possible`: a bare `Killed` in an application's
    // log line) does not start the collapse ahead of a failure some rule is sure of.
    let sure = |d: &Draft| d.finding.confidence != Confidence::Possible;
    let init = pick(&|d| !d.collateral && d.recognized && !d.handled && sure(d))
        .or_else(|| pick(&|d| !d.collateral && d.recognized && !d.handled))
        .or_else(|| pick(&|d| !d.collateral && !d.handled))
        .or_else(|| cascade(&merged))
        .or_else(|| pick(&|d| d.collateral))
        .or_else(|| pick(&|_| true));
    let only_collateral = init.is_some_and(|i| merged[i].collateral);
    if only_collateral {
        if let Some(i) = init {
            let suspect = suspect_rank(&merged, i, ranks_seen);
            if let Some(r) = suspect {
                let f = &mut merged[i].finding;
                f.rank = Some(r);
                f.evidence.insert("suspect_rank".into(), Value::from(r));
            }
            // An exception a rank caught and logged before the echoes began is the
            // likeliest origin: it is where that rank's code path diverged.
            let origin = merged
                .iter()
                .position(|d| d.handled && !d.collateral && d.finding.rank.is_some() && d.finding.rank == suspect)
                .or_else(|| {
                    merged
                        .iter()
                        .position(|d| d.handled && !d.collateral && (d.finding.rank.is_none() || suspect.is_none()))
                });
            if let Some(o) = origin {
                let src = merged[o].finding.evidence.clone();
                let line = merged[o].finding.location.line;
                let f = &mut merged[i].finding;
                for k in ["failing_frame", "failing_code"] {
                    if let Some(v) = src.get(k) {
                        f.evidence.insert(k.into(), v.clone());
                    }
                }
                if let Some(m) = src.get("message") {
                    f.evidence.insert("origin_message".into(), m.clone());
                }
                f.missing.insert(0, format!("Whether the exception logged at line {line} (caught, then training went on) made this rank skip a collective the others entered"));
            }
        }
    }
    let mut order: Vec<usize> = (0..merged.len()).collect();
    if let Some(i) = init {
        order.retain(|&k| k != i);
        order.insert(0, i);
    }
    // Input order: a total order (mixing timestamps with line numbers is not one, and
    // an inconsistent comparator makes sorting panic).
    let timeline_order = {
        let mut t: Vec<usize> = (0..merged.len()).collect();
        t.sort_by_key(|&k| (merged[k].finding.location.line, k));
        t
    };
    let pos = |k: usize| order.iter().position(|&o| o == k).unwrap_or(0);
    let mut out: Vec<Finding> = Vec::with_capacity(merged.len());
    for &k in &order {
        let d = &merged[k];
        let mut f = d.finding.clone();
        f.role = if Some(k) == init {
            Role::Initiating
        } else if d.collateral {
            Role::Collateral
        } else {
            Role::Independent
        };
        if f.role == Role::Collateral {
            f.collateral_of = init.map(pos);
        }
        out.push(f);
    }
    // A multi-process run whose initiating traceback carries no rank (torch <= 2.2
    // prints worker tracebacks without `[rankN]:`): say so rather than guess.
    let multi_process = out.iter().any(|f| f.family == "elastic-child-failed" || f.rank.is_some());
    let worker_traceback = |h: &Finding| h.evidence.contains_key("failing_frame") && h.family != "elastic-child-failed";
    if let Some(head) = out.first_mut().filter(|h| {
        !only_collateral && h.role == Role::Initiating && h.rank.is_none() && multi_process && worker_traceback(h)
    }) {
        head.missing.push("Which rank raised this: the workers' lines carry no `[rankN]:` prefix in this log (torch before 2.3 does not add one)".into());
        head.next_action = format!("{} To tie it to a rank, rerun with `torchrun --tee 3` (lines get `[default<local_rank>]:`) or set `TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE='[${{rank}}]:'`.", head.next_action);
    }
    if only_collateral {
        let head = &mut out[0];
        head.missing.insert(0, "The traceback of the rank that failed first: this log holds only downstream reports (timeouts, closed connections, launcher summaries)".into());
        if let Some(r) = head.rank {
            head.next_action = format!("Collect rank {r}'s own output (its stderr, or rerun with `torchrun --tee 3` / `--redirects 3 --log-dir logs`) and diagnose that: this log shows only the echo of its failure. {}", head.next_action);
        }
    }
    let timeline = timeline_order
        .iter()
        .map(|&k| {
            let d = &merged[k];
            let f = &d.finding;
            let who = if !f.ranks.is_empty() {
                format!("ranks {}", compress_ranks(&f.ranks))
            } else if let Some(r) = f.rank {
                format!("rank {r}")
            } else {
                "launcher".to_string()
            };
            let what = f.evidence.get("exception").map(render::value_text).unwrap_or_else(|| f.title.clone());
            TimelineEntry {
                time: d.ts.map(|t| t.clock()),
                ranks: if f.ranks.is_empty() { f.rank.into_iter().collect() } else { f.ranks.clone() },
                finding: pos(k),
                text: format!("{who}: {what} ({})", f.id),
            }
        })
        .collect();
    (init.map(pos), out, timeline)
}

/// When only echoes are present: the collateral rule reported by the most ranks (the
/// cascade), which best locates the failure. Returns its first report.
fn cascade(merged: &[Draft]) -> Option<usize> {
    let mut by_rule: BTreeMap<&str, (BTreeSet<u32>, usize, usize)> = BTreeMap::new();
    for (i, d) in merged.iter().enumerate().filter(|(_, d)| d.collateral && d.finding.family != "elastic-child-failed")
    {
        let e = by_rule.entry(d.finding.id.as_str()).or_insert((BTreeSet::new(), 0, i));
        e.0.extend(d.per_rank.iter().map(|(r, _)| *r));
        e.1 += d.reports;
    }
    by_rule
        .values()
        .filter(|(rs, n, _)| rs.len() >= 2 || *n >= 2)
        .max_by_key(|(rs, n, i)| (rs.len(), *n, std::cmp::Reverse(*i)))
        .map(|(_, _, i)| *i)
}

/// The rank the echoes point at: the one rank whose report differs from all the others
/// (it stood at another collective), else the one rank missing from the reports, else
/// the launcher's root cause.
fn suspect_rank(merged: &[Draft], i: usize, ranks_seen: &[u32]) -> Option<u32> {
    let id = &merged[i].finding.id;
    let per_rank: Vec<&(u32, Option<String>)> =
        merged.iter().filter(|d| d.finding.id == *id).flat_map(|d| d.per_rank.iter()).collect();
    let mut frames: BTreeMap<Option<String>, BTreeSet<u32>> = BTreeMap::new();
    for (r, f) in &per_rank {
        frames.entry(f.clone()).or_default().insert(*r);
    }
    let reporting: BTreeSet<u32> = per_rank.iter().map(|(r, _)| *r).collect();
    if frames.len() == 2 && reporting.len() >= 3 {
        if let Some((_, rs)) = frames.iter().find(|(_, rs)| rs.len() == 1) {
            return rs.first().copied();
        }
    }
    let absent: Vec<u32> = ranks_seen.iter().filter(|r| !reporting.contains(r)).copied().collect();
    if absent.len() == 1 && !reporting.is_empty() {
        return absent.first().copied();
    }
    // A rank that logged an exception and carried on, before the echoes.
    if let Some(r) = merged.iter().find(|d| d.handled && !d.collateral).and_then(|d| d.finding.rank) {
        return Some(r);
    }
    merged.iter().find(|m| m.finding.family == "elastic-child-failed").and_then(|m| m.finding.rank)
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
    fn kernels() {
        let table = [
            ("wrapper_CUDA_nll_loss_forward", Some("CUDA"), "nll_loss_forward"),
            ("wrapper_CUDA__index_select", Some("CUDA"), "index_select"),
            ("wrapper_CUDA___embedding_bag", Some("CUDA"), "_embedding_bag"),
            ("wrapper_addmm", None, "addmm"),
            ("wrapper__index_select", None, "index_select"),
            ("wrapper_SparseCUDA__addmm", Some("SparseCUDA"), "addmm"),
            ("addmm", None, "addmm"),
        ];
        for (k, key, op) in table {
            assert_eq!(split_kernel(k), (key, op.to_string()), "{k}");
        }
    }

    #[test]
    fn rank_ranges() {
        assert_eq!(compress_ranks(&[0, 1, 2, 3, 5, 7, 8]), "0-3,5,7,8");
        assert_eq!(compress_ranks(&[4]), "4");
    }
}
