//! The change log (migration 0002) on every backend: what the triggers write, how it is read
//! and pruned. Runs on in-memory SQLite, a SQLite file and PostgreSQL (required in CI via
//! `LASTWORD_REQUIRE_POSTGRES=1`).

use chrono::{Duration, Utc};
use lastword_store::changes::{self, Change};
use lastword_store::testing::{exec, insert_task, scalar};
use lastword_store::Db;

fn c(id: i64, table: &str, row_id: i64, task_id: i64) -> Change {
    Change { id, table: table.into(), row_id, task_id: Some(task_id) }
}

/// Every insert of the four tables is logged, and every update but the runner's writes to a task
/// (carried by its run's row) and heartbeats inside a lease (migration 0008).
async fn what_the_triggers_log_on_the_four_tables(db: Db) {
    assert_eq!(changes::latest_change_id(&db).await.unwrap(), 0);
    assert_eq!(changes::oldest_change_id(&db).await.unwrap(), None);
    let now = Utc::now();
    let task = insert_task(&db, "reply", "unsafe", now).await;
    let run = scalar(
        &db,
        "INSERT INTO runs (task_id, worker, lease_epoch, claimed_at, lease_expires_at) VALUES ($1, 'w1', 1, $2, $2) RETURNING id",
        &[task.into(), now.into()],
    )
    .await;
    // A heartbeat at its lease's expiry revives a lapsed run: logged (one inside the lease is not,
    // runner/tests/contract.rs).
    exec(&db, "UPDATE runs SET heartbeat_at = $2 WHERE id = $1", &[run.into(), now.into()]).await;
    let effect = scalar(
        &db,
        "INSERT INTO effects (run_id, task_id, lease_epoch, kind, idempotency_key, created_at) VALUES ($1, $2, 1, 'send', 'k', $3) RETURNING id",
        &[run.into(), task.into(), now.into()],
    )
    .await;
    let action = scalar(
        &db,
        "INSERT INTO operator_actions (task_id, action, actor, reason, outcome, created_at) VALUES ($1, 'requeue', 'ann', 'stuck', 'applied', $2) RETURNING id",
        &[task.into(), now.into()],
    )
    .await;
    // What a claim sets on the task (its run's insert carries it): not logged.
    exec(
        &db,
        "UPDATE tasks SET status = 'leased', owner = 'w1', lease_epoch = 2 WHERE id = $1",
        &[task.into()],
    )
    .await;
    // A task's death is.
    exec(&db, "UPDATE tasks SET status = 'dead' WHERE id = $1", &[task.into()]).await;
    // An update matching nothing logs nothing.
    exec(&db, "UPDATE tasks SET status = 'dead' WHERE id = -1", &[]).await;

    let logged = changes::changes_after(&db, 0, 100).await.unwrap();
    assert_eq!(
        logged,
        vec![
            c(1, "tasks", task, task),
            c(2, "runs", run, task),
            c(3, "runs", run, task),
            c(4, "effects", effect, task),
            c(5, "operator_actions", action, task),
            c(6, "tasks", task, task),
        ]
    );
    assert_eq!(changes::changes_after(&db, 4, 1).await.unwrap(), logged[4..5].to_vec());
    assert_eq!(changes::latest_change_id(&db).await.unwrap(), 6);
    assert_eq!(changes::oldest_change_id(&db).await.unwrap(), Some(1));

    let read = changes::read_changes_after(&db, 3, 100).await.unwrap();
    assert_eq!(read.changes, logged[3..].to_vec());
    assert_eq!(read.horizon.is_some(), matches!(db, Db::Postgres(_)), "PostgreSQL reports its snapshot");
    let empty = changes::read_changes_after(&db, 6, 100).await.unwrap();
    assert!(empty.changes.is_empty());
    assert_eq!(empty.horizon.is_some(), matches!(db, Db::Postgres(_)), "also when nothing is new");

    let found = changes::changes_with_ids(&db, &[2, 5, 99]).await.unwrap();
    assert_eq!(found.changes, vec![logged[1].clone(), logged[4].clone()]);
    assert_eq!(found.xmin.is_some(), matches!(db, Db::Postgres(_)));
    let none = changes::changes_with_ids(&db, &[]).await.unwrap();
    assert!(none.changes.is_empty());
}

async fn a_rolled_back_write_logs_nothing(db: Db) {
    let now = Utc::now();
    let insert = "INSERT INTO tasks (kind, source, safety, created_at, updated_at) VALUES ('x', 'tick', 'unsafe', $1, $1)";
    match &db {
        Db::Postgres(p) => {
            let mut tx = p.begin().await.unwrap();
            sqlx::query(insert).bind(now).execute(&mut *tx).await.unwrap();
            tx.rollback().await.unwrap();
        }
        Db::Sqlite(p) => {
            let mut tx = p.begin().await.unwrap();
            sqlx::query(insert).bind(now).execute(&mut *tx).await.unwrap();
            tx.rollback().await.unwrap();
        }
    }
    assert!(changes::changes_after(&db, 0, 10).await.unwrap().is_empty());
    insert_task(&db, "y", "unsafe", now).await;
    let logged = changes::changes_after(&db, 0, 10).await.unwrap();
    assert_eq!(logged.len(), 1);
}

async fn pruning_deletes_old_changes_and_keeps_the_newest(db: Db) {
    let now = Utc::now();
    for _ in 0..3 {
        insert_task(&db, "reply", "unsafe", now).await;
    }
    assert_eq!(changes::prune_changes(&db, now - Duration::hours(1)).await.unwrap(), 0);
    assert_eq!(changes::prune_changes(&db, now + Duration::hours(1)).await.unwrap(), 2);
    assert_eq!(changes::prune_changes(&db, now + Duration::hours(1)).await.unwrap(), 0);
    let kept = changes::changes_after(&db, 0, 10).await.unwrap();
    assert_eq!(kept.iter().map(|c| c.id).collect::<Vec<_>>(), vec![3]);
    // Ids are never reused after pruning.
    insert_task(&db, "reply", "unsafe", now).await;
    assert_eq!(changes::latest_change_id(&db).await.unwrap(), 4);
}

lastword_store::on_every_backend!(
    what_the_triggers_log_on_the_four_tables,
    a_rolled_back_write_logs_nothing,
    pruning_deletes_old_changes_and_keeps_the_newest,
);
