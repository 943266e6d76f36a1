//! Python tracebacks, as CPython, IPython/Jupyter and the DataLoader print them.
//!
//! Accepted: the `Traceback (most recent call last):` header (also IPython's
//! `SomeError    Traceback (most recent call last)` banner and DataLoader's
//! `Original Traceback (most recent call last):`), frames (`File "...", line N, in f`,
//! IPython `File /path.py:43`, `Cell In[3], line 7`, `<ipython-input-..> in <module>`),
//! source lines (`---> 43 code`), 3.11+ caret lines, `[Previous line repeated N more
//! times]`, the exception line and its multi-line message, both chaining separators,
//! and nested worker tracebacks. A traceback cut short still yields what it has.
//! Parsing is iterative (no recursion on chain or nesting depth) and linear.

use nom::branch::alt;
use nom::bytes::complete::{tag, take_till, take_until, take_while1};
use nom::character::complete::{char, digit1, space0};
use nom::combinator::opt;
use nom::{IResult, Parser};

/// Longest exception message, in lines.
const MAX_MESSAGE_LINES: usize = 400;

/// One stack frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The file as printed (or `In[3]` for a notebook cell).
    pub file: String,
    /// The line number, when printed.
    pub line: Option<u32>,
    /// The function (`<module>` at top level), when printed.
    pub func: Option<String>,
    /// The source line shown under the frame, trimmed.
    pub code: Option<String>,
    /// Index (into the stream's lines) of the frame's `File` line.
    pub at: usize,
}

impl Frame {
    /// `basename:line` as the report contract spells `failing_frame`.
    pub fn short(&self) -> String {
        let base = self.file.rsplit(['/', '\\']).next().unwrap_or(&self.file);
        match self.line {
            Some(n) => format!("{base}:{n}"),
            None => base.to_string(),
        }
    }

    /// Whether the frame is in the user's own code rather than torch, an installed
    /// package or the Python standard library.
    pub fn is_user(&self) -> bool {
        let f = self.file.replace('\\', "/");
        let lower = f.to_ascii_lowercase();
        !(lower.contains("site-packages")
            || lower.contains("dist-packages")
            || lower.contains("/lib/python")
            || lower.starts_with("lib/python")
            || lower.starts_with("torch/")
            || lower.contains("/torch/")
            || lower.starts_with("<frozen")
            || lower.contains("/pytorch/")
            || lower.contains("transformers_modules")
            || lower.contains("/.cache/")
            || lower == "<string>"
            || is_launcher_script(&lower))
    }
}

/// Console scripts of installed tools (`/opt/conda/bin/torchrun`, `~/.local/bin/accelerate`).
fn is_launcher_script(path: &str) -> bool {
    let base = path.rsplit('/').next().unwrap_or(path);
    (path.contains("/bin/") || path.contains("/scripts/")) && !base.contains('.')
}

/// An exception line with its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exception {
    /// Class as printed, possibly qualified (`torch.OutOfMemoryError`).
    pub class: String,
    /// The message: the rest of the exception line and its continuation lines.
    pub message: String,
    /// Stream line index of the exception line.
    pub first: usize,
    /// Stream line index of the message's last line.
    pub last: usize,
}

impl Exception {
    /// The class without its module path.
    pub fn short_class(&self) -> &str {
        self.class.rsplit(['.', ':']).next().unwrap_or(&self.class)
    }
}

/// How a traceback relates to the one before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// The first of its chain.
    Start,
    /// `The above exception was the direct cause of the following exception:`
    Cause,
    /// `During handling of the above exception, another exception occurred:`
    Context,
    /// An `Original Traceback` nested in the previous traceback's message.
    Nested,
}

/// One traceback.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Traceback {
    /// Stream line index of the header (or first frame when the header was cut).
    pub start: usize,
    /// Stream line index of the last line belonging to it.
    pub end: usize,
    /// Its frames, outermost first.
    pub frames: Vec<Frame>,
    /// Its exception line and message; `None` when the paste was cut before it.
    pub exception: Option<Exception>,
    /// How it relates to the traceback before it.
    pub link: Link,
    /// Index of the first traceback of its chain in the output list.
    pub chain: usize,
}

impl Traceback {
    /// The last frame in user code.
    pub fn user_frame(&self) -> Option<&Frame> {
        self.frames.iter().rev().find(|f| f.is_user())
    }
}

const CAUSE: &str = "The above exception was the direct cause of the following exception";
const CONTEXT: &str = "During handling of the above exception, another exception occurred";

fn is_header(l: &str) -> bool {
    // Streamlit prints the message first, then a bare `Traceback:` and the frames.
    l.contains("Traceback (most recent call last)") || l.trim() == "Traceback:"
}

/// What the grammar must know of the lines beyond their text: which lines carry a log
/// header of their own (a new record, never the continuation of a message), and how the
/// library's multi-line messages go on (rule data, `data/ingest.toml`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Layout<'a> {
    /// For each line, whether it had a log header (timestamp or level).
    pub headed: &'a [bool],
    /// How an unindented line that continues a message begins.
    pub tails: &'a [String],
    /// How a line that continues a message after a blank line begins.
    pub after_blank: &'a [String],
    /// Exception classes whose names do not end in `Error`, `Exception` and the like.
    pub classes: &'a [String],
}

impl Layout<'_> {
    fn headed(&self, i: usize) -> bool {
        self.headed.get(i).copied().unwrap_or(false)
    }

    fn is_tail(&self, t: &str) -> bool {
        self.tails.iter().any(|p| t.starts_with(p.as_str()))
    }

    fn is_tail_after_blank(&self, t: &str) -> bool {
        self.after_blank.iter().any(|p| t.starts_with(p.as_str()))
    }

    /// Whether line `i` continues the message whose exception line is `at`: it is
    /// indented, or the line before breaks off mid-sentence (a trailing space, colon,
    /// comma or open bracket), or it begins like one of the library's own tails, or it
    /// is the rest of a row a terminal wrapped inside a word. Never a line with a log
    /// header of its own, a progress bar or a frame.
    fn continues(&self, lines: &[&str], i: usize, at: usize) -> bool {
        let line = lines[i];
        let t = line.trim();
        if (self.headed(i) && !self.headed(at)) || is_progress(t) || python_frame(strip_frame_marker(t)).is_ok() {
            return false;
        }
        if line.starts_with([' ', '\t']) || self.is_tail(t) {
            return true;
        }
        let prev = lines[i - 1];
        if prev.ends_with([' ', ':', ',', '(', '[', '{', '\\']) {
            return true;
        }
        // A row wrapped inside a word (`... with map_locatio` / `n=torch.device('cpu')`).
        prev.chars().count() >= MIN_WRAPPED_FRAME
            && prev.ends_with(|c: char| c.is_ascii_alphanumeric())
            && t.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '=' | '.' | ')'))
    }
}

/// A progress bar (`45%|####      | 9/20 [00:01<00:02, 5.1it/s]`).
fn is_progress(t: &str) -> bool {
    t.contains("%|") || t.contains("it/s]") || t.contains("s/it]")
}

/// Parses every traceback in a stream's lines (already cleaned of prefixes), with no
/// knowledge of the lines beyond their text (the engine calls [`parse_with`]; this
/// entry point serves tests, benchmarks and fuzzing).
#[cfg(any(test, feature = "internals"))]
pub fn parse(lines: &[&str]) -> Vec<Traceback> {
    parse_with(lines, &Layout::default())
}

/// Parses every traceback in a stream's lines. A traceback flattened onto one line (a
/// paste whose line breaks were lost) is read as the lines it was.
pub fn parse_with(lines: &[&str], layout: &Layout<'_>) -> Vec<Traceback> {
    if !lines.iter().any(|l| is_flattened(l)) {
        return parse_lines(lines, layout);
    }
    let mut owned: Vec<String> = Vec::new();
    let mut orig: Vec<usize> = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if is_flattened(l) {
            for piece in unflatten(l) {
                owned.push(piece);
                orig.push(i);
            }
        } else {
            owned.push(l.to_string());
            orig.push(i);
        }
    }
    let headed: Vec<bool> = orig.iter().map(|&i| layout.headed(i)).collect();
    let expanded: Vec<&str> = owned.iter().map(String::as_str).collect();
    let inner = Layout { headed: &headed, ..*layout };
    let mut tbs = parse_lines(&expanded, &inner);
    let back = |i: usize| orig.get(i).copied().unwrap_or(lines.len().saturating_sub(1));
    for t in &mut tbs {
        t.start = back(t.start);
        t.end = back(t.end);
        for f in &mut t.frames {
            f.at = back(f.at);
        }
        if let Some(x) = &mut t.exception {
            x.first = back(x.first);
            x.last = back(x.last);
        }
    }
    tbs
}

