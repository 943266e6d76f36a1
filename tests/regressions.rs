//! Inputs found by fuzzing (`fuzz/`), replayed on every test run. File names say which
//! target found them: `diagnose-*` is a whole log; `stream-*` is a chunk size byte
//! followed by a log that must stream to the same report as whole.
//!
//! - `diagnose-crash-793f…`, `diagnose-crash-b993…`: a multi-byte character right before
//!   a message made `class_before` slice inside the character (fixed: char boundaries).
//! - `stream-crash-033d…`: the same slice reached through the streaming target.
//! - `diagnose-crash-93567b…`: the timeline was sorted with a comparator mixing
//!   timestamps and line numbers, not a total order; std's sort panicked (fixed: input
//!   order).
//! - `diagnose-crash-7dedd3…`: a finding spanned lines 12 to 5: a garbled log put a
//!   stream's lines out of input order, and the location took the numbers of its first
//!   and last stream lines (fixed: least and greatest line number of the range).

use torchdx_core::Engine;

#[test]
fn fuzz_regressions_replay() {
    let engine = Engine::builtin();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz_regressions");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let data = std::fs::read(e.path()).unwrap();
        n += 1;
        if name.starts_with("stream-") {
            let Some((&first, log)) = data.split_first() else { continue };
            let size = 1 + first as usize % 97;
            let mut s = engine.stream();
            for chunk in log.chunks(size) {
                s.feed(chunk);
            }
            assert_eq!(s.finish().to_json(), engine.diagnose_bytes(log).to_json(), "{name}");
        } else {
            // The invariants the `diagnose` fuzz target asserts.
            let r = engine.diagnose_bytes(&data);
            assert!(r.initiating.is_none_or(|i| i < r.findings.len()), "{name}");
            let lines = r.input.lines.max(1);
            for f in &r.findings {
                let l = &f.location;
                assert!(l.line >= 1 && l.line <= l.end_line.max(1) && l.end_line <= lines, "{name}: {} at {l:?}", f.id);
            }
        }
    }
    assert!(n >= 3, "the regression inputs are missing");
}

/// Output amplification (issue "Hostile input"): thousands of distinct loose reports of
/// one rule were one finding each (20,000 lines: 85 MB of report, 14 s, and quadratic
/// overlap checks). Past 32 per rule and stream they are counted on the last kept one,
/// with the last line, and the report stays small.
#[test]
fn many_distinct_reports_of_one_rule_are_counted_not_listed() {
    let engine = Engine::builtin();
    // Letters, not digits: numbers in a message are one failure (a step counter).
    let word = |mut i: usize| -> String {
        (0..4)
            .map(|_| {
                let c = char::from(b'A' + (i % 26) as u8);
                i /= 26;
                c
            })
            .collect()
    };
    let log: String = (0..3000).map(|i| format!("cuDNN error: CUDNN_STATUS_{}\n", word(i))).collect();
    let r = engine.diagnose(&log);
    let of_rule: Vec<_> = r.findings.iter().filter(|f| f.id == "cudnn-error").collect();
    assert_eq!(of_rule.len(), 32, "{} findings", r.findings.len());
    let counted = of_rule.iter().find_map(|f| f.evidence.extra.get("similar_omitted")).and_then(|v| v.as_u64());
    assert_eq!(counted, Some(3000 - 32));
    let last = of_rule.iter().find_map(|f| f.evidence.extra.get("similar_last_line")).and_then(|v| v.as_u64());
    assert_eq!(last, Some(3000));
    assert!(r.to_json().len() < 400_000, "report of {} bytes", r.to_json().len());
}

/// Long lines of anchor words that all fail (`line line line ...`, `Killed Killed ...`):
/// judged once per line, not once per hit (a 1 MiB line took 97 s). The diagnosis of
/// such a line is cheap enough to run at test size without a timer: what it must not do
/// is find anything.
#[test]
fn a_line_of_failing_anchor_words_is_not_a_failure() {
    let engine = Engine::builtin();
    for word in ["line ", "Killed ", "Error "] {
        let r = engine.diagnose(&word.repeat(50_000));
        assert!(r.findings.iter().all(|f| f.id != "host-oom-killed" || word == "Killed "), "{word}");
        assert_eq!(r.input.lines, 1);
    }
}
