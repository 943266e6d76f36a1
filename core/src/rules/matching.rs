//! Matching: kept lines become streams, and templates become events in them.
//!
//! Lines are regrouped per stream (one per rank, plus the unranked stream of the
//! launcher and of logs without rank prefixes), so interleaved ranks do not break each
//! other's tracebacks. Each stream is parsed by the grammars (tracebacks, the elastic
//! summary), then the templates run at the prefilter's anchor hits; a match becomes an
//! [`Event`], attached to the traceback whose message holds it. Facts about where an
//! event stands in its stream (its rank, its span of input lines, its traceback chain's
//! frames and user frame, whether a logger printed it) are answered here too.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::conditions::holds_on_evidence;
use super::evidence::{captures_for_conditions, derive};
use super::ints::Ints;
use super::pack::{Pack, Rule};
use super::prefilter::{Anchored, Prefilter};
use super::template::Match;
use crate::grammar::elastic;
use crate::grammar::raised;
use crate::grammar::traceback::{self, Frame, Link, Traceback};
use crate::ingest::window::Kept;
use crate::ingest::{Line, Timestamp};
use crate::report::{Evidence, Location};

/// A blank line marking a gap between retained windows of one stream.
static GAP: Line = Line::empty(0, false);

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
    /// Confidence steps the match costs: a cut text, a missing first sentence, no
    /// exception class visible where the template names one.
    pub degraded: u8,
}

/// An exception a line shows outside any traceback and any template match (a lone
/// `ValueError: ...`, a repr, a dict field), or an error-level C++ log line no rule knows.
#[derive(Clone, Debug)]
pub(crate) struct Loose {
    /// Stream-local line index.
    pub line: usize,
    /// The class without its module; `None` for an error log line.
    pub class: Option<String>,
    pub message: String,
    /// How the line showed it: `line`, `repr`, `field`, `footer`, `log-error`.
    pub shape: &'static str,
    /// Where it was raised, when a later line says (pytest's `path.py:77: Class`).
    pub frame: Option<Frame>,
}

/// Most loose exceptions kept per stream: the earliest, where a failure starts.
const MAX_LOOSE: usize = 64;

/// A stream after parsing: its lines, tracebacks and events.
#[derive(Debug)]
pub(crate) struct Stream<'l> {
    /// The global rank its prefix names.
    pub rank: Option<u32>,
    /// The node-local rank a launcher's label names (`[default3]:`, `[host:3]:`).
    pub local_rank: Option<u32>,
    /// The host a `[host:N]:` label names.
    pub host: Option<String>,
    pub lines: Vec<&'l Line>,
    pub tracebacks: Vec<Traceback>,
    pub events: Vec<Event>,
    /// Matches of a rule past [`MAX_EVENTS_PER_RULE`] in this stream, only counted.
    pub unread: Vec<Unread>,
    /// Entries of torchrun `ChildFailedError` summaries in this stream.
    pub elastic: Vec<elastic::Entry>,
    /// Exceptions shown outside any traceback and any template match.
    pub loose: Vec<Loose>,
    /// Offset of each line in the stream's joined text.
    pub starts: Vec<usize>,
}

/// Regroups kept lines per stream (a blank line marks a gap between windows) and
/// parses each.
pub(crate) fn streams<'l>(pack: &Pack, pre: &Prefilter, kept: &'l [Kept]) -> Vec<Stream<'l>> {
    // A stream is a rank's: its global rank, or its local rank on its host.
    type Key = (Option<u32>, bool, Option<String>);
    let mut order: Vec<Key> = Vec::new();
    let mut groups: BTreeMap<Key, Vec<&'l Line>> = BTreeMap::new();
    let mut last_seq: BTreeMap<Key, u64> = BTreeMap::new();
    for k in kept {
        let l = &k.line;
        let key: Key = (l.rank, l.local && l.rank.is_some(), l.host.clone());
        let g = groups.entry(key.clone()).or_default();
        if g.is_empty() {
            order.push(key.clone());
        }
        if let Some(prev) = last_seq.insert(key, k.seq) {
            if k.seq != prev + 1 {
                g.push(&GAP);
            }
        }
        g.push(l);
    }
    // One reserve of matcher steps for the whole log, whatever its number of streams.
    let mut reserve = super::template::RESERVE_STEPS;
    order
        .into_iter()
        .map(|key| {
            let ls = groups.remove(&key).unwrap_or_default();
            let (rank, local, host) = key;
            let (rank, local_rank) = if local { (None, rank) } else { (rank, None) };
            parse_stream(pack, pre, (rank, local_rank, host), ls, &mut reserve)
        })
        .collect()
}

fn parse_stream<'l>(
    pack: &Pack,
    pre: &Prefilter,
    (rank, local_rank, host): (Option<u32>, Option<u32>, Option<String>),
    lines: Vec<&'l Line>,
    reserve: &mut u64,
) -> Stream<'l> {
    let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
    let headed: Vec<bool> = lines.iter().map(|l| l.level.is_some() || l.ts.is_some()).collect();
    let ing = pack.ingest();
    let layout = traceback::Layout {
        headed: &headed,
        tails: &ing.message_tails,
        after_blank: &ing.tails_after_blank,
        classes: &ing.exception_classes,
    };
    let tracebacks = traceback::parse_with(&texts, &layout);
    let mut hay = String::with_capacity(texts.iter().map(|t| t.len() + 1).sum());
    let mut starts = Vec::with_capacity(texts.len());
    for t in &texts {
        starts.push(hay.len());
        hay.push_str(t);
        hay.push('\n');
    }
    let extra = &ing.exception_classes;
    let (events, unread) = match_events(pack, pre, &hay, &starts, &texts, &tracebacks, reserve);
    let elastic = if hay.contains("local_rank") { elastic::entries(&texts) } else { Vec::new() };
    let loose = loose_exceptions(&lines, &tracebacks, &events, extra);
    Stream { rank, local_rank, host, lines, tracebacks, events, unread, elastic, loose, starts }
}

