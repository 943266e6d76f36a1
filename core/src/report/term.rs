//! Rule prose laid out for a terminal.
//!
//! Rule text is written in a small Markdown subset (paragraphs, `- ` / `* ` / `1. ` list
//! items, fenced code blocks, `` `code` `` and `**bold**` spans), which the Markdown and
//! HTML faces show as is. A terminal shows none of that syntax: code blocks become
//! indented lines, spans lose their markers (and are styled with ANSI only when colour
//! is on), and prose is wrapped to the terminal's width, measured in visible characters
//! (ANSI sequences take no room). A code span is kept on one line when it fits, so
//! `x = x.to(device)` is never broken between two lines.

/// How text is laid out: ANSI styles or none, and the width to wrap to.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Term {
    pub color: bool,
    pub width: usize,
}

/// The narrowest text column wrapping aims for, whatever the indent: below it a
/// paragraph would become a tower of single words.
const MIN_COLUMN: usize = 24;

impl Term {
    fn paint(&self, code: &str, s: &str) -> String {
        if self.color && !s.is_empty() {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }

    pub fn bold(&self, s: &str) -> String {
        self.paint("1", s)
    }
    pub fn red(&self, s: &str) -> String {
        self.paint("1;31", s)
    }
    pub fn dim(&self, s: &str) -> String {
        self.paint("2", s)
    }
    pub fn green(&self, s: &str) -> String {
        self.paint("32", s)
    }
    fn code(&self, s: &str) -> String {
        self.paint("36", s)
    }

    /// One line of prose with its inline markup rendered, unwrapped (titles, table cells).
    pub fn inline(&self, s: &str) -> String {
        atoms(s).iter().map(|a| self.atom(a)).collect::<Vec<_>>().join(" ")
    }

    fn atom(&self, a: &Atom) -> String {
        let body: String = a
            .parts
            .iter()
            .map(|(kind, t)| match kind {
                Span::Plain => t.clone(),
                Span::Code => self.code(t),
                Span::Bold => self.bold(t),
            })
            .collect();
        body
    }

    /// `s` as a block: `first` starts the first line (a label, a `[ ] ` box), `indent`
    /// spaces start the others, and every line fits in the width. Paragraphs are
    /// separated by an empty line, list items start their own line with a hanging
    /// indent, and fenced code is indented by four more spaces and never wrapped.
    pub fn block(&self, first: &str, indent: usize, s: &str) -> Vec<String> {
        let pad = " ".repeat(indent);
        let mut out: Vec<String> = Vec::new();
        let mut lead = Some(first.to_string());
        let mut take_lead = || lead.take().unwrap_or_else(|| pad.clone());
        for piece in pieces(s) {
            match piece {
                Piece::Blank => {
                    if !out.is_empty() && out.last().is_some_and(|l| !l.trim().is_empty()) {
                        out.push(String::new());
                    }
                }
                Piece::Heading(h) => {
                    let start = take_lead();
                    out.push(format!("{start}{}", self.bold(&self.inline(&h))).trim_end().to_string());
                }
                Piece::Code(lines) => {
                    let start = take_lead();
                    if !start.trim().is_empty() {
                        out.push(start.trim_end().to_string());
                    }
                    for l in lines {
                        out.push(format!("{pad}    {}", self.green(&l)).trim_end().to_string());
                    }
                }
                Piece::Para { bullet, text } => {
                    let start = take_lead();
                    let (head, hang) = match &bullet {
                        Some(b) => (format!("{start}{b} "), visible(&start).max(indent) + b.len() + 1),
                        None => (start.clone(), visible(&start).max(indent)),
                    };
                    out.extend(self.wrap_para(&head, hang, &text));
                }
            }
        }
        if let Some(l) = lead.filter(|l| !l.trim().is_empty()) {
            out.push(l.trim_end().to_string());
        }
        while out.last().is_some_and(|l| l.is_empty()) {
            out.pop();
        }
        out
    }

    /// A paragraph filled greedily: `head` opens the first line, `hang` spaces the rest.
    fn wrap_para(&self, head: &str, hang: usize, text: &str) -> Vec<String> {
        // A hang that leaves too narrow a column (a wide table row's lead) gives way
        // to a small one rather than a tower of words or lines past the width.
        let hang = if hang + MIN_COLUMN > self.width { hang.min(4) } else { hang };
        let width = self.width.max(hang + MIN_COLUMN);
        let mut out = Vec::new();
        let mut line = head.to_string();
        let mut len = visible(head);
        let mut fresh = true;
        for a in atoms(text) {
            for a in a.fit(width.saturating_sub(hang)) {
                let w = a.width();
                if !fresh && len + 1 + w > width {
                    out.push(std::mem::take(&mut line));
                    line = " ".repeat(hang);
                    len = hang;
                    fresh = true;
                }
                if !fresh {
                    line.push(' ');
                    len += 1;
                }
                line.push_str(&self.atom(&a));
                len += w;
                fresh = false;
            }
        }
        out.push(line.trim_end().to_string());
        out
    }
}

/// A Markdown document (a rule's encyclopedia entry) as terminal text: headings bold
/// without their `#`, check boxes as `[ ]`, prose wrapped to `width` and fenced code
/// indented, as `torchdx diagnose` lays out rule text.
pub fn terminal_text(markdown: &str, color: bool, width: usize) -> String {
    let mut o = String::new();
    for l in (Term { color, width }).block("", 0, markdown) {
        o.push_str(&l);
        o.push('\n');
    }
    o
}

/// The characters of `s` that show: ANSI escape sequences (`ESC [ ... m`) left out.
pub(crate) fn shown_chars(s: &str) -> impl Iterator<Item = char> + '_ {
    let mut esc = false;
    s.chars().filter(move |&c| match (esc, c) {
        (false, '\x1b') => {
            esc = true;
            false
        }
        (true, 'm') => {
            esc = false;
            false
        }
        (true, _) => false,
        (false, _) => true,
    })
}

