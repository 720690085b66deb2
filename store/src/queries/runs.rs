//! Reads of runs one by one: the keyset lists, the timeline's window and its live rows, and the
//! set a bulk re-queue selects.

use super::predicates::*;
use super::sql::{Dialect, SqlBuf, Value};
use chrono::{DateTime, Utc};
use lastword_core::{Cursor, PageRequest, RunFilter, Tokens};

/// The columns of a [`RunListRow`](crate::rows::RunListRow), from `runs r JOIN tasks t`, with
/// texts cut to `prefix` characters. Every list row carries its re-claim reason (up to three
/// index probes per row, paid only for the rows returned: a page, or the timeline's window),
/// so the run list, the task page and the timeline's connectors name re-claims by one rule.
fn run_list_select(d: &Dialect, prefix: usize) -> String {
    format!(
        "SELECT {}, {} AS state, {RECLAIM_REASON_SQL} AS reclaim_reason, t.kind, t.source, t.safety \
         FROM runs r JOIN tasks t ON t.id = r.task_id",
        crate::rows::run_list_columns(prefix),
        d.state_sql
    )
}

/// One keyset page, newest claim first; fetches `limit + 1` rows to know whether a next page
/// exists.
pub(crate) fn list_runs(
    d: &Dialect,
    filter: &RunFilter,
    page: &PageRequest,
    now: DateTime<Utc>,
    tokens: &Tokens,
) -> SqlBuf {
    let mut buf = SqlBuf::with_state_params(now, tokens);
    let mut conds = filter_conditions(d, &mut buf, filter, true);
    if let Some(Cursor { claimed_at, id }) = page.after {
        let at = buf.arg(Value::Time(claimed_at));
        let id = buf.arg(Value::I64(id));
        // The leading `<=` is redundant but sargable: it bounds the index range scan, which the
        // OR alone does not on either backend.
        conds.push(format!(
            "r.claimed_at <= {at} AND (r.claimed_at < {at} OR (r.claimed_at = {at} AND r.id < {id}))"
        ));
    }
    let limit = buf.arg(Value::I64(i64::from(page.limit) + 1));
    let sql = format!(
        "{}{} ORDER BY r.claimed_at DESC, r.id DESC LIMIT {limit}",
        run_list_select(d, lastword_core::LIST_TEXT_PREFIX),
        where_clause(&conds)
    );
    buf.push(&sql);
    buf
}

/// Failure runs matching the filter (its states and causes ignored), counted per state and
/// error; the caller folds them into causes with `rows::cause_of`.
#[cfg(feature = "testing")] // counts from history: the rollups' oracle in the tests
pub(crate) fn cause_facets(d: &Dialect, filter: &RunFilter, now: DateTime<Utc>, tokens: &Tokens) -> SqlBuf {
    let mut buf = SqlBuf::with_state_params(now, tokens);
    let mut conds = filter_conditions(d, &mut buf, filter, false);
    conds.push(any_of(lastword_core::Cause::ALL.iter().map(|c| cause_predicate(d, *c))));
    let join = if needs_task_join(filter) { " JOIN tasks t ON t.id = r.task_id" } else { "" };
    let sql = format!(
        "SELECT {} AS state, r.error, COUNT(*) FROM runs r{join}{} GROUP BY 1, 2",
        d.state_sql,
        where_clause(&conds)
    );
    buf.push(&sql);
    buf
}

/// At most this many runs on one timeline (the newest).
pub(crate) const TIMELINE_CAP: i64 = 5000;

/// Runs whose bar overlaps `[since, until]`: claimed before `until` and ending at or after
/// `since`, where an unfinished run ends when its lease does (a silent run's bar stops at the
/// lapse; a running one's lease is still in the future). Newest first, capped.
pub(crate) fn timeline(
    d: &Dialect,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    now: DateTime<Utc>,
    tokens: &Tokens,
) -> SqlBuf {
    let (mut buf, s, u) = SqlBuf::with_window(now, tokens, since, until);
    let cap = buf.arg(Value::I64(TIMELINE_CAP));
    let sql = format!(
        "{} WHERE r.claimed_at <= {u} AND (r.claimed_at >= {s} OR r.finished_at >= {s} \
           OR (r.finished_at IS NULL AND r.lease_expires_at >= {s})) \
         ORDER BY r.claimed_at DESC, r.id DESC LIMIT {cap}",
        run_list_select(d, lastword_core::TIMELINE_TEXT_PREFIX)
    );
    buf.push(&sql);
    buf
}

/// The timeline's rows of the runs `ids` (those a live batch named), for merging into the
/// window the browser already has instead of fetching it again.
pub(crate) fn timeline_runs(d: &Dialect, ids: &[i64], now: DateTime<Utc>, tokens: &Tokens) -> SqlBuf {
    let mut buf = SqlBuf::with_state_params(now, tokens);
    let placeholders: Vec<String> = ids.iter().map(|id| buf.arg(Value::I64(*id))).collect();
    let sql = format!(
        "{} WHERE r.id IN ({}) ORDER BY r.id",
        run_list_select(d, lastword_core::TIMELINE_TEXT_PREFIX),
        placeholders.join(", ")
    );
    buf.push(&sql);
    buf
}

// ---- Folding rows into the view types (pure, shared by both backends).

/// The tasks a bulk re-queue selects, with what its preview needs, by id; at most
/// `BULK_MAX + 1` (one more tells "too many"). `lock`: with the dialect's row locks, inside the
/// bulk transaction.
pub(crate) fn bulk_selection(
    d: &Dialect,
    selection: &lastword_core::BulkSelection,
    now: DateTime<Utc>,
    tokens: &Tokens,
    lock: bool,
) -> SqlBuf {
    let cap = lastword_core::action::BULK_MAX as i64 + 1;
    let mut buf = match selection {
        // Only a run filter decides states; a list of ids binds nothing else.
        lastword_core::BulkSelection::Filter(_) => SqlBuf::with_state_params(now, tokens),
        lastword_core::BulkSelection::Tasks(_) => SqlBuf::default(),
    };
    let ids = match selection {
        lastword_core::BulkSelection::Filter(filter) => {
            let conds = filter_conditions(d, &mut buf, filter, true);
            let join = if needs_task_join(filter) { " JOIN tasks t ON t.id = r.task_id" } else { "" };
            let limit = buf.arg(Value::I64(cap));
            format!("SELECT DISTINCT r.task_id FROM runs r{join}{} LIMIT {limit}", where_clause(&conds))
        }
        lastword_core::BulkSelection::Tasks(ids) => {
            let placeholders: Vec<String> =
                ids.iter().take(cap as usize).map(|id| buf.arg(Value::I64(*id))).collect();
            if placeholders.is_empty() {
                "SELECT NULL".to_string()
            } else {
                placeholders.join(", ")
            }
        }
    };
    // `last_error`: the cause of the task's newest run if that run failed (finished with an
    // error and not rejected as a lost lease), for the retry policy's deterministic causes.
    let sql = format!(
        "SELECT id, kind, safety, status, owner, lease_epoch, lease_expires_at, \
         (SELECT CASE WHEN r2.finished_at IS NOT NULL AND (r2.completion_rows IS NULL OR r2.completion_rows <> 0) \
                 THEN r2.error END \
            FROM runs r2 WHERE r2.task_id = tasks.id ORDER BY r2.lease_epoch DESC LIMIT 1) AS last_error \
         FROM tasks WHERE id IN ({ids}) ORDER BY id{}",
        if lock { d.for_update } else { "" }
    );
    buf.push(&sql);
    buf
}
