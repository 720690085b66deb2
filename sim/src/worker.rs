//! One simulated agent worker: claim, work (heartbeating when the work outlives half the
//! lease), maybe record an effect, finish — or misbehave in the ways its plan says.

use crate::config::FleetConfig;
use crate::fate::{Fate, Planner};
use crate::report::FleetReport;
use crate::workload::{self, Kind};
use lastword_core::{ErrorCause, Safety, Source};
use lastword_runner::{ActionMessage, Finish, Heartbeat, Lease, Outcome, Runner, RunnerError};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

pub(crate) struct Worker {
    pub runner: Runner,
    pub planner: Planner,
    pub config: Arc<FleetConfig>,
    pub report: Arc<Mutex<FleetReport>>,
    /// Runs claimed and not yet ended, fleet-wide (for the shutdown deadline's count).
    pub in_flight: Arc<AtomicU64>,
    pub stop: watch::Receiver<bool>,
}

/// Who holds the task now, as a lost heartbeat reported it.
struct LostAt {
    holder: Option<String>,
    epoch: i64,
}

impl Worker {
    pub async fn run(mut self) {
        let poll = self.config.poll_interval();
        tracing::debug!(worker = self.runner.worker(), "worker started");
        while !self.stopped() {
            match self.runner.claim(None).await {
                Ok(Some(lease)) => {
                    self.in_flight.fetch_add(1, Ordering::SeqCst);
                    self.run_one(lease).await;
                    self.in_flight.fetch_sub(1, Ordering::SeqCst);
                }
                Ok(None) => self.pause(poll).await,
                Err(e) => {
                    self.db_error("claim", &e);
                    self.pause(if e.is_transient() { poll } else { Duration::from_secs(1) }).await;
                }
            }
        }
        tracing::debug!(worker = self.runner.worker(), "worker stopped");
    }

    /// Stopped when told to, or when the fleet that started it is gone.
    fn stopped(&self) -> bool {
        *self.stop.borrow() || self.stop.has_changed().is_err()
    }

    async fn pause(&mut self, d: Duration) {
        tokio::select! {
            _ = tokio::time::sleep(d) => {}
            _ = self.stop.changed() => {}
        }
    }

    fn count(&self, f: impl FnOnce(&mut FleetReport)) {
        f(&mut self.report.lock().expect("report lock"));
    }

    fn db_error(&self, what: &str, e: &RunnerError) {
        self.count(|r| r.db_errors += 1);
        if e.is_transient() {
            tracing::debug!(worker = self.runner.worker(), error = %e, "{what}: transient database error");
        } else {
            tracing::warn!(worker = self.runner.worker(), error = %e, "{what} failed");
        }
    }

