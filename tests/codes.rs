//! The code tables against the libraries' complete enums, and every print format of a
//! code read through them.
//!
//! `tools/codes/evidence/` holds each enum as its header (or string function) defines
//! it; `rules/data/codes.toml` is generated from them. A code of an enum with no row, a
//! row whose number disagrees with the enum, or a row of no enum fails here, so a new
//! CUDA or NCCL release's codes cannot be half added.

use std::collections::BTreeSet;
use std::path::Path;

use torchdx_core::Engine;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// `(table, name, number)` of every row of `rules/data/codes.toml`.
fn rows() -> BTreeSet<(String, String, i64)> {
    let text = std::fs::read_to_string(root().join("rules/data/codes.toml")).expect("rules/data/codes.toml");
    let doc: toml::Table = text.parse().expect("codes.toml parses");
    let mut out = BTreeSet::new();
    for r in doc["code"].as_array().expect("[[code]] rows") {
        let s = |k: &str| r.get(k).and_then(|v| v.as_str()).unwrap_or_default().to_string();
        let n = r.get("number").and_then(|v| v.as_integer()).expect("every row has a number");
        out.insert((s("table"), s("name"), n));
    }
    out
}

/// `NAME = number` lines (or the signal list's `number<TAB>NAME<TAB>text`).
fn enum_file(name: &str) -> Vec<(String, i64)> {
    let text = std::fs::read_to_string(root().join("tools/codes/evidence").join(name)).expect(name);
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')) {
        let (n, v) = match line.split_once('=') {
            Some((n, v)) => (n.trim().to_string(), v.trim().parse().expect(line)),
            None => {
                let mut f = line.split('\t');
                let v = f.next().and_then(|v| v.parse().ok()).expect(line);
                (f.next().expect(line).to_string(), v)
            }
        };
        out.push((n, v));
    }
    assert!(!out.is_empty(), "{name} lists no values");
    out
}

#[test]
fn code_tables_hold_every_enum_value() {
    let rows = rows();
    let enums: &[(&str, &[&str])] = &[
        ("cuda", &["enum_cudaError_cuda13.5.txt", "enum_cudaError_cuda12.9.txt"]),
        ("cuda-legacy", &["enum_cudaError_cuda10.0_legacy.txt"]),
        ("cublas", &["enum_cublasStatus_nvmath.txt"]),
        ("cudnn", &["enum_cudnnStatus_cudnn9.28.txt"]),
        ("cusolver", &["enum_cusolverStatus_nvmath.txt"]),
        ("cufft", &["enum_cufftResult_nvmath.txt"]),
        ("cusparse", &["enum_cusparseStatus_cusparse12.5.txt"]),
        ("curand", &["enum_curandStatus_nvmath.txt"]),
        ("nccl", &["enum_ncclResult_nccl2.30.7.txt"]),
        ("signal", &["signals_glibc2.36.txt"]),
    ];
    let mut missing = Vec::new();
    let mut covered = BTreeSet::new();
    for (table, files) in enums {
        for f in *files {
            for (name, n) in enum_file(f) {
                let key = (table.to_string(), name.clone(), n);
                if !rows.contains(&key) {
                    missing.push(format!("{table}: {name} = {n} ({f})"));
                }
                covered.insert(key);
            }
        }
    }
    assert!(missing.is_empty(), "codes with no row in rules/data/codes.toml:\n{}", missing.join("\n"));
    // Rows of the enums above that no enum lists (the THC and cuDNN 8 tables have no
    // enum file: they are the texts and numbering of old releases).
    let stray: Vec<_> = rows
        .iter()
        .filter(|r| enums.iter().any(|(t, _)| *t == r.0) && !covered.contains(*r))
        .map(|r| format!("{}: {} = {}", r.0, r.1, r.2))
        .collect();
    assert!(stray.is_empty(), "rows of no enum value:\n{}", stray.join("\n"));
}

/// Each print format of a code, pasted alone, gives the code's family and its row's
/// meaning, though no hand-written rule knows the message.
#[test]
fn every_print_format_reads_through_the_tables() {
    let engine = Engine::builtin();
    let cases: &[(&str, &str, &str)] = &[
        // (log line, family, code)
        ("RuntimeError: CUDA error: operation not permitted when stream is capturing", "other", "cudaErrorStreamCaptureUnsupported"),
        ("torch.AcceleratorError: CUDA error: the launch timed out and was terminated\nSearch for `cudaErrorLaunchTimeout' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.", "other", "cudaErrorLaunchTimeout"),
        ("THCudaCheck FAIL file=/pytorch/aten/src/THC/THCCachingHostAllocator.cpp line=278 error=46 : all CUDA-capable devices are busy or unavailable", "hardware-fault", "cudaErrorDevicesUnavailable"),
        ("RuntimeError: cuda runtime error (30) : unknown error at /pytorch/aten/src/THC/THCGeneral.cpp:47", "cuda-unavailable", "cudaErrorUnknown"),
        ("RuntimeError: cuFFT error: CUFFT_INTERNAL_ERROR", "other", "CUFFT_INTERNAL_ERROR"),
        ("RuntimeError: cusolver error: CUSOLVER_STATUS_EXECUTION_FAILED, when calling `cusolverDnSgetrf( handle, m, n, dA, ldda, static_cast<float*>(dataPtr.get()), ipiv, info)`", "other", "CUSOLVER_STATUS_EXECUTION_FAILED"),
        ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.20.5\nncclInvalidUsage: This usually reflects invalid usage of NCCL library.", "nccl-error", "ncclInvalidUsage"),
    ];
    let mut wrong = Vec::new();
    for (log, family, code) in cases {
        let r = engine.diagnose(log);
        let p = r.primary();
        let got_family = p.map(|f| f.family.as_str()).unwrap_or("(none)");
        let got_code = p.and_then(|f| f.evidence.extra.get("code")).and_then(|v| v.as_str()).unwrap_or("(none)");
        let meaning = p.and_then(|f| f.evidence.extra.get("code_meaning")).and_then(|v| v.as_str()).unwrap_or("");
        if got_family != *family || got_code != *code || meaning.is_empty() {
            wrong.push(format!(
                "{log:.70}\n  want {family} {code}, got {got_family} {got_code} ({:?})",
                p.map(|f| &f.id)
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
