//! Every rule example is a test twice over: `rules check` semantics (it produces its
//! declared finding, evidence, culprit and case; near misses stay quiet) and a snapshot
//! of the facts its report computed, one file per rule, so any change to a diagnosis
//! shows up in review without the rule prose around it.

use torchdx_core::authoring::check::{self, Status};
use torchdx_core::{builtin_sources, Engine};

#[test]
fn builtin_pack_passes_rules_check() {
    let report = check::check(&builtin_sources(), &[]);
    let mut problems: Vec<String> = report.diagnostics.iter().map(|d| d.report()).collect();
    for e in &report.examples {
        if !matches!(e.status, Status::Validated | Status::KnownMiss) {
            problems.push(format!("{}::{} is {:?}: {}", e.rule, e.name, e.status, e.diffs.join("; ")));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        report.examples.len()
            >= 3 * report.examples.iter().map(|e| &e.rule).collect::<std::collections::BTreeSet<_>>().len()
    );
}

/// One reviewable snapshot per rule: the facts (not the prose) of every example's
/// report, in the rule's example order.
#[test]
fn facts_of_every_rule_example() {
    let engine = Engine::builtin();
    for rule in engine.pack().rules() {
        let mut snap = String::new();
        for ex in &rule.spec.examples {
            let report = engine.diagnose(&ex.log);
            snap.push_str(&format!("## {} ({:?})\n{}\n", ex.name, ex.expect, torchdx_tests::facts(&report)));
        }
        insta::with_settings!({
            snapshot_path => "snapshots/rules",
            prepend_module_to_snapshot => false,
            omit_expression => true,
            description => format!("facts of rule {}'s examples", rule.id()),
        }, {
            insta::assert_snapshot!(rule.id().to_string(), snap);
        });
    }
}

#[test]
fn prefilter_never_hides_a_match() {
    let engine = Engine::builtin();
    let slow = Engine::builtin().without_prefilter();
    for (rule, name, log, positive) in torchdx_tests::examples(&engine) {
        if !positive {
            continue;
        }
        let a = engine.diagnose(&log).to_json();
        let b = slow.diagnose(&log).to_json();
        assert_eq!(a, b, "{rule}::{name}: prefilter changed the report");
    }
}

/// Once an engine has read 2 MB in all the scan switches from its NFA to its DFA; where
/// the switch falls (never, for one whole 3 MB input on a fresh engine; after 2 MB of
/// 64 KiB chunks; before the first byte, on an engine that has read 3 MB already) must
/// not change the report.
#[test]
fn scan_automaton_switch_does_not_change_the_report() {
    let filler = "[rank3]: step 1200 loss 2.1183 lr 3.00e-04 grad_norm 0.917 tokens/s 183211\n";
    let mut log = String::new();
    while log.len() < 3 << 20 {
        log.push_str(filler);
        if log.len() % (512 << 10) < filler.len() {
            // Hits on both sides of the switch.
            log.push_str(include_str!("../examples/multirank-nccl.log"));
        }
    }
    log.push_str(include_str!("../examples/device-mismatch.log"));
    let warm = Engine::builtin();
    let whole = warm.diagnose(&log).to_json();
    let streamed = Engine::builtin();
    let mut s = streamed.stream();
    for chunk in log.as_bytes().chunks(64 << 10) {
        s.feed(chunk);
    }
    assert_eq!(s.finish().to_json(), whole, "switching after 2 MB of chunks");
    assert_eq!(warm.diagnose(&log).to_json(), whole, "the DFA from the first byte");
    assert!(whole.contains("device-mismatch") && whole.contains("nccl"), "the log's failures are found");
}

/// Damaged real-world shapes (prefixes, wraps, notebooks, one-line pastes, multi-rank
/// cascades): one snapshot each of the facts their report computed. Their expected family and
/// fields are scored by `torchdx eval tests/fixtures/hazards` in the CLI tests.
#[test]
fn snapshots_of_hazard_fixtures() {
    let engine = Engine::builtin();
    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hazards");
    let mut cases: Vec<_> = std::fs::read_dir(&base).unwrap().flatten().map(|e| e.path()).collect();
    cases.sort();
    assert!(cases.len() >= 20);
    for case in cases {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let log = std::fs::read(case.join("log.txt")).unwrap();
        let report = engine.diagnose_bytes(&log);
        insta::with_settings!({
            snapshot_path => "snapshots/hazards",
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_snapshot!(name, torchdx_tests::facts(&report));
        });
    }
}

/// Redaction keeps what diagnosis needs: every example and hazard fixture, redacted,
/// gives the same findings (rules, families, ranks, initiating finding).
#[test]
fn redacted_logs_diagnose_the_same() {
    let engine = Engine::builtin();
    let mut logs: Vec<(String, String)> =
        torchdx_tests::examples(&engine).into_iter().map(|(r, n, l, _)| (format!("{r}::{n}"), l)).collect();
    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hazards");
    for e in std::fs::read_dir(&base).unwrap().flatten() {
        let log = String::from_utf8_lossy(&std::fs::read(e.path().join("log.txt")).unwrap()).into_owned();
        logs.push((e.file_name().to_string_lossy().into_owned(), log));
    }
    let shape = |r: &torchdx_core::Report| {
        r.findings
            .iter()
            .map(|f| (f.id.clone(), f.family.clone(), f.rank, f.role, f.culprit.as_ref().map(|c| c.kind.clone())))
            .collect::<Vec<_>>()
    };
    for (name, log) in logs {
        let redacted = torchdx_core::redact::redact(&log);
        let a = engine.diagnose(&log);
        let b = engine.diagnose(&redacted.text);
        assert_eq!(shape(&a), shape(&b), "{name}: redaction changed the diagnosis\n{}", redacted.text);
        assert_eq!(a.initiating, b.initiating, "{name}");
        assert_eq!(redacted.text.lines().count(), log.lines().count(), "{name}: a line was lost");
        // The same log with a job's secrets printed above it (an env dump, a login, a
        // git remote): the secrets go, the diagnosis stays.
        let seeded = format!("{SEEDED_SECRETS}{log}");
        let r = torchdx_core::redact::redact(&seeded);
        for secret in SEEDED_VALUES {
            assert!(!r.text.contains(secret), "{name}: {secret} kept");
        }
        let (plain, c) = (engine.diagnose(&seeded), engine.diagnose(&r.text));
        assert_eq!(shape(&plain), shape(&c), "{name}: seeded redaction changed the diagnosis\n{}", r.text);
        assert_eq!(r.text.lines().count(), seeded.lines().count(), "{name}: a line was lost");
    }
}

/// One line per secret class, as jobs print them before training starts (each shorter
/// than the narrowest terminal a fixture is wrapped at, so the seeding itself does not
/// move the wrap-width inference).
const SEEDED_SECRETS: &str = "\
+ export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE
aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY
origin https://ghp_16C7e42F292c6912E7710c838347Ae178B4a@github.com/o
HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789
WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567
Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.dozjgNryP4J3
db password: hunter2 cookie: Cookie: sid=9a8b7c6d5e4f
-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW
-----END OPENSSH PRIVATE KEY-----
SLURM_JOB_USER=ivanp on trainer-7.corp.example.com
fe80::1ff:fe23:4567:890a 10.20.30.40 ivan.petrov@example.com
";
const SEEDED_VALUES: &[&str] = &[
    "AKIAIOSFODNN7EXAMPLE",
    "wJalrXUtnFEMI",
    "ghp_16C7e42F",
    "hf_AbCdEf",
    "0123456789abcdef0123",
    "eyJhbGciOiJIUzI1NiJ9",
    "hunter2",
    "9a8b7c6d5e4f",
    "b3BlbnNzaC1rZXkt",
    "ivanp",
    "trainer-7",
    "fe80::1ff",
    "10.20.30.40",
    "ivan.petrov",
];
