//! The knobs a fleet sets once: how long a lease lasts and which words mean "nothing to do".

use chrono::Duration;
use lastword_core::Tokens;

/// How a [`Runner`](crate::Runner) claims and finishes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunnerConfig {
    /// How long a claim or heartbeat holds the task. A run that outlives it without a heartbeat
    /// can be re-claimed by another worker, and its own final write is then rejected.
    pub lease: Duration,
    /// The outputs written for [`Outcome::NoActionNeeded`](crate::Outcome::NoActionNeeded) and
    /// [`Outcome::Skip`](crate::Outcome::Skip). Must match the dashboard's tokens.
    pub tokens: Tokens,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        RunnerConfig { lease: Duration::seconds(30), tokens: Tokens::default() }
    }
}
