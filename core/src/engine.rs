//! The engine: a compiled pack and its prefilter, and the stages a log goes through.
//!
//! Data flows one way:
//!
//! 1. [`ingest`](crate::ingest): the streaming window keeps, with bounded memory, the
//!    lines around what the prefilter's scan hits, cleaned and attributed to ranks;
//! 2. [`rules::matching`](crate::rules::matching): lines regrouped per stream (one per
//!    rank, plus the unranked launcher stream), parsed by the
//!    [`grammar`](crate::grammar)s, templates matched at the anchors' hits;
//! 3. [`infer`](crate::infer): events become findings (evidence, culprit, rule text
//!    bound to the evidence), then roles across ranks and the timeline;
//! 4. the [`Report`].

use std::sync::Arc;

use crate::grammar;
use crate::infer;
use crate::ingest::window::{Limits, Window};
use crate::report::{Input, Report, Schema};
use crate::rules::evidence::LogFacts;
use crate::rules::matching;
use crate::rules::pack::Pack;
#[cfg(feature = "builtin")]
use crate::rules::pack::{PackError, RuleSource};
use crate::rules::prefilter::{Prefilter, Scan};

/// The built-in rule pack's sources.
#[cfg(feature = "builtin")]
pub fn builtin_sources() -> Vec<RuleSource<'static>> {
    torchdx_rules::SOURCES.iter().map(|(name, text)| RuleSource { name, text }).collect()
}

/// The built-in pack: decoded from its precompiled form, else (a file whose JSON does
/// not decode into a rule) compiled from the TOML, which then reports the located error.
#[cfg(feature = "builtin")]
pub fn builtin_pack() -> Result<Pack, PackError> {
    let sources = builtin_sources();
    match Pack::from_precompiled(&sources, torchdx_rules::PRECOMPILED) {
        Some(pack) => Ok(pack),
        None => Pack::new(&sources),
    }
}

/// A compiled rule pack with its prefilter. Build once, diagnose many logs; an engine is
/// `Send + Sync`, so threads can share one.
#[derive(Clone, Debug)]
pub struct Engine {
    pack: Pack,
    prefilter: Prefilter,
    limits: Limits,
}

/// Builds an [`Engine`] with settings other than the defaults.
///
/// ```
/// use torchdx_core::{EngineBuilder, Limits};
/// let engine = EngineBuilder::new(torchdx_core::builtin_pack().unwrap())
///     .limits(Limits { follow_lines: 200, ..Limits::default() })
///     .build();
/// let report = engine.diagnose("RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!");
/// assert_eq!(report.primary().map(|f| f.family.as_str()), Some("device-mismatch"));
/// ```
#[derive(Clone, Debug)]
pub struct EngineBuilder {
    pack: Pack,
    prefilter: bool,
    limits: Limits,
}

impl EngineBuilder {
    /// A builder over a compiled pack, with the default settings.
    pub fn new(pack: Pack) -> EngineBuilder {
        EngineBuilder { pack, prefilter: true, limits: Limits::default() }
    }

    /// Whether templates run only where the prefilter's literals hit (the default).
    /// Off, every line is kept and every position tried: for differential tests that
    /// prove the prefilter never hides a match.
    pub fn prefilter(mut self, on: bool) -> EngineBuilder {
        self.prefilter = on;
        self
    }

    /// The memory bounds of each diagnosis.
    pub fn limits(mut self, limits: Limits) -> EngineBuilder {
        self.limits = limits;
        self
    }

    /// Compiles the prefilter and returns the engine.
    pub fn build(self) -> Engine {
        let mut e = Engine::compile(self.pack, self.limits);
        if !self.prefilter {
            e.prefilter.disable();
        }
        e
    }
}

impl Engine {
    /// The engine with the built-in rule pack.
    ///
    /// # Panics
    /// Never for a released build: the built-in pack is compiled and checked by the
    /// test suite, so a failure here is a bug in the pack, not in the input.
    #[cfg(feature = "builtin")]
    pub fn builtin() -> Engine {
        Engine::new(builtin_pack().expect("the built-in rule pack is valid (checked by tests)"))
    }

