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
//! The method bodies live in [`action_methods!`], expanded inside both backends' `Store` impls
//! (see `shared.rs`), so sqlx checks them against each driver.

/// Re-queue: back to `queued`, owner cleared, epoch + 1, a fresh attempt budget. `$1` task id,
/// `$2` the epoch checked under the lock, `$3` now.
pub(crate) const REQUEUE: &str =
    "UPDATE tasks SET status = 'queued', owner = NULL, lease_expires_at = NULL, \
     lease_epoch = lease_epoch + 1, attempts = 0, result = NULL, dead_reason = NULL, updated_at = $3 \
     WHERE id = $1 AND lease_epoch = $2";

/// `$1` task id, `$2` now, `$3` actor, `$4` reason, `$5` reference. `updated_at` is left
/// alone, here and in [`UNCOMPENSATE`]: it marks status and owner changes (docs/contract.md),
/// and the overview counts dead tasks by it, so bumping it would count a task that died last
/// week as newly dead the moment someone compensates it.
pub(crate) const COMPENSATE: &str = "UPDATE tasks SET compensated_at = $2, compensated_by = $3, \
     compensation_reason = $4, compensation_ref = $5 \
     WHERE id = $1 AND compensated_at IS NULL";

/// `$1` task id.
pub(crate) const UNCOMPENSATE: &str = "UPDATE tasks SET compensated_at = NULL, compensated_by = NULL, \
     compensation_reason = NULL, compensation_ref = NULL \
     WHERE id = $1 AND compensated_at IS NOT NULL";

/// The audit row, in the action's transaction: see [`insert_action!`] for the parameters.
pub(crate) const INSERT_ACTION: &str = "INSERT INTO operator_actions \
     (task_id, run_id, action, actor, via, reason, reference, epoch_seen, epoch_after, status_seen, outcome, \
      request_id, created_at, attention) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING id";

/// The audit row of an attempt refused before the store was asked (a viewer's 403), if the
/// task exists; the epoch and status are the task's as they are. `$1` task, `$2` action,
/// `$3` actor, `$4` via, `$5` reason, `$6` reference, `$7` epoch seen, `$8` outcome, `$9` now,
/// `$10` the acknowledged item, if any.
pub(crate) const INSERT_REFUSAL_OF_TASK: &str = "INSERT INTO operator_actions \
     (task_id, run_id, action, actor, via, reason, reference, epoch_seen, epoch_after, status_seen, outcome, \
      request_id, created_at, attention) \
     SELECT id, NULL, $2, $3, $4, $5, $6, $7, lease_epoch, status, $8, NULL, $9, $10 FROM tasks WHERE id = $1";

/// [`INSERT_ACTION`] with its fourteen parameters bound in order, named: one place for the
/// order, for applied actions and refusals alike. Evaluates to the query (fetch its id).
/// `attention` (an acknowledgement's item) may be left out: none.
macro_rules! insert_action {
    (@attention) => { None::<&str> };
    (@attention $attention:expr) => { $attention };
    (task: $task:expr, run: $run:expr, action: $action:expr, actor: $actor:expr, reason: $reason:expr,
     reference: $reference:expr, epoch_seen: $seen:expr, epoch_after: $after:expr, status_seen: $status:expr,
     outcome: $outcome:expr, request_id: $rid:expr, now: $now:expr $(, attention: $attention:expr)?) => {
        sqlx::query_scalar::<_, i64>($crate::actions::INSERT_ACTION)
            .bind($task)
            .bind($run)
            .bind($action)
            .bind(&$actor.name)
            .bind(&$actor.via)
            .bind($reason)
            .bind($reference)
            .bind($seen)
            .bind($after)
            .bind($status)
            .bind($outcome)
            .bind($rid)
            .bind($now)
            .bind($crate::actions::insert_action!(@attention $($attention)?))
    };
}
pub(crate) use insert_action;

