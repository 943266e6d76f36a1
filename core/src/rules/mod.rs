//! Rules: the pack rule authors write, and what it does with the grammars' output.
//!
//! - [`spec`]: the rule and data file format, as serde types;
//! - [`pack`]: rule and data files compiled and validated (located errors);
//! - [`precompiled`]: the built-in pack's files decoded ahead of time, as JSON;
//! - [`facts`]: the keys the engine provides to rule text and conditions;
//! - [`template`]: the message template language and its bounded matcher;
//! - [`prefilter`]: the literal scan that decides where templates are tried;
//! - [`matching`]: kept lines to streams, templates to events;
//! - [`evidence`]: captures to evidence, derived facts, what the whole log showed;
//! - [`codes`]: the error-code tables, and reading a captured code through them;
//! - [`conditions`]: `when` conditions of matches and cases;
//! - [`text`]: placeholders in rule text.

pub(crate) mod codes;
pub(crate) mod conditions;
pub(crate) mod evidence;
pub(crate) mod facts;
pub(crate) mod ints;
pub(crate) mod matching;
pub(crate) mod pack;
pub(crate) mod precompiled;
pub(crate) mod prefilter;
pub(crate) mod spec;
pub(crate) mod template;
pub(crate) mod text;
