//! Operator actions in the database: re-queue, mark compensated, undo, and bulk re-queue, each
//! one transaction that locks the task rows it reads, checks them against what the operator saw
//! (`lastword_core::action::Decision`), writes the change with an epoch-guarded statement, and
//! writes its `operator_actions` row before committing. A refused action rolls back and changes
//! nothing.
//!
//! Why it cannot make things worse, even from a stale page or many operators at once:
//! - the task row is locked (`FOR UPDATE` on PostgreSQL, the database write lock that
//!   `BEGIN IMMEDIATE` takes on SQLite) before anything is checked, so concurrent actions on a
//!   task run one after another and each sees the last one's result;
//! - a re-queue bumps `lease_epoch`, so the worker that held the lease is fenced: its heartbeat
//!   and its final write (guarded by the old epoch) match zero rows;
//! - the request id is looked up under the same lock, so a double submission finds the first one
//!   and is answered with it (replayed) instead of applying twice.
//!
//! Plain functions over [`SqlStore`], on either database; their statements are in
//! `crate::queries::task`.

use crate::queries;
use crate::queries::task::{self as q, AuditRow};
use crate::rows::{ActionRow, EffectRow, RunRow, TaskRefRow, TaskRow};
use crate::{SqlStore, StoreError};
use chrono::{DateTime, Utc};
use lastword_core::action::{self, Decision, APPLIED};
use lastword_core::{
    ActionKind, ActionOutcome, ActionRequest, Actor, BulkOptions, BulkOutcome, BulkPreview,
    BulkRequeueRequest, BulkSelection, Effect, OperatorAction, Refusal, RefusalCode, Run, Task,
};

/// A second submission with a request id already used: the first answer if it was the same
/// action on the same task, else a refusal (the id belongs to something else).
fn replay(previous: OperatorAction, task: Task, kind: ActionKind) -> ActionOutcome {
    if previous.task_id == task.id && previous.action == kind {
        ActionOutcome::Replayed { task, action: previous }
    } else {
        ActionOutcome::Refused(Refusal {
            code: RefusalCode::RequestIdReused,
            message: format!(
                "request id {:?} was already used to {} task {}; send a new id for a new action",
                previous.request_id.as_deref().unwrap_or_default(),
                previous.action,
                previous.task_id
            ),
            task: Some(task),
        })
    }
}

/// A unique violation (the request id raced with another transaction's identical id).
fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.is_unique_violation())
}

/// The audit row of a single-task attempt as the operator asked it, against the task as it
/// was: a refusal as it stands (`refused:<code>`, no request id: a refused attempt does not
/// claim one); an applied action adds its epoch after and its request id.
fn attempt_row<'a>(
    task: &'a Task,
    run: Option<i64>,
    kind: ActionKind,
    request: &'a ActionRequest,
    actor: &'a Actor,
    outcome: &'a str,
    now: DateTime<Utc>,
) -> AuditRow<'a> {
    AuditRow {
        task: task.id,
        run,
        action: kind.as_str(),
        actor,
        reason: &request.reason,
        reference: request.reference.as_deref(),
        epoch_seen: request.expected_epoch,
        epoch_after: task.lease_epoch,
        status_seen: task.status.as_str(),
        outcome,
        request_id: None,
        now,
        attention: request.attention.map(|k| k.as_str()),
    }
}

