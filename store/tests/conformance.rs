//! The store conformance suite: every case runs on SQLite always and on PostgreSQL whenever
//! `TEST_DATABASE_URL` is set (required in CI via `LASTWORD_REQUIRE_POSTGRES=1`). A behaviour
//! that differs between the backends is a bug in one of them.

use chrono::{DateTime, Duration, TimeZone, Utc};
use lastword_core::{run_state, Cause, RunState, Tokens};
use lastword_store::testing::{exec, insert_task, scalar, Arg};
use lastword_store::{store_for, Db, Store};
use std::sync::Arc;

fn t0() -> DateTime<Utc> {
    // Sub-second precision on purpose: SQLite compares timestamps as text.
    Utc.timestamp_opt(1_800_000_000, 123_456_000).unwrap()
}

fn store(db: Db) -> Arc<dyn Store> {
    store_for(db, Tokens::default())
}

async fn migrations_leave_the_store_ready(db: Db) {
    let s = store(db);
    let r = s.readiness().await;
    assert!(r.reachable);
    assert!(r.pending_migrations.is_empty(), "pending: {:?}", r.pending_migrations);
    assert!(r.is_ready());
    // Running them again changes nothing.
    s.db().migrate().await.expect("re-running migrations is a no-op");
}

async fn totals_count_rows(db: Db) {
    let s = store(db);
    assert_eq!(s.totals().await.unwrap().tasks, 0);
    let task = insert_task(s.db(), "reply", "unsafe", t0()).await;
    insert_run(s.db(), task, 1, "w1", t0(), None, None, None, None).await;
    let totals = s.totals().await.unwrap();
    assert_eq!((totals.tasks, totals.runs, totals.effects), (1, 1, 0));
}

async fn task_round_trips_every_column(db: Db) {
    let s = store(db);
    let id = insert_task(s.db(), "reply", "unsafe", t0()).await;
    let task = s.task(id).await.unwrap().expect("task exists");
    assert_eq!(task.kind, "reply");
    assert_eq!(task.safety, "unsafe");
    assert_eq!(task.source, "notification");
    assert_eq!(task.status, "queued");
    assert_eq!(task.payload, serde_json::json!({"n": 1}));
    assert_eq!(task.lease_epoch, 0);
    assert_eq!(task.max_attempts, 3);
    assert_eq!(task.owner, None);
    assert_eq!(task.created_at, t0(), "timestamps keep sub-second precision");
    assert!(s.task(id + 1000).await.unwrap().is_none());
}

#[allow(clippy::too_many_arguments)]
async fn insert_run(
    db: &Db,
    task: i64,
    epoch: i64,
    worker: &str,
    expires: DateTime<Utc>,
    finished: Option<DateTime<Utc>>,
    rows: Option<i64>,
    error: Option<&str>,
    output: Option<&str>,
) -> i64 {
    scalar(
        db,
        "INSERT INTO runs (task_id, worker, lease_epoch, claimed_at, lease_expires_at, finished_at, \
         completion_rows, error, output) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
        &[
            task.into(),
            worker.into(),
            epoch.into(),
            (expires - Duration::seconds(30)).into(),
            expires.into(),
            finished.into(),
            Arg::I64(rows),
            error.into(),
            output.into(),
        ],
    )
    .await
}

/// The SQL twin and `lastword_core::run_state` agree on every combination of the deciding
/// columns, including lease expiry at, just before and just after `now`.
async fn state_sql_twin_agrees_with_rust(db: Db) {
    let s = store(db);
    let now = t0();
    let task = insert_task(s.db(), "reply", "idempotent", now).await;
    let finished = [None, Some(now - Duration::seconds(5))];
    let expiries =
        [now - Duration::milliseconds(1), now, now + Duration::milliseconds(1), now + Duration::minutes(1)];
    let rows = [None, Some(0), Some(1)];
    let errors = [None, Some("timeout"), Some("crash")];
    let outputs = [
        None,
        Some(""),
        Some("  \t\n"),
        Some("no action needed"),
        Some(" skip\n"),
        Some("Skip"),
        Some("sent reply"),
    ];
    let mut epoch = 0;
    for f in finished {
        for e in expiries {
            for r in rows {
                for err in errors {
                    for o in outputs {
                        epoch += 1;
                        insert_run(s.db(), task, epoch, "w", e, f, r, err, o).await;
                    }
                }
            }
        }
    }
    let runs = s.task_runs(task, now).await.unwrap();
    assert_eq!(runs.len() as i64, epoch);
    let mut seen = std::collections::HashSet::new();
    for run in &runs {
        let expected = run_state(&run.facts(), now, s.tokens());
        assert_eq!((run.state, run.cause), expected, "run {run:?}");
        seen.insert(run.state);
    }
    assert_eq!(seen.len(), RunState::ALL.len(), "every state was exercised: {seen:?}");
    // One lookup by id agrees with the list.
    let one = s.run(runs[0].id, now).await.unwrap().unwrap();
    assert_eq!(one, runs[0]);
}

