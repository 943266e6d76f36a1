//! Roles across ranks: the same failure reported by several ranks is merged, the
//! failure that started the collapse is picked, the others are its collateral or
//! independent, and the timeline is written.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use super::Draft;
use crate::report::{compress_ranks, Confidence, Finding, Role, TimelineEntry};
use crate::rules::spec::NoticesFile;

/// Merges the same failure reported by several ranks, assigns roles and orders the
/// findings: initiating first, then in order of appearance.
/// The result of [`roles`]: the initiating finding's index, the findings in report
/// order, the timeline.
pub(crate) struct Roles {
    pub initiating: Option<usize>,
    pub findings: Vec<Finding>,
    pub timeline: Vec<TimelineEntry>,
}

/// A notice's text rendered with the finding's own next action and the values given.
fn notice(text: &Option<String>, next_action: &str, values: &[(&str, String)]) -> Option<String> {
    let mut ctx = crate::rules::text::Context::new();
    ctx.insert("next_action".into(), Value::from(next_action));
    for (k, v) in values {
        ctx.insert((*k).into(), Value::from(v.clone()));
    }
    text.as_ref().and_then(|t| crate::rules::text::render(t, &ctx))
}

/// What the whole run shows beyond its findings.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Run<'a> {
    /// Ranks whose lines carried a rank prefix.
    pub ranks_seen: &'a [u32],
    /// Ranks a launcher's summary lists as failed on their own.
    pub failed: &'a [u32],
    /// Those of them that failed first (the earliest time the summary prints; ties kept).
    pub first_failed: &'a [u32],
    /// The job's world size, where the log states it.
    pub world: Option<u32>,
    /// Families of the pack's launcher-summary rules: an unranked teardown finding of
    /// one of them (the agent's SIGTERMs) is the launcher's.
    pub launcher_families: &'a [String],
}

