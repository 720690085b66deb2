//! The dashboard's read queries, built once as text for either backend.
//!
//! Every query that decides a run's state binds `$1` now, `$2`/`$3` the trimmed tokens (see
//! [`SqlBuf::with_state_params`]); filters append numbered parameters
//! after them through [`SqlBuf`]. `$n` placeholders work on both backends (sqlx maps SQLite's
//! `$n` names to the n-th argument), so one text serves both, with the few dialect differences
//! taken from a [`Dialect`].
//!
//! States and causes are filtered with *sargable* predicates ([`state_predicate`],
//! [`cause_predicate`]) rather than by comparing the `STATE_SQL` twin's result, so the planner
//! can use the partial indexes on `runs`; the conformance suite checks that each predicate
//! selects exactly the runs the twin puts in that state or cause.

pub(crate) mod task;

use chrono::{DateTime, Utc};
use lastword_core::{
    Bucket, Cause, Cursor, ErrorCause, HeldLease, PageRequest, RunFilter, RunState, Tokens, WorkerSummary,
};

/// What differs between the PostgreSQL and SQLite texts of the dashboard's queries.
pub(crate) struct Dialect {
    /// The `STATE_SQL` twin of `lastword_core::run_state` over `runs r`.
    pub state_sql: &'static str,
    /// `r.output` trimmed of exactly the white space `lastword_core::trim_token` trims.
    pub trimmed_output: &'static str,
    /// The case-insensitive `LIKE` operator.
    pub ilike: &'static str,
    /// `r.claimed_at` as whole seconds since the epoch, integer-divided by the parameter named
    /// by the argument (a bucket length in seconds).
    pub bucket: fn(&str) -> String,
    /// How an operator action's transaction begins: SQLite takes the write lock up front
    /// (`BEGIN IMMEDIATE`), so a read-then-write cannot deadlock against another writer.
    pub begin_write: &'static str,
    /// Row locks for the rows an action reads before it writes them (PostgreSQL only; SQLite's
    /// write lock already covers the database).
    pub for_update: &'static str,
    /// The start of rollup bucket number `arg` (see `crate::rollups`), as a value that compares
    /// with `runs.claimed_at` like time does.
    pub bucket_start: fn(&str) -> String,
    /// How a rollup bucket's recomputation begins: one snapshot for all its statements.
    pub begin_rollup: &'static str,
    /// How a read of several statements that must agree begins (a task page: the task, its
    /// runs, effects and audit): one snapshot, so a runner's commit between two of them cannot
    /// show a finished run beside a task still leased.
    pub begin_snapshot: &'static str,
    /// A statement taking a transaction-scoped advisory lock on `($1, $2)` without waiting,
    /// answering true when it got it (PostgreSQL; SQLite's write lock already serialises).
    pub try_lock: Option<&'static str>,
    /// `arg` (a JSON array of integers, as text) as a set to use after `IN`.
    pub id_list: fn(&str) -> String,
    /// `runs r` restricted to the `claimed_at` ranges `[lo, hi)` of a CTE `g`, as index ranges.
    pub raw_runs: &'static str,
    /// `(table, estimated rows)` of `tasks`, `runs` and `effects` from the catalogue, where the
    /// database keeps such estimates (PostgreSQL's `reltuples`, -1 before the first analyze).
    pub row_estimates: Option<&'static str>,
    /// The time `arg` as milliseconds since the epoch, a number that subtracts like time.
    pub epoch_ms: fn(&str) -> String,
    /// The database's own clock now (not the server's, not a worker's): what clock skew is
    /// measured against.
    pub db_now: &'static str,
}

/// Below this many rows (by the catalogue's estimate) a table's total is counted exactly; above
/// it the estimate stands, marked as one: an exact `COUNT(*)` of 10 M runs took 0.8 s a request.
pub(crate) const EXACT_TOTALS_BELOW: i64 = 100_000;

/// A bound value of a dynamically built query.
#[derive(Clone, Debug)]
pub(crate) enum Value {
    I64(i64),
    /// PostgreSQL picks a function's overload by its arguments' types (the advisory locks
    /// take two `int4` keys).
    I32(i32),
    Text(String),
    Time(DateTime<Utc>),
    /// Typed NULLs: PostgreSQL infers a parameter's type from what is bound, so a missing
    /// number must still be bound as a number.
    MaybeI64(Option<i64>),
    MaybeText(Option<String>),
}

impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Value::I32(v)
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::I64(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(v.to_string())
    }
}

impl From<&String> for Value {
    fn from(v: &String) -> Self {
        Value::Text(v.clone())
    }
}

impl From<DateTime<Utc>> for Value {
    fn from(v: DateTime<Utc>) -> Self {
        Value::Time(v)
    }
}

impl From<Option<i64>> for Value {
    fn from(v: Option<i64>) -> Self {
        Value::MaybeI64(v)
    }
}

impl From<Option<&str>> for Value {
    fn from(v: Option<&str>) -> Self {
        Value::MaybeText(v.map(str::to_string))
    }
}

/// Query text plus its arguments in `$n` order: [`SqlBuf::arg`] appends a value and returns
/// its placeholder, so the text and the arguments cannot drift apart.
#[derive(Clone, Debug, Default)]
pub(crate) struct SqlBuf {
    pub sql: String,
    pub args: Vec<Value>,
}

impl SqlBuf {
    /// A query whose `$1..$3` are the state parameters (now, no-action token, skip token).
    pub fn with_state_params(now: DateTime<Utc>, tokens: &Tokens) -> Self {
        SqlBuf {
            sql: String::new(),
            args: vec![
                Value::Time(now),
                Value::Text(lastword_core::trim_token(&tokens.no_action).to_string()),
                Value::Text(lastword_core::trim_token(&tokens.skip).to_string()),
            ],
        }
    }

    /// A fixed statement whose `$n` parameters are bound, in order, with [`SqlBuf::bind`].
    pub fn statement(sql: impl Into<String>) -> Self {
        SqlBuf { sql: sql.into(), args: Vec::new() }
    }

    /// The next parameter's value (builder form of [`SqlBuf::arg`] for fixed statements).
    pub fn bind(mut self, value: impl Into<Value>) -> Self {
        self.args.push(value.into());
        self
    }

    pub fn push(&mut self, text: &str) -> &mut Self {
        self.sql.push_str(text);
        self
    }

    /// Appends `value` to the arguments; returns its placeholder (`$n`).
    pub fn arg(&mut self, value: Value) -> String {
        self.args.push(value);
        format!("${}", self.args.len())
    }
}

/// Binds every argument of a [`SqlBuf`] to a sqlx query, in order.
macro_rules! bind_values {
    ($query:expr, $args:expr) => {{
        let mut q = $query;
        for value in $args {
            q = match value {
                $crate::queries::Value::I64(v) => q.bind(*v),
                $crate::queries::Value::I32(v) => q.bind(*v),
                $crate::queries::Value::Text(v) => q.bind(v.clone()),
                $crate::queries::Value::Time(v) => q.bind(*v),
                $crate::queries::Value::MaybeI64(v) => q.bind(*v),
                $crate::queries::Value::MaybeText(v) => q.bind(v.clone()),
            };
        }
        q
    }};
}
pub(crate) use bind_values;

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
fn window_conditions(
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
    conds.push(any_of(Cause::ALL.iter().map(|c| cause_predicate(d, *c))));
    let join = if needs_task_join(filter) { " JOIN tasks t ON t.id = r.task_id" } else { "" };
    let sql = format!(
        "SELECT {} AS state, r.error, COUNT(*) FROM runs r{join}{} GROUP BY 1, 2",
        d.state_sql,
        where_clause(&conds)
    );
    buf.push(&sql);
    buf
}

/// Runs claimed in `[since, until)` counted per state and error.
#[cfg(feature = "testing")] // counts from history: the rollups' oracle in the tests
pub(crate) fn overview_counts(
    d: &Dialect,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    now: DateTime<Utc>,
    tokens: &Tokens,
) -> SqlBuf {
    let mut buf = SqlBuf::with_state_params(now, tokens);
    let (s, u) = (buf.arg(Value::Time(since)), buf.arg(Value::Time(until)));
    let sql = format!(
        "SELECT {} AS state, r.error, COUNT(*) FROM runs r WHERE r.claimed_at >= {s} AND r.claimed_at < {u} \
         GROUP BY 1, 2",
        d.state_sql
    );
    buf.push(&sql);
    buf
}

