//! The prefilter: which text is worth a template match attempt.
//!
//! Two aho-corasick automata, built once per pack:
//!
//! - the **scan** over raw input bytes (implementing the window's
//!   [`Trigger`](crate::ingest::window::Trigger)): every template's first anchor (its
//!   longest leading word), the grammars' structural literals
//!   ([`crate::grammar::TRIGGERS`]) and the needles rules and facts ask about anywhere
//!   in the log. Leftmost-longest and non-overlapping, the fastest search. It starts as
//!   a contiguous NFA (0.24 ms to build) and switches to a DFA (7-8 ms to build, 1.4x
//!   faster per byte: 563 against 396 MB/s on a generated log) once the engine has
//!   read [`DFA_AFTER`] bytes, over one diagnosis or many: an embedder that diagnoses
//!   pastes one after another pays for the DFA once, as a one-shot diagnosis of a big
//!   log does (a 100 KB paste then costs 32% fewer instructions). Both find the same
//!   matches, so the switch changes speed, never a report;
//! - the **anchors** over kept lines: first and second anchors of every template,
//!   overlapping, so a template whose first anchor a terminal wrap split is still tried.
//!   A contiguous NFA, switched to a DFA at the same point as the scan: an overlapping
//!   search walks failure transitions and match lists at every byte, and on kept text
//!   dense with anchor words (near misses of a message along a line) the NFA took a
//!   tenth of the time, 110 instructions a byte. The needles' own automaton, which
//!   marks what kept lines say anywhere, switches with them (48 instructions a byte
//!   as an NFA).
//!
//! Templates run only where an anchor hits ([`super::matching`]); a differential test
//! runs every example with the prefilter off and compares.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};

use super::pack::Pack;
use super::template::{Template, WalkBack};
use crate::ingest::window::Trigger;

/// Depth of the NFAs' dense (array) states: 1 instead of aho-corasick's default 3
/// builds the scan NFA in 0.24 ms instead of 0.31 with the same search speed (measured
/// on a generated log): beyond the first byte our literals rarely share a prefix.
const DENSE_DEPTH: usize = 1;

/// Bytes an engine reads with the scan NFA, over all its diagnoses, before it switches
/// to the DFA.
pub(crate) const DFA_AFTER: u64 = 2 << 20;

/// Bytes the scan has read over the engine's life: only the NFA/DFA switch reads it,
/// so a report never depends on it. Relaxed: concurrent diagnoses may switch a chunk
/// late, which changes nothing but speed. A clone starts where its original was.
#[derive(Debug, Default)]
struct Scanned(AtomicU64);

impl Clone for Scanned {
    fn clone(&self) -> Scanned {
        Scanned(AtomicU64::new(self.0.load(Ordering::Relaxed)))
    }
}

/// One template anchored on a prefilter pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Anchored {
    pub rule: usize,
    pub template: usize,
    /// The template's entry the anchor leads (0: its start).
    pub entry: usize,
    /// Index of the anchor among the entry's leading words.
    pub word: usize,
    /// What must be printed right before the anchor (see [`Anchored::may_follow`]).
    before: Option<(u8, bool)>,
}

impl Anchored {
    pub(crate) fn new(t: &Template, rule: usize, template: usize, entry: usize, word: usize) -> Anchored {
        Anchored { rule, template, entry, word, before: t.byte_before_word(entry, word) }
    }

    /// Whether the template's walk back from an anchor hit can get past the leading
    /// word before it, given `prev`, the last byte before the hit that is not
    /// whitespace (`None`: the text starts there). A hit of a word many templates lead
    /// with (`error:` of `CUDA error:`, `NCCL error:`, `cuDNN error:` ...) tries each of
    /// them; one byte rules most of them out, where walking back cost a lookup of the
    /// line's attempts and a walk each (a quarter of the time on lines of glued
    /// `CUDA error: ...` reports). Never false where the walk back could succeed.
    pub(crate) fn may_follow(&self, prev: Option<u8>) -> bool {
        match (self.before, prev) {
            (Some((want, fold)), Some(got)) => got == want || (fold && got.eq_ignore_ascii_case(&want)),
            _ => true,
        }
    }
}

