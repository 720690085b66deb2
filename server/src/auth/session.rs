//! Login sessions, kept in the dashboard's own database so that any number of `lastword serve`
//! processes behind a load balancer share them (a browser may land on a different one on every
//! request). One `tower-sessions-sqlx-store` store per backend, behind one enum.
//!
//! Why the bridging: `tower-sessions-sqlx-store` 0.15 implements the `SessionStore` trait of
//! `tower-sessions-core` 0.14, while `tower-sessions` 0.15 asks for the one of core 0.15. The
//! two traits and records are identical field for field, so [`SessionBackend`] implements the
//! 0.15 trait by converting and delegating.

use lastword_store::Db;
use std::time::Duration;
use tower_sessions::cookie::SameSite;
use tower_sessions::session::{Id, Record};
use tower_sessions::session_store::{self, SessionStore};
use tower_sessions::{Expiry, SessionManagerLayer};
use tower_sessions_core_014 as core014;
use tower_sessions_core_014::{ExpiredDeletion as _, SessionStore as _};
use tower_sessions_sqlx_store::{PostgresStore, SqliteStore};

/// The session cookie's name.
pub const COOKIE_NAME: &str = "lastword_session";
/// A session ends after this long without a request.
pub const INACTIVITY: Duration = Duration::from_secs(12 * 3600);
/// How often expired sessions are swept from the database.
const SWEEP_EVERY: Duration = Duration::from_secs(3600);
/// A session ends this long after sign-in however active it is: a stolen cookie (a shared
/// machine, a leaked HAR file) stops working within a week, while one person's on-call shift
/// is never cut mid-week by it.
pub const ABSOLUTE_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);
/// The session key holding the signed-in user's name.
pub const USER_KEY: &str = "user";
/// The session key holding when the user signed in (Unix milliseconds).
pub const SIGNED_IN_AT_KEY: &str = "signed_in_at_ms";

/// Now in Unix milliseconds, as [`SIGNED_IN_AT_KEY`] holds it.
pub fn unix_millis_now() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Whether a session signed in at `signed_in_at_ms` (absent: a session from before the
/// absolute lifetime existed, whose age cannot be known) has outlived `lifetime` at `now_ms`.
pub fn outlived(signed_in_at_ms: Option<i64>, lifetime: Duration, now_ms: i64) -> bool {
    match signed_in_at_ms {
        Some(at) => now_ms.saturating_sub(at) > i64::try_from(lifetime.as_millis()).unwrap_or(i64::MAX),
        None => true,
    }
}

/// The session store on whichever database the dashboard uses.
#[derive(Clone, Debug)]
pub enum SessionBackend {
    Postgres(PostgresStore),
    Sqlite(SqliteStore),
}

impl SessionBackend {
    /// The store on `db`, its table created if missing (`tower_sessions.session` on
    /// PostgreSQL, `tower_sessions` on SQLite).
    pub async fn open(db: &Db) -> anyhow::Result<SessionBackend> {
        let backend = match db {
            Db::Postgres(pool) => SessionBackend::Postgres(PostgresStore::new(pool.clone())),
            Db::Sqlite(pool) => SessionBackend::Sqlite(SqliteStore::new(pool.clone())),
        };
        match &backend {
            SessionBackend::Postgres(s) => s.migrate().await,
            SessionBackend::Sqlite(s) => s.migrate().await,
        }
        .map_err(|e| anyhow::anyhow!("creating the session table: {e}"))?;
        Ok(backend)
    }

    /// Sweeps expired sessions every hour, for as long as the process runs.
    pub fn spawn_sweeper(&self) -> tokio::task::JoinHandle<()> {
        let backend = self.clone();
        tokio::spawn(async move {
            let result = match backend {
                SessionBackend::Postgres(s) => s.continuously_delete_expired(SWEEP_EVERY).await,
                SessionBackend::Sqlite(s) => s.continuously_delete_expired(SWEEP_EVERY).await,
            };
            if let Err(e) = result {
                tracing::error!(error = %e, "expired-session sweeper stopped");
            }
        })
    }

    /// The layer that loads and saves sessions: cookie `lastword_session`, HttpOnly,
    /// SameSite=Lax (Strict would drop the cookie when someone follows a link from a chat
    /// alert), `Secure` when asked, 12 hours of inactivity (and [`ABSOLUTE_LIFETIME`] after
    /// sign-in, checked by the auth middleware).
    pub fn layer(&self, secure: bool) -> SessionManagerLayer<SessionBackend> {
        SessionManagerLayer::new(self.clone())
            .with_name(COOKIE_NAME)
            .with_http_only(true)
            .with_same_site(SameSite::Lax)
            .with_secure(secure)
            .with_path("/")
            // Saved on every request, so the inactivity clock restarts.
            .with_always_save(true)
            .with_expiry(Expiry::OnInactivity(tower_sessions::cookie::time::Duration::seconds(
                INACTIVITY.as_secs() as i64,
            )))
    }
}

fn to_old(r: &Record) -> core014::session::Record {
    core014::session::Record {
        id: core014::session::Id(r.id.0),
        data: r.data.clone(),
        expiry_date: r.expiry_date,
    }
}

fn from_old(r: core014::session::Record) -> Record {
    Record { id: Id(r.id.0), data: r.data, expiry_date: r.expiry_date }
}

fn err(e: core014::session_store::Error) -> session_store::Error {
    match e {
        core014::session_store::Error::Encode(m) => session_store::Error::Encode(m),
        core014::session_store::Error::Decode(m) => session_store::Error::Decode(m),
        core014::session_store::Error::Backend(m) => session_store::Error::Backend(m),
    }
}

#[async_trait::async_trait]
impl SessionStore for SessionBackend {
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        let mut old = to_old(record);
        match self {
            SessionBackend::Postgres(s) => s.create(&mut old).await,
            SessionBackend::Sqlite(s) => s.create(&mut old).await,
        }
        .map_err(err)?;
        // The store may have picked another id to avoid a collision.
        record.id = Id(old.id.0);
        Ok(())
    }

    async fn save(&self, record: &Record) -> session_store::Result<()> {
        let old = to_old(record);
        match self {
            SessionBackend::Postgres(s) => s.save(&old).await,
            SessionBackend::Sqlite(s) => s.save(&old).await,
        }
        .map_err(err)
    }

    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        let id = core014::session::Id(id.0);
        match self {
            SessionBackend::Postgres(s) => s.load(&id).await,
            SessionBackend::Sqlite(s) => s.load(&id).await,
        }
        .map(|r| r.map(from_old))
        .map_err(err)
    }

    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        let id = core014::session::Id(id.0);
        match self {
            SessionBackend::Postgres(s) => s.delete(&id).await,
            SessionBackend::Sqlite(s) => s.delete(&id).await,
        }
        .map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_ends_at_its_absolute_lifetime_and_one_of_unknown_age_has_ended() {
        let day = Duration::from_secs(86_400);
        let signed_in = 1_700_000_000_000;
        assert!(!outlived(Some(signed_in), day, signed_in + 86_400_000));
        assert!(outlived(Some(signed_in), day, signed_in + 86_400_001));
        assert!(!outlived(Some(signed_in), day, signed_in - 5_000), "a clock step back is not an expiry");
        assert!(outlived(None, day, signed_in));
    }
}
