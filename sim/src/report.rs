//! What a fleet run did, counted by the dashboard's own vocabulary, so a test (or a person
//! reading the log) can compare it with what the database shows.

use lastword_core::{ErrorCause, TaskStatus};
use std::fmt;

/// Counts over one fleet run. Every claim ends in exactly one of: an accepted finish (acted,
/// no_action, skip, a failure cause, empty_output), a lost-lease finish, a silent abandon, or
/// a run still unfinished when the fleet stopped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FleetReport {
    /// The seed the decisions were drawn from (replay with `--seed`).
    pub seed: u64,
    pub enqueued: u64,
    pub claims: u64,
    pub acted: u64,
    pub no_action: u64,
    pub skip: u64,
    pub timeout: u64,
    pub api_error: u64,
    pub context_overflow: u64,
    pub crash: u64,
    pub other: u64,
    pub empty_output: u64,
    /// Finishes whose owner-guarded write matched nothing.
    pub lost_lease: u64,
    /// Runs abandoned without a word (left unfinished on purpose).
    pub silent: u64,
    /// Runs that paused past their lease (most end as lost leases).
    pub slow: u64,
    /// Runs whose finish never happened because of database errors or the shutdown deadline.
    pub unfinished: u64,
    pub effects: u64,
    /// Effects recorded by a worker that no longer held the lease.
    pub stale_effects: u64,
    pub heartbeats: u64,
    pub heartbeats_lost: u64,
    /// Failed finishes that re-queued the task / left it dead.
    pub requeued: u64,
    pub dead: u64,
    /// Database errors (each retried or skipped; the fleet keeps going).
    pub db_errors: u64,
}

impl FleetReport {
    pub(crate) fn count_failure(&mut self, cause: ErrorCause) {
        match cause {
            ErrorCause::Timeout => self.timeout += 1,
            ErrorCause::ApiError => self.api_error += 1,
            ErrorCause::ContextOverflow => self.context_overflow += 1,
            ErrorCause::Crash => self.crash += 1,
            ErrorCause::Other => self.other += 1,
        }
    }

    pub(crate) fn count_status(&mut self, status: TaskStatus) {
        match status {
            TaskStatus::Queued => self.requeued += 1,
            TaskStatus::Dead => self.dead += 1,
            _ => {}
        }
    }

    /// Failures accepted with a cause the runner reported.
    pub fn failed(&self) -> u64 {
        self.timeout + self.api_error + self.context_overflow + self.crash + self.other
    }
}

impl fmt::Display for FleetReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seed {}: {} tasks, {} claims → {} acted, {} no action, {} skip, {} failed \
             (timeout {}, api_error {}, context_overflow {}, crash {}, other {}), {} empty output, {} lost lease, \
             {} silent, {} unfinished; {} effects ({} under a stale lease), {} heartbeats ({} lost), \
             {} re-queued, {} dead, {} database errors",
            self.seed,
            self.enqueued,
            self.claims,
            self.acted,
            self.no_action,
            self.skip,
            self.failed(),
            self.timeout,
            self.api_error,
            self.context_overflow,
            self.crash,
            self.other,
            self.empty_output,
            self.lost_lease,
            self.silent,
            self.unfinished,
            self.effects,
            self.stale_effects,
            self.heartbeats,
            self.heartbeats_lost,
            self.requeued,
            self.dead,
            self.db_errors
        )
    }
}
