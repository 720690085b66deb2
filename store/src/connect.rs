//! Choosing and opening the database: a `postgres://` URL selects PostgreSQL (the database is
//! created if it does not exist yet); no URL, or a `sqlite:` URL, selects an embedded SQLite
//! file in WAL mode. Migrations are embedded in the binary, one directory per dialect with the
//! same numbers and names.

use crate::StoreError;
use sqlx::migrate::{MigrateDatabase, Migrator};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::ConnectOptions;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

/// Settings of every PostgreSQL session the store opens. JIT off: the dashboard's statements
/// are short index lookups whose row estimates can be far off (ranges bound at run time); JIT
/// compiling them cost 0.5-0.6 s a statement in the counts benchmark (docs/counts.md) and never
/// pays back. `explain` applies the same settings, so its plans are the server's.
///
/// `statement_timeout`: no statement of the dashboard (or of a runner using this store) runs
/// longer than [`STATEMENT_TIMEOUT`]; PostgreSQL cancels it, the connection goes back to the
/// pool and the request gets a 503 that says so ([`crate::StoreError::TooSlow`]), so a slow
/// query can neither hold a connection past the request's own 30 s limit nor starve the pool.
/// Migrations lift it for their own connection ([`Db::migrate`]): an index on 10 M rows may take
/// minutes.
pub(crate) const PG_SESSION_SETTINGS: &[(&str, &str)] = &[("jit", "off"), ("statement_timeout", "20s")];

/// Applies `settings` to the rest of `tx` only (`SET LOCAL`): a statement that needs its own
/// planner or memory settings runs in a transaction of its own with them.
pub(crate) async fn set_local(
    conn: &mut sqlx::PgConnection,
    settings: &[(&str, &str)],
) -> Result<(), sqlx::Error> {
    for (name, value) in settings {
        sqlx::query("SELECT set_config($1, $2, true)").bind(*name).bind(*value).execute(&mut *conn).await?;
    }
    Ok(())
}

/// The `statement_timeout` of every session (see [`PG_SESSION_SETTINGS`]).
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(20);

pub(crate) static PG_MIGRATOR: Migrator = sqlx::migrate!("../migrations/postgres");
pub(crate) static SQLITE_MIGRATOR: Migrator = sqlx::migrate!("../migrations/sqlite");

/// Which database a [`Db`] talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Postgres => "postgres",
            Backend::Sqlite => "sqlite",
        }
    }

    /// How every write transaction begins, the runner's and the store's alike. SQLite takes the
    /// write lock up front (`BEGIN IMMEDIATE`): a deferred transaction that reads first could fail
    /// to upgrade to a writer instead of waiting for the lock, and two claims could pick the same
    /// candidate. PostgreSQL locks rows as it goes (`FOR UPDATE`).
    pub const fn begin_write(self) -> &'static str {
        match self {
            Backend::Postgres => "BEGIN",
            Backend::Sqlite => "BEGIN IMMEDIATE",
        }
    }
}

/// Where the data lives, decided once at start-up from `DATABASE_URL` / `--data-dir`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DbTarget {
    /// `postgres://` or `postgresql://`.
    Postgres(String),
    /// A SQLite file (created if missing).
    SqliteFile(PathBuf),
    /// A private in-memory SQLite database (tests).
    SqliteMemory,
}

impl DbTarget {
    /// `DATABASE_URL` if given, else `<data_dir>/lastword.db`.
    pub fn resolve(database_url: Option<&str>, data_dir: &std::path::Path) -> Result<DbTarget, StoreError> {
        match database_url.map(str::trim).filter(|u| !u.is_empty()) {
            None => Ok(DbTarget::SqliteFile(data_dir.join("lastword.db"))),
            Some(url) => DbTarget::from_url(url),
        }
    }

    pub fn from_url(url: &str) -> Result<DbTarget, StoreError> {
        let scheme = url.split(':').next().unwrap_or_default();
        match scheme {
            "postgres" | "postgresql" => Ok(DbTarget::Postgres(url.to_string())),
            "sqlite" => {
                let rest = url.trim_start_matches("sqlite:").trim_start_matches("//");
                let path = rest.split('?').next().unwrap_or_default();
                if path.is_empty() || path == ":memory:" {
                    Ok(DbTarget::SqliteMemory)
                } else {
                    Ok(DbTarget::SqliteFile(PathBuf::from(path)))
                }
            }
            _ => Err(StoreError::Config(format!(
                "DATABASE_URL: unsupported scheme {scheme:?}; use postgres://user@host:port/db or sqlite:path/to/file.db"
            ))),
        }
    }

    /// For logs: the target without any password.
    pub fn redacted(&self) -> String {
        match self {
            DbTarget::Postgres(url) => match url::Url::parse(url) {
                Ok(mut u) => {
                    if u.password().is_some() {
                        let _ = u.set_password(Some("***"));
                    }
                    u.to_string()
                }
                Err(_) => "postgres://(unparseable)".to_string(),
            },
            DbTarget::SqliteFile(p) => format!("sqlite:{}", p.display()),
            DbTarget::SqliteMemory => "sqlite::memory:".to_string(),
        }
    }
}

