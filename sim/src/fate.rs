//! What happens to a run, decided up front from the worker's seeded RNG. Each run draws the
//! same number of random values whatever its fate, so a worker's sequence of decisions depends
//! only on `--seed` and the worker's index — not on timing. (Which task a worker claims still
//! depends on timing; the decisions it makes do not.)

use crate::config::FleetConfig;
use lastword_core::{ErrorCause, Source};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::str::FromStr;
use std::time::Duration;

/// How a run ends, in the simulator's terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Does something, records an effect, finishes with a message.
    Acted,
    /// Nothing to do: "no action needed" for a notification, "skip" for a tick.
    Idle,
    /// Pauses past its lease without a heartbeat, then acts and finishes late.
    Slow,
    /// Reports a failure with this cause.
    Failed(ErrorCause),
    /// Dies without a word: the run is never finished.
    Silent,
    /// Finishes "successfully" with an empty output (a contract violation).
    Empty,
}

impl FromStr for Fate {
    type Err = String;
    /// The names used in a tour task's payload (`"tour": ["slow", "acted"]`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "acted" => Fate::Acted,
            "idle" => Fate::Idle,
            "slow" => Fate::Slow,
            "silent" => Fate::Silent,
            "empty" => Fate::Empty,
            other => Fate::Failed(other.parse::<ErrorCause>().map_err(|e| e.message)?),
        })
    }
}

/// The random draws for one run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Plan {
    fate_roll: f64,
    act_roll: f64,
    /// Simulated work for a run that completes or fails.
    pub work: Duration,
    /// Share of the work done before a failure or a silent crash.
    pub fraction: f64,
    /// A slow run sleeps this multiple of the lease (1.3–2.0).
    pub slow_factor: f64,
    /// Picks among canned messages and details.
    pub variant: usize,
}

impl Plan {
    /// The fate the rates give this plan, for a task from `source`.
    pub fn fate(&self, config: &FleetConfig, source: Source) -> Fate {
        let faults = [
            Fate::Slow,
            Fate::Failed(ErrorCause::ApiError),
            Fate::Failed(ErrorCause::Timeout),
            Fate::Failed(ErrorCause::ContextOverflow),
            Fate::Failed(ErrorCause::Crash),
            Fate::Silent,
            Fate::Empty,
        ];
        let mut edge = 0.0;
        for (fate, (_, rate)) in faults.into_iter().zip(config.fault_rates()) {
            edge += rate;
            if self.fate_roll < edge {
                return fate;
            }
        }
        // Healthy: notifications usually owe a reply; most ticks find nothing to do.
        let acts = match source {
            Source::Notification => 0.6,
            Source::Tick => 0.35,
        };
        if self.act_roll < acts {
            Fate::Acted
        } else {
            Fate::Idle
        }
    }
}

/// One worker's stream of plans.
pub(crate) struct Planner {
    rng: StdRng,
    work_min: Duration,
    work_max: Duration,
}

impl Planner {
    pub fn new(seed: u64, config: &FleetConfig) -> Self {
        Planner { rng: StdRng::seed_from_u64(seed), work_min: config.work_min, work_max: config.work_max }
    }

    pub fn next_plan(&mut self) -> Plan {
        let rng = &mut self.rng;
        Plan {
            fate_roll: rng.gen(),
            act_roll: rng.gen(),
            work: self.work_min + (self.work_max - self.work_min).mul_f64(rng.gen::<f64>()),
            fraction: rng.gen_range(0.2..0.9),
            slow_factor: rng.gen_range(1.3..2.0),
            variant: rng.gen_range(0..1000),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_depend_only_on_the_seed() {
        let config = FleetConfig::default();
        let take = |seed| {
            let mut p = Planner::new(seed, &config);
            (0..50).map(|_| p.next_plan()).collect::<Vec<_>>()
        };
        assert_eq!(take(7), take(7));
        assert_ne!(take(7), take(8));
    }

    #[test]
    fn fates_follow_the_rates() {
        let config = FleetConfig { rate_slow: 0.1, rate_empty: 0.2, ..FleetConfig::default() };
        let mut p = Planner::new(1, &config);
        let n = 20_000;
        let fates: Vec<Fate> = (0..n).map(|_| p.next_plan().fate(&config, Source::Notification)).collect();
        let share = |f: Fate| fates.iter().filter(|&&x| x == f).count() as f64 / n as f64;
        assert!((share(Fate::Slow) - 0.1).abs() < 0.01, "{}", share(Fate::Slow));
        assert!((share(Fate::Empty) - 0.2).abs() < 0.01, "{}", share(Fate::Empty));
        assert!((share(Fate::Failed(ErrorCause::Crash)) - 0.03).abs() < 0.01);
        assert!(share(Fate::Acted) > share(Fate::Idle), "notifications mostly act");
        let none = FleetConfig::default().every_fault_at(0.0);
        assert!(
            (0..1000).all(|_| matches!(p.next_plan().fate(&none, Source::Tick), Fate::Acted | Fate::Idle))
        );
    }

    #[test]
    fn tour_names_parse() {
        assert_eq!("slow".parse::<Fate>(), Ok(Fate::Slow));
        assert_eq!("context_overflow".parse::<Fate>(), Ok(Fate::Failed(ErrorCause::ContextOverflow)));
        assert!("melted".parse::<Fate>().is_err());
    }
}
