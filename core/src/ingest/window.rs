//! The streaming window: a log in byte chunks of any size, reduced with bounded memory
//! to the windows of lines the later stages can use.
//!
//! The window knows nothing of rules or reports. What makes a line worth keeping is
//! asked of a [`Trigger`] (ripgrep's searcher/matcher split: the searcher reads, the
//! matcher decides); the engine's prefilter implements it with one aho-corasick pass
//! over the raw bytes of each chunk (template anchors, structural literals such as
//! `Traceback (most recent call last)` and `Error:`, and the texts rules ask about
//! anywhere). Lines are split with memchr. A line with no hit is never decoded or
//! parsed: it only goes, as raw bytes, into its rank's short ring buffer (the rank read
//! from a cheap look at its prefix). A line with a hit is a trigger: its rank's ring
//! (the traceback frames above it) and the next [`Limits::follow_lines`] lines of that rank
//! (the message below it) are cleaned and kept. Whole-input diagnosis is this same path
//! fed one chunk, so streaming and whole-input reports are identical by construction,
//! whatever the chunking.
//!
//! Memory is bounded independently of input size: lines are cut at
//! [`MAX_LINE`], rings hold at most [`Limits::ring_lines`] lines and [`Limits::ring_bytes`]
//! bytes per stream (buffers are reused), at most [`Limits::max_streams`] ranks get a ring
//! of their own, and kept windows are capped at [`Limits::max_retained_bytes`]. Over the
//! cap the middle of the log goes: the earliest windows (a quarter of the cap, where the
//! first failure is) and the latest stay, and the report counts the lines dropped.

use std::collections::VecDeque;

use super::wrap::{starts_record, Rows};
use super::{Cleaner, Line, MAX_LINE};

/// What decides which raw lines are worth keeping: implemented by the rule pack's
/// prefilter, so the window depends on no rule and the rules on no window.
pub(crate) trait Trigger {
    /// Scans raw bytes: calls `hit(offset, pattern)` for each template anchor or needle
    /// (`Some(pattern)`, judged by [`Trigger::could_match`]) and each structural literal
    /// (`None`, always kept), and marks the needles it sees in `seen`.
    fn scan(&self, bytes: &[u8], seen: &mut [bool], hit: &mut dyn FnMut(usize, Option<usize>));
    /// The raw line as text when it can be judged raw (plain ASCII, no colour codes),
    /// `None` when every hit on it must be kept. Computed once per line: per-hit work
    /// must not depend on the line's length.
    fn judgeable<'l>(&self, raw: &'l [u8]) -> Option<&'l str>;
    /// Whether anchor `pattern`, hit at byte `at` of a line judged by [`Trigger::judgeable`],
    /// could start a match (for a needle: whether it hides an anchor that could, or a
    /// structural literal). `pool` is the line's step pool, shared by its hits (see
    /// [`Trigger::line_pool`]); when it runs out the answer is yes.
    fn could_match(&self, text: &str, at: usize, pattern: usize, pool: &mut u64) -> bool;
    /// The step pool for judging the hits of a line of `len` bytes.
    fn line_pool(&self, len: usize) -> u64;
    /// Whether every line must be kept (the prefilter is off).
    fn keeps_everything(&self) -> bool;
    /// Marks in `seen` every needle occurring in `bytes` (overlapping: all of them). Run
    /// over every byte of a line too long to keep whole, so what its dropped middle said
    /// is known whatever the chunking.
    fn mark_needles(&self, bytes: &[u8], seen: &mut [bool]);
    /// Bytes of overlap two searches by [`Trigger::mark_needles`] need for a needle across
    /// their boundary (the longest needle, less one).
    fn needle_margin(&self) -> usize;
    /// For a line whose anchor hits all failed: whether a structural literal or a needle
    /// occurs in it after all (overlapping search; marks the needles in `seen`).
    ///
    /// `hits` are the line's hits (offset from `base`, pattern; `None` for a structural
    /// literal): only what overlaps a failed anchor can have been hidden, so only the
    /// anchors are searched around.
    fn rescan(&self, raw: &[u8], hits: &[(usize, Option<usize>)], base: usize, seen: &mut [bool]) -> bool;
}

