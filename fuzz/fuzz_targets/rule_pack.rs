//! Arbitrary text as a rule file (and as the op table): a clean error or a pack, never
//! a panic; a pack that loads can diagnose its own examples.
#![no_main]

use libfuzzer_sys::fuzz_target;
use torchdx_core::{Engine, Pack, RuleSource};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for name in ["rules/fuzzed.toml", "rules/data/ops.toml"] {
        if let Ok(pack) = Pack::new(&[RuleSource { name, text }]) {
            let engine = Engine::new(pack);
            for r in engine.pack().rules() {
                for e in &r.spec.examples {
                    let _ = engine.diagnose(&e.log);
                }
            }
        }
    }
    let _ = torchdx_core::check::check(&[RuleSource { name: "rules/fuzzed.toml", text }], &[]);
});
