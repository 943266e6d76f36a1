//! Matching: kept lines become streams, and templates become events in them.
//!
//! Lines are regrouped per stream (one per rank, plus the unranked stream of the
//! launcher and of logs without rank prefixes), so interleaved ranks do not break each
//! other's tracebacks. Each stream is parsed by the grammars (tracebacks, the elastic
//! summary), then the templates run at the prefilter's anchor hits; a match becomes an
//! [`Event`], attached to the traceback whose message holds it. Facts about where an
//! event stands in its stream (its rank, its span of input lines, its traceback chain's
//! frames and user frame, whether a logger printed it) are answered here too.

use std::collections::{BTreeMap, BTreeSet};

use super::conditions::holds_on_evidence;
use super::evidence::{captures_to_evidence, derive};
use super::pack::{Pack, Rule};
use super::prefilter::Prefilter;
use super::template::Match;
use crate::grammar::elastic;
use crate::grammar::traceback::{self, Frame, Link, Traceback};
use crate::ingest::window::Kept;
use crate::ingest::{Line, Timestamp};
use crate::report::{Evidence, Location};

/// A blank line marking a gap between retained windows of one stream.
static GAP: Line =
    Line { no: 0, text: String::new(), rank: None, ts: None, level: None, truncated: false, logger: false };

/// One template match, placed in its stream.
#[derive(Clone, Debug)]
pub(crate) struct Event {
    pub rule: usize,
    pub template: usize,
    pub m: Match,
    /// Stream-local line indices the match covers.
    pub first: usize,
    pub last: usize,
    /// Index of the traceback (in the stream's list) whose message holds the match.
    pub tb: Option<usize>,
}

/// A stream after parsing: its lines, tracebacks and events.
#[derive(Debug)]
pub(crate) struct Stream<'l> {
    pub rank: Option<u32>,
    pub lines: Vec<&'l Line>,
    pub tracebacks: Vec<Traceback>,
    pub events: Vec<Event>,
    /// Entries of torchrun `ChildFailedError` summaries in this stream.
    pub elastic: Vec<elastic::Entry>,
    /// Offset of each line in the stream's joined text.
    pub starts: Vec<usize>,
}

/// Regroups kept lines per stream (a blank line marks a gap between windows) and
/// parses each.
pub(crate) fn streams<'l>(pack: &Pack, pre: &Prefilter, kept: &'l [Kept]) -> Vec<Stream<'l>> {
    let mut order: Vec<Option<u32>> = Vec::new();
    let mut groups: BTreeMap<Option<u32>, Vec<&'l Line>> = BTreeMap::new();
    let mut last_seq: BTreeMap<Option<u32>, u64> = BTreeMap::new();
    for k in kept {
        let l = &k.line;
        let g = groups.entry(l.rank).or_default();
        if g.is_empty() {
            order.push(l.rank);
        }
        if let Some(prev) = last_seq.insert(l.rank, k.seq) {
            if k.seq != prev + 1 {
                g.push(&GAP);
            }
        }
        g.push(l);
    }
    order
        .into_iter()
        .map(|rank| {
            let ls = groups.remove(&rank).unwrap_or_default();
            parse_stream(pack, pre, rank, ls)
        })
        .collect()
}

fn parse_stream<'l>(pack: &Pack, pre: &Prefilter, rank: Option<u32>, lines: Vec<&'l Line>) -> Stream<'l> {
    let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
    let tracebacks = traceback::parse(&texts);
    let mut hay = String::with_capacity(texts.iter().map(|t| t.len() + 1).sum());
    let mut starts = Vec::with_capacity(texts.len());
    for t in &texts {
        starts.push(hay.len());
        hay.push_str(t);
        hay.push('\n');
    }
    let events = match_events(pack, pre, &hay, &starts, &texts, &tracebacks);
    let elastic = if hay.contains("local_rank") { elastic::entries(&texts) } else { Vec::new() };
    Stream { rank, lines, tracebacks, events, elastic, starts }
}

