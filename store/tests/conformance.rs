//! The store conformance suite: every case runs on SQLite always and on PostgreSQL whenever
//! `TEST_DATABASE_URL` is set (required in CI via `LASTWORD_REQUIRE_POSTGRES=1`). A behaviour
//! that differs between the backends is a bug in one of them.

use chrono::{DateTime, Duration, TimeZone, Utc};
use lastword_core::{
    run_state, Attention, Cause, Cursor, HeldLease, PageRequest, RunFacts, RunFilter, RunListItem, RunState,
    Source, Tokens,
};
use lastword_store::testing::{exec, insert_task, raw_cause_facets, raw_overview, raw_workers, scalar, Arg};
use lastword_store::{store_for, Db, Store};
use std::sync::Arc;

fn t0() -> DateTime<Utc> {
    // Sub-second precision on purpose: SQLite compares timestamps as text.
    Utc.timestamp_opt(1_800_000_000, 123_456_000).unwrap()
}

fn store(db: Db) -> Arc<dyn Store> {
    store_for(db, Tokens::default())
}

async fn migrations_leave_the_store_ready(db: Db) {
    let s = store(db);
    let r = s.readiness().await;
    assert!(r.reachable);
    assert!(r.pending_migrations.is_empty(), "pending: {:?}", r.pending_migrations);
    assert!(r.is_ready());
    // Running them again changes nothing.
    s.db().migrate().await.expect("re-running migrations is a no-op");
}

async fn totals_count_rows(db: Db) {
    let s = store(db);
    assert_eq!(s.totals().await.unwrap().tasks, 0);
    let task = insert_task(s.db(), "reply", "unsafe", t0()).await;
    insert_run(s.db(), task, 1, "w1", t0(), None, None, None, None).await;
    let totals = s.totals().await.unwrap();
    assert_eq!((totals.tasks, totals.runs, totals.effects, totals.estimated), (1, 1, 0, false));
}

/// Past 100 000 rows PostgreSQL's totals are the catalogue's estimate (an exact count of 10 M
/// runs took 0.8 s a request), marked as estimated; smaller tables stay exact.
#[tokio::test]
async fn large_tables_total_from_the_catalogue_on_postgres() {
    let Some(db) =
        lastword_store::testing::postgres("large_tables_total_from_the_catalogue_on_postgres").await
    else {
        return;
    };
    let Db::Postgres(pool) = &db else { unreachable!() };
    lastword_store::testing::insert_completed_tasks(pool, 100_500).await;
    let s = store(db.clone());
    let task = insert_task(&db, "reply", "unsafe", t0()).await;
    insert_run(&db, task, 1, "w1", t0(), None, None, None, None).await;
    sqlx::query("ANALYZE tasks").execute(pool).await.unwrap();
    let estimated = s.totals().await.unwrap();
    assert!(estimated.estimated, "{estimated:?}");
    assert!((95_000..=106_000).contains(&estimated.tasks), "{estimated:?}");
    assert_eq!((estimated.runs, estimated.effects), (1, 0), "small tables stay exact");
    lastword_store::testing::discard_postgres(db).await;
}

async fn task_round_trips_every_column(db: Db) {
    let s = store(db);
    let id = insert_task(s.db(), "reply", "unsafe", t0()).await;
    let task = s.task(id).await.unwrap().expect("task exists");
    assert_eq!(task.kind, "reply");
    assert_eq!(task.safety.as_str(), "unsafe");
    assert_eq!(task.source.as_str(), "notification");
    assert_eq!(task.status.as_str(), "queued");
    assert_eq!(task.payload, serde_json::json!({"n": 1}));
    assert_eq!(task.lease_epoch, 0);
    assert_eq!(task.max_attempts, 3);
    assert_eq!(task.owner, None);
    assert_eq!(task.created_at, t0(), "timestamps keep sub-second precision");
    assert!(s.task(id + 1000).await.unwrap().is_none());
}

#[allow(clippy::too_many_arguments)]
async fn insert_run(
    db: &Db,
    task: i64,
    epoch: i64,
    worker: &str,
    expires: DateTime<Utc>,
    finished: Option<DateTime<Utc>>,
    rows: Option<i64>,
    error: Option<&str>,
    output: Option<&str>,
) -> i64 {
    scalar(
        db,
        "INSERT INTO runs (task_id, worker, lease_epoch, claimed_at, lease_expires_at, finished_at, \
         completion_rows, error, output) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
        &[
            task.into(),
            worker.into(),
            epoch.into(),
            (expires - Duration::seconds(30)).into(),
            expires.into(),
            finished.into(),
            Arg::I64(rows),
            error.into(),
            output.into(),
        ],
    )
    .await
}

/// The SQL twin and `lastword_core::run_state` agree on every combination of the deciding
/// columns, including lease expiry at, just before and just after `now`.
async fn state_sql_twin_agrees_with_rust(db: Db) {
    let s = store(db);
    let now = t0();
    let task = insert_task(s.db(), "reply", "idempotent", now).await;
    let finished = [None, Some(now - Duration::seconds(5))];
    let expiries =
        [now - Duration::milliseconds(1), now, now + Duration::milliseconds(1), now + Duration::minutes(1)];
    let rows = [None, Some(0), Some(1)];
    let errors = [None, Some("timeout"), Some("crash")];
    let outputs = [
        None,
        Some(""),
        Some("  \t\n"),
        Some("no action needed"),
        Some(" skip\n"),
        Some("Skip"),
        Some("sent reply"),
    ];
    let mut epoch = 0;
    for f in finished {
        for e in expiries {
            for r in rows {
                for err in errors {
                    for o in outputs {
                        epoch += 1;
                        insert_run(s.db(), task, epoch, "w", e, f, r, err, o).await;
                    }
                }
            }
        }
    }
    let runs = s.task_runs(task, now).await.unwrap();
    assert_eq!(runs.len() as i64, epoch);
    let mut seen = std::collections::HashSet::new();
    for run in &runs {
        let expected = run_state(&run.facts(), now, s.tokens());
        assert_eq!((run.state, run.cause), expected, "run {run:?}");
        seen.insert(run.state);
    }
    assert_eq!(seen.len(), RunState::ALL.len(), "every state was exercised: {seen:?}");
    // One lookup by id agrees with the list.
    let one = s.run(runs[0].id, now).await.unwrap().unwrap();
    assert_eq!(one, runs[0]);
}

async fn custom_tokens_reach_the_sql_twin(db: Db) {
    let s = store_for(db, Tokens { no_action: " NOOP ".into(), skip: "idle".into() });
    let now = t0();
    let task = insert_task(s.db(), "reply", "idempotent", now).await;
    let done = Some(now - Duration::seconds(1));
    insert_run(s.db(), task, 1, "w", now, done, Some(1), None, Some("NOOP")).await;
    insert_run(s.db(), task, 2, "w", now, done, Some(1), None, Some("idle")).await;
    insert_run(s.db(), task, 3, "w", now, done, Some(1), None, Some("skip")).await;
    let states: Vec<_> = s.task_runs(task, now).await.unwrap().iter().map(|r| r.state).collect();
    assert_eq!(states, vec![RunState::NoAction, RunState::Skip, RunState::Acted]);
}

async fn failure_causes_come_from_the_error_column(db: Db) {
    let s = store(db);
    let now = t0();
    let task = insert_task(s.db(), "reply", "idempotent", now).await;
    let done = Some(now);
    insert_run(s.db(), task, 1, "w", now, done, Some(1), Some("context_overflow"), None).await;
    let run = &s.task_runs(task, now).await.unwrap()[0];
    assert_eq!((run.state, run.cause), (RunState::Failed, Some(Cause::ContextOverflow)));
}

async fn schema_rejects_what_the_contract_forbids(db: Db) {
    let s = store(db);
    let now = t0();
    let task = insert_task(s.db(), "reply", "idempotent", now).await;
    insert_run(s.db(), task, 1, "w1", now, None, None, None, None).await;
    // Two runs of one task under one epoch would defeat fencing.
    let dup = match s.db() {
        Db::Postgres(p) => sqlx::query("INSERT INTO runs (task_id, worker, lease_epoch, claimed_at, lease_expires_at) VALUES ($1, 'w2', 1, $2, $2)")
            .bind(task).bind(now).execute(p).await.map(|_| ()),
        Db::Sqlite(p) => sqlx::query("INSERT INTO runs (task_id, worker, lease_epoch, claimed_at, lease_expires_at) VALUES ($1, 'w2', 1, $2, $2)")
            .bind(task).bind(now).execute(p).await.map(|_| ()),
    };
    assert!(dup.is_err(), "a second run under the same epoch is refused");
    let bad_status = match s.db() {
        Db::Postgres(p) => sqlx::query("UPDATE tasks SET status = 'done' WHERE id = $1")
            .bind(task)
            .execute(p)
            .await
            .map(|_| ()),
        Db::Sqlite(p) => sqlx::query("UPDATE tasks SET status = 'done' WHERE id = $1")
            .bind(task)
            .execute(p)
            .await
            .map(|_| ()),
    };
    assert!(bad_status.is_err(), "status outside the vocabulary is refused");
    assert_eq!(scalar(s.db(), "SELECT COUNT(*) FROM runs", &[]).await, 1);
}

async fn effects_and_audit_read_back_in_order(db: Db) {
    let s = store(db);
    let now = t0();
    let task = insert_task(s.db(), "reply", "unsafe", now).await;
    let r1 = insert_run(s.db(), task, 1, "w1", now, None, None, None, None).await;
    let r2 = insert_run(s.db(), task, 2, "w2", now, None, None, None, None).await;
    for (run, epoch, at) in [(r1, 1, now), (r2, 2, now + Duration::seconds(1))] {
        exec(
            s.db(),
            "INSERT INTO effects (run_id, task_id, lease_epoch, kind, idempotency_key, created_at) VALUES ($1, $2, $3, 'send', 'k1', $4)",
            &[run.into(), task.into(), Arg::I64(Some(epoch)), at.into()],
        )
        .await;
    }
    let effects = s.task_effects(task).await.unwrap();
    assert_eq!(effects.iter().map(|e| e.lease_epoch).collect::<Vec<_>>(), vec![1, 2]);
    assert!(effects.iter().all(|e| e.idempotency_key == "k1"));
    for (i, at) in [now, now + Duration::seconds(5)].into_iter().enumerate() {
        exec(
            s.db(),
            "INSERT INTO operator_actions (task_id, action, actor, reason, outcome, created_at) VALUES ($1, 'requeue', $2, 'r', 'applied', $3)",
            &[task.into(), format!("op{i}").as_str().into(), at.into()],
        )
        .await;
    }
    let actions = s.task_actions(task).await.unwrap();
    assert_eq!(
        actions.iter().map(|a| a.actor.as_str()).collect::<Vec<_>>(),
        vec!["op1", "op0"],
        "newest first"
    );
}

