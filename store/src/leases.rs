//! Lease health (issue 13): run length against the lease, reclaim latency and why each
//! re-claim happened, per task kind; re-claim loops; clocks stamped ahead of the database's;
//! the heartbeat age of running work. The rules and shapes are `lastword_core::leases`.
//!
//! Why this shape:
//! - **One SQL text for both databases.** Percentiles are nearest rank over `ROW_NUMBER()`
//!   (`rn·100 ≥ pct·n`, the rule of `lastword_core::leases::nearest_rank`), which PostgreSQL
//!   and SQLite both have; only how a time becomes milliseconds is the dialect's.
//! - **Re-claims by the one rule.** A run's re-claim reason is `RECLAIM_REASON_SQL`, the text
//!   the run list selects, so the counts here and the list's `reclaim=` filter cannot disagree.
//! - **Cost.** A window of claims is an index range of `runs_claimed_idx`; each run in it costs
//!   a few index probes (its predecessor, an operator re-queue, its worker's later claims), so
//!   the window is at most `MAX_WINDOW_DAYS` and answers are shared: [`LeaseReports`] computes a
//!   question at most once per [`REPORT_TTL`] for every viewer, server function and script, in
//!   the background once it has a first answer to serve meanwhile, and the answer says when it
//!   was computed.

use crate::queries::{bind_values, Dialect, SqlBuf, Value, RECLAIM_REASON_SQL};
use crate::rollups::dialect;
use crate::{Db, StoreError};
use chrono::{DateTime, Duration, Utc};
use lastword_core::leases::{
    suggestion, HeartbeatHealth, KindLeaseStats, LeaseFit, LeaseReport, LeaseWindow, LoopTask, SkewedWorker,
    WorkerLeaseHealth, HEARTBEATS_LISTED, LEASE_MULTIPLES, SKEW_TOLERANCE_MS,
};
use lastword_core::Tokens;
use moka::future::Cache;
use std::sync::Arc;

/// How long one computed report is shared. Lease tuning reads trends over hours; a
/// half-minute-old answer, labelled as such, is worth not re-reading a day of runs per viewer.
pub const REPORT_TTL: std::time::Duration = std::time::Duration::from_secs(30);
/// Reports computed at once per server, at most; one that cannot start within
/// [`crate::shared_reads::HEAVY_WAIT`] is refused with a 503 that says so.
const REPORTS_AT_ONCE: usize = 2;
/// Clock skew is looked for among the claims of the window's last hour: a skewed worker that
/// is still working stamps its newest claims ahead, and an hour of claims is a short index range.
const SKEW_LOOKBACK_MINUTES: i64 = 60;

/// `ms(a) − ms(b)` in whole milliseconds.
fn ms_between(d: &Dialect, a: &str, b: &str) -> String {
    format!("CAST(round({} - {}) AS BIGINT)", (d.epoch_ms)(a), (d.epoch_ms)(b))
}

/// ` AND <column> = $n` narrowing to `kind`, with its argument appended to `buf`; empty for
/// every kind.
fn kind_condition(buf: &mut SqlBuf, column: &str, kind: Option<&str>) -> String {
    match kind {
        Some(k) => format!(" AND {column} = {}", buf.arg(Value::Text(k.to_string()))),
        None => String::new(),
    }
}

/// ` AND r.task_id IN (tasks of kind $n)` for statements over `runs r` alone; empty for every
/// kind.
fn run_of_kind_condition(buf: &mut SqlBuf, kind: Option<&str>) -> String {
    match kind {
        Some(k) => format!(
            " AND r.task_id IN (SELECT t.id FROM tasks t WHERE t.kind = {})",
            buf.arg(Value::Text(k.to_string()))
        ),
        None => String::new(),
    }
}

