//! What the dashboard and the JSON API can ask about runs: filters, windows and keyset pages,
//! parsed from (and written back to) URL query strings. Shared by the server and the browser,
//! so a filter round-trips through the URL exactly: a link pasted into chat opens the same view.

use crate::model::Source;
use crate::reclaim::ReclaimReason;
use crate::state::{Cause, RunState};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A bad query parameter: 400 with a message naming it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ParamError {
    pub param: String,
    pub message: String,
}

impl ParamError {
    pub fn new(param: &str, message: impl Into<String>) -> Self {
        ParamError { param: param.to_string(), message: message.into() }
    }
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.param, self.message)
    }
}

impl std::error::Error for ParamError {}

/// Which runs. Every field narrows; an empty filter is every run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunFilter {
    /// Any of these states (empty: any).
    pub states: Vec<RunState>,
    /// Any of these failure causes (empty: any). Combined with `states` by AND.
    pub causes: Vec<Cause>,
    /// Runs that re-claimed their task for any of these reasons (empty: any claim).
    #[serde(default)]
    pub reclaims: Vec<ReclaimReason>,
    pub worker: Option<String>,
    pub kind: Option<String>,
    pub source: Option<Source>,
    pub task_id: Option<i64>,
    /// Claimed at or after.
    pub since: Option<DateTime<Utc>>,
    /// Claimed before.
    pub until: Option<DateTime<Utc>>,
    /// Case-insensitive substring of output, error or error detail.
    pub q: Option<String>,
}

impl RunFilter {
    /// As the failures page lists: with no state and no cause, every failure state (a bare
    /// `since=1h` or `worker=w1` never means healthy runs too). The one place this rule lives:
    /// the failures page, its bulk re-queue, the API's bulk re-queue and the CLI's `--filter`
    /// all come through here.
    pub fn failures_unless_narrowed(mut self) -> RunFilter {
        // A re-claim reason does not narrow to healthy runs: "re-queue all matching" with only
        // `reclaim=slow_worker` must not re-run tasks whose re-claiming run succeeded.
        if self.states.is_empty() && self.causes.is_empty() {
            self.states = RunState::failures();
        }
        self
    }
}

/// The run filter of a bulk re-queue (page, API and CLI alike): the run query's filter with
/// [`RunFilter::failures_unless_narrowed`], paging (`after`, `limit`, which the failures page's
/// URL carries) ignored since the action covers every matching task, not one page.
/// `route_params` as for [`parse_run_filter`].
pub fn parse_bulk_filter(
    pairs: &[(String, String)],
    now: DateTime<Utc>,
    route_params: &[&str],
) -> Result<RunFilter, ParamError> {
    let unpaged: Vec<(String, String)> =
        pairs.iter().filter(|(k, _)| !PAGE_PARAMS.contains(&k.as_str())).cloned().collect();
    Ok(parse_run_filter(&unpaged, now, route_params)?.failures_unless_narrowed())
}

/// A position in the newest-first run list: the last row of the previous page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Cursor {
    pub claimed_at: DateTime<Utc>,
    pub id: i64,
}

impl Cursor {
    /// Opaque to clients: `<claimed_at in µs since the epoch>_<id>`.
    pub fn encode(&self) -> String {
        format!("{}_{}", self.claimed_at.timestamp_micros(), self.id)
    }

    pub fn decode(s: &str) -> Result<Cursor, ParamError> {
        let bad = || ParamError::new("after", "not a cursor from a previous page's \"next\"");
        let (micros, id) = s.split_once('_').ok_or_else(bad)?;
        let micros: i64 = micros.parse().map_err(|_| bad())?;
        let id: i64 = id.parse().map_err(|_| bad())?;
        let claimed_at = DateTime::from_timestamp_micros(micros).ok_or_else(bad)?;
        Ok(Cursor { claimed_at, id })
    }
}

pub const DEFAULT_LIMIT: u32 = 50;
pub const MAX_LIMIT: u32 = 500;

/// One page of a keyset-paginated list (newest first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PageRequest {
    pub limit: u32,
    pub after: Option<Cursor>,
}

