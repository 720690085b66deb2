//! `lastword prune`: what it deletes (settled history only), what it keeps (live work, recent
//! history, the audit trail), and that a fleet running meanwhile never waits on it. Lives in
//! the runner crate because "never waits" is only proven by a real runner's statements.

use chrono::{DateTime, Duration, TimeZone, Utc};
use lastword_core::{Safety, Source, Tokens};
use lastword_runner::{
    enqueue, ActionMessage, Finish, ManualClock, Outcome, Runner, RunnerConfig, SystemClock,
};
use lastword_store::prune::{prune, PruneOptions, PruneReport};
use lastword_store::testing::{discard_postgres, exec, postgres, scalar};
use lastword_store::{Db, DbTarget, NewTask};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

fn now() -> DateTime<Utc> {
    Utc.timestamp_opt(1_800_000_000, 0).unwrap()
}

/// The 15-minute rollup bucket of the 30-day cutoff.
fn cutoff_bucket() -> i64 {
    (now() - Duration::days(30)).timestamp().div_euclid(lastword_store::BUCKET_SECS)
}

fn new_task(kind: &str) -> NewTask {
    NewTask::new(kind, Source::Notification, Safety::Unsafe)
}

fn runner(db: &Db, clock: &ManualClock) -> Runner {
    let config = RunnerConfig { lease: Duration::seconds(30), tokens: Tokens::default() };
    Runner::new(db.clone(), "w1", config, Arc::new(clock.clone()))
}

/// A task claimed at `at` and finished (acted, with one effect) a second later.
async fn finished_task(db: &Db, at: DateTime<Utc>, kind: &str) -> i64 {
    let clock = ManualClock::new(at);
    let r = runner(db, &clock);
    let id = enqueue(db, &new_task(kind), at).await.unwrap();
    let lease = r.claim(None).await.unwrap().expect("the task just enqueued");
    assert_eq!(lease.task_id, id);
    r.record_effect(&lease, "send", &format!("effect-{id}")).await.unwrap();
    clock.advance(Duration::seconds(1));
    let finish = r.finish(lease, Outcome::Acted(ActionMessage::new("sent").unwrap())).await.unwrap();
    assert!(matches!(finish, Finish::Accepted { .. }));
    id
}

async fn count(db: &Db, table: &str, task: i64) -> i64 {
    let column = if table == "tasks" { "id" } else { "task_id" };
    scalar(db, &format!("SELECT COUNT(*) FROM {table} WHERE {column} = $1"), &[task.into()]).await
}

// Settled history before the cutoff goes (runs, their effects, then the task); live work, recent
// history and every audited task stay, and the audit rows themselves are untouched.
async fn prune_deletes_only_settled_history(db: Db) {
    let old = now() - Duration::days(40);
    let settled = finished_task(&db, old, "settled").await;
    let settled_too = finished_task(&db, old + Duration::minutes(1), "settled").await;
    let recent = finished_task(&db, now() - Duration::days(2), "recent").await;
    // Audited: an operator once acted on it. Its runs go; the task and the audit row stay.
    let audited = finished_task(&db, old, "audited").await;
    exec(
        &db,
        "INSERT INTO operator_actions (task_id, action, actor, reason, outcome, created_at) \
         VALUES ($1, 'compensate', 'alice', 'refunded', 'applied', $2)",
        &[audited.into(), old.into()],
    )
    .await;
    // Live: claimed long ago, still leased (its worker may yet heartbeat or finish).
    let clock = ManualClock::new(old);
    let live = enqueue(&db, &new_task("live"), old).await.unwrap();
    let lease = runner(&db, &clock).claim(None).await.unwrap().expect("the live task");
    assert_eq!(lease.task_id, live);

    // The dashboard has counted the old history (docs/counts.md).
    let store = lastword_store::store_for(db.clone(), Tokens::default());
    while store.refresh_rollups(now()).await.unwrap().has_more() {}
    let rolled_up = |db: Db| async move {
        scalar(&db, "SELECT COUNT(*) FROM run_rollup_buckets WHERE bucket < $1", &[cutoff_bucket().into()])
            .await
    };
    assert!(rolled_up(db.clone()).await > 0, "the old buckets were rolled up");

    let cutoff = now() - Duration::days(30);
    let options = PruneOptions { batch: 1, pause: std::time::Duration::ZERO };
    let mut progress_calls = 0;
    let report = prune(&db, cutoff, options, |_| progress_calls += 1).await.unwrap();

    assert_eq!(report.runs, 3, "the runs of the two settled tasks and the audited one: {report:?}");
    assert_eq!(report.tasks, 2, "the two settled tasks: {report:?}");
    // One row per statement, plus the statement of each phase that found nothing more.
    assert_eq!(report.batches, 3 + 1 + 2 + 1);
    assert_eq!(progress_calls, report.batches);
    for task in [settled, settled_too] {
        for table in ["tasks", "runs", "effects"] {
            assert_eq!(count(&db, table, task).await, 0, "{table} of settled task {task}");
        }
    }
    assert_eq!((count(&db, "tasks", audited).await, count(&db, "runs", audited).await), (1, 0));
    assert_eq!(count(&db, "operator_actions", audited).await, 1, "the audit trail is kept");
    assert_eq!(
        (count(&db, "runs", live).await, count(&db, "tasks", live).await),
        (1, 1),
        "live work is kept"
    );
    assert_eq!((count(&db, "runs", recent).await, count(&db, "effects", recent).await), (1, 1));

    // The rollups forget what was deleted, and count again what is left: the live run only.
    assert_eq!(rolled_up(db.clone()).await, 0);
    while store.refresh_rollups(now()).await.unwrap().has_more() {}
    let old_window =
        store.overview(old - Duration::hours(1), old + Duration::hours(1), Duration::hours(1), now());
    let counted: i64 = old_window.await.unwrap().by_state.iter().map(|(_, n)| n).sum();
    assert_eq!(counted, 1, "only the live task's run is left in the old window");

    // Nothing older is left: a second prune finds nothing.
    let again = prune(&db, cutoff, PruneOptions::default(), |_| {}).await.unwrap();
    assert_eq!((again.runs, again.tasks), (0, 0));
}
lastword_store::on_every_backend!(prune_deletes_only_settled_history);

