//! Placeholders in rule text: `{name}`, `{name|fallback words}`, `{devices.0}`,
//! `{name:var|fallback}` (the value only when it can be assigned to in Python: `x`,
//! `batch["ids"]`, `self.mask`; not `f(x)`, so `{culprit_expr:var|x} = ...` is always
//! Python), `{{`/`}}` for literal braces. Anything else in braces (a Python dict, an
//! f-string with spaces) is left as written.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::report::value_text;

/// Values placeholders can refer to: evidence plus engine-provided keys.
pub type Context = BTreeMap<String, Value>;

/// One placeholder found in a text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placeholder<'a> {
    /// Byte offset of the `{` in the text.
    pub offset: usize,
    /// The key (before any `.index`).
    pub key: &'a str,
    pub index: Option<usize>,
    pub fallback: Option<&'a str>,
    /// `:var`: only a value Python can assign to.
    pub var: bool,
}

/// Lists the placeholders of a text (for `rules check`).
pub fn placeholders(text: &str) -> Vec<Placeholder<'_>> {
    let mut out = Vec::new();
    scan(text, |p| {
        out.push(p);
        None
    });
    out
}

/// Renders `text`. Returns `None` when a placeholder without fallback has no value.
pub fn render(text: &str, ctx: &Context) -> Option<String> {
    let mut ok = true;
    let s = scan(text, |p| {
        let v = lookup(ctx, p.key, p.index).filter(|v| !p.var || is_assignable(v));
        match (v, p.fallback) {
            (Some(v), _) => Some(v),
            (None, Some(f)) => Some(f.to_string()),
            (None, None) => {
                ok = false;
                Some(String::new())
            }
        }
    });
    ok.then_some(s)
}

/// Renders `text`, replacing unresolvable placeholders with nothing.
pub fn render_lossy(text: &str, ctx: &Context) -> String {
    scan(text, |p| {
        let v = lookup(ctx, p.key, p.index).filter(|v| !p.var || is_assignable(v));
        Some(v.or(p.fallback.map(str::to_string)).unwrap_or_default())
    })
}

/// Renders rule text for documentation, where there is no log: a placeholder shows
/// its fallback, or its name in angle quotes (`‹argument›`).
pub fn render_docs(text: &str) -> String {
    scan(text, |p| match p.fallback {
        Some(f) if f != "not shown" => Some(f.to_string()),
        _ => Some(format!("‹{}›", p.key)),
    })
}

/// Whether Python can assign to `expr`: a name, an attribute chain, subscripts of
/// them (`batch["labels"]`, `self.bufs[0]`); no call, operator or literal.
fn is_assignable(expr: &str) -> bool {
    let e = expr.trim();
    let mut depth = 0usize;
    let mut ok = e.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_');
    for c in e.chars() {
        match c {
            '[' => depth += 1,
            ']' => ok &= depth.checked_sub(1).map(|d| depth = d).is_some(),
            _ if depth > 0 => ok &= c != '(' && c != ')',
            '.' | '_' => {}
            c if c.is_alphanumeric() => {}
            _ => ok = false,
        }
    }
    ok && depth == 0 && !e.ends_with('.')
}

fn lookup(ctx: &Context, key: &str, index: Option<usize>) -> Option<String> {
    let v = ctx.get(key)?;
    let v = match (index, v) {
        (Some(i), Value::Array(a)) => a.get(i)?,
        (Some(_), _) => return None,
        (None, v) => v,
    };
    let s = value_text(v);
    (!s.is_empty()).then_some(s)
}

/// Walks `text`, calling `f` on each placeholder; `f` returns the replacement.
fn scan<'a>(text: &'a str, mut f: impl FnMut(Placeholder<'a>) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut k = 0;
    let mut copied = 0;
    while k < b.len() {
        if b[k] == b'{' && b.get(k + 1) == Some(&b'{') {
            out.push_str(&text[copied..k]);
            out.push('{');
            k += 2;
            copied = k;
            continue;
        }
        if b[k] == b'}' && b.get(k + 1) == Some(&b'}') {
            out.push_str(&text[copied..k]);
            out.push('}');
            k += 2;
            copied = k;
            continue;
        }
        if b[k] == b'{' {
            if let Some((p, len)) = parse_placeholder(text, k) {
                out.push_str(&text[copied..k]);
                if let Some(r) = f(p) {
                    out.push_str(&r);
                }
                k += len;
                copied = k;
                continue;
            }
        }
        k += 1;
    }
    out.push_str(&text[copied..]);
    out
}

/// `{key}`, `{key.0}`, `{key|fallback}` at `at`; returns it and its length.
fn parse_placeholder(text: &str, at: usize) -> Option<(Placeholder<'_>, usize)> {
    let rest = &text[at + 1..];
    let close = rest.find('}')?;
    let body = &rest[..close];
    let (name, fallback) = match body.split_once('|') {
        Some((n, f)) => (n, Some(f)),
        None => (body, None),
    };
    let (name, var) = match name.strip_suffix(":var") {
        Some(n) => (n, true),
        None => (name, false),
    };
    let (key, index) = match name.split_once('.') {
        Some((k, i)) => (k, Some(i.parse().ok()?)),
        None => (name, None),
    };
    let valid = !key.is_empty() && key.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_');
    if !valid || fallback.is_some_and(|f| f.contains('{')) {
        return None;
    }
    Some((Placeholder { offset: at, key, index, fallback, var }, close + 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_render() {
        let mut ctx = Context::new();
        ctx.insert("argument".into(), Value::from("target"));
        ctx.insert("devices".into(), serde_json::json!(["cpu", "cuda:0"]));
        ctx.insert("shape".into(), serde_json::json!([64, 128]));
        let table = [
            ("`{argument}` on {devices.1}", Some("`target` on cuda:0")),
            ("{devices} / {shape}", Some("cpu, cuda:0 / [64, 128]")),
            ("{op|the operator}", Some("the operator")),
            ("{op}", None),
            ("d = {\"a\": 1}; {{argument}}", Some("d = {\"a\": 1}; {argument}")),
            ("f\"{x + 1}\"", Some("f\"{x + 1}\"")),
        ];
        for (t, want) in table {
            assert_eq!(render(t, &ctx).as_deref(), want, "{t}");
        }
        assert_eq!(placeholders("{a} {b|c} {{d}}").len(), 2);
        ctx.insert("expr".into(), Value::from("batch[\"labels\"]"));
        ctx.insert("call".into(), Value::from("torch.flatten(x, 1)"));
        assert_eq!(render("{expr:var|y} = {call:var|y}", &ctx).as_deref(), Some("batch[\"labels\"] = y"));
        for (e, ok) in [
            ("x", true),
            ("self.mask", true),
            ("bufs[0].w", true),
            ("f(x)", false),
            ("a + b", false),
            ("1", false),
            ("a[f(x)]", false),
        ] {
            assert_eq!(is_assignable(e), ok, "{e}");
        }
        assert_eq!(render_docs("v{a|not shown} {b|B} {c}"), "v‹a› B ‹c›");
    }
}
