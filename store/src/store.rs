//! The interface the dashboard reads through. One trait, one implementation per backend, one
//! conformance suite; the method order here is the order in both implementations.

use crate::{Backend, Db, StoreError};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use lastword_core::{
    ActionKind, ActionOutcome, ActionRequest, Actor, AuditFilter, AuditPage, BulkOutcome, BulkPreview,
    BulkRequeueRequest, BulkSelection, CauseFacets, Effect, OperatorAction, Overview, PageRequest, Run,
    RunFilter, RunListItem, RunPage, Task, TaskDetail, Tokens, Totals, WorkerSummary,
};

/// Is the database usable: reachable, and every embedded migration applied?
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Readiness {
    pub reachable: bool,
    /// Embedded migration versions the database has not applied (or applied unsuccessfully).
    pub pending_migrations: Vec<i64>,
}

impl Readiness {
    pub fn is_ready(&self) -> bool {
        self.reachable && self.pending_migrations.is_empty()
    }
}

/// A task to enqueue (producer side; also used by the simulator and tests).
#[derive(Clone, Debug)]
pub struct NewTask {
    pub kind: String,
    pub source: lastword_core::Source,
    pub safety: lastword_core::Safety,
    pub payload: serde_json::Value,
    pub max_attempts: i32,
}

impl NewTask {
    /// The schema's own default (`tasks.max_attempts … DEFAULT 3`): a first try and two retries.
    pub const DEFAULT_MAX_ATTEMPTS: i32 = 3;

    /// A task of `kind` with an empty payload (`{}`) and [`Self::DEFAULT_MAX_ATTEMPTS`].
    pub fn new(
        kind: impl Into<String>,
        source: lastword_core::Source,
        safety: lastword_core::Safety,
    ) -> Self {
        NewTask {
            kind: kind.into(),
            source,
            safety,
            payload: serde_json::json!({}),
            max_attempts: Self::DEFAULT_MAX_ATTEMPTS,
        }
    }

    /// The same task carrying `payload` (what the worker reads to do its job).
    pub fn with_payload(self, payload: serde_json::Value) -> Self {
        NewTask { payload, ..self }
    }

    /// The same task allowed `max_attempts` tries before it is dead.
    pub fn with_max_attempts(self, max_attempts: i32) -> Self {
        NewTask { max_attempts, ..self }
    }
}

