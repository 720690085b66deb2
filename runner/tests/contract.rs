//! The runner contract, path by path, with the exact rows each move writes. Every case runs on
//! in-memory SQLite, a SQLite file and PostgreSQL (required in CI via
//! `LASTWORD_REQUIRE_POSTGRES=1`); time comes from a [`ManualClock`], so lease expiry is exact.

mod common;

use chrono::{DateTime, Duration, TimeZone, Utc};
use common::{secs, Fixture, LEASE};
use lastword_core::{run_state, Cause, ErrorCause, Run, RunState, Safety, Source, TaskStatus, Tokens};
use lastword_runner::{
    enqueue, ActionMessage, BlankMessage, Finish, Heartbeat, Lease, Outcome, Runner, RunnerConfig,
    RunnerError,
};
use lastword_store::{store_for, Db, NewTask};
use std::sync::Arc;

type StateAndCause = (RunState, Option<Cause>);

fn t0() -> DateTime<Utc> {
    // Sub-second precision on purpose: SQLite compares timestamps as text.
    Utc.timestamp_opt(1_800_000_000, 123_456_000).unwrap()
}

impl Fixture {
    fn new(db: Db) -> Self {
        Fixture::starting_at(db, t0())
    }

    async fn task_with(&self, kind: &str, source: Source, safety: Safety, max_attempts: i32) -> i64 {
        let task = NewTask::new(kind, source, safety)
            .with_payload(serde_json::json!({"text": "@bot please look", "n": 7}))
            .with_max_attempts(max_attempts);
        enqueue(&self.db, &task, self.now()).await.expect("enqueue")
    }

    async fn task(&self, kind: &str) -> i64 {
        self.task_with(kind, Source::Notification, Safety::Idempotent, 3).await
    }

    async fn runs(&self, task_id: i64) -> Vec<Run> {
        let runs = self.store.task_runs(task_id, self.now()).await.unwrap();
        for run in &runs {
            // The SQL twin and the Rust state function agree on everything the runner writes.
            assert_eq!(
                (run.state, run.cause),
                run_state(&run.facts(), self.now(), &Tokens::default()),
                "{run:?}"
            );
        }
        runs
    }
}

fn acted(text: &str) -> Outcome {
    Outcome::Acted(ActionMessage::new(text).unwrap())
}

async fn claim(r: &Runner) -> Lease {
    r.claim(None).await.unwrap().expect("a task to claim")
}

async fn enqueue_writes_a_queued_task(db: Db) {
    let f = Fixture::new(db);
    let id = f.task_with("send_digest", Source::Tick, Safety::Unsafe, 5).await;
    let t = f.row(id).await;
    assert_eq!(
        (t.kind.as_str(), t.source.as_str(), t.safety.as_str(), t.status.as_str()),
        ("send_digest", "tick", "unsafe", "queued")
    );
    assert_eq!(t.payload, serde_json::json!({"text": "@bot please look", "n": 7}));
    assert_eq!((t.lease_epoch, t.attempts, t.max_attempts), (0, 0, 5));
    assert_eq!((t.owner, t.lease_expires_at, t.result), (None, None, None));
    assert_eq!((t.created_at, t.updated_at), (t0(), t0()));
}

async fn claim_takes_the_task_and_inserts_its_run(db: Db) {
    let f = Fixture::new(db);
    let id = f.task_with("triage_issue", Source::Notification, Safety::Unsafe, 3).await;
    f.clock.advance(secs(1));
    let now = f.now();
    let lease = claim(&f.runner("w1")).await;
    assert_eq!((lease.task_id, lease.epoch, lease.attempts, lease.max_attempts), (id, 1, 1, 3));
    assert_eq!((lease.claimed_at, lease.expires_at), (now, now + secs(LEASE)));
    assert_eq!(
        (lease.kind.as_str(), lease.source, lease.safety),
        ("triage_issue", Source::Notification, Safety::Unsafe)
    );
    assert_eq!(lease.payload["n"], 7);

    let t = f.row(id).await;
    assert_eq!(t.status.as_str(), "leased");
    assert_eq!(t.owner.as_deref(), Some("w1"));
    assert_eq!((t.lease_epoch, t.attempts), (1, 1));
    assert_eq!(t.lease_expires_at, Some(now + secs(LEASE)));
    assert_eq!((t.created_at, t.updated_at), (t0(), now));

    let runs = f.runs(id).await;
    assert_eq!(runs.len(), 1);
    let r = &runs[0];
    assert_eq!((r.id, r.task_id, r.worker.as_str(), r.lease_epoch), (lease.run_id, id, "w1", 1));
    assert_eq!((r.claimed_at, r.lease_expires_at), (now, now + secs(LEASE)));
    assert_eq!((r.heartbeat_at, r.finished_at, r.completion_rows), (None, None, None));
    assert_eq!((r.output.as_deref(), r.error.as_deref(), r.error_detail.as_deref()), (None, None, None));
    assert_eq!(r.state, RunState::Running);

    // Held: nobody else can take it, not even just before expiry.
    f.clock.advance(secs(LEASE) - Duration::milliseconds(1));
    assert!(f.runner("w2").claim(None).await.unwrap().is_none());
}

