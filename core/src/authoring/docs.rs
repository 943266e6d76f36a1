//! Rule documentation: a rule's encyclopedia entry as Markdown, for `torchdx explain`,
//! the generated `docs/rules/` pages and the web page's rule browser. Placeholders are
//! rendered for a reader without a log: a placeholder shows its fallback, or its name
//! in angle quotes (`‹argument›`).

use std::fmt::Write;

use crate::rules::facts::{self, Provider};
use crate::rules::pack::{Pack, Rule};
use crate::rules::spec::Expect;
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
    // One line per wording: templates that differ only in their conditions (one per
    // direction of a comparison) read the same to a user.
    let mut shown = std::collections::BTreeSet::new();
    for m in &s.matches {
        let line = format!(
            "- `{}`{}",
            m.template.replace('`', "'"),
            m.torch.as_ref().map(|v| format!(" (torch {v})")).unwrap_or_default()
        );
        if shown.insert(line.clone()) {
            let _ = writeln!(o, "{line}");
        }
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

/// Rule text as the docs show it, without a log: a placeholder reads as its fallback,
/// or its name in angle quotes (`‹argument›`). For titles and summaries in rule lists.
pub fn for_reader(text: &str) -> String {
    render_docs(text)
}

/// The generated docs: one page per rule, the keys page and the hub (grouped by the
/// families' areas), as (file name, text).
pub fn files(pack: &Pack) -> Vec<(String, String)> {
    let mut files = Vec::new();
    let mut hub = String::from(
        "# The torchdx encyclopedia\n\nGenerated from `rules/` by `torchdx rules docs`; do not edit by hand. \
         The keys rule text and conditions can use are in [facts.md](facts.md), the failure families in [families.md](families.md), every recognised wording in [messages.md](messages.md).\n",
    );
    let area_of = |family: &str| {
        pack.families().iter().find(|f| f.id == family).map(|f| f.area.clone()).unwrap_or_else(|| "ungrouped".into())
    };
    let mut areas: Vec<String> = pack.families().iter().map(|f| f.area.clone()).collect();
    areas.push("ungrouped".into());
    let mut seen = std::collections::BTreeSet::new();
    areas.retain(|a| seen.insert(a.clone()));
    let mut rules: Vec<_> = pack.rules().iter().collect();
    rules.sort_by(|a, b| (a.family(), a.id()).cmp(&(b.family(), b.id())));
    for area in areas {
        let in_area: Vec<_> = rules.iter().filter(|r| area_of(r.family()) == area).collect();
        if in_area.is_empty() {
            continue;
        }
        let _ = write!(
            hub,
            "\n## {area}\n\n| family | rule | symptom | mechanism | first check | fix |\n|---|---|---|---|---|---|\n"
        );
        for r in in_area {
            let s = &r.spec;
            let cell = |t: &str| render_docs(t.trim().lines().next().unwrap_or("")).replace('|', "\\|");
            let symptom = s.matches.first().map(|m| m.template.replace('`', "'")).unwrap_or_default();
            let symptom: String = symptom.chars().take(90).collect();
            let _ = writeln!(
                hub,
                "| {} | [{}]({}.md) | `{}` | {} | {} | {} |",
                r.family(),
                r.id(),
                r.id(),
                symptom.replace('|', "\\|"),
                cell(&s.summary),
                cell(s.checklist.first().map(String::as_str).unwrap_or("")),
                cell(&s.fix)
            );
        }
    }
    for r in &rules {
        files.push((format!("{}.md", r.id()), explain_markdown(r)));
    }
    files.push(("facts.md".into(), facts_markdown()));
    files.push(("families.md".into(), families_markdown(pack)));
    files.push(("messages.md".into(), messages_markdown(pack)));
    files.push(("README.md".into(), hub));
    files
}

/// The taxonomy as the pack holds it (`data/families.toml`): every family by area, its
/// typical message, and the rules that report it.
pub fn families_markdown(pack: &Pack) -> String {
    let mut o = String::from(
        "# Failure families

Generated from `rules/data/families.toml` by `torchdx rules docs`; do not edit by hand. \
         A report's `family` is one of these ids; the rules that report each are linked.\n",
    );
    let mut area = String::new();
    for f in pack.families() {
        if f.area != area {
            let _ = write!(o, "\n## {}\n\n| family | typical message | rules |\n|---|---|---|\n", f.area);
            area = f.area.clone();
        }
        let rules: Vec<String> =
            pack.rules().iter().filter(|r| r.family() == f.id).map(|r| format!("[{0}]({0}.md)", r.id())).collect();
        let text = f.text.replace('|', "\\|").replace('`', "'");
        let _ = writeln!(
            o,
            "| `{}` | {} | {} |",
            f.id,
            text,
            if rules.is_empty() { "none yet".into() } else { rules.join(", ") }
        );
    }
    o
}

/// The message catalog: every wording the pack recognises, by family and rule, with the
/// torch releases that print it.
pub fn messages_markdown(pack: &Pack) -> String {
    let mut o = String::from(
        "# Message catalog

Generated from the rules' `[[match]]` templates by `torchdx rules docs`; do not edit by hand. \
         `{kind:name}` marks a captured value, `{?...}` optional text, `{a|b}` alternatives.\n",
    );
    let mut rules: Vec<_> = pack.rules().iter().filter(|r| !r.spec.matches.is_empty()).collect();
    rules.sort_by(|a, b| (a.family(), a.id()).cmp(&(b.family(), b.id())));
    let mut family = "";
    for r in rules {
        if r.family() != family {
            let _ = write!(o, "\n## {}\n", r.family());
            family = r.family();
        }
        let _ = write!(o, "\n[{0}]({0}.md)\n\n", r.id());
        let mut shown = std::collections::BTreeSet::new();
        for m in &r.spec.matches {
            let torch = m.torch.as_ref().map(|v| format!(" (torch {v})")).unwrap_or_default();
            let line = format!("- `{}`{torch}", m.template.replace('`', "'"));
            if shown.insert(line.clone()) {
                let _ = writeln!(o, "{line}");
            }
        }
    }
    o
}

/// The keys rule text and conditions can name beyond a rule's own captures: the
/// contract's evidence, what the engine derives, and the fact groups a rule declares
/// (`torchdx explain --facts`, `docs/rules/facts.md`).
pub fn facts_markdown() -> String {
    let mut o = String::from(
        "# Keys for rule text and conditions\n\nGenerated from the engine's table of keys (`core/src/rules/facts.rs`) by `torchdx rules docs`. \
         A placeholder (`{name}`) or a condition (`present = [\"name\"]`) may name any capture of the rule's own templates and any key below. \
         Keys of a fact group are computed only for rules that declare it (`facts = [\"device-placement\"]`); a flag is present when it holds and absent otherwise.\n",
    );
    let mut current = String::new();
    for k in facts::KEYS {
        let group = match k.provider {
            Provider::Contract => "Evidence reserved by the report contract (every rule)".to_string(),
            Provider::Engine => "Evidence and text values the engine adds (every rule)".to_string(),
            Provider::Decision => {
                "Set by the culprit (a rule's `culprit`, a case's, or a `[[culprit_case]]`)".to_string()
            }
            Provider::Group(g) => format!("Fact group `{g}` (rules with `facts = [\"{g}\"]`)"),
            Provider::Lookup => "The code-table row a rule's `lookup` found (rules with `lookup`)".to_string(),
        };
        if group != current {
            let _ = write!(o, "\n## {group}\n\n| key | holds | meaning |\n|---|---|---|\n");
            current = group;
        }
        let _ = writeln!(o, "| `{}` | {} | {} |", k.name, k.shape.name(), k.meaning.replace('|', "\\|"));
    }
    o
}