// ---- The dashboard's queries.

/// A `runs` row to insert, with defaults for an accepted run that acted 5 s after its claim.
#[derive(Clone, Debug)]
struct RunRow<'a> {
    task: i64,
    epoch: i64,
    worker: &'a str,
    claimed: DateTime<Utc>,
    expires: DateTime<Utc>,
    heartbeat: Option<DateTime<Utc>>,
    finished: Option<DateTime<Utc>>,
    rows: Option<i64>,
    error: Option<&'a str>,
    detail: Option<&'a str>,
    output: Option<&'a str>,
}

impl<'a> RunRow<'a> {
    fn new(task: i64, epoch: i64, worker: &'a str, claimed: DateTime<Utc>) -> Self {
        RunRow {
            task,
            epoch,
            worker,
            claimed,
            expires: claimed + Duration::seconds(30),
            heartbeat: None,
            finished: Some(claimed + Duration::seconds(5)),
            rows: Some(1),
            error: None,
            detail: None,
            output: Some("sent reply"),
        }
    }

    fn unfinished(mut self, expires: DateTime<Utc>) -> Self {
        self.finished = None;
        self.rows = None;
        self.output = None;
        self.expires = expires;
        self
    }

    fn failed(mut self, error: &'a str) -> Self {
        self.error = Some(error);
        self.output = None;
        self
    }

    fn output(mut self, output: Option<&'a str>) -> Self {
        self.output = output;
        self
    }

    fn lost(mut self) -> Self {
        self.rows = Some(0);
        self
    }

    async fn insert(&self, db: &Db) -> i64 {
        scalar(
            db,
            "INSERT INTO runs (task_id, worker, lease_epoch, claimed_at, lease_expires_at, heartbeat_at, \
             finished_at, completion_rows, error, error_detail, output) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id",
            &[
                self.task.into(),
                self.worker.into(),
                self.epoch.into(),
                self.claimed.into(),
                self.expires.into(),
                self.heartbeat.into(),
                self.finished.into(),
                Arg::I64(self.rows),
                self.error.into(),
                self.detail.into(),
                self.output.into(),
            ],
        )
        .await
    }
}

async fn new_task(db: &Db, kind: &str, source: &str, safety: &str, now: DateTime<Utc>) -> i64 {
    scalar(
        db,
        "INSERT INTO tasks (kind, source, safety, payload, created_at, updated_at) \
         VALUES ($1, $2, $3, '{}', $4, $4) RETURNING id",
        &[kind.into(), source.into(), safety.into(), now.into()],
    )
    .await
}

async fn add_effect(db: &Db, run: i64, task: i64, epoch: i64, at: DateTime<Utc>) {
    exec(
        db,
        "INSERT INTO effects (run_id, task_id, lease_epoch, kind, idempotency_key, created_at) \
         VALUES ($1, $2, $3, 'send', 'k', $4)",
        &[run.into(), task.into(), epoch.into(), at.into()],
    )
    .await;
}

/// Follows `next` until it is null; panics on a loop.
async fn all_pages(s: &dyn Store, filter: &RunFilter, limit: u32, now: DateTime<Utc>) -> Vec<RunListItem> {
    let mut page = PageRequest { limit, after: None };
    let mut out = Vec::new();
    for _ in 0..10_000 {
        let p = s.list_runs(filter, &page, now).await.unwrap();
        assert!(p.runs.len() <= limit as usize);
        out.extend(p.runs);
        match p.next {
            None => return out,
            Some(next) => page.after = Some(Cursor::decode(&next).expect("next is a valid cursor")),
        }
    }
    panic!("pagination did not end");
}

fn ids(runs: &[RunListItem]) -> Vec<i64> {
    runs.iter().map(|r| r.run.id).collect()
}

/// Runs over every combination of the deciding columns (as in `state_sql_twin_agrees_with_rust`),
/// spread over claim times; returns their ids with the state and cause the Rust twin decides.
async fn every_kind_of_run(s: &dyn Store, now: DateTime<Utc>) -> Vec<(i64, RunState, Option<Cause>)> {
    let task = insert_task(s.db(), "reply", "idempotent", now).await;
    let finished = [None, Some(now - Duration::seconds(5))];
    let expiries = [now - Duration::milliseconds(1), now, now + Duration::minutes(1)];
    let rows = [None, Some(0), Some(1)];
    let errors = [None, Some("timeout"), Some("other"), Some("api_error")];
    let outputs = [None, Some(" \t\n"), Some("no action needed"), Some(" skip\n"), Some("sent reply")];
    let mut expected = Vec::new();
    let mut epoch = 0;
    for f in finished {
        for e in expiries {
            for r in rows {
                for err in errors {
                    for o in outputs {
                        epoch += 1;
                        // A few ties on claimed_at on purpose.
                        let claimed = now - Duration::seconds(60 + epoch / 3);
                        let row = RunRow {
                            expires: e,
                            finished: f,
                            rows: r,
                            error: err,
                            output: o,
                            ..RunRow::new(task, epoch, "w", claimed)
                        };
                        let id = row.insert(s.db()).await;
                        let facts = RunFacts {
                            finished_at: f,
                            lease_expires_at: e,
                            completion_rows: r.map(|r| r as i32),
                            error: err,
                            output: o,
                        };
                        let (state, cause) = run_state(&facts, now, s.tokens());
                        expected.push((id, state, cause));
                    }
                }
            }
        }
    }
    expected
}

/// Filtering by each state and each cause (sargable predicates in SQL) selects exactly the runs
/// the state function puts there; several at once select the union.
async fn state_and_cause_filters_agree_with_the_twin(db: Db) {
    let s = store(db);
    let now = t0();
    let expected = every_kind_of_run(s.as_ref(), now).await;
    let sorted = |mut v: Vec<i64>| {
        v.sort_unstable();
        v
    };
    for state in RunState::ALL {
        let filter = RunFilter { states: vec![state], ..RunFilter::default() };
        let got = sorted(ids(&all_pages(s.as_ref(), &filter, 500, now).await));
        let want = sorted(expected.iter().filter(|(_, st, _)| *st == state).map(|(id, _, _)| *id).collect());
        assert!(!want.is_empty(), "{state} exercised");
        assert_eq!(got, want, "state {state}");
    }
    for cause in Cause::ALL {
        let filter = RunFilter { causes: vec![cause], ..RunFilter::default() };
        let page = all_pages(s.as_ref(), &filter, 500, now).await;
        assert!(page.iter().all(|r| r.run.cause == Some(cause)), "{cause}: every row carries the cause");
        let got = sorted(ids(&page));
        let want =
            sorted(expected.iter().filter(|(_, _, c)| *c == Some(cause)).map(|(id, _, _)| *id).collect());
        if cause != Cause::Crash && cause != Cause::ContextOverflow {
            assert!(!want.is_empty(), "{cause} exercised");
        }
        assert_eq!(got, want, "cause {cause}");
    }
    // Several states: the union. States and causes: the intersection.
    let filter = RunFilter { states: vec![RunState::Skip, RunState::Silent], ..RunFilter::default() };
    let got = sorted(ids(&all_pages(s.as_ref(), &filter, 500, now).await));
    let want = sorted(
        expected
            .iter()
            .filter(|(_, st, _)| matches!(st, RunState::Skip | RunState::Silent))
            .map(|(id, _, _)| *id)
            .collect(),
    );
    assert_eq!(got, want);
    let filter = RunFilter {
        states: vec![RunState::Failed, RunState::LostLease],
        causes: vec![Cause::Timeout, Cause::Silent],
        ..RunFilter::default()
    };
    let got = sorted(ids(&all_pages(s.as_ref(), &filter, 500, now).await));
    let want = sorted(
        expected.iter().filter(|(_, _, c)| *c == Some(Cause::Timeout)).map(|(id, _, _)| *id).collect(),
    );
    assert_eq!(got, want);
}

async fn state_filters_use_the_configured_tokens(db: Db) {
    let s = store_for(db, Tokens { no_action: " NOOP ".into(), skip: "idle".into() });
    let now = t0();
    let task = insert_task(s.db(), "reply", "idempotent", now).await;
    let noop = RunRow::new(task, 1, "w", now).output(Some("NOOP")).insert(s.db()).await;
    let idle = RunRow::new(task, 2, "w", now).output(Some("idle\n")).insert(s.db()).await;
    let skip = RunRow::new(task, 3, "w", now).output(Some("skip")).insert(s.db()).await;
    for (state, id) in [(RunState::NoAction, noop), (RunState::Skip, idle), (RunState::Acted, skip)] {
        let filter = RunFilter { states: vec![state], ..RunFilter::default() };
        assert_eq!(ids(&all_pages(s.as_ref(), &filter, 10, now).await), vec![id], "{state}");
    }
}

/// Newest first by (claimed_at, id); following `next` visits every run exactly once even when
/// many share a claim time and a page boundary falls inside a tie; no empty last page.
async fn keyset_pagination_visits_every_run_once(db: Db) {
    let s = store(db);
    let now = t0();
    let a = insert_task(s.db(), "reply", "idempotent", now).await;
    let b = insert_task(s.db(), "digest", "idempotent", now).await;
    let mut all = Vec::new();
    for epoch in 1..=20 {
        // Five distinct claim times, four runs each (two tasks, interleaved ids).
        let claimed = now - Duration::milliseconds(250 * (epoch % 5));
        for task in [a, b] {
            let id = RunRow::new(task, epoch, "w", claimed).insert(s.db()).await;
            all.push((claimed, id));
        }
    }
    all.sort_by(|x, y| y.cmp(x));
    let want: Vec<i64> = all.iter().map(|(_, id)| *id).collect();
    for limit in [1, 3, 4, 7, 40, 41, 500] {
        let got = ids(&all_pages(s.as_ref(), &RunFilter::default(), limit, now).await);
        assert_eq!(got, want, "limit {limit}");
    }
    // Exactly one full page: no cursor to an empty page.
    let page =
        s.list_runs(&RunFilter::default(), &PageRequest { limit: 40, after: None }, now).await.unwrap();
    assert_eq!((page.runs.len(), page.next), (40, None));
    let page =
        s.list_runs(&RunFilter::default(), &PageRequest { limit: 39, after: None }, now).await.unwrap();
    let next = Cursor::decode(page.next.as_deref().expect("one more row")).unwrap();
    assert_eq!(next.id, page.runs[38].run.id);
    // Rows carry the task facts.
    assert!(page
        .runs
        .iter()
        .all(|r| r.source.as_str() == "notification" && r.safety.as_str() == "idempotent"));
    assert!(page.runs.iter().any(|r| r.kind == "digest"));
}