pub(crate) fn roles(drafts: Vec<Draft>, run: Run<'_>, notices: &NoticesFile) -> Roles {
    let (ranks_seen, failed) = (run.ranks_seen, run.failed);
    // Merge duplicates across ranks (and repeated identical reports). A rule matched
    // twice on the same lines of the same rank is one report too: a garbled line
    // (`Killed Killed`) or two processes' output run together on one line
    // (`task 0: Killedsrun: error: ... task 1: Killed`) names one failure.
    // Grouped by key and by (rule, rank), never compared pairwise: 20,000 distinct
    // reports were 200 million comparisons.
    let overlaps = |a: &Draft, b: &Draft| {
        let (a, b) = (&a.finding.location, &b.finding.location);
        a.line <= b.end_line && b.line <= a.end_line
    };
    let mut merged: Vec<Draft> = Vec::new();
    let mut by_key: HashMap<String, usize> = HashMap::new();
    let mut by_place: HashMap<(String, Option<u32>), Vec<usize>> = HashMap::new();
    for d in drafts {
        let place = (d.finding.id.clone(), d.finding.rank);
        // The first merged report that is the same (as a pass in order would find).
        let by_overlap = by_place.get(&place).and_then(|v| v.iter().copied().find(|&i| overlaps(&merged[i], &d)));
        let into = by_key.get(&d.key).copied().into_iter().chain(by_overlap).min();
        if let Some(i) = into {
            let m = &mut merged[i];
            m.finding.ranks.extend(d.finding.ranks.iter().copied());
            if let Some(r) = d.finding.rank {
                m.finding.ranks.push(r);
            }
            m.per_rank.extend(d.per_rank.iter().cloned());
            m.reports += d.reports;
            // A rule's tally of omitted reports rides on its last draft: it must not go
            // with it when that draft is merged.
            for k in super::admit::TALLY_KEYS {
                if let Some(v) = d.finding.evidence.extra.get(k) {
                    m.finding.evidence.insert_if_absent(k, v.clone());
                }
            }
            if d.ts.is_some() && (m.ts.is_none() || d.ts < m.ts) && m.finding.rank.is_some() {
                m.ts = m.ts.or(d.ts);
            }
            continue;
        }
        let mut d = d;
        if let Some(r) = d.finding.rank {
            d.finding.ranks.push(r);
        }
        by_key.entry(d.key.clone()).or_insert(merged.len());
        by_place.entry(place).or_default().push(merged.len());
        merged.push(d);
    }
    for m in &mut merged {
        m.finding.ranks.sort_unstable();
        m.finding.ranks.dedup();
    }
    if merged.is_empty() {
        return Roles { initiating: None, findings: Vec::new(), timeline: Vec::new() };
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
    // Teardown (the agent's SIGTERMs, abort notices) never initiates while anything
    // else is there; an exception a rank caught and logged comes after the cascade of
    // echoes it explains, before teardown.
    let init = pick(&|d| !d.collateral && d.recognized && !d.handled && sure(d))
        .or_else(|| pick(&|d| !d.collateral && d.recognized && !d.handled))
        .or_else(|| pick(&|d| !d.collateral && !d.handled && sure(d)))
        .or_else(|| cascade(&merged))
        // A report no rule knows and even the fallback is unsure of (a traceback cut before
        // its exception line) comes after the cascade a rule recognised; its rank is still
        // the suspect of echoes that wait on it.
        .or_else(|| pick(&|d| !d.collateral && !d.handled))
        .or_else(|| pick(&|d| !d.collateral))
        .or_else(|| pick(&|d| d.collateral && !d.teardown))
        .or_else(|| pick(&|_| true));
    // A worker's traceback printed without a rank (torch < 2.3) belongs to the rank the
    // launcher reports failed, when it names exactly one; identical unranked reports
    // from several workers belong to every rank it names.
    if let Some(i) = init.filter(|&i| merged[i].finding.rank.is_none() && !merged[i].launcher) {
        let mut named: BTreeSet<u32> =
            merged.iter().filter(|d| d.launcher && !d.teardown).filter_map(|d| d.finding.rank).collect();
        named.extend(failed.iter().copied());
        let head = &mut merged[i];
        let several_reports = head.reports > 1 && head.finding.ranks.is_empty();
        if named.len() == 1 || (several_reports && named.len() == head.reports) {
            if let Some(&first) = named.first() {
                head.finding.rank = Some(first);
                head.finding.evidence.insert("rank_from", Value::from("launcher"));
                head.finding.ranks = named.into_iter().collect();
            }
        }
    }
    // The launcher's summary is the only report and its Root Cause line is cut or absent
    // (the paste stops inside `Failures:`): the entries it lists still say who failed, and
    // the earliest of them started it; those that failed in the same second are as likely
    // (the first is named, all are listed).
    if let Some(i) = init.filter(|&i| merged[i].launcher && merged[i].finding.rank.is_none()) {
        if let Some(&first) = run.first_failed.first() {
            let head = &mut merged[i];
            head.finding.rank = Some(first);
            head.finding.evidence.insert("rank_from", Value::from("launcher-failures"));
            head.finding.ranks = run.first_failed.to_vec();
        }
    }
    let only_collateral = init.is_some_and(|i| merged[i].collateral);
    let mut lagging: Option<Lag> = None;
    if only_collateral {
        if let Some(i) = init {
            let found = suspect(&merged, i, ranks_seen, run.world);
            let suspect = found.as_ref().map(|s| s.rank);
            let is_launcher = merged[i].launcher;
            let f = &mut merged[i].finding;
            match found {
                Some(s) => {
                    f.rank = Some(s.rank);
                    f.evidence.insert("suspect_rank", Value::from(s.rank));
                    if let Some(lag) = s.lag {
                        f.evidence.insert("suspect_progress", Value::from(lag.value));
                        f.evidence.insert("suspect_progress_others", Value::from(lag.others));
                        f.evidence.insert("suspect_line", Value::from(lag.line));
                        lagging = Some(lag);
                    }
                }
                // The echoes point at no rank: the one that reported first was only
                // waiting, so the finding names none rather than a bystander.
                None if !is_launcher => {
                    if f.ranks.is_empty() {
                        f.ranks.extend(f.rank);
                    }
                    f.rank = None;
                }
                None => {}
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
                })
                // Else the suspect's own report, if it printed one.
                .or_else(|| {
                    let own = |d: &Draft| !d.collateral && !d.teardown && !d.launcher;
                    merged.iter().position(|d| own(d) && suspect.is_some() && d.finding.rank == suspect)
                });
            if let Some(o) = origin {
                let src = merged[o].finding.evidence.clone();
                let line = merged[o].finding.location.line;
                let f = &mut merged[i].finding;
                for k in ["failing_frame", "failing_code"] {
                    if let Some(v) = src.get(k) {
                        f.evidence.insert(k, v);
                    }
                }
                if let Some(m) = &src.message {
                    f.evidence.insert("origin_message", Value::from(m.clone()));
                }
                let caught = notices.caught_before_echoes.as_ref().and_then(|n| n.missing.clone());
                if let Some(m) = notice(&caught, &f.next_action, &[("line", line.to_string())]) {
                    f.missing.insert(0, m);
                }
            }
        }
    }
    // After the suspect is decided (it names the initiating finding's rank).
    // The host a rank ran on, said once (the launcher's summary: `rank : 5`, `host :
    // node-b`; a `[node-b:1]:` label), holds for every finding of that rank. A rank
    // named with two hosts (two attempts, two jobs pasted together) gets neither.
    let mut hosts: BTreeMap<u32, Option<String>> = BTreeMap::new();
    for d in &merged {
        if let (Some(r), Some(h)) = (d.finding.rank, d.finding.evidence.text("host")) {
            let e = hosts.entry(r).or_insert_with(|| Some(h.to_string()));
            if e.as_deref() != Some(h) {
                *e = None;
            }
        }
    }
    for d in &mut merged {
        if let Some(Some(h)) = d.finding.rank.and_then(|r| hosts.get(&r)) {
            d.finding.evidence.insert_if_absent("host", Value::from(h.clone()));
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
    let launcher: Vec<bool> = order.iter().map(|&k| merged[k].launcher).collect();
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
    let multi_process = out.iter().zip(&launcher).any(|(f, l)| *l || f.rank.is_some());
    let worker_traceback = out.first().is_some_and(|h| h.evidence.failing_frame.is_some()) && !launcher[0];
    if let Some(head) = out.first_mut().filter(|h| {
        !only_collateral && h.role == Role::Initiating && h.rank.is_none() && multi_process && worker_traceback
    }) {
        let n = notices.unranked_initiator.as_ref();
        if let Some(m) = notice(&n.and_then(|n| n.missing.clone()), &head.next_action, &[]) {
            head.missing.push(m);
        }
        if let Some(a) = notice(&n.and_then(|n| n.next_action.clone()), &head.next_action, &[]) {
            head.next_action = a;
        }
    }
    if only_collateral && out[0].rank.is_none() && !launcher[0] {
        let head = &mut out[0];
        let n = notices.echoes_without_suspect.as_ref();
        if let Some(m) = notice(&n.and_then(|n| n.missing.clone()), &head.next_action, &[]) {
            head.missing.insert(0, m);
        }
        if let Some(a) = notice(&n.and_then(|n| n.next_action.clone()), &head.next_action, &[]) {
            head.next_action = a;
        }
    } else if let Some(lag) = lagging.filter(|_| only_collateral) {
        // The suspect printed its own report; what is missing is what it did instead.
        let head = &mut out[0];
        let n = notices.lagging_rank.as_ref();
        let values = [
            ("rank", head.rank.map(|r| r.to_string()).unwrap_or_default()),
            ("value", lag.value.to_string()),
            ("others", lag.others.to_string()),
            ("line", lag.line.to_string()),
        ];
        if let Some(m) = notice(&n.and_then(|n| n.missing.clone()), &head.next_action, &values) {
            head.missing.insert(0, m);
        }
        if let Some(a) = notice(&n.and_then(|n| n.next_action.clone()), &head.next_action, &values) {
            head.next_action = a;
        }
    } else if only_collateral {
        let head = &mut out[0];
        let n = notices.only_echoes.as_ref();
        if let Some(m) = notice(&n.and_then(|n| n.missing.clone()), &head.next_action, &[]) {
            head.missing.insert(0, m);
        }
        if let Some(r) = head.rank {
            let a = notice(&n.and_then(|n| n.next_action.clone()), &head.next_action, &[("rank", r.to_string())]);
            if let Some(a) = a {
                head.next_action = a;
            }
        }
    }
    let timeline = timeline_order
        .iter()
        .map(|&k| {
            let d = &merged[k];
            let f = &d.finding;
            let who = if f.ranks.len() > 1 {
                format!("ranks {}", compress_ranks(&f.ranks))
            } else if let Some(r) = f.rank {
                format!("rank {r}")
            } else if d.launcher || (d.teardown && run.launcher_families.contains(&f.family)) {
                // The agent's summary, or its SIGTERMs to the healthy workers (a teardown
                // notice of another family, NCCL's abort, is a worker's own).
                "launcher".to_string()
            } else if ranks_seen.is_empty() {
                // One process: there is no launcher and no rank to name.
                "process".to_string()
            } else {
                "unknown rank".to_string()
            };
            let what = f.evidence.exception.clone().unwrap_or_else(|| f.title.clone());
            TimelineEntry {
                time: d.ts.map(|t| t.clock()),
                ranks: f.reporting_ranks(),
                finding: pos(k),
                text: format!("{who}: {what} ({})", f.id),
            }
        })
        .collect();
    // `ranks` lists every rank that reported a finding, one rank too.
    for f in &mut out {
        if f.ranks.is_empty() {
            f.ranks.extend(f.rank);
        }
    }
    Roles { initiating: init.map(pos), findings: out, timeline }
}

/// When only echoes are present: the collateral rule reported by the most ranks (the
/// cascade), which best locates the failure. Returns its first report.
fn cascade(merged: &[Draft]) -> Option<usize> {
    let mut by_rule: BTreeMap<&str, (BTreeSet<u32>, usize, usize)> = BTreeMap::new();
    for (i, d) in merged.iter().enumerate().filter(|(_, d)| d.collateral && !d.launcher && !d.teardown) {
        let e = by_rule.entry(d.finding.id.as_str()).or_insert((BTreeSet::new(), 0, i));
        e.0.extend(d.per_rank.iter().map(|x| x.rank));
        e.1 += d.reports;
    }
    by_rule
        .values()
        .filter(|(rs, n, _)| rs.len() >= 2 || *n >= 2)
        .max_by_key(|(rs, n, i)| (rs.len(), *n, std::cmp::Reverse(*i)))
        .map(|(_, _, i)| *i)
}

/// How far the suspect got against the others, by its rule's `progress` count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Lag {
    /// The suspect's count.
    value: u64,
    /// The lowest count of every other rank.
    others: u64,
    /// The line of the suspect's report.
    line: u64,
}

/// The rank the echoes point at, and whether a lagging count named it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Suspect {
    rank: u32,
    lag: Option<Lag>,
}

