//! [`SqlStore`]: the one implementation of [`Store`], for both databases.
//!
//! The backend is data, not a type: the [`Db`] it holds says which database it is, the
//! [`Dialect`](crate::queries::Dialect) (from `crate::sqlite` or `crate::postgres`) says how
//! that database spells the few things that differ, and `crate::exec` runs a statement on
//! either. The texts live in `crate::queries`; this file decides which to run and folds the
//! rows into the view types. Operator actions are in `crate::actions`, the counts in
//! `crate::rollups`. The conformance suite (`tests/conformance.rs`) runs every method on both.

use crate::queries::{self, task as q, Dialect};
use crate::rows::{ActionRow, EffectRow, RunListRow, RunRow, TaskRefRow, TaskRow};
use crate::{Backend, Db, Readiness, Store, StoreError};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use lastword_core::{
    ActionKind, ActionOutcome, ActionRequest, Actor, AuditFilter, AuditPage, BulkOptions, BulkOutcome,
    BulkPreview, BulkRequeueRequest, BulkSelection, CauseFacets, Cursor, Effect, OperatorAction, Overview,
    PageRequest, RetryPolicy, Run, RunFilter, RunListItem, RunPage, Task, TaskDetail, Tokens, Totals,
    WorkerSummary,
};

/// The store over either database.
pub struct SqlStore {
    pub(crate) db: Db,
    pub(crate) tokens: Tokens,
    /// Which failure causes a re-queue cannot fix (default: `context_overflow`).
    pub(crate) retry: RetryPolicy,
}

impl SqlStore {
    pub fn new(db: Db, tokens: Tokens) -> Self {
        SqlStore { db, tokens, retry: RetryPolicy::default() }
    }

    /// Which failure causes a re-queue cannot fix (`--deterministic-causes`).
    pub fn with_retry_policy(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    pub(crate) fn dialect(&self) -> &'static Dialect {
        crate::rollups::dialect(&self.db)
    }
}

/// Keeps the first `limit` of `items` (which were read with one more than that) and names the
/// cursor of the next page, if there is one.
fn keyset_page<T>(items: &mut Vec<T>, limit: u32, cursor: impl Fn(&T) -> Cursor) -> Option<String> {
    let limit = limit.max(1) as usize;
    if items.len() <= limit {
        return None;
    }
    items.truncate(limit);
    items.last().map(|last| cursor(last).encode())
}

fn all_into<R, T: From<R>>(rows: Vec<R>) -> Vec<T> {
    rows.into_iter().map(Into::into).collect()
}

#[async_trait]
impl Store for SqlStore {
    fn backend(&self) -> Backend {
        self.db.backend()
    }

    fn db(&self) -> &Db {
        &self.db
    }

    fn tokens(&self) -> &Tokens {
        &self.tokens
    }

    async fn readiness(&self) -> Readiness {
        let reachable = self.db.execute(&queries::SqlBuf::statement("SELECT 1")).await.is_ok();
        if !reachable {
            return Readiness { reachable, pending_migrations: vec![] };
        }
        let applied: Vec<(i64,)> = self
            .db
            .fetch_all(&queries::SqlBuf::statement("SELECT version FROM _sqlx_migrations WHERE success"))
            .await
            .unwrap_or_default();
        let pending_migrations = self
            .db
            .migrator()
            .iter()
            .map(|m| m.version)
            .filter(|v| !applied.iter().any(|(a,)| a == v))
            .collect();
        Readiness { reachable, pending_migrations }
    }