async fn filters_narrow_by_worker_kind_source_task_time_and_text(db: Db) {
    let s = store(db);
    let now = t0();
    let reply = new_task(s.db(), "reply", "notification", "unsafe", now).await;
    let digest = new_task(s.db(), "digest", "tick", "idempotent", now).await;
    let at = |m: i64| now - Duration::minutes(m);
    let r_percent = RunRow::new(reply, 1, "w1", at(50)).output(Some("gave 50% off")).insert(s.db()).await;
    let r_500 = RunRow::new(reply, 2, "w2", at(40)).output(Some("gave 500 off")).insert(s.db()).await;
    let r_under = RunRow::new(reply, 3, "w1", at(30)).output(Some("a_b")).insert(s.db()).await;
    let r_axb = RunRow::new(digest, 1, "w2", at(20)).output(Some("AXB")).insert(s.db()).await;
    let r_detail = RunRow { detail: Some("Rate LIMIT hit\\retry"), ..RunRow::new(digest, 2, "w1", at(10)) }
        .failed("api_error")
        .insert(s.db())
        .await;
    let query = |f: RunFilter| {
        let s = s.clone();
        async move {
            let mut got = ids(&all_pages(s.as_ref(), &f, 2, now).await);
            got.sort_unstable();
            got
        }
    };
    let f = RunFilter::default;
    assert_eq!(
        query(RunFilter { worker: Some("w1".into()), ..f() }).await,
        vec![r_percent, r_under, r_detail]
    );
    assert_eq!(query(RunFilter { kind: Some("digest".into()), ..f() }).await, vec![r_axb, r_detail]);
    assert_eq!(
        query(RunFilter { source: Some(Source::Notification), ..f() }).await,
        vec![r_percent, r_500, r_under]
    );
    assert_eq!(query(RunFilter { task_id: Some(digest), ..f() }).await, vec![r_axb, r_detail]);
    // since inclusive, until exclusive.
    assert_eq!(
        query(RunFilter { since: Some(at(40)), until: Some(at(20)), ..f() }).await,
        vec![r_500, r_under]
    );
    // Text: case-insensitive, over output, error and detail; % _ \ taken literally.
    assert_eq!(query(RunFilter { q: Some("50%".into()), ..f() }).await, vec![r_percent]);
    assert_eq!(query(RunFilter { q: Some("a_b".into()), ..f() }).await, vec![r_under]);
    assert_eq!(query(RunFilter { q: Some("axb".into()), ..f() }).await, vec![r_axb]);
    assert_eq!(query(RunFilter { q: Some("rate limit".into()), ..f() }).await, vec![r_detail]);
    assert_eq!(query(RunFilter { q: Some("API_ERR".into()), ..f() }).await, vec![r_detail]);
    assert_eq!(query(RunFilter { q: Some("hit\\retry".into()), ..f() }).await, vec![r_detail]);
    assert_eq!(query(RunFilter { q: Some("%".into()), ..f() }).await, vec![r_percent]);
    // Everything at once.
    let all = RunFilter {
        worker: Some("w1".into()),
        kind: Some("reply".into()),
        source: Some(Source::Notification),
        task_id: Some(reply),
        since: Some(at(60)),
        until: Some(now),
        q: Some("OFF".into()),
        states: vec![RunState::Acted],
        causes: vec![],
        reclaims: vec![],
    };
    assert_eq!(query(all).await, vec![r_percent]);
}

/// Facets count failures per cause for the filter with its own states and causes ignored; each
/// count is what the list gives for that cause, and they sum to the failures.
async fn cause_facets_count_what_each_cause_would_list(db: Db) {
    let s = store(db);
    let now = t0();
    let expected = every_kind_of_run(s.as_ref(), now).await;
    let other_task = insert_task(s.db(), "digest", "idempotent", now).await;
    RunRow::new(other_task, 1, "w9", now).failed("crash").insert(s.db()).await;
    let facets = s.cause_facets(&RunFilter::default(), now).await.unwrap();
    assert_eq!(facets.counts.iter().map(|(c, _)| *c).collect::<Vec<_>>(), Cause::ALL.to_vec());
    for (cause, n) in &facets.counts {
        let filter = RunFilter { causes: vec![*cause], ..RunFilter::default() };
        let listed = all_pages(s.as_ref(), &filter, 500, now).await.len() as i64;
        assert_eq!(*n, listed, "{cause}");
    }
    let failures = expected.iter().filter(|(_, st, _)| st.is_failure()).count() as i64 + 1;
    assert_eq!(facets.counts.iter().map(|(_, n)| n).sum::<i64>(), failures);
    // The filter's own selection does not change its facets.
    let selected =
        RunFilter { causes: vec![Cause::Timeout], states: vec![RunState::Acted], ..RunFilter::default() };
    assert_eq!(s.cause_facets(&selected, now).await.unwrap(), facets);
    // Other filters do.
    let narrowed = s
        .cause_facets(
            &RunFilter { worker: Some("w9".into()), kind: Some("digest".into()), ..RunFilter::default() },
            now,
        )
        .await
        .unwrap();
    let nonzero: Vec<_> = narrowed.counts.iter().filter(|(_, n)| *n > 0).cloned().collect();
    assert_eq!(nonzero, vec![(Cause::Crash, 1)]);
}

async fn overview_counts_the_window_and_what_needs_attention(db: Db) {
    let s = store(db);
    let since = t0();
    let until = since + Duration::hours(1);
    let now = until;
    let at = |m: i64| since + Duration::minutes(m);
    let db = s.db();
    // Before the window: not counted.
    let old = new_task(db, "reply", "notification", "unsafe", at(-90)).await;
    RunRow::new(old, 1, "w1", at(-90)).lost().insert(db).await;
    RunRow::new(old, 2, "w2", at(-80)).insert(db).await;
    // An unsafe task executed twice: a lost lease that acted, then the accepted re-run.
    let twice = new_task(db, "reply", "notification", "unsafe", at(1)).await;
    RunRow::new(twice, 1, "w1", at(1)).lost().insert(db).await;
    RunRow::new(twice, 2, "w2", at(2)).insert(db).await;
    // The same, compensated: not in need.
    let done = new_task(db, "reply", "notification", "unsafe", at(1)).await;
    RunRow::new(done, 1, "w1", at(3)).lost().insert(db).await;
    RunRow::new(done, 2, "w2", at(4)).insert(db).await;
    exec(db, "UPDATE tasks SET compensated_at = $1 WHERE id = $2", &[at(30).into(), done.into()]).await;
    // Idempotent and executed twice: harmless.
    let idem = new_task(db, "reply", "notification", "idempotent", at(1)).await;
    RunRow::new(idem, 1, "w1", at(5)).insert(db).await;
    RunRow::new(idem, 2, "w2", at(6)).insert(db).await;
    // Unsafe, effects under two epochs though neither run's output says it acted.
    let fx = new_task(db, "charge", "notification", "unsafe", at(1)).await;
    let r1 = RunRow::new(fx, 1, "w1", at(12)).failed("timeout").insert(db).await;
    let r2 = RunRow::new(fx, 2, "w2", at(13)).output(Some("skip")).insert(db).await;
    add_effect(db, r1, fx, 1, at(12)).await;
    add_effect(db, r2, fx, 2, at(13)).await;
    // Unsafe lost lease whose output was a token: a lost lease, but no double execution.
    let quiet = new_task(db, "reply", "notification", "unsafe", at(1)).await;
    RunRow::new(quiet, 1, "w1", at(25)).lost().output(Some("no action needed")).insert(db).await;
    // Silent, empty output, and a dead task.
    let misc = new_task(db, "digest", "tick", "idempotent", at(1)).await;
    RunRow::new(misc, 1, "w3", at(41)).unfinished(at(42)).insert(db).await;
    RunRow::new(misc, 2, "w3", at(50)).output(Some("  ")).insert(db).await;
    RunRow::new(misc, 3, "w3", at(59)).unfinished(now + Duration::minutes(1)).insert(db).await;
    exec(
        db,
        "UPDATE tasks SET status = 'dead', updated_at = $1 WHERE id = $2",
        &[at(45).into(), misc.into()],
    )
    .await;
    exec(
        db,
        "UPDATE tasks SET status = 'dead', updated_at = $1 WHERE id = $2",
        &[at(-60).into(), old.into()],
    )
    .await;
    // At the window's end: excluded.
    RunRow::new(misc, 4, "w3", until).insert(db).await;

    let o = s.overview(since, until, Duration::minutes(10), now).await.unwrap();
    assert_eq!((o.since, o.until), (Some(since), Some(until)));
    let count = |st: RunState| o.by_state.iter().find(|(s, _)| *s == st).unwrap().1;
    let cause = |c: Cause| o.by_cause.iter().find(|(x, _)| *x == c).unwrap().1;
    assert_eq!(o.by_state.len(), RunState::ALL.len());
    assert_eq!(count(RunState::LostLease), 3);
    assert_eq!(count(RunState::Acted), 4);
    assert_eq!(count(RunState::Failed), 1);
    assert_eq!(count(RunState::Skip), 1);
    assert_eq!(count(RunState::Silent), 1);
    assert_eq!(count(RunState::EmptyOutput), 1);
    assert_eq!(count(RunState::Running), 1);
    assert_eq!(o.by_state.iter().map(|(_, n)| n).sum::<i64>(), 12);
    assert_eq!(cause(Cause::LostLease), 3);
    assert_eq!(cause(Cause::Timeout), 1);
    assert_eq!(cause(Cause::Silent), 1);
    assert_eq!(cause(Cause::EmptyOutput), 1);
    assert_eq!(o.by_cause.iter().map(|(_, n)| n).sum::<i64>(), 6);
    // 10-minute buckets aligned to the epoch: the window's first and last are partial.
    let starts: Vec<_> = o.series.iter().map(|b| b.start.unwrap()).collect();
    assert!(starts.windows(2).all(|w| w[1] - w[0] == Duration::minutes(10)), "{starts:?}");
    assert!(starts[0] <= since && since < starts[0] + Duration::minutes(10));
    assert!(*starts.last().unwrap() < until);
    let in_series: i64 = o.series.iter().flat_map(|b| b.counts.iter().map(|(_, n)| n)).sum();
    assert_eq!(in_series, 12);
    let bucket_of = |t: DateTime<Utc>| {
        o.series
            .iter()
            .position(|b| b.start.unwrap() <= t && t < b.start.unwrap() + Duration::minutes(10))
            .unwrap()
    };
    let acted_in = |i: usize| o.series[i].counts.iter().find(|(s, _)| *s == RunState::Acted).unwrap().1;
    assert_eq!(
        acted_in(bucket_of(at(2))),
        [at(2), at(4), at(5), at(6)].iter().filter(|t| bucket_of(**t) == bucket_of(at(2))).count() as i64
    );
    assert_eq!(
        o.attention,
        Attention {
            unsafe_lost_leases: 3,
            needs_compensation: 2,
            silent_runs: 1,
            dead_tasks: 1,
            ..Default::default()
        },
        "twice and fx need compensation; done is compensated; idem is idempotent"
    );
    // Cross-check the flag with the task detail.
    for (task, needs) in [(twice, true), (done, false), (idem, false), (fx, true), (quiet, false)] {
        let d = s.task_detail(task, now).await.unwrap().unwrap();
        assert_eq!(d.needs_compensation, needs, "task {task}");
    }
    // An empty window is all zeros, buckets included.
    let empty = s.overview(at(-300), at(-200), Duration::minutes(30), now).await.unwrap();
    assert!(empty.by_state.iter().all(|(_, n)| *n == 0));
    assert!(empty.series.iter().all(|b| b.counts.iter().all(|(_, n)| *n == 0)));
    assert!(!empty.series.is_empty());
    assert_eq!(empty.attention, Attention::default());
}

