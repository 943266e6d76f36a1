#!/usr/bin/env python3
"""Build codes.toml, codes-legacy.toml and nccl-lines.toml from the evidence files and the
hand-written descriptions in data_*.py, and check completeness against the enums.

Run:  python3 tools/codes/build_codes.py      (writes rules/data/codes.toml)

The three tables are written to a scratch folder first, checked, then joined into the one
data file the pack reads (its header is HEADER below).
"""
import json, os, re, sys, tomllib

import tempfile
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = tempfile.mkdtemp(prefix="torchdx-codes-")
EV = os.path.join(HERE, "evidence")
PACK_FILE = os.path.join(HERE, "..", "..", "rules", "data", "codes.toml")
HEADER = open(PACK_FILE).read().split("\n[[", 1)[0].rstrip() + "\n\n" if os.path.exists(PACK_FILE) else ""
sys.path.insert(0, HERE)
import data_cuda, data_libs, data_signals, data_nccl_lines  # noqa: E402

FAMILIES = {"device-side-assert", "illegal-memory-access", "no-kernel-image", "cuda-unavailable", "cuda-oom",
            "cudnn-error", "cublas-error", "nccl-error", "hardware-fault", "launch-out-of-resources",
            "worker-signal", "host-oom-killed", "extension-abi", "other",
            # ids from shared/reference/taxonomy.md also used:
            "shm-exhausted", "nccl-abort"}

def read_enum(fn):
    out = []
    for line in open(os.path.join(EV, fn)):
        if line.startswith("#") or not line.strip():
            continue
        n, v = [x.strip() for x in line.split("=")]
        out.append((n, int(v)))
    return out

def q(s):
    # TOML basic string; json escaping is a subset TOML accepts (\" \\ \n \t \uXXXX)
    return json.dumps(s, ensure_ascii=False)

def qa(xs):
    return "[" + ", ".join(q(x) for x in xs) + "]"

def emit_row(f, table, name, number, message, fam, meaning, causes, first_check, older=None, extra=None):
    assert fam in FAMILIES, (name, fam)
    assert 1 <= len(causes) <= 4, (name, causes)
    f.write("[[code]]\n")
    f.write(f"table = {q(table)}\n")
    f.write(f"name = {q(name)}\n")
    f.write(f"number = {number}\n")
    if message is not None:
        f.write(f"message = {q(message)}\n")
    if older:
        f.write(f"older_messages = {qa(older)}\n")
    if extra:
        for k, v in extra.items():
            f.write(f"{k} = {q(v)}\n")
    f.write(f"family = {q(fam)}\n")
    f.write(f"meaning = {q(meaning)}\n")
    f.write(f"causes = {qa(causes)}\n")
    f.write(f"first_check = {q(first_check)}\n\n")

def check_same(label, enum_names, data_keys):
    missing = [n for n in enum_names if n not in data_keys]
    extra = [n for n in data_keys if n not in enum_names]
    if missing or extra:
        raise SystemExit(f"{label}: missing descriptions {missing}, descriptions without enum value {extra}")

