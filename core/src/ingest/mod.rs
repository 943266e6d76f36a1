//! Ingest: raw bytes to clean, attributed lines.
//!
//! A pasted log is damaged in predictable ways (see the crate docs): invalid UTF-8,
//! ANSI colour codes (sometimes with the ESC byte lost), `\r` progress-bar overwrites,
//! Windows line ends, and a stack of prefixes in front of every line: launcher labels
//! (`[default3]:`, srun `3: `), the excepthook's `[rank3]: `, glog and c10 log headers
//! (`E1129 10:59:59.123456 4001 path/file.py:616] `, `[E ProcessGroupNCCL.cpp:475] `),
//! Python logging headers and `stderr: `. This module removes all of it, line by line,
//! and records what it learned on the way: the rank the line belongs to, its timestamp
//! and its log level. Nothing here looks at more than one line, so it streams.

pub mod window;
pub(crate) mod wrap;

use nom::bytes::complete::{tag, take_while1, take_while_m_n};
use nom::character::complete::{char, digit1, one_of};
use nom::combinator::{opt, recognize};
use nom::{IResult, Parser};

/// Longest line kept, in bytes. Longer lines are cut (at a char boundary) so that no
/// single line can make later stages slow; the cut is recorded in [`Line::truncated`].
pub const MAX_LINE: usize = 64 * 1024;

/// One cleaned line of the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// 1-based line number in the input.
    pub no: u64,
    /// The text with ANSI codes, `\r` overwrites and log prefixes removed.
    pub text: String,
    /// The rank a prefix names: the global rank of `[rankN]:`, `[rank: N]`, srun's
    /// `N: `, or the local rank of a launcher's `[defaultN]:` / `[host:N]:` label
    /// ([`Line::local`]).
    pub rank: Option<u32>,
    /// `rank` is a rank local to its node (a launcher's tee label), not the global rank.
    pub local: bool,
    /// The host a `[host:N]:` label names.
    pub host: Option<String>,
    /// Timestamp from a glog, c10, Python-logging or ISO header, as comparable millis.
    pub ts: Option<Timestamp>,
    /// Severity letter from a glog/c10 header or Python logging level (`E`, `W`, `I`, `F`).
    pub level: Option<char>,
    /// The line was longer than [`MAX_LINE`] and was cut.
    pub truncated: bool,
    /// The line had a Python-logging header (`2026-11-29 10:59:59,123 ERROR ...`): an
    /// application's logger wrote it, not the interpreter or a C++ library.
    pub logger: bool,
}

impl Line {
    /// Line `no` with no text and nothing read from a prefix yet.
    pub(crate) const fn empty(no: u64, truncated: bool) -> Line {
        Line {
            no,
            text: String::new(),
            rank: None,
            local: false,
            host: None,
            ts: None,
            level: None,
            truncated,
            logger: false,
        }
    }
}

/// A wall-clock instant within a year, comparable across the formats logs carry.
/// Years are ignored (logs rarely span New Year, and glog omits them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    /// Milliseconds since January 1st 00:00 of an unspecified year.
    pub millis: u64,
    /// `HH:MM:SS` for display.
    pub hms: [u8; 3],
}

impl Timestamp {
    fn new(month: u32, day: u32, h: u32, m: u32, s: u32, ms: u32) -> Option<Timestamp> {
        if !(1..=12).contains(&month) || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 {
            return None;
        }
        let days = (month as u64 - 1) * 31 + (day as u64 - 1);
        let millis = ((days * 24 + h as u64) * 60 + m as u64) * 60_000 + s as u64 * 1000 + ms as u64;
        Some(Timestamp { millis, hms: [h as u8, m as u8, s as u8] })
    }

    /// `HH:MM:SS`.
    pub fn clock(&self) -> String {
        format!("{:02}:{:02}:{:02}", self.hms[0], self.hms[1], self.hms[2])
    }
}

/// Cleans lines one at a time. Holds the rank of the last prefixed line so that
/// unprefixed continuation lines of a ranked multi-line message stay with it.
#[derive(Default, Debug, Clone)]
pub struct Cleaner {
    /// Rank (and whether it is local, and its host) of the last line if it was a ranked
    /// C++ log line (or its continuation): its unprefixed continuation lines
    /// (`Last error:`, `ncclRemoteError: ...`) stay with it.
    continues: Option<(u32, bool, Option<String>)>,
    /// How the lines that continue a C++ log record begin (besides indentation): data
    /// of the rule pack (`data/ingest.toml`), since they are library messages' tails.
    continuations: Vec<String>,
}

impl Cleaner {
    /// A cleaner that takes lines starting with one of `continuations` (or indented) as
    /// the continuation of a ranked C++ log record.
    pub fn new(continuations: Vec<String>) -> Cleaner {
        Cleaner { continues: None, continuations }
    }

