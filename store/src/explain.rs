//! The statements the PostgreSQL store runs for each hot read, built by the same functions the
//! store calls, with their arguments bound the same way: so the benchmark times and EXPLAINs
//! exactly what the dashboard asks the database, never a copy that drifts from it.
//!
//! Each [`Statement`] is one round trip of one read (the overview is two: counts and
//! attention; the workers page two: activity and held leases). A benchmark, or an operator
//! asking why a page is slow, can run [`Statement::explain`] on a production database.

use crate::queries::{self, bind_values, SqlBuf};
use crate::rollups;
use chrono::{DateTime, Duration, Utc};
use lastword_core::{Cause, PageRequest, RunFilter, RunState, Tokens};
use sqlx::postgres::PgPool;

/// One statement of a read: its name, PostgreSQL text and arguments.
#[derive(Clone, Debug)]
pub struct Statement {
    pub name: String,
    buf: SqlBuf,
    /// `SET LOCAL`s the store runs this statement with, besides every session's.
    settings: &'static [(&'static str, &'static str)],
}

impl Statement {
    fn new(name: impl Into<String>, buf: SqlBuf) -> Self {
        Statement { name: name.into(), buf, settings: &[] }
    }

    fn with_settings(self, settings: &'static [(&'static str, &'static str)]) -> Self {
        Statement { settings, ..self }
    }

    /// The `SET LOCAL`s the store runs it with, besides every session's ([`session_settings`]).
    pub fn settings(&self) -> &'static [(&'static str, &'static str)] {
        self.settings
    }

    /// The text, with `$n` placeholders.
    pub fn sql(&self) -> &str {
        &self.buf.sql
    }

    /// Runs it and counts the rows it returns: one round trip, for timing, so `pool` should
    /// be connected with the store's [`session_settings`] to run it as the server does.
    pub async fn fetch_count(&self, pool: &PgPool) -> Result<usize, sqlx::Error> {
        if self.settings.is_empty() {
            return Ok(bind_values!(sqlx::query(&self.buf.sql), &self.buf.args).fetch_all(pool).await?.len());
        }
        let mut tx = pool.begin().await?;
        crate::connect::set_local(&mut tx, self.settings).await?;
        let rows = bind_values!(sqlx::query(&self.buf.sql), &self.buf.args).fetch_all(&mut *tx).await?.len();
        tx.rollback().await?;
        Ok(rows)
    }

    /// `EXPLAIN (ANALYZE, BUFFERS)` of it, in a session set as the store's are: the plan as
    /// PostgreSQL prints it, one line per row.
    pub async fn explain(&self, pool: &PgPool) -> Result<String, sqlx::Error> {
        let mut tx = store_session(pool).await?;
        crate::connect::set_local(&mut tx, self.settings).await?;
        let sql = format!("EXPLAIN (ANALYZE, BUFFERS) {}", self.buf.sql);
        let lines: Vec<(String,)> =
            bind_values!(sqlx::query_as(&sql), &self.buf.args).fetch_all(&mut *tx).await?;
        tx.rollback().await?;
        Ok(lines.into_iter().map(|(l,)| l + "\n").collect())
    }
}

/// The settings of every PostgreSQL session the store opens (`PgConnectOptions::options`).
pub fn session_settings() -> &'static [(&'static str, &'static str)] {
    crate::connect::PG_SESSION_SETTINGS
}

/// A transaction on any pool with the store's session settings (`SET LOCAL`, so the pool's
/// connection goes back as it was).
async fn store_session(pool: &PgPool) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    crate::connect::set_local(&mut tx, crate::connect::PG_SESSION_SETTINGS).await?;
    Ok(tx)
}

const PG: &queries::Dialect = &crate::postgres::dialect::DIALECT;

/// What the Failures page lists when no state or cause is chosen (as `app`'s server function).
pub fn failure_filter() -> RunFilter {
    RunFilter { states: RunState::failures(), ..RunFilter::default() }
}

/// The first page of the run list for `filter` (the Failures page and `/api/v1/runs`).
pub fn list_runs(name: &str, filter: &RunFilter, now: DateTime<Utc>, tokens: &Tokens) -> Statement {
    Statement::new(name, queries::list_runs(PG, filter, &PageRequest::default(), now, tokens))
}

