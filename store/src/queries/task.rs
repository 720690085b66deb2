//! The statements about one task: what its page reads (the task, its runs, effects and audit
//! trail) and what an operator action writes (the re-queue, the compensation marks, the audit
//! row). The task page and the actions read the same rows with the same texts, so an action
//! decides on exactly what the page showed.

use super::{Dialect, SqlBuf, Value, RECLAIM_REASON_SQL};
use crate::rows::{ACTION_COLUMNS, EFFECT_COLUMNS, RUN_COLUMNS, TASK_COLUMNS};
use chrono::{DateTime, Utc};
use lastword_core::{ActionKind, ActionRequest, Actor, Tokens};

/// One task by id. `lock`: with the dialect's row lock, inside an action's transaction.
pub(crate) fn task_by_id(d: &Dialect, id: i64, lock: bool) -> SqlBuf {
    let lock = if lock { d.for_update } else { "" };
    SqlBuf::statement(format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = $1{lock}")).bind(id)
}

/// One run by id, its state decided as of `now`.
pub(crate) fn run_by_id(d: &Dialect, id: i64, now: DateTime<Utc>, tokens: &Tokens) -> SqlBuf {
    let mut buf = SqlBuf::with_state_params(now, tokens);
    let id = buf.arg(Value::I64(id));
    buf.push(&format!(
        "SELECT {RUN_COLUMNS}, {} AS state, {RECLAIM_REASON_SQL} AS reclaim_reason FROM runs r WHERE r.id = {id}",
        d.state_sql
    ));
    buf
}

/// A task's runs, oldest claim first, states decided as of `now`.
pub(crate) fn task_runs(d: &Dialect, task_id: i64, now: DateTime<Utc>, tokens: &Tokens) -> SqlBuf {
    let mut buf = SqlBuf::with_state_params(now, tokens);
    let id = buf.arg(Value::I64(task_id));
    buf.push(&format!(
        "SELECT {RUN_COLUMNS}, {} AS state, {RECLAIM_REASON_SQL} AS reclaim_reason FROM runs r \
         WHERE r.task_id = {id} ORDER BY r.lease_epoch, r.id",
        d.state_sql
    ));
    buf
}

/// A task's effects, oldest first.
pub(crate) fn task_effects(task_id: i64) -> SqlBuf {
    SqlBuf::statement(format!(
        "SELECT {EFFECT_COLUMNS} FROM effects WHERE task_id = $1 ORDER BY created_at, id"
    ))
    .bind(task_id)
}

/// A task's audit trail, newest first.
pub(crate) fn task_actions(task_id: i64) -> SqlBuf {
    SqlBuf::statement(format!(
        "SELECT {ACTION_COLUMNS} FROM operator_actions WHERE task_id = $1 ORDER BY created_at DESC, id DESC"
    ))
    .bind(task_id)
}

/// The newest action that *applied* a change to the task (what explains its current state);
/// refused attempts and acknowledgements changed nothing.
pub(crate) fn latest_applied_action(task_id: i64) -> SqlBuf {
    SqlBuf::statement(format!(
        "SELECT {ACTION_COLUMNS} FROM operator_actions WHERE task_id = $1 AND outcome = '{}' \
         AND action <> 'acknowledge' ORDER BY created_at DESC, id DESC LIMIT 1",
        lastword_core::action::APPLIED
    ))
    .bind(task_id)
}

/// The audit row of an action by its id.
pub(crate) fn action_by_id(id: i64) -> SqlBuf {
    SqlBuf::statement(format!("SELECT {ACTION_COLUMNS} FROM operator_actions WHERE id = $1")).bind(id)
}

/// The audit row that used a request id, if any (a double submission finds its first copy).
pub(crate) fn action_by_request_id(request_id: &str) -> SqlBuf {
    SqlBuf::statement(format!("SELECT {ACTION_COLUMNS} FROM operator_actions WHERE request_id = $1"))
        .bind(request_id)
}

/// The audit rows of a bulk request: its rows' request ids are `r/<task id>`, so every id in
/// `[r/, r0)` is one of them, an index range (a request id never contains `/`, and `0` is the
/// character after it).
pub(crate) fn actions_of_bulk_request(request_id: &str) -> SqlBuf {
    SqlBuf::statement(format!(
        "SELECT {ACTION_COLUMNS} FROM operator_actions WHERE request_id >= $1 AND request_id < $2 ORDER BY id"
    ))
    .bind(format!("{request_id}/").as_str())
    .bind(format!("{request_id}0").as_str())
}

/// The request id of one task's row in a bulk request (see [`actions_of_bulk_request`]).
pub(crate) fn bulk_request_id(request_id: &str, task_id: i64) -> String {
    format!("{request_id}/{task_id}")
}

/// The run that held a task's lease at `epoch` (what a bulk re-queue's audit row points at).
pub(crate) fn run_at_epoch(task_id: i64, epoch: i64) -> SqlBuf {
    SqlBuf::statement("SELECT id FROM runs WHERE task_id = $1 AND lease_epoch = $2").bind(task_id).bind(epoch)
}

/// Re-queue: back to `queued`, owner cleared, epoch + 1, a fresh attempt budget — only if the
/// epoch is still the one checked under the lock (else it matches zero rows).
pub(crate) fn requeue(task_id: i64, epoch_seen: i64, now: DateTime<Utc>) -> SqlBuf {
    SqlBuf::statement(
        "UPDATE tasks SET status = 'queued', owner = NULL, lease_expires_at = NULL, \
         lease_epoch = lease_epoch + 1, attempts = 0, result = NULL, dead_reason = NULL, updated_at = $3 \
         WHERE id = $1 AND lease_epoch = $2",
    )
    .bind(task_id)
    .bind(epoch_seen)
    .bind(now)
}

/// Marks the task compensated. `updated_at` is left alone, here and in [`uncompensate`]: it
/// marks status and owner changes (docs/contract.md), and the overview counts dead tasks by it,
/// so bumping it would count a task that died last week as newly dead the moment someone
/// compensates it.
pub(crate) fn compensate(
    task_id: i64,
    now: DateTime<Utc>,
    actor: &str,
    reason: &str,
    reference: Option<&str>,
) -> SqlBuf {
    SqlBuf::statement(
        "UPDATE tasks SET compensated_at = $2, compensated_by = $3, compensation_reason = $4, \
         compensation_ref = $5 WHERE id = $1 AND compensated_at IS NULL",
    )
    .bind(task_id)
    .bind(now)
    .bind(actor)
    .bind(reason)
    .bind(reference)
}

/// Clears the compensation marks (an undo).
pub(crate) fn uncompensate(task_id: i64) -> SqlBuf {
    SqlBuf::statement(
        "UPDATE tasks SET compensated_at = NULL, compensated_by = NULL, compensation_reason = NULL, \
         compensation_ref = NULL WHERE id = $1 AND compensated_at IS NOT NULL",
    )
    .bind(task_id)
}

/// One `operator_actions` row, every column named: applied actions and refusals alike, so the
/// order of the columns is written once.
pub(crate) struct AuditRow<'a> {
    pub task: i64,
    pub run: Option<i64>,
    pub action: &'a str,
    pub actor: &'a Actor,
    pub reason: &'a str,
    pub reference: Option<&'a str>,
    /// The epoch the operator saw (none when they confirmed a bulk preview's token instead).
    pub epoch_seen: Option<i64>,
    pub epoch_after: i64,
    pub status_seen: &'a str,
    /// `applied` or `refused:<code>`.
    pub outcome: &'a str,
    pub request_id: Option<&'a str>,
    pub now: DateTime<Utc>,
    /// The acknowledged attention item, for an acknowledgement.
    pub attention: Option<&'a str>,
}

