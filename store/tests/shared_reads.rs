//! `SharedReads`: identical reads at one data version reach the database once, a new version
//! or a write asks again, nothing is shared without a version, a replica serves the reads while
//! actions stay on the primary — and lists carry a bounded prefix of long outputs. On every
//! backend.

use chrono::{DateTime, Duration, TimeZone, Utc};
use lastword_core::{
    ActionKind, ActionOutcome, ActionRequest, PageRequest, RunFilter, Tokens, LIST_TEXT_PREFIX,
};
use lastword_store::shared_reads::VersionSource;
use lastword_store::testing::{exec, insert_task, scalar, sqlite_memory};
use lastword_store::{store_for, Db, SharedReads, Store};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

fn now() -> DateTime<Utc> {
    Utc.timestamp_opt(1_800_000_000, 0).unwrap()
}

/// A finished run of a new task, claimed `ago` before [`now`], with `output`.
async fn finished_run(db: &Db, ago: Duration, output: &str) -> (i64, i64) {
    let at = now() - ago;
    let task = insert_task(db, "reply", "unsafe", at).await;
    let run = scalar(
        db,
        "INSERT INTO runs (task_id, worker, lease_epoch, claimed_at, lease_expires_at, finished_at, \
         completion_rows, output) VALUES ($1, 'w1', 1, $2, $3, $3, 1, $4) RETURNING id",
        &[task.into(), at.into(), (at + Duration::seconds(30)).into(), output.into()],
    )
    .await;
    (task, run)
}

/// A version the test moves by hand, as the live hub's refresh version moves in the server.
fn version(start: Option<i64>) -> (Arc<AtomicI64>, VersionSource) {
    let v = Arc::new(AtomicI64::new(start.unwrap_or(-1)));
    let source = {
        let v = v.clone();
        Arc::new(move || Some(v.load(Ordering::SeqCst)).filter(|v| *v >= 0)) as VersionSource
    };
    (v, source)
}

fn counts(s: &SharedReads) -> (u64, u64) {
    let stats = s.stats();
    (stats.database.load(Ordering::SeqCst), stats.shared.load(Ordering::SeqCst))
}

// Twenty viewers asking the same question at one version cost one read; a new version asks the
// database again and sees what changed.
async fn identical_reads_at_one_version_share_one_database_read(db: Db) {
    finished_run(&db, Duration::minutes(5), "replied").await;
    let (v, source) = version(Some(7));
    let shared = Arc::new(SharedReads::new(store_for(db.clone(), Tokens::default()), source));
    let filter = RunFilter { since: Some(now() - Duration::hours(1)), ..RunFilter::default() };
    let page = PageRequest { after: None, limit: 50 };

    let asks = (0..20).map(|_| {
        let (shared, filter) = (shared.clone(), filter.clone());
        tokio::spawn(async move { shared.list_runs(&filter, &page, now()).await.unwrap() })
    });
    let answers: Vec<_> = futures::future::join_all(asks).await.into_iter().map(|a| a.unwrap()).collect();
    assert!(answers.iter().all(|a| a.runs.len() == 1 && *a == answers[0]));
    assert_eq!(counts(&shared), (1, 19), "one database read for twenty viewers");

    // Another question is its own read.
    shared.cause_facets(&filter, now()).await.unwrap();
    assert_eq!(counts(&shared).0, 2);

    // The data changed and the hub saw it: the same question reaches the database again.
    finished_run(&db, Duration::minutes(1), "replied again").await;
    assert_eq!(shared.list_runs(&filter, &page, now()).await.unwrap().runs.len(), 1, "same version: shared");
    v.store(8, Ordering::SeqCst);
    assert_eq!(
        shared.list_runs(&filter, &page, now()).await.unwrap().runs.len(),
        2,
        "new version: read again"
    );
    assert_eq!(counts(&shared).0, 3);
}

// Without a version (no hub yet, the CLI) every read goes to the database; an operator action
// clears the shared answers so the page that acted reads its own write back.
async fn no_version_means_no_sharing_and_actions_invalidate(db: Db) {
    let (task, _) = finished_run(&db, Duration::minutes(5), "replied").await;
    exec(&db, "UPDATE tasks SET status = 'completed', lease_epoch = 1 WHERE id = $1", &[task.into()]).await;
    let (v, source) = version(None);
    let shared = SharedReads::new(store_for(db.clone(), Tokens::default()), source);
    shared.task(task).await.unwrap();
    shared.task(task).await.unwrap();
    assert_eq!(counts(&shared), (2, 0));

    v.store(3, Ordering::SeqCst);
    assert_eq!(shared.task(task).await.unwrap().unwrap().status.as_str(), "completed");
    assert_eq!(shared.task(task).await.unwrap().unwrap().status.as_str(), "completed");
    assert_eq!(counts(&shared), (3, 1));
    requeue_at_epoch_1(&shared, task, "shared-reads-requeue").await.expect("the task");
    // Same version (the hub has not seen the write yet), yet the answer is fresh.
    assert_eq!(shared.task(task).await.unwrap().unwrap().status.as_str(), "queued");
}

