//! Structure grammars: what a stream of cleaned lines is made of.
//!
//! - [`traceback`]: Python and IPython tracebacks, chained and nested, truncated or not.
//! - [`elastic`]: torchrun's `ChildFailedError` summary (failures per rank).
//! - [`raised`]: exceptions shown outside a traceback (a lone line, a repr, a dict field).
//! - [`topology`]: the job's nodes, node index, processes per node and hosts.
//! - [`pycall`]: Python call expressions on a failing source line.
//! - [`atoms`]: the typed pieces messages are made of (devices, dtypes, shapes, sizes).
//!
//! Messages themselves are matched by the rule templates ([`crate::rules`]). The
//! grammars know no rule: [`TRIGGERS`] are the literals that start or carry the
//! structure they parse, which the prefilter keeps even where no template anchors.

pub(crate) mod atoms;
pub(crate) mod elastic;
pub mod pycall;
pub mod raised;
pub mod topology;
pub mod traceback;

/// Literals that start or carry structure the grammars parse: traceback headers and
/// frames, exception lines, chain separators, the launcher's root-cause block.
pub(crate) const TRIGGERS: &[&str] = &[
    "Traceback (most recent call last)",
    "File \"",
    "File /",
    "File [",
    "Cell In[",
    "<ipython-input",
    "Error:",
    "Exception:",
    "Error :",
    "Error(",
    "Exception(",
    "Error'",
    "Error\"",
    "Interrupt",
    "During handling of the above",
    "The above exception",
    "Root Cause",
];
