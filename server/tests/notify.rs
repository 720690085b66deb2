//! Webhooks (issue 14, "Alerts"): the notifier of `lastword serve --notify-url` against
//! receivers this test starts on loopback, on real databases (SQLite always, PostgreSQL whenever
//! `TEST_DATABASE_URL` is set). Data is written by the runner library; the notifier's rounds
//! are driven with explicit times so the cooldown and the backoff need no waiting.
//!
//! Checked: one message per incident (a second round, a restarted server and a second server
//! send nothing more), a receiver's kind filter and body format, the cooldown holding the next
//! message of a kind and sending it later, a resolved message when the item clears, a failed
//! delivery retried with backoff and delivered once, a receiver answering 404 given up, and two
//! servers on one database sending each message once.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use chrono::{DateTime, Duration, Utc};
use lastword_core::{ErrorCause, Safety, Source, Tokens};
use lastword_runner::{ActionMessage, ManualClock, NewTask, Outcome, Runner, RunnerConfig};
use lastword_server::notify::{Notifier, NotifyConfig, Sink, TickReport};
use lastword_store::testing::{exec, Arg};
use lastword_store::{notify, Db};
use serde_json::Value;
use std::sync::{Arc, Mutex};

/// A webhook receiver on loopback: what it was sent, and the answers to give first.
#[derive(Clone, Default)]
struct Inbox {
    got: Arc<Mutex<Vec<(String, Value)>>>,
    /// Statuses to answer with before accepting (popped from the end).
    fail: Arc<Mutex<Vec<u16>>>,
    requests: Arc<Mutex<usize>>,
}

impl Inbox {
    fn messages(&self) -> Vec<Value> {
        self.got.lock().unwrap().iter().map(|(_, v)| v.clone()).collect()
    }

    fn count(&self) -> usize {
        self.got.lock().unwrap().len()
    }

    fn delivery_ids(&self) -> Vec<String> {
        self.got.lock().unwrap().iter().map(|(id, _)| id.clone()).collect()
    }
}

async fn hook(State(inbox): State<Inbox>, headers: HeaderMap, body: String) -> StatusCode {
    *inbox.requests.lock().unwrap() += 1;
    if let Some(code) = inbox.fail.lock().unwrap().pop() {
        return StatusCode::from_u16(code).unwrap();
    }
    let id = headers.get("x-lastword-delivery").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let value: Value = serde_json::from_str(&body).expect("a JSON body");
    inbox.got.lock().unwrap().push((id, value));
    StatusCode::OK
}

async fn receiver() -> (String, Inbox) {
    let inbox = Inbox::default();
    let app = axum::Router::new().route("/hook", axum::routing::post(hook)).with_state(inbox.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, inbox)
}

fn notifier(db: &Db, owner: &str, sinks: &[&str]) -> Notifier {
    let sinks = sinks.iter().map(|s| Sink::parse(s).unwrap()).collect();
    let mut config = NotifyConfig::new(sinks, "https://lastword.example".into());
    config.owner = owner.into();
    config.backoff = Duration::seconds(1);
    config.timeout = std::time::Duration::from_secs(3);
    Notifier::new(db.clone(), Tokens::default(), config).unwrap()
}

struct Fleet {
    clock: ManualClock,
    a: Runner,
    b: Runner,
}

fn fleet(db: &Db) -> Fleet {
    let start = Utc::now() - Duration::minutes(30);
    let clock = ManualClock::new(DateTime::from_timestamp_micros(start.timestamp_micros()).unwrap());
    let config = RunnerConfig { lease: Duration::seconds(30), tokens: Tokens::default() };
    let runner = |w: &str| Runner::new(db.clone(), w, config.clone(), Arc::new(clock.clone()));
    Fleet { a: runner("worker-a"), b: runner("worker-b"), clock }
}

fn task(kind: &str, safety: Safety, max_attempts: i32) -> NewTask {
    NewTask::new(kind, Source::Notification, safety).with_max_attempts(max_attempts)
}

impl Fleet {
    /// A task that fails once with one attempt: dead.
    async fn dead_task(&self, kind: &str) -> i64 {
        let id = self.a.enqueue(&task(kind, Safety::Idempotent, 1)).await.unwrap();
        let l = self.a.claim(Some(&[kind.to_string()])).await.unwrap().unwrap();
        assert_eq!(l.task_id, id);
        self.a.finish(l, Outcome::Failed { cause: ErrorCause::Crash, detail: "boom".into() }).await.unwrap();
        self.clock.advance(Duration::seconds(1));
        id
    }
}

fn tasks_of(message: &Value) -> Vec<i64> {
    message["incidents"].as_array().unwrap().iter().map(|i| i["task_id"].as_i64().unwrap()).collect()
}