async fn claims_go_oldest_first_and_filter_by_kind(db: Db) {
    let f = Fixture::new(db);
    let a = f.task("reply_to_mention").await;
    let b = f.task("sync_calendar").await;
    let r = f.runner("w1");
    let only = |k: &str| vec![k.to_string()];
    assert!(r.claim(Some(&only("send_digest"))).await.unwrap().is_none());
    assert_eq!(r.claim(Some(&only("sync_calendar"))).await.unwrap().unwrap().task_id, b);
    assert!(r.claim(Some(&[])).await.unwrap().is_none(), "an empty filter matches nothing");
    let c = f.task("reply_to_mention").await;
    let both = vec!["reply_to_mention".to_string(), "x".to_string()];
    assert_eq!(r.claim(Some(&both)).await.unwrap().unwrap().task_id, a, "lowest id first");
    assert_eq!(r.claim(None).await.unwrap().unwrap().task_id, c);
    assert!(r.claim(None).await.unwrap().is_none());
}

async fn heartbeat_extends_the_lease(db: Db) {
    let f = Fixture::new(db);
    let id = f.task("reply_to_mention").await;
    let w1 = f.runner("w1");
    let mut lease = claim(&w1).await;
    let claimed_at = f.now();
    f.clock.advance(secs(20));
    let beat = f.now();
    assert_eq!(w1.heartbeat(&mut lease).await.unwrap(), Heartbeat::Extended { until: beat + secs(LEASE) });
    assert_eq!(lease.expires_at, beat + secs(LEASE));

    let t = f.row(id).await;
    assert_eq!(t.lease_expires_at, Some(beat + secs(LEASE)));
    assert_eq!(t.updated_at, claimed_at, "a heartbeat moves the expiry only");
    let r = &f.runs(id).await[0];
    assert_eq!((r.heartbeat_at, r.lease_expires_at), (Some(beat), beat + secs(LEASE)));
    assert_eq!(r.claimed_at, claimed_at);

    // Past the original expiry but inside the extended one: still held.
    f.clock.advance(secs(25));
    assert!(f.runner("w2").claim(None).await.unwrap().is_none());
    assert_eq!(f.runs(id).await[0].state, RunState::Running);
}

async fn heartbeat_after_a_reclaim_is_lost(db: Db) {
    let f = Fixture::new(db);
    let id = f.task("reply_to_mention").await;
    let (w1, w2) = (f.runner("w1"), f.runner("w2"));
    let mut old = claim(&w1).await;
    let old_expiry = old.expires_at;
    f.clock.advance(secs(LEASE + 1));
    let new = claim(&w2).await;
    assert_eq!(new.epoch, 2);
    f.clock.advance(secs(1));
    assert_eq!(
        w1.heartbeat(&mut old).await.unwrap(),
        Heartbeat::Lost { holder: Some("w2".into()), epoch: 2 }
    );
    assert_eq!(old.expires_at, old_expiry, "a lost heartbeat extends nothing");
    let t = f.row(id).await;
    assert_eq!((t.owner.as_deref(), t.lease_expires_at), (Some("w2"), Some(new.expires_at)));
    let runs = f.runs(id).await;
    assert_eq!((runs[0].heartbeat_at, runs[0].lease_expires_at), (None, old_expiry));
}

async fn accepted_finish_writes_the_task_and_the_run(db: Db) {
    let f = Fixture::new(db);
    let id = f.task("reply_to_mention").await;
    let w1 = f.runner("w1");
    let lease = claim(&w1).await;
    let run_id = lease.run_id;
    f.clock.advance(secs(5));
    let done = f.now();
    assert_eq!(
        w1.finish(lease, acted("replied to #42")).await.unwrap(),
        Finish::Accepted { status: TaskStatus::Completed }
    );

    let t = f.row(id).await;
    assert_eq!((t.status.as_str(), t.result.as_deref()), ("completed", Some("replied to #42")));
    assert_eq!((t.owner, t.lease_expires_at, t.updated_at), (None, None, done));
    assert_eq!((t.lease_epoch, t.attempts), (1, 1));
    let r = &f.runs(id).await[0];
    assert_eq!(r.id, run_id);
    assert_eq!((r.finished_at, r.completion_rows), (Some(done), Some(1)));
    assert_eq!(
        (r.output.as_deref(), r.error.as_deref(), r.error_detail.as_deref()),
        (Some("replied to #42"), None, None)
    );
    assert_eq!((r.state, r.cause), (RunState::Acted, None));
    // Completed tasks are not claimable, even after the old lease would have lapsed.
    f.clock.advance(secs(LEASE * 2));
    assert!(w1.claim(None).await.unwrap().is_none());
}

