//! Operator actions against real workers, on in-memory SQLite, a SQLite file and PostgreSQL:
//! the rows each action writes, the fencing of a worker that held the lease, refusals on a
//! stale view (and that they change nothing), double submission, bulk re-queue with its
//! preview, the audit trail, and races between many operators acting on one task at once.
//! Lives in the runner crate because the fencing is only proven by a runner's own writes.

mod common;

use chrono::{DateTime, Duration, TimeZone, Utc};
use common::{secs, Fixture, LEASE};
use lastword_core::action::BULK_MAX;
use lastword_core::{
    ActionKind, ActionOutcome, ActionRequest, Actor, AuditFilter, BulkOutcome, BulkRequeueRequest,
    BulkSelection, Cause, ErrorCause, PageRequest, RefusalCode, RunFilter, Safety, Source, Task, Tokens,
};
use lastword_runner::{enqueue, ActionMessage, Finish, Heartbeat, Lease, Outcome};
use lastword_store::testing::{exec, scalar};
use lastword_store::{Db, NewTask};

fn t0() -> DateTime<Utc> {
    Utc.timestamp_opt(1_800_000_000, 250_000_000).unwrap()
}

impl Fixture {
    fn new(db: Db) -> Self {
        Fixture::starting_at(db, t0())
    }

    /// A queued task; `max_attempts` 1 so a failure makes it dead at once.
    async fn task(&self, safety: Safety) -> i64 {
        self.task_of("reply_to_mention", safety, 1).await
    }

    async fn task_of(&self, kind: &str, safety: Safety, max_attempts: i32) -> i64 {
        let task = NewTask::new(kind, Source::Notification, safety).with_max_attempts(max_attempts);
        enqueue(&self.db, &task, self.now()).await.unwrap()
    }

    /// Applied actions in the audit trail (refused attempts are counted by [`Self::refusals`]).
    async fn audit_count(&self) -> i64 {
        scalar(&self.db, "SELECT COUNT(*) FROM operator_actions WHERE outcome = 'applied'", &[]).await
    }

    /// The applied actions on `id`, newest first.
    async fn applied_actions(&self, id: i64) -> Vec<lastword_core::OperatorAction> {
        self.store.task_actions(id).await.unwrap().into_iter().filter(|a| a.refused().is_none()).collect()
    }

    /// The outcomes of refused attempts on `id`, oldest first.
    async fn refusals(&self, id: i64) -> Vec<String> {
        let mut trail = self.store.task_actions(id).await.unwrap();
        trail.reverse();
        trail.into_iter().filter(|a| a.refused().is_some()).map(|a| a.outcome).collect()
    }

    async fn act(&self, id: i64, kind: ActionKind, request: ActionRequest, actor: &str) -> ActionOutcome {
        let request = request.validate(kind).expect("a valid request");
        self.store
            .act(id, kind, &request, &Actor::new(actor, "session"), self.now())
            .await
            .unwrap()
            .expect("the task exists")
    }

    /// A task that failed once with a timeout and is dead (max_attempts 1).
    async fn dead_task(&self, worker: &str) -> i64 {
        let kind = format!("dead-{}", rand_suffix());
        let id = self.task_of(&kind, Safety::Idempotent, 1).await;
        let lease = self.runner(worker).claim(Some(&[kind])).await.unwrap().unwrap();
        assert_eq!(lease.task_id, id);
        let failed = Outcome::Failed { cause: ErrorCause::Timeout, detail: "model call timed out".into() };
        self.runner(worker).finish(lease, failed).await.unwrap();
        assert_eq!(self.row(id).await.status.as_str(), "dead");
        id
    }

    /// An unsafe task executed twice: `w1` records its effect, outlives its lease, `w2`
    /// re-claims and records the same effect under the next epoch; both finish.
    async fn double_executed(&self) -> i64 {
        let kind = [format!("twice-{}", rand_suffix())];
        let id = self.task_of(&kind[0], Safety::Unsafe, 3).await;
        let w1 = self.runner("w1");
        let lease1 = w1.claim(Some(&kind)).await.unwrap().unwrap();
        w1.record_effect(&lease1, "send_email", "reply-1").await.unwrap();
        self.clock.advance(secs(LEASE + 1));
        let w2 = self.runner("w2");
        let lease2 = w2.claim(Some(&kind)).await.unwrap().expect("lapsed lease re-claimed");
        w2.record_effect(&lease2, "send_email", "reply-1").await.unwrap();
        w2.finish(lease2, Outcome::Acted(ActionMessage::new("replied").unwrap())).await.unwrap();
        let lost = w1.finish(lease1, Outcome::Acted(ActionMessage::new("replied").unwrap())).await.unwrap();
        assert!(matches!(lost, Finish::LostLease { .. }), "{lost:?}");
        id
    }
}

/// Distinct task kinds per helper call, so each claim takes exactly the task it made.
fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn requeue(epoch: i64) -> ActionRequest {
    ActionRequest {
        reason: "stuck behind a dead API".into(),
        expected_epoch: Some(epoch),
        ..Default::default()
    }
}

