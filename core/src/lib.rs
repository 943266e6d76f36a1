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
//!   precompiles them to JSON, so [`Engine::builtin`] takes under 2 ms (the TOML parse
//!   alone is 3.5 ms); extra rule files are parsed as TOML.
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
//! Data flows one way: [`ingest`] (bytes → clean lines with rank, time and level) →
//! [`grammar`] (tracebacks per rank stream) → prefilter + [`template`] matching →
//! [`infer`] (evidence, culprit, rule text, roles) → [`report`]. The aho-corasick
//! prefilter holds the first word of every template; templates run only where it hits.
//!
//! An [`Engine`] is immutable but for one cache: the scan's DFA, built on first use by a
//! diagnosis past 2 MB (thread-safe, once per engine). It finds what the engine's NFA
//! finds, so it changes speed, never a report.
//!
//! # Untrusted input
//!
//! [`Engine::diagnose_bytes`] accepts any bytes and never panics. Lines longer than
//! [`ingest::MAX_LINE`] are cut; exception messages are capped in lines; every template
//! match attempt has a step budget; traceback chains and nesting are parsed
//! iteratively. Time is linear in the input for a fixed pack.

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
pub use engine::{Diagnoser, Engine};
pub use report::{Confidence, Culprit, Evidence, Finding, Input, Location, Report, Role, TimelineEntry, Trace, SCHEMA};
pub use rules::pack::{Pack, PackError, Rule, RuleSource};

/// The crate version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The rule file format: what a rule file deserializes into (and its JSON Schema, with
/// the `schema` feature). Read-only for embedders; rule authors write TOML.
pub mod spec {
    pub use crate::rules::pack::is_kebab;
    #[cfg(feature = "schema")]
    pub use crate::rules::spec::{families_schema, ingest_schema, notices_schema, ops_schema, rule_schema};
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
