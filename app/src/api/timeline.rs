//! The runs drawn on the live timeline.

use chrono::{DateTime, Utc};
use lastword_core::RunListItem;
use leptos::prelude::*;

/// The longest stretch the timeline draws at once: a day, the same bound as its widest window.
pub const MAX_MINUTES: i64 = 24 * 60;

/// What the timeline draws: the runs overlapping its window, the server's `now` (so the
/// browser draws against the database's clock, not its own), and the window itself when it is
/// a fixed stretch (zoomed in) rather than the last N minutes.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TimelineData {
    pub now: DateTime<Utc>,
    pub runs: Vec<RunListItem>,
    #[serde(default)]
    pub fixed: Option<(DateTime<Utc>, DateTime<Utc>)>,
}

/// The last `minutes` up to now, or, with `from` and `to` (a zoom), that fixed stretch.
#[server(prefix = "/api/fn", endpoint = "timeline")]
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
    Ok(TimelineData { now, runs, fixed })
}
