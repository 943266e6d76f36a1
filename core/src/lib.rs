//! # torchdx-core
//!
//! An embeddable diagnosis engine for PyTorch training failures. Give it the text of a
//! log (a traceback, or gigabytes of `torchrun` output from many ranks) and it returns a
//! [`Report`]: which failure happened, which rank initiated it and which reports are
//! its echoes, the evidence parsed from the messages, the culprit where the log can
//! settle it, and a complete explanation bound to that evidence.
//!
//! The crate does no I/O: no files, no clock, no threads, no global state. Every
//! function is a pure function of its input, so the same log gives byte-identical
//! reports natively, in WASM, on any machine.
//!
//! # Overview
//!
//! - [`Engine`] holds a compiled rule pack and its prefilter. Build it once
//!   ([`Engine::builtin`] or [`Engine::with_extra`]) and call [`Engine::diagnose`].
//! - [`Report`] / [`Finding`] are the JSON contract `torchdx/report@1`.
//! - Rules are TOML files (`rules/*.toml`), embedded at compile time; see
//!   `rules/README.md` for the format and the template language. The build script also
//!   precompiles them to JSON, which [`Engine::builtin`] decodes instead of parsing TOML;
//!   extra rule files are parsed as TOML.
//!
//! # Example
//!
//! ```
//! let engine = torchdx_core::Engine::builtin();
//! let report = engine.diagnose("RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cpu and cuda:0!");
//! assert_eq!(report.findings[0].family, "device-mismatch");
//! ```
//!
//! # Design
//!
//! The crate is a pipeline whose layers are its modules, data flowing one way (a test,
//! `core/tests/layers.rs`, fails on an upward import):
//!
//! | layer | what | reads |
//! |---|---|---|
//! | `ingest` | bytes to clean lines with rank, time and level; the streaming window that keeps, in bounded memory, only the lines around what the prefilter hits; terminal hard wraps | nothing |
//! | `grammar` | tracebacks (CPython, IPython, Rich, loguru, DataLoader re-raises, chains), torchrun's failure summary, Python calls on a failing line, typed atoms | ingest |
//! | `rules` | the pack (rule and data files), the template language and matcher, the prefilter, matching kept lines into events and incidents, evidence, conditions, placeholder text | grammar, ingest |
//! | `infer` | facts rules opt into, culprit decisions and cases, rule text bound to the evidence, roles across ranks | rules |
//! | `engine` | [`Engine`], [`EngineBuilder`], [`Diagnoser`]: compile, then run the stages | infer |
//! | `authoring` | rule checks and docs, above the engine because they run examples | engine |
//! | `report` | the contract's types and their text and Markdown renderings | nothing |
//!
//! Rust computes facts; every decision a rule author may want to change (templates,
//! culprit decisions, case conditions, families, notices) is rule data.
//!
//! # Performance
//!
//! One aho-corasick pass over the raw bytes finds template anchors (each template's
//! longest leading word), structural literals and needles; lines are split with memchr;
//! a line with no hit is never decoded, only kept raw in its rank's short ring. The scan
//! runs as a contiguous NFA (0.24 ms to build) until the engine has read 2 MB over all
//! its diagnoses, then a DFA (7-8 ms to build, 1.4x faster per byte), built once per
//! engine: the engine's only cache, shared safely across threads, and it changes speed,
//! never a report. A service that diagnoses many small pastes gets the DFA after its
//! first 2 MB, not never. `Engine::builtin` takes about 9 ms: building the prefilter's
//! automata is about 40% of it, decoding the precompiled JSON (`torchdx-rules`, each
//! file decoded as it is read) a third, compiling the templates a fifth.
//! `bench/run.sh` measures end-to-end speed against `rg -F` and `wc -l`.
//!
//! # Untrusted input
//!
//! [`Engine::diagnose_bytes`] accepts any bytes and never panics. Lines longer than
//! 64 KiB keep their head and tail; exception messages are capped in lines; every
//! template match attempt has a step budget; traceback chains and nesting are parsed
//! iteratively; memory is bounded by [`Limits`]. Time is linear in the input for a
//! fixed pack. Rule packs are validated when they load ([`PackError`], with a stable
//! [`code`](PackError::code)).
//!
//! # Lower level APIs
//!
//! [`spec`] is the rule file format (for tools that read or write rule files),
//! [`authoring`] the checks and docs of `torchdx rules`, [`redact`] the redaction of a
//! log before it is shared. Most embedders need none of them.

#![deny(missing_docs)]
#![warn(missing_debug_implementations)]

pub mod authoring;
mod engine;
mod grammar;
mod infer;
mod ingest;
pub mod redact;
mod report;
mod rules;

#[cfg(feature = "builtin")]
pub use engine::{builtin_pack, builtin_sources};
pub use engine::{Diagnoser, Engine, EngineBuilder, Part, SharedDiagnoser};
pub use ingest::window::Limits;
#[cfg(feature = "schema")]
pub use report::report_schema;
pub use report::{
    terminal_text, Confidence, Culprit, Evidence, Finding, Input, Location, Report, Role, Schema, TimelineEntry, Trace,
    SCHEMA,
};
pub use rules::pack::{Pack, PackError, Rule, RuleSource};

/// The built-in pack's precompiled form: what a WASM build downloads beside the module
/// and decodes with [`Pack::from_precompiled_json`].
#[cfg(feature = "builtin")]
pub fn builtin_precompiled() -> &'static str {
    torchdx_rules::PRECOMPILED
}

/// A raw log line as a terminal shows it: `\r` progress-bar overwrites resolved to the
/// last non-empty segment, ANSI colour codes (also those whose ESC byte a paste lost)
/// removed. The first step of the engine's own cleaning, for a log viewer.
pub fn display_line(raw: &str) -> String {
    ingest::display_line(raw)
}

/// The crate version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The rule file format: what a rule file deserializes into (and its JSON Schema, with
/// the `schema` feature). Read-only for embedders; rule authors write TOML.
pub mod spec {
    pub use crate::rules::pack::is_kebab;
    #[cfg(feature = "schema")]
    pub use crate::rules::spec::{
        codes_schema, families_schema, ingest_schema, notices_schema, ops_schema, rule_schema,
    };
    pub use crate::rules::spec::{
        ArgRole, CaseSpec, CulpritCase, CulpritSpec, Example, Expect, FamilySpec, MatchSpec, NoticeSpec, OneOrMany,
        OpSpec, RuleSpec, When, CASE_KEYS, CULPRIT_CASE_KEYS, EXAMPLE_KEYS, MATCH_KEYS, RULE_KEYS,
    };
}

/// Building blocks for the fuzz targets, property tests and benchmarks of this
/// workspace. Not a stable API.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals {
    pub use crate::grammar::{pycall, traceback};
    pub use crate::ingest::strip_ansi;
    pub use crate::rules::template::{Match, Template};
    pub use crate::rules::text::{placeholders, render, render_docs, render_lossy, Context};
}