impl Default for PageRequest {
    fn default() -> Self {
        PageRequest { limit: DEFAULT_LIMIT, after: None }
    }
}

/// Parses `2026-11-30T03:00:00Z` (RFC 3339) or a relative age like `15m`, `6h`, `7d` (= now − age).
pub fn parse_time(param: &str, value: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, ParamError> {
    if let Ok(t) = DateTime::parse_from_rfc3339(value) {
        // Bounded like ages: a request reaches back at most MAX_AGE_DAYS, so a time of 1970
        // cannot make a count scan all of history (nor a time in year 9999 overflow a window).
        let t = t.with_timezone(&Utc);
        let (earliest, latest) = (now - Duration::days(MAX_AGE_DAYS), now + Duration::days(1));
        if t < earliest || t > latest {
            return Err(ParamError::new(
                param,
                format!("{value:?} is more than {MAX_AGE_DAYS} days back or a day ahead; narrow the window"),
            ));
        }
        return Ok(t);
    }
    parse_age(value).map(|age| now - age).ok_or_else(|| {
        ParamError::new(param, format!("{value:?} is neither an RFC 3339 time nor an age like 15m, 6h, 7d"))
    })
}

/// `30s`, `15m`, `6h`, `7d` → a duration.
pub fn parse_age(value: &str) -> Option<Duration> {
    let value = value.trim();
    let split = value.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = value.split_at(split);
    let n: i64 = n.parse().ok()?;
    let seconds = match unit {
        "s" => n,
        "m" => n.checked_mul(60)?,
        "h" => n.checked_mul(3600)?,
        "d" => n.checked_mul(86_400)?,
        _ => return None,
    };
    (seconds > 0 && seconds <= MAX_AGE_DAYS * 86_400).then(|| Duration::seconds(seconds))
}

/// The longest a time parameter reaches back, as an age (`366d`) or an absolute time.
pub const MAX_AGE_DAYS: i64 = 366;

fn list<T>(param: &str, value: &str, into: &mut Vec<T>) -> Result<(), ParamError>
where
    T: std::str::FromStr<Err = crate::state::UnknownValue> + PartialEq,
{
    for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let parsed = part.parse::<T>().map_err(|e| ParamError::new(param, e.message))?;
        if !into.contains(&parsed) {
            into.push(parsed);
        }
    }
    Ok(())
}

/// Refuses a text value holding a NUL character: no runner writes one (PostgreSQL's text type
/// cannot hold it, so such a filter could only fail there, and would match nothing anywhere).
pub fn refuse_nul(param: &str, value: &str) -> Result<(), ParamError> {
    if value.contains('\0') {
        return Err(ParamError::new(param, "must not contain a NUL character"));
    }
    Ok(())
}

fn text(value: &str) -> Option<String> {
    let v = value.trim();
    (!v.is_empty()).then(|| v.to_string())
}

/// A URL query string (`a=1&b=2`, with or without the leading `?`) as percent-decoded
/// (name, value) pairs, in order: how every door (the JSON API, the server functions, the CLI's
/// `--filter`) reads one. Never fails: a stray `%` is kept literally, and each parameter's own
/// parser judges the value.
pub fn query_pairs(query: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(query.trim_start_matches('?').as_bytes()).into_owned().collect()
}

/// The run filter's parameters, in the order an "unknown parameter" message lists them.
pub const RUN_FILTER_PARAMS: [&str; 10] =
    ["state", "cause", "reclaim", "worker", "kind", "source", "task", "since", "until", "q"];
/// A keyset page's parameters.
pub const PAGE_PARAMS: [&str; 2] = ["limit", "after"];

/// Parses the run-list query string: the filter ([`RUN_FILTER_PARAMS`]) and the page
/// ([`PAGE_PARAMS`]). `state` and `cause` take comma-separated values and may repeat. Unknown
/// parameters are refused, so a typo does not silently widen a filter.
pub fn parse_run_query(
    pairs: &[(String, String)],
    now: DateTime<Utc>,
) -> Result<(RunFilter, PageRequest), ParamError> {
    parse_run_params(pairs, now, true, &[])
}