/// One operator action on one task, in one transaction: `None` when there is no such task.
#[tracing::instrument(skip(store, request), err)]
pub(crate) async fn act(
    store: &SqlStore,
    task_id: i64,
    kind: ActionKind,
    request: &ActionRequest,
    actor: &Actor,
    now: DateTime<Utc>,
) -> Result<Option<ActionOutcome>, StoreError> {
    let d = store.dialect();
    let mut tx = store.db.begin(d.begin_write).await?;
    let Some(task) = tx.fetch_optional::<TaskRow>(&q::task_by_id(d, task_id, true)).await? else {
        return Ok(None);
    };
    let task: Task = task.into();
    // Under the lock: a double submission whose first copy committed is found here.
    if let Some(rid) = &request.request_id {
        if let Some(previous) = tx.fetch_optional::<ActionRow>(&q::action_by_request_id(rid)).await? {
            let outcome = replay(previous.into(), task.clone(), kind);
            if let ActionOutcome::Refused(refusal) = &outcome {
                let outcome = action::refused_outcome(refusal.code.as_str());
                tx.fetch_one::<(i64,)>(
                    &attempt_row(&task, None, kind, request, actor, &outcome, now).insert(),
                )
                .await?;
                tx.commit().await?;
            }
            return Ok(Some(outcome));
        }
    }
    let runs: Vec<RunRow> = tx.fetch_all(&q::task_runs(d, task_id, now, &store.tokens)).await?;
    let runs: Vec<Run> = runs.into_iter().map(Into::into).collect();
    let effects: Vec<EffectRow> = tx.fetch_all(&q::task_effects(task_id)).await?;
    let effects: Vec<Effect> = effects.into_iter().map(Into::into).collect();
    let latest_action: Option<OperatorAction> =
        tx.fetch_optional::<ActionRow>(&q::latest_applied_action(task_id)).await?.map(Into::into);

    let attention = lastword_core::attention::items(&task, &runs, &effects, &store.tokens);
    let decision = Decision {
        kind,
        request,
        task: &task,
        now,
        compensable: action::compensable(&runs, &effects, &store.tokens),
        latest_run: runs.last(),
        latest_action: latest_action.as_ref(),
        retry: &store.retry,
        attention: &attention,
    };
    if let Err(refusal) = decision.check() {
        // Recorded, in this transaction, as what was tried and why it was refused.
        let outcome = action::refused_outcome(refusal.code.as_str());
        let row = attempt_row(&task, runs.last().map(|r| r.id), kind, request, actor, &outcome, now);
        tx.fetch_one::<(i64,)>(&row.insert()).await?;
        tx.commit().await?;
        return Ok(Some(ActionOutcome::Refused(refusal)));
    }

    let changed = match kind {
        ActionKind::Requeue => tx.execute(&q::requeue(task_id, task.lease_epoch, now)).await?,
        ActionKind::Compensate => {
            tx.execute(&q::compensate(
                task_id,
                now,
                &actor.name,
                &request.reason,
                request.reference.as_deref(),
            ))
            .await?
        }
        ActionKind::Uncompensate => tx.execute(&q::uncompensate(task_id)).await?,
        // Changes nothing on the task: the audit row below is the acknowledgement.
        ActionKind::Acknowledge => 1,
    };
    if changed != 1 {
        // Cannot happen under the row lock; refuse rather than audit a change not made.
        return Ok(Some(ActionOutcome::Refused(Refusal {
            code: RefusalCode::Changed,
            message: format!("task {task_id} changed while the action was applied; nothing was done"),
            task: Some(task),
        })));
    }
    let epoch_after = if kind == ActionKind::Requeue { task.lease_epoch + 1 } else { task.lease_epoch };
    // The run the operator acted from, if it is this task's; else the run of the epoch seen.
    let run_id = request
        .run_id
        .filter(|id| runs.iter().any(|r| r.id == *id))
        .or_else(|| runs.iter().rev().find(|r| r.lease_epoch == task.lease_epoch).map(|r| r.id));
    let row = AuditRow {
        epoch_after,
        request_id: request.request_id.as_deref(),
        ..attempt_row(&task, run_id, kind, request, actor, APPLIED, now)
    };
    let action_id = match tx.fetch_one::<(i64,)>(&row.insert()).await {
        Ok((id,)) => id,
        Err(e) if is_unique_violation(&e) => {
            // Another transaction committed the same request id meanwhile (on another task:
            // this one is locked). Roll back and say so.
            drop(tx);
            return Ok(Some(ActionOutcome::Refused(Refusal {
                code: RefusalCode::RequestIdReused,
                message: format!(
                    "request id {:?} was used by another action at the same moment; nothing was done",
                    request.request_id.as_deref().unwrap_or_default()
                ),
                task: Some(task),
            })));
        }
        Err(e) => return Err(e.into()),
    };
    let after: Task = tx.fetch_one::<TaskRow>(&q::task_by_id(d, task_id, false)).await?.into();
    let action: OperatorAction = tx.fetch_one::<ActionRow>(&q::action_by_id(action_id)).await?.into();
    tx.commit().await?;
    tracing::info!(
        task = task_id,
        action = kind.as_str(),
        actor = %actor.name,
        via = %actor.via,
        epoch_seen = ?request.expected_epoch,
        epoch_after,
        "operator action applied"
    );
    Ok(Some(ActionOutcome::Applied { task: after, action }))
}

/// The tasks `selection` picks, classified as a bulk re-queue would treat them now.
pub(crate) fn classify(
    store: &SqlStore,
    rows: Vec<TaskRefRow>,
    selection: &BulkSelection,
    options: BulkOptions,
    now: DateTime<Utc>,
) -> BulkPreview {
    let refs = rows.into_iter().map(Into::into).collect();
    action::classify(refs, selection, options, &store.retry, now)
}

