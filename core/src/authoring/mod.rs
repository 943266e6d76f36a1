//! Tools for rule authors, above the engine (they run it on the rules' examples):
//! [`check`] validates a pack the way a reviewer would, [`docs`] writes a rule's
//! encyclopedia entry, [`scaffold`] writes a new rule.

pub mod check;
pub mod docs;
pub mod scaffold;