/// Visible width: characters, not counting ANSI escape sequences.
pub(crate) fn visible(s: &str) -> usize {
    shown_chars(s).count()
}

/// `s` padded with spaces to `width` visible characters.
pub(crate) fn pad_to(s: &str, width: usize) -> String {
    format!("{s}{}", " ".repeat(width.saturating_sub(visible(s))))
}

enum Piece {
    Blank,
    Heading(String),
    Code(Vec<String>),
    Para { bullet: Option<String>, text: String },
}

/// Blocks of rule prose: blank lines, fenced code, and paragraphs (a list item starts a
/// new one; other single line breaks are soft).
fn pieces(s: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut lines = s.trim_matches('\n').lines().peekable();
    let mut para: Option<(Option<String>, String)> = None;
    let flush = |para: &mut Option<(Option<String>, String)>, out: &mut Vec<Piece>| {
        if let Some((bullet, text)) = para.take() {
            out.push(Piece::Para { bullet, text });
        }
    };
    while let Some(l) = lines.next() {
        let t = l.trim_start();
        if t.starts_with("```") {
            flush(&mut para, &mut out);
            let fence_indent = l.len() - t.len();
            let mut code = Vec::new();
            for c in lines.by_ref() {
                if c.trim_start().starts_with("```") {
                    break;
                }
                let strip = c.len() - c.trim_start().len();
                code.push(c[strip.min(fence_indent)..].trim_end().to_string());
            }
            out.push(Piece::Code(code));
            continue;
        }
        if t.is_empty() {
            flush(&mut para, &mut out);
            out.push(Piece::Blank);
            continue;
        }
        if let Some(h) = t.strip_prefix('#').map(|h| h.trim_start_matches('#')).filter(|h| h.starts_with(' ')) {
            flush(&mut para, &mut out);
            out.push(Piece::Heading(h.trim().to_string()));
            continue;
        }
        if let Some((bullet, rest)) = list_item(t) {
            flush(&mut para, &mut out);
            para = Some((Some(bullet), rest.to_string()));
            continue;
        }
        match &mut para {
            Some((_, text)) => {
                text.push(' ');
                text.push_str(t);
            }
            None => para = Some((None, t.to_string())),
        }
    }
    flush(&mut para, &mut out);
    out
}

