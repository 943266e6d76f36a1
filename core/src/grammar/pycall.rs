//! A small grammar for Python call expressions on a failing source line.
//!
//! It reads what the device-placement culprit needs: every call on the line with its
//! callee and its positional and keyword arguments as source text, through method
//! calls, attribute chains, subscripts, nested calls, strings and line continuations.
//! `loss = F.cross_entropy(logits.view(-1, V), y.view(-1))` gives the call
//! `F.cross_entropy` with arguments `logits.view(-1, V)` and `y.view(-1)`, and
//! [`base_name`] of the second is `y`. It is not a Python parser: anything it does not
//! understand is skipped, never an error.

use nom::bytes::complete::{take_while, take_while1};
use nom::{IResult, Parser};

/// Deepest bracket nesting followed.
const MAX_DEPTH: usize = 32;

/// One call on a line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// The callee as written: `criterion`, `F.cross_entropy`, `self.embed`.
    pub callee: String,
    /// Positional arguments as written, trimmed.
    pub args: Vec<String>,
    /// Keyword arguments.
    pub kwargs: Vec<(String, String)>,
}

impl Call {
    /// The callee's last name: `F.cross_entropy` → `cross_entropy`.
    pub fn name(&self) -> &str {
        self.callee.rsplit('.').next().unwrap_or(&self.callee)
    }
}

/// The assignment targets and the calls of a source line, outermost call first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Line {
    /// Names assigned to (`loss` in `loss = ...`; `a, b` gives both).
    pub targets: Vec<String>,
    /// The calls, outermost first.
    pub calls: Vec<Call>,
}

fn ident(i: &str) -> IResult<&str, &str> {
    nom::combinator::recognize((
        take_while1(|c: char| c.is_alphabetic() || c == '_'),
        take_while(|c: char| c.is_alphanumeric() || c == '_'),
    ))
    .parse(i)
}

/// Parses a source line (line continuations `\` joined by the caller or present).
pub fn parse_line(src: &str) -> Line {
    let src = src.replace("\\\n", " ");
    let src = src.trim();
    let src = src.strip_prefix("return ").or_else(|| src.strip_prefix("yield ")).unwrap_or(src);
    let (targets, expr) = split_assignment(src);
    let mut calls = Vec::new();
    collect_calls(expr, 0, &mut calls);
    Line { targets, calls }
}

/// `a, b = expr` / `x += expr` / `x: T = expr` → (targets, expr).
fn split_assignment(src: &str) -> (Vec<String>, &str) {
    let bytes = src.as_bytes();
    let mut depth = 0i32;
    let mut k = 0;
    while k < bytes.len() {
        match bytes[k] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            b'\'' | b'"' => k = skip_string(src, k),
            b'=' if depth == 0 => {
                let prev = if k > 0 { bytes[k - 1] } else { b' ' };
                let next = bytes.get(k + 1).copied().unwrap_or(b' ');
                if next != b'=' && !matches!(prev, b'=' | b'!' | b'<' | b'>') {
                    let lhs = src[..k].trim_end_matches(['+', '-', '*', '/', '%', '@', '&', '|', '^']).trim();
                    let lhs = lhs.split(':').next().unwrap_or(lhs);
                    let targets = lhs
                        .split(',')
                        .map(|t| t.trim().trim_matches(['(', ')']).trim().to_string())
                        .filter(|t| !t.is_empty())
                        .collect();
                    return (targets, src[k + 1..].trim());
                }
            }
            _ => {}
        }
        k += 1;
    }
    (Vec::new(), src)
}

/// Index just past the string literal starting at `k` (handles escapes; an unclosed
/// string runs to the end).
fn skip_string(s: &str, k: usize) -> usize {
    let b = s.as_bytes();
    let q = b[k];
    let mut j = k + 1;
    while j < b.len() {
        if b[j] == b'\\' {
            j += 2;
            continue;
        }
        if b[j] == q {
            return j;
        }
        j += 1;
    }
    b.len()
}

/// Index of the bracket closing the one at `open`, or None when unbalanced.
fn closing(s: &str, open: usize) -> Option<usize> {
    let b = s.as_bytes();
    let mut depth = 0usize;
    let mut k = open;
    while k < b.len() {
        match b[k] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(k);
                }
            }
            b'\'' | b'"' => k = skip_string(s, k),
            _ => {}
        }
        k += 1;
    }
    None
}

/// Splits an argument list at its top-level commas.
fn split_args(s: &str) -> Vec<&str> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut last = 0;
    let mut k = 0;
    while k < b.len() {
        match b[k] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            b'\'' | b'"' => k = skip_string(s, k),
            b',' if depth == 0 => {
                out.push(s[last..k].trim());
                last = k + 1;
            }
            _ => {}
        }
        k += 1;
    }
    let tail = s[last.min(s.len())..].trim();
    if !tail.is_empty() {
        out.push(tail);
    }
    out
}