    #[tracing::instrument(skip(self), err)]
    async fn totals(&self) -> Result<Totals, StoreError> {
        let estimates: Vec<(String, i64)> = match self.dialect().row_estimates {
            Some(sql) => self.db.fetch_all(&queries::SqlBuf::statement(sql)).await?,
            None => Vec::new(),
        };
        let mut counted = [0i64; 3];
        let mut estimated = false;
        for (slot, table) in counted.iter_mut().zip(["tasks", "runs", "effects"]) {
            let large = estimates
                .iter()
                .find(|(t, _)| t == table)
                .map(|(_, n)| *n)
                .filter(|n| *n >= queries::EXACT_TOTALS_BELOW);
            *slot = match large {
                Some(n) => {
                    estimated = true;
                    n
                }
                // The table name is one of the three literals above, never input.
                None => {
                    let (n,): (i64,) = self
                        .db
                        .fetch_one(&queries::SqlBuf::statement(format!("SELECT COUNT(*) FROM {table}")))
                        .await?;
                    n
                }
            };
        }
        let [tasks, runs, effects] = counted;
        Ok(Totals { tasks, runs, effects, estimated })
    }

    #[tracing::instrument(skip(self), err)]
    async fn task(&self, id: i64) -> Result<Option<Task>, StoreError> {
        let row: Option<TaskRow> = self.db.fetch_optional(&q::task_by_id(self.dialect(), id, false)).await?;
        Ok(row.map(Into::into))
    }

    #[tracing::instrument(skip(self), err)]
    async fn run(&self, id: i64, now: DateTime<Utc>) -> Result<Option<Run>, StoreError> {
        let row: Option<RunRow> =
            self.db.fetch_optional(&q::run_by_id(self.dialect(), id, now, &self.tokens)).await?;
        Ok(row.map(Into::into))
    }

    #[tracing::instrument(skip(self), err)]
    async fn task_runs(&self, task_id: i64, now: DateTime<Utc>) -> Result<Vec<Run>, StoreError> {
        let rows: Vec<RunRow> =
            self.db.fetch_all(&q::task_runs(self.dialect(), task_id, now, &self.tokens)).await?;
        Ok(all_into(rows))
    }

    #[tracing::instrument(skip(self), err)]
    async fn task_effects(&self, task_id: i64) -> Result<Vec<Effect>, StoreError> {
        let rows: Vec<EffectRow> = self.db.fetch_all(&q::task_effects(task_id)).await?;
        Ok(all_into(rows))
    }

    #[tracing::instrument(skip(self), err)]
    async fn task_actions(&self, task_id: i64) -> Result<Vec<OperatorAction>, StoreError> {
        let rows: Vec<ActionRow> = self.db.fetch_all(&q::task_actions(task_id)).await?;
        Ok(all_into(rows))
    }

    #[tracing::instrument(skip(self), err)]
    async fn list_runs(
        &self,
        filter: &RunFilter,
        page: &PageRequest,
        now: DateTime<Utc>,
    ) -> Result<RunPage, StoreError> {
        let rows: Vec<RunListRow> =
            self.db.fetch_all(&queries::list_runs(self.dialect(), filter, page, now, &self.tokens)).await?;
        let mut runs: Vec<RunListItem> = all_into(rows);
        let next =
            keyset_page(&mut runs, page.limit, |r| Cursor { claimed_at: r.run.claimed_at, id: r.run.id });
        Ok(RunPage { runs, next })
    }

    #[tracing::instrument(skip(self), err)]
    async fn cause_facets(&self, filter: &RunFilter, now: DateTime<Utc>) -> Result<CauseFacets, StoreError> {
        crate::rollups::cause_facets(&self.db, &self.tokens, filter, now).await
    }

    #[tracing::instrument(skip(self), err)]
    async fn overview(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        bucket: chrono::Duration,
        now: DateTime<Utc>,
    ) -> Result<Overview, StoreError> {
        crate::rollups::overview(&self.db, &self.tokens, since, until, bucket, now).await
    }

