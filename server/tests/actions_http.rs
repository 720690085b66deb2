//! The operator actions over HTTP (`docs/api.md`, "Operator actions"): the router the binary
//! serves, driven in-process, on in-memory SQLite, a SQLite file and PostgreSQL. What is tested
//! here is the HTTP layer — status codes, JSON bodies, who may act, cross-site writes, and that a
//! refused or malformed request leaves the database as it was. The store's own rules and races
//! are tested in `runner/tests/actions.rs`.

mod common;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use chrono::{DateTime, Duration, Utc};
use common::{credentials, Answer};
use lastword_core::{ErrorCause, Safety, Source, Task, Tokens};
use lastword_runner::{enqueue, ActionMessage, Finish, ManualClock, Outcome, Runner, RunnerConfig};
use lastword_server::auth::users::Users;
use lastword_server::{router, state::leptos_options, AppState, Auth};
use lastword_store::testing::scalar;
use lastword_store::{store_for, Db, NewTask, Store};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The lease of the runners that make past failures (on a clock an hour back).
const LEASE: i64 = 30;

struct Fixture {
    db: Db,
    store: Arc<dyn Store>,
    app: Router,
    /// An hour in the past: the history the operator acts on.
    clock: ManualClock,
}

impl Fixture {
    /// Local mode: everyone is the operator "local".
    fn new(db: Db) -> Self {
        Self::with_auth(db, Auth::local())
    }

    fn with_auth(db: Db, auth: Auth) -> Self {
        let store = store_for(db.clone(), Tokens::default());
        let app = router(AppState::with_auth(leptos_options(), store.clone(), auth));
        Fixture { db, store, app, clock: ManualClock::new(Utc::now() - Duration::hours(1)) }
    }

    fn runner(&self, worker: &str) -> Runner {
        let config = RunnerConfig { lease: Duration::seconds(LEASE), tokens: Tokens::default() };
        Runner::new(self.db.clone(), worker, config, Arc::new(self.clock.clone()))
    }

    fn past(&self) -> DateTime<Utc> {
        lastword_runner::Clock::now(&self.clock)
    }

    /// A queued task of a kind no other task has, so a claim takes exactly this one.
    async fn task(&self, safety: Safety, max_attempts: i32) -> (i64, [String; 1]) {
        let kind = format!("kind-{}", next_suffix());
        let task = NewTask::new(kind.clone(), Source::Notification, safety).with_max_attempts(max_attempts);
        (enqueue(&self.db, &task, self.past()).await.unwrap(), [kind])
    }

    /// A task that failed once with `cause` and is dead (epoch 1).
    async fn dead(&self, cause: ErrorCause) -> i64 {
        let (id, kind) = self.task(Safety::Idempotent, 1).await;
        let worker = self.runner("w1");
        let lease = worker.claim(Some(&kind)).await.unwrap().unwrap();
        assert_eq!(lease.task_id, id);
        let failed = Outcome::Failed { cause, detail: "the model call failed".into() };
        worker.finish(lease, failed).await.unwrap();
        let task = self.row(id).await;
        assert_eq!((task.status.as_str(), task.lease_epoch), ("dead", 1));
        id
    }

    /// An unsafe task executed twice: `w1` records its effect and outlives its lease, `w2`
    /// re-claims and records the same effect under epoch 2; both finish (w1's write is lost).
    async fn double_executed(&self) -> i64 {
        let (id, kind) = self.task(Safety::Unsafe, 3).await;
        let w1 = self.runner("w1");
        let lease1 = w1.claim(Some(&kind)).await.unwrap().unwrap();
        w1.record_effect(&lease1, "send_email", "reply-1").await.unwrap();
        self.clock.advance(Duration::seconds(LEASE + 1));
        let w2 = self.runner("w2");
        let lease2 = w2.claim(Some(&kind)).await.unwrap().expect("the lapsed lease is re-claimed");
        w2.record_effect(&lease2, "send_email", "reply-1").await.unwrap();
        w2.finish(lease2, Outcome::Acted(ActionMessage::new("replied").unwrap())).await.unwrap();
        let lost = w1.finish(lease1, Outcome::Acted(ActionMessage::new("replied").unwrap())).await.unwrap();
        assert!(matches!(lost, Finish::LostLease { .. }), "{lost:?}");
        id
    }

    async fn row(&self, id: i64) -> Task {
        self.store.task(id).await.unwrap().expect("the task exists")
    }

    /// Applied actions (refused attempts are on the trail too, and counted separately).
    async fn audit_count(&self) -> i64 {
        scalar(&self.db, "SELECT COUNT(*) FROM operator_actions WHERE outcome = 'applied'", &[]).await
    }

    async fn send(&self, request: Request<Body>) -> Answer {
        send(&self.app, request).await
    }

    async fn post(&self, uri: &str, body: &str) -> Answer {
        self.send(post_json(uri, body)).await
    }

    /// A GET that must answer 200 with JSON.
    async fn get_ok(&self, uri: &str) -> Value {
        let answer = self.send(Request::get(uri).body(Body::empty()).unwrap()).await;
        assert_eq!(answer.status, StatusCode::OK, "{uri}: {}", answer.body);
        answer.json()
    }
}

fn next_suffix() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Sends `request`; no answer here may be a 5xx.
async fn send(app: &Router, request: Request<Body>) -> Answer {
    let what = format!("{} {}", request.method(), request.uri());
    let answer = common::send(app, request).await;
    assert!(!answer.status.is_server_error(), "{what}: never a 5xx: {} {}", answer.status, answer.body);
    answer
}

