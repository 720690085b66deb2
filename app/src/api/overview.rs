//! What the overview page asks the server.

use lastword_core::{Overview, Totals};
use leptos::prelude::*;

/// Row totals of the contract tables.
#[server(prefix = "/api/fn", endpoint = "totals", output = crate::api::JsonAnswer)]
pub async fn get_totals() -> Result<Totals, ServerFnError> {
    let store = super::ssr::store()?;
    store.totals().await.map_err(super::ssr::store_error)
}

/// The windows the overview offers, as (URL value, label, bucket seconds).
pub const WINDOWS: [(&str, &str, i64); 4] =
    [("1h", "1 hour", 120), ("6h", "6 hours", 900), ("24h", "24 hours", 3600), ("7d", "7 days", 6 * 3600)];

/// Counts per state and cause over the window (`1h`, `6h`, `24h`, `7d`), a series for the chart,
/// and what needs attention.
#[server(prefix = "/api/fn", endpoint = "overview", output = crate::api::JsonAnswer)]
pub async fn get_overview(window: String) -> Result<Overview, ServerFnError> {
    let (_, _, bucket) = WINDOWS
        .iter()
        .find(|(w, _, _)| *w == window)
        .ok_or_else(|| super::ssr::bad_input(format!("window: unknown value {window:?}")))?;
    let age = lastword_core::query::parse_age(&window).ok_or_else(|| super::ssr::bad_input("window"))?;
    let now = lastword_core::read_now();
    let store = super::ssr::store()?;
    store
        .overview(now - age, now, chrono::Duration::seconds(*bucket), now)
        .await
        .map_err(super::ssr::store_error)
}