/// What a window retained of a whole input.
#[derive(Debug)]
pub(crate) struct Retained {
    /// Bytes and lines read.
    pub bytes: u64,
    pub lines: u64,
    /// Ranks seen, ascending.
    pub ranks: Vec<u32>,
    /// The kept lines, in input order.
    pub kept: Vec<Kept>,
    /// Which needles occurred anywhere.
    pub seen: Vec<bool>,
    /// Lines longer than [`MAX_LINE`] whose middle was dropped.
    pub truncated: u64,
    /// Kept lines evicted to stay within [`Limits::max_retained_bytes`].
    pub dropped: u64,
}

/// The memory bounds of a diagnosis. Each bounds memory independently of the input's
/// size; the defaults keep a 1 GB, 64-rank log under 20 MB of peak memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Lines of context kept above a trigger, per stream. Traceback headers and frames
    /// are triggers themselves, so the ring only has to cover what precedes a message
    /// without them (IPython code context, the start of a message wrapped before its
    /// anchor).
    pub ring_lines: usize,
    /// Bytes of context kept per stream.
    pub ring_bytes: usize,
    /// Lines kept after a trigger (multi-line messages, summaries).
    pub follow_lines: usize,
    /// Ranks with a ring of their own; further ranks share the unranked one.
    pub max_streams: usize,
    /// Bytes of kept windows, all streams together.
    pub max_retained_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            ring_lines: 32,
            ring_bytes: 256 * 1024,
            follow_lines: 400,
            max_streams: 2048,
            max_retained_bytes: 16 * 1024 * 1024,
        }
    }
}

/// Ranks are below this; a larger number in a rank's place is not a rank.
pub(crate) const MAX_RANK: u32 = 1 << 20;

/// A kept line with its position in its stream.
#[derive(Clone, Debug)]
pub(crate) struct Kept {
    pub line: Line,
    /// Index of the line within its stream: a jump marks a gap between windows.
    pub seq: u64,
}

#[derive(Debug)]
struct RawLine {
    no: u64,
    seq: u64,
    /// The rank of the ranked line this one continues after a terminal hard wrap.
    wrapped_from: Option<u32>,
    bytes: Vec<u8>,
}

#[derive(Default, Debug)]
struct Ring {
    lines: VecDeque<RawLine>,
    bytes: usize,
    follow: usize,
    seq: u64,
}

/// The window over one input: [`feed`](Window::feed) chunks, then
/// [`finish`](Window::finish). It holds no reference to its [`Trigger`], which each call
/// is given, so an embedder's diagnoser can own its window.
pub(crate) struct Window {
    limits: Limits,
    cleaner: Cleaner,
    /// Bytes of an unfinished last line (its head and tail when it is very long).
    partial: Vec<u8>,
    /// The unfinished line lost its middle.
    partial_cut: bool,
    bytes: u64,
    lines: u64,
    ranks: Vec<bool>,
    /// Ring per quick rank: index 0 is unranked, `r + 1` is rank `r`.
    rings: Vec<Ring>,
    kept: Vec<Kept>,
    kept_bytes: usize,
    seen: Vec<bool>,
    /// Lines longer than [`MAX_LINE`] whose middle was dropped.
    truncated: u64,
    /// Kept lines evicted to stay within [`Limits::max_retained_bytes`].
    dropped: u64,
    /// Hits of the chunk being processed: offset and anchor pattern (None: structural).
    hits: Vec<(usize, Option<usize>)>,
    rows: Rows,
    /// The rank of the previous line when it filled a whole row: the next line, if it
    /// carries no prefix, is the rest of it.
    wrap_rank: Option<u32>,
}