fn post_json_builder(uri: &str) -> axum::http::request::Builder {
    Request::post(uri).header(header::CONTENT_TYPE, "application/json")
}

fn post_json(uri: &str, body: &str) -> Request<Body> {
    post_json_builder(uri).body(Body::from(body.to_string())).unwrap()
}

fn requeue_uri(id: i64) -> String {
    format!("/api/v1/tasks/{id}/requeue")
}

fn requeue_body(epoch: i64) -> String {
    json!({"reason": "stuck behind a dead API", "expected_epoch": epoch}).to_string()
}

/// Asserts a 409 refusal with `code`; returns its message and task.
fn refused(answer: &Answer, code: &str) -> (String, Value) {
    assert_eq!(answer.status, StatusCode::CONFLICT, "{}", answer.body);
    let body = answer.json();
    assert_eq!((body["outcome"].as_str(), body["error"].as_str()), (Some("refused"), Some(code)), "{body}");
    (body["message"].as_str().expect("a message").to_string(), body["task"].clone())
}

/// Asserts a 200 with `outcome`; returns the body.
fn ok(answer: &Answer, outcome: &str) -> Value {
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let body = answer.json();
    assert_eq!(body["outcome"], outcome, "{body}");
    body
}

// ---------------------------------------------------------------- 1. requeue in local mode

async fn requeue_is_applied_audited_and_listed(db: Db) {
    let f = Fixture::new(db);
    let id = f.dead(ErrorCause::Timeout).await;
    let before = f.row(id).await;

    let body = json!({
        "reason": "  the API is back  ",
        "expected_epoch": 1,
        "expected_status": "dead",
        "request_id": "rq-1",
    });
    let answer = f.post(&requeue_uri(id), &body.to_string()).await;
    let body = ok(&answer, "applied");
    let (task, action) = (&body["task"], &body["action"]);
    assert_eq!(task["id"], id);
    assert_eq!(task["status"], "queued");
    assert_eq!(task["lease_epoch"], 2);
    assert_eq!((task["owner"].clone(), task["attempts"].clone()), (Value::Null, json!(0)));
    assert_eq!(action["task_id"], id);
    assert_eq!(action["action"], "requeue");
    assert_eq!(action["actor"], "local");
    assert_eq!(action["reason"], "the API is back", "trimmed");
    assert_eq!((action["epoch_seen"].clone(), action["epoch_after"].clone()), (json!(1), json!(2)));
    assert_eq!((action["status_seen"].as_str(), action["outcome"].as_str()), (Some("dead"), Some("applied")));
    assert_eq!(action["request_id"], "rq-1");
    assert!(action["run_id"].is_i64(), "the run of the epoch seen: {action}");
    let action_id = action["id"].as_i64().unwrap();

    // The database: the task re-queued, one audit row.
    let after = f.row(id).await;
    assert_eq!((after.status.as_str(), after.lease_epoch), ("queued", before.lease_epoch + 1));
    assert_eq!(serde_json::to_value(&after).unwrap(), *task);
    assert_eq!(f.audit_count().await, 1);
    let row = scalar(
        &f.db,
        "SELECT COUNT(*) FROM operator_actions WHERE id = $1 AND task_id = $2 AND actor = 'local'",
        &[action_id.into(), id.into()],
    )
    .await;
    assert_eq!(row, 1);

    // The audit trail lists it, filtered or not.
    let audit = f.get_ok("/api/v1/audit").await;
    assert_eq!(audit["actions"].as_array().unwrap().len(), 1, "{audit}");
    assert_eq!(audit["actions"][0], *action);
    assert_eq!(audit["next"], Value::Null);
    let filtered = f.get_ok(&format!("/api/v1/audit?actor=local&action=requeue&task={id}&since=1h")).await;
    assert_eq!(filtered["actions"][0]["id"], action_id);
    let other = f.get_ok("/api/v1/audit?action=compensate").await;
    assert_eq!(other["actions"], json!([]));
    let nobody = f.get_ok("/api/v1/audit?actor=alice").await;
    assert_eq!(nobody["actions"], json!([]));

    // And so does the task.
    let detail = f.get_ok(&format!("/api/v1/tasks/{id}")).await;
    assert_eq!((detail["status"].as_str(), detail["lease_epoch"].as_i64()), (Some("queued"), Some(2)));
    assert_eq!(detail["audit"], json!([action]));
}

// ---------------------------------------------------------------- 2. a stale view

async fn a_stale_epoch_is_refused_with_the_current_task_and_changes_nothing(db: Db) {
    let f = Fixture::new(db);
    let id = f.dead(ErrorCause::Timeout).await;
    let before = f.row(id).await;

    let answer = f.post(&requeue_uri(id), &requeue_body(0)).await;
    let (message, task) = refused(&answer, "changed");
    assert!(message.contains("epoch"), "{message}");
    assert!(message.contains("epoch 0 → 1"), "{message}");
    assert_eq!(task, serde_json::to_value(&before).unwrap(), "the task as it is now");

    // A stale status at the right epoch too.
    let body = json!({"reason": "r", "expected_epoch": 1, "expected_status": "leased"});
    let (message, _) = refused(&f.post(&requeue_uri(id), &body.to_string()).await, "changed");
    assert!(message.contains("status leased → dead"), "{message}");

    assert_eq!(f.row(id).await, before, "nothing changed");
    assert_eq!(f.audit_count().await, 0);
    // The task's trail holds the two attempts, refused, and nothing applied.
    let trail = f.get_ok(&format!("/api/v1/tasks/{id}")).await["audit"].clone();
    let outcomes: Vec<&str> =
        trail.as_array().unwrap().iter().map(|a| a["outcome"].as_str().unwrap()).collect();
    assert_eq!(outcomes, ["refused:changed", "refused:changed"], "{trail}");
    assert_eq!(trail[0]["via"], "local");
}

