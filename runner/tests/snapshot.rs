//! One snapshot per task page: the task, its runs, effects and audit are read in one
//! transaction, so a page never shows a task in one state beside runs from another (a run
//! already finished next to a task still leased, or a new claim's run next to the task before
//! it). A worker claims and fails one task over and over while readers load its page; every
//! page read must agree with itself. Prints how many pages it checked.

use chrono::Utc;
use lastword_core::{ErrorCause, Safety, Source, Tokens};
use lastword_runner::{enqueue, NewTask, Outcome, Runner, RunnerConfig, SystemClock};
use lastword_store::{store_for, Db};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const CYCLES: usize = 300;

async fn a_task_page_is_one_snapshot_while_its_worker_writes(db: Db, backend: &str) {
    let store = store_for(db.clone(), Tokens::default());
    let task = NewTask::new("flaky", Source::Tick, Safety::Idempotent).with_max_attempts(1_000_000);
    let id = enqueue(&db, &task, Utc::now()).await.unwrap();
    let worker = Runner::new(db.clone(), "w1", RunnerConfig::default(), Arc::new(SystemClock));
    let done = Arc::new(AtomicBool::new(false));
    let writing = {
        let done = done.clone();
        tokio::spawn(async move {
            for _ in 0..CYCLES {
                let lease =
                    worker.claim(None).await.unwrap().expect("the task is queued again after each failure");
                let failed = Outcome::Failed { cause: ErrorCause::ApiError, detail: "503".into() };
                worker.finish(lease, failed).await.unwrap();
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let (mut pages, mut torn) = (0usize, Vec::new());
    while !done.load(Ordering::SeqCst) {
        let Some(page) = store.task_detail(id, Utc::now()).await.unwrap() else { panic!("task {id} exists") };
        pages += 1;
        let Some(latest) = page.runs.last() else { continue };
        let leased = page.task.status.as_str() == "leased";
        let consistent =
            page.task.lease_epoch == latest.lease_epoch && leased == latest.finished_at.is_none();
        if !consistent {
            torn.push(format!(
                "task {} epoch {} beside run epoch {} finished {:?}",
                page.task.status, page.task.lease_epoch, latest.lease_epoch, latest.finished_at
            ));
        }
    }
    writing.await.unwrap();
    println!(
        "task page snapshots on {backend}: {pages} pages read during {CYCLES} claim/fail cycles, {} torn",
        torn.len()
    );
    assert!(pages > 10, "the readers ran alongside the writer: {pages}");
    assert!(torn.is_empty(), "{} torn pages, first: {}", torn.len(), torn[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_file() {
    let (db, _dir) = lastword_store::testing::sqlite_file().await;
    a_task_page_is_one_snapshot_while_its_worker_writes(db, "a SQLite file").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    if let Some(db) = lastword_store::testing::postgres("snapshot").await {
        a_task_page_is_one_snapshot_while_its_worker_writes(db.clone(), "PostgreSQL").await;
        lastword_store::testing::discard_postgres(db).await;
    }
}
