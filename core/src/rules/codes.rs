//! The code tables of `data/codes.toml`, and reading an evidence value through them.
//!
//! CUDA, cuBLAS, cuDNN, cuSOLVER, cuFFT, cuSPARSE, cuRAND and NCCL report failures as
//! codes, and PyTorch prints them in several ways: the library's message (`CUDA error:
//! an illegal memory access was encountered`), the enum name (`CUBLAS_STATUS_NOT_SUPPORTED`,
//! `Search for 'cudaErrorIllegalAddress'`), or a number (`error=59`, `cuda runtime error
//! (2)`). One generic rule per print format captures the value; the lookup turns it into
//! the row that says what the code means, its usual causes and the first check, and (for
//! rules that ask) its family. An error with no hand-written rule still gets a specific
//! diagnosis from its code.
//!
//! A lookup is a few string comparisons over a table of about 450 rows, made once per
//! finding, never per line: its cost does not show next to the scan.

use serde_json::Value;

use crate::rules::spec::{CodeRow, CodesFile, LineRow, LookupSpec};

/// What a lookup found.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Hit<'a> {
    Code(&'a CodeRow),
    Line(&'a LineRow),
}

impl<'a> Hit<'a> {
    pub(crate) fn family(&self) -> &'a str {
        match self {
            Hit::Code(r) => &r.family,
            Hit::Line(r) => &r.family,
        }
    }

    /// The evidence the row adds.
    pub(crate) fn evidence(&self) -> Vec<(&'static str, Value)> {
        let (name, table, number, meaning, causes, check, family) = match self {
            Hit::Code(r) => (&r.name, r.table.as_str(), r.number, &r.meaning, &r.causes, &r.first_check, &r.family),
            Hit::Line(r) => (&r.pattern, "nccl-line", None, &r.meaning, &r.causes, &r.first_check, &r.family),
        };
        let mut out = vec![
            ("code", Value::from(name.as_str())),
            ("code_table", Value::from(table)),
            ("code_meaning", Value::from(meaning.as_str())),
            ("code_causes", Value::from(causes.iter().map(|c| Value::from(c.as_str())).collect::<Vec<_>>())),
            ("code_check", Value::from(check.as_str())),
            ("code_family", Value::from(family.as_str())),
        ];
        if let Some(n) = number {
            out.push(("code_number", Value::from(n)));
        }
        out
    }
}

/// A value as lookup text: strings trimmed of enclosing quotes and a final period,
/// numbers as decimal.
fn as_key(v: &Value) -> Option<String> {
    let s = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    let mut s = s.trim();
    // Quotes around the whole value only (`'CUBLAS_STATUS_X'`): a quote inside it is text.
    for q in ['\'', '`', '"'] {
        if s.len() >= 2 && s.starts_with(q) && s.ends_with(q) {
            s = &s[1..s.len() - 1];
        }
    }
    let s = s.trim_end_matches('.').trim();
    (!s.is_empty()).then(|| s.to_string())
}

/// Case- and space-insensitive: `an illegal memory access was encountered` matches its
/// retyped or re-spaced forms, with or without the final period.
fn fold(s: &str) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ").to_ascii_lowercase();
    s.trim_end_matches('.').to_string()
}

/// How well a row fits one key: 0 not at all, else the length of what matched (a name
/// or number matches whole; a message the key begins with, past a word boundary, as
/// `CUDA error: out of memory` captured up to a period does, scores its length).
fn fit(r: &CodeRow, key: &str, folded: &str, number: Option<i64>) -> usize {
    if r.name == key {
        return key.len() + 1000;
    }
    if let Some(n) = number {
        return usize::from(r.number == Some(n)) * 1000;
    }
    r.message
        .iter()
        .chain(&r.older_messages)
        .map(|m| fold(m))
        .filter(|m| {
            !m.is_empty()
                && folded.starts_with(m.as_str())
                && folded[m.len()..].chars().next().is_none_or(|c| !c.is_ascii_alphanumeric())
        })
        .map(|m| m.len())
        .max()
        .unwrap_or(0)
}