async fn custom_tokens_reach_the_sql_twin(db: Db) {
    let s = store_for(db, Tokens { no_action: " NOOP ".into(), skip: "idle".into() });
    let now = t0();
    let task = insert_task(s.db(), "reply", "idempotent", now).await;
    let done = Some(now - Duration::seconds(1));
    insert_run(s.db(), task, 1, "w", now, done, Some(1), None, Some("NOOP")).await;
    insert_run(s.db(), task, 2, "w", now, done, Some(1), None, Some("idle")).await;
    insert_run(s.db(), task, 3, "w", now, done, Some(1), None, Some("skip")).await;
    let states: Vec<_> = s.task_runs(task, now).await.unwrap().iter().map(|r| r.state).collect();
    assert_eq!(states, vec![RunState::NoAction, RunState::Skip, RunState::Acted]);
}

async fn failure_causes_come_from_the_error_column(db: Db) {
    let s = store(db);
    let now = t0();
    let task = insert_task(s.db(), "reply", "idempotent", now).await;
    let done = Some(now);
    insert_run(s.db(), task, 1, "w", now, done, Some(1), Some("context_overflow"), None).await;
    let run = &s.task_runs(task, now).await.unwrap()[0];
    assert_eq!((run.state, run.cause), (RunState::Failed, Some(Cause::ContextOverflow)));
}

async fn schema_rejects_what_the_contract_forbids(db: Db) {
    let s = store(db);
    let now = t0();
    let task = insert_task(s.db(), "reply", "idempotent", now).await;
    insert_run(s.db(), task, 1, "w1", now, None, None, None, None).await;
    // Two runs of one task under one epoch would defeat fencing.
    let dup = match s.db() {
        Db::Postgres(p) => sqlx::query("INSERT INTO runs (task_id, worker, lease_epoch, claimed_at, lease_expires_at) VALUES ($1, 'w2', 1, $2, $2)")
            .bind(task).bind(now).execute(p).await.map(|_| ()),
        Db::Sqlite(p) => sqlx::query("INSERT INTO runs (task_id, worker, lease_epoch, claimed_at, lease_expires_at) VALUES ($1, 'w2', 1, $2, $2)")
            .bind(task).bind(now).execute(p).await.map(|_| ()),
    };
    assert!(dup.is_err(), "a second run under the same epoch is refused");
    let bad_status = match s.db() {
        Db::Postgres(p) => sqlx::query("UPDATE tasks SET status = 'done' WHERE id = $1")
            .bind(task)
            .execute(p)
            .await
            .map(|_| ()),
        Db::Sqlite(p) => sqlx::query("UPDATE tasks SET status = 'done' WHERE id = $1")
            .bind(task)
            .execute(p)
            .await
            .map(|_| ()),
    };
    assert!(bad_status.is_err(), "status outside the vocabulary is refused");
    assert_eq!(scalar(s.db(), "SELECT COUNT(*) FROM runs", &[]).await, 1);
}

async fn effects_and_audit_read_back_in_order(db: Db) {
    let s = store(db);
    let now = t0();
    let task = insert_task(s.db(), "reply", "unsafe", now).await;
    let r1 = insert_run(s.db(), task, 1, "w1", now, None, None, None, None).await;
    let r2 = insert_run(s.db(), task, 2, "w2", now, None, None, None, None).await;
    for (run, epoch, at) in [(r1, 1, now), (r2, 2, now + Duration::seconds(1))] {
        exec(
            s.db(),
            "INSERT INTO effects (run_id, task_id, lease_epoch, kind, idempotency_key, created_at) VALUES ($1, $2, $3, 'send', 'k1', $4)",
            &[run.into(), task.into(), Arg::I64(Some(epoch)), at.into()],
        )
        .await;
    }
    let effects = s.task_effects(task).await.unwrap();
    assert_eq!(effects.iter().map(|e| e.lease_epoch).collect::<Vec<_>>(), vec![1, 2]);
    assert!(effects.iter().all(|e| e.idempotency_key == "k1"));
    for (i, at) in [now, now + Duration::seconds(5)].into_iter().enumerate() {
        exec(
            s.db(),
            "INSERT INTO operator_actions (task_id, action, actor, reason, outcome, created_at) VALUES ($1, 'requeue', $2, 'r', 'applied', $3)",
            &[task.into(), format!("op{i}").as_str().into(), at.into()],
        )
        .await;
    }
    let actions = s.task_actions(task).await.unwrap();
    assert_eq!(
        actions.iter().map(|a| a.actor.as_str()).collect::<Vec<_>>(),
        vec!["op1", "op0"],
        "newest first"
    );
}

macro_rules! conformance {
    ($($case:ident),+ $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $case() {
                    super::$case(lastword_store::testing::sqlite_memory().await).await;
                }
            )+
        }
        mod sqlite_file {
            $(
                #[tokio::test]
                async fn $case() {
                    let (db, _dir) = lastword_store::testing::sqlite_file().await;
                    super::$case(db).await;
                }
            )+
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $case() {
                    if let Some(db) = lastword_store::testing::postgres(stringify!($case)).await {
                        super::$case(db).await;
                    }
                }
            )+
        }
    };
}

conformance!(
    migrations_leave_the_store_ready,
    totals_count_rows,
    task_round_trips_every_column,
    state_sql_twin_agrees_with_rust,
    custom_tokens_reach_the_sql_twin,
    failure_causes_come_from_the_error_column,
    schema_rejects_what_the_contract_forbids,
    effects_and_audit_read_back_in_order,
);