// ---------------------------------------------------------------- 3. a live lease

async fn a_live_lease_is_refused_unless_fenced_and_the_fenced_holder_loses_its_write(db: Db) {
    let f = Fixture::new(db);
    let (id, kind) = f.task(Safety::Unsafe, 3).await;
    // Claimed at the real now, for an hour: live for the server's clock.
    let config = RunnerConfig { lease: Duration::hours(1), tokens: Tokens::default() };
    let holder = Runner::new(f.db.clone(), "worker-9", config, Arc::new(ManualClock::new(Utc::now())));
    let lease = holder.claim(Some(&kind)).await.unwrap().unwrap();
    assert_eq!((lease.task_id, lease.epoch), (id, 1));
    let before = f.row(id).await;

    let (message, task) = refused(&f.post(&requeue_uri(id), &requeue_body(1)).await, "lease_live");
    assert!(message.contains("worker-9 holds a live lease"), "{message}");
    assert!(message.contains("fence"), "says how to take it: {message}");
    assert_eq!((task["status"].as_str(), task["owner"].as_str()), (Some("leased"), Some("worker-9")));
    assert_eq!(f.row(id).await, before);
    assert_eq!(f.audit_count().await, 0);

    let body = json!({"reason": "worker-9 is wedged", "expected_epoch": 1, "fence": true});
    let body = ok(&f.post(&requeue_uri(id), &body.to_string()).await, "applied");
    assert_eq!(
        (body["task"]["status"].as_str(), body["task"]["lease_epoch"].as_i64()),
        (Some("queued"), Some(2))
    );
    assert_eq!(body["task"]["owner"], Value::Null);
    assert_eq!(body["action"]["status_seen"], "leased");
    assert_eq!(body["action"]["run_id"], lease.run_id);
    assert_eq!(f.audit_count().await, 1);

    // The fenced holder's final write matches nothing.
    let finish = holder.finish(lease, Outcome::Acted(ActionMessage::new("replied").unwrap())).await.unwrap();
    assert_eq!(finish, Finish::LostLease { holder: None, epoch: 2 });
    let after = f.row(id).await;
    assert_eq!(
        (after.status.as_str(), after.lease_epoch),
        ("queued", 2),
        "the lost write did not complete it"
    );
}

// ---------------------------------------------------------------- 4. bad input

