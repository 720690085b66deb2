//! What alerts are made of (issue 14, "Alerts"): counters that only go up, for Prometheus'
//! `rate()`, and the attention items an operator is paged for, for the webhooks.
//!
//! **Why counters are counted this way.** The database holds each run's *current* state, and a
//! count of runs by state can fall: a silent run becomes a lost lease when its late write lands,
//! a heartbeat revives a silent run, a prune deletes history. Exposed as a Prometheus counter, any
//! fall reads as a process restart and `rate()` as a spike of the whole total. So a dashboard
//! process reads the counts per 15-minute bucket of claims over a recent horizon and adds up only
//! what *grew* in each bucket since its previous reading ([`OutcomeCounters`]): a run that went
//! silent counts once as silent, and once more as a lost lease if it later lands as one; a fall is
//! never subtracted; a bucket that leaves the horizon is forgotten, not subtracted. The counters
//! start at zero when the process starts, as any Prometheus counter does, and every dashboard
//! process reports the same figures (alert rules take the `max` over instances, not the sum).
//! Runs claimed before the horizon that end after it are not counted (a run lasting two days).

use crate::attention::AttentionKind;
use crate::state::{Cause, RunState};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Runs of one 15-minute bucket of claims in one state (and, for failures, one cause).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutcomeCount {
    /// The bucket: claims in `[bucket * 900 s, (bucket + 1) * 900 s)` since the Unix epoch.
    pub bucket: i64,
    pub state: RunState,
    pub cause: Option<Cause>,
    /// A lost lease of an unsafe task (its effects may have run twice).
    pub unsafe_lost_lease: bool,
    pub runs: i64,
}

/// Tasks that died, per 15-minute bucket of the time they died (`tasks.updated_at`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadCount {
    pub bucket: i64,
    pub tasks: i64,
}

/// One reading of the store for the counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CountsReading {
    pub outcomes: Vec<OutcomeCount>,
    pub dead: Vec<DeadCount>,
}

/// What one key of a bucket was last read as.
type Key = (i64, Counted);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Counted {
    Claimed,
    State(RunState),
    Cause(Cause),
    UnsafeLostLease,
    Dead,
}

/// Monotonic totals built from successive [`CountsReading`]s (see the module header).
#[derive(Clone, Debug, Default)]
pub struct OutcomeCounters {
    /// The last reading per bucket and key; `None` until the first reading (the baseline).
    last: Option<BTreeMap<Key, i64>>,
    totals: BTreeMap<Counted, u64>,
}

impl OutcomeCounters {
    /// Takes a reading of every bucket from `horizon` on: what grew since the previous reading
    /// is added; the first reading is the baseline (counted from zero).
    pub fn observe(&mut self, reading: &CountsReading, horizon: i64) {
        let mut now: BTreeMap<Key, i64> = BTreeMap::new();
        for o in reading.outcomes.iter().filter(|o| o.bucket >= horizon) {
            *now.entry((o.bucket, Counted::Claimed)).or_default() += o.runs;
            if o.state != RunState::Running {
                *now.entry((o.bucket, Counted::State(o.state))).or_default() += o.runs;
            }
            if let Some(cause) = o.cause {
                *now.entry((o.bucket, Counted::Cause(cause))).or_default() += o.runs;
            }
            if o.unsafe_lost_lease {
                *now.entry((o.bucket, Counted::UnsafeLostLease)).or_default() += o.runs;
            }
        }
        for d in reading.dead.iter().filter(|d| d.bucket >= horizon) {
            *now.entry((d.bucket, Counted::Dead)).or_default() += d.tasks;
        }
        if let Some(last) = &self.last {
            for (key, n) in &now {
                let before = last.get(key).copied().unwrap_or(0);
                if *n > before {
                    *self.totals.entry(key.1).or_default() += (*n - before) as u64;
                }
            }
        }
        // The next reading is compared with this one: a fall followed by a rise is a new event
        // (a revived run whose lease lapsed again, another run of the bucket going silent).
        self.last = Some(now);
    }

    fn total(&self, what: Counted) -> u64 {
        self.totals.get(&what).copied().unwrap_or(0)
    }

    /// Runs claimed since the baseline.
    pub fn claimed(&self) -> u64 {
        self.total(Counted::Claimed)
    }

    /// Runs that reached `state` since the baseline (never `running`).
    pub fn reached(&self, state: RunState) -> u64 {
        self.total(Counted::State(state))
    }

    /// Failed runs of `cause` since the baseline.
    pub fn failed_with(&self, cause: Cause) -> u64 {
        self.total(Counted::Cause(cause))
    }

    /// Lost-lease completions of unsafe tasks since the baseline.
    pub fn unsafe_lost_leases(&self) -> u64 {
        self.total(Counted::UnsafeLostLease)
    }