/// Whether a line holds a whole traceback whose line breaks were lost: two frames or
/// more on it.
fn is_flattened(l: &str) -> bool {
    l.len() > 40 && l.matches("File \"").count() >= 2 && l.contains("\", line ")
}

/// The lines of a flattened traceback: its header, each frame with its source line,
/// and the exception line.
fn unflatten(l: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = l;
    if let Some(p) = rest.find("File \"") {
        let head = rest[..p].trim();
        if !head.is_empty() {
            out.push(head.to_string());
        }
        rest = &rest[p..];
    }
    let mut chunks: Vec<&str> = Vec::new();
    while let Some(p) = rest[1..].find("File \"").map(|p| p + 1) {
        chunks.push(&rest[..p]);
        rest = &rest[p..];
    }
    chunks.push(rest);
    let n = chunks.len();
    for (k, chunk) in chunks.into_iter().enumerate() {
        // `File "a.py", line 3, in f y = g() ^^^`: the frame, then its code.
        let Ok((after, ())) = python_frame_head(chunk) else {
            out.push(chunk.trim().to_string());
            continue;
        };
        let mut tail = after.trim_start();
        let mut func = "";
        if let Some(r) = tail.strip_prefix(", in ").or_else(|| tail.strip_prefix(",in ")) {
            let r = r.trim_start();
            let end = r.find(char::is_whitespace).unwrap_or(r.len());
            func = &r[..end];
            tail = &r[end..];
        }
        let head = &chunk[..chunk.len() - after.len()];
        out.push(if func.is_empty() { head.trim().to_string() } else { format!("{}, in {func}", head.trim()) });
        // The last frame's tail holds the exception after the code.
        let (code, exc) = if k + 1 == n { split_exception(tail) } else { (tail, None) };
        let code: String = code.split_whitespace().filter(|w| !is_caret(w)).collect::<Vec<_>>().join(" ");
        if !code.is_empty() {
            out.push(format!("    {code}"));
        }
        if let Some(e) = exc {
            out.push(e.to_string());
        }
    }
    out
}

/// `File "path", line N` at the start of a chunk, before any `, in f`.
fn python_frame_head(i: &str) -> IResult<&str, ()> {
    let (rest, _) = (
        tag("File"),
        space0,
        nom::sequence::delimited(char('"'), take_till(|c| c == '"'), char('"')),
        char(','),
        space0,
        tag("line "),
        digit1,
    )
        .parse(i)?;
    Ok((rest, ()))
}

/// A frame's code and the exception line glued after it (`y = g() ValueError: bad`).
fn split_exception(tail: &str) -> (&str, Option<&str>) {
    for (p, _) in tail.match_indices(": ") {
        let before = &tail[..p];
        let start = before.rfind(' ').map_or(0, |s| s + 1);
        let class = &before[start..];
        if is_exception_class_name(class) {
            return (tail[..start].trim_end(), Some(tail[start..].trim()));
        }
    }
    (tail, None)
}

/// A class name that says it is an exception (`...Error`, `...Exception`, and the like).
fn is_exception_class_name(c: &str) -> bool {
    super::raised::is_class(c, &[])
}

fn parse_lines(lines: &[&str], layout: &Layout<'_>) -> Vec<Traceback> {
    let mut out: Vec<Traceback> = Vec::new();
    let mut i = 0;
    let mut pending = Link::Start;
    while i < lines.len() {
        if let Some(next) = pytest_failure(lines, i, &mut out) {
            pending = Link::Start;
            i = next;
            continue;
        }
        let l = lines[i];
        let t = l.trim();
        if t.starts_with(CAUSE) {
            pending = Link::Cause;
            i += 1;
            continue;
        }
        if t.starts_with(CONTEXT) {
            pending = Link::Context;
            i += 1;
            continue;
        }
        let header = is_header(l);
        // An exception line outside any traceback is a frameless traceback of its own,
        // its message read as in a whole one: a lone `ValueError: ...`, a frameless
        // block (`Class:` alone with its message below, torchrun's `ChildFailedError:`
        // summary), a DataLoader re-raise pasted without its outer traceback (the
        // envelope, then the worker's `Original Traceback`, nested in it as in the whole
        // paste).
        if !header {
            let frameless = exception_line(t).filter(|(c, _)| {
                let short = c.rsplit(['.', ':']).next().unwrap_or(c);
                is_exception_class_name(c) || layout.classes.iter().any(|x| x == short)
            });
            if let Some((class, msg)) = frameless {
                let link = if out.is_empty() { Link::Start } else { pending };
                let chain = match link {
                    Link::Start => out.len(),
                    _ => out.last().map(|t| t.chain).unwrap_or(out.len()),
                };
                let me = out.len();
                out.push(Traceback { start: i, end: i, frames: Vec::new(), exception: None, link, chain });
                let (message, last, next, user_code) = message_body(lines, i, msg, &mut out, me, layout, true);
                out[me].frames = user_code;
                out[me].exception = Some(Exception { class: class.to_string(), message, first: i, last });
                out[me].end = last;
                pending = Link::Start;
                i = next.max(i + 1);
                continue;
            }
        }
        // A traceback whose header was cut off still starts at its first frame: a
        // CPython `File "..."` line with its source below, or an IPython/Colab frame
        // (`<ipython-input-8-4aae> in forward(self, x)`) with its numbered source lines.
        let headless = !header
            && lines.get(i + 1).is_some_and(|n| !n.trim().is_empty())
            && (python_frame(t).is_ok()
                || (ipython_frame(t).is_some() && lines.get(i + 1).is_some_and(|n| ipython_source(n))));
        if !(header || headless) {
            if !t.is_empty() && pending != Link::Start && !t.starts_with('[') {
                // Text between a separator and the next header: the chain is broken.
                pending = Link::Start;
            }
            i += 1;
            continue;
        }
        let link = if out.is_empty() { Link::Start } else { pending };
        let me = out.len();
        i = parse_one(lines, i, header, link, &mut out, layout);
        if !header {
            exception_above(&mut out[me], lines, layout.classes);
        }
        pending = Link::Start;
    }
    if let Some(t) = out.last_mut() {
        raised_by_last_frame(t, lines);
    }
    out
}

/// How far above its frames a header naming their exception may be: a debugger's
/// header and its message, or a report's class and message bullets, a heading and
/// blank lines.
const EXCEPTION_HEADER_REACH: usize = 8;

/// A headless traceback under a header that names its exception, as a tool that caught
/// it prints: a debugger's panel, VS Code's `Exception has occurred: RuntimeError` (or
/// `发生异常: RuntimeError`), the message, then the frames innermost first (they are put
/// outermost first, as every traceback's are); or an error report, ComfyUI's
/// `- **Exception Type:** RuntimeError` and `- **Exception Message:** ...` bullets, then
/// `## Stack Trace` and the frames. The header and message are its exception when no
/// exception line follows the frames.
fn exception_above(t: &mut Traceback, lines: &[&str], classes: &[String]) {
    use super::raised::{debugger_class, labelled_class, labelled_message};
    let from = t.start.saturating_sub(EXCEPTION_HEADER_REACH);
    let Some((k, class)) = (from..t.start).rev().find_map(|k| labelled_class(lines[k], classes).map(|c| (k, c))) else {
        return;
    };
    let between = &lines[k + 1..t.start];
    let (message, last) = if debugger_class(lines[k], classes).is_some() {
        // The panel: the message, then the frames at once.
        if between.iter().any(|l| l.trim().is_empty()) {
            return;
        }
        t.frames.reverse();
        let message: Vec<&str> = between.iter().map(|l| l.trim()).collect();
        (message.join(" "), if between.is_empty() { k } else { t.start - 1 })
    } else {
        // A report: the message's own bullet next, then only headings, fences and blanks.
        let Some(message) = between.first().and_then(|l| labelled_message(l)) else { return };
        let layout = |l: &&str| {
            let l = l.trim();
            l.is_empty() || l.starts_with('#') || l.starts_with("```")
        };
        if !between[1..].iter().all(layout) {
            return;
        }
        (message, k + 1)
    };
    if t.exception.is_none() {
        t.exception = Some(Exception { class, message, first: k, last });
        t.start = k;
    }
}

/// Lines a pytest failure may span; a longer one is read as what it shows.
const PYTEST_REACH: usize = 4096;