#[async_trait]
pub trait Store: Send + Sync + 'static {
    fn backend(&self) -> Backend;
    /// The pool, for the runner library and the simulator, which write the contract tables.
    fn db(&self) -> &Db;
    /// The terminal tokens the state is decided with.
    fn tokens(&self) -> &Tokens;

    /// Reachability and migration status, for `/readyz`.
    async fn readiness(&self) -> Readiness;
    /// Row totals for the landing page.
    async fn totals(&self) -> Result<Totals, StoreError>;

    async fn task(&self, id: i64) -> Result<Option<Task>, StoreError>;
    /// One run with its state decided in SQL as of `now`.
    async fn run(&self, id: i64, now: DateTime<Utc>) -> Result<Option<Run>, StoreError>;
    /// Every run of a task, oldest claim first, states decided as of `now`.
    async fn task_runs(&self, task_id: i64, now: DateTime<Utc>) -> Result<Vec<Run>, StoreError>;
    /// The outbox entries of a task, oldest first.
    async fn task_effects(&self, task_id: i64) -> Result<Vec<Effect>, StoreError>;
    /// The audit trail of a task, newest first.
    async fn task_actions(&self, task_id: i64) -> Result<Vec<OperatorAction>, StoreError>;

    /// One keyset page of runs matching `filter`, newest claim first (`claimed_at DESC, id
    /// DESC`), states decided as of `now`. `next` is set when more rows follow.
    async fn list_runs(
        &self,
        filter: &RunFilter,
        page: &PageRequest,
        now: DateTime<Utc>,
    ) -> Result<RunPage, StoreError>;
    /// Failure runs per cause for `filter` with its own `states` and `causes` ignored: what each
    /// cause checkbox would give. Every cause is listed, in `Cause::ALL` order, zeros included.
    /// Filters by time use the rollups; others count at most `FACET_CAP` runs per cause and
    /// list the causes that reached it in `capped`.
    async fn cause_facets(&self, filter: &RunFilter, now: DateTime<Utc>) -> Result<CauseFacets, StoreError>;
    /// Counts per state and per cause of the runs claimed in `[since, until)`, a series of
    /// `bucket`-long buckets aligned to the Unix epoch (whole seconds, at least one), and what
    /// needs attention in that window. Past quarter-hours come from the rollups (see
    /// [`Store::refresh_rollups`]); `counted_at` says how fresh they are.
    async fn overview(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        bucket: chrono::Duration,
        now: DateTime<Utc>,
    ) -> Result<Overview, StoreError>;
    /// Every worker with a run claimed since `since` or holding a lease now, by name.
    async fn workers(
        &self,
        since: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<WorkerSummary>, StoreError>;
    /// One round of keeping the count rollups up to date (`crate::rollups`): the buckets
    /// changes touched, then a bounded number of missing or stale ones. Called every couple of
    /// seconds by `lastword serve`; idempotent, and safe from several servers at once.
    async fn refresh_rollups(&self, now: DateTime<Utc>) -> Result<crate::RollupReport, StoreError>;
    /// Runs whose bar overlaps `[since, until]` (an unfinished run lasts until its lease
    /// expiry), the newest 5000 at most, ordered by worker then claim.
    async fn timeline(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<RunListItem>, StoreError>;
    /// The timeline's rows of the runs `ids`, by id: what the live timeline merges in for the
    /// runs a batch of changes named, instead of fetching its window again. Callers bound the
    /// list (`lastword_core::TIMELINE_RUNS_CAP`); ids that name no run are left out.
    async fn timeline_runs(&self, ids: &[i64], now: DateTime<Utc>) -> Result<Vec<RunListItem>, StoreError>;
    /// A task with its runs, effects, audit trail and double-execution flags.
    async fn task_detail(&self, id: i64, now: DateTime<Utc>) -> Result<Option<TaskDetail>, StoreError>;

    // --- operator actions (see `actions.rs` for why they are safe on a stale page)

    /// Re-queue, mark compensated or undo it, as `actor`, in one transaction with its audit row.
    /// `request` must have passed `ActionRequest::validate(kind)`. `None`: no such task.
    async fn act(
        &self,
        task_id: i64,
        kind: ActionKind,
        request: &ActionRequest,
        actor: &Actor,
        now: DateTime<Utc>,
    ) -> Result<Option<ActionOutcome>, StoreError>;
    /// Records an attempt refused before the store decided (a viewer's 403) in the audit trail
    /// as `refused:<code>`, with the task's epoch and status as they are. `false`: no such task
    /// (nothing recorded, so made-up ids cannot fill the trail).
    async fn record_refusal(
        &self,
        task_id: i64,
        kind: ActionKind,
        request: &ActionRequest,
        actor: &Actor,
        code: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError>;
    /// Records a bulk re-queue refused before the store decided (a viewer's 403) as an
    /// operator's refused bulk attempt is recorded: one `refused:<code>` row per task the
    /// selection would re-queue now, so "who tried what" has an answer task by task. Returns
    /// the rows written: none for a selection too broad to apply (as for an operator, whose
    /// too-many refusal re-queues and records nothing), at most [`lastword_core::action::BULK_MAX`].
    async fn record_bulk_refusal(
        &self,
        selection: &BulkSelection,
        request: &BulkRequeueRequest,
        actor: &Actor,
        code: &str,
        now: DateTime<Utc>,
    ) -> Result<usize, StoreError> {
        if matches!(selection, BulkSelection::Tasks(ids) if ids.len() > lastword_core::action::BULK_MAX) {
            return Ok(0);
        }
        let options = lastword_core::BulkOptions {
            fence: request.fence,
            include_deterministic: request.include_deterministic,
        };
        let preview = self.requeue_preview(selection, options, now).await?;
        if preview.too_many {
            return Ok(0);
        }
        let tried = ActionRequest {
            reason: request.reason.clone(),
            fence: request.fence,
            retry_deterministic: request.include_deterministic,
            ..ActionRequest::default()
        }
        .as_recorded_refusal();
        let mut written = 0;
        for task in &preview.tasks {
            if self.record_refusal(task.id, ActionKind::Requeue, &tried, actor, code, now).await? {
                written += 1;
            }
        }
        Ok(written)
    }
    /// What a bulk re-queue of `selection` would do now (read only), taking what `options`
    /// says beyond the default (live leases, deterministic failures).
    async fn requeue_preview(
        &self,
        selection: &BulkSelection,
        options: lastword_core::BulkOptions,
        now: DateTime<Utc>,
    ) -> Result<BulkPreview, StoreError>;
    /// Re-queues every task of the preview in one transaction, if it still has the count the
    /// operator confirmed; one audit row per task.
    async fn bulk_requeue(
        &self,
        selection: &BulkSelection,
        request: &BulkRequeueRequest,
        actor: &Actor,
        now: DateTime<Utc>,
    ) -> Result<BulkOutcome, StoreError>;
    /// One keyset page of the audit trail, newest first.
    async fn audit(&self, filter: &AuditFilter, page: &PageRequest) -> Result<AuditPage, StoreError>;
}
