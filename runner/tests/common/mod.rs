//! What the runner's scenario tests share: a database, a manual clock that every runner of the
//! test reads (so a lease lapses exactly when the test says), and the store that reads it back.
//! Each test file adds its own helpers in an `impl Fixture` of its own.
// Each test binary uses its own share of these.
#![allow(dead_code)]

use chrono::{DateTime, Duration, Utc};
use lastword_core::{Task, Tokens};
use lastword_runner::{ManualClock, Runner, RunnerConfig};
use lastword_store::{store_for, Db, Store};
use std::sync::Arc;

/// The lease every runner of these tests holds, in seconds.
pub const LEASE: i64 = 30;

pub fn secs(s: i64) -> Duration {
    Duration::seconds(s)
}

pub struct Fixture {
    pub db: Db,
    pub clock: ManualClock,
    pub store: Arc<dyn Store>,
}

impl Fixture {
    /// A fixture on `db` whose clock starts at `t0`.
    pub fn starting_at(db: Db, t0: DateTime<Utc>) -> Self {
        Fixture { store: store_for(db.clone(), Tokens::default()), db, clock: ManualClock::new(t0) }
    }

    /// A runner named `worker` holding [`LEASE`]-second leases on the fixture's clock.
    pub fn runner(&self, worker: &str) -> Runner {
        let config = RunnerConfig { lease: secs(LEASE), tokens: Tokens::default() };
        Runner::new(self.db.clone(), worker, config, Arc::new(self.clock.clone()))
    }

    pub fn now(&self) -> DateTime<Utc> {
        lastword_runner::Clock::now(&self.clock)
    }

    /// The task as the store reads it; it must exist.
    pub async fn row(&self, id: i64) -> Task {
        self.store.task(id).await.unwrap().expect("the task exists")
    }
}
