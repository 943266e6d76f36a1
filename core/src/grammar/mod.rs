//! Structure grammars: what a stream of cleaned lines is made of.
//!
//! - [`traceback`]: Python and IPython tracebacks, chained and nested, truncated or not.
//! - [`pycall`]: Python call expressions on a failing source line.
//!
//! Messages themselves are matched by the rule templates ([`crate::template`]).

pub mod elastic;
pub mod pycall;
pub mod traceback;
