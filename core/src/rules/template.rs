//! The template language rule authors write messages in, and its matcher.
//!
//! A template is a PyTorch message with its variable parts replaced by typed captures:
//!
//! ```text
//! Expected all tensors to be on the same device, but found at least two devices, {device:devices[]} and {device:devices[]}!{? (when checking {argument|arugment} for argument {ident:argument} in method {ident:kernel})}
//! ```
//!
//! The grammar of the language itself is a small nom parser ([`Template::parse`]).
//! Matching is a bounded backtracking walk over the pieces: whitespace in a template
//! matches any run of whitespace (line breaks included) or none, a line break inside a
//! literal word is skipped (terminal hard wrap), and each capture kind is one of the
//! typed atoms of [`crate::atoms`]. Every match attempt has a step budget, so a
//! pathological template costs bounded time on any input.

use std::fmt;

use nom::branch::alt;
use nom::bytes::complete::{tag, take_while1};
use nom::character::complete::{char, multispace1};
use nom::combinator::{map, value};
use nom::{IResult, Parser};
use serde_json::Value;

use crate::grammar::atoms;

/// Most nested `{?...}` / `{a|b}` groups in one template.
const MAX_DEPTH: usize = 8;
/// Longest text a `text` capture may take, in bytes.
const MAX_TEXT: usize = 2048;
/// Steps one match attempt may take before it gives up.
const STEP_BUDGET: u32 = 20_000;
/// Most pieces (literals, spaces, captures, groups and what they hold) in one template:
/// the matcher recurses once per piece, so this bounds its stack depth. The longest
/// built-in template (DDP's unused-parameters message) has 283; the WASM stack (1 MB)
/// overflowed at about 4,000 pieces of captures.
const MAX_PIECES: usize = 600;
/// Optional groups and alternatives a template may have in a row without literal text
/// between them (the built-in pack's longest run is 4).
const MAX_CHOICE_RUN: usize = 8;

/// The longest run of optional groups and alternatives with no literal between them,
/// groups' insides included.
fn choice_run(pieces: &[Piece]) -> usize {
    let mut longest = 0;
    let mut run = 0;
    for p in pieces {
        match p {
            Piece::Opt(inner) => {
                run += 1;
                longest = longest.max(choice_run(inner));
            }
            Piece::Alt(alts) => {
                run += 1;
                for a in alts {
                    longest = longest.max(choice_run(a));
                }
            }
            Piece::Lit(_) | Piece::Fields(_) => run = 0,
            Piece::Space | Piece::Capture { .. } => {}
        }
        longest = longest.max(run);
    }
    longest
}

/// Steps after which an attempt remembers where it failed: (piece, position) pairs
/// that failed once fail again, so runs of optional groups (`{?a}{?a}...`) cost
/// pieces x positions, not 2^groups. Ordinary attempts finish long before this.
const MEMO_AFTER: u32 = 256;

/// Shortest leading text a text capture stops at (see [`Matcher::lead`]): shorter ones
/// could be ordinary words inside the text.
const MIN_LEAD_STOP: usize = 10;

/// A matcher's lead when its entry has none.
static NO_LEAD: LeadStop = LeadStop(None);

/// Bytes of a line that buy one more step for its attempts, beyond [`LINE_STEPS`]:
/// near misses repeated along a long line cannot each spend a whole budget (work per
/// input byte stays bounded, not only work per attempt). A step costs about 150
/// instructions, so two steps a byte held the device-side-assert near misses to 12
/// MB/s; one a byte, 1.36 -> 0.88 billion instructions a megabyte of them; one per four
/// bytes, 0.65 -> 0.44 billion for the CLI on a megabyte of them (64 KiB lines). A real
/// message matches in a step per word or two, and a line that needs more draws on the
/// log's [`RESERVE_STEPS`].
pub(crate) const BYTES_PER_STEP: u64 = 4;

/// Steps an attempt costs its pool before it runs: walking back over its leading words
/// and setting up the matcher is work too. Without it, attempts that fail in a few
/// steps escaped the pool: near misses of one message repeated along a 64 KiB line were
/// 24,000 attempts a line in the front end alone, each costing as much as 300 steps,
/// and the worst template ran at 5 MB/s. Ordinary lines make a few attempts each.
pub(crate) const ATTEMPT_STEPS: u64 = 64;

/// Steps the attempts starting on one line may take whatever its length, beyond one
/// per [`BYTES_PER_STEP`] bytes. An ordinary match takes tens to hundreds of steps; a
/// long message's (a multi-line template, a many-optional one) draws on its log's
/// [`RESERVE_STEPS`] once its line's pool is spent. It was a whole attempt's budget
/// (20,000) per line: a kilobyte line of near misses spent 22 steps a byte, and the
/// worst template ran at 3.5 MB/s; then 2,000, when kilobyte lines of near misses
/// still spent three steps a byte and the slowest templates ran at 13-16 MB/s. A short
/// `RuntimeError: cuDNN error: CUDNN_STATUS_...` line is about 27 attempts of
/// [`ATTEMPT_STEPS`] each, 1,900 steps: with 800 its excess, about 1,050, comes from
/// the reserve, which the four lines of its traceback refill ([`REFILL_STEPS`]).
pub(crate) const LINE_STEPS: u64 = 800;

/// Steps one log's attempts may take beyond their lines' pools, drawn once a line's own
/// pool is spent: what the longest real messages need, never more than this at once.
pub(crate) const RESERVE_STEPS: u64 = 200_000;

/// Steps each line of a stream gives back to the reserve, up to [`RESERVE_STEPS`]: a
/// flood of messages that each need more than their line's pool (3,000 four-line
/// tracebacks of the cuDNN line above, a test, need 264 a line) is read in full, while
/// lines that all spend their pool and the reserve get this much more each, not more.
/// Kilobyte lines of near misses: at most 1,356 steps a line (800 + 256 + 300; 3,024
/// with the pools of 2,000 steps + 1 a byte and no refill), and 1,056 in the front
/// end's judging (the line's pool).
pub(crate) const REFILL_STEPS: u64 = 300;

/// A step pool for the attempts over one text: [`LINE_STEPS`] plus one step per
/// [`BYTES_PER_STEP`] bytes.
pub(crate) fn step_pool(len: usize) -> u64 {
    LINE_STEPS + len as u64 / BYTES_PER_STEP
}

/// The pool of a lone attempt (a rule example, [`Template::match_at`]): one attempt's
/// whole budget.
fn attempt_pool() -> u64 {
    u64::from(STEP_BUDGET) + ATTEMPT_STEPS
}

/// Bytes of blanks `s` starts with: what `str::trim_start` removes. The matcher asks
/// this at every space and every text end; ASCII decides at once (the Unicode walk
/// was a tenth of the instructions of some near misses), other text falls back to it.
#[inline(always)]
fn blank_prefix(s: &str) -> usize {
    let b = s.as_bytes();
    let mut i = 0;
    // `char::is_whitespace` over ASCII: vertical tab and form feed too.
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c') {
        i += 1;
    }
    if b.get(i).is_some_and(|&c| c >= 0x80) {
        i + (s.len() - i - s[i..].trim_start().len())
    } else {
        i
    }
}

/// Whether `s` is blanks only: `s.trim().is_empty()`.
#[inline(always)]
fn is_blank(s: &str) -> bool {
    blank_prefix(s) == s.len()
}

/// A capture kind. See `rules/README.md` for what each matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Device,
    TensorType,
    Dtype,
    Shape,
    Size,
    Int,
    /// A size in a shape or message: an integer, or a symbol of a dynamic shape (`s4`).
    Dim,
    Num,
    Ident,
    Qualname,
    Path,
    Word,
    Text,
    Any,
}

impl Kind {
    /// The evidence a capture of this kind fills besides its own key, as
    /// `(key, list)`: `{size:tried}` also gives `tried_bytes`, a tensor type's dtype
    /// goes to the `dtypes` list. `{name}` in a key is the capture's name.
    pub const fn derived(self) -> &'static [(&'static str, bool)] {
        match self {
            Kind::Size => &[("{name}_bytes", false)],
            Kind::TensorType => &[("dtypes", true)],
            _ => &[],
        }
    }

    /// Every kind with its name in the template language.
    pub const ALL: [(Kind, &'static str); 14] = [
        (Kind::Device, "device"),
        (Kind::TensorType, "tensortype"),
        (Kind::Dtype, "dtype"),
        (Kind::Shape, "shape"),
        (Kind::Size, "size"),
        (Kind::Int, "int"),
        (Kind::Dim, "dim"),
        (Kind::Num, "num"),
        (Kind::Ident, "ident"),
        (Kind::Qualname, "qualname"),
        (Kind::Path, "path"),
        (Kind::Word, "word"),
        (Kind::Text, "text"),
        (Kind::Any, "any"),
    ];

    fn from_name(s: &str) -> Option<Kind> {
        Kind::ALL.iter().find(|(_, n)| *n == s).map(|(k, _)| *k)
    }

    /// The kind's name in the template language.
    pub fn name(self) -> &'static str {
        Kind::ALL.iter().find(|(k, _)| *k == self).map(|(_, n)| *n).unwrap_or("?")
    }
}

/// One element of a compiled template.
#[derive(Clone, Debug, PartialEq)]
pub enum Piece {
    /// Literal text without whitespace.
    Lit(String),
    /// Any run of whitespace, or none.
    Space,
    /// A typed capture; `list` appends to a list value.
    Capture { kind: Kind, name: String, list: bool },
    /// `{?...}`.
    Opt(Vec<Piece>),
    /// `{a|b}`.
    Alt(Vec<Vec<Piece>>),
    /// `{fields Key=kind:name ...}`: a comma-separated `Key=value` list read as a set
    /// (any order, any subset, unknown keys skipped), up to the list's closing bracket.
    Fields(Vec<FieldSpec>),
}

/// One known key of a `{fields ...}` list and the capture its value fills.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldSpec {
    /// The key as printed (`SeqNum`, `Timeout(ms)`); compared without case.
    pub key: String,
    /// How the value is read.
    pub kind: Kind,
    /// The evidence key it fills.
    pub name: String,
    /// Whether it appends to a list.
    pub list: bool,
}

/// A compiled template.
#[derive(Clone, Debug, PartialEq)]
pub struct Template {
    source: String,
    pieces: Vec<Piece>,
    /// Where a match may begin: the template's start first, then each later sentence
    /// distinctive enough to name the message alone (see [`Template::entries`]).
    entries: Vec<Entry>,
    /// Only a full match counts (`whole = true`): no truncated attempt is made.
    whole: bool,
}

/// A place among a template's top-level pieces where a match may begin.
#[derive(Clone, Debug, PartialEq)]
struct Entry {
    /// Index in `pieces` of its first leading word.
    at: usize,
    /// Index in `pieces` where a match runs from: `at`, or the capture before the
    /// leading words (`{ident:op} received an invalid combination of arguments`).
    from: usize,
    /// The kind of that capture, read backwards from the leading words.
    lead_capture: Option<Kind>,
    /// Indices in `pieces` of its leading literal words (before the first capture).
    lead: Vec<usize>,
    /// Indices in `lead` of the anchors, the first anchor first.
    anchors: Vec<usize>,
    /// Whether matches may begin here (the pack turns a later entry off when another
    /// rule's message holds its text: then it names no message alone).
    live: bool,
    /// Its leading words as printed (one space between them), when long enough to
    /// stand for the message: a text capture does not run into it (see
    /// [`Matcher::lead`]). Empty otherwise.
    lead_text: LeadStop,
}

/// An entry's leading words with their searcher built once: a text capture looks for
/// them in every attempt, and building a `memmem` searcher per attempt cost more than
/// the search (3,200 instructions, a tenth of a near miss of `While copying the
/// parameter named ...` on kilobyte lines).
#[derive(Clone, Debug, Default)]
struct LeadStop(Option<memchr::memmem::Finder<'static>>);

impl LeadStop {
    fn new(text: &str) -> LeadStop {
        LeadStop((!text.is_empty()).then(|| memchr::memmem::Finder::new(text.as_bytes()).into_owned()))
    }

    fn text(&self) -> &[u8] {
        self.0.as_ref().map_or(&[], |f| f.needle())
    }
}

impl PartialEq for LeadStop {
    fn eq(&self, other: &LeadStop) -> bool {
        self.text() == other.text()
    }
}

impl Entry {
    fn new(pieces: &[Piece], at: usize) -> Entry {
        let mut lead = Vec::new();
        for (i, p) in pieces.iter().enumerate().skip(at) {
            match p {
                Piece::Lit(_) => lead.push(i),
                Piece::Space => {}
                _ => break,
            }
        }
        let mut e = Entry {
            at,
            from: at,
            lead_capture: None,
            lead,
            anchors: Vec::new(),
            live: true,
            lead_text: LeadStop::default(),
        };
        let text = e.text(pieces);
        if text.len() >= MIN_LEAD_STOP {
            e.lead_text = LeadStop::new(&text);
        }
        e.choose_anchors(pieces, &|_| false);
        e
    }

    /// The first anchor: the longest leading word of four bytes or more that is not
    /// `common`, else the longest; the second: the longest before it, when long enough (a wrap may have
    /// split the first).
    fn choose_anchors(&mut self, pieces: &[Piece], common: &dyn Fn(&str) -> bool) {
        let words: Vec<&str> = (0..self.lead.len()).map(|k| self.word(pieces, k)).collect();
        let rare: Vec<&str> =
            words.iter().map(|w| if common(w) || w.len() < MIN_SECOND_ANCHOR { "" } else { *w }).collect();
        self.anchors.clear();
        let first = longest_word(&rare).filter(|(_, w)| !w.is_empty()).or_else(|| longest_word(&words));
        if let Some((first, _)) = first {
            let w = words[first];
            self.anchors.push(first);
            let second = longest_word(&words[..first]).filter(|&(_, s)| s.len() >= MIN_SECOND_ANCHOR && s != w);
            self.anchors.extend(second.map(|(k, _)| k));
        }
    }

    /// Its leading words, one space between them.
    fn text(&self, pieces: &[Piece]) -> String {
        (0..self.lead.len()).map(|k| self.word(pieces, k)).collect::<Vec<_>>().join(" ")
    }

    fn word<'p>(&self, pieces: &'p [Piece], k: usize) -> &'p str {
        match self.lead.get(k).map(|&p| &pieces[p]) {
            Some(Piece::Lit(l)) => l,
            _ => "",
        }
    }

    /// Bytes of its leading literal words.
    fn lead_len(&self, pieces: &[Piece]) -> usize {
        (0..self.lead.len()).map(|k| self.word(pieces, k).len()).sum()
    }
}