/// Runs the templates at the prefilter's hits and keeps the best non-overlapping
/// matches.
fn match_events(
    pack: &Pack,
    pre: &Prefilter,
    hay: &str,
    starts: &[usize],
    texts: &[&str],
    tbs: &[Traceback],
) -> Vec<Event> {
    let rules = pack.rules();
    let mut cands: Vec<Event> = Vec::new();
    // Both anchors of a template usually hit: try each start once.
    let mut tried: BTreeSet<(usize, usize, usize)> = BTreeSet::new();
    let mut try_at = |ri: usize, ti: usize, word: usize, anchor_pos: usize, cands: &mut Vec<Event>| {
        let rule: &Rule = &rules[ri];
        let t = &rule.templates[ti];
        let Some(start) = t.start_for_word(hay, anchor_pos, word) else { return };
        // A second anchor only matters where a wrap may have split the first.
        if !t.is_first_anchor(word) && !t.wrap_in_lead(hay, anchor_pos, word) {
            return;
        }
        if !tried.insert((ri, ti, start)) {
            return;
        }
        let Some(m) = t.match_at(hay, start) else { return };
        let first = line_of(starts, m.start);
        let last = line_of(starts, m.end.saturating_sub(1).max(m.start));
        let tb = owning_traceback(tbs, first);
        // Frame and source lines quote code (`raise RuntimeError(f"...")`), not messages.
        if tbs.iter().any(|t| in_frames(t, first)) {
            return;
        }
        cands.push(Event { rule: ri, template: ti, m, first, last, tb });
    };
    if pre.enabled() {
        for hit in pre.anchors_ac.find_overlapping_iter(hay) {
            for a in &pre.anchored[hit.pattern().as_usize()] {
                try_at(a.rule, a.template, a.word, hit.start(), &mut cands);
            }
        }
    } else {
        for (ri, rule) in rules.iter().enumerate() {
            for (ti, t) in rule.templates.iter().enumerate() {
                for (word, anchor) in t.anchors() {
                    let mut pos = 0;
                    while let Some(off) = hay[pos..].find(anchor) {
                        try_at(ri, ti, word, pos + off, &mut cands);
                        pos += off + 1;
                        while !hay.is_char_boundary(pos) {
                            pos += 1;
                        }
                    }
                }
            }
        }
    }
    // Exception-class filters of the templates.
    cands.retain(|e| {
        let spec = &rules[e.rule].spec.matches[e.template];
        if spec.exception.is_empty() {
            return true;
        }
        let line_at = |i: usize| texts.get(i).copied();
        let class = exception_class(line_at, e.tb.map(|t| &tbs[t]), e.first, e.m.start - starts[e.first]);
        class.is_some_and(|c| spec.exception.iter().any(|x| x.rsplit('.').next() == Some(c.as_str())))
    });
    // Conditions on a match's own captures.
    cands.retain(|e| match &rules[e.rule].spec.matches[e.template].when {
        None => true,
        Some(w) => {
            let mut ev = Evidence::new();
            captures_to_evidence(&e.m, &mut ev);
            derive(&mut ev);
            holds_on_evidence(w, &ev.to_map())
        }
    });
    // Best first: priority, then specificity, then position.
    cands.sort_by(|a, b| {
        let (ra, rb) = (&rules[a.rule].spec, &rules[b.rule].spec);
        rb.priority.cmp(&ra.priority).then(b.m.literal_len.cmp(&a.m.literal_len)).then(a.m.start.cmp(&b.m.start))
    });
    let mut kept: Vec<Event> = Vec::new();
    for c in cands {
        let overlaps = kept.iter().any(|k| c.m.start < k.m.end && k.m.start < c.m.end);
        if !overlaps {
            kept.push(c);
        }
    }
    kept.sort_by_key(|e| e.m.start);
    kept
}

