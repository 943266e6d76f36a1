//! The engine: from bytes to a [`Report`].
//!
//! Data flows one way:
//!
//! 1. [`ingest`](crate::ingest) cleans lines and attributes them to ranks;
//! 2. lines are regrouped per stream (one per rank, plus the unranked launcher stream),
//!    so interleaved ranks do not break each other's tracebacks;
//! 3. [`grammar::traceback`](crate::grammar::traceback) finds each stream's tracebacks;
//! 4. the aho-corasick prefilter finds the rule templates' anchor words, and only there
//!    are templates matched;
//! 5. matches become events, attached to the traceback whose message holds them;
//! 6. [`infer`](crate::infer) turns events into findings: evidence, culprit, ranks,
//!    roles, timeline, and the rule text rendered against the evidence.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use serde_json::Value;

use crate::grammar::traceback::{self, Traceback};
use crate::infer;
use crate::ingest::Line;
use crate::pack::{Pack, PackError, Rule, RuleSource};
use crate::report::{Input, Report, SCHEMA};
use crate::stream::{Diagnoser, Kept};
use crate::template::{Match, WalkBack};

/// The built-in rule pack's sources.
#[cfg(feature = "builtin")]
pub fn builtin_sources() -> Vec<RuleSource<'static>> {
    torchdx_rules::SOURCES.iter().map(|(name, text)| RuleSource { name, text }).collect()
}

/// The streaming scan's automaton: leftmost-longest and non-overlapping, the fastest
/// search (see [`Engine::scan`] for why no anchor is lost).
fn scan_automaton(patterns: &[String], kind: aho_corasick::AhoCorasickKind) -> AhoCorasick {
    AhoCorasickBuilder::new()
        .match_kind(MatchKind::LeftmostLongest)
        .kind(Some(kind))
        .dense_depth(DENSE_DEPTH)
        .build(patterns)
        .expect("literals: the automaton always builds")
}

/// The built-in pack: decoded from its precompiled form, else (a file whose JSON does
/// not decode into a rule) compiled from the TOML, which then reports the located error.
#[cfg(feature = "builtin")]
pub fn builtin_pack() -> Result<Pack, PackError> {
    let sources = builtin_sources();
    match Pack::from_precompiled(&sources, torchdx_rules::PRECOMPILED) {
        Some(pack) => Ok(pack),
        None => Pack::new(&sources),
    }
}

/// A compiled rule pack with its prefilter. Build once, diagnose many logs.
#[derive(Clone, Debug)]
pub struct Engine {
    pack: Pack,
    prefilter: AhoCorasick,
    /// For each prefilter pattern: the (rule, template, leading word) triples anchored
    /// on it (a template has a second anchor in case a wrap splits the first).
    anchors: Vec<Vec<(usize, usize, usize)>>,
    /// Patterns `0..n_first_anchors` are some template's first anchor (the scan's).
    n_first_anchors: usize,
    use_prefilter: bool,
    /// Texts rules ask about anywhere in the log (`log_contains`), searched on every line.
    needles: Vec<String>,
    /// One automaton over raw input for the streaming front end: template anchors and
    /// structural literals (patterns `0..n_triggers`) mark lines worth keeping, the
    /// needles (after them) mark `log_contains` texts as seen. A contiguous NFA: it
    /// builds in a fifth of the DFA's time, which is most of a paste's diagnosis.
    scan_nfa: AhoCorasick,
    /// The same patterns as a full DFA, about 1.4x faster per byte (measured on a
    /// generated log: 563 against 396 MB/s) but 1 ms longer to build: built on first use
    /// by a diagnosis that has read [`DFA_AFTER`] bytes, where it starts to pay. Both
    /// find the same matches (same patterns, same match kind), so reports do not depend
    /// on which one ran.
    scan_dfa: OnceLock<AhoCorasick>,
    scan_patterns: Vec<String>,
    n_triggers: usize,
    /// For each scan pattern that is also a needle: that needle's index.
    needle_alias: Vec<Option<usize>>,
    /// The needles alone, searched overlapping on kept lines.
    needle_ac: AhoCorasick,
}

/// Literals that start or carry structure the rules need even without an anchor.
const STRUCTURAL: &[&str] = &[
    "Traceback (most recent call last)",
    "File \"",
    "File /",
    "File [",
    "Cell In[",
    "<ipython-input",
    "Error:",
    "Exception:",
    "Interrupt",
    "During handling of the above",
    "The above exception",
    "Root Cause",
];

/// Depth of the NFAs' dense (array) states: 1 instead of aho-corasick's default 3
/// builds the scan NFA in 0.24 ms instead of 0.31 with the same search speed (measured
/// on a generated log): beyond the first byte our literals rarely share a prefix.
const DENSE_DEPTH: usize = 1;

