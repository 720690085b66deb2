//! The four moves of the contract — claim, heartbeat, record an effect, finish — each one
//! transaction, with the SQL from [`crate::sql`]. The two backends differ only in how a write
//! transaction begins and in the claim's candidate query; [`in_tx!`] keeps both arms together.

use crate::clock::Clock;
use crate::error::{Result, RunnerError};
use crate::outcome::{EffectRecorded, Finish, Heartbeat, Lease, Outcome};
use crate::{sql, RunnerConfig};
use chrono::{DateTime, Utc};
use lastword_core::{Safety, Source, TaskStatus};
use lastword_store::{Backend, Db, NewTask};
use sqlx::types::Json;
use std::sync::Arc;

/// Runs `$body` inside a write transaction on whichever backend `$db` is, with `$tx` bound to
/// the transaction and (first form) `$d` to the backend's dialect ([`PgDialect`] or
/// [`SqliteDialect`]). The body is compiled once per backend; it must commit, and an early
/// return rolls back.
macro_rules! in_tx {
    ($db:expr, |$tx:ident, $d:ident| $body:block) => {
        match $db {
            Db::Postgres(pool) => {
                let mut $tx = pool.begin_with(Backend::Postgres.begin_write()).await?;
                let $d = PgDialect;
                $body
            }
            Db::Sqlite(pool) => {
                let mut $tx = pool.begin_with(Backend::Sqlite.begin_write()).await?;
                let $d = SqliteDialect;
                $body
            }
        }
    };
    ($db:expr, |$tx:ident| $body:block) => {
        in_tx!($db, |$tx, _dialect| $body)
    };
}

/// The claim's candidate query and how its kind filter is bound, per backend.
struct PgDialect;
struct SqliteDialect;

impl PgDialect {
    fn claim_candidate(&self) -> &'static str {
        sql::postgres::CLAIM_CANDIDATE
    }
    fn kinds(&self, kinds: Option<&[String]>) -> Option<Vec<String>> {
        kinds.map(<[String]>::to_vec)
    }
}

impl SqliteDialect {
    fn claim_candidate(&self) -> &'static str {
        sql::sqlite::CLAIM_CANDIDATE
    }
    fn kinds(&self, kinds: Option<&[String]>) -> Option<String> {
        kinds.map(|k| serde_json::Value::from(k.to_vec()).to_string())
    }
}

#[derive(sqlx::FromRow)]
struct ClaimRow {
    lease_epoch: i64,
    kind: String,
    source: String,
    safety: String,
    payload: Json<serde_json::Value>,
    attempts: i32,
    max_attempts: i32,
}

/// Producer side: inserts a `queued` task; returns its id.
pub async fn enqueue(db: &Db, task: &NewTask, now: DateTime<Utc>) -> Result<i64> {
    macro_rules! insert {
        ($pool:expr) => {
            sqlx::query_scalar(sql::ENQUEUE)
                .bind(&task.kind)
                .bind(task.source.as_str())
                .bind(task.safety.as_str())
                .bind(Json(&task.payload))
                .bind(task.max_attempts)
                .bind(now)
                .fetch_one($pool)
                .await?
        };
    }
    let id: i64 = match db {
        Db::Postgres(pool) => insert!(pool),
        Db::Sqlite(pool) => insert!(pool),
    };
    tracing::debug!(task_id = id, kind = %task.kind, "enqueued");
    Ok(id)
}

/// One worker's handle on the contract tables. Cheap to clone; every clone is the same worker.
#[derive(Clone, Debug)]
pub struct Runner {
    db: Db,
    worker: String,
    config: RunnerConfig,
    clock: Arc<dyn Clock>,
    /// Quarantine a task claimed this many times since its last re-queue whose newest this many
    /// runs all failed, instead of claiming it again ([`Runner::quarantine_after`]).
    quarantine_after: Option<i64>,
}

impl Runner {
    /// `worker` is the name written to `tasks.owner` and `runs.worker`; it must be unique in
    /// the fleet, or two workers could pass each other's owner guard.
    pub fn new(db: Db, worker: impl Into<String>, config: RunnerConfig, clock: Arc<dyn Clock>) -> Self {
        Runner { db, worker: worker.into(), config, clock, quarantine_after: None }
    }

