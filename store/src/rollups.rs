//! Counts that stay cheap at 10 M runs: the overview, the failure facets and the workers page
//! read 15-minute rollups for the past and count only the rest from `runs` (docs/counts.md).
//!
//! Why this shape:
//! - **Off the runner's write path.** Nothing is added to the runner's transactions: the
//!   rollups are recomputed after the fact by [`refresh`], which a background task of every
//!   dashboard server calls every couple of seconds, following `change_log` (migration 0002)
//!   to learn which past buckets a change touched.
//! - **Exact.** A bucket is always recomputed whole (`DELETE` + `INSERT … SELECT` grouped count
//!   of its runs, one transaction), so recomputing twice is harmless and no delta can drift.
//!   A reader uses a bucket's rows only when they are known to give what counting the runs
//!   would: the bucket is closed, inside the window, counted with the reader's tokens, and no
//!   unfinished run in it changes state between the bucket's `now` and the reader's
//!   (`stale_at`, `fresh_from`). Everything else — the window's partial edges, the open
//!   bucket, missing, stale or re-tokened buckets — is counted from `runs` in the same
//!   statement (`UNION ALL`), by index ranges of `claimed_at`.
//! - **Freshness.** A change to a run of a past bucket shows once the next refresh has
//!   recomputed that bucket; answers carry `counted_at`, the oldest `computed_at` they used.
//! - **Bounded cost.** A bucket whose recount is costly (a fleet finishing thousands of runs a
//!   second in one past quarter-hour) is recounted only once its count is 20 times its last
//!   recount old ([`recount_due`]), so recounting it takes at most about 1/20 of a core; the
//!   change is noted on the bucket (`changed_at`) and the cursor moves on.
//!
//! `change_log` ids can become visible out of order on PostgreSQL (docs/live.md). The cursor
//! in `rollup_state` therefore only moves past an id once every transaction that was running
//! when it was read has ended; until then the changes after it are read again and their
//! buckets recomputed again (harmless).
//!
//! "Needs attention": silent runs and unsafe lost leases come from the same counts (the rollup
//! keeps the task's safety for lost leases), dead tasks are an index range on
//! `(status, updated_at)`, and double executions awaiting compensation are kept per task in
//! `double_executions`, re-evaluated for every task a change touches (and backfilled once).
//!
//! The queries that count history directly stay as they were in `crate::queries`: the
//! conformance suite uses them as the oracle the rollup answers must equal.

use crate::queries::{self, bind_values, Dialect, SqlBuf, Value};
use crate::{Db, StoreError};
use chrono::{DateTime, Duration, TimeZone, Utc};
use lastword_core::{Attention, Cause, CauseFacets, Overview, RunFilter, RunState, Tokens, WorkerSummary};

/// The length of a rollup bucket. A quarter of an hour, so every series bucket the overview
/// uses for windows of 6 h and more (15 min, 30 min, 1 h, 3 h, 6 h …) is made of whole buckets,
/// and the raw part of an answer is at most two quarter-hours plus the open one.
pub const BUCKET_SECS: i64 = 900;
/// Changes read per refresh.
const CHANGE_BATCH: i64 = 20_000;
/// Missing, stale or re-tokened buckets recomputed per refresh (changed buckets always are),
/// so start-up on a large history stays responsive; newest first, which the pages ask for.
const RECOMPUTE_PER_CALL: usize = 32;
/// Tasks whose double-execution flag is backfilled per refresh.
const FLAGS_BATCH: i64 = 20_000;
/// Tasks re-evaluated per statement when changes touched them.
const FLAGS_CHUNK: usize = 1_000;
/// A changed bucket whose last recount took less than this is recounted at the next refresh.
const RECOUNT_AT_ONCE_MS: i64 = 50;
/// A costlier one waits until its count is this many times its recount old, so recounting
/// it takes at most about 1/20 of one core of the database however fast its runs change...
const RECOUNT_SPACING: i64 = 20;
/// ... but no longer than this (a bucket whose recount takes over 3 s then costs more).
const RECOUNT_MAX_WAIT_MS: i64 = 60_000;
/// Facets the rollups cannot answer count at most this many runs per cause.
pub const FACET_CAP: i64 = 10_000;
/// Advisory-lock key spaces (PostgreSQL): one lock per bucket, one for the task flags.
const BUCKET_LOCK: i32 = 0x4c57_5242;
const FLAGS_LOCK: i32 = 0x4c57_5246;

/// The failure states, as the `STATE_SQL` twin spells them.
const FAILURE_STATES: &str = "('silent', 'lost_lease', 'failed', 'empty_output')";

pub(crate) fn dialect(db: &Db) -> &'static Dialect {
    match db {
        Db::Postgres(_) => &crate::postgres::dialect::DIALECT,
        Db::Sqlite(_) => &crate::sqlite::dialect::DIALECT,
    }
}

/// What one [`refresh`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RollupReport {
    /// Buckets recomputed.
    pub recomputed: usize,
    /// Buckets another server was recomputing (PostgreSQL): left to it, tried again next time.
    pub skipped: usize,
    /// Changed buckets whose recount is costly, put off until their count is old enough
    /// ([`recount_due`]); marked `changed_at`, recounted by a later refresh.
    pub deferred: usize,
    /// Buckets still missing or out of date after this call (the next calls continue).
    pub remaining: usize,
    /// Changes read from `change_log`.
    pub changes: usize,
    /// The change id up to which everything is accounted for.
    pub cursor: i64,
    /// `double_executions` is complete (backfill done).
    pub flags_ready: bool,
}

impl RollupReport {
    /// Whether calling again soon would do more work (a backfill is under way).
    pub fn has_more(&self) -> bool {
        self.remaining > 0 || !self.flags_ready || self.changes as i64 >= CHANGE_BATCH
    }
}

// ---- Time arithmetic of buckets.

fn bucket_of(t: DateTime<Utc>) -> i64 {
    t.timestamp().div_euclid(BUCKET_SECS)
}

fn bucket_start(k: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(k.saturating_mul(BUCKET_SECS), 0).single().unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// Whether a changed bucket counted at `computed_at` in `recount_ms` is recounted at `now`:
/// at once if its recount is cheap (or not known), else once its count is
/// [`RECOUNT_SPACING`] times its recount old, at most [`RECOUNT_MAX_WAIT_MS`].
fn recount_due(computed_at: DateTime<Utc>, recount_ms: Option<i64>, now: DateTime<Utc>) -> bool {
    match recount_ms {
        Some(ms) if ms >= RECOUNT_AT_ONCE_MS => {
            let wait = ms.saturating_mul(RECOUNT_SPACING).min(RECOUNT_MAX_WAIT_MS);
            now - computed_at >= Duration::milliseconds(wait)
        }
        _ => true,
    }
}

/// The first bucket that starts at or after `t`.
fn first_bucket_from(t: DateTime<Utc>) -> i64 {
    let k = bucket_of(t);
    if bucket_start(k) == t {
        k
    } else {
        k + 1
    }
}

/// The start of time for an unbounded window: written the same way on both backends and
/// before any claim a runner can make.
fn far_past() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(1, 1, 1, 0, 0, 0).single().unwrap_or(DateTime::<Utc>::MIN_UTC)
}

