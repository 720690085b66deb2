//! Lease health (issue 13): the figures an operator tunes a lease with, and the suggestion read
//! off them.
//!
//! Lease length is a reclaim-latency knob, not a correctness mechanism: a lease shorter than
//! the work re-claims it from live but slow workers (lost-lease completions, double
//! executions); a lease much longer than the work lets a dead worker's task wait. The store
//! computes the figures in SQL (`lastword_store::leases`, one text for both databases); this
//! module holds their shape, the percentile rule the SQL follows, and the plain-language
//! suggestion, so both are unit-tested without a database.

use crate::query::{parse_age, parse_time};
use crate::ParamError;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

/// The window `GET /api/v1/leases` and the Leases page read by default.
pub const DEFAULT_WINDOW_HOURS: i64 = 24;
/// The same, as the pages' window parameter says it.
pub const DEFAULT_WINDOW: &str = "24h";
/// The widest window the figures are computed over: each run in it costs a few index probes
/// (its re-claim reason), so a wider one is refused rather than left to the statement timeout
/// (a day of a 10 M-run history, 333 000 runs, takes about 3 s: BENCHMARKS.md).
pub const MAX_WINDOW_DAYS: i64 = 3;
/// A run, heartbeat or finish stamped this far past the database's clock is a skewed clock,
/// not a slow commit.
pub const SKEW_TOLERANCE_MS: i64 = 2_000;
/// Running runs listed with their heartbeat age, those nearest to lapsing first.
pub const HEARTBEATS_LISTED: i64 = 100;
/// The lease multiples the suggestion weighs: how many lost leases would each have avoided.
pub const LEASE_MULTIPLES: [i64; 3] = [2, 3, 4];

/// Buckets of `/metrics`' `lastword_run_duration_over_lease` and
/// `lastword_run_unheard_at_finish_over_lease`: a ratio above 1 is a run that outlived its lease
/// (or went unheard past it), so the buckets are fine around 1.
pub const LEASE_RATIO_BUCKETS: [f64; 9] = [0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.5, 2.0, 4.0];
/// Buckets of `/metrics`' `lastword_reclaim_latency_seconds`: from a lapsed lease to the
/// re-claim, a fraction of a second on a busy fleet, up to an hour on an idle one.
pub const RECLAIM_LATENCY_BUCKETS: [f64; 10] = [0.1, 0.5, 1.0, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 3600.0];

/// Which runs the figures are over.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LeaseWindow {
    /// Claims of the last this long before the moment the report is computed (so a report
    /// shared for a while is shared by everyone asking "the last 24 h").
    Last(Duration),
    /// Claims in `[since, until)`.
    Between(DateTime<Utc>, DateTime<Utc>),
}

impl LeaseWindow {
    /// The window of `since` and `until` as the API and the page take them (an RFC 3339 time or
    /// an age such as `24h`; by default the last [`DEFAULT_WINDOW_HOURS`] hours), at most
    /// [`MAX_WINDOW_DAYS`] wide. One rule for every front door.
    pub fn parse(
        since: Option<&str>,
        until: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<LeaseWindow, ParamError> {
        let since = since.map(str::trim).filter(|v| !v.is_empty());
        let until = until.map(str::trim).filter(|v| !v.is_empty());
        let window = match (since, until) {
            (None, None) => LeaseWindow::Last(Duration::hours(DEFAULT_WINDOW_HOURS)),
            (Some(age), None) if parse_age(age).is_some() => {
                LeaseWindow::Last(parse_age(age).unwrap_or_default())
            }
            (since, until) => {
                let until = until.map(|u| parse_time("until", u, now)).transpose()?.unwrap_or(now);
                let since = match since {
                    Some(s) => parse_time("since", s, now)?,
                    None => until - Duration::hours(DEFAULT_WINDOW_HOURS),
                };
                if since >= until {
                    return Err(ParamError::new("until", "must be later than since"));
                }
                LeaseWindow::Between(since, until)
            }
        };
        let (since, until) = window.bounds(now);
        if until - since > Duration::days(MAX_WINDOW_DAYS) {
            return Err(ParamError::new(
                "since",
                format!("the lease figures cover at most {MAX_WINDOW_DAYS} days; narrow the window"),
            ));
        }
        Ok(window)
    }

    pub fn bounds(&self, now: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
        match self {
            LeaseWindow::Last(age) => (now - *age, now),
            LeaseWindow::Between(since, until) => (*since, *until),
        }
    }

    /// The window as a sentence says it: "the last 24 h", "this window".
    pub fn spoken(&self) -> String {
        match self {
            LeaseWindow::Last(age) => format!("the last {}", spoken_ms(age.num_milliseconds())),
            LeaseWindow::Between(..) => "this window".to_string(),
        }
    }
}

/// A task kind to narrow the figures to: any text a runner may use, except a NUL (which
/// PostgreSQL cannot hold in text) or one longer than a kind could be.
pub fn parse_kind(value: Option<&str>) -> Result<Option<String>, ParamError> {
    match value.map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(k) if k.contains('\0') => Err(ParamError::new("kind", "contains a NUL character")),
        Some(k) if k.chars().count() > 1_000 => {
            Err(ParamError::new("kind", "is longer than 1000 characters"))
        }
        Some(k) => Ok(Some(k.to_string())),
    }
}

