//! Reading and pruning `change_log` (migration 0002), the feed behind live updates.
//!
//! Every insert or update of a contract table appends a row from a trigger, in the writer's own
//! transaction. The dashboard's one reader per process (`server/src/live.rs`) follows the log by
//! primary key; browsers resume from its ids. These are free functions over [`Db`] rather than
//! [`Store`](crate::Store) methods: only the live-update machinery needs them.
//!
//! On PostgreSQL ids are taken when a row is written but become visible when its transaction
//! commits, so a reader can see id 11 before id 10. [`read_changes_after`] and
//! [`changes_with_ids`] therefore also report the reading statement's snapshot bounds, with
//! which the reader decides when a missing id can no longer appear (see `server/src/live.rs`).
//! SQLite has one writer at a time, so there ids become visible in order.

use crate::{Db, StoreError};
use chrono::{DateTime, Utc};
pub use lastword_core::Change;

/// Rows the pruner deletes per statement (and inspects: the oldest this many rows).
const PRUNE_BATCH: i64 = 5_000;
/// Statements per [`prune_changes`] call, so one call stays short.
const PRUNE_MAX_BATCHES: usize = 200;

/// Changes read after a cursor, with (PostgreSQL only) the `xmax` of the reading statement's
/// snapshot: every transaction that was still running when the rows were read has an id below
/// it. Once the oldest running transaction (`xmin`) is at or past it, any id missing from this
/// read has either appeared or never will.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChangeRead {
    pub changes: Vec<Change>,
    pub horizon: Option<i64>,
}

/// Changes found by id, with (PostgreSQL only) the `xmin` of the reading statement's snapshot:
/// every transaction below it had ended when the rows were read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChangesById {
    pub changes: Vec<Change>,
    pub xmin: Option<i64>,
}

type ChangeRow = (i64, String, i64, Option<i64>);
type SnapshotRow = (i64, Option<i64>, Option<String>, Option<i64>, Option<i64>);

fn change((id, table, row_id, task_id): ChangeRow) -> Change {
    Change { id, table, row_id, task_id }
}

/// Splits `(snapshot value, change columns…)` rows (a LEFT JOIN: one row even when no change
/// matched) into the snapshot value and the changes.
fn split_snapshot(rows: Vec<SnapshotRow>) -> (Option<i64>, Vec<Change>) {
    let snapshot = rows.first().map(|r| r.0);
    let changes = rows
        .into_iter()
        .filter_map(|(_, id, table, row_id, task_id)| {
            Some(Change { id: id?, table: table?, row_id: row_id?, task_id })
        })
        .collect();
    (snapshot, changes)
}

const AFTER_SQL: &str =
    "SELECT id, table_name, row_id, task_id FROM change_log WHERE id > $1 ORDER BY id LIMIT $2";

/// Up to `limit` changes with ids above `after`, oldest first.
pub async fn changes_after(db: &Db, after: i64, limit: i64) -> Result<Vec<Change>, StoreError> {
    let rows: Vec<ChangeRow> = match db {
        Db::Postgres(p) => sqlx::query_as(AFTER_SQL).bind(after).bind(limit).fetch_all(p).await?,
        Db::Sqlite(p) => sqlx::query_as(AFTER_SQL).bind(after).bind(limit).fetch_all(p).await?,
    };
    Ok(rows.into_iter().map(change).collect())
}

/// [`changes_after`] with the snapshot horizon of the read (see [`ChangeRead`]).
pub async fn read_changes_after(db: &Db, after: i64, limit: i64) -> Result<ChangeRead, StoreError> {
    match db {
        Db::Postgres(p) => {
            // One statement, so the snapshot reported is the one the rows were read with.
            let rows: Vec<SnapshotRow> = sqlx::query_as(
                "WITH s AS (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS horizon)
                 SELECT s.horizon, c.id, c.table_name, c.row_id, c.task_id
                 FROM s LEFT JOIN LATERAL (
                     SELECT id, table_name, row_id, task_id FROM change_log
                     WHERE id > $1 ORDER BY id LIMIT $2
                 ) c ON true
                 ORDER BY c.id",
            )
            .bind(after)
            .bind(limit)
            .fetch_all(p)
            .await?;
            let (horizon, changes) = split_snapshot(rows);
            Ok(ChangeRead { changes, horizon })
        }
        Db::Sqlite(_) => Ok(ChangeRead { changes: changes_after(db, after, limit).await?, horizon: None }),
    }
}