/// The exceptions lines show outside tracebacks and template matches, and the C++
/// error log lines (`[E ...]`, `E1129 ...]`) no rule matched: consecutive error log
/// lines are one.
fn loose_exceptions(lines: &[&Line], tbs: &[Traceback], events: &[Event], extra: &[String]) -> Vec<Loose> {
    let mut covered = vec![false; lines.len()];
    let mut cover = |a: usize, b: usize| {
        for c in covered.iter_mut().take(b.saturating_add(1).min(lines.len())).skip(a) {
            *c = true;
        }
    };
    for t in tbs {
        cover(t.start, t.end.max(t.exception.as_ref().map_or(0, |x| x.last)));
    }
    for e in events {
        cover(e.first, e.last);
    }
    let mut out: Vec<Loose> = Vec::new();
    let mut prev_error_line = false;
    for (i, l) in lines.iter().enumerate() {
        if covered[i] || l.no == 0 {
            prev_error_line = false;
            continue;
        }
        if let Some(r) = raised::find(&l.text, extra) {
            let shape = match r.shape {
                raised::Shape::Line => "line",
                raised::Shape::Repr => "repr",
                raised::Shape::Field => "field",
                raised::Shape::Footer => "footer",
                raised::Shape::TypeRepr => "type-repr",
            };
            let class = Some(r.short_class().to_string());
            // pytest's footer (`visionkit/layers/rope.py:77: RuntimeError`) says where the
            // exception on an `E   ` line above it was raised; its summary line
            // (`FAILED tests/x.py::t - RuntimeError: msg...`) repeats it.
            if r.shape == raised::Shape::Footer {
                if let Some(prev) = out.iter_mut().rev().find(|x| x.class == class && i - x.line <= 4) {
                    prev.frame = footer_frame(&l.text, i);
                    continue;
                }
            }
            if out.iter().any(|x| x.class == class && same_message(&x.message, &r.message)) {
                continue;
            }
            out.push(Loose { line: i, class, message: r.message, shape, frame: None });
            prev_error_line = false;
        } else if l.level == Some('E') && !l.logger && !l.text.trim().is_empty() {
            if !prev_error_line {
                out.push(Loose {
                    line: i,
                    class: None,
                    message: l.text.trim().to_string(),
                    shape: "log-error",
                    frame: None,
                });
            }
            prev_error_line = true;
        } else {
            prev_error_line = false;
        }
        if out.len() >= MAX_LOOSE {
            break;
        }
    }
    out
}

/// Matches of one rule kept in one stream (the earliest): memory stays bounded when
/// every line of a log is a report of one rule (200,000 distinct `cuDNN error` lines
/// took 450 MB of match records). Past it a match is counted in [`Unread`], unless it
/// matched a text none before it did ([`MAX_NEW_TEXTS`]).
pub(crate) const MAX_EVENTS_PER_RULE: u32 = 2048;

/// Matches of one rule in one stream kept past [`MAX_EVENTS_PER_RULE`] because their
/// text (digit runs aside) is new: a flood of one message must not hide a different
/// failure of the same rule printed after it.
const MAX_NEW_TEXTS: u32 = 256;

/// Pushes `text` onto `out` with each run of ASCII digits as one `#`: the identity of a
/// message whatever its numbers (`[Rank 7]` and `[Rank 12]`, step counters). Report
/// keys, flood marks and match texts all read a message this way.
pub(crate) fn push_numberless(out: &mut String, text: &str) {
    let mut in_number = false;
    for c in text.chars() {
        let digit = c.is_ascii_digit();
        if !(digit && in_number) {
            out.push(if digit { '#' } else { c });
        }
        in_number = digit;
    }
}

/// A hash of the text `hay[a..b]`, numbers aside (each digit run one `#`, as
/// [`push_numberless`] writes it). A later text sharing an earlier one's hash (rare,
/// but an input can be built to collide: the hash is FxHash, not a keyed one) is
/// counted instead of kept, never lost from the count. Read in place, a byte at a time
/// into one hasher: past a rule's cap every match is hashed, and a glued line of
/// `NCCL WARN ...` reports is as many matches, each running to the line's end (the
/// copy and SipHash per match were three fifths of the time on such kilobyte lines).
fn text_hash(hay: &str, a: usize, b: usize) -> u64 {
    use std::hash::Hasher;
    const ONES: u64 = 0x0101_0101_0101_0101;
    let text = hay.as_bytes().get(a..b.max(a)).unwrap_or_default();
    let mut h = super::ints::IntHasher::default();
    // The numberless bytes, eight to a word: one multiply per word, not per byte, and
    // eight digit-free bytes at a word boundary taken at once.
    let (mut word, mut n) = (0u64, 0u32);
    let mut in_number = false;
    let mut i = 0;
    while i < text.len() {
        if n == 0 {
            if let Some(chunk) = text.get(i..i + 8) {
                let w = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
                // A byte is a digit where it XOR `0` is below 10 (the "has a byte less
                // than" bit trick, exact as a yes/no).
                let x = w ^ (ONES * u64::from(b'0'));
                if x.wrapping_sub(ONES * 10) & !x & (ONES * 0x80) == 0 {
                    h.write_u64(w);
                    in_number = false;
                    i += 8;
                    continue;
                }
            }
        }
        let c = text[i];
        i += 1;
        let digit = c.is_ascii_digit();
        if !(digit && in_number) {
            word |= u64::from(if digit { b'#' } else { c }) << (8 * n);
            n += 1;
            if n == 8 {
                h.write_u64(word);
                (word, n) = (0, 0);
            }
        }
        in_number = digit;
    }
    h.write_u64(word);
    h.write_u32(n);
    h.finish()
}

