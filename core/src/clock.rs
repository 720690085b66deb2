//! The one definition of "now" for each kind of request, so the JSON API, the server functions
//! and the CLI ask the store the same question.
//!
//! - A **write** (an operator action) records `now` to the microsecond: the precision both
//!   databases keep, so what is written reads back equal.
//! - A **read** asks as of the current whole second. Everyone who asks the same question
//!   within one second asks it identically, so the server can answer all of them from one
//!   database read (`lastword_store::SharedReads`); a state that changes with time alone (a
//!   lease lapsing) shows at most a second late.

use chrono::{DateTime, Utc};

/// `now` truncated to the microsecond (see the module header).
pub fn for_writes(now: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(now.timestamp_micros()).unwrap_or(now)
}

/// `now` truncated to the whole second (see the module header).
pub fn for_reads(now: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp(now.timestamp(), 0).unwrap_or(now)
}

/// The wall clock, for a write.
pub fn write_now() -> DateTime<Utc> {
    for_writes(Utc::now())
}

/// The wall clock, for a read.
pub fn read_now() -> DateTime<Utc> {
    for_reads(Utc::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ask_as_of_the_second_and_writes_keep_microseconds() {
        let t = DateTime::parse_from_rfc3339("2026-12-01T03:12:05.123456789Z").unwrap().with_timezone(&Utc);
        assert_eq!(for_reads(t).to_rfc3339(), "2026-12-01T03:12:05+00:00");
        assert_eq!(for_writes(t).timestamp_subsec_nanos(), 123_456_000);
        // Two requests within one second ask the same question.
        assert_eq!(for_reads(t), for_reads(t + chrono::Duration::milliseconds(800)));
        assert_ne!(for_reads(t), for_reads(t + chrono::Duration::milliseconds(900)));
    }
}