    /// The built-in pack plus `extra` rule files (a rule with an existing id replaces it).
    #[cfg(feature = "builtin")]
    pub fn with_extra(extra: &[RuleSource<'_>]) -> Result<Engine, PackError> {
        Ok(Engine::new(builtin_pack()?.with(extra)?))
    }

    /// An engine over any compiled pack, with the default settings.
    pub fn new(pack: Pack) -> Engine {
        Engine::compile(pack, Limits::default())
    }

    fn compile(pack: Pack, limits: Limits) -> Engine {
        // Texts asked about anywhere in the log: by the facts rules declare, and by
        // their cases' `log_contains`.
        let mut needles: Vec<String> = Vec::new();
        if pack.rules().iter().any(|r| r.spec.facts.iter().any(|g| g == crate::rules::facts::DEVICE_PLACEMENT)) {
            needles.extend(infer::facts::DEVICE_PLACEMENT_NEEDLES.iter().map(|s| s.to_string()));
        }
        for r in pack.rules() {
            let whens = r.spec.cases.iter().map(|c| &c.when).chain(r.spec.culprit_cases.iter().map(|c| &c.when));
            for n in whens.flat_map(|w| w.log_texts()) {
                if !n.is_empty() && !needles.iter().any(|x| x == n) {
                    needles.push(n.to_string());
                }
            }
        }
        // Structure the grammars read, and the data's exception classes that say no
        // `Error` (`Unsupported:`).
        let mut structural: Vec<String> =
            grammar::TRIGGERS.iter().chain(grammar::topology::TRIGGERS).map(|s| s.to_string()).collect();
        structural.extend(pack.ingest().exception_classes.iter().map(|c| format!("{c}:")));
        let prefilter = Prefilter::new(&pack, &structural, needles);
        Engine { pack, prefilter, limits }
    }

    /// Turns the prefilter off (every position is tried): for differential tests that
    /// prove the prefilter never hides a match ([`EngineBuilder::prefilter`]).
    pub fn without_prefilter(mut self) -> Engine {
        self.prefilter.disable();
        self
    }

    /// The compiled prefilter, for the prefilter's own tests.
    #[cfg(test)]
    pub(crate) fn prefilter_for_tests(&self) -> &Prefilter {
        &self.prefilter
    }

    /// The rule pack.
    pub fn pack(&self) -> &Pack {
        &self.pack
    }

    /// Diagnoses a log given as text.
    pub fn diagnose(&self, text: &str) -> Report {
        self.diagnose_bytes(text.as_bytes())
    }

    /// Diagnoses a log given as bytes (invalid UTF-8 is replaced, line numbers kept).
    /// The same as streaming it in one chunk.
    pub fn diagnose_bytes(&self, bytes: &[u8]) -> Report {
        let mut d = self.stream();
        d.feed(bytes);
        d.finish()
    }

    /// Starts an incremental diagnosis: feed chunks of any size, then finish.
    pub fn stream(&self) -> Diagnoser<'_> {
        Diagnoser { engine: self, window: self.window() }
    }

    fn window(&self) -> Window {
        Window::new(self.prefilter.needles().len(), self.pack.continuations().to_vec(), self.limits)
    }

    /// Diagnoses the streams of one run as one input: each was fed to its own
    /// [`Diagnoser`] (the files of a log folder, in parallel if the caller likes) and
    /// ended with [`Diagnoser::into_part`]. Their lines count on in the order given, as
    /// if the streams were one text; a stream boundary is a gap in every rank's lines.
    /// The same bound of kept bytes holds for the run as for one stream.
    ///
    /// ```
    /// let engine = torchdx_core::Engine::builtin();
    /// let mut a = engine.stream();
    /// a.feed(b"[rank1]:RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n");
    /// let mut b = engine.stream();
    /// b.feed(b"[rank0]:step 9 loss 0.31\n");
    /// let report = engine.diagnose_parts(vec![a.into_part(), b.into_part()]);
    /// assert_eq!(report.input.lines, 2);
    /// assert_eq!(report.primary().and_then(|f| f.rank), Some(1));
    /// ```
    pub fn diagnose_parts(&self, parts: impl IntoIterator<Item = Part>) -> Report {
        let mut parts = parts.into_iter();
        let Some(first) = parts.next() else { return self.diagnose_bytes(b"") };
        let mut r = first.retained;
        for p in parts {
            r.append(p.retained, self.limits.max_retained_bytes);
        }
        diagnose_retained(self, r)
    }

    /// The literals the streaming scan searches for (anchors, structure, needles): what a
    /// `grep -F` baseline must search to do comparable work.
    pub fn scan_literals(&self) -> Vec<String> {
        self.prefilter.scan_literals().to_vec()
    }