/// Matches of one rule past [`MAX_EVENTS_PER_RULE`] in a stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Unread {
    pub rule: usize,
    pub count: u64,
    /// Stream line indices of the first and last.
    pub first: usize,
    pub last: usize,
}

/// Lines behind the current anchor hit for which [`Budget`] keeps its records.
const BUDGET_LINES: usize = 8;

/// What the attempts at template matches have spent, by where they started.
#[derive(Default)]
struct Budget {
    /// Starts tried (start offset, rule, template, entry): both anchors of a template
    /// usually hit, and each start is tried once.
    tried: HashSet<(usize, usize, usize, usize), Ints>,
    /// A step pool per line for the attempts that start on it: work per byte is
    /// bounded, and near misses on one line cannot spend another line's budget.
    pools: HashMap<usize, u64, Ints>,
    /// Attempts per (line of the anchor, rule, template).
    attempts: HashMap<(usize, usize, usize), u32, Ints>,
    /// Steps the log lends an attempt once its line's pool is spent
    /// ([`super::template::RESERVE_STEPS`]).
    reserve: u64,
    /// The line up to which the reserve was refilled ([`super::template::REFILL_STEPS`]).
    refilled: usize,
}

impl Budget {
    /// Forgets the records of lines before `line` (which starts at byte `offset`).
    fn forget_before(&mut self, line: usize, offset: usize) {
        self.tried.retain(|k| k.0 >= offset);
        self.pools.retain(|&l, _| l >= line);
        self.attempts.retain(|k, _| k.0 >= line);
    }
}

/// Attempts of one template starting on one line, at most (a glued one-line paste of
/// many ranks' reports stays far below it).
const MAX_ATTEMPTS_PER_LINE: u32 = 256;