async fn bad_input_is_a_400_naming_the_field_and_changes_nothing(db: Db) {
    let f = Fixture::new(db);
    let id = f.dead(ErrorCause::Timeout).await;
    let before = f.row(id).await;
    let uri = requeue_uri(id);
    let compensate = format!("/api/v1/tasks/{id}/compensate");
    let long_id = "x".repeat(101);
    let cases: Vec<(String, String, &str)> = vec![
        (uri.clone(), json!({"reason": "", "expected_epoch": 1}).to_string(), "reason"),
        (uri.clone(), json!({"reason": " \n\t ", "expected_epoch": 1}).to_string(), "reason"),
        (uri.clone(), json!({"expected_epoch": 1}).to_string(), "reason"),
        (uri.clone(), json!({"reason": "x".repeat(2001), "expected_epoch": 1}).to_string(), "reason"),
        (uri.clone(), json!({"reason": "stuck"}).to_string(), "expected_epoch"),
        (uri.clone(), json!({"reason": "stuck", "expected_epoch": null}).to_string(), "expected_epoch"),
        (uri.clone(), json!({"reason": "stuck", "expected_epoch": -1}).to_string(), "expected_epoch"),
        (uri.clone(), r#"{"reason": "stuck", "expected_epoch": 1"#.to_string(), "body"),
        (uri.clone(), "not json".to_string(), "body"),
        (uri.clone(), String::new(), "body"),
        (uri.clone(), json!("stuck").to_string(), "body"),
        // An array would otherwise fill the struct's fields by position.
        (uri.clone(), json!(["stuck", 1]).to_string(), "body"),
        (uri.clone(), json!({"reason": "stuck", "expected_epoch": "1"}).to_string(), "body"),
        (uri.clone(), json!({"reason": "stuck", "expected_epoch": 1, "force": true}).to_string(), "body"),
        ("/api/v1/tasks/abc/requeue".to_string(), requeue_body(1), "id"),
        ("/api/v1/tasks/0/requeue".to_string(), requeue_body(1), "id"),
        ("/api/v1/tasks/-3/requeue".to_string(), requeue_body(1), "id"),
        (
            uri.clone(),
            json!({"reason": "r", "expected_epoch": 1, "reference": "T-1"}).to_string(),
            "reference",
        ),
        (
            uri.clone(),
            json!({"reason": "r", "expected_epoch": 1, "request_id": "a b"}).to_string(),
            "request_id",
        ),
        (
            uri.clone(),
            json!({"reason": "r", "expected_epoch": 1, "request_id": "a/b"}).to_string(),
            "request_id",
        ),
        (
            uri.clone(),
            json!({"reason": "r", "expected_epoch": 1, "request_id": long_id}).to_string(),
            "request_id",
        ),
        (
            uri.clone(),
            json!({"reason": "r", "expected_epoch": 1, "expected_status": "gone"}).to_string(),
            "expected_status",
        ),
        (uri.clone(), json!({"reason": "r", "expected_epoch": 1, "run_id": 0}).to_string(), "run_id"),
        (compensate.clone(), json!({"reason": "r", "fence": true}).to_string(), "fence"),
        (
            format!("/api/v1/tasks/{id}/uncompensate"),
            json!({"reason": "r", "reference": "T-1"}).to_string(),
            "reference",
        ),
    ];
    for (uri, body, param) in &cases {
        let answer = f.post(uri, body).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{uri} {body}: {}", answer.body);
        let json = answer.json();
        assert_eq!(json["param"], *param, "{uri} {body}: {json}");
        assert!(json["error"].as_str().is_some_and(|e| !e.is_empty()), "{json}");
    }
    // The unknown field is named in the message.
    let unknown = f.post(&uri, &json!({"reason": "r", "expected_epoch": 1, "force": true}).to_string()).await;
    assert!(unknown.json()["error"].as_str().unwrap().contains("force"), "{}", unknown.body);
    // A JSON body without its content type is a 400 about the body too.
    let plain = Request::post(&uri).body(Body::from(requeue_body(1))).unwrap();
    let plain = f.send(plain).await;
    assert_eq!(plain.status, StatusCode::BAD_REQUEST, "{}", plain.body);
    assert_eq!(plain.json()["param"], "body");

    // Bad query parameters of the other action endpoints.
    for (uri, param) in [
        ("/api/v1/audit?action=delete", "action"),
        ("/api/v1/audit?task=abc", "task"),
        ("/api/v1/audit?limit=0", "limit"),
        ("/api/v1/audit?since=yesterday", "since"),
        ("/api/v1/audit?colour=red", "colour"),
        ("/api/v1/requeue/preview?fence=maybe", "fence"),
        ("/api/v1/requeue/preview?cause=melted", "cause"),
    ] {
        let answer = f.send(Request::get(uri).body(Body::empty()).unwrap()).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{uri}: {}", answer.body);
        assert_eq!(answer.json()["param"], param, "{uri}");
    }

    // An unknown task: 404, JSON.
    let missing = f.post("/api/v1/tasks/999999/requeue", &requeue_body(1)).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{}", missing.body);
    assert_eq!(missing.json()["error"], "task 999999 not found");
    let missing = f.post("/api/v1/tasks/999999/compensate", &json!({"reason": "r"}).to_string()).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{}", missing.body);
    // A wrong method is not a 5xx either.
    let get = f.send(Request::get(&uri).body(Body::empty()).unwrap()).await;
    assert_eq!(get.status, StatusCode::METHOD_NOT_ALLOWED);

    assert_eq!(f.row(id).await, before, "nothing changed");
    assert_eq!(f.audit_count().await, 0);
}

// ---------------------------------------------------------------- 5. double submission

async fn a_double_submission_is_replayed_not_applied_twice(db: Db) {
    let f = Fixture::new(db);
    let id = f.dead(ErrorCause::Timeout).await;
    let body = json!({"reason": "retry", "expected_epoch": 1, "request_id": "click-7"}).to_string();

    let first = ok(&f.post(&requeue_uri(id), &body).await, "applied");
    let second = ok(&f.post(&requeue_uri(id), &body).await, "replayed");
    assert_eq!(second["action"], first["action"], "the first answer's action");
    assert_eq!(second["task"]["lease_epoch"], 2, "re-queued once");
    assert_eq!(f.row(id).await.lease_epoch, 2);
    assert_eq!(f.audit_count().await, 1);

    // The same id for another task is refused: it belongs to the first action.
    let other = f.dead(ErrorCause::Timeout).await;
    let (message, task) = refused(&f.post(&requeue_uri(other), &body).await, "request_id_reused");
    assert!(message.contains("click-7"), "{message}");
    assert_eq!(task["id"], other);
    assert_eq!(f.row(other).await.lease_epoch, 1);
    assert_eq!(f.audit_count().await, 1);
}

// ---------------------------------------------------------------- 6. compensation

async fn compensate_and_uncompensate_a_double_executed_task(db: Db) {
    let f = Fixture::new(db);
    let id = f.double_executed().await;
    let detail = f.get_ok(&format!("/api/v1/tasks/{id}")).await;
    assert_eq!(
        (detail["double_execution"].as_bool(), detail["needs_compensation"].as_bool()),
        (Some(true), Some(true))
    );

    let uri = format!("/api/v1/tasks/{id}/compensate");
    let body = json!({"reason": "apologised to @ann", "reference": " TICKET-42 ", "request_id": "comp-1"});
    let answer = ok(&f.post(&uri, &body.to_string()).await, "applied");
    let task = &answer["task"];
    assert_eq!(task["compensated_by"], "local");
    assert_eq!(task["compensation_reason"], "apologised to @ann");
    assert_eq!(task["compensation_ref"], "TICKET-42");
    assert!(task["compensated_at"].is_string(), "{task}");
    assert_eq!(
        (task["status"].as_str(), task["lease_epoch"].as_i64()),
        (Some("completed"), Some(2)),
        "untouched"
    );
    assert_eq!(answer["action"]["action"], "compensate");
    assert_eq!(answer["action"]["reference"], "TICKET-42");
    assert_eq!(answer["action"]["epoch_after"], 2);

    let row = f.row(id).await;
    assert_eq!(row.compensated_by.as_deref(), Some("local"));
    assert_eq!(row.compensation_ref.as_deref(), Some("TICKET-42"));
    let detail = f.get_ok(&format!("/api/v1/tasks/{id}")).await;
    assert_eq!(detail["needs_compensation"], false);
    assert_eq!(detail["double_execution"], true, "it still ran twice");
    assert_eq!(detail["compensated_by"], "local");
    assert_eq!(detail["audit"][0]["action"], "compensate");

    // Twice: refused, with who did it.
    let again = json!({"reason": "again"}).to_string();
    let (message, _) = refused(&f.post(&uri, &again).await, "already_compensated");
    assert!(message.contains("by local"), "{message}");
    assert_eq!(f.audit_count().await, 1);

    let undo_uri = format!("/api/v1/tasks/{id}/uncompensate");
    let undo = ok(&f.post(&undo_uri, &json!({"reason": "wrong task"}).to_string()).await, "applied");
    assert_eq!(undo["task"]["compensated_at"], Value::Null);
    assert_eq!(undo["task"]["compensated_by"], Value::Null);
    assert_eq!(undo["action"]["action"], "uncompensate");
    let detail = f.get_ok(&format!("/api/v1/tasks/{id}")).await;
    assert_eq!(detail["needs_compensation"], true);
    let actions: Vec<&str> = detail["audit"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["outcome"] == "applied")
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["uncompensate", "compensate"], "newest first");
    refused(&f.post(&undo_uri, &json!({"reason": "again"}).to_string()).await, "not_compensated");
    assert_eq!(f.row(id).await.compensated_at, None);

    // A task that ran once has nothing to compensate.
    let once = f.dead(ErrorCause::ApiError).await;
    let before = f.row(once).await;
    let uri = format!("/api/v1/tasks/{once}/compensate");
    let (message, task) =
        refused(&f.post(&uri, &json!({"reason": "r"}).to_string()).await, "nothing_to_compensate");
    assert!(message.contains("nothing to compensate"), "{message}");
    assert_eq!(task["id"], once);
    assert_eq!(f.row(once).await, before);
    assert_eq!(f.audit_count().await, 2);
}