/// The last byte before `at` that is not ASCII whitespace (what [`Anchored::may_follow`]
/// reads), `None` at the text's start.
pub(crate) fn byte_before(text: &str, at: usize) -> Option<u8> {
    text.as_bytes().get(..at)?.iter().rev().copied().find(|b| !b.is_ascii_whitespace())
}

/// The compiled prefilter of a pack.
#[derive(Clone, Debug)]
pub(crate) struct Prefilter {
    /// Anchors (first and second) of every template, for kept lines.
    pub(crate) anchors_ac: AhoCorasick,
    /// The same as a DFA, once the scan has switched to its own ([`Prefilter::anchors`]).
    anchors_dfa: OnceLock<AhoCorasick>,
    anchor_patterns: Vec<String>,
    /// For each anchor pattern: the templates anchored on it.
    pub(crate) anchored: Vec<Vec<Anchored>>,
    /// Patterns `0..n_first_anchors` are some template's first anchor (the scan's).
    n_first_anchors: usize,
    enabled: bool,
    /// Texts asked about anywhere in the log, searched on every line.
    needles: Vec<String>,
    scan_nfa: AhoCorasick,
    scan_dfa: OnceLock<AhoCorasick>,
    scanned: Scanned,
    scan_patterns: Vec<String>,
    n_triggers: usize,
    /// For each scan pattern that is also a needle: that needle's index.
    needle_alias: Vec<Option<usize>>,
    /// The needles alone, searched overlapping on kept lines.
    needle_ac: AhoCorasick,
    /// The same as a DFA, once the scan has switched to its own ([`Prefilter::needle_automaton`]).
    needle_dfa: OnceLock<AhoCorasick>,
    /// Structural literals then needles, searched overlapping on a line whose anchor
    /// hits failed (the scan's leftmost-longest match may have hidden one).
    rescan_ac: AhoCorasick,
    /// The longest of those literals, in bytes.
    rescan_max: usize,
    /// Those literals' texts, in the same order.
    rescan_literals: Vec<String>,
    /// Per scan pattern, what its own bytes hide, worked out the first time it is asked.
    hidden: Vec<OnceLock<Hidden>>,
    /// The longest anchor, in bytes.
    anchor_max: usize,
    n_structural: usize,
}

/// The rescan literals (structural literals, then needles) a scan pattern hides: those
/// that begin inside it. A hit's own bytes are the pattern's, so what lies wholly
/// inside it is known from the pattern alone; only a literal that begins inside it and
/// runs past its end needs the input read, at the few offsets where one can. Searching
/// at every byte of every failed hit was a tenth of the time on near misses of long
/// messages (`While copying the parameter named ...`) repeated along a line.
#[derive(Clone, Debug, Default)]
struct Hidden {
    /// The rescan literals (their indices in `rescan_ac`) that lie wholly inside it.
    inside: Vec<usize>,
    /// Offsets in the pattern where a literal may begin and run past its end.
    cross: Vec<usize>,
    /// The automaton could not search the pattern: keep every line it hits.
    unsearchable: bool,
}

/// The prefilter with the pack it was built for: the window's [`Trigger`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scan<'a> {
    pub prefilter: &'a Prefilter,
    pub pack: &'a Pack,
}

/// The anchors' automaton (and the needles' DFA): standard match semantics, for
/// overlapping searches.
fn anchors_automaton(patterns: &[String], kind: AhoCorasickKind) -> AhoCorasick {
    automaton(patterns, MatchKind::Standard, kind)
}

/// The scan's automaton: leftmost-longest and non-overlapping (see [`Prefilter::scan`]
/// for why no anchor is lost).
fn scan_automaton(patterns: &[String], kind: AhoCorasickKind) -> AhoCorasick {
    automaton(patterns, MatchKind::LeftmostLongest, kind)
}

fn automaton(patterns: &[String], match_kind: MatchKind, kind: AhoCorasickKind) -> AhoCorasick {
    AhoCorasickBuilder::new()
        .match_kind(match_kind)
        .kind(Some(kind))
        .dense_depth(DENSE_DEPTH)
        .build(patterns)
        .expect("short literals: the automaton always builds")
}

