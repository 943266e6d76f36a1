//! A third-party pack of random but valid templates (literals, spaces, every capture
//! kind, optional groups and alternatives, nested) over random logs: the pack loads or
//! is refused with a located error, and diagnosis ends in bounded work without a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use torchdx_core::{Engine, Pack, RuleSource};

const WORDS: &[&str] = &["a", "ab", "Error:", "x", "failed", "[", "]", ".", "0"];
const KINDS: &[&str] = &["int", "text", "word", "any", "device", "shape", "ident", "path", "num", "dtype"];

/// A template from `b`, consuming bytes; `depth` bounds nesting.
fn template(b: &mut std::slice::Iter<'_, u8>, depth: u32, out: &mut String) {
    let n = b.next().map_or(1, |&x| 1 + x % 12);
    for _ in 0..n {
        let Some(&op) = b.next() else { return };
        match op % 8 {
            0 | 1 => out.push_str(WORDS[usize::from(op / 8) % WORDS.len()]),
            2 => out.push(' '),
            3 | 4 => {
                let kind = KINDS[usize::from(op / 8) % KINDS.len()];
                out.push_str(&format!("{{{kind}:c{}}}", op / 8 % 3));
            }
            5 if depth < 3 => {
                out.push_str("{?");
                template(b, depth + 1, out);
                out.push_str(" x}");
            }
            6 if depth < 3 => {
                out.push('{');
                template(b, depth + 1, out);
                out.push_str("a|");
                template(b, depth + 1, out);
                out.push_str("b}");
            }
            _ => out.push_str(WORDS[usize::from(op) % WORDS.len()]),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let split = data.iter().position(|&b| b == 0).unwrap_or(data.len().min(64));
    let (spec, log) = data.split_at(split);
    let mut t = String::from("Widget ");
    template(&mut spec.iter(), 0, &mut t);
    let t = t.replace("'''", "");
    let rule = format!(
        "id = \"fuzzed\"\nfamily = \"other\"\ntitle = \"T\"\nsummary = \"s\"\nmechanism = \"m\"\nchecklist = [\"c\"]\nfix = \"f\"\nverify = \"v\"\nprevent = \"p\"\nnext_action = \"n\"\nrelated = []\n\n[[match]]\ntemplate = '''{t}'''\ntorch = \">=2.0\"\n"
    );
    // The fuzzed rule alone (compiling the built-in pack per input would leave a few
    // hundred runs a minute).
    match Pack::new(&[RuleSource { name: "fuzzed.toml", text: &rule }]) {
        Ok(pack) => {
            let engine = Engine::new(pack);
            let r = engine.diagnose_bytes(log);
            assert!(r.initiating.is_none_or(|i| i < r.findings.len()));
        }
        Err(e) => assert!(e.line() >= 1 && e.column() >= 1, "{e}"),
    }
});
