//! The `torchdx` binary as users run it: exit codes, error messages naming files, the
//! formats, rule-author commands on malformed fixtures (snapshotted), generated files
//! that must not be stale, and agreement with the shared scorer.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_torchdx"))
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn run(args: &[&str]) -> Output {
    bin().args(args).current_dir(root()).stdin(Stdio::null()).output().expect("run torchdx")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Whether a line holds a Markdown bold span (`**word ...**`); `2**31` and `**kwargs`
/// are Python.
fn has_bold(s: &str) -> bool {
    s.lines().any(|l| {
        let parts: Vec<&str> = l.split("**").collect();
        parts.len() >= 3
            && parts[1..parts.len() - 1].iter().any(|p| p.starts_with(char::is_alphabetic) && !p.ends_with(' '))
    })
}

#[test]
fn diagnoses_the_bundled_example() {
    let o = run(&["diagnose", "examples/device-mismatch.log", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let f = &report["findings"][report["initiating"].as_u64().unwrap() as usize];
    assert_eq!(f["family"], "device-mismatch");
    assert_eq!(f["culprit"]["kind"], "label-not-moved");
    assert_eq!(f["culprit"]["expr"], "labels");
    assert_eq!(f["evidence"]["failing_code"], "loss = loss_fn(out, labels)");
    // One process: its timeline names no launcher.
    assert_eq!(report["timeline"][0]["text"], "process: RuntimeError (device-mismatch)");
}

#[test]
fn text_and_markdown_formats() {
    let o = run(&["diagnose", "examples/multirank-nccl.log", "--color", "never"]);
    let s = stdout(&o);
    // The headline wraps at the width; its words run on in the next line.
    assert!(s.replace("\n  ", " ").contains("[cuda-oom] on rank 5"), "{s}");
    assert!(s.contains("Timeline"), "{s}");
    assert!(!s.contains('\x1b'), "no colour when not asked");
    let md = stdout(&run(&["diagnose", "examples/multirank-nccl.log", "--format", "md"]));
    assert!(md.starts_with("## "), "{md}");
}

/// The per-rank table and the suspect sentence, in both human formats: rank 5 raised
/// the OOM; every other rank only timed out waiting for it.
#[test]
fn the_rank_table_names_the_suspect_and_its_echoes() {
    // Wide enough that no row wraps (wrapping has its own test).
    let s = stdout(&run(&["diagnose", "examples/multirank-nccl.log", "--color", "never", "--width", "200"]));
    let table = s.split("\nRanks\n").nth(1).and_then(|t| t.split("\nTimeline").next()).unwrap_or_else(|| panic!("{s}"));
    let row5 = table.lines().find(|l| l.trim_start().starts_with("5 ")).unwrap_or_else(|| panic!("{table}"));
    assert!(row5.contains("initiating") && row5.contains("[cuda-oom]"), "{row5}");
    assert!(table.lines().any(|l| l.trim_start().starts_with("1-4,6,7") && l.contains("collateral")), "{table}");
    let sentence = table.split("Suspect:").nth(1).unwrap_or_else(|| panic!("{table}")).replace("\n  ", " ");
    assert!(sentence.starts_with(" rank 5. It failed first (line 3, cuda-oom"), "{sentence}");
    assert!(sentence.contains("ranks 0-4,6,7 only echo it"), "{sentence}");
    let md = stdout(&run(&["diagnose", "examples/multirank-nccl.log", "--format", "md"]));
    assert!(md.contains("| rank | when | role | first report |"), "{md}");
    assert!(md.contains("| 5 | line 3 | initiating |"), "{md}");
    assert!(md.contains("\nSuspect: rank 5. It failed first"), "{md}");
    // A single-rank log has no table.
    let one = stdout(&run(&["diagnose", "examples/device-mismatch.log", "--color", "never"]));
    assert!(!one.contains("\nRanks\n"), "{one}");
}

/// Terminal text as a user reads it: for every pasted fixture and three widths, no line
/// is wider than asked (code lines from a fix excepted: they are never broken), no
/// Markdown syntax shows, and with colour on the evidence values still line up.
#[test]
fn text_wraps_to_the_width_and_shows_no_markdown() {
    let dir = root().join("tests/fixtures/pasted");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path().join("log.txt")).collect();
    cases.retain(|p| p.exists());
    cases.sort();
    assert!(cases.len() >= 40, "{}", cases.len());
    for width in ["60", "80", "100"] {
        let w: usize = width.parse().unwrap();
        for case in &cases {
            let o = run(&["diagnose", case.to_str().unwrap(), "--color", "never", "--width", width]);
            let s = stdout(&o);
            assert!(!s.contains("```") && !has_bold(&s), "{}: {s}", case.display());
            let mut in_fix = false;
            for l in s.lines() {
                in_fix = match l.trim() {
                    "Fix" => true,
                    t if t.starts_with("Verify:") => false,
                    _ => in_fix,
                };
                // A code line of a fix (indented past the prose) may be longer; nothing else.
                let code = in_fix && l.starts_with("        ");
                // One token longer than the column (a path, an env var) cannot be broken.
                let token = l.split_whitespace().any(|t| t.chars().count() > w / 2);
                assert!(l.chars().count() <= w || code || token, "{} at width {w}: {l:?}\n{s}", case.display());
            }
        }
    }
    // With colour, keys are padded by their visible width: values start in one column.
    let s = stdout(&run(&["diagnose", "examples/device-mismatch.log", "--color", "always"]));
    let plain = |l: &str| {
        let mut out = String::new();
        let mut esc = false;
        for c in l.chars() {
            match (esc, c) {
                (false, '\x1b') => esc = true,
                (true, 'm') => esc = false,
                (true, _) => {}
                (false, c) => out.push(c),
            }
        }
        out
    };
    let block = s.split("Evidence").nth(1).and_then(|b| b.split("\n\n").next()).unwrap_or_else(|| panic!("{s}"));
    let starts: Vec<usize> = block
        .lines()
        .map(plain)
        .filter(|l| l.starts_with("    ") && !l.starts_with("     "))
        .map(|l| {
            let rest = &l[4..];
            let key_end = rest.find(' ').unwrap_or(rest.len());
            4 + key_end + (rest[key_end..].len() - rest[key_end..].trim_start().len())
        })
        .collect();
    assert!(starts.len() >= 4 && starts.windows(2).all(|p| p[0] == p[1]), "{starts:?}\n{block}");
    assert!(s.contains("\x1b[36m"), "code spans are styled when colour is on");
}

/// A report that cannot be written is not a success: a closed stdout is an error with a
/// message, a pipe closed by its reader exits 141 (as a `cat` killed by SIGPIPE) quietly.
#[cfg(target_os = "linux")]
#[test]
fn a_lost_report_is_not_a_success() {
    // Through a shell, with stdout redirected as `redirect` says.
    let shell = |redirect: &str| {
        let line = format!("'{}' diagnose examples/device-mismatch.log {redirect}", env!("CARGO_BIN_EXE_torchdx"));
        Command::new("sh").arg("-c").arg(line).current_dir(root()).output().unwrap()
    };
    // `> /dev/null` is a choice, not a loss.
    let null = shell("> /dev/null");
    assert_eq!(null.status.code(), Some(0), "{}", String::from_utf8_lossy(&null.stderr));
    let closed = shell(">&-");
    assert_eq!(closed.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&closed.stderr).contains("standard output is closed"));
    // More than a pipe buffer (64 KiB) of report, so the write meets the closed pipe
    // whenever the reader goes.
    let log = root().join("target").join("cli-test-pipe.log");
    let lines: String =
        (0..400).map(|i| format!("cuDNN error: CUDNN_STATUS_{}\n", "QWERTYUIOP".repeat(1 + i % 7))).collect();
    let lines: String = lines
        .lines()
        .enumerate()
        .map(|(i, l)| format!("{l}{}\n", char::from(b'A' + (i % 26) as u8).to_string().repeat(1 + i / 26)))
        .collect();
    std::fs::write(&log, lines).unwrap();
    let mut child = bin()
        .args(["diagnose", "--format", "json", log.to_str().unwrap()])
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(141), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stderr.is_empty());
}

