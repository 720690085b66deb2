//! One database read per question and data version, however many people ask it.
//!
//! Every open dashboard tab refetches what it shows when the live feed reports a change (about
//! once a second under a busy fleet). Without sharing, the database's work grows with the
//! number of tabs: 200 people watching the Failures page would run its list and count queries
//! 200 times a second. [`SharedReads`] wraps any [`Store`] and answers identical reads from one
//! database call:
//!
//! - **Keyed by the question and the data version.** The key is the method and its arguments;
//!   the version is the live hub's refresh version: it moves at most once a second, after the
//!   hub delivered changes, at the moment every open page is told to refetch (the server's
//!   `live` module). An answer at a version is read after every change delivered before that
//!   version was published, so it is never older than the feed that prompted the refetch; and
//!   since every tab refetches at the same version in the same second, they share one read.
//! - **`now` is part of the question.** Callers pass a `now` truncated to the second
//!   ([`lastword_core::read_now`]), so everyone asking within the same second, about the same
//!   window, at the same version, shares one answer; states that change with time alone (a
//!   lease lapsing into `silent`) are therefore at most a second late.
//! - **Concurrent misses are coalesced** (moka's `try_get_with`): the first caller computes,
//!   the others wait for its answer. Errors are never cached.
//! - **Writes invalidate.** An operator action through this store clears every shared answer,
//!   so the page that acted never reads its own stale state back. (Another dashboard server's
//!   answers move on with its own hub, within about one poll interval.)
//! - **Without a version** (the hub has not read yet, or the CLI, or tests without a hub) every
//!   read goes straight to the database.
//!
//! **Heavy reads are bounded.** The counting reads (overview, cause facets, workers, timeline)
//! run at most [`HEAVY_READS`] at once per server; one that cannot start within [`HEAVY_WAIT`]
//! is refused ([`StoreError::Busy`], a 503 that says so) instead of queueing for the pool, so a
//! flood of distinct heavy questions cannot starve the keyset lists, the task pages, the
//! actions and `/readyz` of connections. Shared answers do not take a turn.
//!
//! Operator action previews and the audit trail are not shared: they are read right before or
//! after acting, where freshness matters more than load.
//!
//! **A read replica** (`DATABASE_READ_URL`): [`SharedReads::with_replica`] sends the shared
//! reads there, while actions, their previews, the audit trail and readiness stay on the
//! primary, and so does the change feed (the version). A replica that lags shows as that much
//! staleness in the pages (the next change or second asks again).

use crate::{Backend, Db, Readiness, Store, StoreError};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use lastword_core::{
    ActionKind, ActionOutcome, ActionRequest, Actor, AuditFilter, AuditPage, BulkOutcome, BulkPreview,
    BulkRequeueRequest, BulkSelection, CauseFacets, Effect, OperatorAction, Overview, PageRequest, Run,
    RunFilter, RunPage, Task, TaskDetail, Tokens, Totals, WorkerSummary,
};
use moka::future::Cache;
use std::fmt::Debug;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Where the data version comes from: the live hub's refresh version, `None` while unknown.
pub type VersionSource = Arc<dyn Fn() -> Option<i64> + Send + Sync>;

/// How long an answer may be shared at all. Keys carry `now` to the second, so an entry is
/// useless after about a second; this only bounds memory.
const ENTRY_TTL: Duration = Duration::from_secs(3);
/// Distinct questions kept at once (per method). Each open tab asks a handful.
const MAX_ENTRIES: u64 = 512;

/// Counting reads running at once, at most: half the pool (16 connections on PostgreSQL), so
/// the other half is always there for lists, task pages, actions and the change feed.
pub const HEAVY_READS: usize = 8;
/// How long a heavy read waits for its turn before it is refused.
pub const HEAVY_WAIT: Duration = Duration::from_secs(2);