/// An open connection pool to one of the two backends.
#[derive(Clone, Debug)]
pub enum Db {
    Postgres(PgPool),
    Sqlite(SqlitePool),
}

impl Db {
    pub async fn connect(target: &DbTarget) -> Result<Db, StoreError> {
        match target {
            DbTarget::Postgres(url) => {
                if !sqlx::Postgres::database_exists(url).await? {
                    tracing::info!(target = %target.redacted(), "creating database");
                    // Two servers starting at once may race to create it; the loser's error is fine.
                    if let Err(e) = sqlx::Postgres::create_database(url).await {
                        if !sqlx::Postgres::database_exists(url).await? {
                            return Err(e.into());
                        }
                    }
                }
                let options = PgConnectOptions::from_str(url)
                    .map_err(|e| StoreError::Config(format!("DATABASE_URL: {e}")))?
                    .application_name("lastword")
                    .options(PG_SESSION_SETTINGS.iter().copied())
                    .log_slow_statements(tracing::log::LevelFilter::Warn, Duration::from_millis(500));
                let pool = PgPoolOptions::new()
                    .max_connections(16)
                    .acquire_timeout(Duration::from_secs(5))
                    .connect_with(options)
                    .await?;
                Ok(Db::Postgres(pool))
            }
            DbTarget::SqliteFile(path) => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir)
                        .map_err(|e| StoreError::Config(format!("data dir {}: {e}", dir.display())))?;
                }
                let options = SqliteConnectOptions::new().filename(path).create_if_missing(true);
                Self::sqlite(options, 8).await
            }
            // One connection: each in-memory connection would otherwise be its own database.
            DbTarget::SqliteMemory => {
                let options = SqliteConnectOptions::from_str("sqlite::memory:")
                    .map_err(|e| StoreError::Config(e.to_string()))?;
                Self::sqlite(options, 1).await
            }
        }
    }

    async fn sqlite(options: SqliteConnectOptions, max: u32) -> Result<Db, StoreError> {
        let options = options
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            // Writers queue on SQLite's lock instead of failing at once.
            .busy_timeout(Duration::from_secs(10))
            .log_slow_statements(tracing::log::LevelFilter::Warn, Duration::from_millis(500));
        let pool = SqlitePoolOptions::new()
            .max_connections(max)
            .min_connections(1)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await?;
        Ok(Db::Sqlite(pool))
    }

    pub fn backend(&self) -> Backend {
        match self {
            Db::Postgres(_) => Backend::Postgres,
            Db::Sqlite(_) => Backend::Sqlite,
        }
    }

    /// Applies every pending migration of this backend's dialect.
    /// On PostgreSQL on one connection with no statement timeout (restored before the
    /// connection goes back to the pool).
    pub async fn migrate(&self) -> Result<(), StoreError> {
        match self {
            Db::Postgres(pool) => {
                let mut conn = pool.acquire().await?;
                sqlx::query("SET statement_timeout = 0").execute(&mut *conn).await?;
                let migrated = PG_MIGRATOR.run(&mut *conn).await;
                sqlx::query("RESET statement_timeout").execute(&mut *conn).await?;
                migrated?
            }
            Db::Sqlite(pool) => SQLITE_MIGRATOR.run(pool).await?,
        }
        Ok(())
    }

    pub(crate) fn migrator(&self) -> &'static Migrator {
        match self {
            Db::Postgres(_) => &PG_MIGRATOR,
            Db::Sqlite(_) => &SQLITE_MIGRATOR,
        }
    }

    pub async fn close(&self) {
        match self {
            Db::Postgres(p) => p.close().await,
            Db::Sqlite(p) => p.close().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_chosen_by_scheme() {
        let dir = std::path::Path::new("/data");
        assert_eq!(DbTarget::resolve(None, dir).unwrap(), DbTarget::SqliteFile("/data/lastword.db".into()));
        assert_eq!(
            DbTarget::resolve(Some("  "), dir).unwrap(),
            DbTarget::SqliteFile("/data/lastword.db".into())
        );
        assert_eq!(
            DbTarget::resolve(Some("postgres://u@h/db"), dir).unwrap(),
            DbTarget::Postgres("postgres://u@h/db".into())
        );
        assert_eq!(
            DbTarget::from_url("sqlite:x/y.db?mode=rwc").unwrap(),
            DbTarget::SqliteFile("x/y.db".into())
        );
        assert_eq!(DbTarget::from_url("sqlite::memory:").unwrap(), DbTarget::SqliteMemory);
        let err = DbTarget::from_url("mysql://h/db").unwrap_err().to_string();
        assert!(err.contains("unsupported scheme \"mysql\""), "{err}");
    }

    #[test]
    fn passwords_never_reach_logs() {
        let t = DbTarget::from_url("postgres://bob:hunter2@db:5432/x").unwrap();
        assert!(!t.redacted().contains("hunter2"));
        assert!(t.redacted().contains("bob"));
    }
}