async fn tick(n: &Notifier, at: DateTime<Utc>) -> TickReport {
    n.tick(at).await.unwrap()
}

async fn one_message_per_incident_through_restarts_cooldowns_and_retries(db: Db) {
    let f = fleet(&db);
    let (json_url, json) = receiver().await;
    let (slack_url, slack) = receiver().await;
    let sinks = [json_url.as_str(), &format!("kinds=loop;format=slack;url={slack_url}")];
    let one = notifier(&db, "server-one", &sinks);
    let t0 = Utc::now();

    // A dead task: one firing message to the receiver that takes every kind, none to the other.
    let dead = f.dead_task("send_digest").await;
    let r = tick(&one, t0).await;
    assert!(r.leading, "{r:?}");
    assert_eq!((r.opened, r.sent), (1, 1), "{r:?}");
    let m = &json.messages()[0];
    assert_eq!((m["status"].as_str(), m["kind"].as_str()), (Some("firing"), Some("dead")), "{m}");
    assert_eq!(tasks_of(m), [dead]);
    assert_eq!(m["incidents"][0]["url"], format!("https://lastword.example/tasks/{dead}"));
    assert_eq!(slack.count(), 0, "the slack receiver takes loops only");

    // The same incident is not sent again: next round, a restarted server (after the old
    // process's lease lapsed), or a second server (which does not lead meanwhile).
    assert_eq!(tick(&one, t0 + Duration::seconds(5)).await.sent, 0);
    let restarted = notifier(&db, "server-one-restarted", &sinks);
    let r = tick(&restarted, t0 + Duration::seconds(6)).await;
    assert!(!r.leading, "the old process's lease still holds: {r:?}");
    let r = tick(&restarted, t0 + Duration::minutes(1)).await;
    assert!(r.leading && r.opened == 0 && r.sent == 0, "{r:?}");
    let two = notifier(&db, "server-two", &sinks);
    assert!(!tick(&two, t0 + Duration::minutes(1)).await.leading);
    assert_eq!(json.count(), 1);

    // A re-claim loop (three failed claims of a task with attempts left): both receivers get it,
    // once, though both servers run the round at the same moment.
    let poison = f.a.enqueue(&task("poison", Safety::Idempotent, 10)).await.unwrap();
    for r in [&f.a, &f.b, &f.a] {
        let l = r.claim(Some(&["poison".to_string()])).await.unwrap().unwrap();
        assert_eq!(l.task_id, poison);
        r.finish(l, Outcome::Failed { cause: ErrorCause::Timeout, detail: "hung".into() }).await.unwrap();
        f.clock.advance(Duration::seconds(1));
    }
    // The page's rule (core) and the notifier's (SQL) agree it is a loop.
    let store = lastword_store::store_for(db.clone(), Tokens::default());
    let detail = store.task_detail(poison, Utc::now()).await.unwrap().unwrap();
    assert!(detail.attention.contains(&lastword_core::AttentionKind::Loop), "{:?}", detail.attention);
    let gauges = lastword_store::alerts::attention_now(&db, &Tokens::default(), Utc::now()).await.unwrap();
    assert_eq!((gauges.loops.items, gauges.dead.items), (1, 1), "{gauges:?}");
    let o = store
        .overview(Utc::now() - Duration::hours(1), Utc::now(), Duration::hours(1), Utc::now())
        .await
        .unwrap();
    assert_eq!(
        (o.attention.loops, o.attention.loop_tasks.clone(), o.attention.taken.loops),
        (1, vec![poison], 0)
    );
    // Taken during its streak: the overview and the gauges count it acknowledged.
    let ack = lastword_core::ActionRequest {
        reason: "poison payload, investigating".into(),
        attention: Some(lastword_core::AttentionKind::Loop),
        ..Default::default()
    };
    let actor = lastword_core::Actor::new("ann", "session");
    store
        .act(poison, lastword_core::ActionKind::Acknowledge, &ack, &actor, Utc::now())
        .await
        .unwrap()
        .unwrap();
    let o = store
        .overview(Utc::now() - Duration::hours(1), Utc::now(), Duration::hours(1), Utc::now())
        .await
        .unwrap();
    assert_eq!(o.attention.taken.loops, 1);
    let gauges = lastword_store::alerts::attention_now(&db, &Tokens::default(), Utc::now()).await.unwrap();
    assert_eq!(gauges.loops.acknowledged, 1, "{gauges:?}");
    let detail = store.task_detail(poison, Utc::now()).await.unwrap().unwrap();
    assert_eq!(detail.acknowledgements.len(), 1, "the page's rule agrees: {:?}", detail.acknowledgements);
    let at = t0 + Duration::minutes(2);
    let (x, y) = tokio::join!(tick(&restarted, at), tick(&two, at));
    assert_eq!(x.sent + y.sent, 2, "one request to each receiver: {x:?} {y:?}");
    assert_eq!(slack.count(), 1);
    let s = &slack.messages()[0];
    assert!(s["text"].as_str().unwrap().contains("Re-claim loop: 1 task"), "{s}");
    assert!(
        s["blocks"][0]["text"]["text"]
            .as_str()
            .unwrap()
            .contains(&format!("<https://lastword.example/tasks/{poison}|task {poison}>")),
        "{s}"
    );
    assert_eq!(json.messages().last().unwrap()["kind"], "loop");

    // Two more deaths inside the cooldown of the first: held, then sent together in one message.
    let (d2, d3) = (f.dead_task("send_digest").await, f.dead_task("send_digest").await);
    let r = tick(&restarted, t0 + Duration::minutes(3)).await;
    assert_eq!((r.opened, r.sent, r.postponed), (2, 0, 2), "{r:?}");
    assert_eq!(tick(&restarted, t0 + Duration::minutes(4)).await.sent, 0, "still cooling down");
    let r = tick(&restarted, t0 + Duration::minutes(6)).await;
    assert_eq!((r.sent, r.delivered), (1, 2), "{r:?}");
    let m = json.messages().last().unwrap().clone();
    assert_eq!((m["kind"].as_str(), tasks_of(&m)), (Some("dead"), vec![d2, d3]), "{m}");
    assert_eq!(m["title"], "Dead, every attempt used: 2 tasks");

    // An operator re-queues the first dead task: resolved, at once (no cooldown for that).
    exec(
        &db,
        "UPDATE tasks SET status = 'queued', lease_epoch = lease_epoch + 1, attempts = 0 WHERE id = $1",
        &[Arg::from(dead)],
    )
    .await;
    let r = tick(&restarted, t0 + Duration::minutes(7)).await;
    assert_eq!((r.resolved, r.sent), (1, 1), "{r:?}");
    let m = json.messages().last().unwrap().clone();
    assert_eq!((m["status"].as_str(), tasks_of(&m)), (Some("resolved"), vec![dead]), "{m}");

    // The receiver fails once (503): retried after the backoff, delivered once.
    let d4 = f.dead_task("send_report").await; // another kind: the re-queued task waits
    json.fail.lock().unwrap().push(503);
    let later = t0 + Duration::minutes(20);
    let r = tick(&restarted, later).await;
    assert_eq!((r.opened, r.failed, r.sent), (1, 1, 0), "{r:?}");
    assert_eq!(tick(&restarted, later).await.sent, 0, "not before the backoff");
    let r = tick(&restarted, later + Duration::seconds(2)).await;
    assert_eq!(r.sent, 1, "{r:?}");
    assert_eq!(tasks_of(json.messages().last().unwrap()), [d4]);
    let log = notify::log(&db, 50).await.unwrap();
    let retried = log.iter().find(|d| d.task_id == d4).unwrap();
    assert_eq!((retried.attempts, retried.delivered), (2, true), "{retried:?}");

    // Every message once: distinct delivery ids, and the log agrees with what arrived.
    let ids = json.delivery_ids();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "{ids:?}");
    let json_sink = Sink::parse(&json_url).unwrap().name;
    let delivered_to_json = log.iter().filter(|d| d.delivered && d.sink == json_sink).count();
    let carried: usize = json.messages().iter().map(|m| tasks_of(m).len()).sum();
    assert_eq!(delivered_to_json, carried, "{log:?}");
    println!(
        "notify: {} messages to the JSON receiver ({} requests, one refused), {} to Slack; {} deliveries logged",
        json.count(),
        json.requests.lock().unwrap(),
        slack.count(),
        log.len()
    );
}