/// Runs `read` once a turn among `HEAVY_READS` is free, or refuses it after `wait`.
pub(crate) async fn bounded<V>(
    gate: &tokio::sync::Semaphore,
    wait: Duration,
    read: impl Future<Output = Result<V, StoreError>>,
) -> Result<V, StoreError> {
    let _turn = match tokio::time::timeout(wait, gate.acquire()).await {
        Ok(Ok(turn)) => turn,
        _ => return Err(StoreError::Busy(HEAVY_READS)),
    };
    read.await
}

/// Reads shared per question and version, and how many reached the database.
#[derive(Debug, Default)]
pub struct SharedReadStats {
    /// Reads answered from a shared answer (or by waiting for one being computed).
    pub shared: AtomicU64,
    /// Reads that went to the database.
    pub database: AtomicU64,
    /// Times every shared answer was dropped because the store wrote (an operator action):
    /// whatever was built from the answers before (a rendered page) is as stale as they were.
    pub invalidations: AtomicU64,
}

/// Typed caches, one per shared method, so answers need no downcasting.
struct Caches {
    totals: Cache<String, Totals>,
    task: Cache<String, Option<Task>>,
    run: Cache<String, Option<Run>>,
    task_runs: Cache<String, Vec<Run>>,
    task_effects: Cache<String, Vec<Effect>>,
    task_actions: Cache<String, Vec<OperatorAction>>,
    list_runs: Cache<String, RunPage>,
    cause_facets: Cache<String, CauseFacets>,
    overview: Cache<String, Overview>,
    workers: Cache<String, Vec<WorkerSummary>>,
    timeline: Cache<String, Vec<lastword_core::RunListItem>>,
    task_detail: Cache<String, Option<TaskDetail>>,
}

fn cache<V: Clone + Send + Sync + 'static>() -> Cache<String, V> {
    Cache::builder().max_capacity(MAX_ENTRIES).time_to_live(ENTRY_TTL).build()
}

impl Caches {
    fn new() -> Caches {
        Caches {
            totals: cache(),
            task: cache(),
            run: cache(),
            task_runs: cache(),
            task_effects: cache(),
            task_actions: cache(),
            list_runs: cache(),
            cause_facets: cache(),
            overview: cache(),
            workers: cache(),
            timeline: cache(),
            task_detail: cache(),
        }
    }

    fn invalidate_all(&self) {
        self.totals.invalidate_all();
        self.task.invalidate_all();
        self.run.invalidate_all();
        self.task_runs.invalidate_all();
        self.task_effects.invalidate_all();
        self.task_actions.invalidate_all();
        self.list_runs.invalidate_all();
        self.cause_facets.invalidate_all();
        self.overview.invalidate_all();
        self.workers.invalidate_all();
        self.timeline.invalidate_all();
        self.task_detail.invalidate_all();
    }
}

/// A [`Store`] that shares identical reads (see the module header).
pub struct SharedReads {
    /// The primary: actions, previews, the audit trail, readiness.
    inner: Arc<dyn Store>,
    /// Where shared reads go: the primary, or a read replica.
    reads: Arc<dyn Store>,
    version: VersionSource,
    caches: Caches,
    stats: Arc<SharedReadStats>,
    /// Turns for the heavy reads (see the module header).
    heavy: Arc<tokio::sync::Semaphore>,
}

impl SharedReads {
    pub fn new(inner: Arc<dyn Store>, version: VersionSource) -> SharedReads {
        SharedReads {
            reads: inner.clone(),
            inner,
            version,
            caches: Caches::new(),
            stats: Arc::default(),
            heavy: Arc::new(tokio::sync::Semaphore::new(HEAVY_READS)),
        }
    }

    /// The same, with the shared reads sent to `replica` (see the module header).
    pub fn with_replica(mut self, replica: Arc<dyn Store>) -> SharedReads {
        self.reads = replica;
        self
    }

    /// The counters behind `/metrics`' `lastword_db_reads_total` and `lastword_shared_reads_total`.
    pub fn stats(&self) -> Arc<SharedReadStats> {
        self.stats.clone()
    }

    /// Drops every shared answer after a write (see the module header), and counts it.
    fn forget_answers(&self) {
        self.caches.invalidate_all();
        self.stats.invalidations.fetch_add(1, Ordering::Relaxed);
    }

