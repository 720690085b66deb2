//! HTTP tests of the JSON API and `/metrics`: the router the binary serves, driven in-process
//! on real databases — SQLite always, PostgreSQL whenever `TEST_DATABASE_URL` is set (required
//! in CI via `LASTWORD_REQUIRE_POSTGRES=1`). Data is written by the runner library on a manual
//! clock set a little in the past, or by the simulator fleet.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::{DateTime, Duration, Utc};
use lastword_core::{ErrorCause, Safety, Source, Tokens};
use lastword_runner::{ActionMessage, Clock, Lease, ManualClock, NewTask, Outcome, Runner, RunnerConfig};
use lastword_server::{router, state::leptos_options, AppState};
use lastword_store::{store_for, Db, Store};
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tower::ServiceExt;

struct Api {
    app: axum::Router,
    state: AppState,
    store: Arc<dyn Store>,
}

impl Api {
    fn new(db: Db) -> Self {
        let store = store_for(db, Tokens::default());
        let state = AppState::new(leptos_options(), store.clone());
        Api { app: router(state.clone()), state, store }
    }

    /// Over `store`, with `/metrics` read afresh on every scrape (no 10-second cache).
    fn scraped_afresh(store: Arc<dyn Store>) -> Self {
        let mut state = AppState::new(leptos_options(), store.clone());
        state.metrics = Arc::new(lastword_server::metrics::MetricsCache::with_ttl(std::time::Duration::ZERO));
        Api { app: router(state.clone()), state, store }
    }

    async fn get(&self, uri: &str) -> (StatusCode, String, String) {
        let response =
            self.app.clone().oneshot(Request::get(uri).body(Body::empty()).unwrap()).await.unwrap();
        let status = response.status();
        let content_type = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap_or_default().to_string())
            .unwrap_or_default();
        let bytes = axum::body::to_bytes(response.into_body(), 64 << 20).await.unwrap();
        (status, content_type, String::from_utf8_lossy(&bytes).into_owned())
    }

    async fn json(&self, uri: &str) -> (StatusCode, Value) {
        let (status, content_type, body) = self.get(uri).await;
        assert!(content_type.starts_with("application/json"), "{uri}: {status} {content_type}: {body}");
        let value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{uri}: {e}: {body}"));
        (status, value)
    }

    async fn ok(&self, uri: &str) -> Value {
        let (status, value) = self.json(uri).await;
        assert_eq!(status, StatusCode::OK, "{uri}: {value}");
        value
    }

    /// Follows `next` from `uri` until it is null; returns every run.
    async fn all_runs(&self, uri: &str) -> Vec<Value> {
        let sep = if uri.contains('?') { '&' } else { '?' };
        let mut runs = Vec::new();
        let mut next: Option<String> = None;
        for _ in 0..10_000 {
            let page_uri = match &next {
                None => uri.to_string(),
                Some(cursor) => format!("{uri}{sep}after={cursor}"),
            };
            let page = self.ok(&page_uri).await;
            runs.extend(page["runs"].as_array().expect("runs").iter().cloned());
            match page["next"].as_str() {
                None => {
                    assert!(page["next"].is_null());
                    return runs;
                }
                Some(cursor) => next = Some(cursor.to_string()),
            }
        }
        panic!("pagination did not end");
    }
}

fn ids(runs: &[Value]) -> Vec<i64> {
    runs.iter().map(|r| r["id"].as_i64().unwrap()).collect()
}

/// The ids of the arranged scenario's notable rows.
struct Scenario {
    /// Unsafe, executed twice: worker-a's late finish lost the lease after worker-b's run acted.
    double_task: i64,
    lost_run: i64,
    timeout_run: i64,
    api_error_run: i64,
    empty_run: i64,
    silent_run: i64,
    acted_runs: usize,
    total_runs: i64,
    start: DateTime<Utc>,
}

fn acted(text: &str) -> Outcome {
    Outcome::Acted(ActionMessage::new(text).unwrap())
}

/// Every kind of run, written by the runner library on a clock that starts 50 minutes ago and
/// ends a few minutes ago (inside the last hour, and every lease has lapsed).
async fn arrange(db: &Db) -> Scenario {
    let start = Utc::now() - Duration::minutes(50);
    // Microseconds, as PostgreSQL keeps them, so a value read back equals the one written.
    let start = DateTime::from_timestamp_micros(start.timestamp_micros()).unwrap();
    let clock = ManualClock::new(start);
    let config = RunnerConfig { lease: Duration::seconds(30), tokens: Tokens::default() };
    let runner = |w: &str| Runner::new(db.clone(), w, config.clone(), Arc::new(clock.clone()));
    let (a, b) = (runner("worker-a"), runner("worker-b"));
    let task = |kind: &str, safety: Safety| {
        NewTask::new(kind, Source::Notification, safety).with_payload(serde_json::json!({"n": 1}))
    };
    let claim = |r: &Runner| {
        let r = r.clone();
        async move { r.claim(None).await.unwrap().expect("a task to claim") }
    };

    // The double execution: a claims, acts, stalls past its lease; b re-claims, acts, finishes;
    // a's late finish is rejected.
    let double_task = a.enqueue(&task("charge_card", Safety::Unsafe)).await.unwrap();
    let lease_a: Lease = claim(&a).await;
    a.record_effect(&lease_a, "charge", "charge-1").await.unwrap();
    clock.advance(Duration::seconds(31));
    let lease_b = claim(&b).await;
    assert_eq!(lease_b.task_id, double_task);
    b.record_effect(&lease_b, "charge", "charge-1").await.unwrap();
    b.finish(lease_b, acted("charged $5")).await.unwrap();
    let lost_run = lease_a.run_id;
    a.finish(lease_a, acted("charged $5")).await.unwrap();

    // Failures.
    clock.advance(Duration::seconds(5));
    a.enqueue(&task("reply", Safety::Idempotent)).await.unwrap();
    let l = claim(&a).await;
    let timeout_run = l.run_id;
    a.finish(l, Outcome::Failed { cause: ErrorCause::Timeout, detail: "model took 120 s".into() })
        .await
        .unwrap();
    clock.advance(Duration::seconds(5));
    let l = claim(&b).await; // the re-queued reply
    let api_error_run = l.run_id;
    let detail = "rate limit: 50% of quota_used".to_string();
    b.finish(l, Outcome::Failed { cause: ErrorCause::ApiError, detail }).await.unwrap();
    clock.advance(Duration::seconds(5));
    a.enqueue(&task("reply", Safety::Idempotent)).await.unwrap();
    let l = claim(&a).await;
    let empty_run = l.run_id;
    a.finish_unchecked(l, Some("   ".into())).await.unwrap();
    clock.advance(Duration::seconds(5));
    for (i, outcome) in [Outcome::NoActionNeeded, Outcome::Skip].into_iter().enumerate() {
        a.enqueue(&task("triage", Safety::Idempotent)).await.unwrap();
        let l = claim(&a).await;
        clock.advance(Duration::seconds(1 + i as i64));
        a.finish(l, outcome).await.unwrap();
    }
    // Plenty of healthy runs, some claimed in the same instant (ties for the cursor).
    let acted_runs = 23;
    for i in 0..acted_runs {
        let r = if i % 2 == 0 { &a } else { &b };
        r.enqueue(&task("reply", Safety::Idempotent)).await.unwrap();
        let l = claim(r).await;
        r.finish(l, acted(&format!("replied to #{i}"))).await.unwrap();
        if i % 3 == 0 {
            clock.advance(Duration::seconds(7));
        }
    }
    // Last, so nobody re-claims it: worker-b claims and never finishes; its lease lapses.
    b.enqueue(&task("digest", Safety::Idempotent)).await.unwrap();
    let silent_run = claim(&b).await.run_id;
    assert!(clock.now() + Duration::seconds(30) < Utc::now() - Duration::minutes(5));
    let store = store_for(db.clone(), Tokens::default());
    let total_runs = store.totals().await.unwrap().runs;
    Scenario {
        double_task,
        lost_run,
        timeout_run,
        api_error_run,
        empty_run,
        silent_run,
        acted_runs,
        total_runs,
        start,
    }
}

