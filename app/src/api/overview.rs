//! What the overview page asks the server.

use lastword_core::Totals;
use leptos::prelude::*;

/// Row totals of the contract tables.
#[server(prefix = "/api/fn", endpoint = "totals")]
pub async fn get_totals() -> Result<Totals, ServerFnError> {
    let store = super::ssr::store()?;
    store.totals().await.map_err(super::ssr::store_error)
}