/// The figures of one kind, as the statement returns them.
#[derive(sqlx::FromRow)]
struct KindRow {
    kind: String,
    runs: i64,
    finished: i64,
    lease_ms: Option<i64>,
    d50: Option<i64>,
    d95: Option<i64>,
    d99: Option<i64>,
    dmax: Option<i64>,
    outlived: i64,
    outlived_no_beat: i64,
    lost: i64,
    doubled: i64,
    fit_a: i64,
    fit_b: i64,
    fit_c: i64,
    slow: i64,
    stalled: i64,
    dead: i64,
    operator: i64,
    r50: Option<i64>,
    r95: Option<i64>,
}

/// The PostgreSQL settings [`kinds_sql`] runs with (`SET LOCAL`, in its own transaction; the
/// benchmark's EXPLAIN applies the same):
/// - `work_mem`: the percentiles sort every duration and lease of the window. A day of 10 M
///   runs (670 000 values) spills the default 4 MB to disk; in memory it sorts in about half
///   the time. Two reports at most run at once (`REPORTS_AT_ONCE`).
/// - `enable_seqscan = off`: the window is a range of `runs_claimed_idx`, and runs lie in the
///   heap in claim order (appended as claimed), so the range's rows fill a few thousand
///   adjacent pages. PostgreSQL's estimate of a bitmap scan ignores that order, and its
///   estimate of a plain index scan discounts it (a two-column index), so both come out as
///   dear as reading the whole table, and at 10 M runs the planner chose a parallel sequential
///   scan of all 180 000 pages (bench/explain.txt of 701b271). Measured on a 10 M-run data set
///   (`lastword-bench --reuse-db … --explain-only`): the day's runs read in 540–1 280 ms that
///   way, in 50–90 ms through the index.
pub(crate) const KINDS_SETTINGS: &[(&str, &str)] = &[("work_mem", "64MB"), ("enable_seqscan", "off")];

