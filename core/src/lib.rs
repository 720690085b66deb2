//! lastword's domain vocabulary, shared by the store, the runner library, the server and the
//! browser build. Nothing here does I/O, so every rule can be unit-tested on a table of cases
//! and compiled to wasm unchanged.

#[macro_use]
mod vocab;

pub mod action;
pub mod alerts;
pub mod attention;
pub mod auth;
pub mod change;
pub mod clock;
pub mod export;
#[doc(hidden)]
pub mod fixtures;
pub mod leases;
pub mod model;
pub mod query;
pub mod reclaim;
pub mod state;
pub mod time_text;
pub mod trace;
pub mod views;

pub use action::{
    ActionKind, ActionOutcome, ActionRequest, AuditFilter, AuditPage, BulkOptions, BulkOutcome, BulkPreview,
    BulkRequeueRequest, BulkSelection, Refusal, RefusalCode, RetryPolicy, TaskRef,
};
pub use attention::AttentionKind;
pub use auth::{Actor, Principal, Role, SignIn};
pub use change::Change;
pub use clock::{read_now, write_now};
pub use model::*;
pub use query::{Cursor, PageRequest, ParamError, RunFilter};
pub use reclaim::ReclaimReason;
pub use state::{run_state, trim_token, Cause, ErrorCause, RunFacts, RunState, Tokens, UnknownValue};
pub use trace::TraceLinks;
pub use views::*;