/// An anchor: leading word `word` of entry `entry`, the literal the prefilter finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnchorRef<'t> {
    /// Index of the entry (0: the template's start).
    pub entry: usize,
    /// Index of the word among the entry's leading words.
    pub word: usize,
    /// The word.
    pub text: &'t str,
}

/// Shortest leading text of a later sentence taken as an entry, in bytes and words: a
/// sentence that short is too common to name a message without its first sentence.
const MIN_ENTRY_BYTES: usize = 24;
const MIN_ENTRY_WORDS: usize = 4;

/// Fewest literal bytes a truncated match must have read: the distinctive head of the
/// message, its leading words or their first [`TRUNCATED_HEAD`] bytes.
const MIN_TRUNCATED_LITERAL: usize = 20;
const TRUNCATED_HEAD: usize = 40;

/// A template that does not compile, with the byte offset of the problem in its source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateError {
    /// Byte offset into the template text.
    pub offset: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at byte {})", self.message, self.offset)
    }
}

impl std::error::Error for TemplateError {}

/// One captured value.
#[derive(Clone, Debug, PartialEq)]
pub struct Capture {
    /// The evidence key it fills.
    pub name: String,
    /// Whether it appends to a list (`{device:devices[]}`) rather than sets a value.
    pub list: bool,
    /// The value.
    pub value: Value,
}

impl Capture {
    fn new(name: &str, list: bool, value: Value) -> Capture {
        Capture { name: name.to_string(), list, value }
    }
}

/// The evidence key of a derived capture ([`Kind::derived`]): `{name}_bytes` for the
/// capture `tried` is `tried_bytes`. Built directly: a `replace` searched the pattern
/// and grew a string on every size captured (a tenth of the work on near misses of the
/// OOM message).
fn derived_key(pattern: &str, name: &str) -> String {
    match pattern.strip_prefix("{name}") {
        Some(rest) => {
            let mut k = String::with_capacity(name.len() + rest.len());
            k.push_str(name);
            k.push_str(rest);
            k
        }
        None => pattern.to_string(),
    }
}

/// A successful match.
#[derive(Clone, Debug, PartialEq)]
pub struct Match {
    /// Byte range in the haystack.
    pub start: usize,
    /// End of the byte range (exclusive).
    pub end: usize,
    /// Captured values in capture order; list captures appear once per element.
    pub captures: Vec<Capture>,
    /// Literal bytes matched: how specific this match is.
    pub literal_len: usize,
    /// The text ended before the template did (a cut paste): the captures are those
    /// the text still had.
    pub truncated: bool,
    /// The match began at a later sentence: the message's first sentence is missing.
    pub head_missing: bool,
    /// The message's first letter was printed in the other case.
    pub folded: bool,
}

impl Match {
    /// Confidence steps the match costs: one for a cut text, one for a missing head.
    pub fn degraded(&self) -> u8 {
        u8::from(self.truncated) + u8::from(self.head_missing)
    }
}

impl Template {
    /// Compiles template text.
    pub fn parse(src: &str) -> Result<Template, TemplateError> {
        let mut count = 0;
        let pieces = parse_seq(src, src, 0, &mut count)?;
        // Optional groups and alternatives in a row with no literal between them can all
        // match the same text, in as many ways as their product (`{?a}` thirty times
        // spent the whole step budget at every anchor): refused here, with where.
        let run = choice_run(&pieces);
        if run > MAX_CHOICE_RUN {
            return Err(TemplateError {
                offset: 0,
                message: format!(
                    "{run} optional groups or alternatives in a row with no literal text between them (at most {MAX_CHOICE_RUN}): they can match the same text in too many ways; put literal text between them or write one group"
                ),
            });
        }
        // A name the message begins with (`add_ received an invalid combination ...`)
        // may be captured before the leading words: it is read backwards from them.
        let lead_capture = match (pieces.first(), pieces.get(1), pieces.get(2)) {
            (Some(Piece::Capture { kind, list: false, .. }), Some(Piece::Space), Some(Piece::Lit(l)))
                if matches!(kind, Kind::Ident | Kind::Qualname | Kind::Word) && l.chars().count() >= 3 =>
            {
                Some(*kind)
            }
            _ => None,
        };
        match pieces.first() {
            Some(Piece::Lit(l)) if l.chars().count() >= 3 => {}
            _ if lead_capture.is_some() => {}
            _ => {
                return Err(TemplateError {
                    offset: 0,
                    message: "a template must start with at least 3 characters of literal text (its first word is the prefilter anchor), or with one `{ident:..}`, `{qualname:..}` or `{word:..}` capture, a space and such text".into(),
                })
            }
        }
        let mut first = Entry::new(&pieces, if lead_capture.is_some() { 2 } else { 0 });
        first.from = 0;
        first.lead_capture = lead_capture;
        let mut entries = vec![first];
        // A later sentence (`... subprocess. To use CUDA with multiprocessing, ...`) is an
        // entry when its leading words alone are distinctive.
        for k in 2..pieces.len() {
            let ends_sentence = matches!(&pieces[k - 2], Piece::Lit(l) if l.len() > 1 && l.ends_with('.'))
                && pieces[k - 1] == Piece::Space;
            let starts_sentence =
                matches!(&pieces[k], Piece::Lit(l) if l.starts_with(|c: char| c.is_ascii_uppercase()));
            if ends_sentence && starts_sentence {
                let e = Entry::new(&pieces, k);
                if e.lead.len() >= MIN_ENTRY_WORDS && e.lead_len(&pieces) >= MIN_ENTRY_BYTES {
                    entries.push(e);
                }
            }
        }
        Ok(Template { source: src.to_string(), pieces, entries, whole: false })
    }

    /// The template text as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The literal the prefilter searches for: the longest word of the template's
    /// leading literal text (`variables` rather than `one` in `one of the variables
    /// needed ...`), so that common words do not make every line a candidate.
    #[cfg(test)]
    pub fn anchor(&self) -> &str {
        self.anchors().first().map(|a| a.text).unwrap_or("")
    }

