//! The Python call-expression grammar on arbitrary source lines.
#![no_main]

use libfuzzer_sys::fuzz_target;
use torchdx_core::internals::pycall;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let line = pycall::parse_line(text);
    for c in &line.calls {
        for a in &c.args {
            let _ = pycall::base_name(a);
        }
    }
});
