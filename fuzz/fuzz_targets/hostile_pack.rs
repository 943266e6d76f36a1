//! A third-party pack of random but valid templates (literals, spaces, every capture
//! kind, optional groups and alternatives, nested, and runs of a part repeated up to
//! 10,201 times) over random logs grown to up to 256 KiB: the pack loads or is refused
//! with a located error, and diagnosis ends in work linear in the input, without a
//! panic. Repetition is what makes the hostile shapes reachable from a few bytes:
//! thousands of captures in a row (which once overflowed the stack) and dozens of
//! optional groups in a row (which once spent the whole step budget on every anchor hit)
//! are one repeat op each, and a log dense with the template's head is one line op.
//!
//! Asserts the rate as `amplify` does: load and diagnosis at 25 KB/s or faster (plus a
//! second, and a millisecond a line) in the fuzz build, whose ASan, coverage and debug
//! assertions slow this code about 30 times; and a report of at most 2 MB.
#![no_main]

use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use torchdx_core::{Engine, Pack, RuleSource};

const WORDS: &[&str] = &["a", "ab", "Error:", "x", "failed", "[", "]", ".", "0"];
const KINDS: &[&str] = &["int", "text", "word", "any", "device", "shape", "ident", "path", "num", "dtype"];

/// The template grows no further past this (a repeat inside a repeat would otherwise
/// ask for 10^8 pieces).
const MAX_TEMPLATE: usize = 256 * 1024;
const MAX_LINE: usize = 64 * 1024;
const MAX_LOG: usize = 256 * 1024;

/// A template from `b`, consuming bytes: a count, then that many pieces.
fn template(b: &mut std::slice::Iter<'_, u8>, depth: u32, out: &mut String) {
    let n = b.next().map_or(1, |&x| 1 + x % 12);
    for _ in 0..n {
        piece(b, depth, out);
    }
}

/// One piece from `b`; `depth` bounds nesting.
fn piece(b: &mut std::slice::Iter<'_, u8>, depth: u32, out: &mut String) {
    let Some(&op) = b.next() else { return };
    if out.len() > MAX_TEMPLATE {
        return;
    }
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
        // Repeat: the next byte r gives 1 + 40r copies (up to 10,201) of the template
        // after it.
        7 if depth < 3 => {
            let times = 1 + 40 * usize::from(b.next().copied().unwrap_or(0));
            let mut one = String::new();
            template(b, depth + 1, &mut one);
            for _ in 0..times {
                if out.len() > MAX_TEMPLATE {
                    break;
                }
                out.push_str(&one);
            }
        }
        _ => out.push_str(WORDS[usize::from(op) % WORDS.len()]),
    }
}

/// The log: byte 0 = repeats of the fragment per line, byte 1 = lines, the rest = the
/// fragment; every line starts with the template's head, so each is an anchor hit.
fn log(data: &[u8]) -> String {
    let [per_line, lines, fragment @ ..] = data else {
        return String::from_utf8_lossy(data).into_owned();
    };
    let fragment = String::from_utf8_lossy(&fragment[..fragment.len().min(512)]);
    let fragment = if fragment.is_empty() { "a".into() } else { fragment };
    let reps = (1 + usize::from(*per_line) * 16).min(MAX_LINE / fragment.len()).max(1);
    let line = format!("Widget {}\n", fragment.repeat(reps));
    let n = (1 + usize::from(*lines) * 16).min(MAX_LOG / line.len()).max(1);
    line.repeat(n)
}

fuzz_target!(|data: &[u8]| {
    let split = data.iter().position(|&b| b == 0).unwrap_or(data.len().min(64));
    let (spec, rest) = data.split_at(split);
    let mut t = String::from("Widget ");
    template(&mut spec.iter(), 0, &mut t);
    let t = t.replace("'''", "");
    let log = log(rest.get(1..).unwrap_or_default());
    let rule = format!(
        "id = \"fuzzed\"\nfamily = \"other\"\ntitle = \"T\"\nsummary = \"s\"\nmechanism = \"m\"\nchecklist = [\"c\"]\nfix = \"f\"\nverify = \"v\"\nprevent = \"p\"\nnext_action = \"n\"\nrelated = []\n\n[[match]]\ntemplate = '''{t}'''\ntorch = \">=2.0\"\n"
    );
    let start = Instant::now();
    // The fuzzed rule alone (compiling the built-in pack per input would leave a few
    // hundred runs a minute).
    match Pack::new(&[RuleSource { name: "fuzzed.toml", text: &rule }]) {
        Ok(pack) => {
            let engine = Engine::new(pack);
            let r = engine.diagnose(&log);
            assert!(r.initiating.is_none_or(|i| i < r.findings.len()));
            let json = r.to_json();
            assert!(json.len() <= 2 << 20, "a {} byte log gave a {} byte report", log.len(), json.len());
        }
        Err(e) => assert!(e.line() >= 1 && e.column() >= 1, "{e}"),
    }
    let secs = start.elapsed().as_secs_f64();
    // Per byte, and per line: a line's attempts may take 800 steps whatever its length
    // (and give 300 back to the log's reserve), so a log of 9-byte lines, each a near
    // miss of two `any` captures in a row, costs about 2,000 steps a line (0.57 s a
    // megabyte in release, 0.8 ms a line here). The old bugs cost seconds per kilobyte.
    let lines = log.bytes().filter(|&b| b == b'\n').count();
    let limit = 1.0 + (rule.len() + log.len()) as f64 / 25_000.0 + lines as f64 / 1_000.0;
    assert!(
        secs <= limit,
        "a {} byte template over {} bytes and {lines} lines of log took {secs:.2} s (limit {limit:.2} s): work is not linear in the input",
        t.len(),
        log.len()
    );
});
