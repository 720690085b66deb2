//! Times as the pages and messages print them: a handful of fixed shapes (`03:12:05`, `03:12`,
//! `2026-11-30 03:12:05`, `+01:00`), written field by field.
//!
//! Why not chrono's `format("%H:%M:%S")`: that carries a strftime parser and a general item
//! formatter into every wasm that calls it (about 29 KB before compression, in the shell every
//! page downloads: docs/bundle-size.md), for the four shapes lastword prints. These print the
//! same text (tested against `format` below), so a page rendered by the server and hydrated by
//! the browser reads identically. A whole time in UTC (`2026-11-30 03:12:05 UTC`) is
//! `lastword_core::action::fmt_time`, everywhere.

use chrono::{DateTime, Datelike, Offset, TimeZone, Timelike};

/// `03:12:05`.
pub fn hms<Tz: TimeZone>(t: &DateTime<Tz>) -> String {
    format!("{:02}:{:02}:{:02}", t.hour(), t.minute(), t.second())
}

/// `03:12`.
pub fn hm<Tz: TimeZone>(t: &DateTime<Tz>) -> String {
    format!("{:02}:{:02}", t.hour(), t.minute())
}

/// `2026-11-30 03:12:05`.
pub fn date_hms<Tz: TimeZone>(t: &DateTime<Tz>) -> String {
    format!("{:04}-{:02}-{:02} {}", t.year(), t.month(), t.day(), hms(t))
}

/// A zone's offset from UTC at `t`: `+01:00`, `-05:30`, `+00:00`.
pub fn offset<Tz: TimeZone>(t: &DateTime<Tz>) -> String {
    let east = t.offset().fix().local_minus_utc();
    let sign = if east < 0 { '-' } else { '+' };
    let minutes = east.unsigned_abs() / 60;
    format!("{sign}{:02}:{:02}", minutes / 60, minutes % 60)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{FixedOffset, Utc};

    fn at(rfc3339: &str) -> DateTime<FixedOffset> {
        DateTime::parse_from_rfc3339(rfc3339).expect("a valid time")
    }

    #[test]
    fn each_shape_prints_what_strftime_prints() {
        for t in [
            at("2026-11-30T03:12:05.999+00:00"),
            at("0999-01-02T23:59:59-05:30"),
            at("2026-12-31T00:00:00+14:00"),
            at("2026-06-01T12:07:09.5-00:45"),
        ] {
            assert_eq!(hms(&t), t.format("%H:%M:%S").to_string());
            assert_eq!(hm(&t), t.format("%H:%M").to_string());
            assert_eq!(date_hms(&t), t.format("%Y-%m-%d %H:%M:%S").to_string());
            assert_eq!(offset(&t), t.format("%:z").to_string());
            let utc = t.with_timezone(&Utc);
            assert_eq!(date_hms(&utc), utc.format("%Y-%m-%d %H:%M:%S").to_string());
        }
    }

    #[test]
    fn offsets_carry_their_sign_and_minutes() {
        assert_eq!(offset(&at("2026-01-01T00:00:00+00:00")), "+00:00");
        assert_eq!(offset(&at("2026-01-01T00:00:00-05:30")), "-05:30");
        assert_eq!(offset(&at("2026-01-01T00:00:00+05:45")), "+05:45");
    }
}