/// Runs the templates at the prefilter's hits and keeps the best non-overlapping
/// matches.
fn match_events(
    pack: &Pack,
    pre: &Prefilter,
    hay: &str,
    starts: &[usize],
    texts: &[&str],
    tbs: &[Traceback],
    reserve: &mut u64,
) -> (Vec<Event>, Vec<Unread>) {
    let extra = &pack.ingest().exception_classes;
    let rules = pack.rules();
    let mut cands: Vec<Event> = Vec::new();
    let mut per_rule = vec![0u32; rules.len()];
    // Per rule, once it is full: the texts its kept matches matched, and how many were
    // kept past the cap for a new one.
    let mut texts_of: Vec<HashSet<u64, Ints>> = vec![HashSet::default(); rules.len()];
    let mut new_texts = vec![0u32; rules.len()];
    // Per rule: the line of its last kept match (another template of the rule matching
    // that line again is that report, not one more to count).
    let mut kept_line: Vec<Option<usize>> = vec![None; rules.len()];
    let mut unread: BTreeMap<usize, Unread> = BTreeMap::new();
    let lines = LineIndex::new(tbs, starts.len());
    // `anchor_line` is the line of `anchor_pos`, found once per hit by its caller.
    let mut try_at = |a: &Anchored, anchor_pos: usize, anchor_line: usize, cands: &mut Vec<Event>, b: &mut Budget| {
        let Budget { tried, pools, attempts, reserve, refilled } = b;
        // Every line up to this one gives back to the reserve.
        if anchor_line > *refilled {
            let back = super::template::REFILL_STEPS.saturating_mul((anchor_line - *refilled) as u64);
            *reserve = reserve.saturating_add(back).min(super::template::RESERVE_STEPS);
            *refilled = anchor_line;
        }
        let rule: &Rule = &rules[a.rule];
        let t = &rule.templates[a.template];
        // A second anchor only matters where a wrap may have split the first.
        if !t.is_first_anchor(a.entry, a.word) && !t.wrap_in_lead(hay, anchor_pos, a.entry, a.word) {
            return;
        }
        // One template's attempts from the anchors of one line are capped: a line of
        // `Killed Killed ...` or of an anchor word is at most this many events, not one
        // per word (memory and time stay bounded by the line count, not by hits). The
        // count is checked before walking back to the start: past the cap, a hit costs
        // a lookup.
        let n = attempts.entry((a.rule, a.template, anchor_line)).or_insert(0);
        if *n >= MAX_ATTEMPTS_PER_LINE {
            return;
        }
        // A line whose steps are spent, with the log's reserve, takes no more attempts:
        // a hit on its first leading word starts there, and costs no walk back.
        let spent = |line: usize, pools: &HashMap<usize, u64, Ints>| *reserve == 0 && pools.get(&line) == Some(&0);
        if a.word == 0 && spent(anchor_line, pools) {
            return;
        }
        let Some(start) = t.start_for_word(hay, anchor_pos, a.entry, a.word) else { return };
        // Most starts are on the anchor's line; a wrapped lead begins on an earlier one.
        let line = if start >= starts[anchor_line] { anchor_line } else { line_of(starts, start) };
        if spent(line, pools) {
            return;
        }
        if !tried.insert((start, a.rule, a.template, a.entry)) {
            return;
        }
        *n += 1;
        // A later sentence stands for the message only where it begins one: at the
        // start of its line, or after an exception class.
        if a.entry > 0 && !begins_message(hay, starts[line], start, extra) {
            return;
        }
        let pool = pools.entry(line).or_insert_with(|| {
            let end = starts.get(line + 1).copied().unwrap_or(hay.len());
            super::template::step_pool(end.saturating_sub(starts[line]))
        });
        // The line's own steps first, then the log's reserve.
        let before = *pool + *reserve;
        let mut both = before;
        let found = t.match_entry_pooled(hay, start, a.entry, &mut both);
        let used = before - both;
        let own = used.min(*pool);
        *pool -= own;
        *reserve -= used - own;
        let Some(m) = found else { return };
        // A message whose first letter is in the other case (`killed by signal`) is
        // that message only where one begins, unless its leading words are distinctive.
        if m.folded && !t.distinctive_lead(a.entry) && !begins_message(hay, starts[line], start, extra) {
            return;
        }
        let (ri, ti) = (a.rule, a.template);
        let first = line_of(starts, m.start);
        let last = line_of(starts, m.end.saturating_sub(1).max(m.start));
        let tb = lines.owner(first);
        // Frame and source lines quote code (`raise RuntimeError(f"...")`), not messages.
        if lines.in_frames(first) {
            return;
        }
        let full = per_rule[ri] >= MAX_EVENTS_PER_RULE;
        let new_text = full && new_texts[ri] < MAX_NEW_TEXTS && {
            // The texts of the rule's kept matches are read once, when it is full.
            if texts_of[ri].is_empty() {
                for c in cands.iter().filter(|c| c.rule == ri) {
                    texts_of[ri].insert(text_hash(hay, c.m.start, c.m.end));
                }
            }
            texts_of[ri].insert(text_hash(hay, m.start, m.end))
        };
        if full && !new_text {
            // One per line: several templates of a rule may match one line.
            if kept_line[ri] == Some(first) {
                return;
            }
            let u = unread.entry(ri).or_insert(Unread { rule: ri, count: 0, first, last: usize::MAX });
            if u.last != first {
                u.count += 1;
                u.first = u.first.min(first);
                u.last = if u.last == usize::MAX { first } else { u.last.max(first) };
            }
            return;
        }
        if full {
            new_texts[ri] += 1;
        }
        per_rule[ri] += 1;
        kept_line[ri] = Some(first);
        let degraded = m.degraded();
        cands.push(Event { rule: ri, template: ti, m, first, last, tb, degraded });
    };
    let mut budget = Budget { reserve: *reserve, ..Budget::default() };
    if pre.enabled() {
        // Hits come in order: what was recorded for lines well behind the current hit
        // is never asked about again (a start walks back at most a wrapped line or
        // two), so it goes, and the records stay as small as a few lines' hits.
        let mut floor = 0;
        for hit in pre.anchors().find_overlapping_iter(hay) {
            let line = line_of(starts, hit.start());
            if line > floor + 2 * BUDGET_LINES {
                floor = line - BUDGET_LINES;
                budget.forget_before(floor, starts[floor]);
            }
            let prev = super::prefilter::byte_before(hay, hit.start());
            for a in pre.anchored[hit.pattern().as_usize()].iter().filter(|a| a.may_follow(prev)) {
                try_at(a, hit.start(), line, &mut cands, &mut budget);
            }
        }
    } else {
        for (ri, rule) in rules.iter().enumerate() {
            for (ti, t) in rule.templates.iter().enumerate() {
                for x in t.anchors() {
                    let a = Anchored::new(t, ri, ti, x.entry, x.word);
                    let mut pos = 0;
                    while let Some(off) = find_either_case(&hay[pos..], x.text, x.word == 0) {
                        try_at(&a, pos + off, line_of(starts, pos + off), &mut cands, &mut budget);
                        pos += off + 1;
                        while !hay.is_char_boundary(pos) {
                            pos += 1;
                        }
                    }
                }
            }
        }
    }
    *reserve = budget.reserve;
    // Exception-class filters of the templates. A class printed elsewhere (a subclass
    // counts as its parents) drops the match; no class visible at all keeps it a
    // confidence step lower.
    cands.retain_mut(|e| {
        let spec = &rules[e.rule].spec.matches[e.template];
        if spec.exception.is_empty() {
            return true;
        }
        let line_at = |i: usize| texts.get(i).copied();
        match exception_class(line_at, e.tb.map(|t| &tbs[t]), e.first, e.m.start - starts[e.first], extra) {
            None => {
                e.degraded += 1;
                true
            }
            Some(c) => {
                pack.class_and_parents(&c).any(|k| spec.exception.iter().any(|x| x.rsplit('.').next() == Some(k)))
            }
        }
    });
    // Conditions on a match's own captures.
    cands.retain(|e| match &rules[e.rule].spec.matches[e.template].when {
        None => true,
        Some(w) => {
            let mut ev = Evidence::new();
            captures_for_conditions(&e.m, &mut ev);
            derive(&mut ev);
            holds_on_evidence(w, &ev.to_map())
        }
    });
    // Best first: a whole message before a cut or headless one, then priority, then
    // specificity, then position.
    cands.sort_by(|a, b| {
        let (ra, rb) = (&rules[a.rule].spec, &rules[b.rule].spec);
        let rough = |m: &Match| (m.truncated || m.head_missing, m.folded);
        rough(&a.m)
            .cmp(&rough(&b.m))
            .then(rb.priority.cmp(&ra.priority))
            .then(b.m.literal_len.cmp(&a.m.literal_len))
            .then(a.m.start.cmp(&b.m.start))
    });
    // Kept matches never overlap, so a candidate can only overlap the kept match that
    // starts last before its end (or an empty match in front of it): a lookup, not a
    // scan of every kept match (20,000 matching lines were 20,000² comparisons).
    let mut kept: Vec<Event> = Vec::new();
    let mut spans: BTreeMap<(usize, usize), usize> = BTreeMap::new();
    for c in cands {
        let (s, e) = (c.m.start, c.m.end);
        let mut overlaps = None;
        for (&(ks, ke), &k) in spans.range(..(e, 0)).rev() {
            if s < ke && ks < e {
                overlaps = Some((ks, ke, k));
                break;
            }
            if ks < ke {
                break;
            }
        }
        match overlaps {
            None => {
                spans.insert((s, e), kept.len());
                kept.push(c);
            }
            // A wrapper that lost to the message it wraps (`[Rank 1] NCCL watchdog thread
            // terminated with exception: CUDA error: uncorrectable ECC ...`) still says
            // whose message it is: its rank, local rank and host go to the kept match
            // when it has none.
            Some((ks, ke, k)) if s <= ks && ke <= e => {
                for name in ["rank", "local_rank", "host"] {
                    let km = &mut kept[k].m;
                    if km.captures.iter().any(|x| x.name == name) {
                        continue;
                    }
                    if let Some(x) = c.m.captures.iter().find(|x| x.name == name) {
                        km.captures.push(x.clone());
                    }
                }
            }
            Some(_) => {}
        }
    }
    kept.sort_by_key(|e| e.m.start);
    (kept, unread.into_values().collect())
}

