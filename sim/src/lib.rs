//! A simulated fleet of agent workers that drives the runner library through every path the
//! dashboard must show: acted / no action / skip, each failure cause, silent crashes, empty
//! outputs, and runs that outlive their lease — re-claimed by another worker, their late
//! finish rejected, sometimes after their side effect already ran (a double execution).
//!
//! ```no_run
//! # async fn demo(db: lastword_store::Db) {
//! use clap::Parser;
//! #[derive(Parser)]
//! struct Demo {
//!     #[command(flatten)]
//!     fleet: lastword_sim::FleetConfig,
//! }
//! let args = Demo::parse();
//! let report = lastword_sim::run_fleet(db, args.fleet, async {
//!     let _ = tokio::signal::ctrl_c().await;
//! })
//! .await
//! .expect("a valid configuration");
//! println!("{report}");
//! # }
//! ```

mod config;
mod fate;
mod producer;
mod report;
mod worker;
mod workload;

pub use config::{ConfigError, FleetConfig};
pub use report::FleetReport;

use lastword_runner::{Clock, Runner, RunnerConfig, SystemClock};
use lastword_store::Db;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Runs the fleet against `db` (connected and migrated) until `config.duration` elapses or
/// `shutdown` completes, whichever is first (pass `std::future::pending()` to rely on the
/// duration alone). Then it stops claiming and enqueuing, lets in-flight runs end — bounded by
/// two leases plus the longest work plus 2 s, after which the rest are abandoned unfinished —
/// and returns what happened. Database errors are logged, counted and retried, never fatal;
/// the only error is an invalid configuration.
pub async fn run_fleet<F>(db: Db, config: FleetConfig, shutdown: F) -> Result<FleetReport, ConfigError>
where
    F: Future<Output = ()>,
{
    config.validate()?;
    let seed = config.seed.unwrap_or_else(rand::random);
    tracing::info!(
        seed,
        workers = config.workers,
        arrival_rate = config.arrival_rate,
        lease = ?config.lease,
        duration = ?config.duration,
        tour = !config.no_tour,
        "simulator fleet starting (replay with --seed {seed})"
    );
    let config = Arc::new(config);
    let report = Arc::new(Mutex::new(FleetReport { seed, ..FleetReport::default() }));
    let in_flight = Arc::new(AtomicU64::new(0));
    let (stop_tx, stop_rx) = watch::channel(false);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let runner_config = RunnerConfig { lease: config.lease_chrono(), tokens: config.tokens.clone() };

    let mut tasks = JoinSet::new();
    tasks.spawn(producer::produce(db.clone(), config.clone(), seed, report.clone(), stop_rx.clone()));
    for i in 1..=config.workers {
        let worker = worker::Worker {
            runner: Runner::new(db.clone(), format!("worker-{i}"), runner_config.clone(), clock.clone()),
            planner: fate::Planner::new(seed.wrapping_add(i as u64), &config),
            config: config.clone(),
            report: report.clone(),
            in_flight: in_flight.clone(),
            stop: stop_rx.clone(),
        };
        tasks.spawn(worker.run());
    }

    tokio::pin!(shutdown);
    match config.duration {
        Some(d) => tokio::select! {
            _ = tokio::time::sleep(d) => {}
            _ = &mut shutdown => {}
        },
        None => (&mut shutdown).await,
    }
    let grace = config.lease * 2 + config.work_max + Duration::from_secs(2);
    tracing::info!(?grace, "simulator fleet stopping: no new claims; letting in-flight runs end");
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(grace, async {
        while let Some(joined) = tasks.join_next().await {
            if let Err(e) = joined {
                tracing::error!(error = %e, "a simulated worker failed");
            }
        }
    })
    .await;
    if drained.is_err() {
        let abandoned = in_flight.load(Ordering::SeqCst);
        tracing::warn!(abandoned, "in-flight runs did not end within {grace:?}; leaving them unfinished");
        tasks.shutdown().await;
        report.lock().expect("report lock").unfinished += abandoned;
    }
    let report = report.lock().expect("report lock").clone();
    tracing::info!("simulator fleet stopped: {report}");
    Ok(report)
}