async fn no_action_and_skip_write_the_configured_tokens(db: Db) {
    let f = Fixture::new(db);
    let notification = f.task("reply_to_mention").await;
    let tick = f.task_with("sync_calendar", Source::Tick, Safety::Idempotent, 3).await;
    let w1 = f.runner("w1");
    assert_eq!(
        w1.finish(claim(&w1).await, Outcome::NoActionNeeded).await.unwrap(),
        Finish::Accepted { status: TaskStatus::Completed }
    );
    assert_eq!(
        w1.finish(claim(&w1).await, Outcome::Skip).await.unwrap(),
        Finish::Accepted { status: TaskStatus::Completed }
    );
    assert_eq!(f.row(notification).await.result.as_deref(), Some("no action needed"));
    assert_eq!(f.row(tick).await.result.as_deref(), Some("skip"));
    assert_eq!(f.runs(notification).await[0].output.as_deref(), Some("no action needed"));
    assert_eq!(f.runs(notification).await[0].state, RunState::NoAction);
    assert_eq!(f.runs(tick).await[0].output.as_deref(), Some("skip"));
    assert_eq!(f.runs(tick).await[0].state, RunState::Skip);

    // A fleet with its own words: the runner writes them, a dashboard with the same tokens reads them.
    let tokens = Tokens { no_action: "NOOP".into(), skip: "idle".into() };
    let custom = Runner::new(
        f.db.clone(),
        "w9",
        RunnerConfig { lease: secs(LEASE), tokens: tokens.clone() },
        Arc::new(f.clock.clone()),
    );
    let id = f.task("reply_to_mention").await;
    custom.finish(claim(&custom).await, Outcome::NoActionNeeded).await.unwrap();
    let run = &store_for(f.db.clone(), tokens).task_runs(id, f.now()).await.unwrap()[0];
    assert_eq!((run.output.as_deref(), run.state), (Some("NOOP"), RunState::NoAction));
}

async fn late_finish_after_a_reclaim_is_a_lost_lease(db: Db) {
    let f = Fixture::new(db);
    let id = f.task_with("reply_to_mention", Source::Notification, Safety::Unsafe, 3).await;
    let (w1, w2) = (f.runner("w1"), f.runner("w2"));
    let slow = claim(&w1).await;
    f.clock.advance(secs(LEASE + 15)); // the 30 s lease vs 45 s run case
    let fresh = claim(&w2).await;
    let reclaimed_at = f.now();
    f.clock.advance(secs(1));
    let late = f.now();
    let slow_run = slow.run_id;
    assert_eq!(
        w1.finish(slow, acted("sent the reply")).await.unwrap(),
        Finish::LostLease { holder: Some("w2".into()), epoch: 2 }
    );
    // The task is untouched: still w2's, no result.
    let t = f.row(id).await;
    assert_eq!(
        (t.status.as_str(), t.owner.as_deref(), t.lease_epoch, t.result),
        ("leased", Some("w2"), 2, None)
    );
    assert_eq!(t.updated_at, reclaimed_at);
    // The discarded output is kept on the late run, with zero rows matched.
    let runs = f.runs(id).await;
    assert_eq!(runs.len(), 2);
    let r = &runs[0];
    assert_eq!((r.id, r.worker.as_str(), r.lease_epoch), (slow_run, "w1", 1));
    assert_eq!(
        (r.finished_at, r.completion_rows, r.output.as_deref()),
        (Some(late), Some(0), Some("sent the reply"))
    );
    assert_eq!((r.state, r.cause), (RunState::LostLease, Some(Cause::LostLease)));
    assert_eq!(runs[1].state, RunState::Running);

    // The holder finishes normally; the task's result is the holder's.
    assert_eq!(
        w2.finish(fresh, Outcome::NoActionNeeded).await.unwrap(),
        Finish::Accepted { status: TaskStatus::Completed }
    );
    assert_eq!(f.row(id).await.result.as_deref(), Some("no action needed"));

    // A late *failure* is just as lost, and keeps its error.
    let id = f.task("triage_issue").await;
    let slow = claim(&w1).await;
    f.clock.advance(secs(LEASE));
    let fresh = claim(&w2).await;
    let detail = "deadline exceeded after 45s".to_string();
    let lost = w1
        .finish(slow, Outcome::Failed { cause: ErrorCause::Timeout, detail: detail.clone() })
        .await
        .unwrap();
    assert_eq!(lost, Finish::LostLease { holder: Some("w2".into()), epoch: 2 });
    let r = &f.runs(id).await[0];
    assert_eq!(
        (r.completion_rows, r.error.as_deref(), r.error_detail.as_deref()),
        (Some(0), Some("timeout"), Some(detail.as_str()))
    );
    assert_eq!(r.state, RunState::LostLease, "zero rows takes precedence over the error");
    assert_eq!(f.row(id).await.status.as_str(), "leased", "the failure did not re-queue w2's task");
    w2.finish(fresh, Outcome::Skip).await.unwrap();
}

