//! Properties over arbitrary and mutated input (proptest). Shrunk failures are kept in
//! `proptest-regressions/` so they replay for everyone.

use std::sync::OnceLock;

use proptest::prelude::*;
use torchdx_core::internals::strip_ansi;
use torchdx_core::internals::Template;
use torchdx_core::Engine;
use torchdx_tests::rule_ids;

fn engine() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(Engine::builtin)
}

/// An engine whose scan has switched to its DFA (it diagnosed a 3 MB log).
fn warm() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(|| {
        let e = Engine::builtin();
        let filler = "[rank3]: step 1200 loss 2.1183 lr 3.00e-04 grad_norm 0.917\n".repeat(50_000);
        let _ = e.diagnose(&filler);
        e
    })
}

/// Logs that exercise the grammars: rule examples.
fn example_logs() -> Vec<String> {
    torchdx_tests::examples(engine()).into_iter().filter(|e| e.3).map(|e| e.2).collect()
}

fn an_example() -> impl Strategy<Value = String> {
    let logs = example_logs();
    (0..logs.len()).prop_map(move |i| logs[i].clone())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        let r = engine().diagnose_bytes(&bytes);
        for f in &r.findings {
            prop_assert!(f.location.line >= 1 && f.location.line <= f.location.end_line);
            prop_assert!(f.location.end_line <= r.input.lines.max(1));
        }
        prop_assert!(r.initiating.is_none_or(|i| i < r.findings.len()));
    }

    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,2048}") {
        let _ = engine().diagnose(&s);
    }

    #[test]
    fn ansi_stripping_is_idempotent(s in "(\\x1b\\[[0-9;]{0,6}[mK]|\\[[0-9;]{1,4}m|[a-z \\[\\]0-9:;]){0,64}") {
        let once = strip_ansi(&s);
        prop_assert_eq!(strip_ansi(&once), once.clone());
    }

    #[test]
    fn streaming_equals_whole_for_any_split(log in an_example(), cuts in proptest::collection::vec(0usize..4096, 0..8)) {
        let bytes = log.as_bytes();
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
        cuts.sort_unstable();
        let mut d = engine().stream();
        let mut last = 0;
        for c in cuts {
            d.feed(&bytes[last..c]);
            last = c;
        }
        d.feed(&bytes[last..]);
        prop_assert_eq!(d.finish().to_json(), engine().diagnose_bytes(bytes).to_json());
    }

    #[test]
    fn prefixes_colour_and_crlf_do_not_change_which_rules_fire(log in an_example(), rank in 0u32..64, style in 0usize..4) {
        let base = rule_ids(&engine().diagnose(&log));
        let mutated: String = log.lines().map(|l| match style {
            0 => format!("[rank{rank}]: {l}\n"),
            1 => format!("{l}\r\n"),
            2 => format!("\x1b[0m{l}\x1b[0m\n"),
            _ => format!("[default{rank}]:{l}\n"),
        }).collect();
        prop_assert_eq!(rule_ids(&engine().diagnose(&mutated)), base);
    }

    /// An engine's only cache is the scan DFA, built once it has read 2 MB in all: an
    /// engine that built it reports exactly what a fresh one does.
    #[test]
    fn a_warm_engine_reports_what_a_fresh_one_does(log in an_example()) {
        let fresh = Engine::builtin();
        prop_assert_eq!(warm().diagnose(&log).to_json(), fresh.diagnose(&log).to_json());
    }

    #[test]
    fn rendered_templates_parse_back(a in "(cpu|cuda|cuda:[0-7]|mps:0|meta)", b in "(cpu|cuda|cuda:[0-7]|mps:0|xla:0)",
                                     arg in "[a-z_][a-z0-9_]{0,12}", n in 0i64..100_000, rows in 1i64..5000, cols in 1i64..5000) {
        let t = Template::parse("found at least two devices, {device:devices[]} and {device:devices[]}! (when checking argument for argument {ident:argument} in method wrapper_{int:n}) shapes ({shape:s})").unwrap();
        let text = format!("found at least two devices, {a} and {b}! (when checking argument for argument {arg} in method wrapper_{n}) shapes ({rows}x{cols})");
        let m = t.find(&text, 0).expect("the rendered template matches");
        let get = |k: &str| m.captures.iter().filter(|c| c.name == k.trim_end_matches("[]")).map(|c| c.value.clone()).collect::<Vec<_>>();
        prop_assert_eq!(get("devices[]"), vec![serde_json::Value::from(a), serde_json::Value::from(b)]);
        prop_assert_eq!(get("argument"), vec![serde_json::Value::from(arg)]);
        prop_assert_eq!(get("n"), vec![serde_json::Value::from(n)]);
        prop_assert_eq!(get("s"), vec![serde_json::json!([rows, cols])]);
    }

    #[test]
    fn reordering_rank_interleaving_keeps_the_initiating_rank(seed in any::<u64>()) {
        // Rank 3 fails first; ranks 0-2 and 4-5 echo with watchdog timeouts.
        let mut per_rank: Vec<Vec<String>> = Vec::new();
        for r in 0..6u32 {
            let mut lines = vec![format!("[rank{r}]:step 10 loss 2.0")];
            if r == 3 {
                lines.push(format!("[rank{r}]: Traceback (most recent call last):"));
                lines.push(format!("[rank{r}]:   File \"/w/train.py\", line 9, in <module>"));
                lines.push(format!("[rank{r}]:     y = model(x)"));
                lines.push(format!("[rank{r}]: RuntimeError: mat1 and mat2 shapes cannot be multiplied (8x3 and 4x5)"));
            } else {
                lines.push(format!("[rank{r}]:[E1129 10:59:59.{r}00000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=77, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600090 milliseconds before timing out."));
            }
            per_rank.push(lines);
        }
        // Interleave deterministically from the seed, keeping each rank's own order.
        let mut state = seed | 1;
        let mut idx = vec![0usize; per_rank.len()];
        let mut out = String::new();
        loop {
            let open: Vec<usize> = (0..per_rank.len()).filter(|&r| idx[r] < per_rank[r].len()).collect();
            if open.is_empty() { break; }
            state ^= state << 13; state ^= state >> 7; state ^= state << 17;
            let r = open[(state % open.len() as u64) as usize];
            out.push_str(&per_rank[r][idx[r]]);
            out.push('\n');
            idx[r] += 1;
        }
        let report = engine().diagnose(&out);
        let p = report.primary().expect("a primary finding");
        prop_assert_eq!(p.rank, Some(3));
        prop_assert_eq!(p.family.as_str(), "matmul-shape-mismatch");
    }
}
