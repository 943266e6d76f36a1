//! Floods: a rule reported many times in one stream is read by what it matched.
//!
//! A report's key (rule and message without numbers, [`super::key_of`]) needs its
//! incident: the class printed before its message, the message flattened to 600
//! characters and scrubbed of secrets. That is some 20,000 instructions a report, and a
//! report can be 20 bytes of input: a line of `CUDA error: x` glued 48 times into a
//! kilobyte ran at 3.6 MB/s, reading each message's 600 characters once per report.
//!
//! So past [`READS_PER_STREAM`] full reads of one rule's loose reports in a stream (or
//! [`READS_PER_RULE`] in all), a loose report is first named by its *mark*: the text its
//! template matched, digit runs as one `#` (its cost is its own length; matches do not
//! overlap, so the marks of a log cost the log once). A mark already read goes where its
//! first report went, without being read again: folded into that key's finding (its
//! rank, its place, one more report) or counted as omitted. A mark never read is read in
//! full while the rule may still keep a new message and has spent fewer than
//! [`READS_PER_STREAM`] further reads on new marks in the stream; past that it is
//! counted (`similar_omitted`), never dropped unseen. Below the thresholds nothing
//! changes: every report is read, as in a log of ordinary size.
//!
//! What a flood gives up: two reports with one mark but different text after it (the
//! message runs on past the match) are one finding. Reports inside a traceback are
//! always read in full: each costs its traceback's lines, not a few bytes.

use std::collections::HashMap;

use crate::rules::matching::{push_numberless, Event, Stream};

/// Full reads of one rule's loose reports in one stream before its marks are read first.
pub(super) const READS_PER_STREAM: u32 = 64;
/// Full reads of one rule's loose reports in all streams before its marks are read first.
pub(super) const READS_PER_RULE: u32 = 1024;

/// Where the first report of a mark went.
#[derive(Clone, Debug)]
pub(super) struct Seen {
    pub key: String,
    pub place: Option<String>,
}

/// What a flood does with a report.
pub(super) enum Route {
    /// Read it in full, then [`Flood::learn`] its mark.
    Read(String),
    /// Its mark was read before: the report goes where that one went ([`Flood::seen`]).
    Known(usize),
    /// A new mark past the reads a flood allows: only counted.
    Count,
}

/// Per-rule counts of full reads, and the marks read.
#[derive(Default)]
pub(super) struct Flood {
    reads: HashMap<(usize, usize), u32>,
    reads_of_rule: HashMap<usize, u32>,
    /// Full reads of new marks once flooded, per stream and rule.
    new_reads: HashMap<(usize, usize), u32>,
    new_reads_of_rule: HashMap<usize, u32>,
    /// Per rule: its marks read, each with its index in `seen`.
    marks: HashMap<usize, HashMap<String, usize>>,
    seen: Vec<Seen>,
}

impl Flood {
    /// The route of loose event `e` of stream `si`; `may_keep_new` says whether the
    /// admission bounds still let the rule keep a message not seen before.
    pub(super) fn route(&mut self, s: &Stream<'_>, si: usize, e: &Event, may_keep_new: bool) -> Route {
        let reads = self.reads.get(&(si, e.rule)).copied().unwrap_or(0);
        let reads_of_rule = self.reads_of_rule.get(&e.rule).copied().unwrap_or(0);
        if reads < READS_PER_STREAM && reads_of_rule < READS_PER_RULE {
            self.count_read(si, e.rule);
            // Marks are learned from the start, so a flood knows the first reports'.
            return Route::Read(mark(s, e));
        }
        let m = mark(s, e);
        if let Some(&i) = self.marks.get(&e.rule).and_then(|of_rule| of_rule.get(&m)) {
            return Route::Known(i);
        }
        let new = self.new_reads.entry((si, e.rule)).or_insert(0);
        let new_of_rule = self.new_reads_of_rule.entry(e.rule).or_insert(0);
        if !may_keep_new || *new >= READS_PER_STREAM || *new_of_rule >= READS_PER_RULE {
            return Route::Count;
        }
        *new += 1;
        *new_of_rule += 1;
        Route::Read(m)
    }

    fn count_read(&mut self, si: usize, rule: usize) {
        *self.reads.entry((si, rule)).or_insert(0) += 1;
        *self.reads_of_rule.entry(rule).or_insert(0) += 1;
    }

    /// Records where the first report of a mark went.
    pub(super) fn learn(&mut self, rule: usize, mark: String, seen: Seen) {
        if let std::collections::hash_map::Entry::Vacant(v) = self.marks.entry(rule).or_default().entry(mark) {
            v.insert(self.seen.len());
            self.seen.push(seen);
        }
    }

    /// Where the first report of a [`Route::Known`] mark went.
    pub(super) fn seen(&self, i: usize) -> &Seen {
        &self.seen[i]
    }
}

/// The text event `e` matched, digit runs as one `#`, its lines joined by `\n`.
fn mark(s: &Stream<'_>, e: &Event) -> String {
    let mut out = String::new();
    for i in e.first..=e.last.min(s.lines.len().saturating_sub(1)) {
        let text = s.lines[i].text.as_str();
        let at = s.line_start(i);
        let a = e.m.start.saturating_sub(at).min(text.len());
        let b = e.m.end.saturating_sub(at).min(text.len());
        if i > e.first {
            out.push('\n');
        }
        push_numberless(&mut out, text.get(a..b.max(a)).unwrap_or_default());
    }
    out
}