/// Bytes a diagnosis reads with the scan NFA before it switches to the DFA.
pub(crate) const DFA_AFTER: u64 = 2 << 20;

/// Texts inference itself asks about anywhere in the log.
const INFER_NEEDLES: &[&str] = &["load_state_dict", "LOCAL_RANK", "local_rank", "init_process_group"];

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
    pub elastic: Vec<crate::grammar::elastic::Entry>,
    /// Offset of each line in the stream's joined text.
    pub starts: Vec<usize>,
}

impl Engine {
    /// The engine with the built-in rule pack.
    ///
    /// # Panics
    /// Never for a released build: the built-in pack is compiled and checked by the
    /// test suite, so a failure here is a bug in the pack, not in the input.
    #[cfg(feature = "builtin")]
    pub fn builtin() -> Engine {
        Engine::new(builtin_pack().expect("the built-in rule pack is valid (checked by tests)"))
    }

    /// The built-in pack plus `extra` rule files (a rule with an existing id replaces it).
    #[cfg(feature = "builtin")]
    pub fn with_extra(extra: &[RuleSource<'_>]) -> Result<Engine, PackError> {
        Ok(Engine::new(builtin_pack()?.with(extra)?))
    }

    /// An engine over any compiled pack.
    pub fn new(pack: Pack) -> Engine {
        let mut patterns: Vec<String> = Vec::new();
        let mut anchors: Vec<Vec<(usize, usize, usize)>> = Vec::new();
        let mut n_first = 0;
        let mut ids: BTreeMap<&str, usize> = BTreeMap::new();
        // First anchors first: patterns `0..n_first` are what the raw scan looks for.
        // Second anchors only serve the prefilter over kept lines: a line whose first
        // anchor a wrap split is kept anyway by its structure (`Error:`, the traceback
        // around it), and the scan stays as fast as with one anchor per template.
        for second in [false, true] {
            for (ri, rule) in pack.rules().iter().enumerate() {
                for (ti, t) in rule.templates.iter().enumerate() {
                    for (word, anchor) in t.anchors().into_iter().skip(usize::from(second)).take(1) {
                        let pid = *ids.entry(anchor).or_insert_with(|| {
                            patterns.push(anchor.to_string());
                            anchors.push(Vec::new());
                            patterns.len() - 1
                        });
                        anchors[pid].push((ri, ti, word));
                    }
                }
            }
            if !second {
                n_first = patterns.len();
            }
        }
        // The kept windows are small: an NFA builds faster and searches them fast enough.
        let prefilter = AhoCorasickBuilder::new()
            .match_kind(MatchKind::Standard)
            .kind(Some(aho_corasick::AhoCorasickKind::ContiguousNFA))
            .dense_depth(DENSE_DEPTH)
            .build(&patterns)
            .expect("anchors are short literals: the automaton always builds");
        let mut needles: Vec<String> = INFER_NEEDLES.iter().map(|s| s.to_string()).collect();
        for r in pack.rules() {
            for c in &r.spec.cases {
                for n in &c.when.log_contains {
                    if !n.is_empty() && !needles.contains(n) {
                        needles.push(n.clone());
                    }
                }
            }
        }
        let mut scan: Vec<String> = patterns[..n_first].to_vec();
        scan.extend(STRUCTURAL.iter().map(|s| s.to_string()));
        let n_triggers = scan.len();
        scan.extend(needles.iter().cloned());
        let scan_nfa = scan_automaton(&scan, aho_corasick::AhoCorasickKind::ContiguousNFA);
        let needle_alias = scan.iter().map(|p| needles.iter().position(|n| n == p)).collect();
        let needle_ac = AhoCorasickBuilder::new()
            .kind(Some(aho_corasick::AhoCorasickKind::ContiguousNFA))
            .build(&needles)
            .expect("literals: the automaton always builds");
        Engine {
            pack,
            prefilter,
            anchors,
            n_first_anchors: n_first,
            use_prefilter: true,
            needles,
            scan_nfa,
            scan_dfa: OnceLock::new(),
            scan_patterns: scan,
            n_triggers,
            needle_alias,
            needle_ac,
        }
    }

    /// Turns the prefilter off (every position is tried): for differential tests that
    /// prove the prefilter never hides a match.
    pub fn without_prefilter(mut self) -> Engine {
        self.use_prefilter = false;
        self
    }

    /// The rule pack.
    pub fn pack(&self) -> &Pack {
        &self.pack
    }

    /// Diagnoses a log given as text.
    pub fn diagnose(&self, text: &str) -> Report {
        self.diagnose_bytes(text.as_bytes())
    }

    /// Diagnoses a log given as bytes (invalid UTF-8 is replaced, line numbers kept).
    /// The same as streaming it in one chunk.
    pub fn diagnose_bytes(&self, bytes: &[u8]) -> Report {
        let mut d = self.stream();
        d.feed(bytes);
        d.finish()
    }

    /// Starts an incremental diagnosis: feed chunks of any size, then finish.
    pub fn stream(&self) -> Diagnoser<'_> {
        Diagnoser::new(self)
    }