fn far_future() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59).single().unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// A window of claims and the buckets that may answer for it: those in `[lo, hi)` lie wholly
/// inside `[since, until)` and had ended by `now`.
#[derive(Clone, Copy, Debug)]
struct Window {
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    lo: i64,
    hi: i64,
}

impl Window {
    fn new(since: Option<DateTime<Utc>>, until: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Self {
        let since = since.unwrap_or_else(far_past);
        let until = until.unwrap_or_else(far_future);
        let lo = first_bucket_from(since);
        let hi = bucket_of(until).min(bucket_of(now)).max(lo);
        Window { since, until, lo, hi }
    }

    /// The same window counted entirely from `runs` (a series finer than a bucket).
    fn raw_only(mut self) -> Self {
        self.hi = self.lo;
        self
    }
}

// ---- Readers.

/// The statement's parts that decide which buckets answer for a window.
struct Covered {
    /// `WITH c` (the fresh buckets answering for the window, with their `computed_at`) and `g`
    /// (the ranges of `claimed_at` left to count from `runs`: before the first fresh bucket,
    /// between non-adjacent ones, after the last).
    with: String,
    /// The condition on `b` (`run_rollup_buckets`) and `ro` (a rollup table) that selects the
    /// rows of those buckets: joined directly rather than through `c`, so the planner has the
    /// tables' statistics (a hash join over thousands of buckets, not a loop).
    rows: String,
}

/// What a reader takes from a bucket's rows besides its counts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reads {
    /// Counts only: a bucket answers until a lease it counted as running lapses (`stale_at`).
    Counts,
    /// Also heartbeat times (`worker_rollups.last_heartbeat_at`). A heartbeat inside the lease
    /// is not logged (migration 0008), so a bucket holding a running run may have missed some:
    /// only buckets without one answer, the rest is read from `runs`.
    Heartbeats,
}

/// Binds the window after the state parameters.
fn covered(d: &Dialect, buf: &mut SqlBuf, w: &Window, reads: Reads) -> Covered {
    let (s, u) = (buf.arg(Value::Time(w.since)), buf.arg(Value::Time(w.until)));
    let (lo, hi) = (buf.arg(Value::I64(w.lo)), buf.arg(Value::I64(w.hi)));
    let settled = match reads {
        Reads::Counts => "(b.stale_at IS NULL OR b.stale_at > $1)",
        Reads::Heartbeats => "b.stale_at IS NULL",
    };
    let fresh = format!(
        "b.bucket >= {lo} AND b.bucket < {hi} AND b.no_action = $2 AND b.skip = $3 \
         AND {settled} AND (b.fresh_from IS NULL OR b.fresh_from <= $1)"
    );
    let start = d.bucket_start;
    let with = format!(
        "WITH c AS (SELECT b.bucket, b.computed_at FROM run_rollup_buckets b WHERE {fresh}), \
         n AS (SELECT c.bucket, LEAD(c.bucket) OVER (ORDER BY c.bucket) AS next FROM c), \
         g AS (SELECT {s} AS lo, COALESCE((SELECT {first} FROM c), {u}) AS hi \
           UNION ALL SELECT {after}, CASE WHEN n.next IS NULL THEN {u} ELSE {next} END FROM n \
             WHERE n.next IS NULL OR n.next > n.bucket + 1) ",
        first = start("MIN(c.bucket)"),
        after = start("n.bucket + 1"),
        next = start("n.next"),
    );
    let rows = format!("ro.bucket = b.bucket AND ro.bucket >= {lo} AND ro.bucket < {hi} AND {fresh}");
    Covered { with, rows }
}

/// The task's safety for a lost lease (what "unsafe lost leases" needs), else null: looked up
/// only for the few lost leases.
const LOST_LEASE_SAFETY: &str = "CASE WHEN r.finished_at IS NOT NULL AND r.completion_rows = 0 \
     THEN (SELECT t.safety FROM tasks t WHERE t.id = r.task_id) END";

/// Counts per series bucket, state, error and (lost leases) safety over the window, plus one
/// row with a null state carrying the oldest `computed_at` used.
fn overview_counts_sql(
    d: &Dialect,
    w: &Window,
    bucket_secs: i64,
    now: DateTime<Utc>,
    tokens: &Tokens,
) -> SqlBuf {
    let mut buf = SqlBuf::with_state_params(now, tokens);
    let Covered { with, rows } = covered(d, &mut buf, w, Reads::Counts);
    let b = buf.arg(Value::I64(bucket_secs));
    let sql = format!(
        "{with}SELECT x.sb, x.state, x.error, x.safety, CAST(SUM(x.n) AS BIGINT), MIN(x.computed_at) FROM ( \
           SELECT (ro.bucket * {BUCKET_SECS}) / {b} AS sb, ro.state, ro.error, ro.safety, SUM(ro.runs) AS n, \
                  MIN(b.computed_at) AS computed_at \
             FROM run_rollups ro, run_rollup_buckets b WHERE {rows} \
             GROUP BY (ro.bucket * {BUCKET_SECS}) / {b}, ro.state, ro.error, ro.safety \
           UNION ALL \
           SELECT y.sb, y.state, y.error, y.safety, COUNT(*), NULL FROM ( \
             SELECT {sb} AS sb, {state} AS state, r.error, {LOST_LEASE_SAFETY} AS safety FROM {raw}) y \
             GROUP BY y.sb, y.state, y.error, y.safety \
           UNION ALL \
           SELECT NULL, NULL, NULL, NULL, 0, MIN(c.computed_at) FROM c \
         ) x GROUP BY x.sb, x.state, x.error, x.safety",
        sb = (d.bucket)(&b),
        state = d.state_sql,
        raw = d.raw_runs,
    );
    buf.push(&sql);
    buf
}

pub(crate) type OverviewRow =
    (Option<i64>, Option<String>, Option<String>, Option<String>, i64, Option<DateTime<Utc>>);

/// Counts per rollup bucket (15 minutes), state, error and (lost leases) safety of the runs
/// claimed from `since` (a bucket start) to `now`: what the alert counters are read from
/// (`crate::alerts`), the same statement as the overview's with one series bucket per rollup
/// bucket.
pub(crate) fn bucket_counts_sql(
    d: &Dialect,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
    tokens: &Tokens,
) -> SqlBuf {
    overview_counts_sql(d, &Window::new(Some(since), Some(now), now), BUCKET_SECS, now, tokens)
}