async fn runs_list_filters_and_pages(db: Db) {
    let sc = arrange(&db).await;
    let api = Api::new(db);
    let mut all = ids(&api.all_runs("/api/v1/runs?since=2h&limit=4").await);
    assert_eq!(all.len() as i64, sc.total_runs);
    let unique: BTreeSet<i64> = all.iter().copied().collect();
    assert_eq!(unique.len(), all.len(), "no run twice");
    all.sort_unstable();
    let mut everything = ids(&api.all_runs("/api/v1/runs?limit=500").await);
    everything.sort_unstable();
    assert_eq!(all, everything);

    // The first page: newest first, with the documented fields.
    let page = api.ok("/api/v1/runs?limit=2").await;
    let first = &page["runs"][0];
    for field in [
        "id",
        "task_id",
        "worker",
        "lease_epoch",
        "state",
        "cause",
        "claimed_at",
        "finished_at",
        "output",
        "kind",
        "source",
        "safety",
    ] {
        assert!(first.get(field).is_some(), "{field} in {first}");
    }
    assert!(page["next"].is_string());

    let only = |uri: &str| {
        let api = &api;
        let uri = uri.to_string();
        async move { ids(&api.all_runs(&uri).await) }
    };
    assert_eq!(only("/api/v1/runs?cause=lost_lease").await, vec![sc.lost_run]);
    assert_eq!(only("/api/v1/runs?state=lost_lease&limit=1").await, vec![sc.lost_run]);
    assert_eq!(
        only("/api/v1/runs?cause=api_error,timeout&limit=1").await,
        vec![sc.api_error_run, sc.timeout_run]
    );
    assert_eq!(
        only("/api/v1/runs?cause=api_error&cause=timeout").await,
        vec![sc.api_error_run, sc.timeout_run]
    );
    assert_eq!(only("/api/v1/runs?cause=empty_output").await, vec![sc.empty_run]);
    assert_eq!(only("/api/v1/runs?state=silent").await, vec![sc.silent_run]);
    assert_eq!(only("/api/v1/runs?q=50%25%20of").await, vec![sc.api_error_run]);
    assert_eq!(only("/api/v1/runs?q=QUOTA_USED").await, vec![sc.api_error_run]);
    assert_eq!(only("/api/v1/runs?q=quota%5Fused&cause=timeout").await, Vec::<i64>::new());
    assert_eq!(only(&format!("/api/v1/runs?task={}", sc.double_task)).await.len(), 2);
    assert_eq!(only("/api/v1/runs?kind=charge_card&worker=worker-a").await, vec![sc.lost_run]);
    assert_eq!(only("/api/v1/runs?source=tick").await, Vec::<i64>::new());
    let acted = api.all_runs("/api/v1/runs?state=acted&limit=5").await;
    assert_eq!(acted.len(), sc.acted_runs + 1, "the healthy runs and the double task's accepted run");
    assert!(acted.iter().all(|r| r["state"] == "acted" && r["cause"].is_null()));
    let lost = api.ok(&format!("/api/v1/runs?cause=lost_lease&since={}", encode(sc.start))).await;
    assert_eq!(lost["runs"][0]["output"], "charged $5", "the discarded output is shown");
    assert_eq!(lost["runs"][0]["completion_rows"], 0);
    // A window that ends before the scenario began.
    let before = format!("/api/v1/runs?until={}", encode(sc.start));
    assert!(api.ok(&before).await["runs"].as_array().unwrap().is_empty());
}

