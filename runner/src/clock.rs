//! Where a runner's "now" comes from. Lease arithmetic is all about time, so the tests drive a
//! [`ManualClock`] instead of sleeping; production uses [`SystemClock`].

use chrono::{DateTime, Duration, DurationRound, Utc};
use std::sync::{Arc, Mutex};

/// A source of the current time. Every timestamp the runner writes comes from here (never from
/// the database's own clock), so SQLite's text timestamps order like time and tests are exact.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> DateTime<Utc>;
}

/// The wall clock, truncated to microseconds: the precision PostgreSQL keeps, so a value read
/// back from either backend equals the one written.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        let now = Utc::now();
        now.duration_trunc(Duration::microseconds(1)).unwrap_or(now)
    }
}

/// A clock that moves only when told to. Clones share the same time, so a test can hand one to
/// several runners and advance them all at once.
#[derive(Clone, Debug)]
pub struct ManualClock {
    now: Arc<Mutex<DateTime<Utc>>>,
}

impl ManualClock {
    pub fn new(start: DateTime<Utc>) -> Self {
        ManualClock { now: Arc::new(Mutex::new(start)) }
    }

    /// Moves every clone of this clock forward (or back, for a negative duration).
    pub fn advance(&self, by: Duration) {
        let mut now = self.now.lock().expect("clock lock");
        *now += by;
    }

    pub fn set(&self, to: DateTime<Utc>) {
        *self.now.lock().expect("clock lock") = to;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock().expect("clock lock")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn manual_clock_clones_share_time() {
        let t0 = Utc.timestamp_opt(1_800_000_000, 0).unwrap();
        let a = ManualClock::new(t0);
        let b = a.clone();
        a.advance(Duration::seconds(5));
        assert_eq!(b.now(), t0 + Duration::seconds(5));
        b.set(t0);
        assert_eq!(a.now(), t0);
    }

    #[test]
    fn system_clock_keeps_microseconds() {
        let now = SystemClock.now();
        assert_eq!(now.timestamp_subsec_nanos() % 1000, 0);
    }
}