    /// Tasks that died since the baseline.
    pub fn dead_tasks(&self) -> u64 {
        self.total(Counted::Dead)
    }

    /// Whether a baseline reading was taken.
    pub fn started(&self) -> bool {
        self.last.is_some()
    }
}

/// Attention items of one kind across tasks now, for the `/metrics` gauges, and how many of
/// them someone acknowledged (`crate::attention`): the rest are open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ItemCounts {
    pub items: i64,
    pub acknowledged: i64,
}

/// [`ItemCounts`] per kind. Double executions are `None` while the store's flags are being
/// backfilled (the figure would be wrong).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AttentionNow {
    pub double_executions: Option<ItemCounts>,
    /// Unsafe tasks whose run lost its lease after recording an effect, claimed in the last
    /// [`DEAD_HORIZON_HOURS`] hours, not compensated.
    pub unsafe_lost_leases: ItemCounts,
    /// Tasks that died in the last [`DEAD_HORIZON_HOURS`] hours.
    pub dead: ItemCounts,
    pub loops: ItemCounts,
}

/// A dead task stays dead until someone re-queues it; the gauge and the notifier look at deaths
/// this recent (the counter of deaths has no such horizon).
pub const DEAD_HORIZON_HOURS: i64 = 24;

/// An attention item of one task, as the notifier sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OpenItem {
    pub kind: AttentionKind,
    pub task_id: i64,
    pub task_kind: String,
    /// The task's epoch when read (the incident of a dead task is its epoch).
    pub epoch: i64,
    /// When it began, as well as the rows tell (the death, the lost lease's claim, the loop's
    /// first failed claim, the double execution's latest activity).
    pub since: Option<DateTime<Utc>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(bucket: i64, state: RunState, runs: i64) -> OutcomeCount {
        let cause = match state {
            RunState::Silent => Some(Cause::Silent),
            RunState::LostLease => Some(Cause::LostLease),
            _ => None,
        };
        OutcomeCount { bucket, state, cause, unsafe_lost_lease: state == RunState::LostLease, runs }
    }

    fn reading(outcomes: Vec<OutcomeCount>) -> CountsReading {
        CountsReading { outcomes, dead: vec![] }
    }

    #[test]
    fn counters_start_at_the_baseline_and_only_add_what_grew() {
        let mut c = OutcomeCounters::default();
        // History before the process started is the baseline, not a burst.
        c.observe(&reading(vec![outcome(10, RunState::Acted, 500), outcome(11, RunState::Running, 2)]), 10);
        assert!(c.started());
        assert_eq!((c.claimed(), c.reached(RunState::Acted)), (0, 0));
        // Both running runs of bucket 11 go silent; one more is claimed and acts.
        c.observe(
            &reading(vec![
                outcome(10, RunState::Acted, 500),
                outcome(11, RunState::Silent, 2),
                outcome(11, RunState::Acted, 1),
            ]),
            10,
        );
        assert_eq!((c.claimed(), c.reached(RunState::Silent), c.reached(RunState::Acted)), (1, 2, 1));
        assert_eq!(c.failed_with(Cause::Silent), 2);
        // One silent run lands late as a lost lease: silent falls (not subtracted), lost lease
        // grows. Then the other is revived by a heartbeat and its lease lapses again: silent
        // falls and rises, one more lapse.
        let late = vec![
            outcome(10, RunState::Acted, 500),
            outcome(11, RunState::Silent, 1),
            outcome(11, RunState::LostLease, 1),
            outcome(11, RunState::Acted, 1),
        ];
        c.observe(&reading(late.clone()), 10);
        assert_eq!(
            (c.reached(RunState::Silent), c.reached(RunState::LostLease), c.unsafe_lost_leases()),
            (2, 1, 1)
        );
        let mut revived = late.clone();
        revived[1].state = RunState::Running;
        c.observe(&reading(revived), 10);
        c.observe(&reading(late), 10);
        assert_eq!((c.claimed(), c.reached(RunState::Silent)), (1, 3));
        // A prune or the horizon moving on forgets bucket 10 without subtracting anything.
        c.observe(&reading(vec![outcome(11, RunState::Silent, 2), outcome(12, RunState::Acted, 3)]), 11);
        assert_eq!((c.claimed(), c.reached(RunState::Acted)), (4, 4));
        assert_eq!(c.reached(RunState::Silent), 4, "bucket 11 read as 2 silent after 1: one more");
        c.observe(&CountsReading { outcomes: vec![], dead: vec![DeadCount { bucket: 12, tasks: 2 }] }, 11);
        assert_eq!(c.dead_tasks(), 2);
    }
}