fn encode(t: DateTime<Utc>) -> String {
    lastword_core::query::encode_component(&t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
}

async fn facets_count_failures_per_cause(db: Db) {
    arrange(&db).await;
    let api = Api::new(db);
    let facets = api.ok("/api/v1/runs/facets").await;
    let counts: Vec<(String, i64)> = facets["counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pair| (pair[0].as_str().unwrap().to_string(), pair[1].as_i64().unwrap()))
        .collect();
    let n = |c: &str| counts.iter().find(|(k, _)| k == c).unwrap().1;
    assert_eq!(counts.len(), 8);
    assert_eq!(
        (n("timeout"), n("api_error"), n("empty_output"), n("silent"), n("lost_lease")),
        (1, 1, 1, 1, 1)
    );
    assert_eq!((n("crash"), n("context_overflow"), n("other")), (0, 0, 0));
    // The filter's own cause selection is ignored; others narrow.
    assert_eq!(api.ok("/api/v1/runs/facets?cause=timeout&state=acted").await, facets);
    let b = api.ok("/api/v1/runs/facets?worker=worker-b").await;
    let b_total: i64 = b["counts"].as_array().unwrap().iter().map(|p| p[1].as_i64().unwrap()).sum();
    assert_eq!(b_total, 2, "api_error and silent: {b}");
}

async fn runs_and_tasks_by_id(db: Db) {
    let sc = arrange(&db).await;
    let api = Api::new(db);
    let run = api.ok(&format!("/api/v1/runs/{}", sc.lost_run)).await;
    assert_eq!((run["state"].as_str(), run["cause"].as_str()), (Some("lost_lease"), Some("lost_lease")));
    assert_eq!(run["worker"], "worker-a");
    let run = api.ok(&format!("/api/v1/runs/{}", sc.timeout_run)).await;
    assert_eq!((run["state"].as_str(), run["cause"].as_str()), (Some("failed"), Some("timeout")));

    let task = api.ok(&format!("/api/v1/tasks/{}", sc.double_task)).await;
    assert_eq!(task["id"], sc.double_task);
    assert_eq!((task["kind"].as_str(), task["safety"].as_str()), (Some("charge_card"), Some("unsafe")));
    assert_eq!(task["status"], "completed");
    assert_eq!(task["double_execution"], true);
    assert_eq!(task["needs_compensation"], true);
    let states: Vec<&str> =
        task["runs"].as_array().unwrap().iter().map(|r| r["state"].as_str().unwrap()).collect();
    assert_eq!(states, vec!["lost_lease", "acted"]);
    // worker-b took the task while worker-a was still at it (a's write then lost): a slow worker.
    let reasons: Vec<&Value> =
        task["runs"].as_array().unwrap().iter().map(|r| &r["reclaim_reason"]).collect();
    assert_eq!(reasons, vec![&Value::Null, &serde_json::json!("slow_worker")]);
    let slow = api.ok("/api/v1/runs?reclaim=slow_worker&since=2h").await;
    let slow = slow["runs"].as_array().unwrap();
    assert_eq!(slow.len(), 1, "{slow:?}");
    assert_eq!(
        (slow[0]["task_id"].as_i64(), slow[0]["worker"].as_str()),
        (Some(sc.double_task), Some("worker-b"))
    );
    let one = api.ok(&format!("/api/v1/runs/{}", slow[0]["id"])).await;
    assert_eq!(one["reclaim_reason"], "slow_worker", "a run by id says it too: {one}");
    let first = api.ok(&format!("/api/v1/runs/{}", sc.lost_run)).await;
    assert_eq!(first["reclaim_reason"], Value::Null, "a first claim: {first}");
    // The timed-out reply, claimed again by the runner's retries (each after a failure).
    let retried = api.ok("/api/v1/runs?reclaim=retry&since=2h").await;
    let retried = retried["runs"].as_array().unwrap();
    assert!(ids(retried).contains(&sc.api_error_run), "{retried:?}");
    assert!(!ids(retried).contains(&sc.timeout_run), "a first claim is no retry: {retried:?}");
    for r in retried {
        assert_eq!(
            (r["reclaim_reason"].as_str(), r["lease_epoch"].as_i64() > Some(1)),
            (Some("retry"), true),
            "{r}"
        );
    }
    let epochs: Vec<i64> =
        task["effects"].as_array().unwrap().iter().map(|e| e["lease_epoch"].as_i64().unwrap()).collect();
    assert_eq!(epochs, vec![1, 2]);
    assert_eq!(task["audit"], serde_json::json!([]));
    // A healthy idempotent task.
    let healthy = api.ok(&format!("/api/v1/tasks/{}", sc.double_task + 1)).await;
    assert_eq!(
        (healthy["double_execution"].as_bool(), healthy["needs_compensation"].as_bool()),
        (Some(false), Some(false))
    );

    for uri in ["/api/v1/runs/99999999", "/api/v1/tasks/99999999", "/api/v1/nope", "/api/v1/runs/1/extra"] {
        let (status, body) = api.json(uri).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{uri}: {body}");
        assert!(body["error"].as_str().unwrap().contains("not found"), "{body}");
    }
}

async fn bad_parameters_are_400_naming_the_parameter(db: Db) {
    arrange(&db).await;
    let api = Api::new(db);
    let before = api.store.totals().await.unwrap();
    for (uri, param) in [
        ("/api/v1/runs?cause=melted", "cause"),
        ("/api/v1/runs?reclaim=lazy_worker", "reclaim"),
        ("/api/v1/runs?state=done", "state"),
        ("/api/v1/runs?limit=0", "limit"),
        ("/api/v1/runs?limit=501", "limit"),
        ("/api/v1/runs?limit=ten", "limit"),
        ("/api/v1/runs?after=garbage", "after"),
        ("/api/v1/runs?after=1_x", "after"),
        ("/api/v1/runs?since=yesterday", "since"),
        ("/api/v1/runs?since=1h&until=2h", "until"),
        ("/api/v1/runs?source=email", "source"),
        ("/api/v1/runs?task=abc", "task"),
        ("/api/v1/runs?colour=red", "colour"),
        ("/api/v1/runs/facets?cause=nope", "cause"),
        ("/api/v1/runs/abc", "id"),
        ("/api/v1/runs/-1", "id"),
        ("/api/v1/runs/99999999999999999999999", "id"),
        ("/api/v1/tasks/1.5", "id"),
        ("/api/v1/overview?since=soon", "since"),
        ("/api/v1/overview?bucket=1s&since=7d", "bucket"),
        ("/api/v1/overview?bucket=fortnight", "bucket"),
        ("/api/v1/overview?since=1h&since=2h", "since"),
        ("/api/v1/overview?limit=3", "limit"),
        ("/api/v1/workers?since=forever", "since"),
        ("/api/v1/workers?until=1h", "until"),
        ("/api/v1/timeline?since=1m&until=2m", "until"),
        ("/api/v1/timeline?bucket=1m", "bucket"),
        ("/api/v1/leases?since=4d", "since"),
        ("/api/v1/leases?since=1h&until=2h", "until"),
        ("/api/v1/leases?since=yesterday", "since"),
        ("/api/v1/leases?kind=a%00b", "kind"),
        ("/api/v1/leases?kind=a&kind=b", "kind"),
        ("/api/v1/leases?minutes=5", "minutes"),
    ] {
        let (status, body) = api.json(uri).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}: {body}");
        assert_eq!(body["param"], param, "{uri}: {body}");
        assert!(!body["error"].as_str().unwrap_or_default().is_empty(), "{uri}: {body}");
    }
    assert_eq!(api.store.totals().await.unwrap(), before, "nothing changed");
}

async fn overview_workers_and_timeline(db: Db) {
    let sc = arrange(&db).await;
    let api = Api::new(db);
    let o = api.ok("/api/v1/overview?since=2h&bucket=10m").await;
    let by_state: i64 = o["by_state"].as_array().unwrap().iter().map(|p| p[1].as_i64().unwrap()).sum();
    assert_eq!(by_state, sc.total_runs);
    let series: i64 = o["series"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|b| b["counts"].as_array().unwrap().iter().map(|p| p[1].as_i64().unwrap()))
        .sum();
    assert_eq!(series, sc.total_runs);
    assert!((12..=13).contains(&o["series"].as_array().unwrap().len()), "two hours of 10-minute buckets");
    assert_eq!(
        o["attention"],
        serde_json::json!({"unsafe_lost_leases": 1, "needs_compensation": 1, "silent_runs": 1, "dead_tasks": 0,
                           "loops": 0, "loop_tasks": [],
                           "taken": {"needs_compensation": 0, "dead_tasks": 0, "loops": 0, "unsafe_lost_leases": 0}})
    );
    // Defaults: the last 24 hours in automatically sized buckets.
    let o = api.ok("/api/v1/overview").await;
    assert!(o["series"].as_array().unwrap().len() <= 61);

    let workers = api.ok("/api/v1/workers?since=2h").await;
    let names: Vec<&str> =
        workers.as_array().unwrap().iter().map(|w| w["worker"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["worker-a", "worker-b"]);
    let b = &workers[1];
    assert_eq!(b["holds_lapsed_lease"], true, "worker-b still owns the silent run's task: {b}");
    assert_eq!(b["leases"].as_array().unwrap().len(), 1);
    assert!(b["failures"].as_i64().unwrap() >= 2);
    // The default window (one hour) still lists b: it holds a lease.
    assert!(api.ok("/api/v1/workers").await.as_array().unwrap().iter().any(|w| w["worker"] == "worker-b"));

    let timeline = api.ok("/api/v1/timeline?since=2h").await;
    let runs = timeline.as_array().unwrap();
    assert_eq!(runs.len() as i64, sc.total_runs);
    let keys: Vec<(String, String)> = runs
        .iter()
        .map(|r| (r["worker"].as_str().unwrap().to_string(), r["claimed_at"].as_str().unwrap().to_string()))
        .collect();
    let parsed: Vec<(String, DateTime<Utc>)> =
        keys.iter().map(|(w, t)| (w.clone(), t.parse::<DateTime<Utc>>().unwrap())).collect();
    assert!(parsed.windows(2).all(|w| w[0] <= w[1]), "by worker, then claim");
    // The scenario ended minutes ago: the last 15 minutes are empty.
    assert!(api.ok("/api/v1/timeline").await.as_array().unwrap().is_empty());
}

async fn metrics_expose_the_series(db: Db) {
    arrange(&db).await;
    let api = Api::new(db.clone());
    api.state.live_clients.store(3, Ordering::Relaxed);
    let (status, content_type, text) = api.get("/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert!(content_type.starts_with("application/openmetrics-text"), "{content_type}");
    for line in [
        "lastword_database_up 1",
        "lastword_live_clients 3",
        "lastword_runs{state=\"lost_lease\"} 1",
        "lastword_runs{state=\"running\"} 0",
        "lastword_run_failures{cause=\"timeout\"} 1",
        "lastword_run_failures{cause=\"crash\"} 0",
        "lastword_lost_lease_completions 1",
        "lastword_silent_runs 1",
        "lastword_double_executions_awaiting_compensation 1",
        "lastword_dead_tasks 0",
        "# TYPE lastword_runs gauge",
        "# EOF",
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} missing from\n{text}");
    }
    // The heap as jemalloc counts it: this test process holds some, and maps at least that much.
    let gauge = |name: &str| -> u64 {
        let value = text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' '));
        value.unwrap_or_else(|| panic!("{name} missing from\n{text}")).parse().unwrap()
    };
    let (allocated, resident) =
        (gauge("lastword_heap_allocated_bytes"), gauge("lastword_heap_resident_bytes"));
    assert!(allocated > 0 && resident >= allocated, "allocated {allocated}, resident {resident}");
    // Within the cache's lifetime the store is not asked again; live clients are always fresh.
    let runner = Runner::new(
        db,
        "worker-z",
        RunnerConfig::default(),
        Arc::new(ManualClock::new(Utc::now() - Duration::minutes(1))),
    );
    let task = NewTask::new("metrics_probe", Source::Tick, Safety::Idempotent).with_max_attempts(1);
    runner.enqueue(&task).await.unwrap();
    // Only this kind: the scenario's lapsed lease stays with worker-b.
    let l = runner.claim(Some(&["metrics_probe".to_string()])).await.unwrap().unwrap();
    runner.finish(l, Outcome::Failed { cause: ErrorCause::Crash, detail: "boom".into() }).await.unwrap();
    api.state.live_clients.store(5, Ordering::Relaxed);
    let (_, _, again) = api.get("/metrics").await;
    assert!(again.contains("lastword_run_failures{cause=\"crash\"} 0"), "cached:\n{again}");
    assert!(again.contains("lastword_live_clients 5"), "{again}");
    // A fresh cache (another server) sees the new run.
    let fresh = Api::new(api.store.db().clone());
    let (_, _, text) = fresh.get("/metrics").await;
    assert!(text.contains("lastword_run_failures{cause=\"crash\"} 1"), "{text}");
    assert!(text.contains("lastword_dead_tasks 1"), "{text}");
}