/// The rank the echoes point at: the one rank whose report differs from all the others
/// (it stood at another collective, or lags behind them), else the one rank whose
/// progress count (a rule's `progress`, `last enqueued NCCL work`) is below every other
/// rank's, else the one rank missing from the reports (among the ranks the log shows, or
/// the job's world when it states its size: a rank that never printed anything is still
/// a rank), else a rank that caught an exception before the echoes, else the launcher's
/// root cause.
fn suspect(merged: &[Draft], i: usize, ranks_seen: &[u32], world: Option<u32>) -> Option<Suspect> {
    let plain = |rank: u32| Suspect { rank, lag: None };
    let id = &merged[i].finding.id;
    let per_rank: Vec<&super::RankReport> =
        merged.iter().filter(|d| d.finding.id == *id).flat_map(|d| d.per_rank.iter()).collect();
    let mut places: BTreeMap<Option<&str>, BTreeSet<u32>> = BTreeMap::new();
    for x in &per_rank {
        places.entry(x.place.as_deref()).or_default().insert(x.rank);
    }
    let reporting: BTreeSet<u32> = per_rank.iter().map(|x| x.rank).collect();
    if places.len() == 2 && reporting.len() >= 3 {
        if let Some((_, rs)) = places.iter().find(|(_, rs)| rs.len() == 1) {
            return rs.first().copied().map(plain);
        }
    }
    if let Some(s) = lagging(merged) {
        return Some(s);
    }
    // Ranks are numbered from 0: those below the highest the log shows (or the world's
    // size) that never reported are absent too.
    let top = world.map(|w| w.saturating_sub(1)).or_else(|| ranks_seen.iter().chain(&reporting).max().copied());
    let mut absent: BTreeSet<u32> = ranks_seen.iter().filter(|r| !reporting.contains(r)).copied().collect();
    // Only a set of ranks echoing one failure (not a launcher naming one rank) has
    // an absent member.
    if let Some(top) = top.filter(|&t| t < 4096 && !merged[i].launcher && reporting.len() >= 2) {
        absent.extend((0..=top).filter(|r| !reporting.contains(r)));
    }
    if absent.len() == 1 && !reporting.is_empty() {
        return absent.first().copied().map(plain);
    }
    // One rank outside the echoes that printed a failure of its own, even one no rule
    // knows (a traceback cut before its exception line): it did not wait, it failed.
    if !reporting.is_empty() {
        let own: BTreeSet<u32> = merged
            .iter()
            .filter(|d| !d.collateral && !d.teardown && !d.launcher)
            .flat_map(|d| d.finding.ranks.iter().copied().chain(d.finding.rank))
            .filter(|r| !reporting.contains(r))
            .collect();
        if own.len() == 1 {
            return own.first().copied().map(plain);
        }
    }
    // A rank that logged an exception and carried on, before the echoes.
    if let Some(r) = merged.iter().find(|d| d.handled && !d.collateral).and_then(|d| d.finding.rank) {
        return Some(plain(r));
    }
    merged.iter().find(|m| m.launcher).and_then(|m| m.finding.rank).map(plain)
}

