//! The breadth fixture: one message per line that a user may paste alone
//! (`fixtures/breadth/lines.tsv`, `family<TAB>line`), every family and every class of
//! code-table row, old and new wordings, with and without prefixes. Each line, diagnosed
//! alone, must give its family. `fixtures/breadth/check.py` runs the same check
//! against any `torchdx` binary.

use torchdx_core::Engine;

#[test]
fn every_breadth_line_gives_its_family() {
    let text = include_str!("fixtures/breadth/lines.tsv");
    let engine = Engine::builtin();
    let mut misses = Vec::new();
    let mut n = 0;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let (family, log) = line.split_once('\t').unwrap_or_else(|| panic!("lines.tsv:{}: no tab", i + 1));
        n += 1;
        let r = engine.diagnose(log);
        let got = r.primary().map(|f| f.family.as_str()).unwrap_or("(none)");
        if got != family {
            misses.push(format!("lines.tsv:{}: want {family}, got {got}\n    {log:.120}", i + 1));
        }
    }
    assert!(n >= 120, "the fixture holds {n} lines; it must cover at least 120");
    assert!(misses.is_empty(), "{} of {n} lines miss their family:\n{}", misses.len(), misses.join("\n"));
}