    #[tracing::instrument(skip(self), err)]
    async fn workers(
        &self,
        since: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<WorkerSummary>, StoreError> {
        crate::rollups::workers(&self.db, &self.tokens, since, now).await
    }

    #[tracing::instrument(skip(self), err)]
    async fn refresh_rollups(&self, now: DateTime<Utc>) -> Result<crate::RollupReport, StoreError> {
        crate::rollups::refresh(&self.db, &self.tokens, now).await
    }

    #[tracing::instrument(skip(self), err)]
    async fn timeline(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<RunListItem>, StoreError> {
        let rows: Vec<RunListRow> =
            self.db.fetch_all(&queries::timeline(self.dialect(), since, until, now, &self.tokens)).await?;
        let mut runs: Vec<RunListItem> = all_into(rows);
        runs.sort_by(|a, b| {
            (&a.run.worker, a.run.claimed_at, a.run.id).cmp(&(&b.run.worker, b.run.claimed_at, b.run.id))
        });
        Ok(runs)
    }

    #[tracing::instrument(skip(self), err)]
    async fn timeline_runs(&self, ids: &[i64], now: DateTime<Utc>) -> Result<Vec<RunListItem>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<RunListRow> =
            self.db.fetch_all(&queries::timeline_runs(self.dialect(), ids, now, &self.tokens)).await?;
        Ok(all_into(rows))
    }

    #[tracing::instrument(skip(self), err)]
    async fn task_detail(&self, id: i64, now: DateTime<Utc>) -> Result<Option<TaskDetail>, StoreError> {
        let d = self.dialect();
        // One snapshot for the four reads (see `Dialect::begin_snapshot`).
        let mut tx = self.db.begin(d.begin_snapshot).await?;
        let Some(task) = tx.fetch_optional::<TaskRow>(&q::task_by_id(d, id, false)).await? else {
            return Ok(None);
        };
        let runs: Vec<RunRow> = tx.fetch_all(&q::task_runs(d, id, now, &self.tokens)).await?;
        let effects: Vec<EffectRow> = tx.fetch_all(&q::task_effects(id)).await?;
        let audit: Vec<ActionRow> = tx.fetch_all(&q::task_actions(id)).await?;
        tx.commit().await?;
        Ok(Some(TaskDetail::new(
            task.into(),
            all_into(runs),
            all_into(effects),
            all_into(audit),
            &self.tokens,
            now,
        )))
    }

    async fn act(
        &self,
        task_id: i64,
        kind: ActionKind,
        request: &ActionRequest,
        actor: &Actor,
        now: DateTime<Utc>,
    ) -> Result<Option<ActionOutcome>, StoreError> {
        crate::actions::act(self, task_id, kind, request, actor, now).await
    }

    #[tracing::instrument(skip(self, request), err)]
    async fn record_refusal(
        &self,
        task_id: i64,
        kind: ActionKind,
        request: &ActionRequest,
        actor: &Actor,
        code: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let outcome = lastword_core::action::refused_outcome(code);
        let written =
            self.db.execute(&q::refusal_of_task(task_id, kind, request, actor, &outcome, now)).await?;
        Ok(written == 1)
    }

    #[tracing::instrument(skip(self), err)]
    async fn requeue_preview(
        &self,
        selection: &BulkSelection,
        options: BulkOptions,
        now: DateTime<Utc>,
    ) -> Result<BulkPreview, StoreError> {
        let query = queries::bulk_selection(self.dialect(), selection, now, &self.tokens, false);
        let rows: Vec<TaskRefRow> = self.db.fetch_all(&query).await?;
        Ok(crate::actions::classify(self, rows, selection, options, now))
    }

    async fn bulk_requeue(
        &self,
        selection: &BulkSelection,
        request: &BulkRequeueRequest,
        actor: &Actor,
        now: DateTime<Utc>,
    ) -> Result<BulkOutcome, StoreError> {
        crate::actions::bulk_requeue(self, selection, request, actor, now).await
    }

    #[tracing::instrument(skip(self), err)]
    async fn audit(&self, filter: &AuditFilter, page: &PageRequest) -> Result<AuditPage, StoreError> {
        let rows: Vec<ActionRow> = self.db.fetch_all(&queries::audit(filter, page)).await?;
        let mut actions: Vec<OperatorAction> = all_into(rows);
        let next = keyset_page(&mut actions, page.limit, |a| Cursor { claimed_at: a.created_at, id: a.id });
        Ok(AuditPage { actions, next })
    }
}
