//! The production-shaped data set, loaded with set-based SQL so 10 M runs take minutes.
//!
//! Shape at `--scale 1.0`: 2 M tasks, about 10 M runs (1–9 per task, 5 on average), 200 workers,
//! claims spread over the last 30 days up to now. Each run's fate is drawn from a seeded hash of
//! its (task, epoch), so a scale always produces the same rows: mostly healthy (acted, no action
//! needed, skip) and a few percent of each failure cause, empty outputs, lost-lease completions
//! (`completion_rows = 0`), silent runs (never finished, lease lapsed) and double executions
//! (unsafe tasks whose effects ran under two epochs). Plus one task with 50 runs for the task
//! page, and a pool of queued tasks for the write loads.
//!
//! The loading sessions run with `session_replication_role = replica`, which skips every
//! trigger: lastword's change-log triggers (history does not need live events) and the foreign
//! key checks. Secondary indexes are dropped first and rebuilt from their own definitions
//! afterwards (whatever migrations created them), then the tables are vacuumed and analyzed so
//! the planner and the visibility map look like a database that has been running for a month.

use anyhow::Context;
use futures::stream::{self, TryStreamExt};
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{ConnectOptions, Executor};
use std::str::FromStr;
use std::time::Instant;

/// Tasks per chunk: one INSERT … SELECT of ~250 k runs, a few seconds each.
const CHUNK_TASKS: i64 = 50_000;
/// Days of history.
pub const DAYS: i64 = 30;
/// Workers seen in the history (named worker-1 … worker-200, like the simulator's).
pub const WORKERS: i64 = 200;

/// What the loader made, for the measurements that need ids.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Loaded {
    pub scale: f64,
    pub rows_runs: i64,
    pub rows_tasks: i64,
    pub rows_effects: i64,
    /// The task with 50 runs.
    pub task_50: i64,
    /// A historical run the live-latency probe updates.
    pub probe_run: i64,
    /// Queued tasks for the claim loops and the live fleet.
    pub queued_pool: i64,
    pub double_executions: i64,
    pub states: Vec<(String, i64)>,
    /// How long the load took (0 in descriptions written before this field existed).
    #[serde(default)]
    pub load_secs: f64,
}

/// Fault rates per run, cumulative order as in the SQL below (a "few percent of each cause";
/// the simulator's demo rates are higher so a viewer sees every event within a minute).
const MIX: &str = "CASE \
    WHEN u < 0.020 THEN 'timeout' \
    WHEN u < 0.050 THEN 'api_error' \
    WHEN u < 0.065 THEN 'context_overflow' \
    WHEN u < 0.075 THEN 'crash' \
    WHEN u < 0.080 THEN 'other' \
    WHEN u < 0.090 THEN 'empty' \
    WHEN u < 0.100 THEN 'lost' \
    WHEN u < 0.110 THEN 'silent' \
    WHEN is_final AND act THEN 'acted' \
    ELSE 'idle' END";

/// A uniform draw in [0, 1) from (key, salt): deterministic, parallel safe, inlined by the
/// planner. Dropped again after the load.
const HASH_FN: &str = "CREATE OR REPLACE FUNCTION bench_u(key bigint, salt bigint) RETURNS float8 \
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS \
    $$ SELECT (hashint8extended(key, salt) & 16777215)::float8 / 16777216 $$";

/// The action message a run of a kind writes (the simulator's wording), sometimes with a long
/// body: lists and the timeline must cope with outputs of a few kilobytes.
const MESSAGE: &str = "(CASE kind \
    WHEN 'reply_to_mention' THEN 'replied to @ann in thread #' || task_id \
    WHEN 'triage_issue' THEN 'labelled issue #' || task_id || ' as bug and assigned @dana' \
    WHEN 'send_digest' THEN 'sent the daily digest (#' || task_id || ') to 14 subscribers' \
    ELSE 'moved 2 events to match the new standup time (sync #' || task_id || ')' END \
    || CASE WHEN bench_u(k, 12) < 0.2 THEN E'\\n\\n' || \
       repeat('Summary of the thread and of the reply that was posted. ', 5 + floor(bench_u(k, 13) * 40)::int) \
       ELSE '' END)";