/// The one rank whose progress count is below every other rank's, over all reports
/// that carry one (each rank's highest: a rank's later report is further on). Two
/// ranks reporting are enough: counts only grow, so the lower one fell behind.
fn lagging(merged: &[Draft]) -> Option<Suspect> {
    let mut best: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    for x in merged.iter().flat_map(|d| d.per_rank.iter()) {
        if let Some(p) = x.progress {
            let e = best.entry(x.rank).or_insert((p, x.line));
            if p > e.0 {
                *e = (p, x.line);
            }
        }
    }
    let mut by_count: Vec<(u64, u32, u64)> = best.iter().map(|(&r, &(p, line))| (p, r, line)).collect();
    by_count.sort_unstable();
    match by_count.as_slice() {
        [(value, rank, line), (others, ..), ..] if value < others => {
            Some(Suspect { rank: *rank, lag: Some(Lag { value: *value, others: *others, line: *line }) })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::RankReport;
    use super::*;
    use crate::report::{Evidence, Location, Trace};
    use crate::rules::spec::NoticeSpec;

    /// A draft: rule id, rank, first line, and how the rule sees it.
    #[derive(Clone, Copy)]
    struct D {
        id: &'static str,
        rank: Option<u32>,
        line: u64,
        collateral: bool,
        recognized: bool,
        launcher: bool,
        teardown: bool,
        handled: bool,
        confidence: Confidence,
        frame: Option<&'static str>,
        /// The rule's progress count in this report.
        progress: Option<u64>,
    }

    const fn d(id: &'static str, rank: Option<u32>, line: u64) -> D {
        D {
            id,
            rank,
            line,
            collateral: false,
            recognized: true,
            launcher: false,
            teardown: false,
            handled: false,
            confidence: Confidence::Likely,
            frame: None,
            progress: None,
        }
    }

    const fn echo(id: &'static str, rank: u32, line: u64) -> D {
        D { collateral: true, ..d(id, Some(rank), line) }
    }

    fn draft(x: &D) -> Draft {
        let mut evidence = Evidence::new();
        evidence.message = Some(format!("{} message", x.id));
        evidence.failing_frame = x.frame.map(str::to_string);
        let finding = Finding {
            id: x.id.into(),
            family: x.id.into(),
            title: x.id.into(),
            role: Role::Independent,
            collateral_of: None,
            rank: x.rank,
            ranks: Vec::new(),
            confidence: x.confidence,
            location: Location { line: x.line, end_line: x.line },
            evidence,
            culprit: None,
            mechanism: String::new(),
            checklist: Vec::new(),
            fix: String::new(),
            verify: String::new(),
            prevent: String::new(),
            missing: Vec::new(),
            next_action: "next".into(),
            related: Vec::new(),
            trace: Trace::default(),
        };
        let key = super::super::key_of(x.id, &finding.evidence);
        Draft {
            per_rank: x
                .rank
                .map(|rank| RankReport { rank, place: x.frame.map(str::to_string), progress: x.progress, line: x.line })
                .into_iter()
                .collect(),
            finding,
            collateral: x.collateral,
            recognized: x.recognized,
            launcher: x.launcher,
            teardown: x.teardown,
            handled: x.handled,
            ts: None,
            reports: 1,
            key,
        }
    }

    struct Case {
        name: &'static str,
        drafts: &'static [D],
        ranks_seen: &'static [u32],
        /// The initiating finding's id and rank.
        initiating: Option<(&'static str, Option<u32>)>,
        /// (id, role) of the other findings, in report order.
        others: &'static [(&'static str, Role)],
    }

    const CASES: &[Case] = &[
        Case {
            name: "a real error before the echoes initiates; the echoes are collateral",
            drafts: &[echo("timeout", 0, 40), d("oom", Some(2), 10), echo("timeout", 1, 41)],
            ranks_seen: &[0, 1, 2],
            initiating: Some(("oom", Some(2))),
            others: &[("timeout", Role::Collateral)],
        },
        Case {
            name: "only echoes: the rank absent from them is the suspect",
            drafts: &[echo("timeout", 1, 10), echo("timeout", 2, 11), echo("timeout", 3, 12)],
            ranks_seen: &[0, 1, 2, 3],
            initiating: Some(("timeout", Some(0))),
            others: &[],
        },
        Case {
            name: "the rank that never printed is the suspect: ranks 1-3 time out, rank 0 says nothing",
            drafts: &[echo("timeout", 1, 10), echo("timeout", 2, 11), echo("timeout", 3, 12)],
            ranks_seen: &[1, 2, 3],
            initiating: Some(("timeout", Some(0))),
            others: &[],
        },
        Case {
            name: "echoes that point at no rank name none (never a waiting rank)",
            drafts: &[echo("timeout", 0, 10), echo("timeout", 1, 11), echo("timeout", 2, 12), echo("timeout", 3, 13)],
            ranks_seen: &[0, 1, 2, 3],
            initiating: Some(("timeout", None)),
            others: &[],
        },
        Case {
            name: "a rule sure of its match initiates ahead of an earlier possible one",
            drafts: &[D { confidence: Confidence::Possible, ..d("killed", None, 3) }, d("oom", None, 20)],
            ranks_seen: &[],
            initiating: Some(("oom", None)),
            others: &[("killed", Role::Independent)],
        },
        Case {
            name: "a recognised failure initiates ahead of an unrecognised exception",
            drafts: &[D { recognized: false, ..d("unrecognized", None, 2) }, d("device", None, 30)],
            ranks_seen: &[],
            initiating: Some(("device", None)),
            others: &[("unrecognized", Role::Independent)],
        },
        Case {
            name: "a caught and logged exception does not initiate while a fatal one exists",
            drafts: &[D { handled: true, ..d("keyerror", Some(1), 5) }, d("oom", Some(1), 50)],
            ranks_seen: &[0, 1],
            initiating: Some(("oom", Some(1))),
            others: &[("keyerror", Role::Independent)],
        },
        Case {
            name: "the launcher summary alone initiates with the rank it names",
            drafts: &[D { launcher: true, ..echo("child-failed", 3, 80) }],
            ranks_seen: &[],
            initiating: Some(("child-failed", Some(3))),
            others: &[],
        },
        Case {
            name: "teardown never initiates: a rank's logged exception does, ahead of the SIGTERMs",
            drafts: &[
                D { handled: true, ..d("matmul", Some(2), 10) },
                D { teardown: true, ..echo("sigterm", 2, 22) },
                D { teardown: true, ..echo("sigterm", 3, 23) },
            ],
            ranks_seen: &[],
            initiating: Some(("matmul", Some(2))),
            others: &[("sigterm", Role::Collateral)],
        },
        Case {
            name: "only echoes, every rank reporting: the rank whose progress count lags is the suspect",
            drafts: &[
                echo("timeout", 1, 10),
                echo("timeout", 2, 11),
                echo("timeout", 3, 12),
                D { teardown: true, progress: Some(41), ..echo("abort", 0, 20) },
                D { teardown: true, progress: Some(42), ..echo("abort", 1, 21) },
                D { teardown: true, progress: Some(42), ..echo("abort", 2, 22) },
                D { teardown: true, progress: Some(42), ..echo("abort", 3, 23) },
            ],
            ranks_seen: &[0, 1, 2, 3],
            initiating: Some(("timeout", Some(0))),
            others: &[("abort", Role::Collateral)],
        },
        Case {
            name: "two ranks are enough for a lag; a rank's highest count is its own",
            drafts: &[
                D { progress: Some(7), ..echo("abort", 0, 10) },
                D { progress: Some(9), ..echo("abort", 1, 11) },
                D { progress: Some(6), ..echo("abort", 1, 5) },
            ],
            ranks_seen: &[0, 1],
            initiating: Some(("abort", Some(0))),
            others: &[],
        },
        Case {
            name: "a lowest count two ranks share names no rank",
            drafts: &[
                D { progress: Some(7), ..echo("abort", 0, 10) },
                D { progress: Some(7), ..echo("abort", 1, 11) },
                D { progress: Some(8), ..echo("abort", 2, 12) },
                D { progress: Some(8), ..echo("abort", 3, 13) },
            ],
            ranks_seen: &[0, 1, 2, 3],
            initiating: Some(("abort", None)),
            others: &[],
        },
        Case { name: "no drafts, no initiating finding", drafts: &[], ranks_seen: &[], initiating: None, others: &[] },
    ];

    #[test]
    fn roles_table() {
        let notices = NoticesFile {
            unranked_initiator: Some(NoticeSpec { missing: Some("which rank".into()), next_action: None }),
            only_echoes: Some(NoticeSpec { missing: Some("the first failure".into()), next_action: None }),
            caught_before_echoes: None,
            echoes_without_suspect: None,
            lagging_rank: Some(NoticeSpec { missing: Some("what rank {rank} did".into()), next_action: None }),
        };
        for c in CASES {
            let run = Run { ranks_seen: c.ranks_seen, ..Run::default() };
            let r = roles(c.drafts.iter().map(draft).collect(), run, &notices);
            let head = r.initiating.map(|i| (r.findings[i].id.as_str(), r.findings[i].rank));
            assert_eq!(head, c.initiating, "{}", c.name);
            if let Some(i) = r.initiating {
                assert_eq!((i, r.findings[i].role), (0, Role::Initiating), "{}: initiating first", c.name);
            }
            let others: Vec<(&str, Role)> = r.findings.iter().skip(1).map(|f| (f.id.as_str(), f.role)).collect();
            assert_eq!(others, c.others, "{}", c.name);
        }
    }

    #[test]
    fn the_same_failure_on_several_ranks_is_one_finding_listing_them() {
        let drafts = [echo("timeout", 3, 10), echo("timeout", 1, 11), echo("timeout", 2, 12)].map(|x| draft(&x));
        let run = Run { ranks_seen: &[0, 1, 2, 3], ..Run::default() };
        let r = roles(drafts.to_vec(), run, &NoticesFile::default());
        assert_eq!(r.findings.len(), 1);
        assert_eq!(r.findings[0].ranks, vec![1, 2, 3]);
        assert_eq!(r.findings[0].evidence.get("suspect_rank"), Some(Value::from(0)));
    }
}