    pub(crate) fn scan(&self) -> Scan<'_> {
        Scan { prefilter: &self.prefilter, pack: &self.pack }
    }
}

/// Incremental diagnosis: [`feed`](Diagnoser::feed) chunks of any size, then
/// [`finish`](Diagnoser::finish). Memory stays bounded whatever the input's size.
#[derive(Debug)]
pub struct Diagnoser<'e> {
    engine: &'e Engine,
    window: Window,
}

impl Diagnoser<'_> {
    /// Feeds the next chunk of the log.
    pub fn feed(&mut self, chunk: &[u8]) {
        self.window.feed(&self.engine.scan(), chunk);
    }

    /// Ends the input and diagnoses what was kept.
    pub fn finish(self) -> Report {
        finish(self.engine, self.window)
    }

    /// Ends this stream without diagnosing it: one part of a run whose streams
    /// [`Engine::diagnose_parts`] diagnoses together.
    pub fn into_part(self) -> Part {
        Part { retained: self.window.finish(&self.engine.scan()) }
    }
}

/// One stream of a run, read and reduced to what its diagnosis needs (bounded by the
/// engine's [`Limits`]), waiting to be diagnosed with the run's other streams by
/// [`Engine::diagnose_parts`]. Made by [`Diagnoser::into_part`]; it can move to another
/// thread.
#[derive(Debug)]
pub struct Part {
    retained: crate::ingest::window::Retained,
}

/// A [`Diagnoser`] that shares its engine instead of borrowing it, for hosts whose
/// objects cannot hold a borrow (a Python or JavaScript object that lives as long as its
/// caller keeps it). The same scan and the same report.
#[derive(Debug)]
pub struct SharedDiagnoser {
    engine: Arc<Engine>,
    window: Window,
}

impl SharedDiagnoser {
    /// Starts an incremental diagnosis with a shared engine.
    pub fn new(engine: Arc<Engine>) -> SharedDiagnoser {
        let window = engine.window();
        SharedDiagnoser { engine, window }
    }

    /// Feeds the next chunk of the log.
    pub fn feed(&mut self, chunk: &[u8]) {
        self.window.feed(&self.engine.scan(), chunk);
    }

    /// Ends the input and diagnoses what was kept.
    pub fn finish(self) -> Report {
        finish(&self.engine, self.window)
    }

    /// Ends this stream without diagnosing it ([`Diagnoser::into_part`]).
    pub fn into_part(self) -> Part {
        Part { retained: self.window.finish(&self.engine.scan()) }
    }
}

/// The diagnosis of what a window kept: grammars, rules, roles.
fn finish(e: &Engine, window: Window) -> Report {
    diagnose_retained(e, window.finish(&e.scan()))
}

fn diagnose_retained(e: &Engine, mut r: crate::ingest::window::Retained) -> Report {
    for k in &r.kept {
        e.prefilter.mark_needles(&k.line.text, &mut r.seen);
    }
    let input = Input {
        bytes: r.bytes,
        lines: r.lines,
        ranks: r.ranks,
        truncated_lines: r.truncated,
        dropped_lines: r.dropped,
    };
    let streams = matching::streams(&e.pack, &e.prefilter, &r.kept);
    let topology = infer::topology(&streams);
    let log =
        LogFacts { needles: e.prefilter.needles(), seen: &r.seen, distributed: !input.ranks.is_empty(), topology };
    let drafts = infer::findings(&e.pack, &streams, &log);
    let failed = infer::failed_ranks(&streams);
    let t = &log.topology;
    let world = t.world.or_else(|| (!t.multi_node()).then_some(t.per_node).flatten());
    let launcher_families: Vec<String> =
        e.pack.rules().iter().filter(|r| r.spec.launcher_summary).map(|r| r.family().to_string()).collect();
    let first_failed = infer::first_failed_ranks(&streams);
    let run = infer::Run {
        ranks_seen: &input.ranks,
        failed: &failed,
        first_failed: &first_failed,
        world,
        launcher_families: &launcher_families,
    };
    let roles = infer::roles(drafts, run, e.pack.notices());
    Report { schema: Schema, input, initiating: roles.initiating, findings: roles.findings, timeline: roles.timeline }
}

#[cfg(all(test, feature = "builtin"))]
mod tests {
    use super::*;

