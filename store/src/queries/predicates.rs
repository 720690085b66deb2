//! The conditions every read shares: a run's state or failure cause as a sargable predicate
//! (so the partial indexes on `runs` apply), the re-claim reason's SQL twin, and the filter and
//! window conditions of the failures page, the API and the CLI.

use super::sql::{Dialect, SqlBuf, Value};
use chrono::{DateTime, Utc};
use lastword_core::{Cause, ErrorCause, RunFilter, RunState};

/// A finished run whose final write was not rejected (`completion_rows` 1 or not recorded).
const FINISHED_ACCEPTED: &str =
    "r.finished_at IS NOT NULL AND (r.completion_rows IS NULL OR r.completion_rows <> 0)";

/// The four error causes spelled out in `runs.error`; anything else counts as `other`.
const NAMED_ERRORS: &str = "('timeout', 'api_error', 'context_overflow', 'crash')";

/// The SQL twin of `lastword_core::reclaim::reclaim_reason` over `runs r`: why `r` re-claimed
/// its task, from the task's run of the next lower epoch `p` (NULL when there is none: a first
/// claim). One text for both backends: every comparison is between two columns of one type
/// (SQLite's RFC 3339 texts order like time). Each lookup is an index probe: `p` by
/// `runs_task_epoch_key`, the re-queue by `operator_actions_task_idx`, the worker's later claim
/// by `runs_worker_claimed_idx`.
pub(crate) const RECLAIM_REASON_SQL: &str = "(SELECT CASE \
    WHEN EXISTS (SELECT 1 FROM operator_actions a WHERE a.task_id = r.task_id AND a.action = 'requeue' \
        AND a.outcome = 'applied' AND a.created_at >= p.claimed_at AND a.created_at <= r.claimed_at) \
        THEN 'operator_requeue' \
    WHEN p.completion_rows = 0 OR p.finished_at > r.claimed_at THEN 'slow_worker' \
    WHEN p.finished_at IS NOT NULL THEN 'retry' \
    WHEN EXISTS (SELECT 1 FROM runs w WHERE w.worker = p.worker AND w.claimed_at > p.lease_expires_at) \
        THEN 'stalled_worker' \
    ELSE 'dead_worker' END \
    FROM runs p WHERE p.task_id = r.task_id AND p.lease_epoch < r.lease_epoch \
    ORDER BY p.lease_epoch DESC LIMIT 1)";

/// A condition over `runs r` that holds exactly when the `STATE_SQL` twin decides `state`
/// (with `$1` now, `$2`/`$3` the tokens), written so the partial indexes on `runs` apply.
pub(crate) fn state_predicate(d: &Dialect, state: RunState) -> String {
    let out = d.trimmed_output;
    let ok = format!("{FINISHED_ACCEPTED} AND r.error IS NULL");
    match state {
        RunState::Running => "r.finished_at IS NULL AND r.lease_expires_at > $1".to_string(),
        RunState::Silent => "r.finished_at IS NULL AND r.lease_expires_at <= $1".to_string(),
        RunState::LostLease => "r.finished_at IS NOT NULL AND r.completion_rows = 0".to_string(),
        RunState::Failed => format!("r.error IS NOT NULL AND {FINISHED_ACCEPTED}"),
        RunState::EmptyOutput => format!("{ok} AND COALESCE({out}, '') = ''"),
        RunState::NoAction => format!("{ok} AND {out} <> '' AND {out} = $2"),
        RunState::Skip => format!("{ok} AND {out} <> '' AND {out} <> $2 AND {out} = $3"),
        RunState::Acted => format!("{ok} AND {out} <> '' AND {out} <> $2 AND {out} <> $3"),
    }
}

/// A condition over `runs r` that holds exactly when the run is a failure with `cause`.
pub(crate) fn cause_predicate(d: &Dialect, cause: Cause) -> String {
    match cause {
        Cause::Silent => state_predicate(d, RunState::Silent),
        Cause::LostLease => state_predicate(d, RunState::LostLease),
        Cause::EmptyOutput => state_predicate(d, RunState::EmptyOutput),
        Cause::Other => {
            format!("r.error IS NOT NULL AND r.error NOT IN {NAMED_ERRORS} AND {FINISHED_ACCEPTED}")
        }
        named => {
            // The four named causes are a closed vocabulary: safe to inline.
            let error = named.as_error().unwrap_or(ErrorCause::Other).as_str();
            format!("r.error = '{error}' AND {FINISHED_ACCEPTED}")
        }
    }
}

