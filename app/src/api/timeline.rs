//! The runs drawn on the live timeline.

use chrono::{DateTime, Utc};
use lastword_core::{Cause, ReclaimReason, RunListItem, RunState};
use leptos::prelude::*;

/// The longest stretch the timeline draws at once: a day, the same bound as its widest window.
pub const MAX_MINUTES: i64 = 24 * 60;

/// One run as the timeline draws it: what a bar, a link and a tooltip need, and no more. Up to
/// 5 000 of these travel in one answer and are embedded in the page for hydration, so the
/// fields have one-letter names on the wire, times are epoch milliseconds and empty fields are
/// left out (a `RunListItem` there weighs about three times as much). The JSON API keeps the
/// full rows (`GET /api/v1/timeline`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TimelineRun {
    #[serde(rename = "i")]
    pub id: i64,
    #[serde(rename = "t")]
    pub task_id: i64,
    #[serde(rename = "w")]
    pub worker: String,
    #[serde(rename = "k")]
    pub kind: String,
    #[serde(rename = "e")]
    pub lease_epoch: i64,
    #[serde(rename = "c", with = "chrono::serde::ts_milliseconds")]
    pub claimed_at: DateTime<Utc>,
    #[serde(rename = "l", with = "chrono::serde::ts_milliseconds")]
    pub lease_expires_at: DateTime<Utc>,
    #[serde(
        rename = "f",
        with = "chrono::serde::ts_milliseconds_option",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub finished_at: Option<DateTime<Utc>>,
    /// The server's state as of the answer's `now` (an unfinished run's is redrawn with the clock).
    #[serde(rename = "s")]
    pub state: RunState,
    #[serde(rename = "x", default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<Cause>,
    #[serde(rename = "r", default, skip_serializing_if = "Option::is_none")]
    pub reclaim_reason: Option<ReclaimReason>,
    /// The output's first [`lastword_core::TIMELINE_TEXT_PREFIX`] characters.
    #[serde(rename = "o", default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The output (or the error detail) was longer than that.
    #[serde(rename = "m", default, skip_serializing_if = "std::ops::Not::not")]
    pub text_truncated: bool,
}

/// `t` as the wire carries it: whole milliseconds. The server draws the page from the value it
/// built and the browser hydrates from the one it decoded, so the two must be equal; a
/// microsecond apart, a lease can have lapsed on one side and not the other, and the page's
/// structure (a lapse tick, a silent glyph) no longer matches the server's, which stops
/// hydration.
fn on_the_wire(t: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(t.timestamp_millis()).unwrap_or(t)
}

impl From<RunListItem> for TimelineRun {
    fn from(item: RunListItem) -> Self {
        let r = item.run;
        TimelineRun {
            id: r.id,
            task_id: r.task_id,
            worker: r.worker,
            kind: item.kind,
            lease_epoch: r.lease_epoch,
            claimed_at: on_the_wire(r.claimed_at),
            lease_expires_at: on_the_wire(r.lease_expires_at),
            finished_at: r.finished_at.map(on_the_wire),
            state: r.state,
            cause: r.cause,
            reclaim_reason: r.reclaim_reason,
            output: r.output,
            text_truncated: item.text_truncated,
        }
    }
}

/// What the timeline draws: the runs overlapping its window, the server's `now` (so the
/// browser draws against the database's clock, not its own), and the window itself when it is
/// a fixed stretch (zoomed in) rather than the last N minutes.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TimelineData {
    pub now: DateTime<Utc>,
    pub runs: Vec<TimelineRun>,
    #[serde(default)]
    pub fixed: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// Where the window starts (`now` for runs read by id, which are no window).
    pub since: DateTime<Utc>,
}

/// Which answer a picture was built on: its `now`, where its window starts and whether it is a
/// fixed stretch. `now` alone is not enough: reads are as of the whole second, so a zoom, or
/// another window, answered within the same second as the picture has the same `now`.
pub type AnswerId = (DateTime<Utc>, DateTime<Utc>, Option<(DateTime<Utc>, DateTime<Utc>)>);

impl TimelineData {
    pub fn id(&self) -> AnswerId {
        (self.now, self.since, self.fixed)
    }