/// `line` is a whole line of the exposition `text`.
fn has(text: &str, line: &str) {
    assert!(text.lines().any(|l| l == line), "{line:?} missing from\n{text}");
}

/// The counters start at zero when the server does and count what runs reach after that; the
/// attention gauges say what is open now, acknowledged or not.
async fn metrics_count_what_happens_after_the_start_and_gauge_what_is_open(db: Db) {
    let sc = arrange(&db).await;
    let store = store_for(db.clone(), Tokens::default());
    let now = Utc::now();
    while store.refresh_rollups(now).await.unwrap().has_more() {}
    let api = Api::scraped_afresh(store.clone());
    let scrape = || async { api.get("/metrics").await.2 };
    let text = scrape().await;
    // The arranged history is the baseline: not a burst of counts.
    for line in [
        "# TYPE lastword_run_outcomes counter",
        "lastword_run_outcomes_total{state=\"silent\"} 0",
        "lastword_run_outcomes_total{state=\"lost_lease\"} 0",
        "lastword_runs_claimed_total 0",
        "lastword_unsafe_lost_lease_completions_total 0",
        "lastword_attention_items{kind=\"double_execution\",acknowledged=\"false\"} 1",
        "lastword_attention_items{kind=\"unsafe_lost_lease\",acknowledged=\"false\"} 1",
        "lastword_attention_items{kind=\"dead\",acknowledged=\"false\"} 0",
        "lastword_attention_items{kind=\"loop\",acknowledged=\"false\"} 0",
    ] {
        has(&text, line);
    }
    assert!(
        !text.contains("lastword_run_outcomes_total{state=\"running\"}"),
        "running is no outcome: {text}"
    );

    // After the start: a task dies (crash, one attempt), another acts.
    let runner = Runner::new(
        db.clone(),
        "worker-z",
        RunnerConfig::default(),
        Arc::new(ManualClock::new(now - Duration::minutes(1))),
    );
    let probe = |max_attempts| {
        NewTask::new("metrics_probe", Source::Tick, Safety::Idempotent).with_max_attempts(max_attempts)
    };
    let kinds = ["metrics_probe".to_string()];
    let dead = runner.enqueue(&probe(1)).await.unwrap();
    let l = runner.claim(Some(&kinds)).await.unwrap().unwrap();
    runner.finish(l, Outcome::Failed { cause: ErrorCause::Crash, detail: "boom".into() }).await.unwrap();
    runner.enqueue(&probe(3)).await.unwrap();
    let l = runner.claim(Some(&kinds)).await.unwrap().unwrap();
    runner.finish(l, acted("probed")).await.unwrap();
    // As the server's refresher would: when the test runs in a quarter-hour's first minute, the
    // runs claimed a minute ago land in a bucket the rollups had already counted.
    while store.refresh_rollups(Utc::now()).await.unwrap().has_more() {}
    let text = scrape().await;
    for line in [
        "lastword_runs_claimed_total 2",
        "lastword_run_outcomes_total{state=\"failed\"} 1",
        "lastword_run_outcomes_total{state=\"acted\"} 1",
        "lastword_run_outcomes_total{state=\"silent\"} 0",
        "lastword_run_failure_causes_total{cause=\"crash\"} 1",
        "lastword_tasks_dead_total 1",
        "lastword_attention_items{kind=\"dead\",acknowledged=\"false\"} 1",
    ] {
        has(&text, line);
    }
    // Someone takes the dead task: open 0, acknowledged 1; the counters do not move.
    let request = lastword_core::ActionRequest {
        reason: "investigating".into(),
        attention: Some(lastword_core::AttentionKind::Dead),
        ..Default::default()
    };
    let actor = lastword_core::Actor::new("ann", "session");
    store
        .act(dead, lastword_core::ActionKind::Acknowledge, &request, &actor, Utc::now())
        .await
        .unwrap()
        .unwrap();
    let text = scrape().await;
    has(&text, "lastword_attention_items{kind=\"dead\",acknowledged=\"false\"} 0");
    has(&text, "lastword_attention_items{kind=\"dead\",acknowledged=\"true\"} 1");
    has(&text, "lastword_runs_claimed_total 2");
    // The overview counts the unsafe lost lease taken once its task's item is acknowledged.
    let taken = |o: Value| o["attention"]["taken"]["unsafe_lost_leases"].as_i64();
    assert_eq!(taken(api.ok("/api/v1/overview?since=2h").await), Some(0));
    let request = lastword_core::ActionRequest {
        reason: "refund team checking".into(),
        attention: Some(lastword_core::AttentionKind::UnsafeLostLease),
        ..Default::default()
    };
    store
        .act(sc.double_task, lastword_core::ActionKind::Acknowledge, &request, &actor, Utc::now())
        .await
        .unwrap()
        .unwrap();
    let o = api.ok("/api/v1/overview?since=2h").await;
    assert_eq!((taken(o.clone()), o["attention"]["unsafe_lost_leases"].as_i64()), (Some(1), Some(1)), "{o}");
    let text = scrape().await;
    has(&text, "lastword_attention_items{kind=\"unsafe_lost_lease\",acknowledged=\"false\"} 0");
    has(&text, "lastword_attention_items{kind=\"unsafe_lost_lease\",acknowledged=\"true\"} 1");
}

