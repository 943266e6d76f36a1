//! Random cut points (inside UTF-8 characters and line ends too): the streaming
//! diagnosis gives the same JSON as the whole input, and the streaming redactor the same
//! bytes, whatever the chunking. One line of the log may be stretched by up to 255 KiB
//! of filler on each side: a line longer than twice the kept length (64 KiB) is kept as
//! its head and tail, and what its dropped middle holds must count the same whether the
//! line arrived whole or in a thousand chunks. Inputs are at most 4 KiB, so without the
//! stretch no line could outgrow a chunk by more than 4 KiB.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use torchdx_core::redact::Redactor;
use torchdx_core::Engine;

static ENGINE: OnceLock<Engine> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let engine = ENGINE.get_or_init(Engine::builtin);
    let Some((&n, rest)) = data.split_first() else { return };
    // The first byte says how many chunk sizes follow; the sizes cycle over the log.
    let n = usize::from(n % 16).min(rest.len());
    let (sizes, rest) = rest.split_at(n);
    // Then two bytes: how many KiB of filler go on each side of a line, and which line.
    let [stretch, which, log @ ..] = rest else { return };
    let stretched;
    let log = if *stretch == 0 {
        log
    } else {
        let lines: Vec<&[u8]> = log.split_inclusive(|&b| b == b'\n').collect();
        let k = usize::from(*which) % lines.len().max(1);
        let pad = vec![b'x'; usize::from(*stretch) * 1024];
        let mut out = Vec::with_capacity(log.len() + 2 * pad.len());
        for (i, l) in lines.iter().enumerate() {
            if i == k {
                out.extend_from_slice(&pad);
                let body = l.strip_suffix(b"\n").unwrap_or(l);
                out.extend_from_slice(body);
                out.extend_from_slice(&pad);
                out.extend_from_slice(&l[body.len()..]);
            } else {
                out.extend_from_slice(l);
            }
        }
        stretched = out;
        &stretched[..]
    };
    let sizes: Vec<usize> =
        if sizes.is_empty() { vec![7] } else { sizes.iter().map(|&b| 1 + usize::from(b)).collect() };
    let chunks = || {
        let mut out = Vec::new();
        let (mut at, mut k) = (0, 0);
        while at < log.len() {
            let end = (at + sizes[k % sizes.len()]).min(log.len());
            out.push(&log[at..end]);
            at = end;
            k += 1;
        }
        out
    };
    let mut s = engine.stream();
    for c in chunks() {
        s.feed(c);
    }
    assert_eq!(s.finish().to_json(), engine.diagnose_bytes(log).to_json());

    let redact = |parts: &[&[u8]]| {
        let mut r = Redactor::new();
        let mut out = Vec::new();
        for p in parts {
            r.feed(p, &mut out);
        }
        r.finish(&mut out);
        out
    };
    let whole = redact(&[log]);
    assert_eq!(redact(&chunks()), whole);
    // Every line is kept.
    assert_eq!(whole.iter().filter(|&&b| b == b'\n').count(), log.iter().filter(|&&b| b == b'\n').count());
});
