//! Small inputs grown into the shapes that once cost more than linear time: a fragment
//! (a message cut short, a run of anchor words, a near miss of a template) repeated
//! along lines of up to 64 KiB and over up to 256 KiB of log, identical lines or each
//! one made distinct, diagnosed with the built-in pack. The other targets' inputs are at
//! most 4 KiB, where amplification does not show.
//!
//! Asserts that the work is linear: the log is diagnosed at 25 KB/s or faster (plus a
//! second) in the fuzz build, whose ASan, coverage and debug assertions slow this code
//! about 30 times (the seed of 256 KB of `Killed ` runs in 0.05 s in release, 1.6 s
//! here). The bugs of this class would take many times the limit: 70 KB/s on near
//! misses and 14 s for a 1 MiB line of anchor words in release builds, 11 minutes for
//! 3.8 MB of distinct `cuDNN error` lines. And the report stays bounded: at most 2 MB
//! of JSON whatever the log.
#![no_main]

use std::sync::OnceLock;
use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use torchdx_core::Engine;

static ENGINE: OnceLock<Engine> = OnceLock::new();

const MAX_LINE: usize = 64 * 1024;
const MAX_LOG: usize = 256 * 1024;

fuzz_target!(|data: &[u8]| {
    let engine = ENGINE.get_or_init(Engine::builtin);
    // Byte 0: repeats of the fragment per line; byte 1: lines, and (high bit) whether
    // each line gets its own suffix; the rest: the fragment.
    let [per_line, lines, fragment @ ..] = data else { return };
    if fragment.is_empty() {
        return;
    }
    let fragment = String::from_utf8_lossy(&fragment[..fragment.len().min(512)]);
    let reps = (1 + usize::from(*per_line) * 16).min(MAX_LINE / fragment.len()).max(1);
    let line = fragment.repeat(reps);
    let distinct = lines & 0x80 != 0;
    let n = (1 + usize::from(lines & 0x7f) * 8).min(MAX_LOG / (line.len() + 8)).max(1);
    let mut log = String::with_capacity(n * (line.len() + 8));
    for i in 0..n {
        log.push_str(&line);
        if distinct {
            // A different word on every line: letters, as distinct error texts are.
            let mut k = i + 1;
            while k > 0 {
                log.push(char::from(b'a' + (k % 26) as u8));
                k /= 26;
            }
        }
        log.push('\n');
    }
    let t = Instant::now();
    let report = engine.diagnose(&log);
    let secs = t.elapsed().as_secs_f64();
    assert!(report.initiating.is_none_or(|i| i < report.findings.len()));
    let limit = 1.0 + log.len() as f64 / 25_000.0;
    assert!(
        secs <= limit,
        "{} bytes in {} lines took {secs:.2} s (limit {limit:.2} s): work is not linear in the input",
        log.len(),
        n
    );
    let json = report.to_json();
    assert!(json.len() <= 2 << 20, "a {} byte log gave a {} byte report", log.len(), json.len());
});