/// The row the spec's keys name. Every key with a value votes: the row most keys agree
/// on wins (a THC line's legacy number and its message pick the CUDA <= 10.0 row, where
/// the message alone would pick today's), then the longest match, then the earlier
/// table. `[[line]]` tables match a pattern a value contains.
pub(crate) fn lookup<'a>(
    codes: &'a CodesFile,
    spec: &LookupSpec,
    value_of: impl Fn(&str) -> Option<Value>,
) -> Option<Hit<'a>> {
    let keys: Vec<(String, String, Option<i64>)> = spec
        .keys
        .iter()
        .filter_map(|k| value_of(k).as_ref().and_then(as_key))
        .map(|k| {
            let n = k.parse().ok();
            (fold(&k), k, n)
        })
        .collect();
    if keys.is_empty() {
        return None;
    }
    let mut best: Option<((usize, usize), &CodeRow)> = None;
    for t in &spec.tables {
        if t == "nccl-line" {
            continue;
        }
        for r in codes.code.iter().filter(|r| &r.table == t) {
            let fits: Vec<usize> = keys.iter().map(|(f, k, n)| fit(r, k, f, *n)).filter(|&x| x > 0).collect();
            if fits.is_empty() {
                continue;
            }
            let score = (fits.len(), fits.iter().sum::<usize>());
            // Strictly better only: on a tie the earlier table (then row) stays.
            if best.as_ref().is_none_or(|(b, _)| score > *b) {
                best = Some((score, r));
            }
        }
    }
    if let Some((_, r)) = best {
        return Some(Hit::Code(r));
    }
    if spec.tables.iter().any(|t| t == "nccl-line") {
        for (_, k, _) in &keys {
            // The longest pattern the value holds: `Cuda failure 'out of memory'` over
            // `Cuda failure`.
            if let Some(r) =
                codes.line.iter().filter(|r| k.contains(r.pattern.as_str())).max_by_key(|r| r.pattern.len())
            {
                return Some(Hit::Line(r));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(table: &str, name: &str, number: i64, message: Option<&str>, family: &str) -> CodeRow {
        CodeRow {
            table: table.into(),
            name: name.into(),
            number: Some(number),
            message: message.map(Into::into),
            older_messages: Vec::new(),
            family: family.into(),
            meaning: format!("{name} meaning"),
            causes: vec!["a cause".into()],
            first_check: "check".into(),
        }
    }

    fn codes() -> CodesFile {
        CodesFile {
            code: vec![
                row("cuda", "cudaErrorMemoryAllocation", 2, Some("out of memory"), "cuda-oom"),
                row(
                    "cuda",
                    "cudaErrorIllegalAddress",
                    700,
                    Some("an illegal memory access was encountered"),
                    "illegal-memory-access",
                ),
                row("cuda", "cudaErrorAssert", 710, Some("device-side assert triggered"), "device-side-assert"),
                row("cuda-legacy", "cudaErrorAssert", 59, Some("device-side assert triggered"), "device-side-assert"),
                row("cublas", "CUBLAS_STATUS_NOT_SUPPORTED", 15, None, "cublas-error"),
            ],
            line: vec![LineRow {
                pattern: "Error while creating shared memory segment".into(),
                example: String::new(),
                versions: String::new(),
                family: "shm-exhausted".into(),
                meaning: "m".into(),
                causes: Vec::new(),
                first_check: "c".into(),
            }],
        }
    }

    fn spec(tables: &[&str]) -> LookupSpec {
        LookupSpec { tables: tables.iter().map(|t| t.to_string()).collect(), keys: vec!["k".into()], family: true }
    }

    fn name_of(h: Option<Hit<'_>>) -> Option<String> {
        h.map(|h| h.evidence()[0].1.as_str().unwrap_or_default().to_string())
    }

    #[test]
    fn a_key_names_its_row_by_name_number_or_message() {
        let c = codes();
        let cases: &[(&[&str], &str, Option<&str>)] = &[
            (&["cuda"], "an illegal memory access was encountered", Some("cudaErrorIllegalAddress")),
            (&["cuda"], "An  illegal memory access was encountered.", Some("cudaErrorIllegalAddress")),
            (
                &["cuda"],
                "out of memory; CUDA kernel errors might be asynchronously reported",
                Some("cudaErrorMemoryAllocation"),
            ),
            (&["cuda"], "out of memoryless", None),
            (&["cuda"], "cudaErrorIllegalAddress", Some("cudaErrorIllegalAddress")),
            (&["cuda"], "700", Some("cudaErrorIllegalAddress")),
            (&["cuda-legacy", "cuda"], "59", Some("cudaErrorAssert")),
            (&["cuda"], "59", None),
            (&["cublas"], "'CUBLAS_STATUS_NOT_SUPPORTED'", Some("CUBLAS_STATUS_NOT_SUPPORTED")),
            (
                &["nccl-line"],
                "misc/shmutils.cc:112 NCCL WARN Error while creating shared memory segment /dev/shm/x",
                Some("Error while creating shared memory segment"),
            ),
            (&["cuda"], "", None),
        ];
        for (tables, key, want) in cases {
            let got = name_of(lookup(&c, &spec(tables), |_| Some(Value::from(*key))));
            assert_eq!(got.as_deref(), *want, "{key:?} in {tables:?}");
        }
    }

    #[test]
    fn keys_vote_and_the_row_most_agree_on_wins() {
        let c = codes();
        let s =
            LookupSpec { tables: vec!["cuda".into()], keys: vec!["a".into(), "b".into(), "c".into()], family: false };
        let got = lookup(&c, &s, |k| match k {
            "a" => None,
            "b" => Some(Value::from("no such code")),
            _ => Some(Value::from(2)),
        });
        assert_eq!(name_of(got).as_deref(), Some("cudaErrorMemoryAllocation"));
        // A THC line: legacy number 59 and the message; today's row has the message only.
        let s = LookupSpec {
            tables: vec!["cuda".into(), "cuda-legacy".into()],
            keys: vec!["n".into(), "m".into()],
            family: false,
        };
        let thc = |k: &str| Some(if k == "n" { Value::from(59) } else { Value::from("device-side assert triggered") });
        let hit = lookup(&c, &s, thc).map(|h| h.evidence());
        let number = hit.as_ref().and_then(|e| e.iter().find(|(k, _)| *k == "code_number").map(|(_, v)| v.clone()));
        assert_eq!(number, Some(Value::from(59)));
        // The message alone: today's row, from the earlier table.
        let hit = lookup(&c, &s, |k| (k == "m").then(|| Value::from("device-side assert triggered")));
        let number =
            hit.map(|h| h.evidence()).and_then(|e| e.into_iter().find(|(k, _)| *k == "code_number").map(|(_, v)| v));
        assert_eq!(number, Some(Value::from(710)));
    }
}