/// Runs claimed in `[since, until)` counted per time bucket (epoch seconds / `bucket_secs`)
/// and state.
#[cfg(feature = "testing")] // counts from history: the rollups' oracle in the tests
pub(crate) fn overview_series(
    d: &Dialect,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    bucket_secs: i64,
    now: DateTime<Utc>,
    tokens: &Tokens,
) -> SqlBuf {
    let mut buf = SqlBuf::with_state_params(now, tokens);
    let (s, u) = (buf.arg(Value::Time(since)), buf.arg(Value::Time(until)));
    let b = buf.arg(Value::I64(bucket_secs));
    let sql = format!(
        "SELECT {} AS bucket, {} AS state, COUNT(*) FROM runs r \
         WHERE r.claimed_at >= {s} AND r.claimed_at < {u} GROUP BY 1, 2 ORDER BY 1, 2",
        (d.bucket)(&b),
        d.state_sql
    );
    buf.push(&sql);
    buf
}

/// The "needs attention" counts for `[since, until)` in one row: unsafe lost leases, unsafe
/// double executions not compensated (among tasks with runs or effects in the window), silent
/// runs, dead tasks.
pub(crate) fn attention(
    d: &Dialect,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    now: DateTime<Utc>,
    tokens: &Tokens,
) -> SqlBuf {
    let mut buf = SqlBuf::with_state_params(now, tokens);
    let (s, u) = (buf.arg(Value::Time(since)), buf.arg(Value::Time(until)));
    let lost = state_predicate(d, RunState::LostLease);
    let silent = state_predicate(d, RunState::Silent);
    let needs = needs_compensation_predicate(d);
    let sql = format!(
        "SELECT \
           (SELECT COUNT(*) FROM runs r JOIN tasks t ON t.id = r.task_id \
             WHERE r.claimed_at >= {s} AND r.claimed_at < {u} AND t.safety = 'unsafe' AND {lost}), \
           (SELECT COUNT(*) FROM tasks t \
             WHERE t.id IN (SELECT r.task_id FROM runs r WHERE r.claimed_at >= {s} AND r.claimed_at < {u} \
                            UNION SELECT e.task_id FROM effects e WHERE e.created_at >= {s} AND e.created_at < {u}) \
               AND {needs}), \
           (SELECT COUNT(*) FROM runs r WHERE r.claimed_at >= {s} AND r.claimed_at < {u} AND {silent}), \
           (SELECT COUNT(*) FROM tasks t WHERE t.status = 'dead' AND t.updated_at >= {s} AND t.updated_at < {u})"
    );
    buf.push(&sql);
    buf
}