/// The far past and far future as both backends write them (unbounded windows).
pub(crate) fn unbounded() -> (DateTime<Utc>, DateTime<Utc>) {
    (far_past(), far_future())
}

/// Double executions awaiting compensation among tasks active in the window (null while the
/// flags are not complete for these tokens), dead tasks, and when the flags were refreshed.
fn attention_sql(since: DateTime<Utc>, until: DateTime<Utc>, now: DateTime<Utc>, tokens: &Tokens) -> SqlBuf {
    let (mut buf, s, u) = SqlBuf::with_window(now, tokens, since, until);
    let sql = format!(
        "SELECT \
           CASE WHEN EXISTS (SELECT 1 FROM rollup_state st WHERE st.flags_done_to >= st.flags_target \
                               AND st.no_action = $2 AND st.skip = $3 AND st.refreshed_at IS NOT NULL) \
             THEN (SELECT COUNT(DISTINCT d.task_id) FROM double_executions d \
                    WHERE d.active_at >= {s} AND d.active_at < {u}) END, \
           (SELECT COUNT(*) FROM tasks t WHERE t.status = 'dead' AND t.updated_at >= {s} AND t.updated_at < {u}), \
           (SELECT st.refreshed_at FROM rollup_state st WHERE st.refreshed_at <= $1)"
    );
    buf.push(&sql);
    buf
}

/// The overview's two statements: counts (rollups plus raw runs, per series bucket of
/// `bucket`) and attention.
pub(crate) fn overview_sql(
    d: &Dialect,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    bucket: Duration,
    now: DateTime<Utc>,
    tokens: &Tokens,
) -> (SqlBuf, SqlBuf) {
    let bucket_secs = bucket.num_seconds().max(1);
    let mut w = Window::new(Some(since), Some(until), now);
    // A rollup bucket must lie in one series bucket: whole multiples only, epoch-aligned.
    if bucket_secs % BUCKET_SECS != 0 {
        w = w.raw_only();
    }
    (overview_counts_sql(d, &w, bucket_secs, now, tokens), attention_sql(since, until, now, tokens))
}

/// The overview from rollups plus raw counts (see the module header).
pub(crate) async fn overview(
    db: &Db,
    tokens: &Tokens,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    bucket: Duration,
    now: DateTime<Utc>,
) -> Result<Overview, StoreError> {
    let d = dialect(db);
    let bucket_secs = bucket.num_seconds().max(1);
    let (buf, attention) = overview_sql(d, since, until, bucket, now, tokens);
    let rows: Vec<OverviewRow> = db.fetch_all(&buf).await?;
    let mut counted_at: Option<DateTime<Utc>> = None;
    let mut state_rows = Vec::new();
    let mut series_rows = Vec::new();
    let mut unsafe_lost_leases = 0;
    for (sb, state, error, safety, n, computed) in rows {
        counted_at = min_time(counted_at, computed);
        let Some(state) = state else { continue };
        if state == RunState::LostLease.as_str() && safety.as_deref() == Some("unsafe") {
            unsafe_lost_leases += n;
        }
        if let Some(sb) = sb {
            series_rows.push((sb, state.clone(), n));
        }
        state_rows.push((state, error, n));
    }
    let (by_state, by_cause) = queries::fold_state_error_counts(&state_rows);
    let series = queries::fold_series(&series_rows, since, until, bucket_secs);
    let silent_runs = by_state.iter().find(|(s, _)| *s == RunState::Silent).map_or(0, |(_, n)| *n);

    let (flagged, dead_tasks, flags_at): (Option<i64>, i64, Option<DateTime<Utc>>) =
        db.fetch_one(&attention).await?;
    let needs_compensation = match flagged {
        Some(n) => {
            counted_at = min_time(counted_at, flags_at);
            n
        }
        // The flags are being backfilled: count as before (slow, but exact).
        None => {
            let buf = queries::attention(d, since, until, now, tokens);
            let (_, needs, _, _): (i64, i64, i64, i64) = db.fetch_one(&buf).await?;
            needs
        }
    };
    Ok(Overview {
        since: Some(since),
        until: Some(until),
        by_state,
        by_cause,
        series,
        attention: needs_attention(
            db,
            tokens,
            (since, until),
            now,
            [unsafe_lost_leases, needs_compensation, silent_runs, dead_tasks],
        )
        .await?,
        counted_at: counted_at.map(|c| c.min(now)),
    })
}

/// *Needs attention* from the window's counts (`[unsafe lost leases, needs compensation,
/// silent runs, dead tasks]`, counted by the caller from rollups or from history), what of it
/// was acknowledged, and the re-claim loops of now (not of the window: a loop is live work).
/// Shared by the overview and its oracle.
async fn needs_attention(
    db: &Db,
    tokens: &Tokens,
    (since, until): (DateTime<Utc>, DateTime<Utc>),
    now: DateTime<Utc>,
    [unsafe_lost_leases, needs_compensation, silent_runs, dead_tasks]: [i64; 4],
) -> Result<Attention, StoreError> {
    let mut taken = attention_taken(db, since, until).await?;
    let (loop_tasks, loops) = crate::alerts::loop_items(db, tokens, now).await?;
    taken.loops = loops.acknowledged;
    Ok(Attention {
        unsafe_lost_leases,
        needs_compensation,
        silent_runs,
        dead_tasks,
        loops: loops.items,
        loop_tasks,
        taken,
    })
}