impl Prefilter {
    /// Builds the automata for `pack`; `needles` are the texts asked about anywhere.
    pub(crate) fn new(pack: &Pack, structural: &[String], needles: Vec<String>) -> Prefilter {
        let mut patterns: Vec<String> = Vec::new();
        let mut anchored: Vec<Vec<Anchored>> = Vec::new();
        let mut n_first = 0;
        let mut ids: BTreeMap<String, usize> = BTreeMap::new();
        // A common word is searched as the template spells it only (see
        // `IngestFile::common_words`): `rank` would stop the scan on every line.
        let common = &pack.ingest().common_words;
        // First anchors first: patterns `0..n_first` are what the raw scan looks for.
        // Second anchors only serve the prefilter over kept lines: a line whose first
        // anchor a wrap split is kept anyway by its structure (`Error:`, the traceback
        // around it), and the scan stays as fast as with one anchor per template.
        for second in [false, true] {
            for (ri, rule) in pack.rules().iter().enumerate() {
                for (ti, t) in rule.templates.iter().enumerate() {
                    for a in t.anchors().into_iter().filter(|a| t.is_first_anchor(a.entry, a.word) != second) {
                        // A message's first word may be printed in either case (quoted
                        // mid-sentence, retyped): both spellings are searched.
                        let mut spellings = vec![a.text.to_string()];
                        if a.word == 0 && !common.iter().any(|c| c.eq_ignore_ascii_case(a.text)) {
                            spellings.extend(swap_first_case(a.text));
                        }
                        for text in spellings {
                            let pid = match ids.get(text.as_str()) {
                                Some(&p) => p,
                                None => {
                                    patterns.push(text.clone());
                                    anchored.push(Vec::new());
                                    ids.insert(text, patterns.len() - 1);
                                    patterns.len() - 1
                                }
                            };
                            anchored[pid].push(Anchored::new(t, ri, ti, a.entry, a.word));
                        }
                    }
                }
            }
            if !second {
                n_first = patterns.len();
            }
        }
        // The kept windows are small: an NFA builds faster and searches them fast enough.
        let anchors_ac = anchors_automaton(&patterns, AhoCorasickKind::ContiguousNFA);
        let mut scan: Vec<String> = patterns[..n_first].to_vec();
        scan.extend(structural.iter().cloned());
        let n_triggers = scan.len();
        scan.extend(needles.iter().cloned());
        let scan_nfa = scan_automaton(&scan, AhoCorasickKind::ContiguousNFA);
        let hidden = scan.iter().map(|_| OnceLock::new()).collect();
        let needle_alias = scan.iter().map(|p| needles.iter().position(|n| n == p)).collect();
        let needle_ac = AhoCorasickBuilder::new()
            .kind(Some(AhoCorasickKind::ContiguousNFA))
            .build(&needles)
            .expect("literals: the automaton always builds");
        let rescan_literals: Vec<String> = structural.iter().chain(&needles).cloned().collect();
        let rescan_max = rescan_literals.iter().map(String::len).max().unwrap_or(0);
        let rescan_ac = AhoCorasickBuilder::new()
            .kind(Some(AhoCorasickKind::ContiguousNFA))
            .start_kind(aho_corasick::StartKind::Anchored)
            .build(&rescan_literals)
            .expect("literals: the automaton always builds");
        Prefilter {
            anchors_ac,
            anchors_dfa: OnceLock::new(),
            anchored,
            n_first_anchors: n_first,
            enabled: true,
            needles,
            scan_nfa,
            scan_dfa: OnceLock::new(),
            scanned: Scanned::default(),
            scan_patterns: scan,
            n_triggers,
            needle_alias,
            needle_ac,
            needle_dfa: OnceLock::new(),
            rescan_max,
            anchor_max: patterns.iter().map(String::len).max().unwrap_or(0),
            anchor_patterns: patterns,
            rescan_ac,
            rescan_literals,
            hidden,
            n_structural: structural.len(),
        }
    }

    /// What scan pattern `p` hides ([`Hidden`]), worked out once.
    fn hidden(&self, p: usize) -> Option<&Hidden> {
        let text = self.scan_patterns.get(p)?.as_bytes();
        Some(self.hidden[p].get_or_init(|| {
            let mut h = Hidden::default();
            for k in 0..text.len() {
                h.unsearchable |= self.rescan_at(text, k, text.len(), &mut |m| h.inside.push(m)).is_err();
                if self.rescan_literals.iter().any(|r| r.len() > text.len() - k && r.as_bytes().starts_with(&text[k..]))
                {
                    h.cross.push(k);
                }
            }
            h
        }))
    }

