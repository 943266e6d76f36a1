//! Raised exceptions outside tracebacks: the shapes a line carries one in.
//!
//! A pasted log often shows the exception without its traceback: a lone
//! `[rank5]: ValueError: shard 12 has no rows`, a message quoted in prose
//! (``I get `RuntimeError: CUDA error: ...` when``), a pytest `E   ValueError: x` line
//! or its `tests/test_x.py:12: ValueError` footer, a repr in an application's log
//! (`failed: RuntimeError('CUDA out of memory')`), a field of a JSON or dict dump
//! (`{'error': 'RuntimeError', 'message': '...'}`). [`find`] reads each; [`class_before`]
//! is the one class lookup for a message found inside a line.
//!
//! A class is a name that says it is one: its last dotted part starts with an upper-case
//! letter and ends in `Error`, `Exception`, `Exit`, `Interrupt` or `Failure`, or it is one
//! of the classes the rule data lists (`Unsupported`, `BackendCompilerFailed`). Warnings
//! (`UserWarning:`) and the bare word `Error` (a shell's, npm's) are not raised
//! exceptions. Names are ASCII: a class glued to non-Latin text (`実行するとRuntimeError:`)
//! starts where the ASCII does.

/// How a line shows an exception.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `Class: message` (also `Class : message`, after any prefix or prose).
    Line,
    /// A repr, `Class('message')`.
    Repr,
    /// A dict or JSON field naming the class (`'error': 'RuntimeError'`).
    Field,
    /// A pytest footer, `path.py:12: Class`.
    Footer,
    /// The class's type repr, as a logger prints `type(e)`:
    /// `<class 'RuntimeError'> at trainer.py:101 - message`, `<class 'X'>: message`.
    TypeRepr,
}

/// An exception read from one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Raised {
    /// The class as printed, possibly qualified.
    pub class: String,
    /// The message as printed after it (empty when the line shows none).
    pub message: String,
    /// Byte offset of the class in the line.
    pub col: usize,
    /// How the line shows it.
    pub shape: Shape,
}

impl Raised {
    /// The class without its module path.
    pub fn short_class(&self) -> &str {
        self.class.rsplit(['.', ':']).next().unwrap_or(&self.class)
    }
}

const SUFFIXES: [&str; 5] = ["Error", "Exception", "Exit", "Interrupt", "Failure"];

/// Whether `name` (possibly qualified) names an exception class.
pub fn is_class(name: &str, extra: &[String]) -> bool {
    if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        return false;
    }
    let short = name.rsplit(['.', ':']).next().unwrap_or(name);
    if !short.starts_with(|c: char| c.is_ascii_uppercase()) || !short.chars().any(|c| c.is_ascii_lowercase()) {
        return false;
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':')) {
        return false;
    }
    // The bare word `Error` is a shell's or a tool's; `c10::Error` is PyTorch's.
    if short == "Error" && !name.contains("::") {
        return false;
    }
    SUFFIXES.iter().any(|s| short.ends_with(s)) || extra.iter().any(|e| e == short)
}

/// The ASCII name ending at byte `end` of `line` (class characters only).
fn name_before(line: &str, end: usize) -> (usize, &str) {
    let b = line.as_bytes();
    let mut start = end;
    while start > 0 && (b[start - 1].is_ascii_alphanumeric() || matches!(b[start - 1], b'_' | b'.' | b':')) {
        start -= 1;
    }
    // `c10::Error` keeps its `::`; a leading `:` is punctuation.
    while start < end && matches!(b[start], b':' | b'.') {
        start += 1;
    }
    (start, &line[start..end])
}