    /// Merges `fresh` (the runs a live batch named, read at `fresh.now`) into this answer and
    /// keeps only the runs whose bar overlaps `[since, until]` (`until` `None`: up to now), by
    /// the store's rule: claimed by `until`, and claimed, finished or (unfinished) leased to at
    /// or after `since`. A row of `fresh` replaces the run's row unless this answer was read
    /// later (a window fetched while the batch's rows were on their way is newer).
    pub fn merge(&mut self, fresh: TimelineData, since: DateTime<Utc>, until: Option<DateTime<Utc>>) {
        let newer = fresh.now >= self.now;
        let mut by_id: std::collections::HashMap<i64, TimelineRun> =
            self.runs.drain(..).map(|r| (r.id, r)).collect();
        for r in fresh.runs {
            if newer || !by_id.contains_key(&r.id) {
                by_id.insert(r.id, r);
            }
        }
        self.now = self.now.max(fresh.now);
        let overlaps = |r: &TimelineRun| {
            until.is_none_or(|u| r.claimed_at <= u)
                && (r.claimed_at >= since || r.finished_at.unwrap_or(r.lease_expires_at) >= since)
        };
        self.runs = by_id.into_values().filter(overlaps).collect();
        // The store's order: by worker, then claim.
        self.runs.sort_by(|a, b| (&a.worker, a.claimed_at, a.id).cmp(&(&b.worker, b.claimed_at, b.id)));
    }
}

/// The last `minutes` up to now, or, with `from` and `to` (a zoom), that fixed stretch.
#[server(prefix = "/api/fn", endpoint = "timeline", output = crate::api::JsonAnswer)]
pub async fn get_timeline(
    minutes: i64,
    from: Option<DateTime<Utc>>,
    to: Option<DateTime<Utc>>,
) -> Result<TimelineData, ServerFnError> {
    if !(1..=MAX_MINUTES).contains(&minutes) {
        return Err(super::ssr::bad_input(format!("minutes: between 1 and {MAX_MINUTES}")));
    }
    let now = lastword_core::read_now();
    let fixed = match (from, to) {
        (None, None) => None,
        (Some(from), Some(to)) => {
            if to <= from {
                return Err(super::ssr::bad_input("from: must be before to"));
            }
            if to - from > chrono::Duration::minutes(MAX_MINUTES) {
                return Err(super::ssr::bad_input(format!("from, to: at most {MAX_MINUTES} minutes apart")));
            }
            Some((from, to))
        }
        _ => return Err(super::ssr::bad_input("from, to: give both or neither")),
    };
    let (start, end) = fixed.unwrap_or((now - chrono::Duration::minutes(minutes), now));
    let store = super::ssr::store()?;
    let runs = store.timeline(start, end, now).await.map_err(super::ssr::store_error)?;
    Ok(TimelineData { now, runs: runs.into_iter().map(Into::into).collect(), fixed, since: start })
}

