//! The simulator's knobs, as command-line flags the server flattens into `lastword demo` and
//! `lastword serve --demo`. The defaults are tuned so a person watching the live timeline sees
//! every kind of event within a minute.

use lastword_core::Tokens;
use std::time::Duration;

/// How the simulated fleet behaves. Rates are probabilities per run (0..=1); the fault rates
/// together must not exceed 1, and whatever they leave is healthy work.
#[derive(Clone, Debug, PartialEq, clap::Args)]
#[command(next_help_heading = "Simulator fleet")]
pub struct FleetConfig {
    /// Number of simulated workers (named worker-1, worker-2, ...).
    #[arg(long, default_value_t = 6)]
    pub workers: usize,
    /// New tasks per second (Poisson arrivals).
    #[arg(long, default_value_t = 2.0)]
    pub arrival_rate: f64,
    /// Lease length. Short, so the "run outlives its lease" case shows within a minute.
    #[arg(long, default_value = "4s", value_parser = humantime::parse_duration)]
    pub lease: Duration,
    /// Stop after this long (e.g. 30s, 5m); runs until shut down when absent.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,
    /// Seed for every random decision (random when absent; logged at start so a run can be replayed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Shortest simulated work per run.
    #[arg(long, default_value = "300ms", value_parser = humantime::parse_duration)]
    pub work_min: Duration,
    /// Longest simulated work per run (runs longer than half the lease heartbeat).
    #[arg(long, default_value = "2500ms", value_parser = humantime::parse_duration)]
    pub work_max: Duration,
    /// Runs that pause longer than the lease without a heartbeat: re-claimed by another worker,
    /// their late finish is a lost-lease completion (after their effect ran: a double execution).
    #[arg(long, default_value_t = 0.05)]
    pub rate_slow: f64,
    /// Runs failing with cause api_error.
    #[arg(long, default_value_t = 0.04)]
    pub rate_api_error: f64,
    /// Runs failing with cause timeout.
    #[arg(long, default_value_t = 0.03)]
    pub rate_timeout: f64,
    /// Runs failing with cause context_overflow.
    #[arg(long, default_value_t = 0.03)]
    pub rate_context_overflow: f64,
    /// Runs failing with cause crash (the worker reports its crash).
    #[arg(long, default_value_t = 0.03)]
    pub rate_crash: f64,
    /// Runs that crash without a word: never finished, the lease lapses (silent).
    #[arg(long, default_value_t = 0.03)]
    pub rate_silent: f64,
    /// Runs that break the contract by finishing "successfully" with an empty output.
    #[arg(long, default_value_t = 0.03)]
    pub rate_empty: f64,
    /// Share of tasks that are unsafe to run twice (they record an effect on every attempt).
    #[arg(long, default_value_t = 0.15)]
    pub rate_unsafe: f64,
    /// Skip the opening tour: by default the first ten tasks walk through every kind of event
    /// once (acted, no action, skip, each failure cause, silent, empty output, and a lost lease
    /// with a double execution), so a fresh timeline shows them all in the first seconds.
    #[arg(long)]
    pub no_tour: bool,
    /// The terminal tokens written for "no action needed" and "skip" (set by the embedding
    /// program from its own configuration; not a flag).
    #[arg(skip)]
    pub tokens: Tokens,
}

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            workers: 6,
            arrival_rate: 2.0,
            lease: Duration::from_secs(4),
            duration: None,
            seed: None,
            work_min: Duration::from_millis(300),
            work_max: Duration::from_millis(2500),
            rate_slow: 0.05,
            rate_api_error: 0.04,
            rate_timeout: 0.03,
            rate_context_overflow: 0.03,
            rate_crash: 0.03,
            rate_silent: 0.03,
            rate_empty: 0.03,
            rate_unsafe: 0.15,
            no_tour: false,
            tokens: Tokens::default(),
        }
    }
}

/// A configuration that cannot run; the message names the flag.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

