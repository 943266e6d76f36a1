//! Criterion benches: pack load, a 100 KB paste, grammars alone.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use torchdx_core::internals::{pycall, traceback};
use torchdx_core::Engine;

fn paste_100k() -> String {
    let example = include_str!("../../examples/device-mismatch.log");
    let filler = "step 1200 loss 2.1183 lr 3.00e-04 grad_norm 0.917 tokens/s 183211\n";
    let mut s = String::new();
    while s.len() < 100 * 1024 - example.len() {
        s.push_str(filler);
    }
    s.push_str(example);
    s
}

fn benches(c: &mut Criterion) {
    c.bench_function("pack_load_builtin", |b| b.iter(Engine::builtin));
    let sources = torchdx_core::builtin_sources();
    // The built-in pack decoded from its precompiled JSON (what `Engine::builtin` does),
    // and the same files parsed as TOML (what an extra rule pack costs per file).
    c.bench_function("pack_decode_precompiled", |b| b.iter(|| torchdx_core::builtin_pack().unwrap()));
    c.bench_function("pack_parse_toml", |b| b.iter(|| torchdx_core::Pack::new(&sources).unwrap()));
    let pack = torchdx_core::Pack::new(&sources).unwrap();
    c.bench_function("engine_build_only", |b| b.iter(|| Engine::new(pack.clone())));
    let engine = Engine::builtin();
    let paste = paste_100k();
    let mut g = c.benchmark_group("diagnose");
    g.throughput(Throughput::Bytes(paste.len() as u64));
    g.bench_function("paste_100k", |b| b.iter(|| engine.diagnose(&paste)));
    let multirank = include_str!("../../examples/multirank-nccl.log");
    g.throughput(Throughput::Bytes(multirank.len() as u64));
    g.bench_function("multirank_example", |b| b.iter(|| engine.diagnose(multirank)));
    g.finish();
    let lines: Vec<&str> = include_str!("../../examples/device-mismatch.log").lines().collect();
    c.bench_function("grammar_traceback", |b| b.iter(|| traceback::parse(&lines)));
    c.bench_function("grammar_pycall", |b| {
        b.iter(|| pycall::parse_line("loss = F.cross_entropy(logits.view(-1, V), y.view(-1), ignore_index=-100)"))
    });
}

criterion_group!(engine, benches);
criterion_main!(engine);
