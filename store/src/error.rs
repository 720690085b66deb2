//! The store's one error type. Callers map it to HTTP once, at the boundary.

/// What can go wrong talking to the database.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The target could not be understood (bad URL, unsupported scheme). Not retryable.
    #[error("database configuration: {0}")]
    Config(String),
    /// The database is unreachable or refused the connection. Retryable: shown as "database down".
    #[error("database unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    /// Migrations failed to apply.
    #[error("migrations failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// PostgreSQL cancelled a statement that ran past the session's `statement_timeout`
    /// (`STATEMENT_TIMEOUT`): the request asked for more than the database could answer in
    /// time. Retryable, usually with a narrower window.
    #[error("the query ran longer than {}s and was cancelled; narrow the window or filter", crate::connect::STATEMENT_TIMEOUT.as_secs())]
    TooSlow(#[source] sqlx::Error),
    /// A query failed for a reason other than connectivity.
    #[error("database error: {0}")]
    Query(#[source] sqlx::Error),
    /// Too many heavy reads were in flight on this server to start another in time
    /// (`SharedReads`' bound): refused before touching the database. Retryable at once.
    #[error("too many heavy reads in flight ({0} at once); try again in a moment")]
    Busy(usize),
    /// One of the above, met by a read that several callers shared (`SharedReads`): each of
    /// them gets the same error.
    #[error(transparent)]
    Shared(std::sync::Arc<StoreError>),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match e {
            sqlx::Error::Io(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Tls(_) => StoreError::Unavailable(e),
            // 57014 query_canceled: our statement_timeout (nobody else cancels our queries).
            sqlx::Error::Database(ref db) if db.code().as_deref() == Some("57014") => StoreError::TooSlow(e),
            other => StoreError::Query(other),
        }
    }
}

impl StoreError {
    /// True when the database could not be reached (as opposed to a bad query).
    pub fn is_unavailable(&self) -> bool {
        match self {
            StoreError::Unavailable(_) => true,
            StoreError::Shared(e) => e.is_unavailable(),
            _ => false,
        }
    }

    /// True when the statement was cancelled for running too long (see [`StoreError::TooSlow`]).
    /// Also true for [`StoreError::Busy`]: both are a 503 that says the server could not answer
    /// this read in time, and a retry (or a narrower window) may succeed.
    pub fn is_too_slow(&self) -> bool {
        match self {
            StoreError::TooSlow(_) | StoreError::Busy(_) => true,
            StoreError::Shared(e) => e.is_too_slow(),
            _ => false,
        }
    }
}