/// Every `Class: message` in a line, in order: (class start, class, message start).
pub(crate) fn colon_classes<'a>(
    line: &'a str,
    extra: &'a [String],
) -> impl Iterator<Item = (usize, &'a str, usize)> + 'a {
    let b = line.as_bytes();
    line.match_indices(':').filter_map(move |(p, _)| {
        // `::` inside a C++ name is not the colon after a class.
        if b.get(p + 1) == Some(&b':') || (p > 0 && b[p - 1] == b':') {
            return None;
        }
        // A stray space before the colon (`RuntimeError : x`, retyped).
        let end = if p > 0 && b[p - 1] == b' ' { p - 1 } else { p };
        let (start, name) = name_before(line, end);
        if !is_class(name, extra) {
            return None;
        }
        let msg = p + 1 + usize::from(b.get(p + 1) == Some(&b' '));
        Some((start, name, msg.min(line.len())))
    })
}

/// The exception a line shows, if any: the first `Class: message` on it, else a repr,
/// a dict field or a pytest footer.
pub fn find(line: &str, extra: &[String]) -> Option<Raised> {
    let t = line.trim_end();
    if let Some((start, class, msg)) = colon_classes(t, extra).next() {
        let message = t[msg..].trim().trim_matches('`').trim_end_matches("**").trim().to_string();
        return Some(Raised { class: class.to_string(), message, col: start, shape: Shape::Line });
    }
    type_repr(t, extra).or_else(|| repr(t, extra)).or_else(|| field(t, extra)).or_else(|| footer(t, extra))
}

/// `<class 'mod.Class'>`, then an optional ` at file:line`, then ` - ` or `: ` and the
/// message.
fn type_repr(t: &str, extra: &[String]) -> Option<Raised> {
    let open = t.find("<class '")?;
    let from = open + "<class '".len();
    let len = t[from..].find("'>")?;
    let class = &t[from..from + len];
    if !is_class(class, extra) {
        return None;
    }
    let mut rest = &t[from + len + 2..];
    if let Some(r) = rest.strip_prefix(" at ") {
        let token = r.split(' ').next().unwrap_or_default();
        if !token.contains(':') {
            return None;
        }
        rest = &r[token.len()..];
    }
    let message = rest.strip_prefix(" - ").or_else(|| rest.strip_prefix(": ")).or_else(|| rest.strip_prefix(':'))?;
    Some(Raised { class: class.to_string(), message: message.trim().to_string(), col: from, shape: Shape::TypeRepr })
}

/// `Class('message')` / `Class("message")`.
fn repr(t: &str, extra: &[String]) -> Option<Raised> {
    for (p, _) in t.match_indices('(') {
        let q = t[p + 1..].chars().next()?;
        if q != '\'' && q != '"' {
            continue;
        }
        let (start, class) = name_before(t, p);
        if !is_class(class, extra) {
            continue;
        }
        let body = &t[p + 2..];
        let end = body.rfind(q).unwrap_or(body.len());
        return Some(Raised {
            class: class.to_string(),
            message: body[..end].to_string(),
            col: start,
            shape: Shape::Repr,
        });
    }
    None
}

/// Keys of dict and JSON fields that name an exception class.
const CLASS_KEYS: [&str; 6] = ["error", "exception", "exc_type", "error_type", "exception_type", "type"];
/// Keys of fields that hold its message.
const MESSAGE_KEYS: [&str; 5] = ["message", "msg", "error_message", "detail", "reason"];

/// The value of field `key` on a line: `'key': 'v'`, `"key": "v"`, `key=v`.
fn field_value<'a>(t: &'a str, key: &str) -> Option<(usize, &'a str)> {
    for quote in ["'", "\""] {
        let pat = format!("{quote}{key}{quote}:");
        if let Some(p) = t.find(&pat) {
            let rest = t[p + pat.len()..].trim_start();
            let off = t.len() - rest.len();
            let (q, body) = match rest.chars().next()? {
                c @ ('\'' | '"') => (c, &rest[1..]),
                _ => continue,
            };
            let end = body.find(q).unwrap_or(body.len());
            return Some((off + 1, &body[..end]));
        }
    }
    None
}

/// Whether `t` may hold a dict or JSON field ([`find`]'s [`Shape::Field`]): a quoted key
/// closes with `':` or `":`. Most text holds none, and then the whole of [`find`] need
/// not run for a field (a message's class is looked for in a field around it, once per
/// message: 2 KiB of colon classes, reprs and footers read for nothing).
pub fn may_hold_field(t: &str) -> bool {
    let b = t.as_bytes();
    memchr::memchr_iter(b':', b).any(|p| p > 0 && matches!(b[p - 1], b'\'' | b'"'))
}

fn field(t: &str, extra: &[String]) -> Option<Raised> {
    // Most lines hold no quoted key at all: one pass over the bytes rules them out
    // before a pattern per key and quote is built and searched.
    if !may_hold_field(t) {
        return None;
    }
    for key in CLASS_KEYS {
        let Some((col, v)) = field_value(t, key) else { continue };
        let v = v.trim();
        if !is_class(v, extra) {
            continue;
        }
        let message =
            MESSAGE_KEYS.iter().find_map(|k| field_value(t, k)).map(|(_, m)| m.to_string()).unwrap_or_default();
        return Some(Raised { class: v.to_string(), message, col, shape: Shape::Field });
    }
    None
}

