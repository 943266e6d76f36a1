//! Streaming diagnosis with bounded memory.
//!
//! [`Diagnoser`] takes a log as byte chunks of any size and keeps only what the rules
//! can use: per stream (rank), a short ring buffer of recent lines, and *windows*
//! around lines where the prefilter finds a template anchor, a traceback starts, or an
//! exception line appears (the ring supplies the traceback frames above it, a follow
//! counter the message lines below). Everything else is counted and dropped. Whole-input
//! diagnosis is this same path fed one chunk, so streaming and whole-input reports are
//! identical by construction, whatever the chunking.
//!
//! Memory is bounded independently of input size: lines are cut at
//! [`ingest::MAX_LINE`], rings hold at most [`RING_LINES`] lines and [`RING_BYTES`]
//! bytes per stream, at most [`MAX_STREAMS`] ranks get their own stream, and retained
//! windows are capped at [`MAX_RETAINED_BYTES`] (the oldest half is evicted first:
//! failures near the end of a log matter most).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::grammar::traceback;
use crate::ingest::{self, Cleaner, Line};
use crate::report::Report;
use crate::Engine;

/// Lines of context kept above a trigger (traceback frames).
pub const RING_LINES: usize = 256;
/// Bytes of context kept per stream.
pub const RING_BYTES: usize = 256 * 1024;
/// Lines kept after a trigger (multi-line messages, summaries).
pub const FOLLOW_LINES: usize = 400;
/// Ranks with a stream of their own; further ranks share the unranked stream.
pub const MAX_STREAMS: usize = 2048;
/// Bytes of retained windows, all streams together.
pub const MAX_RETAINED_BYTES: usize = 48 * 1024 * 1024;

/// A retained line with its position in its stream.
#[derive(Clone, Debug)]
pub(crate) struct Kept {
    pub line: Line,
    /// Index of the line within its stream: a jump marks a gap between windows.
    pub seq: u64,
}

#[derive(Default, Debug)]
struct StreamState {
    ring: VecDeque<Kept>,
    ring_bytes: usize,
    follow: usize,
    seq: u64,
}

/// Incremental diagnosis: [`feed`](Diagnoser::feed) chunks, then
/// [`finish`](Diagnoser::finish).
#[derive(Debug)]
pub struct Diagnoser<'e> {
    engine: &'e Engine,
    cleaner: Cleaner,
    /// Bytes of an unfinished last line.
    partial: Vec<u8>,
    /// The unfinished line is longer than a line may be: the rest is skipped.
    partial_overflow: bool,
    bytes: u64,
    lines: u32,
    ranks: BTreeSet<u32>,
    streams: BTreeMap<Option<u32>, StreamState>,
    kept: Vec<Kept>,
    kept_bytes: usize,
    /// Which of the engine's `log_contains` needles occurred anywhere.
    seen: Vec<bool>,
}

impl<'e> Diagnoser<'e> {
    pub(crate) fn new(engine: &'e Engine) -> Diagnoser<'e> {
        Diagnoser {
            engine,
            cleaner: Cleaner::default(),
            partial: Vec::new(),
            partial_overflow: false,
            bytes: 0,
            lines: 0,
            ranks: BTreeSet::new(),
            streams: BTreeMap::new(),
            kept: Vec::new(),
            kept_bytes: 0,
            seen: vec![false; engine.needle_count()],
        }
    }

    /// Feeds the next chunk of the log.
    pub fn feed(&mut self, chunk: &[u8]) {
        self.bytes += chunk.len() as u64;
        let mut rest = chunk;
        while let Some(p) = rest.iter().position(|&b| b == b'\n') {
            let (head, tail) = rest.split_at(p);
            if self.partial.is_empty() && !self.partial_overflow {
                self.line(head);
            } else {
                self.push_partial(head);
                let raw = std::mem::take(&mut self.partial);
                self.partial_overflow = false;
                self.line(&raw);
            }
            rest = &tail[1..];
        }
        self.push_partial(rest);
    }

    fn push_partial(&mut self, bytes: &[u8]) {
        let room = (ingest::MAX_LINE + 4).saturating_sub(self.partial.len());
        if bytes.len() > room {
            self.partial.extend_from_slice(&bytes[..room]);
            self.partial_overflow = true;
        } else {
            self.partial.extend_from_slice(bytes);
        }
    }

    /// Ends the input and diagnoses what was kept.
    pub fn finish(mut self) -> Report {
        if !self.partial.is_empty() {
            let raw = std::mem::take(&mut self.partial);
            self.line(&raw);
        }
        let ranks: Vec<u32> = self.ranks.iter().copied().collect();
        self.engine.diagnose_kept(self.bytes, self.lines, ranks, self.kept, &self.seen)
    }

    fn line(&mut self, raw: &[u8]) {
        self.lines += 1;
        let mut line = self.cleaner.line(self.lines, raw);
        if let Some(r) = line.rank {
            self.ranks.insert(r);
            if !self.streams.contains_key(&Some(r)) && self.streams.len() >= MAX_STREAMS {
                line.rank = None;
            }
        }
        self.engine.mark_needles(&line.text, &mut self.seen);
        let trigger = self.engine.has_anchor(&line.text) || is_structural(&line.text);
        let st = self.streams.entry(line.rank).or_default();
        let seq = st.seq;
        st.seq += 1;
        let kept = Kept { line, seq };
        if trigger || st.follow > 0 {
            if trigger {
                st.follow = FOLLOW_LINES;
            } else {
                st.follow -= 1;
            }
            let ring: Vec<Kept> = st.ring.drain(..).collect();
            st.ring_bytes = 0;
            for k in ring {
                self.keep(k);
            }
            self.keep(kept);
        } else {
            st.ring_bytes += kept.line.text.len();
            st.ring.push_back(kept);
            while st.ring.len() > RING_LINES || st.ring_bytes > RING_BYTES {
                match st.ring.pop_front() {
                    Some(old) => st.ring_bytes -= old.line.text.len(),
                    None => break,
                }
            }
        }
    }

    fn keep(&mut self, k: Kept) {
        self.kept_bytes += k.line.text.len() + 64;
        self.kept.push(k);
        if self.kept_bytes > MAX_RETAINED_BYTES {
            // Evict the oldest half: the end of a log is where failures are.
            let half = self.kept.len() / 2;
            let dropped: usize = self.kept[..half].iter().map(|k| k.line.text.len() + 64).sum();
            self.kept.drain(..half);
            self.kept_bytes -= dropped;
        }
    }
}

/// Lines that may begin or end a structure the rules need even without an anchor:
/// traceback headers and frames, chaining separators, exception lines.
fn is_structural(t: &str) -> bool {
    let s = t.trim_start();
    s.contains("Traceback (most recent call last)")
        || s.starts_with("File ")
        || s.starts_with("The above exception")
        || s.starts_with("During handling of the above")
        || traceback::exception_line(s.trim_end()).is_some_and(|(class, _)| {
            let last = class.rsplit('.').next().unwrap_or(class);
            ["Error", "Exception", "Interrupt", "Exit", "Failure", "Warning"].iter().any(|k| last.ends_with(k))
        })
}