    /// Quarantines poison tasks: a candidate claimed at least `claims` times since its last
    /// re-queue whose newest `claims` runs all failed (never finished, an error, a lost lease, a
    /// blank output) becomes `dead` with `dead_reason = 'loop'` instead of being claimed again,
    /// so it stops killing or stalling every worker that takes it (issue 13, "Re-claim loops").
    /// An operator's re-queue gives it a fresh budget. At least 1.
    pub fn quarantine_after(mut self, claims: u32) -> Self {
        self.quarantine_after = Some(i64::from(claims.max(1)));
        self
    }

    pub fn worker(&self) -> &str {
        &self.worker
    }

    pub fn config(&self) -> &RunnerConfig {
        &self.config
    }

    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The runner's clock reading.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// [`enqueue`] with this runner's clock.
    pub async fn enqueue(&self, task: &NewTask) -> Result<i64> {
        enqueue(&self.db, task, self.clock.now()).await
    }

    /// Takes one task that is `queued`, or `leased` with a lapsed lease (a re-claim), optionally
    /// only of the given kinds; lowest id first. In one transaction: bumps the fencing token,
    /// sets owner, expiry and attempts, and inserts the run. A lapsed task whose attempts are
    /// used up becomes `dead` instead and the next candidate is tried, and so does a task in a
    /// re-claim loop when [`Runner::quarantine_after`] is set. `None`: nothing to do.
    #[tracing::instrument(skip(self), fields(worker = %self.worker))]
    pub async fn claim(&self, kinds: Option<&[String]>) -> Result<Option<Lease>> {
        let now = self.clock.now();
        let expires = now + self.config.lease;
        in_tx!(&self.db, |tx, d| {
            loop {
                let candidate: Option<(i64, String, i32, i32)> = sqlx::query_as(d.claim_candidate())
                    .bind(now)
                    .bind(d.kinds(kinds))
                    .fetch_optional(&mut *tx)
                    .await?;
                let Some((task_id, status, attempts, max_attempts)) = candidate else {
                    tx.commit().await?;
                    return Ok(None);
                };
                if status == TaskStatus::Leased.as_str() && attempts >= max_attempts {
                    sqlx::query(sql::CLAIM_EXHAUSTED).bind(task_id).bind(now).execute(&mut *tx).await?;
                    tracing::info!(task_id, attempts, "lease lapsed with no attempts left: task is dead");
                    continue;
                }
                if let Some(n) = self.quarantine_after.filter(|n| i64::from(attempts) >= *n) {
                    let failed: i64 = sqlx::query_scalar(sql::LOOP_STREAK)
                        .bind(task_id)
                        .bind(n)
                        .fetch_one(&mut *tx)
                        .await?;
                    if failed >= n {
                        sqlx::query(sql::QUARANTINE).bind(task_id).bind(now).execute(&mut *tx).await?;
                        tracing::warn!(
                            task_id,
                            attempts,
                            "re-claim loop: task quarantined (dead, reason loop)"
                        );
                        continue;
                    }
                }
                let row: ClaimRow = sqlx::query_as(sql::CLAIM_TAKE)
                    .bind(task_id)
                    .bind(&self.worker)
                    .bind(expires)
                    .bind(now)
                    .fetch_one(&mut *tx)
                    .await?;
                let run_id: i64 = sqlx::query_scalar(sql::CLAIM_RUN)
                    .bind(task_id)
                    .bind(&self.worker)
                    .bind(row.lease_epoch)
                    .bind(now)
                    .bind(expires)
                    .fetch_one(&mut *tx)
                    .await?;
                let lease = lease_from(task_id, run_id, now, expires, row)?;
                tx.commit().await?;
                tracing::debug!(
                    task_id,
                    run_id,
                    epoch = lease.epoch,
                    reclaim = status != "queued",
                    "claimed"
                );
                return Ok(Some(lease));
            }
        })
    }