/// The audit row of a single-task action refused inside its own transaction: what was asked,
/// the task as it was, `refused:<code>`, no request id (a refused attempt does not claim one).
macro_rules! insert_refusal {
    ($tx:ident, $refusal:expr, $run:expr, $task_id:expr, $kind:expr, $request:expr, $actor:expr, $task:expr, $now:expr) => {
        $crate::actions::insert_action!(
            task: $task_id, run: $run, action: $kind.as_str(), actor: $actor,
            reason: &$request.reason, reference: &$request.reference,
            epoch_seen: $request.expected_epoch, epoch_after: $task.lease_epoch,
            status_seen: &$task.status,
            outcome: lastword_core::action::refused_outcome($refusal.code.as_str()),
            request_id: None::<String>, now: $now,
            attention: $request.attention.map(|k| k.as_str())
        )
        .fetch_one(&mut *$tx)
        .await?
    };
}
pub(crate) use insert_refusal;

/// The run that held epoch `$2` of task `$1` (what a bulk re-queue's audit row points at).
pub(crate) const RUN_AT_EPOCH: &str = "SELECT id FROM runs WHERE task_id = $1 AND lease_epoch = $2";

/// The bulk rows of request id `r` are `r/<task id>`: every id in `[r/, r0)`, an index range
/// (a request id never contains `/`, and `0` is the character after it).
pub(crate) fn bulk_request_ids(request_id: &str) -> (String, String) {
    (format!("{request_id}/"), format!("{request_id}0"))
}

/// A second submission with a request id already used: the first answer if it was the same
/// action on the same task, else a refusal (the id belongs to something else).
pub(crate) fn replay(
    previous: lastword_core::OperatorAction,
    task: lastword_core::Task,
    kind: lastword_core::ActionKind,
) -> lastword_core::ActionOutcome {
    use lastword_core::{ActionOutcome, Refusal, RefusalCode};
    if previous.task_id == task.id && previous.action == kind.as_str() {
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
pub(crate) fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.is_unique_violation())
}