/// One chunk of tasks `[$1, $2]` with all their runs, in one statement: the runs are drawn
/// first and each task is written from its final run (status, result). `ins_tasks` is never
/// read; PostgreSQL runs a data-modifying CTE to completion anyway. `$3` tasks in total, `$4`
/// start of the history, `$5` its length in seconds, `$6` workers.
fn chunk_sql() -> String {
    format!(
        "WITH t AS ( \
           SELECT g AS id, \
             CASE WHEN bench_u(g, 1) < 0.65 THEN 'notification' ELSE 'tick' END AS source, \
             bench_u(g, 2) < 0.5 AS first_kind, \
             bench_u(g, 3) < 0.15 AS is_unsafe, \
             1 + floor(bench_u(g, 4) * 9)::int AS n, \
             $4::timestamptz + make_interval(secs => (g - 1)::float8 * $5::float8 / $3::float8) AS created_at \
           FROM generate_series($1::bigint, $2::bigint) g), \
         tk AS ( \
           SELECT t.*, CASE WHEN source = 'notification' \
               THEN CASE WHEN first_kind THEN 'reply_to_mention' ELSE 'triage_issue' END \
               ELSE CASE WHEN first_kind THEN 'send_digest' ELSE 'sync_calendar' END END AS kind \
           FROM t), \
         draws AS ( \
           SELECT tk.id AS task_id, tk.kind, tk.source, tk.n, e AS epoch, tk.id * 16 + e AS k, \
             e = tk.n AS is_final, \
             bench_u(tk.id * 16 + e, 5) AS u, \
             bench_u(tk.id * 16 + e, 8) < CASE WHEN tk.source = 'notification' THEN 0.6 ELSE 0.35 END AS act, \
             tk.created_at + make_interval(secs => (e - 1) * 40 + bench_u(tk.id * 16 + e, 6) * 5) AS claimed_at, \
             2 + bench_u(tk.id * 16 + e, 7) * 25 AS work, \
             'worker-' || (1 + floor(bench_u(tk.id * 16 + e, 9) * $6)::int) AS worker \
           FROM tk, generate_series(1, tk.n) e), \
         fated AS (SELECT d.*, {MIX} AS fate FROM draws d), \
         r AS MATERIALIZED ( \
           SELECT task_id, kind, source, epoch, is_final, fate, worker, claimed_at, \
             CASE WHEN fate NOT IN ('lost', 'silent') AND work > 15 THEN claimed_at + interval '15 s' END AS heartbeat_at, \
             CASE WHEN fate NOT IN ('lost', 'silent') AND work > 15 THEN claimed_at + interval '45 s' \
                  ELSE claimed_at + interval '30 s' END AS lease_expires_at, \
             CASE fate WHEN 'silent' THEN NULL \
                  WHEN 'lost' THEN claimed_at + make_interval(secs => 40 + work) \
                  ELSE claimed_at + make_interval(secs => work) END AS finished_at, \
             CASE fate WHEN 'acted' THEN {MESSAGE} \
                  WHEN 'idle' THEN CASE WHEN source = 'notification' THEN 'no action needed' ELSE 'skip' END \
                  WHEN 'empty' THEN CASE WHEN bench_u(k, 11) < 0.5 THEN '' END \
                  WHEN 'lost' THEN CASE WHEN bench_u(k, 10) < 0.5 THEN {MESSAGE} \
                       WHEN source = 'notification' THEN 'no action needed' ELSE 'skip' END \
                  END AS output, \
             CASE WHEN fate IN ('timeout', 'api_error', 'context_overflow', 'crash', 'other') THEN fate END AS error, \
             CASE fate \
                  WHEN 'timeout' THEN 'tool call github.search exceeded its 120s deadline' \
                  WHEN 'api_error' THEN 'model API returned 529 Overloaded after 3 retries' \
                  WHEN 'context_overflow' THEN 'prompt is 213441 tokens; the model''s limit is 200000' \
                  WHEN 'crash' THEN 'worker process exited with signal 11 (SIGSEGV) in the tool sandbox' \
                  WHEN 'other' THEN 'unexpected state' END AS error_detail, \
             CASE fate WHEN 'silent' THEN NULL WHEN 'lost' THEN 0 ELSE 1 END AS completion_rows \
           FROM fated), \
         ins_tasks AS ( \
           INSERT INTO tasks (id, kind, source, safety, status, payload, result, lease_epoch, attempts, \
                              max_attempts, created_at, updated_at) \
           SELECT tk.id, tk.kind, tk.source, CASE WHEN tk.is_unsafe THEN 'unsafe' ELSE 'idempotent' END, \
             CASE WHEN r.fate IN ('acted', 'idle') THEN 'completed' ELSE 'dead' END, \
             CASE WHEN tk.source = 'notification' \
               THEN jsonb_build_object('n', tk.id, 'from', '@ann', 'text', '@ann: can you take a look at #' || tk.id || '?') \
               ELSE jsonb_build_object('n', tk.id, 'schedule', 'every 5m') END, \
             CASE WHEN r.fate IN ('acted', 'idle') THEN r.output END, \
             tk.n, tk.n, 10, tk.created_at, COALESCE(r.finished_at, r.lease_expires_at) \
           FROM tk JOIN r ON r.task_id = tk.id AND r.is_final) \
         INSERT INTO runs (task_id, worker, lease_epoch, claimed_at, lease_expires_at, heartbeat_at, finished_at, \
                           output, error, error_detail, completion_rows) \
         SELECT task_id, worker, epoch, claimed_at, lease_expires_at, heartbeat_at, finished_at, output, error, \
           error_detail, completion_rows \
         FROM r ORDER BY task_id, epoch"
    )
}

