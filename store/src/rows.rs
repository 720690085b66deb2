//! Database rows → wire types. The same `FromRow` structs decode on both backends; the only
//! difference (JSON payload as jsonb vs text) is absorbed by `sqlx::types::Json`.

use chrono::{DateTime, Utc};
use lastword_core::{Cause, Effect, ErrorCause, OperatorAction, Run, RunListItem, RunState, Task};
use sqlx::types::Json;

pub(crate) const TASK_COLUMNS: &str =
    "id, kind, source, safety, status, payload, result, owner, lease_epoch, \
     lease_expires_at, attempts, max_attempts, compensated_at, compensated_by, compensation_reason, \
     compensation_ref, created_at, updated_at, dead_reason";

/// `r.`-qualified because run queries join and alias.
pub(crate) const RUN_COLUMNS: &str =
    "r.id, r.task_id, r.worker, r.lease_epoch, r.claimed_at, r.lease_expires_at, \
     r.heartbeat_at, r.finished_at, r.output, r.error, r.error_detail, r.completion_rows, r.trace_id";

/// [`RUN_COLUMNS`] for lists and the timeline: `output` and `error_detail` cut to `n`
/// characters in the database (so a multi-megabyte output never leaves it for a list), and
/// whether either was cut. `substr` and `length` count characters on both backends.
pub(crate) fn run_list_columns(n: usize) -> String {
    format!(
        "r.id, r.task_id, r.worker, r.lease_epoch, r.claimed_at, r.lease_expires_at, \
         r.heartbeat_at, r.finished_at, substr(r.output, 1, {n}) AS output, r.error, \
         substr(r.error_detail, 1, {n}) AS error_detail, r.completion_rows, r.trace_id, \
         (COALESCE(length(r.output), 0) > {n} OR COALESCE(length(r.error_detail), 0) > {n}) AS text_truncated"
    )
}

/// A closed vocabulary in a text column that may be NULL: `Option<Vocab<TaskStatus>>` reads NULL
/// as `None` and a value outside the vocabulary as an error naming the allowed values (what
/// `#[sqlx(try_from = "String")]` does for a NOT NULL column; it cannot take an `Option`).
pub(crate) struct Vocab<T>(T);

impl<T> Vocab<T> {
    pub(crate) fn into_inner(self) -> T {
        self.0
    }
}

impl<DB: sqlx::Database, T> sqlx::Type<DB> for Vocab<T>
where
    String: sqlx::Type<DB>,
{
    fn type_info() -> DB::TypeInfo {
        <String as sqlx::Type<DB>>::type_info()
    }

    fn compatible(ty: &DB::TypeInfo) -> bool {
        <String as sqlx::Type<DB>>::compatible(ty)
    }
}

impl<'r, DB: sqlx::Database, T> sqlx::Decode<'r, DB> for Vocab<T>
where
    String: sqlx::Decode<'r, DB>,
    T: std::str::FromStr<Err = lastword_core::UnknownValue>,
{
    fn decode(value: DB::ValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        let text = <String as sqlx::Decode<'r, DB>>::decode(value)?;
        Ok(Vocab(text.parse()?))
    }
}

pub(crate) const EFFECT_COLUMNS: &str = "id, run_id, task_id, lease_epoch, kind, idempotency_key, created_at";

pub(crate) const ACTION_COLUMNS: &str =
    "id, task_id, run_id, action, actor, reason, reference, epoch_seen, epoch_after, status_seen, outcome, \
     request_id, created_at, via, attention";

#[derive(sqlx::FromRow)]
pub(crate) struct TaskRow {
    id: i64,
    kind: String,
    #[sqlx(try_from = "String")]
    source: lastword_core::Source,
    #[sqlx(try_from = "String")]
    safety: lastword_core::Safety,
    #[sqlx(try_from = "String")]
    status: lastword_core::TaskStatus,
    payload: Json<serde_json::Value>,
    result: Option<String>,
    owner: Option<String>,
    lease_epoch: i64,
    lease_expires_at: Option<DateTime<Utc>>,
    attempts: i32,
    max_attempts: i32,
    compensated_at: Option<DateTime<Utc>>,
    compensated_by: Option<String>,
    compensation_reason: Option<String>,
    compensation_ref: Option<String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    dead_reason: Option<String>,
}