// ---------------------------------------------------------------- 7. users mode

async fn login(f: &Fixture, user: &str, password: &str) -> String {
    let form = Request::post("/auth/login")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!("username={user}&password={password}&next=%2F")))
        .unwrap();
    let answer = f.send(form).await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
    answer.session_cookie().expect("logged in")
}

async fn users_mode_only_operators_act_and_the_actor_is_the_token_name(db: Db) {
    let c = credentials();
    let auth = Auth::users(Users::parse(&c.toml).unwrap(), &db).await.unwrap();
    let f = Fixture::with_auth(db, auth);
    let id = f.dead(ErrorCause::Timeout).await;
    let before = f.row(id).await;
    let uri = requeue_uri(id);
    let with = |name: header::HeaderName, value: &str| {
        post_json_builder(&uri).header(name, value).body(Body::from(requeue_body(1))).unwrap()
    };

    let anonymous = f.post(&uri, &requeue_body(1)).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED, "{}", anonymous.body);
    assert_eq!(anonymous.json()["error"], "unauthorized");

    let viewer = f.send(with(header::AUTHORIZATION, &format!("Bearer {}", c.viewer_token))).await;
    assert_eq!(viewer.status, StatusCode::FORBIDDEN, "{}", viewer.body);
    assert_eq!(viewer.json()["error"], "forbidden");
    assert_eq!(viewer.json()["message"], "viewer watcher may not act; operator role required");

    let cookie = login(&f, "vera", "vera-pw").await;
    let session = post_json_builder(&uri)
        .header(header::COOKIE, &cookie)
        .header("sec-fetch-site", "same-origin")
        .body(Body::from(requeue_body(1)))
        .unwrap();
    let session = f.send(session).await;
    assert_eq!(session.status, StatusCode::FORBIDDEN, "{}", session.body);
    assert_eq!(session.json()["message"], "viewer vera may not act; operator role required");

    // A viewer may still read what operators did, and the bulk preview.
    let read = Request::get("/api/v1/audit")
        .header(header::AUTHORIZATION, format!("Bearer {}", c.viewer_token))
        .body(Body::empty())
        .unwrap();
    assert_eq!(f.send(read).await.status, StatusCode::OK);
    let bulk = post_json_builder("/api/v1/requeue")
        .header(header::AUTHORIZATION, format!("Bearer {}", c.viewer_token))
        .body(Body::from(
            json!({"reason": "r", "expected_count": 1, "preview_token": "00-1", "task_ids": [id]})
                .to_string(),
        ))
        .unwrap();
    assert_eq!(f.send(bulk).await.status, StatusCode::FORBIDDEN);
    // A bulk attempt by filter (no state, no cause: failures only, as on the page), and one
    // naming only a task that does not exist.
    let by_filter = post_json_builder("/api/v1/requeue?since=2h")
        .header(header::AUTHORIZATION, format!("Bearer {}", c.viewer_token))
        .body(Body::from(json!({"reason": "all of them", "preview_token": "00-1"}).to_string()))
        .unwrap();
    assert_eq!(f.send(by_filter).await.status, StatusCode::FORBIDDEN);
    let made_up = post_json_builder("/api/v1/requeue")
        .header(header::AUTHORIZATION, format!("Bearer {}", c.viewer_token))
        .body(Body::from(json!({"reason": "r", "preview_token": "00-1", "task_ids": [987_654]}).to_string()))
        .unwrap();
    assert_eq!(f.send(made_up).await.status, StatusCode::FORBIDDEN);

    assert_eq!(f.row(id).await, before, "nothing changed");
    assert_eq!(f.audit_count().await, 0);
    // Each viewer's attempt on the task is on the record: who, how they signed in, refused.
    let tried = Request::get(format!("/api/v1/audit?task={id}&outcome=refused"))
        .header(header::AUTHORIZATION, format!("Bearer {}", c.viewer_token))
        .body(Body::empty())
        .unwrap();
    let tried = f.send(tried).await.json();
    let tried: Vec<(String, String, String, String)> = tried["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["actor"].as_str().unwrap().into(),
                a["via"].as_str().unwrap().into(),
                a["outcome"].as_str().unwrap().into(),
                a["reason"].as_str().unwrap().into(),
            )
        })
        .collect();
    let row = |actor: &str, via: &str, reason: &str| {
        (actor.to_string(), via.to_string(), "refused:forbidden".to_string(), reason.to_string())
    };
    assert_eq!(
        tried,
        vec![
            row("watcher", "token:watcher", "all of them"),
            row("watcher", "token:watcher", "r"),
            row("vera", "session", "stuck behind a dead API"),
            row("watcher", "token:watcher", "stuck behind a dead API"),
        ]
    );
    // A made-up task id leaves no trace (a viewer cannot fill the trail with noise).
    let nowhere = post_json_builder(&requeue_uri(987_654))
        .header(header::AUTHORIZATION, format!("Bearer {}", c.viewer_token))
        .body(Body::from(requeue_body(1)))
        .unwrap();
    assert_eq!(f.send(nowhere).await.status, StatusCode::FORBIDDEN);
    assert_eq!(scalar(&f.db, "SELECT COUNT(*) FROM operator_actions", &[]).await, 4);

    let operator = f.send(with(header::AUTHORIZATION, &format!("Bearer {}", c.operator_token))).await;
    let body = ok(&operator, "applied");
    assert_eq!(body["action"]["actor"], "deploy-bot");
    assert_eq!(body["action"]["via"], "token:deploy-bot");
    assert_eq!(f.row(id).await.lease_epoch, 2);
    let audit = scalar(&f.db, "SELECT COUNT(*) FROM operator_actions WHERE actor = 'deploy-bot'", &[]).await;
    assert_eq!((audit, f.audit_count().await), (1, 1));

    // An operator session acts under the user's name.
    let other = f.dead(ErrorCause::Timeout).await;
    let cookie = login(&f, "alice", "alice-pw").await;
    let session = post_json_builder(&requeue_uri(other))
        .header(header::COOKIE, &cookie)
        .header("sec-fetch-site", "same-origin")
        .body(Body::from(requeue_body(1)))
        .unwrap();
    assert_eq!(ok(&f.send(session).await, "applied")["action"]["actor"], "alice");
}