/// The cause counts beside the list for `filter` (from rollups for time filters).
pub fn cause_facets(name: &str, filter: &RunFilter, now: DateTime<Utc>, tokens: &Tokens) -> Statement {
    Statement::new(name, rollups::cause_facets_sql(PG, filter, now, tokens))
}

/// The overview of `[now - window, now)` with series buckets of `bucket`: its counts and its
/// attention statements (the flags' statement; while they are backfilled the store counts
/// attention from history instead).
pub fn overview(
    name: &str,
    window: Duration,
    bucket: Duration,
    now: DateTime<Utc>,
    tokens: &Tokens,
) -> [Statement; 2] {
    let (counts, attention) = rollups::overview_sql(PG, now - window, now, bucket, now, tokens);
    [Statement::new(format!("{name}_counts"), counts), Statement::new(format!("{name}_attention"), attention)]
}

/// The workers page since `now - window`: activity and the leases held now.
pub fn workers(name: &str, window: Duration, now: DateTime<Utc>, tokens: &Tokens) -> [Statement; 2] {
    [
        Statement::new(
            format!("{name}_activity"),
            rollups::workers_activity_sql(PG, now - window, now, tokens),
        ),
        Statement::new(
            format!("{name}_held_leases"),
            SqlBuf { sql: queries::HELD_LEASES.into(), args: vec![] },
        ),
    ]
}

/// The timeline of the last `window`.
pub fn timeline(name: &str, window: Duration, now: DateTime<Utc>, tokens: &Tokens) -> Statement {
    Statement::new(name, queries::timeline(PG, now - window, now, now, tokens))
}

/// A task page's runs.
pub fn task_runs(name: &str, task_id: i64, now: DateTime<Utc>, tokens: &Tokens) -> Statement {
    Statement::new(name, queries::task::task_runs(PG, task_id, now, tokens))
}

/// The run lists of the Failures page and the API, first page: unfiltered failures, one
/// cause, two causes, every run.
pub fn run_lists(now: DateTime<Utc>, tokens: &Tokens) -> Vec<Statement> {
    let causes = |c: &[Cause]| RunFilter { causes: c.to_vec(), ..RunFilter::default() };
    vec![
        list_runs("failures_default", &failure_filter(), now, tokens),
        list_runs("cause_timeout", &causes(&[Cause::Timeout]), now, tokens),
        list_runs("cause_timeout_crash", &causes(&[Cause::Timeout, Cause::Crash]), now, tokens),
        list_runs("all_runs", &RunFilter::default(), now, tokens),
    ]
}

/// Every hot read of the dashboard as first opened and as commonly filtered, in page order:
/// the [`run_lists`], the facets (all history and 24 h), the overview's windows (as the page
/// buckets them), the workers page, a 15-minute timeline and the task page of `task_id`.
pub fn hot_reads(task_id: i64, now: DateTime<Utc>, tokens: &Tokens) -> Vec<Statement> {
    let day = RunFilter { since: Some(now - Duration::hours(24)), ..failure_filter() };
    let mut out = run_lists(now, tokens);
    out.push(cause_facets("facets_all_time", &failure_filter(), now, tokens));
    out.push(cause_facets("facets_24h", &day, now, tokens));
    for (w, window, bucket) in [
        ("1h", Duration::hours(1), Duration::seconds(120)),
        ("24h", Duration::hours(24), Duration::hours(1)),
        ("7d", Duration::days(7), Duration::hours(6)),
    ] {
        out.extend(overview(&format!("overview_{w}"), window, bucket, now, tokens));
    }
    out.extend(workers("workers_24h", Duration::hours(24), now, tokens));
    out.push(timeline("timeline_15m", Duration::minutes(15), now, tokens));
    out.push(task_runs("task_runs", task_id, now, tokens));
    out.push(
        Statement::new("leases_24h", crate::leases::kinds_sql(PG, None, now - Duration::hours(24), now))
            .with_settings(crate::leases::KINDS_SETTINGS),
    );
    out
}

/// The state twin of `lastword_core::run_state` over `runs r` in PostgreSQL, for ad-hoc
/// queries: bind `$1` now, `$2`/`$3` the trimmed no-action and skip tokens.
pub fn state_sql() -> &'static str {
    PG.state_sql
}

/// Whether a plan reads `runs` sequentially (what no hot read may do at scale).
pub fn scans_runs(plan: &str) -> bool {
    plan.contains("Seq Scan on runs")
}