    /// Cleans one raw line (without its `\n`).
    pub fn line(&mut self, no: u64, raw: &[u8]) -> Line {
        let mut truncated = false;
        let raw = if raw.len() > MAX_LINE {
            truncated = true;
            &raw[..MAX_LINE]
        } else {
            raw
        };
        let decoded = String::from_utf8_lossy(raw);
        let text = resolve_carriage_returns(&decoded);
        let text = strip_ansi(text);
        let text = normalize_punctuation(&text);
        let mut line = Line::empty(no, truncated);
        let rest = strip_prefixes(&text, &mut line);
        line.text = unbox(rest).to_string();
        let bare = line.rank.is_none() && line.level.is_none() && line.ts.is_none() && self.is_continuation(&line.text);
        if bare {
            if let Some((r, local, host)) = self.continues.clone() {
                line.rank = Some(r);
                line.local = local;
                line.host = host;
            }
        } else if let (Some(r), Some(_)) = (line.rank, line.level) {
            self.continues = Some((r, line.local, line.host.clone()));
        } else {
            self.continues = None;
        }
        if line.text.trim().is_empty() {
            self.continues = None;
        }
        line
    }

    /// Whether a line continues a C++ log record rather than starts a new one.
    fn is_continuation(&self, t: &str) -> bool {
        (t.starts_with(' ') || t.starts_with('\t')) && !t.trim().is_empty()
            || self.continuations.iter().any(|p| t.starts_with(p.as_str()))
    }
}

/// A raw line as a terminal shows it (see [`crate::display_line`]).
pub(crate) fn display_line(raw: &str) -> String {
    strip_ansi(resolve_carriage_returns(raw))
}

/// Keeps what a terminal would show after `\r` overwrites: the last non-empty segment.
fn resolve_carriage_returns(s: &str) -> &str {
    let s = s.strip_suffix('\r').unwrap_or(s);
    if !s.contains('\r') {
        return s;
    }
    s.rsplit('\r').find(|seg| !seg.trim().is_empty()).unwrap_or("")
}

/// Removes ANSI escape sequences, including the bare `[0;31m` form whose ESC byte was
/// lost in a copy-paste. Idempotent.
pub fn strip_ansi(s: &str) -> String {
    let b = s.as_bytes();
    // Only an ESC, or an `m` ending a bare `[...m`, can start a removal.
    if memchr::memchr2(0x1b, b'm', b).is_none() {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        // The run up to the next ESC or `m` is copied as it is.
        let next = memchr::memchr2(0x1b, b'm', &b[i..]).map_or(b.len(), |p| i + p);
        out.push_str(&s[i..next]);
        i = next;
        if i == b.len() {
            break;
        }
        if b[i] == 0x1b {
            // CSI: ESC `[` params final-byte; any other escape: drop the ESC itself.
            if b.get(i + 1) == Some(&b'[') {
                let mut j = i + 2;
                while j < b.len() && (b[j].is_ascii_digit() || b[j] == b';' || b[j] == b'?') {
                    j += 1;
                }
                if j < b.len() && b[j].is_ascii_alphabetic() {
                    i = j + 1;
                    continue;
                }
            }
            i += 1;
            continue;
        }
        out.push('m');
        i += 1;
        // A bare SGR sequence (`[0;31m`, its ESC lost) is removed as soon as it is
        // complete in the output, so a sequence formed by a removal goes too.
        let ob = out.as_bytes();
        let mut k = ob.len() - 1;
        let mut digits = 0;
        while k > 0 && (ob[k - 1].is_ascii_digit() || ob[k - 1] == b';') && digits < 16 {
            k -= 1;
            digits += 1;
        }
        if digits > 0 && k > 0 && ob[k - 1] == b'[' && ob[k..ob.len() - 1].iter().any(u8::is_ascii_digit) {
            out.truncate(k - 1);
        }
    }
    out
}

/// Maps typographic quotes and full-width punctuation to ASCII so that templates match
/// text that went through a word processor or a CJK input method.
fn normalize_punctuation(s: &str) -> String {
    // Quotes escaped by a JSON or repr dump (`use the \'spawn\' start method`).
    let escaped = memchr::memchr(b'\\', s.as_bytes()).is_some() && (s.contains("\\'") || s.contains("\\\""));
    let s = if escaped { s.replace("\\'", "'").replace("\\\"", "\"") } else { s.to_string() };
    if s.is_ascii() {
        return s;
    }
    s.chars()
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' => '\'',
            '\u{201c}' | '\u{201d}' => '"',
            // Full-width ASCII (`（`, `：`, `，`, `＇`) as a CJK input method types it, and
            // the ideographic full stop and comma.
            '\u{ff01}'..='\u{ff5e}' => char::from_u32(c as u32 - 0xfee0).unwrap_or(c),
            '\u{3002}' => '.',
            '\u{3001}' => ',',
            c => c,
        })
        .collect()
}

