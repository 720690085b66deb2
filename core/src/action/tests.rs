use super::*;
use crate::model::{OperatorAction, Run, Task, TaskStatus};
use crate::state::{ErrorCause, RunState};
use chrono::TimeZone;
use chrono::{DateTime, Utc};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 3, 12, 5).unwrap()
}

fn task(status: &str, owner: Option<&str>, epoch: i64) -> Task {
    Task {
        owner: owner.map(str::to_string),
        lease_epoch: epoch,
        lease_expires_at: owner.map(|_| t0() + chrono::Duration::seconds(30)),
        attempts: 2,
        ..crate::fixtures::task(42, status, t0())
    }
}

fn run(worker: &str, epoch: i64) -> Run {
    Run { task_id: 42, worker: worker.into(), ..crate::fixtures::run(epoch, t0()) }
}

#[test]
fn a_retry_policy_names_the_causes_a_rerun_cannot_fix() {
    assert_eq!(RetryPolicy::default().deterministic, [ErrorCause::ContextOverflow]);
    assert_eq!(
        RetryPolicy::parse(" timeout ,context_overflow,timeout").unwrap().deterministic,
        [ErrorCause::Timeout, ErrorCause::ContextOverflow]
    );
    assert!(RetryPolicy::parse("none").unwrap().deterministic.is_empty());
    assert!(RetryPolicy::parse("").unwrap().deterministic.is_empty());
    assert!(RetryPolicy::parse("melted").is_err());

    let failed = |cause: ErrorCause| Run {
        state: RunState::Failed,
        cause: Some(cause.into()),
        error: Some(cause.as_str().into()),
        ..run("w1", 1)
    };
    let policy = RetryPolicy::default();
    assert_eq!(
        policy.doomed_by(Some(&failed(ErrorCause::ContextOverflow))),
        Some(ErrorCause::ContextOverflow)
    );
    assert_eq!(policy.doomed_by(Some(&failed(ErrorCause::Timeout))), None);
    assert_eq!(policy.doomed_by(Some(&run("w1", 1))), None, "a running run dooms nothing");
    assert_eq!(policy.doomed_by(None), None);
}

#[test]
fn a_re_claim_is_explained_with_the_worker_time_and_epochs() {
    let now = task("leased", Some("worker-7"), 6);
    let msg = explain_change(5, Some("leased"), &now, Some(&run("worker-7", 6)), None);
    assert!(msg.starts_with("re-claimed by worker-7 at 2026-11-30 03:12:05 UTC, epoch 5 → 6"), "{msg}");
    assert!(msg.contains("leased by worker-7 until"), "{msg}");
}

#[test]
fn an_operator_requeue_is_explained_with_the_actor() {
    let now = task("queued", None, 6);
    let action = OperatorAction {
        task_id: 42,
        status_seen: Some(TaskStatus::Failed),
        ..crate::fixtures::action(1, "requeue", "alice", 5, t0())
    };
    let msg = explain_change(5, None, &now, Some(&run("w1", 5)), Some(&action));
    assert_eq!(msg, "re-queued by alice at 2026-11-30 03:12:05 UTC, epoch 5 → 6; it is queued now");
}

#[test]
fn a_status_change_at_the_same_epoch_names_both_statuses() {
    let now = task("completed", None, 5);
    let msg = explain_change(5, Some("leased"), &now, None, None);
    assert_eq!(msg, "status leased → completed (epoch 5 unchanged)");
}

#[test]
fn validation_trims_and_names_the_field() {
    let bad = |r: ActionRequest, k| r.validate(k).unwrap_err().param;
    let base = ActionRequest { reason: "stuck".into(), expected_epoch: Some(3), ..Default::default() };
    assert_eq!(bad(ActionRequest { reason: "   ".into(), ..base.clone() }, ActionKind::Requeue), "reason");
    assert_eq!(
        bad(ActionRequest { expected_epoch: None, ..base.clone() }, ActionKind::Requeue),
        "expected_epoch"
    );
    assert!(ActionRequest { expected_epoch: None, ..base.clone() }.validate(ActionKind::Compensate).is_ok());
    assert_eq!(
        bad(ActionRequest { request_id: Some("a b".into()), ..base.clone() }, ActionKind::Requeue),
        "request_id"
    );
    assert_eq!(
        bad(ActionRequest { reference: Some("T-1".into()), ..base.clone() }, ActionKind::Requeue),
        "reference"
    );
    assert_eq!(bad(ActionRequest { fence: true, ..base.clone() }, ActionKind::Compensate), "fence");
    assert_eq!(
        bad(ActionRequest { expected_status: Some("gone".into()), ..base.clone() }, ActionKind::Requeue),
        "expected_status"
    );
    let ok = ActionRequest { reason: "  stuck \n".into(), reference: Some("  ".into()), ..base }
        .validate(ActionKind::Compensate)
        .unwrap();
    assert_eq!(ok.reason, "stuck");
    assert_eq!(ok.reference, None);
}

