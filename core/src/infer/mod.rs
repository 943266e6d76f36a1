//! Inference: events become findings.
//!
//! Everything here is a pure function of what matching extracted. For each event (one
//! per traceback chain, plus loose lines of the same failure merged in) the evidence is
//! assembled from its incident and captures, the facts the rule declares are computed
//! ([`facts`]), the rule's `[[culprit_case]]` decisions and `[[case]]`s are tried in
//! order on them, and the rule text is rendered against the result. A traceback chain
//! no template matched goes to the pack's fallback rule. Finally [`roles`] merges the
//! same failure across ranks and decides which failure initiated the collapse.
//!
//! No rule id, family id or message wording lives here: a rule's behaviour is its file.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::grammar::topology::{self, Topology};
use crate::grammar::traceback::Frame;
use crate::ingest::Timestamp;
use crate::report::{value_text, Culprit, Evidence, Finding, Location, Role, Trace};
use crate::rules::codes;
use crate::rules::conditions::holds;
use crate::rules::evidence::{captures_to_evidence, derive, LogFacts};
use crate::rules::facts::DEVICE_PLACEMENT;
use crate::rules::matching::{one_line, Event, Incident, Loose, Stream};
use crate::rules::pack::{Pack, Rule};
use crate::rules::spec::{CaseSpec, CulpritCase, CulpritSpec};
use crate::rules::text::{self, Context};

mod admit;
pub(crate) mod facts;
mod flood;
mod roles;

use admit::{Admit, Verdict};
use flood::{Route, Seen};

pub(crate) use roles::{roles, Run};

/// A finding before roles are assigned.
#[derive(Clone, Debug)]
pub(crate) struct Draft {
    pub finding: Finding,
    pub collateral: bool,
    /// Made by a rule's template (not by the fallback rule).
    pub recognized: bool,
    /// Made by a rule that is a launcher's summary of failed workers.
    pub launcher: bool,
    /// Made by a rule whose message is printed while the job is torn down.
    pub teardown: bool,
    /// Printed by a logger and survived (`logger.exception(...)` then carried on).
    pub handled: bool,
    pub ts: Option<Timestamp>,
    /// For merged reports: each rank's own report.
    pub per_rank: Vec<RankReport>,
    /// How many reports were merged into this one.
    pub reports: usize,
    key: String,
}

/// One rank's report of a failure several ranks reported (merged into one finding).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RankReport {
    pub rank: u32,
    /// Where it stood: its failing frame, or the collective's sequence number. Ranks
    /// echoing one failure stand at one place.
    pub place: Option<String>,
    /// The count the rule's `progress` key names (`last enqueued NCCL work`).
    pub progress: Option<u64>,
    /// Its first line.
    pub line: u64,
}