#[test]
fn stdin_and_empty_input() {
    let mut child =
        bin().args(["diagnose", "-", "--format", "json"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    drop(child.stdin.take());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["initiating"], serde_json::Value::Null);
    assert_eq!(report["findings"].as_array().unwrap().len(), 0);
}

#[test]
fn missing_file_is_exit_2_naming_the_file() {
    let o = run(&["diagnose", "no/such/train.log"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no/such/train.log"), "{err}");
}

#[test]
fn usage_error_is_exit_2() {
    assert_eq!(run(&["diagnose", "--format", "xml", "x"]).status.code(), Some(2));
    assert_eq!(run(&["explain", "no-such-rule"]).status.code(), Some(2));
}

#[test]
fn explain_lists_and_prints_entries() {
    let list = stdout(&run(&["explain", "--list"]));
    assert!(list.contains("device-mismatch") && list.contains("cuda-oom"), "{list}");
    let entry = stdout(&run(&["explain", "cuda-oom"]));
    for section in ["## Mechanism", "## Checklist", "## Fix", "## Verify", "## Prevent", "## Examples"] {
        assert!(entry.contains(section), "missing {section}");
    }
}

/// `explain --format text` is terminal text; the list says which messages each rule
/// recognises, in text and in JSON.
#[test]
fn explain_formats_and_what_each_rule_recognises() {
    let t = stdout(&run(&["explain", "cuda-oom", "--format", "text"]));
    assert!(t.starts_with("cuda-oom: "), "{t}");
    for md in ["## ", "```", "- [ ]"] {
        assert!(!t.contains(md), "Markdown `{md}` in text:\n{t}");
    }
    assert!(!has_bold(&t), "{t}");
    assert!(t.contains("\n[ ] "), "{t}");
    let list = stdout(&run(&["explain", "--list"]));
    assert!(list.contains("    recognises: \"CUDA out of memory"), "{list}");
    let o = run(&["explain", "--list", "--format", "json"]);
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON list");
    let oom = rows.as_array().unwrap().iter().find(|r| r["id"] == "cuda-oom").expect("cuda-oom listed");
    assert_eq!(oom["family"], "cuda-oom");
    assert!(oom["messages"].as_array().unwrap().iter().any(|m| m.as_str().unwrap().starts_with("CUDA out of memory")));
}

/// Rule authors' folder is taken the same way by every command, and `rules docs`
/// documents the rules on disk: a new rule in the folder makes `--check` fail until the
/// pages are written. `rules new` writes the schema its `#:schema` line names and warns
/// when the id overrides a built-in rule.
#[test]
fn authoring_commands_take_the_folder_alike() {
    let base = root().join("target").join("cli-test-authoring");
    let _ = std::fs::remove_dir_all(&base);
    let (rules, docs) = (base.join("rules"), base.join("docs"));
    let (r, d) = (rules.to_str().unwrap(), docs.to_str().unwrap());
    std::fs::create_dir_all(&rules).unwrap();
    std::fs::copy(root().join("tests/fixtures/good-extra/widget-failed.toml"), rules.join("widget-failed.toml"))
        .unwrap();
    let extra_id = "widget-failed";
    assert!(stdout(&run(&["rules", "list", r])).contains(extra_id));
    assert!(stdout(&run(&["rules", "list", "--rules", r])).contains(extra_id));
    assert!(stdout(&run(&["explain", "--rules", r, extra_id])).starts_with(&format!("# {extra_id}")));
    let ex = base.join("examples");
    assert_eq!(run(&["rules", "examples", r, "--out", ex.to_str().unwrap()]).status.code(), Some(0));
    let dumped: Vec<String> =
        std::fs::read_dir(&ex).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(dumped.iter().any(|n| n.starts_with(&format!("{extra_id}--"))), "{dumped:?}");
    // Docs: written from the folder, then checked; a new rule on disk makes them stale.
    assert_eq!(run(&["rules", "docs", r, "--out", d]).status.code(), Some(0));
    assert!(docs.join(format!("{extra_id}.md")).exists());
    assert_eq!(run(&["rules", "docs", r, "--out", d, "--check"]).status.code(), Some(0));
    let o = run(&["rules", "new", "widget-new", "--dir", r]);
    assert_eq!(o.status.code(), Some(0));
    assert!(rules.join("schema/rule.schema.json").exists(), "the #:schema target is written");
    let text = std::fs::read_to_string(rules.join("widget-new.toml")).unwrap();
    assert!(text.contains(&format!("torchdx rules check {r}")), "{text}");
    assert_eq!(run(&["rules", "docs", r, "--out", d, "--check"]).status.code(), Some(1));
    // Overriding a built-in rule is said.
    let o = run(&["rules", "new", "cuda-oom", "--dir", r]);
    assert!(stdout(&o).contains("warning: `cuda-oom` is a built-in rule"), "{}", stdout(&o));
    // Checking without a folder (and no `./rules`) names the pack it checked.
    let empty = base.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let o = bin().args(["rules", "check"]).current_dir(&empty).stdin(Stdio::null()).output().unwrap();
    assert!(stdout(&o).contains("the built-in pack"), "{}", stdout(&o));
}

#[test]
fn extra_rules_override_and_add() {
    let dir = root().join("target").join("cli-test-extra-rules");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let rule = std::fs::read_to_string(root().join("tests/fixtures/good-extra/widget-failed.toml")).unwrap();
    std::fs::write(dir.join("widget-failed.toml"), rule).unwrap();
    let log = dir.join("w.log");
    std::fs::write(&log, "RuntimeError: Widget frobnication failed for gadget 7\n").unwrap();
    let o = run(&["diagnose", "--rules", dir.to_str().unwrap(), log.to_str().unwrap(), "--format", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["findings"][0]["id"], "widget-failed");
    assert_eq!(report["findings"][0]["evidence"]["gadget"], 7);
    let check = run(&["rules", "check", dir.to_str().unwrap()]);
    assert_eq!(check.status.code(), Some(0), "{}", stdout(&check));
}

#[test]
fn malformed_rule_fixtures_are_reported_with_locations() {
    let base = root().join("tests/fixtures/bad-rules");
    let mut cases: Vec<_> = std::fs::read_dir(&base).unwrap().flatten().map(|e| e.path()).collect();
    cases.sort();
    assert!(cases.len() >= 14);
    for case in cases {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let rel = format!("tests/fixtures/bad-rules/{name}");
        let o = run(&["rules", "check", &rel]);
        assert_eq!(o.status.code(), Some(1), "{name} must fail rules check:\n{}", stdout(&o));
        insta::with_settings!({ snapshot_path => "snapshots", prepend_module_to_snapshot => false, omit_expression => true }, {
            insta::assert_snapshot!(format!("rules_check__{name}"), stdout(&o));
        });
    }
}

#[test]
fn builtin_pack_passes_check_fmt_docs_and_schema() {
    for args in [
        &["rules", "check", "rules"][..],
        &["rules", "fmt", "rules", "--check"][..],
        &["rules", "docs", "--check"][..],
        &["rules", "schema", "--check"][..],
    ] {
        let o = run(args);
        assert_eq!(
            o.status.code(),
            Some(0),
            "torchdx {} failed (regenerate with the same command without --check):\n{}",
            args.join(" "),
            stdout(&o)
        );
    }
}

#[test]
fn rules_new_scaffold_is_complete() {
    let dir = root().join("target").join("cli-test-new-rule");
    let _ = std::fs::remove_dir_all(&dir);
    let o = run(&["rules", "new", "widget-jam", "--dir", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    let text = std::fs::read_to_string(dir.join("widget-jam.toml")).unwrap();
    for key in [
        "id = ",
        "family = ",
        "mechanism = ",
        "checklist = ",
        "fix = ",
        "verify = ",
        "prevent = ",
        "missing = ",
        "next_action = ",
        "[[match]]",
        "[[example]]",
    ] {
        assert!(text.contains(key), "scaffold lacks {key}");
    }
    // Unfilled, it parses but its examples do not yet match: check says so.
    assert_eq!(run(&["rules", "check", dir.to_str().unwrap()]).status.code(), Some(1));
    assert_eq!(run(&["rules", "new", "widget-jam", "--dir", dir.to_str().unwrap()]).status.code(), Some(2));
}

#[test]
fn eval_agrees_with_the_shared_scorer() {
    let corpus = root().join("../shared/corpus");
    let score = root().join("../shared/eval/score.py");
    if !corpus.is_dir() || !score.is_file() {
        // A user's clone has no ../shared; CI always has it, so there a skip is a failure.
        assert!(std::env::var("CI").is_err(), "CI must run with ../shared beside the checkout");
        eprintln!("skipped: ../shared is not beside this checkout");
        return;
    }
    let ours = stdout(&run(&["eval", corpus.to_str().unwrap()]));
    let ours = ours.lines().last().unwrap_or("").to_string();
    let cmd = format!("{} diagnose --format json -", env!("CARGO_BIN_EXE_torchdx"));
    let theirs = Command::new("python3").arg(&score).args(["--cmd", &cmd, "--corpus"]).arg(&corpus).output();
    let Ok(theirs) = theirs else {
        assert!(std::env::var("CI").is_err(), "CI must have python3");
        eprintln!("skipped: python3 is not available");
        return;
    };
    let theirs = String::from_utf8_lossy(&theirs.stdout).lines().last().unwrap_or("").to_string();
    assert_eq!(ours, theirs);
}

/// The pasted-log fixtures (one damage or wording class per group): their floor only
/// moves up.
#[test]
fn pasted_fixtures_meet_their_floor() {
    let json = std::env::temp_dir().join(format!("torchdx-pasted-{}.json", std::process::id()));
    let o = run(&["eval", "tests/fixtures/pasted", "--json", json.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)));
    let _ = std::fs::remove_file(&json);
    let floor = [("family", 1.0), ("fields", 1.0), ("culprit", 1.0), ("rank", 1.0), ("cases", 1.0)];
    for (metric, min) in floor {
        let got = v["ratio"][metric].as_f64().unwrap_or(-1.0);
        assert!(got >= min, "{metric}: {got} < {min}\n{}", stdout(&o));
    }
    assert_eq!(v["certain_wrong"], 0, "{}", stdout(&o));
    // Calibration: `certain` is never wrong, `likely` is right in at least 4 of 5.
    let level = |l: &str| (v["calibration"][l][0].as_u64().unwrap_or(0), v["calibration"][l][1].as_u64().unwrap_or(0));
    let (right, of) = level("certain");
    assert!(of > 0 && right == of, "certain: {right}/{of}\n{}", stdout(&o));
    let (right, of) = level("likely");
    assert!(of > 0 && right * 5 >= of * 4, "likely: {right}/{of}\n{}", stdout(&o));
    assert!(stdout(&o).contains("calibration (primary)"));
}

/// Compressed logs are read by their magic bytes (zstd here; gzip in `input`'s tests).
#[test]
fn a_zstd_log_is_diagnosed() {
    let o = run(&["diagnose", "cli/tests/data/device-mismatch.log.zst", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)));
    assert_eq!(v["findings"][0]["family"], "device-mismatch", "{}", stdout(&o));
    assert_eq!(v["input"]["lines"], 4);
}

#[test]
fn eval_of_a_folder_without_cases_is_an_error() {
    let dir = std::env::temp_dir().join(format!("torchdx-eval-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let o = run(&["eval", dir.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no case folders"), "{:?}", o);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn hazard_fixtures_are_all_diagnosed() {
    let o = run(&["eval", "tests/fixtures/hazards", "--verbose"]);
    let s = stdout(&o);
    let last = s.lines().last().unwrap_or("");
    assert!(last.contains("family=1.00") && last.contains("cases=1.00") && last.contains("certain_wrong=0"), "{s}");
}

/// Text output as a pipe sees it: 100 columns, `Prevent` shown, missing facts as a list,
/// a one-line location as `line N`, and the input counted in the singular when it is one.
#[test]
fn text_output_reads_like_prose() {
    let o = bin()
        .args(["diagnose", "tests/fixtures/hazards/libtorch-cpp-only/log.txt", "--color", "never"])
        .env_remove("COLUMNS")
        .current_dir(root())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let t = stdout(&o);
    assert!(t.contains("  Prevent: Measure peak memory"), "{t}");
    for l in t.lines() {
        // Code is indented and never broken; everything else wraps at 100 columns.
        assert!(l.chars().count() <= 100 || l.starts_with("        "), "over 100 columns: {l:?}");
    }
    let missing: Vec<&str> =
        t.lines().skip_while(|l| l.trim() != "Missing").skip(1).take_while(|l| !l.is_empty()).collect();
    assert!(!missing.is_empty() && missing.iter().all(|l| l.starts_with("    - ") || l.starts_with("      ")), "{t}");
    assert!(!t.contains(".;"), "{t}");
    assert!(t.contains(", line 4\n") && !t.contains("lines 4-4"), "{t}");
    // Byte counts and echoed keys stay in the JSON.
    assert!(!t.contains("tried_bytes") && !t.contains("reserved_unallocated"), "{t}");
    let o =
        bin().args(["diagnose", "-"]).current_dir(root()).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    use std::io::Write as _;
    o.stdin.as_ref().unwrap().write_all(b"all good\n").unwrap();
    let t = stdout(&o.wait_with_output().unwrap());
    assert!(t.starts_with("No failure found in 1 line."), "{t}");
}

/// Markdown for a GitHub issue: collateral as a compact table under the initiating
/// finding, saying who reported an unranked echo as the timeline does (`process` for one
/// process, never `launcher`), and evidence without raw byte counts or echoed keys.
#[test]
fn markdown_collateral_table_and_evidence() {
    let t = stdout(&run(&["diagnose", "--format", "md", "tests/fixtures/hazards/libtorch-cpp-only/log.txt"]));
    let table = t.split("### Collateral").nth(1).expect("a collateral section");
    assert!(table.contains("| ranks | lines | what |"), "{t}");
    let row = table.lines().find(|l| l.starts_with("| ") && !l.starts_with("| ranks")).unwrap();
    assert!(row.starts_with("| process | "), "{row}");
    assert!(!t.contains("launcher"), "{t}");
    assert_eq!(t.matches("\n## ").count() + usize::from(t.starts_with("## ")), 1, "one H2: {t}");
    assert!(t.contains("| unallocated | `612.00 MiB` |") && !t.contains("reserved_unallocated"), "{t}");
    assert!(!t.contains("_bytes |"), "{t}");
    assert!(t.contains("*initiating, certain confidence, line 4*"), "{t}");
    // Labels: a period after an inline one, none before a list.
    assert!(t.contains("**Next.** ") && t.contains("**Fix.** ") && t.contains("**Check**\n"), "{t}");
    assert!(!t.contains(":**"), "{t}");
}

/// `ranks` lists the rank of a one-rank finding too; one notice printed three times by
/// the same two ranks is one collateral finding with both ranks.
#[test]
fn ranks_of_findings() {
    let o = run(&["diagnose", "--format", "json", "examples/multirank-nccl.log"]);
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut ranked = 0;
    for f in r["findings"].as_array().unwrap() {
        if let Some(rank) = f["rank"].as_u64() {
            ranked += 1;
            let ranks: Vec<u64> = f["ranks"]
                .as_array()
                .unwrap_or_else(|| panic!("no ranks: {f}"))
                .iter()
                .map(|x| x.as_u64().unwrap())
                .collect();
            assert!(ranks.contains(&rank), "{f}");
        }
    }
    assert!(ranked >= 2, "{r}");
    let notice = "Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.";
    let mut log = String::from("[rank1]: Traceback (most recent call last):\n[rank1]:   File \"/w/train.py\", line 9, in <module>\n[rank1]:     loss = loss_fn(out, labels)\n[rank1]: RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:1 and cpu!\n");
    for _ in 0..3 {
        for r in [0, 2] {
            log.push_str(&format!("[rank{r}]:[E ProcessGroupNCCL.cpp:1182] [Rank {r}] {notice}\n"));
        }
    }
    let mut c =
        bin().args(["diagnose", "--format", "json", "-"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    use std::io::Write as _;
    c.stdin.take().unwrap().write_all(log.as_bytes()).unwrap();
    let r: serde_json::Value = serde_json::from_slice(&c.wait_with_output().unwrap().stdout).unwrap();
    let notices: Vec<&serde_json::Value> =
        r["findings"].as_array().unwrap().iter().filter(|f| f["id"] == "nccl-abort-notice").collect();
    assert_eq!(notices.len(), 1, "{r}");
    assert_eq!(notices[0]["ranks"], serde_json::json!([0, 2]), "{r}");
    assert_eq!(notices[0]["role"], "collateral", "{r}");
}

/// With a terminal on stdin, `diagnose` says it is reading standard input and how to end
/// it, instead of a silent wait. The terminal is a pty opened by Python (CI requires it:
/// TORCHDX_REQUIRE_PYTHON=1).
#[test]
fn stdin_on_a_terminal_says_it_is_reading() {
    let script = r#"
import os, pty, sys
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], [sys.argv[1], "diagnose"])
os.write(fd, b"\x04")
out = b""
while True:
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
os.waitpid(pid, 0)
sys.stdout.buffer.write(out)
"#;
    let Ok(o) = Command::new("python3").args(["-c", script, env!("CARGO_BIN_EXE_torchdx")]).output() else {
        assert!(std::env::var_os("TORCHDX_REQUIRE_PYTHON").is_none(), "python3 is required for the pty test");
        eprintln!("skipped: no python3 for a pty");
        return;
    };
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("reading the log from standard input") && t.contains("Ctrl-D"), "{t}");
    assert!(t.contains("No failure found in 0 lines"), "{t}");
}

/// `rules check` counts in the singular when there is one.
#[test]
fn rules_check_counts_in_the_singular() {
    let o = run(&["rules", "check", "tests/fixtures/bad-rules/claimed-by-another-rule"]);
    let t = stdout(&o);
    assert!(t.contains(": 1 file, 3 examples: ") && t.ends_with("; 1 problem\n"), "{t}");
    assert!(t.contains("to resolve: give this rule a `priority` above"), "{t}");
}

/// `redact` streams: a FIFO is read once (no second pass that would find it empty), the
/// summary names classes on stderr; `eval` skips a case whose log is a FIFO instead of
/// blocking on it, and scores the others.
#[cfg(unix)]
#[test]
fn redact_and_eval_with_fifos() {
    use std::io::Write as _;
    let dir = std::env::temp_dir().join(format!("torchdx-fifo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("cases/a-fifo")).unwrap();
    std::fs::create_dir_all(dir.join("cases/b-file")).unwrap();
    let fifo = dir.join("log.fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut f = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
            f.write_all(b"password: hunter2\nhost : gpu-a1\n").unwrap();
        })
    };
    let o = bin().arg("redact").arg(&fifo).output().unwrap();
    writer.join().unwrap();
    assert_eq!(stdout(&o), "password: <secret1>\nhost : <host1>\n");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("redacted 2 values in 2 of 2 lines: 1 host name, 1 password"), "{err}");

    let oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 7.79 GiB of which 1.12 GiB is free.\n";
    std::fs::write(dir.join("cases/b-file/log.txt"), oom).unwrap();
    for c in ["a-fifo", "b-file"] {
        std::fs::write(dir.join(format!("cases/{c}/truth.toml")), "family = \"cuda-oom\"\n").unwrap();
    }
    assert!(Command::new("mkfifo").arg(dir.join("cases/a-fifo/log.txt")).status().unwrap().success());
    let mut child =
        bin().arg("eval").arg(dir.join("cases")).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let t0 = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed().as_secs() > 60 {
            let _ = child.kill();
            panic!("eval blocked on a FIFO");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let o = child.wait_with_output().unwrap();
    let (out, err) = (stdout(&o), String::from_utf8_lossy(&o.stderr).into_owned());
    assert!(err.contains("a-fifo: log.txt: not a regular file"), "{err}");
    assert!(out.contains("eval: family=0.50") && out.contains(" n=2 crashes=1 "), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
