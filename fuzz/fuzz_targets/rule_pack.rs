//! Arbitrary text as a rule file (and as the op table): a clean, located error or a
//! compiled pack, never a panic; every text field of a pack that compiles renders.
#![no_main]

use libfuzzer_sys::fuzz_target;
use torchdx_core::internals::{render_lossy, Context};
use torchdx_core::{Pack, RuleSource};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for name in ["rules/fuzzed.toml", "rules/data/ops.toml"] {
        match Pack::new(&[RuleSource { name, text }]) {
            Ok(pack) => {
                let ctx = Context::new();
                for r in pack.rules() {
                    let s = &r.spec;
                    for t in [&s.title, &s.mechanism, &s.fix, &s.verify, &s.prevent, &s.next_action] {
                        let _ = render_lossy(t, &ctx);
                    }
                    for t in r.templates() {
                        for e in &s.examples {
                            let _ = t.find(&e.log, 0);
                        }
                    }
                }
            }
            Err(e) => {
                // Locations are 1-based and inside the file.
                assert!(e.line() >= 1 && e.column() >= 1);
                assert!(e.line() <= text.lines().count().max(1) + 1);
            }
        }
    }
});