/// A prune of 20 000 old runs while eight workers claim, heartbeat and finish: every runner
/// connection has `lock_timeout = 100ms`, so a runner statement that waited longer than that
/// for a lock held by the prune would fail — and none does.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_running_fleet_never_waits_on_a_prune_on_postgres() {
    const OLD_TASKS: i64 = 10_000;
    let Some(db) = postgres("prune_under_fleet").await else { return };
    let Db::Postgres(pool) = &db else { unreachable!() };
    // Old settled history, set-based: two finished runs (and an effect) per task.
    let old = Utc::now() - Duration::days(40);
    for sql in [
        "INSERT INTO tasks (kind, source, safety, status, lease_epoch, attempts, created_at, updated_at) \
         SELECT 'old', 'tick', 'idempotent', 'completed', 2, 2, $1, $1 FROM generate_series(1, $2)",
        "INSERT INTO runs (task_id, worker, lease_epoch, claimed_at, lease_expires_at, finished_at, output, completion_rows) \
         SELECT t.id, 'w-old', e, $1 + make_interval(secs => t.id), $1 + make_interval(secs => t.id + 30), \
                $1 + make_interval(secs => t.id + 1), 'skip', 1 \
         FROM tasks t CROSS JOIN generate_series(1, 2) e WHERE t.kind = 'old' AND $2 > 0",
        "INSERT INTO effects (run_id, task_id, lease_epoch, kind, idempotency_key, created_at) \
         SELECT r.id, r.task_id, r.lease_epoch, 'send', 'k' || r.task_id, r.claimed_at FROM runs r WHERE $2 > 0",
    ] {
        sqlx::query(sql).bind(old).bind(OLD_TASKS).execute(pool).await.unwrap();
    }
    for i in 0..2_000 {
        enqueue(&db, &new_task(&format!("live-{}", i % 4)), Utc::now()).await.unwrap();
    }

    // The fleet's own pool: any lock wait over 100 ms is an error.
    let name: String = sqlx::query_scalar("SELECT current_database()").fetch_one(pool).await.unwrap();
    let mut url = url::Url::parse(&std::env::var("TEST_DATABASE_URL").unwrap()).unwrap();
    url.set_path(&name);
    url.query_pairs_mut().append_pair("options", "-c lock_timeout=100ms");
    let fleet_db = Db::connect(&DbTarget::Postgres(url.to_string())).await.unwrap();
    let Db::Postgres(fleet_pool) = &fleet_db else { unreachable!() };
    let timeout: String = sqlx::query_scalar("SHOW lock_timeout").fetch_one(fleet_pool).await.unwrap();
    assert_eq!(timeout, "100ms", "the fleet's connections carry the lock timeout");

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (statements, errors) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut workers = Vec::new();
    for w in 0..8 {
        let config = RunnerConfig { lease: Duration::seconds(30), tokens: Tokens::default() };
        let runner = Runner::new(fleet_db.clone(), format!("w{w}"), config, Arc::new(SystemClock));
        let (stop, statements, errors) = (stop.clone(), statements.clone(), errors.clone());
        workers.push(tokio::spawn(async move {
            let mut failures = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let step = async {
                    let Some(mut lease) = runner.claim(None).await? else { return Ok(3) };
                    runner.heartbeat(&mut lease).await?;
                    runner.finish(lease, Outcome::Skip).await?;
                    Ok::<_, lastword_runner::RunnerError>(3)
                };
                match step.await {
                    Ok(n) => statements.fetch_add(n, Ordering::Relaxed),
                    Err(e) => {
                        failures.push(e.to_string());
                        errors.fetch_add(1, Ordering::Relaxed)
                    }
                };
            }
            failures
        }));
    }

    let started = std::time::Instant::now();
    let cutoff = Utc::now() - Duration::days(30);
    let options = PruneOptions { batch: 500, pause: std::time::Duration::from_millis(2) };
    let report: PruneReport = prune(&db, cutoff, options, |_| {}).await.unwrap();
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let mut failures = Vec::new();
    for w in workers {
        failures.extend(w.await.unwrap());
    }
    eprintln!(
        "prune under a fleet: {} runs, {} tasks in {} batches, {took:?}; fleet: {} runner calls, {} errors",
        report.runs,
        report.tasks,
        report.batches,
        statements.load(Ordering::Relaxed),
        errors.load(Ordering::Relaxed)
    );
    assert_eq!(report.runs, 2 * OLD_TASKS as u64);
    assert_eq!(report.tasks, OLD_TASKS as u64);
    assert!(statements.load(Ordering::Relaxed) > 0, "the fleet ran while pruning");
    assert!(failures.is_empty(), "runner statements failed during the prune: {failures:?}");
    let old_left = scalar(&db, "SELECT COUNT(*) FROM runs WHERE worker = 'w-old'", &[]).await;
    assert_eq!(old_left, 0);
    fleet_db.close().await;
    discard_postgres(db).await;
}