/// pytest's report of one failed test, in its long (default) or short (`--tb=short`)
/// form, as one traceback. Its header is the test's name between underscores; each
/// frame is a block of source, the line that ran marked `>`, and a location line
/// `path.py:18: ` (long form; the last one ends with the class) or a location line
/// `path.py:18: in test_x` with the source below (short form); the exception is on the
/// `E   ` lines. Every line of the blocks is code, so what they quote (a `raise` of
/// another message) is never read as a message. Returns the line after it, or `None`
/// when line `i` does not begin one.
fn pytest_failure(lines: &[&str], i: usize, out: &mut Vec<Traceback>) -> Option<usize> {
    if !is_pytest_header(lines[i]) {
        return None;
    }
    let mut frames: Vec<Frame> = Vec::new();
    let mut exception: Option<Exception> = None;
    // First line of the block being read, and its `>` line.
    let mut block = i + 1;
    let mut marked: Option<String> = None;
    let mut last_code: Option<String> = None;
    let mut j = i + 1;
    let mut end = i;
    let stop = lines.len().min(i.saturating_add(PYTEST_REACH));
    while j < stop {
        let raw = lines[j];
        let t = raw.trim();
        if is_pytest_header(raw) || t.starts_with("====") {
            break;
        }
        if let Some(e) = raw.strip_prefix('E').filter(|e| e.is_empty() || e.starts_with(' ')) {
            let e = e.trim();
            match exception.as_mut() {
                Some(x) if x.last + 1 == j => {
                    x.message = format!("{} {e}", x.message).trim().to_string();
                    x.last = j;
                }
                None => {
                    if let Some((class, message)) = exception_line(e).filter(|(c, _)| is_exception_class_name(c)) {
                        exception = Some(Exception {
                            class: class.to_string(),
                            message: message.to_string(),
                            first: j,
                            last: j,
                        });
                    }
                }
                Some(_) => {}
            }
            end = j;
        } else if let Some((file, line, func)) = pytest_location(t) {
            let short = func.is_some();
            let code = if short {
                lines.get(j + 1).filter(|n| n.starts_with([' ', '\t'])).map(|n| n.trim().to_string())
            } else {
                // pytest prints a function's source up to the line that ran: the marked
                // one, or the last when a cleaner took the `>` for a quote mark.
                marked.take().or(last_code.take())
            };
            frames.push(Frame { file, line: Some(line), func, code, at: if short { j } else { block } });
            block = j + 1;
            last_code = None;
            end = j;
        } else if t.chars().all(|c| c == '_' || c == ' ') && !t.is_empty() {
            // `_ _ _ _`: the next frame's block begins.
            block = j + 1;
            last_code = None;
            end = j;
        } else if let Some(code) = raw.strip_prefix('>') {
            marked = Some(code.trim().to_string());
            end = j;
        } else if !t.is_empty() {
            last_code = Some(t.to_string());
            end = j;
        }
        j += 1;
    }
    if frames.is_empty() && exception.is_none() {
        return None;
    }
    let chain = out.len();
    out.push(Traceback { start: i, end, frames, exception, link: Link::Start, chain });
    Some(end + 1)
}

/// pytest's line above a failed test's report: its name between runs of underscores
/// (`____ test_wrapper ____`, `____ TestX.test_y[cpu] ____`).
fn is_pytest_header(l: &str) -> bool {
    let t = l.trim();
    let runs = t.starts_with("___") && t.ends_with("___");
    let spaced = t.trim_start_matches('_').starts_with(' ') && t.trim_end_matches('_').ends_with(' ');
    let name = t.trim_matches('_').trim();
    runs && spaced && !name.is_empty() && !name.contains(' ')
}

/// A pytest location line: `path.py:18: ` or `path.py:310: AssertionError` (long form),
/// `path.py:18: in test_x` (short form, the function given).
fn pytest_location(t: &str) -> Option<(String, u32, Option<String>)> {
    let (head, tail) = match t.split_once(": ") {
        Some((h, r)) => (h, r.trim()),
        None => (t.strip_suffix(':')?, ""),
    };
    let (file, line) = head.rsplit_once(':')?;
    let path_ok = !file.is_empty() && !file.contains(' ') && (file.ends_with(".py") || file.contains('/'));
    let line: u32 = line.parse().ok()?;
    if !path_ok {
        return None;
    }
    match tail.strip_prefix("in ") {
        Some(func) if !func.contains(' ') => Some((file.to_string(), line, Some(func.to_string()))),
        Some(_) => None,
        None if tail.is_empty() || is_exception_class_name(tail) => Some((file.to_string(), line, None)),
        None => None,
    }
}

/// A paste cut right after the frame that raised: the last traceback of the lines, with
/// no exception line and nothing after it, whose last frame shows
/// `raise Class("a whole literal")`. That statement is what was raised, so its class and
/// literal are the exception (the line is read as its message, not as a frame's code).
/// A formatted message (`f"..."`, `"...".format(x)`, `"..." % x`) is not, its values
/// unknown.
fn raised_by_last_frame(t: &mut Traceback, lines: &[&str]) {
    if t.exception.is_some() || lines[t.end + 1..].iter().any(|l| !l.trim().is_empty()) {
        return;
    }
    let Some(f) = t.frames.last() else { return };
    let at = f.at + 1;
    let Some((class, message)) = lines.get(at).and_then(|l| raise_literal(l)) else { return };
    if at > t.end || f.code.as_deref().map(str::trim) != lines.get(at).map(|l| l.trim()) {
        return;
    }
    t.exception = Some(Exception { class: class.to_string(), message: message.to_string(), first: at, last: at });
}

/// `raise Class("literal")` (or `'literal'`), the call closed right after the literal:
/// the class and the literal.
pub(crate) fn raise_literal(code: &str) -> Option<(&str, &str)> {
    let rest = code.trim().strip_prefix("raise ")?;
    let (class, arg) = rest.split_once('(')?;
    let class = class.trim();
    let name_ok = !class.is_empty() && class.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    let last = class.rsplit('.').next().unwrap_or(class);
    if !name_ok || !last.starts_with(|c: char| c.is_ascii_uppercase()) {
        return None;
    }
    let q = arg.chars().next().filter(|c| matches!(c, '"' | '\''))?;
    let body = &arg[1..];
    let end = body.find(q)?;
    let message = &body[..end];
    let closed = body[end + 1..].trim_start().starts_with(')');
    (closed && !message.trim().is_empty() && !message.contains('\\')).then_some((class, message))
}