    /// Each entry's anchor, then a second one: the longest leading word of at least
    /// [`MIN_SECOND_ANCHOR`] bytes before the first. A terminal hard wrap can split any
    /// word (`in-place op` / `eration.`); the second anchor still finds the template
    /// when the split word is the first anchor. Only a word before it can: the walk
    /// back from an anchor to the entry's start ([`Template::start_for_word`]) needs
    /// the words it crosses intact.
    pub fn anchors(&self) -> Vec<AnchorRef<'_>> {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.live)
            .flat_map(|(ei, e)| {
                e.anchors.iter().map(move |&k| AnchorRef { entry: ei, word: k, text: e.word(&self.pieces, k) })
            })
            .collect()
    }

    /// The entries' leading texts, the template's start first: where a match may begin.
    /// A later entry is a sentence whose leading words alone name the message (at least
    /// four words and 24 bytes before the first capture), so that a paste that lost the
    /// first sentence is still recognised.
    pub fn entries(&self) -> Vec<String> {
        (0..self.entries.len()).map(|e| self.lead_text_of(e)).collect()
    }

    /// Turns each later entry on where `keep(lead_text)` holds and off elsewhere (the
    /// pack turns off those whose text another rule's message also contains).
    pub(crate) fn set_live_entries(&mut self, keep: impl Fn(&str) -> bool) {
        let texts = self.entries();
        for (k, e) in self.entries.iter_mut().enumerate().skip(1) {
            e.live = keep(&texts[k]);
        }
    }

    /// Chooses every entry's anchors again, passing over the leading words `common`
    /// holds where an entry has another.
    pub(crate) fn choose_anchors(&mut self, common: impl Fn(&str) -> bool) {
        for e in &mut self.entries {
            e.choose_anchors(&self.pieces, &common);
        }
    }

    /// Whether leading word `word` is the first anchor of entry `entry`.
    pub fn is_first_anchor(&self, entry: usize, word: usize) -> bool {
        self.entries.get(entry).is_some_and(|e| e.anchors.first() == Some(&word))
    }

    /// The byte a walk back from leading word `word` of `entry` must find first (the
    /// last byte of the word before it), and whether it matches in either case (the
    /// entry's first letter, when the word before is that one letter): `None` for the
    /// first word. [`Template::walk_back`] fails at once where another byte stands there.
    pub(crate) fn byte_before_word(&self, entry: usize, word: usize) -> Option<(u8, bool)> {
        let k = word.checked_sub(1)?;
        let w = self.word(entry, k).as_bytes();
        Some((*w.last()?, k == 0 && w.len() == 1))
    }

    /// Leading literal word `k` of entry `entry`.
    fn word(&self, entry: usize, k: usize) -> &str {
        self.entries.get(entry).map_or("", |e| e.word(&self.pieces, k))
    }

    /// Whether entry `entry`'s leading words alone are distinctive (at least four words
    /// and 24 bytes): such a message is recognised wherever it stands, even with its
    /// first letter in the other case; a short one only where a message begins.
    pub fn distinctive_lead(&self, entry: usize) -> bool {
        self.entries
            .get(entry)
            .is_some_and(|e| e.lead.len() >= MIN_ENTRY_WORDS && e.lead_len(&self.pieces) >= MIN_ENTRY_BYTES)
    }

    fn lead_count(&self, entry: usize) -> usize {
        self.entries.get(entry).map_or(0, |e| e.lead.len())
    }

    /// Whether, from an occurrence of leading word `word` at `pos`, a line break
    /// interrupts the rest of the leading words before they stop matching: only then
    /// can the first anchor have been split by a wrap, and a second anchor's hit be
    /// worth a match attempt (`NCCL INFO ...` against `NCCL WARN Duplicate GPU` is not).
    pub fn wrap_in_lead(&self, hay: &str, pos: usize, entry: usize, word: usize) -> bool {
        let b = hay.as_bytes();
        let mut i = pos;
        for k in word..self.lead_count(entry) {
            if k > word {
                let gap = i;
                while i < b.len() && b[i].is_ascii_whitespace() {
                    if b[i] == b'\n' {
                        return true;
                    }
                    i += 1;
                }
                if i == gap {
                    return false;
                }
            }
            for &c in self.word(entry, k).as_bytes() {
                match b.get(i) {
                    Some(b'\n') => return true,
                    Some(&h) if h == c => i += 1,
                    _ => return false,
                }
            }
        }
        false
    }

    /// Where the template would start, given an occurrence of its anchor at
    /// `anchor_pos`: walks back over the leading words before the anchor (each after
    /// any run of whitespace). `None` when the text before does not fit.
    #[cfg(test)]
    pub fn start_for(&self, hay: &str, anchor_pos: usize) -> Option<usize> {
        self.start_for_word(hay, anchor_pos, 0, self.entries[0].anchors.first().copied().unwrap_or(0))
    }

    /// [`Template::start_for`] for an occurrence of leading word `word` of entry
    /// `entry` (from [`Template::anchors`]).
    pub fn start_for_word(&self, hay: &str, anchor_pos: usize, entry: usize, word: usize) -> Option<usize> {
        match self.walk_back(hay, anchor_pos, entry, word) {
            WalkBack::Start(s) => Some(s),
            WalkBack::RanOut | WalkBack::Mismatch => None,
        }
    }

    /// The walk of [`Template::start_for_word`]. A leading word may hold a terminal hard
    /// wrap (`lis` / `ten`: a line break plus indentation between two of its bytes),
    /// as [`match_literal`] allows going forward. The entry's first letter matches in
    /// either case (a message quoted mid-sentence, retyped). Reaching the start of
    /// `hay` with every byte before the anchor matched is [`WalkBack::RanOut`]: on a
    /// single line, the rest of the leading words may be on the line before.
    pub(crate) fn walk_back(&self, hay: &str, anchor_pos: usize, entry: usize, word: usize) -> WalkBack {
        if entry >= self.entries.len()
            || word > self.lead_count(entry)
            || anchor_pos > hay.len()
            || !hay.is_char_boundary(anchor_pos)
        {
            return WalkBack::Mismatch;
        }
        let b = hay.as_bytes();
        let mut pos = anchor_pos;
        for k in (0..word).rev() {
            let w = self.word(entry, k).as_bytes();
            while pos > 0 && b[pos - 1].is_ascii_whitespace() {
                pos -= 1;
            }
            let mut j = w.len();
            while j > 0 {
                if pos == 0 {
                    return WalkBack::RanOut;
                }
                let same = b[pos - 1] == w[j - 1] || (k == 0 && j == 1 && b[pos - 1].eq_ignore_ascii_case(&w[0]));
                if same {
                    pos -= 1;
                    j -= 1;
                    continue;
                }
                // Inside the word: indentation, then the line break of a wrap.
                let mut k2 = pos;
                while k2 > 0 && matches!(b[k2 - 1], b' ' | b'\t') {
                    k2 -= 1;
                }
                if j < w.len() && k2 > 0 && b[k2 - 1] == b'\n' {
                    pos = k2 - 1;
                    continue;
                }
                return WalkBack::Mismatch;
            }
        }
        // The capture before the leading words: whitespace, then the name.
        let Some(kind) = self.entries[entry].lead_capture else { return WalkBack::Start(pos) };
        let mut p = pos;
        while p > 0 && matches!(b[p - 1], b' ' | b'\t') {
            p -= 1;
        }
        if p == pos {
            return if p == 0 { WalkBack::RanOut } else { WalkBack::Mismatch };
        }
        let name = |c: u8| match kind {
            Kind::Ident => c.is_ascii_alphanumeric() || c == b'_',
            Kind::Qualname => c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b':'),
            _ => !c.is_ascii_whitespace(),
        };
        let end = p;
        while p > 0 && name(b[p - 1]) && end - p < 128 {
            p -= 1;
        }
        if p == end {
            return if p == 0 { WalkBack::RanOut } else { WalkBack::Mismatch };
        }
        WalkBack::Start(p)
    }

    /// Finds the first full match (from the template's start) at or after `from`,
    /// trying the places its anchors occur.
    #[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))]
    pub fn find(&self, hay: &str, from: usize) -> Option<Match> {
        let first_via = |a: AnchorRef<'_>| {
            let mut pos = from;
            while let Some(off) = hay.get(pos..).and_then(|s| s.find(a.text)) {
                let m = self
                    .start_for_word(hay, pos + off, 0, a.word)
                    .filter(|&st| st >= from)
                    .and_then(|st| self.match_at(hay, st));
                if m.is_some() {
                    return m;
                }
                pos += off + a.text.len();
            }
            None
        };
        self.anchors().into_iter().filter(|a| a.entry == 0).filter_map(first_via).min_by_key(|m| m.start)
    }

    /// The leading literal words (before the first capture or group), as one text.
    pub fn lead_text(&self) -> String {
        self.lead_text_of(0)
    }

    fn lead_text_of(&self, entry: usize) -> String {
        self.entries.get(entry).map_or_else(String::new, |e| e.text(&self.pieces))
    }

    /// How many pieces the template has, its groups' contents included (at most
    /// `MAX_PIECES`, checked when it is parsed).
    #[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))]
    pub fn piece_count(&self) -> usize {
        fn count(ps: &[Piece]) -> usize {
            ps.iter()
                .map(|p| {
                    1 + match p {
                        Piece::Opt(s) => count(s),
                        Piece::Alt(alts) => alts.iter().map(|s| count(s)).sum(),
                        _ => 0,
                    }
                })
                .sum()
        }
        count(&self.pieces)
    }

    /// Every capture: its name, kind and whether it appends to a list.
    pub fn capture_specs(&self) -> Vec<(&str, Kind, bool)> {
        fn walk<'a>(ps: &'a [Piece], out: &mut Vec<(&'a str, Kind, bool)>) {
            for p in ps {
                match p {
                    Piece::Capture { kind, name, list } => out.push((name, *kind, *list)),
                    Piece::Fields(fs) => out.extend(fs.iter().map(|f| (f.name.as_str(), f.kind, f.list))),
                    Piece::Opt(s) => walk(s, out),
                    Piece::Alt(alts) => alts.iter().for_each(|s| walk(s, out)),
                    _ => {}
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.pieces, &mut out);
        out
    }

    /// Whether entry `entry` could match at `start` if `hay` went on: it matches, or
    /// `hay` ends before the template fails. The streaming front end uses this on a
    /// single line to tell an anchor hit worth keeping from a common word.
    #[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))]
    pub fn could_match_at(&self, hay: &str, start: usize, entry: usize) -> bool {
        self.could_match_at_pooled(hay, start, entry, &mut attempt_pool())
    }

    /// [`could_match_at`](Template::could_match_at) drawing its steps from `pool`. An
    /// attempt that runs out of steps could have matched: it says yes (the line is kept
    /// and matched later, within that text's own pool).
    pub(crate) fn could_match_at_pooled(&self, hay: &str, start: usize, entry: usize, pool: &mut u64) -> bool {
        let Some(e) = self.entries.get(entry) else { return false };
        if !hay.is_char_boundary(start) {
            return false;
        }
        if *pool == 0 {
            return true;
        }
        *pool = pool.saturating_sub(ATTEMPT_STEPS);
        let mut m = Matcher::pooled(hay, start, true, *pool);
        m.lead = &e.lead_text;
        m.record = false;
        let cont = Cont { seq: &self.pieces[e.from..], next: None };
        let ok = m.run(&cont, start).is_some() || m.out_of_steps();
        *pool = pool.saturating_sub(u64::from(m.steps));
        ok
    }

    /// The template matching in full only (a rule's `whole = true`): a message cut short
    /// by the end of a line or the input is not it.
    pub fn whole_only(mut self, whole: bool) -> Template {
        self.whole = whole;
        self
    }

    /// Matches the template from its start exactly at byte `start` of `hay`.
    pub fn match_at(&self, hay: &str, start: usize) -> Option<Match> {
        self.full_match(hay, start, 0, &mut attempt_pool()).ok()
    }

    /// Matches entry `entry` at byte `start`: in full, else, where the text ends inside
    /// the message (a line or the input ends within the word the match stopped at),
    /// as a truncated match that read the message's head (its leading words, or their
    /// first 40 bytes, and at least 20).
    #[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))]
    pub fn match_entry(&self, hay: &str, start: usize, entry: usize) -> Option<Match> {
        self.match_entry_pooled(hay, start, entry, &mut attempt_pool())
    }

    /// [`match_entry`](Template::match_entry) drawing its steps from `pool`, shared by
    /// every attempt over one text: when it is spent, attempts fail at once.
    pub(crate) fn match_entry_pooled(&self, hay: &str, start: usize, entry: usize, pool: &mut u64) -> Option<Match> {
        if *pool == 0 {
            return None;
        }
        *pool = pool.saturating_sub(ATTEMPT_STEPS);
        let reached = match self.full_match(hay, start, entry, pool) {
            Ok(m) => return Some(m),
            Err(_) if self.whole => return None,
            Err(reached) => reached?,
        };
        // The failure must be at the end of the text: at most one word before a line end.
        // A truncated match ends within a word of the line's end: look no further than
        // a text capture would.
        // Read only as far as that takes: a second word ends it (attempts along a 64 KiB
        // line each read a word here, not the text's whole reach).
        let reach = floor_boundary(hay, (reached + MAX_TEXT).min(hay.len()));
        let (mut words, mut in_word, mut line_end) = (0, false, None);
        for (k, c) in hay[reached..reach].char_indices() {
            if c == '\n' {
                line_end = Some(reached + k);
                break;
            }
            if c.is_whitespace() {
                in_word = false;
            } else if !in_word {
                in_word = true;
                words += 1;
                if words > 1 {
                    return None;
                }
            }
        }
        let line_end = match line_end {
            Some(p) => p,
            None if reach == hay.len() => hay.len(),
            None => return None,
        };
        let e = &self.entries[entry];
        let cut = &hay[..line_end];
        let mut m = Matcher::pooled(cut, start, true, *pool);
        m.lead = &e.lead_text;
        let cont = Cont { seq: &self.pieces[e.from..], next: None };
        let end = m.run(&cont, start);
        *pool = pool.saturating_sub(u64::from(m.steps));
        let end = end?;
        if m.lit < MIN_TRUNCATED_LITERAL.max(e.lead_len(&self.pieces).min(TRUNCATED_HEAD)) {
            return None;
        }
        let end = floor_boundary(cut, end.min(cut.len()));
        let end = start + cut[start..end].trim_end().len();
        let folded = m.folded;
        Some(Match {
            start,
            end,
            captures: m.captures(),
            literal_len: m.lit,
            truncated: true,
            head_missing: entry > 0,
            folded,
        })
    }

    /// A full match of entry `entry`, or how far into `hay` the attempt read (`None`:
    /// not even that, the start is not a character boundary).
    fn full_match(&self, hay: &str, start: usize, entry: usize, pool: &mut u64) -> Result<Match, Option<usize>> {
        let Some(e) = self.entries.get(entry) else { return Err(None) };
        if !hay.is_char_boundary(start) {
            return Err(None);
        }
        let mut m = Matcher::pooled(hay, start, false, *pool);
        m.lead = &e.lead_text;
        let cont = Cont { seq: &self.pieces[e.from..], next: None };
        let r = m.run(&cont, start);
        *pool = pool.saturating_sub(u64::from(m.steps));
        match r {
            Some(end) => Ok(Match {
                start,
                end,
                folded: m.folded,
                captures: m.captures(),
                literal_len: m.lit,
                truncated: false,
                head_missing: entry > 0,
            }),
            None => Err((!m.out_of_steps()).then_some(m.reached)),
        }
    }
}

// ---------------------------------------------------------------------------
// Grammar of the template language.

fn err(full: &str, at: &str, message: impl Into<String>) -> TemplateError {
    // `at` is always a subslice of `full`; its address gives its offset.
    let offset = (at.as_ptr() as usize).saturating_sub(full.as_ptr() as usize).min(full.len());
    TemplateError { offset, message: message.into() }
}

fn parse_seq(full: &str, mut i: &str, depth: usize, count: &mut usize) -> Result<Vec<Piece>, TemplateError> {
    if depth > MAX_DEPTH {
        return Err(err(full, i, format!("groups nested deeper than {MAX_DEPTH}")));
    }
    let mut out: Vec<Piece> = Vec::new();
    while !i.is_empty() {
        *count += 1;
        if *count > MAX_PIECES {
            return Err(err(
                full,
                i,
                format!("template too long: more than {MAX_PIECES} pieces (literal runs, spaces, captures, groups); split the message into several templates"),
            ));
        }
        if let Ok((rest, _)) = multispace1::<&str, nom::error::Error<&str>>(i) {
            if !matches!(out.last(), Some(Piece::Space)) {
                out.push(Piece::Space);
            }
            i = rest;
            continue;
        }
        if let Ok((rest, c)) = escaped_brace(i) {
            push_lit(&mut out, c.encode_utf8(&mut [0; 4]));
            i = rest;
            continue;
        }
        if i.starts_with('}') {
            return Err(err(full, i, "unmatched `}` (write `}}` for a literal brace)"));
        }
        if i.starts_with('{') {
            let body_start = &i[1..];
            let Some(len) = group_len(body_start) else {
                return Err(err(full, i, "unclosed `{` (write `{{` for a literal brace)"));
            };
            let body = &body_start[..len];
            i = &body_start[len + 1..];
            out.push(parse_group(full, body, depth, count)?);
            continue;
        }
        let (rest, run) = literal_run(i).map_err(|_| err(full, i, "unexpected character"))?;
        push_lit(&mut out, run);
        i = rest;
    }
    Ok(out)
}

fn push_lit(out: &mut Vec<Piece>, s: &str) {
    if let Some(Piece::Lit(l)) = out.last_mut() {
        l.push_str(s);
    } else {
        out.push(Piece::Lit(s.to_string()));
    }
}

fn escaped_brace(i: &str) -> IResult<&str, char> {
    alt((value('{', tag("{{")), value('}', tag("}}")))).parse(i)
}

/// A run of literal characters: up to whitespace or a brace.
fn literal_run(i: &str) -> IResult<&str, &str> {
    take_while1(|c: char| !c.is_whitespace() && c != '{' && c != '}').parse(i)
}

/// Length of a group body up to its matching `}`, honouring nesting and `{{`/`}}`.
fn group_len(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut depth = 0usize;
    let mut k = 0;
    while k < b.len() {
        match b[k] {
            // Inside a group, braces only nest: `{? a {int:n}}` closes twice.
            b'{' => {
                depth += 1;
                k += 1;
            }
            b'}' if depth == 0 => return Some(k),
            b'}' => {
                depth -= 1;
                k += 1;
            }
            _ => k += 1,
        }
    }
    None
}

/// Splits a group body at its top-level `|`.
fn split_alternatives(body: &str) -> Vec<&str> {
    let b = body.as_bytes();
    let mut depth = 0usize;
    let mut parts = Vec::new();
    let mut last = 0;
    let mut k = 0;
    while k < b.len() {
        match b[k] {
            b'{' => depth += 1,
            b'}' => depth = depth.saturating_sub(1),
            b'|' if depth == 0 => {
                parts.push(&body[last..k]);
                last = k + 1;
            }
            _ => {}
        }
        k += 1;
    }
    parts.push(&body[last..]);
    parts
}

fn capture_spec(i: &str) -> IResult<&str, (&str, &str, bool)> {
    map(
        (
            take_while1(|c: char| c.is_ascii_alphabetic()),
            char(':'),
            take_while1(|c: char| c.is_ascii_alphanumeric() || c == '_'),
            nom::combinator::opt(tag("[]")),
        ),
        |(k, _, n, l)| (k, n, l.is_some()),
    )
    .parse(i)
}

fn parse_group(full: &str, body: &str, depth: usize, count: &mut usize) -> Result<Piece, TemplateError> {
    if let Some(specs) = body.strip_prefix("fields ") {
        return parse_fields(full, specs);
    }
    if let Some(inner) = body.strip_prefix('?') {
        let seq = parse_seq(full, inner, depth + 1, count)?;
        if seq.is_empty() {
            return Err(err(full, body, "empty optional group `{?}`"));
        }
        return Ok(Piece::Opt(seq));
    }
    let alts = split_alternatives(body);
    if alts.len() > 1 {
        let mut out = Vec::new();
        for a in alts {
            if a.trim().is_empty() {
                return Err(err(full, a, "empty alternative in `{a|b}` (use `{?...}` for an optional part)"));
            }
            out.push(parse_seq(full, a, depth + 1, count)?);
        }
        return Ok(Piece::Alt(out));
    }
    match capture_spec(body) {
        Ok(("", (kind, name, list))) => match Kind::from_name(kind) {
            Some(k) => Ok(Piece::Capture { kind: k, name: name.to_string(), list }),
            None => Err(err(
                full,
                body,
                format!(
                    "unknown capture kind `{kind}`; expected one of {}",
                    Kind::ALL.iter().map(|(_, n)| *n).collect::<Vec<_>>().join(", ")
                ),
            )),
        },
        _ => Err(err(
            full,
            body,
            format!("`{{{body}}}` is not a capture: write `{{kind:name}}` (for example `{{device:devices[]}}`), `{{a|b}}` or `{{?optional}}`"),
        )),
    }
}

/// `Key=kind:name` items separated by whitespace.
fn parse_fields(full: &str, specs: &str) -> Result<Piece, TemplateError> {
    let mut out = Vec::new();
    for item in specs.split_whitespace() {
        let Some((key, capture)) = item.split_once('=') else {
            return Err(err(
                full,
                item,
                format!("`{item}` is not a field: write `Key=kind:name` (for example `SeqNum=int:seq`)"),
            ));
        };
        let ok_key = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '(' | ')'));
        let parsed = capture_spec(capture).ok().filter(|(rest, _)| rest.is_empty()).map(|(_, c)| c);
        let (Some((kind, name, list)), true) = (parsed, ok_key) else {
            return Err(err(
                full,
                item,
                format!("`{item}` is not a field: write `Key=kind:name` (for example `SeqNum=int:seq`)"),
            ));
        };
        let Some(kind) = Kind::from_name(kind) else {
            return Err(err(full, item, format!("unknown capture kind `{kind}` in field `{item}`")));
        };
        out.push(FieldSpec { key: key.to_string(), kind, name: name.to_string(), list });
    }
    if out.is_empty() {
        return Err(err(full, specs, "a `{fields ...}` group names no field"));
    }
    Ok(Piece::Fields(out))
}