impl std::fmt::Debug for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Window").field("bytes", &self.bytes).field("lines", &self.lines).finish_non_exhaustive()
    }
}

impl Window {
    /// A window for an input; `needles` is how many needles the trigger marks, the
    /// cleaner continues C++ log records over lines starting with `continuations`.
    pub(crate) fn new(needles: usize, continuations: Vec<String>, limits: Limits) -> Window {
        Window {
            limits,
            cleaner: Cleaner::new(continuations),
            partial: Vec::new(),
            partial_cut: false,
            bytes: 0,
            lines: 0,
            ranks: Vec::new(),
            rings: vec![Ring::default()],
            kept: Vec::new(),
            kept_bytes: 0,
            seen: vec![false; needles],
            truncated: 0,
            dropped: 0,
            hits: Vec::new(),
            rows: Rows::default(),
            wrap_rank: None,
        }
    }

    /// Feeds the next chunk of the log.
    pub(crate) fn feed(&mut self, trigger: &dyn Trigger, chunk: &[u8]) {
        self.bytes += chunk.len() as u64;
        let mut rest = chunk;
        // Finish a line begun in an earlier chunk.
        if !self.partial.is_empty() {
            match memchr(rest) {
                Some(p) => {
                    self.extend_partial(trigger, &rest[..p]);
                    let raw = std::mem::take(&mut self.partial);
                    let cut = std::mem::take(&mut self.partial_cut);
                    if cut {
                        // Its middle went as it arrived: head and tail, as a whole line
                        // this long is read (`long_line`).
                        let half = MAX_LINE / 2;
                        let mut two = raw[..half].to_vec();
                        two.extend_from_slice(&raw[raw.len() - half..]);
                        self.whole_line(trigger, &two, true);
                    } else {
                        self.whole_line(trigger, &raw, false);
                    }
                    rest = &rest[p + 1..];
                }
                None => {
                    self.extend_partial(trigger, rest);
                    return;
                }
            }
        }
        // Complete lines of this chunk: one scan for triggers, then line by line.
        let complete = match memchr::memrchr(b'\n', rest) {
            Some(p) => p + 1,
            None => 0,
        };
        let (body, tail) = rest.split_at(complete);
        let mut hits = std::mem::take(&mut self.hits);
        hits.clear();
        trigger.scan(body, &mut self.seen, &mut |off, p| hits.push((off, p)));
        hits.sort_unstable();
        let mut h = 0;
        let mut start = 0;
        while start < body.len() {
            let end = memchr(&body[start..]).map(|p| start + p).unwrap_or(body.len());
            while h < hits.len() && hits[h].0 < start {
                h += 1;
            }
            let line = &body[start..end];
            if line.len() > 2 * MAX_LINE {
                // Read as the stream reads it whatever the chunking: its needles from
                // every byte, the rest from its head and tail only.
                while h < hits.len() && hits[h].0 < end {
                    h += 1;
                }
                trigger.mark_needles(line, &mut self.seen);
                let half = MAX_LINE / 2;
                let mut two = line[..half].to_vec();
                two.extend_from_slice(&line[line.len() - half..]);
                self.whole_line(trigger, &two, true);
                start = end + 1;
                continue;
            }
            let mut hit = false;
            let first_hit = h;
            // `Some(judged)` once a hit needs the line judged.
            let mut judged: Option<Option<&str>> = None;
            let mut pool = trigger.line_pool(line.len());
            while h < hits.len() && hits[h].0 < end {
                let (off, p) = hits[h];
                hit = hit
                    || p.is_none_or(|p| match *judged.get_or_insert_with(|| trigger.judgeable(line)) {
                        Some(text) => trigger.could_match(text, off - start, p, &mut pool),
                        None => true,
                    });
                h += 1;
            }
            // The scan is leftmost-longest: an anchor that failed may have hidden a
            // structural literal or a needle overlapping it (`ValueError:` over `Error:`).
            let line_hits = &hits[first_hit..h];
            if !hit && line_hits.iter().any(|h| h.1.is_some()) {
                hit = trigger.rescan(line, line_hits, start, &mut self.seen);
            }
            self.line(trigger, line, hit, false);
            start = end + 1;
        }
        self.hits = hits;
        self.extend_partial(trigger, tail);
    }