/// The simulator's fleet (short lease, fixed seed) leaves realistic data; the API pages through
/// all of it exactly once, filtered or not, and the facets agree with the filtered lists.
async fn simulated_fleet_pages_through(db: Db) {
    let config = lastword_sim::FleetConfig {
        workers: 4,
        arrival_rate: 25.0,
        lease: std::time::Duration::from_millis(300),
        work_min: std::time::Duration::from_millis(10),
        work_max: std::time::Duration::from_millis(150),
        duration: Some(std::time::Duration::from_secs(3)),
        seed: Some(7),
        ..lastword_sim::FleetConfig::default()
    };
    lastword_sim::run_fleet(db.clone(), config, std::future::pending()).await.unwrap();
    // Let the leases of runs the fleet abandoned lapse, so no state changes while we read; and
    // more than a second, because reads ask as of now truncated to the second
    // (`lastword_core::read_now`): a claim in the last fraction of a second would otherwise fall
    // after the overview's window and be missing from its counts.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let api = Api::new(db);
    let total = api.store.totals().await.unwrap().runs;
    assert!(total > 20, "the fleet ran: {total}");
    let all = ids(&api.all_runs("/api/v1/runs?limit=7").await);
    assert_eq!(all.len() as i64, total);
    assert_eq!(all.iter().collect::<BTreeSet<_>>().len(), all.len());
    let facets = api.ok("/api/v1/runs/facets").await;
    for pair in facets["counts"].as_array().unwrap() {
        let cause = pair[0].as_str().unwrap();
        let listed = api.all_runs(&format!("/api/v1/runs?cause={cause}&limit=50")).await;
        assert_eq!(listed.len() as i64, pair[1].as_i64().unwrap(), "{cause}");
        assert!(listed.iter().all(|r| r["cause"] == cause), "{cause}");
    }
    let by_state: i64 = api.ok("/api/v1/overview?since=1h").await["by_state"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[1].as_i64().unwrap())
        .sum();
    assert_eq!(by_state, total);
}

