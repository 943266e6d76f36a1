//! Whole-input diagnosis from arbitrary bytes: never panics, and every location is
//! inside the input.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use torchdx_core::Engine;

static ENGINE: OnceLock<Engine> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let engine = ENGINE.get_or_init(Engine::builtin);
    let report = engine.diagnose_bytes(data);
    let lines = report.input.lines;
    for f in &report.findings {
        assert!(f.location.line >= 1 && f.location.line <= f.location.end_line.max(1));
        assert!(f.location.end_line <= lines.max(1));
    }
    if let Some(i) = report.initiating {
        assert!(i < report.findings.len());
    }
});
