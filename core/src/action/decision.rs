//! Whether an action applies to the task as it is now, and if not, why in words: the checks
//! made inside the action's transaction, the refusal codes, and the sentences that say what
//! changed since the operator looked.

use super::*;
use crate::model::{Effect, OperatorAction, Run, Task, TaskStatus};
use crate::state::{ErrorCause, RunState, Tokens};
use crate::views::double_execution;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

string_enum!(
    /// Why an action was not applied. Every refusal changes nothing.
    RefusalCode, "code" {
        /// The task's epoch or status is not what the operator saw.
        Changed => "changed",
        /// A worker holds a live lease and the operator did not choose to fence it.
        LeaseLive => "lease_live",
        /// Re-queue of a task that is already queued.
        AlreadyQueued => "already_queued",
        /// Compensation of a task with no double execution and no lost-lease effect.
        NothingToCompensate => "nothing_to_compensate",
        AlreadyCompensated => "already_compensated",
        NotCompensated => "not_compensated",
        /// The request id was already used for a different action or task.
        RequestIdReused => "request_id_reused",
        /// Bulk: the set of tasks the filter selects is not the one previewed.
        PreviewChanged => "preview_changed",
        /// Bulk: the filter selects more than [`BULK_MAX`] tasks.
        TooMany => "too_many",
        /// Bulk: the set has unsafe tasks and the operator did not acknowledge that their effects
        /// may run again.
        UnsafeNotAcknowledged => "unsafe_not_acknowledged",
        /// Re-queue of a task whose last run failed with a deterministic cause ([`RetryPolicy`])
        /// without `retry_deterministic`: it would fail the same way.
        DeterministicFailure => "deterministic_failure",
        /// Acknowledgement of an item the task does not have (any more).
        NotAnAttentionItem => "not_an_attention_item",
    }
);

/// A refused action: what is wrong, in words an operator can act on, and the task as it is now
/// so the page can show it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Refusal {
    pub code: RefusalCode,
    pub message: String,
    pub task: Option<Task>,
}

/// The answer to one action.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ActionOutcome {
    /// Done now, in one transaction with its audit row.
    Applied {
        task: Task,
        action: OperatorAction,
    },
    /// The same request id was applied before: nothing was done again.
    Replayed {
        task: Task,
        action: OperatorAction,
    },
    Refused(Refusal),
}

/// Held by a worker whose lease has not expired: re-queueing it would fence a worker that may
/// be making progress.
pub fn lease_live(
    status: TaskStatus,
    owner: Option<&str>,
    expires: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> bool {
    status == TaskStatus::Leased && owner.is_some() && expires.is_some_and(|t| t > now)
}

/// Whether there is a duplicate effect to compensate: the task executed twice, or a run lost
/// its lease after recording an effect (the effect ran under a lease that was no longer its).
pub fn compensable(runs: &[Run], effects: &[Effect], tokens: &Tokens) -> bool {
    double_execution(runs, effects, tokens) || lost_lease_effect(runs, effects)
}

/// A run lost its lease after recording an effect under it.
pub fn lost_lease_effect(runs: &[Run], effects: &[Effect]) -> bool {
    runs.iter()
        .any(|r| r.state == RunState::LostLease && effects.iter().any(|e| e.lease_epoch == r.lease_epoch))
}

/// Why a re-queue of a task whose last run failed with `cause` would not help, and how to
/// insist (the page, the API and the CLI say the same).
pub fn doomed_retry_message(task_id: i64, cause: ErrorCause) -> String {
    format!(
        "task {task_id}'s last run failed with {}, which fails the same way when the task runs again unchanged. Fix what caused it first (a smaller input, a larger context), then re-queue with retry_deterministic (the page's \"the cause is fixed\" box, the CLI's --retry-deterministic).",
        cause.as_str()
    )
}

/// `2026-11-30 03:12:05 UTC`.
pub fn fmt_time(t: DateTime<Utc>) -> String {
    format!("{} UTC", crate::time_text::date_hms(&t))
}

/// What changed between what the operator saw (`epoch_seen`, `status_seen`) and `current`, in
/// one sentence: "re-claimed by worker-7 at 2026-11-30 03:12:05 UTC, epoch 5 → 6".
/// `latest_run` is the task's newest run, `latest_action` its newest audit entry.
pub fn explain_change(
    epoch_seen: i64,
    status_seen: Option<&str>,
    current: &Task,
    latest_run: Option<&Run>,
    latest_action: Option<&OperatorAction>,
) -> String {
    let epochs = format!("epoch {epoch_seen} → {}", current.lease_epoch);
    if current.lease_epoch != epoch_seen {
        let by_operator = latest_action
            .filter(|a| a.action == ActionKind::Requeue && a.epoch_after == Some(current.lease_epoch));
        let claimed = latest_run.filter(|r| r.lease_epoch == current.lease_epoch);
        let what = match (by_operator, claimed) {
            (Some(a), _) => format!("re-queued by {} at {}", a.actor, fmt_time(a.created_at)),
            (None, Some(r)) => format!("re-claimed by {} at {}", r.worker, fmt_time(r.claimed_at)),
            (None, None) => "changed".to_string(),
        };
        return format!("{what}, {epochs}; it is {} now", describe_status(current));
    }
    match status_seen {
        Some(seen) if seen != current.status.as_str() => {
            format!("status {seen} → {} (epoch {epoch_seen} unchanged)", describe_status(current))
        }
        _ => format!("it is {} now", describe_status(current)),
    }
}

/// `leased by worker-3 until 03:14:05 UTC`, `dead after 3 attempts`, `queued`, …
pub fn describe_status(task: &Task) -> String {
    match (task.status, task.owner.as_deref(), task.lease_expires_at) {
        (TaskStatus::Leased, Some(owner), Some(until)) => {
            format!("leased by {owner} until {}", fmt_time(until))
        }
        (TaskStatus::Leased, Some(owner), None) => format!("leased by {owner}"),
        (TaskStatus::Dead, _, _) => format!("dead after {} attempts", task.attempts),
        (status, _, _) => status.to_string(),
    }
}

/// The confirmation's list of exactly what a re-queue changes, from the task as the operator
/// sees it: "status leased → queued", "owner worker-3 cleared (fenced)", "epoch 5 → 6", …
pub fn requeue_changes(task: &Task) -> Vec<String> {
    let mut changes = Vec::new();
    if task.status != TaskStatus::Queued {
        changes.push(format!("status {} → queued", task.status));
    }
    if let Some(owner) = &task.owner {
        changes.push(format!("owner {owner} cleared: its heartbeat and final write will be rejected"));
    }
    changes.push(format!(
        "lease epoch {} → {} (fences every earlier lease)",
        task.lease_epoch,
        task.lease_epoch + 1
    ));
    if task.attempts != 0 {
        changes.push(format!("attempts {} → 0 (a fresh budget of {})", task.attempts, task.max_attempts));
    }
    changes
}

/// The checks an action must pass against the task as it is inside the action's transaction
/// (locked). `Ok(())`: apply it. The explanation of a change needs the newest run and audit
/// entry, which the store passes in.
pub struct Decision<'a> {
    pub kind: ActionKind,
    pub request: &'a ActionRequest,
    pub task: &'a Task,
    pub now: DateTime<Utc>,
    /// Whether the task has a duplicate effect to compensate ([`compensable`]).
    pub compensable: bool,
    pub latest_run: Option<&'a Run>,
    pub latest_action: Option<&'a OperatorAction>,
    /// Which failure causes a re-queue cannot fix.
    pub retry: &'a RetryPolicy,
    /// The task's open attention items ([`crate::attention::items`]).
    pub attention: &'a [crate::attention::AttentionKind],
}