/// The outbox rows of unsafe tasks in `[$1, $2]`: one effect per run that acted, including a
/// lost-lease run whose discarded output was an action — so a task with both has its effect
/// under two epochs (a double execution).
const EFFECTS_SQL: &str =
    "INSERT INTO effects (run_id, task_id, lease_epoch, kind, idempotency_key, created_at) \
    SELECT r.id, r.task_id, r.lease_epoch, e.kind, 'task-' || r.task_id || '-' || e.kind, r.finished_at \
    FROM runs r JOIN tasks t ON t.id = r.task_id \
    CROSS JOIN LATERAL (SELECT CASE t.kind WHEN 'reply_to_mention' THEN 'post_reply' \
        WHEN 'triage_issue' THEN 'add_label' WHEN 'send_digest' THEN 'send_email' \
        ELSE 'update_calendar' END AS kind) e \
    WHERE r.task_id BETWEEN $1 AND $2 AND t.safety = 'unsafe' AND r.finished_at IS NOT NULL \
      AND r.error IS NULL AND COALESCE(btrim(r.output), '') NOT IN ('', 'no action needed', 'skip') \
    ORDER BY r.id";

/// The task page's subject: a flaky unsafe task with 50 runs over the last ~17 hours — every
/// failure cause, a lost lease whose effect ran, a silent run, and a final acted run (so its
/// effect ran under two epochs). `$1` its id, `$2` workers.
const TASK_50_SQL: &str = "WITH ins AS (INSERT INTO tasks (id, kind, source, safety, status, payload, result, \
        lease_epoch, attempts, max_attempts, created_at, updated_at) \
      VALUES ($1, 'reply_to_mention', 'notification', 'unsafe', 'completed', \
        '{\"n\": 50, \"from\": \"@ann\", \"text\": \"@ann: the flaky one\"}'::jsonb, 'replied to @ann in thread #50', \
        50, 50, 60, now() - interval '17 hours', now() - interval '10 minutes') RETURNING id), \
    f AS (SELECT e, CASE WHEN e = 50 THEN 'acted' ELSE (ARRAY['timeout', 'api_error', 'context_overflow', 'crash', \
        'other', 'empty', 'lost', 'silent', 'idle', 'api_error'])[1 + e % 10] END AS fate, \
        now() - interval '17 hours' + (e - 1) * interval '20 minutes' AS claimed_at \
      FROM generate_series(1, 50) e) \
    INSERT INTO runs (task_id, worker, lease_epoch, claimed_at, lease_expires_at, finished_at, output, error, \
                      error_detail, completion_rows) \
    SELECT (SELECT id FROM ins), 'worker-' || (1 + e % $2), e, claimed_at, claimed_at + interval '30 s', \
      CASE fate WHEN 'silent' THEN NULL WHEN 'lost' THEN claimed_at + interval '50 s' ELSE claimed_at + interval '12 s' END, \
      CASE fate WHEN 'acted' THEN 'replied to @ann in thread #50' WHEN 'lost' THEN 'replied to @ann in thread #50' \
        WHEN 'idle' THEN 'no action needed' WHEN 'empty' THEN '' END, \
      CASE WHEN fate IN ('timeout', 'api_error', 'context_overflow', 'crash', 'other') THEN fate END, \
      CASE WHEN fate IN ('timeout', 'api_error', 'context_overflow', 'crash', 'other') THEN 'attempt ' || e || ' failed' END, \
      CASE fate WHEN 'silent' THEN NULL WHEN 'lost' THEN 0 ELSE 1 END \
    FROM f ORDER BY e";

