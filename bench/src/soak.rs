//! The soak (issue 11): the live fleet, the dashboard and scripted operators together for a
//! while — operators re-queueing failures and live leases (fencing their workers), marking
//! double executions compensated and undoing it, re-queueing by filter in bulk — and then the
//! checks an on-call reviewer would make of the record:
//!
//! - every action the API said it applied is in the audit trail, and nothing else applied;
//! - no task is in two states (a lease without its holder, a finished task whose current
//!   attempt is still open);
//! - no completion was accepted from a fenced epoch (a run whose lease an operator re-queued
//!   while it ran never had its final write accepted);
//! - an event stream open throughout received every change that committed (none lost).
//!
//! Any violation fails the benchmark; the counts go in the report.

use crate::fleet::Fleet;
use crate::http::Client;
use crate::live::{self, Event};
use anyhow::Context;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use sqlx::PgPool;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Soak {
    pub secs: f64,
    pub operators: usize,
    /// Action requests sent, and how they were answered.
    pub attempts: u64,
    pub applied: u64,
    pub refused: u64,
    /// Applied re-queues that fenced a live lease.
    pub fenced: u64,
    pub bulk_applied: u64,
    /// Answers other than 200 / 409 (each one a failure).
    pub unexpected: Vec<String>,
    pub fleet: String,
    /// The checks: each a count of violations, all zero on a good run.
    pub applied_not_audited: i64,
    pub audited_not_answered: i64,
    pub tasks_in_two_states: i64,
    pub fenced_completions_accepted: i64,
    pub events_expected: u64,
    pub events_lost: u64,
    pub stream_resets: u64,
}

impl Soak {
    fn violations(&self) -> Vec<String> {
        let mut v = Vec::new();
        let mut check = |n: i64, what: &str| {
            if n != 0 {
                v.push(format!("{n} {what}"));
            }
        };
        check(self.unexpected.len() as i64, "unexpected answers");
        check(self.applied_not_audited, "applied actions missing from the audit");
        check(self.audited_not_answered, "audited applied actions nobody was told of");
        check(self.tasks_in_two_states, "tasks in two states");
        check(self.fenced_completions_accepted, "completions accepted from a fenced epoch");
        check(self.events_lost as i64, "live events lost");
        check(self.stream_resets as i64, "stream resets");
        v
    }
}

/// What the operators share: the ids of applied audit rows the API returned, and the tallies.
#[derive(Default)]
struct Tally {
    applied_ids: BTreeSet<i64>,
    attempts: u64,
    refused: u64,
    fenced: u64,
    bulk_applied: u64,
    unexpected: Vec<String>,
}

