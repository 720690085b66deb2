//! Many workers, one queue, real time, leases much shorter than some pauses: the fencing must
//! hold under contention. Runs on PostgreSQL (2,000 tasks, 16 workers; required in CI via
//! `LASTWORD_REQUIRE_POSTGRES=1`) and, smaller, on a SQLite file. The invariants are checked
//! with SQL at the end, and every final write's answer is compared with the row it left.

use chrono::Duration;
use lastword_core::{ErrorCause, Safety, Source};
use lastword_runner::{
    ActionMessage, Finish, Heartbeat, Lease, Outcome, Runner, RunnerConfig, RunnerError, SystemClock,
};
use lastword_store::testing::scalar;
use lastword_store::{Db, NewTask};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

const LEASE_MS: i64 = 80;

/// id, task_id, completion_rows, output, error, error_detail of a finished run.
type RunRecord = (i64, i64, Option<i32>, Option<String>, Option<String>, Option<String>);

/// What a worker was told about one final write, and what it wrote.
#[derive(Clone, Debug)]
struct Written {
    task_id: i64,
    accepted: bool,
    output: Option<String>,
    error: Option<String>,
    detail: Option<String>,
}

#[derive(Default)]
struct Tally {
    written: HashMap<i64, Written>,
    abandoned: usize,
    heartbeats: usize,
    heartbeats_lost: usize,
    transient_retries: usize,
}

/// Retries a call on transient errors (SQLite busy, PostgreSQL serialization); panics otherwise.
macro_rules! retry {
    ($tally:expr, $call:expr) => {{
        let mut tries = 0;
        loop {
            match $call {
                Ok(v) => break v,
                Err(e) if RunnerError::is_transient(&e) && tries < 20 => {
                    tries += 1;
                    $tally.lock().unwrap().transient_retries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
                Err(e) => panic!("{e}"),
            }
        }
    }};
}

async fn remaining(db: &Db) -> i64 {
    scalar(db, "SELECT COUNT(*) FROM tasks WHERE status IN ('queued', 'leased')", &[]).await
}

async fn worker(runner: Runner, seed: u64, tally: Arc<Mutex<Tally>>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let lease_ms = LEASE_MS as u64;
    loop {
        let Some(mut lease): Option<Lease> = retry!(tally, runner.claim(None).await) else {
            if remaining(runner.db()).await == 0 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(3)).await;
            continue;
        };
        let roll: f64 = rng.gen();
        if roll < 0.03 {
            // Crash without a word: the run stays unfinished, the lease lapses.
            tally.lock().unwrap().abandoned += 1;
            continue;
        } else if roll < 0.23 {
            // Slow, no heartbeat: outlives the lease.
            tokio::time::sleep(std::time::Duration::from_millis(lease_ms + rng.gen_range(10..60))).await;
        } else if roll < 0.30 {
            // Long but well-behaved: heartbeats every third of the lease.
            for _ in 0..6 {
                tokio::time::sleep(std::time::Duration::from_millis(lease_ms / 3)).await;
                let beat = retry!(tally, runner.heartbeat(&mut lease).await);
                let mut t = tally.lock().unwrap();
                t.heartbeats += 1;
                if matches!(beat, Heartbeat::Lost { .. }) {
                    t.heartbeats_lost += 1;
                    break;
                }
            }
        } else {
            tokio::time::sleep(std::time::Duration::from_millis(rng.gen_range(0..8))).await;
        }
        if rng.gen_bool(0.5) {
            let key = format!("task-{}-effect", lease.task_id);
            retry!(tally, runner.record_effect(&lease, "send", &key).await);
        }
        let task_id = lease.task_id;
        let run_id = lease.run_id;
        let outcome_roll: f64 = rng.gen();
        let outcome = if outcome_roll < 0.55 {
            let text = format!("task {task_id} done by {} under epoch {}", runner.worker(), lease.epoch);
            Outcome::Acted(ActionMessage::new(text).unwrap())
        } else if outcome_roll < 0.70 {
            Outcome::NoActionNeeded
        } else if outcome_roll < 0.80 {
            Outcome::Skip
        } else {
            let cause = ErrorCause::ALL[rng.gen_range(0..ErrorCause::ALL.len())];
            Outcome::Failed { cause, detail: format!("run {run_id}: {}", cause.as_str()) }
        };
        let (output, error, detail) = match &outcome {
            Outcome::Acted(m) => (Some(m.as_str().to_string()), None, None),
            Outcome::NoActionNeeded => (Some(runner.config().tokens.no_action.clone()), None, None),
            Outcome::Skip => (Some(runner.config().tokens.skip.clone()), None, None),
            Outcome::Failed { cause, detail } => {
                (None, Some(cause.as_str().to_string()), Some(detail.clone()))
            }
        };
        let finish = retry!(tally, runner.finish(lease.clone(), outcome.clone()).await);
        let accepted = matches!(finish, Finish::Accepted { .. });
        let previous = tally
            .lock()
            .unwrap()
            .written
            .insert(run_id, Written { task_id, accepted, output, error, detail });
        assert!(previous.is_none(), "run {run_id} finished twice");
    }
}