/// The statement of the per-kind figures of the runs claimed in `[since, until)`, of `kind`
/// only when given (also EXPLAINed by the benchmark: `crate::explain`).
pub(crate) fn kinds_sql(
    d: &Dialect,
    kind: Option<&str>,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
) -> SqlBuf {
    let mut buf = SqlBuf::default();
    let since = buf.arg(Value::Time(since));
    let until = buf.arg(Value::Time(until));
    let kind_cond = kind_condition(&mut buf, "t.kind", kind);
    let duration = ms_between(d, "r.finished_at", "r.claimed_at");
    let lease = ms_between(d, "r.lease_expires_at", "COALESCE(r.heartbeat_at, r.claimed_at)");
    let lapse = ms_between(d, "w0.claimed_at", "p.lease_expires_at");
    let outlived = "r.finished_at IS NOT NULL AND r.finished_at > r.lease_expires_at";
    let pct = |metric: i64, p: i64, name: &str| {
        format!("MIN(CASE WHEN metric = {metric} AND rn * 100 >= n * {p} THEN v END) AS {name}")
    };
    let fits: Vec<String> = LEASE_MULTIPLES
        .iter()
        .zip(["fit_a", "fit_b", "fit_c"])
        .map(|(m, name)| {
            format!("SUM(CASE WHEN outlived = 1 AND lost = 1 AND duration_ms <= {m} * lease_ms THEN 1 ELSE 0 END) AS {name}")
        })
        .collect();
    let reason_count =
        |reason: &str, name: &str| format!("SUM(CASE WHEN reason = '{reason}' THEN 1 ELSE 0 END) AS {name}");
    buf.push(&format!(
        // `w0` is materialized so each run's re-claim reason is decided once; only the runs it
        // names a lapse re-claim (a few percent) pay for the probe of the lapse's latency.
        // The join hashes every task (2 M at 10 M runs: 0.6–1.1 s of the report). Tried and
        // not kept: joining only the tasks between the window's least and greatest task id
        // (0.6 → 0.1 s at 10 M runs). The bounds are known only when the statement runs, so
        // the planner guesses a narrow range and probes `runs` once per task of it; one old
        // task re-queued today widens the range to every task, and that plan is slower than
        // the hash. Worth another try with `enable_nestloop = off` beside it (the hash then
        // holds only the range, however wide), checked on the 10 M data set both ways.
        "WITH w0 AS MATERIALIZED (\
           SELECT t.kind AS kind, r.task_id AS task_id, r.lease_epoch AS lease_epoch, r.claimed_at AS claimed_at, \
             CASE WHEN r.finished_at IS NOT NULL THEN {duration} END AS duration_ms, \
             {lease} AS lease_ms, \
             CASE WHEN {outlived} THEN 1 ELSE 0 END AS outlived, \
             CASE WHEN r.heartbeat_at IS NULL THEN 1 ELSE 0 END AS no_beat, \
             CASE WHEN r.completion_rows = 0 THEN 1 ELSE 0 END AS lost, \
             CASE WHEN {outlived} \
                   AND EXISTS (SELECT 1 FROM effects e WHERE e.task_id = r.task_id AND e.lease_epoch = r.lease_epoch) \
                   AND EXISTS (SELECT 1 FROM effects e WHERE e.task_id = r.task_id AND e.lease_epoch <> r.lease_epoch) \
                  THEN 1 ELSE 0 END AS doubled, \
             {RECLAIM_REASON_SQL} AS reason \
           FROM runs r JOIN tasks t ON t.id = r.task_id \
           WHERE r.claimed_at >= {since} AND r.claimed_at < {until}{kind_cond}), \
         w AS (\
           SELECT w0.*, CASE WHEN w0.reason IN ('slow_worker', 'stalled_worker', 'dead_worker') THEN \
             (SELECT {lapse} FROM runs p WHERE p.task_id = w0.task_id AND p.lease_epoch < w0.lease_epoch \
               ORDER BY p.lease_epoch DESC LIMIT 1) END AS lapse_ms \
           FROM w0), \
         m AS (\
           SELECT kind, 0 AS metric, duration_ms AS v FROM w WHERE duration_ms IS NOT NULL \
           UNION ALL SELECT kind, 1, lease_ms FROM w WHERE lease_ms IS NOT NULL \
           UNION ALL SELECT kind, 2, CASE WHEN lapse_ms < 0 THEN 0 ELSE lapse_ms END FROM w \
             WHERE reason IN ('slow_worker', 'stalled_worker', 'dead_worker') AND lapse_ms IS NOT NULL), \
         ranked AS (\
           SELECT kind, metric, v, ROW_NUMBER() OVER (PARTITION BY kind, metric ORDER BY v) AS rn, \
                  COUNT(*) OVER (PARTITION BY kind, metric) AS n FROM m), \
         q AS (\
           SELECT kind, {d50}, {d95}, {d99}, MAX(CASE WHEN metric = 0 THEN v END) AS dmax, {l50}, {r50}, {r95} \
           FROM ranked GROUP BY kind), \
         c AS (\
           SELECT kind, COUNT(*) AS runs, SUM(CASE WHEN duration_ms IS NOT NULL THEN 1 ELSE 0 END) AS finished, \
             SUM(outlived) AS outlived, SUM(outlived * no_beat) AS outlived_no_beat, SUM(outlived * lost) AS lost, \
             SUM(doubled) AS doubled, {fits}, \
             {slow}, {stalled}, {dead}, {operator} \
           FROM w GROUP BY kind) \
         SELECT c.kind, c.runs, c.finished, q.lease_ms, q.d50, q.d95, q.d99, q.dmax, c.outlived, c.outlived_no_beat, \
                c.lost, c.doubled, c.fit_a, c.fit_b, c.fit_c, c.slow, c.stalled, c.dead, c.operator, q.r50, q.r95 \
         FROM c LEFT JOIN q ON q.kind = c.kind ORDER BY c.kind",
        d50 = pct(0, 50, "d50"),
        d95 = pct(0, 95, "d95"),
        d99 = pct(0, 99, "d99"),
        l50 = pct(1, 50, "lease_ms"),
        r50 = pct(2, 50, "r50"),
        r95 = pct(2, 95, "r95"),
        fits = fits.join(", "),
        slow = reason_count("slow_worker", "slow"),
        stalled = reason_count("stalled_worker", "stalled"),
        dead = reason_count("dead_worker", "dead"),
        operator = reason_count("operator_requeue", "operator"),
    ));
    buf
}

