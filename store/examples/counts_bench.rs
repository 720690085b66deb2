//! Times the counting pages' store calls on a production-shaped history, before and after the
//! rollups are built (docs/counts.md), and prints the plans of the statements behind them.
//!
//! ```sh
//! cargo run -p lastword-store --example counts_bench -- \
//!     postgres://postgres@127.0.0.1:5432/lastword_rollup_$(date +%s) [runs, default 1000000]
//! ```
//!
//! The database is created and migrated; if it has no runs, `runs` are loaded set-based
//! (30 days, 200 workers, one task per five runs, the simulator's mix of states) with the
//! change-log triggers off (`session_replication_role = replica`), as a restore would. Use a
//! throwaway database and drop it afterwards.

use chrono::{DateTime, Duration, Utc};
use lastword_core::{RunFilter, Tokens};
use lastword_store::testing::{explain_hot_queries, raw_cause_facets, raw_overview, raw_workers};
use lastword_store::{store_for, Db, DbTarget, Store};
use std::time::Instant;

/// `$1` runs, claims spread evenly over 30 days up to now. One task per run, except that one run
/// in twenty is the re-claim (epoch 2) of the previous run's task; one task in ten is unsafe.
const LOAD: &[&str] = &[
    "SET session_replication_role = replica",
    "INSERT INTO tasks (id, kind, source, safety, status, payload, lease_epoch, created_at, updated_at)
     SELECT g, (ARRAY['reply_to_mention', 'digest', 'charge', 'sync'])[1 + g % 4],
            CASE WHEN g % 3 = 0 THEN 'tick' ELSE 'notification' END,
            CASE WHEN g % 10 = 0 THEN 'unsafe' ELSE 'idempotent' END,
            CASE WHEN g % 97 = 0 THEN 'dead' ELSE 'completed' END, '{}', 1, c, c + interval '40 seconds'
     FROM (SELECT g, now() - interval '30 days' + g * (interval '30 days' / $1) AS c
           FROM generate_series(1, $1::int) g) x",
    "INSERT INTO runs (task_id, worker, lease_epoch, claimed_at, lease_expires_at, heartbeat_at, finished_at,
                       output, error, completion_rows)
     SELECT CASE WHEN n % 20 = 1 AND n > 1 THEN n - 1 ELSE n END, 'worker-' || lpad((n % 200)::text, 3, '0'),
            CASE WHEN n % 20 = 1 AND n > 1 THEN 2 ELSE 1 END, c,
            c + interval '30 seconds', c + interval '5 seconds',
            CASE WHEN k = 8 THEN NULL ELSE c + interval '8 seconds' END,
            CASE WHEN k BETWEEN 0 AND 6 OR k = 8 THEN NULL WHEN k = 7 THEN '' WHEN k BETWEEN 11 AND 40 THEN 'no action needed'
                 WHEN k BETWEEN 41 AND 60 THEN 'skip' ELSE 'replied to #' || n END,
            CASE WHEN k <= 2 THEN 'timeout' WHEN k = 3 THEN 'api_error' WHEN k = 4 THEN 'context_overflow'
                 WHEN k = 5 THEN 'crash' WHEN k = 6 THEN 'other' END,
            CASE WHEN k = 8 THEN NULL WHEN k IN (9, 10) THEN 0 ELSE 1 END
     FROM (SELECT n, n % 100 AS k, now() - interval '30 days' + n * (interval '30 days' / $1) AS c
           FROM generate_series(1, $1::int) n) x",
    // Effects of the re-claimed unsafe tasks: under both epochs (a double execution) for a few.
    "INSERT INTO effects (run_id, task_id, lease_epoch, kind, idempotency_key, created_at)
     SELECT r.id, r.task_id, r.lease_epoch, 'send', 'k' || r.task_id, r.claimed_at + interval '3 seconds'
     FROM runs r WHERE r.task_id % 20 = 0 AND r.task_id % 10 = 0 AND (r.lease_epoch = 1 OR r.task_id % 60 = 0)",
    "SELECT setval(pg_get_serial_sequence('tasks', 'id'), (SELECT MAX(id) FROM tasks))",
    "SELECT setval(pg_get_serial_sequence('runs', 'id'), (SELECT MAX(id) FROM runs))",
    "SET session_replication_role = origin",
    "ANALYZE",
];

const SAMPLES: usize = 15;

/// min / median / p95 in milliseconds of `SAMPLES` calls.
async fn time<F, Fut, T>(mut f: F) -> (f64, f64, f64)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let mut ms = Vec::with_capacity(SAMPLES);
    f().await; // warm the cache and the statement cache
    for _ in 0..SAMPLES {
        let start = Instant::now();
        f().await;
        ms.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    ms.sort_by(f64::total_cmp);
    let p95 = ms[((SAMPLES as f64 * 0.95).ceil() as usize).min(SAMPLES) - 1];
    (ms[0], ms[SAMPLES / 2], p95)
}