/// The percentile rule of every figure here, nearest rank: the smallest value at or above
/// which `pct` percent of the values lie, i.e. the value of rank ⌈pct·n/100⌉ in ascending
/// order. The SQL twin picks the smallest value whose row number `rn` has `rn·100 ≥ pct·n`,
/// which is the same rank. `sorted` must be ascending.
pub fn nearest_rank(sorted: &[i64], pct: i64) -> Option<i64> {
    let n = sorted.len() as i64;
    if n == 0 {
        return None;
    }
    let rank = (pct * n + 99) / 100; // ⌈pct·n/100⌉
    Some(sorted[(rank.max(1) - 1) as usize])
}

/// The figures of one task kind over a window of claims.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KindLeaseStats {
    pub kind: String,
    /// Runs claimed in the window.
    pub runs: i64,
    /// Of those, runs that reported an end (their duration is known).
    pub finished: i64,
    /// The lease the window's runs were granted (its median): the lease expiry minus the claim,
    /// or minus the last heartbeat for a run that heartbeat.
    pub lease_ms: Option<i64>,
    pub duration_p50_ms: Option<i64>,
    pub duration_p95_ms: Option<i64>,
    pub duration_p99_ms: Option<i64>,
    pub duration_max_ms: Option<i64>,
    /// Finished runs that finished after their lease had expired.
    pub outlived_lease: i64,
    /// Of those, runs that never heartbeat (a heartbeat would have kept their lease alive).
    pub outlived_without_heartbeat: i64,
    /// Of those, runs whose final write matched no row: another worker had re-claimed the task.
    pub lost_lease: i64,
    /// Of those, runs whose effects sit beside another epoch's effects of the same task.
    pub double_executions: i64,
    /// Lost leases whose run would have fitted in each of [`LEASE_MULTIPLES`] times its lease.
    pub lost_lease_within: Vec<LeaseFit>,
    /// Runs that re-claimed a task after the earlier run's lease lapsed (slow, stalled or dead
    /// worker; not an operator's re-queue, not a retry after a finished failure).
    pub reclaims: i64,
    pub reclaims_slow_worker: i64,
    pub reclaims_stalled_worker: i64,
    pub reclaims_dead_worker: i64,
    pub reclaims_operator_requeue: i64,
    /// From the earlier run's lease expiry to the re-claim, over [`Self::reclaims`].
    pub reclaim_latency_p50_ms: Option<i64>,
    pub reclaim_latency_p95_ms: Option<i64>,
    /// What to change, with the numbers behind it, where the figures support one.
    pub suggestion: Option<String>,
}

/// How many lost leases a lease `multiple` times longer would have avoided.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LeaseFit {
    pub multiple: i64,
    pub lost_leases: i64,
}

/// A task in a re-claim loop now (`lastword_core::attention::loop_streak`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LoopTask {
    pub task_id: i64,
    pub kind: String,
    pub lease_epoch: i64,
    /// When the streak of failed attempts began (its first claim).
    pub streak_since: Option<DateTime<Utc>>,
}

/// A worker that stamped times past the database's clock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SkewedWorker {
    pub worker: String,
    /// Its runs in the window with a claim, heartbeat or finish stamped ahead.
    pub runs: i64,
    /// The furthest ahead one of them was, against the database's clock when read.
    pub ahead_ms: i64,
}

/// A worker whose runs lost their lease in the window, told apart by what became of it: the
/// heartbeats stopped but the run finished later (alive but paused: a GC pause, an API stall),
/// or the run never finished and the worker claimed again (stalled on that run), or it never
/// finished and the worker was not seen again (dead).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WorkerLeaseHealth {
    pub worker: String,
    /// Runs that finished after losing their lease (lost-lease completions).
    pub paused: i64,
    /// Runs whose lease lapsed unfinished while the worker went on claiming.
    pub stalled: i64,
    /// Runs whose lease lapsed unfinished, the worker not seen since.
    pub dead: i64,
}

