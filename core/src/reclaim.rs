//! Why a task was claimed again: the one rule that names the reason of every re-claim, so the
//! operator tuning a lease can tell a worker that was merely slow (a longer lease or a more
//! frequent heartbeat would have spared the re-run) from one that died (the lease did its job)
//! or one that stalled on this run while it went on working elsewhere.
//!
//! The rule reads the run the re-claim replaced (the task's run of the next lower epoch) and
//! two facts around it. [`reclaim_reason`] is the rule; the store's `RECLAIM_REASON_SQL` is its
//! SQL twin (lists and filters are decided in the database), and the conformance suite proves
//! them equal on both backends over a story per reason.

use chrono::{DateTime, Utc};

string_enum!(
    /// The reason a run's claim was a re-claim (`runs[].reclaim_reason`; none for a first claim).
    ReclaimReason, "reclaim" {
        /// The earlier run was still working when its lease lapsed and the task was claimed
        /// again: it finished after the re-claim, or its final write was rejected (a lost lease).
        SlowWorker => "slow_worker",
        /// The earlier run never finished and its worker has claimed nothing since its lease
        /// lapsed: the worker is gone.
        DeadWorker => "dead_worker",
        /// The earlier run never finished, but its worker claimed again after that run's lease
        /// lapsed (any task, this one included): alive, stuck on this run (a hung API call, a
        /// pause), or restarted under the same name.
        StalledWorker => "stalled_worker",
        /// An operator re-queued the task (an applied, audited `requeue`) between the two claims.
        OperatorRequeue => "operator_requeue",
        /// The earlier run had finished (a failure the runner retries) before the task was
        /// claimed again: a retry, not a lease changing hands.
        Retry => "retry",
    }
);

impl ReclaimReason {
    /// A table cell's words: "slow worker".
    pub fn short(self) -> &'static str {
        match self {
            ReclaimReason::SlowWorker => "slow worker",
            ReclaimReason::DeadWorker => "dead worker",
            ReclaimReason::StalledWorker => "stalled worker",
            ReclaimReason::OperatorRequeue => "operator re-queue",
            ReclaimReason::Retry => "retry",
        }
    }

    /// A phrase for a tooltip or the task story: "re-claimed from a slow worker".
    pub fn label(self) -> &'static str {
        match self {
            ReclaimReason::SlowWorker => "re-claimed from a slow worker (it finished later)",
            ReclaimReason::DeadWorker => "re-claimed from a dead worker (never seen again)",
            ReclaimReason::StalledWorker => "re-claimed from a stalled worker (alive, stuck on this run)",
            ReclaimReason::OperatorRequeue => "re-queued by an operator",
            ReclaimReason::Retry => "retried after a failure",
        }
    }
}

/// What the rule needs of the run a re-claim replaced.
#[derive(Clone, Copy, Debug)]
pub struct Earlier {
    pub finished_at: Option<DateTime<Utc>>,
    pub completion_rows: Option<i32>,
}

/// Why the run claimed at `claimed_at` re-claimed its task, given the task's run of the next
/// lower epoch (`None`: a first claim), whether an applied operator re-queue of the task is
/// stamped between the two claims (inclusive), and whether the earlier run's worker claimed
/// anything after the earlier lease's expiry.
pub fn reclaim_reason(
    claimed_at: DateTime<Utc>,
    earlier: Option<&Earlier>,
    requeued_between: bool,
    worker_seen_after_lapse: bool,
) -> Option<ReclaimReason> {
    let earlier = earlier?;
    Some(if requeued_between {
        ReclaimReason::OperatorRequeue
    } else if earlier.completion_rows == Some(0) || earlier.finished_at.is_some_and(|f| f > claimed_at) {
        ReclaimReason::SlowWorker
    } else if earlier.finished_at.is_some() {
        ReclaimReason::Retry
    } else if worker_seen_after_lapse {
        ReclaimReason::StalledWorker
    } else {
        ReclaimReason::DeadWorker
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, TimeZone};

    fn t(s: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 2, 3, 0, 0).unwrap() + Duration::seconds(s)
    }

    fn earlier(finished: Option<i64>, rows: Option<i32>) -> Earlier {
        Earlier { finished_at: finished.map(t), completion_rows: rows }
    }

    #[test]
    fn a_first_claim_has_no_reason() {
        assert_eq!(reclaim_reason(t(0), None, true, true), None);
    }

    #[test]
    fn each_reason_from_the_earlier_run() {
        let at = t(31);
        // Finished after the re-claim (its write then matched no row): slow.
        assert_eq!(
            reclaim_reason(at, Some(&earlier(Some(45), Some(0))), false, false),
            Some(ReclaimReason::SlowWorker)
        );
        // Still running after the re-claim, write not recorded yet but later than the claim.
        assert_eq!(
            reclaim_reason(at, Some(&earlier(Some(40), None)), false, false),
            Some(ReclaimReason::SlowWorker)
        );
        // Failed before the re-claim: a retry.
        assert_eq!(
            reclaim_reason(at, Some(&earlier(Some(10), Some(1))), false, true),
            Some(ReclaimReason::Retry)
        );
        // Never finished: stalled if its worker went on claiming, dead if not.
        assert_eq!(
            reclaim_reason(at, Some(&earlier(None, None)), false, true),
            Some(ReclaimReason::StalledWorker)
        );
        assert_eq!(
            reclaim_reason(at, Some(&earlier(None, None)), false, false),
            Some(ReclaimReason::DeadWorker)
        );
    }

    #[test]
    fn an_operator_requeue_explains_any_earlier_run() {
        for e in [earlier(None, None), earlier(Some(45), Some(0)), earlier(Some(10), Some(1))] {
            assert_eq!(reclaim_reason(t(31), Some(&e), true, false), Some(ReclaimReason::OperatorRequeue));
        }
    }

    #[test]
    fn the_vocabulary_round_trips_and_refuses_strangers() {
        for r in ReclaimReason::ALL {
            assert_eq!(r.as_str().parse::<ReclaimReason>().unwrap(), r);
            assert_eq!(serde_json::to_string(&r).unwrap(), format!("\"{}\"", r.as_str()));
        }
        let err = "lazy_worker".parse::<ReclaimReason>().unwrap_err();
        assert_eq!(err.field, "reclaim");
    }
}
