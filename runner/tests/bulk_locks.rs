//! A bulk re-queue of the largest set allowed (500 tasks) must not stall the fleet it is
//! repairing: a worker heartbeating another task meanwhile keeps its lease, and the test
//! prints how long its longest heartbeat waited, on a SQLite file (one writer at a time, so
//! the bulk transaction's length is what a heartbeat can wait) and on PostgreSQL (row locks:
//! a task the bulk action skips or does not select is never locked by it).
//!
//! The figures are printed, not asserted: machines are shared and noisy, so the assertions
//! are about correctness (every heartbeat extended its lease, every task re-queued once) and
//! the numbers go in the notes with the command that printed them:
//! `cargo test -p lastword-runner --test bulk_locks -- --nocapture`.

use chrono::Utc;
use lastword_core::action::BULK_MAX;
use lastword_core::{BulkOutcome, BulkRequeueRequest, BulkSelection, Safety, Source, Tokens};
use lastword_runner::{enqueue, Heartbeat, ManualClock, NewTask, Runner, RunnerConfig};
use lastword_store::testing::{exec, insert_task};
use lastword_store::{store_for, Db};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

async fn a_500_task_bulk_requeue_leaves_live_workers_heartbeating(db: Db, backend: &str) {
    let clock = ManualClock::new(Utc::now());
    let store = store_for(db.clone(), Tokens::default());
    let mut ids = Vec::with_capacity(BULK_MAX);
    for _ in 0..BULK_MAX {
        ids.push(insert_task(&db, "sweep", "idempotent", Utc::now()).await);
    }
    exec(&db, "UPDATE tasks SET status = 'dead', lease_epoch = 1 WHERE kind = 'sweep'", &[]).await;

    // A worker holding a lease on a task the sweep does not touch.
    let live = NewTask::new("live", Source::Notification, Safety::Idempotent);
    enqueue(&db, &live, Utc::now()).await.unwrap();
    let worker = Runner::new(db.clone(), "hb", RunnerConfig::default(), Arc::new(clock.clone()));
    let mut lease = worker.claim(Some(&["live".to_string()])).await.unwrap().expect("the live task");

    let selection = BulkSelection::Tasks(ids.clone());
    let preview =
        store.requeue_preview(&selection, lastword_core::BulkOptions::default(), Utc::now()).await.unwrap();
    assert_eq!(preview.tasks.len(), BULK_MAX);
    let request = BulkRequeueRequest::confirming(&preview, "sweep").validate().unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let beating = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut waits = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let started = Instant::now();
                let beat = worker.heartbeat(&mut lease).await.unwrap();
                waits.push(started.elapsed());
                assert!(matches!(beat, Heartbeat::Extended { .. }), "the lease was kept: {beat:?}");
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            waits
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = Instant::now();
    let outcome = store
        .bulk_requeue(&selection, &request, &lastword_core::Actor::new("alice", "session"), Utc::now())
        .await
        .unwrap();
    let took = started.elapsed();
    tokio::time::sleep(Duration::from_millis(50)).await;
    stop.store(true, Ordering::SeqCst);
    let waits = beating.await.unwrap();

    match outcome {
        BulkOutcome::Applied { actions } => assert_eq!(actions.len(), BULK_MAX),
        other => panic!("{other:?}"),
    }
    assert!(waits.len() >= 2, "heartbeats ran before and after: {}", waits.len());
    let longest = waits.iter().max().unwrap();
    let mut sorted = waits.clone();
    sorted.sort();
    println!(
        "bulk re-queue of {BULK_MAX} tasks on {backend}: took {:.1} ms; {} heartbeats of another task meanwhile, median {:.2} ms, longest {:.1} ms",
        took.as_secs_f64() * 1e3,
        waits.len(),
        sorted[sorted.len() / 2].as_secs_f64() * 1e3,
        longest.as_secs_f64() * 1e3,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_file() {
    let (db, _dir) = lastword_store::testing::sqlite_file().await;
    a_500_task_bulk_requeue_leaves_live_workers_heartbeating(db, "a SQLite file").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    if let Some(db) = lastword_store::testing::postgres("bulk_locks").await {
        a_500_task_bulk_requeue_leaves_live_workers_heartbeating(db.clone(), "PostgreSQL").await;
        lastword_store::testing::discard_postgres(db).await;
    }
}