/// A running run's heartbeat against its lease.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HeartbeatHealth {
    pub run_id: i64,
    pub task_id: i64,
    pub kind: String,
    pub worker: String,
    /// Since its last heartbeat (or its claim, if it never heartbeat).
    pub heartbeat_age_ms: i64,
    /// Until its lease expires.
    pub lease_left_ms: i64,
    pub lease_ms: i64,
}

impl HeartbeatHealth {
    /// How much of its lease the run has used since it was last heard from.
    pub fn used_percent(&self) -> i64 {
        lease_used_percent(self.heartbeat_age_ms, self.lease_ms)
    }
}

/// How much of a lease `lease_ms` long a run has used `age_ms` after it was last heard from,
/// 0 to 100: the colour ramp of the Leases and task pages (amber from half, red from four
/// fifths: a runner that beats every third of its lease never leaves green).
pub fn lease_used_percent(age_ms: i64, lease_ms: i64) -> i64 {
    if lease_ms <= 0 {
        return 100;
    }
    (age_ms.max(0) * 100 / lease_ms).clamp(0, 100)
}

/// `GET /api/v1/leases` and the Leases page.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LeaseReport {
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
    /// When these figures were read: they are shared between viewers for a short while.
    pub computed_at: Option<DateTime<Utc>>,
    pub kinds: Vec<KindLeaseStats>,
    /// Tasks in a re-claim loop now (whatever the window).
    pub loops: Vec<LoopTask>,
    /// Claims since the newest re-queue that make a loop, with its newest as many attempts failed.
    pub loop_claims: i64,
    pub skewed_workers: Vec<SkewedWorker>,
    /// Workers whose runs lost their lease in the window: paused, stalled or dead.
    pub workers: Vec<WorkerLeaseHealth>,
    /// Running runs, the nearest to lapsing first (at most [`HEARTBEATS_LISTED`]).
    pub heartbeats: Vec<HeartbeatHealth>,
}

impl LeaseReport {
    /// Each kind's suggestion, as (kind, sentence), in the kinds' order.
    pub fn suggestions(&self) -> Vec<(String, String)> {
        self.kinds.iter().filter_map(|k| Some((k.kind.clone(), k.suggestion.clone()?))).collect()
    }
}

/// A duration as people say it: `850 ms`, `41 s`, `12 min`, `3.5 h`.
pub fn spoken_ms(ms: i64) -> String {
    match ms {
        ..=999 => format!("{ms} ms"),
        1_000..=119_999 => format!("{} s", (ms + 500) / 1_000),
        120_000..=3_569_999 => format!("{} min", (ms + 30_000) / 60_000),
        _ => {
            let tenths = (ms + 180_000) / 360_000;
            if tenths % 10 == 0 {
                format!("{} h", tenths / 10)
            } else {
                format!("{}.{} h", tenths / 10, tenths % 10)
            }
        }
    }
}

/// A lease worth proposing: whole seconds, rounded up to 5 s from 10 s on.
fn round_lease(ms: i64) -> i64 {
    let s = (ms + 999) / 1_000;
    let s = if s >= 10 { (s + 4) / 5 * 5 } else { s.max(1) };
    s * 1_000
}