#[tokio::test]
async fn api_is_503_json_when_the_database_is_gone() {
    let db = lastword_store::testing::sqlite_memory().await;
    let api = Api::new(db.clone());
    db.close().await;
    for uri in ["/api/v1/runs", "/api/v1/runs/1", "/api/v1/tasks/1", "/api/v1/overview", "/api/v1/workers"] {
        let (status, body) = api.json(uri).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{uri}: {body}");
        assert_eq!(body["error"], "database unavailable");
    }
    // Still a 400 for a bad request: the parameters are judged before the database is asked.
    assert_eq!(api.json("/api/v1/runs?limit=0").await.0, StatusCode::BAD_REQUEST);
    let (status, _, text) = api.get("/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert!(text.lines().any(|l| l == "lastword_database_up 0"), "{text}");
    assert!(!text.contains("lastword_runs"), "no stale numbers: {text}");
}

/// Pages and JSON travel compressed for a browser that accepts zstd, brotli or gzip; the live stream
/// never is (compression would hold its events back); the bundle is revalidated, not guessed.
async fn responses_are_compressed_except_the_live_stream(db: Db) {
    let api = Api::new(db);
    let send = |uri: &str, encoding: &str| {
        let request = Request::get(uri).header("accept-encoding", encoding).body(Body::empty()).unwrap();
        api.app.clone().oneshot(request)
    };
    let header = |r: &axum::response::Response, name: &str| {
        r.headers().get(name).map(|v| v.to_str().unwrap_or_default().to_string())
    };
    let page = send("/failures", "br, gzip").await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert_eq!(header(&page, "content-encoding").as_deref(), Some("br"));
    // What Chromium and Firefox send: zstd preferred, and the page decodes whole.
    let page = send("/failures", "gzip, deflate, br, zstd").await.unwrap();
    assert_eq!(header(&page, "content-encoding").as_deref(), Some("zstd"));
    let packed = axum::body::to_bytes(page.into_body(), 1 << 22).await.unwrap();
    let html = String::from_utf8(zstd::decode_all(&packed[..]).unwrap()).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("</body>"), "{html}");
    let json = send("/api/v1/overview?since=1h", "gzip").await.unwrap();
    assert_eq!(header(&json, "content-encoding").as_deref(), Some("gzip"));
    let gz = axum::body::to_bytes(json.into_body(), 1 << 20).await.unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&gz[..]), &mut text).unwrap();
    assert!(serde_json::from_str::<Value>(&text).unwrap()["by_state"].is_array(), "{text}");
    let plain = send("/api/v1/overview?since=1h", "identity").await.unwrap();
    assert_eq!(header(&plain, "content-encoding"), None);

    let events = send("/api/v1/events", "br, gzip").await.unwrap();
    assert_eq!(header(&events, "content-type").as_deref(), Some("text/event-stream"));
    assert_eq!(header(&events, "content-encoding"), None, "the live stream is never compressed");

    let bundle = send("/pkg/lastword.css", "br").await.unwrap();
    assert_eq!(header(&bundle, "cache-control").as_deref(), Some("no-cache"));
}

/// The request's answer with its headers, for the downloads.
async fn download(api: &Api, uri: &str) -> (StatusCode, axum::http::HeaderMap, String) {
    let response = api.app.clone().oneshot(Request::get(uri).body(Body::empty()).unwrap()).await.unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    let bytes = axum::body::to_bytes(response.into_body(), 64 << 20).await.unwrap();
    (status, headers, String::from_utf8_lossy(&bytes).into_owned())
}

fn header_of<'a>(headers: &'a axum::http::HeaderMap, name: &str) -> &'a str {
    headers.get(name).map(|v| v.to_str().unwrap()).unwrap_or_default()
}

