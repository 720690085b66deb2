//! The hot read queries as raw SQL: the floor the server is compared with, and their
//! `EXPLAIN (ANALYZE, BUFFERS)` plans with any sequential scan of `runs` flagged.
//!
//! The texts are the PostgreSQL dialect of `store/src/queries.rs` as of this commit (the
//! store's builders are crate-private, and the benchmark must talk to the server only over
//! HTTP): `$1` now, `$2`/`$3` the trimmed tokens, then the filter's parameters. If the store's
//! queries change (rollups, caches), the HTTP figures follow the server and these stay the
//! floor of answering from `runs` directly.

use crate::load::Loaded;
use crate::stats::Summary;
use chrono::{DateTime, Duration, Utc};
use sqlx::postgres::PgPool;
use std::time::Instant;

/// `lastword_core::run_state` in SQL (store/src/postgres.rs `STATE_SQL`).
pub const STATE_SQL: &str = "CASE \
    WHEN r.finished_at IS NULL THEN CASE WHEN r.lease_expires_at > $1 THEN 'running' ELSE 'silent' END \
    WHEN r.completion_rows = 0 THEN 'lost_lease' \
    WHEN r.error IS NOT NULL THEN 'failed' \
    WHEN COALESCE(btrim(r.output, E' \\t\\n\\r\\x0B\\x0C'), '') = '' THEN 'empty_output' \
    WHEN btrim(r.output, E' \\t\\n\\r\\x0B\\x0C') = $2 THEN 'no_action' \
    WHEN btrim(r.output, E' \\t\\n\\r\\x0B\\x0C') = $3 THEN 'skip' \
    ELSE 'acted' END";

const OUT: &str = "btrim(r.output, E' \\t\\n\\r\\x0B\\x0C')";
const RUN_COLUMNS: &str = "r.id, r.task_id, r.worker, r.lease_epoch, r.claimed_at, r.lease_expires_at, \
     r.heartbeat_at, r.finished_at, r.output, r.error, r.error_detail, r.completion_rows";
const FINISHED_ACCEPTED: &str =
    "r.finished_at IS NOT NULL AND (r.completion_rows IS NULL OR r.completion_rows <> 0)";

/// The sargable predicates of `queries::state_predicate` / `cause_predicate`.
fn predicate(name: &str) -> String {
    match name {
        "silent" => "r.finished_at IS NULL AND r.lease_expires_at <= $1".into(),
        "lost_lease" => "r.finished_at IS NOT NULL AND r.completion_rows = 0".into(),
        "failed" => format!("r.error IS NOT NULL AND {FINISHED_ACCEPTED}"),
        "empty_output" => format!("{FINISHED_ACCEPTED} AND r.error IS NULL AND COALESCE({OUT}, '') = ''"),
        "other" => format!(
            "r.error IS NOT NULL AND r.error NOT IN ('timeout', 'api_error', 'context_overflow', 'crash') \
             AND {FINISHED_ACCEPTED}"
        ),
        named => format!("r.error = '{named}' AND {FINISHED_ACCEPTED}"),
    }
}

fn any_of(names: &[&str]) -> String {
    let parts: Vec<String> = names.iter().map(|n| format!("({})", predicate(n))).collect();
    format!("({})", parts.join(" OR "))
}

/// The failure states: what the Failures page lists when no state or cause is chosen.
pub const FAILURE_STATES: [&str; 4] = ["silent", "lost_lease", "failed", "empty_output"];
const ALL_CAUSES: [&str; 8] =
    ["timeout", "api_error", "context_overflow", "crash", "other", "empty_output", "silent", "lost_lease"];

/// A query with its extra parameters (after `$1..$3`).
pub struct Query {
    pub name: String,
    pub sql: String,
    pub args: Vec<Arg>,
}

#[derive(Clone)]
pub enum Arg {
    I64(i64),
    Time(DateTime<Utc>),
}

/// `queries::list_runs` for a selection of states/causes (none: every run), first page of 50.
fn list_runs(name: &str, selection: Option<&[&str]>) -> Query {
    let cond = selection.map(|s| format!(" WHERE {}", any_of(s))).unwrap_or_default();
    Query {
        name: name.to_string(),
        sql: format!(
            "SELECT {RUN_COLUMNS}, {STATE_SQL} AS state, t.kind, t.source, t.safety FROM runs r \
             JOIN tasks t ON t.id = r.task_id{cond} ORDER BY r.claimed_at DESC, r.id DESC LIMIT $4"
        ),
        args: vec![Arg::I64(51)],
    }
}