/// Per-kind figures of the runs claimed in `[since, until)`, of `kind` only when given.
async fn kinds(
    db: &Db,
    kind: Option<&str>,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    window: &str,
) -> Result<Vec<KindLeaseStats>, StoreError> {
    let buf = kinds_sql(dialect(db), kind, since, until);
    let rows: Vec<KindRow> = match db {
        Db::Postgres(p) => {
            let mut tx = p.begin().await?;
            crate::connect::set_local(&mut tx, KINDS_SETTINGS).await?;
            let rows = bind_values!(sqlx::query_as(&buf.sql), &buf.args).fetch_all(&mut *tx).await?;
            tx.commit().await?;
            rows
        }
        Db::Sqlite(p) => bind_values!(sqlx::query_as(&buf.sql), &buf.args).fetch_all(p).await?,
    };
    Ok(rows
        .into_iter()
        .map(|r| {
            let mut k = KindLeaseStats {
                kind: r.kind,
                runs: r.runs,
                finished: r.finished,
                lease_ms: r.lease_ms,
                duration_p50_ms: r.d50,
                duration_p95_ms: r.d95,
                duration_p99_ms: r.d99,
                duration_max_ms: r.dmax,
                outlived_lease: r.outlived,
                outlived_without_heartbeat: r.outlived_no_beat,
                lost_lease: r.lost,
                double_executions: r.doubled,
                lost_lease_within: LEASE_MULTIPLES
                    .iter()
                    .zip([r.fit_a, r.fit_b, r.fit_c])
                    .map(|(m, n)| LeaseFit { multiple: *m, lost_leases: n })
                    .collect(),
                reclaims: r.slow + r.stalled + r.dead,
                reclaims_slow_worker: r.slow,
                reclaims_stalled_worker: r.stalled,
                reclaims_dead_worker: r.dead,
                reclaims_operator_requeue: r.operator,
                reclaim_latency_p50_ms: r.r50,
                reclaim_latency_p95_ms: r.r95,
                suggestion: None,
            };
            k.suggestion = suggestion(&k, window);
            k
        })
        .collect())
}