    /// Each rescan literal that begins at `bytes[from]` and ends by `limit`, to `found`.
    fn rescan_at(
        &self,
        bytes: &[u8],
        from: usize,
        limit: usize,
        found: &mut dyn FnMut(usize),
    ) -> Result<(), aho_corasick::MatchError> {
        let stop = from.saturating_add(self.rescan_max).min(limit);
        let input = aho_corasick::Input::new(bytes).range(from..stop).anchored(aho_corasick::Anchored::Yes);
        let mut state = aho_corasick::automaton::OverlappingState::start();
        loop {
            self.rescan_ac.try_find_overlapping(input.clone(), &mut state)?;
            match state.get_match() {
                Some(m) => found(m.pattern().as_usize()),
                None => return Ok(()),
            }
        }
    }

    /// Each rescan literal that begins inside the hit of scan pattern `p` at
    /// `bytes[at]`, to `found` (structural literals first, then needles, as in
    /// `rescan_ac`). `Err` when that cannot be told: keep the line.
    fn hidden_at(&self, bytes: &[u8], at: usize, p: usize, found: &mut dyn FnMut(usize)) -> Result<(), ()> {
        let len = self.scan_patterns.get(p).map_or(0, String::len);
        let end = at.saturating_add(len).min(bytes.len());
        match self.hidden(p) {
            // The hit is the pattern's bytes, so what the pattern hides, it hides.
            Some(h) if bytes.get(at..end) == Some(self.scan_patterns[p].as_bytes()) => {
                if h.unsearchable {
                    return Err(());
                }
                for &m in &h.inside {
                    found(m);
                }
                for &k in &h.cross {
                    self.rescan_at(bytes, at + k, bytes.len(), found).map_err(|_| ())?;
                }
                Ok(())
            }
            _ => (at..end).try_for_each(|from| self.rescan_at(bytes, from, bytes.len(), found).map_err(|_| ())),
        }
    }

    /// Turns the prefilter off: every line is kept and every position tried.
    pub(crate) fn disable(&mut self) {
        self.enabled = false;
    }

    /// Whether the prefilter is on.
    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    /// Whether the scan has switched to its DFA.
    #[cfg(test)]
    pub(crate) fn has_dfa(&self) -> bool {
        self.scan_dfa.get().is_some()
    }

    /// The anchors' automaton for kept lines: the DFA once the engine has read
    /// [`DFA_AFTER`] bytes (built then, once), else the NFA. Both find the same matches
    /// in the same order.
    pub(crate) fn anchors(&self) -> &AhoCorasick {
        self.switched(&self.anchors_ac, &self.anchors_dfa, &self.anchor_patterns)
    }

    /// The needles' automaton for kept lines, switched to a DFA with the anchors'
    /// (every kept byte is searched for needles: on kilobyte lines of near misses the
    /// NFA's overlapping search was a tenth of the time, 48 instructions a byte).
    fn needle_automaton(&self) -> &AhoCorasick {
        self.switched(&self.needle_ac, &self.needle_dfa, &self.needles)
    }

    /// `nfa` until the engine has read [`DFA_AFTER`] bytes, then the DFA in `dfa`, built
    /// once from `patterns` with the same (standard, overlapping) semantics.
    fn switched<'a>(
        &self,
        nfa: &'a AhoCorasick,
        dfa: &'a OnceLock<AhoCorasick>,
        patterns: &[String],
    ) -> &'a AhoCorasick {
        if self.scanned.0.load(Ordering::Relaxed) > DFA_AFTER {
            dfa.get_or_init(|| anchors_automaton(patterns, AhoCorasickKind::DFA))
        } else {
            nfa
        }
    }

    /// Whether the anchors' DFA was built.
    #[cfg(test)]
    pub(crate) fn has_anchors_dfa(&self) -> bool {
        self.anchors_dfa.get().is_some()
    }

    /// The literals the scan searches for.
    pub(crate) fn scan_literals(&self) -> &[String] {
        &self.scan_patterns
    }

    /// The needles, in the order of the `seen` flags.
    pub(crate) fn needles(&self) -> &[String] {
        &self.needles
    }

    /// Marks the needles in `text` seen (overlapping: the raw scan is not, so a needle
    /// inside a longer literal can be missed there).
    pub(crate) fn mark_needles(&self, text: &str, seen: &mut [bool]) {
        for m in self.needle_automaton().find_overlapping_iter(text) {
            seen[m.pattern().as_usize()] = true;
        }
    }
}