    /// Embedders share one engine across threads; diagnosers and reports move freely.
    #[test]
    fn public_types_are_send_and_sync() {
        fn both<T: Send + Sync>() {}
        both::<Engine>();
        both::<EngineBuilder>();
        both::<Diagnoser<'static>>();
        both::<Part>();
        both::<Report>();
        both::<Pack>();
        both::<PackError>();
        both::<crate::Finding>();
        let engine = Engine::builtin();
        let log = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!";
        let want = engine.diagnose(log).to_json();
        assert!(engine.diagnose(log).primary().is_some());
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..4).map(|_| s.spawn(|| engine.diagnose(log).to_json())).collect();
            for h in handles {
                assert_eq!(h.join().unwrap(), want);
            }
        });
    }

    /// Per-rank files diagnosed as parts (in any chunking) report what the same lines
    /// concatenated report: lines numbered on, ranks and needles of every part.
    #[test]
    fn parts_of_a_run_report_what_their_concatenation_reports() {
        let engine = Engine::builtin();
        let rank1 = "[rank1]:Traceback (most recent call last):\n[rank1]:  File \"train.py\", line 9, in <module>\n[rank1]:    loss = loss_fn(out, labels)\n[rank1]:RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:1 and cpu!\n";
        let rank0 = "[rank0]:step 1 loss 0.5\n[rank0]:[E1129 10:59:59.123456 4001 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.\n";
        let whole = engine.diagnose(&format!("{rank0}{rank1}")).to_json();
        for chunk in [1, 7, 4096] {
            let parts: Vec<Part> = [rank0, rank1]
                .iter()
                .map(|text| {
                    let mut d = engine.stream();
                    for c in text.as_bytes().chunks(chunk) {
                        d.feed(c);
                    }
                    d.into_part()
                })
                .collect();
            assert_eq!(engine.diagnose_parts(parts).to_json(), whole, "chunks of {chunk} bytes");
        }
        let report = engine.diagnose_parts(Vec::new());
        assert!(report.findings.is_empty() && report.input.lines == 0);
    }

    /// The scan switches to its DFA once the engine has read `DFA_AFTER` bytes in all,
    /// over many small diagnoses as over one big one (an embedder diagnosing pastes
    /// one after another pays for the DFA once), and not before; the anchors' search
    /// over kept lines switches with it, and the report stays the same.
    #[test]
    fn the_scan_dfa_is_built_once_the_engine_has_read_enough_in_all() {
        let engine = Engine::builtin();
        let paste = "step 1200 loss 2.1183 lr 3.00e-04 grad_norm 0.917 tokens/s 183211\n".repeat(1600);
        let pastes = crate::rules::prefilter::DFA_AFTER as usize / paste.len();
        for _ in 0..pastes {
            let _ = engine.diagnose(&paste);
        }
        assert!(!engine.prefilter.has_dfa(), "{pastes} pastes of {} bytes stay under the switch", paste.len());
        let _ = engine.diagnose(&paste);
        let _ = engine.diagnose(&paste);
        assert!(engine.prefilter.has_dfa(), "past the switch the scan uses its DFA");
        // A run with a traceback, whose kept lines are searched for anchors: the same
        // report from a fresh engine's NFAs and from the DFAs.
        let log = format!("{paste}{}", include_str!("../../examples/device-mismatch.log"));
        let fresh = Engine::builtin();
        let before = fresh.diagnose(&log).to_json();
        assert!(!fresh.prefilter.has_dfa() && !fresh.prefilter.has_anchors_dfa());
        let after = engine.diagnose(&log).to_json();
        assert!(engine.prefilter.has_anchors_dfa(), "past the switch kept lines are searched with a DFA");
        assert_eq!(before, after, "both automata find the same");
    }

    #[test]
    fn the_precompiled_builtin_pack_is_the_toml_pack() {
        let sources = builtin_sources();
        let pre = Pack::from_precompiled(&sources, torchdx_rules::PRECOMPILED)
            .expect("the precompiled pack matches its sources");
        let parsed = Pack::new(&sources).expect("the built-in pack compiles");
        let specs = |p: &Pack| p.rules().iter().map(|r| (r.source_name.clone(), r.spec.clone())).collect::<Vec<_>>();
        assert_eq!(specs(&pre), specs(&parsed));
        assert_eq!(pre.ops(), parsed.ops());
        assert!(!pre.ops().is_empty() && pre.rules().len() > 40);
    }
}
