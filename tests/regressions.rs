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