async fn a_receiver_that_refuses_is_given_up_and_a_lost_lease_of_an_unsafe_task_pages(db: Db) {
    let f = fleet(&db);
    let (url, inbox) = receiver().await;
    let n = notifier(&db, "server-one", &[&format!("kinds=unsafe_lost_lease,double_execution;url={url}")]);
    // An unsafe task executed twice: a claims and charges, stalls past its lease; b re-claims,
    // charges and finishes; a's late finish is rejected.
    let id = f.a.enqueue(&task("charge_card", Safety::Unsafe, 3)).await.unwrap();
    let la = f.a.claim(None).await.unwrap().unwrap();
    f.a.record_effect(&la, "charge", "charge-1").await.unwrap();
    f.clock.advance(Duration::seconds(31));
    let lb = f.b.claim(None).await.unwrap().unwrap();
    assert_eq!(lb.task_id, id);
    f.b.record_effect(&lb, "charge", "charge-1").await.unwrap();
    f.b.finish(lb, Outcome::Acted(ActionMessage::new("charged $5").unwrap())).await.unwrap();
    f.a.finish(la, Outcome::Acted(ActionMessage::new("charged $5").unwrap())).await.unwrap();
    let store = lastword_store::store_for(db.clone(), Tokens::default());
    let now = Utc::now();
    while store.refresh_rollups(now).await.unwrap().has_more() {}

    // The first answer is 404: the URL is wrong, so the message is given up, not retried.
    inbox.fail.lock().unwrap().push(404);
    let r = n.tick(now).await.unwrap();
    assert_eq!((r.opened, r.failed, r.sent), (2, 1, 1), "a lost lease and a double execution: {r:?}");
    let r = n.tick(now + Duration::minutes(30)).await.unwrap();
    assert_eq!((r.sent, r.failed), (0, 0), "the refused message is not retried: {r:?}");
    let log = notify::log(&db, 10).await.unwrap();
    assert_eq!(log.iter().filter(|d| d.abandoned).count(), 1, "{log:?}");
    assert!(
        log.iter().any(|d| d.abandoned && d.last_error.as_deref() == Some("answered 404 Not Found")),
        "{log:?}"
    );
    assert_eq!(inbox.count(), 1);

    // Compensated: both items clear; only the delivered one owes a resolved message.
    exec(
        &db,
        "UPDATE tasks SET compensated_at = $2, compensated_by = 'ann' WHERE id = $1",
        &[Arg::from(id), Arg::Time(Some(now))],
    )
    .await;
    while store.refresh_rollups(now + Duration::minutes(31)).await.unwrap().has_more() {}
    let r = n.tick(now + Duration::minutes(31)).await.unwrap();
    assert_eq!((r.resolved, r.sent), (2, 1), "{r:?}");
    assert_eq!(inbox.messages().last().unwrap()["status"], "resolved");
}