// ---------------------------------------------------------------- 8. cross-site writes

async fn cross_site_posts_are_refused_before_anything_changes(db: Db) {
    // Served as dash.internal (started with --allowed-host dash.internal).
    let served = lastword_server::auth::host::AllowedHosts::new(["dash.internal"]);
    let f = Fixture::with_auth(db, Auth::local().with_allowed_hosts(served));
    let id = f.dead(ErrorCause::Timeout).await;
    let before = f.row(id).await;
    let uri = requeue_uri(id);
    let request = |headers: &[(&str, &str)]| {
        let mut request = post_json_builder(&uri).header(header::HOST, "dash.internal:3000");
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        request.body(Body::from(requeue_body(1))).unwrap()
    };

    for refused in [
        vec![("origin", "http://evil.example")],
        vec![("sec-fetch-site", "cross-site")],
        vec![("sec-fetch-site", "cross-site"), ("origin", "http://evil.example")],
        vec![("origin", "http://dash.internal:3001")],
    ] {
        let answer = f.send(request(&refused)).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{refused:?}: {}", answer.body);
        assert_eq!(answer.json()["error"], "cross_origin", "{refused:?}");
    }
    // The bulk endpoint too.
    let bulk = post_json_builder("/api/v1/requeue")
        .header("origin", "http://evil.example")
        .body(Body::from(
            json!({"reason": "r", "expected_count": 1, "preview_token": "00-1", "task_ids": [id]})
                .to_string(),
        ))
        .unwrap();
    assert_eq!(f.send(bulk).await.status, StatusCode::FORBIDDEN);
    assert_eq!(f.row(id).await, before, "the task is unchanged");
    assert_eq!(f.audit_count().await, 0);

    let same =
        f.send(request(&[("origin", "http://dash.internal:3000"), ("sec-fetch-site", "same-origin")])).await;
    ok(&same, "applied");
    assert_eq!(f.row(id).await.lease_epoch, 2);
    assert_eq!(f.audit_count().await, 1);
}

// ---------------------------------------------------------------- 9. bulk re-queue