/// The acknowledged part of the attention counts (`lastword_core::attention`), read from the
/// acknowledgements (few rows, each an index lookup by task): dead tasks of the window whose
/// death someone took at its epoch, and unsafe, uncompensated double executions active in the
/// window that someone took since their last compensation. Read by the rollup-backed overview
/// and its oracle alike.
pub(crate) fn attention_taken(since: DateTime<Utc>, until: DateTime<Utc>) -> SqlBuf {
    let mut buf = SqlBuf::default();
    let (s, u) = (buf.arg(Value::Time(since)), buf.arg(Value::Time(until)));
    let applied = lastword_core::action::APPLIED;
    let acks = |item: &str| {
        format!(
            "FROM operator_actions a JOIN tasks t ON t.id = a.task_id \
             WHERE a.action = 'acknowledge' AND a.outcome = '{applied}' AND a.attention = '{item}'"
        )
    };
    let sql = format!(
        "SELECT \
           (SELECT COUNT(DISTINCT t.id) {dead} AND a.epoch_after = t.lease_epoch AND t.status = 'dead' \
              AND t.updated_at >= {s} AND t.updated_at < {u}), \
           (SELECT COUNT(DISTINCT t.id) {double} AND t.safety = 'unsafe' AND t.compensated_at IS NULL \
              AND NOT EXISTS (SELECT 1 FROM operator_actions c WHERE c.task_id = t.id AND c.action = 'compensate' \
                                AND c.outcome = '{applied}' AND c.id > a.id) \
              AND (EXISTS (SELECT 1 FROM runs r WHERE r.task_id = t.id AND r.claimed_at >= {s} AND r.claimed_at < {u}) \
                   OR EXISTS (SELECT 1 FROM effects e WHERE e.task_id = t.id AND e.created_at >= {s} AND e.created_at < {u}))), \
           (SELECT COUNT(*) FROM runs r JOIN tasks t ON t.id = r.task_id \
              WHERE r.completion_rows = 0 AND r.finished_at IS NOT NULL AND r.claimed_at >= {s} AND r.claimed_at < {u} \
                AND t.safety = 'unsafe' AND t.compensated_at IS NULL \
                AND EXISTS (SELECT 1 FROM operator_actions a WHERE a.task_id = t.id AND a.action = 'acknowledge' \
                              AND a.outcome = '{applied}' AND a.attention = 'unsafe_lost_lease' \
                              AND NOT EXISTS (SELECT 1 FROM operator_actions c WHERE c.task_id = t.id \
                                                AND c.action = 'compensate' AND c.outcome = '{applied}' AND c.id > a.id)))",
        dead = acks("dead"),
        double = acks("double_execution"),
    );
    buf.push(&sql);
    buf
}

/// Per worker with runs claimed since `since`: runs, failures, last claim, last heartbeat.
#[cfg(feature = "testing")] // counts from history: the rollups' oracle in the tests
pub(crate) fn worker_activity(
    d: &Dialect,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
    tokens: &Tokens,
) -> SqlBuf {
    let mut buf = SqlBuf::with_state_params(now, tokens);
    let s = buf.arg(Value::Time(since));
    let failure = any_of(RunState::ALL.iter().filter(|st| st.is_failure()).map(|st| state_predicate(d, *st)));
    let sql = format!(
        "SELECT r.worker, COUNT(*), COUNT(CASE WHEN {failure} THEN 1 END), MAX(r.claimed_at), MAX(r.heartbeat_at) \
         FROM runs r WHERE r.claimed_at >= {s} GROUP BY r.worker"
    );
    buf.push(&sql);
    buf
}

/// Every lease held now, with the claim and heartbeat of the run that holds it.
pub(crate) const HELD_LEASES: &str =
    "SELECT t.owner, t.id, t.lease_epoch, t.lease_expires_at, r.claimed_at, \
     r.heartbeat_at FROM tasks t LEFT JOIN runs r ON r.task_id = t.id AND r.lease_epoch = t.lease_epoch \
     WHERE t.status = 'leased' AND t.owner IS NOT NULL ORDER BY t.owner, t.id";

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
    let mut buf = SqlBuf::with_state_params(now, tokens);
    let (s, u) = (buf.arg(Value::Time(since)), buf.arg(Value::Time(until)));
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

fn parse_state(s: &str) -> RunState {
    // The SQL twin only emits known states (see `rows::RunRow`).
    s.parse::<RunState>().unwrap_or(RunState::Running)
}

/// A `(state, error, count)` row of the grouped count queries.
pub(crate) type StateErrorCount = (String, Option<String>, i64);
/// Counts per state and per cause, every value of each vocabulary listed in order.
pub(crate) type StateAndCauseCounts = (Vec<(RunState, i64)>, Vec<(Cause, i64)>);

/// `(state, error, count)` rows → counts per state and per failure cause, each in its
/// vocabulary's order with zeros included.
pub(crate) fn fold_state_error_counts(rows: &[StateErrorCount]) -> StateAndCauseCounts {
    let mut by_state: Vec<(RunState, i64)> = RunState::ALL.iter().map(|s| (*s, 0)).collect();
    let mut by_cause: Vec<(Cause, i64)> = Cause::ALL.iter().map(|c| (*c, 0)).collect();
    for (state, error, n) in rows {
        let state = parse_state(state);
        if let Some(slot) = by_state.iter_mut().find(|(s, _)| *s == state) {
            slot.1 += n;
        }
        if let Some(cause) = crate::rows::cause_of(state, error.as_deref()) {
            if let Some(slot) = by_cause.iter_mut().find(|(c, _)| *c == cause) {
                slot.1 += n;
            }
        }
    }
    (by_state, by_cause)
}

