//! `time-diagnose LOG`: the native side of `bench/wasm-vs-native.mjs`. Prints the best
//! of 5 in-process runs, in milliseconds, of what `diagnoseJson` does in WASM (diagnose
//! the text, write the report's JSON) on an engine built beforehand, as the WASM one is.

use std::time::Instant;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: time-diagnose LOG");
        std::process::exit(2);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("time-diagnose: {path}: {e}");
            std::process::exit(2);
        }
    };
    let engine = torchdx_core::Engine::builtin();
    let _ = engine.diagnose("warm up").to_json();
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        let json = engine.diagnose(&text).to_json();
        best = best.min(t.elapsed().as_secs_f64() * 1000.0);
        std::hint::black_box(json);
    }
    println!("{best:.3}");
}
