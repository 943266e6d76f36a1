//! `torchdx eval DIR`: scores the engine on a corpus of `CASE/log.txt` + `CASE/truth.toml`
//! with the same metrics and rules as `shared/eval/score.py`, so the two agree.

use crate::ExitCode;
use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write as _};
use std::path::Path;

use serde_json::{json, Value};
use torchdx_core::{Engine, Finding};

use crate::{out, Fail};

/// Evidence keys the contract reserves (scored); other truth keys are informational.
const SCORED: &[&str] =
    &["exception", "devices", "argument", "op", "kernel", "failing_frame", "failing_code", "initiating_rank"];

const CULPRIT_KINDS: &[&str] = &[
    "input-not-moved",
    "label-not-moved",
    "model-not-moved",
    "created-without-device",
    "unregistered-tensor-attribute",
    "submodule-not-registered",
    "optimizer-state",
    "checkpoint-map-location",
    "index-tensor",
    "dataparallel-replica",
    "wrong-local-rank",
    "generator",
    "hf-device-map",
    "meta-weights",
    "hardcoded-device",
    "library-internal-bug",
];

const METRICS: [&str; 5] = ["family", "fields", "culprit", "rank", "cases"];

/// Every reasonable spelling of an op name (as score.py's `op_keys`).
fn op_keys(s: &str) -> Vec<String> {
    let s = s.trim().to_ascii_lowercase();
    if s.is_empty() {
        return Vec::new();
    }
    let mut keys = vec![s.clone()];
    let mut t = s.strip_prefix("wrapper_").map(|r| {
        // optional dispatch key segment `[a-z0-9]+_`
        match r.find('_') {
            Some(p) if r[..p].chars().all(|c| c.is_ascii_alphanumeric()) && p > 0 => r[p + 1..].to_string(),
            _ => r.to_string(),
        }
    });
    if t.is_none() {
        t = Some(s.clone());
    }
    let t = t.unwrap_or_default();
    keys.push(t.clone());
    let t = t.trim_matches('_').to_string();
    keys.push(t.clone());
    for part in t.split("__") {
        let part = part.trim_matches('_');
        keys.push(part.to_string());
        keys.push(part.trim_start_matches("th_").trim_start_matches("thnn_").to_string());
        for suffix in ["_impl_cpu_", "_impl_cuda_", "_impl_cpu", "_impl_cuda"] {
            if let Some(p) = part.strip_suffix(suffix) {
                keys.push(p.to_string());
            }
        }
    }
    keys.retain(|k| !k.is_empty());
    keys
}

fn op_match(want: &str, f: &Finding) -> bool {
    let w = op_keys(want);
    let got: Vec<String> = ["op", "kernel"].iter().flat_map(|k| op_keys(f.evidence.text(k).unwrap_or(""))).collect();
    w.iter().any(|k| got.contains(k))
}

fn norm_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn norm_frame(s: &str) -> String {
    let s = s.trim();
    let base = s.rsplit(['/', '\\']).next().unwrap_or(s);
    base.to_string()
}

fn compare(key: &str, want: &toml::Value, f: &Finding) -> (bool, String) {
    let ev = &f.evidence;
    if key == "initiating_rank" {
        let got = f.rank.map(i64::from);
        let ok = match want {
            toml::Value::Array(a) => a.iter().any(|x| x.as_integer() == got),
            v => v.as_integer() == got,
        };
        return (ok, format!("{got:?}"));
    }
    let got = ev.get(key);
    let gs = got.as_ref().and_then(Value::as_str).unwrap_or("");
    let ws = want.as_str().unwrap_or("");
    match key {
        "exception" => (gs.rsplit('.').next() == ws.rsplit('.').next(), format!("{got:?}")),
        "devices" => {
            let mut g: Vec<String> = got
                .as_ref()
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
                .unwrap_or_default();
            let mut w: Vec<String> = want
                .as_array()
                .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
                .unwrap_or_default();
            g.sort();
            w.sort();
            (g == w, format!("{g:?}"))
        }
        "op" => (op_match(ws, f), format!("{:?}/{:?}", ev.get("op"), ev.get("kernel"))),
        "failing_code" => (norm_ws(gs) == norm_ws(ws), format!("{gs:?}")),
        "failing_frame" => (norm_frame(gs) == norm_frame(ws), format!("{gs:?}")),
        _ => (got.as_ref().map(|g| g.to_string()) == Some(toml_to_json(want).to_string()), format!("{got:?}")),
    }
}

fn toml_to_json(v: &toml::Value) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// Counts one check of `metric`: slot 0 is passed, slot 1 is total.
fn bump(tot: &mut BTreeMap<&str, [u32; 2]>, metric: &str, slot: usize) {
    if let Some(t) = tot.get_mut(metric) {
        t[slot] += 1;
    }
}

