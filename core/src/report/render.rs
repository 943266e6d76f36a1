//! Human-readable renderings of a [`Report`]: plain text for a terminal (optionally
//! coloured) and Markdown for issues and chat.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::term::{pad_to, visible, Term};
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

/// One row of the per-rank table: a rank's first report and how many followed (ranks
/// whose rows would read the same share one).
struct RankRow<'a> {
    ranks: Vec<u32>,
    first: &'a Finding,
    time: Option<&'a str>,
    more: usize,
    /// The finding's location is this row's report (a finding merged over ranks keeps
    /// its first report's place): the row shows the line, and shares itself with no rank.
    at_location: bool,
}

impl RankRow<'_> {
    /// The time and, where [`RankRow::at_location`], `line N`.
    fn when(&self, sep: &str) -> String {
        let line = self.at_location.then(|| format!("line {}", self.first.location.line));
        match (self.time, line) {
            (Some(t), Some(l)) => format!("{t}{sep}{l}"),
            (Some(t), None) => t.to_string(),
            (None, Some(l)) => l,
            (None, None) => String::new(),
        }
    }
}

/// Per rank, its first report (in timeline order) and the count of later ones. Empty
/// unless at least two ranks reported.
fn rank_rows(report: &Report) -> Vec<RankRow<'_>> {
    // Per rank first: (rank, finding index, time, later reports), in first-seen order.
    let mut per: Vec<(u32, usize, Option<&str>, usize)> = Vec::new();
    let mut index: BTreeMap<u32, usize> = BTreeMap::new();
    for t in &report.timeline {
        if t.finding >= report.findings.len() {
            continue;
        }
        for &r in &t.ranks {
            match index.get(&r) {
                Some(&k) => per[k].3 += 1,
                None => {
                    index.insert(r, per.len());
                    per.push((r, t.finding, t.time.as_deref(), 0));
                }
            }
        }
    }
    // Findings the timeline did not list still give their ranks a row.
    for (i, f) in report.findings.iter().enumerate() {
        for r in f.reporting_ranks() {
            if let std::collections::btree_map::Entry::Vacant(e) = index.entry(r) {
                e.insert(per.len());
                per.push((r, i, None, 0));
            }
        }
    }
    if per.len() < 2 {
        return Vec::new();
    }
    let mut rows: Vec<RankRow<'_>> = Vec::new();
    for (r, i, time, more) in per {
        let f = &report.findings[i];
        let at_location = f.rank == Some(r) || f.ranks.len() <= 1;
        let shared = (!at_location)
            .then(|| {
                rows.iter_mut().find(|x| !x.at_location && std::ptr::eq(x.first, f) && x.time == time && x.more == more)
            })
            .flatten();
        match shared {
            Some(x) => x.ranks.push(r),
            None => rows.push(RankRow { ranks: vec![r], first: f, time, more, at_location }),
        }
    }
    for r in &mut rows {
        r.ranks.sort_unstable();
    }
    rows
}

/// `line 35`, or `lines 35-41`.
fn lines_of(f: &Finding) -> String {
    let (a, b) = (f.location.line, f.location.end_line);
    if a == b {
        format!("line {a}")
    } else {
        format!("lines {a}-{b}")
    }
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::Initiating => "initiating",
        Role::Independent => "independent",
        Role::Collateral => "collateral",
    }
}