/// `- x`, `* x`, `12. x`, `- [ ] x`: the marker as a terminal shows it, and the rest.
fn list_item(t: &str) -> Option<(String, &str)> {
    if let Some(r) = t.strip_prefix("- [ ] ") {
        return Some(("[ ]".into(), r));
    }
    if let Some(r) = t.strip_prefix("- ").or_else(|| t.strip_prefix("* ")) {
        return Some(("-".into(), r));
    }
    let (n, r) = t.split_once(". ")?;
    (!n.is_empty() && n.len() <= 3 && n.chars().all(|c| c.is_ascii_digit())).then(|| (format!("{n}."), r))
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Span {
    Plain,
    Code,
    Bold,
}

/// A unit of wrapping: a word, or a whole code span with its spaces, and any plain text
/// glued to it (`` `x`, `` is one atom, so the comma never starts a line).
#[derive(Clone, Debug, Default)]
struct Atom {
    parts: Vec<(Span, String)>,
}

impl Atom {
    fn width(&self) -> usize {
        self.parts.iter().map(|(_, t)| t.chars().count()).sum()
    }

    /// This atom, split at its spaces when it is wider than `room` (a code span
    /// longer than a line).
    fn fit(self, room: usize) -> Vec<Atom> {
        if self.width() <= room || !self.parts.iter().any(|(_, t)| t.contains(' ')) {
            return vec![self];
        }
        let mut out = vec![Atom::default()];
        for (kind, t) in self.parts {
            for (i, w) in t.split(' ').enumerate() {
                if i > 0 {
                    out.push(Atom::default());
                }
                if !w.is_empty() {
                    out.last_mut().expect("one atom").parts.push((kind, w.to_string()));
                }
            }
        }
        out.retain(|a| !a.parts.is_empty());
        out
    }
}

/// The atoms of a paragraph: spans found first (an unclosed marker is plain text), then
/// split at the whitespace outside code spans.
fn atoms(s: &str) -> Vec<Atom> {
    let mut out: Vec<Atom> = Vec::new();
    let mut cur = Atom::default();
    let mut rest = s;
    let push_plain = |text: &str, cur: &mut Atom, out: &mut Vec<Atom>| {
        for (i, w) in text.split(char::is_whitespace).enumerate() {
            if i > 0 && !cur.parts.is_empty() {
                out.push(std::mem::take(cur));
            }
            if !w.is_empty() {
                cur.parts.push((Span::Plain, w.to_string()));
            }
        }
    };
    while !rest.is_empty() {
        let code = rest.find('`');
        let bold = rest.find("**");
        let next = match (code, bold) {
            (Some(c), Some(b)) if b < c => Some((b, Span::Bold)),
            (Some(c), _) => Some((c, Span::Code)),
            (None, Some(b)) => Some((b, Span::Bold)),
            (None, None) => None,
        };
        let Some((at, kind)) = next else {
            push_plain(rest, &mut cur, &mut out);
            break;
        };
        let (open, body_from) = match kind {
            Span::Code => {
                // ``a`b`` style: as many backticks close as opened.
                let ticks = rest[at..].bytes().take_while(|&b| b == b'`').count();
                ("`".repeat(ticks), at + ticks)
            }
            _ => ("**".to_string(), at + 2),
        };
        let Some(close) = rest[body_from..].find(open.as_str()) else {
            push_plain(rest, &mut cur, &mut out);
            break;
        };
        push_plain(&rest[..at], &mut cur, &mut out);
        let body = &rest[body_from..body_from + close];
        match kind {
            Span::Code => {
                let body = if open.len() > 1 { body.trim() } else { body };
                cur.parts.push((Span::Code, body.to_string()));
            }
            _ => {
                // Bold text wraps like prose, each word bold.
                for (i, w) in body.split_whitespace().enumerate() {
                    if i > 0 {
                        out.push(std::mem::take(&mut cur));
                    }
                    cur.parts.push((Span::Bold, w.to_string()));
                }
            }
        }
        rest = &rest[body_from + close + open.len()..];
    }
    if !cur.parts.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(width: usize) -> Term {
        Term { color: false, width }
    }

    #[test]
    fn markup_is_rendered_not_shown() {
        let t = plain(100);
        let table: &[(&str, &str)] = &[
            ("Check `x.device` first.", "Check x.device first."),
            ("A **bold** claim.", "A bold claim."),
            ("Call ``a`b`` here.", "Call a`b here."),
            ("An unclosed `tick stays.", "An unclosed `tick stays."),
            ("Glued `x`, then more.", "Glued x, then more."),
        ];
        for (src, want) in table {
            assert_eq!(t.block("", 0, src), vec![want.to_string()], "{src}");
        }
    }

    #[test]
    fn fenced_code_is_indented_and_never_wrapped() {
        let src = "Move it:\n\n```python\nx = x.to(device)   # a comment that is long enough to pass the width\n```\n\nThen rerun.";
        let got = plain(30).block("  ", 2, src);
        assert_eq!(
            got,
            vec![
                "  Move it:".to_string(),
                String::new(),
                "      x = x.to(device)   # a comment that is long enough to pass the width".to_string(),
                String::new(),
                "  Then rerun.".to_string(),
            ]
        );
        assert!(got.iter().all(|l| !l.contains("```")));
    }

    #[test]
    fn prose_wraps_to_the_width_with_a_hanging_indent() {
        let src = "one two three four five six seven eight nine ten eleven twelve thirteen";
        let got = plain(40).block("  Next: ", 8, src);
        assert!(got.len() > 1, "{got:?}");
        assert!(got.iter().all(|l| visible(l) <= 40), "{got:?}");
        assert!(got[0].starts_with("  Next: one"));
        assert!(got[1..].iter().all(|l| l.starts_with("        ") && !l.starts_with("         ")), "{got:?}");
        assert_eq!(got.join(" ").split_whitespace().count(), 14);
    }

    #[test]
    fn a_lead_too_wide_for_its_hang_gives_way() {
        // A table row's lead of 45 columns at width 60 leaves no room to hang under it.
        let lead = format!("{:<45}", "  5        line 3               initiating");
        let got = plain(60).block(&lead, 45, "The GPU ran out of memory with a large cached reserve [cuda-oom]");
        assert!(got.iter().all(|l| visible(l) <= 60), "{got:?}");
        assert!(got[1..].iter().all(|l| l.starts_with("    ") && !l.starts_with("     ")), "{got:?}");
    }

    #[test]
    fn a_code_span_stays_on_one_line_when_it_fits() {
        let src = "aaaa bbbb cccc dddd `x = x.to(device)` eeee";
        let got = plain(28).block("", 0, src);
        assert!(got.iter().any(|l| l.contains("x = x.to(device)")), "{got:?}");
    }

    #[test]
    fn list_items_hang_under_their_text() {
        let src = "Two ways:\n- the first way, which is long enough to wrap around\n- the second";
        let got = plain(30).block("", 4, src);
        assert_eq!(got[0], "Two ways:");
        assert!(got[1].starts_with("    - the first"), "{got:?}");
        assert!(got[2].starts_with("      ") && !got[2].starts_with("       "), "{got:?}");
        assert!(got.last().is_some_and(|l| l == "    - the second"), "{got:?}");
    }

    #[test]
    fn a_document_loses_its_markdown() {
        let md = "# id: Title\n\nFamily: `fam`\n\n## Checklist\n\n- [ ] Print `x.device`.\n- [ ] Rerun.\n";
        let got = terminal_text(md, false, 80);
        assert_eq!(got, "id: Title\n\nFamily: fam\n\nChecklist\n\n[ ] Print x.device.\n[ ] Rerun.\n");
    }

    #[test]
    fn colour_takes_no_room() {
        let t = Term { color: true, width: 26 };
        let got = t.block("", 0, "`aaaa` `bbbb` `cccc` `dddd` `eeee` `ffff` `gggg`");
        assert!(got.len() == 2 && got.iter().all(|l| visible(l) <= 26), "{got:?}");
        assert!(got[0].contains("\x1b[36maaaa\x1b[0m"));
        assert_eq!(visible(&pad_to("\x1b[2mkey\x1b[0m", 8)), 8);
    }
}