/// Finds calls in `expr`: `callee(args)` where the callee is an attribute chain.
fn collect_calls(expr: &str, depth: usize, out: &mut Vec<Call>) {
    if depth > MAX_DEPTH {
        return;
    }
    let b = expr.as_bytes();
    let mut k = 0;
    while k < b.len() {
        let c = b[k];
        if c == b'\'' || c == b'"' {
            k = skip_string(expr, k) + 1;
            continue;
        }
        let at_word_start =
            (c.is_ascii_alphabetic() || c == b'_') && (k == 0 || !is_word_byte(b[k - 1]) && b[k - 1] != b'.');
        if !at_word_start {
            k += 1;
            continue;
        }
        // An attribute chain with subscripts: a.b[0].c
        let start = k;
        let mut j = k;
        while let Ok((rest, _)) = ident(&expr[j..]) {
            j = expr.len() - rest.len();
            while j < b.len() && b[j] == b'[' {
                match closing(expr, j) {
                    Some(e) => j = e + 1,
                    None => break,
                }
            }
            if j < b.len() && b[j] == b'.' {
                j += 1;
                continue;
            }
            break;
        }
        if j < b.len() && b[j] == b'(' {
            let callee = expr[start..j].to_string();
            let Some(close) = closing(expr, j) else {
                // Unbalanced (truncated line): take the rest as the argument list.
                push_call(callee, &expr[j + 1..], depth, out);
                return;
            };
            push_call(callee, &expr[j + 1..close], depth, out);
            // Trailers after the call: `.view(...)` chains are calls on the result.
            k = close + 1;
            continue;
        }
        k = j.max(k + 1);
    }
}

fn push_call(callee: String, inner: &str, depth: usize, out: &mut Vec<Call>) {
    let mut args = Vec::new();
    let mut kwargs = Vec::new();
    for a in split_args(inner) {
        match keyword(a) {
            Some((k, v)) => kwargs.push((k.to_string(), v.to_string())),
            None => args.push(a.to_string()),
        }
    }
    out.push(Call { callee, args: args.clone(), kwargs: kwargs.clone() });
    for a in args.iter().chain(kwargs.iter().map(|(_, v)| v)) {
        collect_calls(a, depth + 1, out);
    }
}

fn keyword(a: &str) -> Option<(&str, &str)> {
    let (rest, name) = ident(a).ok()?;
    let rest = rest.trim_start();
    let v = rest.strip_prefix('=')?;
    if v.starts_with('=') {
        return None;
    }
    Some((name, v.trim()))
}

fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The tensor an argument expression names: `y.view(-1)` → `y`, `labels.long()` →
/// `labels`, `batch["labels"]` → `batch["labels"]`, `self.buf` → `self.buf`.
/// Returns the whole (trimmed) expression when it does not start with a name.
pub fn base_name(expr: &str) -> &str {
    let e = expr.trim().trim_start_matches('*');
    if let Ok((_, head)) = ident(e) {
        // A factory call (`torch.zeros(3)`) is the expression itself, not `torch`.
        if matches!(head, "torch" | "F" | "np" | "numpy" | "nn") {
            return e;
        }
    }
    let b = e.as_bytes();
    let mut j = 0;
    let mut last_end = 0;
    while let Ok((rest, _)) = ident(&e[j..]) {
        j = e.len() - rest.len();
        let name_end = j;
        while j < b.len() && b[j] == b'[' {
            match closing(e, j) {
                Some(c) => j = c + 1,
                None => break,
            }
        }
        if j < b.len() && b[j] == b'(' {
            // A method call: the tensor is what it was called on.
            if last_end == 0 {
                return e;
            }
            let _ = name_end;
            return e[..last_end].trim_end_matches('.');
        }
        last_end = j;
        if j < b.len() && b[j] == b'.' {
            j += 1;
            continue;
        }
        break;
    }
    if last_end == 0 {
        e
    } else {
        &e[..last_end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_on_lines() {
        let l = parse_line("loss = criterion(outputs, targets)");
        assert_eq!(l.targets, vec!["loss"]);
        assert_eq!(
            l.calls[0],
            Call { callee: "criterion".into(), args: vec!["outputs".into(), "targets".into()], kwargs: vec![] }
        );

        let l = parse_line("loss = F.cross_entropy(logits.view(-1, V), y.view(-1), ignore_index=-100)");
        assert_eq!(l.calls[0].name(), "cross_entropy");
        assert_eq!(l.calls[0].args, vec!["logits.view(-1, V)", "y.view(-1)"]);
        assert_eq!(l.calls[0].kwargs, vec![("ignore_index".to_string(), "-100".to_string())]);
        assert_eq!(l.calls[1].callee, "logits.view");

        let l = parse_line("return self.embed(input_ids)");
        assert_eq!(l.calls[0].callee, "self.embed");
        assert_eq!(l.calls[0].args, vec!["input_ids"]);

        let l = parse_line("out = model(batch['x'], mask=batch[\"m, n\"])");
        assert_eq!(l.calls[0].args, vec!["batch['x']"]);
        assert_eq!(l.calls[0].kwargs[0].1, "batch[\"m, n\"]");

        let l = parse_line("x = torch.zeros(b, 10) + \\\n    h");
        assert_eq!(l.calls[0].callee, "torch.zeros");

        let l = parse_line("loss = loss_fn(out, labels");
        assert_eq!(l.calls[0].args, vec!["out", "labels"]);
        assert_eq!(parse_line("a, b = f(x)").targets, vec!["a", "b"]);
        assert_eq!(parse_line("if x == f(y):").targets, Vec::<String>::new());
    }

    #[test]
    fn base_names() {
        let table = [
            ("y.view(-1)", "y"),
            ("labels", "labels"),
            ("labels.long().cuda()", "labels"),
            ("batch[\"labels\"]", "batch[\"labels\"]"),
            ("self.buf", "self.buf"),
            ("self.buf.to(x)", "self.buf"),
            ("torch.zeros(3)", "torch.zeros(3)"),
            ("f(x)", "f(x)"),
            ("-1", "-1"),
        ];
        for (e, want) in table {
            assert_eq!(base_name(e), want, "{e}");
        }
    }
}