/// alice re-queues `task`, which she saw at epoch 1, through `store`.
async fn requeue_at_epoch_1(store: &dyn Store, task: i64, request_id: &str) -> Option<ActionOutcome> {
    let request = ActionRequest {
        reason: "the API recovered".into(),
        expected_epoch: Some(1),
        request_id: Some(request_id.into()),
        ..ActionRequest::default()
    }
    .validate(ActionKind::Requeue)
    .unwrap();
    store
        .act(task, ActionKind::Requeue, &request, &lastword_core::Actor::new("alice", "local"), now())
        .await
        .unwrap()
}

// A replica serves the shared reads; the action goes to the primary.
async fn a_replica_serves_the_reads_and_the_primary_the_actions(primary: Db) {
    let replica = sqlite_memory().await;
    let (task, _) = finished_run(&primary, Duration::minutes(5), "on the primary").await;
    exec(&primary, "UPDATE tasks SET status = 'completed', lease_epoch = 1 WHERE id = $1", &[task.into()])
        .await;
    finished_run(&replica, Duration::minutes(5), "on the replica").await;
    let (_, source) = version(Some(1));
    let shared = SharedReads::new(store_for(primary.clone(), Tokens::default()), source)
        .with_replica(store_for(replica.clone(), Tokens::default()));
    let page = shared
        .list_runs(&RunFilter::default(), &PageRequest { after: None, limit: 10 }, now())
        .await
        .unwrap();
    assert_eq!(page.runs[0].run.output.as_deref(), Some("on the replica"));
    requeue_at_epoch_1(&shared, task, "replica-requeue").await.expect("the primary's task");
    let audited = scalar(&primary, "SELECT COUNT(*) FROM operator_actions", &[]).await;
    let on_replica = scalar(&replica, "SELECT COUNT(*) FROM operator_actions", &[]).await;
    assert_eq!((audited, on_replica), (1, 0));
}

// A list row carries at most LIST_TEXT_PREFIX characters of output and says when it was cut;
// the run itself still has the whole text.
async fn lists_carry_a_bounded_prefix_of_long_outputs(db: Db) {
    let long: String = "é".repeat(LIST_TEXT_PREFIX) + &"x".repeat(100_000);
    let (_, long_run) = finished_run(&db, Duration::minutes(2), &long).await;
    let (_, short_run) = finished_run(&db, Duration::minutes(1), "replied").await;
    let s = store_for(db, Tokens::default());
    let page =
        s.list_runs(&RunFilter::default(), &PageRequest { after: None, limit: 10 }, now()).await.unwrap();
    let row = |id| page.runs.iter().find(|r| r.run.id == id).expect("listed");
    let cut = row(long_run);
    assert!(cut.text_truncated);
    assert_eq!(cut.run.output.as_deref(), Some("é".repeat(LIST_TEXT_PREFIX).as_str()), "cut by characters");
    assert_eq!(cut.run.state, lastword_core::RunState::Acted, "the state is decided on the whole text");
    assert!(!row(short_run).text_truncated);
    assert_eq!(row(short_run).run.output.as_deref(), Some("replied"));
    let timeline = s.timeline(now() - Duration::minutes(10), now(), now()).await.unwrap();
    let on_timeline = timeline.iter().find(|r| r.run.id == long_run).expect("on the timeline");
    assert_eq!(
        on_timeline.run.output.as_ref().map(|o| o.chars().count()),
        Some(lastword_core::TIMELINE_TEXT_PREFIX)
    );
    assert!(on_timeline.text_truncated);
    let whole = s.run(long_run, now()).await.unwrap().unwrap();
    assert_eq!(whole.output.as_deref(), Some(long.as_str()), "one click away: the run has the whole text");
}

lastword_store::on_every_backend!(
    identical_reads_at_one_version_share_one_database_read,
    no_version_means_no_sharing_and_actions_invalidate,
    a_replica_serves_the_reads_and_the_primary_the_actions,
    lists_carry_a_bounded_prefix_of_long_outputs,
);