/// What to change for `k`, in the window `window` (spoken: "the last 24 h"), or nothing when
/// the figures give no reason:
///
/// - **Leases too short**: some lost leases, and runs outlive their lease. The proposal is the
///   smallest of [`LEASE_MULTIPLES`] that keeps nine in ten of the lost leases (else the
///   largest), with a heartbeat every third of the lease when most runs that outlived it
///   never heartbeat.
/// - **Leases much too long**: no run outlived its lease, dead or stalled workers' tasks
///   waited, and the lease is over four times the p99 run and at least a minute: a lease of
///   twice the p99 would notice a dead worker sooner.
pub fn suggestion(k: &KindLeaseStats, window: &str) -> Option<String> {
    let lease = k.lease_ms.filter(|l| *l > 0)?;
    if k.lost_lease > 0 && k.outlived_lease > 0 && k.finished > 0 {
        let share = (k.outlived_lease * 100 + k.finished / 2) / k.finished;
        let share = if share == 0 { "under 1 %".to_string() } else { format!("{share} %") };
        let fit = k
            .lost_lease_within
            .iter()
            .find(|f| f.lost_leases * 10 >= k.lost_lease * 9)
            .or_else(|| k.lost_lease_within.last())?;
        let proposed = round_lease(lease * fit.multiple);
        let p95 = k.duration_p95_ms.map(|p| format!(" last {} at p95 and", spoken_ms(p))).unwrap_or_default();
        let heartbeat = if k.outlived_without_heartbeat * 2 > k.outlived_lease {
            format!(" (or a heartbeat every {})", spoken_ms(round_lease(lease / 3)))
        } else {
            String::new()
        };
        return Some(format!(
            "Runs of `{kind}`{p95} hold a {lease_s} lease: {share} of finished runs outlive it. \
             A {proposed_s} lease{heartbeat} would have avoided {fits} of the {lost} lost leases in {window}.",
            kind = k.kind,
            lease_s = spoken_ms(lease),
            proposed_s = spoken_ms(proposed),
            fits = fit.lost_leases,
            lost = k.lost_lease,
        ));
    }
    let waited = k.reclaims_dead_worker + k.reclaims_stalled_worker;
    let p99 = k.duration_p99_ms?;
    if k.outlived_lease == 0 && waited > 0 && lease >= 60_000 && lease > 4 * p99.max(1) {
        let latency = k
            .reclaim_latency_p95_ms
            .map(|l| format!(", waiting {} at p95", spoken_ms(l)))
            .unwrap_or_default();
        return Some(format!(
            "Runs of `{kind}` finish within {p99_s} at p99 but hold a {lease_s} lease: {waited} tasks of \
             stalled or dead workers were re-claimed only after it lapsed{latency} in {window}. \
             A {proposed_s} lease would notice a dead worker sooner.",
            kind = k.kind,
            p99_s = spoken_ms(p99),
            lease_s = spoken_ms(lease),
            proposed_s = spoken_ms(round_lease(p99 * 2)),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_default_to_a_day_take_ages_and_times_and_stay_within_three_days() {
        let now = DateTime::parse_from_rfc3339("2026-12-02T12:00:00Z").unwrap().with_timezone(&Utc);
        assert_eq!(LeaseWindow::parse(None, None, now), Ok(LeaseWindow::Last(Duration::hours(24))));
        assert_eq!(LeaseWindow::parse(Some("6h"), None, now), Ok(LeaseWindow::Last(Duration::hours(6))));
        assert_eq!(LeaseWindow::parse(Some(" "), Some(""), now), Ok(LeaseWindow::Last(Duration::hours(24))));
        let since = now - Duration::hours(2);
        assert_eq!(
            LeaseWindow::parse(Some("2026-12-02T10:00:00Z"), Some("1h"), now),
            Ok(LeaseWindow::Between(since, now - Duration::hours(1)))
        );
        assert_eq!(
            LeaseWindow::parse(Some("3d"), None, now).map(|w| w.bounds(now).0),
            Ok(now - Duration::days(3))
        );
        let wide = LeaseWindow::parse(Some("4d"), None, now).unwrap_err();
        assert_eq!(wide.param, "since");
        assert!(wide.message.contains("at most 3 days"), "{}", wide.message);
        assert_eq!(LeaseWindow::parse(Some("1h"), Some("2h"), now).unwrap_err().param, "until");
        assert_eq!(LeaseWindow::parse(Some("yesterday"), None, now).unwrap_err().param, "since");
        assert_eq!(LeaseWindow::Last(Duration::hours(24)).spoken(), "the last 24 h");
    }

    #[test]
    fn kinds_are_any_text_but_a_nul() {
        assert_eq!(parse_kind(None), Ok(None));
        assert_eq!(parse_kind(Some("  ")), Ok(None));
        assert_eq!(parse_kind(Some("reply & <b>")), Ok(Some("reply & <b>".into())));
        assert_eq!(parse_kind(Some("a\0b")).unwrap_err().param, "kind");
        assert_eq!(parse_kind(Some(&"k".repeat(1001))).unwrap_err().param, "kind");
    }

    #[test]
    fn nearest_rank_follows_its_definition() {
        let v: Vec<i64> = (1..=10).map(|i| i * 10).collect();
        assert_eq!(nearest_rank(&v, 50), Some(50));
        assert_eq!(nearest_rank(&v, 95), Some(100));
        assert_eq!(nearest_rank(&v, 1), Some(10));
        assert_eq!(nearest_rank(&[7], 99), Some(7));
        assert_eq!(nearest_rank(&[], 50), None);
        let three = [1, 2, 3];
        assert_eq!(nearest_rank(&three, 50), Some(2), "rank ⌈1.5⌉ = 2");
        assert_eq!(nearest_rank(&three, 34), Some(2), "rank ⌈1.02⌉ = 2");
        assert_eq!(nearest_rank(&three, 33), Some(1), "rank ⌈0.99⌉ = 1");
    }

    #[test]
    fn durations_are_spoken() {
        assert_eq!(spoken_ms(850), "850 ms");
        assert_eq!(spoken_ms(41_200), "41 s");
        assert_eq!(spoken_ms(600_000), "10 min");
        assert_eq!(spoken_ms(3 * 3_600_000), "3 h");
        assert_eq!(spoken_ms(12_600_000), "3.5 h");
    }

    fn short_lease() -> KindLeaseStats {
        KindLeaseStats {
            kind: "reply".into(),
            runs: 2_600,
            finished: 2_500,
            lease_ms: Some(30_000),
            duration_p50_ms: Some(12_000),
            duration_p95_ms: Some(41_000),
            duration_p99_ms: Some(70_000),
            duration_max_ms: Some(200_000),
            outlived_lease: 230,
            outlived_without_heartbeat: 230,
            lost_lease: 230,
            lost_lease_within: vec![
                LeaseFit { multiple: 2, lost_leases: 212 },
                LeaseFit { multiple: 3, lost_leases: 225 },
                LeaseFit { multiple: 4, lost_leases: 228 },
            ],
            reclaims: 240,
            reclaims_slow_worker: 230,
            ..Default::default()
        }
    }

    #[test]
    fn a_lease_shorter_than_the_work_gets_a_longer_one_with_its_numbers() {
        let s = suggestion(&short_lease(), "the last 24 h").expect("a suggestion");
        assert_eq!(
            s,
            "Runs of `reply` last 41 s at p95 and hold a 30 s lease: 9 % of finished runs outlive it. \
             A 60 s lease (or a heartbeat every 10 s) would have avoided 212 of the 230 lost leases in the last 24 h."
        );
    }

    #[test]
    fn the_proposal_is_the_smallest_multiple_that_keeps_nine_in_ten() {
        let mut k = short_lease();
        k.lost_lease_within[0].lost_leases = 100; // 2× keeps too few
        k.outlived_without_heartbeat = 10; // they heartbeat: no heartbeat advice
        let s = suggestion(&k, "the last 24 h").unwrap();
        assert!(s.contains("A 90 s lease would have avoided 225 of the 230"), "{s}");
        k.lost_lease_within.iter_mut().for_each(|f| f.lost_leases = 5);
        let s = suggestion(&k, "the last 24 h").unwrap();
        assert!(
            s.contains("A 2 min lease would have avoided 5 of the 230"),
            "the largest when none is enough: {s}"
        );
    }

    #[test]
    fn a_lease_far_longer_than_the_work_is_pointed_out_when_dead_workers_waited() {
        let k = KindLeaseStats {
            kind: "digest".into(),
            runs: 100,
            finished: 98,
            lease_ms: Some(600_000),
            duration_p99_ms: Some(20_000),
            reclaims_dead_worker: 2,
            reclaim_latency_p95_ms: Some(590_000),
            ..Default::default()
        };
        let s = suggestion(&k, "the last 24 h").expect("a suggestion");
        assert!(s.contains("finish within 20 s at p99 but hold a 10 min lease"), "{s}");
        assert!(s.contains("A 40 s lease would notice"), "{s}");
        assert!(s.contains("waiting 10 min at p95"), "{s}");
    }

    #[test]
    fn healthy_figures_get_no_suggestion() {
        let mut k = short_lease();
        k.lost_lease = 0;
        k.outlived_lease = 0;
        assert_eq!(suggestion(&k, "w"), None, "short enough leases, nobody waited");
        let mut k = short_lease();
        k.lease_ms = None;
        assert_eq!(suggestion(&k, "w"), None, "no lease known");
        let long = KindLeaseStats {
            lease_ms: Some(600_000),
            duration_p99_ms: Some(20_000),
            reclaims_dead_worker: 0,
            ..Default::default()
        };
        assert_eq!(suggestion(&long, "w"), None, "a long lease nobody waited on is harmless");
    }

    #[test]
    fn heartbeat_ramp_is_the_share_of_the_lease_used() {
        let h = HeartbeatHealth {
            run_id: 1,
            task_id: 1,
            kind: "k".into(),
            worker: "w".into(),
            heartbeat_age_ms: 15_000,
            lease_left_ms: 15_000,
            lease_ms: 30_000,
        };
        assert_eq!(h.used_percent(), 50);
        assert_eq!(HeartbeatHealth { heartbeat_age_ms: 90_000, ..h.clone() }.used_percent(), 100);
        assert_eq!(HeartbeatHealth { lease_ms: 0, ..h }.used_percent(), 100);
    }
}