impl Stream<'_> {
    /// Offset in the stream's text where line `i` starts.
    pub(crate) fn line_start(&self, i: usize) -> usize {
        self.starts.get(i).copied().unwrap_or(0)
    }

    /// The rank a line's failure belongs to: the stream's, else the `ChildFailedError`
    /// entry quoting it.
    pub(crate) fn rank_at(&self, line: usize) -> Option<u32> {
        self.rank.or_else(|| self.entry_at(line).map(|e| e.rank))
    }

    fn entry_at(&self, line: usize) -> Option<&elastic::Entry> {
        self.elastic.iter().find(|e| e.first <= line && line <= e.last)
    }

    /// The local rank and host of a line's failure: the stream's label, else the
    /// `ChildFailedError` entry quoting it.
    pub(crate) fn local_at(&self, line: usize) -> (Option<u32>, Option<String>) {
        let e = self.entry_at(line);
        (
            self.local_rank.or_else(|| e.and_then(|e| e.local_rank)),
            self.host.clone().or_else(|| e.and_then(|e| e.host.clone())),
        )
    }

    /// An unranked traceback introduced by a log line that names a rank
    /// (`ERROR [train] rank 2: skipping bad batch`) belongs to that rank.
    pub(crate) fn rank_from_intro(&self, start: usize) -> Option<u32> {
        let prev_line = self.lines.get(start.checked_sub(1)?)?;
        // Only a logger line (timestamp and level), not a training print like `[rank 0] step 3`;
        // and only a record that reports trouble: `INFO rank 7 saved checkpoint` is progress
        // that happened to be printed last, not the introduction of what follows.
        if !prev_line.logger || !matches!(prev_line.level, Some('E' | 'W' | 'F')) {
            return None;
        }
        let prev = &prev_line.text;
        let lower = prev.to_ascii_lowercase();
        let b = lower.as_bytes();
        // The word `rank`, not `local_rank` or `ranks`.
        lower.match_indices("rank").find_map(|(at, _)| {
            if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_') {
                return None;
            }
            let rest = lower[at + 4..].trim_start_matches([' ', '=', ':', '#']);
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
    }

    /// Whether the traceback starting at `start` was printed by a logger
    /// (`logger.exception`), i.e. caught and reported rather than fatal.
    pub(crate) fn logged(&self, start: usize) -> bool {
        let by_logger = |l: &Line| l.logger && matches!(l.level, Some('E') | Some('W'));
        let own = self.lines.get(start).is_some_and(|l| by_logger(l) && !l.text.contains("Traceback"));
        own || start > 0 && {
            let prev = self.lines[start - 1];
            by_logger(prev) && !prev.text.contains("Traceback")
        }
    }

    /// The tracebacks of chain `chain`: its first (whose index is the chain's id) and the
    /// members that follow it (a slice, not a filter over every traceback: a log of
    /// 40,000 retry tracebacks asks this once per traceback).
    pub(crate) fn chain(&self, chain: usize) -> &[Traceback] {
        let from = self.tracebacks.get(chain..).unwrap_or_default();
        let n = from.iter().take_while(|t| t.chain == chain).count();
        &from[..n]
    }

    /// Frames of a traceback and of the tracebacks nested in it (a DataLoader worker's).
    pub(crate) fn chain_frames<'a>(&'a self, tb: &'a Traceback) -> Vec<&'a Frame> {
        self.chain(tb.chain).iter().flat_map(|t| t.frames.iter()).collect()
    }

    /// The last user frame: in a traceback nested in this one (a DataLoader worker's
    /// `Original Traceback`, where the error really happened), else in the traceback
    /// itself, else anywhere in its chain.
    pub(crate) fn user_frame<'a>(&'a self, tb: Option<&'a Traceback>) -> Option<&'a Frame> {
        let tb = tb?;
        let chain = self.chain(tb.chain);
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

/// Whether a `Class:` is printed before the message at byte `col` of `line`, within
/// [`CLASS_LOOKBACK`] of it: a message with its own class is a report of its own.
pub(crate) fn own_class_before(line: &str, col: usize, extra: &[String]) -> bool {
    let col = floor_boundary(line, col.min(line.len()));
    raised::last_class(tail(&line[..col], CLASS_LOOKBACK), extra).is_some()
}

/// The exception class a message belongs to, without its module: the one lookup, for
/// the match-time `exception` filter and for the evidence alike. The owning traceback's
/// exception line; else, outside a parsed traceback: the last `Class:` before the
/// message on its line (prose, quotes and backticks between them, a class glued to the
/// message or to non-Latin text), a dict or JSON field on the line naming the class, a
/// frameless block (a line `Class:` alone above the message), a header above naming it
/// (`Exception has occurred: RuntimeError`, `**Exception Type:** RuntimeError`), a
/// pytest footer in the lines after, and for a C++ `what():` line the class of the
/// `terminate called after throwing an instance of 'T'` above it. `col` is the
/// message's byte offset in line `first`; `extra` the classes the rule data adds.
pub(crate) fn exception_class<'a>(
    line_at: impl Fn(usize) -> Option<&'a str>,
    tb: Option<&Traceback>,
    first: usize,
    col: usize,
    extra: &[String],
) -> Option<String> {
    if let Some(x) = tb.and_then(|t| t.exception.as_ref()) {
        return Some(x.short_class().to_string());
    }
    let line = line_at(first)?;
    let col = floor_boundary(line, col);
    let before = tail(&line[..col], CLASS_LOOKBACK);
    let short = |c: &str| c.rsplit(['.', ':']).next().unwrap_or(c).to_string();
    if let Some(c) = raised::class_before(before, extra).or_else(|| raised::last_class(before, extra)) {
        return Some(short(c));
    }
    if let Some((c, _)) = traceback::exception_line(before.trim()).filter(|(c, _)| raised::is_class(c, extra)) {
        return Some(short(c));
    }
    let near = around(line, col, CLASS_LOOKBACK);
    if let Some(r) = raised::may_hold_field(near).then(|| raised::find(near, extra)).flatten() {
        if r.shape == raised::Shape::Field {
            return Some(short(&r.class));
        }
    }
    if line.trim_start().starts_with("what():") {
        let c = (first.saturating_sub(2)..first).rev().find_map(|i| line_at(i).and_then(traceback::terminate_class));
        return c.map(short);
    }
    // A frameless block: `RuntimeError:` alone, the message on the lines below.
    if line[..col].trim().is_empty() {
        if let Some(prev) = first.checked_sub(1).and_then(&line_at) {
            let p = prev.trim();
            if let Some(c) = p.strip_suffix(':').filter(|c| raised::is_class(c, extra)) {
                return Some(short(c));
            }
        }
    }
    // A header above names it, as a debugger or an error report prints the class
    // apart from its message: `Exception has occurred: RuntimeError` (VS Code), then
    // the message alone; `- **Exception Type:** RuntimeError`, then
    // `- **Exception Message:** ...` (ComfyUI).
    if raised::is_message_label(&line[..col]) {
        let above = (first.saturating_sub(2)..first).rev().filter_map(&line_at);
        if let Some(c) = above.take_while(|l| !l.trim().is_empty()).find_map(|l| raised::labelled_class(l, extra)) {
            return Some(short(&c));
        }
    }
    // pytest prints the class again after the message: `tests/test_x.py:12: ValueError`.
    // A footer is a short line; a long one is not read again for every message above it.
    (first + 1..first + 4).find_map(|i| {
        let l = line_at(i).filter(|l| l.len() <= CLASS_LOOKBACK && raised::may_be_footer(l, extra))?;
        let r = raised::find(l, extra)?;
        (r.shape == raised::Shape::Footer).then(|| short(&r.class))
    })
}

/// How far from a message its class is looked for, in bytes. A class is printed right
/// before its message (`RuntimeError: `, a logger's prose) or in a field beside it; a
/// 64 KiB line holding a thousand messages must cost messages x this, not messages x
/// line (it took 2.3 s a megabyte).
const CLASS_LOOKBACK: usize = 1024;

/// The largest char boundary of `s` at or below `i`.
fn floor_boundary(s: &str, i: usize) -> usize {
    (0..=i.min(s.len())).rev().find(|&c| s.is_char_boundary(c)).unwrap_or(0)
}

/// The last `n` bytes of `s` (whole characters); when cut, from the first character
/// that cannot be inside a name, so a class cut in two is not read as its tail.
fn tail(s: &str, n: usize) -> &str {
    if s.len() <= n {
        return s;
    }
    let from = s.len() - n;
    let from = (from..s.len()).find(|&c| s.is_char_boundary(c)).unwrap_or(s.len());
    let t = &s[from..];
    let name = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':');
    t.find(|c: char| !name(c)).map_or("", |p| &t[p..])
}