/// Unboxes a Rich console traceback line: `│ /w/train.py:57 in <module>   │` →
/// `/w/train.py:57 in <module>`; `│ ❱ 57 │   loss = f(x)   │` → `❱ 57 │   loss = f(x)`.
fn unbox(s: &str) -> &str {
    let Some(inner) = s.trim_start().strip_prefix('│') else { return s };
    let inner = inner.trim_end();
    let inner = inner.strip_suffix('│').unwrap_or(inner);
    inner.trim()
}

/// Strips stacked prefixes, recording rank, timestamp and level into `line`.
fn strip_prefixes<'a>(mut s: &'a str, line: &mut Line) -> &'a str {
    for _ in 0..8 {
        let before = s.len();
        // A log pasted indented (a markdown code block, a list item) indents its prefixes
        // too: `    [rank3]: ...`. Only prefixes no code or message line starts with are
        // looked for past the indent: a rank, a glog header, a timestamped logger line.
        let unindented = s.trim_start_matches([' ', '\t']);
        if let Ok((rest, rank)) =
            rank_prefix(unindented).or_else(|_| lightning_rank(unindented)).or_else(|_| mpi_tag(unindented))
        {
            // `[rankN]:` is the global rank: it wins over a launcher's local label.
            line.rank = Some(rank);
            line.local = false;
            s = rest;
        } else if let Ok((rest, (host, rank))) = role_prefix(s) {
            if line.rank.is_none() {
                line.rank = Some(rank);
                line.local = true;
            }
            if let Some(h) = host {
                line.host.get_or_insert_with(|| h.to_string());
            }
            s = rest;
        } else if let Ok((rest, (level, ts))) = glog_prefix(unindented) {
            line.level = Some(level);
            if ts.is_some() {
                line.ts = ts;
            }
            s = rest;
        } else if let Ok((rest, (level, ts))) = pylog_prefix(unindented) {
            line.level = level.or(line.level);
            line.ts = Some(ts);
            line.logger = true;
            s = rest;
        } else if let Ok((rest, rank)) = task_rank_label(s) {
            line.rank = Some(rank);
            line.local = false;
            s = rest;
        } else if let Ok((rest, level)) = pylog_basic_prefix(s) {
            line.level = Some(level);
            s = rest;
        } else if let Ok((rest, ())) = misc_prefix(s) {
            s = rest;
        } else if let Ok((rest, ())) = viewer_line_number(s) {
            s = rest;
        } else if let Some(rest) = s.strip_prefix("> ").or_else(|| (s == ">").then_some("")) {
            // A markdown blockquote (an issue comment quoting a log), or loguru's mark on
            // the frame that caught the exception. `>>> ` (a REPL prompt) is not one.
            s = rest;
        } else if let Ok((rest, rank)) = template_prefix(s) {
            line.rank.get_or_insert(rank);
            s = rest;
        } else if line.rank.is_none() {
            if let Ok((rest, rank)) = srun_prefix(s) {
                line.rank = Some(rank);
                s = rest;
            } else if let Some(rest) = after_launcher_token(s) {
                // `i.pretrain/0 [default2]:[rank2]: ...`: a launcher's own token first.
                s = rest;
            }
        }
        if s.len() == before {
            break;
        }
    }
    s
}

fn small_int(i: &str) -> IResult<&str, u32> {
    let (rest, d) = take_while_m_n(1, 6, |c: char| c.is_ascii_digit()).parse(i)?;
    Ok((rest, d.parse().unwrap_or(0)))
}

/// `[rank3]:` / `rank3]:` (leading bracket lost), and the space torch writes after it.
/// Some launchers write the prefix without that space (`[rank3]:  File ...`): Python
/// indents tracebacks by even steps, so an odd run of spaces after the colon holds the
/// prefix's own space and an even run (0, 2, 4) is the line's indentation.
fn rank_prefix(i: &str) -> IResult<&str, u32> {
    let (rest, (_, _, n, _)) = (opt(char('[')), tag("rank"), small_int, tag("]:")).parse(i)?;
    let spaces = rest.bytes().take_while(|&b| b == b' ').count();
    Ok((if spaces % 2 == 1 { &rest[1..] } else { rest }, n))
}

/// Open MPI's `--tag-output` and horovodrun: `[1,3]<stderr>:` (job, rank) and
/// `[3]<stdout>:`; the number is the MPI rank, the global rank.
fn mpi_tag(i: &str) -> IResult<&str, u32> {
    let (rest, (_, _, n, _, _, _)) = (
        char('['),
        opt((small_int, char(','))),
        small_int,
        tag("]<"),
        take_while1(|c: char| c.is_ascii_lowercase()),
        tag(">:"),
    )
        .parse(i)?;
    Ok((rest, n))
}

/// A job platform's rank label after its own fields (Determined: `fa88a9df [rank=1] || `):
/// an optional short id, `[rank=N]`, and its separator.
fn task_rank_label(i: &str) -> IResult<&str, u32> {
    let (rest, (_, _, n, _)) = (
        opt((take_while_m_n(4, 40, |c: char| c.is_ascii_alphanumeric()), char(' '))),
        tag("[rank="),
        small_int,
        char(']'),
    )
        .parse(i)?;
    let rest = rest.strip_prefix(" || ").or_else(|| rest.strip_prefix(" ")).unwrap_or(rest);
    Ok((rest, n))
}