async fn failures_requeue_until_max_attempts_then_the_task_is_dead(db: Db) {
    let f = Fixture::new(db);
    let id = f.task_with("send_digest", Source::Tick, Safety::Unsafe, 2).await;
    let w1 = f.runner("w1");
    let first = claim(&w1).await;
    f.clock.advance(secs(2));
    let failed_at = f.now();
    let out = w1
        .finish(
            first,
            Outcome::Failed { cause: ErrorCause::ApiError, detail: "429 Too Many Requests".into() },
        )
        .await
        .unwrap();
    assert_eq!(out, Finish::Accepted { status: TaskStatus::Queued });
    let t = f.row(id).await;
    assert_eq!((t.status.as_str(), t.owner, t.lease_expires_at, t.result), ("queued", None, None, None));
    assert_eq!((t.attempts, t.lease_epoch, t.updated_at), (1, 1, failed_at));
    let r = &f.runs(id).await[0];
    assert_eq!((r.finished_at, r.completion_rows, r.output.as_deref()), (Some(failed_at), Some(1), None));
    assert_eq!(
        (r.error.as_deref(), r.error_detail.as_deref()),
        (Some("api_error"), Some("429 Too Many Requests"))
    );
    assert_eq!((r.state, r.cause), (RunState::Failed, Some(Cause::ApiError)));

    let second = claim(&w1).await;
    assert_eq!((second.epoch, second.attempts), (2, 2));
    let out = w1
        .finish(
            second,
            Outcome::Failed { cause: ErrorCause::ContextOverflow, detail: "prompt is 210k tokens".into() },
        )
        .await
        .unwrap();
    assert_eq!(out, Finish::Accepted { status: TaskStatus::Dead });
    let t = f.row(id).await;
    assert_eq!((t.status.as_str(), t.owner, t.attempts), ("dead", None, 2));
    assert!(w1.claim(None).await.unwrap().is_none(), "dead tasks are not claimed");
    let causes: Vec<_> = f.runs(id).await.iter().map(|r| r.cause).collect();
    assert_eq!(causes, vec![Some(Cause::ApiError), Some(Cause::ContextOverflow)]);
}

async fn an_expired_lease_is_reclaimed_under_a_new_epoch(db: Db) {
    let f = Fixture::new(db);
    let id = f.task("reply_to_mention").await;
    let (w1, w2) = (f.runner("w1"), f.runner("w2"));
    let silent = claim(&w1).await; // and never heard from again
    f.clock.advance(secs(LEASE) - Duration::microseconds(1));
    assert!(w2.claim(None).await.unwrap().is_none(), "one microsecond before expiry");
    f.clock.advance(Duration::microseconds(1));
    let now = f.now();
    let lease = w2.claim(None).await.unwrap().expect("expiry is inclusive: lease_expires_at <= now");
    assert_eq!((lease.task_id, lease.epoch, lease.attempts), (id, 2, 2));
    let t = f.row(id).await;
    assert_eq!(
        (t.owner.as_deref(), t.lease_epoch, t.attempts, t.lease_expires_at),
        (Some("w2"), 2, 2, Some(now + secs(LEASE)))
    );
    let runs = f.runs(id).await;
    assert_eq!(runs.len(), 2);
    assert_eq!(
        (runs[0].id, runs[0].lease_epoch, runs[0].finished_at, runs[0].completion_rows),
        (silent.run_id, 1, None, None)
    );
    assert_eq!((runs[0].output.as_deref(), runs[0].error.as_deref()), (None, None));
    assert_eq!((runs[0].state, runs[0].cause), (RunState::Silent, Some(Cause::Silent)));
    assert_eq!(
        (runs[1].worker.as_str(), runs[1].lease_epoch, runs[1].claimed_at, runs[1].state),
        ("w2", 2, now, RunState::Running)
    );
}