/// The changes among `ids` that exist now, with the snapshot's `xmin` (see [`ChangesById`]).
pub async fn changes_with_ids(db: &Db, ids: &[i64]) -> Result<ChangesById, StoreError> {
    match db {
        Db::Postgres(p) => {
            let rows: Vec<SnapshotRow> = sqlx::query_as(
                "WITH s AS (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin)
                 SELECT s.xmin, c.id, c.table_name, c.row_id, c.task_id
                 FROM s LEFT JOIN change_log c ON c.id = ANY($1)
                 ORDER BY c.id",
            )
            .bind(ids)
            .fetch_all(p)
            .await?;
            let (xmin, changes) = split_snapshot(rows);
            Ok(ChangesById { changes, xmin })
        }
        Db::Sqlite(p) => {
            let ids = serde_json::to_string(ids).expect("ids serialise");
            let rows: Vec<ChangeRow> = sqlx::query_as(
                "SELECT id, table_name, row_id, task_id FROM change_log
                 WHERE id IN (SELECT value FROM json_each($1)) ORDER BY id",
            )
            .bind(ids)
            .fetch_all(p)
            .await?;
            Ok(ChangesById { changes: rows.into_iter().map(change).collect(), xmin: None })
        }
    }
}

/// The newest change's id; 0 when nothing was ever logged (pruning keeps the newest row).
pub async fn latest_change_id(db: &Db) -> Result<i64, StoreError> {
    const SQL: &str = "SELECT MAX(id) FROM change_log";
    let id: Option<i64> = match db {
        Db::Postgres(p) => sqlx::query_scalar(SQL).fetch_one(p).await?,
        Db::Sqlite(p) => sqlx::query_scalar(SQL).fetch_one(p).await?,
    };
    Ok(id.unwrap_or(0))
}

/// The oldest change still kept, if any: a client whose cursor is below it may have missed
/// pruned changes.
pub async fn oldest_change_id(db: &Db) -> Result<Option<i64>, StoreError> {
    const SQL: &str = "SELECT MIN(id) FROM change_log";
    Ok(match db {
        Db::Postgres(p) => sqlx::query_scalar(SQL).fetch_one(p).await?,
        Db::Sqlite(p) => sqlx::query_scalar(SQL).fetch_one(p).await?,
    })
}

/// Deletes changes logged before `older_than`, oldest first, in short statements that only
/// look at the oldest rows by primary key (no index on `created_at` is needed). The newest row
/// is always kept, so [`latest_change_id`] stays meaningful. Returns the rows deleted.
pub async fn prune_changes(db: &Db, older_than: DateTime<Utc>) -> Result<u64, StoreError> {
    const SQL: &str = "DELETE FROM change_log WHERE id IN (
            SELECT id FROM (SELECT id, created_at FROM change_log ORDER BY id LIMIT $2) oldest
            WHERE created_at < $1)
        AND id < (SELECT MAX(id) FROM change_log)";
    let mut deleted = 0;
    for _ in 0..PRUNE_MAX_BATCHES {
        let n = match db {
            Db::Postgres(p) => {
                sqlx::query(SQL).bind(older_than).bind(PRUNE_BATCH).execute(p).await?.rows_affected()
            }
            Db::Sqlite(p) => {
                sqlx::query(SQL).bind(older_than).bind(PRUNE_BATCH).execute(p).await?.rows_affected()
            }
        };
        deleted += n;
        if n < PRUNE_BATCH as u64 {
            break;
        }
    }
    Ok(deleted)
}