impl Scan<'_> {
    /// Whether the needle `pattern` hit at `at` hides, under the leftmost-longest scan,
    /// an anchor that could start a match or a structural literal starting inside it.
    /// A needle marks itself seen in the scan; it keeps its line only so (`NCCL INFO`,
    /// which a case asks about, is on most lines of an `NCCL_DEBUG=INFO` log). Work is
    /// bounded by the needle's length, not the line's.
    fn hidden_by(&self, text: &str, at: usize, pattern: usize, pool: &mut u64) -> bool {
        let pre = self.prefilter;
        let b = text.as_bytes();
        let len = pre.scan_patterns.get(pattern).map_or(0, String::len);
        let end = at.saturating_add(len).min(b.len());
        let Some(span) = b.get(at..end.saturating_add(pre.anchor_max).min(b.len())) else { return true };
        for m in pre.anchors_ac.find_overlapping_iter(span) {
            let q = m.pattern().as_usize();
            if m.start() < len && q < pre.n_first_anchors && self.could_match(text, at + m.start(), q, pool) {
                return true;
            }
        }
        let mut structural = false;
        let searched = pre.hidden_at(b, at, pattern, &mut |m| structural |= m < pre.n_structural);
        structural || searched.is_err()
    }
}

/// `word` with its first letter in the other case, when it starts with a letter.
fn swap_first_case(word: &str) -> Option<String> {
    let c = word.chars().next().filter(char::is_ascii_alphabetic)?;
    let swapped = if c.is_ascii_uppercase() { c.to_ascii_lowercase() } else { c.to_ascii_uppercase() };
    Some(format!("{swapped}{}", &word[1..]))
}

