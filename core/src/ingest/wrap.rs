//! Terminal hard wraps: a terminal (or a viewer, or an excerpt tool) that cut long
//! lines at a fixed width, so one log line became several.
//!
//! Two things need to know about it: the streaming window, which gives the unprefixed
//! rest of a wrapped `[rankN]:` row that row's rank, and the grammars, which read a
//! frame line, a source line or a message word cut by a wrap. [`Rows`] learns the row
//! width from the line lengths seen; [`MIN_ROW`] is the narrowest row any of them takes
//! for a wrap (a break in a shorter line is a real line end).

/// Narrowest terminal row taken for a hard wrap: a line break in a shorter line is a
/// real line end. Shared by the window, the template matcher and the traceback grammar.
pub(crate) const MIN_ROW: usize = 60;
/// Widest row the learner considers.
const MAX_ROW: usize = 1024;
/// Lines of the row width seen before the log counts as wrapped.
const FULL_ROWS: u32 = 3;
/// Characters a line may have beyond the row width and still fill it: redaction
/// (`/home/<user>`) or an edit lengthens a few wrapped lines.
const ROW_SLACK: usize = 16;

/// Learns a terminal's row width from the lines seen so far. A log hard-wrapped by a
/// terminal has many lines of exactly the row width and almost none longer; a log
/// that is not wrapped spreads its long lines over many lengths, and many are longer
/// than any length it repeats. Lengths are bytes (a wrap of non-ASCII text is missed,
/// never invented).
#[derive(Debug)]
pub(crate) struct Rows {
    /// Lines per length, for lengths below [`MAX_ROW`].
    count: Vec<u32>,
    /// The most common length of at least [`MIN_ROW`] (the row width candidate).
    width: usize,
    /// Lines longer than `width + ROW_SLACK`.
    over: u32,
    /// Lines of [`MAX_ROW`] bytes or more.
    beyond: u32,
}

impl Default for Rows {
    fn default() -> Rows {
        Rows { count: vec![0; MAX_ROW], width: MIN_ROW, over: 0, beyond: 0 }
    }
}

impl Rows {
    /// Records a line's length; whether the line filled a whole row of a wrapped log.
    pub(crate) fn fills_row(&mut self, len: usize) -> bool {
        if len < MIN_ROW {
            return false;
        }
        if len >= MAX_ROW {
            self.beyond += 1;
            self.over += 1;
            return false;
        }
        self.count[len] += 1;
        if len > self.width + ROW_SLACK {
            self.over += 1;
        }
        if self.count[len] > self.count[self.width] {
            self.width = len;
            let from = (len + ROW_SLACK + 1).min(MAX_ROW);
            self.over = self.count[from..].iter().sum::<u32>() + self.beyond;
        }
        let rows = self.count[self.width];
        rows >= FULL_ROWS
            && self.over.saturating_mul(10) <= rows
            && (self.width..=self.width + ROW_SLACK).contains(&len)
    }

    /// Whether a line of `len` bytes could be the rest of a wrapped row: never longer
    /// than a row. (Fixed-width step lines look like a wrapped log; a long exception
    /// line printed after them is not their rest.)
    pub(crate) fn fits_row(&self, len: usize) -> bool {
        len <= self.width + ROW_SLACK
    }
}

/// A line that starts a log record of its own (a glog or timestamped logger line, a
/// traceback header) is never the wrapped rest of the line before it.
pub(crate) fn starts_record(raw: &[u8]) -> bool {
    let digits = |b: &[u8]| b.iter().all(u8::is_ascii_digit);
    let glog = raw.len() > 6 && b"IWEF".contains(&raw[0]) && digits(&raw[1..5]) && raw[5] == b' ';
    let dated = raw.len() > 5 && (raw.starts_with(b"[20") || (digits(&raw[..4]) && raw[4] == b'-'));
    glog || dated || raw.starts_with(b"Traceback (most recent call last)")
}