async fn workers_summarise_runs_failures_and_held_leases(db: Db) {
    let s = store(db);
    let now = t0();
    let since = now - Duration::hours(1);
    let db = s.db();
    let task = new_task(db, "reply", "notification", "idempotent", since).await;
    let held = new_task(db, "reply", "notification", "idempotent", since).await;
    let lapsed = new_task(db, "reply", "notification", "idempotent", since).await;
    let hb = now - Duration::minutes(3);
    RunRow::new(task, 1, "alpha", now - Duration::minutes(30)).failed("crash").insert(db).await;
    RunRow::new(task, 2, "alpha", now - Duration::minutes(20)).insert(db).await;
    RunRow { heartbeat: Some(hb), ..RunRow::new(task, 3, "alpha", now - Duration::minutes(10)) }
        .unfinished(now + Duration::seconds(20))
        .insert(db)
        .await;
    // Before the window only: absent.
    RunRow::new(task, 4, "gamma", since - Duration::minutes(1)).insert(db).await;
    // beta: no run in the window, but it holds a lease that lapsed, claimed two hours ago.
    let beta_claim = now - Duration::hours(2);
    RunRow::new(lapsed, 1, "beta", beta_claim).unfinished(now - Duration::minutes(5)).insert(db).await;
    let lease = |owner: &str, task: i64, expires: DateTime<Utc>| {
        let owner = owner.to_string();
        async move {
            exec(
                db,
                "UPDATE tasks SET status = 'leased', owner = $1, lease_epoch = 1, lease_expires_at = $2 WHERE id = $3",
                &[owner.as_str().into(), expires.into(), task.into()],
            )
            .await
        }
    };
    lease("beta", lapsed, now - Duration::minutes(5)).await;
    lease("alpha", held, now + Duration::seconds(20)).await;

    let workers = s.workers(since, now).await.unwrap();
    let names: Vec<_> = workers.iter().map(|w| w.worker.as_str()).collect();
    assert_eq!(names, vec!["alpha", "beta"]);
    let alpha = &workers[0];
    assert_eq!((alpha.runs, alpha.failures), (3, 1));
    assert_eq!(alpha.last_claim_at, Some(now - Duration::minutes(10)));
    assert_eq!(alpha.last_heartbeat_at, Some(hb));
    assert_eq!(
        alpha.leases,
        vec![HeldLease {
            task_id: held,
            lease_epoch: 1,
            lease_expires_at: Some(now + Duration::seconds(20))
        }]
    );
    assert!(!alpha.holds_lapsed_lease);
    let beta = &workers[1];
    assert_eq!((beta.runs, beta.failures), (0, 0));
    assert_eq!(beta.last_claim_at, Some(beta_claim));
    assert_eq!(beta.leases.len(), 1);
    assert!(beta.holds_lapsed_lease);
    // A silent run counts as a failure once its lease lapsed.
    let later = now + Duration::minutes(1);
    let alpha = s.workers(since, later).await.unwrap().into_iter().find(|w| w.worker == "alpha").unwrap();
    assert_eq!(alpha.failures, 2);
    assert!(alpha.holds_lapsed_lease);
}

async fn timeline_returns_runs_overlapping_the_window(db: Db) {
    let s = store(db);
    let now = t0();
    let since = now - Duration::minutes(15);
    let db = s.db();
    let task = new_task(db, "reply", "notification", "idempotent", since).await;
    let m = |n: i64| now - Duration::minutes(n);
    let ended_inside = RunRow { finished: Some(m(14)), ..RunRow::new(task, 1, "b", m(16)) }.insert(db).await;
    RunRow { finished: Some(m(17)), ..RunRow::new(task, 2, "b", m(18)) }.insert(db).await;
    let inside = RunRow::new(task, 3, "a", m(10)).insert(db).await;
    let running = RunRow::new(task, 4, "a", m(1)).unfinished(now + Duration::seconds(10)).insert(db).await;
    // Silent long ago: its bar ended at the lapse, before the window.
    RunRow::new(task, 5, "c", m(600)).unfinished(m(599)).insert(db).await;
    // Silent, lapsed inside the window.
    let lapsed = RunRow::new(task, 6, "c", m(20)).unfinished(m(12)).insert(db).await;
    let runs = s.timeline(since, now, now).await.unwrap();
    assert_eq!(ids(&runs), vec![inside, running, ended_inside, lapsed], "by worker, then claim");
    assert_eq!(runs[1].run.state, RunState::Running);
    assert_eq!(runs[3].run.state, RunState::Silent);
    // Each row says why it re-claimed its task, by the run list's rule: the page draws its
    // links from this. Epoch 5 on `c` never finished and `c` claimed again: stalled.
    let reasons: Vec<_> = runs.iter().map(|r| r.run.reclaim_reason).collect();
    use lastword_core::ReclaimReason::{Retry, StalledWorker};
    assert_eq!(reasons, vec![Some(Retry), Some(Retry), None, Some(StalledWorker)]);
    // A window in the past.
    let runs = s.timeline(m(19), m(17), now).await.unwrap();
    assert_eq!(runs.iter().map(|r| r.run.lease_epoch).collect::<Vec<_>>(), vec![2, 6], "{runs:?}");

    // The rows of a live batch's runs, by id (unknown ids left out): the same rows as the
    // window's, so a merged picture equals a fetched one.
    let window = s.timeline(since, now, now).await.unwrap();
    let batch = s.timeline_runs(&[lapsed, running, i64::MAX], now).await.unwrap();
    assert_eq!(ids(&batch), vec![running, lapsed], "by id");
    for row in &batch {
        assert_eq!(Some(row), window.iter().find(|w| w.run.id == row.run.id));
    }
    assert!(s.timeline_runs(&[], now).await.unwrap().is_empty());
}

async fn task_detail_assembles_the_story(db: Db) {
    let s = store(db);
    let now = t0();
    let db = s.db();
    let task = new_task(db, "charge", "notification", "unsafe", now).await;
    let r1 = RunRow::new(task, 1, "w1", now).lost().insert(db).await;
    let r2 = RunRow::new(task, 2, "w2", now + Duration::seconds(40)).output(Some("skip")).insert(db).await;
    add_effect(db, r1, task, 1, now).await;
    let d = s.task_detail(task, now + Duration::minutes(1)).await.unwrap().unwrap();
    assert_eq!(d.task.id, task);
    assert_eq!(
        d.runs.iter().map(|r| (r.id, r.state)).collect::<Vec<_>>(),
        vec![(r1, RunState::LostLease), (r2, RunState::Skip)]
    );
    assert_eq!(d.effects.len(), 1);
    assert!(!d.double_execution && !d.needs_compensation, "one effect, one acted run");
    add_effect(db, r2, task, 2, now + Duration::seconds(41)).await;
    let d = s.task_detail(task, now + Duration::minutes(1)).await.unwrap().unwrap();
    assert!(d.double_execution && d.needs_compensation);
    exec(
        db,
        "INSERT INTO operator_actions (task_id, action, actor, reason, outcome, created_at) VALUES ($1, 'compensate', 'ann', 'refunded', 'applied', $2)",
        &[task.into(), now.into()],
    )
    .await;
    exec(db, "UPDATE tasks SET compensated_at = $1 WHERE id = $2", &[now.into(), task.into()]).await;
    let d = s.task_detail(task, now + Duration::minutes(1)).await.unwrap().unwrap();
    assert!(d.double_execution && !d.needs_compensation);
    assert_eq!(d.audit.len(), 1);
    assert!(s.task_detail(task + 1000, now).await.unwrap().is_none());
}

// ---- Rollups: the counting pages read past quarter-hours from rollups (store/src/rollups.rs);
// whatever the rollups' state, every answer equals counting history (the pre-rollup queries,
// kept as the oracle in `lastword_store::testing`).

/// The windows, buckets and filters the pages and the API use, plus edges inside quarter-hours.
async fn assert_rollups_agree(s: &dyn Store, now: DateTime<Utc>, what: &str) {
    let db = s.db();
    let tokens = s.tokens().clone();
    let m = Duration::minutes;
    let windows = [
        (now - Duration::hours(1), now, m(2)),
        (now - Duration::hours(6), now, m(15)),
        (now - Duration::hours(24), now, m(30)),
        (now - Duration::hours(24), now, Duration::hours(1)),
        (now - Duration::days(7), now, Duration::hours(6)),
        // Partial quarter-hours at both ends, a window in the past, one inside a bucket.
        (now - Duration::hours(5) - m(7), now - Duration::hours(1) - m(3), m(30)),
        (now - Duration::hours(5) - m(7), now - Duration::hours(1) - m(3), m(10)),
        (now - Duration::hours(3) + Duration::seconds(1), now - Duration::hours(3) + m(4), m(15)),
    ];
    for (since, until, bucket) in windows {
        let mut got = s.overview(since, until, bucket, now).await.unwrap();
        let want = raw_overview(db, &tokens, since, until, bucket, now).await;
        assert!(got.counted_at.is_none_or(|c| c <= now), "{what}: counted_at {:?}", got.counted_at);
        got.counted_at = want.counted_at;
        assert_eq!(got, want, "{what}: overview [{since}, {until}) by {bucket}");
    }
    let filters = [
        RunFilter::default(),
        RunFilter { since: Some(now - Duration::hours(24)), ..RunFilter::default() },
        RunFilter {
            since: Some(now - Duration::hours(4) - m(1)),
            until: Some(now - m(50)),
            ..RunFilter::default()
        },
        RunFilter {
            until: Some(now - Duration::hours(2) + m(5)),
            states: vec![RunState::Acted],
            ..RunFilter::default()
        },
        // Dimensions the rollups do not have: counted from runs (capped, far above these).
        RunFilter { worker: Some("w2".into()), ..RunFilter::default() },
        RunFilter {
            kind: Some("charge".into()),
            since: Some(now - Duration::hours(3)),
            ..RunFilter::default()
        },
    ];
    for filter in filters {
        let mut got = s.cause_facets(&filter, now).await.unwrap();
        let want = raw_cause_facets(db, &tokens, &filter, now).await;
        assert!(got.capped.is_empty(), "{what}: nothing reaches the cap");
        got.counted_at = want.counted_at;
        assert_eq!(got, want, "{what}: facets {filter:?}");
    }
    for since in [now - Duration::hours(1), now - Duration::hours(5) - m(7), now - Duration::days(7)] {
        assert_eq!(
            s.workers(since, now).await.unwrap(),
            raw_workers(db, &tokens, since, now).await,
            "{what}: workers since {since}"
        );
    }
}