pub async fn run(
    client: &Client,
    pool: &PgPool,
    url: &str,
    fleet_workers: usize,
    operators: usize,
    secs: Duration,
) -> anyhow::Result<Soak> {
    // The checks look at what the soak touched (the loaded history is not under test here).
    let soak_start = chrono::Utc::now();
    let fleet = Fleet::start(url, fleet_workers).await?;
    // Double executions to compensate (the loaded history has some; the fleet makes none).
    let doubles: Vec<i64> = sqlx::query_scalar(
        "SELECT task_id FROM effects GROUP BY task_id, idempotency_key \
         HAVING COUNT(DISTINCT lease_epoch) > 1 LIMIT 50",
    )
    .fetch_all(pool)
    .await?;
    let audit_start: i64 =
        sqlx::query_scalar("SELECT COALESCE(MAX(id), 0) FROM operator_actions").fetch_one(pool).await?;

    // The stream first, then the cursor: every change after the cursor must arrive.
    let (tx, mut rx) = mpsc::unbounded_channel();
    let stream = live::connect(client, tx).await?;
    live::wait_open(&mut rx).await?;
    let change_start: i64 =
        sqlx::query_scalar("SELECT COALESCE(MAX(id), 0) FROM change_log").fetch_one(pool).await?;
    let received = Arc::new(Mutex::new(BTreeSet::<i64>::new()));
    let resets = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let listener = {
        let (received, resets) = (received.clone(), resets.clone());
        tokio::spawn(async move {
            while let Some(event) = rx.recv().await {
                match event {
                    Event::Changes(changes, _) => {
                        if let Ok(mut r) = received.lock() {
                            r.extend(changes.iter().map(|c| c.id));
                        }
                    }
                    Event::Reset => {
                        resets.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    Event::Open | Event::Refresh => {}
                }
            }
        })
    };

    let tally = Arc::new(Mutex::new(Tally::default()));
    let started = Instant::now();
    let until = started + secs;
    let crews: Vec<_> = (0..operators)
        .map(|i| {
            let (client, tally, doubles) = (client.clone(), tally.clone(), doubles.clone());
            tokio::spawn(async move { operate(client, i as u64, until, doubles, tally).await })
        })
        .collect();
    for crew in crews {
        crew.await.context("an operator loop panicked")?;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let fleet_report = fleet.stop().await;
    println!("soak: fleet {fleet_report}");

    // Every change committed by now must reach the stream (the hub reads every 100 ms; a late
    // commit is looked up again): wait a while for the last of them.
    let change_end: i64 =
        sqlx::query_scalar("SELECT COALESCE(MAX(id), 0) FROM change_log").fetch_one(pool).await?;
    let expected: BTreeSet<i64> =
        sqlx::query_scalar::<_, i64>("SELECT id FROM change_log WHERE id > $1 AND id <= $2")
            .bind(change_start)
            .bind(change_end)
            .fetch_all(pool)
            .await?
            .into_iter()
            .collect();
    let deadline = Instant::now() + Duration::from_secs(15);
    let lost = loop {
        let lost = received.lock().map(|r| expected.difference(&r).count()).unwrap_or(expected.len());
        if lost == 0 || Instant::now() > deadline {
            break lost;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    stream.abort();
    listener.abort();

    let tally = std::mem::take(&mut *tally.lock().map_err(|_| anyhow::anyhow!("tally poisoned"))?);
    let audited: BTreeSet<i64> =
        sqlx::query_scalar::<_, i64>("SELECT id FROM operator_actions WHERE id > $1 AND outcome = 'applied'")
            .bind(audit_start)
            .fetch_all(pool)
            .await?
            .into_iter()
            .collect();
    let two_states: i64 = sqlx::query_scalar(
        "WITH touched AS (SELECT task_id FROM runs WHERE claimed_at >= $1 \
                          UNION SELECT task_id FROM operator_actions WHERE id > $2) \
         SELECT COUNT(*) FROM tasks t WHERE t.id IN (SELECT task_id FROM touched) AND ( \
           (t.status = 'leased') <> (t.owner IS NOT NULL) \
           OR (t.status = 'leased' AND t.lease_expires_at IS NULL) \
           OR (t.status IN ('completed', 'failed', 'dead') AND EXISTS (SELECT 1 FROM runs r \
                WHERE r.task_id = t.id AND r.lease_epoch = t.lease_epoch AND r.finished_at IS NULL)))",
    )
    .bind(soak_start)
    .bind(audit_start)
    .fetch_one(pool)
    .await?;
    // A re-queue applied to a leased task at epoch e fenced the run holding e: that run was
    // still running (else the task would not have been leased), so its final write must have
    // matched nothing.
    let fenced_accepted: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM operator_actions a \
         JOIN runs r ON r.task_id = a.task_id AND r.lease_epoch = a.epoch_seen \
         WHERE a.id > $1 AND a.action = 'requeue' AND a.outcome = 'applied' \
           AND a.status_seen = 'leased' AND r.completion_rows = 1",
    )
    .bind(audit_start)
    .fetch_one(pool)
    .await?;

    let soak = Soak {
        secs: elapsed,
        operators,
        attempts: tally.attempts,
        applied: tally.applied_ids.len() as u64,
        refused: tally.refused,
        fenced: tally.fenced,
        bulk_applied: tally.bulk_applied,
        unexpected: tally.unexpected.iter().take(5).cloned().collect(),
        fleet: fleet_report,
        applied_not_audited: tally.applied_ids.difference(&audited).count() as i64,
        audited_not_answered: audited.difference(&tally.applied_ids).count() as i64,
        tasks_in_two_states: two_states,
        fenced_completions_accepted: fenced_accepted,
        events_expected: expected.len() as u64,
        events_lost: lost as u64,
        stream_resets: resets.load(std::sync::atomic::Ordering::Relaxed),
    };
    println!(
        "soak: {operators} operators for {elapsed:.0} s: {} attempts, {} applied ({} fencing a live lease, {} by bulk), {} refused, {} unexpected; \
         checks: {} not audited, {} audited unanswered, {} tasks in two states, {} fenced completions accepted, {} of {} events lost, {} resets",
        soak.attempts,
        soak.applied,
        soak.fenced,
        soak.bulk_applied,
        soak.refused,
        tally.unexpected.len(),
        soak.applied_not_audited,
        soak.audited_not_answered,
        soak.tasks_in_two_states,
        soak.fenced_completions_accepted,
        soak.events_lost,
        soak.events_expected,
        soak.stream_resets
    );
    let violations = soak.violations();
    anyhow::ensure!(
        violations.is_empty(),
        "the soak found: {}; first unexpected answers: {:?}",
        violations.join(", "),
        soak.unexpected
    );
    anyhow::ensure!(soak.applied > 0, "the soak's operators applied nothing: the checks checked nothing");
    Ok(soak)
}

/// One operator until `until`: each turn one of re-queue a failure, re-queue a live lease
/// (fencing its worker), compensate or undo a double execution, bulk re-queue a cause.
async fn operate(client: Client, seed: u64, until: Instant, doubles: Vec<i64>, tally: Arc<Mutex<Tally>>) {
    let mut rng = SmallRng::seed_from_u64(1000 + seed);
    while Instant::now() < until {
        let turn = rng.gen_range(0..10);
        let result = match turn {
            0..=3 => requeue_newest(&client, &mut rng, "dead,failed", false, &tally).await,
            4..=5 => requeue_newest(&client, &mut rng, "leased", true, &tally).await,
            6..=7 if !doubles.is_empty() => {
                let task = doubles[rng.gen_range(0..doubles.len())];
                compensate(&client, task, &mut rng, &tally).await
            }
            _ => bulk(&client, &tally).await,
        };
        if let Err(e) = result {
            if let Ok(mut t) = tally.lock() {
                t.unexpected.push(format!("{e:#}"));
            }
        }
        tokio::time::sleep(Duration::from_millis(rng.gen_range(50..250))).await;
    }
}

async fn post(client: &Client, path: &str, body: Value) -> anyhow::Result<(u16, Value)> {
    let resp = client
        .http
        .post(client.url(path))
        .header("Content-Type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .with_context(|| format!("POST {path}"))?;
    let status = resp.status().as_u16();
    let text = resp.text().await?;
    let value = serde_json::from_str(&text).unwrap_or(Value::Null);
    anyhow::ensure!(status == 200 || status == 409, "POST {path}: {status}: {text}");
    Ok((status, value))
}

async fn get_json(client: &Client, path: &str) -> anyhow::Result<Value> {
    let fetched = client.get(path, false).await?;
    Ok(serde_json::from_slice(&fetched.body)?)
}

/// Notes one action's answer: the audit row's id if it applied.
fn record(tally: &Arc<Mutex<Tally>>, status: u16, answer: &Value, fenced: bool) {
    let Ok(mut t) = tally.lock() else { return };
    t.attempts += 1;
    if status == 200 && answer["outcome"] == "applied" {
        if let Some(id) = answer["action"]["id"].as_i64() {
            t.applied_ids.insert(id);
        }
        if fenced {
            t.fenced += 1;
        }
    } else {
        t.refused += 1;
    }
}

/// Re-queues one of the newest tasks in `status` (a task list is not in the API: the newest
/// runs name them), at the epoch the task page would show.
async fn requeue_newest(
    client: &Client,
    rng: &mut SmallRng,
    status: &str,
    fence: bool,
    tally: &Arc<Mutex<Tally>>,
) -> anyhow::Result<()> {
    let state = if fence { "running" } else { "failed" };
    let runs = get_json(client, &format!("/api/v1/runs?state={state}&limit=20")).await?;
    let Some(runs) = runs["runs"].as_array().filter(|r| !r.is_empty()) else { return Ok(()) };
    let task = runs[rng.gen_range(0..runs.len())]["task_id"].as_i64().context("a run without task_id")?;
    let detail = get_json(client, &format!("/api/v1/tasks/{task}")).await?;
    let (epoch, now_status) = (detail["lease_epoch"].as_i64(), detail["status"].as_str());
    if !status.split(',').any(|s| Some(s) == now_status) {
        return Ok(());
    }
    let body = json!({"reason": "soak: operator re-queue", "expected_epoch": epoch, "fence": fence});
    let (code, answer) = post(client, &format!("/api/v1/tasks/{task}/requeue"), body).await?;
    let fenced = fence && answer["action"]["status_seen"] == "leased";
    record(tally, code, &answer, fenced);
    Ok(())
}

/// Marks a double execution compensated, or undoes that when it already is.
async fn compensate(
    client: &Client,
    task: i64,
    rng: &mut SmallRng,
    tally: &Arc<Mutex<Tally>>,
) -> anyhow::Result<()> {
    let detail = get_json(client, &format!("/api/v1/tasks/{task}")).await?;
    let body = if detail["compensated_at"].is_null() {
        json!({"reason": "soak: refunded", "reference": format!("SOAK-{}", rng.gen_range(1..1000))})
    } else {
        json!({"reason": "soak: the refund bounced"})
    };
    let kind = if detail["compensated_at"].is_null() { "compensate" } else { "uncompensate" };
    let (code, answer) = post(client, &format!("/api/v1/tasks/{task}/{kind}"), body).await?;
    record(tally, code, &answer, false);
    Ok(())
}

/// Previews a bulk re-queue of the last hour's timeouts and applies it (skipped when more than
/// the bulk limit match).
async fn bulk(client: &Client, tally: &Arc<Mutex<Tally>>) -> anyhow::Result<()> {
    let filter = "cause=timeout&since=1h";
    let preview = get_json(client, &format!("/api/v1/requeue/preview?{filter}")).await?;
    let count = preview["tasks"].as_array().map_or(0, Vec::len);
    if count == 0 || preview["too_many"] == true {
        return Ok(());
    }
    let body = json!({
        "reason": "soak: bulk re-queue of timeouts",
        "expected_count": count,
        "preview_token": preview["token"],
        "acknowledge_unsafe": true,
    });
    let (code, answer) = post(client, &format!("/api/v1/requeue?{filter}"), body).await?;
    let Ok(mut t) = tally.lock() else { return Ok(()) };
    t.attempts += 1;
    if code == 200 && answer["outcome"] == "applied" {
        for id in answer["actions"].as_array().into_iter().flatten().filter_map(|a| a["id"].as_i64()) {
            t.applied_ids.insert(id);
            t.bulk_applied += 1;
        }
    } else {
        t.refused += 1;
    }
    Ok(())
}