/// At most this many buckets are filled in with zeros; a finer series is returned sparse.
pub(crate) const MAX_FILLED_BUCKETS: i64 = 2000;

/// `(bucket, state, count)` rows (bucket = epoch seconds / `bucket_secs`) → one [`Bucket`]
/// per bucket from `since` to `until`, oldest first, every state listed.
pub(crate) fn fold_series(
    rows: &[(i64, String, i64)],
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    bucket_secs: i64,
) -> Vec<Bucket> {
    let first = since.timestamp().div_euclid(bucket_secs);
    // `until` is exclusive: a run claimed exactly at `until` is not counted.
    let last = (until.timestamp() - i64::from(until.timestamp_subsec_nanos() == 0)).div_euclid(bucket_secs);
    let mut keys: Vec<i64> = if last >= first && last - first < MAX_FILLED_BUCKETS {
        (first..=last).collect()
    } else {
        Vec::new()
    };
    keys.extend(rows.iter().map(|(b, _, _)| *b));
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter()
        .map(|b| {
            let mut counts: Vec<(RunState, i64)> = RunState::ALL.iter().map(|s| (*s, 0)).collect();
            for (_, state, n) in rows.iter().filter(|(rb, _, _)| *rb == b) {
                let state = parse_state(state);
                if let Some(slot) = counts.iter_mut().find(|(s, _)| *s == state) {
                    slot.1 += n;
                }
            }
            Bucket { start: DateTime::from_timestamp(b.saturating_mul(bucket_secs), 0), counts }
        })
        .collect()
}

/// Per-worker activity in the window, merged with the leases held now.
pub(crate) type ActivityRow = (String, i64, i64, Option<DateTime<Utc>>, Option<DateTime<Utc>>);
/// A held lease: owner, task, epoch, expiry, and the claim and heartbeat of its run.
pub(crate) type LeaseRow =
    (String, i64, i64, Option<DateTime<Utc>>, Option<DateTime<Utc>>, Option<DateTime<Utc>>);

pub(crate) fn fold_workers(
    activity: Vec<ActivityRow>,
    leases: Vec<LeaseRow>,
    now: DateTime<Utc>,
) -> Vec<WorkerSummary> {
    let mut by_name: std::collections::BTreeMap<String, WorkerSummary> = std::collections::BTreeMap::new();
    let blank = |worker: &str| WorkerSummary {
        worker: worker.to_string(),
        runs: 0,
        failures: 0,
        last_claim_at: None,
        last_heartbeat_at: None,
        leases: Vec::new(),
        holds_lapsed_lease: false,
    };
    for (worker, runs, failures, last_claim, last_heartbeat) in activity {
        let w = by_name.entry(worker.clone()).or_insert_with(|| blank(&worker));
        w.runs = runs;
        w.failures = failures;
        w.last_claim_at = last_claim;
        w.last_heartbeat_at = last_heartbeat;
    }
    for (owner, task_id, lease_epoch, lease_expires_at, claimed_at, heartbeat_at) in leases {
        let w = by_name.entry(owner.clone()).or_insert_with(|| blank(&owner));
        w.last_claim_at = w.last_claim_at.max(claimed_at);
        w.last_heartbeat_at = w.last_heartbeat_at.max(heartbeat_at);
        w.holds_lapsed_lease |= lease_expires_at.is_some_and(|e| e <= now);
        w.leases.push(HeldLease { task_id, lease_epoch, lease_expires_at });
    }
    by_name.into_values().collect()
}

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