// ---------------------------------------------------------------------------
// Matching.

/// What a literal piece found at a position ([`Matcher::literal_at`]).
enum LitEnd {
    /// The literal, ending here.
    At(usize),
    /// A prefix of it, then the end of a partial match's input: a success.
    InputEnds,
    /// Something else.
    No,
}

/// What one end of a text capture gave.
enum End {
    /// The rest matched; the match ends here.
    Matched(usize),
    /// Try the next end.
    Next,
    /// The attempt is out of steps.
    Stop,
}

/// A search a [`Matcher`] made and remembers: `hay[from..upto]` was read, and `found`
/// is the first occurrence in it (none when `None`). Tries of a text capture ask again
/// from a little further on: [`Seen::resume`] answers from this where it can.
#[derive(Clone, Copy)]
struct Seen {
    from: usize,
    upto: usize,
    found: Option<usize>,
}

impl Seen {
    /// For a search of a needle `len` bytes long from `from` to `limit`: `Ok` with the
    /// answer when what was read settles it, else `Err` with where reading must resume
    /// (an occurrence may straddle where this search stopped).
    fn resume(this: Option<Seen>, from: usize, limit: usize, len: usize) -> Result<Option<usize>, usize> {
        match this.filter(|s| s.from <= from) {
            Some(Seen { found: Some(f), .. }) if f >= from => Ok(Some(f).filter(|&f| f + len <= limit)),
            Some(Seen { found: None, upto, .. }) if upto >= from => {
                Err(upto.saturating_sub(len.saturating_sub(1)).max(from).min(limit))
            }
            _ => Err(from),
        }
    }

    /// The first occurrence in `hay[from..limit]` of a needle `len` bytes long, answered
    /// from `seen` where it settles it, else by `search` from where reading must resume
    /// (it returns an absolute position), and remembered in `seen`.
    fn ask(
        seen: &mut Option<Seen>,
        from: usize,
        limit: usize,
        len: usize,
        search: impl FnOnce(usize) -> Option<usize>,
    ) -> Option<usize> {
        let scan_from = match Seen::resume(*seen, from, limit, len) {
            Ok(found) => return found,
            Err(at) => at,
        };
        let found = search(scan_from);
        *seen = Some(Seen { from, upto: limit, found });
        found
    }
}

/// What remains to match: pieces of the template (`'p`, as long as the template) and
/// what follows them, on the stack of the walk (`'c`).
struct Cont<'p, 'c> {
    seq: &'p [Piece],
    next: Option<&'c Cont<'p, 'c>>,
}

/// A capture while an attempt runs: its name borrowed from the template and a text
/// capture's value a span of the input, made a [`Capture`] once the whole match holds.
/// Each try of a text capture whose rest matched built its name and trimmed value as
/// strings, dropped again when the attempt failed later: 6% of the instructions of
/// near misses of collective mismatches, long messages made of captures.
enum Slot<'h> {
    Text { name: &'h str, list: bool, from: usize, to: usize, any: bool },
    Value { name: std::borrow::Cow<'h, str>, list: bool, value: Value },
}

impl Slot<'_> {
    fn capture(self, hay: &str) -> Capture {
        match self {
            Slot::Text { name, list, from, to, any } => {
                let t = hay[from..to].trim();
                // An `any` capture crosses lines: its value is one line of text.
                let value = if any { t.split_whitespace().collect::<Vec<_>>().join(" ") } else { t.to_string() };
                Capture::new(name, list, Value::String(value))
            }
            Slot::Value { name, list, value } => Capture { name: name.into_owned(), list, value },
        }
    }
}

struct Matcher<'h> {
    hay: &'h str,
    steps: u32,
    /// Steps this attempt may take: [`STEP_BUDGET`], or less when its pool runs low.
    budget: u32,
    /// (piece, position) pairs that failed, once the attempt is past [`MEMO_AFTER`].
    failed: std::collections::HashSet<(usize, usize), super::ints::Ints>,
    caps: Vec<Slot<'h>>,
    /// Whether captures are recorded: a yes/no attempt ([`Template::could_match_at`])
    /// reads them without building their names and values.
    record: bool,
    lit: usize,
    /// Running out of input counts as success (see [`Template::could_match_at`]).
    partial: bool,
    /// Where the match began: its first letter matches in either case.
    start: usize,
    /// The furthest position any piece was tried at: where a failed match stopped.
    reached: usize,
    /// The first letter matched in the other case.
    folded: bool,
    /// What [`Matcher::next_stop`] has read, per bytes searched for.
    stops: Vec<([u8; 2], Seen)>,
    /// Try every character end of a text capture: the reference the tests hold the
    /// ends found by [`Matcher::text_before_literal`] to.
    every_end: bool,
    /// Match every piece through [`Matcher::run`]: the reference the tests hold
    /// [`Matcher::run_plain`] to (the same result in the same steps).
    piecewise: bool,
    /// The message's own leading words (empty: none long enough). A `text` or `any`
    /// capture ends before they recur: the parameter name of `size mismatch for
    /// {text:param}:` never holds `size mismatch for`, and where it seems to, the line
    /// is several messages glued (a one-line paste of every rank's report) or near
    /// misses repeated to cost time, where each try would otherwise read on through
    /// every repeat of the message within the capture's reach (an `any` capture did, to
    /// each `)` of every collective mismatch along a line; it stops so on its first line
    /// only, see [`Matcher::capture`]).
    lead: &'h LeadStop,
    /// What [`Matcher::lead_stop`] has read.
    lead_seen: Option<Seen>,
    /// What [`Matcher::first_wrap`] and [`Matcher::record_break`] have read. Each try of
    /// a numeric capture or an `any` capture asks them from a little further on; read
    /// afresh, each answer cost up to 256 and 2,048 bytes a step, and a third-party
    /// template of two `any` captures in a row ran at 0.3 MB/s on short lines.
    wrap_seen: Option<Seen>,
    record_seen: Option<Seen>,
}

impl<'h> Matcher<'h> {
    fn new(hay: &'h str, start: usize, partial: bool) -> Matcher<'h> {
        Matcher {
            hay,
            steps: 0,
            budget: STEP_BUDGET,
            failed: std::collections::HashSet::default(),
            caps: Vec::new(),
            record: true,
            lit: 0,
            partial,
            start,
            reached: start,
            folded: false,
            stops: Vec::new(),
            every_end: false,
            piecewise: false,
            lead: &NO_LEAD,
            lead_seen: None,
            wrap_seen: None,
            record_seen: None,
        }
    }

    /// A matcher whose budget is what is left of `pool` (at most [`STEP_BUDGET`]).
    fn pooled(hay: &'h str, start: usize, partial: bool, pool: u64) -> Matcher<'h> {
        let mut m = Matcher::new(hay, start, partial);
        m.budget = STEP_BUDGET.min(u32::try_from(pool).unwrap_or(u32::MAX));
        m
    }

    /// The captures of the match that held, in template order.
    fn captures(&mut self) -> Vec<Capture> {
        let hay = self.hay;
        self.caps.drain(..).map(|c| c.capture(hay)).collect()
    }

    fn out_of_steps(&self) -> bool {
        self.steps > self.budget
    }

    /// Whether only blanks are left from `pos` in a partial match: the input ran out,
    /// which counts as success (`trim_start` stops at the first other character; `trim`
    /// would also walk back from the text's end at every step). This and the next two
    /// run once per piece, from `step` and `run_plain`: left as calls, they cost 2% of
    /// the instructions of near misses.
    #[inline(always)]
    fn input_ends_at(&self, pos: usize) -> bool {
        self.partial && self.hay.as_bytes().get(pos).is_none_or(|b| !b.is_ascii_graphic()) && is_blank(&self.hay[pos..])
    }

    /// Where a [`Piece::Space`] at `pos` ends: after every blank there, or at `pos`.
    #[inline(always)]
    fn after_blanks(&self, pos: usize) -> usize {
        pos + blank_prefix(&self.hay[pos..])
    }

    /// Literal `l` at `pos`; its first letter in either case where the match began
    /// (and then whether it was folded).
    #[inline(always)]
    fn literal_at(&mut self, pos: usize, l: &str) -> LitEnd {
        let first = pos == self.start;
        if first {
            self.folded = self.hay.as_bytes().get(pos) != l.as_bytes().first();
        }
        match match_literal(self.hay, pos, l, first) {
            Some(e) => LitEnd::At(e),
            // The input ended inside the literal: a prefix of it matched.
            None if self.partial && l.starts_with(self.hay[pos..].trim_end()) => LitEnd::InputEnds,
            None => LitEnd::No,
        }
    }

    /// [`Matcher::run`], with the blanks and plain literal words `cont` begins with
    /// matched in a loop: the same steps and the same result, without a call, a memo
    /// key and a frame per piece. Most of a long message is such words (`CUDA out of
    /// memory. Tried to allocate ... GPU 0 has a total capacity of ...`), and the
    /// recursion's bookkeeping was a third of the time of near misses of one. A plain
    /// literal is one without a final `.` or `!`, which [`Matcher::step`] retries
    /// without its period where the rest fails; anything else is left to `run`.
    fn run_plain(&mut self, cont: &Cont<'h, '_>, mut pos: usize) -> Option<usize> {
        if self.piecewise {
            return self.run(cont, pos);
        }
        let mut seq = cont.seq;
        let mut added = 0;
        while let Some((piece, rest)) = seq.split_first() {
            let plain = match piece {
                Piece::Space => true,
                Piece::Lit(l) => !l.ends_with(['.', '!']),
                _ => false,
            };
            if !plain {
                break;
            }
            // What `run` does before its piece (a plain piece has no memo key)...
            self.steps += 1;
            if self.out_of_steps() {
                self.lit -= added;
                return None;
            }
            self.reached = self.reached.max(pos);
            // ... and what `step` does with it.
            if self.input_ends_at(pos) {
                return Some(pos);
            }
            match piece {
                Piece::Lit(l) => match self.literal_at(pos, l) {
                    LitEnd::At(end) => {
                        self.lit += l.len();
                        added += l.len();
                        pos = end;
                    }
                    LitEnd::InputEnds => return Some(self.hay.len()),
                    LitEnd::No => {
                        self.lit -= added;
                        return None;
                    }
                },
                _ => pos = self.after_blanks(pos),
            }
            seq = rest;
        }
        let r = self.run(&Cont { seq, next: cont.next }, pos);
        if r.is_none() {
            self.lit -= added;
        }
        r
    }

    fn run(&mut self, cont: &Cont<'h, '_>, pos: usize) -> Option<usize> {
        self.steps += 1;
        if self.out_of_steps() {
            return None;
        }
        self.reached = self.reached.max(pos);
        // The rest of the match from here depends only on the piece and the position
        // (a piece's continuation is fixed by where it sits in the template).
        // Only the pieces that branch are remembered: the rest fail in one step anyway.
        let key = cont
            .seq
            .first()
            .filter(|p| {
                matches!(p, Piece::Opt(_) | Piece::Alt(_) | Piece::Capture { kind: Kind::Text | Kind::Any, .. })
            })
            .map(|p| (p as *const Piece as usize, pos));
        if let Some(k) = key.filter(|_| !self.failed.is_empty()) {
            if self.failed.contains(&k) {
                return None;
            }
        }
        let r = self.step(cont, pos);
        if r.is_none() && self.steps > MEMO_AFTER {
            if let Some(k) = key {
                self.failed.insert(k);
            }
        }
        r
    }

    fn step(&mut self, cont: &Cont<'h, '_>, pos: usize) -> Option<usize> {
        let Some((piece, rest)) = cont.seq.split_first() else {
            return match cont.next {
                Some(n) => self.run(n, pos),
                None => Some(pos),
            };
        };
        if self.input_ends_at(pos) {
            return Some(pos);
        }
        let next = Cont { seq: rest, next: cont.next };
        match piece {
            Piece::Space => self.run_plain(&next, self.after_blanks(pos)),
            Piece::Lit(l) => {
                let first = pos == self.start;
                let end = match self.literal_at(pos, l) {
                    LitEnd::At(e) => Some(e),
                    LitEnd::InputEnds => return Some(self.hay.len()),
                    LitEnd::No => None,
                };
                if let Some(end) = end {
                    self.lit += l.len();
                    if let Some(r) = self.run_plain(&next, end) {
                        return Some(r);
                    }
                    self.lit -= l.len();
                }
                // A message retyped or cut without its final period (`... to be on the
                // same device` with nothing after).
                let bare = l.strip_suffix(['.', '!']).filter(|_| cont_optional(&next))?;
                let end = match_literal(self.hay, pos, bare, first)?;
                // Only where the message ends: nothing but whitespace to the line's end.
                let rest = &self.hay[end..];
                if !rest.trim_start_matches([' ', '\t', '\r']).is_empty()
                    && !rest.trim_start_matches([' ', '\t', '\r']).starts_with('\n')
                {
                    return None;
                }
                self.lit += bare.len();
                let r = self.run(&next, end);
                if r.is_none() {
                    self.lit -= bare.len();
                }
                r
            }
            Piece::Opt(seq) => {
                let (ncaps, nlit) = (self.caps.len(), self.lit);
                let with = Cont { seq, next: Some(&next) };
                if let Some(e) = self.run(&with, pos) {
                    return Some(e);
                }
                self.caps.truncate(ncaps);
                self.lit = nlit;
                self.run(&next, pos)
            }
            Piece::Alt(alts) => {
                for seq in alts {
                    let (ncaps, nlit) = (self.caps.len(), self.lit);
                    let c = Cont { seq, next: Some(&next) };
                    if let Some(e) = self.run(&c, pos) {
                        return Some(e);
                    }
                    self.caps.truncate(ncaps);
                    self.lit = nlit;
                }
                None
            }
            Piece::Capture { kind, name, list } => self.capture(*kind, name, *list, &next, pos),
            Piece::Fields(specs) => self.fields(specs, &next, pos),
        }
    }

    /// A `Key=value, Key=value` list on one line, up to an unbalanced closing bracket:
    /// known keys fill their captures, others are skipped; at least one item.
    fn fields(&mut self, specs: &'h [FieldSpec], next: &Cont<'h, '_>, pos: usize) -> Option<usize> {
        let s = &self.hay[pos..];
        let b = s.as_bytes();
        let reach = floor_boundary(s, s.len().min(MAX_TEXT));
        let line_end = s[..reach].find('\n').unwrap_or(reach);
        let ncaps = self.caps.len();
        let mut i = 0;
        let mut items = 0;
        loop {
            self.steps += 1;
            let key_start = i;
            while i < line_end && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'_' | b'(' | b')')) {
                i += 1;
            }
            if i == key_start || i >= line_end || b[i] != b'=' {
                i = key_start;
                break;
            }
            let key = &s[key_start..i];
            i += 1;
            let value_start = i;
            let mut depth = 0usize;
            while i < line_end {
                match b[i] {
                    b'(' | b'[' | b'{' => depth += 1,
                    b')' | b']' | b'}' if depth == 0 => break,
                    b')' | b']' | b'}' => depth -= 1,
                    b',' if depth == 0 => break,
                    _ => {}
                }
                i += 1;
            }
            let value = s[value_start..i].trim();
            items += 1;
            if let Some(f) = specs.iter().find(|f| f.key.eq_ignore_ascii_case(key)) {
                if let Some((rest, v, extra)) = parse_atom(f.kind, value) {
                    if rest.trim().is_empty() && self.record {
                        self.caps.push(Slot::Value { name: f.name.as_str().into(), list: f.list, value: v });
                        if let (Some(v), Some(&(k, list))) = (extra, f.kind.derived().first()) {
                            self.caps.push(Slot::Value { name: derived_key(k, &f.name).into(), list, value: v });
                        }
                    }
                }
            }
            if i < line_end && b[i] == b',' {
                i += 1;
                while i < line_end && b[i] == b' ' {
                    i += 1;
                }
                continue;
            }
            break;
        }
        if items == 0 {
            self.caps.truncate(ncaps);
            return None;
        }
        let r = self.run(next, pos + i);
        if r.is_none() {
            self.caps.truncate(ncaps);
        }
        r
    }