impl Trigger for Scan<'_> {
    fn scan(&self, bytes: &[u8], seen: &mut [bool], trigger: &mut dyn FnMut(usize, Option<usize>)) {
        let pre = self.prefilter;
        let read = pre.scanned.0.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let n_anchors = pre.n_first_anchors;
        // Leftmost-longest and non-overlapping, the fastest search. A literal can hide
        // one that starts inside it: a needle's hit is judged like an anchor's, by what
        // it may hide (`Trigger::could_match`), and the template matcher later searches
        // the kept lines with every anchor, overlapping.
        let ac = if read > DFA_AFTER {
            pre.scan_dfa.get_or_init(|| scan_automaton(&pre.scan_patterns, AhoCorasickKind::DFA))
        } else {
            &pre.scan_nfa
        };
        for m in ac.find_iter(bytes) {
            let p = m.pattern().as_usize();
            // A literal that is both an anchor and a needle is one pattern: mark it.
            if let Some(Some(n)) = pre.needle_alias.get(p) {
                if let Some(s) = seen.get_mut(*n) {
                    *s = true;
                }
            }
            if p < n_anchors {
                trigger(m.start(), Some(p));
            } else if p < pre.n_triggers {
                trigger(m.start(), None);
            } else {
                if let Some(s) = seen.get_mut(p - pre.n_triggers) {
                    *s = true;
                }
                trigger(m.start(), Some(p));
            }
        }
    }

    /// Lines with colour codes are never judged (a code may sit inside the message).
    fn judgeable<'l>(&self, raw: &'l [u8]) -> Option<&'l str> {
        // Only a plain ASCII line can be judged raw: colour codes, typographic quotes
        // and full-width colons are normalised by the cleaner first.
        if !raw.is_ascii()
            || raw.contains(&0x1b)
            || memchr::memmem::find(raw, b"[0m").is_some()
            || memchr::memmem::find(raw, b"[1m").is_some()
        {
            return None;
        }
        std::str::from_utf8(raw).ok()
    }

    /// The matcher's pool for the same line. A spent pool answers "keep the line", which
    /// can never lose a match (the matcher reads every kept line with its own, whole
    /// pool). Judging had half the pool while the matcher had a step a byte; with a step
    /// per four bytes ([`super::template::BYTES_PER_STEP`]) half was too little: a kept
    /// line can still change the report (the fallback rule reads kept lines), and the
    /// heartbeat-monitor message, a near miss `nccl-watchdog-timeout` carries as an
    /// example, was kept and reported as a cut traceback, as with a quarter of the old
    /// pool.
    fn line_pool(&self, len: usize) -> u64 {
        super::template::step_pool(len)
    }

    fn could_match(&self, text: &str, at: usize, pattern: usize, pool: &mut u64) -> bool {
        if pattern >= self.prefilter.n_first_anchors {
            return self.hidden_by(text, at, pattern, pool);
        }
        let rules = self.pack.rules();
        let prev = byte_before(text, at);
        self.prefilter.anchored[pattern].iter().filter(|a| a.may_follow(prev)).any(|a| {
            let t = &rules[a.rule].templates[a.template];
            match t.walk_back(text, at, a.entry, a.word) {
                WalkBack::Start(start) => t.could_match_at_pooled(text, start, a.entry, pool),
                // The line begins inside the leading words: the rest may sit on the
                // previous line (a wrap).
                WalkBack::RanOut => true,
                WalkBack::Mismatch => false,
            }
        })
    }

    fn keeps_everything(&self) -> bool {
        !self.prefilter.enabled
    }

    fn mark_needles(&self, bytes: &[u8], seen: &mut [bool]) {
        for m in self.prefilter.needle_automaton().find_overlapping_iter(bytes) {
            if let Some(s) = seen.get_mut(m.pattern().as_usize()) {
                *s = true;
            }
        }
    }

    fn needle_margin(&self) -> usize {
        self.prefilter.needles.iter().map(String::len).max().unwrap_or(1).saturating_sub(1)
    }

    fn rescan(&self, raw: &[u8], hits: &[(usize, Option<usize>)], base: usize, seen: &mut [bool]) -> bool {
        let pre = self.prefilter;
        // The scan is leftmost-longest, so a literal it hid starts inside a reported
        // anchor: what each failed anchor hides (`Prefilter::hidden_at`), not a search
        // of the line (a quarter of all scan time on generated training logs, where
        // common words are anchors).
        let mut found = false;
        for (off, p) in hits.iter().filter_map(|&(off, p)| Some((off - base, p?))) {
            let searched = pre.hidden_at(raw, off, p, &mut |m| match m.checked_sub(pre.n_structural) {
                // A structural literal keeps the line; a needle is only marked.
                None => found = true,
                Some(n) => {
                    if let Some(s) = seen.get_mut(n) {
                        *s = true;
                    }
                }
            });
            if searched.is_err() {
                return true; // cannot tell: keep the line
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    /// What a hit hides, read from the pattern once plus the input at the offsets
    /// where a literal may cross its end, is what searching at each of its bytes finds:
    /// for every scan pattern of the built-in pack, followed by each rescan literal (or
    /// by nothing, or by other text), and after other text.
    #[test]
    fn what_a_hit_hides_is_what_a_search_at_each_of_its_bytes_finds() {
        let engine = crate::Engine::builtin();
        let pre = engine.prefilter_for_tests();
        let mut tails: Vec<String> = pre.rescan_literals.iter().map(|r| r[1.min(r.len())..].to_string()).collect();
        tails.extend(pre.rescan_literals.iter().cloned());
        tails.extend(["", " ", "xyz", ": x", "Error: y"].map(String::from));
        let (mut compared, mut hiding) = (0, 0);
        for (p, pattern) in pre.scan_patterns.iter().enumerate() {
            for head in ["", "ab "] {
                for tail in &tails {
                    let text = format!("{head}{pattern}{tail}");
                    let (b, at) = (text.as_bytes(), head.len());
                    let mut fast = BTreeSet::new();
                    pre.hidden_at(b, at, p, &mut |m| {
                        fast.insert(m);
                    })
                    .expect("searches");
                    let mut every = BTreeSet::new();
                    for from in at..at + pattern.len() {
                        pre.rescan_at(b, from, b.len(), &mut |m| {
                            every.insert(m);
                        })
                        .expect("searches");
                    }
                    assert_eq!(fast, every, "{text:?} at {at}");
                    compared += 1;
                    hiding += usize::from(!every.is_empty());
                }
            }
        }
        assert!(compared > 10_000 && hiding > 1_000, "{compared} compared, {hiding} hiding something");
    }
}
