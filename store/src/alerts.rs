//! What `/metrics` and the notifier read (issue 14, "Alerts"; the rules in `lastword_core::alerts`).
//!
//! Ordinary functions over a [`Db`] rather than [`crate::Store`] methods: they are read by the
//! server's background tasks only, never by a page, so they need no shared-read cache and no
//! per-backend forwarding. Every statement is bounded by an index: the counts are the rollups'
//! (docs/counts.md) over a two-day horizon, the items are index ranges of recent deaths and lost
//! leases, the `double_executions` flags, and the tasks still being retried.

use crate::queries::{SqlBuf, Value};
use crate::rollups::{self, OverviewRow};
use crate::{Db, StoreError, BUCKET_SECS};
use chrono::{DateTime, Duration, Utc};
use lastword_core::alerts::{
    AttentionNow, CountsReading, DeadCount, ItemCounts, OpenItem, OutcomeCount, DEAD_HORIZON_HOURS,
};
use lastword_core::attention::LOOP_CLAIMS;
use lastword_core::{AttentionKind, RunState, Tokens};
use std::collections::HashMap;

/// At most this many recent items of one kind are read per call (the newest deaths, the lowest
/// ids of the global lists); a list that reaches it is marked partial ([`OpenItems::partial`]) so
/// that no open incident is resolved for falling outside it.
pub const MAX_ITEMS: i64 = 500;

/// The epoch bucket of a task's `updated_at`, per backend (the rollups' `bucket` is of claims).
fn updated_bucket(db: &Db) -> String {
    match db {
        Db::Postgres(_) => format!("floor(extract(epoch from t.updated_at) / {BUCKET_SECS})::bigint"),
        Db::Sqlite(_) => format!("(unixepoch(t.updated_at) / {BUCKET_SECS})"),
    }
}