/// A run filter without paging, for a route that reads one beside parameters of its own: the
/// caller has taken those out of `pairs`, and `route_params` names them when another parameter
/// is unknown, so the message lists exactly what the route accepts.
pub fn parse_run_filter(
    pairs: &[(String, String)],
    now: DateTime<Utc>,
    route_params: &[&str],
) -> Result<RunFilter, ParamError> {
    Ok(parse_run_params(pairs, now, false, route_params)?.0)
}

fn parse_run_params(
    pairs: &[(String, String)],
    now: DateTime<Utc>,
    paged: bool,
    route_params: &[&str],
) -> Result<(RunFilter, PageRequest), ParamError> {
    let mut filter = RunFilter::default();
    let mut page = PageRequest::default();
    for (key, value) in pairs {
        refuse_nul(key, value)?;
        match key.as_str() {
            "state" => list(key, value, &mut filter.states)?,
            "cause" => list(key, value, &mut filter.causes)?,
            "reclaim" => list(key, value, &mut filter.reclaims)?,
            "worker" => filter.worker = text(value),
            "kind" => filter.kind = text(value),
            "source" => {
                filter.source = match text(value) {
                    None => None,
                    Some(v) => Some(v.parse::<Source>().map_err(|e| ParamError::new("source", e.message))?),
                }
            }
            "task" => {
                filter.task_id = match text(value) {
                    None => None,
                    Some(v) => Some(
                        v.parse::<i64>()
                            .map_err(|_| ParamError::new("task", format!("{v:?} is not a task id")))?,
                    ),
                }
            }
            "since" => filter.since = text(value).map(|v| parse_time("since", &v, now)).transpose()?,
            "until" => filter.until = text(value).map(|v| parse_time("until", &v, now)).transpose()?,
            "q" => {
                filter.q = text(value);
                if filter.q.as_ref().is_some_and(|q| q.len() > 200) {
                    return Err(ParamError::new("q", "at most 200 characters"));
                }
            }
            "limit" if paged => {
                let limit: u32 = value
                    .trim()
                    .parse()
                    .map_err(|_| ParamError::new("limit", format!("{value:?} is not a whole number")))?;
                if !(1..=MAX_LIMIT).contains(&limit) {
                    return Err(ParamError::new("limit", format!("must be between 1 and {MAX_LIMIT}")));
                }
                page.limit = limit;
            }
            "after" if paged => page.after = text(value).map(|v| Cursor::decode(&v)).transpose()?,
            other => {
                let paging: &[&str] = if paged { &PAGE_PARAMS } else { &[] };
                let expected: Vec<&str> =
                    RUN_FILTER_PARAMS.iter().chain(paging).chain(route_params).copied().collect();
                return Err(ParamError::new(
                    other,
                    format!("unknown parameter; expected {}", expected.join(", ")),
                ));
            }
        }
    }
    if let (Some(s), Some(u)) = (filter.since, filter.until) {
        if s >= u {
            return Err(ParamError::new("until", "must be later than since"));
        }
    }
    Ok((filter, page))
}

/// The query string for a filter (and page), in a stable order; times as RFC 3339.
pub fn run_query_string(filter: &RunFilter, page: Option<&PageRequest>) -> String {
    let mut parts: Vec<(&str, String)> = Vec::new();
    if !filter.states.is_empty() {
        parts.push(("state", filter.states.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(",")));
    }
    if !filter.causes.is_empty() {
        parts.push(("cause", filter.causes.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(",")));
    }
    if !filter.reclaims.is_empty() {
        parts.push(("reclaim", filter.reclaims.iter().map(|r| r.as_str()).collect::<Vec<_>>().join(",")));
    }
    if let Some(w) = &filter.worker {
        parts.push(("worker", w.clone()));
    }
    if let Some(k) = &filter.kind {
        parts.push(("kind", k.clone()));
    }
    if let Some(s) = filter.source {
        parts.push(("source", s.as_str().to_string()));
    }
    if let Some(t) = filter.task_id {
        parts.push(("task", t.to_string()));
    }
    if let Some(s) = filter.since {
        parts.push(("since", s.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)));
    }
    if let Some(u) = filter.until {
        parts.push(("until", u.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)));
    }
    if let Some(q) = &filter.q {
        parts.push(("q", q.clone()));
    }
    if let Some(p) = page {
        if p.limit != DEFAULT_LIMIT {
            parts.push(("limit", p.limit.to_string()));
        }
        if let Some(a) = p.after {
            parts.push(("after", a.encode()));
        }
    }
    parts.iter().map(|(k, v)| format!("{k}={}", encode_component(v))).collect::<Vec<_>>().join("&")
}