    /// `read`, in its turn among the heavy reads.
    async fn in_turn<V>(&self, read: impl Future<Output = Result<V, StoreError>>) -> Result<V, StoreError> {
        bounded(&self.heavy, HEAVY_WAIT, read).await
    }

    /// The answer to `args` at the current version: shared when one exists or is being
    /// computed, else read from the database by `read`.
    async fn shared<V, F, Fut>(
        &self,
        cache: &Cache<String, V>,
        method: &str,
        args: impl Debug,
        read: F,
    ) -> Result<V, StoreError>
    where
        V: Clone + Send + Sync + 'static,
        F: FnOnce() -> Fut + Send,
        Fut: Future<Output = Result<V, StoreError>> + Send,
    {
        let Some(version) = (self.version)() else {
            self.stats.database.fetch_add(1, Ordering::Relaxed);
            return read().await;
        };
        let key = format!("{method}@{version}:{args:?}");
        let computed = std::sync::atomic::AtomicBool::new(false);
        let answer = cache
            .try_get_with(key, async {
                computed.store(true, Ordering::Relaxed);
                read().await
            })
            .await;
        let counter =
            if computed.load(Ordering::Relaxed) { &self.stats.database } else { &self.stats.shared };
        counter.fetch_add(1, Ordering::Relaxed);
        answer.map_err(StoreError::Shared)
    }
}

#[async_trait]
impl Store for SharedReads {
    fn backend(&self) -> Backend {
        self.inner.backend()
    }

    fn db(&self) -> &Db {
        self.inner.db()
    }

    fn tokens(&self) -> &Tokens {
        self.inner.tokens()
    }

    async fn readiness(&self) -> Readiness {
        self.inner.readiness().await
    }

    async fn totals(&self) -> Result<Totals, StoreError> {
        self.shared(&self.caches.totals, "totals", (), || self.reads.totals()).await
    }

    async fn task(&self, id: i64) -> Result<Option<Task>, StoreError> {
        self.shared(&self.caches.task, "task", id, || self.reads.task(id)).await
    }

    async fn run(&self, id: i64, now: DateTime<Utc>) -> Result<Option<Run>, StoreError> {
        self.shared(&self.caches.run, "run", (id, now), || self.reads.run(id, now)).await
    }

    async fn task_runs(&self, task_id: i64, now: DateTime<Utc>) -> Result<Vec<Run>, StoreError> {
        self.shared(&self.caches.task_runs, "task_runs", (task_id, now), || {
            self.reads.task_runs(task_id, now)
        })
        .await
    }

    async fn task_effects(&self, task_id: i64) -> Result<Vec<Effect>, StoreError> {
        self.shared(&self.caches.task_effects, "task_effects", task_id, || self.reads.task_effects(task_id))
            .await
    }

    async fn task_actions(&self, task_id: i64) -> Result<Vec<OperatorAction>, StoreError> {
        self.shared(&self.caches.task_actions, "task_actions", task_id, || self.reads.task_actions(task_id))
            .await
    }

    async fn list_runs(
        &self,
        filter: &RunFilter,
        page: &PageRequest,
        now: DateTime<Utc>,
    ) -> Result<RunPage, StoreError> {
        self.shared(&self.caches.list_runs, "list_runs", (filter, page, now), || {
            self.reads.list_runs(filter, page, now)
        })
        .await
    }

    async fn cause_facets(&self, filter: &RunFilter, now: DateTime<Utc>) -> Result<CauseFacets, StoreError> {
        self.shared(&self.caches.cause_facets, "cause_facets", (filter, now), || {
            self.in_turn(self.reads.cause_facets(filter, now))
        })
        .await
    }

    async fn overview(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        bucket: chrono::Duration,
        now: DateTime<Utc>,
    ) -> Result<Overview, StoreError> {
        self.shared(&self.caches.overview, "overview", (since, until, bucket, now), || {
            self.in_turn(self.reads.overview(since, until, bucket, now))
        })
        .await
    }