/// Runs per 15-minute bucket of claims from `since` (a bucket start) to `now`, by state, cause
/// and unsafe lost lease, and tasks that died per bucket over the same span.
pub async fn counts(
    db: &Db,
    tokens: &Tokens,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<CountsReading, StoreError> {
    let buf = rollups::bucket_counts_sql(rollups::dialect(db), since, now, tokens);
    let rows: Vec<OverviewRow> = db.fetch_all(&buf).await?;
    let mut outcomes = Vec::new();
    for (bucket, state, error, safety, runs, _) in rows {
        let (Some(bucket), Some(state)) = (bucket, state) else { continue };
        let Ok(state) = state.parse::<RunState>() else { continue };
        outcomes.push(OutcomeCount {
            bucket,
            state,
            cause: crate::rows::cause_of(state, error.as_deref()),
            unsafe_lost_lease: state == RunState::LostLease && safety.as_deref() == Some("unsafe"),
            runs,
        });
    }
    let sql = format!(
        "SELECT {b}, COUNT(*) FROM tasks t WHERE t.status = 'dead' AND t.updated_at >= $1 AND t.updated_at <= $2 GROUP BY {b}",
        b = updated_bucket(db)
    );
    let dead: Vec<(i64, i64)> =
        on_db!(db, p => sqlx::query_as(&sql).bind(since).bind(now).fetch_all(p).await?);
    let dead = dead.into_iter().map(|(bucket, tasks)| DeadCount { bucket, tasks }).collect();
    Ok(CountsReading { outcomes, dead })
}

/// A task in a re-claim loop: its id, kind, epoch, and the epoch and claim time its streak of
/// failed attempts began with ([`lastword_core::attention::loop_streak`], the same rule).
type LoopRow = (i64, String, i64, Option<i64>, Option<DateTime<Utc>>);

/// Tasks in a re-claim loop now: `queued` or `leased`, claimed at least [`LOOP_CLAIMS`] times
/// since re-queued, whose newest [`LOOP_CLAIMS`] finished runs all failed. The candidates are
/// an index of their own (migration 0013, whose predicate spells the number out, as this text
/// does, so the planner can prove it), not every queued task of a backlog.
pub(crate) async fn loops(db: &Db, tokens: &Tokens, now: DateTime<Utc>) -> Result<Vec<LoopRow>, StoreError> {
    let d = rollups::dialect(db);
    let mut buf = SqlBuf::with_state_params(now, tokens);
    let n = buf.arg(Value::I64(LOOP_CLAIMS as i64));
    let limit = buf.arg(Value::I64(MAX_ITEMS));
    let state = d.state_sql;
    // The newest `n` finished runs of the task: the streak the rule looks at.
    let streak = format!(
        "(SELECT r.lease_epoch AS e, r.claimed_at AS c, {state} AS s FROM runs r \
          WHERE r.task_id = t.id AND ({state}) <> 'running' ORDER BY r.claimed_at DESC, r.id DESC LIMIT {n})"
    );
    buf.push(&format!(
        "SELECT t.id, t.kind, t.lease_epoch, (SELECT MIN(x.e) FROM {streak} x), (SELECT MIN(x.c) FROM {streak} x) \
         FROM tasks t WHERE t.status IN ('queued', 'leased') AND t.attempts >= {LOOP_CLAIMS} \
           AND (SELECT COUNT(*) FROM {streak} x WHERE x.s IN ('silent', 'lost_lease', 'failed', 'empty_output')) = {n} \
         ORDER BY t.id LIMIT {limit}"
    ));
    Ok(db.fetch_all(&buf).await?)
}

/// The newest applied acknowledgement epoch of `item` per task among `ids`, counting only those
/// made since the task's newest compensation (which ends every incident: `attention::current`).
async fn acknowledged_at(db: &Db, item: AttentionKind, ids: &[i64]) -> Result<HashMap<i64, i64>, StoreError> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let d = rollups::dialect(db);
    let sql = format!(
        "SELECT a.task_id, MAX(a.epoch_after) FROM operator_actions a \
         WHERE a.action = 'acknowledge' AND a.outcome = $1 AND a.attention = $2 AND a.task_id IN {ids} \
           AND NOT EXISTS (SELECT 1 FROM operator_actions c WHERE c.task_id = a.task_id \
                             AND c.action = 'compensate' AND c.outcome = $1 AND c.id > a.id) \
         GROUP BY a.task_id",
        ids = (d.id_list)("$3")
    );
    let list = serde_json::to_string(ids).unwrap_or_else(|_| "[]".into());
    let rows: Vec<(Option<i64>, Option<i64>)> = on_db!(db, p => sqlx::query_as(&sql)
        .bind(lastword_core::action::APPLIED)
        .bind(item.as_str())
        .bind(list)
        .fetch_all(p)
        .await?);
    Ok(rows.into_iter().filter_map(|(t, e)| Some((t?, e?))).collect())
}

/// Attention items across tasks now, with how many are acknowledged, for the `/metrics` gauges.
pub async fn attention_now(db: &Db, tokens: &Tokens, now: DateTime<Utc>) -> Result<AttentionNow, StoreError> {
    let flagged = flagged_tasks(db, tokens).await?;
    let (far_past, far_future) = rollups::unbounded();
    let dead_since = now - Duration::hours(DEAD_HORIZON_HOURS);
    let taken = |since| crate::queries::attention_taken(since, far_future);
    let (all, recent) = (taken(far_past), taken(dead_since));
    let (_, double_taken, _): (i64, i64, i64) = db.fetch_one(&all).await?;
    let (dead_taken, _, _): (i64, i64, i64) = db.fetch_one(&recent).await?;
    let dead: i64 = on_db!(db, p => sqlx::query_scalar(
        "SELECT COUNT(*) FROM tasks t WHERE t.status = 'dead' AND t.updated_at >= $1")
        .bind(dead_since)
        .fetch_one(p)
        .await?);
    let (_, loops) = loop_items(db, tokens, now).await?;
    let lost: Vec<i64> = on_db!(db, p => sqlx::query_scalar(&format!(
        "SELECT DISTINCT t.id FROM runs r JOIN tasks t ON t.id = r.task_id WHERE {UNSAFE_LOST_LEASE} AND r.claimed_at >= $1 \
         ORDER BY t.id LIMIT $2"))
        .bind(dead_since)
        .bind(MAX_ITEMS)
        .fetch_all(p)
        .await?);
    let lost_taken = acknowledged_at(db, AttentionKind::UnsafeLostLease, &lost).await?.len() as i64;
    Ok(AttentionNow {
        double_executions: flagged.map(|items| ItemCounts { items, acknowledged: double_taken.min(items) }),
        unsafe_lost_leases: ItemCounts { items: lost.len() as i64, acknowledged: lost_taken },
        dead: ItemCounts { items: dead, acknowledged: dead_taken.min(dead) },
        loops,
    })
}

