//! The driver-neutral contract plan (`contract/cases.json`, format in `contract/README.md`) run
//! against the Rust runner on in-memory SQLite, a SQLite file and PostgreSQL. The Python library
//! runs the same file (`clients/python/tests/test_contract_plan.py`), so a library that
//! disagrees with this one on any case fails CI. Rows are read back through the dashboard's own
//! store, so the run states asserted are the ones the dashboard shows.

use chrono::{DateTime, Duration, Utc};
use lastword_core::{ActionKind, ActionOutcome, ActionRequest, ErrorCause, Safety, Source, Tokens};
use lastword_runner::{
    enqueue, ActionMessage, Finish, Heartbeat, Lease, ManualClock, Outcome, Runner, RunnerConfig, RunnerError,
};
use lastword_store::{store_for, Db, NewTask, Store};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// Read when the test runs (not compiled in), so the run checks the plan as it is on disk.
const PLAN_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../contract/cases.json");

/// Observation keys that hold a time: seconds after t0 in the plan, compared in microseconds.
const TIME_KEYS: &[&str] = &[
    "claimed_at",
    "expires_at",
    "lease_expires_at",
    "heartbeat_at",
    "finished_at",
    "created_at",
    "updated_at",
    "extended_until",
];

fn plan() -> Value {
    let text = std::fs::read_to_string(PLAN_PATH).unwrap_or_else(|e| panic!("{PLAN_PATH}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{PLAN_PATH} is not valid JSON: {e}"))
}

fn cases() -> Vec<Value> {
    plan()["cases"].as_array().expect("a list of cases").clone()
}

fn micros_of_seconds(v: &Value) -> i64 {
    (v.as_f64().unwrap_or_else(|| panic!("a number of seconds, got {v}")) * 1e6).round() as i64
}

fn text<'a>(step: &'a Value, key: &str) -> &'a str {
    step[key].as_str().unwrap_or_else(|| panic!("step {step}: {key:?} must be a string"))
}

/// The plan's value of `key`, made comparable with an observation: times in microseconds.
fn normalised(key: &str, v: &Value) -> Value {
    if TIME_KEYS.contains(&key) && v.is_number() {
        json!(micros_of_seconds(v))
    } else {
        v.clone()
    }
}

struct Driver {
    db: Db,
    store: Arc<dyn Store>,
    clock: ManualClock,
    t0: DateTime<Utc>,
    config: RunnerConfig,
    tasks: HashMap<String, i64>,
    leases: HashMap<String, (String, Lease)>,
    effects: HashMap<String, i64>,
}

impl Driver {
    fn new(db: Db, case: &Value) -> Self {
        let plan = plan();
        let t0 = DateTime::parse_from_rfc3339(plan["t0"].as_str().expect("t0"))
            .expect("t0 in RFC 3339")
            .with_timezone(&Utc);
        let lease = Duration::microseconds(micros_of_seconds(&plan["lease_seconds"]));
        let tokens = match case.get("tokens") {
            Some(t) => {
                Tokens { no_action: text(t, "no_action").to_string(), skip: text(t, "skip").to_string() }
            }
            None => Tokens::default(),
        };
        Driver {
            store: store_for(db.clone(), tokens.clone()),
            db,
            clock: ManualClock::new(t0),
            t0,
            config: RunnerConfig { lease, tokens },
            tasks: HashMap::new(),
            leases: HashMap::new(),
            effects: HashMap::new(),
        }
    }

    fn now(&self) -> DateTime<Utc> {
        lastword_runner::Clock::now(&self.clock)
    }

    fn offset(&self, t: DateTime<Utc>) -> i64 {
        (t - self.t0).num_microseconds().expect("a time near t0")
    }

    fn runner(&self, worker: &str) -> Runner {
        Runner::new(self.db.clone(), worker, self.config.clone(), Arc::new(self.clock.clone()))
    }

    fn task_id(&self, name: &str) -> i64 {
        *self.tasks.get(name).unwrap_or_else(|| panic!("no task named {name:?} enqueued yet"))
    }

    fn lease(&self, name: &str) -> &(String, Lease) {
        self.leases.get(name).unwrap_or_else(|| panic!("no lease named {name:?} claimed yet"))
    }