/// The list queries timed as the floor, by the name of the HTTP read they are the floor of.
pub fn floor_queries() -> Vec<Query> {
    vec![
        list_runs("failures_default", Some(&FAILURE_STATES)),
        list_runs("cause_timeout", Some(&["timeout"])),
        list_runs("cause_timeout_crash", Some(&["timeout", "crash"])),
        list_runs("all_runs", None),
    ]
}

fn hot_queries(loaded: &Loaded, now: DateTime<Utc>) -> Vec<Query> {
    let ago = |d: Duration| Arg::Time(now - d);
    let mut q = floor_queries();
    let facets = |name: &str, since: Option<Duration>| {
        let mut conds = Vec::new();
        let mut args = Vec::new();
        if let Some(d) = since {
            conds.push("r.claimed_at >= $4".to_string());
            args.push(ago(d));
        }
        conds.push(any_of(&ALL_CAUSES));
        Query {
            name: name.into(),
            sql: format!(
                "SELECT {STATE_SQL} AS state, r.error, COUNT(*) FROM runs r WHERE {} GROUP BY 1, 2",
                conds.join(" AND ")
            ),
            args,
        }
    };
    q.push(facets("facets_all_time", None));
    q.push(facets("facets_24h", Some(Duration::hours(24))));
    for (w, d, bucket) in [
        ("1h", Duration::hours(1), 120),
        ("24h", Duration::hours(24), 3600),
        ("7d", Duration::days(7), 6 * 3600),
    ] {
        q.push(Query {
            name: format!("overview_counts_{w}"),
            sql: format!(
                "SELECT {STATE_SQL} AS state, r.error, COUNT(*) FROM runs r \
                 WHERE r.claimed_at >= $4 AND r.claimed_at < $5 GROUP BY 1, 2"
            ),
            args: vec![ago(d), Arg::Time(now)],
        });
        q.push(Query {
            name: format!("overview_series_{w}"),
            sql: format!(
                "SELECT floor(extract(epoch from r.claimed_at) / $6)::bigint AS bucket, {STATE_SQL} AS state, \
                 COUNT(*) FROM runs r WHERE r.claimed_at >= $4 AND r.claimed_at < $5 GROUP BY 1, 2 ORDER BY 1, 2"
            ),
            args: vec![ago(d), Arg::Time(now), Arg::I64(bucket)],
        });
        q.push(attention(&format!("overview_attention_{w}"), ago(d), now));
    }
    q.push(Query {
        name: "workers_activity_24h".into(),
        sql: format!(
            "SELECT r.worker, COUNT(*), COUNT(CASE WHEN {} THEN 1 END), MAX(r.claimed_at), MAX(r.heartbeat_at) \
             FROM runs r WHERE r.claimed_at >= $4 GROUP BY r.worker",
            any_of(&FAILURE_STATES)
        ),
        args: vec![ago(Duration::hours(24))],
    });
    q.push(Query {
        name: "workers_held_leases".into(),
        // No state parameters in this one: they are bound typed and unused, which is allowed.
        sql: "SELECT t.owner, t.id, t.lease_epoch, t.lease_expires_at, r.claimed_at, r.heartbeat_at \
              FROM tasks t LEFT JOIN runs r ON r.task_id = t.id AND r.lease_epoch = t.lease_epoch \
              WHERE t.status = 'leased' AND t.owner IS NOT NULL ORDER BY t.owner, t.id"
            .into(),
        args: vec![],
    });
    q.push(Query {
        name: "timeline_15m".into(),
        sql: format!(
            "SELECT {RUN_COLUMNS}, {STATE_SQL} AS state, t.kind, t.source, t.safety FROM runs r \
             JOIN tasks t ON t.id = r.task_id WHERE r.claimed_at <= $5 AND (r.claimed_at >= $4 OR r.finished_at >= $4 \
             OR (r.finished_at IS NULL AND r.lease_expires_at >= $4)) ORDER BY r.claimed_at DESC, r.id DESC LIMIT $6"
        ),
        args: vec![ago(Duration::minutes(15)), Arg::Time(now), Arg::I64(5000)],
    });
    q.push(Query {
        name: "task_runs_50".into(),
        sql: format!("SELECT {RUN_COLUMNS}, {STATE_SQL} AS state FROM runs r WHERE r.task_id = $4 ORDER BY r.lease_epoch, r.id"),
        args: vec![Arg::I64(loaded.task_50)],
    });
    q
}