/// The rule of an unsafe lost lease item (`lastword_core::attention::items`) on `r` and `t`: a
/// lost run of an uncompensated unsafe task that recorded an effect.
const UNSAFE_LOST_LEASE: &str =
    "r.completion_rows = 0 AND r.finished_at IS NOT NULL AND t.safety = 'unsafe' \
     AND t.compensated_at IS NULL \
     AND EXISTS (SELECT 1 FROM effects e WHERE e.task_id = r.task_id AND e.lease_epoch = r.lease_epoch)";

/// Tasks listed with a loop count (the overview's card links to them).
pub const LISTED_LOOPS: usize = 10;

/// The tasks in a re-claim loop now (the first [`LISTED_LOOPS`] ids) and how many there are, of
/// which how many someone acknowledged during their streak (the rule of
/// `lastword_core::attention::current`).
pub(crate) async fn loop_items(
    db: &Db,
    tokens: &Tokens,
    now: DateTime<Utc>,
) -> Result<(Vec<i64>, ItemCounts), StoreError> {
    let looping = loops(db, tokens, now).await?;
    let ids: Vec<i64> = looping.iter().map(|l| l.0).collect();
    let acks = acknowledged_at(db, AttentionKind::Loop, &ids).await?;
    let acknowledged = looping
        .iter()
        .filter(|(id, _, _, from, _)| matches!((acks.get(id), from), (Some(at), Some(from)) if at >= from))
        .count() as i64;
    let listed = ids.iter().copied().take(LISTED_LOOPS).collect();
    Ok((listed, ItemCounts { items: looping.len() as i64, acknowledged }))
}

/// What [`open_items`] found.
#[derive(Clone, Debug, Default)]
pub struct OpenItems {
    pub items: Vec<OpenItem>,
    /// Kinds whose list is not whole: the double-execution flags are being backfilled, or a
    /// global list reached [`MAX_ITEMS`]. An open incident of such a kind that is not in `items`
    /// must not be taken as resolved.
    pub partial: Vec<AttentionKind>,
}

type ItemRow = (i64, String, i64, Option<DateTime<Utc>>);

/// What a scope of [`open_items`] binds as `$1`.
enum ScopeArg {
    Time(DateTime<Utc>),
    /// A JSON array of task ids.
    Ids(String),
}

/// Watched tasks are looked up this many per statement.
const WATCH_CHUNK: usize = 500;

/// Whether the double-execution flags are complete for these tokens, and then how many tasks
/// they flag (a small table: one row per claim and effect of a flagged task).
async fn flagged_tasks(db: &Db, tokens: &Tokens) -> Result<Option<i64>, StoreError> {
    let sql =
        "SELECT CASE WHEN EXISTS (SELECT 1 FROM rollup_state st WHERE st.flags_done_to >= st.flags_target \
                 AND st.no_action = $1 AND st.skip = $2 AND st.refreshed_at IS NOT NULL) \
               THEN (SELECT COUNT(DISTINCT d.task_id) FROM double_executions d) END";
    let no_action = lastword_core::trim_token(&tokens.no_action).to_string();
    let skip = lastword_core::trim_token(&tokens.skip).to_string();
    Ok(on_db!(db, p => sqlx::query_scalar(sql).bind(no_action).bind(skip).fetch_one(p).await?))
}

