//! The live write load during the read measurements: a few workers of the real runner library
//! (`lastword-runner`) claiming, heartbeating, recording effects and finishing tasks, and
//! enqueuing one new task per run so the queue stays level. It is what makes the dashboard's
//! live feed fire. Every runner call is one transaction; the fleet counts the ones that
//! committed, so the database-load measurement can subtract exactly the fleet's own work.

use lastword_runner::{
    ActionMessage, ErrorCause, NewTask, Outcome, Runner, RunnerConfig, Safety, Source, SystemClock,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

#[derive(Default)]
pub struct Counters {
    /// Transactions the fleet committed.
    pub commits: AtomicU64,
    pub runs: AtomicU64,
    pub errors: AtomicU64,
}

pub struct Fleet {
    pub counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
    started: Instant,
    pool: sqlx::PgPool,
}

impl Fleet {
    pub async fn start(url: &str, workers: usize) -> anyhow::Result<Fleet> {
        let pool = crate::db::connect(url, workers as u32 + 1).await?;
        let db = lastword_runner::Db::Postgres(pool.clone());
        let counters = Arc::new(Counters::default());
        let stop = Arc::new(AtomicBool::new(false));
        let config = RunnerConfig { lease: chrono::Duration::seconds(10), ..RunnerConfig::default() };
        let handles = (0..workers)
            .map(|i| {
                let runner =
                    Runner::new(db.clone(), format!("live-{}", i + 1), config.clone(), Arc::new(SystemClock));
                let (counters, stop) = (counters.clone(), stop.clone());
                tokio::spawn(async move { work(runner, i as u64, counters, stop).await })
            })
            .collect();
        println!("fleet: {workers} workers of the runner library writing");
        Ok(Fleet { counters, stop, workers: handles, started: Instant::now(), pool })
    }

    pub fn commits(&self) -> u64 {
        self.counters.commits.load(Ordering::SeqCst)
    }

    pub async fn stop(self) -> String {
        self.stop.store(true, Ordering::SeqCst);
        for w in self.workers {
            let _ = w.await;
        }
        self.pool.close().await;
        let secs = self.started.elapsed().as_secs_f64();
        let c = &self.counters;
        format!(
            "{} runs, {} transactions ({:.1}/s), {} errors in {:.0} s",
            c.runs.load(Ordering::SeqCst),
            c.commits.load(Ordering::SeqCst),
            c.commits.load(Ordering::SeqCst) as f64 / secs,
            c.errors.load(Ordering::SeqCst),
            secs
        )
    }
}

/// One worker: claim → work (heartbeat half the time) → effect for unsafe tasks that act →
/// finish with the healthy-mostly mix → enqueue a replacement task.
async fn work(runner: Runner, seed: u64, counters: Arc<Counters>, stop: Arc<AtomicBool>) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let ok = |counters: &Counters| counters.commits.fetch_add(1, Ordering::SeqCst);
    while !stop.load(Ordering::SeqCst) {
        let lease = match runner.claim(None).await {
            Ok(Some(lease)) => {
                ok(&counters);
                lease
            }
            Ok(None) => {
                ok(&counters);
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            Err(_) => {
                counters.errors.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        let mut lease = lease;
        tokio::time::sleep(Duration::from_millis(rng.gen_range(100..400))).await;
        if rng.gen_bool(0.5) {
            match runner.heartbeat(&mut lease).await {
                Ok(_) => ok(&counters),
                Err(_) => counters.errors.fetch_add(1, Ordering::SeqCst),
            };
        }
        let roll: f64 = rng.gen();
        let outcome = if roll < 0.4 {
            let message = format!("replied to @ann in thread #{}", lease.task_id);
            match ActionMessage::new(message) {
                Ok(m) => Outcome::Acted(m),
                Err(_) => Outcome::NoActionNeeded,
            }
        } else if roll < 0.75 {
            Outcome::NoActionNeeded
        } else if roll < 0.88 {
            Outcome::Skip
        } else {
            let cause = ErrorCause::ALL[rng.gen_range(0..ErrorCause::ALL.len())];
            Outcome::Failed { cause, detail: format!("live fleet failure ({})", cause.as_str()) }
        };
        if matches!(outcome, Outcome::Acted(_)) && lease.safety == Safety::Unsafe {
            let key = format!("task-{}-post_reply", lease.task_id);
            match runner.record_effect(&lease, "post_reply", &key).await {
                Ok(_) => ok(&counters),
                Err(_) => counters.errors.fetch_add(1, Ordering::SeqCst),
            };
        }
        match runner.finish(lease, outcome).await {
            Ok(_) => ok(&counters),
            Err(_) => counters.errors.fetch_add(1, Ordering::SeqCst),
        };
        counters.runs.fetch_add(1, Ordering::SeqCst);
        let safety = if rng.gen_bool(0.15) { Safety::Unsafe } else { Safety::Idempotent };
        let task = NewTask::new("reply_to_mention", Source::Notification, safety)
            .with_payload(serde_json::json!({ "from": "@ann", "live": true }));
        match runner.enqueue(&task).await {
            Ok(_) => ok(&counters),
            Err(_) => counters.errors.fetch_add(1, Ordering::SeqCst),
        };
    }
}
