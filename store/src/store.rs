//! The interface the dashboard reads through. One trait, one implementation per backend, one
//! conformance suite; the method order here is the order in both implementations.

use crate::{Backend, Db, StoreError};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use lastword_core::{Effect, OperatorAction, Run, Task, Tokens, Totals};

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
}
