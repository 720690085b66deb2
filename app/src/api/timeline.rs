//! The runs drawn on the live timeline.

use lastword_core::RunListItem;
use leptos::prelude::*;

/// What the timeline draws: the runs overlapping the last `minutes`, and the server's `now`
/// (so the browser draws against the database's clock, not its own).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TimelineData {
    pub now: chrono::DateTime<chrono::Utc>,
    pub runs: Vec<RunListItem>,
}

#[server(prefix = "/api/fn", endpoint = "timeline")]
pub async fn get_timeline(minutes: i64) -> Result<TimelineData, ServerFnError> {
    if !(1..=24 * 60).contains(&minutes) {
        return Err(ServerFnError::new("minutes: between 1 and 1440"));
    }
    let now = lastword_core::read_now();
    let store = super::ssr::store()?;
    let runs = store
        .timeline(now - chrono::Duration::minutes(minutes), now, now)
        .await
        .map_err(super::ssr::store_error)?;
    Ok(TimelineData { now, runs })
}