/// `queries::attention` over `[$4, $5)`.
fn attention(name: &str, since: Arg, now: DateTime<Utc>) -> Query {
    let lost = predicate("lost_lease");
    let silent = predicate("silent");
    let acted = format!(
        "r.finished_at IS NOT NULL AND r.error IS NULL AND {OUT} <> '' AND {OUT} <> $2 AND {OUT} <> $3"
    );
    Query {
        name: name.into(),
        sql: format!(
            "SELECT \
               (SELECT COUNT(*) FROM runs r JOIN tasks t ON t.id = r.task_id \
                 WHERE r.claimed_at >= $4 AND r.claimed_at < $5 AND t.safety = 'unsafe' AND {lost}), \
               (SELECT COUNT(*) FROM tasks t \
                 WHERE t.safety = 'unsafe' AND t.compensated_at IS NULL \
                   AND t.id IN (SELECT r.task_id FROM runs r WHERE r.claimed_at >= $4 AND r.claimed_at < $5 \
                                UNION SELECT e.task_id FROM effects e WHERE e.created_at >= $4 AND e.created_at < $5) \
                   AND ((SELECT COUNT(DISTINCT e.lease_epoch) FROM effects e WHERE e.task_id = t.id) >= 2 \
                        OR (SELECT COUNT(*) FROM runs r WHERE r.task_id = t.id AND {acted}) >= 2)), \
               (SELECT COUNT(*) FROM runs r WHERE r.claimed_at >= $4 AND r.claimed_at < $5 AND {silent}), \
               (SELECT COUNT(*) FROM tasks t WHERE t.status = 'dead' AND t.updated_at >= $4 AND t.updated_at < $5)"
        ),
        args: vec![since, Arg::Time(now)],
    }
}

fn bind<'q>(
    sql: &'q str,
    now: DateTime<Utc>,
    args: &'q [Arg],
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    let mut q = sqlx::query(sql).bind(now).bind("no action needed").bind("skip");
    for a in args {
        q = match a {
            Arg::I64(v) => q.bind(*v),
            Arg::Time(v) => q.bind(*v),
        };
    }
    q
}

/// Each floor query run `n` times (prepared once, like the server's statement cache).
pub async fn measure_floor(pool: &PgPool, n: usize) -> anyhow::Result<Vec<(String, Summary)>> {
    let mut out = Vec::new();
    for q in floor_queries() {
        let mut samples = Vec::with_capacity(n);
        for i in 0..n + 1 {
            let t = Instant::now();
            bind(&q.sql, Utc::now(), &q.args).fetch_all(pool).await?;
            // The first execution pays for planning the statement: a warm-up, not a sample.
            if i > 0 {
                samples.push(t.elapsed());
            }
        }
        let s = Summary::of(&samples);
        println!("sql  {:<34} {s}", q.name);
        out.push((q.name, s));
    }
    Ok(out)
}

/// A plan, and whether it reads `runs` sequentially.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Plan {
    pub name: String,
    pub seq_scan_on_runs: bool,
    pub execution_ms: Option<f64>,
    pub text: String,
}

pub async fn explain_hot_queries(pool: &PgPool, loaded: &Loaded) -> anyhow::Result<Vec<Plan>> {
    let now = Utc::now();
    let mut plans = Vec::new();
    for q in hot_queries(loaded, now) {
        let sql = format!("EXPLAIN (ANALYZE, BUFFERS) {}", q.sql);
        let lines: Vec<(String,)> =
            sqlx::query_as_with(&sql, bind_args(now, &q.args)).fetch_all(pool).await?;
        let text: String = lines.into_iter().map(|(l,)| l + "\n").collect();
        let seq_scan_on_runs = text.contains("Seq Scan on runs");
        let execution_ms = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("Execution Time: "))
            .and_then(|v| v.trim_end_matches(" ms").parse().ok());
        println!(
            "explain {:<30} {:>10} ms{}",
            q.name,
            execution_ms.map(|v: f64| format!("{v:.1}")).unwrap_or_default(),
            if seq_scan_on_runs { "   ** Seq Scan on runs **" } else { "" }
        );
        println!("{}", indent(&text));
        plans.push(Plan { name: q.name, seq_scan_on_runs, execution_ms, text });
    }
    Ok(plans)
}

fn bind_args(now: DateTime<Utc>, args: &[Arg]) -> sqlx::postgres::PgArguments {
    use sqlx::Arguments;
    let mut a = sqlx::postgres::PgArguments::default();
    // Encoding these types cannot fail; an error would be a bug in sqlx, not a runtime state.
    let _ = a.add(now);
    let _ = a.add("no action needed");
    let _ = a.add("skip");
    for arg in args {
        let _ = match arg {
            Arg::I64(v) => a.add(*v),
            Arg::Time(v) => a.add(*v),
        };
    }
    a
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n")
}