/// A run that finished having acted, as `lastword_core::run_acted` decides: `acted`, or a lost
/// lease whose discarded output is an action. Both reduce to "finished, no error, an output
/// that is neither blank nor a token", whatever `completion_rows` says.
pub(crate) fn acted_predicate(d: &Dialect) -> String {
    acted_predicate_with(d, "$2", "$3")
}

/// [`acted_predicate`] with the tokens in other placeholders.
pub(crate) fn acted_predicate_with(d: &Dialect, no_action: &str, skip: &str) -> String {
    let out = d.trimmed_output;
    format!(
        "r.finished_at IS NOT NULL AND r.error IS NULL AND {out} <> '' AND {out} <> {no_action} AND {out} <> {skip}"
    )
}

/// The unsafe tasks executed twice and not compensated, over `tasks t`, as
/// `lastword_core::needs_compensation` decides (tokens in `$2`/`$3`, via [`acted_predicate`]).
pub(crate) fn needs_compensation_predicate(d: &Dialect) -> String {
    format!(
        "t.safety = 'unsafe' AND t.compensated_at IS NULL \
         AND ((SELECT COUNT(DISTINCT e.lease_epoch) FROM effects e WHERE e.task_id = t.id) >= 2 \
              OR (SELECT COUNT(*) FROM runs r WHERE r.task_id = t.id AND {}) >= 2)",
        acted_predicate(d)
    )
}

pub(crate) fn any_of(preds: impl IntoIterator<Item = String>) -> String {
    let parts: Vec<String> = preds.into_iter().map(|p| format!("({p})")).collect();
    format!("({})", parts.join(" OR "))
}

/// `%`, `_` and the escape character itself taken literally in a `LIKE … ESCAPE '\'` pattern.
pub(crate) fn like_pattern(q: &str) -> String {
    let mut p = String::with_capacity(q.len() + 2);
    p.push('%');
    for c in q.chars() {
        if matches!(c, '\\' | '%' | '_') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

/// Whether the filter needs `tasks t` joined.
pub(crate) fn needs_task_join(filter: &RunFilter) -> bool {
    filter.kind.is_some() || filter.source.is_some()
}

/// The filter's conditions (AND-ed), with or without its state and cause selections.
pub(crate) fn filter_conditions(
    d: &Dialect,
    buf: &mut SqlBuf,
    filter: &RunFilter,
    with_states: bool,
) -> Vec<String> {
    let mut conds = Vec::new();
    if let Some(w) = &filter.worker {
        conds.push(format!("r.worker = {}", buf.arg(Value::Text(w.clone()))));
    }
    if let Some(k) = &filter.kind {
        conds.push(format!("t.kind = {}", buf.arg(Value::Text(k.clone()))));
    }
    if let Some(s) = filter.source {
        conds.push(format!("t.source = {}", buf.arg(Value::Text(s.as_str().to_string()))));
    }
    if let Some(id) = filter.task_id {
        conds.push(format!("r.task_id = {}", buf.arg(Value::I64(id))));
    }
    window_conditions(buf, &mut conds, "r.claimed_at", filter.since, filter.until);
    if let Some(q) = &filter.q {
        let p = buf.arg(Value::Text(like_pattern(q)));
        let like = d.ilike;
        conds.push(format!(
            "(r.output {like} {p} ESCAPE '\\' OR r.error {like} {p} ESCAPE '\\' OR r.error_detail {like} {p} ESCAPE '\\')"
        ));
    }
    if !filter.reclaims.is_empty() {
        // Literals from a closed vocabulary, not user text.
        let reasons: Vec<String> = filter.reclaims.iter().map(|r| format!("'{}'", r.as_str())).collect();
        conds.push(format!("{RECLAIM_REASON_SQL} IN ({})", reasons.join(", ")));
    }
    if with_states {
        if !filter.states.is_empty() {
            conds.push(any_of(filter.states.iter().map(|s| state_predicate(d, *s))));
        }
        if !filter.causes.is_empty() {
            conds.push(any_of(filter.causes.iter().map(|c| cause_predicate(d, *c))));
        }
    }
    conds
}

/// `column` in `[since, until)`, each bound only when given.
pub(crate) fn window_conditions(
    buf: &mut SqlBuf,
    conds: &mut Vec<String>,
    column: &str,
    since: Option<DateTime<Utc>>,
    until: Option<DateTime<Utc>>,
) {
    if let Some(since) = since {
        conds.push(format!("{column} >= {}", buf.arg(Value::Time(since))));
    }
    if let Some(until) = until {
        conds.push(format!("{column} < {}", buf.arg(Value::Time(until))));
    }
}

pub(crate) fn where_clause(conds: &[String]) -> String {
    if conds.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conds.join(" AND "))
    }
}