    pub(crate) fn needle_count(&self) -> usize {
        self.needles.len()
    }

    /// Scans raw bytes: calls `trigger(offset, anchor)` for each template anchor
    /// (`Some(pattern)`) or structural literal (`None`) and marks needles seen. `read` is
    /// how many bytes the diagnosis has read so far (it picks the automaton).
    pub(crate) fn scan(
        &self,
        bytes: &[u8],
        read: u64,
        seen: &mut [bool],
        mut trigger: impl FnMut(usize, Option<usize>),
    ) {
        let n_anchors = self.n_first_anchors;
        // Leftmost-longest and non-overlapping, the fastest search. A literal can hide
        // one that starts inside it; so that no anchor is lost that way, a needle hit
        // keeps its line too (needles are rare texts), and the template matcher later
        // searches the kept lines with every anchor, overlapping.
        let ac = if read > DFA_AFTER {
            self.scan_dfa.get_or_init(|| scan_automaton(&self.scan_patterns, aho_corasick::AhoCorasickKind::DFA))
        } else {
            &self.scan_nfa
        };
        for m in ac.find_iter(bytes) {
            let p = m.pattern().as_usize();
            // A literal that is both an anchor and a needle is one pattern: mark it.
            if let Some(Some(n)) = self.needle_alias.get(p) {
                if let Some(s) = seen.get_mut(*n) {
                    *s = true;
                }
            }
            if p < n_anchors {
                trigger(m.start(), Some(p));
            } else if p < self.n_triggers {
                trigger(m.start(), None);
            } else {
                if let Some(s) = seen.get_mut(p - self.n_triggers) {
                    *s = true;
                }
                trigger(m.start(), None);
            }
        }
    }

    /// Whether an anchor hit at `at` in a raw line could start one of its templates.
    /// Lines with colour codes are always kept (a code may sit inside the message).
    pub(crate) fn anchor_could_match(&self, raw: &[u8], at: usize, pattern: usize) -> bool {
        // Only a plain ASCII line can be judged raw: colour codes, typographic quotes
        // and full-width colons are normalised by the cleaner first.
        if !raw.is_ascii()
            || raw.contains(&0x1b)
            || memchr::memmem::find(raw, b"[0m").is_some()
            || memchr::memmem::find(raw, b"[1m").is_some()
        {
            return true;
        }
        let Ok(text) = std::str::from_utf8(raw) else { return true };
        let rules = self.pack.rules();
        self.anchors[pattern].iter().any(|&(ri, ti, word)| {
            let t = &rules[ri].templates[ti];
            match t.walk_back(text, at, word) {
                WalkBack::Start(start) => t.could_match_at(text, start),
                // The line begins inside the leading words: the rest may sit on the
                // previous line (a wrap).
                WalkBack::RanOut => true,
                WalkBack::Mismatch => false,
            }
        })
    }

    /// The literals the streaming scan searches for (anchors, structure, needles): what a
    /// `grep -F` baseline must search to do comparable work.
    pub fn scan_literals(&self) -> Vec<String> {
        self.scan_patterns.clone()
    }

    /// Whether every line must be treated as a trigger (prefilter off).
    pub(crate) fn keep_everything(&self) -> bool {
        !self.use_prefilter
    }

    /// Whether a needle was seen, given the flags a [`Diagnoser`] collected.
    pub(crate) fn needle_seen(&self, seen: &[bool], needle: &str) -> bool {
        self.needles.iter().position(|n| n == needle).is_some_and(|i| seen.get(i).copied().unwrap_or(false))
    }