/// [`queries::attention_taken`], read.
async fn attention_taken(
    db: &Db,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<lastword_core::AttentionTaken, StoreError> {
    let buf = queries::attention_taken(since, until);
    let (dead_tasks, needs_compensation, unsafe_lost_leases): (i64, i64, i64) = db.fetch_one(&buf).await?;
    Ok(lastword_core::AttentionTaken { needs_compensation, dead_tasks, loops: 0, unsafe_lost_leases })
}

fn min_time(a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Whether the rollups have every dimension the facets of `filter` need: time only (its own
/// states and causes are ignored by facets).
fn facets_from_rollups(filter: &RunFilter) -> bool {
    filter.worker.is_none()
        && filter.kind.is_none()
        && filter.source.is_none()
        && filter.task_id.is_none()
        && filter.q.is_none()
        && filter.reclaims.is_empty()
}

/// Failure runs per state and error over the window, plus the null-state freshness row.
fn facets_sql(d: &Dialect, w: &Window, now: DateTime<Utc>, tokens: &Tokens) -> SqlBuf {
    let mut buf = SqlBuf::with_state_params(now, tokens);
    let Covered { with, rows } = covered(d, &mut buf, w, Reads::Counts);
    let failure = queries::any_of(Cause::ALL.iter().map(|c| queries::cause_predicate(d, *c)));
    let sql = format!(
        "{with}SELECT x.state, x.error, CAST(SUM(x.n) AS BIGINT), MIN(x.computed_at) FROM ( \
           SELECT ro.state, ro.error, SUM(ro.runs) AS n, MIN(b.computed_at) AS computed_at \
             FROM run_rollups ro, run_rollup_buckets b WHERE {rows} AND ro.state IN {FAILURE_STATES} \
             GROUP BY ro.state, ro.error \
           UNION ALL \
           SELECT y.state, y.error, COUNT(*), NULL FROM ( \
             SELECT {state} AS state, r.error FROM {raw} WHERE {failure}) y GROUP BY y.state, y.error \
           UNION ALL \
           SELECT NULL, NULL, 0, MIN(c.computed_at) FROM c \
         ) x GROUP BY x.state, x.error",
        state = d.state_sql,
        raw = d.raw_runs,
    );
    buf.push(&sql);
    buf
}

/// Per cause, at most `FACET_CAP + 1` matching runs counted (each an index-backed `LIMIT`).
fn capped_facets_sql(d: &Dialect, filter: &RunFilter, now: DateTime<Utc>, tokens: &Tokens) -> SqlBuf {
    let mut buf = SqlBuf::with_state_params(now, tokens);
    let conds = queries::filter_conditions(d, &mut buf, filter, false);
    let join = if queries::needs_task_join(filter) { " JOIN tasks t ON t.id = r.task_id" } else { "" };
    let limit = buf.arg(Value::I64(FACET_CAP + 1));
    let counts: Vec<String> = Cause::ALL
        .iter()
        .map(|c| {
            let mut all = conds.clone();
            all.push(queries::cause_predicate(d, *c));
            format!(
                "(SELECT COUNT(*) FROM (SELECT 1 FROM runs r{join}{} LIMIT {limit}) x)",
                queries::where_clause(&all)
            )
        })
        .collect();
    buf.push(&format!("SELECT {}", counts.join(", ")));
    buf
}

/// `(state, error, runs, computed_at)`; a null state carries only the freshness.
type FacetRow = (Option<String>, Option<String>, i64, Option<DateTime<Utc>>);

type CappedRow = (i64, i64, i64, i64, i64, i64, i64, i64);

/// The statement of [`cause_facets`]: rollups for time filters, else capped counts.
pub(crate) fn cause_facets_sql(
    d: &Dialect,
    filter: &RunFilter,
    now: DateTime<Utc>,
    tokens: &Tokens,
) -> SqlBuf {
    if facets_from_rollups(filter) {
        facets_sql(d, &Window::new(filter.since, filter.until, now), now, tokens)
    } else {
        capped_facets_sql(d, filter, now, tokens)
    }
}

/// Failure counts per cause for `filter` (its own states and causes ignored): from rollups for
/// time filters, else counted from `runs` up to [`FACET_CAP`] per cause.
pub(crate) async fn cause_facets(
    db: &Db,
    tokens: &Tokens,
    filter: &RunFilter,
    now: DateTime<Utc>,
) -> Result<CauseFacets, StoreError> {
    let buf = cause_facets_sql(dialect(db), filter, now, tokens);
    if !facets_from_rollups(filter) {
        let row: CappedRow = db.fetch_one(&buf).await?;
        let found = [row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7];
        let mut facets = CauseFacets { counts: Vec::new(), counted_at: None, capped: Vec::new() };
        for (cause, n) in Cause::ALL.iter().zip(found) {
            if n > FACET_CAP {
                facets.capped.push(*cause);
            }
            facets.counts.push((*cause, n.min(FACET_CAP)));
        }
        return Ok(facets);
    }
    let rows: Vec<FacetRow> = db.fetch_all(&buf).await?;
    let mut counted_at = None;
    let mut state_rows = Vec::new();
    for (state, error, n, computed) in rows {
        counted_at = min_time(counted_at, computed);
        if let Some(state) = state {
            state_rows.push((state, error, n));
        }
    }
    let (_, counts) = queries::fold_state_error_counts(&state_rows);
    Ok(CauseFacets { counts, counted_at: counted_at.map(|c| c.min(now)), capped: Vec::new() })
}

/// Per worker with runs claimed since `since`: runs, failures, last claim, last heartbeat.
fn workers_sql(d: &Dialect, w: &Window, now: DateTime<Utc>, tokens: &Tokens) -> SqlBuf {
    let mut buf = SqlBuf::with_state_params(now, tokens);
    let Covered { with, rows } = covered(d, &mut buf, w, Reads::Heartbeats);
    let sql = format!(
        "{with}SELECT x.worker, CAST(SUM(x.runs) AS BIGINT), CAST(SUM(x.failures) AS BIGINT), MAX(x.last_claim), \
           MAX(x.last_hb) FROM ( \
           SELECT ro.worker, SUM(ro.runs) AS runs, SUM(ro.failures) AS failures, MAX(ro.last_claim_at) AS last_claim, \
                  MAX(ro.last_heartbeat_at) AS last_hb \
             FROM worker_rollups ro, run_rollup_buckets b WHERE {rows} GROUP BY ro.worker \
           UNION ALL \
           SELECT r.worker, COUNT(*), COUNT(CASE WHEN ({state}) IN {FAILURE_STATES} THEN 1 END), MAX(r.claimed_at), \
                  MAX(r.heartbeat_at) FROM {raw} GROUP BY r.worker \
         ) x GROUP BY x.worker",
        state = d.state_sql,
        raw = d.raw_runs,
    );
    buf.push(&sql);
    buf
}

/// The workers page's activity statement: runs claimed since `since`, per worker.
pub(crate) fn workers_activity_sql(
    d: &Dialect,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
    tokens: &Tokens,
) -> SqlBuf {
    workers_sql(d, &Window::new(Some(since), None, now), now, tokens)
}

/// The workers page: activity from rollups plus raw counts, merged with the leases held now.
pub(crate) async fn workers(
    db: &Db,
    tokens: &Tokens,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Vec<WorkerSummary>, StoreError> {
    let buf = workers_activity_sql(dialect(db), since, now, tokens);
    let activity: Vec<queries::ActivityRow> = db.fetch_all(&buf).await?;
    let leases: Vec<queries::LeaseRow> = db.fetch_all(&SqlBuf::statement(queries::HELD_LEASES)).await?;
    Ok(queries::fold_workers(activity, leases, now))
}

// ---- The oracle: the same answers counted from history (the queries before rollups).

#[cfg(feature = "testing")]
/// [`overview`] counted from `runs` alone.
pub(crate) async fn raw_overview(
    db: &Db,
    tokens: &Tokens,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    bucket: Duration,
    now: DateTime<Utc>,
) -> Result<Overview, StoreError> {
    let d = dialect(db);
    let buf = queries::overview_counts(d, since, until, now, tokens);
    let rows: Vec<queries::StateErrorCount> = db.fetch_all(&buf).await?;
    let (by_state, by_cause) = queries::fold_state_error_counts(&rows);
    let bucket_secs = bucket.num_seconds().max(1);
    let buf = queries::overview_series(d, since, until, bucket_secs, now, tokens);
    let rows: Vec<(i64, String, i64)> = db.fetch_all(&buf).await?;
    let series = queries::fold_series(&rows, since, until, bucket_secs);
    let buf = queries::attention(d, since, until, now, tokens);
    let (unsafe_lost_leases, needs_compensation, silent_runs, dead_tasks): (i64, i64, i64, i64) =
        db.fetch_one(&buf).await?;
    Ok(Overview {
        since: Some(since),
        until: Some(until),
        by_state,
        by_cause,
        series,
        attention: needs_attention(
            db,
            tokens,
            (since, until),
            now,
            [unsafe_lost_leases, needs_compensation, silent_runs, dead_tasks],
        )
        .await?,
        counted_at: None,
    })
}

#[cfg(feature = "testing")]
/// [`cause_facets`] counted from `runs` alone, uncapped.
pub(crate) async fn raw_cause_facets(
    db: &Db,
    tokens: &Tokens,
    filter: &RunFilter,
    now: DateTime<Utc>,
) -> Result<CauseFacets, StoreError> {
    let buf = queries::cause_facets(dialect(db), filter, now, tokens);
    let rows: Vec<queries::StateErrorCount> = db.fetch_all(&buf).await?;
    let (_, counts) = queries::fold_state_error_counts(&rows);
    Ok(CauseFacets { counts, counted_at: None, capped: Vec::new() })
}

#[cfg(feature = "testing")]
/// [`workers`] counted from `runs` alone.
pub(crate) async fn raw_workers(
    db: &Db,
    tokens: &Tokens,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Vec<WorkerSummary>, StoreError> {
    let buf = queries::worker_activity(dialect(db), since, now, tokens);
    let activity: Vec<queries::ActivityRow> = db.fetch_all(&buf).await?;
    let leases: Vec<queries::LeaseRow> = db.fetch_all(&SqlBuf::statement(queries::HELD_LEASES)).await?;
    Ok(queries::fold_workers(activity, leases, now))
}

// ---- The maintainer.

/// Recomputation of bucket `$4` = `[$5, $6)`, states decided with `$1` now and `$2`/`$3`.
fn recompute_sql(d: &Dialect) -> [String; 3] {
    let state = d.state_sql;
    let range = "r.claimed_at >= $5 AND r.claimed_at < $6";
    [
        format!(
            "INSERT INTO run_rollups (bucket, state, error, safety, runs) \
             SELECT $4, y.state, y.error, y.safety, COUNT(*) FROM ( \
               SELECT x.state, CASE WHEN x.state = 'failed' THEN x.error END AS error, \
                      CASE WHEN x.state = 'lost_lease' THEN x.safety END AS safety FROM ( \
                 SELECT {state} AS state, r.error, {LOST_LEASE_SAFETY} AS safety FROM runs r WHERE {range}) x \
             ) y GROUP BY y.state, y.error, y.safety"
        ),
        format!(
            "INSERT INTO worker_rollups (bucket, worker, runs, failures, last_claim_at, last_heartbeat_at) \
             SELECT $4, r.worker, COUNT(*), COUNT(CASE WHEN ({state}) IN {FAILURE_STATES} THEN 1 END), \
                    MAX(r.claimed_at), MAX(r.heartbeat_at) \
             FROM runs r WHERE {range} GROUP BY r.worker"
        ),
        // One row even for an empty bucket (an aggregate without GROUP BY), so it is not
        // missing; `WHERE` also keeps SQLite's upsert syntax unambiguous.
        format!(
            "INSERT INTO run_rollup_buckets (bucket, computed_at, stale_at, fresh_from, no_action, skip) \
             SELECT $4, $1, MIN(CASE WHEN r.lease_expires_at > $1 THEN r.lease_expires_at END), \
                    MAX(CASE WHEN r.lease_expires_at <= $1 THEN r.lease_expires_at END), $2, $3 \
             FROM runs r WHERE {range} AND r.finished_at IS NULL \
             ON CONFLICT (bucket) DO UPDATE SET computed_at = excluded.computed_at, stale_at = excluded.stale_at, \
               fresh_from = excluded.fresh_from, no_action = excluded.no_action, skip = excluded.skip"
        ),
    ]
}

/// `result` of a transaction that writes rollup rows, with a failure that means another server
/// wrote the same rows at the same time turned into `Ok(false)` (done by the other; a later
/// refresh tries again if need be).
fn unless_lost_race(result: Result<bool, sqlx::Error>) -> Result<bool, StoreError> {
    match result {
        Ok(done) => Ok(done),
        Err(sqlx::Error::Database(db))
            if db.is_unique_violation() || matches!(db.code().as_deref(), Some("40001" | "40P01")) =>
        {
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}

/// Takes the advisory lock `(space, key)` for the rest of `tx` if it is free (PostgreSQL;
/// SQLite's write lock already serialises writers): whether `tx` holds it.
async fn try_lock(tx: &mut crate::exec::Tx, d: &Dialect, space: i32, key: i32) -> Result<bool, sqlx::Error> {
    let Some(lock) = d.try_lock else { return Ok(true) };
    let (got,): (bool,) = tx.fetch_one(&SqlBuf::statement(lock).bind(space).bind(key)).await?;
    Ok(got)
}

/// Bucket `k`'s key in the [`BUCKET_LOCK`] space.
fn bucket_key(k: i64) -> i32 {
    i32::try_from(k.rem_euclid(i64::from(i32::MAX))).unwrap_or_default()
}

/// Recomputes bucket `k` whole in one transaction. `Ok(false)`: another server holds it.
async fn recompute_bucket(db: &Db, tokens: &Tokens, k: i64, now: DateTime<Utc>) -> Result<bool, StoreError> {
    let d = dialect(db);
    let mut args = SqlBuf::with_state_params(now, tokens);
    args.arg(Value::I64(k));
    args.arg(Value::Time(bucket_start(k)));
    args.arg(Value::Time(bucket_start(k + 1)));
    let [insert_runs, insert_workers, upsert_bucket] = recompute_sql(d);
    let result: Result<bool, sqlx::Error> = async {
        let mut tx = db.begin(d.begin_rollup).await?;
        if !try_lock(&mut tx, d, BUCKET_LOCK, bucket_key(k)).await? {
            return Ok(false);
        }
        let started = std::time::Instant::now();
        tx.execute(&SqlBuf::statement("DELETE FROM run_rollups WHERE bucket = $1").bind(k)).await?;
        tx.execute(&SqlBuf::statement("DELETE FROM worker_rollups WHERE bucket = $1").bind(k)).await?;
        for sql in [&upsert_bucket, &insert_runs, &insert_workers] {
            tx.execute(&SqlBuf { sql: sql.to_string(), args: args.args.clone() }).await?;
        }
        // What the recount cost (`recount_due`); every change read before it is counted now.
        let took = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
        tx.execute(
            &SqlBuf::statement(
                "UPDATE run_rollup_buckets SET recount_ms = $1, changed_at = NULL WHERE bucket = $2",
            )
            .bind(took)
            .bind(k),
        )
        .await?;
        tx.commit().await?;
        Ok(true)
    }
    .await;
    unless_lost_race(result)
}

/// Notes that bucket `k` changed at `now` and its recount is put off (`changed_at`, kept from
/// an earlier note), under the bucket's lock so no recount running meanwhile clears it unseen.
/// `Ok(false)`: another server holds the bucket.
async fn mark_changed(db: &Db, k: i64, now: DateTime<Utc>) -> Result<bool, StoreError> {
    let d = dialect(db);
    let result: Result<bool, sqlx::Error> = async {
        let mut tx = db.begin(d.begin_rollup).await?;
        if !try_lock(&mut tx, d, BUCKET_LOCK, bucket_key(k)).await? {
            return Ok(false);
        }
        let mut mark = SqlBuf::default();
        let (at, bucket) = (mark.arg(Value::Time(now)), mark.arg(Value::I64(k)));
        mark.push(&format!(
            "UPDATE run_rollup_buckets SET changed_at = COALESCE(changed_at, {at}) WHERE bucket = {bucket}"
        ));
        tx.execute(&mark).await?;
        tx.commit().await?;
        Ok(true)
    }
    .await;
    unless_lost_race(result)
}

/// `(bucket, computed_at, recount_ms)` of the counted buckets among `buckets`.
async fn recount_costs(
    db: &Db,
    buckets: &[i64],
) -> Result<Vec<(i64, DateTime<Utc>, Option<i64>)>, StoreError> {
    if buckets.is_empty() {
        return Ok(Vec::new());
    }
    let ids = serde_json::to_string(buckets).unwrap_or_else(|_| "[]".to_string());
    let sql = format!(
        "SELECT bucket, computed_at, recount_ms FROM run_rollup_buckets WHERE bucket IN {}",
        (dialect(db).id_list)("$1")
    );
    Ok(on_db!(db, p => sqlx::query_as(&sql).bind(ids).fetch_all(p).await?))
}

#[derive(sqlx::FromRow)]
struct StateRow {
    change_cursor: i64,
    pending_max: i64,
    pending_horizon: Option<i64>,
    flags_done_to: i64,
    flags_target: i64,
    no_action: String,
    skip: String,
}

const STATE_SQL: &str = "SELECT change_cursor, pending_max, pending_horizon, flags_done_to, flags_target, \
     no_action, skip FROM rollup_state WHERE id = 1";

/// Starts over: the rollups (`all`) and the task flags are rebuilt from scratch, the cursor
/// put just before the oldest change kept. Used on first start, when changes the maintainer
/// never read were pruned (it was not running for an hour), and (flags only) on new tokens.
async fn reset(db: &Db, tokens: &Tokens, all: bool, now: DateTime<Utc>) -> Result<(), StoreError> {
    let mut buf = SqlBuf::with_state_params(now, tokens);
    let all_p = buf.arg(Value::I64(i64::from(all)));
    buf.push(&format!(
        "INSERT INTO rollup_state (id, change_cursor, pending_max, pending_horizon, flags_done_to, flags_target, \
           no_action, skip, refreshed_at) \
         SELECT 1, COALESCE((SELECT MIN(id) FROM change_log), 1) - 1, COALESCE((SELECT MIN(id) FROM change_log), 1) - 1, \
                NULL, 0, COALESCE((SELECT MAX(id) FROM tasks), 0), $2, $3, $1 WHERE true \
         ON CONFLICT (id) DO UPDATE SET \
           change_cursor = CASE WHEN {all_p} = 1 THEN excluded.change_cursor ELSE rollup_state.change_cursor END, \
           pending_max = CASE WHEN {all_p} = 1 THEN excluded.pending_max ELSE rollup_state.pending_max END, \
           pending_horizon = CASE WHEN {all_p} = 1 THEN NULL ELSE rollup_state.pending_horizon END, \
           flags_done_to = 0, flags_target = excluded.flags_target, no_action = excluded.no_action, \
           skip = excluded.skip, refreshed_at = excluded.refreshed_at"
    ));
    let d = dialect(db);
    let mut tx = db.begin(d.begin_write).await?;
    if all {
        for table in ["run_rollups", "worker_rollups", "run_rollup_buckets"] {
            tx.execute(&SqlBuf::statement(format!("DELETE FROM {table}"))).await?;
        }
    }
    tx.execute(&SqlBuf::statement("DELETE FROM double_executions")).await?;
    tx.execute(&buf).await?;
    tx.commit().await?;
    tracing::info!(all, "rollups: starting over");
    Ok(())
}

/// The changes after the cursor: (id, bucket of the changed run, task), with the snapshot's
/// `xmin` and `xmax` on PostgreSQL.
struct ChangeBatch {
    changes: Vec<(i64, Option<i64>, Option<i64>)>,
    xmin: Option<i64>,
    horizon: Option<i64>,
}

async fn read_changes(db: &Db, after: i64) -> Result<ChangeBatch, StoreError> {
    let d = dialect(db);
    let bucket = (d.bucket)("$3");
    let select = format!(
        "SELECT ch.id, CASE WHEN ch.table_name = 'runs' THEN (SELECT {bucket} FROM runs r WHERE r.id = ch.row_id) END \
           AS bucket, ch.task_id FROM change_log ch WHERE ch.id > $1 ORDER BY ch.id LIMIT $2"
    );
    match db {
        Db::Postgres(p) => {
            // One statement, so the snapshot bounds are those the rows were read with.
            let sql = format!(
                "WITH s AS (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin, \
                                   pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS xmax) \
                 SELECT s.xmin, s.xmax, c.id, c.bucket, c.task_id FROM s LEFT JOIN LATERAL ({select}) c ON true \
                 ORDER BY c.id"
            );
            type Row = (i64, i64, Option<i64>, Option<i64>, Option<i64>);
            let rows: Vec<Row> =
                sqlx::query_as(&sql).bind(after).bind(CHANGE_BATCH).bind(BUCKET_SECS).fetch_all(p).await?;
            let (xmin, horizon) = rows.first().map_or((None, None), |r| (Some(r.0), Some(r.1)));
            let changes = rows.into_iter().filter_map(|(_, _, id, b, t)| Some((id?, b, t))).collect();
            Ok(ChangeBatch { changes, xmin, horizon })
        }
        Db::Sqlite(p) => {
            let changes: Vec<(i64, Option<i64>, Option<i64>)> =
                sqlx::query_as(&select).bind(after).bind(CHANGE_BATCH).bind(BUCKET_SECS).fetch_all(p).await?;
            Ok(ChangeBatch { changes, xmin: None, horizon: None })
        }
    }
}

/// Re-evaluates the double-execution flag of the tasks selected by `which` (over `tasks t`,
/// its placeholders after `$3`), under the flags lock. `Ok(false)`: another server holds it.
async fn evaluate_flags(
    db: &Db,
    tokens: &Tokens,
    which: &str,
    args: &[Value],
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let d = dialect(db);
    let mut buf = SqlBuf::with_state_params(now, tokens);
    buf.args.extend(args.iter().cloned());
    let delete =
        format!("DELETE FROM double_executions WHERE task_id IN (SELECT t.id FROM tasks t WHERE {which})");
    // A flagged task's activity: its claims and its effects, what "in the window" looks at.
    let insert = format!(
        "INSERT INTO double_executions (task_id, active_at) \
         SELECT r.task_id, r.claimed_at FROM runs r WHERE r.task_id IN (SELECT t.id FROM tasks t WHERE {which} AND {needs}) \
         UNION ALL \
         SELECT e.task_id, e.created_at FROM effects e WHERE e.task_id IN (SELECT t.id FROM tasks t WHERE {which} AND {needs})",
        needs = queries::needs_compensation_predicate(d)
    );
    let result: Result<bool, sqlx::Error> = async {
        let mut tx = db.begin(d.begin_write).await?;
        if !try_lock(&mut tx, d, FLAGS_LOCK, 0).await? {
            return Ok(false);
        }
        // Read committed on PostgreSQL: each statement sees everything committed before it,
        // all after the lock was taken.
        tx.execute(&SqlBuf { sql: delete, args: buf.args.clone() }).await?;
        tx.execute(&SqlBuf { sql: insert, args: buf.args }).await?;
        tx.commit().await?;
        Ok(true)
    }
    .await;
    unless_lost_race(result)
}

/// Closed buckets to recompute besides the changed ones: stale (a lease lapsed since), counted
/// with other tokens, or missing between the oldest claim and now; newest first, at most `max`.
/// Also returns how many there are in all.
async fn due_buckets(
    db: &Db,
    tokens: &Tokens,
    now: DateTime<Utc>,
    max: usize,
) -> Result<(Vec<i64>, usize), StoreError> {
    let open = bucket_of(now);
    let mut buf = SqlBuf::with_state_params(now, tokens);
    let o = buf.arg(Value::I64(open));
    buf.push(&format!(
        "SELECT bucket FROM run_rollup_buckets WHERE bucket < {o} AND (stale_at <= $1 OR fresh_from > $1 \
           OR no_action <> $2 OR skip <> $3) ORDER BY bucket DESC"
    ));
    let mut due: Vec<i64> =
        on_db!(db, p => bind_values!(sqlx::query_scalar(&buf.sql), &buf.args).fetch_all(p).await?);
    // Changed buckets whose recount was put off, once their count is old enough.
    let put_off: Vec<(i64, DateTime<Utc>, Option<i64>)> = on_db!(db, p => sqlx::query_as(
        "SELECT bucket, computed_at, recount_ms FROM run_rollup_buckets WHERE changed_at IS NOT NULL AND bucket < $1")
        .bind(open).fetch_all(p).await?);
    due.extend(put_off.into_iter().filter(|(_, at, ms)| recount_due(*at, *ms, now)).map(|(k, _, _)| k));
    let first: Option<DateTime<Utc>> =
        on_db!(db, p => sqlx::query_scalar("SELECT MIN(claimed_at) FROM runs").fetch_one(p).await?);
    if let Some(first) = first.map(bucket_of).filter(|f| *f < open) {
        let known: i64 = on_db!(db, p => sqlx::query_scalar(
            "SELECT COUNT(*) FROM run_rollup_buckets WHERE bucket >= $1 AND bucket < $2")
            .bind(first).bind(open).fetch_one(p).await?);
        if known < open - first {
            let have: Vec<i64> = on_db!(db, p => sqlx::query_scalar(
                "SELECT bucket FROM run_rollup_buckets WHERE bucket >= $1 AND bucket < $2 ORDER BY bucket DESC")
                .bind(first).bind(open).fetch_all(p).await?);
            let have: std::collections::HashSet<i64> = have.into_iter().collect();
            due.extend((first..open).rev().filter(|k| !have.contains(k)));
        }
    }
    due.sort_unstable_by(|a, b| b.cmp(a));
    due.dedup();
    let total = due.len();
    due.truncate(max);
    Ok((due, total))
}

/// One round of maintenance (see the module header): reads the changes after the cursor,
/// recomputes the closed buckets they touched and re-evaluates their tasks' flags, then up to
/// [`RECOMPUTE_PER_CALL`] stale, re-tokened or missing buckets and one batch of the flags'
/// backfill, and advances the cursor when that is safe. Idempotent; safe to run from several
/// servers at once.
pub(crate) async fn refresh(
    db: &Db,
    tokens: &Tokens,
    now: DateTime<Utc>,
) -> Result<RollupReport, StoreError> {
    let na = lastword_core::trim_token(&tokens.no_action).to_string();
    let sk = lastword_core::trim_token(&tokens.skip).to_string();
    let state: Option<StateRow> = db.fetch_optional(&SqlBuf::statement(STATE_SQL)).await?;
    let oldest: Option<i64> =
        on_db!(db, p => sqlx::query_scalar("SELECT MIN(id) FROM change_log").fetch_one(p).await?);
    let state = match state {
        Some(s) if oldest.is_none_or(|o| o <= s.change_cursor + 1) && s.no_action == na && s.skip == sk => s,
        Some(s) if oldest.is_none_or(|o| o <= s.change_cursor + 1) => {
            reset(db, tokens, false, now).await?;
            StateRow { flags_done_to: 0, no_action: na.clone(), skip: sk.clone(), ..s }
        }
        _ => {
            reset(db, tokens, true, now).await?;
            db.fetch_one(&SqlBuf::statement(STATE_SQL)).await?
        }
    };

    let batch = read_changes(db, state.change_cursor).await?;
    let open = bucket_of(now);
    let mut changed: Vec<i64> =
        batch.changes.iter().filter_map(|(_, b, _)| *b).filter(|b| *b < open).collect();
    changed.sort_unstable_by(|a, b| b.cmp(a));
    changed.dedup();
    let mut tasks: Vec<i64> = batch.changes.iter().filter_map(|(_, _, t)| *t).collect();
    tasks.sort_unstable();
    tasks.dedup();

    let mut report = RollupReport { changes: batch.changes.len(), ..RollupReport::default() };
    let mut all_done = true;
    let costs = recount_costs(db, &changed).await?;
    for k in &changed {
        let due = costs.iter().find(|c| c.0 == *k).is_none_or(|(_, at, ms)| recount_due(*at, *ms, now));
        let done = if due {
            let done = recompute_bucket(db, tokens, *k, now).await?;
            report.recomputed += usize::from(done);
            done
        } else {
            let done = mark_changed(db, *k, now).await?;
            report.deferred += usize::from(done);
            done
        };
        if !done {
            report.skipped += 1;
            all_done = false;
        }
    }
    let d = dialect(db);
    for chunk in tasks.chunks(FLAGS_CHUNK) {
        let ids = serde_json::to_string(chunk).unwrap_or_else(|_| "[]".to_string());
        let which = format!("t.id IN {}", (d.id_list)("$4"));
        all_done &= evaluate_flags(db, tokens, &which, &[Value::Text(ids)], now).await?;
    }

    // Backfill and stale buckets, bounded.
    let (due, total) = due_buckets(db, tokens, now, RECOMPUTE_PER_CALL).await?;
    let mut left = total;
    for k in due {
        if changed.contains(&k) {
            left -= 1;
            continue;
        }
        if recompute_bucket(db, tokens, k, now).await? {
            report.recomputed += 1;
            left -= 1;
        } else {
            report.skipped += 1;
        }
    }
    report.remaining = left;
    let mut flags_done_to = state.flags_done_to;
    if flags_done_to < state.flags_target {
        let to = (flags_done_to + FLAGS_BATCH).min(state.flags_target);
        let range = [Value::I64(flags_done_to), Value::I64(to)];
        if evaluate_flags(db, tokens, "t.id > $4 AND t.id <= $5", &range, now).await? {
            flags_done_to = to;
        }
    }
    report.flags_ready = flags_done_to >= state.flags_target;

    // The cursor moves only when every change read was accounted for, and (PostgreSQL) only up
    // to the previous read once no transaction that was running then still runs.
    let max_read = batch.changes.last().map_or(state.change_cursor, |c| c.0);
    let full = batch.changes.len() as i64 >= CHANGE_BATCH;
    let (cursor, pending_max, pending_horizon) = if !all_done {
        (state.change_cursor, state.pending_max, state.pending_horizon)
    } else if batch.horizon.is_none() {
        // SQLite: one writer at a time, ids become visible in order.
        (max_read, max_read, None)
    } else {
        let settled = state.pending_horizon.is_none_or(|h| batch.xmin.is_some_and(|x| x >= h));
        let cursor = if settled {
            state.pending_max.min(if full { max_read } else { i64::MAX }).max(state.change_cursor)
        } else {
            state.change_cursor
        };
        (cursor, max_read, batch.horizon)
    };
    let mut buf = SqlBuf::default();
    let (fl, old) = (buf.arg(Value::I64(flags_done_to)), buf.arg(Value::I64(state.change_cursor)));
    // Another server may have moved the state on meanwhile: then its update stands.
    if all_done {
        let (c, pm, at) =
            (buf.arg(Value::I64(cursor)), buf.arg(Value::I64(pending_max)), buf.arg(Value::Time(now)));
        let horizon = pending_horizon.map_or("NULL".to_string(), |h| buf.arg(Value::I64(h)));
        buf.push(&format!(
            "UPDATE rollup_state SET change_cursor = {c}, pending_max = {pm}, pending_horizon = {horizon}, \
               flags_done_to = {fl}, refreshed_at = {at} WHERE id = 1 AND change_cursor = {old}"
        ));
    } else {
        // Not everything read was accounted for: only the backfill's progress is kept.
        buf.push(&format!(
            "UPDATE rollup_state SET flags_done_to = {fl} WHERE id = 1 AND change_cursor = {old}"
        ));
    }
    on_db!(db, p => {
        bind_values!(sqlx::query(&buf.sql), &buf.args).execute(p).await?;
    });
    report.cursor = cursor;
    Ok(report)
}

/// The statements behind the counting pages as `now` they would run (the overview at 1 h, 24 h
/// and 7 d with the page's buckets, the facets unfiltered and over 24 h, the workers over 24 h),
/// named, for `EXPLAIN` in the benchmark.
#[cfg(feature = "testing")]
pub(crate) fn hot_queries(db: &Db, tokens: &Tokens, now: DateTime<Utc>) -> Vec<(String, SqlBuf)> {
    let d = dialect(db);
    let mut out = Vec::new();
    for (name, age, bucket) in [("1h", 1, 120), ("24h", 24, 3600), ("7d", 168, 6 * 3600)] {
        let since = now - Duration::hours(age);
        let mut w = Window::new(Some(since), Some(now), now);
        if bucket % BUCKET_SECS != 0 {
            w = w.raw_only();
        }
        out.push((
            format!("overview {name}: counts and series"),
            overview_counts_sql(d, &w, bucket, now, tokens),
        ));
        out.push((format!("overview {name}: attention"), attention_sql(since, now, now, tokens)));
    }
    out.push(("facets, all history".to_string(), facets_sql(d, &Window::new(None, None, now), now, tokens)));
    let day = now - Duration::hours(24);
    out.push((
        "facets since 24h".to_string(),
        facets_sql(d, &Window::new(Some(day), None, now), now, tokens),
    ));
    out.push((
        "workers since 24h".to_string(),
        workers_sql(d, &Window::new(Some(day), None, now), now, tokens),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(s, 0).unwrap()
    }

    #[test]
    fn windows_use_whole_closed_buckets_inside_them() {
        // [1000, 5000) with now 4000: buckets 2 ([1800, 2700)) and 3 ([2700, 3600)) are whole
        // and closed; 4 ([3600, 4500)) is still open at 4000.
        let w = Window::new(Some(t(1000)), Some(t(5000)), t(4000));
        assert_eq!((w.lo, w.hi), (2, 4));
        // A window starting on a boundary includes that bucket.
        let w = Window::new(Some(t(1800)), Some(t(2700)), t(9000));
        assert_eq!((w.lo, w.hi), (2, 3));
        // A window inside one bucket has none.
        let w = Window::new(Some(t(1900)), Some(t(2000)), t(9000));
        assert_eq!(w.lo, w.hi);
        // Unbounded: everything closed before now.
        let w = Window::new(None, None, t(9000));
        assert_eq!(w.hi, 10);
        assert!(w.lo < 0);
    }

    #[test]
    fn every_overview_series_of_six_hours_and_more_is_made_of_whole_buckets() {
        for secs in [900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86_400, 7 * 86_400] {
            assert_eq!(secs % BUCKET_SECS, 0, "{secs}");
        }
    }
}