fn refusal(outcome: ActionOutcome) -> (RefusalCode, String, Task) {
    match outcome {
        ActionOutcome::Refused(r) => (r.code, r.message, r.task.expect("a refusal shows the task")),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn applied(outcome: ActionOutcome) -> (Task, lastword_core::OperatorAction) {
    match outcome {
        ActionOutcome::Applied { task, action } => (task, action),
        other => panic!("expected applied, got {other:?}"),
    }
}

async fn requeue_of_a_live_lease_is_refused_unless_fenced_and_fencing_rejects_the_holder(db: Db) {
    let f = Fixture::new(db);
    let id = f.task(Safety::Unsafe).await;
    let w1 = f.runner("w1");
    let mut lease: Lease = w1.claim(None).await.unwrap().unwrap();
    f.clock.advance(secs(5));

    // Live lease, no fence: refused, names the holder, changes nothing.
    let (code, message, task) = refusal(f.act(id, ActionKind::Requeue, requeue(1), "alice").await);
    assert_eq!(code, RefusalCode::LeaseLive);
    assert!(message.contains("w1 holds a live lease"), "{message}");
    assert_eq!((task.status.as_str(), task.lease_epoch), ("leased", 1));
    assert_eq!(f.row(id).await, task);
    assert_eq!(f.audit_count().await, 0);

    // Fenced: applied, in one transaction with its audit row.
    let request = ActionRequest { fence: true, expected_status: Some("leased".into()), ..requeue(1) };
    let (task, action) = applied(f.act(id, ActionKind::Requeue, request, "alice").await);
    assert_eq!(task.status.as_str(), "queued");
    assert_eq!((task.owner.as_deref(), task.lease_expires_at), (None, None));
    assert_eq!((task.lease_epoch, task.attempts), (2, 0));
    assert_eq!(task.updated_at, f.now());
    assert_eq!(f.row(id).await, task);
    assert_eq!(
        (action.task_id, action.run_id, action.action.as_str(), action.actor.as_str()),
        (id, Some(lease.run_id), "requeue", "alice")
    );
    assert_eq!(action.reason, "stuck behind a dead API");
    assert_eq!((action.epoch_seen, action.epoch_after), (Some(1), Some(2)));
    assert_eq!(
        (action.status_seen.map(|s| s.as_str()), action.outcome.as_str()),
        (Some("leased"), "applied")
    );
    assert_eq!(action.created_at, f.now());
    assert_eq!(f.applied_actions(id).await, vec![action]);
    assert_eq!(f.refusals(id).await, vec!["refused:lease_live"], "the unfenced attempt before it");

    // The fenced worker's heartbeat and final write now match zero rows.
    assert_eq!(w1.heartbeat(&mut lease).await.unwrap(), Heartbeat::Lost { holder: None, epoch: 2 });
    let finish =
        w1.finish(lease.clone(), Outcome::Acted(ActionMessage::new("replied").unwrap())).await.unwrap();
    assert_eq!(finish, Finish::LostLease { holder: None, epoch: 2 });
    let runs = f.store.task_runs(id, f.now()).await.unwrap();
    assert_eq!(runs[0].completion_rows, Some(0));
    assert_eq!(runs[0].cause, Some(Cause::LostLease));
    assert_eq!(f.row(id).await.status.as_str(), "queued", "the fenced write did not complete the task");

    // The next claim takes the task under a newer epoch still.
    let next = f.runner("w2").claim(None).await.unwrap().unwrap();
    assert_eq!((next.task_id, next.epoch), (id, 3));
}

async fn a_stale_view_is_refused_with_what_changed_and_nothing_changes(db: Db) {
    let f = Fixture::new(db);
    let id = f.task_of("reply_to_mention", Safety::Idempotent, 3).await;
    let w1 = f.runner("w1");
    let _lost = w1.claim(None).await.unwrap().unwrap();
    // The operator looks at epoch 1 (leased by w1); meanwhile the lease lapses and w2 re-claims.
    f.clock.advance(secs(LEASE + 2));
    let w2 = f.runner("worker-7");
    let lease2 = w2.claim(None).await.unwrap().unwrap();
    assert_eq!(lease2.epoch, 2);
    let before = f.row(id).await;

    let request = ActionRequest { fence: true, ..requeue(1) };
    let (code, message, task) = refusal(f.act(id, ActionKind::Requeue, request, "alice").await);
    assert_eq!(code, RefusalCode::Changed);
    assert!(message.contains("re-claimed by worker-7 at"), "{message}");
    assert!(message.contains("epoch 1 → 2"), "{message}");
    assert_eq!(task, before, "the refusal shows the current task");
    assert_eq!(f.row(id).await, before, "nothing changed");
    assert_eq!(f.audit_count().await, 0, "a refusal is not an applied action");
    // …but the attempt is on the record, with who tried, how they signed in and what they saw.
    assert_eq!(f.refusals(id).await, vec!["refused:changed"]);
    let tried = f.store.task_actions(id).await.unwrap().remove(0);
    assert_eq!((tried.actor.as_str(), tried.via.as_deref()), ("alice", Some("session")));
    assert_eq!(
        (tried.epoch_seen, tried.epoch_after, tried.status_seen.map(|s| s.as_str())),
        (Some(1), Some(2), Some("leased"))
    );
    assert_eq!(tried.reason, "stuck behind a dead API");

    // Same epoch, other status: also refused.
    w2.finish(lease2, Outcome::NoActionNeeded).await.unwrap();
    let request = ActionRequest { expected_status: Some("leased".into()), ..requeue(2) };
    let (code, message, _) = refusal(f.act(id, ActionKind::Requeue, request, "alice").await);
    assert_eq!(code, RefusalCode::Changed);
    assert!(message.contains("status leased → completed"), "{message}");

    // Already queued: refused.
    let (task, _) = applied(f.act(id, ActionKind::Requeue, requeue(2), "alice").await);
    let (code, _, _) = refusal(f.act(id, ActionKind::Requeue, requeue(task.lease_epoch), "bob").await);
    assert_eq!(code, RefusalCode::AlreadyQueued);
    assert_eq!(f.audit_count().await, 1);
}

async fn a_double_submission_applies_once(db: Db) {
    let f = Fixture::new(db);
    let id = f.dead_task("w1").await;
    let other = f.dead_task("w1").await;
    let request = ActionRequest { request_id: Some("req-42".into()), ..requeue(1) };
    let (first, action) = applied(f.act(id, ActionKind::Requeue, request.clone(), "alice").await);
    match f.act(id, ActionKind::Requeue, request.clone(), "alice").await {
        ActionOutcome::Replayed { task, action: again } => {
            assert_eq!(again, action, "the first action, not a new one");
            assert_eq!(task, first);
        }
        other => panic!("expected a replay, got {other:?}"),
    }
    assert_eq!(f.row(id).await.lease_epoch, 2, "the epoch moved once");
    assert_eq!(f.audit_count().await, 1);
    assert_eq!(action.request_id.as_deref(), Some("req-42"));

    // The same id for another task is refused, and changes nothing there.
    let before = f.row(other).await;
    let (code, message, _) = refusal(f.act(other, ActionKind::Requeue, request, "alice").await);
    assert_eq!(code, RefusalCode::RequestIdReused);
    assert!(message.contains("req-42"), "{message}");
    assert_eq!(f.row(other).await, before);
    assert_eq!(f.audit_count().await, 1);
}

async fn compensation_is_recorded_leaves_attention_and_can_be_undone(db: Db) {
    let f = Fixture::new(db);
    let single = f.dead_task("w1").await;
    let id = f.double_executed().await;
    let window = |f: &Fixture| (f.now() - secs(3600), f.now() + secs(1));

    // Nothing to compensate on a task that ran once.
    let compensate = ActionRequest {
        reason: "refunded the duplicate email".into(),
        reference: Some("TICKET-9".into()),
        ..Default::default()
    };
    let (code, _, _) = refusal(f.act(single, ActionKind::Compensate, compensate.clone(), "alice").await);
    assert_eq!(code, RefusalCode::NothingToCompensate);

    let (since, until) = window(&f);
    let overview = f.store.overview(since, until, secs(60), f.now()).await.unwrap();
    assert_eq!(overview.attention.needs_compensation, 1);
    assert!(f.store.task_detail(id, f.now()).await.unwrap().unwrap().needs_compensation);

    f.clock.advance(secs(10));
    let (task, action) = applied(f.act(id, ActionKind::Compensate, compensate.clone(), "alice").await);
    assert_eq!(task.compensated_at, Some(f.now()));
    assert_eq!(task.compensated_by.as_deref(), Some("alice"));
    assert_eq!(task.compensation_reason.as_deref(), Some("refunded the duplicate email"));
    assert_eq!(task.compensation_ref.as_deref(), Some("TICKET-9"));
    assert_eq!((action.action.as_str(), action.reference.as_deref()), ("compensate", Some("TICKET-9")));
    assert_eq!((action.epoch_seen, action.epoch_after), (None, Some(2)));
    let overview = f.store.overview(since, until, secs(60), f.now()).await.unwrap();
    assert_eq!(overview.attention.needs_compensation, 0, "it left the attention list");
    let detail = f.store.task_detail(id, f.now()).await.unwrap().unwrap();
    assert!(detail.double_execution && !detail.needs_compensation);

    let (code, message, _) = refusal(f.act(id, ActionKind::Compensate, compensate, "bob").await);
    assert_eq!(code, RefusalCode::AlreadyCompensated);
    assert!(message.contains("by alice"), "{message}");

    let undo = ActionRequest { reason: "wrong task, refund was for #12".into(), ..Default::default() };
    let (task, action) = applied(f.act(id, ActionKind::Uncompensate, undo.clone(), "bob").await);
    assert_eq!(
        (task.compensated_at, task.compensated_by, task.compensation_reason, task.compensation_ref),
        (None, None, None, None)
    );
    assert_eq!((action.action.as_str(), action.actor.as_str()), ("uncompensate", "bob"));
    let overview = f.store.overview(since, until, secs(60), f.now()).await.unwrap();
    assert_eq!(overview.attention.needs_compensation, 1, "back on the list");
    let (code, _, _) = refusal(f.act(id, ActionKind::Uncompensate, undo, "bob").await);
    assert_eq!(code, RefusalCode::NotCompensated);

    let trail: Vec<String> = f
        .store
        .task_actions(id)
        .await
        .unwrap()
        .into_iter()
        .filter(|a| a.refused().is_none())
        .map(|a| a.action.to_string())
        .collect();
    assert_eq!(trail, vec!["uncompensate", "compensate"], "newest first");
    assert_eq!(
        f.refusals(id).await,
        vec!["refused:already_compensated", "refused:not_compensated"],
        "and every refused attempt recorded"
    );

    // A stale epoch on a compensation is refused too.
    let stale = ActionRequest { reason: "x".into(), expected_epoch: Some(1), ..Default::default() };
    let (code, _, _) = refusal(f.act(id, ActionKind::Compensate, stale, "carol").await);
    assert_eq!(code, RefusalCode::Changed);
}

/// A task that died two hours ago and is compensated now is not a new dead task: the overview
/// counts dead tasks by when they died, and a compensation (or its undo) changes neither the
/// status nor when it last changed.
async fn compensating_an_old_dead_task_does_not_count_it_as_newly_dead(db: Db) {
    let f = Fixture::new(db);
    let kind = [format!("dead-twice-{}", rand_suffix())];
    let id = f.task_of(&kind[0], Safety::Unsafe, 2).await;
    let (w1, w2) = (f.runner("w1"), f.runner("w2"));
    let lease1 = w1.claim(Some(&kind)).await.unwrap().unwrap();
    w1.record_effect(&lease1, "send_email", "reply-1").await.unwrap();
    f.clock.advance(secs(LEASE + 1));
    let lease2 = w2.claim(Some(&kind)).await.unwrap().expect("lapsed lease re-claimed");
    w2.record_effect(&lease2, "send_email", "reply-1").await.unwrap();
    let failed = Outcome::Failed { cause: ErrorCause::Timeout, detail: "model call timed out".into() };
    w2.finish(lease2, failed).await.unwrap();
    assert!(matches!(w1.finish(lease1, Outcome::NoActionNeeded).await.unwrap(), Finish::LostLease { .. }));
    let died = f.row(id).await;
    assert_eq!(died.status.as_str(), "dead");

    let dead_in_last_hour = |f: &Fixture| {
        let (since, until) = (f.now() - secs(3600), f.now() + secs(1));
        let store = f.store.clone();
        let now = f.now();
        async move { store.overview(since, until, secs(60), now).await.unwrap().attention.dead_tasks }
    };
    assert_eq!(dead_in_last_hour(&f).await, 1, "it died just now");
    f.clock.advance(secs(2 * 3600));
    assert_eq!(dead_in_last_hour(&f).await, 0, "two hours later it is old news");

    let compensate = ActionRequest { reason: "refunded the duplicate".into(), ..Default::default() };
    applied(f.act(id, ActionKind::Compensate, compensate, "alice").await);
    assert_eq!(dead_in_last_hour(&f).await, 0, "compensating it does not make it newly dead");
    assert_eq!(f.row(id).await.updated_at, died.updated_at);
    let undo = ActionRequest { reason: "wrong task".into(), ..Default::default() };
    applied(f.act(id, ActionKind::Uncompensate, undo, "alice").await);
    assert_eq!(dead_in_last_hour(&f).await, 0, "nor does undoing it");
}

/// Deleting a task (by hand, or someone else's retention job) does not erase its audit: the
/// rows stay, with the task id they were about and how each actor signed in.
async fn the_audit_of_a_deleted_task_survives_with_its_task_id(db: Db) {
    let f = Fixture::new(db);
    let id = f.dead_task("w1").await;
    applied(f.act(id, ActionKind::Requeue, requeue(1), "alice").await);
    refusal(f.act(id, ActionKind::Requeue, requeue(2), "bob").await);
    assert_eq!(exec(&f.db, "DELETE FROM tasks WHERE id = $1", &[id.into()]).await, 1);
    assert!(f.store.task(id).await.unwrap().is_none(), "the task is gone");
    let filter = AuditFilter { task_id: Some(id), ..Default::default() };
    let page = f.store.audit(&filter, &PageRequest::default()).await.unwrap();
    let kept: Vec<(i64, &str, &str, Option<&str>)> = page
        .actions
        .iter()
        .map(|a| (a.task_id, a.actor.as_str(), a.outcome.as_str(), a.via.as_deref()))
        .collect();
    assert_eq!(
        kept,
        vec![
            (id, "bob", "refused:already_queued", Some("session")),
            (id, "alice", "applied", Some("session"))
        ]
    );
    assert!(
        page.actions.iter().all(|a| a.run_id.is_none()),
        "its runs went with it; the ids they had are gone"
    );
    // Only refusals, or only applied actions, on request.
    let refused = AuditFilter { applied: Some(false), ..filter.clone() };
    assert_eq!(f.store.audit(&refused, &PageRequest::default()).await.unwrap().actions.len(), 1);
    let applied_only = AuditFilter { applied: Some(true), ..filter };
    assert_eq!(
        f.store.audit(&applied_only, &PageRequest::default()).await.unwrap().actions[0].actor,
        "alice"
    );
}

async fn many_operators_at_once_apply_exactly_once_per_epoch(db: Db) {
    let f = Fixture::new(db);
    let id = f.dead_task("w1").await;
    // Twelve operators saw epoch 1 and press re-queue at the same moment.
    let mut handles = Vec::new();
    for n in 0..12 {
        let store = f.store.clone();
        let now = f.now();
        handles.push(tokio::spawn(async move {
            let request = ActionRequest { reason: format!("retry from operator {n}"), ..requeue(1) };
            let request = request.validate(ActionKind::Requeue).unwrap();
            store
                .act(id, ActionKind::Requeue, &request, &Actor::new(format!("op{n}"), "session"), now)
                .await
                .unwrap()
                .unwrap()
        }));
    }
    let mut applied_by = Vec::new();
    for h in handles {
        match h.await.unwrap() {
            ActionOutcome::Applied { action, .. } => applied_by.push(action.actor),
            ActionOutcome::Refused(r) => assert_eq!(r.code, RefusalCode::Changed, "{}", r.message),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(applied_by.len(), 1, "exactly one re-queue applies: {applied_by:?}");
    assert_eq!(f.row(id).await.lease_epoch, 2);
    let audit = f.applied_actions(id).await;
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].actor, applied_by[0], "the audit holds exactly the applied one");

    // Then twelve compensations of a double-executed task, some sending the same request id.
    let twice = f.double_executed().await;
    let mut handles = Vec::new();
    for n in 0..12 {
        let store = f.store.clone();
        let now = f.now();
        handles.push(tokio::spawn(async move {
            let request = ActionRequest {
                reason: format!("refund {n}"),
                request_id: Some(format!("c-{}", n % 3)),
                ..Default::default()
            };
            let request = request.validate(ActionKind::Compensate).unwrap();
            store
                .act(twice, ActionKind::Compensate, &request, &Actor::new(format!("op{n}"), "session"), now)
                .await
                .unwrap()
                .unwrap()
        }));
    }
    let mut applied_count = 0;
    for h in handles {
        match h.await.unwrap() {
            ActionOutcome::Applied { .. } => applied_count += 1,
            ActionOutcome::Replayed { .. } => {}
            ActionOutcome::Refused(r) => assert_eq!(r.code, RefusalCode::AlreadyCompensated, "{}", r.message),
        }
    }
    assert_eq!(applied_count, 1);
    let audit: Vec<_> =
        f.store.task_actions(twice).await.unwrap().into_iter().filter(|a| a.refused().is_none()).collect();
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(f.row(twice).await.compensated_by, Some(audit[0].actor.clone()));
}

async fn bulk_requeue_applies_the_previewed_set_once(db: Db) {
    let f = Fixture::new(db);
    let dead: Vec<i64> = [f.dead_task("w1").await, f.dead_task("w2").await, f.dead_task("w1").await].into();
    // A timeout whose task later completed (after an operator re-queue), and one now re-claimed live.
    let completed = f.dead_task("w3").await;
    let live = f.dead_task("w3").await;
    for id in [completed, live] {
        applied(f.act(id, ActionKind::Requeue, requeue(1), "setup").await);
    }
    let r = f.runner("w4");
    let mut leases = Vec::new();
    while let Some(lease) = r.claim(None).await.unwrap() {
        leases.push(lease);
    }
    for lease in leases {
        if lease.task_id == completed {
            r.finish(lease, Outcome::NoActionNeeded).await.unwrap();
        }
    }
    let timeouts = BulkSelection::Filter(RunFilter { causes: vec![Cause::Timeout], ..Default::default() });

    let preview =
        f.store.requeue_preview(&timeouts, lastword_core::BulkOptions::default(), f.now()).await.unwrap();
    assert_eq!(preview.tasks.iter().map(|t| t.id).collect::<Vec<_>>(), dead);
    assert_eq!(preview.live.iter().map(|t| t.id).collect::<Vec<_>>(), vec![live]);
    assert_eq!((preview.skipped_completed, preview.skipped_queued, preview.too_many), (1, 0, false));
    let fenced =
        f.store.requeue_preview(&timeouts, lastword_core::BulkOptions::fenced(), f.now()).await.unwrap();
    assert_eq!(fenced.tasks.len(), 4);

    // Confirmed with a count that is no longer true: refused, nothing changes.
    let audit_before = f.audit_count().await;
    let stale = BulkRequeueRequest {
        reason: "API back".into(),
        expected_count: Some(2),
        preview_token: Some(preview.token.clone()),
        request_id: Some("bulk-1".into()),
        ..Default::default()
    }
    .validate()
    .unwrap();
    match f.store.bulk_requeue(&timeouts, &stale, &Actor::new("alice", "session"), f.now()).await.unwrap() {
        BulkOutcome::Refused { code, message, preview } => {
            assert_eq!(code, RefusalCode::PreviewChanged);
            assert!(message.contains("would now re-queue 3 tasks"), "{message}");
            assert_eq!(preview.unwrap().tasks.len(), 3);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(f.audit_count().await, audit_before);
    for id in &dead {
        assert_eq!(f.row(*id).await.status.as_str(), "dead");
        assert_eq!(
            f.refusals(*id).await,
            vec!["refused:preview_changed"],
            "the attempt is on each task's record"
        );
    }

    // The same count but not the same set: one previewed task was re-queued and died again
    // (a new epoch) — refused too; a token names the tasks and epochs, not their number.
    let moved = dead[0];
    applied(f.act(moved, ActionKind::Requeue, requeue(1), "bob").await);
    let lease = f.runner("w5").claim(None).await.unwrap().expect("the re-queued task");
    assert_eq!(lease.task_id, moved);
    let failed = Outcome::Failed { cause: ErrorCause::Timeout, detail: "again".into() };
    f.runner("w5").finish(lease, failed).await.unwrap();
    let again =
        f.store.requeue_preview(&timeouts, lastword_core::BulkOptions::default(), f.now()).await.unwrap();
    assert_eq!(again.tasks.len(), preview.tasks.len(), "as many tasks as before");
    assert_ne!(again.token, preview.token);
    let same_count = BulkRequeueRequest { expected_count: Some(3), ..stale.clone() };
    match f
        .store
        .bulk_requeue(&timeouts, &same_count, &Actor::new("alice", "session"), f.now())
        .await
        .unwrap()
    {
        BulkOutcome::Refused { code, .. } => assert_eq!(code, RefusalCode::PreviewChanged),
        other => panic!("{other:?}"),
    }
    assert_eq!(f.row(moved).await.lease_epoch, 3, "nothing applied");
    let audit_before = f.audit_count().await;

    let confirmed =
        BulkRequeueRequest { expected_count: Some(3), preview_token: Some(again.token.clone()), ..stale };
    let actions = match f
        .store
        .bulk_requeue(&timeouts, &confirmed, &Actor::new("alice", "session"), f.now())
        .await
        .unwrap()
    {
        BulkOutcome::Applied { actions } => actions,
        other => panic!("{other:?}"),
    };
    assert_eq!(actions.iter().map(|a| a.task_id).collect::<Vec<_>>(), dead);
    for (a, id) in actions.iter().zip(&dead) {
        let epoch = if *id == moved { 3 } else { 1 };
        assert_eq!(a.request_id, Some(format!("bulk-1/{id}")));
        assert_eq!(
            (a.epoch_seen, a.epoch_after, a.status_seen.map(|s| s.as_str())),
            (Some(epoch), Some(epoch + 1), Some("dead"))
        );
        let t = f.row(*id).await;
        assert_eq!((t.status.as_str(), t.lease_epoch), ("queued", epoch + 1));
    }
    assert_eq!(f.row(live).await.status.as_str(), "leased", "the live lease was not fenced");
    // Sent again (a retry): replayed, nothing applied twice.
    match f.store.bulk_requeue(&timeouts, &confirmed, &Actor::new("alice", "session"), f.now()).await.unwrap()
    {
        BulkOutcome::Replayed { actions: again } => assert_eq!(again, actions),
        other => panic!("{other:?}"),
    }
    assert_eq!(f.audit_count().await, audit_before + 3);

    // An explicit selection re-queues a completed task too (a filter's sweep skips it), and
    // its preview says so.
    let explicit = f
        .store
        .requeue_preview(
            &BulkSelection::Tasks(vec![completed]),
            lastword_core::BulkOptions::default(),
            f.now(),
        )
        .await
        .unwrap();
    assert_eq!(explicit.tasks.iter().map(|t| t.id).collect::<Vec<_>>(), vec![completed]);
    assert_eq!((explicit.rerun_completed, explicit.skipped_completed), (1, 0));

    // A selection by ids works the same way.
    let selection = BulkSelection::Tasks(vec![live]);
    let token = f
        .store
        .requeue_preview(&selection, lastword_core::BulkOptions::fenced(), f.now())
        .await
        .unwrap()
        .token;
    let request = BulkRequeueRequest {
        reason: "fence it".into(),
        expected_count: Some(1),
        preview_token: Some(token),
        fence: true,
        ..Default::default()
    };
    match f
        .store
        .bulk_requeue(&selection, &request.validate().unwrap(), &Actor::new("bob", "token:bob"), f.now())
        .await
        .unwrap()
    {
        BulkOutcome::Applied { actions } => assert_eq!(actions.len(), 1),
        other => panic!("{other:?}"),
    }
    assert_eq!(f.row(live).await.status.as_str(), "queued");

    // Unsafe tasks need the acknowledgement from the request itself, not only the page.
    let kind = [format!("risky-{}", rand_suffix())];
    let risky = f.task_of(&kind[0], Safety::Unsafe, 1).await;
    let lease = f.runner("w6").claim(Some(&kind)).await.unwrap().unwrap();
    let failed = Outcome::Failed { cause: ErrorCause::ApiError, detail: "503".into() };
    f.runner("w6").finish(lease, failed).await.unwrap();
    let selection = BulkSelection::Tasks(vec![risky]);
    let preview =
        f.store.requeue_preview(&selection, lastword_core::BulkOptions::default(), f.now()).await.unwrap();
    assert_eq!(preview.unsafe_count, 1);
    let unacknowledged = BulkRequeueRequest::confirming(&preview, "retry").validate().unwrap();
    match f
        .store
        .bulk_requeue(&selection, &unacknowledged, &Actor::new("bob", "token:bob"), f.now())
        .await
        .unwrap()
    {
        BulkOutcome::Refused { code, message, .. } => {
            assert_eq!(code, RefusalCode::UnsafeNotAcknowledged);
            assert!(message.contains("unsafe"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(f.row(risky).await.status.as_str(), "dead", "nothing applied");
    assert_eq!(f.refusals(risky).await, vec!["refused:unsafe_not_acknowledged"]);
    let acknowledged = BulkRequeueRequest { acknowledge_unsafe: true, ..unacknowledged };
    match f
        .store
        .bulk_requeue(&selection, &acknowledged, &Actor::new("bob", "token:bob"), f.now())
        .await
        .unwrap()
    {
        BulkOutcome::Applied { actions } => assert_eq!(actions.len(), 1),
        other => panic!("{other:?}"),
    }
}

async fn a_filter_selecting_too_many_tasks_is_refused(db: Db) {
    let f = Fixture::new(db);
    let ids: Vec<i64> = (1..=(BULK_MAX as i64 + 5)).collect();
    for _ in &ids {
        f.task(Safety::Idempotent).await;
    }
    let preview = f
        .store
        .requeue_preview(&BulkSelection::Tasks(ids.clone()), lastword_core::BulkOptions::default(), f.now())
        .await
        .unwrap();
    assert!(preview.too_many);
    let request = BulkRequeueRequest::confirming(&preview, "all");
    // Selections are capped before the store by validation; filters by the store.
    assert!(BulkRequeueRequest { task_ids: Some(ids), ..request.clone() }.validate().is_err());
}

async fn the_audit_trail_filters_by_actor_action_and_time_and_pages(db: Db) {
    let f = Fixture::new(db);
    let mut ids = Vec::new();
    for n in 0..5 {
        let id = f.dead_task("w1").await;
        f.clock.advance(secs(1));
        let actor = if n % 2 == 0 { "alice" } else { "bob" };
        applied(f.act(id, ActionKind::Requeue, requeue(1), actor).await);
        ids.push(id);
    }
    let all = f.store.audit(&AuditFilter::default(), &PageRequest { limit: 2, after: None }).await.unwrap();
    assert_eq!(all.actions.iter().map(|a| a.task_id).collect::<Vec<_>>(), vec![ids[4], ids[3]]);
    let after = lastword_core::Cursor::decode(all.next.as_deref().unwrap()).unwrap();
    let page2 =
        f.store.audit(&AuditFilter::default(), &PageRequest { limit: 2, after: Some(after) }).await.unwrap();
    assert_eq!(page2.actions.iter().map(|a| a.task_id).collect::<Vec<_>>(), vec![ids[2], ids[1]]);

    let alice = AuditFilter { actor: Some("alice".into()), ..Default::default() };
    let page = f.store.audit(&alice, &PageRequest::default()).await.unwrap();
    assert_eq!(page.actions.iter().map(|a| a.task_id).collect::<Vec<_>>(), vec![ids[4], ids[2], ids[0]]);
    assert!(page.next.is_none());

    let compensations = AuditFilter { action: Some(ActionKind::Compensate), ..Default::default() };
    assert!(f.store.audit(&compensations, &PageRequest::default()).await.unwrap().actions.is_empty());

    let since = f.now() - secs(2);
    let recent = AuditFilter { since: Some(since), ..Default::default() };
    let page = f.store.audit(&recent, &PageRequest::default()).await.unwrap();
    assert!(page.actions.iter().all(|a| a.created_at >= since));
    assert_eq!(page.actions.len(), 3);
}

/// A task whose last run failed with a deterministic cause (`context_overflow` by default)
/// is not re-queued unless the operator says the cause was fixed: the refusal is audited and
/// changes nothing; other causes re-queue as before; the policy is the store's to configure.
async fn a_retry_that_cannot_work_needs_the_operator_to_say_the_cause_is_fixed(db: Db) {
    let f = Fixture::new(db.clone());
    let fail_with = |cause: ErrorCause| {
        let f = &f;
        async move {
            let kind = format!("overflow-{}", rand_suffix());
            let id = f.task_of(&kind, Safety::Idempotent, 1).await;
            let lease = f.runner("w1").claim(Some(&[kind])).await.unwrap().unwrap();
            let failed = Outcome::Failed { cause, detail: "prompt of 210 000 tokens".into() };
            f.runner("w1").finish(lease, failed).await.unwrap();
            assert_eq!(f.row(id).await.status.as_str(), "dead");
            id
        }
    };
    let doomed = fail_with(ErrorCause::ContextOverflow).await;
    let (code, message, task) = refusal(f.act(doomed, ActionKind::Requeue, requeue(1), "alice").await);
    assert_eq!(code, RefusalCode::DeterministicFailure);
    assert!(message.contains("context_overflow") && message.contains("retry_deterministic"), "{message}");
    assert_eq!((task.status.as_str(), task.lease_epoch), ("dead", 1));
    assert_eq!(f.row(doomed).await, task, "nothing changed");
    assert_eq!(f.refusals(doomed).await, ["refused:deterministic_failure"]);

    let insist = ActionRequest { retry_deterministic: true, ..requeue(1) };
    let (task, action) = applied(f.act(doomed, ActionKind::Requeue, insist, "alice").await);
    assert_eq!((task.status.as_str(), task.lease_epoch, action.epoch_after), ("queued", 2, Some(2)));

    // A timeout may well pass next time: no question asked.
    let flaky = fail_with(ErrorCause::Timeout).await;
    applied(f.act(flaky, ActionKind::Requeue, requeue(1), "alice").await);

    // `retry_deterministic` only means something on a re-queue.
    let bad = ActionRequest { retry_deterministic: true, reason: "x".into(), ..Default::default() };
    assert_eq!(bad.validate(ActionKind::Compensate).unwrap_err().param, "retry_deterministic");

    // A fleet that calls timeouts deterministic, and one that calls nothing so.
    let strict = lastword_store::store_with_policy(
        db.clone(),
        Tokens::default(),
        lastword_core::RetryPolicy::parse("timeout, context_overflow").unwrap(),
    );
    let timed_out = fail_with(ErrorCause::Timeout).await;
    let request = requeue(1).validate(ActionKind::Requeue).unwrap();
    let outcome =
        strict.act(timed_out, ActionKind::Requeue, &request, &Actor::cli("ops"), f.now()).await.unwrap();
    assert_eq!(refusal(outcome.unwrap()).0, RefusalCode::DeterministicFailure);
    let lenient = lastword_store::store_with_policy(
        db,
        Tokens::default(),
        lastword_core::RetryPolicy::parse("none").unwrap(),
    );
    let overflowed = fail_with(ErrorCause::ContextOverflow).await;
    let outcome =
        lenient.act(overflowed, ActionKind::Requeue, &request, &Actor::cli("ops"), f.now()).await.unwrap();
    applied(outcome.unwrap());

    // A bulk re-queue leaves the doomed out unless asked, and says how many, whichever way the
    // tasks were chosen.
    let overflow = fail_with(ErrorCause::ContextOverflow).await;
    let timeout = fail_with(ErrorCause::Timeout).await;
    for selection in [
        BulkSelection::Tasks(vec![overflow, timeout]),
        BulkSelection::Filter(RunFilter {
            task_id: Some(overflow),
            ..RunFilter::default().failures_unless_narrowed()
        }),
    ] {
        let preview = f
            .store
            .requeue_preview(&selection, lastword_core::BulkOptions::default(), f.now())
            .await
            .unwrap();
        let ids = |refs: &[lastword_core::TaskRef]| refs.iter().map(|t| t.id).collect::<Vec<_>>();
        assert_eq!(ids(&preview.deterministic), [overflow], "{preview:?}");
        assert_eq!(preview.deterministic[0].last_failure, Some(ErrorCause::ContextOverflow));
        assert!(!ids(&preview.tasks).contains(&overflow), "{preview:?}");
        let with = lastword_core::BulkOptions { include_deterministic: true, ..Default::default() };
        let included = f.store.requeue_preview(&selection, with, f.now()).await.unwrap();
        assert!(ids(&included.tasks).contains(&overflow) && ids(&included.deterministic) == [overflow]);
        assert_ne!(preview.token, included.token, "the token names the set");
    }
    let selection = BulkSelection::Tasks(vec![overflow, timeout]);
    let preview =
        f.store.requeue_preview(&selection, lastword_core::BulkOptions::default(), f.now()).await.unwrap();
    let request = BulkRequeueRequest::confirming(&preview, "API recovered").validate().unwrap();
    match f.store.bulk_requeue(&selection, &request, &Actor::cli("ops"), f.now()).await.unwrap() {
        BulkOutcome::Applied { actions } => {
            assert_eq!(actions.iter().map(|a| a.task_id).collect::<Vec<_>>(), [timeout])
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(f.row(overflow).await.status.as_str(), "dead", "left out");
}

/// An attention item is taken with a note (audited, nothing on the task changes), taken over
/// by a second person, refused for an item the task does not have, and let go when the
/// incident ends (a re-queue); a double execution stays taken until compensated.
async fn an_attention_item_is_acknowledged_handed_over_and_let_go(db: Db) {
    use lastword_core::AttentionKind;
    let f = Fixture::new(db);
    let ack = |item: AttentionKind, note: &str| ActionRequest {
        reason: note.into(),
        attention: Some(item),
        expected_epoch: Some(1),
        ..Default::default()
    };
    let id = f.dead_task("w1").await;
    let detail = |id| {
        let store = f.store.clone();
        let now = f.now();
        async move { store.task_detail(id, now).await.unwrap().unwrap() }
    };
    let before = f.row(id).await;
    assert_eq!(detail(id).await.attention, [AttentionKind::Dead]);
    assert!(detail(id).await.acknowledgements.is_empty());

    let (task, action) = applied(
        f.act(
            id,
            ActionKind::Acknowledge,
            ack(AttentionKind::Dead, "investigating — API team paged"),
            "alice",
        )
        .await,
    );
    assert_eq!(task, before, "an acknowledgement changes nothing on the task");
    assert_eq!((action.action.as_str(), action.attention.map(|k| k.as_str())), ("acknowledge", Some("dead")));
    let taken = detail(id).await.acknowledgements;
    assert_eq!(taken.len(), 1);
    assert_eq!(
        (taken[0].actor.as_str(), taken[0].reason.as_str()),
        ("alice", "investigating — API team paged")
    );
    // The overview tells open from taken.
    let overview = |f: &Fixture| {
        let store = f.store.clone();
        let now = f.now();
        async move {
            store
                .overview(now - Duration::hours(1), now + secs(1), Duration::minutes(15), now)
                .await
                .unwrap()
                .attention
        }
    };
    let attention = overview(&f).await;
    assert_eq!((attention.dead_tasks, attention.taken.dead_tasks), (1, 1), "{attention:?}");

    f.clock.advance(secs(60));
    applied(
        f.act(
            id,
            ActionKind::Acknowledge,
            // Without the epoch seen (the CLI's default): it holds for the epoch it was applied at.
            ActionRequest {
                expected_epoch: None,
                ..ack(AttentionKind::Dead, "taking over, alice is off shift")
            },
            "bob",
        )
        .await,
    );
    let taken = detail(id).await.acknowledgements;
    assert_eq!(taken.iter().map(|a| a.actor.as_str()).collect::<Vec<_>>(), ["bob"], "the newest holds");

    let (code, message, _) =
        refusal(f.act(id, ActionKind::Acknowledge, ack(AttentionKind::DoubleExecution, "x"), "alice").await);
    assert_eq!(code, RefusalCode::NotAnAttentionItem);
    assert!(message.contains("open: dead"), "{message}");
    assert_eq!(f.refusals(id).await, ["refused:not_an_attention_item"]);
    let trail = f.store.task_actions(id).await.unwrap();
    assert_eq!(
        trail[0].attention.map(|k| k.as_str()),
        Some("double_execution"),
        "the refusal says what was tried"
    );

    // Re-queued: the incident is over; dead again later would be a new one.
    applied(
        f.act(id, ActionKind::Requeue, ActionRequest { expected_epoch: Some(1), ..requeue(1) }, "bob").await,
    );
    let after = detail(id).await;
    assert!(after.attention.is_empty() && after.acknowledgements.is_empty(), "{after:?}");
    assert_eq!(overview(&f).await.taken.dead_tasks, 0);

    // A double execution stays taken across epochs until compensated.
    let twice = f.double_executed().await;
    let epoch = f.row(twice).await.lease_epoch;
    assert!(detail(twice).await.attention.contains(&AttentionKind::DoubleExecution));
    let request = ActionRequest {
        expected_epoch: Some(epoch),
        ..ack(AttentionKind::DoubleExecution, "refund team paged")
    };
    let before = overview(&f).await;
    applied(f.act(twice, ActionKind::Acknowledge, request, "carol").await);
    assert_eq!(detail(twice).await.acknowledgements.len(), 1);
    let attention = overview(&f).await;
    assert_eq!(attention.needs_compensation, before.needs_compensation, "{attention:?}");
    assert_eq!((before.taken.needs_compensation, attention.taken.needs_compensation), (0, 1));
    let compensate = ActionRequest { reason: "refunded".into(), ..Default::default() };
    applied(f.act(twice, ActionKind::Compensate, compensate, "carol").await);
    let done = detail(twice).await;
    assert!(!done.attention.contains(&AttentionKind::DoubleExecution));
    assert!(done
        .acknowledgements
        .iter()
        .all(|a| a.attention.map(|k| k.as_str()) != Some("double_execution")));

    // The request names its item, and only an acknowledgement does.
    let bare = ActionRequest { reason: "x".into(), ..Default::default() };
    assert_eq!(bare.clone().validate(ActionKind::Acknowledge).unwrap_err().param, "attention");
    let stray = ActionRequest { attention: Some(AttentionKind::Dead), ..requeue(1) };
    assert_eq!(stray.validate(ActionKind::Requeue).unwrap_err().param, "attention");
}

lastword_store::on_every_backend!(
    requeue_of_a_live_lease_is_refused_unless_fenced_and_fencing_rejects_the_holder,
    a_stale_view_is_refused_with_what_changed_and_nothing_changes,
    a_double_submission_applies_once,
    compensation_is_recorded_leaves_attention_and_can_be_undone,
    compensating_an_old_dead_task_does_not_count_it_as_newly_dead,
    the_audit_of_a_deleted_task_survives_with_its_task_id,
    many_operators_at_once_apply_exactly_once_per_epoch,
    bulk_requeue_applies_the_previewed_set_once,
    a_filter_selecting_too_many_tasks_is_refused,
    the_audit_trail_filters_by_actor_action_and_time_and_pages,
    a_retry_that_cannot_work_needs_the_operator_to_say_the_cause_is_fixed,
    an_attention_item_is_acknowledged_handed_over_and_let_go,
);