async fn a_lapsed_lease_with_no_attempts_left_is_dead(db: Db) {
    let f = Fixture::new(db);
    let last_try = f.task_with("send_digest", Source::Tick, Safety::Unsafe, 1).await;
    let w1 = f.runner("w1");
    let lease = claim(&w1).await;
    assert_eq!(lease.task_id, last_try);
    let next = f.task("reply_to_mention").await;
    f.clock.advance(secs(LEASE + 1));
    let now = f.now();
    let taken = f.runner("w2").claim(None).await.unwrap().expect("the next candidate");
    assert_eq!(taken.task_id, next, "the exhausted task is skipped in the same claim");
    let t = f.row(last_try).await;
    assert_eq!((t.status.as_str(), t.owner, t.lease_expires_at), ("dead", None, None));
    assert_eq!((t.attempts, t.lease_epoch, t.updated_at), (1, 1, now));
    let runs = f.runs(last_try).await;
    assert_eq!(runs.len(), 1, "no run for a claim that did not happen");
    assert_eq!(runs[0].state, RunState::Silent);
    // Its late finish is a lost lease: the owner was cleared.
    assert_eq!(w1.finish(lease, Outcome::Skip).await.unwrap(), Finish::LostLease { holder: None, epoch: 1 });
    assert_eq!(f.row(last_try).await.status.as_str(), "dead");
}

async fn effects_carry_the_fencing_token_and_are_idempotent(db: Db) {
    let f = Fixture::new(db);
    let id = f.task_with("reply_to_mention", Source::Notification, Safety::Unsafe, 3).await;
    let (w1, w2) = (f.runner("w1"), f.runner("w2"));
    let slow = claim(&w1).await;
    let key = format!("task-{id}-reply");
    let first = w1.record_effect(&slow, "post_reply", &key).await.unwrap();
    assert!(first.lease_current);
    f.clock.advance(secs(1));
    let again = w1.record_effect(&slow, "post_reply", &key).await.unwrap();
    assert_eq!(again.id, first.id, "the same key from the same run is one effect");
    assert!(again.lease_current);

    f.clock.advance(secs(LEASE));
    let fresh = claim(&w2).await;
    let second = w2.record_effect(&fresh, "post_reply", &key).await.unwrap();
    assert_ne!(second.id, first.id);
    assert!(second.lease_current);
    let stale = w1.record_effect(&slow, "add_label", &format!("task-{id}-label")).await.unwrap();
    assert!(!stale.lease_current, "recorded anyway, flagged as run under a stale token");

    let effects = f.store.task_effects(id).await.unwrap();
    let rows: Vec<_> = effects
        .iter()
        .map(|e| {
            (
                e.id,
                e.run_id,
                e.task_id,
                e.lease_epoch,
                e.kind.as_str(),
                e.idempotency_key.as_str(),
                e.created_at,
            )
        })
        .collect();
    let label = format!("task-{id}-label");
    assert_eq!(
        rows,
        vec![
            (first.id, slow.run_id, id, 1, "post_reply", key.as_str(), t0()),
            (second.id, fresh.run_id, id, 2, "post_reply", key.as_str(), t0() + secs(LEASE + 1)),
            (stale.id, slow.run_id, id, 1, "add_label", label.as_str(), t0() + secs(LEASE + 1)),
        ]
    );
    // The dashboard's double execution: one key under two epochs.
    let epochs: std::collections::BTreeSet<i64> =
        effects.iter().filter(|e| e.idempotency_key == key).map(|e| e.lease_epoch).collect();
    assert_eq!(epochs.into_iter().collect::<Vec<_>>(), vec![1, 2]);
}

async fn a_run_is_finished_at_most_once(db: Db) {
    let f = Fixture::new(db);
    let id = f.task("reply_to_mention").await;
    let w1 = f.runner("w1");
    let lease = claim(&w1).await;
    let mut copy = lease.clone();
    w1.finish(lease, acted("done")).await.unwrap();
    f.clock.advance(secs(1));
    let err = w1.finish(copy.clone(), Outcome::Skip).await.unwrap_err();
    assert!(matches!(err, RunnerError::AlreadyFinished(run) if run == copy.run_id), "{err}");
    assert!(!err.is_transient());
    let r = &f.runs(id).await[0];
    assert_eq!(
        (r.output.as_deref(), r.completion_rows, r.finished_at),
        (Some("done"), Some(1), Some(t0())),
        "untouched"
    );
    assert_eq!(f.row(id).await.result.as_deref(), Some("done"));
    // A heartbeat after the finish learns the lease is gone.
    assert_eq!(w1.heartbeat(&mut copy).await.unwrap(), Heartbeat::Lost { holder: None, epoch: 1 });
}

