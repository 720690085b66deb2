//! Rows for tests, every field at a plain value, so a test names only what it is about:
//! `Run { state: RunState::Failed, ..fixtures::run(3, at) }`. Used by this crate's tests and
//! other crates' (the app's layout tests). Always compiled, not behind a feature: a feature
//! only the tests turn on would build `core` and everything above it twice (once for
//! `cargo test`, once for `cargo leptos build`); unused, it costs the binaries nothing.

use crate::model::{Effect, OperatorAction, Run, Task};
use crate::state::RunState;
use chrono::{DateTime, Utc};

/// Task `id` in `status`, created and last updated at `at`: an unsafe `reply` to a
/// notification, epoch 1, no lease, one of three attempts used, never compensated.
pub fn task(id: i64, status: &str, at: DateTime<Utc>) -> Task {
    Task {
        id,
        kind: "reply".into(),
        source: crate::model::Source::Notification,
        safety: crate::model::Safety::Unsafe,
        status: status.parse().expect("a task status"),
        payload: serde_json::json!({}),
        result: None,
        owner: None,
        lease_epoch: 1,
        lease_expires_at: None,
        attempts: 1,
        max_attempts: 3,
        compensated_at: None,
        compensated_by: None,
        compensation_reason: None,
        compensation_ref: None,
        created_at: at,
        updated_at: at,
        dead_reason: None,
    }
}

/// Run `id` of task 1 by worker `w{id}` under epoch `id`, claimed at `at` with a lease that
/// ends then; unfinished, never heard from, no output.
pub fn run(id: i64, at: DateTime<Utc>) -> Run {
    Run {
        id,
        task_id: 1,
        worker: format!("w{id}"),
        lease_epoch: id,
        claimed_at: at,
        lease_expires_at: at,
        heartbeat_at: None,
        finished_at: None,
        output: None,
        error: None,
        error_detail: None,
        completion_rows: None,
        trace_id: None,
        state: RunState::Running,
        cause: None,
        reclaim_reason: None,
    }
}

/// A `send` effect of run `run_id` (of task 1, under epoch `run_id`), recorded at `at`.
pub fn effect(run_id: i64, at: DateTime<Utc>) -> Effect {
    Effect {
        id: run_id,
        run_id,
        task_id: 1,
        lease_epoch: run_id,
        kind: "send".into(),
        idempotency_key: format!("k{run_id}"),
        created_at: at,
    }
}

/// An applied `action` by `actor` (signed in with a session) on task 1, from epoch `epoch` to
/// `epoch + 1` (re-queue) or at it (anything else), at `at`, with the reason "r".
pub fn action(id: i64, action: &str, actor: &str, epoch: i64, at: DateTime<Utc>) -> OperatorAction {
    let epoch_after = if action == "requeue" { epoch + 1 } else { epoch };
    OperatorAction {
        id,
        task_id: 1,
        run_id: None,
        action: action.parse().expect("an action kind"),
        actor: actor.into(),
        reason: "r".into(),
        reference: None,
        epoch_seen: Some(epoch),
        epoch_after: Some(epoch_after),
        status_seen: None,
        outcome: crate::action::APPLIED.into(),
        request_id: None,
        created_at: at,
        via: Some("session".into()),
        attention: None,
    }
}