impl From<TaskRow> for Task {
    fn from(r: TaskRow) -> Self {
        Task {
            id: r.id,
            kind: r.kind,
            source: r.source,
            safety: r.safety,
            status: r.status,
            payload: r.payload.0,
            result: r.result,
            owner: r.owner,
            lease_epoch: r.lease_epoch,
            lease_expires_at: r.lease_expires_at,
            attempts: r.attempts,
            max_attempts: r.max_attempts,
            compensated_at: r.compensated_at,
            compensated_by: r.compensated_by,
            compensation_reason: r.compensation_reason,
            compensation_ref: r.compensation_ref,
            created_at: r.created_at,
            updated_at: r.updated_at,
            // The schema's CHECK admits only known reasons.
            dead_reason: r.dead_reason.and_then(|s| s.parse().ok()),
        }
    }
}

/// A run row plus the `state` its SQL twin decided.
#[derive(sqlx::FromRow)]
pub(crate) struct RunRow {
    id: i64,
    task_id: i64,
    worker: String,
    lease_epoch: i64,
    claimed_at: DateTime<Utc>,
    lease_expires_at: DateTime<Utc>,
    heartbeat_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
    output: Option<String>,
    error: Option<String>,
    error_detail: Option<String>,
    completion_rows: Option<i32>,
    trace_id: Option<String>,
    state: String,
    /// `queries::RECLAIM_REASON_SQL`, where the query selects it.
    #[sqlx(default)]
    reclaim_reason: Option<String>,
}

impl From<RunRow> for Run {
    fn from(r: RunRow) -> Self {
        // The SQL twin only emits known states; an unknown one would be a bug in this crate, and
        // `running` is the least alarming wrong answer while the conformance suite catches it.
        let state = r.state.parse::<RunState>().unwrap_or(RunState::Running);
        let cause = cause_of(state, r.error.as_deref());
        Run {
            id: r.id,
            task_id: r.task_id,
            worker: r.worker,
            lease_epoch: r.lease_epoch,
            claimed_at: r.claimed_at,
            lease_expires_at: r.lease_expires_at,
            heartbeat_at: r.heartbeat_at,
            finished_at: r.finished_at,
            output: r.output,
            error: r.error,
            error_detail: r.error_detail,
            completion_rows: r.completion_rows,
            trace_id: r.trace_id,
            state,
            cause,
            // The SQL twin only emits known reasons (the conformance suite checks).
            reclaim_reason: r.reclaim_reason.and_then(|s| s.parse().ok()),
        }
    }
}

/// A run row joined with the task facts a list row shows.
#[derive(sqlx::FromRow)]
pub(crate) struct RunListRow {
    #[sqlx(flatten)]
    run: RunRow,
    kind: String,
    #[sqlx(try_from = "String")]
    source: lastword_core::Source,
    #[sqlx(try_from = "String")]
    safety: lastword_core::Safety,
    text_truncated: bool,
}

impl From<RunListRow> for RunListItem {
    fn from(r: RunListRow) -> Self {
        RunListItem {
            run: r.run.into(),
            kind: r.kind,
            source: r.source,
            safety: r.safety,
            text_truncated: r.text_truncated,
        }
    }
}