/// Workers whose newest claims (the window's last hour) carry a claim, heartbeat or finish
/// stamped more than [`SKEW_TOLERANCE_MS`] past the database's clock.
async fn skewed_workers(
    db: &Db,
    kind: Option<&str>,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<Vec<SkewedWorker>, StoreError> {
    let d = dialect(db);
    let mut buf = SqlBuf::default();
    let from = buf.arg(Value::Time(since.max(until - Duration::minutes(SKEW_LOOKBACK_MINUTES))));
    let to = buf.arg(Value::Time(until));
    let tolerance = buf.arg(Value::I64(SKEW_TOLERANCE_MS));
    let kind_cond = run_of_kind_condition(&mut buf, kind);
    let ahead = format!(
        "({} - {})",
        (d.epoch_ms)("COALESCE(r.finished_at, r.heartbeat_at, r.claimed_at)"),
        (d.epoch_ms)(d.db_now)
    );
    buf.push(&format!(
        "SELECT r.worker, COUNT(*), CAST(round(MAX({ahead})) AS BIGINT) FROM runs r \
         WHERE r.claimed_at >= {from} AND r.claimed_at < {to}{kind_cond} AND {ahead} > {tolerance} \
         GROUP BY r.worker ORDER BY 3 DESC, r.worker"
    ));
    let rows: Vec<(String, i64, i64)> = db.fetch_all(&buf).await?;
    Ok(rows.into_iter().map(|(worker, runs, ahead_ms)| SkewedWorker { worker, runs, ahead_ms }).collect())
}

/// Workers whose runs claimed in `[since, until)` lost their lease: finished late (paused),
/// or unfinished past their expiry at `now` while the worker claimed again (stalled) or not
/// (dead). Two index ranges: lost-lease runs (`runs_lost_lease_idx`) and lapsed unfinished runs
/// (`runs_unfinished_expiry_idx`, whose expiry lies between `since` and `now`).
async fn worker_health(
    db: &Db,
    kind: Option<&str>,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Vec<WorkerLeaseHealth>, StoreError> {
    let mut buf = SqlBuf::default();
    let since = buf.arg(Value::Time(since));
    let until = buf.arg(Value::Time(until));
    let now = buf.arg(Value::Time(now));
    let kind_cond = run_of_kind_condition(&mut buf, kind);
    let seen_again =
        "EXISTS (SELECT 1 FROM runs w WHERE w.worker = r.worker AND w.claimed_at > r.lease_expires_at)";
    buf.push(&format!(
        "SELECT worker, SUM(paused), SUM(stalled), SUM(dead) FROM (\
           SELECT r.worker AS worker, 1 AS paused, 0 AS stalled, 0 AS dead FROM runs r \
           WHERE r.completion_rows = 0 AND r.claimed_at >= {since} AND r.claimed_at < {until}{kind_cond} \
           UNION ALL \
           SELECT r.worker, 0, CASE WHEN {seen_again} THEN 1 ELSE 0 END, CASE WHEN {seen_again} THEN 0 ELSE 1 END \
           FROM runs r WHERE r.finished_at IS NULL AND r.lease_expires_at <= {now} AND r.lease_expires_at >= {since} \
             AND r.claimed_at >= {since} AND r.claimed_at < {until}{kind_cond}) x \
         GROUP BY worker ORDER BY 4 DESC, 3 DESC, 2 DESC, worker"
    ));
    let rows: Vec<(String, i64, i64, i64)> = db.fetch_all(&buf).await?;
    Ok(rows
        .into_iter()
        .map(|(worker, paused, stalled, dead)| WorkerLeaseHealth { worker, paused, stalled, dead })
        .collect())
}

/// Running runs (lease not yet expired at `now`) with their heartbeat age, nearest to lapsing
/// first: an index range of `runs_unfinished_expiry_idx`.
async fn heartbeats(
    db: &Db,
    kind: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Vec<HeartbeatHealth>, StoreError> {
    let d = dialect(db);
    let mut buf = SqlBuf::default();
    let now_arg = buf.arg(Value::Time(now));
    let limit = buf.arg(Value::I64(HEARTBEATS_LISTED));
    let kind_cond = kind_condition(&mut buf, "t.kind", kind);
    let heard = "COALESCE(r.heartbeat_at, r.claimed_at)";
    buf.push(&format!(
        "SELECT r.id, r.task_id, t.kind, r.worker, {age}, {left}, {lease} \
         FROM runs r JOIN tasks t ON t.id = r.task_id \
         WHERE r.finished_at IS NULL AND r.lease_expires_at > {now_arg}{kind_cond} \
         ORDER BY r.lease_expires_at, r.id LIMIT {limit}",
        age = ms_between(d, &now_arg, heard),
        left = ms_between(d, "r.lease_expires_at", &now_arg),
        lease = ms_between(d, "r.lease_expires_at", heard),
    ));
    let rows: Vec<(i64, i64, String, String, i64, i64, i64)> = db.fetch_all(&buf).await?;
    Ok(rows
        .into_iter()
        .map(|(run_id, task_id, kind, worker, heartbeat_age_ms, lease_left_ms, lease_ms)| HeartbeatHealth {
            run_id,
            task_id,
            kind,
            worker,
            // A heartbeat stamped after `now` (a worker's clock ahead: see the skew list) is
            // not a negative age.
            heartbeat_age_ms: heartbeat_age_ms.max(0),
            lease_left_ms,
            lease_ms,
        })
        .collect())
}

/// The whole report for `kind` (every kind when `None`) over `window`, computed now.
pub async fn report(
    db: &Db,
    tokens: &Tokens,
    kind: Option<&str>,
    window: &LeaseWindow,
    now: DateTime<Utc>,
) -> Result<LeaseReport, StoreError> {
    let mut report = figures(db, tokens, kind, window, now).await?;
    report.heartbeats = heartbeats(db, kind, now).await?;
    Ok(report)
}

/// Everything but the heartbeats: the part worth sharing for [`REPORT_TTL`].
async fn figures(
    db: &Db,
    tokens: &Tokens,
    kind: Option<&str>,
    window: &LeaseWindow,
    now: DateTime<Utc>,
) -> Result<LeaseReport, StoreError> {
    let (since, until) = window.bounds(now);
    let kinds = kinds(db, kind, since, until, &window.spoken()).await?;
    let skewed_workers = skewed_workers(db, kind, since, until).await?;
    let workers = worker_health(db, kind, since, until, now).await?;
    let loops = crate::alerts::loops(db, tokens, now)
        .await?
        .into_iter()
        .filter(|(_, k, ..)| kind.is_none_or(|want| want == k))
        .map(|(task_id, kind, lease_epoch, _, streak_since)| LoopTask {
            task_id,
            kind,
            lease_epoch,
            streak_since,
        })
        .collect();
    Ok(LeaseReport {
        since: Some(since),
        until: Some(until),
        computed_at: Some(now),
        kinds,
        loops,
        loop_claims: lastword_core::attention::LOOP_CLAIMS as i64,
        skewed_workers,
        workers,
        heartbeats: Vec::new(),
    })
}

/// What a report answers: a kind (or every kind) over a window.
type Question = (Option<String>, LeaseWindow);

/// Reports shared between everyone who asks the same question (see the module header). An
/// answer younger than [`REPORT_TTL`] is served as it is; an older one (up to
/// [`STALE_AFTER`]) is served too while one background task computes its successor, so after
/// the first answer nobody waits on a recomputation — the overview's panel included — and
/// `computed_at` says how old the figures are. The heartbeats of running work, which age by the
/// second, are shared for [`HEARTBEATS_TTL`]. One per server process.
#[derive(Clone)]
pub struct LeaseReports {
    fresh: Cache<Question, Arc<LeaseReport>>,
    last: Cache<Question, Arc<LeaseReport>>,
    refreshing: Arc<std::sync::Mutex<std::collections::HashSet<Question>>>,
    heartbeats: Cache<Option<String>, Arc<Vec<HeartbeatHealth>>>,
    turns: Arc<tokio::sync::Semaphore>,
}

/// How long the heartbeat list is shared: an index range of at most `HEARTBEATS_LISTED` rows.
pub const HEARTBEATS_TTL: std::time::Duration = std::time::Duration::from_secs(2);
/// An answer older than this is not served while its successor is computed: the asker waits.
pub const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(600);

impl Default for LeaseReports {
    fn default() -> Self {
        Self::with_ttl(REPORT_TTL)
    }
}

impl LeaseReports {
    pub fn with_ttl(ttl: std::time::Duration) -> Self {
        LeaseReports {
            fresh: Cache::builder().max_capacity(64).time_to_live(ttl).build(),
            last: Cache::builder().max_capacity(64).time_to_live(STALE_AFTER.max(ttl)).build(),
            refreshing: Arc::default(),
            heartbeats: Cache::builder().max_capacity(64).time_to_live(HEARTBEATS_TTL.min(ttl)).build(),
            turns: Arc::new(tokio::sync::Semaphore::new(REPORTS_AT_ONCE)),
        }
    }

    /// The report for `kind` over `window` (see the type's docs); `now` is the moment a
    /// computation made for this call reads as of.
    pub async fn get(
        &self,
        db: &Db,
        tokens: &Tokens,
        kind: Option<&str>,
        window: LeaseWindow,
        now: DateTime<Utc>,
    ) -> Result<LeaseReport, StoreError> {
        let question: Question = (kind.map(str::to_string), window);
        let figures = match self.fresh.get(&question).await {
            Some(fresh) => fresh,
            None => match self.last.get(&question).await {
                Some(stale) => {
                    self.refresh_in_background(db.clone(), tokens.clone(), question.clone());
                    stale
                }
                None => self.compute(db, tokens, &question, now).await?,
            },
        };
        let beats = self
            .heartbeats
            // Heartbeats age by the millisecond: read as of the clock, not the asker's `now`
            // (truncated to the second so that askers share figures), which would show a
            // heartbeat of this second in the future and a lease lapsed since as still held.
            .try_get_with(kind.map(str::to_string), async {
                heartbeats(db, kind, chrono::Utc::now()).await.map(Arc::new)
            })
            .await
            .map_err(StoreError::Shared)?;
        let mut answer = LeaseReport::clone(&figures);
        answer.heartbeats = Vec::clone(&beats);
        Ok(answer)
    }

    /// The figures for `kind` over `window` if any answer is at hand (fresh, or stale while
    /// its successor is computed), without the heartbeats; else `None`, with the first
    /// computation started in the background. For the overview's panel, which must never wait.
    pub async fn at_hand(
        &self,
        db: &Db,
        tokens: &Tokens,
        kind: Option<&str>,
        window: LeaseWindow,
    ) -> Option<LeaseReport> {
        let question: Question = (kind.map(str::to_string), window);
        if let Some(fresh) = self.fresh.get(&question).await {
            return Some(LeaseReport::clone(&fresh));
        }
        self.refresh_in_background(db.clone(), tokens.clone(), question.clone());
        self.last.get(&question).await.map(|stale| LeaseReport::clone(&stale))
    }

    /// One computation per question at a time (concurrent askers share it), in its turn among
    /// [`REPORTS_AT_ONCE`]; kept as the question's last answer.
    async fn compute(
        &self,
        db: &Db,
        tokens: &Tokens,
        question: &Question,
        now: DateTime<Utc>,
    ) -> Result<Arc<LeaseReport>, StoreError> {
        let (kind, window) = question;
        let report = self
            .fresh
            .try_get_with(question.clone(), async {
                crate::shared_reads::bounded(&self.turns, crate::shared_reads::HEAVY_WAIT, async {
                    figures(db, tokens, kind.as_deref(), window, now).await.map(Arc::new)
                })
                .await
            })
            .await
            .map_err(StoreError::Shared)?;
        self.last.insert(question.clone(), report.clone()).await;
        Ok(report)
    }

    /// Computes `question`'s successor in a task of its own, unless one is already at it.
    fn refresh_in_background(&self, db: Db, tokens: Tokens, question: Question) {
        {
            let mut refreshing = self.refreshing.lock().unwrap_or_else(|e| e.into_inner());
            if !refreshing.insert(question.clone()) {
                return;
            }
        }
        let this = self.clone();
        tokio::spawn(async move {
            if let Err(e) = this.compute(&db, &tokens, &question, lastword_core::read_now()).await {
                tracing::warn!(error = %e, "lease figures not refreshed; the previous ones stay");
            }
            this.refreshing.lock().unwrap_or_else(|e| e.into_inner()).remove(&question);
        });
    }
}

/// A finished run, as the lease histograms of `/metrics` observe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinishedRun {
    pub run_id: i64,
    /// Finish minus claim.
    pub duration_ms: i64,
    /// The lease it held: expiry minus its last heartbeat (or its claim).
    pub lease_ms: i64,
    /// Finish minus its last heartbeat (or its claim): how long it went unheard before it ended.
    pub unheard_ms: i64,
    /// From the earlier run's lease expiry to this claim, when this run re-claimed its task
    /// after a lapsed lease (slow, stalled or dead worker).
    pub reclaim_latency_ms: Option<i64>,
}

/// Changes read per call of [`finished_after`].
const OBSERVE_BATCH: i64 = 20_000;
/// Runs looked up per statement.
const OBSERVE_CHUNK: usize = 1_000;

/// The finished runs among the runs changed after change `cursor`, and the cursor to pass
/// next time. Only changes logged at least `lag_ms` ago by the database's clock are taken, and
/// none after the first younger one: a change id can become visible after a higher one
/// (docs/live.md), and a short lag lets it (a transaction that commits later than that after
/// it began may go unobserved). A run finished earlier and changed again (a trace id set
/// late) is listed again: the caller keeps which runs it observed.
pub async fn finished_after(
    db: &Db,
    cursor: i64,
    lag_ms: i64,
) -> Result<(Vec<FinishedRun>, i64), StoreError> {
    let d = dialect(db);
    let sql = format!(
        "SELECT id, row_id, CASE WHEN {created} <= {now} - $2 THEN 1 ELSE 0 END FROM change_log \
         WHERE id > $1 AND table_name = 'runs' ORDER BY id LIMIT $3",
        created = (d.epoch_ms)("created_at"),
        now = (d.epoch_ms)(d.db_now),
    );
    let changes: Vec<(i64, i64, i32)> = on_db!(db, p => sqlx::query_as(&sql)
        .bind(cursor)
        .bind(lag_ms)
        .bind(OBSERVE_BATCH)
        .fetch_all(p)
        .await?);
    let settled: Vec<(i64, i64)> =
        changes.into_iter().take_while(|(_, _, old)| *old == 1).map(|(id, run, _)| (id, run)).collect();
    let next = settled.last().map_or(cursor, |(id, _)| *id);
    let mut ids: Vec<i64> = settled.into_iter().map(|(_, run)| run).collect();
    ids.sort_unstable();
    ids.dedup();
    let lapse = ms_between(d, "r.claimed_at", "p.lease_expires_at");
    let sql = format!(
        "SELECT r.id, {duration}, {lease}, {unheard}, \
           CASE WHEN {RECLAIM_REASON_SQL} IN ('slow_worker', 'stalled_worker', 'dead_worker') THEN \
             (SELECT {lapse} FROM runs p WHERE p.task_id = r.task_id AND p.lease_epoch < r.lease_epoch \
              ORDER BY p.lease_epoch DESC LIMIT 1) END \
         FROM runs r WHERE r.id IN {list} AND r.finished_at IS NOT NULL ORDER BY r.id",
        duration = ms_between(d, "r.finished_at", "r.claimed_at"),
        lease = ms_between(d, "r.lease_expires_at", "COALESCE(r.heartbeat_at, r.claimed_at)"),
        unheard = ms_between(d, "r.finished_at", "COALESCE(r.heartbeat_at, r.claimed_at)"),
        list = (d.id_list)("$1"),
    );
    let mut out = Vec::new();
    for chunk in ids.chunks(OBSERVE_CHUNK) {
        let list = serde_json::to_string(chunk).unwrap_or_else(|_| "[]".into());
        let rows: Vec<(i64, i64, i64, i64, Option<i64>)> =
            on_db!(db, p => sqlx::query_as(&sql).bind(&list).fetch_all(p).await?);
        out.extend(rows.into_iter().map(|(run_id, duration_ms, lease_ms, unheard_ms, latency)| {
            FinishedRun {
                run_id,
                duration_ms,
                lease_ms,
                unheard_ms,
                reclaim_latency_ms: latency.map(|l| l.max(0)),
            }
        }));
    }
    Ok((out, next))
}