#[test]
fn bulk_validation_needs_the_preview_token_and_dedupes_ids() {
    let base = BulkRequeueRequest {
        reason: "sweep".into(),
        preview_token: Some("00aa11bb22cc33dd-2".into()),
        ..Default::default()
    };
    assert!(base.clone().validate().is_ok(), "the count is optional");
    for token in [None, Some(" "), Some("a b"), Some("<script>")] {
        let request = BulkRequeueRequest { preview_token: token.map(str::to_string), ..base.clone() };
        assert_eq!(request.validate().unwrap_err().param, "preview_token", "{token:?}");
    }
    assert_eq!(
        BulkRequeueRequest { expected_count: Some(-1), ..base.clone() }.validate().unwrap_err().param,
        "expected_count"
    );
    let ok = BulkRequeueRequest { task_ids: Some(vec![3, 1, 3]), ..base.clone() }.validate().unwrap();
    assert_eq!(ok.task_ids, Some(vec![1, 3]));
    assert_eq!(
        BulkRequeueRequest { task_ids: Some(vec![]), ..base }.validate().unwrap_err().param,
        "task_ids"
    );
}

#[test]
fn a_preview_token_names_the_set_and_epochs_not_the_count_or_order() {
    let r = |id: i64, epoch: i64| TaskRef {
        id,
        kind: "reply".into(),
        safety: crate::model::Safety::Idempotent,
        status: crate::model::TaskStatus::Dead,
        owner: None,
        lease_epoch: epoch,
        lease_expires_at: None,
        last_failure: None,
    };
    let token = preview_token(&[r(1, 2), r(5, 1)], false);
    assert_eq!(token, preview_token(&[r(5, 1), r(1, 2)], false), "order does not matter");
    assert_ne!(token, preview_token(&[r(1, 2), r(6, 1)], false), "another task, same count");
    assert_ne!(token, preview_token(&[r(1, 3), r(5, 1)], false), "same task, another epoch");
    assert_ne!(token, preview_token(&[r(1, 2), r(5, 1)], true), "fencing is part of it");
    assert!(token.ends_with("-2"), "{token}");
}

#[test]
fn the_confirmation_lists_every_change() {
    let changes = requeue_changes(&task("leased", Some("worker-3"), 5));
    assert_eq!(changes[0], "status leased → queued");
    assert!(changes[1].starts_with("owner worker-3 cleared"));
    assert!(changes[2].starts_with("lease epoch 5 → 6"));
    assert!(changes[3].starts_with("attempts 2 → 0"));
}

#[test]
fn only_an_unexpired_held_lease_is_live() {
    let now = t0();
    assert!(lease_live(TaskStatus::Leased, Some("w"), Some(now + chrono::Duration::seconds(1)), now));
    assert!(!lease_live(TaskStatus::Leased, Some("w"), Some(now), now));
    assert!(!lease_live(TaskStatus::Queued, None, None, now));
}

fn query(q: &str) -> Vec<(String, String)> {
    crate::query::query_pairs(q)
}

#[test]
fn a_bulk_request_selects_named_tasks_or_a_filter_never_both() {
    let from = |q: &str, ids: Option<Vec<i64>>| BulkSelection::from_request(&query(q), ids, t0(), &["fence"]);
    assert_eq!(from("", Some(vec![3, 4])).unwrap(), BulkSelection::Tasks(vec![3, 4]));
    // The door's own flags and a page's paging are no filter: still the named tasks.
    assert_eq!(from("fence=true&limit=50", Some(vec![3])).unwrap(), BulkSelection::Tasks(vec![3]));
    let both = from("?since=1h", Some(vec![3])).unwrap_err();
    assert_eq!(both.param, "task_ids");
    // No ids: the filter, failures only when no state or cause narrows it (page, API and CLI).
    let BulkSelection::Filter(f) = from("since=1h&fence=true", None).unwrap() else { panic!("a filter") };
    assert_eq!(f.states, RunState::failures());
    assert_eq!(f.since, Some(t0() - chrono::Duration::hours(1)));
    let BulkSelection::Filter(f) = from("state=acted", None).unwrap() else { panic!("a filter") };
    assert_eq!(f.states, vec![RunState::Acted]);
    // A worker name carrying '&' stays one value when encoded (issue 11's filter injection).
    let BulkSelection::Filter(f) = from("worker=w%26state%3Dacted", None).unwrap() else {
        panic!("a filter")
    };
    assert_eq!((f.worker.as_deref(), f.states), (Some("w&state=acted"), RunState::failures()));
    assert!(from("cause=melted", None).is_err());
}