macro_rules! action_methods {
    ($store:ident) => {
        // An inherent impl: `#[async_trait]` does not see methods a macro expands inside the
        // trait impl, so the trait methods (in `impl_store!`) forward here.
        impl $store {
        #[tracing::instrument(skip(self, request), err)]
        pub(crate) async fn act_impl(
            &self,
            task_id: i64,
            kind: lastword_core::ActionKind,
            request: &lastword_core::ActionRequest,
            actor: &lastword_core::Actor,
            now: chrono::DateTime<chrono::Utc>,
        ) -> Result<Option<lastword_core::ActionOutcome>, $crate::StoreError> {
            use lastword_core::{ActionKind, ActionOutcome, OperatorAction, Refusal, RefusalCode, Run, Task};
            let d = &dialect::DIALECT;
            let mut tx = self.pool.begin_with(d.begin_write).await?;
            let sql = format!("SELECT {} FROM tasks WHERE id = $1{}", $crate::rows::TASK_COLUMNS, d.for_update);
            let Some(task) =
                sqlx::query_as::<_, $crate::rows::TaskRow>(&sql).bind(task_id).fetch_optional(&mut *tx).await?
            else {
                return Ok(None);
            };
            let task: Task = task.into();
            // Under the lock: a double submission whose first copy committed is found here.
            if let Some(rid) = &request.request_id {
                let sql =
                    format!("SELECT {} FROM operator_actions WHERE request_id = $1", $crate::rows::ACTION_COLUMNS);
                let previous: Option<$crate::rows::ActionRow> =
                    sqlx::query_as(&sql).bind(rid).fetch_optional(&mut *tx).await?;
                if let Some(previous) = previous {
                    let outcome = $crate::actions::replay(previous.into(), task.clone(), kind);
                    if let ActionOutcome::Refused(refusal) = &outcome {
                        $crate::actions::insert_refusal!(tx, refusal, None::<i64>, task_id, kind, request, actor, task, now);
                        tx.commit().await?;
                    }
                    return Ok(Some(outcome));
                }
            }
            let sql = format!(
                "SELECT {}, {} AS state FROM runs r WHERE r.task_id = $4 ORDER BY r.lease_epoch, r.id",
                $crate::rows::RUN_COLUMNS,
                dialect::STATE_SQL
            );
            let query = sqlx::query_as::<_, $crate::rows::RunRow>(&sql);
            let runs: Vec<Run> = $crate::shared::bind_state_params!(query, now, self.tokens)
                .bind(task_id)
                .fetch_all(&mut *tx)
                .await?
                .into_iter()
                .map(Into::into)
                .collect();
            let sql = format!(
                "SELECT {} FROM effects WHERE task_id = $1 ORDER BY created_at, id",
                $crate::rows::EFFECT_COLUMNS
            );
            let effects: Vec<lastword_core::Effect> =
                sqlx::query_as::<_, $crate::rows::EffectRow>(&sql)
                    .bind(task_id)
                    .fetch_all(&mut *tx)
                    .await?
                    .into_iter()
                    .map(Into::into)
                    .collect();
            // The newest *applied* change explains one; refused attempts and acknowledgements
            // changed nothing.
            let sql = format!(
                "SELECT {} FROM operator_actions WHERE task_id = $1 AND outcome = '{}' \
                   AND action <> 'acknowledge' ORDER BY created_at DESC, id DESC LIMIT 1",
                $crate::rows::ACTION_COLUMNS,
                lastword_core::action::APPLIED
            );
            let latest_action: Option<OperatorAction> = sqlx::query_as::<_, $crate::rows::ActionRow>(&sql)
                .bind(task_id)
                .fetch_optional(&mut *tx)
                .await?
                .map(Into::into);

            let attention = lastword_core::attention::items(&task, &runs, &effects, &self.tokens);
            let decision = lastword_core::action::Decision {
                kind,
                request,
                task: &task,
                now,
                compensable: lastword_core::action::compensable(&runs, &effects, &self.tokens),
                latest_run: runs.last(),
                latest_action: latest_action.as_ref(),
                retry: &self.retry,
                attention: &attention,
            };
            if let Err(refusal) = decision.check() {
                // Recorded, in this transaction, as what was tried and why it was refused.
                $crate::actions::insert_refusal!(tx, refusal, runs.last().map(|r| r.id), task_id, kind, request, actor, task, now);
                tx.commit().await?;
                return Ok(Some(ActionOutcome::Refused(refusal)));
            }

            let changed = match kind {
                ActionKind::Requeue => {
                    sqlx::query($crate::actions::REQUEUE)
                        .bind(task_id)
                        .bind(task.lease_epoch)
                        .bind(now)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected()
                }
                ActionKind::Compensate => {
                    sqlx::query($crate::actions::COMPENSATE)
                        .bind(task_id)
                        .bind(now)
                        .bind(&actor.name)
                        .bind(&request.reason)
                        .bind(&request.reference)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected()
                }
                ActionKind::Uncompensate => {
                    sqlx::query($crate::actions::UNCOMPENSATE).bind(task_id).execute(&mut *tx).await?.rows_affected()
                }
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
            let inserted: Result<i64, sqlx::Error> = $crate::actions::insert_action!(
                task: task_id, run: run_id, action: kind.as_str(), actor: actor,
                reason: &request.reason, reference: &request.reference,
                epoch_seen: request.expected_epoch, epoch_after: epoch_after, status_seen: &task.status,
                outcome: lastword_core::action::APPLIED, request_id: &request.request_id, now: now,
                attention: request.attention.map(|k| k.as_str())
            )
            .fetch_one(&mut *tx)
            .await;
            let action_id = match inserted {
                Ok(id) => id,
                Err(e) if $crate::actions::is_unique_violation(&e) => {
                    // Another transaction committed the same request id meanwhile (on another
                    // task: this one is locked). Roll back and say so.
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
            let sql = format!("SELECT {} FROM tasks WHERE id = $1", $crate::rows::TASK_COLUMNS);
            let after: Task =
                sqlx::query_as::<_, $crate::rows::TaskRow>(&sql).bind(task_id).fetch_one(&mut *tx).await?.into();
            let sql = format!("SELECT {} FROM operator_actions WHERE id = $1", $crate::rows::ACTION_COLUMNS);
            let action: OperatorAction =
                sqlx::query_as::<_, $crate::rows::ActionRow>(&sql).bind(action_id).fetch_one(&mut *tx).await?.into();
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

        #[tracing::instrument(skip(self), err)]
        pub(crate) async fn requeue_preview_impl(
            &self,
            selection: &lastword_core::BulkSelection,
            options: lastword_core::BulkOptions,
            now: chrono::DateTime<chrono::Utc>,
        ) -> Result<lastword_core::BulkPreview, $crate::StoreError> {
            let buf = $crate::queries::bulk_selection(&dialect::DIALECT, selection, now, &self.tokens, false);
            let query = sqlx::query_as::<_, $crate::rows::TaskRefRow>(&buf.sql);
            let rows = $crate::queries::bind_values!(query, &buf.args).fetch_all(&self.pool).await?;
            let refs = rows.into_iter().map(Into::into).collect();
            Ok(lastword_core::action::classify(refs, selection, options, &self.retry, now))
        }

        #[tracing::instrument(skip(self, request), err)]
        pub(crate) async fn bulk_requeue_impl(
            &self,
            selection: &lastword_core::BulkSelection,
            request: &lastword_core::BulkRequeueRequest,
            actor: &lastword_core::Actor,
            now: chrono::DateTime<chrono::Utc>,
        ) -> Result<lastword_core::BulkOutcome, $crate::StoreError> {
            use lastword_core::{BulkOutcome, OperatorAction, RefusalCode};
            let d = &dialect::DIALECT;
            let mut tx = self.pool.begin_with(d.begin_write).await?;
            // Read without row locks: the tasks it skips (completed, queued, held by a live
            // lease) are never locked, so their workers' heartbeats do not wait on us. Each
            // re-queue below is guarded by the epoch read here and takes its row's lock itself;
            // a task claimed in between matches zero rows and the whole action rolls back.
            let buf = $crate::queries::bulk_selection(d, selection, now, &self.tokens, false);
            let query = sqlx::query_as::<_, $crate::rows::TaskRefRow>(&buf.sql);
            let rows = $crate::queries::bind_values!(query, &buf.args).fetch_all(&mut *tx).await?;
            let refs = rows.into_iter().map(Into::into).collect();
            let preview = lastword_core::action::classify(refs, selection, request.options(), &self.retry, now);
            if let Some(rid) = &request.request_id {
                let (from, to) = $crate::actions::bulk_request_ids(rid);
                let sql = format!(
                    "SELECT {} FROM operator_actions WHERE request_id >= $1 AND request_id < $2 ORDER BY id",
                    $crate::rows::ACTION_COLUMNS
                );
                let previous: Vec<OperatorAction> = sqlx::query_as::<_, $crate::rows::ActionRow>(&sql)
                    .bind(from)
                    .bind(to)
                    .fetch_all(&mut *tx)
                    .await?
                    .into_iter()
                    .map(Into::into)
                    .collect();
                if !previous.is_empty() {
                    return Ok(BulkOutcome::Replayed { actions: previous });
                }
            }
            if preview.too_many {
                return Ok(BulkOutcome::Refused {
                    code: RefusalCode::TooMany,
                    message: format!(
                        "the filter selects more than {} tasks; narrow it (a time window, a cause, a worker)",
                        lastword_core::action::BULK_MAX
                    ),
                    preview: Some(preview),
                });
            }
            let count = preview.tasks.len() as i64;
            let count_changed = request.expected_count.is_some_and(|n| n != count);
            let refusal = if count_changed || request.preview_token.as_deref() != Some(preview.token.as_str()) {
                Some((
                    RefusalCode::PreviewChanged,
                    format!(
                        "the tasks this selects changed since your preview (it would now re-queue {}); nothing was done — review the new preview",
                        lastword_core::action::count_tasks(count),
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
            };
            if let Some((code, message)) = refusal {
                // On the record for each task it would have re-queued (at most BULK_MAX): who
                // tried, and why nothing happened. No epoch seen: the operator saw a token.
                let outcome = lastword_core::action::refused_outcome(code.as_str());
                for task in &preview.tasks {
                    $crate::actions::insert_action!(
                        task: task.id, run: None::<i64>, action: lastword_core::ActionKind::Requeue.as_str(),
                        actor: actor, reason: &request.reason, reference: None::<String>,
                        epoch_seen: None::<i64>, epoch_after: task.lease_epoch, status_seen: &task.status,
                        outcome: &outcome, request_id: None::<String>, now: now
                    )
                    .fetch_one(&mut *tx)
                    .await?;
                }
                tx.commit().await?;
                return Ok(BulkOutcome::Refused { code, message, preview: Some(preview) });
            }
            let mut actions = Vec::with_capacity(preview.tasks.len());
            for task in &preview.tasks {
                let changed = sqlx::query($crate::actions::REQUEUE)
                    .bind(task.id)
                    .bind(task.lease_epoch)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if changed != 1 {
                    return Ok(BulkOutcome::Refused {
                        code: RefusalCode::Changed,
                        message: format!("task {} changed while the re-queue was applied; nothing was done", task.id),
                        preview: None,
                    });
                }
                let run_id: Option<i64> = sqlx::query_scalar($crate::actions::RUN_AT_EPOCH)
                    .bind(task.id)
                    .bind(task.lease_epoch)
                    .fetch_optional(&mut *tx)
                    .await?;
                let request_id = request.request_id.as_ref().map(|rid| format!("{rid}/{}", task.id));
                let id: i64 = $crate::actions::insert_action!(
                    task: task.id, run: run_id, action: lastword_core::ActionKind::Requeue.as_str(),
                    actor: actor, reason: &request.reason, reference: None::<String>,
                    epoch_seen: task.lease_epoch, epoch_after: task.lease_epoch + 1, status_seen: &task.status,
                    outcome: lastword_core::action::APPLIED, request_id: request_id, now: now
                )
                .fetch_one(&mut *tx)
                .await?;
                actions.push(id);
            }
            let mut applied = Vec::with_capacity(actions.len());
            let sql = format!("SELECT {} FROM operator_actions WHERE id = $1", $crate::rows::ACTION_COLUMNS);
            for id in actions {
                let row: $crate::rows::ActionRow = sqlx::query_as(&sql).bind(id).fetch_one(&mut *tx).await?;
                applied.push(row.into());
            }
            tx.commit().await?;
            tracing::info!(tasks = applied.len(), actor = %actor.name, via = %actor.via, "bulk re-queue applied");
            Ok(BulkOutcome::Applied { actions: applied })
        }

        #[tracing::instrument(skip(self, request), err)]
        pub(crate) async fn record_refusal_impl(
            &self,
            task_id: i64,
            kind: lastword_core::ActionKind,
            request: &lastword_core::ActionRequest,
            actor: &lastword_core::Actor,
            code: &str,
            now: chrono::DateTime<chrono::Utc>,
        ) -> Result<bool, $crate::StoreError> {
            let written = sqlx::query($crate::actions::INSERT_REFUSAL_OF_TASK)
                .bind(task_id)
                .bind(kind.as_str())
                .bind(&actor.name)
                .bind(&actor.via)
                .bind(&request.reason)
                .bind(&request.reference)
                .bind(request.expected_epoch)
                .bind(lastword_core::action::refused_outcome(code))
                .bind(now)
                .bind(request.attention.map(|k| k.as_str()))
                .execute(&self.pool)
                .await?
                .rows_affected();
            Ok(written == 1)
        }

        #[tracing::instrument(skip(self), err)]
        pub(crate) async fn audit_impl(
            &self,
            filter: &lastword_core::AuditFilter,
            page: &lastword_core::PageRequest,
        ) -> Result<lastword_core::AuditPage, $crate::StoreError> {
            let buf = $crate::queries::audit(filter, page);
            let query = sqlx::query_as::<_, $crate::rows::ActionRow>(&buf.sql);
            let rows = $crate::queries::bind_values!(query, &buf.args).fetch_all(&self.pool).await?;
            let mut actions: Vec<lastword_core::OperatorAction> = rows.into_iter().map(Into::into).collect();
            let limit = page.limit.max(1) as usize;
            let next = if actions.len() > limit {
                actions.truncate(limit);
                actions.last().map(|a| lastword_core::Cursor { claimed_at: a.created_at, id: a.id }.encode())
            } else {
                None
            };
            Ok(lastword_core::AuditPage { actions, next })
        }
        }
    };
}
pub(crate) use action_methods;