impl Stream<'_> {
    /// Offset in the stream's text where line `i` starts.
    pub(crate) fn line_start(&self, i: usize) -> usize {
        self.starts.get(i).copied().unwrap_or(0)
    }

    /// The rank a line's failure belongs to: the stream's, else the `ChildFailedError`
    /// entry quoting it.
    pub(crate) fn rank_at(&self, line: usize) -> Option<u32> {
        self.rank.or_else(|| self.elastic.iter().find(|e| e.first <= line && line <= e.last).map(|e| e.rank))
    }

    /// An unranked traceback introduced by a log line that names a rank
    /// (`ERROR [train] rank 2: skipping bad batch`) belongs to that rank.
    pub(crate) fn rank_from_intro(&self, start: usize) -> Option<u32> {
        let prev_line = self.lines.get(start.checked_sub(1)?)?;
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

    /// Whether the traceback starting at `start` was printed by a logger
    /// (`logger.exception`), i.e. caught and reported rather than fatal.
    pub(crate) fn logged(&self, start: usize) -> bool {
        start > 0 && {
            let prev = self.lines[start - 1];
            prev.logger && matches!(prev.level, Some('E') | Some('W')) && !prev.text.contains("Traceback")
        }
    }

    /// Frames of a traceback and of the tracebacks nested in it (a DataLoader worker's).
    pub(crate) fn chain_frames<'a>(&'a self, tb: &'a Traceback) -> Vec<&'a Frame> {
        self.tracebacks.iter().filter(|t| t.chain == tb.chain).flat_map(|t| t.frames.iter()).collect()
    }

    /// The last user frame: in a traceback nested in this one (a DataLoader worker's
    /// `Original Traceback`, where the error really happened), else in the traceback
    /// itself, else anywhere in its chain.
    pub(crate) fn user_frame<'a>(&'a self, tb: Option<&'a Traceback>) -> Option<&'a Frame> {
        let tb = tb?;
        let chain: Vec<&Traceback> = self.tracebacks.iter().filter(|t| t.chain == tb.chain).collect();
        chain
            .iter()
            .rev()
            .filter(|t| t.link == Link::Nested && t.start > tb.start)
            .find_map(|t| t.user_frame())
            .or_else(|| tb.user_frame())
            .or_else(|| chain.iter().rev().find_map(|t| t.user_frame()))
    }

    /// The input lines that stream lines `first..=last` cover. Gap markers between kept
    /// windows have no input line, and a garbled log can interleave a stream's lines out
    /// of input order (a fuzzed input did), so the span is the least and greatest line
    /// number in the range, never a reversed or zero one.
    pub(crate) fn span(&self, first: usize, last: usize) -> Location {
        let last = last.min(self.lines.len().saturating_sub(1));
        let nos = || self.lines.get(first.min(last)..=last).into_iter().flatten().map(|l| l.no).filter(|&n| n > 0);
        let line = nos().min().unwrap_or(1);
        Location { line, end_line: nos().max().unwrap_or(line) }
    }
}

/// The exception class a message belongs to, without its module: the one lookup, for
/// the match-time `exception` filter and for the evidence alike. The owning traceback's
/// exception line; else, outside a parsed traceback, what precedes the message on its
/// line (a one-line paste, an application log line); else, for a C++ `what():` line,
/// the class of the `terminate called after throwing an instance of 'T'` above it.
/// `col` is the message's byte offset in line `first`.
pub(crate) fn exception_class<'a>(
    line_at: impl Fn(usize) -> Option<&'a str>,
    tb: Option<&Traceback>,
    first: usize,
    col: usize,
) -> Option<String> {
    if let Some(x) = tb.and_then(|t| t.exception.as_ref()) {
        return Some(x.short_class().to_string());
    }
    let line = line_at(first)?;
    let col = (0..=col.min(line.len())).rev().find(|&c| line.is_char_boundary(c)).unwrap_or(0);
    let before = &line[..col];
    let class = traceback::class_before(before)
        .or_else(|| traceback::exception_line(before.trim()).map(|(c, _)| c))
        .or_else(|| {
            if !line.trim_start().starts_with("what():") {
                return None;
            }
            (first.saturating_sub(2)..first).rev().find_map(|i| line_at(i).and_then(traceback::terminate_class))
        })?;
    Some(class.rsplit('.').next().unwrap_or(class).to_string())
}

/// Longest `message` evidence, in characters.
const MAX_MESSAGE: usize = 600;

/// Whitespace-normalised one-line text, cut at [`MAX_MESSAGE`] characters.
pub(crate) fn one_line(s: &str) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= MAX_MESSAGE {
        return flat;
    }
    let mut out: String = flat.chars().take(MAX_MESSAGE).collect();
    out.push_str(" ...");
    out
}

/// One failure placed in its stream, computed once: the lines and traceback it spans,
/// its rank, exception and message, the frames of its chain and the user's frame among
/// them, whether a logger printed it, its time.
#[derive(Debug)]
pub(crate) struct Incident<'s> {
    /// Input lines it covers.
    pub location: Location,
    pub rank: Option<u32>,
    pub exception: Option<String>,
    pub message: Option<String>,
    /// Frames of its traceback chain.
    pub frames: Vec<&'s Frame>,
    pub user_frame: Option<&'s Frame>,
    /// Printed by a logger and survived (`logger.exception(...)` then carried on).
    pub handled: bool,
    pub ts: Option<Timestamp>,
}