async fn finish_unchecked_records_the_contract_violation(db: Db) {
    let f = Fixture::new(db);
    let w1 = f.runner("w1");
    for output in [Some(""), Some(" \n"), None] {
        let id = f.task("reply_to_mention").await;
        let out = w1.finish_unchecked(claim(&w1).await, output.map(str::to_string)).await.unwrap();
        assert_eq!(out, Finish::Accepted { status: TaskStatus::Completed });
        let r = &f.runs(id).await[0];
        assert_eq!((r.output.as_deref(), r.error.as_deref(), r.completion_rows), (output, None, Some(1)));
        assert_eq!((r.state, r.cause), (RunState::EmptyOutput, Some(Cause::EmptyOutput)));
    }
}

/// Every state the dashboard distinguishes comes out of the runner API alone.
async fn every_state_comes_out_of_the_runner(db: Db) {
    let f = Fixture::new(db);
    let (w1, w2) = (f.runner("w1"), f.runner("w2"));
    let mut expect: Vec<(i64, Vec<StateAndCause>)> = vec![];

    let id = f.task("reply_to_mention").await;
    w1.finish(claim(&w1).await, acted("replied")).await.unwrap();
    expect.push((id, vec![(RunState::Acted, None)]));
    let id = f.task("reply_to_mention").await;
    w1.finish(claim(&w1).await, Outcome::NoActionNeeded).await.unwrap();
    expect.push((id, vec![(RunState::NoAction, None)]));
    let id = f.task("sync_calendar").await;
    w1.finish(claim(&w1).await, Outcome::Skip).await.unwrap();
    expect.push((id, vec![(RunState::Skip, None)]));
    for cause in ErrorCause::ALL {
        let id = f.task_with("triage_issue", Source::Notification, Safety::Idempotent, 1).await;
        let out = w1
            .finish(claim(&w1).await, Outcome::Failed { cause, detail: format!("{cause:?}") })
            .await
            .unwrap();
        assert_eq!(
            out,
            Finish::Accepted { status: TaskStatus::Dead },
            "one attempt only, so it is not claimed again"
        );
        expect.push((id, vec![(RunState::Failed, Some(cause.into()))]));
    }
    let id = f.task("reply_to_mention").await;
    w1.finish_unchecked(claim(&w1).await, Some(String::new())).await.unwrap();
    expect.push((id, vec![(RunState::EmptyOutput, Some(Cause::EmptyOutput))]));

    // A slow run loses its lease to w2 and finishes late; a silent one never finishes.
    let slow_task = f.task("send_digest").await;
    let slow = claim(&w1).await;
    let silent_task = f.task("triage_issue").await;
    let _silent = claim(&w1).await;
    f.clock.advance(secs(LEASE));
    let a = claim(&w2).await;
    let b = claim(&w2).await;
    assert_eq!((a.task_id, b.task_id), (slow_task, silent_task));
    w1.finish(slow, acted("sent the digest")).await.unwrap();
    w2.finish(a, acted("sent the digest")).await.unwrap();
    expect.push((slow_task, vec![(RunState::LostLease, Some(Cause::LostLease)), (RunState::Acted, None)]));
    expect.push((silent_task, vec![(RunState::Silent, Some(Cause::Silent)), (RunState::Running, None)]));

    let mut seen = std::collections::BTreeSet::new();
    for (task, states) in expect {
        let got: Vec<_> = f.runs(task).await.iter().map(|r| (r.state, r.cause)).collect();
        assert_eq!(got, states, "task {task}");
        seen.extend(got.into_iter().map(|(s, _)| s));
    }
    assert_eq!(seen.len(), RunState::ALL.len(), "every state: {seen:?}");
}