    /// Accumulates an unfinished line, keeping its head and its tail when it grows
    /// past twice [`MAX_LINE`] (a one-line paste ends with its exception). Once it is
    /// that long, every byte is searched for needles as it arrives, with the overlap a
    /// needle across two reads needs: a long line says the same whatever the chunking.
    fn extend_partial(&mut self, trigger: &dyn Trigger, bytes: &[u8]) {
        let margin_from = self.partial.len().saturating_sub(trigger.needle_margin());
        self.partial.extend_from_slice(bytes);
        if self.partial_cut {
            trigger.mark_needles(&self.partial[margin_from..], &mut self.seen);
        } else if self.partial.len() > 2 * MAX_LINE {
            trigger.mark_needles(&self.partial, &mut self.seen);
            self.partial_cut = true;
        }
        if self.partial.len() > 2 * MAX_LINE {
            let half = MAX_LINE / 2;
            let tail_from = self.partial.len() - half;
            self.partial.copy_within(tail_from.., half);
            self.partial.truncate(2 * half);
        }
    }

    /// A line assembled across chunks, or the head and tail of a long one (`cut`):
    /// scanned on its own.
    fn whole_line(&mut self, trigger: &dyn Trigger, raw: &[u8], cut: bool) {
        let mut hits = Vec::new();
        trigger.scan(raw, &mut self.seen, &mut |off, p| hits.push((off, p)));
        let judged = trigger.judgeable(raw);
        let mut pool = trigger.line_pool(raw.len());
        let hit = hits.iter().any(|&(off, p)| {
            p.is_none_or(|p| match judged {
                Some(text) => trigger.could_match(text, off, p, &mut pool),
                None => true,
            })
        });
        let hit = hit || (hits.iter().any(|h| h.1.is_some()) && trigger.rescan(raw, &hits, 0, &mut self.seen));
        self.line(trigger, raw, hit, cut);
    }

    /// Ends the input: what was retained.
    pub(crate) fn finish(mut self, trigger: &dyn Trigger) -> Retained {
        if !self.partial.is_empty() {
            let raw = std::mem::take(&mut self.partial);
            if std::mem::take(&mut self.partial_cut) {
                let half = MAX_LINE / 2;
                let mut two = raw[..half].to_vec();
                two.extend_from_slice(&raw[raw.len() - half..]);
                self.whole_line(trigger, &two, true);
            } else {
                self.whole_line(trigger, &raw, false);
            }
        }
        let ranks: Vec<u32> = self.ranks.iter().enumerate().filter(|(_, s)| **s).map(|(r, _)| r as u32).collect();
        Retained {
            bytes: self.bytes,
            lines: self.lines,
            ranks,
            kept: self.kept,
            seen: self.seen,
            truncated: self.truncated,
            dropped: self.dropped,
        }
    }