fn row(name: &str, (min, med, p95): (f64, f64, f64)) {
    println!("| {name} | {min:.1} | {med:.1} | {p95:.1} |");
}

async fn measure(s: &dyn Store, now: DateTime<Utc>, raw: bool) {
    let db = s.db();
    let tokens = s.tokens().clone();
    let windows = [
        ("1h", Duration::hours(1), 120),
        ("24h", Duration::hours(24), 3600),
        ("7d", Duration::days(7), 6 * 3600),
    ];
    for (name, age, bucket) in windows {
        let bucket = Duration::seconds(bucket);
        let t = if raw {
            time(|| raw_overview(db, &tokens, now - age, now, bucket, now)).await
        } else {
            time(|| async { s.overview(now - age, now, bucket, now).await.expect("overview") }).await
        };
        row(&format!("overview {name}"), t);
    }
    for (name, filter) in [
        ("facets, no window", RunFilter::default()),
        ("facets since=24h", RunFilter { since: Some(now - Duration::hours(24)), ..RunFilter::default() }),
    ] {
        let t = if raw {
            time(|| raw_cause_facets(db, &tokens, &filter, now)).await
        } else {
            time(|| async { s.cause_facets(&filter, now).await.expect("facets") }).await
        };
        row(name, t);
    }
    let since = now - Duration::hours(24);
    let t = if raw {
        time(|| raw_workers(db, &tokens, since, now)).await
    } else {
        time(|| async { s.workers(since, now).await.expect("workers") }).await
    };
    row("workers since=24h", t);
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let url = args.next().expect("usage: counts_bench <postgres url of a throwaway database> [runs]");
    let runs: i64 = args.next().map_or(1_000_000, |n| n.parse().expect("runs: a number"));
    let db = Db::connect(&DbTarget::Postgres(url)).await.expect("connect");
    db.migrate().await.expect("migrate");
    let Db::Postgres(pool) = &db else { unreachable!("a PostgreSQL url") };
    let have: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM runs").fetch_one(pool).await.expect("count");
    if have == 0 {
        let start = Instant::now();
        let mut conn = pool.acquire().await.expect("connection");
        for sql in LOAD {
            sqlx::query(sql).bind(runs).execute(&mut *conn).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        println!("loaded {runs} runs in {:.1} s", start.elapsed().as_secs_f64());
    }
    // Start from no rollups at all.
    for table in ["run_rollups", "worker_rollups", "run_rollup_buckets", "double_executions", "rollup_state"]
    {
        sqlx::query(&format!("DELETE FROM {table}")).execute(pool).await.expect("clear rollups");
    }
    let s = store_for(db.clone(), Tokens::default());
    let counts: (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM runs), (SELECT COUNT(*) FROM tasks), (SELECT COUNT(*) FROM effects)",
    )
    .fetch_one(pool)
    .await
    .expect("totals");
    println!("rows: runs {}, tasks {}, effects {}", counts.0, counts.1, counts.2);
    let now = Utc::now();

    println!("\n### Before: the queries that count history (main's, kept as the oracle)\n");
    println!("| figure | min ms | median ms | p95 ms |\n|---|---|---|---|");
    measure(s.as_ref(), now, true).await;

    let start = Instant::now();
    let (mut calls, mut buckets) = (0, 0);
    loop {
        let report = s.refresh_rollups(now).await.expect("refresh");
        calls += 1;
        buckets += report.recomputed;
        if !report.has_more() {
            break;
        }
    }
    println!(
        "\nbuilt the rollups: {buckets} buckets and the double-execution flags in {calls} refreshes, {:.1} s",
        start.elapsed().as_secs_f64()
    );
    // What autovacuum does shortly after the backfill: the planner then knows the rollups' size.
    sqlx::query("ANALYZE run_rollup_buckets, run_rollups, worker_rollups, double_executions")
        .execute(pool)
        .await
        .expect("analyze");
    let start = Instant::now();
    let report = s.refresh_rollups(now).await.expect("refresh");
    println!(
        "a steady-state refresh with nothing to do: {:.1} ms ({report:?})",
        start.elapsed().as_secs_f64() * 1000.0
    );

    println!("\n### After: the store's calls with the rollups\n");
    println!("| figure | min ms | median ms | p95 ms |\n|---|---|---|---|");
    measure(s.as_ref(), now, false).await;

    println!("\n### Plans\n");
    for (name, plan) in explain_hot_queries(&db, s.tokens(), now).await {
        println!("#### {name}\n\n```\n{plan}\n```\n");
    }
    db.close().await;
}