    /// Retries transient errors with backoff; `None` when the call could not be made.
    async fn retry<T, Fut>(&self, what: &str, mut call: impl FnMut() -> Fut) -> Option<T>
    where
        Fut: Future<Output = Result<T, RunnerError>>,
    {
        let mut backoff = Duration::from_millis(25);
        for _ in 0..8 {
            match call().await {
                Ok(v) => return Some(v),
                Err(e) => {
                    self.db_error(what, &e);
                    if !e.is_transient() {
                        return None;
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
            }
        }
        None
    }

    async fn run_one(&mut self, mut lease: Lease) {
        let plan = self.planner.next_plan(); // drawn whatever happens, to keep the sequence
        let fate = tour_fate(&lease).unwrap_or_else(|| plan.fate(&self.config, lease.source));
        let kind = workload::kind(&lease.kind);
        let worker = self.runner.worker().to_string();
        self.count(|r| r.claims += 1);
        tracing::debug!(worker, task_id = lease.task_id, epoch = lease.epoch, ?fate, "claimed");

        let outcome = match fate {
            Fate::Silent => {
                tokio::time::sleep(plan.work.mul_f64(plan.fraction)).await;
                tracing::info!(
                    worker,
                    task_id = lease.task_id,
                    run_id = lease.run_id,
                    "crashed without a word (run left unfinished)"
                );
                self.count(|r| r.silent += 1);
                return;
            }
            Fate::Slow => {
                self.count(|r| r.slow += 1);
                let pause = self.config.lease.mul_f64(plan.slow_factor);
                tracing::info!(
                    worker,
                    task_id = lease.task_id,
                    ?pause,
                    "pausing past the lease without a heartbeat"
                );
                tokio::time::sleep(pause).await;
                self.effect(&lease, kind).await;
                acted(kind, &lease, plan.variant)
            }
            Fate::Failed(cause) => {
                if let Err(lost) = self.work(&mut lease, plan.work.mul_f64(plan.fraction)).await {
                    return self.finish_after_lost_heartbeat(lease, lost).await;
                }
                if lease.safety == Safety::Unsafe {
                    // It got as far as its side effect before failing: a retry will run it again.
                    self.effect(&lease, kind).await;
                }
                Outcome::Failed { cause, detail: workload::failure_detail(cause, plan.variant) }
            }
            Fate::Acted | Fate::Idle | Fate::Empty => {
                if let Err(lost) = self.work(&mut lease, plan.work).await {
                    return self.finish_after_lost_heartbeat(lease, lost).await;
                }
                if fate == Fate::Acted || lease.safety == Safety::Unsafe {
                    self.effect(&lease, kind).await;
                }
                match fate {
                    Fate::Acted => acted(kind, &lease, plan.variant),
                    Fate::Idle if lease.source == Source::Tick => Outcome::Skip,
                    Fate::Idle => Outcome::NoActionNeeded,
                    _ => {
                        let output = [Some(""), None, Some(" \n")][plan.variant % 3].map(str::to_string);
                        tracing::info!(
                            worker,
                            task_id = lease.task_id,
                            ?output,
                            "finishing with an empty output (contract violation)"
                        );
                        let finish = self
                            .retry("finish", || self.runner.finish_unchecked(lease.clone(), output.clone()))
                            .await;
                        return self.tally(finish, |r| r.empty_output += 1);
                    }
                }
            }
        };
        let finish = self.retry("finish", || self.runner.finish(lease.clone(), outcome.clone())).await;
        self.tally(finish, |r| match &outcome {
            Outcome::Acted(_) => r.acted += 1,
            Outcome::NoActionNeeded => r.no_action += 1,
            Outcome::Skip => r.skip += 1,
            Outcome::Failed { cause, .. } => r.count_failure(*cause),
        });
    }

    /// Sleeps `d`, heartbeating every half lease while work remains.
    async fn work(&self, lease: &mut Lease, d: Duration) -> Result<(), LostAt> {
        let step = self.config.lease / 2;
        let mut left = d;
        loop {
            let now = left.min(step);
            tokio::time::sleep(now).await;
            left -= now;
            if left.is_zero() {
                return Ok(());
            }
            let beat = self.heartbeat(lease).await;
            match beat {
                Some(Heartbeat::Extended { .. }) => self.count(|r| r.heartbeats += 1),
                Some(Heartbeat::Lost { holder, epoch }) => {
                    self.count(|r| {
                        r.heartbeats += 1;
                        r.heartbeats_lost += 1;
                    });
                    return Err(LostAt { holder, epoch });
                }
                None => {} // keep working; the finish will tell
            }
        }
    }

    /// [`Runner::heartbeat`] with the same retry policy as [`Worker::retry`] (which cannot
    /// lend out the `&mut Lease`).
    async fn heartbeat(&self, lease: &mut Lease) -> Option<Heartbeat> {
        let mut backoff = Duration::from_millis(25);
        for _ in 0..8 {
            match self.runner.heartbeat(lease).await {
                Ok(beat) => return Some(beat),
                Err(e) => {
                    self.db_error("heartbeat", &e);
                    if !e.is_transient() {
                        return None;
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
            }
        }
        None
    }

    /// A well-behaved worker that learns at a heartbeat it lost the lease stops and says so.
    async fn finish_after_lost_heartbeat(&self, lease: Lease, lost: LostAt) {
        let detail = format!(
            "stopped: lost the lease at a heartbeat (now held by {} under epoch {})",
            lost.holder.as_deref().unwrap_or("nobody"),
            lost.epoch
        );
        let outcome = Outcome::Failed { cause: ErrorCause::Other, detail };
        let finish = self.retry("finish", || self.runner.finish(lease.clone(), outcome.clone())).await;
        self.tally(finish, |r| r.other += 1);
    }

    async fn effect(&self, lease: &Lease, kind: &Kind) {
        let key = format!("task-{}-{}", lease.task_id, kind.effect);
        if let Some(rec) = self.retry("effect", || self.runner.record_effect(lease, kind.effect, &key)).await
        {
            self.count(|r| r.effects += 1);
            if !rec.lease_current {
                self.count(|r| r.stale_effects += 1);
                tracing::info!(
                    worker = self.runner.worker(),
                    task_id = lease.task_id,
                    epoch = lease.epoch,
                    key,
                    "effect ran under a lease this worker no longer holds: double execution"
                );
            }
        }
    }

    /// Counts a finish: `accepted` for an accepted one, `lost_lease` or `unfinished` otherwise.
    fn tally(&self, finish: Option<Finish>, accepted: impl FnOnce(&mut FleetReport)) {
        match finish {
            Some(Finish::Accepted { status }) => self.count(|r| {
                accepted(r);
                r.count_status(status);
            }),
            Some(Finish::LostLease { holder, epoch }) => {
                tracing::info!(
                    worker = self.runner.worker(),
                    ?holder,
                    epoch,
                    "late finish rejected: lost lease"
                );
                self.count(|r| r.lost_lease += 1);
            }
            None => self.count(|r| r.unfinished += 1),
        }
    }
}

/// The fate a tour task scripts for this attempt, if any.
fn tour_fate(lease: &Lease) -> Option<Fate> {
    let index = usize::try_from(lease.attempts).ok()?.checked_sub(1)?;
    lease.payload.get("tour")?.as_array()?.get(index)?.as_str()?.parse().ok()
}

fn acted(kind: &Kind, lease: &Lease, variant: usize) -> Outcome {
    let text = workload::message(kind, &lease.payload, variant);
    Outcome::Acted(ActionMessage::new(text).expect("canned messages are not blank"))
}