/// Parses one traceback (and any nested ones) starting at `start`; returns the index
/// of the first line after it.
fn parse_one(
    lines: &[&str],
    start: usize,
    header: bool,
    link: Link,
    out: &mut Vec<Traceback>,
    layout: &Layout<'_>,
) -> usize {
    let chain = match link {
        Link::Start => out.len(),
        _ => out.last().map(|t| t.chain).unwrap_or(out.len()),
    };
    let me = out.len();
    out.push(Traceback { start, end: start, frames: Vec::new(), exception: None, link, chain });
    let mut i = if header { start + 1 } else { start };
    // A traceback pasted indented (a markdown code block, a list item, a log that indents
    // what it quotes) is read relative to its header, or to its first frame's `File`.
    let base = if header { indent(lines[start]) } else { indent(lines[start]).saturating_sub(2) };
    let ipython = header
        && !lines[start].trim_start().starts_with("Traceback")
        && !lines[start].contains("Original Traceback")
        && !lines[start].contains(": Traceback");
    // IPython and loguru/better_exceptions separate frames with blank lines; CPython never
    // does, so a blank line followed by a frame switches to that looser layout.
    let mut loose = ipython || (!header && python_frame(lines[start].trim()).is_err());
    let mut frames: Vec<Frame> = Vec::new();
    let mut exception = None;
    let mut end = start;
    while i < lines.len() {
        let raw = dedent(lines[i], base);
        let t = raw.trim();
        if t.is_empty() {
            // Every blank line of a run sees the same next line: decide once for the run
            // and step over it (looking ahead from each blank was quadratic in the run).
            let next = (i + 1..lines.len()).find(|&j| !lines[j].trim().is_empty());
            if next.is_some_and(|j| {
                let n = lines[j].trim();
                python_frame(strip_frame_marker(n)).is_ok() || ipython_frame(n).is_some() || is_collapsed_frames(n)
            }) {
                loose = true;
            }
            // A blank line between the last frame and the exception line (a paste that
            // spaced them out) does not end the traceback either.
            let exception_next = next.is_some_and(|j| exception_line(lines[j].trim()).is_some());
            if loose || frames.is_empty() || exception_next {
                i = next.unwrap_or(lines.len());
                continue;
            }
            break;
        }
        // Colab folds library frames into a `5 frames` line.
        if loose && is_collapsed_frames(t) {
            end = i;
            i += 1;
            continue;
        }
        let single = python_frame(strip_frame_marker(t)).ok().map(|(_, f)| f);
        // A wrap can cut a frame line anywhere, even after its line number or inside
        // its function name (`in b` / `ackward`: the tail is one word at the margin).
        let cut_func = single.as_ref().is_some_and(|f| f.func.is_some())
            && t.chars().count() >= MIN_WRAPPED_FRAME
            && lines.get(i + 1).is_some_and(|n| {
                !n.starts_with([' ', '\t'])
                    && !n.trim().is_empty()
                    && !n.trim().contains(' ')
                    && exception_line(n.trim()).is_none()
            })
            && lines.get(i + 2).is_some_and(|n| goes_on(n));
        let wrapped = if single.as_ref().is_none_or(|f| f.func.is_none()) || cut_func {
            lines.get(i + 1).and_then(|next| wrapped_frame(t, next)).filter(|f| single.is_none() || f.func.is_some())
        } else {
            None
        };
        if let Some(f) = wrapped {
            frames.push(Frame { at: i, ..f });
            end = i + 1;
            i += 2;
            continue;
        }
        if let Some(f) = single {
            frames.push(Frame { at: i, ..f });
            end = i;
            i += 1;
            continue;
        }
        // An IPython frame header a terminal cut inside its argument list
        // (`module.py in __call__(self, *input, **k` / `wargs)`): the rest is at the margin.
        if loose && t.chars().count() >= MIN_WRAPPED_FRAME && t.matches('(').count() > t.matches(')').count() {
            let next = lines.get(i + 1).map(|n| n.trim_end()).filter(|n| !n.is_empty() && !n.starts_with([' ', '\t']));
            let joined = next.map(|n| format!("{t}{n}")).filter(|j| j.ends_with(')'));
            if let Some(f) = joined.as_deref().and_then(ipython_frame) {
                frames.push(Frame { at: i, ..f });
                end = i + 1;
                i += 2;
                continue;
            }
        }
        if let Some(f) = ipython_frame(t) {
            let wrapped_func = f.func.is_none() && t.ends_with(" in");
            frames.push(Frame { at: i, ..f });
            end = i;
            i += 1;
            // The function name the wrap pushed onto the next line.
            if wrapped_func {
                if let Some(next) = lines.get(i).map(|l| l.trim()).filter(|n| !n.is_empty() && !n.contains(' ')) {
                    if let Some(f) = frames.last_mut() {
                        f.func = Some(next.to_string());
                    }
                    end = i;
                    i += 1;
                }
            }
            continue;
        }
        if let Some(code) = ipython_code(raw) {
            // `---> 43     outputs = model(inputs)` marks the line that ran.
            if let (Some(code), Some(f)) = (code, frames.last_mut()) {
                f.code = Some(code);
                // An old IPython frame (`path in f(x)`) prints no line number but
                // the arrow's.
                f.line = f.line.or_else(|| arrow_line(raw));
            }
            end = i;
            i += 1;
            continue;
        }
        // loguru/better_exceptions variable trees under a source line (`│  └ tensor(...)`;
        // the cleaner already took the first `│` for a Rich box border).
        let tree = !frames.is_empty() && (t.starts_with('│') || t.starts_with('└'));
        if t.starts_with("[Previous line repeated") || is_caret(t) || t == "..." || tree {
            end = i;
            i += 1;
            continue;
        }
        if (raw.starts_with("    ") || raw.starts_with('\t')) && !frames.is_empty() {
            // Source line under a CPython frame (4 spaces, or more inside Rich boxes).
            if let Some(f) = frames.last_mut() {
                if f.code.is_none() {
                    f.code = Some(t.to_string());
                }
            }
            end = i;
            i += 1;
            continue;
        }
        if let Some((class, msg)) = exception_line(t) {
            let (message, last, next, user_code) = message_body(lines, i, msg, out, me, layout, false);
            frames.extend(user_code);
            exception = Some(Exception { class: class.to_string(), message, first: i, last });
            end = last.max(end);
            i = next;
            break;
        }
        // Indentation lost (a forum or chat paste): the frame's `File` line sits at the
        // margin, and so does its source line right under it.
        if let Some(f) = frames.last_mut().filter(|f| f.at + 1 == i && f.code.is_none() && indent(lines[f.at]) <= base)
        {
            if !is_header(t) && !t.starts_with(CAUSE) && !t.starts_with(CONTEXT) {
                f.code = Some(t.to_string());
                end = i;
                i += 1;
                continue;
            }
        }
        // A source line cut by a terminal hard wrap: its tail sits at the left margin.
        if end + 1 == i && code_wrapped_at(lines, i) {
            if let Some(code) = frames.last_mut().and_then(|f| f.code.as_mut()) {
                code.push_str(lines[i].trim_end());
                end = i;
                i += 1;
                continue;
            }
        }
        break;
    }
    let tb = &mut out[me];
    tb.frames = frames;
    tb.exception = exception;
    tb.end = end.max(tb.end);
    i.max(start + 1)
}

/// Collects an exception's message: the rest of its line, then the lines that belong to
/// it ([`Layout::continues`]), up to a blank line (unless one of the message's own tails
/// follows it), a new traceback or a chaining separator. A DataLoader
/// `Original Traceback` inside the message (any traceback under a `frameless` one) is
/// parsed as a nested traceback.
fn message_body(
    lines: &[&str],
    at: usize,
    first: &str,
    out: &mut Vec<Traceback>,
    me: usize,
    layout: &Layout<'_>,
    frameless: bool,
) -> (String, usize, usize, Vec<Frame>) {
    let _ = me;
    // `Class:` with nothing after it (torchrun's `ChildFailedError:` summary): the
    // message is the block below, every line up to a blank one.
    let block = first.trim().is_empty() && lines[at].trim_end().ends_with(':');
    let mut msg = first.to_string();
    let mut last = at;
    let mut i = at + 1;
    // dynamo's `from user code:` block: the user's frames where tracing failed.
    let mut user_code: Vec<Frame> = Vec::new();
    let mut in_user_code = false;
    // torch <= 1.1 re-raised a DataLoader worker's error with the worker's whole
    // traceback as the message (`RuntimeError: Traceback (most recent call last):`):
    // that traceback is nested in this one, as `Original Traceback` is today.
    if is_header(first) {
        i = parse_one(lines, at, true, Link::Nested, out, layout);
        last = out.last().map(|tb| tb.end).unwrap_or(at).max(at);
    }
    while i < lines.len() && i - at < MAX_MESSAGE_LINES {
        let t = lines[i].trim();
        // A REPL prompt (`>>> `) after the message is the next command, not more message.
        if t.starts_with(CAUSE) || t.starts_with(CONTEXT) || t.starts_with(">>>") {
            break;
        }
        if t.is_empty() {
            let next = (i + 1..lines.len().min(i + 4)).find(|&j| !lines[j].trim().is_empty());
            match next {
                Some(j) if layout.is_tail_after_blank(lines[j].trim()) => {
                    msg.push('\n');
                    i = j;
                    continue;
                }
                _ => break,
            }
        }
        if is_header(t) {
            // A worker's traceback inside the message: DataLoader's `Original Traceback`,
            // or any traceback printed right under a frameless exception (a distributed
            // checkpoint's per-rank `Traceback (most recent call last): (RANK 0)`).
            if t.starts_with("Original Traceback") || frameless {
                let next = parse_one(lines, i, true, Link::Nested, out, layout);
                last = out.last().map(|tb| tb.end).unwrap_or(i);
                i = next;
                continue;
            }
            break;
        }
        if t.starts_with("from user code:") {
            in_user_code = true;
        } else if in_user_code {
            if let Ok((_, f)) = python_frame(t) {
                user_code.push(Frame { at: i, ..f });
                last = i;
                i += 1;
                continue;
            }
            if lines[i].starts_with([' ', '\t']) {
                if let Some(f) = user_code.last_mut().filter(|f| f.code.is_none()) {
                    f.code = Some(t.to_string());
                    last = i;
                    i += 1;
                    continue;
                }
            }
        }
        if !(block && !layout.headed(i) || layout.continues(lines, i, at)) {
            break;
        }
        msg.push('\n');
        msg.push_str(lines[i].trim_end());
        last = i;
        i += 1;
    }
    (msg, last, i, user_code)
}

/// A frame line a terminal hard-wrapped (`File "/opt/.../module.py", line` then
/// ` 1098, in cuda`): the two lines joined, with or without the space a wrap at a word
/// boundary may have eaten. Only for a line as long as a terminal's width.
fn wrapped_frame(t: &str, next: &str) -> Option<Frame> {
    if t.len() < MIN_WRAPPED_FRAME || !strip_frame_marker(t).starts_with("File ") {
        return None;
    }
    let next = next.trim_end();
    if next.trim().is_empty() || next.trim_start().starts_with("File ") {
        return None;
    }
    let t = strip_frame_marker(t);
    [format!("{t}{next}"), format!("{t} {}", next.trim_start())]
        .iter()
        .find_map(|joined| python_frame(joined).ok().filter(|(rest, _)| rest.trim().is_empty()).map(|(_, f)| f))
}