def main():
    counts = {}
    # ---------------- CUDA runtime -----------------
    cuda_enum = read_enum("enum_cudaError_cuda13.5.txt")
    dump = {}
    for fn in ("cuda11_dump.jsonl", "cuda12_dump.jsonl", "cuda13_dump.jsonl"):
        for line in open(os.path.join(EV, fn)):
            num, name, msg = json.loads(line)
            dump.setdefault(name, {})[fn] = (num, msg)
    check_same("cuda", [n for n, _ in cuda_enum], data_cuda.CUDA.keys())
    # every enum value must have a string from the 13.5 runtime, and numbers must agree
    for n, v in cuda_enum:
        d = dump[n]["cuda13_dump.jsonl"]
        assert d[0] == v, (n, d, v)

    # ---------------- library enums ----------------
    tabs = [
        ("cublas", read_enum("enum_cublasStatus_nvmath.txt"), data_libs.CUBLAS, None),
        ("cudnn", read_enum("enum_cudnnStatus_cudnn9.28.txt"), data_libs.CUDNN, None),
        ("cusolver", read_enum("enum_cusolverStatus_nvmath.txt"), data_libs.CUSOLVER, None),
        ("cufft", read_enum("enum_cufftResult_nvmath.txt"), data_libs.CUFFT, None),
        ("cusparse", read_enum("enum_cusparseStatus_cusparse12.5.txt"), data_libs.CUSPARSE, "cusparse_12.5.10_dump.txt"),
        ("curand", read_enum("enum_curandStatus_nvmath.txt"), data_libs.CURAND, None),
        ("nccl", read_enum("enum_ncclResult_nccl2.30.7.txt"), data_libs.NCCL, None),
    ]
    for t, enum, data, _ in tabs:
        check_same(t, [n for n, _ in enum], data.keys())
    # cuDNN: cudnnGetErrorString output must be the name (or the canonical name for aliases)
    cudnn_str = {}
    for line in open(os.path.join(EV, "cudnn_dump.txt")):
        num, s = line.split(None, 1)
        cudnn_str[int(num)] = s.strip()
    for n, v in read_enum("enum_cudnnStatus_cudnn9.28.txt"):
        assert cudnn_str[v].startswith("CUDNN_STATUS_"), (n, v, cudnn_str[v])
    cusparse_str = {}
    for line in open(os.path.join(EV, "cusparse_12.5.10_dump.txt")):
        left, msg = line.rstrip("\n").split(" | ")
        num, name = left.split(" ", 1)
        cusparse_str[name] = (int(num), msg)
    nccl_msgs = {  # src/init.cc ncclGetErrorString at NVIDIA/nccl v2.30.7
        "ncclSuccess": "no error",
        "ncclUnhandledCudaError": "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
        "ncclSystemError": "unhandled system error (run with NCCL_DEBUG=INFO for details)",
        "ncclInternalError": "internal error - please report this issue to the NCCL developers",
        "ncclInvalidArgument": "invalid argument (run with NCCL_DEBUG=WARN for details)",
        "ncclInvalidUsage": "invalid usage (run with NCCL_DEBUG=WARN for details)",
        "ncclRemoteError": "remote process exited or there was a network error",
        "ncclInProgress": "NCCL operation in progress",
        "ncclTimeout": "timeout",
        "ncclNumResults": "unknown result code",  # default branch: the sentinel is not a case
    }

    # ---------------- signals ----------------------
    sigs = []
    for line in open(os.path.join(EV, "signals_glibc2.36.txt")):
        if line.startswith("#"):
            continue
        num, name, msg = line.rstrip("\n").split("\t")
        sigs.append((int(num), name, msg))
    check_same("signal", [n for _, n, _ in sigs], data_signals.SIGNALS.keys())

    # ---------------- write codes.toml -------------
    with open(os.path.join(ROOT, "codes.toml"), "w") as f:
        f.write("# Error codes of CUDA, its libraries and NCCL, and the signals of launcher summaries.\n")
        f.write("# Generated by tools/build_codes.py from evidence/ (see README.md). Do not edit by hand.\n")
        f.write("# message = the exact text the library's string function returns (cudaGetErrorString, cusparseGetErrorString,\n")
        f.write("#           ncclGetErrorString, strsignal); omitted where PyTorch prints only the status name\n")
        f.write("#           (cuBLAS, cuDNN - whose cudnnGetErrorString returns the name -, cuSOLVER, cuFFT, cuRAND).\n")
        f.write("# older_messages = texts older library versions print for the same code (optional key).\n\n")
        n = 0
        for name, num in cuda_enum:
            fam, meaning, causes, fc = data_cuda.CUDA[name]
            msg = dump[name]["cuda13_dump.jsonl"][1]
            older = set()
            for fn in ("cuda11_dump.jsonl", "cuda12_dump.jsonl"):
                if fn in dump[name] and dump[name][fn][1] != msg:
                    older.add(dump[name][fn][1])
            older |= set(data_cuda.CUDA_OLDER.get(name, []))
            emit_row(f, "cuda", name, num, msg, fam, meaning, causes, fc, sorted(older) or None)
            n += 1
        counts["cuda"] = n
        for t, enum, data, _ in tabs:
            n = 0
            for name, num in enum:
                fam, meaning, causes, fc = data[name]
                msg = None
                older = None
                if t == "cusparse":
                    assert cusparse_str[name][0] == num
                    msg = cusparse_str[name][1]
                elif t == "nccl":
                    msg = nccl_msgs[name]
                    older = data_libs.NCCL_OLDER.get(name)
                emit_row(f, t, name, num, msg, fam, meaning, causes, fc, older)
                n += 1
            counts[t] = n
        n = 0
        for num, name, msg in sigs:
            fam, meaning, causes, fc = data_signals.SIGNALS[name]
            meaning = meaning.rstrip(".") + f" (torchrun: exitcode -{num}; shells and schedulers: exit code {128 + num})."
            emit_row(f, "signal", name, num, msg, fam, meaning, causes, fc)
            n += 1
        counts["signal"] = n

    # ---------------- legacy numbering -------------
    legacy = read_enum("enum_cudaError_cuda10.0_legacy.txt")
    with open(os.path.join(ROOT, "codes-legacy.toml"), "w") as f:
        f.write("# Legacy numberings that logs from old stacks still show. Same row shape as codes.toml.\n")
        f.write("# table cuda-legacy : cudaError_t numbering of CUDA <= 10.0 (renumbered in CUDA 10.1), seen in\n")
        f.write("#   'THCudaCheck FAIL file=... line=... error=59 : device-side assert triggered' and\n")
        f.write("#   'cuda runtime error (59) : device-side assert triggered at ...'. Messages are those of the\n")
        f.write("#   current runtime for the same name (older_messages where an older text is confirmed); the\n")
        f.write("#   exact CUDA <= 10.0 strings could not be re-read from a CUDA 10 libcudart here, see README.\n")
        f.write("# table cudnn-v8 : cudnnStatus_t numbering of cuDNN 7/8 (cuDNN 9 renumbered it).\n")
        f.write("# table cublas-thc : the texts legacy THC (PyTorch <= 1.x) printed as 'cublas runtime error : <text>'.\n\n")
        n = 0
        for name, num in legacy:
            fam, meaning, causes, fc = data_cuda.CUDA[name]
            msg = dump[name]["cuda13_dump.jsonl"][1]
            older = data_cuda.CUDA_OLDER.get(name)
            emit_row(f, "cuda-legacy", name, num, msg, fam, meaning, causes, fc, older)
            n += 1
        counts["cuda-legacy"] = n
        n = 0
        for name, num in data_libs.CUDNN8:
            fam, meaning, causes, fc = data_libs.CUDNN[name]
            emit_row(f, "cudnn-v8", name, num, None, fam, meaning, causes, fc)
            n += 1
        counts["cudnn-v8"] = n
        thc = [("CUBLAS_STATUS_NOT_INITIALIZED", 1, "library not initialized"),
               ("CUBLAS_STATUS_ALLOC_FAILED", 3, "resource allocation failed"),
               ("CUBLAS_STATUS_INVALID_VALUE", 7, "an invalid numeric value was used as an argument"),
               ("CUBLAS_STATUS_ARCH_MISMATCH", 8, "an absent device architectural feature is required"),
               ("CUBLAS_STATUS_MAPPING_ERROR", 11, "an access to GPU memory space failed"),
               ("CUBLAS_STATUS_EXECUTION_FAILED", 13, "the GPU program failed to execute"),
               ("CUBLAS_STATUS_INTERNAL_ERROR", 14, "an internal operation failed")]
        n = 0
        for name, num, msg in thc:
            fam, meaning, causes, fc = data_libs.CUBLAS[name]
            emit_row(f, "cublas-thc", name, num, msg, fam, meaning, causes, fc)
            n += 1
        counts["cublas-thc"] = n

    # ---------------- nccl lines -------------------
    with open(os.path.join(ROOT, "nccl-lines.toml"), "w") as f:
        f.write("# NCCL WARN/INFO lines that explain a failure. Generated by tools/build_codes.py.\n")
        f.write("# Line shape (NCCL src/debug.cc): '<host>:<pid>:<tid> [<cudaDev>] <file>:<line> NCCL WARN <text>' and\n")
        f.write("# '<host>:<pid>:<tid> [<cudaDev>] NCCL INFO <text>'; [N] is the local CUDA device, not the rank.\n")
        f.write("# PyTorch repeats the last WARN text after 'Last error:' without that prefix; every pattern is a\n")
        f.write("# literal of the text part, so it matches both. versions = NCCL releases whose source has the text.\n\n")
        for row in data_nccl_lines.LINES:
            assert row["family"] in FAMILIES
            assert row["pattern"] in row["example"], row["pattern"]
            assert 1 <= len(row["causes"]) <= 4
            f.write("[[line]]\n")
            for k in ("pattern", "example", "versions", "family", "meaning"):
                f.write(f"{k} = {q(row[k])}\n")
            f.write(f"causes = {qa(row['causes'])}\n")
            f.write(f"first_check = {q(row['first_check'])}\n\n")
        counts["nccl-lines"] = len(data_nccl_lines.LINES)

    # ---------------- parse back --------------------
    for fn in ("codes.toml", "codes-legacy.toml", "nccl-lines.toml"):
        with open(os.path.join(ROOT, fn), "rb") as fh:
            tomllib.load(fh)
    c = tomllib.load(open(os.path.join(ROOT, "codes.toml"), "rb"))["code"]
    keys = [(r["table"], r["name"]) for r in c]
    assert len(keys) == len(set(keys)), "duplicate (table, name)"
    def body(fn):
        t = open(os.path.join(ROOT, fn)).read()
        return t[t.index("\n[[") + 1:].rstrip() + "\n"
    with open(PACK_FILE, "w") as f:
        f.write(HEADER + body("codes.toml") + "\n" + body("codes-legacy.toml") + "\n" + body("nccl-lines.toml"))
    print(json.dumps(counts))

if __name__ == "__main__":
    main()