    async fn workers(
        &self,
        since: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<WorkerSummary>, StoreError> {
        self.shared(&self.caches.workers, "workers", (since, now), || {
            self.in_turn(self.reads.workers(since, now))
        })
        .await
    }

    async fn refresh_rollups(&self, now: DateTime<Utc>) -> Result<crate::RollupReport, StoreError> {
        // Maintenance writes, on the primary; the shared answers move on with the version.
        self.inner.refresh_rollups(now).await
    }

    async fn timeline(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<lastword_core::RunListItem>, StoreError> {
        self.shared(&self.caches.timeline, "timeline", (since, until, now), || {
            self.in_turn(self.reads.timeline(since, until, now))
        })
        .await
    }

    async fn timeline_runs(
        &self,
        ids: &[i64],
        now: DateTime<Utc>,
    ) -> Result<Vec<lastword_core::RunListItem>, StoreError> {
        // Every open timeline asks for the same batch's runs: one read per batch. A keyed
        // lookup of a few hundred rows at most, so it takes no heavy-read turn.
        self.shared(&self.caches.timeline, "timeline_runs", (ids, now), || self.reads.timeline_runs(ids, now))
            .await
    }

    async fn task_detail(&self, id: i64, now: DateTime<Utc>) -> Result<Option<TaskDetail>, StoreError> {
        self.shared(&self.caches.task_detail, "task_detail", (id, now), || self.reads.task_detail(id, now))
            .await
    }

    async fn act(
        &self,
        task_id: i64,
        kind: ActionKind,
        request: &ActionRequest,
        actor: &Actor,
        now: DateTime<Utc>,
    ) -> Result<Option<ActionOutcome>, StoreError> {
        let outcome = self.inner.act(task_id, kind, request, actor, now).await;
        self.forget_answers();
        outcome
    }

    async fn record_refusal(
        &self,
        task_id: i64,
        kind: ActionKind,
        request: &ActionRequest,
        actor: &Actor,
        code: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let written = self.inner.record_refusal(task_id, kind, request, actor, code, now).await;
        self.forget_answers();
        written
    }

    async fn requeue_preview(
        &self,
        selection: &BulkSelection,
        options: lastword_core::BulkOptions,
        now: DateTime<Utc>,
    ) -> Result<BulkPreview, StoreError> {
        self.inner.requeue_preview(selection, options, now).await
    }

    async fn bulk_requeue(
        &self,
        selection: &BulkSelection,
        request: &BulkRequeueRequest,
        actor: &Actor,
        now: DateTime<Utc>,
    ) -> Result<BulkOutcome, StoreError> {
        let outcome = self.inner.bulk_requeue(selection, request, actor, now).await;
        self.forget_answers();
        outcome
    }

    async fn audit(&self, filter: &AuditFilter, page: &PageRequest) -> Result<AuditPage, StoreError> {
        self.inner.audit(filter, page).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_heavy_read_that_cannot_get_a_turn_is_refused_not_queued() {
        let gate = Arc::new(tokio::sync::Semaphore::new(1));
        let held = gate.clone().acquire_owned().await.unwrap();
        let refused = bounded(&gate, Duration::from_millis(50), async { Ok::<_, StoreError>(1) }).await;
        assert!(matches!(refused, Err(StoreError::Busy(_))), "{refused:?}");
        assert!(refused.unwrap_err().is_too_slow(), "reported like a slow query: a 503 that says why");
        drop(held);
        assert_eq!(
            bounded(&gate, Duration::from_secs(2), async { Ok::<_, StoreError>(2) }).await.unwrap(),
            2
        );
        // A turn freed while waiting is taken.
        let held = gate.clone().acquire_owned().await.unwrap();
        let waiter = bounded(&gate, Duration::from_secs(2), async { Ok::<_, StoreError>(3) });
        let (answer, ()) = tokio::join!(waiter, async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            drop(held);
        });
        assert_eq!(answer.unwrap(), 3);
    }
}