/// Refreshes until nothing is left to do; returns the buckets recomputed.
async fn refresh_fully(s: &dyn Store, now: DateTime<Utc>) -> usize {
    let mut recomputed = 0;
    for _ in 0..100 {
        let report = s.refresh_rollups(now).await.unwrap();
        recomputed += report.recomputed;
        if !report.has_more() {
            return recomputed;
        }
    }
    panic!("the rollups never caught up");
}

/// Eight hours of runs of every kind, seven minutes apart, on three workers; unsafe lost leases,
/// one double execution of an unsafe task with effects under two epochs, a dead task, and long
/// unfinished runs in past buckets.
/// Returns (an unfinished run 3 h ago whose lease lapsed, a run 2 h ago whose lease is live
/// for 5 more minutes, the double-executed task).
async fn rollup_history(db: &Db, now: DateTime<Utc>) -> (i64, i64, i64) {
    let task = new_task(db, "reply", "notification", "idempotent", now - Duration::hours(9)).await;
    let safe = new_task(db, "charge", "tick", "idempotent", now - Duration::hours(9)).await;
    let workers = ["w1", "w2", "w3"];
    for i in 0..70_i64 {
        let claimed = now - Duration::minutes(7 * i) - Duration::seconds(13);
        let (t, epoch) = match (i % 2, i % 9) {
            // Lost leases of unsafe tasks that ran once (need attention, no double execution).
            (0, 2) => (new_task(db, "reply", "notification", "unsafe", claimed).await, 1),
            (0, _) => (task, 100 + i),
            _ => (safe, 100 + i),
        };
        let base = RunRow {
            heartbeat: Some(claimed + Duration::seconds(2)),
            ..RunRow::new(t, epoch, workers[(i % 3) as usize], claimed)
        };
        let row = match i % 9 {
            0 => base.failed("timeout"),
            1 => base.failed("api_error"),
            2 => base.lost(),
            3 => base.output(Some("  ")),
            4 => base.output(Some("skip")),
            5 => base.output(Some("no action needed")),
            6 => base.failed("other"),
            _ => base,
        };
        row.insert(db).await;
    }
    let lapsed = RunRow::new(task, 1, "w2", now - Duration::hours(3))
        .unfinished(now - Duration::hours(3) + Duration::minutes(1));
    let lapsed = lapsed.insert(db).await;
    let live = RunRow::new(safe, 1, "w3", now - Duration::hours(2)).unfinished(now + Duration::minutes(5));
    let live = live.insert(db).await;
    // An unsafe task executed twice (a lost lease that acted, then the accepted re-run), with
    // effects under both epochs.
    let twice = new_task(db, "reply", "notification", "unsafe", now - Duration::hours(4)).await;
    let r1 = RunRow::new(twice, 1, "w1", now - Duration::hours(4)).lost().insert(db).await;
    let r2 = RunRow::new(twice, 2, "w2", now - Duration::hours(4) + Duration::minutes(20)).insert(db).await;
    add_effect(db, r1, twice, 1, now - Duration::hours(4)).await;
    add_effect(db, r2, twice, 2, now - Duration::hours(4) + Duration::minutes(21)).await;
    exec(
        db,
        "UPDATE tasks SET status = 'dead', updated_at = $1 WHERE id = $2",
        &[(now - Duration::hours(2)).into(), safe.into()],
    )
    .await;
    (lapsed, live, twice)
}

async fn rollups_agree_with_history_as_it_changes(db: Db) {
    let s = store(db.clone());
    let now = t0();
    let (lapsed, live, twice) = rollup_history(&db, now).await;
    // Nothing rolled up yet: everything is counted from runs.
    assert_rollups_agree(s.as_ref(), now, "before any refresh").await;

    // Backfill: every closed quarter-hour since the oldest claim, none of the open one.
    let refreshed = now - Duration::seconds(2);
    assert!(refresh_fully(s.as_ref(), refreshed).await >= 32, "eight hours of buckets");
    let open = now.timestamp().div_euclid(lastword_store::BUCKET_SECS);
    assert_eq!(
        scalar(&db, "SELECT COUNT(*) FROM run_rollup_buckets WHERE bucket >= $1", &[open.into()]).await,
        0
    );
    let o = s.overview(now - Duration::hours(24), now, Duration::hours(1), now).await.unwrap();
    assert_eq!(o.counted_at, Some(refreshed), "the past came from the rollups");
    assert_eq!(o.attention.needs_compensation, 1);
    assert_rollups_agree(s.as_ref(), now, "after the backfill").await;

    // A run in an old bucket finishes late: its bucket is out of date until the next refresh.
    exec(
        &db,
        "UPDATE runs SET finished_at = $1, completion_rows = 1, output = 'sent reply' WHERE id = $2",
        &[now.into(), lapsed.into()],
    )
    .await;
    let window = (now - Duration::hours(6), now, Duration::minutes(15));
    let stale = s.overview(window.0, window.1, window.2, now).await.unwrap();
    let raw = raw_overview(&db, s.tokens(), window.0, window.1, window.2, now).await;
    assert_ne!(stale.by_state, raw.by_state, "the change is not counted before a refresh");
    let report = s.refresh_rollups(now).await.unwrap();
    assert!(report.recomputed >= 1 && report.changes >= 1, "{report:?}");
    assert_rollups_agree(s.as_ref(), now, "after a late finish").await;

    // The double execution is compensated: a task change, re-evaluated by the next refresh.
    exec(&db, "UPDATE tasks SET compensated_at = $1 WHERE id = $2", &[now.into(), twice.into()]).await;
    s.refresh_rollups(now).await.unwrap();
    assert_rollups_agree(s.as_ref(), now, "after a compensation").await;
    let o = s.overview(now - Duration::hours(24), now, Duration::hours(1), now).await.unwrap();
    assert_eq!(o.attention.needs_compensation, 0);

    // A lease lapses after its bucket was counted: running → silent with no row changed.
    let later = now + Duration::minutes(6);
    assert_eq!(s.run(live, later).await.unwrap().unwrap().state, RunState::Silent);
    assert_rollups_agree(s.as_ref(), later, "a lease lapsed since the count").await;
    s.refresh_rollups(later).await.unwrap();
    assert_rollups_agree(s.as_ref(), later, "recounted after the lapse").await;
    // A reader whose clock is behind the maintainer's does not use what it counted as silent.
    assert_rollups_agree(s.as_ref(), now, "a reader behind the maintainer's clock").await;

    // A missing bucket (its bookkeeping row gone, its counts orphaned) is counted from runs,
    // then backfilled.
    let mid = (now - Duration::hours(4)).timestamp().div_euclid(lastword_store::BUCKET_SECS);
    exec(&db, "DELETE FROM run_rollup_buckets WHERE bucket = $1", &[mid.into()]).await;
    assert_rollups_agree(s.as_ref(), later, "a missing bucket").await;
    let report = s.refresh_rollups(later).await.unwrap();
    assert!(report.recomputed >= 1, "{report:?}");
    assert_eq!(
        scalar(&db, "SELECT COUNT(*) FROM run_rollup_buckets WHERE bucket = $1", &[mid.into()]).await,
        1
    );
    assert_rollups_agree(s.as_ref(), later, "a backfilled bucket").await;

    // The open quarter-hour is always counted from runs.
    let current = new_task(&db, "reply", "notification", "unsafe", later).await;
    RunRow::new(current, 1, "w9", later - Duration::seconds(30)).failed("crash").insert(&db).await;
    RunRow::new(current, 2, "w9", later - Duration::seconds(20)).lost().insert(&db).await;
    assert_rollups_agree(s.as_ref(), later, "runs in the open bucket").await;
    s.refresh_rollups(later).await.unwrap();
    assert_rollups_agree(s.as_ref(), later, "the open bucket after a refresh").await;

    // Other tokens: no bucket counted with the old ones is used, until recounted.
    let other = store_for(db.clone(), Tokens { no_action: "skip".into(), skip: "no action needed".into() });
    assert_rollups_agree(other.as_ref(), later, "new tokens before a refresh").await;
    refresh_fully(other.as_ref(), later).await;
    assert_eq!(
        scalar(&db, "SELECT COUNT(*) FROM run_rollup_buckets WHERE no_action <> 'skip'", &[]).await,
        0,
        "every bucket recounted with the new tokens"
    );
    assert_rollups_agree(other.as_ref(), later, "new tokens after a refresh").await;
    assert_rollups_agree(s.as_ref(), later, "the old tokens, no longer rolled up").await;
}

