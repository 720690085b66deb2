//! Wire types: the rows of the contract tables as the dashboard, the API and the browser see
//! them. Field names follow the column names so the JSON API reads like the schema.

use crate::state::{run_state, Cause, RunFacts, RunState, Tokens};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

string_enum!(
    /// What woke the task: an incoming notification or a periodic tick.
    Source, "source" { Notification => "notification", Tick => "tick" }
);
string_enum!(
    /// Is running the task twice harmless? Unsafe tasks need compensation after a double execution.
    Safety, "safety" { Idempotent => "idempotent", Unsafe => "unsafe" }
);
string_enum!(
    /// `tasks.dead_reason`: why a task is dead, when its killer said. `None` on a task: its
    /// attempts ran out, or the writer did not say.
    DeadReason, "dead_reason" { Loop => "loop" }
);
string_enum!(
    /// `tasks.status`.
    TaskStatus, "status" {
        Queued => "queued", Leased => "leased", Completed => "completed", Failed => "failed", Dead => "dead",
    }
);

/// A row of `tasks`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Task {
    pub id: i64,
    pub kind: String,
    pub source: Source,
    pub safety: Safety,
    pub status: TaskStatus,
    pub payload: serde_json::Value,
    pub result: Option<String>,
    pub owner: Option<String>,
    pub lease_epoch: i64,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub attempts: i32,
    pub max_attempts: i32,
    pub compensated_at: Option<DateTime<Utc>>,
    pub compensated_by: Option<String>,
    pub compensation_reason: Option<String>,
    pub compensation_ref: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Why it is dead, when whoever killed it said (migration 0014).
    #[serde(default)]
    pub dead_reason: Option<DeadReason>,
}

/// A row of `runs`, with its derived state attached by [`Run::with_state`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Run {
    pub id: i64,
    pub task_id: i64,
    pub worker: String,
    pub lease_epoch: i64,
    pub claimed_at: DateTime<Utc>,
    pub lease_expires_at: DateTime<Utc>,
    pub heartbeat_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub output: Option<String>,
    pub error: Option<String>,
    pub error_detail: Option<String>,
    pub completion_rows: Option<i32>,
    /// The run's trace in an external tracer, when the runner gave one (docs/contract.md,
    /// "Trace ids"); the server turns it into a link ([`crate::trace::TraceLinks`]).
    #[serde(default)]
    pub trace_id: Option<String>,
    pub state: RunState,
    pub cause: Option<Cause>,
    /// Why this claim was a re-claim (`crate::reclaim`), decided by the store for every read
    /// of runs (the run list, a run, a task's runs, the timeline); none for a task's first claim.
    #[serde(default)]
    pub reclaim_reason: Option<crate::reclaim::ReclaimReason>,
}

impl Run {
    pub fn facts(&self) -> RunFacts<'_> {
        RunFacts {
            finished_at: self.finished_at,
            lease_expires_at: self.lease_expires_at,
            completion_rows: self.completion_rows,
            error: self.error.as_deref(),
            output: self.output.as_deref(),
        }
    }

    /// Recomputes `state` and `cause` from the columns as of `now`.
    pub fn with_state(mut self, now: DateTime<Utc>, tokens: &Tokens) -> Self {
        let (state, cause) = run_state(&self.facts(), now, tokens);
        self.state = state;
        self.cause = cause;
        self
    }
}

/// A row of `effects`: one side effect a run recorded in the outbox, under its fencing token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Effect {
    pub id: i64,
    pub run_id: i64,
    pub task_id: i64,
    pub lease_epoch: i64,
    pub kind: String,
    pub idempotency_key: String,
    pub created_at: DateTime<Utc>,
}

/// A row of `operator_actions`: the audit trail.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OperatorAction {
    pub id: i64,
    pub task_id: i64,
    pub run_id: Option<i64>,
    pub action: crate::action::ActionKind,
    pub actor: String,
    pub reason: String,
    pub reference: Option<String>,
    pub epoch_seen: Option<i64>,
    pub epoch_after: Option<i64>,
    /// The task's status when the action was applied.
    pub status_seen: Option<TaskStatus>,
    /// `applied`, or `refused:<code>` for an attempt that changed nothing (a stale view, a
    /// viewer's 403, …): the trail answers "who tried what", not only "what applied".
    pub outcome: String,
    /// The client's idempotency key, if it sent one.
    pub request_id: Option<String>,
    pub created_at: DateTime<Utc>,
    /// How the actor signed in: `session`, `token:<name>`, `proxy`, `cli` or `local` (none on
    /// rows from before this was recorded).
    #[serde(default)]
    pub via: Option<String>,
    /// An acknowledgement's item; none on other actions.
    #[serde(default)]
    pub attention: Option<crate::attention::AttentionKind>,
}

impl OperatorAction {
    /// The refusal code if this entry records a refused attempt.
    pub fn refused(&self) -> Option<&str> {
        self.outcome.strip_prefix(crate::action::REFUSED_PREFIX)
    }
}

/// Rows of the contract tables, for the overview's "All time". Exact while a table is small;
/// past 100 000 rows PostgreSQL's catalogue estimate (counting 10 M runs per request would
/// cost more than the rest of the page), and then `estimated` says so.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Totals {
    pub tasks: i64,
    pub runs: i64,
    pub effects: i64,
    #[serde(default)]
    pub estimated: bool,
}