impl Decision<'_> {
    /// A refusal carries the task (the page shows it); it is built once per refused action, so
    /// its size does not matter.
    #[allow(clippy::result_large_err)]
    pub fn check(&self) -> Result<(), Refusal> {
        let task = self.task;
        let refuse = |code, message: String| Err(Refusal { code, message, task: Some(task.clone()) });
        let changed_epoch = self.request.expected_epoch.is_some_and(|e| e != task.lease_epoch);
        let changed_status =
            self.request.expected_status.as_deref().is_some_and(|s| s != task.status.as_str());
        if changed_epoch || changed_status {
            let seen = self.request.expected_epoch.unwrap_or(task.lease_epoch);
            let what = explain_change(
                seen,
                self.request.expected_status.as_deref(),
                task,
                self.latest_run,
                self.latest_action,
            );
            return refuse(
                RefusalCode::Changed,
                format!(
                    "task {} changed since you looked: {what}. Nothing was done; review it and try again.",
                    task.id
                ),
            );
        }
        match self.kind {
            ActionKind::Requeue => {
                if task.status == TaskStatus::Queued {
                    return refuse(
                        RefusalCode::AlreadyQueued,
                        format!(
                            "task {} is already queued (epoch {}); a worker will claim it",
                            task.id, task.lease_epoch
                        ),
                    );
                }
                if lease_live(task.status, task.owner.as_deref(), task.lease_expires_at, self.now)
                    && !self.request.fence
                {
                    let owner = task.owner.as_deref().unwrap_or("a worker");
                    let until = task.lease_expires_at.map(fmt_time).unwrap_or_default();
                    return refuse(
                        RefusalCode::LeaseLive,
                        format!(
                            "{owner} holds a live lease on task {} until {until} (epoch {}). Re-queue with fence to take it: {owner}'s heartbeat and final write will then be rejected.",
                            task.id, task.lease_epoch
                        ),
                    );
                }
                if let Some(cause) = self.retry.doomed_by(self.latest_run) {
                    if !self.request.retry_deterministic {
                        return refuse(
                            RefusalCode::DeterministicFailure,
                            doomed_retry_message(task.id, cause),
                        );
                    }
                }
            }
            ActionKind::Compensate => {
                if let (Some(at), Some(by)) = (task.compensated_at, task.compensated_by.as_deref()) {
                    return refuse(
                        RefusalCode::AlreadyCompensated,
                        format!(
                            "task {} was already marked compensated by {by} at {}: {}",
                            task.id,
                            fmt_time(at),
                            task.compensation_reason.as_deref().unwrap_or("")
                        ),
                    );
                }
                if !self.compensable {
                    return refuse(
                        RefusalCode::NothingToCompensate,
                        format!(
                            "task {} shows no double execution and no effect recorded by a lost-lease run: nothing to compensate",
                            task.id
                        ),
                    );
                }
            }
            ActionKind::Uncompensate => {
                if task.compensated_at.is_none() {
                    return refuse(
                        RefusalCode::NotCompensated,
                        format!("task {} is not marked compensated", task.id),
                    );
                }
            }
            ActionKind::Acknowledge => {
                let wanted = self.request.attention;
                if !wanted.is_some_and(|k| self.attention.contains(&k)) {
                    let open: Vec<&str> = self.attention.iter().map(|k| k.as_str()).collect();
                    return refuse(
                        RefusalCode::NotAnAttentionItem,
                        format!(
                            "task {} is not {} now (open: {}); nothing to acknowledge",
                            task.id,
                            wanted.map(|k| k.label()).unwrap_or("that"),
                            if open.is_empty() { "none".to_string() } else { open.join(", ") }
                        ),
                    );
                }
            }
        }
        Ok(())
    }
}
