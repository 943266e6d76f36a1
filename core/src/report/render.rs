//! Human-readable renderings of a [`Report`]: plain text for a terminal (optionally
//! coloured) and Markdown for issues and chat.

use std::fmt::Write;

use super::{compress_ranks, value_text, Evidence, Finding, Report, Role};

/// Evidence as shown: the contract's reserved keys first, in their order, then the
/// rest alphabetically.
fn ordered_evidence(f: &Finding) -> Vec<(&str, String)> {
    let ev = &f.evidence;
    let mut out: Vec<(&str, String)> = Vec::new();
    for k in Evidence::RESERVED {
        if let Some(v) = ev.get(k) {
            out.push((k, value_text(&v)));
        }
    }
    for (k, v) in &ev.extra {
        out.push((k, value_text(v)));
    }
    out
}

struct Style {
    on: bool,
}

impl Style {
    fn paint(&self, code: &str, s: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    fn bold(&self, s: &str) -> String {
        self.paint("1", s)
    }
    fn red(&self, s: &str) -> String {
        self.paint("1;31", s)
    }
    fn dim(&self, s: &str) -> String {
        self.paint("2", s)
    }
    fn green(&self, s: &str) -> String {
        self.paint("32", s)
    }
}

fn who(f: &Finding) -> String {
    if let Some(s) = f.evidence.extra.get("suspect_rank").and_then(|v| v.as_u64()) {
        let by = if f.ranks.len() > 1 {
            format!("reported by ranks {}", compress_ranks(&f.ranks))
        } else {
            "reported by other ranks".into()
        };
        return format!("{by}; points at rank {s}");
    }
    if f.ranks.len() > 1 {
        format!("ranks {}", compress_ranks(&f.ranks))
    } else if let Some(r) = f.rank {
        format!("rank {r}")
    } else {
        String::new()
    }
}

/// The report for a person at a terminal: headline, culprit, evidence with line
/// numbers, checklist, fix, verify; collateral findings in brief.
pub fn text(report: &Report, color: bool) -> String {
    let st = Style { on: color };
    let mut o = String::new();
    if report.findings.is_empty() {
        let _ = writeln!(o, "No failure found in {} lines.", report.input.lines);
        let _ = writeln!(o, "torchdx looks for Python tracebacks and PyTorch, CUDA, NCCL and torchrun error messages; paste the log from the first error to the end.");
        if report.input.truncated_lines > 0 {
            let _ = writeln!(
                o,
                "{} line(s) were longer than 64 KiB: only their first and last 32 KiB were read.",
                report.input.truncated_lines
            );
        }
        return o;
    }
    for (i, f) in report.findings.iter().enumerate() {
        if f.role == Role::Collateral && report.initiating.is_some() {
            continue;
        }
        if i > 0 {
            let _ = writeln!(o);
        }
        let tag = match f.role {
            Role::Initiating => "initiating",
            Role::Independent => "independent",
            Role::Collateral => "collateral",
        };
        let w = match who(f) {
            w if w.is_empty() => w,
            w if w.starts_with("reported") => format!(" {w}"),
            w => format!(" on {w}"),
        };
        let _ = writeln!(o, "{} {} [{}]{}", st.red("●"), st.bold(&f.title), f.id, w);
        let _ = writeln!(
            o,
            "  {}",
            st.dim(
                &format!("{tag}, {:?} confidence, lines {}-{}", f.confidence, f.location.line, f.location.end_line)
                    .to_lowercase()
            )
        );
        if let Some(c) = &f.culprit {
            let _ = writeln!(o, "\n  {} {}", st.bold("Culprit:"), c.summary);
        }
        let _ = writeln!(o, "\n  {}", st.bold("Evidence"));
        for (k, v) in ordered_evidence(f) {
            let _ = writeln!(o, "    {:<16} {}", st.dim(k), v);
        }
        let _ = writeln!(o, "\n  {}", st.bold("Why"));
        for l in wrap(&f.mechanism, 76) {
            let _ = writeln!(o, "    {l}");
        }
        if !f.checklist.is_empty() {
            let _ = writeln!(o, "\n  {}", st.bold("Check"));
            for c in &f.checklist {
                let _ = writeln!(o, "    [ ] {c}");
            }
        }
        let _ = writeln!(o, "\n  {}", st.bold("Fix"));
        for l in f.fix.lines() {
            let _ = writeln!(o, "    {}", st.green(l));
        }
        let _ = writeln!(o, "\n  {} {}", st.bold("Verify:"), f.verify);
        if !f.missing.is_empty() {
            let _ = writeln!(o, "  {} {}", st.bold("Missing:"), f.missing.join("; "));
        }
        let _ = writeln!(o, "  {} {}", st.bold("Next:"), f.next_action);
    }
    let collateral: Vec<&Finding> = report.findings.iter().filter(|f| f.role == Role::Collateral).collect();
    if !collateral.is_empty() && report.initiating.is_some() {
        let _ = writeln!(o, "\n{}", st.bold("Collateral (echoes of the failure above)"));
        for f in collateral {
            let w = who(f);
            let _ = writeln!(
                o,
                "  - {} [{}]{} line {}",
                f.title,
                f.id,
                if w.is_empty() { String::new() } else { format!(" {w},") },
                f.location.line
            );
        }
    }
    if report.timeline.len() > 1 {
        let _ = writeln!(o, "\n{}", st.bold("Timeline"));
        for t in &report.timeline {
            let _ = writeln!(o, "  {} {}", t.time.as_deref().unwrap_or("        "), t.text);
        }
    }
    o
}

/// The report as Markdown.
pub fn markdown(report: &Report) -> String {
    let mut o = String::new();
    if report.findings.is_empty() {
        let _ = writeln!(o, "**torchdx:** no failure found in {} lines.", report.input.lines);
        return o;
    }
    for f in &report.findings {
        let w = who(f);
        let _ =
            writeln!(o, "## {} (`{}`{})\n", f.title, f.id, if w.is_empty() { String::new() } else { format!(", {w}") });
        let _ = writeln!(
            o,
            "*{:?}, {:?} confidence, lines {}–{}*\n",
            f.role, f.confidence, f.location.line, f.location.end_line
        );
        if f.role == Role::Collateral {
            continue;
        }
        if let Some(c) = &f.culprit {
            let _ = writeln!(o, "**Culprit:** {}\n", c.summary);
        }
        let _ = writeln!(o, "| evidence | value |\n|---|---|");
        for (k, v) in ordered_evidence(f) {
            let _ = writeln!(o, "| {k} | `{}` |", v.replace('|', "\\|").replace('`', "'"));
        }
        let _ = writeln!(o, "\n**Why.** {}\n", f.mechanism);
        if !f.checklist.is_empty() {
            let _ = writeln!(o, "**Check**\n");
            for c in &f.checklist {
                let _ = writeln!(o, "- [ ] {c}");
            }
            let _ = writeln!(o);
        }
        let _ = writeln!(o, "**Fix.** {}\n\n**Verify.** {}\n\n**Prevent.** {}\n", f.fix, f.verify, f.prevent);
        if !f.missing.is_empty() {
            let _ = writeln!(o, "**Missing:** {}\n", f.missing.join("; "));
        }
        let _ = writeln!(o, "**Next:** {}\n", f.next_action);
    }
    if report.timeline.len() > 1 {
        let _ = writeln!(o, "### Timeline\n");
        for t in &report.timeline {
            let _ = writeln!(o, "1. {}{}", t.time.as_ref().map(|x| format!("{x} ")).unwrap_or_default(), t.text);
        }
    }
    o
}

/// Greedy word wrap; single line breaks in rule prose are soft, blank lines separate
/// paragraphs, and list items (`* `, `- `, `1. `) start their own line.
pub(crate) fn wrap(s: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut paras: Vec<String> = Vec::new();
    for (i, block) in s.trim().split("\n\n").enumerate() {
        if i > 0 {
            paras.push(String::new());
        }
        let mut cur = String::new();
        for l in block.lines() {
            let t = l.trim_start();
            let item = t.starts_with("* ")
                || t.starts_with("- ")
                || t.split_once(". ").is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
            if item && !cur.is_empty() {
                paras.push(std::mem::take(&mut cur));
            }
            if !cur.is_empty() {
                cur.push(' ');
            }
            cur.push_str(t);
        }
        paras.push(cur);
    }
    for para in &paras {
        if para.is_empty() {
            out.push(String::new());
            continue;
        }
        let mut line = String::new();
        for w in para.split_whitespace() {
            if !line.is_empty() && line.len() + 1 + w.len() > width {
                out.push(std::mem::take(&mut line));
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(w);
        }
        out.push(line);
    }
    out
}