/// One sentence: which rank is the suspect and why, citing lines.
fn suspect_sentence(report: &Report) -> Option<String> {
    let init = report.primary()?;
    let echoes: Vec<&Finding> = report.findings.iter().filter(|f| f.role == Role::Collateral).collect();
    let echo_ranks: Vec<u32> = {
        let mut v: Vec<u32> =
            echoes.iter().flat_map(|f| f.reporting_ranks()).filter(|&r| Some(r) != init.rank).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let echo_lines =
        match (echoes.iter().map(|f| f.location.line).min(), echoes.iter().map(|f| f.location.end_line).max()) {
            (Some(a), Some(b)) if a == b => format!(" (line {a})"),
            (Some(a), Some(b)) => format!(" (lines {a}-{b})"),
            _ => String::new(),
        };
    let echoes_said = if echo_ranks.is_empty() {
        String::new()
    } else {
        format!("; ranks {} only echo it{echo_lines}", compress_ranks(&echo_ranks))
    };
    if let Some(s) = init.evidence.extra.get("suspect_rank").and_then(|v| v.as_u64()) {
        let count = |k: &str| init.evidence.extra.get(k).and_then(|v| v.as_u64());
        if let (Some(v), Some(o), Some(l)) =
            (count("suspect_progress"), count("suspect_progress_others"), count("suspect_line"))
        {
            return Some(format!(
                "Suspect: rank {s}. Its own report (line {l}) shows it stopped at {v}, behind every other rank ({o} or more): it never reached the step the others wait in{echoes_said}."
            ));
        }
        if init.rank.is_none() || init.rank == Some(s as u32) && init.ranks.len() > 1 {
            return Some(format!(
                "Suspect: rank {s}. The other ranks' reports point at it (line {}, {}: {}); its own output is not in this log.",
                init.location.line, init.id, init.title
            ));
        }
    }
    let r = init.rank?;
    let how = match init.evidence.extra.get("rank_from").and_then(|v| v.as_str()) {
        Some("launcher") => " (the launcher names it as the failed worker)".to_string(),
        Some(_) | None => String::new(),
    };
    Some(format!(
        "Suspect: rank {r}{how}. It failed first (line {}, {}: {}){echoes_said}.",
        init.location.line, init.id, init.title
    ))
}

/// The report for a person at a terminal: headline, culprit, evidence with line
/// numbers, checklist, fix, verify; collateral findings in brief. Every section fits in
/// `width` columns (code lines excepted: they are never broken), and rule prose shows no
/// Markdown syntax (see [`super::term`]).
pub fn text(report: &Report, color: bool, width: usize) -> String {
    let st = Term { color, width };
    let mut o = String::new();
    let put = |o: &mut String, lines: Vec<String>| {
        for l in lines {
            let _ = writeln!(o, "{l}");
        }
    };
    if report.findings.is_empty() {
        let none = format!("No failure found in {}.", plural(report.input.lines, "line", "lines"));
        put(&mut o, st.block("", 0, &none));
        put(&mut o, st.block("", 0, "torchdx looks for Python tracebacks and PyTorch, CUDA, NCCL and torchrun error messages; paste the log from the first error to the end."));
        if report.input.truncated_lines > 0 {
            let long = format!(
                "{} longer than 64 KiB: only the first and last 32 KiB of each were read.",
                plural(report.input.truncated_lines, "line was", "lines were")
            );
            put(&mut o, st.block("", 0, &long));
        }
        if let Some(n) = dropped_notice(report) {
            put(&mut o, st.block("", 0, &n));
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
        let w = match who(f) {
            w if w.is_empty() => w,
            w if w.starts_with("reported") => format!(" {w}"),
            w => format!(" on {w}"),
        };
        let head = format!("{} [{}]{}", st.bold(&st.inline(&f.title)), f.id, w);
        put(&mut o, st.block(&format!("{} ", st.red("●")), 2, &head));
        let confidence = format!("{:?}", f.confidence).to_ascii_lowercase();
        let _ =
            writeln!(o, "  {}", st.dim(&format!("{}, {confidence} confidence, {}", role_name(f.role), lines_of(f))));
        if let Some(c) = &f.culprit {
            let _ = writeln!(o);
            put(&mut o, st.block(&format!("  {} ", st.bold("Culprit:")), 4, &c.summary));
        }
        let _ = writeln!(o, "\n  {}", st.bold("Evidence"));
        let shown = text_evidence(f);
        let key_w = shown.iter().map(|(k, _)| k.chars().count()).max().unwrap_or(0).clamp(12, 24) + 2;
        for (k, v) in shown {
            // Two spaces after a key longer than the column, so it never runs into its value.
            let key = pad_to(&format!("    {}  ", st.dim(k)), 4 + key_w);
            let lines = st.block(&key, 4 + key_w, &plain_value(&v));
            put(&mut o, lines);
        }
        let _ = writeln!(o, "\n  {}", st.bold("Why"));
        put(&mut o, st.block("    ", 4, &f.mechanism));
        if !f.checklist.is_empty() {
            let _ = writeln!(o, "\n  {}", st.bold("Check"));
            for c in &f.checklist {
                put(&mut o, st.block("    [ ] ", 8, c));
            }
        }
        let _ = writeln!(o, "\n  {}", st.bold("Fix"));
        put(&mut o, st.block("    ", 4, &f.fix));
        let _ = writeln!(o);
        put(&mut o, st.block(&format!("  {} ", st.bold("Verify:")), 4, &f.verify));
        put(&mut o, st.block(&format!("  {} ", st.bold("Prevent:")), 4, &f.prevent));
        if !f.missing.is_empty() {
            let _ = writeln!(o, "\n  {}", st.bold("Missing"));
            for m in &f.missing {
                put(&mut o, st.block("    - ", 6, m));
            }
        }
        let _ = writeln!(o);
        put(&mut o, st.block(&format!("  {} ", st.bold("Next:")), 4, &f.next_action));
    }
    let collateral: Vec<&Finding> = report.findings.iter().filter(|f| f.role == Role::Collateral).collect();
    if !collateral.is_empty() && report.initiating.is_some() {
        let _ = writeln!(o, "\n{}", st.bold("Collateral (echoes of the failure above)"));
        for f in collateral {
            let w = who(f);
            let item = format!(
                "{} [{}]{} line {}",
                st.inline(&f.title),
                f.id,
                if w.is_empty() { String::new() } else { format!(" {w},") },
                f.location.line
            );
            put(&mut o, st.block("  - ", 4, &item));
        }
    }
    let rows = rank_rows(report);
    if !rows.is_empty() {
        let _ = writeln!(o, "\n{}", st.bold("Ranks"));
        let _ = writeln!(o, "  {:<8} {:<20} {:<12} first report", "rank", "when", "role");
        for r in &rows {
            let more = if r.more > 0 { format!(" (+{} more)", r.more) } else { String::new() };
            let ranks = compress_ranks(&r.ranks);
            let (role, title, id) = (role_name(r.first.role), st.inline(&r.first.title), &r.first.id);
            let lead = format!("  {ranks:<8} {:<20} {role:<12} ", r.when(" "));
            let hang = visible(&lead);
            put(&mut o, st.block(&lead, hang, &format!("{title} [{id}]{more}")));
        }
        if let Some(s) = suspect_sentence(report) {
            put(&mut o, st.block("  ", 2, &s));
        }
    }
    if report.timeline.len() > 1 {
        let _ = writeln!(o, "\n{}", st.bold("Timeline"));
        for t in &report.timeline {
            let lead = format!("  {} ", t.time.as_deref().unwrap_or("        "));
            let hang = visible(&lead);
            put(&mut o, st.block(&lead, hang, &t.text));
        }
    }
    if let Some(n) = dropped_notice(report) {
        let _ = writeln!(o);
        put(&mut o, st.block(&format!("{} ", st.bold("Note:")), 6, &n));
    }
    o
}

/// What the report says when the memory bound dropped lines of context.
fn dropped_notice(report: &Report) -> Option<String> {
    let n = report.input.dropped_lines;
    (n > 0).then(|| {
        format!(
            "{} of context from the middle of this log were dropped to stay within the memory bound (the earliest and the latest failures are kept); a failure reported only there is missing here. Diagnose that part of the log on its own to see it.",
            plural(n, "line", "lines")
        )
    })
}

/// Who reported an unranked finding, as the timeline says it (`launcher`, `process`,
/// `unknown rank`).
fn unranked_who(report: &Report, f: &Finding) -> String {
    let index = report.findings.iter().position(|x| std::ptr::eq(x, f));
    report
        .timeline
        .iter()
        .find(|t| Some(t.finding) == index)
        .and_then(|t| t.text.split_once(": ").map(|(who, _)| who.to_string()))
        .unwrap_or_else(|| if report.input.ranks.is_empty() { "process".into() } else { "unknown rank".into() })
}

/// Evidence as the terminal shows it: raw byte counts (`tried_bytes`) stay in the JSON
/// when the human size (`tried`) is shown, and a key whose value another key already
/// shows under the shorter name (`reserved_unallocated` beside `unallocated`) is shown once.
fn text_evidence(f: &Finding) -> Vec<(&str, String)> {
    let all = ordered_evidence(f);
    let has = |k: &str| all.iter().any(|(x, _)| *x == k);
    all.iter()
        .filter(|(k, v)| {
            let raw_bytes = k.strip_suffix("_bytes").is_some_and(&has);
            let echoed = all.iter().any(|(x, w)| x != k && k.ends_with(&format!("_{x}")) && w == v);
            !raw_bytes && !echoed
        })
        .cloned()
        .collect()
}

/// An evidence value as prose for [`Term::block`]: it is data, not Markdown, so a
/// backtick or `**` in it is shown as is (a code span of the whole value keeps them).
fn plain_value(v: &str) -> String {
    if v.contains('`') || v.contains("**") {
        let ticks = "`".repeat(longest_run(v, '`') + 1);
        format!("{ticks} {v} {ticks}")
    } else {
        v.to_string()
    }
}

fn longest_run(s: &str, c: char) -> usize {
    let (mut best, mut cur) = (0, 0);
    for x in s.chars() {
        cur = if x == c { cur + 1 } else { 0 };
        best = best.max(cur);
    }
    best
}

/// The report as Markdown.
pub fn markdown(report: &Report) -> String {
    let mut o = String::new();
    if report.findings.is_empty() {
        let _ = writeln!(o, "**torchdx:** no failure found in {}.", plural(report.input.lines, "line", "lines"));
        if let Some(n) = dropped_notice(report) {
            let _ = writeln!(o, "\n> **Note:** {n}");
        }
        return o;
    }
    let grouped = report.initiating.is_some();
    for f in &report.findings {
        if f.role == Role::Collateral && grouped {
            continue;
        }
        let w = who(f);
        let _ =
            writeln!(o, "## {} (`{}`{})\n", f.title, f.id, if w.is_empty() { String::new() } else { format!(", {w}") });
        let confidence = format!("{:?}", f.confidence).to_ascii_lowercase();
        let _ = writeln!(o, "*{}, {confidence} confidence, {}*\n", role_name(f.role), lines_of(f));
        if f.role == Role::Collateral {
            continue;
        }
        if let Some(c) = &f.culprit {
            let _ = writeln!(o, "**Culprit.** {}\n", c.summary);
        }
        let _ = writeln!(o, "| evidence | value |\n|---|---|");
        for (k, v) in text_evidence(f) {
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
            let _ = writeln!(o, "**Missing**\n");
            for m in &f.missing {
                let _ = writeln!(o, "- {m}");
            }
            let _ = writeln!(o);
        }
        let _ = writeln!(o, "**Next.** {}\n", f.next_action);
    }
    let collateral: Vec<&Finding> = report.findings.iter().filter(|f| f.role == Role::Collateral).collect();
    if grouped && !collateral.is_empty() {
        let _ = writeln!(o, "### Collateral (echoes of the failure above)\n\n| ranks | lines | what |\n|---|---|---|");
        for f in collateral {
            let ranks = f.reporting_ranks();
            let ranks = if ranks.is_empty() { unranked_who(report, f) } else { compress_ranks(&ranks) };
            let lines = lines_of(f).trim_start_matches("lines ").trim_start_matches("line ").to_string();
            let _ = writeln!(o, "| {ranks} | {lines} | {} (`{}`) |", f.title.replace('|', "\\|"), f.id);
        }
        let _ = writeln!(o);
    }
    let rows = rank_rows(report);
    if !rows.is_empty() {
        let _ = writeln!(o, "### Ranks\n\n| rank | when | role | first report |\n|---|---|---|---|");
        for r in &rows {
            let more = if r.more > 0 { format!(" (+{} more)", r.more) } else { String::new() };
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} (`{}`){more} |",
                compress_ranks(&r.ranks),
                r.when(", "),
                role_name(r.first.role),
                r.first.title.replace('|', "\\|"),
                r.first.id
            );
        }
        if let Some(s) = suspect_sentence(report) {
            let _ = writeln!(o, "\n{s}");
        }
        let _ = writeln!(o);
    }
    if report.timeline.len() > 1 {
        let _ = writeln!(o, "### Timeline\n");
        for t in &report.timeline {
            let _ = writeln!(o, "1. {}{}", t.time.as_ref().map(|x| format!("{x} ")).unwrap_or_default(), t.text);
        }
    }
    if let Some(n) = dropped_notice(report) {
        let _ = writeln!(o, "\n> **Note:** {n}");
    }
    o
}