/// Heartbeats fire no trigger (migration 0008), so the maintainer never hears of them: a lease
/// extended inside a counted bucket is recounted when the count's `stale_at` passes, and a
/// heartbeat that revives a silent run is logged and recounted at the next refresh.
async fn rollups_stay_exact_without_seeing_heartbeats(db: Db) {
    let s = store(db.clone());
    let now = t0();
    let (lapsed, live, _) = rollup_history(&db, now).await;
    refresh_fully(s.as_ref(), now).await;
    // HEARTBEAT_RUN's shape: `$1` run id, `$2` now, `$3` now + lease.
    let heartbeat = |run: i64, at: DateTime<Utc>| {
        let db = db.clone();
        async move {
            exec(
                &db,
                "UPDATE runs SET heartbeat_at = $2, lease_expires_at = $3 WHERE id = $1",
                &[run.into(), at.into(), (at + Duration::minutes(30)).into()],
            )
            .await;
        }
    };
    let logged = || async { scalar(&db, "SELECT COUNT(*) FROM change_log", &[]).await };

    // The live run (claimed 2 h ago, lease until now + 5 min) beats: nothing is logged.
    let before = logged().await;
    heartbeat(live, now).await;
    assert_eq!(logged().await, before);
    s.refresh_rollups(now).await.unwrap();
    assert_rollups_agree(s.as_ref(), now, "after an unseen heartbeat").await;
    // Past the lease the bucket was counted with, inside the extended one: still running.
    let later = now + Duration::minutes(6);
    assert_eq!(s.run(live, later).await.unwrap().unwrap().state, RunState::Running);
    assert_rollups_agree(s.as_ref(), later, "past the counted lease, inside the extended one").await;
    s.refresh_rollups(later).await.unwrap();
    assert_rollups_agree(s.as_ref(), later, "recounted with the extended lease").await;

    // The run whose lease lapsed 3 h ago beats again: silent → running, logged.
    heartbeat(lapsed, later).await;
    assert_eq!(logged().await, before + 1);
    assert_eq!(s.run(lapsed, later).await.unwrap().unwrap().state, RunState::Running);
    let report = s.refresh_rollups(later).await.unwrap();
    assert!(report.recomputed >= 1, "{report:?}");
    assert_rollups_agree(s.as_ref(), later, "after a revived run").await;
}