    /// Every key of `expected` must equal the observation of the same name; "task" and "lease"
    /// name a task or a lease of this case and compare as its id / run id.
    fn check(&self, ctx: &str, expected: &Value, observed: &Value) {
        let expected =
            expected.as_object().unwrap_or_else(|| panic!("{ctx}: expected an object, got {expected}"));
        for (key, want) in expected {
            let got = observed
                .get(key)
                .unwrap_or_else(|| panic!("{ctx}: observed {observed}, which has no {key:?}"));
            let want = match (key.as_str(), want) {
                ("task", Value::String(name)) => json!(self.task_id(name)),
                ("lease", Value::String(name)) => json!(self.lease(name).1.run_id),
                _ => normalised(key, want),
            };
            assert_eq!(got, &want, "{ctx}: {key} (observed {observed})");
        }
    }

    async fn step(&mut self, ctx: &str, step: &Value) {
        let expect = step.get("expect");
        match text(step, "do") {
            "enqueue" => {
                let task = NewTask {
                    kind: text(step, "kind").to_string(),
                    source: step
                        .get("source")
                        .and_then(Value::as_str)
                        .unwrap_or("notification")
                        .parse::<Source>()
                        .expect("source"),
                    safety: step
                        .get("safety")
                        .and_then(Value::as_str)
                        .unwrap_or("idempotent")
                        .parse::<Safety>()
                        .expect("safety"),
                    payload: step.get("payload").cloned().unwrap_or_else(|| json!({})),
                    max_attempts: step
                        .get("max_attempts")
                        .and_then(Value::as_i64)
                        .map_or(NewTask::DEFAULT_MAX_ATTEMPTS, |n| n as i32),
                };
                let id = enqueue(&self.db, &task, self.now()).await.expect("enqueue");
                self.tasks.insert(text(step, "as").to_string(), id);
            }
            "advance" => self.clock.advance(Duration::microseconds(micros_of_seconds(&step["seconds"]))),
            "claim" => {
                let worker = text(step, "worker");
                let kinds: Option<Vec<String>> = match step.get("kinds") {
                    None | Some(Value::Null) => None,
                    Some(Value::Array(kinds)) => {
                        Some(kinds.iter().map(|k| k.as_str().expect("a kind").to_string()).collect())
                    }
                    Some(other) => panic!("{ctx}: kinds must be a list or null, got {other}"),
                };
                let claimed = self.runner(worker).claim(kinds.as_deref()).await.expect("claim");
                match (claimed, expect) {
                    (None, None | Some(Value::Null)) => {}
                    (None, Some(_)) => panic!("{ctx}: expected a claim, got nothing"),
                    (Some(lease), Some(Value::Null)) => {
                        panic!("{ctx}: expected nothing to claim, got {lease:?}")
                    }
                    (Some(lease), expected) => {
                        let observed = json!({
                            "task": lease.task_id,
                            "epoch": lease.epoch,
                            "attempts": lease.attempts,
                            "max_attempts": lease.max_attempts,
                            "kind": lease.kind,
                            "source": lease.source.as_str(),
                            "safety": lease.safety.as_str(),
                            "payload": lease.payload,
                            "claimed_at": self.offset(lease.claimed_at),
                            "expires_at": self.offset(lease.expires_at),
                        });
                        if let Some(expected) = expected {
                            self.check(ctx, expected, &observed);
                        }
                        if let Some(name) = step.get("as").and_then(Value::as_str) {
                            self.leases.insert(name.to_string(), (worker.to_string(), lease));
                        }
                    }
                }
            }
            "heartbeat" => {
                let name = text(step, "lease");
                let (worker, mut lease) = self.lease(name).clone();
                let beat = self.runner(&worker).heartbeat(&mut lease).await.expect("heartbeat");
                let observed = match beat {
                    Heartbeat::Extended { until } => json!({"extended_until": self.offset(until)}),
                    Heartbeat::Lost { holder, epoch } => json!({"lost": {"holder": holder, "epoch": epoch}}),
                };
                self.check(ctx, expect.expect("a heartbeat step says what it expects"), &observed);
                self.leases.insert(name.to_string(), (worker, lease));
            }
            "finish" => {
                let (worker, lease) = self.lease(text(step, "lease")).clone();
                let outcome = match text(step, "outcome") {
                    "acted" => ActionMessage::new(text(step, "message")).map(Outcome::Acted).ok(),
                    "no_action" => Some(Outcome::NoActionNeeded),
                    "skip" => Some(Outcome::Skip),
                    "failed" => Some(Outcome::Failed {
                        cause: text(step, "cause").parse::<ErrorCause>().expect("a cause of the closed set"),
                        detail: text(step, "detail").to_string(),
                    }),
                    other => panic!("{ctx}: unknown outcome {other:?}"),
                };
                let observed = match outcome {
                    None => json!({"error": "blank_message"}),
                    Some(outcome) => match self.runner(&worker).finish(lease, outcome).await {
                        Ok(Finish::Accepted { status }) => json!({"accepted": status.as_str()}),
                        Ok(Finish::LostLease { holder, epoch }) => {
                            json!({"lost": {"holder": holder, "epoch": epoch}})
                        }
                        Err(RunnerError::AlreadyFinished(_)) => json!({"error": "already_finished"}),
                        Err(e) => panic!("{ctx}: finish failed: {e}"),
                    },
                };
                self.check(ctx, expect.expect("a finish step says what it expects"), &observed);
            }
            "effect" => {
                let (worker, lease) = self.lease(text(step, "lease")).clone();
                let recorded = self
                    .runner(&worker)
                    .record_effect(&lease, text(step, "kind"), text(step, "key"))
                    .await
                    .expect("record effect");
                match step.get("same_as").and_then(Value::as_str) {
                    Some(same) => {
                        assert_eq!(recorded.id, self.effects[same], "{ctx}: the same effect row as {same}")
                    }
                    None => assert!(
                        !self.effects.values().any(|&id| id == recorded.id),
                        "{ctx}: a new effect row, got an earlier one"
                    ),
                }
                if let Some(expected) = expect {
                    self.check(ctx, expected, &json!({"lease_current": recorded.lease_current}));
                }
                if let Some(name) = step.get("as").and_then(Value::as_str) {
                    self.effects.insert(name.to_string(), recorded.id);
                }
            }
            "trace" => {
                let (worker, lease) = self.lease(text(step, "lease")).clone();
                let observed = match self.runner(&worker).set_trace_id(&lease, text(step, "trace_id")).await {
                    Ok(()) => json!({"written": true}),
                    Err(RunnerError::BadTraceId(_)) => json!({"error": "bad_trace_id"}),
                    Err(e) => panic!("{ctx}: set_trace_id failed: {e}"),
                };
                self.check(ctx, expect.expect("a trace step says what it expects"), &observed);
            }
            "requeue" => {
                // The dashboard's own action, guarded by the epoch the operator saw.
                let id = self.task_id(text(step, "task"));
                let seen = self.store.task(id).await.expect("read task").expect("the task exists");
                let request = ActionRequest {
                    reason: "contract plan: operator re-queue".into(),
                    expected_epoch: Some(seen.lease_epoch),
                    fence: step.get("fence").and_then(Value::as_bool).unwrap_or(false),
                    ..Default::default()
                }
                .validate(ActionKind::Requeue)
                .expect("a valid request");
                let outcome = self
                    .store
                    .act(
                        id,
                        ActionKind::Requeue,
                        &request,
                        &lastword_core::Actor::new("operator", "local"),
                        self.now(),
                    )
                    .await
                    .expect("requeue")
                    .expect("the task exists");
                assert!(
                    matches!(outcome, ActionOutcome::Applied { .. }),
                    "{ctx}: requeue not applied: {outcome:?}"
                );
            }
            "check_task" => {
                let t = self
                    .store
                    .task(self.task_id(text(step, "task")))
                    .await
                    .expect("read task")
                    .expect("exists");
                let lease_expires_at = t.lease_expires_at.map(|at| self.offset(at));
                let observed = json!({
                    "kind": t.kind,
                    "source": t.source,
                    "safety": t.safety,
                    "status": t.status,
                    "payload": t.payload,
                    "result": t.result,
                    "owner": t.owner,
                    "lease_epoch": t.lease_epoch,
                    "lease_expires_at": lease_expires_at,
                    "attempts": t.attempts,
                    "max_attempts": t.max_attempts,
                    "created_at": self.offset(t.created_at),
                    "updated_at": self.offset(t.updated_at),
                });
                self.check(ctx, expect.expect("a check says what it expects"), &observed);
            }
            "check_runs" => {
                let runs = self
                    .store
                    .task_runs(self.task_id(text(step, "task")), self.now())
                    .await
                    .expect("read runs");
                let expected = expect.and_then(Value::as_array).expect("check_runs expects a list");
                assert_eq!(runs.len(), expected.len(), "{ctx}: number of runs ({runs:?})");
                for (i, (run, want)) in runs.iter().zip(expected).enumerate() {
                    let heartbeat_at = run.heartbeat_at.map(|at| self.offset(at));
                    let finished_at = run.finished_at.map(|at| self.offset(at));
                    let observed = json!({
                        "lease": run.id,
                        "worker": run.worker,
                        "lease_epoch": run.lease_epoch,
                        "claimed_at": self.offset(run.claimed_at),
                        "lease_expires_at": self.offset(run.lease_expires_at),
                        "heartbeat_at": heartbeat_at,
                        "finished_at": finished_at,
                        "output": run.output,
                        "error": run.error,
                        "error_detail": run.error_detail,
                        "completion_rows": run.completion_rows,
                        "trace_id": run.trace_id,
                        "state": run.state.as_str(),
                    });
                    self.check(&format!("{ctx}, run {i}"), want, &observed);
                }
            }
            "check_effects" => {
                let mut effects =
                    self.store.task_effects(self.task_id(text(step, "task"))).await.expect("read effects");
                effects.sort_by_key(|e| e.id);
                let expected = expect.and_then(Value::as_array).expect("check_effects expects a list");
                assert_eq!(effects.len(), expected.len(), "{ctx}: number of effects ({effects:?})");
                for (i, (effect, want)) in effects.iter().zip(expected).enumerate() {
                    let observed = json!({
                        "lease": effect.run_id,
                        "lease_epoch": effect.lease_epoch,
                        "kind": effect.kind,
                        "idempotency_key": effect.idempotency_key,
                        "created_at": self.offset(effect.created_at),
                    });
                    self.check(&format!("{ctx}, effect {i}"), want, &observed);
                }
            }
            other => panic!("{ctx}: unknown step {other:?}"),
        }
    }
}