    /// One line of the input; `cut`: the head and tail of a line whose middle already
    /// went (longer than twice [`MAX_LINE`]).
    fn line(&mut self, trigger: &dyn Trigger, raw: &[u8], hit: bool, cut: bool) {
        self.lines += 1;
        let no = self.lines;
        // An overlong line keeps its head and its tail, where a one-line paste has its
        // exception; the cleaner marks it truncated.
        let joined;
        let raw = if raw.len() > MAX_LINE || cut {
            let half = MAX_LINE / 2 - 8;
            let mut v = Vec::with_capacity(MAX_LINE);
            v.extend_from_slice(&raw[..half]);
            v.extend_from_slice(b" [...] ");
            v.extend_from_slice(&raw[raw.len() - half..]);
            joined = v;
            self.truncated += 1;
            &joined[..]
        } else {
            raw
        };
        // A terminal that hard-wrapped a ranked line put the rest of it on the next
        // line without the `[rankN]:` prefix: it goes to the rank it continues.
        let len = raw.strip_suffix(b"\r").unwrap_or(raw).len();
        let full_row = self.rows.fills_row(len);
        let quick = quick_rank(raw);
        let rest_of_row = quick.is_none() && !starts_record(raw) && self.rows.fits_row(len);
        let wrapped_from = if rest_of_row { self.wrap_rank } else { None };
        let qrank = quick.or(wrapped_from);
        self.wrap_rank = if full_row { qrank } else { None };
        if let Some(r) = qrank.filter(|r| *r < MAX_RANK) {
            let r = r as usize;
            if r >= self.ranks.len() {
                self.ranks.resize(r + 1, false);
            }
            self.ranks[r] = true;
        }
        let slot = match qrank {
            Some(r) if (r as usize) < self.limits.max_streams => r as usize + 1,
            _ => 0,
        };
        if slot >= self.rings.len() {
            self.rings.resize_with(slot + 1, Ring::default);
        }
        let trigger = hit || trigger.keeps_everything() || ends_like_exception(raw);
        let ring = &mut self.rings[slot];
        let seq = ring.seq;
        ring.seq += 1;
        if trigger || ring.follow > 0 {
            ring.follow = if trigger { self.limits.follow_lines } else { ring.follow - 1 };
            ring.bytes = 0;
            let held: Vec<RawLine> = ring.lines.drain(..).collect();
            for r in held {
                self.keep(r.no, r.seq, r.wrapped_from, &r.bytes);
            }
            self.keep(no, seq, wrapped_from, raw);
        } else {
            // Reuse the oldest buffer once the ring is full.
            let mut buf = Vec::new();
            if ring.lines.len() >= self.limits.ring_lines {
                if let Some(old) = ring.lines.pop_front() {
                    ring.bytes -= old.bytes.len();
                    buf = old.bytes;
                }
            }
            buf.clear();
            buf.extend_from_slice(raw);
            ring.bytes += buf.len();
            ring.lines.push_back(RawLine { no, seq, wrapped_from, bytes: buf });
            while ring.bytes > self.limits.ring_bytes {
                match ring.lines.pop_front() {
                    Some(old) => ring.bytes -= old.bytes.len(),
                    None => break,
                }
            }
        }
    }

    fn keep(&mut self, no: u64, seq: u64, wrapped_from: Option<u32>, raw: &[u8]) {
        let mut line = self.cleaner.line(no, raw);
        if line.rank.is_none() {
            line.rank = wrapped_from;
        }
        // No job has a million processes: such a "rank" is some other number in a
        // prefix, and a finding must not carry a rank `input.ranks` leaves out.
        line.rank = line.rank.filter(|r| *r < MAX_RANK);
        if let Some(r) = line.rank.filter(|r| *r < MAX_RANK) {
            let r = r as usize;
            if r >= self.ranks.len() {
                self.ranks.resize(r + 1, false);
            }
            self.ranks[r] = true;
        }
        self.kept_bytes += kept_size(&line);
        self.kept.push(Kept { line, seq });
        if self.kept_bytes > self.limits.max_retained_bytes {
            self.dropped += evict_middle(&mut self.kept, &mut self.kept_bytes, self.limits.max_retained_bytes);
        }
    }
}