    /// Diagnoses the windows a [`Diagnoser`] retained.
    pub(crate) fn diagnose_kept(
        &self,
        nbytes: u64,
        nlines: u32,
        ranks: Vec<u32>,
        kept: Vec<Kept>,
        seen: &[bool],
    ) -> Report {
        let input = Input { bytes: nbytes, lines: u64::from(nlines), ranks, truncated_lines: 0 };
        // The raw scan is non-overlapping, so a needle inside a longer literal can be
        // missed there; kept lines are searched again for every needle, overlapping.
        let mut seen = seen.to_vec();
        for k in &kept {
            for m in self.needle_ac.find_overlapping_iter(&k.line.text) {
                seen[m.pattern().as_usize()] = true;
            }
        }
        let seen = &seen[..];
        let streams = self.streams(&kept);
        let log = infer::LogText { engine: self, seen, distributed: !input.ranks.is_empty() };
        let findings = infer::findings(self, &streams, &log);
        let (initiating, findings, timeline) = infer::roles(findings, &input.ranks);
        Report { schema: SCHEMA.to_string(), input, initiating, findings, timeline }
    }

    /// Regroups lines per stream (a blank line marks a gap between windows) and parses each.
    fn streams<'l>(&self, kept: &'l [Kept]) -> Vec<Stream<'l>> {
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
                self.parse_stream(rank, ls)
            })
            .collect()
    }

    fn parse_stream<'l>(&self, rank: Option<u32>, lines: Vec<&'l Line>) -> Stream<'l> {
        let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
        let tracebacks = traceback::parse(&texts);
        let mut hay = String::with_capacity(texts.iter().map(|t| t.len() + 1).sum());
        let mut starts = Vec::with_capacity(texts.len());
        for t in &texts {
            starts.push(hay.len());
            hay.push_str(t);
            hay.push('\n');
        }
        let events = self.match_events(&hay, &starts, &tracebacks);
        let elastic = if hay.contains("local_rank") { crate::grammar::elastic::entries(&texts) } else { Vec::new() };
        Stream { rank, lines, tracebacks, events, elastic, starts }
    }

    /// Runs the templates at the prefilter's hits and keeps the best non-overlapping
    /// matches.
    fn match_events(&self, hay: &str, starts: &[usize], tbs: &[Traceback]) -> Vec<Event> {
        let rules = self.pack.rules();
        let mut cands: Vec<Event> = Vec::new();
        // Both anchors of a template usually hit: try each start once.
        let mut tried: std::collections::BTreeSet<(usize, usize, usize)> = std::collections::BTreeSet::new();
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
        if self.use_prefilter {
            for hit in self.prefilter.find_overlapping_iter(hay) {
                for &(ri, ti, word) in &self.anchors[hit.pattern().as_usize()] {
                    try_at(ri, ti, word, hit.start(), &mut cands);
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
            let class =
                e.tb.and_then(|t| tbs[t].exception.as_ref()).map(|x| x.short_class().to_string()).or_else(|| {
                    let line_start = starts[e.first];
                    let before = &hay[line_start..e.m.start];
                    traceback::class_before(before)
                        .or_else(|| traceback::exception_line(before.trim()).map(|(c, _)| c))
                        .map(|c| c.rsplit('.').next().unwrap_or(c).to_string())
                });
            class.is_some_and(|c| spec.exception.iter().any(|x| x.rsplit('.').next() == Some(c.as_str())))
        });
        // Conditions on a match's own captures.
        cands.retain(|e| match &rules[e.template_spec_rule()].spec.matches[e.template].when {
            None => true,
            Some(w) => {
                let mut ev = BTreeMap::new();
                captures_to_evidence(&e.m, &mut ev);
                crate::infer::derive(&mut ev);
                crate::infer::holds_on_evidence(w, &ev)
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
}

impl Stream<'_> {
    /// Offset in the stream's text where line `i` starts.
    pub(crate) fn line_start(&self, i: usize) -> usize {
        self.starts.get(i).copied().unwrap_or(0)
    }
}

impl Event {
    fn template_spec_rule(&self) -> usize {
        self.rule
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

/// Evidence values captured by one match, merged into a map (`name[]` keys append).
pub(crate) fn captures_to_evidence(m: &Match, ev: &mut BTreeMap<String, Value>) {
    for (k, v) in &m.captures {
        if let Some(list) = k.strip_suffix("[]") {
            let entry = ev.entry(list.to_string()).or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(a) = entry {
                a.push(v.clone());
            }
        } else {
            ev.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_precompiled_builtin_pack_is_the_toml_pack() {
        let json = torchdx_rules::PRECOMPILED;
        let sources = builtin_sources();
        let pre = Pack::from_precompiled(&sources, json).expect("the precompiled pack matches its sources");
        let parsed = Pack::new(&sources).expect("the built-in pack compiles");
        let specs = |p: &Pack| p.rules().iter().map(|r| (r.source_name.clone(), r.spec.clone())).collect::<Vec<_>>();
        assert_eq!(specs(&pre), specs(&parsed));
        assert_eq!(pre.ops(), parsed.ops());
        assert!(!pre.ops().is_empty() && pre.rules().len() > 40);
    }
}
