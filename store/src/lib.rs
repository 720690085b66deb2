//! The contract tables behind one interface.
//!
//! PostgreSQL is the production database; SQLite is the embedded default so a fresh machine
//! runs with no server. Both sit behind [`Store`], implemented once ([`SqlStore`]) over either
//! database, with what differs between them as data (a dialect per backend), and held to one
//! conformance suite on both (`tests/conformance.rs`).
//! The backend is chosen at runtime from the URL's scheme ([`DbTarget`]).

/// Runs the same code with the pool of either backend (sqlx type-checks it for each). Defined
/// before the modules so every one of them can use it.
macro_rules! on_db {
    ($db:expr, $pool:ident => $body:expr) => {
        match $db {
            $crate::Db::Postgres($pool) => $body,
            $crate::Db::Sqlite($pool) => $body,
        }
    };
}

mod actions;
pub mod alerts;
pub mod changes;
mod connect;
mod error;
mod exec;
pub mod explain;
pub mod leases;
pub mod notify;
mod postgres;
pub mod prune;
mod queries;
mod rollups;
mod rows;
pub mod shared_reads;
mod sql_store;
mod sqlite;
mod store;
#[cfg(feature = "testing")]
pub mod testing;

pub use connect::{Backend, Db, DbTarget, STATEMENT_TIMEOUT};
pub use error::StoreError;
pub use rollups::{RollupReport, BUCKET_SECS, FACET_CAP};
pub use shared_reads::{SharedReadStats, SharedReads};
pub use sql_store::SqlStore;
pub use store::{NewTask, Readiness, Store};

use lastword_core::Tokens;
use std::sync::Arc;

/// Connects (creating the database if needed), runs the migrations, and wraps the pool in the
/// backend's [`Store`].
pub async fn open(target: &DbTarget, tokens: Tokens) -> Result<Arc<dyn Store>, StoreError> {
    let db = Db::connect(target).await?;
    db.migrate().await?;
    Ok(store_for(db, tokens))
}

/// [`open`] with a retry policy of one's own (`--deterministic-causes`).
pub async fn open_with_policy(
    target: &DbTarget,
    tokens: Tokens,
    retry: lastword_core::RetryPolicy,
) -> Result<Arc<dyn Store>, StoreError> {
    let db = Db::connect(target).await?;
    db.migrate().await?;
    Ok(store_with_policy(db, tokens, retry))
}

/// Wraps an already connected and migrated [`Db`].
pub fn store_for(db: Db, tokens: Tokens) -> Arc<dyn Store> {
    store_with_policy(db, tokens, lastword_core::RetryPolicy::default())
}

/// [`store_for`] with a retry policy of one's own.
pub fn store_with_policy(db: Db, tokens: Tokens, retry: lastword_core::RetryPolicy) -> Arc<dyn Store> {
    Arc::new(SqlStore::new(db, tokens).with_retry_policy(retry))
}