/// A server that crashed after sending and before recording the answer: the next sender sends
/// it again once the crashed one's lease lapsed, with the same per-incident delivery id; and an
/// item that cleared meanwhile still gets its resolution (the receiver may have the firing).
async fn a_message_in_flight_when_its_server_crashed_is_sent_again_or_resolved(db: Db) {
    let f = fleet(&db);
    let (url, inbox) = receiver().await;
    let t0 = Utc::now();
    let (kept, cleared) = (f.dead_task("send_digest").await, f.dead_task("send_report").await);
    // The crashed server's round, up to the request: incidents recorded, messages tried.
    let found =
        lastword_store::alerts::open_items(&db, &Tokens::default(), t0 - Duration::hours(24), t0, &[])
            .await
            .unwrap();
    let sinks = [Sink::parse(&url).unwrap()];
    let round = lastword_server::notify::plan(&[], &found, &sinks, t0);
    notify::record(&db, &round, t0).await.unwrap();
    let due = notify::due(&db, t0, 100).await.unwrap();
    let ids: Vec<i64> = due.iter().map(|d| d.id).collect();
    assert_eq!(ids.len(), 2);
    notify::attempting(&db, &ids, "lw-crashed", t0 + Duration::seconds(15)).await.unwrap();
    exec(
        &db,
        "UPDATE tasks SET status = 'queued', lease_epoch = lease_epoch + 1, attempts = 0 WHERE id = $1",
        &[Arg::from(cleared)],
    )
    .await;
    let next = notifier(&db, "server-two", &[&url]);
    let r = tick(&next, t0 + Duration::seconds(5)).await;
    assert_eq!((r.resolved, r.sent), (1, 1), "the resolution is owed at once: {r:?}");
    let resolved = inbox.messages().last().unwrap().clone();
    assert_eq!((resolved["status"].as_str(), tasks_of(&resolved)), (Some("resolved"), vec![cleared]));
    let r = tick(&next, t0 + Duration::seconds(20)).await;
    assert_eq!(r.sent, 1, "the tried firing message goes again after the lease: {r:?}");
    let firing = inbox.messages().last().unwrap().clone();
    assert_eq!(tasks_of(&firing), [kept]);
    let kept_delivery = due.iter().find(|d| d.incident.task_id == kept).unwrap().id;
    assert_eq!(firing["incidents"][0]["delivery"], format!("lw-{kept_delivery}"), "{firing}");
}

lastword_store::on_sqlite_and_postgres!(
    one_message_per_incident_through_restarts_cooldowns_and_retries,
    a_receiver_that_refuses_is_given_up_and_a_lost_lease_of_an_unsafe_task_pages,
    a_message_in_flight_when_its_server_crashed_is_sent_again_or_resolved,
);
