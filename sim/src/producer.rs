//! The arrivals: notifications and ticks enqueued as a Poisson process at `--arrival-rate`,
//! the opening tour first.

use crate::config::FleetConfig;
use crate::report::FleetReport;
use crate::workload;
use lastword_runner::{Clock, SystemClock};
use lastword_store::Db;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

pub(crate) async fn produce(
    db: Db,
    config: Arc<FleetConfig>,
    seed: u64,
    report: Arc<Mutex<FleetReport>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut tour = if config.no_tour { Vec::new() } else { workload::tour() }.into_iter();
    let mut next = Instant::now();
    let mut n = 0u64;
    loop {
        // Exponential gaps: 1 - u is in (0, 1], so the logarithm is finite.
        let gap = -(1.0 - rng.gen::<f64>()).ln() / config.arrival_rate;
        next += Duration::from_secs_f64(gap.min(3600.0));
        let now = Instant::now();
        if next + Duration::from_secs(1) < now {
            next = now; // fell behind (a slow or absent database): no burst to catch up
        }
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = stop.changed() => {}
        }
        if *stop.borrow() || stop.has_changed().is_err() {
            break;
        }
        n += 1;
        let random = workload::random_task(&mut rng, n, config.rate_unsafe); // drawn always: keeps the sequence
        let task = tour.next().unwrap_or(random);
        let mut backoff = Duration::from_millis(25);
        for attempt in 0..5 {
            match lastword_runner::enqueue(&db, &task, SystemClock.now()).await {
                Ok(id) => {
                    tracing::debug!(task_id = id, kind = %task.kind, "task arrived");
                    report.lock().expect("report lock").enqueued += 1;
                    break;
                }
                Err(e) => {
                    report.lock().expect("report lock").db_errors += 1;
                    tracing::warn!(error = %e, attempt, "enqueue failed");
                    if !e.is_transient() {
                        break;
                    }
                    tokio::time::sleep(backoff).await;
                    backoff *= 2;
                }
            }
        }
    }
}