/// A task's story as Markdown and JSON, a filtered list as CSV and NDJSON: downloads with the
/// same content as the API's own answers, and every bad parameter a 400 before anything is sent.
async fn exports_carry_the_story_and_the_list(db: Db) {
    let sc = arrange(&db).await;
    let api = Api::new(db);
    let task = sc.double_task;

    let (status, headers, md) = download(&api, &format!("/api/v1/tasks/{task}/export")).await;
    assert_eq!(status, StatusCode::OK, "{md}");
    assert!(header_of(&headers, "content-type").starts_with("text/markdown"));
    assert_eq!(
        header_of(&headers, "content-disposition"),
        format!("attachment; filename=\"task-{task}.md\"")
    );
    assert!(md.starts_with(&format!("# Task #{task} — charge\\_card\n")), "{md}");
    for needed in [
        "**executed twice**",
        "**needs compensation**",
        "## Attempts (2)",
        "| rejected (0 rows: lease lost) | lost_lease |",
        "| accepted | acted |",
        "| charge | charge-1 | 1 |",
        "| charge | charge-1 | 2 |",
        "## Audit trail (0)",
    ] {
        assert!(md.contains(needed), "{needed:?} missing from:\n{md}");
    }
    let (status, headers, json) = download(&api, &format!("/api/v1/tasks/{task}/export?format=json")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        header_of(&headers, "content-disposition"),
        format!("attachment; filename=\"task-{task}.json\"")
    );
    // Both answers say when they were read (`as_of`, whole seconds): two reads a moment apart
    // may straddle a second, so that field is compared apart (CI saw 21:25:28 against :29).
    let mut exported: Value = serde_json::from_str(&json).unwrap();
    let mut answer = api.ok(&format!("/api/v1/tasks/{task}")).await;
    for a in [&mut exported, &mut answer] {
        let as_of = a.as_object_mut().and_then(|o| o.remove("as_of"));
        assert!(as_of.is_some_and(|t| t.is_string()), "as_of missing from {a}");
    }
    assert_eq!(exported, answer, "the JSON export is the task's API answer");

    let everything = api.all_runs("/api/v1/runs?limit=3").await;
    let (status, headers, csv) = download(&api, "/api/v1/runs/export?format=csv").await;
    assert_eq!(status, StatusCode::OK, "{csv}");
    assert!(header_of(&headers, "content-type").starts_with("text/csv"));
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let columns: Vec<String> = reader.headers().unwrap().iter().map(str::to_string).collect();
    assert_eq!(columns, lastword_server::api::export::CSV_COLUMNS);
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    let csv_ids: Vec<i64> = rows.iter().map(|r| r[0].parse().unwrap()).collect();
    assert_eq!(csv_ids, ids(&everything), "every run, newest first, as the list pages them");
    assert_eq!(csv_ids.len() as i64, sc.total_runs);
    let lost = rows.iter().find(|r| r[0] == sc.lost_run.to_string()).unwrap();
    assert_eq!((&lost[5], &lost[7], &lost[8], &lost[13]), ("worker-a", "lost_lease", "lost_lease", "0"));

    let (_, _, ndjson) = download(&api, "/api/v1/runs/export?format=ndjson&cause=timeout").await;
    let lines: Vec<Value> = ndjson.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(ids(&lines), vec![sc.timeout_run], "{ndjson}");
    assert_eq!(
        lines[0],
        api.ok("/api/v1/runs?cause=timeout").await["runs"][0],
        "an NDJSON line is a /runs item"
    );

    // Compressed as a browser asks for it, the stream ends cleanly (no poll after its end).
    let request = Request::get("/api/v1/runs/export?format=csv")
        .header("accept-encoding", "gzip")
        .body(Body::empty())
        .unwrap();
    let response = api.app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.headers().get("content-encoding").unwrap(), "gzip");
    let gz = axum::body::to_bytes(response.into_body(), 64 << 20).await.unwrap();
    let mut unzipped = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&gz[..]), &mut unzipped).unwrap();
    assert_eq!(unzipped, csv, "the same file, compressed");

    let (_, _, two) = download(&api, "/api/v1/runs/export?format=csv&max=2").await;
    assert_eq!(two.lines().count(), 3, "a header and the two newest: {two}");

    let before = api.store.totals().await.unwrap();
    for (uri, param) in [
        (format!("/api/v1/tasks/{task}/export?format=pdf"), "format"),
        (format!("/api/v1/tasks/{task}/export?format=md&format=json"), "format"),
        (format!("/api/v1/tasks/{task}/export?x=1"), "x"),
        ("/api/v1/tasks/zero/export".to_string(), "id"),
        ("/api/v1/runs/export".to_string(), "format"),
        ("/api/v1/runs/export?format=xlsx".to_string(), "format"),
        ("/api/v1/runs/export?format=csv&format=csv".to_string(), "format"),
        ("/api/v1/runs/export?format=csv&max=0".to_string(), "max"),
        ("/api/v1/runs/export?format=csv&max=100001".to_string(), "max"),
        ("/api/v1/runs/export?format=csv&limit=5".to_string(), "limit"),
        ("/api/v1/runs/export?format=csv&after=1_1".to_string(), "after"),
        ("/api/v1/runs/export?format=csv&cause=melted".to_string(), "cause"),
    ] {
        let (status, body) = api.json(&uri).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}: {body}");
        assert_eq!(body["param"], param, "{uri}: {body}");
    }
    let (status, _) = api.json("/api/v1/tasks/99999999/export").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(api.store.totals().await.unwrap(), before, "nothing changed");
}

/// A list longer than one keyset page (500) comes out whole, each run once, and `max` cuts it.
async fn a_long_export_pages_through_the_store(db: Db) {
    use lastword_store::testing::{exec, insert_task};
    let now = Utc::now() - Duration::minutes(5);
    let task = insert_task(&db, "reply", "idempotent", now).await;
    for epoch in 1..=1_203i64 {
        let claimed = now + Duration::milliseconds(epoch);
        exec(
            &db,
            "INSERT INTO runs (task_id, worker, lease_epoch, claimed_at, lease_expires_at, finished_at, output, \
             completion_rows) VALUES ($1, 'w', $2, $3, $3, $3, '=1+1', 1)",
            &[task.into(), epoch.into(), claimed.into()],
        )
        .await;
    }
    let api = Api::new(db);
    let (status, _, csv) = download(&api, "/api/v1/runs/export?format=csv&max=100000").await;
    assert_eq!(status, StatusCode::OK);
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    let mut epochs: Vec<i64> = rows.iter().map(|r| r[6].parse().unwrap()).collect();
    assert_eq!(epochs.len(), 1_203);
    assert!(epochs.windows(2).all(|w| w[0] > w[1]), "newest claim first");
    epochs.dedup();
    assert_eq!(epochs.len(), 1_203, "each run once");
    assert_eq!(&rows[0][16], "'=1+1", "a formula is defused for spreadsheets");
    let (_, _, cut) = download(&api, "/api/v1/runs/export?format=ndjson&max=700").await;
    assert_eq!(cut.lines().count(), 700);
}