/// Queued tasks `[$1, $2]` (no runs yet), created over the last hour.
const QUEUED_SQL: &str = "INSERT INTO tasks (id, kind, source, safety, status, payload, created_at, updated_at) \
    SELECT g, 'triage_issue', 'notification', CASE WHEN g % 7 = 0 THEN 'unsafe' ELSE 'idempotent' END, 'queued', \
      jsonb_build_object('n', g), now() - interval '1 hour' + (g - $1) * interval '1 ms', \
      now() - interval '1 hour' + (g - $1) * interval '1 ms' \
    FROM generate_series($1::bigint, $2::bigint) g";

/// A loader pool: triggers (change log, foreign keys) off, commits not waited for, and memory
/// for index builds.
async fn loader_pool(url: &str, connections: u32) -> anyhow::Result<PgPool> {
    let options = sqlx::postgres::PgConnectOptions::from_str(url)?
        .application_name("lastword-bench-loader")
        .disable_statement_logging()
        .options([
            ("session_replication_role", "replica"),
            ("synchronous_commit", "off"),
            ("maintenance_work_mem", "512MB"),
            ("work_mem", "64MB"),
        ]);
    Ok(PgPoolOptions::new()
        .max_connections(connections)
        .acquire_timeout(std::time::Duration::from_secs(600))
        .connect_with(options)
        .await?)
}

pub async fn load(pool: &PgPool, url: &str, scale: f64, parallelism: usize) -> anyhow::Result<Loaded> {
    let tasks = ((2_000_000.0 * scale).round() as i64).max(100);
    let queued = ((50_000.0 * scale).round() as i64).max(20_000);
    let loader = loader_pool(url, parallelism.max(1) as u32).await?;
    sqlx::query(HASH_FN).execute(&loader).await?;

    let t = Instant::now();
    let indexes = drop_secondary_indexes(&loader).await?;
    println!("load: dropped {} secondary indexes (rebuilt after the load)", indexes.len());

    let history = (DAYS * 86_400 - 6 * 60) as f64;
    let start = chrono::Utc::now() - chrono::Duration::days(DAYS);
    let chunks: Vec<(i64, i64)> = (0..)
        .map(|i| 1 + i * CHUNK_TASKS)
        .take_while(|lo| *lo <= tasks)
        .map(|lo| (lo, (lo + CHUNK_TASKS - 1).min(tasks)))
        .collect();
    let total = chunks.len();
    let sql = chunk_sql();
    let done = std::sync::atomic::AtomicUsize::new(0);
    stream::iter(chunks.into_iter().map(Ok::<_, anyhow::Error>))
        .try_for_each_concurrent(parallelism.max(1), |(lo, hi)| {
            let (loader, sql, done) = (&loader, &sql, &done);
            async move {
                let mut tx = loader.begin().await?;
                sqlx::query(sql)
                    .bind(lo)
                    .bind(hi)
                    .bind(tasks)
                    .bind(start)
                    .bind(history)
                    .bind(WORKERS)
                    .execute(&mut *tx)
                    .await
                    .with_context(|| format!("tasks {lo}..{hi}"))?;
                sqlx::query(EFFECTS_SQL).bind(lo).bind(hi).execute(&mut *tx).await?;
                tx.commit().await?;
                let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                if n % 5 == 0 || n == total {
                    println!("load: chunk {n}/{total} ({:.0} s)", t.elapsed().as_secs_f64());
                }
                Ok(())
            }
        })
        .await?;

    let task_50 = tasks + 1;
    sqlx::query(TASK_50_SQL).bind(task_50).bind(WORKERS).execute(&loader).await.context("the 50-run task")?;
    effects_for(&loader, task_50, task_50).await?;
    sqlx::query(QUEUED_SQL).bind(task_50 + 1).bind(task_50 + queued).execute(&loader).await?;
    for table in ["tasks", "runs", "effects"] {
        let sql = format!(
            "SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT COALESCE(max(id), 1) FROM {table}))"
        );
        sqlx::query(&sql).execute(&loader).await?;
    }
    println!("load: rows written in {:.0} s", t.elapsed().as_secs_f64());

    rebuild_indexes(&loader, &indexes, parallelism).await?;
    println!("load: indexes rebuilt ({:.0} s)", t.elapsed().as_secs_f64());
    sqlx::query("DROP FUNCTION bench_u(bigint, bigint)").execute(&loader).await?;
    // Outside a transaction (simple protocol): what autovacuum would have done by now.
    sqlx::raw_sql("VACUUM (ANALYZE) tasks, runs, effects, change_log").execute(&loader).await?;
    println!("load: vacuumed and analyzed ({:.0} s)", t.elapsed().as_secs_f64());
    loader.close().await;

    let (rows_runs, rows_tasks, rows_effects): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM tasks), (SELECT count(*) FROM effects)",
    )
    .fetch_one(pool)
    .await?;
    let probe_run: i64 = sqlx::query_scalar("SELECT max(id) FROM runs WHERE task_id <> $1")
        .bind(task_50)
        .fetch_one(pool)
        .await?;
    let double_executions: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT task_id FROM effects GROUP BY task_id HAVING count(DISTINCT lease_epoch) >= 2) d",
    )
    .fetch_one(pool)
    .await?;
    let states = state_mix(pool).await?;
    Ok(Loaded {
        scale,
        rows_runs,
        rows_tasks,
        rows_effects,
        task_50,
        probe_run,
        queued_pool: queued,
        double_executions,
        states,
        load_secs: 0.0,
    })
}