/// Percent-encodes a query value (RFC 3986 unreserved characters pass through).
pub fn encode_component(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b',' | b':' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 30, 3, 0, 0).unwrap()
    }

    fn pairs(q: &[(&str, &str)]) -> Vec<(String, String)> {
        q.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn parses_every_parameter() {
        let (f, p) = parse_run_query(
            &pairs(&[
                ("cause", "lost_lease,timeout"),
                ("cause", "silent"),
                ("state", "failed"),
                ("reclaim", "dead_worker,stalled_worker"),
                ("worker", "worker-7"),
                ("kind", "reply"),
                ("source", "tick"),
                ("task", "42"),
                ("since", "1h"),
                ("until", "2026-11-30T03:00:00Z"),
                ("q", " rate limit "),
                ("limit", "10"),
                ("after", "1800000000000000_17"),
            ]),
            now(),
        )
        .unwrap();
        assert_eq!(f.causes, vec![Cause::LostLease, Cause::Timeout, Cause::Silent]);
        assert_eq!(f.states, vec![RunState::Failed]);
        assert_eq!(f.reclaims, vec![ReclaimReason::DeadWorker, ReclaimReason::StalledWorker]);
        assert_eq!(f.worker.as_deref(), Some("worker-7"));
        assert_eq!(f.source, Some(Source::Tick));
        assert_eq!(f.task_id, Some(42));
        assert_eq!(f.since, Some(now() - Duration::hours(1)));
        assert_eq!(f.until, Some(now()));
        assert_eq!(f.q.as_deref(), Some("rate limit"));
        assert_eq!(p.limit, 10);
        assert_eq!(p.after.unwrap().id, 17);
    }

    #[test]
    fn bad_parameters_name_themselves() {
        for (q, param) in [
            (vec![("cause", "melted")], "cause"),
            (vec![("reclaim", "lazy_worker")], "reclaim"),
            (vec![("state", "done")], "state"),
            (vec![("limit", "0")], "limit"),
            (vec![("limit", "x")], "limit"),
            (vec![("limit", "501")], "limit"),
            (vec![("since", "yesterday")], "since"),
            (vec![("after", "nope")], "after"),
            (vec![("source", "email")], "source"),
            (vec![("task", "1.5")], "task"),
            (vec![("colour", "red")], "colour"),
            (vec![("since", "1h"), ("until", "2h")], "until"),
        ] {
            let err = parse_run_query(&pairs(&q), now()).unwrap_err();
            assert_eq!(err.param, param, "{q:?} → {err}");
            assert!(!err.message.is_empty());
        }
    }

    #[test]
    fn absolute_times_are_bounded_like_ages() {
        let ok = parse_time("since", "2026-01-01T00:00:00Z", now()).unwrap();
        assert_eq!(ok, Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap());
        for far in
            ["1970-01-01T00:00:00Z", "2025-11-28T00:00:00Z", "9999-12-31T23:59:59Z", "2026-12-02T03:00:01Z"]
        {
            let err = parse_time("since", far, now()).unwrap_err();
            assert_eq!(err.param, "since", "{far}");
            assert!(err.message.contains("366 days"), "{far}: {err}");
        }
        assert!(parse_age("366d").is_some() && parse_age("367d").is_none());
    }

    #[test]
    fn a_bulk_filter_is_failures_only_unless_a_state_or_cause_narrows_it() {
        let bulk = |q: &[(&str, &str)]| parse_bulk_filter(&pairs(q), now(), &[]).unwrap();
        assert_eq!(bulk(&[("since", "1h")]).states, RunState::failures());
        assert_eq!(bulk(&[]).states, RunState::failures());
        assert_eq!(bulk(&[("state", "acted")]).states, vec![RunState::Acted]);
        let by_cause = bulk(&[("cause", "timeout")]);
        assert_eq!((by_cause.states, by_cause.causes), (vec![], vec![Cause::Timeout]));
        // Paging is not part of what a bulk action covers.
        assert_eq!(bulk(&[("limit", "1"), ("after", "x")]), bulk(&[]));
        assert!(parse_bulk_filter(&pairs(&[("cause", "melted")]), now(), &[]).is_err());
        // A worker named like a query string, encoded as links encode it, stays one value.
        let sly = "w&state=acted";
        let link = format!("worker={}", encode_component(sly));
        let decoded: Vec<(String, String)> =
            url_pairs(&link).into_iter().map(|(k, v)| (k, percent_decode(&v))).collect();
        let f = parse_bulk_filter(&decoded, now(), &[]).unwrap();
        assert_eq!((f.worker.as_deref(), f.states), (Some(sly), RunState::failures()));
    }

    #[test]
    fn an_unknown_parameter_is_answered_with_exactly_what_the_route_accepts() {
        let message = |r: Result<(), ParamError>| r.unwrap_err().message;
        let listed = |m: String| m.split_once("expected ").unwrap().1.to_string();
        let paged = message(parse_run_query(&pairs(&[("zz", "1")]), now()).map(|_| ()));
        assert_eq!(
            listed(paged),
            "state, cause, reclaim, worker, kind, source, task, since, until, q, limit, after"
        );
        // Without paging, `limit` is as unknown as a typo, and the route's own names are listed.
        let export = parse_run_filter(&pairs(&[("limit", "5")]), now(), &["format", "max"]).unwrap_err();
        assert_eq!(export.param, "limit");
        assert_eq!(
            listed(export.message),
            "state, cause, reclaim, worker, kind, source, task, since, until, q, format, max"
        );
        // A bulk filter ignores the page's paging but still names only what it takes.
        let bulk = |q: &[(&str, &str)]| parse_bulk_filter(&pairs(q), now(), &["fence"]).map(|_| ());
        assert!(bulk(&[("limit", "5"), ("after", "1_2")]).is_ok());
        assert_eq!(
            listed(message(bulk(&[("zz", "1")]))),
            "state, cause, reclaim, worker, kind, source, task, since, until, q, fence"
        );
    }

    fn url_pairs(qs: &str) -> Vec<(String, String)> {
        qs.split('&')
            .map(|kv| kv.split_once('=').unwrap())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn filters_round_trip_through_the_query_string() {
        let (f, p) = parse_run_query(
            &pairs(&[
                ("cause", "empty_output,lost_lease"),
                ("reclaim", "slow_worker"),
                ("worker", "w 1&2"),
                ("q", "50% off"),
                ("since", "2026-11-29T03:00:00Z"),
                ("limit", "20"),
                ("after", "1800000000000000_5"),
            ]),
            now(),
        )
        .unwrap();
        let qs = run_query_string(&f, Some(&p));
        let decoded: Vec<(String, String)> = qs
            .split('&')
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap();
                (k.to_string(), percent_decode(v))
            })
            .collect();
        assert_eq!(parse_run_query(&decoded, now()).unwrap(), (f, p));
    }

    fn percent_decode(s: &str) -> String {
        let bytes = s.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' {
                out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
                i += 3;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn ages() {
        assert_eq!(parse_age("15m"), Some(Duration::minutes(15)));
        assert_eq!(parse_age("7d"), Some(Duration::days(7)));
        assert_eq!(parse_age("0h"), None);
        assert_eq!(parse_age("h"), None);
        assert_eq!(parse_age("5w"), None);
    }
}
