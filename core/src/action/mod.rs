//! Operator actions: what an operator asks for (re-queue, mark compensated, undo), the rules
//! that check the request before any database work, and the answers — applied, replayed (a
//! double submission), or refused with an explanation of what changed since the operator
//! looked. The store carries them out in one transaction each; the server and the pages only
//! translate. Pure, so the explanations are unit-tested here.
//!
//! One module per part: `request` (what is asked), `decision` (whether it applies and why
//! not), `bulk` (the preview and the confirmed set), `audit` (how it is recorded and read
//! back). Everything is re-exported here, so callers name `lastword_core::action::X`.

mod audit;
mod bulk;
mod decision;
mod request;

pub use audit::*;
pub use bulk::*;
pub use decision::*;
pub use request::*;

#[cfg(test)]
mod tests;