/// One keyset page of the audit trail, newest first (`operator_actions_created_idx`, or the
/// actor index when filtered by actor).
pub(crate) fn audit(filter: &lastword_core::AuditFilter, page: &PageRequest) -> SqlBuf {
    let mut buf = SqlBuf::default();
    let mut conds = Vec::new();
    if let Some(actor) = &filter.actor {
        conds.push(format!("actor = {}", buf.arg(Value::Text(actor.clone()))));
    }
    if let Some(action) = filter.action {
        conds.push(format!("action = {}", buf.arg(Value::Text(action.as_str().to_string()))));
    }
    match filter.applied {
        Some(true) => conds.push(format!("outcome = '{}'", lastword_core::action::APPLIED)),
        Some(false) => conds.push(format!("outcome LIKE '{}%'", lastword_core::action::REFUSED_PREFIX)),
        None => {}
    }
    if let Some(task) = filter.task_id {
        conds.push(format!("task_id = {}", buf.arg(Value::I64(task))));
    }
    window_conditions(&mut buf, &mut conds, "created_at", filter.since, filter.until);
    if let Some(Cursor { claimed_at, id }) = page.after {
        let at = buf.arg(Value::Time(claimed_at));
        let id = buf.arg(Value::I64(id));
        conds
            .push(format!("created_at <= {at} AND (created_at < {at} OR (created_at = {at} AND id < {id}))"));
    }
    let limit = buf.arg(Value::I64(i64::from(page.limit) + 1));
    let sql = format!(
        "SELECT {} FROM operator_actions{} ORDER BY created_at DESC, id DESC LIMIT {limit}",
        crate::rows::ACTION_COLUMNS,
        where_clause(&conds)
    );
    buf.push(&sql);
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_patterns_escape_wildcards() {
        assert_eq!(like_pattern("50% off"), "%50\\% off%");
        assert_eq!(like_pattern("a_b\\c"), "%a\\_b\\\\c%");
        assert_eq!(like_pattern("plain"), "%plain%");
    }

    #[test]
    fn placeholders_follow_the_arguments() {
        let mut buf = SqlBuf::with_state_params(Utc::now(), &Tokens::default());
        assert_eq!(buf.arg(Value::I64(1)), "$4");
        assert_eq!(buf.arg(Value::Text("x".into())), "$5");
        assert_eq!(buf.args.len(), 5);
    }

    #[test]
    fn list_queries_number_their_parameters_in_order() {
        let d = &crate::postgres::dialect::DIALECT;
        let filter = RunFilter {
            worker: Some("w".into()),
            causes: vec![Cause::Timeout, Cause::LostLease],
            q: Some("x".into()),
            ..RunFilter::default()
        };
        let page = PageRequest { limit: 10, after: Some(Cursor { claimed_at: Utc::now(), id: 3 }) };
        let buf = list_runs(d, &filter, &page, Utc::now(), &Tokens::default());
        // worker, q, cursor time, cursor id, limit after the three state parameters.
        assert_eq!(buf.args.len(), 8);
        for n in 1..=8 {
            assert!(buf.sql.contains(&format!("${n}")), "${n} unused in {}", buf.sql);
        }
        assert!(!buf.sql.contains("$9"));
        assert!(matches!(buf.args[7], Value::I64(11)), "limit + 1");
    }

    #[test]
    fn both_dialects_trim_like_their_state_twin() {
        for d in [&crate::postgres::dialect::DIALECT, &crate::sqlite::dialect::DIALECT] {
            assert!(d.state_sql.contains(d.trimmed_output), "{}", d.trimmed_output);
        }
    }

    #[test]
    fn series_are_filled_with_empty_buckets() {
        let t = |s: i64| DateTime::from_timestamp(s, 0).unwrap();
        let rows =
            vec![(3, "acted".to_string(), 2), (3, "silent".to_string(), 1), (5, "acted".to_string(), 4)];
        // [250, 600) in 100 s buckets: 2, 3, 4, 5.
        let series = fold_series(&rows, t(250), t(600), 100);
        let starts: Vec<i64> = series.iter().map(|b| b.start.unwrap().timestamp()).collect();
        assert_eq!(starts, vec![200, 300, 400, 500]);
        let acted = |b: &Bucket| b.counts.iter().find(|(s, _)| *s == RunState::Acted).unwrap().1;
        assert_eq!(series.iter().map(acted).collect::<Vec<_>>(), vec![0, 2, 0, 4]);
        assert!(series.iter().all(|b| b.counts.len() == RunState::ALL.len()));
    }
}
