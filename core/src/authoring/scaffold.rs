//! The scaffold of a new rule (`torchdx rules new ID`): every section, with text that
//! says what belongs there. `rules check` refuses any of that text left in a rule, so a
//! half-written rule can never be merged.

/// The text of a new rule file with this id.
pub fn new_rule(id: &str) -> String {
    let mut t = TEMPLATE.replace("{id}", id);
    for (i, p) in PROSE.iter().enumerate() {
        t = t.replace(&format!("{{prose{i}}}"), p);
    }
    t
}

/// The scaffold's prose, which stands where an author's text belongs. `rules check`
/// refuses a rule that still holds any of it.
pub const PROSE: &[&str] = &[
    "What went wrong, as a headline",
    "The mechanism in one line, for the docs hub.",
    "Why this happens: the real mechanism, in a paragraph.",
    "A step the reader can check and answer yes or no, e.g. print a value.",
    "The specific change, naming the expression at fault:",
    "A command or check that proves the fix worked.",
    "The structural change that stops this coming back.",
    "A fact the log cannot show that would settle the diagnosis.",
    "The single most useful next step.",
    "Replace this with the message text",
    "a similar message that is a different failure",
];

/// Whether a line of a rule file still holds scaffold prose ([`PROSE`]).
pub fn is_scaffold_line(line: &str) -> bool {
    PROSE.iter().any(|p| line.contains(p))
}

const TEMPLATE: &str = r#"#:schema schema/rule.schema.json
# A torchdx rule. `rules/README.md` explains every key and the template language.
# Fill in each section, paste a real-shaped log into the first example, then run
#   torchdx rules test rules --bless   (records the evidence the engine extracts)
#   torchdx rules check rules          (every check a reviewer would make)
id = "{id}"
# The taxonomy family this failure belongs to (`other` when none fits).
family = "other"
title = "{prose0}"
summary = "{prose1}"
mechanism = """
{prose2}
"""
checklist = [
  "{prose3}",
]
fix = """
{prose4} {failing_code|the failing line}.
"""
verify = "{prose5}"
prevent = "{prose6}"
missing = ["{prose7}"]
next_action = "{prose8}"
related = []

[[match]]
# The message as PyTorch prints it, variable parts as typed captures ({int:n}, {shape:s}, ...).
template = "{prose9} {text:detail}"
torch = ">=2.0"

[[example]]
name = "first-real-shaped-log"
expect = "match"
log = '''
Traceback (most recent call last):
  File "/home/user/project/train.py", line 10, in <module>
    main()
RuntimeError: {prose9} of the failure
'''

[[example]]
name = "second-wording-or-prefix"
expect = "match"
log = '''
[rank0]: RuntimeError: {prose9} as another release prints it
'''

[[example]]
name = "near-miss"
expect = "no-match"
log = '''
RuntimeError: {prose10}
'''
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scaffold_is_recognised_line_by_line_and_a_filled_rule_is_not() {
        let text = new_rule("my-failure");
        assert!(!text.contains("{prose"), "every prose slot is filled");
        assert!(text.contains("id = \"my-failure\""));
        let flagged: Vec<&str> =
            text.lines().filter(|l| !l.trim_start().starts_with('#') && is_scaffold_line(l)).collect();
        assert_eq!(flagged.len(), 13, "{flagged:#?}");
        for fine in ["family = \"other\"", "Traceback (most recent call last):", "title = \"CUDA ran out of memory\""] {
            assert!(!is_scaffold_line(fine), "{fine}");
        }
    }
}