/// A bucket whose last recount was costly is not recounted at every refresh that reads a change
/// to it: the change is noted (`changed_at`) and the cursor moves on, readers keep the old count
/// and say how old it is, and a later refresh (of any server: the note is in the database)
/// recounts it once the count is 20 times its recount old.
async fn costly_buckets_are_recounted_at_most_every_so_often(db: Db) {
    let s = store(db.clone());
    let now = t0();
    let (lapsed, _, _) = rollup_history(&db, now).await;
    refresh_fully(s.as_ref(), now).await;
    // Once more, so PostgreSQL's cursor is past every change (it moves one read behind).
    s.refresh_rollups(now).await.unwrap();
    let k = (now - Duration::hours(3)).timestamp().div_euclid(lastword_store::BUCKET_SECS);
    // As if counting it had taken a second: the next recount waits until its count is 20 s old.
    exec(&db, "UPDATE run_rollup_buckets SET recount_ms = 1000 WHERE bucket = $1", &[k.into()]).await;
    exec(
        &db,
        "UPDATE runs SET finished_at = $1, completion_rows = 1, output = 'sent reply' WHERE id = $2",
        &[now.into(), lapsed.into()],
    )
    .await;
    let last_change = scalar(&db, "SELECT MAX(id) FROM change_log", &[]).await;
    let window = (now - Duration::hours(6), now, Duration::minutes(15));
    let changed = "SELECT COUNT(*) FROM run_rollup_buckets WHERE changed_at IS NOT NULL";

    // (PostgreSQL's cursor may still be behind older changes, whose cheap buckets are recounted
    // again: harmless, so only bucket `k` is looked at.)
    let counted_k = "SELECT COUNT(*) FROM run_rollup_buckets WHERE bucket = $1 AND changed_at IS NOT NULL";
    let report = s.refresh_rollups(now).await.unwrap();
    assert_eq!(report.deferred, 1, "{report:?}");
    assert_eq!(scalar(&db, changed, &[]).await, 1);
    assert_eq!(scalar(&db, counted_k, &[k.into()]).await, 1);
    let old = s.overview(window.0, window.1, window.2, now).await.unwrap();
    let raw = raw_overview(&db, s.tokens(), window.0, window.1, window.2, now).await;
    assert_ne!(old.by_state, raw.by_state, "the put-off bucket still answers with its old count");
    assert_eq!(old.counted_at, Some(now), "and the answer says when that was counted");

    // 19 s after the count: still put off; the cursor moves past the change (it is not read
    // again and again while it waits).
    let mut cursor = 0;
    for _ in 0..50 {
        let report = s.refresh_rollups(now + Duration::seconds(19)).await.unwrap();
        cursor = report.cursor;
        if cursor >= last_change {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(cursor, last_change);
    assert_eq!(scalar(&db, counted_k, &[k.into()]).await, 1);
    let still = s.overview(window.0, window.1, window.2, now).await.unwrap();
    assert_eq!(still.by_state, old.by_state, "not recounted yet");

    // 20 s after: recounted, by another server (a store of its own), and exact again.
    let other = store(db.clone());
    let at = now + Duration::seconds(20);
    let report = other.refresh_rollups(at).await.unwrap();
    assert!(report.recomputed >= 1 && report.deferred == 0, "{report:?}");
    assert_eq!(scalar(&db, changed, &[]).await, 0);
    assert_rollups_agree(other.as_ref(), at, "after the put-off recount").await;

    // A bucket that counts quickly is recounted at the next refresh, as before.
    exec(&db, "UPDATE run_rollup_buckets SET recount_ms = 3 WHERE bucket = $1", &[k.into()]).await;
    exec(&db, "UPDATE runs SET output = 'sent the reply' WHERE id = $1", &[lapsed.into()]).await;
    let report = other.refresh_rollups(at).await.unwrap();
    assert!(report.deferred == 0 && report.recomputed >= 1, "{report:?}");
    assert_rollups_agree(other.as_ref(), at, "after a quick recount").await;
}

/// Facets over dimensions the rollups lack count at most `FACET_CAP` runs per cause, and say so.
async fn facets_without_a_rollup_dimension_are_capped(db: Db) {
    let s = store(db.clone());
    let now = t0();
    let task = new_task(&db, "reply", "notification", "idempotent", now).await;
    let cap = lastword_store::FACET_CAP;
    exec(
        &db,
        "INSERT INTO runs (task_id, worker, lease_epoch, claimed_at, lease_expires_at, finished_at, completion_rows, error) \
         SELECT $1, 'w1', n, $2, $2, $2, 1, 'timeout' FROM (WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < $3) SELECT n FROM k) x",
        &[task.into(), (now - Duration::minutes(1)).into(), (cap + 5).into()],
    )
    .await;
    RunRow::new(task, cap + 10, "w1", now - Duration::minutes(1)).failed("crash").insert(&db).await;
    let filter = RunFilter { worker: Some("w1".into()), ..RunFilter::default() };
    let f = s.cause_facets(&filter, now).await.unwrap();
    let count = |c: Cause| f.counts.iter().find(|(x, _)| *x == c).unwrap().1;
    assert_eq!(f.capped, vec![Cause::Timeout]);
    assert_eq!((count(Cause::Timeout), count(Cause::Crash)), (cap, 1));
    // The time-only facets are exact however many.
    let f = s.cause_facets(&RunFilter::default(), now).await.unwrap();
    assert!(f.capped.is_empty());
    assert_eq!(f.counts.iter().find(|(x, _)| *x == Cause::Timeout).unwrap().1, cap + 5);
}

/// Two maintainers refreshing at once while runs change (two dashboard servers): the rows
/// they leave are those one would, and the answers equal history.
async fn concurrent_refreshes_leave_the_same_correct_rows(db: Db) {
    let a = store(db.clone());
    let b = store(db.clone());
    let now = t0();
    let (lapsed, _, _) = rollup_history(&db, now).await;
    for round in 0..6_i64 {
        let at = now + Duration::seconds(round);
        let (ra, rb) = tokio::join!(a.refresh_rollups(at), b.refresh_rollups(at));
        ra.unwrap();
        rb.unwrap();
        if round == 2 {
            exec(
                &db,
                "UPDATE runs SET finished_at = $1, completion_rows = 1, output = 'late' WHERE id = $2",
                &[at.into(), lapsed.into()],
            )
            .await;
        }
    }
    let end = now + Duration::seconds(10);
    refresh_fully(a.as_ref(), end).await;
    refresh_fully(b.as_ref(), end).await;
    assert_eq!(
        scalar(&db, "SELECT COUNT(*) FROM (SELECT bucket, state, error, safety FROM run_rollups GROUP BY bucket, state, error, safety HAVING COUNT(*) > 1) d", &[]).await,
        0,
        "no bucket counted twice"
    );
    assert_eq!(
        scalar(&db, "SELECT COUNT(*) FROM (SELECT bucket, worker FROM worker_rollups GROUP BY bucket, worker HAVING COUNT(*) > 1) d", &[]).await,
        0
    );
    // Each bucket's rows add up to its runs.
    let rolled = scalar(&db, "SELECT CAST(COALESCE(SUM(runs), 0) AS BIGINT) FROM run_rollups", &[]).await;
    let open = end.timestamp().div_euclid(lastword_store::BUCKET_SECS);
    let before_open = Utc.timestamp_opt(open * lastword_store::BUCKET_SECS, 0).unwrap();
    assert_eq!(
        rolled,
        scalar(&db, "SELECT COUNT(*) FROM runs WHERE claimed_at < $1", &[before_open.into()]).await
    );
    assert_rollups_agree(a.as_ref(), end, "after concurrent refreshes").await;
}

/// PostgreSQL: a change whose id is lower than one already read, committed later (ids commit
/// out of order), still reaches the rollups — the cursor waits for the open transaction.
#[tokio::test]
async fn postgres_late_commits_reach_the_rollups() {
    let Some(db) = lastword_store::testing::postgres("postgres_late_commits_reach_the_rollups").await else {
        return;
    };
    let Db::Postgres(pool) = &db else { unreachable!("a PostgreSQL database") };
    let s = store(db.clone());
    let now = t0();
    let (lapsed, _, _) = rollup_history(&db, now).await;
    refresh_fully(s.as_ref(), now).await;
    // A transaction finishes a run of an old bucket and stays open…
    let mut late = pool.begin().await.unwrap();
    sqlx::query("UPDATE runs SET finished_at = $1, completion_rows = 1, output = 'late' WHERE id = $2")
        .bind(now)
        .bind(lapsed)
        .execute(&mut *late)
        .await
        .unwrap();
    // …while a later change, to a run of another old bucket, commits and is read.
    let oldest = scalar(&db, "SELECT MIN(id) FROM runs", &[]).await;
    exec(&db, "UPDATE runs SET output = 'edited' WHERE id = $1", &[oldest.into()]).await;
    for _ in 0..3 {
        s.refresh_rollups(now).await.unwrap();
    }
    late.commit().await.unwrap();
    s.refresh_rollups(now).await.unwrap();
    assert_rollups_agree(s.as_ref(), now, "after a late commit").await;
    lastword_store::testing::discard_postgres(db).await;
}

// ---- Re-claim reasons (lastword_core::reclaim): the SQL twin against the Rust rule.

/// An operator action row on `task` at `at`, `applied` or refused.
async fn add_requeue(db: &Db, task: i64, at: DateTime<Utc>, outcome: &str) {
    exec(
        db,
        "INSERT INTO operator_actions (task_id, action, actor, reason, outcome, created_at) \
         VALUES ($1, 'requeue', 'ann', 'stuck', $2, $3)",
        &[task.into(), outcome.into(), at.into()],
    )
    .await;
}

/// One story per reason, a refused re-queue that explains nothing, and a mixed task whose five
/// claims take four different reasons: the list (with and without the `reclaim` filter) and the
/// task page say what the hand-written expectation says, and what the Rust rule says over the
/// same rows.
async fn reclaim_reasons_agree_with_the_rule(db: Db) {
    use lastword_core::reclaim::{reclaim_reason, Earlier, ReclaimReason as R};
    let s = store(db);
    let t = t0();
    let sec = Duration::seconds;
    let db = s.db();
    let mut expected: Vec<(i64, Option<R>)> = Vec::new();
    let mut rows: Vec<RunRow<'static>> = Vec::new();
    let mut requeues: Vec<(i64, DateTime<Utc>)> = Vec::new();
    macro_rules! run {
        ($row:expr, $want:expr) => {{
            let row: RunRow<'static> = $row;
            let id = row.insert(db).await;
            rows.push(row);
            expected.push((id, $want));
            id
        }};
    }
    // Slow: the first run's write landed after the re-claim and was rejected.
    let slow = new_task(db, "reply", "notification", "unsafe", t).await;
    run!(RunRow { finished: Some(t + sec(45)), ..RunRow::new(slow, 1, "w1", t).lost() }, None);
    run!(RunRow::new(slow, 2, "w2", t + sec(31)), Some(R::SlowWorker));
    // Dead: never finished, its worker never claimed again.
    let dead = new_task(db, "reply", "notification", "idempotent", t).await;
    run!(RunRow::new(dead, 1, "w-dead", t).unfinished(t + sec(30)), None);
    run!(RunRow::new(dead, 2, "w2", t + sec(31)), Some(R::DeadWorker));
    // Stalled: never finished, but its worker claimed other work after the lapse.
    let stalled = new_task(db, "reply", "notification", "idempotent", t).await;
    let elsewhere = new_task(db, "digest", "tick", "idempotent", t).await;
    run!(RunRow::new(stalled, 1, "w-stall", t).unfinished(t + sec(30)), None);
    run!(RunRow::new(stalled, 2, "w2", t + sec(31)), Some(R::StalledWorker));
    run!(RunRow::new(elsewhere, 1, "w-stall", t + sec(40)), None);
    // Re-queued by an operator after a failure; a refused re-queue leaves it a plain retry.
    let requeued = new_task(db, "reply", "notification", "unsafe", t).await;
    run!(RunRow::new(requeued, 1, "w1", t).failed("crash"), None);
    add_requeue(db, requeued, t + sec(10), "applied").await;
    requeues.push((requeued, t + sec(10)));
    run!(RunRow::new(requeued, 2, "w2", t + sec(20)), Some(R::OperatorRequeue));
    let retried = new_task(db, "reply", "notification", "unsafe", t).await;
    run!(RunRow::new(retried, 1, "w1", t).failed("timeout"), None);
    add_requeue(db, retried, t + sec(10), "refused:lease_live").await;
    run!(RunRow::new(retried, 2, "w2", t + sec(20)), Some(R::Retry));
    // Mixed: stalled on w-a, slow on w-b, re-queued after w-c failed, retried after w-a failed.
    let mixed = new_task(db, "charge", "notification", "unsafe", t).await;
    run!(RunRow::new(mixed, 1, "w-a", t).unfinished(t + sec(30)), None);
    run!(
        RunRow { finished: Some(t + sec(70)), ..RunRow::new(mixed, 2, "w-b", t + sec(31)).lost() },
        Some(R::StalledWorker)
    );
    run!(RunRow::new(mixed, 3, "w-c", t + sec(62)).failed("api_error"), Some(R::SlowWorker));
    add_requeue(db, mixed, t + sec(80), "applied").await;
    requeues.push((mixed, t + sec(80)));
    run!(RunRow::new(mixed, 4, "w-a", t + sec(90)).failed("crash"), Some(R::OperatorRequeue));
    run!(RunRow::new(mixed, 5, "w-d", t + sec(100)), Some(R::Retry));

    // The Rust rule over the same rows agrees with the hand-written expectation.
    for (row, (id, want)) in rows.iter().zip(&expected) {
        let earlier =
            rows.iter().filter(|p| p.task == row.task && p.epoch < row.epoch).max_by_key(|p| p.epoch);
        let decided = reclaim_reason(
            row.claimed,
            earlier
                .map(|p| Earlier { finished_at: p.finished, completion_rows: p.rows.map(|r| r as i32) })
                .as_ref(),
            earlier.is_some_and(|p| {
                requeues.iter().any(|(task, at)| *task == row.task && *at >= p.claimed && *at <= row.claimed)
            }),
            earlier.is_some_and(|p| rows.iter().any(|w| w.worker == p.worker && w.claimed > p.expires)),
        );
        assert_eq!(decided, *want, "the rule on run {id}");
    }

    let now = t + sec(600);
    let listed = all_pages(s.as_ref(), &RunFilter::default(), 4, now).await;
    let mut got: Vec<(i64, Option<R>)> = listed.iter().map(|r| (r.run.id, r.run.reclaim_reason)).collect();
    got.sort_by_key(|(id, _)| *id);
    assert_eq!(got, expected, "the list's reclaim_reason");
    for reason in R::ALL {
        let filter = RunFilter { reclaims: vec![reason], ..RunFilter::default() };
        let mut ids = ids(&all_pages(s.as_ref(), &filter, 3, now).await);
        ids.sort();
        let want: Vec<i64> = expected.iter().filter(|(_, r)| *r == Some(reason)).map(|(id, _)| *id).collect();
        assert_eq!(ids, want, "reclaim={reason}");
    }
    let both = RunFilter { reclaims: vec![R::DeadWorker, R::StalledWorker], ..RunFilter::default() };
    assert_eq!(all_pages(s.as_ref(), &both, 50, now).await.len(), 3, "reasons combine by OR");
    let d = s.task_detail(mixed, now).await.unwrap().unwrap();
    assert_eq!(
        d.runs.iter().map(|r| r.reclaim_reason).collect::<Vec<_>>(),
        vec![None, Some(R::StalledWorker), Some(R::SlowWorker), Some(R::OperatorRequeue), Some(R::Retry)],
        "the task page's story"
    );
}

/// Lease health on a hand-computed fixture: `reply` runs outlive a 30 s lease (one lost, with a
/// double execution; one accepted late), `digest` holds a 10 min lease that a dead worker's task
/// waited out, `poison` is in a re-claim loop, `other` has a worker whose clock runs five
/// minutes ahead, one that stalled on a run, and a running run that heartbeat 5 s ago. Every figure below was worked out by
/// hand from these rows (nearest-rank percentiles), not read back from the code.
async fn lease_figures_agree_with_a_hand_computed_fixture(db: Db) {
    use lastword_core::leases::{KindLeaseStats, LeaseFit, LeaseWindow};
    use lastword_store::leases::report;
    let s = store(db);
    let db = s.db();
    let sec = Duration::seconds;
    // Real time: clock skew is measured against the database's own clock.
    let now = Utc.timestamp_millis_opt(Utc::now().timestamp_millis()).unwrap();
    let t = now - Duration::hours(1);
    // reply: A1 outlives its lease, loses it and leaves a double execution; A2 re-claimed it
    // 1 s after the lapse (slow worker). B1's worker died; B2 re-claimed 10 s after the lapse.
    // C1 heartbeat (lease 30 s counted from the heartbeat). D1 finished 5 s late, accepted.
    let a = new_task(db, "reply", "notification", "unsafe", t).await;
    let a1 = RunRow { finished: Some(t + sec(45)), ..RunRow::new(a, 1, "w1", t).lost() }.insert(db).await;
    let a2 = RunRow { finished: Some(t + sec(36)), ..RunRow::new(a, 2, "w2", t + sec(31)) }.insert(db).await;
    add_effect(db, a1, a, 1, t + sec(40)).await;
    add_effect(db, a2, a, 2, t + sec(35)).await;
    let b = new_task(db, "reply", "notification", "idempotent", t).await;
    RunRow::new(b, 1, "w-dead", t).unfinished(t + sec(30)).insert(db).await;
    RunRow { finished: Some(t + sec(50)), ..RunRow::new(b, 2, "w2", t + sec(40)) }.insert(db).await;
    let c = new_task(db, "reply", "notification", "idempotent", t).await;
    RunRow {
        heartbeat: Some(t + sec(10)),
        expires: t + sec(40),
        finished: Some(t + sec(20)),
        ..RunRow::new(c, 1, "w3", t)
    }
    .insert(db)
    .await;
    let d = new_task(db, "reply", "notification", "idempotent", t).await;
    RunRow { finished: Some(t + sec(135)), ..RunRow::new(d, 1, "w1", t + sec(100)) }.insert(db).await;
    // digest, 10 min leases: E1's worker vanished, E2 took the task 100 s after the lapse; G was
    // re-queued by an operator after a crash.
    let long = |row: RunRow<'static>| RunRow { expires: row.claimed + sec(600), ..row };
    let e = new_task(db, "digest", "tick", "idempotent", t).await;
    RunRow::new(e, 1, "w-gone", t).unfinished(t + sec(600)).insert(db).await;
    long(RunRow { finished: Some(t + sec(710)), ..RunRow::new(e, 2, "w4", t + sec(700)) }).insert(db).await;
    let f = new_task(db, "digest", "tick", "idempotent", t).await;
    long(RunRow { finished: Some(t + sec(15)), ..RunRow::new(f, 1, "w4", t + sec(5)) }).insert(db).await;
    let g = new_task(db, "digest", "tick", "idempotent", t).await;
    long(RunRow { finished: Some(t + sec(12)), ..RunRow::new(g, 1, "w4", t + sec(10)).failed("crash") })
        .insert(db)
        .await;
    add_requeue(db, g, t + sec(20), "applied").await;
    long(RunRow { finished: Some(t + sec(33)), ..RunRow::new(g, 2, "w4", t + sec(30)) }).insert(db).await;
    // poison: three claims, three crashes, queued again: a re-claim loop.
    let poison = new_task(db, "poison", "tick", "idempotent", t).await;
    for epoch in 1..=3 {
        RunRow::new(poison, epoch, "w6", t + sec(40 * epoch)).failed("crash").insert(db).await;
    }
    exec(db, "UPDATE tasks SET attempts = 3, lease_epoch = 3 WHERE id = $1", &[poison.into()]).await;
    // other: a worker five minutes ahead of the database's clock; a run that is running now.
    let o = new_task(db, "other", "tick", "idempotent", t).await;
    RunRow { finished: Some(now + sec(301)), ..RunRow::new(o, 1, "w-ahead", now + sec(300)) }
        .insert(db)
        .await;
    let h = new_task(db, "other", "tick", "idempotent", t).await;
    let running = RunRow {
        heartbeat: Some(now - sec(5)),
        ..RunRow::new(h, 1, "w5", now - sec(20)).unfinished(now + sec(25))
    }
    .insert(db)
    .await;

    // other: w7 stalls on one run (its lease lapses unfinished) and goes on claiming.
    let stuck = new_task(db, "other", "tick", "idempotent", t).await;
    RunRow::new(stuck, 1, "w7", t + sec(200)).unfinished(t + sec(230)).insert(db).await;
    let later = new_task(db, "other", "tick", "idempotent", t).await;
    RunRow::new(later, 1, "w7", t + sec(300)).insert(db).await;

    let window = LeaseWindow::Between(t - sec(1), now + sec(600));
    let got = report(db, s.tokens(), None, &window, now).await.expect("the report");
    let fits = |n: [i64; 3]| {
        [2, 3, 4]
            .iter()
            .zip(n)
            .map(|(m, lost_leases)| LeaseFit { multiple: *m, lost_leases })
            .collect::<Vec<_>>()
    };
    let reply = KindLeaseStats {
        kind: "reply".into(),
        runs: 6,
        finished: 5,
        lease_ms: Some(30_000),
        // 5, 10, 20, 35, 45 s: ranks ⌈2.5⌉ = 3, ⌈4.75⌉ = 5, ⌈4.95⌉ = 5.
        duration_p50_ms: Some(20_000),
        duration_p95_ms: Some(45_000),
        duration_p99_ms: Some(45_000),
        duration_max_ms: Some(45_000),
        outlived_lease: 2,
        outlived_without_heartbeat: 2,
        lost_lease: 1,
        double_executions: 1,
        lost_lease_within: fits([1, 1, 1]),
        reclaims: 2,
        reclaims_slow_worker: 1,
        reclaims_stalled_worker: 0,
        reclaims_dead_worker: 1,
        reclaims_operator_requeue: 0,
        // 1 s and 10 s after the lapse: ranks 1 and ⌈1.9⌉ = 2.
        reclaim_latency_p50_ms: Some(1_000),
        reclaim_latency_p95_ms: Some(10_000),
        suggestion: Some(
            "Runs of `reply` last 45 s at p95 and hold a 30 s lease: 40 % of finished runs outlive it. \
             A 60 s lease (or a heartbeat every 10 s) would have avoided 1 of the 1 lost leases in this window."
                .into(),
        ),
    };
    let digest = KindLeaseStats {
        kind: "digest".into(),
        runs: 5,
        finished: 4,
        lease_ms: Some(600_000),
        // 2, 3, 10, 10 s: ranks 2, 4, 4.
        duration_p50_ms: Some(3_000),
        duration_p95_ms: Some(10_000),
        duration_p99_ms: Some(10_000),
        duration_max_ms: Some(10_000),
        lost_lease_within: fits([0, 0, 0]),
        reclaims: 1,
        reclaims_dead_worker: 1,
        reclaims_operator_requeue: 1,
        reclaim_latency_p50_ms: Some(100_000),
        reclaim_latency_p95_ms: Some(100_000),
        suggestion: Some(
            "Runs of `digest` finish within 10 s at p99 but hold a 10 min lease: 1 tasks of stalled or dead \
             workers were re-claimed only after it lapsed, waiting 100 s at p95 in this window. \
             A 20 s lease would notice a dead worker sooner."
                .into(),
        ),
        ..Default::default()
    };
    let by_kind = |k: &str| got.kinds.iter().find(|x| x.kind == k).cloned();
    assert_eq!(
        got.kinds.iter().map(|k| k.kind.as_str()).collect::<Vec<_>>(),
        ["digest", "other", "poison", "reply"]
    );
    assert_eq!(by_kind("reply"), Some(reply));
    assert_eq!(by_kind("digest"), Some(digest.clone()));
    let poisoned = by_kind("poison").unwrap();
    assert_eq!(
        (poisoned.runs, poisoned.duration_p50_ms, poisoned.reclaims),
        (3, Some(5_000), 0),
        "retries are not re-claims"
    );
    let other = by_kind("other").unwrap();
    assert_eq!((other.runs, other.finished, other.lease_ms), (4, 2, Some(30_000)));
    // Who lost leases, and what became of them: w1's run finished after losing it (paused),
    // w7 stalled on one, w-dead and w-gone were never seen again.
    let health: Vec<(&str, i64, i64, i64)> =
        got.workers.iter().map(|w| (w.worker.as_str(), w.paused, w.stalled, w.dead)).collect();
    assert_eq!(health, [("w-dead", 0, 0, 1), ("w-gone", 0, 0, 1), ("w7", 0, 1, 0), ("w1", 1, 0, 0)]);

    assert_eq!(
        got.loops.iter().map(|l| (l.task_id, l.kind.as_str(), l.lease_epoch)).collect::<Vec<_>>(),
        [(poison, "poison", 3)]
    );
    assert_eq!(got.loop_claims, 3);
    assert_eq!(got.skewed_workers.len(), 1, "only w-ahead: {:?}", got.skewed_workers);
    let ahead = &got.skewed_workers[0];
    assert_eq!((ahead.worker.as_str(), ahead.runs), ("w-ahead", 1));
    // Its finish is stamped 301 s past `now`; the database's clock has moved on a little since.
    assert!((240_000..=301_000).contains(&ahead.ahead_ms), "{}", ahead.ahead_ms);
    assert_eq!(got.heartbeats.len(), 1, "only the running run: {:?}", got.heartbeats);
    let beat = &got.heartbeats[0];
    assert_eq!(
        (beat.run_id, beat.worker.as_str(), beat.heartbeat_age_ms, beat.lease_left_ms, beat.lease_ms),
        (running, "w5", 5_000, 25_000, 30_000)
    );

    // Narrowed to one kind, the same figures for it and nothing of the others.
    let only = report(db, s.tokens(), Some("digest"), &window, now).await.unwrap();
    assert_eq!(only.kinds, vec![digest]);
    assert!(only.loops.is_empty() && only.skewed_workers.is_empty() && only.heartbeats.is_empty());
    assert_eq!(only.workers.iter().map(|w| w.worker.as_str()).collect::<Vec<_>>(), ["w-gone"]);
    // A window that holds none of it.
    let empty = LeaseWindow::Between(t - sec(7200), t - sec(3600));
    assert!(report(db, s.tokens(), None, &empty, now).await.unwrap().kinds.is_empty());
}

/// A report is shared; once it is old it is still served (its `computed_at` says how old)
/// while a background task computes the next, which the following asker gets.
async fn lease_reports_serve_the_last_answer_while_computing_the_next(db: Db) {
    use lastword_core::leases::LeaseWindow;
    use lastword_store::leases::LeaseReports;
    let s = store(db);
    let db = s.db();
    // Half a second before the current second began: a background computation reads as of the
    // clock truncated to the second (`read_now`), which can never equal it (the asker's `now`
    // taken with its milliseconds could, in one run of a thousand, fall on .000).
    let now = Utc.timestamp_millis_opt(Utc::now().timestamp() * 1000 - 500).unwrap();
    let task = new_task(db, "reply", "notification", "idempotent", now).await;
    RunRow::new(task, 1, "w1", now - Duration::minutes(5)).insert(db).await;
    let reports = LeaseReports::with_ttl(std::time::Duration::from_millis(1));
    let day = LeaseWindow::Last(Duration::hours(24));
    let runs = |r: &lastword_core::leases::LeaseReport| r.kinds.iter().map(|k| k.runs).sum::<i64>();
    let first = reports.get(db, s.tokens(), None, day.clone(), now).await.unwrap();
    assert_eq!((runs(&first), first.computed_at), (1, Some(now)));
    RunRow::new(task, 2, "w2", now - Duration::minutes(4)).insert(db).await;
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let later = now + Duration::seconds(40);
    let stale = reports.get(db, s.tokens(), None, day.clone(), later).await.unwrap();
    assert_eq!((runs(&stale), stale.computed_at), (1, Some(now)), "the old answer, served at once");
    let mut fresh = stale;
    for _ in 0..200 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        fresh = reports.get(db, s.tokens(), None, day.clone(), later).await.unwrap();
        if runs(&fresh) == 2 {
            break;
        }
    }
    assert_eq!(runs(&fresh), 2, "the background computation's answer");
    assert_ne!(fresh.computed_at, Some(now), "computed anew (as of the clock, not the asker's `now`)");

    // What the overview's panel asks: nothing at hand at first (and never a wait), then the answer
    // the background computation left.
    let panel = LeaseReports::default();
    assert!(panel.at_hand(db, s.tokens(), None, day.clone()).await.is_none(), "being computed");
    let mut at_hand = None;
    for _ in 0..200 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        at_hand = panel.at_hand(db, s.tokens(), None, day.clone()).await;
        if at_hand.is_some() {
            break;
        }
    }
    assert_eq!(at_hand.map(|r| runs(&r)), Some(2));
}