fn empty(v: &toml::Value) -> bool {
    match v {
        toml::Value::String(s) => s.is_empty(),
        toml::Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

pub(crate) fn run(dir: &Path, json_out: Option<&Path>, verbose: bool) -> Result<ExitCode, Fail> {
    let engine = Engine::builtin();
    let mut cases: Vec<_> = fs::read_dir(dir)
        .map_err(|e| Fail(format!("{}: {e}", dir.display())))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("truth.toml").is_file())
        .collect();
    cases.sort();
    if cases.is_empty() {
        // Scores over zero cases would print 0.00 everywhere and look like a broken engine.
        return Err(Fail(format!("{}: no case folders (CASE/log.txt + CASE/truth.toml) to score", dir.display())));
    }
    let mut tot: BTreeMap<&str, [u32; 2]> = METRICS.iter().map(|m| (*m, [0, 0])).collect();
    let mut per_family: BTreeMap<String, [u32; 2]> = BTreeMap::new();
    let mut per_field: BTreeMap<String, [u32; 2]> = BTreeMap::new();
    let mut rows = Vec::new();
    let mut certain_wrong = 0;
    let mut unreadable = 0;
    // Per confidence of the primary finding: cases right (family, and culprit kind where
    // the truth settles it) and cases judged. `certain` must never be wrong; `likely`
    // should be right in at least 4 of 5.
    let mut calibration: BTreeMap<String, [u32; 2]> = BTreeMap::new();
    let mut text = String::new();
    for c in &cases {
        let name = c.file_name().unwrap_or_default().to_string_lossy().to_string();
        let read = fs::read_to_string(c.join("truth.toml"))
            .map_err(|e| format!("truth.toml: {e}"))
            .and_then(|t| t.parse::<toml::Table>().map_err(|e| format!("truth.toml: {e}")))
            .and_then(|truth| case_log(&engine, &c.join("log.txt")).map(|r| (truth, r)));
        let (truth, report) = match read {
            Ok(x) => x,
            Err(e) => {
                // A case that cannot be read is scored wrong (and counted as the scorer
                // counts a command that failed); the other cases still run.
                unreadable += 1;
                let _ = writeln!(io::stderr(), "torchdx eval: {}: {e}", c.display());
                bump(&mut tot, "family", 1);
                bump(&mut tot, "cases", 1);
                if verbose {
                    text.push_str(&format!("FAIL {name}: {e}\n"));
                }
                rows.push(json!({"case": name, "ok": false, "fails": [e]}));
                continue;
            }
        };
        let p = report.primary().or(report.findings.first());
        let mut fails: Vec<String> = Vec::new();
        let want_family = truth.get("family").and_then(|v| v.as_str()).unwrap_or("");
        let got_family = p.map(|f| f.family.as_str()).unwrap_or("");
        let fam = per_family.entry(want_family.to_string()).or_default();
        fam[1] += 1;
        bump(&mut tot, "family", 1);
        if want_family == got_family {
            bump(&mut tot, "family", 0);
            fam[0] += 1;
        } else {
            fails.push(format!("family: want {want_family} got {got_family}"));
        }
        if let (Some(fields), Some(f)) = (truth.get("fields").and_then(|v| v.as_table()), p) {
            for (k, want) in fields {
                if empty(want) {
                    continue;
                }
                let (ok, got) = compare(k, want, f);
                let pf = per_field.entry(k.clone()).or_default();
                pf[1] += 1;
                if ok {
                    pf[0] += 1;
                }
                if !SCORED.contains(&k.as_str()) {
                    continue;
                }
                let bucket = if k == "initiating_rank" { "rank" } else { "fields" };
                bump(&mut tot, bucket, 1);
                if ok {
                    bump(&mut tot, bucket, 0);
                } else {
                    fails.push(format!("{k}: want {want} got {got}"));
                }
            }
        } else if let Some(fields) = truth.get("fields").and_then(|v| v.as_table()) {
            for (k, want) in fields {
                if empty(want) || !SCORED.contains(&k.as_str()) {
                    continue;
                }
                let bucket = if k == "initiating_rank" { "rank" } else { "fields" };
                bump(&mut tot, bucket, 1);
                fails.push(format!("{k}: want {want} got nothing"));
            }
        }
        let tr = truth.get("truth").and_then(|v| v.as_table());
        let kind = tr.and_then(|t| t.get("culprit_kind")).and_then(|v| v.as_str());
        let conf = tr.and_then(|t| t.get("confidence")).and_then(|v| v.as_str()).unwrap_or("");
        if let Some(kind) = kind.filter(|k| CULPRIT_KINDS.contains(k) && (conf == "confirmed" || conf == "likely")) {
            bump(&mut tot, "culprit", 1);
            let got = p.and_then(|f| f.culprit.as_ref()).map(|c| c.kind.as_str());
            // `culprit_kind_also`: other contract kinds that name the same tensor
            let also = |g: &str| {
                tr.and_then(|t| t.get("culprit_kind_also"))
                    .and_then(|v| v.as_array())
                    .is_some_and(|a| a.iter().any(|v| v.as_str() == Some(g)))
            };
            if got == Some(kind) || got.is_some_and(also) {
                bump(&mut tot, "culprit", 0);
            } else {
                fails.push(format!("culprit_kind: want {kind} got {got:?}"));
            }
        }
        let wrong = fails.iter().any(|f| f.starts_with("family:") || f.starts_with("culprit_kind:"));
        if let Some(f) = p {
            let c = calibration.entry(format!("{:?}", f.confidence).to_lowercase()).or_default();
            c[1] += 1;
            if !wrong {
                c[0] += 1;
            }
        }
        if wrong && p.is_some_and(|f| f.confidence == torchdx_core::Confidence::Certain) {
            certain_wrong += 1;
            fails.push("marked certain but wrong".into());
        }
        bump(&mut tot, "cases", 1);
        if fails.is_empty() {
            bump(&mut tot, "cases", 0);
        }
        if verbose {
            for f in &fails {
                text.push_str(&format!("FAIL {name}: {f}\n"));
            }
        }
        rows.push(json!({"case": name, "ok": fails.is_empty(), "fails": fails}));
    }
    let ratio = |v: &[u32; 2]| if v[1] == 0 { 1.0 } else { f64::from(v[0]) / f64::from(v[1]) };
    text.push_str(&format!("{:10} {:>5} {:>5} {:>6}\n", "metric", "ok", "of", "ratio"));
    for m in METRICS {
        let v = tot[m];
        text.push_str(&format!("{m:10} {:5} {:5} {:6.2}\n", v[0], v[1], ratio(&v)));
    }
    text.push_str(&format!("\n{:28} {:>5} {:>5} {:>6}\n", "family", "ok", "of", "ratio"));
    for (f, v) in &per_family {
        text.push_str(&format!("{f:28} {:5} {:5} {:6.2}\n", v[0], v[1], ratio(v)));
    }
    for (k, v) in &per_field {
        let tag = if SCORED.contains(&k.as_str()) { "" } else { "  (informational)" };
        text.push_str(&format!("  field {k:16} {:4}/{:<4}{tag}\n", v[0], v[1]));
    }
    text.push_str(&format!("\n{:28} {:>5} {:>5} {:>6}\n", "calibration (primary)", "right", "of", "ratio"));
    for level in ["certain", "likely", "possible"] {
        let v = calibration.get(level).copied().unwrap_or([0, 0]);
        text.push_str(&format!("{level:28} {:5} {:5} {:6.2}\n", v[0], v[1], ratio(&v)));
    }
    let summary = format!(
        "eval: {} n={} crashes={unreadable} certain_wrong={certain_wrong}",
        METRICS.iter().map(|m| format!("{m}={:.2}", ratio(&tot[m]))).collect::<Vec<_>>().join(" "),
        cases.len()
    );
    text.push_str(&summary);
    text.push('\n');
    out(&text)?;
    if let Some(p) = json_out {
        let j = json!({
            "ratio": METRICS.iter().map(|m| (m.to_string(), json!(ratio(&tot[m])))).collect::<serde_json::Map<_, _>>(),
            "totals": tot,
            "per_family": per_family,
            "per_field": per_field,
            "cases": rows,
            "certain_wrong": certain_wrong,
            "calibration": calibration,
        });
        fs::write(p, serde_json::to_string_pretty(&j)? + "\n").map_err(|e| Fail(format!("{}: {e}", p.display())))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A case's log, diagnosed as it streams (bounded memory, compressed logs read as they
/// are). Only a regular file is read: a FIFO would block the run and a device
/// (`/dev/zero`) never ends.
fn case_log(engine: &Engine, p: &Path) -> Result<torchdx_core::Report, String> {
    let meta = fs::metadata(p).map_err(|e| format!("log.txt: {e}"))?;
    if !meta.is_file() {
        return Err("log.txt: not a regular file (a FIFO, device or folder is not read)".into());
    }
    crate::input::diagnose_path(engine, p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_spellings() {
        let k = op_keys("wrapper_CUDA__index_select");
        assert!(k.contains(&"index_select".to_string()));
        assert!(op_keys("addmm_impl_cpu_").contains(&"addmm".to_string()));
        assert!(op_keys("_th_addmm").contains(&"addmm".to_string()));
    }
}
