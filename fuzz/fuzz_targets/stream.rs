//! The streaming API with arbitrary chunking gives the same report as the whole input.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use torchdx_core::Engine;

static ENGINE: OnceLock<Engine> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let engine = ENGINE.get_or_init(Engine::builtin);
    if data.is_empty() {
        return;
    }
    // The first byte picks the chunk size; the rest is the log.
    let size = 1 + data[0] as usize % 97;
    let log = &data[1..];
    let mut s = engine.stream();
    for chunk in log.chunks(size) {
        s.feed(chunk);
    }
    let streamed = s.finish().to_json();
    let whole = engine.diagnose_bytes(log).to_json();
    assert_eq!(streamed, whole);
});