    fn capture(&mut self, kind: Kind, name: &'h str, list: bool, next: &Cont<'h, '_>, pos: usize) -> Option<usize> {
        if kind != Kind::Text && kind != Kind::Any {
            return self.atom(kind, name, list, next, pos);
        }
        let s = &self.hay[pos..];
        // Lazy: the shortest non-empty text after which the rest matches; `text` stays
        // on one line, `any` may cross line breaks.
        // Bounded searches only: per-attempt work must not grow with the line.
        let mut reach = floor_boundary(s, s.len().min(MAX_TEXT));
        if self.lead.0.is_some() {
            // An `any` capture stops only where the lead recurs on its first line (glued
            // reports, near misses along a line): on later lines it may be quoted (pip's
            // `× Getting requirements to build wheel did not run successfully` inside the
            // output after `Getting requirements to build wheel ... error`).
            let limit = match kind {
                Kind::Any => memchr::memchr(b'\n', &s.as_bytes()[..reach]).unwrap_or(reach),
                _ => reach,
            };
            if limit > 1 {
                if let Some(at) = self.lead_stop(pos + 1, pos + limit) {
                    reach = at - pos;
                }
            }
        }
        if kind == Kind::Text && !cont_exhausted(next) && !self.every_end {
            if let Some(f) = next_firsts(next).filter(|f| !self.partial || !self.ends_near(pos, reach, f.len)) {
                return self.text_before_literal(name, list, next, pos, reach, f);
            }
        }
        let line_end = if kind == Kind::Text {
            memchr::memchr(b'\n', &s.as_bytes()[..reach]).unwrap_or(reach)
        } else {
            // `any` crosses lines, but not into the next log record (a launcher's glog
            // line, a timestamped logger line, a new traceback): a message ending in
            // `{any}` must not swallow the summary printed after it.
            self.record_break(pos, pos + reach).map_or(reach, |p| p - pos)
        };
        let body = &s[..floor_boundary(s, line_end)];
        if cont_exhausted(next) {
            // Nothing follows: the longest text, its one end found without walking its
            // characters (`char_indices().last()` read all of them, up to MAX_TEXT, at
            // every try: a fifth of the time of near misses ending in a text capture).
            return match body.len() {
                0 => None,
                e => match self.text_end(kind, name, list, next, pos, e) {
                    End::Matched(r) => Some(r),
                    End::Next | End::Stop => None,
                },
            };
        }
        let ends = if self.every_end {
            body.char_indices().map(|(k, c)| k + c.len_utf8()).collect()
        } else {
            self.text_ends(body, pos, next)
        };
        for e in ends {
            match self.text_end(kind, name, list, next, pos, e) {
                End::Matched(r) => return Some(r),
                End::Next => {}
                End::Stop => return None,
            }
        }
        None
    }

    /// Whether, in a partial match, the input ends within `reach` of `pos`: then the
    /// text may stop inside the next literal, at ends [`Matcher::text_ends`] adds.
    fn ends_near(&self, pos: usize, reach: usize, len: usize) -> bool {
        let tail = self.hay.trim_end().len().saturating_sub(pos);
        tail.saturating_sub(len + 1).max(1) <= reach
    }

    /// Where [`Matcher::lead`] first begins in `hay[from..limit]` (wholly inside it),
    /// remembering what was read as [`Matcher::next_stop`] does.
    fn lead_stop(&mut self, from: usize, limit: usize) -> Option<usize> {
        let Some(finder) = &self.lead.0 else { return None };
        let b = self.hay.as_bytes();
        Seen::ask(&mut self.lead_seen, from, limit, finder.needle().len(), |at| {
            finder.find(&b[at..limit]).map(|k| at + k)
        })
    }

    /// The first terminal hard wrap (see [`wrap_resume`]) in `hay[from..limit]`,
    /// remembering what was read as [`Matcher::next_stop`] does.
    fn first_wrap(&mut self, from: usize, limit: usize) -> Option<usize> {
        let b = self.hay.as_bytes();
        Seen::ask(&mut self.wrap_seen, from, limit, 1, |at| {
            first_newline(b, at, limit, |nl| wrap_resume(b, nl).is_some())
        })
    }

    /// The first line break in `hay[from..limit]` after which a new log record starts
    /// (where an `any` capture stops), remembering what was read. A line that begins
    /// with the message's own lead is a record too: the same message again, one a line
    /// (every rank's report, or near misses built to cost time), where each try would
    /// otherwise read on through the next 2,048 bytes of its repeats.
    fn record_break(&mut self, from: usize, limit: usize) -> Option<usize> {
        let b = self.hay.as_bytes();
        let lead = self.lead.text();
        Seen::ask(&mut self.record_seen, from, limit, 1, |at| {
            first_newline(b, at, limit, |nl| {
                let next = &b[nl + 1..];
                crate::ingest::wrap::starts_record(next) || (!lead.is_empty() && next.starts_with(lead))
            })
        })
    }

    /// The first of the `key` bytes or a line break in `hay[from..limit]`, remembering
    /// what was read:
    /// a text capture tried at each of many starts on one line (every end of the
    /// capture before it) asks again from a little further on, and is answered from
    /// what the last search saw instead of reading up to [`MAX_TEXT`] bytes again.
    fn next_stop(&mut self, key: [u8; 2], from: usize, limit: usize) -> Option<usize> {
        let slot = self.stops.iter().position(|(k, _)| *k == key);
        let mut seen = slot.map(|i| self.stops[i].1);
        let b = self.hay.as_bytes();
        let found = Seen::ask(&mut seen, from, limit, 1, |at| {
            memchr::memchr3(key[0], key[1], b'\n', &b[at..limit]).map(|k| at + k)
        });
        if let Some(seen) = seen {
            match slot {
                Some(i) => self.stops[i] = (key, seen),
                None if self.stops.len() < 4 => self.stops.push((key, seen)),
                None => self.stops[0] = (key, seen),
            }
        }
        found
    }

    /// A `text` capture followed by a literal (or an optional literal, then one), its
    /// ends found as they are tried: each place a first byte of what follows occurs
    /// (the first of a whitespace run when a space comes before it), then the line's
    /// end. A failing attempt on a long line reads only as far as its ends, each of
    /// which costs a step: no scan of the text's whole reach up front (that was a third
    /// of the time on near misses), and no attempt at every character when an optional
    /// quote comes next (`named {?"}{text:param}{?"}, whose`).
    fn text_before_literal(
        &mut self,
        name: &'h str,
        list: bool,
        next: &Cont<'h, '_>,
        pos: usize,
        reach: usize,
        f: Firsts,
    ) -> Option<usize> {
        let h = &self.hay.as_bytes()[pos..pos + reach];
        let mut body_len = reach;
        let mut last = None;
        let mut from = pos;
        while let Some(at) = self.next_stop(f.key(), from, pos + reach) {
            let q = at - pos;
            if h[q] == b'\n' {
                body_len = q;
                break;
            }
            from = at + 1;
            if q == 0 {
                continue;
            }
            // Where the text may end for each way this byte begins what follows,
            // shortest first: before the whitespace run, or right at the byte.
            let back = || {
                let mut e = q;
                while e > 1 && h[e - 1].is_ascii_whitespace() {
                    e -= 1;
                }
                e
            };
            let mut ends = [None, None];
            for (i, &(b, skip_ws)) in f.bytes[..f.n].iter().enumerate() {
                if b == h[q] {
                    ends[i] = Some(if skip_ws { back() } else { q });
                }
            }
            if ends[0] > ends[1] {
                ends.swap(0, 1);
            }
            for e in ends.into_iter().flatten() {
                if last == Some(e) {
                    continue;
                }
                last = Some(e);
                match self.text_end(Kind::Text, name, list, next, pos, e) {
                    End::Matched(r) => return Some(r),
                    End::Next => {}
                    End::Stop => return None,
                }
            }
        }
        // The body's end (the literal may follow after a line break or the text cut).
        let body_len = floor_boundary(&self.hay[pos..], body_len);
        if body_len == 0 || last == Some(body_len) {
            return None;
        }
        match self.text_end(Kind::Text, name, list, next, pos, body_len) {
            End::Matched(r) => Some(r),
            End::Next | End::Stop => None,
        }
    }

    /// One end tried for a text capture at `pos`: the text `hay[pos..pos + e]`, then
    /// the rest of the template.
    fn text_end(&mut self, kind: Kind, name: &'h str, list: bool, next: &Cont<'h, '_>, pos: usize, e: usize) -> End {
        self.steps += 1;
        if self.out_of_steps() {
            return End::Stop;
        }
        let ncaps = self.caps.len();
        let s = &self.hay[pos..pos + e];
        if is_blank(s) {
            return End::Next;
        }
        if let Some(r) = self.run(next, pos + e) {
            if !self.record {
                return End::Matched(r);
            }
            let slot = Slot::Text { name, list, from: pos, to: pos + e, any: kind == Kind::Any };
            self.caps.insert(ncaps, slot);
            return End::Matched(r);
        }
        self.caps.truncate(ncaps);
        End::Next
    }

