//! How the store runs a statement on whichever backend a [`Db`] holds, as ordinary code.
//!
//! Every statement the store sends is a [`SqlBuf`] (text plus its arguments in `$n` order), and
//! every row type derives `sqlx::FromRow` for any row, so one method per way of fetching —
//! on the pool ([`Db`]) or inside a transaction ([`Tx`]) — serves both databases. The two-armed
//! `match` over the backend is written here, once per method, instead of around whole method
//! bodies: the store's logic reads as plain functions that rustfmt, editors and the compiler's
//! errors handle like any other code.
//!
//! How a transaction begins is a backend fact; it comes from the [`Dialect`](crate::queries::Dialect)
//! (`begin_write`, `begin_snapshot`, `begin_rollup`) and is passed to [`Db::begin`].

use crate::queries::{bind_values, SqlBuf};
use crate::Db;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

/// A row type the store reads from both databases (every `#[derive(sqlx::FromRow)]` struct of
/// `crate::rows`, and tuples of plain values such as `(i64,)`).
pub(crate) trait BothRows:
    for<'r> sqlx::FromRow<'r, PgRow> + for<'r> sqlx::FromRow<'r, SqliteRow> + Send + Unpin
{
}

impl<T> BothRows for T where
    T: for<'r> sqlx::FromRow<'r, PgRow> + for<'r> sqlx::FromRow<'r, SqliteRow> + Send + Unpin
{
}

/// An open transaction on either backend. Dropped without [`Tx::commit`], it rolls back.
pub(crate) enum Tx {
    Postgres(sqlx::Transaction<'static, sqlx::Postgres>),
    Sqlite(sqlx::Transaction<'static, sqlx::Sqlite>),
}

impl Db {
    /// Begins a transaction with `begin` (a statement of the backend's dialect, such as
    /// `BEGIN IMMEDIATE` on SQLite: see `Dialect::begin_write`).
    pub(crate) async fn begin(&self, begin: &'static str) -> Result<Tx, sqlx::Error> {
        Ok(match self {
            Db::Postgres(pool) => Tx::Postgres(pool.begin_with(begin).await?),
            Db::Sqlite(pool) => Tx::Sqlite(pool.begin_with(begin).await?),
        })
    }

    fn exec(&self) -> Exec<'_> {
        match self {
            Db::Postgres(pool) => Exec::PgPool(pool),
            Db::Sqlite(pool) => Exec::SqlitePool(pool),
        }
    }

    /// Every row the statement returns.
    pub(crate) async fn fetch_all<T: BothRows>(&self, q: &SqlBuf) -> Result<Vec<T>, sqlx::Error> {
        self.exec().fetch_all(q).await
    }

    /// The first row, if any.
    pub(crate) async fn fetch_optional<T: BothRows>(&self, q: &SqlBuf) -> Result<Option<T>, sqlx::Error> {
        self.exec().fetch_optional(q).await
    }

    /// Exactly one row (`RowNotFound` otherwise).
    pub(crate) async fn fetch_one<T: BothRows>(&self, q: &SqlBuf) -> Result<T, sqlx::Error> {
        self.exec().fetch_one(q).await
    }

    /// Runs a statement for its effect; how many rows it changed.
    pub(crate) async fn execute(&self, q: &SqlBuf) -> Result<u64, sqlx::Error> {
        self.exec().execute(q).await
    }
}

impl Tx {
    pub(crate) async fn commit(self) -> Result<(), sqlx::Error> {
        match self {
            Tx::Postgres(tx) => tx.commit().await,
            Tx::Sqlite(tx) => tx.commit().await,
        }
    }

    fn exec(&mut self) -> Exec<'_> {
        match self {
            Tx::Postgres(tx) => Exec::PgConn(tx),
            Tx::Sqlite(tx) => Exec::SqliteConn(tx),
        }
    }

    /// Every row the statement returns.
    pub(crate) async fn fetch_all<T: BothRows>(&mut self, q: &SqlBuf) -> Result<Vec<T>, sqlx::Error> {
        self.exec().fetch_all(q).await
    }

    /// The first row, if any.
    pub(crate) async fn fetch_optional<T: BothRows>(&mut self, q: &SqlBuf) -> Result<Option<T>, sqlx::Error> {
        self.exec().fetch_optional(q).await
    }

    /// Exactly one row (`RowNotFound` otherwise).
    pub(crate) async fn fetch_one<T: BothRows>(&mut self, q: &SqlBuf) -> Result<T, sqlx::Error> {
        self.exec().fetch_one(q).await
    }

    /// Runs a statement for its effect; how many rows it changed.
    pub(crate) async fn execute(&mut self, q: &SqlBuf) -> Result<u64, sqlx::Error> {
        self.exec().execute(q).await
    }
}

/// Where a statement runs: a pool or a connection (a transaction's), of either backend.
enum Exec<'a> {
    PgPool(&'a sqlx::PgPool),
    PgConn(&'a mut sqlx::PgConnection),
    SqlitePool(&'a sqlx::SqlitePool),
    SqliteConn(&'a mut sqlx::SqliteConnection),
}

/// `$body` with `$c` bound to the executor, compiled once per kind of executor (sqlx checks the
/// statement's types against each driver).
macro_rules! on_executor {
    ($exec:expr, $c:ident => $body:expr) => {
        match $exec {
            Exec::PgPool($c) => $body,
            Exec::PgConn($c) => $body,
            Exec::SqlitePool($c) => $body,
            Exec::SqliteConn($c) => $body,
        }
    };
}

impl Exec<'_> {
    async fn fetch_all<T: BothRows>(self, q: &SqlBuf) -> Result<Vec<T>, sqlx::Error> {
        on_executor!(self, c => bind_values!(sqlx::query_as::<_, T>(&q.sql), &q.args).fetch_all(c).await)
    }

    async fn fetch_optional<T: BothRows>(self, q: &SqlBuf) -> Result<Option<T>, sqlx::Error> {
        on_executor!(self, c => bind_values!(sqlx::query_as::<_, T>(&q.sql), &q.args).fetch_optional(c).await)
    }

    async fn fetch_one<T: BothRows>(self, q: &SqlBuf) -> Result<T, sqlx::Error> {
        on_executor!(self, c => bind_values!(sqlx::query_as::<_, T>(&q.sql), &q.args).fetch_one(c).await)
    }

    async fn execute(self, q: &SqlBuf) -> Result<u64, sqlx::Error> {
        on_executor!(self, c => bind_values!(sqlx::query(&q.sql), &q.args).execute(c).await.map(|done| done.rows_affected()))
    }
}
