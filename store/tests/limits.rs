//! The database-side limits of every PostgreSQL session the store opens: a statement that runs
//! past `STATEMENT_TIMEOUT` is cancelled by the server and reported as `TooSlow` (a 503 that
//! says "narrow the window"), never left running on a pooled connection; migrations run
//! without it. PostgreSQL only: SQLite has no statement timeout (its work is in-process and
//! bounded by the request timeout).

use lastword_store::testing::{discard_postgres, postgres};
use lastword_store::{Db, StoreError, STATEMENT_TIMEOUT};

#[tokio::test]
async fn every_session_has_the_statement_timeout_and_a_cancelled_statement_is_too_slow() {
    let Some(db) = postgres("limits").await else { return };
    let Db::Postgres(pool) = &db else { unreachable!("postgres() gives PostgreSQL") };
    // Migrations lifted it on their connection and put it back.
    db.migrate().await.unwrap();
    let mut shown = Vec::new();
    for _ in 0..3 {
        let mut conn = pool.acquire().await.unwrap();
        let value: String = sqlx::query_scalar("SHOW statement_timeout").fetch_one(&mut *conn).await.unwrap();
        shown.push(value);
    }
    assert_eq!(shown, vec![format!("{}s", STATEMENT_TIMEOUT.as_secs()); 3]);

    // The server cancels a statement past the limit (here lowered for the test's transaction)
    // and the store says what happened.
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("SET LOCAL statement_timeout = '50ms'").execute(&mut *tx).await.unwrap();
    let cancelled = sqlx::query("SELECT pg_sleep(2)").execute(&mut *tx).await.unwrap_err();
    drop(tx);
    let error = StoreError::from(cancelled);
    assert!(error.is_too_slow() && !error.is_unavailable(), "{error:?}");
    assert!(error.to_string().contains("narrow the window"), "{error}");
    discard_postgres(db).await;
}