/// `line` within `n` bytes either side of byte `col` (whole characters).
fn around(line: &str, col: usize, n: usize) -> &str {
    let a = floor_boundary(line, col.saturating_sub(n));
    let b = floor_boundary(line, col.saturating_add(n));
    &line[a..b.max(a)]
}

/// Longest `message` evidence, in characters.
const MAX_MESSAGE: usize = 600;

/// Whitespace-normalised one-line text, cut at [`MAX_MESSAGE`] characters.
pub(crate) fn one_line(s: &str) -> String {
    one_line_of(std::iter::once(s))
}

/// [`one_line`] of texts read one after another, reading no further than the cut (a
/// message on a 64 KiB line costs its 600 characters, not the line).
fn one_line_of<'a>(parts: impl Iterator<Item = &'a str>) -> String {
    let mut out = String::new();
    let mut chars = 0;
    for word in parts.flat_map(str::split_whitespace) {
        if !out.is_empty() {
            if chars >= MAX_MESSAGE {
                out.push_str(" ...");
                return out;
            }
            out.push(' ');
            chars += 1;
        }
        let n = word.chars().count();
        if chars + n > MAX_MESSAGE {
            out.extend(word.chars().take(MAX_MESSAGE - chars));
            out.push_str(" ...");
            return out;
        }
        out.push_str(word);
        chars += n;
    }
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
    /// The node-local rank and host its stream's label (or its summary entry) names.
    pub local_rank: Option<u32>,
    pub host: Option<String>,
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
    pub(crate) fn incident(&'s self, e: &Event, extra: &[String]) -> Incident<'s> {
        let own = e.tb.map(|t| &self.tracebacks[t]);
        // A message printed before its own frames (Streamlit's error panel: the
        // message, then `Traceback:`; a lone exception line, then its stack) takes the
        // exception-less traceback right after it.
        let frameless = own.is_none_or(|t| self.chain_frames(t).is_empty());
        let after = own.map_or(e.last, |t| t.end.max(e.last));
        let trailing = frameless.then(|| self.trailing_frames(after)).flatten();
        let framed = trailing.or(own);
        let first = own.map_or(e.first, |t| t.start.min(e.first));
        let last = framed.map_or(e.last, |t| t.end.max(e.last));
        let line_at = |i: usize| self.lines.get(i).map(|l| l.text.as_str());
        let col = e.m.start.saturating_sub(self.line_start(e.first));
        let exception = exception_class(line_at, own, e.first, col, extra);
        let message = match own.and_then(|t| t.exception.as_ref()) {
            Some(x) => one_line(&x.message),
            None => {
                // Outside a parsed traceback the message is what follows its class.
                let line = self.lines[e.first].text.as_str();
                let col = floor_boundary(line, col);
                let rest = (e.first + 1..=e.last).map(|i| self.lines[i].text.as_str());
                one_line_of(std::iter::once(&line[col..]).chain(rest))
            }
        };
        Incident {
            location: self.span(first, last),
            rank: self.rank_at(e.first).or_else(|| framed.and_then(|t| self.rank_from_intro(t.start))),
            local_rank: self.local_at(e.first).0,
            host: self.local_at(e.first).1,
            exception,
            message: Some(message),
            frames: framed.map(|t| self.chain_frames(t)).unwrap_or_default(),
            user_frame: self.user_frame(framed),
            handled: own.or(framed).is_some_and(|t| self.logged(t.start)),
            ts: (first..=last).find_map(|i| self.lines.get(i).and_then(|l| l.ts)),
        }
    }

    /// An exception-less traceback starting within two lines after stream line `last`:
    /// the frames a message printed before them.
    fn trailing_frames(&'s self, last: usize) -> Option<&'s Traceback> {
        // Tracebacks are in the order they start.
        let from = self.tracebacks.partition_point(|t| t.start <= last);
        self.tracebacks[from..]
            .iter()
            .take_while(|t| t.start <= last + 2)
            .find(|t| t.exception.is_none() && !t.frames.is_empty())
    }

    /// The incident of a traceback chain no template matched, if it is one: a chain with
    /// an exception, or frames cut short at the end of the log. In a chain (`During
    /// handling ...`, `raise ... from ...`) the first exception is the original failure;
    /// `final` is the last one, what ended the program, when it differs.
    pub(crate) fn chain_incident(&'s self, chain: usize) -> Option<(Incident<'s>, Option<&'s traceback::Exception>)> {
        // A chain's members follow its first traceback, whose index is the chain's id:
        // read them from there (a filter over every traceback per chain is quadratic in
        // a log of 40,000 retry tracebacks).
        let members: Vec<&Traceback> = self.chain(chain).iter().collect();
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
        if x.is_none() && self.tracebacks.iter().rev().any(|t| t.start > tb.end) {
            return None;
        }
        // Frames printed after their message belong to that message's finding.
        let after = |last: usize| tb.start > last && tb.start <= last + 2;
        let frameless_end = |t: &Traceback| (t.frames.is_empty() && t.exception.is_some()).then_some(t.end);
        if x.is_none()
            && (self.events.iter().any(|e| e.tb.is_none() && after(e.last))
                || self.loose.iter().any(|l| after(l.line))
                || self.tracebacks.iter().filter_map(frameless_end).any(after))
        {
            return None;
        }
        // A frameless exception takes the frames printed right after it.
        let trailing = (x.is_some() && members.iter().all(|t| t.frames.is_empty()))
            .then(|| self.trailing_frames(members.iter().map(|t| t.end).max().unwrap_or(tb.end)))
            .flatten();
        let last_exc = top.iter().rev().find_map(|t| t.exception.as_ref()).filter(|f| Some(*f) != x);
        let first = members.iter().map(|t| t.start).min().unwrap_or(tb.start);
        let last = members.iter().map(|t| t.end).max().unwrap_or(tb.end).max(trailing.map_or(0, |t| t.end));
        let last = last.min(self.lines.len() - 1);
        let incident = Incident {
            location: self.span(first, last),
            rank: self.rank_at(first).or_else(|| self.rank_from_intro(tb.start)),
            local_rank: self.local_at(first).0,
            host: self.local_at(first).1,
            exception: x.map(|x| x.short_class().to_string()),
            message: x.map(|x| one_line(&x.message)),
            frames: Vec::new(),
            user_frame: self.user_frame(Some(tb)).or_else(|| trailing.and_then(|t| t.user_frame())),
            handled: self.logged(tb.start),
            ts: self.lines.get(first).and_then(|l| l.ts),
        };
        Some((incident, last_exc))
    }
}

/// Whether a message may begin at byte `start` of `hay`: nothing before it on its line
/// but whitespace, quotes, or an exception class and its colon.
fn begins_message(hay: &str, line_start: usize, start: usize, extra: &[String]) -> bool {
    // A message the user shortened (`RuntimeError: ... To use CUDA with ...`) begins
    // after the ellipsis.
    let seg = &hay[line_start..start];
    // Only the class right before it is read: attempts along a 64 KiB line each cost
    // this much, not the line so far.
    let near = tail(seg, CLASS_LOOKBACK);
    let before = near
        .trim_matches(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`'))
        .trim_end_matches(['.', '\u{2026}', ' ']);
    (before.is_empty() && near.len() == seg.len()) || raised::class_before(before, extra).is_some()
}

/// The first occurrence of `word` in `hay`, also with its first letter's case swapped
/// when `either` (a message's first word).
fn find_either_case(hay: &str, word: &str, either: bool) -> Option<usize> {
    let exact = hay.find(word);
    if !either || word.is_empty() || !word.as_bytes()[0].is_ascii_alphabetic() {
        return exact;
    }
    let c = word.as_bytes()[0];
    let swapped = format!(
        "{}{}",
        if c.is_ascii_uppercase() { c.to_ascii_lowercase() } else { c.to_ascii_uppercase() } as char,
        &word[1..]
    );
    match (exact, hay.find(&swapped)) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The frame a pytest footer names: `path.py:77: RuntimeError`.
fn footer_frame(text: &str, at: usize) -> Option<Frame> {
    let (head, _) = text.trim_end().rsplit_once(": ")?;
    let (file, line) = head.rsplit_once(':')?;
    Some(Frame { file: file.trim().to_string(), line: line.parse().ok(), func: None, code: None, at })
}

/// Whether two printings of an exception's message are the same message: equal, or one
/// the other cut short (`... refers to a si...`).
fn same_message(a: &str, b: &str) -> bool {
    let cut = |s: &str| s.trim().trim_end_matches("...").trim_end().to_string();
    let (a, b) = (cut(a), cut(b));
    !a.is_empty() && !b.is_empty() && (a.starts_with(&b) || b.starts_with(&a))
}

impl<'s> Stream<'s> {
    /// The incident of an exception shown outside a traceback: its line, and the
    /// frames printed right after it (a message printed before its own traceback).
    pub(crate) fn loose_incident(&'s self, x: &'s Loose) -> Incident<'s> {
        let tb = self.tracebacks.iter().find(|t| t.exception.is_none() && t.start > x.line && t.start <= x.line + 2);
        let last = tb.map_or(x.line, |t| t.end);
        let l = self.lines[x.line];
        Incident {
            location: self.span(x.line, last),
            rank: self.rank_at(x.line),
            local_rank: self.local_at(x.line).0,
            host: self.local_at(x.line).1,
            exception: x.class.clone(),
            message: Some(one_line(&x.message)).filter(|m| !m.is_empty()),
            frames: tb.map(|t| t.frames.iter().collect()).unwrap_or_else(|| x.frame.iter().collect()),
            user_frame: tb.and_then(|t| t.user_frame()).or(x.frame.as_ref()),
            handled: l.logger && matches!(l.level, Some('E') | Some('W')),
            ts: l.ts,
        }
    }
}

/// Stream-local line index holding byte `off`.
fn line_of(starts: &[usize], off: usize) -> usize {
    match starts.binary_search(&off) {
        Ok(i) => i,
        Err(i) => i.saturating_sub(1),
    }
}

/// What the tracebacks of a stream say of each of its lines, computed once: a lookup
/// per template match instead of a pass over every traceback (20,000 tracebacks were
/// 20,000 passes of 20,000).
struct LineIndex {
    /// The innermost traceback whose exception message covers the line, and that
    /// message's span in lines.
    owner: Vec<Option<(usize, usize)>>,
    /// The line is a frame or source line of a traceback (not its message).
    frame: Vec<bool>,
}

impl LineIndex {
    fn new(tbs: &[Traceback], n_lines: usize) -> LineIndex {
        let mut owner: Vec<Option<(usize, usize)>> = vec![None; n_lines];
        let mut frame = vec![false; n_lines];
        for (i, t) in tbs.iter().enumerate() {
            if let Some(e) = &t.exception {
                let last = e.last.max(t.end);
                let span = last - e.first;
                for o in owner.iter_mut().take(last.saturating_add(1)).skip(e.first) {
                    // The first of the narrowest spans wins.
                    if o.is_none_or(|(_, s)| span < s) {
                        *o = Some((i, span));
                    }
                }
            }
            // Frames are outermost first; a debugger printed them the other way, under
            // its message.
            if let Some(at) = t.frames.iter().map(|f| f.at).min() {
                let from = (t.start + 1).max(at);
                let end = t.exception.as_ref().map(|e| e.first).filter(|&e| e > at).unwrap_or(t.end + 1);
                for x in frame.iter_mut().take(end).skip(from) {
                    *x = true;
                }
            }
        }
        LineIndex { owner, frame }
    }

    /// The innermost traceback whose exception message covers `line`.
    fn owner(&self, line: usize) -> Option<usize> {
        self.owner.get(line).copied().flatten().map(|(i, _)| i)
    }

    /// Whether `line` is a frame or source line of some traceback.
    fn in_frames(&self, line: usize) -> bool {
        self.frame.get(line).copied().unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::{push_numberless, text_hash};

    /// Texts hash alike exactly when they read alike without their numbers, whatever
    /// the digit runs' lengths and wherever they fall against the hash's eight-byte
    /// words.
    #[test]
    fn a_text_hash_is_the_text_without_its_numbers() {
        let bits = ["NCCL WARN ", "7", "12345678", "0", "x", "é", " ", "abcdefgh", "[Rank 3] ", "9a", "\n"];
        let mut seed: u64 = 11;
        let mut next = |n: usize| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        let texts: Vec<String> = (0..400).map(|_| (0..next(14)).map(|_| bits[next(bits.len())]).collect()).collect();
        let numberless = |t: &str| {
            let mut s = String::new();
            push_numberless(&mut s, t);
            s
        };
        let (mut same, mut different) = (0, 0);
        for a in &texts {
            for b in &texts {
                let alike = numberless(a) == numberless(b);
                assert_eq!(text_hash(a, 0, a.len()) == text_hash(b, 0, b.len()), alike, "{a:?} and {b:?}");
                if a != b {
                    if alike {
                        same += 1;
                    } else {
                        different += 1;
                    }
                }
            }
        }
        assert!(same > 50 && different > 1000, "{same} alike pairs of different texts, {different} unlike");
        // A span of the haystack, not the whole of it.
        assert_eq!(text_hash("xx step 12 yy", 3, 10), text_hash("step 9", 0, 6));
    }
}