async fn effects_for(loader: &PgPool, lo: i64, hi: i64) -> anyhow::Result<()> {
    sqlx::query(EFFECTS_SQL).bind(lo).bind(hi).execute(loader).await?;
    Ok(())
}

/// Runs per state, as the dashboard decides it (the store's state twin, default tokens).
async fn state_mix(pool: &PgPool) -> anyhow::Result<Vec<(String, i64)>> {
    let sql = format!(
        "SELECT {} AS state, count(*) FROM runs r GROUP BY 1 ORDER BY 2 DESC",
        lastword_store::explain::state_sql()
    );
    let rows: Vec<(String, i64)> = sqlx::query_as(&sql)
        .bind(chrono::Utc::now())
        .bind("no action needed")
        .bind("skip")
        .fetch_all(pool)
        .await?;
    Ok(rows)
}

/// Index definitions on the contract tables that no constraint owns, dropped for the load.
async fn drop_secondary_indexes(loader: &PgPool) -> anyhow::Result<Vec<String>> {
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i \
         JOIN pg_class c ON c.oid = i.indrelid \
         WHERE c.relnamespace = 'public'::regnamespace AND c.relname IN ('tasks', 'runs', 'effects') \
           AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid) \
         ORDER BY 1",
    )
    .fetch_all(loader)
    .await?;
    for (name, _) in &rows {
        loader.execute(format!("DROP INDEX {name}").as_str()).await?;
    }
    Ok(rows.into_iter().map(|(_, def)| def).collect())
}

async fn rebuild_indexes(loader: &PgPool, defs: &[String], parallelism: usize) -> anyhow::Result<()> {
    stream::iter(defs.iter().map(Ok::<_, anyhow::Error>))
        .try_for_each_concurrent(parallelism.max(1), |def| async move {
            let t = Instant::now();
            loader.execute(def.as_str()).await.with_context(|| def.clone())?;
            println!("load:   {:.1} s  {def}", t.elapsed().as_secs_f64());
            Ok(())
        })
        .await
}

/// Records what was loaded as the database's comment, so `--reuse-db` can measure it again.
pub async fn describe(pool: &PgPool, db_name: &str, loaded: &Loaded) -> anyhow::Result<()> {
    let text = serde_json::to_string(loaded)?.replace('\'', "''");
    pool.execute(format!("COMMENT ON DATABASE \"{db_name}\" IS '{text}'").as_str()).await?;
    Ok(())
}

/// What [`describe`] recorded.
pub async fn described(pool: &PgPool, db_name: &str) -> anyhow::Result<Loaded> {
    let text: Option<String> = sqlx::query_scalar(
        "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1",
    )
    .bind(db_name)
    .fetch_one(pool)
    .await?;
    let text = text
        .ok_or_else(|| anyhow::anyhow!("{db_name} has no description: was it loaded by lastword-bench?"))?;
    let mut loaded: Loaded = serde_json::from_str(&text)?;
    // Earlier runs' fleets and write loops added rows: report what is there now.
    (loaded.rows_runs, loaded.rows_tasks, loaded.rows_effects) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM tasks), (SELECT count(*) FROM effects)",
    )
    .fetch_one(pool)
    .await?;
    Ok(loaded)
}