/// Why a confirmed bulk re-queue is refused before it changes anything, if it is.
fn bulk_refusal(preview: &BulkPreview, request: &BulkRequeueRequest) -> Option<(RefusalCode, String)> {
    let count = preview.tasks.len() as i64;
    let count_changed = request.expected_count.is_some_and(|n| n != count);
    if count_changed || request.preview_token.as_deref() != Some(preview.token.as_str()) {
        Some((
            RefusalCode::PreviewChanged,
            format!(
                "the tasks this selects changed since your preview (it would now re-queue {}); nothing was done — review the new preview",
                action::count_tasks(count),
            ),
        ))
    } else if preview.unsafe_count > 0 && !request.acknowledge_unsafe {
        Some((
            RefusalCode::UnsafeNotAcknowledged,
            format!(
                "{} of these tasks are unsafe: their effects may run again; confirm with acknowledge_unsafe",
                preview.unsafe_count
            ),
        ))
    } else {
        None
    }
}

#[tracing::instrument(skip(store, request), err)]
pub(crate) async fn bulk_requeue(
    store: &SqlStore,
    selection: &BulkSelection,
    request: &BulkRequeueRequest,
    actor: &Actor,
    now: DateTime<Utc>,
) -> Result<BulkOutcome, StoreError> {
    let d = store.dialect();
    let mut tx = store.db.begin(d.begin_write).await?;
    // Read without row locks: the tasks it skips (completed, queued, held by a live lease) are
    // never locked, so their workers' heartbeats do not wait on us. Each re-queue below is
    // guarded by the epoch read here and takes its row's lock itself; a task claimed in between
    // matches zero rows and the whole action rolls back.
    let rows: Vec<TaskRefRow> =
        tx.fetch_all(&queries::bulk_selection(d, selection, now, &store.tokens, false)).await?;
    let preview = classify(store, rows, selection, request.options(), now);
    if let Some(rid) = &request.request_id {
        let previous: Vec<ActionRow> = tx.fetch_all(&q::actions_of_bulk_request(rid)).await?;
        if !previous.is_empty() {
            return Ok(BulkOutcome::Replayed { actions: previous.into_iter().map(Into::into).collect() });
        }
    }
    if preview.too_many {
        return Ok(BulkOutcome::Refused {
            code: RefusalCode::TooMany,
            message: format!(
                "the filter selects more than {} tasks; narrow it (a time window, a cause, a worker)",
                action::BULK_MAX
            ),
            preview: Some(preview),
        });
    }
    if let Some((code, message)) = bulk_refusal(&preview, request) {
        // On the record for each task it would have re-queued (at most BULK_MAX): who tried,
        // and why nothing happened. No epoch seen: the operator saw a token.
        let outcome = action::refused_outcome(code.as_str());
        for task in &preview.tasks {
            let row = AuditRow {
                task: task.id,
                run: None,
                action: ActionKind::Requeue.as_str(),
                actor,
                reason: &request.reason,
                reference: None,
                epoch_seen: None,
                epoch_after: task.lease_epoch,
                status_seen: task.status.as_str(),
                outcome: &outcome,
                request_id: None,
                now,
                attention: None,
            };
            tx.fetch_one::<(i64,)>(&row.insert()).await?;
        }
        tx.commit().await?;
        return Ok(BulkOutcome::Refused { code, message, preview: Some(preview) });
    }
    let mut applied = Vec::with_capacity(preview.tasks.len());
    for task in &preview.tasks {
        if tx.execute(&q::requeue(task.id, task.lease_epoch, now)).await? != 1 {
            return Ok(BulkOutcome::Refused {
                code: RefusalCode::Changed,
                message: format!("task {} changed while the re-queue was applied; nothing was done", task.id),
                preview: None,
            });
        }
        let run: Option<(i64,)> = tx.fetch_optional(&q::run_at_epoch(task.id, task.lease_epoch)).await?;
        let request_id = request.request_id.as_deref().map(|rid| q::bulk_request_id(rid, task.id));
        let row = AuditRow {
            task: task.id,
            run: run.map(|(id,)| id),
            action: ActionKind::Requeue.as_str(),
            actor,
            reason: &request.reason,
            reference: None,
            epoch_seen: Some(task.lease_epoch),
            epoch_after: task.lease_epoch + 1,
            status_seen: task.status.as_str(),
            outcome: APPLIED,
            request_id: request_id.as_deref(),
            now,
            attention: None,
        };
        let (id,): (i64,) = tx.fetch_one(&row.insert()).await?;
        applied.push(id);
    }
    let mut actions = Vec::with_capacity(applied.len());
    for id in applied {
        actions.push(tx.fetch_one::<ActionRow>(&q::action_by_id(id)).await?.into());
    }
    tx.commit().await?;
    tracing::info!(tasks = actions.len(), actor = %actor.name, via = %actor.via, "bulk re-queue applied");
    Ok(BulkOutcome::Applied { actions })
}