/// Whether line `i` is the tail of the source line before it, cut by a terminal hard
/// wrap: the line before is as long as a terminal row, and the traceback goes on
/// after the tail (carets, a frame, a source line or the exception), so a line that
/// ends the traceback is never taken for one.
fn code_wrapped_at(lines: &[&str], i: usize) -> bool {
    let Some(prev) = i.checked_sub(1).map(|p| lines[p]) else { return false };
    prev.trim_end().chars().count() >= MIN_WRAPPED_FRAME
        && !lines[i].trim().is_empty()
        && lines.get(i + 1).is_some_and(|n| goes_on(n))
}

/// Whether a line continues a traceback: carets, a frame, a source line or the exception.
fn goes_on(line: &str) -> bool {
    let t = line.trim();
    is_caret(t)
        || python_frame(strip_frame_marker(t)).is_ok()
        || line.starts_with("    ")
        || exception_line(t).is_some()
}

/// The shortest frame line taken for a terminal hard wrap (terminals are 80 columns or
/// more; the frame's indentation is not counted).
const MIN_WRAPPED_FRAME: usize = 60;

/// Leading spaces and tabs of a line.
fn indent(l: &str) -> usize {
    l.len() - l.trim_start_matches([' ', '\t']).len()
}

/// `l` without up to `n` leading spaces or tabs.
fn dedent(l: &str, n: usize) -> &str {
    let k = indent(l).min(n);
    &l[k..]
}

/// loguru and better_exceptions mark the frame that caught the exception with `> `.
fn strip_frame_marker(t: &str) -> &str {
    t.strip_prefix("> ").map(str::trim_start).unwrap_or(t)
}

/// Colab's fold of library frames: `5 frames`.
fn is_collapsed_frames(t: &str) -> bool {
    t.strip_suffix(" frames")
        .or_else(|| t.strip_suffix(" frame"))
        .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()) && !n.is_empty())
}

/// The C++ type in `terminate called after throwing an instance of 'c10::DistBackendError'`
/// (the line before a `what():` block), without its namespace.
pub fn terminate_class(line: &str) -> Option<&str> {
    let rest = line.trim().strip_prefix("terminate called after throwing an instance of '")?;
    let ty = rest.strip_suffix('\'')?;
    let short = ty.rsplit("::").next().unwrap_or(ty);
    (!short.is_empty() && short.chars().all(|c| c.is_alphanumeric() || c == '_')).then_some(short)
}

/// Caret lines (3.11+) and the borders of Rich boxes carry no frame or message.
fn is_caret(t: &str) -> bool {
    !t.is_empty() && t.chars().all(|c| matches!(c, '^' | '~' | ' ' | '─' | '╰' | '╯' | '╭' | '╮' | '│'))
}

/// `File "path", line N, in func` (func optional for truncated pastes).
fn python_frame(i: &str) -> IResult<&str, Frame> {
    let (rest, (_, _, file, _, _, _, line, func)) = (
        tag("File"),
        space0,
        alt((
            nom::sequence::delimited(char('"'), take_till(|c| c == '"'), char('"')),
            // Colab/VS Code: `File [~/x.py:73](http://...)` is handled by ipython_frame.
            nom::sequence::delimited(char('\''), take_till(|c| c == '\''), char('\'')),
        )),
        char(','),
        space0,
        tag("line "),
        digit1,
        opt(nom::sequence::preceded((char(','), space0, tag("in"), space0), take_till(|c| c == '\n'))),
    )
        .parse(i)?;
    Ok((
        rest,
        Frame {
            file: file.to_string(),
            line: line.parse().ok(),
            func: func.map(|f| f.trim().to_string()).filter(|f| !f.is_empty()),
            code: None,
            at: 0,
        },
    ))
}

/// IPython/Jupyter frame lines:
/// `File /path/x.py:43`, `File /path/x.py:1787, in Module._call_impl(self)`,
/// `File [~/x.py:73](http://host/lab/tree/x.py#line=72), in f(x)`, `Cell In[3], line 7`,
/// `Cell In[3], line 7, in f()`, `<ipython-input-36-abc> in <module>`,
/// `/path/x.py in forward(self, x)`.
fn ipython_frame(t: &str) -> Option<Frame> {
    if let Ok((_, (_, _, cell, _, line, rest))) = (
        tag::<&str, &str, nom::error::Error<&str>>("Cell "),
        space0,
        take_until(","),
        tag(", line "),
        digit1,
        take_till(|c| c == '\n'),
    )
        .parse(t)
    {
        let func = rest.strip_prefix(", in ").map(|f| f.trim().to_string());
        return Some(Frame { file: cell.trim().to_string(), line: line.parse().ok(), func, code: None, at: 0 });
    }
    if let Some(after) = t.strip_prefix("File ") {
        let (path_part, func) = match after.find(", in ") {
            Some(p) => (&after[..p], Some(after[p + 5..].trim().to_string())),
            None => (after, None),
        };
        // Markdown link form: `[~/x.py:73](http://...)`.
        let path_part = if let Some(inner) = path_part.strip_prefix('[') {
            inner.split("](").next().unwrap_or(inner)
        } else {
            path_part
        };
        let (file, line) = path_part.rsplit_once(':')?;
        let line: u32 = line.trim().parse().ok()?;
        if file.is_empty() || file.contains('"') {
            return None;
        }
        return Some(Frame { file: file.to_string(), line: Some(line), func, code: None, at: 0 });
    }
    // Rich: `/home/u/train.py:57 in <module>` (the box already stripped); a long
    // path pushes the function name onto the next line (`...module.py:1553 in`).
    let rich = t.strip_suffix(" in").map(|loc| (loc, "")).or_else(|| t.split_once(" in "));
    if let Some((loc, func)) = rich {
        if let Some((file, line)) = loc.rsplit_once(':') {
            if let Ok(line) = line.parse::<u32>() {
                if !file.contains(' ') && (file.contains('/') || file.contains('\\') || file.ends_with(".py")) {
                    let func = Some(func.trim().to_string()).filter(|f| !f.is_empty());
                    return Some(Frame { file: file.to_string(), line: Some(line), func, code: None, at: 0 });
                }
            }
        }
    }
    if t.starts_with("<ipython-input-") || (t.contains(" in ") && (t.ends_with(')') || t.ends_with("<module>"))) {
        let (file, func) = t.split_once(" in ")?;
        let file = file.trim();
        if file.contains(' ') || !(file.starts_with('<') || file.contains('/') || file.contains('\\')) {
            return None;
        }
        let file = file.trim_start_matches('[').split("](").next().unwrap_or(file);
        // Colab names the cell's line in place of a function: `in <cell line: 48>()`.
        let line =
            func.trim().strip_prefix("<cell line: ").and_then(|r| r.split('>').next()).and_then(|n| n.parse().ok());
        return Some(Frame { file: file.to_string(), line, func: Some(func.trim().to_string()), code: None, at: 0 });
    }
    None
}

