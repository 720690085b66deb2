//! Sign-in attempts are limited, because each one is an argon2 check that is slow and large on
//! purpose (tens of milliseconds and about 19 MiB): without limits one client can guess
//! passwords as fast as the server hashes, and a few hundred attempts at once exhaust memory.
//!
//! Three limits, checked in this order before any hashing:
//! - **per source address** (the TCP peer): one client guessing many names;
//! - **per user name**: many clients guessing one person's password (this can lock that person
//!   out for a minute, which is the price every per-account limit pays);
//! - **hash checks in flight**, across the whole process: a bounded number run at once, and an
//!   attempt that cannot start within a short wait is turned away rather than queued forever.
//!
//! Each refusal is `429 Too Many Requests` with `Retry-After` (seconds). The rate limits are
//! `governor`'s keyed GCRA limiters; their key tables are trimmed when they grow, so random
//! user names cannot grow memory without bound.

use axum::http::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How many attempts, how fast, and how many hash checks at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoginLimits {
    /// Attempts a source may make at once before it must wait…
    pub per_source_burst: u32,
    /// …and then one more per this interval.
    pub per_source_every: Duration,
    /// Attempts on one user name at once, then one per `per_user_every`.
    pub per_user_burst: u32,
    pub per_user_every: Duration,
    /// argon2 checks running at the same time, across all sources.
    pub concurrent_checks: usize,
    /// How long an attempt waits for a free check before it is refused.
    pub check_wait: Duration,
}

impl Default for LoginLimits {
    /// 20 attempts per source then one every 3 s (a proxy in front counts as one source, so
    /// this is sized for an office behind it); 5 per user name then one every 12 s; 4 checks at
    /// once (about 76 MiB) on a 2-core machine, waiting at most 2 s for one.
    fn default() -> Self {
        LoginLimits {
            per_source_burst: 20,
            per_source_every: Duration::from_secs(3),
            per_user_burst: 5,
            per_user_every: Duration::from_secs(12),
            concurrent_checks: 4,
            check_wait: Duration::from_secs(2),
        }
    }
}

/// Why an attempt was turned away before its password was checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Throttled {
    /// Too many attempts from this address or on this name; try again after the duration.
    TooMany(Duration),
    /// Every hash check is busy (a flood in progress).
    Busy,
}

impl Throttled {
    /// Whole seconds to wait, at least one.
    pub fn retry_after_secs(&self) -> u64 {
        match self {
            Throttled::TooMany(wait) => wait.as_secs_f64().ceil().max(1.0) as u64,
            Throttled::Busy => 1,
        }
    }
}

impl IntoResponse for Throttled {
    fn into_response(self) -> Response {
        let secs = self.retry_after_secs();
        let why = match self {
            Throttled::TooMany(_) => "Too many sign-in attempts",
            Throttled::Busy => "The server is busy checking other sign-ins",
        };
        let body = format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <title>lastword — try again shortly</title></head><body>\
             <p role=\"alert\" data-testid=\"login-throttled\">{why}. Try again in {secs} s.</p>\
             <p><a href=\"/login\">Back to sign in</a></p></body></html>\n"
        );
        let mut response = (StatusCode::TOO_MANY_REQUESTS, body).into_response();
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
        headers.insert(RETRY_AFTER, HeaderValue::from(secs));
        response
    }
}

/// Key tables larger than this are trimmed of keys whose limit has fully recovered.
const TRIM_ABOVE: usize = 10_000;
/// User names are compared by at most this many characters (a key is never huge).
const NAME_KEY_CHARS: usize = 128;

/// The limits of one server process.
pub struct LoginThrottle {
    limits: LoginLimits,
    by_source: DefaultKeyedRateLimiter<IpAddr>,
    by_user: DefaultKeyedRateLimiter<String>,
    checks: Arc<Semaphore>,
}

impl std::fmt::Debug for LoginThrottle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginThrottle").field("limits", &self.limits).finish_non_exhaustive()
    }
}

