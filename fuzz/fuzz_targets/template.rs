//! The template compiler and matcher: arbitrary template text and haystack, bounded
//! work, no panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use torchdx_core::internals::Template;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // Template and haystack separated by the first NUL (or the whole text as both).
    let (tpl, hay) = text.split_once('\0').unwrap_or((text, text));
    if let Ok(t) = Template::parse(tpl) {
        let _ = t.capture_specs();
        if let Some(m) = t.find(hay, 0) {
            assert!(m.start <= m.end && m.end <= hay.len());
        }
    }
});