    /// The ends worth trying for a text capture over `body` (at `pos`), shortest first.
    /// When a literal comes next, only ends where it can begin: its first byte there
    /// (`match_literal` matches that byte exactly), found with memchr, and for a space
    /// before it only the first end of each whitespace run (the others give the same
    /// value and the same position after the space); on a single line also the ends
    /// where the text may stop inside the literal. Otherwise every character end.
    fn text_ends(&self, body: &str, pos: usize, next: &Cont<'h, '_>) -> Vec<usize> {
        let Some((first, skip_ws, len)) = next_literal(next) else {
            return body.char_indices().map(|(k, c)| k + c.len_utf8()).collect();
        };
        let h = &self.hay.as_bytes()[pos..pos + body.len()];
        let mut v: Vec<usize> = Vec::new();
        for q in memchr::memchr_iter(first, h).filter(|&q| q > 0) {
            let mut e = q;
            if skip_ws {
                while e > 1 && h[e - 1].is_ascii_whitespace() {
                    e -= 1;
                }
            }
            if v.last() != Some(&e) {
                v.push(e);
            }
        }
        // The body's end (the literal may follow after a line break or the text cut).
        if !body.is_empty() && v.last() != Some(&body.len()) {
            v.push(body.len());
        }
        if self.partial {
            let tail = self.hay.trim_end().len().saturating_sub(pos);
            let from = tail.saturating_sub(len + 1).max(1);
            v.extend((from..=body.len().min(tail + 1)).filter(|&e| body.is_char_boundary(e)));
            v.sort_unstable();
            v.dedup();
        }
        v
    }

    /// A typed atom, read through terminal hard wraps (`8x51` / `2` is `8x512`).
    fn atom(&mut self, kind: Kind, name: &'h str, list: bool, next: &Cont<'h, '_>, pos: usize) -> Option<usize> {
        // Only numbers and devices are read through wraps: a word or path at a line's
        // end is far more often followed by a real next line than by its own tail.
        let numeric = matches!(kind, Kind::Int | Kind::Dim | Kind::Num | Kind::Shape | Kind::Size | Kind::Device);
        let owned;
        let (s, orig): (&str, Option<&[usize]>) = if numeric {
            let end = floor_boundary(self.hay, (pos + DEWRAP_MAX).min(self.hay.len()));
            if self.first_wrap(pos, end).is_none() {
                // No wrap in reach: dewrapping would copy the text unchanged.
                (&self.hay[pos..end], None)
            } else {
                owned = dewrap(self.hay, pos, DEWRAP_MAX);
                (owned.0.as_str(), Some(owned.1.as_slice()))
            }
        } else {
            (&self.hay[pos..], None)
        };
        let ncaps = self.caps.len();
        // On a single line (the scan's raw check) the atom may run into the line's end: a
        // number or shape a terminal wrapped (`[1, 1, 224,` / `224]`). What is left could
        // be its head, so the line could still match.
        let cut_short = |s: &str| {
            numeric && !s.trim().is_empty() && s.chars().all(|c| c.is_ascii_digit() || " ,[]()x.-:".contains(c))
        };
        if self.partial && cut_short(&self.hay[pos..]) && memchr::memchr(b'\n', &self.hay.as_bytes()[pos..]).is_none() {
            let parsed = match kind {
                Kind::Shape => atoms::shape(s).is_ok(),
                Kind::Int => atoms::int(s).is_ok(),
                Kind::Dim => atoms::dim(s).is_ok(),
                Kind::Num => atoms::num(s).is_ok(),
                Kind::Size => atoms::size(s).is_ok(),
                _ => true,
            };
            if !parsed {
                return Some(self.hay.len());
            }
        }
        let (rest, value, extra) = parse_atom(kind, s)?;
        if self.record {
            self.caps.push(Slot::Value { name: name.into(), list, value });
            if let (Some(v), Some(&(key, list))) = (extra, kind.derived().first()) {
                self.caps.push(Slot::Value { name: derived_key(key, name).into(), list, value: v });
            }
        }
        let consumed = s.len() - rest.len();
        let end = orig.map_or(pos + consumed, |o| o[consumed]);
        let r = self.run(next, end);
        if r.is_none() {
            self.caps.truncate(ncaps);
        }
        r
    }
}

/// A typed atom at the start of `s`: the rest, its value, and the value of the
/// evidence it derives (a size's bytes, a tensor type's dtype).
fn parse_atom(kind: Kind, s: &str) -> Option<(&str, Value, Option<Value>)> {
    fn text<'a>((r, v): (&'a str, &str)) -> (&'a str, Value, Option<Value>) {
        (r, Value::String(v.to_string()), None)
    }
    Some(match kind {
        Kind::Device => {
            let (r, d) = atoms::device(s).ok()?;
            (r, Value::String(d), None)
        }
        Kind::TensorType => {
            let (r, (d, t)) = atoms::tensortype(s).ok()?;
            (r, Value::String(d), Some(Value::String(t)))
        }
        Kind::Dtype => {
            let (r, d) = atoms::dtype(s).ok()?;
            (r, Value::String(d), None)
        }
        Kind::Shape => {
            let (r, d) = atoms::shape(s).ok()?;
            (r, atoms::dims_value(&d), None)
        }
        Kind::Size => {
            let (r, (txt, bytes)) = atoms::size(s).ok()?;
            (r, Value::String(txt), Some(Value::from(bytes)))
        }
        Kind::Int => {
            let (r, v) = atoms::int(s).ok()?;
            (r, Value::from(v), None)
        }
        Kind::Dim => {
            let (r, d) = atoms::dim(s).ok()?;
            (r, atoms::dims_value(&[d]).as_array().and_then(|a| a.first().cloned()).unwrap_or(Value::Null), None)
        }
        Kind::Num => text(atoms::num(s).ok()?),
        Kind::Ident => text(atoms::ident(s).ok()?),
        Kind::Qualname => text(atoms::qualname(s).ok()?),
        Kind::Path => text(atoms::path(s).ok()?),
        Kind::Word => text(atoms::word(s).ok()?),
        Kind::Text | Kind::Any => {
            let t = s.trim();
            if t.is_empty() {
                return None;
            }
            ("", Value::String(t.to_string()), None)
        }
    })
}

/// The literal that must come next (after optional whitespace): its first byte,
/// whether whitespace is skipped first, and its length. `None` when something else comes
/// next, or a literal that a message's end may drop entirely (`.`).
fn next_literal(c: &Cont<'_, '_>) -> Option<(u8, bool, usize)> {
    let (skip_ws, piece) = match c.seq {
        [Piece::Space, p, ..] => (true, p),
        // The end of a group: what follows it (`{?... {any:types}})` ends where `)`
        // can begin, not at every character up to MAX_TEXT).
        [Piece::Space] => return next_literal(c.next?).map(|(b, _, len)| (b, true, len)),
        [] => return next_literal(c.next?),
        [p, ..] => (false, p),
    };
    match piece {
        Piece::Lit(l) if !l.trim_end_matches(['.', '!']).is_empty() => Some((l.as_bytes()[0], skip_ws, l.len())),
        _ => None,
    }
}

/// The bytes what follows a text capture can begin with: a literal's first byte, or an
/// optional literal's and then the literal after it (at most two), each with whether
/// whitespace may come before it. `None` when something else comes first.
fn next_firsts(c: &Cont<'_, '_>) -> Option<Firsts> {
    let lit = |p: &Piece| match p {
        Piece::Lit(l) if !l.trim_end_matches(['.', '!']).is_empty() => Some(l.as_bytes()[0]).zip(Some(l.len())),
        _ => None,
    };
    let mut f = Firsts { bytes: [(0, false); 2], n: 0, len: 0 };
    let mut skip_ws = false;
    for p in c.seq {
        let (byte, skip, len, done) = match p {
            Piece::Space => {
                skip_ws = true;
                continue;
            }
            Piece::Lit(_) => {
                let (b, len) = lit(p)?;
                (b, skip_ws, len, true)
            }
            Piece::Opt(seq) => {
                let (space, first) = match seq.as_slice() {
                    [Piece::Space, q, ..] => (true, q),
                    [q, ..] => (false, q),
                    [] => return None,
                };
                let (b, len) = lit(first)?;
                (b, skip_ws || space, len, false)
            }
            _ => return None,
        };
        if f.n == f.bytes.len() {
            return None;
        }
        f.bytes[f.n] = (byte, skip);
        f.n += 1;
        f.len += len;
        if done {
            return Some(f);
        }
    }
    None
}

/// See [`next_firsts`].
#[derive(Clone, Copy)]
struct Firsts {
    bytes: [(u8, bool); 2],
    n: usize,
    /// The literals' lengths, summed: how near the input's end a partial match may stop
    /// inside them.
    len: usize,
}

impl Firsts {
    /// The bytes to search for (the first twice when there is one).
    fn key(&self) -> [u8; 2] {
        [self.bytes[0].0, self.bytes[self.n - 1].0]
    }
}

/// Whether nothing remains to match after this point of the template.
fn cont_exhausted(c: &Cont<'_, '_>) -> bool {
    c.seq.is_empty() && c.next.is_none_or(cont_exhausted)
}

/// Whether what remains can match nothing at all (only whitespace and optional
/// groups): a literal before it ends the message.
fn cont_optional(c: &Cont<'_, '_>) -> bool {
    c.seq.iter().all(|p| matches!(p, Piece::Space | Piece::Opt(_))) && c.next.is_none_or(cont_optional)
}

/// Shortest line a terminal wraps: a break in a shorter line is a real line end.
const MIN_WRAP_WIDTH: usize = 60;

/// The longest of `words` (the first of equals), with its index.
fn longest_word<'a>(words: &[&'a str]) -> Option<(usize, &'a str)> {
    words.iter().enumerate().max_by_key(|(i, w)| (w.len(), std::cmp::Reverse(*i))).map(|(i, w)| (i, *w))
}

/// Shortest second anchor (see [`Template::anchors`]): shorter words are too common to
/// be worth a prefilter hit.
pub const MIN_SECOND_ANCHOR: usize = 4;

/// Bytes a numeric capture reads through wraps.
const DEWRAP_MAX: usize = 256;

/// The first line break in `b[from..limit]` that `keep` accepts (`keep` depends on the
/// break alone, so [`Seen`] may answer a later search from this one).
fn first_newline(b: &[u8], from: usize, limit: usize, keep: impl Fn(usize) -> bool) -> Option<usize> {
    memchr::memchr_iter(b'\n', &b[from..limit]).map(|k| from + k).find(|&nl| keep(nl))
}

/// Where the text goes on when the line break at `nl` is a terminal hard wrap, which
/// [`dewrap`] removes with the indentation after it: the break ends a line at least
/// [`MIN_WRAP_WIDTH`] long, after a non-space character, and the next line goes on,
/// after indentation, with what continues a number or a device. `None`: not a wrap.
/// Decided by the break alone, whatever position a capture reads it from.
fn wrap_resume(b: &[u8], nl: usize) -> Option<usize> {
    let back = nl.saturating_sub(MIN_WRAP_WIDTH);
    let long = match memchr::memrchr(b'\n', &b[back..nl]) {
        Some(p) => nl - (back + p + 1) >= MIN_WRAP_WIDTH,
        None => nl >= MIN_WRAP_WIDTH,
    };
    let mut j = nl + 1;
    while j < b.len() && (b[j] == b' ' || b[j] == b'\t') {
        j += 1;
    }
    let wrap = nl > 0
        && !b[nl - 1].is_ascii_whitespace()
        && long
        && j < b.len()
        && (b[j].is_ascii_digit() || matches!(b[j], b':' | b'x' | b'.' | b','));
    wrap.then_some(j)
}

/// Up to `max` bytes of `hay` from `pos` with terminal hard wraps (a line break plus
/// indentation between two non-space characters, in a line at least
/// [`MIN_WRAP_WIDTH`] long) removed, and for each output byte its input offset.
fn dewrap(hay: &str, pos: usize, max: usize) -> (String, Vec<usize>) {
    let b = hay.as_bytes();
    let end = floor_boundary(hay, (pos + max).min(hay.len()));
    let mut out = String::with_capacity(end - pos);
    let mut orig = Vec::with_capacity(end - pos + 1);
    let mut i = pos;
    while i < end {
        // Copy up to the next line break in one go; only breaks need a decision.
        let nl = memchr::memchr(b'\n', &b[i..end]).map_or(end, |p| i + p);
        out.push_str(&hay[i..nl]);
        orig.extend(i..nl);
        if nl == end {
            i = end;
            break;
        }
        match wrap_resume(b, nl) {
            Some(j) => i = j,
            None => {
                out.push('\n');
                orig.push(nl);
                i = nl + 1;
            }
        }
    }
    orig.push(i);
    (out, orig)
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Where the walk back from an anchor to its template's start ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WalkBack {
    /// The template would start here.
    Start(usize),
    /// The text began before the leading words were all found; all of it matched.
    RanOut,
    /// The text before the anchor is not the template's leading words.
    Mismatch,
}

