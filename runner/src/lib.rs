//! The runner side of the lastword contract (schema version 0001, see `docs/contract.md`).
//!
//! A worker fleet uses a [`Runner`] to claim tasks under a fenced lease, heartbeat, record side
//! effects in the outbox, and finish each run with exactly one [`Outcome`]. Every write is
//! guarded by the lease's owner and fencing token, so a worker that lost its lease learns it
//! ([`Heartbeat::Lost`], [`Finish::LostLease`]) and its late write is recorded on its run but
//! never applied to the task. Works on PostgreSQL and SQLite through [`lastword_store::Db`].

mod clock;
mod config;
mod error;
mod outcome;
mod runner;
pub mod sql;

pub use clock::{Clock, ManualClock, SystemClock};
pub use config::RunnerConfig;
pub use error::{Result, RunnerError};
pub use outcome::{ActionMessage, BlankMessage, EffectRecorded, Finish, Heartbeat, Lease, Outcome};
pub use runner::{enqueue, Runner};

// Re-exported so a worker needs only this crate to build tasks and read statuses.
pub use lastword_core::{ErrorCause, Safety, Source, TaskStatus, Tokens};
pub use lastword_store::{Db, NewTask};