/// What each move logs in `change_log` (migration 0008): one row per runner transaction, its
/// run's (a claim, a finish), the effect's for an effect, none for a heartbeat inside the lease —
/// but a row for a heartbeat that revives a run whose lease had lapsed (silent → running) and
/// for a task that dies at a claim without a run written.
async fn each_runner_move_logs_one_row_and_a_heartbeat_none(db: Db) {
    let f = Fixture::new(db.clone());
    let logged = || async {
        let sql = "SELECT table_name || ' ' || row_id FROM change_log ORDER BY id";
        match &db {
            Db::Postgres(p) => sqlx::query_scalar::<_, String>(sql).fetch_all(p).await.unwrap(),
            Db::Sqlite(p) => sqlx::query_scalar::<_, String>(sql).fetch_all(p).await.unwrap(),
        }
    };
    let task = f.task("reply_to_mention").await;
    let w1 = f.runner("w1");
    let mut lease = claim(&w1).await;
    let run = lease.run_id;
    assert_eq!(logged().await, [format!("tasks {task}"), format!("runs {run}")], "enqueue, then the claim");

    f.clock.advance(secs(10));
    assert!(matches!(w1.heartbeat(&mut lease).await.unwrap(), Heartbeat::Extended { .. }));
    f.clock.advance(secs(10));
    assert!(matches!(w1.heartbeat(&mut lease).await.unwrap(), Heartbeat::Extended { .. }));
    assert_eq!(logged().await.len(), 2, "heartbeats inside the lease log nothing");

    w1.record_effect(&lease, "send_reply", "reply-1").await.unwrap();
    assert!(logged().await[2].starts_with("effects "));

    // The lease lapses unnoticed (nobody re-claims), then the worker beats again: the run was
    // silent and is running again, a change of state.
    f.clock.advance(secs(LEASE + 5));
    assert!(matches!(w1.heartbeat(&mut lease).await.unwrap(), Heartbeat::Extended { .. }));
    assert_eq!(logged().await[3..], [format!("runs {run}")]);

    w1.finish(lease, acted("replied")).await.unwrap();
    assert_eq!(logged().await[4..], [format!("runs {run}")], "the finish: its run's row only");

    // A task out of attempts whose lease lapsed dies at the next claim, which writes no run.
    let last_try = f.task_with("send_digest", Source::Tick, Safety::Unsafe, 1).await;
    let lease = claim(&w1).await;
    f.clock.advance(secs(LEASE + 1));
    assert!(f.runner("w2").claim(None).await.unwrap().is_none());
    assert_eq!(
        logged().await[5..],
        [format!("tasks {last_try}"), format!("runs {}", lease.run_id), format!("tasks {last_try}")],
        "enqueue, claim, death"
    );
}

/// A poison task that crashes every worker is quarantined after `quarantine_after(3)` claims:
/// the fourth claim kills it with `dead_reason = loop` and takes the next task instead; the
/// dashboard's loop rule listed it before; a runner without the setting would claim it again;
/// an operator's re-queue gives it a fresh budget.
async fn a_task_in_a_reclaim_loop_is_quarantined(db: Db) {
    use lastword_core::{ActionKind, ActionOutcome, ActionRequest, Actor, DeadReason};
    let f = Fixture::new(db);
    let poison = f.task_with("parse_pdf", Source::Tick, Safety::Idempotent, 10).await;
    let guarded = f.runner("w1").quarantine_after(3);
    let crash = || Outcome::Failed { cause: ErrorCause::Crash, detail: "segfault in the parser".into() };
    // Two crashes, then a lease that lapses: three failed claims in a row.
    for _ in 0..2 {
        let lease = guarded.claim(None).await.unwrap().expect("the poison task");
        guarded.finish(lease, crash()).await.unwrap();
        f.clock.advance(secs(1));
    }
    let lapsed = guarded.claim(None).await.unwrap().expect("the poison task, a third time");
    assert_eq!(lapsed.task_id, poison);
    f.clock.advance(secs(LEASE + 1));
    let report = lastword_store::leases::report(
        &f.db,
        &Tokens::default(),
        None,
        &lastword_core::leases::LeaseWindow::Between(t0(), f.now()),
        f.now(),
    )
    .await
    .unwrap();
    assert_eq!(
        report.loops.iter().map(|l| l.task_id).collect::<Vec<_>>(),
        vec![poison],
        "the dashboard sees the loop"
    );
    let healthy = f.task("reply").await;
    let next = guarded.claim(None).await.unwrap().expect("the next task, not the poison one");
    assert_eq!(next.task_id, healthy, "quarantined instead of claimed, and the claim moved on");
    let dead = f.row(poison).await;
    assert_eq!((dead.status.as_str(), dead.dead_reason, dead.attempts), ("dead", Some(DeadReason::Loop), 3));
    assert_eq!(dead.owner, None);
    assert_eq!(f.runs(poison).await.len(), 3, "no fourth run");
    guarded.finish(next, acted("replied")).await.unwrap();

    // A fresh budget after a re-queue: claimed again, not quarantined on sight.
    let request =
        ActionRequest { reason: "parser fixed".into(), expected_epoch: Some(3), ..Default::default() };
    let applied =
        f.store.act(poison, ActionKind::Requeue, &request, &Actor::new("alice", "session"), f.now()).await;
    match applied.unwrap() {
        Some(ActionOutcome::Applied { task, .. }) => {
            assert_eq!((task.status.as_str(), task.dead_reason, task.attempts), ("queued", None, 0))
        }
        other => panic!("expected the re-queue to apply, got {other:?}"),
    }
    let again = guarded.claim(None).await.unwrap().expect("the re-queued task");
    assert_eq!(again.task_id, poison);

    // Without the setting the same streak is claimed again (max_attempts 10 still allows it).
    let other = f.task_with("parse_pdf", Source::Tick, Safety::Idempotent, 10).await;
    guarded.finish(again, acted("parsed")).await.unwrap();
    let plain = f.runner("w2");
    for _ in 0..3 {
        let lease = plain.claim(None).await.unwrap().expect("the other task");
        assert_eq!(lease.task_id, other);
        plain.finish(lease, crash()).await.unwrap();
    }
    assert_eq!(plain.claim(None).await.unwrap().map(|l| l.task_id), Some(other), "claimed a fourth time");
    assert_eq!(f.row(other).await.dead_reason, None);
}

