//! `lastword_store::explain`: the statements it hands out are the ones the store runs — each
//! executes on a migrated PostgreSQL database with its arguments, returns the rows the store's
//! own read returns, and the counting reads go to the rollups rather than to all of `runs`.

use chrono::{DateTime, Duration, TimeZone, Utc};
use lastword_core::{PageRequest, RunFilter, Tokens};
use lastword_store::explain;
use lastword_store::testing::{insert_task, postgres, scalar};
use lastword_store::{store_for, Db};

fn now() -> DateTime<Utc> {
    Utc.timestamp_opt(1_800_000_000, 0).unwrap()
}

/// Three runs of one task an hour ago: one timed out, one crashed, one replied.
async fn three_runs(db: &Db) -> i64 {
    let at = now() - Duration::hours(1);
    let task = insert_task(db, "reply", "unsafe", at).await;
    for (epoch, output, error) in
        [(1i64, None, Some("timeout")), (2, None, Some("crash")), (3, Some("replied"), None)]
    {
        scalar(
            db,
            "INSERT INTO runs (task_id, worker, lease_epoch, claimed_at, lease_expires_at, finished_at, \
             completion_rows, output, error) VALUES ($1, 'w1', $2, $3, $4, $4, 1, $5, $6) RETURNING id",
            &[
                task.into(),
                epoch.into(),
                at.into(),
                (at + Duration::seconds(30)).into(),
                output.into(),
                error.into(),
            ],
        )
        .await;
    }
    task
}

#[tokio::test]
async fn hot_read_statements_are_the_stores_own_on_postgres() {
    let Some(db) = postgres("hot_read_statements_are_the_stores_own_on_postgres").await else { return };
    let Db::Postgres(pool) = &db else { unreachable!() };
    let task = three_runs(&db).await;
    let store = store_for(db.clone(), Tokens::default());
    store.refresh_rollups(now()).await.unwrap();
    let tokens = Tokens::default();

    let reads = explain::hot_reads(task, now(), &tokens);
    let names: Vec<&str> = reads.iter().map(|s| s.name.as_str()).collect();
    for expected in [
        "failures_default",
        "facets_all_time",
        "overview_7d_counts",
        "workers_24h_activity",
        "timeline_15m",
        "task_runs",
    ] {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }
    for statement in &reads {
        statement
            .fetch_count(pool)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", statement.name, statement.sql()));
        let plan = statement.explain(pool).await.unwrap();
        assert!(plan.contains("Execution Time"), "{}: {plan}", statement.name);
    }

    // The same rows as the store's reads.
    let by_name = |n: &str| reads.iter().find(|s| s.name == n).unwrap();
    let failures = store.list_runs(&explain::failure_filter(), &PageRequest::default(), now()).await.unwrap();
    assert_eq!(failures.runs.len(), 2);
    assert_eq!(by_name("failures_default").fetch_count(pool).await.unwrap(), 2);
    let all = store.list_runs(&RunFilter::default(), &PageRequest::default(), now()).await.unwrap();
    assert_eq!(by_name("all_runs").fetch_count(pool).await.unwrap(), all.runs.len());
    assert_eq!(by_name("cause_timeout").fetch_count(pool).await.unwrap(), 1);
    assert_eq!(by_name("task_runs").fetch_count(pool).await.unwrap(), 3);

    // Counting reads are answered from the rollups, with raw runs only for the uncovered edges.
    for name in
        ["facets_all_time", "facets_24h", "overview_1h_counts", "overview_24h_counts", "overview_7d_counts"]
    {
        assert!(by_name(name).sql().contains("run_rollups"), "{name} does not read the rollups");
    }
    assert!(by_name("workers_24h_activity").sql().contains("worker_rollups"));
    // The lease report reads `runs` through its indexes even where reading the whole table is
    // cheaper (three analyzed runs here), as the store runs it: so a planner that mistakes a
    // day of 10 M runs for rows scattered over the table does not read all of it either.
    let leases = by_name("leases_24h");
    sqlx::query("ANALYZE").execute(pool).await.unwrap();
    let plan = leases.explain(pool).await.unwrap();
    assert!(!explain::scans_runs(&plan), "{plan}");
    assert!(explain::scans_runs("  ->  Seq Scan on runs r  (cost=0.00..1.00 rows=1 width=8)"));
    assert!(!explain::scans_runs("  ->  Index Scan using runs_claimed_at on runs r"));
    lastword_store::testing::discard_postgres(db).await;
}