async fn run_case(case: &Value, db: Db, backend: &str) {
    let name = case["name"].as_str().expect("a case name");
    let mut driver = Driver::new(db, case);
    for (i, step) in case["steps"].as_array().expect("steps").iter().enumerate() {
        driver.step(&format!("{backend}: {name}, step {i} {step}"), step).await;
    }
}

#[tokio::test]
async fn plan_on_sqlite_in_memory() {
    for case in cases() {
        run_case(&case, lastword_store::testing::sqlite_memory().await, "sqlite (memory)").await;
    }
}

#[tokio::test]
async fn plan_on_a_sqlite_file() {
    for case in cases() {
        let (db, _dir) = lastword_store::testing::sqlite_file().await;
        run_case(&case, db, "sqlite (file)").await;
    }
}

#[tokio::test]
async fn plan_on_postgres() {
    for case in cases() {
        let name = case["name"].as_str().expect("a case name");
        let Some(db) = lastword_store::testing::postgres(&format!("contract_plan::{name}")).await else {
            return;
        };
        run_case(&case, db.clone(), "postgres").await;
        lastword_store::testing::discard_postgres(db).await;
    }
}

#[test]
fn the_plan_covers_what_the_contract_promises() {
    let cases = cases();
    let mut names: Vec<&str> = cases.iter().map(|c| c["name"].as_str().expect("a name")).collect();
    let steps: Vec<&str> =
        cases.iter().flat_map(|c| c["steps"].as_array().expect("steps")).map(|s| text(s, "do")).collect();
    for needed in [
        "enqueue",
        "advance",
        "claim",
        "heartbeat",
        "finish",
        "effect",
        "trace",
        "requeue",
        "check_runs",
        "check_effects",
    ] {
        assert!(steps.contains(&needed), "no case uses {needed:?}");
    }
    let total = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), total, "case names are unique");
}
