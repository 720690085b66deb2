//! Keeping history bounded: `lastword prune --older-than 30d`.
//!
//! At a busy fleet's rate `runs` grows by hundreds of thousands of rows a day; the dashboard's
//! reads are index-bounded, but disk, vacuum and backups are not. Pruning deletes old history
//! while the fleet keeps running, so it must never make a runner wait:
//!
//! - **Small batches, each its own short transaction**: at most `batch` rows per statement,
//!   found through an index (`runs_claimed_idx`, oldest first), so no statement holds locks for
//!   long and vacuum can reclaim as it goes.
//! - **Only settled history**: a run is deleted only when its task is not `queued` or `leased`
//!   (a run of live work is what a worker's heartbeat and fenced finish write to), and a task
//!   only when it is settled (`completed`, `failed` or `dead`), untouched since the cutoff, has
//!   no run left, and has **no audit entry**: `operator_actions` is the record of who did what
//!   and outlives the history it refers to.
//! - Effects go with their run (`ON DELETE CASCADE`, the outbox row is history too).
//!
//! Deletes log nothing in `change_log` (its triggers fire on insert and update), so open pages
//! are not woken by a prune, and the count rollups (docs/counts.md) would not notice: the last
//! phase therefore forgets the rollups of every bucket before the cutoff (the maintainer
//! recounts those that still hold runs, as for any missing bucket) and the double-execution
//! flags of deleted tasks and runs. Those tables are the dashboard's own; no runner waits on
//! them.

use crate::{Db, StoreError};
use chrono::{DateTime, Utc};
use std::time::Duration;

/// How much a prune removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PruneReport {
    pub runs: u64,
    pub tasks: u64,
    /// Delete statements run (each its own transaction).
    pub batches: u64,
}

/// How a prune proceeds.
#[derive(Clone, Copy, Debug)]
pub struct PruneOptions {
    /// Rows per delete statement.
    pub batch: i64,
    /// Pause between batches: gives the fleet's writes the disk and the locks.
    pub pause: Duration,
}

impl Default for PruneOptions {
    fn default() -> Self {
        // 1 000 rows delete in a few milliseconds on PostgreSQL; 10 ms between batches keeps a
        // prune of millions of rows to minutes while leaving the database to the fleet.
        PruneOptions { batch: 1_000, pause: Duration::from_millis(10) }
    }
}

/// Runs claimed before `$1` whose task is settled, oldest first, at most `$2`.
const RUNS_SQL: &str = "DELETE FROM runs WHERE id IN (
        SELECT r.id FROM runs r JOIN tasks t ON t.id = r.task_id
        WHERE r.claimed_at < $1 AND t.status NOT IN ('queued', 'leased')
        ORDER BY r.claimed_at, r.id LIMIT $2)";

/// Settled tasks untouched since `$1` with no run and no audit entry left, at most `$2`.
const TASKS_SQL: &str = "DELETE FROM tasks WHERE id IN (
        SELECT t.id FROM tasks t
        WHERE t.status IN ('completed', 'failed', 'dead') AND t.updated_at < $1
          AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.task_id = t.id)
          AND NOT EXISTS (SELECT 1 FROM operator_actions a WHERE a.task_id = t.id)
        ORDER BY t.updated_at, t.id LIMIT $2)";

/// The rollups of the buckets before the cutoff's (`$1`, a bucket number): unbounded
/// statements, on tables no runner touches.
const ROLLUP_SQL: [&str; 3] = [
    "DELETE FROM run_rollups WHERE bucket < $1",
    "DELETE FROM worker_rollups WHERE bucket < $1",
    "DELETE FROM run_rollup_buckets WHERE bucket < $1",
];
/// The double-execution flags of deleted runs (activity before the cutoff, `$1`) and tasks.
const FLAGS_SQL: &str = "DELETE FROM double_executions WHERE active_at < $1 \
    OR NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = double_executions.task_id)";

async fn delete_batch(db: &Db, sql: &str, cutoff: DateTime<Utc>, batch: i64) -> Result<u64, StoreError> {
    Ok(match db {
        Db::Postgres(p) => sqlx::query(sql).bind(cutoff).bind(batch).execute(p).await?.rows_affected(),
        Db::Sqlite(p) => sqlx::query(sql).bind(cutoff).bind(batch).execute(p).await?.rows_affected(),
    })
}

/// Deletes settled history from before `cutoff` (see the module header), batch by batch until
/// none is left. `progress` is called after every batch with the running totals.
pub async fn prune(
    db: &Db,
    cutoff: DateTime<Utc>,
    options: PruneOptions,
    mut progress: impl FnMut(&PruneReport),
) -> Result<PruneReport, StoreError> {
    let batch = options.batch.max(1);
    let mut report = PruneReport::default();
    for (sql, count) in [(RUNS_SQL, 0usize), (TASKS_SQL, 1usize)] {
        loop {
            let n = delete_batch(db, sql, cutoff, batch).await?;
            report.batches += 1;
            if count == 0 {
                report.runs += n;
            } else {
                report.tasks += n;
            }
            progress(&report);
            if n < batch as u64 {
                break;
            }
            tokio::time::sleep(options.pause).await;
        }
    }
    let bucket = cutoff.timestamp().div_euclid(crate::BUCKET_SECS);
    for sql in ROLLUP_SQL {
        match db {
            Db::Postgres(p) => sqlx::query(sql).bind(bucket).execute(p).await?.rows_affected(),
            Db::Sqlite(p) => sqlx::query(sql).bind(bucket).execute(p).await?.rows_affected(),
        };
    }
    match db {
        Db::Postgres(p) => sqlx::query(FLAGS_SQL).bind(cutoff).execute(p).await?.rows_affected(),
        Db::Sqlite(p) => sqlx::query(FLAGS_SQL).bind(cutoff).execute(p).await?.rows_affected(),
    };
    Ok(report)
}