impl FleetConfig {
    /// The same fleet with every fault (slow, each failure cause, silent, empty) at `rate`:
    /// `0.0` for a fleet that only succeeds, a high rate to see every kind of event soon.
    pub fn every_fault_at(self, rate: f64) -> Self {
        FleetConfig {
            rate_slow: rate,
            rate_api_error: rate,
            rate_timeout: rate,
            rate_context_overflow: rate,
            rate_crash: rate,
            rate_silent: rate,
            rate_empty: rate,
            ..self
        }
    }

    /// The fault rates in the order a run's fate is drawn.
    pub(crate) fn fault_rates(&self) -> [(&'static str, f64); 7] {
        [
            ("--rate-slow", self.rate_slow),
            ("--rate-api-error", self.rate_api_error),
            ("--rate-timeout", self.rate_timeout),
            ("--rate-context-overflow", self.rate_context_overflow),
            ("--rate-crash", self.rate_crash),
            ("--rate-silent", self.rate_silent),
            ("--rate-empty", self.rate_empty),
        ]
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let fail = |m: String| Err(ConfigError(m));
        if self.workers == 0 {
            return fail("--workers: must be at least 1".into());
        }
        if !(self.arrival_rate.is_finite() && self.arrival_rate > 0.0) {
            return fail(format!(
                "--arrival-rate: must be a positive number of tasks per second, got {}",
                self.arrival_rate
            ));
        }
        if self.lease < Duration::from_millis(10) {
            return fail(format!("--lease: must be at least 10ms, got {:?}", self.lease));
        }
        if self.work_min > self.work_max {
            return fail(format!(
                "--work-min ({:?}) must not exceed --work-max ({:?})",
                self.work_min, self.work_max
            ));
        }
        let mut rates = self.fault_rates().to_vec();
        rates.push(("--rate-unsafe", self.rate_unsafe));
        for (flag, rate) in rates {
            if !(0.0..=1.0).contains(&rate) {
                return fail(format!("{flag}: must be between 0 and 1, got {rate}"));
            }
        }
        let total: f64 = self.fault_rates().iter().map(|(_, r)| r).sum();
        if total > 1.0 + 1e-9 {
            return fail(format!(
                "the fault rates (--rate-slow ... --rate-empty) add up to {total:.3}; they must not exceed 1"
            ));
        }
        Ok(())
    }

    /// The lease as the runner library takes it.
    pub(crate) fn lease_chrono(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.lease).unwrap_or(chrono::Duration::MAX)
    }

    /// How long an idle worker waits before asking for work again.
    pub(crate) fn poll_interval(&self) -> Duration {
        (self.lease / 8).clamp(Duration::from_millis(20), Duration::from_millis(250))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        fleet: FleetConfig,
    }

    #[test]
    fn clap_defaults_are_the_default() {
        let parsed = Cli::try_parse_from(["demo"]).unwrap().fleet;
        assert_eq!(parsed, FleetConfig::default());
        assert!(parsed.validate().is_ok());
    }

    #[test]
    fn flags_parse_with_human_durations() {
        let c = Cli::try_parse_from([
            "demo",
            "--seed",
            "1",
            "--duration",
            "30s",
            "--lease",
            "300ms",
            "--workers",
            "3",
            "--rate-empty",
            "0.5",
            "--no-tour",
        ])
        .unwrap()
        .fleet;
        assert_eq!(
            (c.seed, c.duration, c.lease, c.workers),
            (Some(1), Some(Duration::from_secs(30)), Duration::from_millis(300), 3)
        );
        assert_eq!((c.rate_empty, c.no_tour), (0.5, true));
    }

    #[test]
    fn bad_configurations_name_the_flag() {
        let c = FleetConfig { rate_crash: 0.9, rate_empty: 0.5, ..FleetConfig::default() };
        assert!(c.validate().unwrap_err().0.contains("add up to"));
        let c = FleetConfig { rate_silent: -0.1, ..FleetConfig::default() };
        assert!(c.validate().unwrap_err().0.starts_with("--rate-silent"));
        let c = FleetConfig { workers: 0, ..FleetConfig::default() };
        assert!(c.validate().unwrap_err().0.starts_with("--workers"));
        let c = FleetConfig { arrival_rate: 0.0, ..FleetConfig::default() };
        assert!(c.validate().unwrap_err().0.starts_with("--arrival-rate"));
    }
}