fn quota(burst: u32, every: Duration) -> Quota {
    let burst = NonZeroU32::new(burst.max(1)).expect("at least one");
    Quota::with_period(every.max(Duration::from_millis(1))).expect("a positive period").allow_burst(burst)
}

impl LoginThrottle {
    pub fn new(limits: LoginLimits) -> LoginThrottle {
        LoginThrottle {
            limits,
            by_source: RateLimiter::keyed(quota(limits.per_source_burst, limits.per_source_every)),
            by_user: RateLimiter::keyed(quota(limits.per_user_burst, limits.per_user_every)),
            checks: Arc::new(Semaphore::new(limits.concurrent_checks.max(1))),
        }
    }

    /// Counts an attempt by `source` on `name`; refuses it if either is over its limit.
    pub fn admit(&self, source: Option<IpAddr>, name: &str) -> Result<(), Throttled> {
        let now = DefaultClock::default().now();
        // Unknown peers (never on a real listener) share one key, so they are limited too.
        let source = source.map(|ip| ip.to_canonical()).unwrap_or(IpAddr::from([0, 0, 0, 0]));
        self.by_source.check_key(&source).map_err(|until| Throttled::TooMany(until.wait_time_from(now)))?;
        let name: String = name.chars().take(NAME_KEY_CHARS).collect::<String>().to_lowercase();
        self.by_user.check_key(&name).map_err(|until| Throttled::TooMany(until.wait_time_from(now)))?;
        if self.by_source.len() > TRIM_ABOVE || self.by_user.len() > TRIM_ABOVE {
            self.by_source.retain_recent();
            self.by_user.retain_recent();
        }
        Ok(())
    }

    /// A slot to run one hash check in, waiting at most `check_wait` for it.
    pub async fn check_slot(&self) -> Result<OwnedSemaphorePermit, Throttled> {
        match tokio::time::timeout(self.limits.check_wait, self.checks.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(Throttled::Busy),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn each_source_and_each_name_has_its_own_budget() {
        let throttle = LoginThrottle::new(LoginLimits {
            per_source_burst: 3,
            per_source_every: Duration::from_secs(60),
            per_user_burst: 2,
            per_user_every: Duration::from_secs(30),
            ..LoginLimits::default()
        });
        assert_eq!(throttle.admit(ip("10.0.0.1"), "alice"), Ok(()));
        assert_eq!(throttle.admit(ip("10.0.0.2"), "Alice"), Ok(()), "names compare case-blind");
        let refused = throttle.admit(ip("10.0.0.3"), "alice").unwrap_err();
        assert!(matches!(refused, Throttled::TooMany(wait) if wait > Duration::from_secs(20)), "{refused:?}");
        assert_eq!(refused.retry_after_secs(), 30);
        // Another name from a source with budget left is fine; the source then runs out.
        assert_eq!(throttle.admit(ip("10.0.0.1"), "bob"), Ok(()));
        assert_eq!(throttle.admit(ip("10.0.0.1"), "carol"), Ok(()));
        assert!(matches!(throttle.admit(ip("10.0.0.1"), "dave"), Err(Throttled::TooMany(_))));
        // IPv4-mapped IPv6 is the same source.
        assert!(matches!(throttle.admit(ip("::ffff:10.0.0.1"), "erin"), Err(Throttled::TooMany(_))));
    }

    #[tokio::test]
    async fn hash_checks_beyond_the_bound_wait_then_are_refused() {
        let throttle = LoginThrottle::new(LoginLimits {
            concurrent_checks: 2,
            check_wait: Duration::from_millis(20),
            ..LoginLimits::default()
        });
        let first = throttle.check_slot().await.unwrap();
        let _second = throttle.check_slot().await.unwrap();
        assert_eq!(throttle.check_slot().await.unwrap_err(), Throttled::Busy);
        drop(first);
        assert!(throttle.check_slot().await.is_ok(), "a freed slot is taken again");
    }

    #[test]
    fn the_refusal_says_when_to_come_back() {
        let response = Throttled::TooMany(Duration::from_millis(2_100)).into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[RETRY_AFTER], "3");
        assert_eq!(Throttled::Busy.into_response().headers()[RETRY_AFTER], "1");
    }
}