impl<'s> Stream<'s> {
    /// The incident of a template match.
    pub(crate) fn incident(&'s self, e: &Event) -> Incident<'s> {
        // A message printed before its own frames (Streamlit's error panel: the
        // message, then `Traceback:`) takes the exception-less traceback right after it.
        let tb = e.tb.map(|t| &self.tracebacks[t]).or_else(|| {
            self.tracebacks.iter().find(|t| t.exception.is_none() && t.start > e.last && t.start <= e.last + 2)
        });
        let (first, last) = match tb {
            Some(t) => (t.start.min(e.first), t.end.max(e.last)),
            None => (e.first, e.last),
        };
        let line_at = |i: usize| self.lines.get(i).map(|l| l.text.as_str());
        let col = e.m.start.saturating_sub(self.line_start(e.first));
        let exception = exception_class(line_at, tb, e.first, col);
        let message = match tb.and_then(|t| t.exception.as_ref()) {
            Some(x) => one_line(&x.message),
            None => {
                // Outside a parsed traceback the message is what follows its class.
                let line = self.lines[e.first].text.as_str();
                let col = (0..=col.min(line.len())).rev().find(|&c| line.is_char_boundary(c)).unwrap_or(0);
                let mut text: Vec<&str> = vec![line[col..].trim()];
                text.extend((e.first + 1..=e.last).map(|i| self.lines[i].text.trim()));
                one_line(&text.join("\n"))
            }
        };
        Incident {
            location: self.span(first, last),
            rank: self.rank_at(e.first).or_else(|| tb.and_then(|t| self.rank_from_intro(t.start))),
            exception,
            message: Some(message),
            frames: tb.map(|t| self.chain_frames(t)).unwrap_or_default(),
            user_frame: self.user_frame(tb),
            handled: tb.is_some_and(|t| self.logged(t.start)),
            ts: (first..=last).find_map(|i| self.lines.get(i).and_then(|l| l.ts)),
        }
    }

    /// The incident of a traceback chain no template matched, if it is one: a chain with
    /// an exception, or frames cut short at the end of the log. In a chain (`During
    /// handling ...`, `raise ... from ...`) the first exception is the original failure;
    /// `final` is the last one, what ended the program, when it differs.
    pub(crate) fn chain_incident(&'s self, chain: usize) -> Option<(Incident<'s>, Option<&'s traceback::Exception>)> {
        let members: Vec<&Traceback> = self.tracebacks.iter().filter(|t| t.chain == chain).collect();
        let top: Vec<&&Traceback> = members.iter().filter(|t| t.link != Link::Nested).collect();
        let tb = top
            .iter()
            .find(|t| t.exception.is_some())
            .copied()
            .or_else(|| members.iter().find(|t| t.exception.is_some()))
            .or_else(|| members.last())?;
        let x = tb.exception.as_ref();
        if x.is_none() && tb.frames.is_empty() {
            return None;
        }
        // A traceback without an exception line is a cut paste only at the end of the
        // log; elsewhere it is a stack printed on purpose (anomaly mode's forward trace,
        // warnings).
        if x.is_none() && self.tracebacks.iter().any(|t| t.start > tb.end) {
            return None;
        }
        // Frames printed after their message belong to that message's finding.
        if x.is_none() && self.events.iter().any(|e| e.tb.is_none() && tb.start > e.last && tb.start <= e.last + 2) {
            return None;
        }
        let last_exc = top.iter().rev().find_map(|t| t.exception.as_ref()).filter(|f| Some(*f) != x);
        let first = members.iter().map(|t| t.start).min().unwrap_or(tb.start);
        let last = members.iter().map(|t| t.end).max().unwrap_or(tb.end).min(self.lines.len() - 1);
        let incident = Incident {
            location: self.span(first, last),
            rank: self.rank_at(first).or_else(|| self.rank_from_intro(tb.start)),
            exception: x.map(|x| x.short_class().to_string()),
            message: x.map(|x| one_line(&x.message)),
            frames: Vec::new(),
            user_frame: self.user_frame(Some(tb)),
            handled: self.logged(tb.start),
            ts: self.lines.get(first).and_then(|l| l.ts),
        };
        Some((incident, last_exc))
    }
}

/// Stream-local line index holding byte `off`.
fn line_of(starts: &[usize], off: usize) -> usize {
    match starts.binary_search(&off) {
        Ok(i) => i,
        Err(i) => i.saturating_sub(1),
    }
}

/// The innermost traceback whose exception message covers `line`.
fn owning_traceback(tbs: &[Traceback], line: usize) -> Option<usize> {
    tbs.iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let e = t.exception.as_ref()?;
            (e.first <= line && line <= e.last.max(t.end)).then_some((i, e.last.max(t.end) - e.first))
        })
        .min_by_key(|&(_, span)| span)
        .map(|(i, _)| i)
}

/// Whether `line` is a frame or source line of the traceback (not its message).
fn in_frames(tb: &Traceback, line: usize) -> bool {
    let end = tb.exception.as_ref().map(|e| e.first).unwrap_or(tb.end + 1);
    tb.start < line && line < end && tb.frames.first().is_some_and(|f| f.at <= line)
}