/// Builds one draft per event (one per traceback chain) and one per chain no rule knows,
/// within the bounds of [`admit`] (a rule's distinct messages and a key's reports).
pub(crate) fn findings(pack: &Pack, streams: &[Stream<'_>], log: &LogFacts<'_>) -> Vec<Draft> {
    let mut admit = Admit::default();
    let mut cache: BTreeMap<String, Bound> = BTreeMap::new();
    let mut chosen: Vec<Chosen> = Vec::new();
    let mut loose: Vec<(usize, Event)> = Vec::new();
    for (si, s) in streams.iter().enumerate() {
        // One event per traceback chain: the best by priority, then the earliest.
        let mut best_per_chain: BTreeMap<usize, Event> = BTreeMap::new();
        for e in &s.events {
            match e.tb {
                Some(t) => {
                    let chain = s.tracebacks[t].chain;
                    // A whole message before a cut or headless one (as matching sorts),
                    // then priority: a cut match of a rule that outranks never beats
                    // the whole message another rule read.
                    let rough = |x: &Event| x.m.truncated || x.m.head_missing;
                    let better = match best_per_chain.get(&chain) {
                        None => true,
                        Some(cur) => {
                            (!rough(e), pack.rules()[e.rule].spec.priority)
                                > (!rough(cur), pack.rules()[cur.rule].spec.priority)
                        }
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
        chosen.push(Chosen::new(s, best_per_chain));
    }
    // A loose line of the same failure outside the traceback (a CUDA assertion line,
    // the launcher's `failed (exitcode ...)`) joins it: in its own stream first, else,
    // for unranked lines, the same failure on any rank. A line printed right beside a
    // traceback by a rule that knows more (a kernel's `Xid 79` after `unspecified launch
    // failure`, inductor's warning naming the resource after `BackendCompilerFailed`)
    // takes the traceback over. A later exception of the same rule, printed with its own
    // class away from the traceback, is a failure of its own. Every lookup is by rule
    // and by line, never a pass over every chain (20,000 loose lines beside 20,000
    // tracebacks were 400 million checks).
    let rules = pack.rules();
    let mut unmerged: Vec<(usize, Event)> = Vec::new();
    for (si, e) in loose {
        let own_class = streams[si].lines.get(e.first).is_some_and(|l| {
            let col = e.m.start.saturating_sub(streams[si].line_start(e.first));
            crate::rules::matching::own_class_before(&l.text, col, &pack.ingest().exception_classes)
        });
        let c = &mut chosen[si];
        let same_rule = if own_class { c.near_of_rule(e.rule, e.first) } else { c.first_of_rule(e.rule) };
        if let Some(b) = same_rule.and_then(|chain| c.events.get_mut(&chain)) {
            merge_captures(b, &e);
            continue;
        }
        let knows_more = |b: &Event| {
            let (lr, cr) = (&rules[e.rule], &rules[b.rule]);
            lr.spec.priority > cr.spec.priority
                && (lr.family() == cr.family() || lr.spec.related.iter().any(|r| r == cr.id()))
        };
        // The launcher's own line may come first (torchrun's `failed (exitcode: -9)` right
        // above its ChildFailedError traceback).
        let placed = |ch: usize| c.starts_before(ch, e.first) || rules[c.events[&ch].rule].spec.launcher_summary;
        if let Some(chain) = c.near(e.first).into_iter().find(|&ch| placed(ch) && knows_more(&c.events[&ch])) {
            let b = &c.events[&chain];
            let mut over = e.clone();
            over.tb = b.tb;
            merge_captures(&mut over, b);
            c.replace(chain, over);
            continue;
        }
        if streams[si].rank.is_none() && !own_class {
            if let Some(b) =
                chosen.iter_mut().find_map(|c| c.first_of_rule(e.rule).and_then(|ch| c.events.get_mut(&ch)))
            {
                merge_captures(b, &e);
                continue;
            }
        }
        // One launcher report spans its lines (the agent's `failed (exitcode ...)` line,
        // its summary below): its loose pieces in one stream are one finding.
        if rules[e.rule].spec.launcher_summary {
            if let Some((_, b)) = unmerged
                .iter_mut()
                .rev()
                .find(|(sj, b)| *sj == si && b.rule == e.rule && e.first.abs_diff(b.last) <= 64)
            {
                merge_captures(b, &e);
                b.last = b.last.max(e.last);
                continue;
            }
        }
        unmerged.push((si, e));
    }
    for (si, c) in chosen.iter().enumerate() {
        for e in c.events.values() {
            admit_event(pack, &streams[si], si, e, log, &mut cache, &mut admit);
        }
    }
    for (si, e) in &unmerged {
        admit_event(pack, &streams[*si], *si, e, log, &mut cache, &mut admit);
    }
    for s in streams {
        for u in &s.unread {
            let line = |i: usize| s.lines.get(i).map_or(0, |l| l.no);
            admit.omit_many(rules[u.rule].id(), u.count, (line(u.first), line(u.last)), s.rank);
        }
    }
    if let Some(rule) = pack.fallback() {
        let ri = rules.iter().position(|r| r.id() == rule.id()).unwrap_or(usize::MAX);
        for (si, s) in streams.iter().enumerate() {
            for chain in s.tracebacks.iter().map(|t| t.chain).collect::<BTreeSet<usize>>() {
                if chosen[si].events.contains_key(&chain) {
                    continue;
                }
                if let Some(p) = unrecognized(rule, s, chain, log) {
                    admit_fallback(pack, rule, si, ri, p, log, &mut admit);
                }
            }
        }
        // Exceptions shown outside any traceback: never silent. An error log line no
        // rule knows is reported only when nothing else is.
        for (si, s) in streams.iter().enumerate() {
            for x in s.loose.iter().filter(|x| x.class.is_some()) {
                admit_fallback(pack, rule, si, ri, loose_prepared(rule, s, x, log), log, &mut admit);
            }
        }
        if admit.is_empty() {
            for (si, s) in streams.iter().enumerate() {
                for x in s.loose.iter().filter(|x| x.class.is_none()) {
                    admit_fallback(pack, rule, si, ri, loose_prepared(rule, s, x, log), log, &mut admit);
                }
            }
        }
    }
    admit.finish()
}

/// The events chosen in one stream (one per traceback chain), indexed by rule and by
/// the lines each chain spans.
struct Chosen {
    events: BTreeMap<usize, Event>,
    /// Per rule: its chains, ascending.
    by_rule: BTreeMap<usize, Vec<usize>>,
    /// Every chain of the stream with its first and last line (message included),
    /// ascending: chains are printed one after another, so their spans are in order.
    spans: Vec<(usize, usize, usize)>,
}

impl Chosen {
    fn new(s: &Stream<'_>, events: BTreeMap<usize, Event>) -> Chosen {
        let mut by_rule: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (&chain, e) in &events {
            by_rule.entry(e.rule).or_default().push(chain);
        }
        let mut spans: Vec<(usize, usize, usize)> = Vec::new();
        for t in &s.tracebacks {
            let last = t.end.max(t.exception.as_ref().map_or(0, |x| x.last));
            match spans.last_mut() {
                Some(sp) if sp.0 == t.chain => {
                    sp.1 = sp.1.min(t.start);
                    sp.2 = sp.2.max(last);
                }
                _ => spans.push((t.chain, t.start, last)),
            }
        }
        Chosen { events, by_rule, spans }
    }

    /// The first chain whose event is of `rule`.
    fn first_of_rule(&self, rule: usize) -> Option<usize> {
        self.by_rule.get(&rule)?.first().copied()
    }

    /// Chains with an event that span lines within two of `line`, ascending.
    fn near(&self, line: usize) -> Vec<usize> {
        // Spans are in order and do not overlap between chains: only the few around
        // `line` can be near it.
        let at = self.spans.partition_point(|sp| sp.1 <= line + 2);
        let mut out: Vec<usize> = self.spans[..at]
            .iter()
            .rev()
            .take(4)
            .filter(|sp| line <= sp.2 + 2 && self.events.contains_key(&sp.0))
            .map(|sp| sp.0)
            .collect();
        out.sort_unstable();
        out
    }

    /// The first chain near `line` whose event is of `rule`.
    fn near_of_rule(&self, rule: usize, line: usize) -> Option<usize> {
        self.near(line).into_iter().find(|ch| self.events.get(ch).is_some_and(|e| e.rule == rule))
    }

    /// Whether chain `chain` starts before `line`.
    fn starts_before(&self, chain: usize, line: usize) -> bool {
        self.spans.binary_search_by_key(&chain, |sp| sp.0).is_ok_and(|i| line > self.spans[i].1)
    }

    /// Puts `e` in chain `chain`'s place, re-indexing it under its rule.
    fn replace(&mut self, chain: usize, e: Event) {
        if let Some(old) = self.events.get(&chain) {
            if let Some(v) = self.by_rule.get_mut(&old.rule) {
                v.retain(|&c| c != chain);
            }
        }
        let v = self.by_rule.entry(e.rule).or_default();
        let at = v.partition_point(|&c| c < chain);
        v.insert(at, chain);
        self.events.insert(chain, e);
    }
}

/// A report before its rule text is bound: enough to decide what becomes of it
/// ([`Admit`]) without the cost of a finding.
struct Prepared<'s> {
    inc: Incident<'s>,
    ev: Evidence,
    rank: Option<u32>,
    key: String,
}

impl Prepared<'_> {
    /// Its own record in a merged finding.
    fn rank_report(&self, progress: Option<u64>) -> Option<RankReport> {
        let place = place_of(&self.ev);
        self.rank.map(|rank| RankReport { rank, place, progress, line: self.inc.location.line })
    }
}

/// An exception shown outside a traceback (or an error log line), for the pack's
/// fallback rule; `shown_as` says how the line showed it.
fn loose_prepared<'s>(rule: &Rule, s: &'s Stream<'_>, x: &'s Loose, log: &LogFacts<'_>) -> Prepared<'s> {
    let inc = s.loose_incident(x);
    let mut ev = incident_evidence(&inc);
    ev.insert("shown_as", Value::from(x.shape));
    let rank = resolve_rank(inc.rank, inc.local_rank, inc.host.as_deref(), &mut ev, log);
    scrub_identity(&mut ev);
    let key = key_of(rule.id(), &ev);
    Prepared { inc, ev, rank, key }
}

/// Admits a report of the fallback rule (an exception no template matched): bound to
/// its text only when it is kept.
fn admit_fallback(
    pack: &Pack,
    rule: &Rule,
    si: usize,
    ri: usize,
    p: Prepared<'_>,
    log: &LogFacts<'_>,
    admit: &mut Admit,
) {
    match admit.verdict(si, ri, &p.key) {
        Verdict::Fold(into) => admit.fold(into, p.rank, p.rank_report(None)),
        Verdict::Omit => admit.omit(rule.id(), p.inc.location.line, p.rank),
        Verdict::Keep => {
            let frames = &p.inc.frames;
            let ctx = Bind { pack, rule, frames, log, rank: p.rank, location: p.inc.location, role_op: None };
            let mut ev = p.ev.clone();
            scrub_rest(&mut ev);
            let (finding, case) = bind(&ctx, ev);
            let per_rank = per_rank_of(&finding);
            admit.keep(Draft {
                collateral: case.collateral.unwrap_or(rule.spec.collateral),
                recognized: false,
                launcher: rule.spec.launcher_summary,
                teardown: case.teardown.unwrap_or(rule.spec.teardown),
                handled: p.inc.handled,
                ts: p.inc.ts,
                per_rank,
                reports: 1,
                key: dedupe_key(&finding),
                finding,
            });
        }
    }
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
type Bound = (Finding, CaseRole);

/// What the chosen `[[case]]` says of the finding's role, over the rule's defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct CaseRole {
    collateral: Option<bool>,
    teardown: Option<bool>,
}

/// What a rule's text is bound to: the finding's evidence and where it stands.
struct Bind<'a> {
    pack: &'a Pack,
    rule: &'a Rule,
    frames: &'a [&'a Frame],
    log: &'a LogFacts<'a>,
    rank: Option<u32>,
    location: Location,
    /// The op whose argument roles apply when the message names none.
    role_op: Option<&'a str>,
}

/// Admits the report of a template match: its evidence and key first, its rule text
/// bound (once per key, cached) only when it is kept.
fn admit_event(
    pack: &Pack,
    s: &Stream<'_>,
    si: usize,
    e: &Event,
    log: &LogFacts<'_>,
    cache: &mut BTreeMap<String, Bound>,
    admit: &mut Admit,
) {
    let rule = &pack.rules()[e.rule];
    // A flood of loose reports is read by what each matched ([`flood`]).
    let mut mark = None;
    if e.tb.is_none() {
        let may_keep_new = admit.may_keep_new(si, e.rule);
        match admit.flood.route(s, si, e, may_keep_new) {
            Route::Read(m) => mark = Some(m),
            Route::Known(i) => {
                let Seen { key, place } = admit.flood.seen(i);
                if let Some(v) = admit.settled(si, e.rule, key) {
                    let place = place.clone();
                    let (rank, progress) = rank_of_mark(pack, s, e, log);
                    let line = s.span(e.first, e.last).line;
                    match v {
                        Verdict::Fold(into) => {
                            let own = rank.map(|rank| RankReport { rank, place, progress, line });
                            admit.fold(into, rank, own);
                        }
                        _ => admit.omit(rule.id(), line, rank),
                    }
                    return;
                }
            }
            Route::Count => {
                let (rank, _) = rank_of_mark(pack, s, e, log);
                return admit.omit(rule.id(), s.lines.get(e.first).map_or(0, |l| l.no), rank);
            }
        }
    }
    let inc = s.incident(e, &pack.ingest().exception_classes);
    let mut ev = incident_evidence(&inc);
    let spec = &rule.spec.matches[e.template];
    // What the wording implies goes in before derivation reads it (`argument_device`).
    match_facts(rule, e, &mut ev);
    derive(&mut ev);
    scrub_identity(&mut ev);
    if let Some(v) = &spec.torch {
        ev.insert("torch_versions", Value::from(v.clone()));
    }
    let rank = resolve_rank(inc.rank.or_else(|| evidence_rank(&ev)), inc.local_rank, inc.host.as_deref(), &mut ev, log);
    // The same failure reported by many ranks is bound to its rule text once: later
    // reports reuse that text and keep only their own rank, place and location.
    let key = key_of(rule.id(), &ev);
    if let Some(m) = mark {
        admit.flood.learn(e.rule, m, Seen { key: key.clone(), place: place_of(&ev) });
    }
    // Read before the cache: a merged report keeps the first rank's evidence.
    let progress = progress_of(rule, &ev);
    let p = Prepared { inc, ev, rank, key };
    match admit.verdict(si, e.rule, &p.key) {
        Verdict::Fold(into) => return admit.fold(into, p.rank, p.rank_report(progress)),
        // Counted at its message's line, as matching counts what it does not read.
        Verdict::Omit => return admit.omit(rule.id(), s.lines.get(e.first).map_or(0, |l| l.no), p.rank),
        Verdict::Keep => {}
    }
    let per_rank = p.rank_report(progress).into_iter().collect();
    let Prepared { inc, ev, rank, key } = p;
    let (mut finding, case) = match cache.get(&key) {
        Some(b) => b.clone(),
        None => {
            let role_op = spec.role_op.as_deref();
            let ctx = Bind { pack, rule, frames: &inc.frames, log, rank, location: inc.location, role_op };
            let mut ev = ev;
            scrub_rest(&mut ev);
            let b = bind(&ctx, ev);
            cache.insert(key.clone(), b.clone());
            b
        }
    };
    finding.rank = rank;
    finding.location = inc.location;
    admit.keep(Draft {
        collateral: case.collateral.unwrap_or(rule.spec.collateral),
        recognized: true,
        launcher: rule.spec.launcher_summary,
        teardown: case.teardown.unwrap_or(rule.spec.teardown),
        handled: inc.handled,
        ts: inc.ts,
        per_rank,
        reports: 1,
        key,
        finding,
    });
}

/// The rank and progress count of a loose report read by its mark alone: what its line's
/// prefix or label and its own captures say, as [`resolve_rank`] settles them.
fn rank_of_mark(pack: &Pack, s: &Stream<'_>, e: &Event, log: &LogFacts<'_>) -> (Option<u32>, Option<u64>) {
    let rule = &pack.rules()[e.rule];
    let mut ev = Evidence::new();
    match_facts(rule, e, &mut ev);
    let (local, host) = s.local_at(e.first);
    let rank = resolve_rank(s.rank_at(e.first).or_else(|| evidence_rank(&ev)), local, host.as_deref(), &mut ev, log);
    (rank, progress_of(rule, &ev))
}

/// What a match itself says: its captures, then what its template's wording implies
/// (the `[[match]]`'s `set`).
fn match_facts(rule: &Rule, e: &Event, ev: &mut Evidence) {
    captures_to_evidence(&e.m, ev);
    for (k, v) in &rule.spec.matches[e.template].set {
        ev.insert(k, Value::from(v.clone()));
    }
}

/// The count a rule's `progress` key names (`last enqueued NCCL work`), when the
/// evidence holds it.
fn progress_of(rule: &Rule, ev: &Evidence) -> Option<u64> {
    rule.spec.progress.as_deref().and_then(|k| ev.get(k)).and_then(|v| v.as_u64())
}

/// The evidence an incident gives by itself: exception, message, failing frame and code.
fn incident_evidence(inc: &Incident<'_>) -> Evidence {
    let mut ev = Evidence::new();
    ev.exception = inc.exception.clone();
    ev.message = inc.message.clone();
    if let Some(f) = inc.user_frame {
        ev.failing_frame = Some(f.short());
        ev.failing_code = f.code.clone();
    }
    ev
}

/// A rank the message itself names (a launcher's root-cause block).
fn evidence_rank(ev: &Evidence) -> Option<u32> {
    let r = ev.extra.get("rank").and_then(Value::as_u64).and_then(|r| u32::try_from(r).ok());
    r.filter(|&r| r < crate::ingest::window::MAX_RANK)
}

/// The global rank of a failure: the one a prefix or the message names, else its local
/// rank (a launcher's label or `local_rank: N`) where the job's shape settles it: on
/// one node it is the global rank, on several it is derived from the node's index and
/// size when the log gives them, else unknown (`rank` null, `local_rank` and `host` in
/// evidence). `rank_from` says how a local rank became the global one.
fn resolve_rank(
    rank: Option<u32>,
    local: Option<u32>,
    host: Option<&str>,
    ev: &mut Evidence,
    log: &LogFacts<'_>,
) -> Option<u32> {
    if let Some(h) = host {
        ev.insert_if_absent("host", Value::from(h));
    }
    if rank.is_some() {
        return rank;
    }
    // A template's `set` gives text (`local_rank = "0"`), a capture a number.
    let as_rank = |v: &Value| v.as_u64().or_else(|| v.as_str()?.parse().ok()).and_then(|r| u32::try_from(r).ok());
    let local = local.or_else(|| ev.extra.get("local_rank").and_then(as_rank));
    if let Some(l) = local {
        // A number, also where a template's `set` wrote it as text.
        if ev.extra.get("local_rank").is_some_and(Value::is_string) {
            ev.insert("local_rank", Value::from(l));
        }
        ev.insert_if_absent("local_rank", Value::from(l));
    }
    let (global, basis) = log.topology.global(local?)?;
    ev.insert("rank_from", Value::from(basis));
    Some(global)
}

/// The ranks a launcher's summary lists as failed on their own: every entry but those
/// the agent stopped with SIGTERM (`exitcode: -15`) while tearing the job down.
pub(crate) fn failed_ranks(streams: &[Stream<'_>]) -> Vec<u32> {
    let mut out: Vec<u32> =
        streams.iter().flat_map(|s| s.elastic.iter()).filter(|e| e.exitcode != Some(-15)).map(|e| e.rank).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The ranks a launcher's summary lists as failing first: its entries that did not exit
/// with the agent's SIGTERM, at the earliest `time` printed (one-second resolution, so
/// workers that failed together tie). Entries without a time are all first.
pub(crate) fn first_failed_ranks(streams: &[Stream<'_>]) -> Vec<u32> {
    let entries: Vec<_> = streams.iter().flat_map(|s| s.elastic.iter()).filter(|e| e.exitcode != Some(-15)).collect();
    let earliest = entries.iter().filter_map(|e| e.time.as_deref()).min();
    let mut out: Vec<u32> =
        entries.iter().filter(|e| e.time.is_none() || e.time.as_deref() == earliest).map(|e| e.rank).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The job's shape, from every stream: hosts its labels and summaries name, the
/// launcher facts its lines state, ranks printed unlike their local ranks.
pub(crate) fn topology(streams: &[Stream<'_>]) -> Topology {
    let mut t = Topology::default();
    for s in streams {
        if let Some(h) = &s.host {
            t.add_host(h);
        }
        for e in &s.elastic {
            if let Some(h) = &e.host {
                t.add_host(h);
            }
            if e.local_rank.is_some_and(|l| l != e.rank) {
                t.rank_differs_from_local = true;
            }
        }
        for l in &s.lines {
            for f in topology::facts(&l.text) {
                t.add(f);
            }
        }
    }
    t
}

/// A traceback chain no template matched, for the pack's fallback rule.
fn unrecognized<'s>(rule: &Rule, s: &'s Stream<'_>, chain: usize, log: &LogFacts<'_>) -> Option<Prepared<'s>> {
    let (inc, final_exc) = s.chain_incident(chain)?;
    let mut ev = incident_evidence(&inc);
    let rank = resolve_rank(inc.rank, inc.local_rank, inc.host.as_deref(), &mut ev, log);
    if let Some(fx) = final_exc {
        ev.insert("final_exception", Value::from(fx.short_class()));
        ev.insert("final_message", Value::from(one_line(&fx.message)));
    }
    scrub_identity(&mut ev);
    let key = key_of(rule.id(), &ev);
    Some(Prepared { inc, ev, rank, key })
}

/// Where a report says its rank stood: its failing frame, or for a collective timeout
/// its sequence number (a rank at another collective is the straggler candidate).
fn place_of(ev: &Evidence) -> Option<String> {
    ev.failing_frame.clone().or_else(|| ev.extra.get(SEQ_KEY).map(|s| format!("seq {}", value_text(s))))
}

/// Identity of a failure across ranks: rule and message without numbers.
pub(super) fn key_of(id: &str, ev: &Evidence) -> String {
    let msg = ev.message.as_deref().unwrap_or_default();
    // A run of digits is one `#`: `[Rank 7]` and `[Rank 12]` are the same report.
    let mut key = format!("{id}\u{1}");
    crate::rules::matching::push_numberless(&mut key, msg);
    key
}

/// A report never repeats a credential the log happened to contain (a token in a
/// failing command line, an `Authorization` header in an HTTP error message). In two
/// steps: [`scrub_identity`] before a report is keyed, [`scrub_rest`] only once it is
/// kept (a folded report keeps its rank and place only). Scrubbing every field of every
/// report was a quarter of the time of a log of one message repeated.
fn clean(s: &mut String) {
    let c = crate::redact::scrub_secrets(s);
    if c != *s {
        *s = c;
    }
}

/// The fields a report's key and a folded report read: its message, failing frame and
/// collective sequence number ([`key_of`], [`place_of`]).
fn scrub_identity(ev: &mut Evidence) {
    for t in [&mut ev.message, &mut ev.failing_frame].into_iter().flatten() {
        clean(t);
    }
    if let Some(Value::String(s)) = ev.extra.get_mut(SEQ_KEY) {
        clean(s);
    }
}

/// Every other text of a kept report.
fn scrub_rest(ev: &mut Evidence) {
    let texts = [&mut ev.exception, &mut ev.argument, &mut ev.op, &mut ev.kernel, &mut ev.failing_code];
    for t in texts.into_iter().flatten() {
        clean(t);
    }
    for d in ev.devices.iter_mut().flatten() {
        clean(d);
    }
    for (k, v) in ev.extra.iter_mut() {
        if let Value::String(s) = v {
            if k != SEQ_KEY {
                clean(s);
            }
        }
    }
}

/// The evidence key of a collective's sequence number, a folded report's place.
const SEQ_KEY: &str = "seq";

fn per_rank_of(f: &Finding) -> Vec<RankReport> {
    f.rank
        .map(|rank| RankReport { rank, place: place_of(&f.evidence), progress: None, line: f.location.line })
        .into_iter()
        .collect()
}

/// Identity of a failure across ranks.
fn dedupe_key(f: &Finding) -> String {
    key_of(&f.id, &f.evidence)
}

/// Text items rendered, dropping those whose placeholders have no value, and repeats.
fn render_list(items: &[String], ctx: &Context) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in items.iter().filter_map(|t| text::render(t, ctx)) {
        if !t.trim().is_empty() && !out.iter().any(|o| o.trim() == t.trim()) {
            out.push(t);
        }
    }
    out
}

/// The culprit a decision names, and the values it gives the rule's text.
fn decide(c: &CulpritCase, ctx: &mut Context) -> Culprit {
    for (k, v) in &c.set {
        if let Some(v) = text::render(v, ctx) {
            ctx.insert(k.clone(), Value::from(v));
        }
    }
    let kind = text::render_lossy(&c.kind, ctx);
    let expr = c.expr.as_ref().and_then(|e| text::render(e, ctx));
    ctx.insert("culprit_kind".into(), Value::from(kind.clone()));
    if let Some(e) = &expr {
        ctx.insert("culprit_expr".into(), Value::from(e.clone()));
    }
    Culprit { kind, expr, summary: text::render_lossy(&c.summary, ctx) }
}

/// Rule text bound to the evidence: facts, culprit decision, case, placeholders.
fn bind(b: &Bind<'_>, mut ev: Evidence) -> Bound {
    let rule = b.rule;
    let mut ctx: Context = ev.to_map();
    // A rank the message itself names (a launcher's root-cause block) stands in for
    // the stream's when the line carried no rank prefix.
    let rank = b.rank.or_else(|| evidence_rank(&ev));
    if let Some(r) = rank {
        ctx.insert("rank".into(), Value::from(r));
    }
    facts::failing_line(&mut ev, &mut ctx);
    facts::library_frames(b.pack, b.frames, &mut ctx);
    // A captured error code read through the code tables: its row's meaning, causes and
    // first check become evidence and placeholders, and (where the rule asks) its family.
    let mut family = rule.family();
    if let Some(spec) = &rule.spec.lookup {
        if let Some(hit) = codes::lookup(b.pack.codes(), spec, |k| ctx.get(k).cloned()) {
            for (k, v) in hit.evidence() {
                ctx.insert(k.to_string(), v.clone());
                ev.extra.insert(k.to_string(), v);
            }
            if spec.family {
                family = hit.family();
            }
        }
    }
    if rule.spec.facts.iter().any(|g| g == DEVICE_PLACEMENT) {
        facts::device_placement(b.pack, &ev, b.frames, b.log, b.role_op, &mut ctx);
    }
    let decision = rule.spec.culprit_cases.iter().find(|c| holds(&c.when, &ctx, b.frames, b.log));
    let decided = decision.map(|d| decide(d, &mut ctx));
    let case = rule.spec.cases.iter().find(|c| holds(&c.when, &ctx, b.frames, b.log));
    let pick = |f: fn(&CaseSpec) -> Option<&String>, base: &String| case.and_then(f).unwrap_or(base).clone();
    let culprit_spec: Option<&CulpritSpec> = case.and_then(|c| c.culprit.as_ref()).or(rule.spec.culprit.as_ref());
    let case_confidence = case.and_then(|c| c.confidence);
    let (culprit, confidence) = match (culprit_spec, decided) {
        (Some(spec), _) => {
            let expr = spec.expr.as_ref().and_then(|e| text::render(e, &ctx));
            if let Some(e) = &expr {
                ctx.insert("culprit_expr".into(), Value::from(e.clone()));
            }
            ctx.insert("culprit_kind".into(), Value::from(spec.kind.clone()));
            let c = Culprit { kind: spec.kind.clone(), expr, summary: text::render_lossy(&spec.summary, &ctx) };
            (Some(c), case_confidence.unwrap_or(rule.spec.confidence))
        }
        (None, Some(c)) => {
            (Some(c), case_confidence.or(decision.map(|d| d.confidence)).unwrap_or(rule.spec.confidence))
        }
        (None, None) => (None, case_confidence.unwrap_or(rule.spec.confidence)),
    };
    if let Some(c) = &culprit {
        ctx.insert("culprit_summary".into(), Value::from(c.summary.clone()));
    }
    let checklist = render_list(case.and_then(|c| c.checklist.as_deref()).unwrap_or(&rule.spec.checklist), &ctx);
    let missing = match decision.and_then(|d| d.missing.as_deref()) {
        Some(m) => render_list(m, &ctx),
        None => render_list(case.and_then(|c| c.missing.as_deref()).unwrap_or(&rule.spec.missing), &ctx),
    };
    let next_action = decision
        .and_then(|d| d.next_action.as_ref())
        .and_then(|a| text::render(a, &ctx))
        .unwrap_or_else(|| text::render_lossy(&pick(|c| c.next_action.as_ref(), &rule.spec.next_action), &ctx));
    let finding = Finding {
        id: rule.id().to_string(),
        family: family.to_string(),
        title: text::render_lossy(&pick(|c| c.title.as_ref(), &rule.spec.title), &ctx),
        role: Role::Independent,
        collateral_of: None,
        rank,
        ranks: Vec::new(),
        confidence,
        location: b.location,
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
        trace: Trace { case: case.map(|c| c.name.clone()), culprit_case: decision.map(|d| d.name.clone()) },
    };
    (finding, CaseRole { collateral: case.and_then(|c| c.collateral), teardown: case.and_then(|c| c.teardown) })
}