/// A line without Markdown decoration: list bullets, quote marks, emphasis and code
/// marks go (`- **Exception Type:** RuntimeError` reads `Exception Type: RuntimeError`).
fn undecorated(line: &str) -> String {
    let t: String = line.chars().filter(|c| !matches!(c, '*' | '`')).collect();
    t.trim().trim_start_matches(['-', '>', '#', ' ']).trim().to_string()
}

/// Whether the text before a message on its line is only a label about it
/// (`Exception Message:`, `Error message:`, `Reason:`, decorated or not) or nothing: the class may then be named by a
/// header line above it ([`labelled_class`]).
pub fn is_message_label(before: &str) -> bool {
    // A label is a few words with their marks: a longer text is not one, and is not read
    // (a message repeated along a 64 KiB line would read the line once per message).
    let before = before.trim();
    if before.len() > LABEL_MAX {
        return false;
    }
    let t = undecorated(before);
    let Some(label) = t.strip_suffix(':') else { return t.is_empty() };
    let words: Vec<&str> = label.split_whitespace().collect();
    let lower = label.to_ascii_lowercase();
    let names = ["message", "msg", "error", "exception", "reason", "detail", "value"].iter().any(|w| lower.contains(w));
    names && (1..=3).contains(&words.len()) && words.iter().all(|w| w.chars().all(|c| c.is_ascii_alphabetic()))
}

/// The message on a line that labels it (`- **Exception Message:** Given groups=1, ...`,
/// `Error message: ...`): the text after the label.
pub fn labelled_message(line: &str) -> Option<String> {
    let t = undecorated(line);
    let (label, message) = t.split_once(':')?;
    let message = message.trim();
    (is_message_label(&format!("{label}:")) && !message.is_empty()).then(|| message.to_string())
}

/// The class a header line names for a message printed below it, the way a tool that
/// caught the exception reports it: VS Code's `Exception has occurred: RuntimeError
/// (note: full exception trace is shown ...)`, ComfyUI's error report
/// `- **Exception Type:** RuntimeError`, `Error type: ValueError`. The label must say
/// it is about an exception or error; the class ends the line, a parenthesised note
/// aside.
pub fn labelled_class(line: &str, extra: &[String]) -> Option<String> {
    let (label, class) = label_and_class(line, extra)?;
    let says = label.contains("exception") || label.contains("error") || is_debugger_label(&label);
    (says && label.split_whitespace().count() <= 4).then_some(class)
}

/// The class of a debugger's exception header, VS Code's `Exception has occurred:
/// RuntimeError` in any of its languages (`发生异常: RuntimeError`). Its frames follow
/// the message innermost first, the reverse of a Python traceback.
pub fn debugger_class(line: &str, extra: &[String]) -> Option<String> {
    let (label, class) = label_and_class(line, extra)?;
    is_debugger_label(&label).then_some(class)
}

/// The longest label text read, marks included (`- **Exception Message:**` is 24 bytes;
/// `Une exception s'est produite:` 29).
const LABEL_MAX: usize = 96;

/// The longest class name with its note that a header line ending in a class is read for.
const CLASS_MAX: usize = 160;

/// VS Code's exception header in the languages it ships, ASCII letters in lower case and
/// others as printed (the engine lowers ASCII only: Unicode case tables cost the WASM
/// module kilobytes).
const DEBUGGER_LABELS: [&str; 9] = [
    "exception has occurred",
    "发生异常",
    "發生例外狀況",
    "例外が発生しました",
    "예외가 발생했습니다",
    "ausnahme aufgetreten",
    "une exception s'est produite",
    "se produjo una excepción",
    "Возникло исключение",
];

/// Whether `label`, as [`label_and_class`] gives it (trimmed, in lower case), is one.
fn is_debugger_label(label: &str) -> bool {
    DEBUGGER_LABELS.contains(&label)
}

/// `label: Class` ending a line (a parenthesised note after the class aside), the
/// label trimmed and in lower case, once for every test made of it.
fn label_and_class(line: &str, extra: &[String]) -> Option<(String, String)> {
    let line = line.trim();
    if line.len() > LABEL_MAX + 2 * CLASS_MAX {
        return None;
    }
    let t = undecorated(line);
    let t = match t.rfind(" (") {
        Some(p) if t.ends_with(')') => t[..p].trim_end(),
        _ => t.as_str(),
    };
    let (label, class) = t.rsplit_once(':')?;
    let class = class.trim();
    let label = label.trim();
    (!label.is_empty() && is_class(class, extra)).then(|| (label.to_ascii_lowercase(), class.to_string()))
}

