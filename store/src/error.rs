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
    /// A query failed for a reason other than connectivity.
    #[error("database error: {0}")]
    Query(#[source] sqlx::Error),
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
}
