//! Every worker seen in a window, with the leases it holds now.

use lastword_core::WorkerSummary;
use leptos::prelude::*;

#[server(prefix = "/api/fn", endpoint = "workers", output = crate::api::JsonAnswer)]
pub async fn get_workers(window: String) -> Result<Vec<WorkerSummary>, ServerFnError> {
    let age = lastword_core::query::parse_age(&window)
        .ok_or_else(|| super::ssr::bad_input(format!("window: {window:?} is not an age like 15m or 1h")))?;
    let now = lastword_core::read_now();
    let store = super::ssr::store()?;
    store.workers(now - age, now).await.map_err(super::ssr::store_error)
}