async fn bulk_requeue_previews_confirms_and_refuses_a_changed_preview(db: Db) {
    let f = Fixture::new(db);
    let mut timeouts = Vec::new();
    for _ in 0..3 {
        timeouts.push(f.dead(ErrorCause::Timeout).await);
    }
    let api_error = f.dead(ErrorCause::ApiError).await;
    let ids = |tasks: &Value| -> Vec<i64> {
        let mut ids: Vec<i64> = tasks.as_array().unwrap().iter().map(|t| t["id"].as_i64().unwrap()).collect();
        ids.sort_unstable();
        ids
    };

    let preview = f.get_ok("/api/v1/requeue/preview?cause=timeout").await;
    assert_eq!(ids(&preview["tasks"]), timeouts, "{preview}");
    assert_eq!(preview["live"], json!([]));
    assert_eq!(
        (preview["skipped_completed"].as_i64(), preview["skipped_queued"].as_i64()),
        (Some(0), Some(0))
    );
    assert_eq!((preview["unsafe_count"].as_i64(), preview["too_many"].as_bool()), (Some(0), Some(false)));
    assert_eq!(preview["tasks"][0]["status"], "dead");
    // Paging parameters of the run filter are accepted and ignored; fence is a flag.
    let same = f.get_ok("/api/v1/requeue/preview?cause=timeout&limit=1&fence=true").await;
    assert_eq!(ids(&same["tasks"]), timeouts);

    // The wrong count: 409 with the new preview, nothing changed.
    let uri = "/api/v1/requeue?cause=timeout";
    let token = preview["token"].as_str().expect("a preview token").to_string();
    let paged = f.get_ok("/api/v1/requeue/preview?cause=timeout&limit=1").await;
    assert_eq!(paged["token"], preview["token"], "paging does not change the set");
    assert_ne!(same["token"], preview["token"], "fencing does");
    let stale = json!({"reason": "the model API is back", "expected_count": 2, "preview_token": token, "request_id": "sweep-1"});
    let answer = f.post(uri, &stale.to_string()).await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{}", answer.body);
    let body = answer.json();
    assert_eq!(
        (body["outcome"].as_str(), body["error"].as_str()),
        (Some("refused"), Some("preview_changed"))
    );
    assert!(body["message"].as_str().unwrap().contains("would now re-queue 3 tasks"), "{body}");
    // Without the preview's token, or with another one: 400 and 409, nothing changed.
    let tokenless = json!({"reason": "r", "expected_count": 3});
    let answer = f.post(uri, &tokenless.to_string()).await;
    assert_eq!(
        (answer.status, answer.json()["param"].clone()),
        (StatusCode::BAD_REQUEST, json!("preview_token"))
    );
    let forged = json!({"reason": "r", "expected_count": 3, "preview_token": "0123456789abcdef-3"});
    refused(&f.post(uri, &forged.to_string()).await, "preview_changed");
    assert_eq!(ids(&body["preview"]["tasks"]), timeouts);
    assert_eq!(f.audit_count().await, 0);
    for id in &timeouts {
        assert_eq!(f.row(*id).await.lease_epoch, 1);
    }

    // The right count: applied, one action per task, request ids `<id>/<task>`.
    let confirmed = json!({"reason": "the model API is back", "expected_count": 3, "preview_token": token, "request_id": "sweep-1"});
    let answer = ok(&f.post(uri, &confirmed.to_string()).await, "applied");
    let actions = answer["actions"].as_array().unwrap();
    assert_eq!(actions.len(), 3, "{answer}");
    let mut acted: Vec<i64> = actions.iter().map(|a| a["task_id"].as_i64().unwrap()).collect();
    acted.sort_unstable();
    assert_eq!(acted, timeouts);
    for a in actions {
        assert_eq!(a["request_id"], format!("sweep-1/{}", a["task_id"]));
        assert_eq!((a["actor"].as_str(), a["action"].as_str()), (Some("local"), Some("requeue")));
        assert_eq!((a["epoch_seen"].as_i64(), a["epoch_after"].as_i64()), (Some(1), Some(2)));
    }
    for id in &timeouts {
        let task = f.row(*id).await;
        assert_eq!((task.status.as_str(), task.lease_epoch), ("queued", 2));
    }
    assert_eq!(f.row(api_error).await.status.as_str(), "dead", "outside the filter");
    assert_eq!(f.audit_count().await, 3);

    // Submitted again: the same actions, nothing re-applied.
    let again = ok(&f.post(uri, &confirmed.to_string()).await, "replayed");
    assert_eq!(again["actions"], answer["actions"]);
    assert_eq!(f.audit_count().await, 3);
    let after = f.get_ok("/api/v1/requeue/preview?cause=timeout").await;
    assert_eq!((after["tasks"].clone(), after["skipped_queued"].as_i64()), (json!([]), Some(3)));

    // A selection by id, and not together with a filter.
    let single = lastword_core::BulkSelection::Tasks(vec![api_error]);
    let single_token = f
        .store
        .requeue_preview(&single, lastword_core::BulkOptions::default(), f.past())
        .await
        .unwrap()
        .token;
    let selection =
        json!({"reason": "one more", "expected_count": 1, "preview_token": single_token, "task_ids": [api_error]})
            .to_string();
    let mixed = f.post("/api/v1/requeue?cause=api_error", &selection).await;
    assert_eq!(mixed.status, StatusCode::BAD_REQUEST, "{}", mixed.body);
    assert_eq!(mixed.json()["param"], "task_ids");
    for (body, param) in [
        (json!({"reason": "r", "task_ids": [api_error]}), "preview_token"),
        (
            json!({"reason": "r", "preview_token": "t-1", "expected_count": -1, "task_ids": [api_error]}),
            "expected_count",
        ),
        (json!({"reason": "r", "preview_token": "t-1", "task_ids": []}), "task_ids"),
        (json!({"reason": "r", "preview_token": "t-1", "task_ids": [0]}), "task_ids"),
        (json!({"reason": " ", "preview_token": "t-1", "task_ids": [api_error]}), "reason"),
        (json!({"reason": "r", "preview_token": "t-1", "task_ids": [api_error], "limit": 3}), "body"),
    ] {
        let answer = f.post("/api/v1/requeue", &body.to_string()).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{body}: {}", answer.body);
        assert_eq!(answer.json()["param"], param, "{body}");
    }
    assert_eq!(f.post("/api/v1/requeue?cause=melted", &confirmed.to_string()).await.json()["param"], "cause");
    assert_eq!(f.audit_count().await, 3);

    // The query's own flags are no filter: beside task_ids they are a selection still.
    let answer = ok(&f.post("/api/v1/requeue?include_deterministic=false", &selection).await, "applied");
    assert_eq!(answer["actions"].as_array().unwrap().len(), 1);
    assert_eq!(answer["actions"][0]["task_id"], api_error);
    assert_eq!(answer["actions"][0]["request_id"], Value::Null);
    assert_eq!(f.row(api_error).await.status.as_str(), "queued");
    assert_eq!(f.audit_count().await, 4);
}