    /// Extends the lease by the configured length if this worker still holds it (owner and
    /// epoch match; a lapsed lease nobody re-claimed yet is still held). Also stamps the run's
    /// `heartbeat_at` and `lease_expires_at`, and `lease.expires_at`.
    #[tracing::instrument(skip(self, lease), fields(worker = %self.worker, task_id = lease.task_id, epoch = lease.epoch))]
    pub async fn heartbeat(&self, lease: &mut Lease) -> Result<Heartbeat> {
        let now = self.clock.now();
        let until = now + self.config.lease;
        in_tx!(&self.db, |tx| {
            let matched = sqlx::query(sql::HEARTBEAT_TASK)
                .bind(lease.task_id)
                .bind(&self.worker)
                .bind(lease.epoch)
                .bind(until)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if matched == 0 {
                let (holder, epoch): (Option<String>, i64) = sqlx::query_as(sql::CURRENT_HOLDER)
                    .bind(lease.task_id)
                    .fetch_optional(&mut *tx)
                    .await?
                    .ok_or(RunnerError::TaskMissing(lease.task_id))?;
                tx.commit().await?;
                tracing::warn!(?holder, epoch, "heartbeat matched nothing: lease lost");
                return Ok(Heartbeat::Lost { holder, epoch });
            }
            sqlx::query(sql::HEARTBEAT_RUN)
                .bind(lease.run_id)
                .bind(now)
                .bind(until)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
        });
        lease.expires_at = until;
        Ok(Heartbeat::Extended { until })
    }

    /// Ends the run with `outcome`: the owner-guarded, fenced final write on the task and the
    /// run's record (finished_at, output or error, completion_rows) in one transaction. When the
    /// guard matches nothing the task is untouched, the run still records what it would have
    /// written with `completion_rows = 0`, and [`Finish::LostLease`] says who holds the task.
    #[tracing::instrument(skip(self, lease, outcome), fields(worker = %self.worker, task_id = lease.task_id, epoch = lease.epoch))]
    pub async fn finish(&self, lease: Lease, outcome: Outcome) -> Result<Finish> {
        let tokens = &self.config.tokens;
        match outcome {
            Outcome::Acted(message) => {
                self.final_write(&lease, FinalWrite::Success(Some(message.as_str()))).await
            }
            Outcome::NoActionNeeded => {
                self.final_write(&lease, FinalWrite::Success(Some(&tokens.no_action))).await
            }
            Outcome::Skip => self.final_write(&lease, FinalWrite::Success(Some(&tokens.skip))).await,
            Outcome::Failed { cause, detail } => {
                self.final_write(&lease, FinalWrite::Failure { error: cause.as_str(), detail: &detail }).await
            }
        }
    }

    /// **Breaks the contract on purpose.** Finishes the run as a success with `output` written
    /// as given — empty, blank or NULL included — which [`Runner::finish`] makes impossible.
    /// Exists only so the simulator and tests can produce the `empty_output` failures the
    /// dashboard must show. Never call it from a real worker.
    #[doc(hidden)]
    pub async fn finish_unchecked(&self, lease: Lease, output: Option<String>) -> Result<Finish> {
        tracing::warn!(
            task_id = lease.task_id,
            run_id = lease.run_id,
            "finishing without an output check (contract violation)"
        );
        self.final_write(&lease, FinalWrite::Success(output.as_deref())).await
    }

    async fn final_write(&self, lease: &Lease, write: FinalWrite<'_>) -> Result<Finish> {
        let now = self.clock.now();
        let (output, error, detail) = match write {
            FinalWrite::Success(output) => (output, None, None),
            FinalWrite::Failure { error, detail } => (None, Some(error), Some(detail)),
        };
        in_tx!(&self.db, |tx| {
            let status: Option<String> = match write {
                FinalWrite::Success(_) => sqlx::query_scalar(sql::FINISH_SUCCESS_TASK)
                    .bind(lease.task_id)
                    .bind(&self.worker)
                    .bind(lease.epoch)
                    .bind(output)
                    .bind(now),
                FinalWrite::Failure { .. } => sqlx::query_scalar(sql::FINISH_FAILURE_TASK)
                    .bind(lease.task_id)
                    .bind(&self.worker)
                    .bind(lease.epoch)
                    .bind(now),
            }
            .fetch_optional(&mut *tx)
            .await?;
            let finish = match status {
                Some(status) => Finish::Accepted { status: parse(lease.task_id, &status)? },
                None => {
                    let (holder, epoch): (Option<String>, i64) = sqlx::query_as(sql::CURRENT_HOLDER)
                        .bind(lease.task_id)
                        .fetch_optional(&mut *tx)
                        .await?
                        .ok_or(RunnerError::TaskMissing(lease.task_id))?;
                    Finish::LostLease { holder, epoch }
                }
            };
            let completion_rows = i32::from(matches!(finish, Finish::Accepted { .. }));
            let recorded = sqlx::query(sql::FINISH_RUN)
                .bind(lease.run_id)
                .bind(now)
                .bind(output)
                .bind(error)
                .bind(detail)
                .bind(completion_rows)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if recorded != 1 {
                // Dropping the transaction rolls back: nothing of this second finish is kept.
                return Err(RunnerError::AlreadyFinished(lease.run_id));
            }
            tx.commit().await?;
            match &finish {
                Finish::Accepted { status } => {
                    tracing::debug!(run_id = lease.run_id, %status, "finished")
                }
                Finish::LostLease { holder, epoch } => {
                    tracing::warn!(
                        run_id = lease.run_id,
                        ?holder,
                        current_epoch = epoch,
                        "final write matched nothing: lost lease"
                    )
                }
            }
            Ok(finish)
        })
    }