/// Whether `t` ends the way pytest's footer does ([`find`]'s [`Shape::Footer`]), read
/// from its end: a caller asking only for a footer need not run the whole of [`find`]
/// on every line below every message.
pub fn may_be_footer(t: &str, extra: &[String]) -> bool {
    footer(t.trim_end(), extra).is_some()
}

/// pytest's `tests/test_train.py:42: ValueError` (the line ends with the class).
fn footer(t: &str, extra: &[String]) -> Option<Raised> {
    let (head, class) = t.rsplit_once(": ")?;
    let class = class.trim();
    let (path, line) = head.rsplit_once(':')?;
    let path_ok = !path.is_empty() && !path.contains(' ') && (path.ends_with(".py") || path.contains('/'));
    if !path_ok || line.is_empty() || !line.bytes().all(|b| b.is_ascii_digit()) || !is_class(class, extra) {
        return None;
    }
    Some(Raised { class: class.to_string(), message: String::new(), col: t.len() - class.len(), shape: Shape::Footer })
}

/// The last `Class:` on `before` (the text on a line before a message), with prose,
/// quotes and other text between them.
pub fn last_class<'a>(before: &'a str, extra: &'a [String]) -> Option<&'a str> {
    colon_classes(before, extra).last().map(|(_, c, _)| c)
}