/// Runner data is untrusted, worker names included: a worker named like a query string must
/// not widen what "re-queue all matching" selects, and a filter without state or cause means
/// failures only, as on the page (never the healthy runs of the same window).
async fn a_bulk_filter_is_failures_only_unless_narrowed_and_runner_names_cannot_inject(db: Db) {
    let f = Fixture::new(db);
    let sly = "w&state=acted";
    let (healthy, kind) = f.task(Safety::Idempotent, 1).await;
    let worker = f.runner(sly);
    let lease = worker.claim(Some(&kind)).await.unwrap().unwrap();
    worker.finish(lease, Outcome::Acted(ActionMessage::new("replied").unwrap())).await.unwrap();
    let (dead, kind) = f.task(Safety::Idempotent, 1).await;
    let lease = worker.claim(Some(&kind)).await.unwrap().unwrap();
    let failed = Outcome::Failed { cause: ErrorCause::Timeout, detail: "timed out".into() };
    worker.finish(lease, failed).await.unwrap();
    assert_eq!(
        (f.row(healthy).await.status.as_str(), f.row(dead).await.status.as_str()),
        ("completed", "dead")
    );
    let tasks = |v: &Value| {
        v["tasks"].as_array().unwrap().iter().map(|t| t["id"].as_i64().unwrap()).collect::<Vec<_>>()
    };

    // The worker's name, encoded as every link the pages make encodes it.
    let encoded = lastword_core::query::encode_component(sly);
    assert_eq!(encoded, "w%26state%3Dacted");
    let by_worker = f.get_ok(&format!("/api/v1/requeue/preview?worker={encoded}")).await;
    assert_eq!(tasks(&by_worker), vec![dead], "{by_worker}");
    assert_eq!(by_worker["skipped_completed"], 0, "the healthy run is not even matched: {by_worker}");
    // A bare window: failures only, the same default as the page.
    let window = f.get_ok("/api/v1/requeue/preview?since=2h").await;
    assert_eq!(tasks(&window), vec![dead], "{window}");
    assert_eq!(window["skipped_completed"], 0, "{window}");
    // Asking for healthy states explicitly still can (they are skipped as completed).
    let asked = f.get_ok(&format!("/api/v1/requeue/preview?worker={encoded}&state=acted")).await;
    assert_eq!((tasks(&asked), asked["skipped_completed"].as_i64()), (vec![], Some(1)), "{asked}");
}

// ---------------------------------------------------------------- 10. a race over HTTP

async fn concurrent_requeues_of_one_task_apply_exactly_once(db: Db) {
    let f = Fixture::new(db);
    let id = f.dead(ErrorCause::Timeout).await;
    let mut handles = Vec::new();
    for i in 0..10 {
        let app = f.app.clone();
        let body = json!({"reason": "retry", "expected_epoch": 1, "request_id": format!("race-{i}")});
        handles.push(tokio::spawn(async move {
            send(&app, post_json(&requeue_uri(id), &body.to_string())).await
        }));
    }
    let mut applied = 0;
    let mut refused_count = 0;
    for handle in handles {
        let answer = handle.await.unwrap();
        match answer.status {
            StatusCode::OK => {
                assert_eq!(answer.json()["outcome"], "applied", "{}", answer.body);
                applied += 1;
            }
            StatusCode::CONFLICT => {
                let (message, task) = refused(&answer, "changed");
                assert!(message.contains("re-queued by local"), "{message}");
                assert_eq!(task["lease_epoch"], 2);
                refused_count += 1;
            }
            other => panic!("unexpected {other}: {}", answer.body),
        }
    }
    assert_eq!((applied, refused_count), (1, 9));
    assert_eq!(f.audit_count().await, 1);
    let task = f.row(id).await;
    assert_eq!((task.status.as_str(), task.lease_epoch), ("queued", 2));
}

lastword_store::on_every_backend!(
    requeue_is_applied_audited_and_listed,
    a_stale_epoch_is_refused_with_the_current_task_and_changes_nothing,
    a_live_lease_is_refused_unless_fenced_and_the_fenced_holder_loses_its_write,
    bad_input_is_a_400_naming_the_field_and_changes_nothing,
    a_double_submission_is_replayed_not_applied_twice,
    compensate_and_uncompensate_a_double_executed_task,
    users_mode_only_operators_act_and_the_actor_is_the_token_name,
    cross_site_posts_are_refused_before_anything_changes,
    bulk_requeue_previews_confirms_and_refuses_a_changed_preview,
    a_bulk_filter_is_failures_only_unless_narrowed_and_runner_names_cannot_inject,
    concurrent_requeues_of_one_task_apply_exactly_once,
);