/// Lightning's and accelerate's `[rank: 1] ` (the global rank).
fn lightning_rank(i: &str) -> IResult<&str, u32> {
    let (rest, (_, n, _, _)) = (tag("[rank: "), small_int, char(']'), opt(char(' '))).parse(i)?;
    Ok((rest, n))
}

/// Launcher tee label `[default3]:`, `[trainer0]:` (a local rank), or a host and local
/// rank label `[gpu187:2]:`.
fn role_prefix(i: &str) -> IResult<&str, (Option<&str>, u32)> {
    let host: IResult<&str, _> = (
        char('['),
        take_while1(|c: char| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_'),
        char(':'),
        small_int,
        tag("]:"),
    )
        .parse(i);
    if let Ok((rest, (_, h, _, n, _))) = host {
        if h.starts_with(|c: char| c.is_ascii_alphabetic()) {
            return Ok((rest, (Some(h), n)));
        }
    }
    let (rest, (_, _, n, _)) =
        (char('['), take_while1(|c: char| c.is_ascii_alphabetic()), small_int, tag("]:")).parse(i)?;
    Ok((rest, (None, n)))
}

/// A `--log-line-prefix-template` prefix: `node01:default:2| ` (fields joined by `:`,
/// ending in the rank and `|`), or `[3]: text`.
fn template_prefix(i: &str) -> IResult<&str, u32> {
    let fields: IResult<&str, _> = (
        take_while1(|c: char| c.is_ascii_alphanumeric() || matches!(c, ':' | '.' | '_' | '-')),
        char('|'),
        opt(char(' ')),
    )
        .parse(i);
    if let Ok((rest, (head, _, _))) = fields {
        if let Some((_, n)) = head.rsplit_once(':') {
            if let Ok(r) = n.parse::<u32>() {
                return Ok((rest, r));
            }
        }
    }
    let (rest, (_, n, _, _)) =
        (char('['), small_int, tag("]: "), nom::combinator::peek(nom::character::complete::anychar)).parse(i)?;
    Ok((rest, n))
}

/// A log viewer's own line number: `[80746] ` (bracketed digits and a space).
fn viewer_line_number(i: &str) -> IResult<&str, ()> {
    let (rest, _) = (char('['), take_while_m_n(1, 9, |c: char| c.is_ascii_digit()), tag("] ")).parse(i)?;
    Ok((rest, ()))
}

/// A single launcher token before a rank label (`i.pretrain/0 [default2]:...`): the
/// text from the label on.
fn after_launcher_token(s: &str) -> Option<&str> {
    let sp = s.find(' ')?;
    if sp == 0 || sp > 48 {
        return None;
    }
    let rest = &s[sp + 1..];
    (rank_prefix(rest).is_ok() || role_prefix(rest).is_ok()).then_some(rest)
}

/// srun `--label` output: `3: `.
fn srun_prefix(i: &str) -> IResult<&str, u32> {
    let (rest, (n, _)) = (take_while_m_n(1, 4, |c: char| c.is_ascii_digit()), tag(": ")).parse(i)?;
    Ok((rest, n.parse().unwrap_or(0)))
}

fn two(i: &str) -> IResult<&str, u32> {
    let (rest, d) = take_while_m_n(1, 2, |c: char| c.is_ascii_digit()).parse(i)?;
    Ok((rest, d.parse().unwrap_or(0)))
}

/// `HH:MM:SS[.frac|,ms]` → (h, m, s, ms).
fn clock(i: &str) -> IResult<&str, (u32, u32, u32, u32)> {
    let (rest, (h, _, m, _, s, frac)) = (two, char(':'), two, char(':'), two, opt((one_of(".,"), digit1))).parse(i)?;
    let ms = frac
        .map(|(_, d): (char, &str)| {
            let d3: String = d.chars().chain("000".chars()).take(3).collect();
            d3.parse().unwrap_or(0)
        })
        .unwrap_or(0);
    Ok((rest, (h, m, s, ms)))
}

/// glog and c10 headers, bracketed or not:
/// `E1129 10:59:59.123456 4001 torch/x.py:616] `, `[E1118 20:32:23.955028747 ProcessGroupNCCL.cpp:629] `,
/// `[E ProcessGroupNCCL.cpp:475] `, `[W socket.cpp:663] `.
fn glog_prefix(i: &str) -> IResult<&str, (char, Option<Timestamp>)> {
    let (rest, open) = opt(char('[')).parse(i)?;
    let (rest, level) = one_of("IWEFVDC").parse(rest)?;
    let (rest, ts) = if open.is_some() && rest.starts_with(' ') {
        (rest, None)
    } else {
        let (rest, mmdd) = take_while_m_n(3, 4, |c: char| c.is_ascii_digit()).parse(rest)?;
        let (rest, _) = char(' ').parse(rest)?;
        let (rest, (h, m, s, ms)) = clock(rest)?;
        let v: u32 = mmdd.parse().unwrap_or(0);
        (rest, Timestamp::new(v / 100, v % 100, h, m, s, ms))
    };
    let (rest, _) = char(' ').parse(rest)?;
    // Optional thread/process id, then `file:line]`.
    let (rest, _) = opt((digit1, char(' '))).parse(rest)?;
    let (rest, _) = (
        take_while1(|c: char| !c.is_whitespace() && c != ']' && c != ':'),
        char(':'),
        digit1,
        char(']'),
        opt(char(' ')),
    )
        .parse(rest)?;
    Ok((rest, (level, ts)))
}

/// `YYYY-MM-DD HH:MM:SS[,ms]`, `YYYY-MM-DDTHH:MM:SS.ffffffZ`, optionally bracketed,
/// followed by an optional `logger: [LEVEL]` or ` LEVEL ` part.
fn pylog_prefix(i: &str) -> IResult<&str, (Option<char>, Timestamp)> {
    let (rest, open) = opt(char('[')).parse(i)?;
    let (rest, (_, _, mo, _, d, _)) =
        (take_while_m_n(4, 4, |c: char| c.is_ascii_digit()), char('-'), two, char('-'), two, one_of(" T_"))
            .parse(rest)?;
    let (rest, (h, m, s, ms)) = clock(rest)?;
    let (rest, _) = opt(take_while1(|c: char| c.is_ascii_digit())).parse(rest)?;
    let (rest, _) = opt(alt_tz).parse(rest)?;
    let (rest, _) = if open.is_some() { (char(']').parse(rest)?.0, ()) } else { (rest, ()) };
    let Some(ts) = Timestamp::new(mo, d, h, m, s, ms) else {
        return Err(nom::Err::Error(nom::error::Error::new(i, nom::error::ErrorKind::Verify)));
    };
    // One separator (a space, ` | `, ` || `, ` - `, `: ` as a CI runner or `mpirun
    // --timestamp-output` prints it), not every space: what follows may be a traceback's
    // indented frame line.
    let rest = [" || ", " | ", " - ", ": ", " "].iter().find_map(|sep| rest.strip_prefix(sep)).unwrap_or(rest);
    // `torch.distributed.elastic.multiprocessing.api: [WARNING] `
    let logger: IResult<&str, _> = (
        take_while1(|c: char| c.is_ascii_alphanumeric() || c == '.' || c == '_'),
        char(':'),
        tag(" ["),
        take_while1(|c: char| c.is_ascii_uppercase()),
        char(']'),
        opt(char(' ')),
    )
        .parse(rest);
    if let Ok((r2, (_, _, _, lvl, _, _))) = logger {
        return Ok((r2, (level_letter(lvl), ts)));
    }
    // `train - ERROR - `: logging's `%(asctime)s - %(name)s - %(levelname)s - %(message)s`.
    let named: IResult<&str, _> = (
        take_while1(|c: char| c.is_alphanumeric() || c == '.' || c == '_'),
        tag(" - "),
        take_while1(|c: char| c.is_ascii_uppercase()),
        tag(" - "),
    )
        .parse(rest);
    if let Ok((r2, (_, _, lvl, _))) = named {
        if let Some(l) = level_letter(lvl) {
            return Ok((r2, (Some(l), ts)));
        }
    }
    // ` ERROR ` / `[ERROR] `
    let level: IResult<&str, _> =
        (opt(char('[')), take_while1(|c: char| c.is_ascii_uppercase()), opt(char(']')), char(' ')).parse(rest);
    if let Ok((r2, (_, lvl, _, _))) = level {
        if let Some(l) = level_letter(lvl) {
            // `ERROR - msg`, and loguru's `ERROR    | module:function:88 - msg`.
            let r2 = r2.strip_prefix("- ").or_else(|| loguru_location(r2)).unwrap_or(r2);
            return Ok((r2, (Some(l), ts)));
        }
    }
    Ok((rest, (None, ts)))
}

/// The rest of a loguru line after its level: `   | __main__:main:88 - msg` gives `msg`.
fn loguru_location(i: &str) -> Option<&str> {
    let rest = i.trim_start_matches(' ').strip_prefix("| ")?;
    let (location, msg) = rest.split_once(" - ")?;
    (!location.is_empty() && !location.contains(' ') && location.contains(':')).then_some(msg)
}

fn alt_tz(i: &str) -> IResult<&str, &str> {
    recognize(one_of("Z")).parse(i)
}

fn level_letter(l: &str) -> Option<char> {
    match l {
        "ERROR" | "CRITICAL" | "FATAL" => Some('E'),
        "WARNING" | "WARN" => Some('W'),
        "INFO" => Some('I'),
        "DEBUG" => Some('D'),
        _ => None,
    }
}

/// Python's basic logging format: `WARNING:torch.distributed.elastic.multiprocessing.api:`.
fn pylog_basic_prefix(i: &str) -> IResult<&str, char> {
    let (rest, (lvl, _, _, _)) = (
        take_while1(|c: char| c.is_ascii_uppercase()),
        char(':'),
        take_while1(|c: char| c.is_ascii_alphanumeric() || c == '.' || c == '_'),
        char(':'),
    )
        .parse(i)?;
    match level_letter(lvl) {
        Some(l) => Ok((rest, l)),
        None => Err(nom::Err::Error(nom::error::Error::new(i, nom::error::ErrorKind::Verify))),
    }
}

/// Job-runner and launcher wrappers: `stderr: `, `stdout: `, `(RayWorkerWrapper pid=4009) `,
/// `host.nolog [stderr] `.
fn misc_prefix(i: &str) -> IResult<&str, ()> {
    if let Some(r) = i.strip_prefix("stderr: ").or_else(|| i.strip_prefix("stdout: ")) {
        return Ok((r, ()));
    }
    // Markdown's code marks glued to a traceback's first line (`` `File "x.py", line 3 ``,
    // ```` ```Traceback (most recent call last): ````): the paste's wrapping, not the log.
    let ticks = i.len() - i.trim_start_matches('`').len();
    if (1..=3).contains(&ticks) {
        let r = &i[ticks..];
        if r.starts_with("File \"") || r.starts_with("Traceback (most recent call last)") {
            return Ok((r, ()));
        }
    }
    // A notebook or test harness's bare clock: `[12:34:56] `, `[12:34:56.789]: `.
    if let Ok((r, _)) = (char('['), clock, char(']'), opt(char(':')), char(' ')).parse(i) {
        return Ok((r, ()));
    }
    let (rest, _) = (
        char('('),
        take_while1(|c: char| c.is_ascii_alphanumeric() || c == '_'),
        take_while1(|c: char| c != ')' && c != '\n'),
        char(')'),
        char(' '),
    )
        .parse(i)?;
    let inner = &i[..i.len() - rest.len()];
    if inner.contains("pid=") {
        Ok((rest, ()))
    } else {
        Err(nom::Err::Error(nom::error::Error::new(i, nom::error::ErrorKind::Verify)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Splits `bytes` into cleaned lines. Invalid UTF-8 is replaced with U+FFFD; line
    /// numbers always refer to the input as given.
    pub fn lines(bytes: &[u8]) -> Vec<Line> {
        let mut out = Vec::new();
        let mut cleaner = Cleaner::default();
        for (i, raw) in split_lines(bytes).enumerate() {
            out.push(cleaner.line(i as u64 + 1, raw));
        }
        out
    }

    /// Iterates over the raw lines of `bytes`, without their `\n` (a final empty line
    /// after a trailing newline is not yielded).
    pub fn split_lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
        let mut rest = if bytes.is_empty() { None } else { Some(bytes) };
        std::iter::from_fn(move || {
            let r = rest?;
            match memchr_nl(r) {
                Some(p) => {
                    rest = if p + 1 < r.len() { Some(&r[p + 1..]) } else { None };
                    Some(&r[..p])
                }
                None => {
                    rest = None;
                    Some(r)
                }
            }
        })
    }

    fn memchr_nl(b: &[u8]) -> Option<usize> {
        b.iter().position(|&c| c == b'\n')
    }

    /// The first, character-at-a-time `strip_ansi`: the oracle for the run-copying one.
    fn strip_ansi_by_char(s: &str) -> String {
        if !s.contains('\x1b') && !s.contains('m') {
            return s.to_string();
        }
        let b = s.as_bytes();
        let mut out = String::with_capacity(s.len());
        let mut i = 0;
        while i < b.len() {
            if b[i] == 0x1b {
                // CSI: ESC `[` params final-byte; any other escape: drop the ESC itself.
                if b.get(i + 1) == Some(&b'[') {
                    let mut j = i + 2;
                    while j < b.len() && (b[j].is_ascii_digit() || b[j] == b';' || b[j] == b'?') {
                        j += 1;
                    }
                    if j < b.len() && b[j].is_ascii_alphabetic() {
                        i = j + 1;
                        continue;
                    }
                }
                i += 1;
                continue;
            }
            let c = s[i..].chars().next().unwrap_or('\u{fffd}');
            out.push(c);
            i += c.len_utf8();
            // A bare SGR sequence (`[0;31m`, its ESC lost) is removed as soon as it is
            // complete in the output, so a sequence formed by a removal goes too.
            if c == 'm' {
                let ob = out.as_bytes();
                let mut k = ob.len() - 1;
                let mut digits = 0;
                while k > 0 && (ob[k - 1].is_ascii_digit() || ob[k - 1] == b';') && digits < 16 {
                    k -= 1;
                    digits += 1;
                }
                if digits > 0 && k > 0 && ob[k - 1] == b'[' && ob[k..ob.len() - 1].iter().any(u8::is_ascii_digit) {
                    out.truncate(k - 1);
                }
            }
        }
        out
    }

    #[test]
    fn strip_ansi_equals_the_char_at_a_time_version() {
        let pieces = [
            "\x1b[0;31m",
            "\x1b[",
            "\x1b",
            "[0;31m",
            "[1m",
            "[m",
            "[0;",
            "1m",
            "m",
            "mm",
            "é",
            "[rank0]:",
            "x",
            " ",
            "[12;34;56m",
            "\x1b[?25l",
            ";",
        ];
        // Every sequence of up to four pieces.
        let mut inputs = vec![String::new()];
        for _ in 0..4 {
            let mut next = Vec::new();
            for s in &inputs {
                for p in pieces {
                    next.push(format!("{s}{p}"));
                }
            }
            inputs.extend(next);
            inputs.dedup();
        }
        for s in &inputs {
            assert_eq!(strip_ansi(s), strip_ansi_by_char(s), "{s:?}");
        }
    }

    fn clean(s: &str) -> Line {
        Cleaner::default().line(1, s.as_bytes())
    }

    #[test]
    fn prefixes() {
        // (input, text, rank, level)
        let table: &[(&str, &str, Option<u32>, Option<char>)] = &[
            ("[rank3]: Traceback (most recent call last):", "Traceback (most recent call last):", Some(3), None),
            ("[rank3]:   File \"x.py\", line 1, in f", "  File \"x.py\", line 1, in f", Some(3), None),
            // Without the prefix's own space: the indentation is the line's.
            ("[rank3]:  File \"x.py\", line 1, in f", "  File \"x.py\", line 1, in f", Some(3), None),
            ("[rank3]:RuntimeError: x", "RuntimeError: x", Some(3), None),
            ("rank7]: RuntimeError: x", "RuntimeError: x", Some(7), None),
            ("[default2]:[rank5]: RuntimeError: x", "RuntimeError: x", Some(5), None),
            ("[default2]:hello", "hello", Some(2), None),
            ("3: RuntimeError: x", "RuntimeError: x", Some(3), None),
            ("E1129 16:34:25.393000 20479 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1)", "failed (exitcode: 1)", None, Some('E')),
            ("[rank1]:[E1118 20:32:23.955028747 ProcessGroupNCCL.cpp:629] [Rank 1] Watchdog", "[Rank 1] Watchdog", Some(1), Some('E')),
            ("[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog", "[Rank 1] Watchdog", None, Some('E')),
            ("[2024-05-08 08:47:31,877] torch.distributed.elastic.multiprocessing.api: [ERROR] failed", "failed", None, Some('E')),
            ("WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 5 closing signal SIGTERM", "Sending process 5 closing signal SIGTERM", None, Some('W')),
            ("2024-11-20 14:37:16 [rank3]: RuntimeError: x", "RuntimeError: x", Some(3), None),
            ("stderr: RuntimeError: x", "RuntimeError: x", None, None),
            ("[14:02:11] torch._dynamo.exc.BackendCompilerFailed: x", "torch._dynamo.exc.BackendCompilerFailed: x", None, None),
            ("[14:02:11.084]:   File \"x.py\", line 1, in f", "  File \"x.py\", line 1, in f", None, None),
            ("(RayWorkerWrapper pid=4009) [rank1]: boom", "boom", Some(1), None),
            ("[rank6]:W1101 02:43:39.336000 143 site-packages/torch/x.py:1] warn", "warn", Some(6), Some('W')),
            ("[0]:", "[0]:", None, None),
            ("node01:default:2| [rank2]: Traceback", "Traceback", Some(2), None),
            ("gpu-3:trainer:5| boom", "boom", Some(5), None),
            ("[4]: RuntimeError: x", "RuntimeError: x", Some(4), None),
            ("[80746] [rank0]:[E321 10:00:00.1 x.cpp:1] boom", "boom", Some(0), Some('E')),
            ("i.pretrain/0 [default2]:[rank2]: RuntimeError: x", "RuntimeError: x", Some(2), None),
            ("use the \\'spawn\\' start method", "use the 'spawn' start method", None, None),
            ("step 50: loss=2.3", "step 50: loss=2.3", None, None),
            ("2024-03-01 12:00:00,123 - train - ERROR -   File \"x.py\", line 1, in f", "  File \"x.py\", line 1, in f", None, Some('E')),
            ("2024-03-01 12:00:00,123 - ERROR -     loss.backward()", "    loss.backward()", None, Some('E')),
            ("2024-05-02 10:14:07.512 | ERROR    | __main__:main:88 - An error has been caught", "An error has been caught", None, Some('E')),
            ("> RuntimeError: x", "RuntimeError: x", None, None),
            (">>> a @ b", ">>> a @ b", None, None),
            ("    [rank3]:   File \"x.py\", line 1, in f", "  File \"x.py\", line 1, in f", Some(3), None),
            ("    W1129 16:36:58.609000 22553 torch/distributed/run.py:982] Setting", "Setting", None, Some('W')),
            ("    2026-11-29 16:37:09,335 ERROR [train] rank 2: skipping", "[train] rank 2: skipping", None, Some('E')),
            ("    INFO: not a prefix past the indent", "    INFO: not a prefix past the indent", None, None),
            // Open MPI's --tag-output and horovodrun: the MPI rank.
            ("[1,3]<stderr>:RuntimeError: x", "RuntimeError: x", Some(3), None),
            ("[2]<stdout>:    loss.backward()", "    loss.backward()", Some(2), None),
            // mpirun --timestamp-output (and CI runners) put a clock and `: ` before the tag.
            ("2021-03-10T13:22:37.434Z: [1,0]<stderr>:  File \"deit/utils.py\", line 136, in f", "  File \"deit/utils.py\", line 136, in f", Some(0), None),
            // A platform's timestamp, task id and rank label (Determined).
            ("[2024-02-27T21:35:28.705869Z] fa88a9df [rank=1] || Traceback (most recent call last):", "Traceback (most recent call last):", Some(1), None),
            ("[2024-02-27T21:35:28.727029Z] fa88a9df [rank=2] ||   File \"t.py\", line 1, in f", "  File \"t.py\", line 1, in f", Some(2), None),
            // One separator after a bare timestamp: the frame's indentation stays.
            ("2023-03-23 19:14:23   File \"x.py\", line 1, in f", "  File \"x.py\", line 1, in f", None, None),
            ("2023-03-23 19:14:23 TypeError: x", "TypeError: x", None, None),
            // Markdown code marks glued to a traceback's first line; elsewhere they stay.
            ("`File \"/w/orn.py\", line 86, in f", "File \"/w/orn.py\", line 86, in f", None, None),
            ("```Traceback (most recent call last):", "Traceback (most recent call last):", None, None),
            ("`x = y`", "`x = y`", None, None),
        ];
        for (input, text, rank, level) in table {
            let l = clean(input);
            assert_eq!((l.text.as_str(), l.rank, l.level), (*text, *rank, *level), "{input}");
        }
    }

    #[test]
    fn continuation_lines_of_a_ranked_log_line() {
        let mut c = Cleaner::new(vec!["ncclRemoteError".into()]);
        let a = c.line(1, b"[rank1]:[E1118 20:32:23.955 ProcessGroupNCCL.cpp:1] NCCL error: remote process exited");
        let b = c.line(2, b"ncclRemoteError: A call failed");
        let t = c.line(3, b"terminate called after throwing an instance of 'c10::DistBackendError'");
        assert_eq!(t.rank, None);
        let _ = c.line(3, b"[rank1]:[E1118 20:32:23.955 ProcessGroupNCCL.cpp:1] again");
        let d = c.line(3, b"W1118 20:32:24.000000 77 api.py:1] Sending process 5 closing signal SIGTERM");
        let e = c.line(4, b"plain launcher text");
        assert_eq!((a.rank, b.rank, d.rank, e.rank), (Some(1), Some(1), None, None));
    }

    #[test]
    fn timestamps_order() {
        let a = clean("E1129 10:59:59.123456 4001 a.py:1] x").ts.unwrap();
        let b = clean("[2026-11-29 11:00:00,001] m: [ERROR] x").ts.unwrap();
        assert!(a < b);
        assert_eq!(a.clock(), "10:59:59");
    }

    #[test]
    fn full_width_punctuation_is_ascii() {
        assert_eq!(
            clean("RuntimeError\u{ff1a}Attempting to deserialize object on a CUDA device\u{ff08}cpu\u{ff09}\u{3002}")
                .text,
            "RuntimeError:Attempting to deserialize object on a CUDA device(cpu)."
        );
        assert_eq!(clean("\u{4f60}\u{597d}\u{3001}\u{ff0c}").text, "\u{4f60}\u{597d},,");
    }

    #[test]
    fn ansi_and_cr() {
        assert_eq!(clean("\x1b[31mRuntimeError\x1b[0m: x").text, "RuntimeError: x");
        assert_eq!(clean("[0;31mRuntimeError[0m: x").text, "RuntimeError: x");
        assert_eq!(clean(" 10%|#  \r 50%|#### \r100%|######|\r").text, "100%|######|");
        assert_eq!(clean("line\r").text, "line");
        assert_eq!(strip_ansi("[0]: a [1m"), "[0]: a ");
    }

    #[test]
    fn invalid_utf8_and_line_numbers() {
        let ls = lines(b"a\n\xff\xfeb\r\nc");
        assert_eq!(ls.len(), 3);
        assert_eq!(ls[1].text, "\u{fffd}\u{fffd}b");
        assert_eq!(ls[2].no, 3);
        assert!(lines(b"").is_empty());
    }
}