/// The class printed right before a message inside a line (`... a = t.numpy() TypeError: `
/// gives `TypeError`, ``got `RuntimeError: `` gives `RuntimeError`): the last
/// `Class:` (or repr opening `Class('`) before it, skipping quotes, backticks and the
/// prose between them.
pub fn class_before<'a>(before: &'a str, extra: &[String]) -> Option<&'a str> {
    let b = before.trim_end().trim_end_matches(['`', '\'', '"', '*', ' ']);
    if let Some(t) = b.strip_suffix("('").or_else(|| b.strip_suffix("(\"")).or_else(|| b.strip_suffix('(')) {
        let (_, name) = name_before(t, t.len());
        if is_class(name, extra) {
            return Some(name);
        }
    }
    // A logger's type repr: `<class 'RuntimeError'> at trainer.py:101 - `.
    let typed = || type_repr(&format!("{before}x"), extra).filter(|r| r.message == "x");
    if let Some(r) = before.contains("<class '").then(typed).flatten() {
        let at = before.find(&r.class)?;
        return Some(&before[at..at + r.class.len()]);
    }
    // `RuntimeError:`, `RuntimeError :`, and a retyped `RuntimeError:  :`.
    let t = b.strip_suffix(':')?.trim_end_matches([' ', ':']);
    let (_, name) = name_before(t, t.len());
    is_class(name, extra).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn extra() -> Vec<String> {
        vec!["Unsupported".into(), "BackendCompilerFailed".into()]
    }

    #[test]
    fn shapes_a_line_shows_an_exception_in() {
        // (line, class, message, shape)
        let table: &[(&str, &str, &str, Shape)] = &[
            ("ValueError: shard 12 has no rows", "ValueError", "shard 12 has no rows", Shape::Line),
            (
                "I get `RuntimeError: CUDA error: unknown error` when",
                "RuntimeError",
                "CUDA error: unknown error` when",
                Shape::Line,
            ),
            ("RuntimeError : CUDA out of memory.", "RuntimeError", "CUDA out of memory.", Shape::Line),
            ("E       KeyError: 'label'", "KeyError", "'label'", Shape::Line),
            ("実行するとRuntimeError: CUDA error", "RuntimeError", "CUDA error", Shape::Line),
            (
                "torch._dynamo.exc.Unsupported: call_function",
                "torch._dynamo.exc.Unsupported",
                "call_function",
                Shape::Line,
            ),
            ("c10::Error: boom", "c10::Error", "boom", Shape::Line),
            ("step failed: RuntimeError('CUDA out of memory')", "RuntimeError", "CUDA out of memory", Shape::Repr),
            ("{'error': 'RuntimeError', 'message': 'NCCL error'}", "RuntimeError", "NCCL error", Shape::Field),
            ("{\"exception\": \"ValueError\", \"msg\": \"bad\"}", "ValueError", "bad", Shape::Field),
            ("tests/test_train.py:42: ValueError", "ValueError", "", Shape::Footer),
            (
                "2024-01-02 10:00:01 | <class 'RuntimeError'> at trainer.py:101 - CUDA error: an illegal memory access was encountered",
                "RuntimeError",
                "CUDA error: an illegal memory access was encountered",
                Shape::TypeRepr,
            ),
            ("caught <class 'torch.OutOfMemoryError'>: CUDA out of memory.", "torch.OutOfMemoryError", "CUDA out of memory.", Shape::TypeRepr),
        ];
        for (line, class, message, shape) in table {
            let r = find(line, &extra()).unwrap_or_else(|| panic!("{line}"));
            assert_eq!((r.class.as_str(), r.message.as_str(), r.shape), (*class, *message, *shape), "{line}");
            // The gate callers use before asking for a field never hides one.
            assert_eq!(
                may_hold_field(line),
                *shape == Shape::Field || line.contains("':") || line.contains("\":"),
                "{line}"
            );
            assert_eq!(may_be_footer(line, &extra()), *shape == Shape::Footer, "{line}");
        }
        for line in [
            "UserWarning: this is deprecated",
            "Error: npm failed",
            "INFO: loading",
            "step 50: loss=2.3",
            "NCCL WARN Error: x",
            "note: RuntimeError is raised when",
            "std::runtime_error",
        ] {
            assert_eq!(find(line, &extra()), None, "{line}");
        }
    }

    #[test]
    fn the_class_before_a_message() {
        let e = extra();
        let table = [
            (
                "Traceback (most recent call last): File \"a.py\", line 3, in f a = t.numpy() TypeError: ",
                Some("TypeError"),
            ),
            ("torch.OutOfMemoryError:", Some("torch.OutOfMemoryError")),
            ("the error was: ", None),
            ("ERROR: ", None),
            ("failed because of the following error: RuntimeError('", Some("RuntimeError")),
            ("I get `RuntimeError: ", Some("RuntimeError")),
            ("RuntimeError : ", Some("RuntimeError")),
            ("RuntimeError:  :", Some("RuntimeError")),
            ("実行するとRuntimeError:", Some("RuntimeError")),
            ("<class 'RuntimeError'> at trainer.py:101 - ", Some("RuntimeError")),
            ("<class 'RuntimeError'>: ", Some("RuntimeError")),
            ("<class 'dict'> at a.py:1 - ", None),
        ];
        for (before, want) in table {
            assert_eq!(class_before(before, &e), want, "{before}");
        }
    }

    #[test]
    fn headers_that_name_the_class_of_a_message_below() {
        let e = extra();
        // (line, labelled_class, debugger_class)
        let table: &[(&str, Option<&str>, Option<&str>)] = &[
            (
                "Exception has occurred: RuntimeError       (note: full exception trace is shown but execution is paused at: _run_module_as_main)",
                Some("RuntimeError"),
                Some("RuntimeError"),
            ),
            ("发生异常: RuntimeError", Some("RuntimeError"), Some("RuntimeError")),
            ("- **Exception Type:** RuntimeError", Some("RuntimeError"), None),
            ("Error type: torch.cuda.OutOfMemoryError", Some("torch.cuda.OutOfMemoryError"), None),
            ("> Exception Type: `BackendCompilerFailed`", Some("BackendCompilerFailed"), None),
            // Not a label about an exception, or not a class.
            ("- **Node Type:** VAEDecode", None, None),
            ("Last layer: LinearError", None, None),
            ("Exception has occurred: something odd", None, None),
            ("The loss went up after the fix we tried for the error: RuntimeError", None, None),
            ("RuntimeError: CUDA error", None, None),
        ];
        for (line, labelled, debugger) in table {
            assert_eq!(labelled_class(line, &e).as_deref(), *labelled, "{line}");
            assert_eq!(debugger_class(line, &e).as_deref(), *debugger, "{line}");
        }
        assert_eq!(
            labelled_message("- **Exception Message:** Given groups=1, weight of size [4, 4, 1, 1]").as_deref(),
            Some("Given groups=1, weight of size [4, 4, 1, 1]")
        );
        assert_eq!(labelled_message("- **Node Type:** VAEDecode"), None);
        assert_eq!(labelled_message("Exception Message:"), None);
        for (before, label) in [
            ("", true),
            ("  ", true),
            ("- **Exception Message:** ", true),
            ("Error message: ", true),
            ("I get this: ", false),
            ("x = f(y) # ", false),
        ] {
            assert_eq!(is_message_label(before), label, "{before:?}");
        }
    }
}