/// The attention items to notify about now: recent ones (deaths and unsafe lost leases since
/// `since`; every double execution awaiting compensation and every loop), and, whatever their
/// age, whether each of `watch` (tasks with an open incident) still has its items.
pub async fn open_items(
    db: &Db,
    tokens: &Tokens,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
    watch: &[i64],
) -> Result<OpenItems, StoreError> {
    let d = rollups::dialect(db);
    let mut found = OpenItems::default();
    let push = |kind: AttentionKind, rows: Vec<ItemRow>, found: &mut OpenItems| {
        for (task_id, task_kind, epoch, at) in rows {
            if !found.items.iter().any(|i| i.kind == kind && i.task_id == task_id) {
                found.items.push(OpenItem { kind, task_id, task_kind, epoch, since: at });
            }
        }
    };
    // Deaths (recent ones, and the watched tasks still dead) and unsafe lost leases (the rule
    // of `attention::items`, a lost run that recorded an effect: recent ones through the
    // partial index of lost leases, and the watched tasks). Each scope binds its own `$1`; the
    // recent ones are bounded by `$2`, the watched ones by their chunk.
    let mut scopes =
        vec![("t.updated_at >= $1".to_string(), "r.claimed_at >= $1".to_string(), ScopeArg::Time(since))];
    for chunk in watch.chunks(WATCH_CHUNK) {
        let ids = serde_json::to_string(chunk).unwrap_or_else(|_| "[]".into());
        scopes.push((
            format!("t.id IN {}", (d.id_list)("$1")),
            format!("r.task_id IN {}", (d.id_list)("$1")),
            ScopeArg::Ids(ids),
        ));
    }
    for (task_scope, run_scope, arg) in &scopes {
        let dead = format!(
            "SELECT t.id, t.kind, t.lease_epoch, t.updated_at FROM tasks t \
             WHERE t.status = 'dead' AND {task_scope} ORDER BY t.updated_at DESC LIMIT $2"
        );
        let lost = format!(
            "SELECT t.id, t.kind, t.lease_epoch, MIN(r.claimed_at) FROM runs r JOIN tasks t ON t.id = r.task_id \
             WHERE {UNSAFE_LOST_LEASE} AND {run_scope} \
             GROUP BY t.id, t.kind, t.lease_epoch ORDER BY t.id LIMIT $2"
        );
        for (kind, sql) in [(AttentionKind::Dead, dead), (AttentionKind::UnsafeLostLease, lost)] {
            let rows: Vec<ItemRow> = match arg {
                ScopeArg::Time(t) => {
                    on_db!(db, p => sqlx::query_as(&sql).bind(*t).bind(MAX_ITEMS).fetch_all(p).await?)
                }
                ScopeArg::Ids(ids) => {
                    on_db!(db, p => sqlx::query_as(&sql).bind(ids).bind(WATCH_CHUNK as i64).fetch_all(p).await?)
                }
            };
            push(kind, rows, &mut found);
        }
    }
    // Double executions awaiting compensation (the maintained flags) and loops: whole lists,
    // partial when they reach the bound.
    match flagged_tasks(db, tokens).await? {
        Some(_) => {
            let sql = "SELECT t.id, t.kind, t.lease_epoch, MAX(x.active_at) FROM double_executions x \
                       JOIN tasks t ON t.id = x.task_id GROUP BY t.id, t.kind, t.lease_epoch ORDER BY t.id LIMIT $1";
            let rows: Vec<ItemRow> = on_db!(db, p => sqlx::query_as(sql).bind(MAX_ITEMS).fetch_all(p).await?);
            if rows.len() as i64 >= MAX_ITEMS {
                found.partial.push(AttentionKind::DoubleExecution);
            }
            push(AttentionKind::DoubleExecution, rows, &mut found);
        }
        None => found.partial.push(AttentionKind::DoubleExecution),
    }
    let looping = loops(db, tokens, now).await?;
    if looping.len() as i64 >= MAX_ITEMS {
        found.partial.push(AttentionKind::Loop);
    }
    let rows = looping.into_iter().map(|(id, kind, epoch, _, at)| (id, kind, epoch, at)).collect();
    push(AttentionKind::Loop, rows, &mut found);
    Ok(found)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_loop_index_predicate_spells_the_rule_s_number() {
        let n = lastword_core::attention::LOOP_CLAIMS;
        for sql in [
            include_str!("../../migrations/postgres/0013_add_retried_index.sql"),
            include_str!("../../migrations/sqlite/0013_add_retried_index.sql"),
        ] {
            assert!(sql.contains(&format!("attempts >= {n};")), "{sql}");
        }
    }
}
