//! Rule documentation: a rule's encyclopedia entry as Markdown, for `torchdx explain`,
//! the generated `docs/rules/` pages and the web page's rule browser. Placeholders are
//! rendered for a reader without a log ([`render_docs`]).

use std::fmt::Write;

use crate::rules::pack::{Expect, Pack, Rule};
use crate::rules::text::render_docs;

/// A rule's encyclopedia entry as Markdown (used by `explain` and `docs/rules/`).
pub fn explain_markdown(rule: &Rule) -> String {
    let s = &rule.spec;
    let mut o = String::new();
    let _ = writeln!(o, "# {}: {}\n", rule.id(), render_docs(&s.title));
    let _ = writeln!(
        o,
        "Family: `{}`{}\n",
        rule.family(),
        if s.collateral { " (usually collateral: the echo of a failure elsewhere)" } else { "" }
    );
    let _ = writeln!(o, "{}\n", render_docs(&s.summary));
    let _ = writeln!(o, "## Messages\n");
    for m in &s.matches {
        let _ = writeln!(
            o,
            "- `{}`{}",
            m.template.replace('`', "'"),
            m.torch.as_ref().map(|v| format!(" (torch {v})")).unwrap_or_default()
        );
    }
    let _ = writeln!(o, "\n## Mechanism\n\n{}\n", render_docs(s.mechanism.trim()));
    let _ = writeln!(o, "## Checklist\n");
    for c in &s.checklist {
        let _ = writeln!(o, "- [ ] {}", render_docs(c));
    }
    let _ = writeln!(o, "\n## Fix\n\n{}\n", render_docs(s.fix.trim()));
    let _ = writeln!(o, "## Verify\n\n{}\n", render_docs(s.verify.trim()));
    let _ = writeln!(o, "## Prevent\n\n{}\n", render_docs(s.prevent.trim()));
    if !s.missing.is_empty() {
        let _ = writeln!(o, "## What the log may not show\n");
        for m in &s.missing {
            let _ = writeln!(o, "- {}", render_docs(m));
        }
        let _ = writeln!(o);
    }
    let _ = writeln!(o, "## Next action\n\n{}\n", render_docs(s.next_action.trim()));
    if !s.cases.is_empty() {
        let _ = writeln!(o, "## Variants bound to evidence\n");
        for c in &s.cases {
            let mut conds = Vec::new();
            let w = &c.when;
            conds.extend(w.present.iter().map(|k| format!("`{k}` shown")));
            conds.extend(w.absent.iter().map(|k| format!("no `{k}`")));
            conds.extend(w.equals.iter().map(|(k, v)| format!("`{k}` = {}", v.values().join(" or "))));
            conds.extend(w.contains.iter().map(|(k, v)| format!("`{k}` contains \"{v}\"")));
            conds.extend(w.differ.iter().map(|k| format!("`{k}` differ")));
            conds.extend(w.frame_contains.iter().map(|k| format!("a frame in `{k}`")));
            conds.extend(w.log_contains.iter().map(|k| format!("the log shows \"{k}\"")));
            conds.extend(w.exception.iter().map(|k| format!("raised as `{k}`")));
            let what = c.title.as_deref().or(c.fix.as_deref()).unwrap_or("different advice");
            let _ = writeln!(
                o,
                "- When {}: {}",
                if conds.is_empty() { "always".into() } else { conds.join(", ") },
                render_docs(first_line(what))
            );
        }
        let _ = writeln!(o);
    }
    if !s.related.is_empty() {
        let rel: Vec<String> = s.related.iter().map(|r| format!("[{0}]({0}.md)", r)).collect();
        let _ = writeln!(o, "## Related\n\n{}\n", rel.join(", "));
    }
    let _ = writeln!(o, "## Examples\n");
    for e in &s.examples {
        let _ = writeln!(
            o,
            "### {} ({})\n\n```text\n{}\n```\n",
            e.name,
            if e.expect == Expect::Match { "diagnosed" } else { "not this rule" },
            e.log.trim_end()
        );
    }
    o
}

fn first_line(s: &str) -> &str {
    s.trim().lines().next().unwrap_or("")
}

/// The generated docs: one page per rule plus the hub, as (file name, text).
pub fn files(pack: &Pack) -> Vec<(String, String)> {
    let mut files = Vec::new();
    let mut hub = String::from(
        "# The torchdx encyclopedia\n\nGenerated from `rules/` by `torchdx rules docs`; do not edit by hand.\n\n| family | rule | symptom | mechanism | first check | fix |\n|---|---|---|---|---|---|\n",
    );
    let mut rules: Vec<_> = pack.rules().iter().collect();
    rules.sort_by(|a, b| (a.family(), a.id()).cmp(&(b.family(), b.id())));
    for r in rules {
        let s = &r.spec;
        let cell = |t: &str| render_docs(t.trim().lines().next().unwrap_or("")).replace('|', "\\|");
        let symptom = s.matches.first().map(|m| m.template.replace('`', "'")).unwrap_or_default();
        let symptom: String = symptom.chars().take(90).collect();
        hub.push_str(&format!(
            "| {} | [{}]({}.md) | `{}` | {} | {} | {} |\n",
            r.family(),
            r.id(),
            r.id(),
            symptom.replace('|', "\\|"),
            cell(&s.summary),
            cell(s.checklist.first().map(String::as_str).unwrap_or("")),
            cell(&s.fix)
        ));
        files.push((format!("{}.md", r.id()), explain_markdown(r)));
    }
    files.push(("README.md".into(), hub));
    files
}