/// IPython code context lines: `---> 43     code` (returns Some(Some(code))),
/// `     41 code` (context, Some(None)).
/// An IPython source line under its frame: `     24     h = f(x)` or `---> 26 y = g(h)`.
fn ipython_source(raw: &str) -> bool {
    let t = raw.trim_start();
    ipython_code(raw).is_some()
        || t.split_once(' ').is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The line number an IPython arrow points at: `----> 1 model.train(` gives 1.
fn arrow_line(raw: &str) -> Option<u32> {
    let t = raw.trim_start();
    let after = t.strip_prefix("-")?.trim_start_matches('-').strip_prefix('>')?.trim_start();
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

fn ipython_code(raw: &str) -> Option<Option<String>> {
    let t = raw.trim_start();
    if t.starts_with("->") || t.starts_with("--") || t.starts_with('❱') {
        let after = t.trim_start_matches('-').trim_start_matches('❱').trim_start_matches('>').trim_start();
        let (rest, _) = digit1::<&str, nom::error::Error<&str>>(after).ok()?;
        // Rich separates the number and the code with `│`.
        // (and marks indentation with more of them).
        let rest = rest.trim_start_matches(|c: char| c == '│' || c.is_whitespace());
        return Some(Some(rest.trim().to_string()));
    }
    // Rich context lines: `54 │ code`.
    if let Ok((rest, _)) = digit1::<&str, nom::error::Error<&str>>(t) {
        if rest.trim_start().starts_with('│') {
            return Some(None);
        }
    }
    // Context lines: leading spaces, a line number, then code.
    if raw.starts_with(' ') {
        if let Ok((rest, _)) = digit1::<&str, nom::error::Error<&str>>(t) {
            if rest.starts_with(' ') || rest.is_empty() {
                return Some(None);
            }
        }
    }
    None
}

/// `pkg.mod.SomeError: message` or a bare `SomeError`. Returns (class, message).
pub fn exception_line(t: &str) -> Option<(&str, &str)> {
    // Markdown emphasis and blockquotes around a pasted exception line.
    let t = t.trim_start_matches(['*', '>', ' ']);
    let t = t.strip_prefix("_*").map(|x| x.trim_start_matches('*')).unwrap_or(t);
    let (rest, class) = take_while1::<_, &str, nom::error::Error<&str>>(|c: char| {
        c.is_alphanumeric() || c == '_' || c == '.' || c == ':'
    })
    .parse(t)
    .ok()?;
    let class = class.trim_end_matches(':');
    let looks_like_class = class.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && class
            .rsplit('.')
            .next()
            .is_some_and(|last| last.chars().next().is_some_and(|c| c.is_ascii_uppercase()) || last.starts_with('_'));
    // `ERROR: ...`, `NCCL WARN`: log levels and shouting, not exception classes.
    if !looks_like_class || !class.chars().any(|c| c.is_ascii_lowercase()) {
        return None;
    }
    if let Some(msg) = t[class.len()..].strip_prefix(':') {
        return Some((class, msg.strip_prefix(' ').unwrap_or(msg).trim_end()));
    }
    if rest.trim().is_empty()
        && (class.ends_with("Error")
            || class.ends_with("Exception")
            || class.ends_with("Interrupt")
            || class.ends_with("Exit"))
    {
        return Some((class, ""));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(s: &str) -> Vec<Traceback> {
        let lines: Vec<&str> = s.lines().collect();
        parse(&lines)
    }

    #[test]
    fn cpython_311_with_carets() {
        let tbs = parse_text(
            "Traceback (most recent call last):\n  File \"/home/u/train.py\", line 42, in <module>\n    loss = loss_fn(out, labels)\n           ^^^^^^^^^^^^^^^^^^^^\n  File \"/opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py\", line 1787, in _wrapped_call_impl\n    return self._call_impl(*args, **kwargs)\nRuntimeError: Expected all tensors \nto be on the same device\nepoch 3 loss 0.1\n\nnext",
        );
        assert_eq!(tbs.len(), 1);
        let tb = &tbs[0];
        assert_eq!(tb.frames.len(), 2);
        assert_eq!(tb.user_frame().unwrap().short(), "train.py:42");
        assert_eq!(tb.user_frame().unwrap().code.as_deref(), Some("loss = loss_fn(out, labels)"));
        let e = tb.exception.as_ref().unwrap();
        assert_eq!(
            (e.class.as_str(), e.message.as_str()),
            ("RuntimeError", "Expected all tensors\nto be on the same device")
        );
        assert_eq!((e.first, e.last), (6, 7));
    }

    #[test]
    fn frames_and_source_lines_at_the_margin() {
        // A forum paste that lost every indentation, with and without its header.
        let body = "File \"file.py\", line 71, in optimizer_step\noptimizer.step()\nFile \".../site-packages/transformers/optimization.py\", line 155, in step\nexp_avg.mul_(beta1).add_(grad, alpha=1.0 - beta1)\nRuntimeError: expected device cuda:0 but got device cpu\n";
        for text in [body.to_string(), format!("Traceback (most recent call last):\n{body}")] {
            let tbs = parse_text(&text);
            assert_eq!(tbs.len(), 1, "{text}");
            let tb = &tbs[0];
            assert_eq!(tb.frames.len(), 2);
            assert_eq!(tb.user_frame().unwrap().short(), "file.py:71");
            assert_eq!(tb.user_frame().unwrap().code.as_deref(), Some("optimizer.step()"));
            assert_eq!(tb.exception.as_ref().unwrap().class, "RuntimeError");
        }
    }

    #[test]
    fn raise_literals() {
        let table: &[(&str, Option<(&str, &str)>)] = &[
            (
                r#"    raise AssertionError("Torch not compiled with CUDA enabled")"#,
                Some(("AssertionError", "Torch not compiled with CUDA enabled")),
            ),
            (
                r#"raise torch.cuda.OutOfMemoryError('out of memory')"#,
                Some(("torch.cuda.OutOfMemoryError", "out of memory")),
            ),
            (r#"raise ValueError(f"expected {n} classes")"#, None),
            (r#"raise ValueError("expected {} classes".format(n))"#, None),
            (r#"raise ValueError("bad value: %s" % v)"#, None),
            (r#"raise ValueError("a "quoted" word")"#, None),
            (r#"raise ChildFailedError("#, None),
            (r#"raise ChildFailedError(name=name, failures=failures)"#, None),
            (r#"raise err("lowercase is a variable")"#, None),
            (r#"raise RuntimeError("Torch not compiled with C"#, None),
            (r#"return F.linear(input, self.weight)"#, None),
        ];
        for (code, want) in table {
            assert_eq!(raise_literal(code), *want, "{code}");
        }
    }

    #[test]
    fn a_paste_cut_after_the_raising_frame_takes_its_literal() {
        let cut = "Traceback (most recent call last):\n  File \"train.py\", line 10, in <module>\n    model.cuda()\n  File \"/usr/lib/python3/site-packages/torch/cuda/__init__.py\", line 210, in _lazy_init\n    raise AssertionError(\"Torch not compiled with CUDA enabled\")\n\n";
        let tbs = parse_text(cut);
        let e = tbs[0].exception.as_ref().expect("the raise is the exception");
        assert_eq!(
            (e.class.as_str(), e.message.as_str(), e.first),
            ("AssertionError", "Torch not compiled with CUDA enabled", 4)
        );
        assert_eq!(tbs[0].frames.len(), 2);
        // Something after it: the traceback was not cut there (a stack printed on purpose).
        let tbs = parse_text(&format!("{cut}epoch 2 step 10\n"));
        assert!(tbs[0].exception.is_none());
        // Not the last frame's statement: its code is a call, not a raise.
        let tbs = parse_text(
            "Traceback (most recent call last):\n  File \"train.py\", line 10, in <module>\n    model.cuda()\n",
        );
        assert!(tbs[0].exception.is_none());
    }

    #[test]
    fn chains_and_nesting() {
        let tbs = parse_text(
            "Traceback (most recent call last):\n  File \"a.py\", line 1, in f\n    x()\nKeyError: 'a'\n\nDuring handling of the above exception, another exception occurred:\n\nTraceback (most recent call last):\n  File \"a.py\", line 3, in g\n    f()\nKeyError: Caught KeyError in DataLoader worker process 0.\nOriginal Traceback (most recent call last):\n  File \"/opt/venv/lib/python3.11/site-packages/torch/utils/data/_utils/worker.py\", line 349, in _worker_loop\n    data = fetcher.fetch(index)\n  File \"/home/u/ds.py\", line 20, in __getitem__\n    return self.rows[i]['label']\nKeyError: 'label'\n",
        );
        assert_eq!(tbs.len(), 3);
        assert_eq!(tbs[1].link, Link::Context);
        assert_eq!(tbs[1].chain, 0);
        assert_eq!(tbs[2].link, Link::Nested);
        assert_eq!(tbs[2].user_frame().unwrap().short(), "ds.py:20");
        assert_eq!(tbs[2].exception.as_ref().unwrap().message, "'label'");
        assert_eq!(tbs[1].exception.as_ref().unwrap().short_class(), "KeyError");
    }

    #[test]
    fn loguru_and_colab_layouts() {
        // loguru's `diagnose` tree: `> ` marks the catching frame, blank lines between
        // frames, variable trees under the source lines, a blank line before the message;
        // then the same after the cleaner took a tree line's first `│` for a box border.
        let trees = [
            ["    └ <function main at 0x7f>", "           │         └ tensor([3])", "           └ CrossEntropyLoss()"],
            ["└ <function main at 0x7f>", "│         └ tensor([3])", "└ CrossEntropyLoss()"],
        ];
        for [under_main, under_loss, last] in trees {
            let tbs = parse_text(&format!(
                "Traceback (most recent call last):\n\n> File \"/p/train.py\", line 92, in <module>\n    main()\n{under_main}\n\n  File \"/p/train.py\", line 71, in main\n    loss = criterion(logits, target)\n{under_loss}\n{last}\n\nRuntimeError: boom\n"
            ));
            assert_eq!(tbs.len(), 1);
            let tb = &tbs[0];
            assert_eq!(tb.frames.iter().map(|f| f.line).collect::<Vec<_>>(), [Some(92), Some(71)]);
            assert_eq!(tb.frames[1].code.as_deref(), Some("loss = criterion(logits, target)"));
            assert_eq!(tb.exception.as_ref().map(|x| x.message.as_str()), Some("boom"));
        }
        // Colab: `<cell line: N>` and a `5 frames` fold between the frames.
        let tbs = parse_text(
            "RuntimeError                              Traceback (most recent call last)\n<ipython-input-7-3f2a> in <cell line: 48>()\n     47     for xb, yb in loader:\n---> 48         out = model(xb)\n\n5 frames\n[/usr/lib/linear.py](https://localhost:8080/#) in forward(self, input)\n--> 114         return F.linear(input, self.weight, self.bias)\n\nRuntimeError: boom\n",
        );
        assert_eq!(tbs.len(), 1);
        let tb = &tbs[0];
        assert_eq!(tb.frames.len(), 2);
        assert_eq!((tb.frames[0].line, tb.frames[0].code.as_deref()), (Some(48), Some("out = model(xb)")));
        assert_eq!(tb.frames[1].file, "/usr/lib/linear.py");
        assert!(tb.exception.is_some());
        // A CPython traceback still ends at a blank line that no frame follows.
        let tbs = parse_text("Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n    f()\n\nsome other output\nValueError: later\n");
        assert!(tbs[0].exception.is_none());
        assert_eq!(
            terminate_class("terminate called after throwing an instance of 'c10::DistBackendError'"),
            Some("DistBackendError")
        );
        assert_eq!(
            terminate_class("terminate called after throwing an instance of 'std::runtime_error'"),
            Some("runtime_error")
        );
        assert_eq!(terminate_class("terminate called without an active exception"), None);
    }

    #[test]
    fn a_debugger_panel_lists_frames_innermost_first() {
        let lines = [
            "发生异常: RuntimeError",
            "mat1 and mat2 shapes cannot be multiplied (2708x7 and 256x256)",
            "  File \"/w/models/edcoder.py\", line 246, in mask_attr_prediction",
            "    rep = self.encoder_to_decoder(enc_rep)",
            "  File \"/w/main.py\", line 146, in <module>",
            "    main(args)",
        ];
        let tbs = parse(&lines);
        assert_eq!(tbs.len(), 1);
        let tb = &tbs[0];
        let x = tb.exception.as_ref().expect("the header and message are the exception");
        assert_eq!((x.class.as_str(), x.first, x.last), ("RuntimeError", 0, 1));
        assert!(x.message.starts_with("mat1 and mat2 shapes"));
        let order: Vec<Option<u32>> = tb.frames.iter().map(|f| f.line).collect();
        assert_eq!(order, [Some(146), Some(246)], "outermost first");
        assert_eq!(tb.user_frame().map(Frame::short).as_deref(), Some("edcoder.py:246"));
        // Without the debugger's header the same frames are a cut traceback, in the
        // order printed.
        let tbs = parse(&lines[1..]);
        assert_eq!(tbs[0].frames.first().and_then(|f| f.line), Some(246));
        assert!(tbs[0].exception.is_none());
        // The paste may end with the exception line too: the order is the panel's still.
        let mut with_line = lines.to_vec();
        with_line.push("RuntimeError: mat1 and mat2 shapes cannot be multiplied (2708x7 and 256x256)");
        let tbs = parse(&with_line);
        assert_eq!(tbs[0].user_frame().map(Frame::short).as_deref(), Some("edcoder.py:246"));
        assert_eq!(tbs[0].exception.as_ref().map(|x| x.first), Some(6));
    }

    #[test]
    fn an_error_report_names_the_exception_above_its_stack() {
        let lines = [
            "## Error Details",
            "- **Node Type:** VAEDecode",
            "- **Exception Type:** RuntimeError",
            "- **Exception Message:** Given groups=1, weight of size [4, 4, 1, 1], expected input[1, 16, 8, 8] to have 4 channels, but got 16 channels instead",
            "## Stack Trace",
            "",
            "  File \"/srv/ComfyUI/execution.py\", line 323, in execute",
            "    output_data = get_output_data(obj, input_data_all)",
            "",
            "  File \"/srv/ComfyUI/nodes.py\", line 284, in decode",
            "    images = vae.decode(samples[\"samples\"])",
        ];
        let tbs = parse(&lines);
        assert_eq!(tbs.len(), 1);
        let x = tbs[0].exception.as_ref().expect("the bullets are its exception");
        assert_eq!((x.class.as_str(), x.first, x.last), ("RuntimeError", 2, 3));
        assert!(x.message.starts_with("Given groups=1"));
        assert_eq!(tbs[0].user_frame().map(Frame::short).as_deref(), Some("nodes.py:284"), "in printed order");
        // Prose between the bullets and the stack: not the report's shape.
        let mut prose = lines.to_vec();
        prose[4] = "I tried three other workflows and updated everything.";
        assert!(parse(&prose)[0].exception.is_none());
    }

    #[test]
    fn a_pytest_failure_is_one_traceback() {
        let long = "______________________ test_wrapper ______________________\n\n    def test_wrapper():\n        lr = 0.3\n>       w = torch.randn(3, 2).cuda()\n\ntests/test_opt.py:18: \n_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _\n\n    def _lazy_init():\n        if _is_in_bad_fork():\n            raise RuntimeError(\n                \"Cannot re-initialize CUDA in forked subprocess. To use CUDA with \"\n            )\n>           raise AssertionError(\"Torch not compiled with CUDA enabled\")\nE           AssertionError: Torch not compiled with CUDA enabled\n\n/usr/lib/python3.11/site-packages/torch/cuda/__init__.py:310: AssertionError\n=========== short test summary info ===========\n";
        for (l, want) in [
            ("tests/test_opt.py:18: ", Some(("tests/test_opt.py", 18, None))),
            ("tests/test_opt.py:18: in test_wrapper", Some(("tests/test_opt.py", 18, Some("test_wrapper")))),
            ("/x/torch/cuda/__init__.py:310: AssertionError", Some(("/x/torch/cuda/__init__.py", 310, None))),
            ("train.py:18: loss went up", None),
            ("note: 18: x", None),
        ] {
            let got = pytest_location(l.trim());
            let got = got.as_ref().map(|(f, n, func)| (f.as_str(), *n, func.as_deref()));
            assert_eq!(got, want, "{l}");
        }
        let tbs = parse_text(long);
        assert_eq!(tbs.len(), 1, "{tbs:?}");
        let t = &tbs[0];
        let x = t.exception.as_ref().expect("the E line");
        assert_eq!(
            (x.class.as_str(), x.message.as_str(), x.first),
            ("AssertionError", "Torch not compiled with CUDA enabled", 15)
        );
        let f = t.user_frame().expect("the test is user code");
        assert_eq!(
            (f.short(), f.code.as_deref()),
            ("test_opt.py:18".to_string(), Some("w = torch.randn(3, 2).cuda()"))
        );
        assert_eq!(t.frames.len(), 2, "{:?}", t.frames);
        // Every line of the blocks lies before the exception, from the first block on.
        assert_eq!(t.frames.iter().map(|f| f.at).min(), Some(1));
        // A cleaner that read `>` as a quote mark leaves the line that ran last.
        let unquoted = long.replace(">       w =", "        w =");
        let tbs = parse_text(&unquoted);
        assert_eq!(tbs[0].user_frame().and_then(|f| f.code.as_deref()), Some("w = torch.randn(3, 2).cuda()"));
        let short = "___ test_wrapper ___\ntests/test_opt.py:18: in test_wrapper\n    w = torch.randn(3, 2).cuda()\n../torch/cuda/__init__.py:310: in _lazy_init\n    raise AssertionError(\"Torch not compiled with CUDA enabled\")\nE   AssertionError: Torch not compiled with CUDA enabled\n";
        let tbs = parse_text(short);
        assert_eq!(tbs.len(), 1);
        assert_eq!(tbs[0].frames[0].func.as_deref(), Some("test_wrapper"));
        assert_eq!(tbs[0].user_frame().map(Frame::short).as_deref(), Some("test_opt.py:18"));
        assert_eq!(tbs[0].exception.as_ref().map(|x| x.class.as_str()), Some("AssertionError"));
        // Underscores around words that are not a test's name begin nothing.
        for l in ["_ _ _ _ _ _", "____ not a header ____", "__init__", "___"] {
            assert!(!is_pytest_header(l), "{l}");
        }
    }

    #[test]
    fn frames_cut_by_a_terminal_wrap() {
        let long = "/home/kim/exp/.venv/lib/python3.12/site-packages/torch/_tensor.py";
        for (a, b, line, func) in [
            (format!("  File \"{long}\", line"), " 41, in wrapped", 41, "wrapped"),
            (format!("  File \"{long}\", line 61"), "6, in _lazy_init", 616, "_lazy_init"),
            (format!("  File \"{long}\", line 616"), ", in _lazy_init", 616, "_lazy_init"),
            (format!("  File \"{}", &long[..60]), &format!("{}\", line 7, in f", &long[60..]), 7, "f"),
            (format!("  File \"{long}\", line 623, in b"), "ackward", 623, "backward"),
        ] {
            let tbs = parse_text(&format!("Traceback (most recent call last):\n{a}\n{b}\n    code()\nValueError: x\n"));
            let f = &tbs[0].frames[0];
            assert_eq!((f.file.as_str(), f.line, f.func.as_deref()), (long, Some(line), Some(func)), "{a} / {b}");
            assert_eq!(f.code.as_deref(), Some("code()"));
            assert!(tbs[0].exception.is_some());
        }
        // A frame without its function, followed by its source line, is not a wrap.
        let tbs = parse_text(&format!(
            "Traceback (most recent call last):\n  File \"{long}\", line 3\n    x()\nValueError: x\n"
        ));
        assert_eq!((tbs[0].frames[0].func.as_deref(), tbs[0].frames[0].code.as_deref()), (None, Some("x()")));
        // A frame without source followed by a bare exception class is not a wrapped name.
        let tbs = parse_text(&format!(
            "Traceback (most recent call last):\n  File \"{long}\", line 3, in run\nKeyboardInterrupt\n    more()\n"
        ));
        assert_eq!(tbs[0].frames[0].func.as_deref(), Some("run"));
        assert_eq!(tbs[0].exception.as_ref().map(|e| e.class.as_str()), Some("KeyboardInterrupt"));
    }

    #[test]
    fn source_lines_cut_by_a_terminal_wrap() {
        let code =
            "return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass";
        let frame = "  File \"/home/u/train.py\", line 9, in step";
        // Cut at a space and inside a word (80 columns), with the carets wrapped too.
        for cut in [77, 80] {
            let (a, b) = code.split_at(cut - 4);
            let tbs = parse_text(&format!(
                "Traceback (most recent call last):\n{frame}\n    {a}\n{b}\n           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n^^^^^^^^^^^^^^^^^^^^\nRuntimeError: boom\n"
            ));
            assert_eq!(tbs[0].frames[0].code.as_deref(), Some(code), "cut at {cut}");
            assert_eq!(tbs[0].exception.as_ref().map(|e| e.message.as_str()), Some("boom"));
        }
        // A long source line followed by lines that do not go on with the traceback
        // (a truncated paste, then the program's own output) is not a wrap.
        let long = format!("    {}", &code[..70]);
        let tbs = parse_text(&format!(
            "Traceback (most recent call last):\n{frame}\n{long}\nepoch 3 done\nepoch 4 done\nRuntimeError: later\n"
        ));
        assert_eq!(tbs[0].frames[0].code.as_deref(), Some(long.trim()));
        assert!(tbs[0].exception.is_none());
    }

    #[test]
    fn ipython_frames() {
        let tbs = parse_text(
            "---------------------------------------------------------------------------\nRuntimeError                              Traceback (most recent call last)\nFile /home/u/script.py:43\n     41 for x in loader:\n---> 43     outputs = model(inputs)\n\nFile /opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py:1787, in Module._wrapped_call_impl(self)\n-> 1787     return self._call_impl(*args, **kwargs)\n\nCell In[3], line 7, in f()\n----> 7 y = x @ w\n\nRuntimeError: mat1 and mat2 shapes cannot be multiplied (4x3 and 4x5)\n",
        );
        assert_eq!(tbs.len(), 1);
        let f = tbs[0].user_frame().unwrap();
        assert_eq!((f.short(), f.code.as_deref()), ("In[3]:7".to_string(), Some("y = x @ w")));
        assert_eq!(tbs[0].frames[0].code.as_deref(), Some("outputs = model(inputs)"));
        assert!(tbs[0].exception.is_some());
    }

    #[test]
    fn an_old_ipython_frame_takes_its_line_from_the_arrow() {
        let tbs = parse_text("---------------------------------------------------------------------------\nRuntimeError                              Traceback (most recent call last)\n/tmp/ipykernel_118840/3049929526.py in <module>\n----> 1 model.fit(epochs=200,\n      2     lr=0.1,\n      3 )\n\n~/lib/python3.9/site-packages/torch/nn/modules/linear.py in forward(self, input)\n    113     def forward(self, input: Tensor) -> Tensor:\n--> 114         return F.linear(input, self.weight, self.bias)\n\nRuntimeError: expected scalar type Float but found Double\n");
        let f = tbs[0].user_frame().expect("the cell is user code");
        assert_eq!((f.short(), f.code.as_deref()), ("3049929526.py:1".to_string(), Some("model.fit(epochs=200,")));
        assert_eq!(tbs[0].frames[1].line, Some(114));
        assert_eq!(arrow_line("----> 12 x = y"), Some(12));
        assert_eq!(arrow_line("-> 1787     return self._call_impl()"), Some(1787));
        assert_eq!(arrow_line("      2     lr=0.1,"), None);
    }

    #[test]
    fn ipython_frame_header_cut_by_a_wrap() {
        let tbs = parse_text("---------------------------------------------------------------------------\nRuntimeError                              Traceback (most recent call last)\n<ipython-input-4-497ccf> in <module>()\n----> 1 c(x)\n\n~/lib/python3.7/site-packages/torch/nn/modules/module.py in __call__(self, *input, **k\nwargs)\n--> 477             result = self.forward(*input, **kwargs)\n\nRuntimeError: boom\n");
        assert_eq!(tbs.len(), 1);
        let t = &tbs[0];
        assert_eq!(t.frames.len(), 2, "{t:?}");
        assert_eq!(t.frames[1].func.as_deref(), Some("__call__(self, *input, **kwargs)"));
        assert_eq!(t.user_frame().and_then(|f| f.code.as_deref()), Some("c(x)"));
        assert_eq!(t.exception.as_ref().map(|x| x.message.as_str()), Some("boom"));
    }

    #[test]
    fn a_blank_line_before_the_exception_line_does_not_end_the_traceback() {
        let tbs = parse_text("Traceback (most recent call last):\n  File \"train.py\", line 12, in <module>\n    s = np.sum(grads)\n\nRuntimeError: Can't call numpy() on Tensor that requires grad.\n");
        assert_eq!(tbs.len(), 1);
        assert_eq!(tbs[0].user_frame().map(|f| f.short()), Some("train.py:12".to_string()));
        assert!(tbs[0].exception.as_ref().is_some_and(|x| x.class == "RuntimeError"));
        // Other text after the blank line still ends it.
        let tbs = parse_text("Traceback (most recent call last):\n  File \"train.py\", line 12, in <module>\n    f()\n\nsome other output\n");
        assert!(tbs[0].exception.is_none());
    }

    #[test]
    fn rich_box_traceback() {
        // As the cleaner leaves it: box borders removed.
        let tbs = parse_text("╭───────── Traceback (most recent call last) ─────────╮\n/home/u/proj/train.py:57 in <module>\n\n  54 │ model.train()\n❱ 57 │ loss = criterion(out, y)\n  58 │ loss.backward()\n\n/opt/py/lib/python3.11/site-packages/torch/nn/modules/module.py:1553 in _wrapped_call_impl\n\n❱ 1553 │ return self._call_impl(*args)\n╰──────────────────────────────────────────────────────╯\nRuntimeError: boom");
        assert_eq!(tbs.len(), 1);
        let f = tbs[0].user_frame().unwrap();
        assert_eq!((f.short(), f.code.as_deref()), ("train.py:57".to_string(), Some("loss = criterion(out, y)")));
        assert_eq!(tbs[0].exception.as_ref().unwrap().message, "boom");
    }

    #[test]
    fn truncated_and_headless() {
        let tbs = parse_text("  File \"t.py\", line 9, in main\n    model(x)\nRuntimeError: boom");
        assert_eq!(tbs.len(), 1);
        assert_eq!(tbs[0].exception.as_ref().unwrap().message, "boom");
        let tbs = parse_text("Traceback (most recent call last):\n  File \"t.py\", line 9, in main\n    model(x)");
        assert_eq!(tbs.len(), 1);
        assert!(tbs[0].exception.is_none());
        assert_eq!(tbs[0].frames.len(), 1);
    }

    #[test]
    fn exception_lines() {
        let table = [
            ("RuntimeError: x", Some(("RuntimeError", "x"))),
            ("torch.OutOfMemoryError: CUDA out", Some(("torch.OutOfMemoryError", "CUDA out"))),
            (
                "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
                Some(("torch.distributed.elastic.multiprocessing.errors.ChildFailedError", "")),
            ),
            ("KeyboardInterrupt", Some(("KeyboardInterrupt", ""))),
            ("_pickle.UnpicklingError: Weights", Some(("_pickle.UnpicklingError", "Weights"))),
            ("**RuntimeError: x**", Some(("RuntimeError", "x**"))),
            ("step 50: loss", None),
            ("loss = f(x)", None),
        ];
        for (input, want) in table {
            assert_eq!(exception_line(input), want, "{input}");
        }
    }
}