/// Matches literal `lit` at `pos`, skipping a line break plus indentation inside the
/// input (a terminal hard wrap) and a stray space before `:` or `,` (a retyped
/// message). With `first`, the literal's first letter matches in either case (a
/// message quoted mid-sentence or retyped). Returns the end offset.
fn match_literal(hay: &str, pos: usize, lit: &str, first: bool) -> Option<usize> {
    let h = hay.as_bytes();
    let l = lit.as_bytes();
    let mut i = pos;
    let mut j = 0;
    while j < l.len() {
        if i >= h.len() {
            return None;
        }
        if h[i] == l[j] || (first && j == 0 && h[i].eq_ignore_ascii_case(&l[0])) {
            i += 1;
            j += 1;
        } else if h[i] == b'\n' && j > 0 {
            i += 1;
            while i < h.len() && (h[i] == b' ' || h[i] == b'\t') {
                i += 1;
            }
        } else if h[i] == b' ' && j > 0 && matches!(l[j], b':' | b',') && h.get(i + 1) == Some(&l[j]) {
            i += 1;
        } else {
            return None;
        }
    }
    Some(i)
}

#[cfg(test)]
mod tests {
    /// The first, character-at-a-time `dewrap`: the oracle for the run-copying one.
    fn dewrap_by_char(hay: &str, pos: usize, max: usize) -> (String, Vec<usize>) {
        let b = hay.as_bytes();
        let end = floor_boundary(hay, (pos + max).min(hay.len()));
        let mut out = String::new();
        let mut orig = Vec::new();
        let mut i = pos;
        while i < end {
            if b[i] == b'\n' && i > 0 && !b[i - 1].is_ascii_whitespace() {
                let line_start = hay[..i].rfind('\n').map(|p| p + 1).unwrap_or(0);
                let mut j = i + 1;
                while j < b.len() && (b[j] == b' ' || b[j] == b'\t') {
                    j += 1;
                }
                if i - line_start >= MIN_WRAP_WIDTH
                    && j < b.len()
                    && (b[j].is_ascii_digit() || matches!(b[j], b':' | b'x' | b'.' | b','))
                {
                    i = j;
                    continue;
                }
            }
            let c = hay[i..].chars().next().unwrap_or(' ');
            for k in 0..c.len_utf8() {
                orig.push(i + k);
            }
            out.push(c);
            i += c.len_utf8();
        }
        orig.push(i);
        (out, orig)
    }