/// Over the bound, the middle goes: the head (a quarter of the bound: the earliest
/// windows, where the first failure, usually the cause, is) stays, and so does the end
/// (where the run died); the oldest half of what follows the head is evicted. Returns
/// how many lines went (the report counts them).
fn evict_middle(kept: &mut Vec<Kept>, kept_bytes: &mut usize, bound: usize) -> u64 {
    let quarter = bound / 4;
    let mut head = 0;
    let mut head_bytes = 0;
    while head < kept.len() && head_bytes + kept_size(&kept[head].line) <= quarter {
        head_bytes += kept_size(&kept[head].line);
        head += 1;
    }
    let evict = (kept.len() - head).div_ceil(2);
    let dropped: usize = kept[head..head + evict].iter().map(|k| kept_size(&k.line)).sum();
    kept.drain(head..head + evict);
    *kept_bytes -= dropped;
    evict as u64
}

impl Retained {
    /// Appends what the window over the next stream of the same run retained: its lines
    /// numbered on after this one's (as if the streams were one text), a gap between the
    /// two in every rank's stream, within the same bound of kept bytes.
    pub(crate) fn append(&mut self, next: Retained, bound: usize) {
        // Past the last kept line's index, and one more: a jump (a gap) in every stream.
        let (lines, seqs) = (self.lines, self.kept.iter().map(|k| k.seq).max().map_or(0, |m| m + 2));
        self.kept.extend(next.kept.into_iter().map(|mut k| {
            k.line.no += lines;
            k.seq += seqs;
            k
        }));
        self.bytes += next.bytes;
        self.lines += next.lines;
        self.truncated += next.truncated;
        self.dropped += next.dropped;
        self.ranks.extend(next.ranks);
        self.ranks.sort_unstable();
        self.ranks.dedup();
        for (s, n) in self.seen.iter_mut().zip(next.seen) {
            *s |= n;
        }
        let mut bytes: usize = self.kept.iter().map(|k| kept_size(&k.line)).sum();
        while bytes > bound && !self.kept.is_empty() {
            let went = evict_middle(&mut self.kept, &mut bytes, bound);
            self.dropped += went;
            if went == 0 {
                break;
            }
        }
    }
}

/// What a kept line counts against [`Limits::max_retained_bytes`]: what it will cost
/// when diagnosed, not only its text. Each kept line is held as a [`Line`], copied once
/// more into its stream's joined text, indexed (starts, text slices, traceback and
/// frame marks) and may carry a match record: about 2 bytes per byte of text and
/// 400 bytes of bookkeeping, measured on 40,000 one-line-message tracebacks (counting
/// 64 bytes let 4 MB of such a log take 220 MB).
fn kept_size(line: &Line) -> usize {
    2 * line.text.len() + 400
}

fn memchr(b: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', b)
}