impl AuditRow<'_> {
    /// The insert, returning the row's id.
    pub(crate) fn insert(&self) -> SqlBuf {
        SqlBuf::statement(
            "INSERT INTO operator_actions \
             (task_id, run_id, action, actor, via, reason, reference, epoch_seen, epoch_after, status_seen, \
              outcome, request_id, created_at, attention) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING id",
        )
        .bind(self.task)
        .bind(self.run)
        .bind(self.action)
        .bind(&self.actor.name)
        .bind(&self.actor.via)
        .bind(self.reason)
        .bind(self.reference)
        .bind(self.epoch_seen)
        .bind(self.epoch_after)
        .bind(self.status_seen)
        .bind(self.outcome)
        .bind(self.request_id)
        .bind(self.now)
        .bind(self.attention)
    }
}

/// The audit row of an attempt refused before the store was asked (a viewer's 403), written
/// only if the task exists, with the task's epoch and status as they are.
pub(crate) fn refusal_of_task(
    task_id: i64,
    kind: ActionKind,
    request: &ActionRequest,
    actor: &Actor,
    outcome: &str,
    now: DateTime<Utc>,
) -> SqlBuf {
    SqlBuf::statement(
        "INSERT INTO operator_actions \
         (task_id, run_id, action, actor, via, reason, reference, epoch_seen, epoch_after, status_seen, outcome, \
          request_id, created_at, attention) \
         SELECT id, NULL, $2, $3, $4, $5, $6, $7, lease_epoch, status, $8, NULL, $9, $10 FROM tasks WHERE id = $1",
    )
    .bind(task_id)
    .bind(kind.as_str())
    .bind(&actor.name)
    .bind(&actor.via)
    .bind(&request.reason)
    .bind(request.reference.as_deref())
    .bind(request.expected_epoch)
    .bind(outcome)
    .bind(now)
    .bind(request.attention.map(|k| k.as_str()))
}