    fn hay_wrapped() -> &'static str {
        "RuntimeError: a leaf Variable that requires grad is being used in an in-place op\neration.\n"
    }

    #[test]
    fn a_wrap_inside_the_anchor_word_is_found_through_the_second_anchor() {
        let t = Template::parse("leaf Variable that requires grad is being used in an in-place operation.").unwrap();
        assert_eq!(t.anchors().iter().map(|a| a.text).collect::<Vec<_>>(), ["operation.", "Variable"]);
        let at = hay_wrapped().find("Variable").unwrap();
        assert!(t.wrap_in_lead(hay_wrapped(), at, 0, 1));
        let flat = "a leaf Variable that requires grad is being used in an in-place operation.";
        assert!(!t.wrap_in_lead(flat, flat.find("Variable").unwrap(), 0, 1), "intact: the first anchor finds it");
        let other = "a leaf Variable that requires\nsomething else";
        assert!(
            t.wrap_in_lead(other, other.find("Variable").unwrap(), 0, 1),
            "a break before a mismatch may be a wrap"
        );
        let differs = "a leaf Variable that needs grad\n";
        assert!(!t.wrap_in_lead(differs, differs.find("Variable").unwrap(), 0, 1));
        // Only a word before the first anchor can be the second.
        let late = Template::parse("launching kernel failed again").unwrap();
        assert_eq!(late.anchors().iter().map(|a| a.text).collect::<Vec<_>>(), ["launching"]);
        let hay = "RuntimeError: a leaf Variable that requires grad is being used in an in-place op\neration.\n";
        assert_eq!(t.find(hay, 0).map(|m| (m.start, m.end)), Some((16, 89)));
        // One-word leading literals and short other words have no second anchor.
        assert_eq!(Template::parse("Killed {text:rest}").unwrap().anchors().len(), 1);
        assert_eq!(Template::parse("the overflow ran out").unwrap().anchors().len(), 1);
    }

    #[test]
    fn the_walk_back_from_the_anchor_crosses_a_wrap_inside_a_leading_word() {
        let t =
            Template::parse("The server socket has failed to listen on any local network address. port: {int:port}")
                .unwrap();
        assert_eq!(t.anchors()[0].text, "address.");
        for hay in [
            "E: The server socket has failed to lis\nten on any local network address. port: 1",
            "E: The server socket has failed to lis\n   ten on any local network address. port: 1",
            "E: The server socket has fai\nled to listen on any lo\ncal network address. port: 1",
        ] {
            assert_eq!(t.find(hay, 0).map(|m| m.start), Some(3), "{hay:?}");
        }
        // On one line: a line that begins inside the leading words may continue the
        // line before; one that begins with other text may not.
        let line = "ten on any local network address. port: 1";
        let at = line.find("address.").unwrap();
        assert_eq!(t.walk_back(line, at, 0, 11), WalkBack::RanOut);
        let line = "written on any local network address. port: 1";
        assert_eq!(t.walk_back(line, line.find("address.").unwrap(), 0, 11), WalkBack::Mismatch);
        // A break is only skipped inside a word, never in place of one.
        let hay = "The server socket has failed to\nlisten on any local network address.";
        assert_eq!(t.walk_back(hay, hay.find("address.").unwrap(), 0, 11), WalkBack::Start(0));
        let hay = "The server socket has failed to listen\nxon any local network address.";
        assert_eq!(t.walk_back(hay, hay.find("address.").unwrap(), 0, 11), WalkBack::Mismatch);
    }

    #[test]
    fn dewrap_equals_the_char_at_a_time_version() {
        let long = "x".repeat(70);
        let hays = [
            format!("{long}\n    123456\nnext"),
            format!("{long}1\n  .5e3 and\n\n{long}\n:x"),
            format!("short\n 12\n{long}\n\t9, é {long}é\n 7"),
            "\n\n1\n".to_string(),
            format!("{long} \n 1"),
        ];
        for hay in &hays {
            for pos in (0..hay.len()).filter(|&p| hay.is_char_boundary(p)) {
                for max in [0, 1, 5, 80, 256] {
                    let d = dewrap(hay, pos, max);
                    assert_eq!(d, dewrap_by_char(hay, pos, max), "{hay:?} {pos} {max}");
                    // No wrap in reach (what the matcher asks before dewrapping): the
                    // text is copied unchanged, each byte from its own offset.
                    let end = floor_boundary(hay, (pos + max).min(hay.len()));
                    let wrapped =
                        (pos..end).any(|nl| hay.as_bytes()[nl] == b'\n' && wrap_resume(hay.as_bytes(), nl).is_some());
                    let copied = (hay[pos..end].to_string(), (pos..=end).collect::<Vec<_>>());
                    assert_eq!(d == copied, !wrapped, "{hay:?} {pos} {max}");
                }
            }
        }
    }

    use super::*;

    /// A text capture ends before its message's leading words recur: glued reports
    /// are two matches, not one whose capture swallowed the second message.
    #[test]
    fn a_text_capture_does_not_run_into_its_own_message_again() {
        let t = Template::parse("size mismatch for {text:param}: copying a param with shape {shape:a}").unwrap();
        let text = |hay: &str| {
            t.match_at(hay, 0).map(|m| match &m.captures[0].value {
                Value::String(s) => s.clone(),
                v => v.to_string(),
            })
        };
        // (text, the param captured)
        let table: &[(&str, Option<&str>)] = &[
            ("size mismatch for fc.weight: copying a param with shape [2, 3]", Some("fc.weight")),
            // Glued: the first report is cut before its shape; the second is whole.
            (
                "size mismatch for fc.weight: copying a param with size mismatch for fc.bias: copying a param with shape [3]",
                Some("fc.bias"),
            ),
            // The message's words at the capture's very start are its text.
            ("size mismatch for size mismatch for x: copying a param with shape [3]", Some("size mismatch for x")),
        ];
        for (hay, want) in table {
            let got = match text(hay) {
                Some(v) => Some(v),
                // The first report fails; the glued second one matches where it begins.
                None => hay.rfind("size mismatch for").and_then(|at| text(&hay[at..])),
            };
            assert_eq!(got.as_deref(), *want, "{hay}");
        }
        // Without the stop, the first attempt above would have captured across both.
        let glued = "size mismatch for fc.weight: copying a param with size mismatch for fc.bias: copying a param with shape [3]";
        assert_eq!(text(glued), None);
    }

    /// An `any` capture stops there too, though it crosses lines: two collective
    /// mismatches glued on one line are two reports, and the first one's types never
    /// hold the second message.
    #[test]
    fn an_any_capture_does_not_run_into_its_own_message_again() {
        let t = Template::parse("Detected mismatch between collectives on ranks. Rank {int:rank} types={any:types}).")
            .unwrap();
        let types = |hay: &str| {
            t.match_at(hay, 0).and_then(|m| m.captures.into_iter().find(|c| c.name == "types")).map(|c| c.value)
        };
        let one =
            "Detected mismatch between collectives on ranks. Rank 1 types=TensorOptions(dtype=float\n  device=cuda)).";
        assert_eq!(types(one), Some(Value::String("TensorOptions(dtype=float device=cuda)".into())));
        // The first report lost its final `).`: it fails rather than reading on into the
        // second, which matches where it begins.
        let glued = "Detected mismatch between collectives on ranks. Rank 1 types=float) Detected mismatch between collectives on ranks. Rank 2 types=half).";
        assert_eq!(types(glued), None);
        let second = glued.rfind("Detected").unwrap();
        assert_eq!(types(&glued[second..]), Some(Value::String("half".into())));
        // On a later line the message's words may be quoted: the capture holds them.
        let quoted = "Detected mismatch between collectives on ranks. Rank 1 types=float\n  (Detected mismatch between collectives on ranks before)).";
        assert_eq!(
            types(quoted),
            Some(Value::String("float (Detected mismatch between collectives on ranks before)".into()))
        );
        // A later line that begins with the message is the next report (every rank's,
        // one a line): a cut report does not read on into it.
        let stacked = "Detected mismatch between collectives on ranks. Rank 1 types=float\nDetected mismatch between collectives on ranks. Rank 2 types=half).";
        assert_eq!(types(stacked), None);
        let second = stacked.rfind("Detected").unwrap();
        assert_eq!(types(&stacked[second..]), Some(Value::String("half".into())));
    }

    /// What one search read answers the next from further on: a stop already seen, or
    /// a stretch known to hold none, read again only past its end.
    #[test]
    fn searches_for_a_texts_end_reuse_what_they_read() {
        let mut hay = "y".repeat(3000);
        hay.replace_range(2050..2051, ":");
        hay.replace_range(2500..2501, "\n");
        let mut m = Matcher::new(&hay, 0, false);
        let key = [b':', b':'];
        // (from, limit, first stop): in the order a text capture's tries ask.
        let table = [
            (0, 2048, None),
            (10, 2058, Some(2050)),
            (20, 2068, Some(2050)),
            (2051, 4000.min(hay.len()), Some(2500)),
            (2049, 2050, None),
            (2049, 2051, Some(2050)),
        ];
        for (from, limit, want) in table {
            assert_eq!(m.next_stop(key, from, limit), want, "from {from} to {limit}");
            let fresh = memchr::memchr3(b':', b':', b'\n', &hay.as_bytes()[from..limit]).map(|k| from + k);
            assert_eq!(want, fresh, "the table itself, from {from}");
        }
    }

    /// The ends a text capture tries (where what follows can begin, found lazily and
    /// remembered across tries) give the match trying every end would, with the same
    /// captures, over texts built to hold many near places.
    #[test]
    fn text_ends_found_lazily_agree_with_trying_every_end() {
        let templates = [
            "Trying to create tensor with negative dimension {text:d}: [{text:shape}]",
            "While copying the parameter named {?\"}{text:param}{?\"}, whose dimensions are {shape:s}",
            "size mismatch for {text:param}: copying a param with shape {shape:a} from checkpoint",
            "Missing key(s) in state_dict: {text:missing} Unexpected key(s) in state_dict: {text:unexpected}",
            "failed at {text:where} ({?op }{ident:op}){?.}",
            "match a {text:x}{? b} c",
        ];
        let bits = [
            "Trying to create tensor with negative dimension ",
            "-3",
            ": [",
            "]",
            ", ",
            "\"",
            "x",
            " ",
            "  ",
            "\n",
            "\n  ",
            "named ",
            "While copying the parameter named ",
            ", whose dimensions are ",
            "[2, 3]",
            "size mismatch for ",
            ": copying a param with shape ",
            " from checkpoint",
            "Missing key(s) in state_dict: ",
            " Unexpected key(s) in state_dict: ",
            "a.b",
            "failed at ",
            "(",
            ")",
            "op ",
            "conv",
            ".",
            "a ",
            " b",
            " c",
            "match a ",
            "é",
        ];
        // Texts longer than a capture's reach too, so that what one search read is
        // asked about again from further on with a further limit.
        let filler = "y".repeat(MAX_TEXT / 3);
        let mut seed: u64 = 7;
        let mut next = |n: usize| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        let mut compared = 0;
        for src in templates {
            let t = Template::parse(src).unwrap();
            let lead = t.lead_text();
            for _ in 0..3000 {
                let mut hay = lead.clone();
                for _ in 0..next(24) {
                    match next(40) {
                        0 => hay.push_str(&filler),
                        _ => hay.push_str(bits[next(bits.len())]),
                    }
                }
                for partial in [false, true] {
                    let run = |every_end: bool, piecewise: bool| {
                        let mut m = Matcher::new(&hay, 0, partial);
                        m.every_end = every_end;
                        m.piecewise = piecewise;
                        m.lead = &t.entries[0].lead_text;
                        let cont = Cont { seq: &t.pieces, next: None };
                        let end = m.run(&cont, 0);
                        let caps: Vec<(String, Value)> = m.captures().into_iter().map(|c| (c.name, c.value)).collect();
                        ((end, caps), (m.steps, m.lit, m.reached, m.folded))
                    };
                    let (lazy, spent) = run(false, false);
                    assert_eq!(lazy, run(true, false).0, "{src:?} partial={partial} over {hay:?}");
                    // The loop over plain pieces takes the steps piece by piece would.
                    assert_eq!((lazy.clone(), spent), run(false, true), "{src:?} partial={partial} over {hay:?}");
                    compared += usize::from(lazy.0.is_some());
                }
            }
        }
        // The texts are near enough to match often, both ways.
        assert!(compared > 2000, "only {compared} matches compared");
    }

    /// Captures as `(name, value)`, a list capture's name written `name[]`.
    fn caps(t: &str, hay: &str) -> Vec<(String, Value)> {
        let m = Template::parse(t).unwrap().find(hay, 0).expect("match");
        m.captures.into_iter().map(|c| (if c.list { format!("{}[]", c.name) } else { c.name }, c.value)).collect()
    }

    #[test]
    fn device_message_variants() {
        let t = "Expected all tensors to be on the same device, but found at least two devices, {device:devices[]} and {device:devices[]}!{? (when checking {argument|arugment} for argument {ident:argument} in method {ident:kernel})}";
        let c = caps(t, "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cpu and cuda:0! (when checking argument for argument target in method wrapper_CUDA_nll_loss_forward)");
        assert_eq!(
            c,
            vec![
                ("devices[]".into(), Value::from("cpu")),
                ("devices[]".into(), Value::from("cuda:0")),
                ("argument".into(), Value::from("target")),
                ("kernel".into(), Value::from("wrapper_CUDA_nll_loss_forward")),
            ]
        );
        // 1.9 typo, and the message wrapped by a terminal with indentation.
        let c = caps(t, "found at least two devices, cuda:0 and cpu!\n  (when checking arugment for argument mat1 in method wrapper_addmm)".replace("found", "Expected all tensors to be on the same device, but found").as_str());
        assert_eq!(c[2], ("argument".into(), Value::from("mat1")));
        // No parenthetical at all.
        let c =
            caps(t, "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!");
        assert_eq!(c.len(), 2);
        let c =
            caps("marked at index {int:i}{? with name {word:n}} twice", "marked at index 3 with name fc.weight twice");
        assert_eq!(c[1], ("n".into(), Value::from("fc.weight")));
    }

    #[test]
    fn hard_wrap_inside_a_word() {
        let c = caps(
            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum={int:seq}, OpType={ident:op},",
            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpTy\npe=BROADCAST,",
        );
        assert_eq!(c[1], ("op".into(), Value::from("BROADCAST")));
    }

    #[test]
    fn typed_captures() {
        let c = caps("Tried to allocate {size:tried}. GPU {int:gpu}", "Tried to allocate 20.00 MiB. GPU 0 has");
        assert_eq!(c[0], ("tried".into(), Value::from("20.00 MiB")));
        assert_eq!(c[1], ("tried_bytes".into(), Value::from(20u64 * 1024 * 1024)));
        let c = caps(
            "Input type ({tensortype:devices[]}) and weight type ({tensortype:devices[]}) should be the same",
            "Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same",
        );
        assert_eq!(c[0].1, Value::from("cpu"));
        assert_eq!(c[2].1, Value::from("cuda"));
        let c = caps(
            "shapes cannot be multiplied ({shape:mat1} and {shape:mat2})",
            "shapes cannot be multiplied (16x31 and 32x64)",
        );
        assert_eq!(c[0].1, serde_json::json!([16, 31]));
        let c = caps(
            "Caught {ident:inner} in DataLoader worker process {int:worker}.",
            "Caught KeyError in DataLoader worker process 0.",
        );
        assert_eq!(c[1].1, Value::from(0));
        let c = caps("got error: {text:what}", "got error: Socket Timeout");
        assert_eq!(c[0].1, Value::from("Socket Timeout"));
        let c = caps("size mismatch for {text:key}: copying", "size mismatch for fc.weight: copying");
        assert_eq!(c[0].1, Value::from("fc.weight"));
        let c = caps("got error{?: {text:what}}", "got error: Socket Timeout\nnext");
        assert_eq!(c[0].1, Value::from("Socket Timeout"));
    }

    #[test]
    fn wrapped_numbers() {
        let pad = "x".repeat(70);
        let hay = format!("{pad} shapes cannot be multiplied (8x51\n2 and 768x10)");
        let c = caps("shapes cannot be multiplied ({shape:a} and {shape:b})", &hay);
        assert_eq!(c[0].1, serde_json::json!([8, 512]));
        // A short line's break is a real line end, not a wrap.
        let t = Template::parse("rank {int:r} done").unwrap();
        assert!(t.find("rank 1\n2 done", 0).is_none());
    }

    #[test]
    fn anchors_are_the_longest_leading_word() {
        let t =
            Template::parse("one of the variables needed for gradient computation has been modified by an {text:x}")
                .unwrap();
        assert_eq!(t.anchor(), "computation");
        let hay = "RuntimeError: one of the variables  needed for gradient\ncomputation has been modified by an inplace operation";
        let at = hay.find("computation").unwrap();
        assert_eq!(t.start_for(hay, at), Some(14));
        assert_eq!(t.find(hay, 0).unwrap().start, 14);
        assert_eq!(t.start_for("two of the variables needed for gradient computation", 41), None);
    }

    #[test]
    fn prefix_matching_for_the_prefilter() {
        let t = Template::parse("NCCL error in: {path:file}, {text:what}, NCCL version {word:v}").unwrap();
        assert!(t.could_match_at("NCCL error in: ../ProcessGroupNCCL.cpp:1970, unhandled", 0, 0));
        assert!(t.could_match_at("NCCL err", 0, 0));
        assert!(!t.could_match_at("NCCL INFO Channel 00/0 : 3 -> 4", 0, 0));
        assert!(!t.could_match_at("x NCCL error in: a", 0, 0));
    }

    #[test]
    fn whitespace_is_flexible() {
        let t = Template::parse("When reserved memory is large try setting").unwrap();
        assert!(t.find("When reserved  memory\n  is large try setting", 0).is_some());
        assert!(t.find("When reservedmemory is large try setting", 0).is_some());
        assert!(t.find("When reserved memory is small", 0).is_none());
    }

    #[test]
    fn template_errors() {
        let table = [
            ("{device:d} first", 0, "must start with"),
            ("ab", 0, "must start with"),
            ("Expected {dev_a} and", 10, "is not a capture"),
            ("Expected {foo:a}", 10, "unknown capture kind `foo`"),
            ("Expected {device:a", 9, "unclosed"),
            ("Expected } x", 9, "unmatched"),
            ("Expected {?}", 10, "empty optional"),
            ("Expected {a|}", 12, "empty alternative"),
        ];
        for (src, offset, msg) in table {
            let e = Template::parse(src).unwrap_err();
            assert!(e.message.contains(msg), "{src}: {e}");
            assert_eq!(e.offset, offset, "{src}: {e}");
        }
        assert_eq!(Template::parse("the {{literal}} brace").unwrap().anchor(), "{literal}");
    }

    #[test]
    fn whole_only_refuses_a_cut_message() {
        let src = "DataLoader worker (pid {int:pid}) is killed by signal: {text:signal}.";
        let cut = "DataLoader worker (pid 4127) is killed by sig";
        let m = Template::parse(src).unwrap().match_entry(cut, 0, 0).expect("a cut message matches truncated");
        assert!(m.truncated);
        let whole = Template::parse(src).unwrap().whole_only(true);
        assert_eq!(whole.match_entry(cut, 0, 0), None);
        let full = "DataLoader worker (pid 4127) is killed by signal: Killed.";
        assert!(!whole.match_entry(full, 0, 0).expect("a whole message matches").truncated);
    }

    #[test]
    fn tolerant_literals() {
        let t = Template::parse("Expected all tensors to be on the same device, but found at least two devices, {device:devices[]} and {device:devices[]}!{? (when checking argument for argument {ident:argument} in method {ident:kernel})}").unwrap();
        // (text, matches, truncated, folded)
        let table = [
            (
                "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
                true,
                false,
                false,
            ),
            (
                "expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
                true,
                false,
                true,
            ),
            (
                "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu",
                true,
                false,
                false,
            ),
            (
                "Expected all tensors to be on the same device , but found at least two devices, cuda:0 and cpu!",
                true,
                false,
                false,
            ),
            (
                "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and",
                true,
                true,
                false,
            ),
            ("Expected all tensors to be on the same device, but fou", true, true, false),
            (
                "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and banana!",
                false,
                false,
                false,
            ),
            ("Expected all tensors to be on the", false, false, false),
        ];
        for (hay, ok, truncated, folded) in table {
            let m = t.match_entry(hay, 0, 0);
            assert_eq!(m.is_some(), ok, "{hay}");
            if let Some(m) = m {
                assert_eq!((m.truncated, m.folded), (truncated, folded), "{hay}");
            }
        }
        // A cut match keeps the captures the text still had, and says it was cut.
        let m = t
            .match_entry(
                "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and",
                0,
                0,
            )
            .unwrap();
        assert_eq!(m.captures.len(), 1);
        assert_eq!(m.degraded(), 1);
        // Not the end of the text: a mismatch in the middle of a line is no truncation.
        assert!(t
            .match_entry("Expected all tensors to be on the same device, but we found many devices here", 0, 0)
            .is_none());
    }

    #[test]
    fn a_later_sentence_is_an_entry() {
        let t = Template::parse("Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method").unwrap();
        assert_eq!(t.entries()[1], "To use CUDA with multiprocessing, you must use the 'spawn' start method");
        assert!(t.anchors().iter().any(|a| a.entry == 1 && a.text == "multiprocessing,"));
        let hay = "To use CUDA with multiprocessing, you must use the 'spawn' start method";
        let m = t.match_entry(hay, 0, 1).unwrap();
        assert!(m.head_missing && !m.truncated);
        // Short later sentences are not entries.
        let t = Template::parse("CUDA out of memory. Tried to allocate {size:tried}").unwrap();
        assert_eq!(t.entries().len(), 1);
    }

    #[test]
    fn field_lists_are_sets() {
        let t = Template::parse("Watchdog caught collective operation timeout: WorkNCCL({fields SeqNum=int:seq OpType=ident:op NumelIn=int:numel_in Timeout(ms)=int:timeout_ms}) ran for {int:ran_for} milliseconds").unwrap();
        for hay in [
            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600123 milliseconds",
            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600123 milliseconds",
            "Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE, SeqNum=12, NewField=[1, 2], Timeout(ms)=600000) ran for 600123 milliseconds",
        ] {
            let c = caps(&t.source, hay);
            assert!(c.contains(&("seq".into(), Value::from(12))), "{hay}: {c:?}");
            assert!(c.contains(&("op".into(), Value::from("ALLREDUCE"))), "{hay}");
            assert!(c.contains(&("timeout_ms".into(), Value::from(600000))), "{hay}");
            assert!(c.contains(&("ran_for".into(), Value::from(600123))), "{hay}");
        }
        assert!(Template::parse("x {fields SeqNum}").is_err());
        assert!(Template::parse("xyz {fields A=foo:b}").is_err());
        let t = Template::parse(
            "CollectiveFingerPrint({fields SequenceNumber=int:seq OpType=ident:op TensorShape=shape:shape})",
        )
        .unwrap();
        let c = caps(&t.source, "CollectiveFingerPrint(SequenceNumber=5, OpType=ALLREDUCE, TensorShape=[1024, 2], TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda))");
        assert_eq!(c[2], ("shape".into(), serde_json::json!([1024, 2])));
    }

    #[test]
    fn a_name_before_the_leading_words() {
        let t =
            Template::parse("{ident:op} received an invalid combination of arguments - got ({text:got}), but").unwrap();
        let hay = "TypeError: add_ received an invalid combination of arguments - got (float, torch.cuda.FloatTensor), but expected";
        let m = t.find(hay, 0).unwrap();
        assert_eq!(m.start, 11);
        assert_eq!(m.captures[0].value, Value::from("add_"));
        assert!(Template::parse("{int:n} received").is_err());
        assert!(Template::parse("{ident:op}received").is_err());
    }

    #[test]
    fn pathological_templates_are_bounded() {
        let t = Template::parse("abc{text:a}{text:b}{text:c}{text:d}z").unwrap();
        let hay = format!("abc{}", "x ".repeat(1000));
        assert!(t.find(&hay, 0).is_none());
    }

    /// The byte-wise blank reading agrees with `str::trim_start` on ASCII blanks,
    /// Unicode ones (no-break, ideographic, next-line) and text around them.
    #[test]
    fn blanks_read_bytewise_are_trim_starts() {
        for s in [
            "",
            " ",
            "a",
            "  a ",
            "\t\r\n x",
            "\x0b\x0cx",
            "\u{a0}x",
            " \u{3000} y",
            "\u{85}",
            " \u{2028}\u{2029}",
            "\u{200b}x",
            "é ",
            "   ",
            " \u{a0}",
            "\x1fx",
        ] {
            assert_eq!(blank_prefix(s), s.len() - s.trim_start().len(), "{s:?}");
            assert_eq!(is_blank(s), s.trim().is_empty(), "{s:?}");
        }
    }
}