/// The failure cause that goes with a state decided in SQL.
pub(crate) fn cause_of(state: RunState, error: Option<&str>) -> Option<Cause> {
    match state {
        RunState::Silent => Some(Cause::Silent),
        RunState::LostLease => Some(Cause::LostLease),
        RunState::EmptyOutput => Some(Cause::EmptyOutput),
        RunState::Failed => {
            Some(error.and_then(|e| e.parse::<ErrorCause>().ok()).unwrap_or(ErrorCause::Other).into())
        }
        RunState::Running | RunState::NoAction | RunState::Skip | RunState::Acted => None,
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct EffectRow {
    id: i64,
    run_id: i64,
    task_id: i64,
    lease_epoch: i64,
    kind: String,
    idempotency_key: String,
    created_at: DateTime<Utc>,
}

impl From<EffectRow> for Effect {
    fn from(r: EffectRow) -> Self {
        Effect {
            id: r.id,
            run_id: r.run_id,
            task_id: r.task_id,
            lease_epoch: r.lease_epoch,
            kind: r.kind,
            idempotency_key: r.idempotency_key,
            created_at: r.created_at,
        }
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct ActionRow {
    id: i64,
    task_id: i64,
    run_id: Option<i64>,
    #[sqlx(try_from = "String")]
    action: lastword_core::ActionKind,
    actor: String,
    reason: String,
    reference: Option<String>,
    epoch_seen: Option<i64>,
    epoch_after: Option<i64>,
    status_seen: Option<Vocab<lastword_core::TaskStatus>>,
    outcome: String,
    request_id: Option<String>,
    created_at: DateTime<Utc>,
    via: Option<String>,
    attention: Option<Vocab<lastword_core::AttentionKind>>,
}

impl From<ActionRow> for OperatorAction {
    fn from(r: ActionRow) -> Self {
        OperatorAction {
            id: r.id,
            task_id: r.task_id,
            run_id: r.run_id,
            action: r.action,
            actor: r.actor,
            reason: r.reason,
            reference: r.reference,
            epoch_seen: r.epoch_seen,
            epoch_after: r.epoch_after,
            status_seen: r.status_seen.map(Vocab::into_inner),
            outcome: r.outcome,
            request_id: r.request_id,
            created_at: r.created_at,
            via: r.via,
            attention: r.attention.map(Vocab::into_inner),
        }
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct TaskRefRow {
    id: i64,
    kind: String,
    #[sqlx(try_from = "String")]
    safety: lastword_core::Safety,
    #[sqlx(try_from = "String")]
    status: lastword_core::TaskStatus,
    owner: Option<String>,
    lease_epoch: i64,
    lease_expires_at: Option<DateTime<Utc>>,
    last_error: Option<String>,
}

impl From<TaskRefRow> for lastword_core::TaskRef {
    fn from(r: TaskRefRow) -> Self {
        lastword_core::TaskRef {
            id: r.id,
            kind: r.kind,
            safety: r.safety,
            status: r.status,
            owner: r.owner,
            lease_epoch: r.lease_epoch,
            lease_expires_at: r.lease_expires_at,
            // A cause outside the closed set is `other`, as a run's cause is.
            last_failure: r.last_error.map(|e| e.parse::<ErrorCause>().unwrap_or(ErrorCause::Other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Vocab;
    use lastword_core::TaskStatus;

    #[tokio::test]
    async fn a_nullable_vocabulary_column_reads_null_as_none_and_refuses_unknown_text() {
        let pool = sqlx::SqlitePool::connect("sqlite::memory:").await.unwrap();
        let read = |sql: &'static str| {
            let pool = pool.clone();
            async move {
                sqlx::query_scalar::<_, Option<Vocab<TaskStatus>>>(sql)
                    .fetch_one(&pool)
                    .await
                    .map(|v| v.map(Vocab::into_inner))
            }
        };
        assert_eq!(read("SELECT 'leased'").await.unwrap(), Some(TaskStatus::Leased));
        assert_eq!(read("SELECT NULL").await.unwrap(), None);
        let refused = read("SELECT 'borrowed'").await.unwrap_err().to_string();
        assert!(refused.contains("borrowed") && refused.contains("queued"), "{refused}");
    }
}