async fn fleet_keeps_the_invariants(db: Db, workers: usize, tasks: usize) {
    let started = Instant::now();
    for i in 0..tasks {
        let task = NewTask::new(
            ["reply_to_mention", "triage_issue", "send_digest"][i % 3],
            if i % 4 == 0 { Source::Tick } else { Source::Notification },
            if i % 7 == 0 { Safety::Unsafe } else { Safety::Idempotent },
        )
        .with_payload(serde_json::json!({ "i": i }));
        lastword_runner::enqueue(&db, &task, lastword_runner::Clock::now(&SystemClock)).await.unwrap();
    }
    let tally = Arc::new(Mutex::new(Tally::default()));
    let config = RunnerConfig { lease: Duration::milliseconds(LEASE_MS), ..RunnerConfig::default() };
    let handles: Vec<_> = (0..workers)
        .map(|i| {
            let runner =
                Runner::new(db.clone(), format!("worker-{}", i + 1), config.clone(), Arc::new(SystemClock));
            tokio::spawn(worker(runner, 1000 + i as u64, tally.clone()))
        })
        .collect();
    for h in handles {
        h.await.expect("worker panicked");
    }
    let elapsed = started.elapsed();
    let tally = Arc::try_unwrap(tally).ok().unwrap().into_inner().unwrap();

    let count = |sql: &'static str| {
        let db = db.clone();
        async move { scalar(&db, sql, &[]).await }
    };
    let runs = count("SELECT COUNT(*) FROM runs").await;
    let lost = count("SELECT COUNT(*) FROM runs WHERE completion_rows = 0").await;
    let unfinished = count("SELECT COUNT(*) FROM runs WHERE finished_at IS NULL").await;
    let reclaimed = count("SELECT COUNT(*) FROM tasks WHERE lease_epoch > 1").await;
    let dead = count("SELECT COUNT(*) FROM tasks WHERE status = 'dead'").await;
    eprintln!(
        "{workers} workers, {tasks} tasks in {elapsed:?}: {runs} runs, {lost} lost-lease completions, \
         {unfinished} unfinished, {reclaimed} tasks claimed more than once, {dead} dead; \
         {} heartbeats ({} lost), {} transient retries",
        tally.heartbeats, tally.heartbeats_lost, tally.transient_retries
    );

    // No two runs of a task share an epoch; at most one accepted completion per task and epoch.
    assert_eq!(count("SELECT COUNT(*) FROM (SELECT task_id, lease_epoch FROM runs GROUP BY task_id, lease_epoch HAVING COUNT(*) > 1) d").await, 0);
    assert_eq!(
        count("SELECT COUNT(*) FROM (SELECT task_id, lease_epoch FROM runs WHERE completion_rows = 1 GROUP BY task_id, lease_epoch HAVING COUNT(*) > 1) d").await,
        0
    );
    // At most one accepted success per task, and a completed task's result is exactly it.
    assert_eq!(
        count("SELECT COUNT(*) FROM (SELECT task_id FROM runs WHERE completion_rows = 1 AND error IS NULL GROUP BY task_id HAVING COUNT(*) > 1) d").await,
        0
    );
    assert_eq!(
        count(
            "SELECT COUNT(*) FROM tasks t WHERE t.status = 'completed' AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.task_id = t.id \
             AND r.lease_epoch = t.lease_epoch AND r.completion_rows = 1 AND r.error IS NULL AND r.output = t.result)"
        )
        .await,
        0
    );
    assert_eq!(
        count("SELECT COUNT(*) FROM tasks t WHERE t.status = 'dead' AND EXISTS (SELECT 1 FROM runs r WHERE r.task_id = t.id AND r.completion_rows = 1 AND r.error IS NULL)").await,
        0
    );
    // Every run is finished and fully recorded, or unfinished and blank: never half-written.
    assert_eq!(
        count(
            "SELECT COUNT(*) FROM runs WHERE NOT ( \
               (finished_at IS NOT NULL AND completion_rows IN (0, 1) AND (output IS NOT NULL OR error IS NOT NULL)) \
               OR (finished_at IS NULL AND completion_rows IS NULL AND output IS NULL AND error IS NULL AND error_detail IS NULL))"
        )
        .await,
        0
    );
    // Every task ended; none is left leased or owned; each claim bumped the epoch by one.
    assert_eq!(count("SELECT COUNT(*) FROM tasks WHERE status NOT IN ('completed', 'dead')").await, 0);
    assert_eq!(
        count("SELECT COUNT(*) FROM tasks WHERE owner IS NOT NULL OR lease_expires_at IS NOT NULL").await,
        0
    );
    assert_eq!(
        count(
            "SELECT COUNT(*) FROM tasks t WHERE t.attempts <> t.lease_epoch \
             OR t.lease_epoch <> (SELECT COUNT(*) FROM runs r WHERE r.task_id = t.id) \
             OR t.lease_epoch <> (SELECT MAX(r.lease_epoch) FROM runs r WHERE r.task_id = t.id)"
        )
        .await,
        0
    );
    // Effects carry their run's fencing token.
    assert_eq!(
        count("SELECT COUNT(*) FROM effects e JOIN runs r ON r.id = e.run_id WHERE e.lease_epoch <> r.lease_epoch OR e.task_id <> r.task_id").await,
        0
    );

    // Every final write's answer matches its row: accepted ⇒ 1, lost ⇒ 0 with the output kept.
    let rows: Vec<RunRecord> = {
        let sql = "SELECT id, task_id, completion_rows, output, error, error_detail FROM runs WHERE finished_at IS NOT NULL";
        match &db {
            Db::Postgres(p) => sqlx::query_as(sql).fetch_all(p).await.unwrap(),
            Db::Sqlite(p) => sqlx::query_as(sql).fetch_all(p).await.unwrap(),
        }
    };
    assert_eq!(rows.len(), tally.written.len(), "every finished run is one the workers finished");
    assert_eq!(unfinished as usize, tally.abandoned, "exactly the abandoned runs are unfinished");
    for (id, task_id, completion_rows, output, error, detail) in rows {
        let w = tally.written.get(&id).unwrap_or_else(|| panic!("run {id} finished by nobody"));
        assert_eq!(task_id, w.task_id);
        assert_eq!(completion_rows, Some(i32::from(w.accepted)), "run {id}");
        assert_eq!(
            (output, error, detail),
            (w.output.clone(), w.error.clone(), w.detail.clone()),
            "run {id}"
        );
    }
    let lost_answers = tally.written.values().filter(|w| !w.accepted).count();
    assert_eq!(lost as usize, lost_answers);

    // The run exercised what it claims to: re-claims, lost leases, abandoned runs, heartbeats.
    assert!(
        lost > 0 && reclaimed > 0 && unfinished > 0 && dead > 0 && tally.heartbeats > 0,
        "too little contention"
    );
    assert!(elapsed < std::time::Duration::from_secs(60), "took {elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_fleet_keeps_the_invariants() {
    if let Some(db) = lastword_store::testing::postgres("postgres_fleet_keeps_the_invariants").await {
        fleet_keeps_the_invariants(db.clone(), 16, 2000).await;
        lastword_store::testing::discard_postgres(db).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_file_fleet_keeps_the_invariants() {
    let (db, _dir) = lastword_store::testing::sqlite_file().await;
    fleet_keeps_the_invariants(db, 8, 300).await;
}