/// The rank a raw line's prefix names, read cheaply: `[rankN]:`, `rankN]:`,
/// `[defaultN]:` (any `[roleN]:`), possibly after `[defaultM]:`. Lines whose rank is
/// hidden further in (timestamps, template prefixes) count as unranked here; the full
/// cleaner still attributes them when they are kept.
fn quick_rank(raw: &[u8]) -> Option<u32> {
    // `[host:N]:`, a host and its local rank.
    if let Some(body) = raw.strip_prefix(b"[") {
        let host =
            body.iter().take(64).take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_')).count();
        if host > 0 && body[0].is_ascii_alphabetic() && body.get(host) == Some(&b':') {
            let digits = body[host + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if (1..=6).contains(&digits) && body[host + 1 + digits..].starts_with(b"]:") {
                return std::str::from_utf8(&body[host + 1..host + 1 + digits]).ok()?.parse().ok();
            }
        }
    }
    // `[1,3]<stderr>:` / `[3]<stdout>:`, Open MPI's and horovodrun's tags: the MPI rank.
    if let Some(body) = raw.strip_prefix(b"[") {
        let first = body.iter().take_while(|c| c.is_ascii_digit()).count();
        let (digits_at, n) = match body.get(first) {
            Some(b',') if first > 0 => {
                let n = body[first + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
                (first + 1, n)
            }
            _ => (0, first),
        };
        if (1..=6).contains(&n) && body[digits_at + n..].starts_with(b"]<") {
            return std::str::from_utf8(&body[digits_at..digits_at + n]).ok()?.parse().ok();
        }
    }
    let mut s = raw;
    let mut found = None;
    for _ in 0..2 {
        let body = s.strip_prefix(b"[").unwrap_or(s);
        let letters = body.iter().take_while(|c| c.is_ascii_alphabetic()).count();
        if letters == 0 || letters > 16 {
            break;
        }
        let digits = body[letters..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 || digits > 6 || !body[letters + digits..].starts_with(b"]:") {
            break;
        }
        let n: u32 = std::str::from_utf8(&body[letters..letters + digits]).ok()?.parse().ok()?;
        // `[rankN]` wins over a launcher's `[defaultN]` local rank.
        if found.is_none() || &body[..letters] == b"rank" {
            found = Some(n);
        }
        s = &body[letters + digits + 2..];
    }
    found
}

/// A bare exception class at the end of a line (`KeyboardInterrupt`, `SomeError`).
fn ends_like_exception(raw: &[u8]) -> bool {
    let t = raw.strip_suffix(b"\r").unwrap_or(raw);
    t.ends_with(b"Error") || t.ends_with(b"Exception") || t.ends_with(b"Exit")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_ranks() {
        let table: [(&[u8], Option<u32>); 10] = [
            (b"[1,3]<stderr>: x", Some(3)),
            (b"[5]<stdout>:x", Some(5)),
            (b"[5] <stdout>:x", None),
            (b"[gpu-node-7:3]: x", Some(3)),
            (b"[rank3]: x", Some(3)),
            (b"rank7]: x", Some(7)),
            (b"[default2]:[rank5]: x", Some(5)),
            (b"[default2]:x", Some(2)),
            (b"[0]:", None),
            (b"step 5: x", None),
        ];
        for (raw, want) in table {
            assert_eq!(quick_rank(raw), want, "{}", String::from_utf8_lossy(raw));
        }
    }

    /// A trigger that keeps every line (the prefilter off).
    struct KeepAll;

    impl Trigger for KeepAll {
        fn scan(&self, _: &[u8], _: &mut [bool], _: &mut dyn FnMut(usize, Option<usize>)) {}
        fn judgeable<'l>(&self, _: &'l [u8]) -> Option<&'l str> {
            None
        }
        fn line_pool(&self, _: usize) -> u64 {
            0
        }
        fn could_match(&self, _: &str, _: usize, _: usize, _: &mut u64) -> bool {
            true
        }
        fn keeps_everything(&self) -> bool {
            true
        }
        fn rescan(&self, _: &[u8], _: &[(usize, Option<usize>)], _: usize, _: &mut [bool]) -> bool {
            true
        }
        fn mark_needles(&self, _: &[u8], _: &mut [bool]) {}
        fn needle_margin(&self) -> usize {
            0
        }
    }

    /// A trigger whose every `line` word is an anchor hit that fails, counting how often
    /// a line is judged and how many hits are tried.
    #[derive(Default)]
    struct FailingHits {
        judged: std::cell::Cell<usize>,
        tried: std::cell::Cell<usize>,
    }

    impl Trigger for FailingHits {
        fn scan(&self, bytes: &[u8], _: &mut [bool], hit: &mut dyn FnMut(usize, Option<usize>)) {
            for (i, _) in bytes.windows(5).enumerate().filter(|(_, w)| w == b"line ") {
                hit(i, Some(0));
            }
        }
        fn judgeable<'l>(&self, raw: &'l [u8]) -> Option<&'l str> {
            self.judged.set(self.judged.get() + 1);
            std::str::from_utf8(raw).ok()
        }
        fn line_pool(&self, _: usize) -> u64 {
            0
        }
        fn could_match(&self, _: &str, _: usize, _: usize, _: &mut u64) -> bool {
            self.tried.set(self.tried.get() + 1);
            false
        }
        fn keeps_everything(&self) -> bool {
            false
        }
        fn rescan(&self, _: &[u8], _: &[(usize, Option<usize>)], _: usize, _: &mut [bool]) -> bool {
            false
        }
        fn mark_needles(&self, _: &[u8], _: &mut [bool]) {}
        fn needle_margin(&self) -> usize {
            0
        }
    }

    /// One long line of anchor words that all fail (`line line line ...`): the line is
    /// judged once, not once per hit (per-hit work was O(line), the line O(line²): a
    /// 1 MiB line took 97 s).
    #[test]
    fn a_line_of_failing_anchor_hits_is_judged_once() {
        for (chunk, n) in [(usize::MAX, 20_000), (4096, 20_000)] {
            let t = FailingHits::default();
            let log = "line ".repeat(n) + "\nline after\n";
            let mut d = Window::new(0, Vec::new(), Limits::default());
            for c in log.as_bytes().chunks(chunk.min(log.len())) {
                d.feed(&t, c);
            }
            assert_eq!(t.judged.get(), 2, "chunk {chunk}: one judgement per line");
            assert_eq!(t.tried.get(), n + 1, "chunk {chunk}: every hit tried once");
        }
    }

    /// Ranks of the kept lines, in input order.
    fn kept_ranks(log: &str) -> Vec<(String, Option<u32>)> {
        let mut d = Window::new(0, Vec::new(), Limits::default());
        d.feed(&KeepAll, log.as_bytes());
        d.kept.iter().map(|k| (k.line.text.clone(), k.line.rank)).collect()
    }

    #[test]
    fn a_hard_wrapped_ranked_line_keeps_its_rank() {
        let row = |s: &str| format!("{s:-<80}");
        let wrapped = [row("[rank2]: a"), row("[rank2]: b"), row("[rank3]: c"), "rest of c".into(), "launcher".into()];
        let ranks = kept_ranks(&(wrapped.join("\n") + "\n"));
        assert_eq!(ranks[3], ("rest of c".to_string(), Some(3)));
        // The line after a short line is not a continuation.
        assert_eq!(ranks[4].1, None);
        // A row a few characters over the width (redaction) still fills it; a line that
        // starts a record of its own does not continue it.
        let log = [row("[rank2]: a"), row("[rank2]: b"), row("[rank2]: c"), format!("{:-<83}", "[rank3]: d")];
        let log = format!(
            "{}\nrest of d\n{}\nE1130 09:14:12.067000 48113 api.py:869] failed\n",
            log.join("\n"),
            row("[rank4]: e")
        );
        let ranks = kept_ranks(&log);
        assert_eq!((ranks[4].1, ranks[6].1), (Some(3), None));
        // Not wrapped: long lines of many lengths, more than a tenth longer than the
        // repeated one.
        let mut log: Vec<String> = (0..3).map(|_| row("[rank2]: a")).collect();
        log.push(format!("{:-<120}", "[rank2]: long"));
        log.push(row("[rank3]: c"));
        log.push("launcher".into());
        assert_eq!(kept_ranks(&(log.join("\n") + "\n"))[5].1, None);
        // Too few lines of the row width to call it a row.
        let log = [row("[rank3]: c"), "launcher".into()];
        assert_eq!(kept_ranks(&(log.join("\n") + "\n"))[1].1, None);
        // Fixed-width step lines look like rows; a line longer than a row after them is
        // not their rest (the rest of a row is never longer than the row).
        let mut log: Vec<String> = (0..4).map(|_| row("[rank1]: step")).collect();
        log.push(format!("RuntimeError: {:-<150}", "NCCL communicator was aborted"));
        log.push("rest".into());
        let ranks = kept_ranks(&(log.join("\n") + "\n"));
        assert_eq!(ranks[4].1, None, "{:?}", ranks[4]);
    }
}