lastword_store::on_every_backend!(
    migrations_leave_the_store_ready,
    totals_count_rows,
    task_round_trips_every_column,
    state_sql_twin_agrees_with_rust,
    custom_tokens_reach_the_sql_twin,
    failure_causes_come_from_the_error_column,
    schema_rejects_what_the_contract_forbids,
    effects_and_audit_read_back_in_order,
    state_and_cause_filters_agree_with_the_twin,
    state_filters_use_the_configured_tokens,
    keyset_pagination_visits_every_run_once,
    filters_narrow_by_worker_kind_source_task_time_and_text,
    cause_facets_count_what_each_cause_would_list,
    overview_counts_the_window_and_what_needs_attention,
    workers_summarise_runs_failures_and_held_leases,
    timeline_returns_runs_overlapping_the_window,
    task_detail_assembles_the_story,
    rollups_agree_with_history_as_it_changes,
    rollups_stay_exact_without_seeing_heartbeats,
    costly_buckets_are_recounted_at_most_every_so_often,
    facets_without_a_rollup_dimension_are_capped,
    concurrent_refreshes_leave_the_same_correct_rows,
    reclaim_reasons_agree_with_the_rule,
    lease_figures_agree_with_a_hand_computed_fixture,
    lease_reports_serve_the_last_answer_while_computing_the_next,
);