/// The real runner's double execution (a 30 s lease outlived by 1 s, re-claimed 1 s after it
/// lapsed, the late write rejected) read back as lease figures, a suggestion and a page.
async fn leases_show_the_runner_story_and_suggest_a_lease(db: Db) {
    arrange(&db).await;
    let api = Api::new(db);
    let report = api.ok("/api/v1/leases?since=2h").await;
    let kinds: Vec<&str> =
        report["kinds"].as_array().unwrap().iter().map(|k| k["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["charge_card", "reply", "triage"]);
    let charge = &report["kinds"][0];
    // a: claimed, 31 s, finished late (rejected); b: re-claimed 1 s after the lapse, finished at once.
    assert_eq!(charge["runs"], 2, "{charge}");
    assert_eq!(charge["lease_ms"], 30_000, "{charge}");
    assert_eq!(
        (charge["duration_p50_ms"].as_i64(), charge["duration_p95_ms"].as_i64()),
        (Some(0), Some(31_000))
    );
    assert_eq!(
        (charge["outlived_lease"].as_i64(), charge["lost_lease"].as_i64()),
        (Some(1), Some(1)),
        "{charge}"
    );
    assert_eq!(charge["double_executions"], 1, "both runs charged under their own epoch: {charge}");
    assert_eq!((charge["reclaims"].as_i64(), charge["reclaims_slow_worker"].as_i64()), (Some(1), Some(1)));
    assert_eq!(charge["reclaim_latency_p50_ms"], 1_000);
    assert_eq!(
        charge["suggestion"],
        "Runs of `charge_card` last 31 s at p95 and hold a 30 s lease: 50 % of finished runs outlive it. \
         A 60 s lease (or a heartbeat every 10 s) would have avoided 1 of the 1 lost leases in the last 2 h."
    );
    let unfinished: i64 = report["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["runs"].as_i64().unwrap() - k["finished"].as_i64().unwrap())
        .sum();
    assert_eq!(unfinished, 1, "the silent run has no duration");
    assert!(
        report["kinds"][1]["suggestion"].is_null(),
        "replies fail, but not for their lease: {}",
        report["kinds"][1]
    );
    assert!(report["loops"].as_array().unwrap().is_empty());
    assert!(
        report["skewed_workers"].as_array().unwrap().is_empty(),
        "the runner's clock is behind, not ahead"
    );
    assert!(report["heartbeats"].as_array().unwrap().is_empty(), "every lease has lapsed");
    // worker-a's charge finished after losing its lease (paused); worker-b's digest is silent
    // and worker-b claimed nothing after it (dead, as far as the window knows).
    assert_eq!(
        report["workers"],
        serde_json::json!([{"worker": "worker-b", "paused": 0, "stalled": 0, "dead": 1},
                           {"worker": "worker-a", "paused": 1, "stalled": 0, "dead": 0}])
    );
    assert!(report["computed_at"].is_string());

    let one = api.ok("/api/v1/leases?since=2h&kind=charge_card").await;
    assert_eq!(one["kinds"].as_array().unwrap().len(), 1);
    assert_eq!(one["kinds"][0], *charge, "the same figures narrowed to the kind");
    // The scenario ended minutes ago: nothing was claimed in the last minute.
    assert!(api.ok("/api/v1/leases?since=1m").await["kinds"].as_array().unwrap().is_empty());

    let (status, _, page) = download(&api, "/leases?window=24h").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        page.contains(r#"data-testid="lease-suggestion" data-kind="charge_card""#),
        "the suggestion on the page"
    );
    assert!(page.contains("would have avoided 1 of the 1 lost leases in the last 24 h"), "with its numbers");
    let (status, _, page) = download(&api, "/leases?window=1h&kind=reply").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        !page.contains("lease-suggestion") && page.contains(r#"data-kind="reply""#),
        "narrowed to healthy replies"
    );
}

/// The lease histograms count the runs that finish after the server starts, each once: a run
/// that outlived its 30 s lease by a second, and the run that re-claimed its task a second after
/// the lapse. The arranged history before the start is the baseline, not a burst.
async fn lease_histograms_observe_each_finished_run_once(db: Db) {
    arrange(&db).await;
    let store = store_for(db.clone(), Tokens::default());
    let api = Api::scraped_afresh(store.clone());
    let scrape = || async { api.get("/metrics").await.2 };
    has(&scrape().await, "lastword_run_duration_over_lease_count 0");

    let clock = ManualClock::new(Utc::now() - Duration::minutes(2));
    let runner = |w: &str| Runner::new(db.clone(), w, RunnerConfig::default(), Arc::new(clock.clone()));
    let (z, y) = (runner("worker-z"), runner("worker-y"));
    let kinds = ["histogram_probe".to_string()];
    z.enqueue(&NewTask::new("histogram_probe", Source::Tick, Safety::Idempotent)).await.unwrap();
    let slow = z.claim(Some(&kinds)).await.unwrap().unwrap();
    clock.advance(Duration::seconds(31));
    let again = y.claim(Some(&kinds)).await.unwrap().unwrap();
    assert_eq!(again.task_id, slow.task_id, "re-claimed a second after the lapse");
    let reclaiming_run = again.run_id;
    y.finish(again, acted("probed")).await.unwrap();
    z.finish(slow, acted("probed, late")).await.unwrap();
    // The observer leaves changes younger than two seconds to the next refresh.
    tokio::time::sleep(std::time::Duration::from_millis(2_200)).await;
    let text = scrape().await;
    for line in [
        "# TYPE lastword_run_duration_over_lease histogram",
        "lastword_run_duration_over_lease_count 2",
        // y took no time; z took 31 s of a 30 s lease.
        "lastword_run_duration_over_lease_bucket{le=\"0.1\"} 1",
        "lastword_run_duration_over_lease_bucket{le=\"1.0\"} 1",
        "lastword_run_duration_over_lease_bucket{le=\"1.5\"} 2",
        "lastword_run_unheard_at_finish_over_lease_bucket{le=\"1.0\"} 1",
        "lastword_run_unheard_at_finish_over_lease_count 2",
        "lastword_reclaim_latency_seconds_count 1",
        "lastword_reclaim_latency_seconds_sum 1.0",
        "lastword_reclaim_latency_seconds_bucket{le=\"0.5\"} 0",
        "lastword_reclaim_latency_seconds_bucket{le=\"1.0\"} 1",
    ] {
        has(&text, line);
    }
    // Changed again after it finished (a trace id set late): observed once all the same.
    lastword_store::testing::exec(
        &db,
        "UPDATE runs SET trace_id = 'late' WHERE id = $1",
        &[reclaiming_run.into()],
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(2_200)).await;
    let text = scrape().await;
    has(&text, "lastword_run_duration_over_lease_count 2");
    has(&text, "lastword_reclaim_latency_seconds_count 1");
}

lastword_store::on_sqlite_and_postgres!(
    responses_are_compressed_except_the_live_stream,
    lease_histograms_observe_each_finished_run_once,
    leases_show_the_runner_story_and_suggest_a_lease,
    runs_list_filters_and_pages,
    facets_count_failures_per_cause,
    runs_and_tasks_by_id,
    bad_parameters_are_400_naming_the_parameter,
    overview_workers_and_timeline,
    metrics_expose_the_series,
    metrics_count_what_happens_after_the_start_and_gauge_what_is_open,
    exports_carry_the_story_and_the_list,
    a_long_export_pages_through_the_store,
);

mod simulated {
    #[tokio::test]
    async fn on_a_sqlite_file() {
        let (db, _dir) = lastword_store::testing::sqlite_file().await;
        super::simulated_fleet_pages_through(db).await;
    }

    #[tokio::test]
    async fn on_postgres() {
        if let Some(db) = lastword_store::testing::postgres("simulated_fleet_pages_through").await {
            super::simulated_fleet_pages_through(db.clone()).await;
            lastword_store::testing::discard_postgres(db).await;
        }
    }
}