/// The runs `ids` as the timeline draws them, and the server's `now`: what the live timeline
/// merges in for the runs a batch of changes named, instead of fetching its whole window again.
#[server(prefix = "/api/fn", endpoint = "timeline_runs", output = crate::api::JsonAnswer)]
pub async fn get_timeline_runs(ids: Vec<i64>) -> Result<TimelineData, ServerFnError> {
    if ids.len() > lastword_core::TIMELINE_RUNS_CAP {
        return Err(super::ssr::bad_input(format!(
            "ids: at most {} at once; fetch the window instead",
            lastword_core::TIMELINE_RUNS_CAP
        )));
    }
    let now = lastword_core::read_now();
    let store = super::ssr::store()?;
    let runs = store.timeline_runs(&ids, now).await.map_err(super::ssr::store_error)?;
    Ok(TimelineData { now, runs: runs.into_iter().map(Into::into).collect(), fixed: None, since: now })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, TimeZone};

    fn t(s: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 3, 7, 0, 0).unwrap() + Duration::seconds(s)
    }

    fn run(id: i64, worker: &str, claimed: i64, finished: Option<i64>, lease: i64) -> TimelineRun {
        TimelineRun {
            id,
            task_id: id,
            worker: worker.into(),
            kind: "k".into(),
            lease_epoch: 1,
            claimed_at: t(claimed),
            lease_expires_at: t(lease),
            finished_at: finished.map(t),
            state: RunState::Running,
            cause: None,
            reclaim_reason: None,
            output: None,
            text_truncated: false,
        }
    }

    fn ids(d: &TimelineData) -> Vec<i64> {
        d.runs.iter().map(|r| r.id).collect()
    }

    #[test]
    fn a_batch_updates_its_runs_adds_new_ones_and_the_window_drops_what_left_it() {
        let mut shown = TimelineData {
            now: t(100),
            runs: vec![
                run(1, "b", 0, Some(10), 30),
                run(2, "a", 50, None, 110),
                run(3, "a", 60, Some(70), 90),
            ],
            fixed: None,
            since: t(0),
        };
        // At 200 s: run 2 finished, run 4 was claimed; the window is now 100..200, so run 3
        // (finished at 70) and run 1 left it.
        let fresh = TimelineData {
            now: t(200),
            runs: vec![run(2, "a", 50, Some(150), 160), run(4, "c", 190, None, 220)],
            fixed: None,
            since: t(200),
        };
        shown.merge(fresh, t(100), None);
        assert_eq!(ids(&shown), [2, 4], "sorted by worker then claim");
        assert_eq!(shown.now, t(200));
        assert_eq!(shown.runs[0].finished_at, Some(t(150)), "the finished row replaced the running one");

        // A batch read before the window it lands on (a refetch overtook it) adds only what is new.
        let stale = TimelineData {
            now: t(150),
            runs: vec![run(2, "a", 50, None, 160), run(5, "a", 140, None, 170)],
            fixed: None,
            since: t(150),
        };
        shown.merge(stale, t(100), None);
        assert_eq!(ids(&shown), [2, 5, 4]);
        assert_eq!(shown.runs[0].finished_at, Some(t(150)), "the newer row stays");
        assert_eq!(shown.now, t(200));

        // A fixed stretch keeps runs claimed after its end out.
        shown.merge(
            TimelineData { now: t(210), runs: vec![run(6, "a", 205, None, 240)], fixed: None, since: t(210) },
            t(100),
            Some(t(200)),
        );
        assert!(!ids(&shown).contains(&6));
    }
}

#[cfg(test)]
mod wire {
    use super::*;

    #[test]
    fn a_row_built_on_the_server_equals_the_one_the_browser_decodes() {
        // Times with microseconds, as the database keeps them.
        let item: RunListItem = serde_json::from_value(serde_json::json!({
            "id": 7, "task_id": 3, "worker": "w", "lease_epoch": 2,
            "claimed_at": "2026-12-03T07:21:20.652999Z",
            "lease_expires_at": "2026-12-03T07:21:50.000400Z",
            "finished_at": "2026-12-03T07:21:28.123456Z",
            "state": "failed", "cause": "timeout",
            "kind": "reply", "source": "notification", "safety": "unsafe",
        }))
        .unwrap();
        let built = TimelineRun::from(item);
        let decoded: TimelineRun = serde_json::from_str(&serde_json::to_string(&built).unwrap()).unwrap();
        assert_eq!(decoded, built);
        assert_eq!(built.lease_expires_at.to_rfc3339(), "2026-12-03T07:21:50+00:00");
    }

    #[test]
    fn a_timeline_row_is_small_on_the_wire_and_reads_back_the_same() {
        let at = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        let row = TimelineRun {
            id: 1000,
            task_id: 1000,
            worker: "worker-000".into(),
            kind: "reply".into(),
            lease_epoch: 2,
            claimed_at: at("2026-12-03T07:21:20.652Z"),
            lease_expires_at: at("2026-12-03T07:21:50.652Z"),
            finished_at: Some(at("2026-12-03T07:21:28.652Z")),
            state: RunState::Failed,
            cause: Some(Cause::Timeout),
            reclaim_reason: Some(ReclaimReason::Retry),
            output: None,
            text_truncated: false,
        };
        let json = serde_json::to_string(&row).unwrap();
        assert_eq!(serde_json::from_str::<TimelineRun>(&json).unwrap(), row);
        assert!(json.len() < 170, "{} bytes: {json}", json.len());
        assert!(!json.contains("null") && !json.contains("\"m\""), "empty fields left out: {json}");
    }
}