lastword_store::on_every_backend!(
    a_task_in_a_reclaim_loop_is_quarantined,
    enqueue_writes_a_queued_task,
    claim_takes_the_task_and_inserts_its_run,
    claims_go_oldest_first_and_filter_by_kind,
    heartbeat_extends_the_lease,
    heartbeat_after_a_reclaim_is_lost,
    accepted_finish_writes_the_task_and_the_run,
    no_action_and_skip_write_the_configured_tokens,
    late_finish_after_a_reclaim_is_a_lost_lease,
    failures_requeue_until_max_attempts_then_the_task_is_dead,
    an_expired_lease_is_reclaimed_under_a_new_epoch,
    a_lapsed_lease_with_no_attempts_left_is_dead,
    effects_carry_the_fencing_token_and_are_idempotent,
    a_run_is_finished_at_most_once,
    finish_unchecked_records_the_contract_violation,
    every_state_comes_out_of_the_runner,
    each_runner_move_logs_one_row_and_a_heartbeat_none,
);

#[test]
fn an_action_message_cannot_be_blank() {
    assert_eq!(ActionMessage::new(""), Err(BlankMessage));
    assert_eq!(ActionMessage::new("   \n\t"), Err(BlankMessage));
    assert_eq!(ActionMessage::new("labelled bug").unwrap().as_str(), "labelled bug");
}

/// `docs/contract.md` quotes every statement the crate runs, verbatim (white space aside), so a
/// runner written in another language from the document writes the same rows.
#[test]
fn the_contract_document_quotes_every_statement() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/contract.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let doc = squash(&doc);
    for (name, statement) in lastword_runner::sql::ALL {
        assert!(
            doc.contains(&squash(statement)),
            "docs/contract.md does not quote sql::{name}:\n{statement}"
        );
    }
    assert!(doc.contains(lastword_store::Backend::Sqlite.begin_write()));
    assert!(
        doc.to_lowercase().contains("schema version 0001"),
        "the document names the schema version it describes"
    );
}

/// At scale the claim reads the claimable tasks only: over 20 000 finished tasks PostgreSQL
/// plans the candidate through `tasks_claimable_idx` (migration 0007), not by walking the
/// primary key past the history — the walk measured 350 ms per claim at 2 M finished tasks.
#[tokio::test]
async fn the_claim_reads_only_claimable_tasks_on_postgres() {
    let Some(db) =
        lastword_store::testing::postgres("the_claim_reads_only_claimable_tasks_on_postgres").await
    else {
        return;
    };
    let Db::Postgres(pool) = &db else { unreachable!() };
    lastword_store::testing::insert_completed_tasks(pool, 20_000).await;
    let fixture = Fixture::new(db.clone());
    let queued = fixture.task("reply").await;
    sqlx::query("ANALYZE tasks").execute(pool).await.unwrap();

    let plan: Vec<(String,)> = sqlx::query_as(&format!(
        "EXPLAIN (ANALYZE, BUFFERS) {}",
        lastword_runner::sql::postgres::CLAIM_CANDIDATE
    ))
    .bind(fixture.now())
    .bind(None::<Vec<String>>)
    .fetch_all(pool)
    .await
    .unwrap();
    let plan: String = plan.into_iter().map(|(l,)| l + "\n").collect();
    assert!(plan.contains("tasks_claimable_idx"), "{plan}");
    assert!(!plan.contains("tasks_pkey") && !plan.contains("Seq Scan"), "{plan}");
    // And the claim takes the one queued task.
    assert_eq!(claim(&fixture.runner("w1")).await.task_id, queued);
    lastword_store::testing::discard_postgres(db).await;
}
