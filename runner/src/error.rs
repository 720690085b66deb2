//! The runner's one error type, so a worker loop can tell "try again" from "stop".

/// What can go wrong talking the contract to the database.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The database refused or failed a statement. See [`RunnerError::is_transient`].
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    /// A row holds a value outside the contract's vocabulary (written by something else).
    #[error("task {task_id}: {message}")]
    Corrupt { task_id: i64, message: String },
    /// The task a lease points at no longer exists (deleted by hand).
    #[error("task {0} no longer exists")]
    TaskMissing(i64),
    /// The run was already finished: a lease is finished at most once.
    #[error("run {0} was already finished")]
    AlreadyFinished(i64),
    /// A trace id outside the contract's rule (`lastword_core::trace::check_trace_id`).
    #[error("{0}")]
    BadTraceId(#[from] lastword_core::trace::BadTraceId),
}

impl RunnerError {
    /// True for failures worth retrying as they are: lock contention (SQLite `database is
    /// locked`/busy, PostgreSQL serialization failures and deadlocks), a pool that timed out, or a
    /// dropped connection. Every runner statement runs in a transaction that rolls back on error,
    /// so retrying the same call is safe.
    pub fn is_transient(&self) -> bool {
        let RunnerError::Db(e) = self else {
            return false;
        };
        match e {
            sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::WorkerCrashed => true,
            sqlx::Error::Database(db) => {
                let code = db.code().unwrap_or_default();
                if db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>().is_some() {
                    // SQLSTATE: serialization failure, deadlock, lock not available, shutdown,
                    // connection exceptions.
                    matches!(
                        code.as_ref(),
                        "40001" | "40P01" | "55P03" | "57P01" | "08000" | "08003" | "08006"
                    )
                } else {
                    // SQLite's extended result code; the primary code is its low byte.
                    code.parse::<i32>().is_ok_and(|n| matches!(n & 0xff, 5 /* BUSY */ | 6 /* LOCKED */))
                }
            }
            _ => false,
        }
    }
}

pub type Result<T, E = RunnerError> = std::result::Result<T, E>;