    /// Stores the id of this run's trace in an external tracer (Langfuse, LangSmith, an
    /// OpenTelemetry backend) on the run, so the dashboard can link to it. Call it as soon as
    /// the work has a trace — a run that hangs and dies is the one whose trace matters — at any
    /// time before or after the finish; a second call replaces the id. Refused before any write
    /// when the id is not a token of at most 128 characters (`lastword_core::trace`).
    #[tracing::instrument(skip(self, lease), fields(worker = %self.worker, task_id = lease.task_id, epoch = lease.epoch))]
    pub async fn set_trace_id(&self, lease: &Lease, trace_id: &str) -> Result<()> {
        lastword_core::trace::check_trace_id(trace_id)?;
        in_tx!(&self.db, |tx| {
            sqlx::query(sql::SET_TRACE_ID).bind(lease.run_id).bind(trace_id).execute(&mut *tx).await?;
            tx.commit().await?;
        });
        Ok(())
    }

    /// Records a side effect in the outbox under this run's fencing token. Always recorded — it
    /// documents what ran, even under a lost lease — and idempotent per (run, key): recording
    /// the same key again returns the existing row. Record it *before* finishing.
    #[tracing::instrument(skip(self, lease), fields(worker = %self.worker, task_id = lease.task_id, epoch = lease.epoch))]
    pub async fn record_effect(
        &self,
        lease: &Lease,
        kind: &str,
        idempotency_key: &str,
    ) -> Result<EffectRecorded> {
        let now = self.clock.now();
        in_tx!(&self.db, |tx| {
            let inserted: Option<i64> = sqlx::query_scalar(sql::EFFECT_INSERT)
                .bind(lease.run_id)
                .bind(lease.task_id)
                .bind(lease.epoch)
                .bind(kind)
                .bind(idempotency_key)
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?;
            let id = match inserted {
                Some(id) => id,
                None => {
                    sqlx::query_scalar(sql::EFFECT_EXISTING)
                        .bind(lease.run_id)
                        .bind(idempotency_key)
                        .fetch_one(&mut *tx)
                        .await?
                }
            };
            let current: i64 = sqlx::query_scalar(sql::LEASE_CURRENT)
                .bind(lease.task_id)
                .bind(&self.worker)
                .bind(lease.epoch)
                .fetch_one(&mut *tx)
                .await?;
            tx.commit().await?;
            if current == 0 {
                tracing::warn!(effect_id = id, "effect recorded under a lease this worker no longer holds");
            }
            Ok(EffectRecorded { id, lease_current: current > 0 })
        })
    }
}

/// What the final write puts in the run: an output (a success) or an error cause and detail.
#[derive(Clone, Copy)]
enum FinalWrite<'a> {
    Success(Option<&'a str>),
    Failure { error: &'static str, detail: &'a str },
}

fn parse<T: std::str::FromStr<Err = lastword_core::UnknownValue>>(task_id: i64, s: &str) -> Result<T> {
    s.parse().map_err(|e: lastword_core::UnknownValue| RunnerError::Corrupt { task_id, message: e.message })
}

fn lease_from(
    task_id: i64,
    run_id: i64,
    now: DateTime<Utc>,
    expires: DateTime<Utc>,
    row: ClaimRow,
) -> Result<Lease> {
    Ok(Lease {
        task_id,
        run_id,
        epoch: row.lease_epoch,
        claimed_at: now,
        expires_at: expires,
        source: parse::<Source>(task_id, &row.source)?,
        safety: parse::<Safety>(task_id, &row.safety)?,
        kind: row.kind,
        payload: row.payload.0,
        attempts: row.attempts,
        max_attempts: row.max_attempts,
    })
}
