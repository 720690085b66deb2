//! Lease health per task kind (issue 13), for the Leases page and the overview's panel.

use lastword_core::leases::LeaseReport;
use leptos::prelude::*;

/// `window` is an age (`24h`); `kind` narrows to one task kind when not empty. The report is
/// shared between viewers for a short while (`computed_at` says when it was read).
#[server(prefix = "/api/fn", endpoint = "leases", output = crate::api::JsonAnswer)]
pub async fn get_leases(window: String, kind: String) -> Result<LeaseReport, ServerFnError> {
    use lastword_core::leases::{parse_kind, LeaseWindow};
    let now = lastword_core::read_now();
    let window =
        LeaseWindow::parse(Some(&window), None, now).map_err(|e| super::ssr::bad_input(e.to_string()))?;
    let kind = parse_kind(Some(&kind)).map_err(|e| super::ssr::bad_input(e.to_string()))?;
    let store = super::ssr::store()?;
    let reports = use_context::<lastword_store::leases::LeaseReports>()
        .ok_or_else(|| ServerFnError::new("server misconfigured: no lease reports in context"))?;
    reports
        .get(store.db(), store.tokens(), kind.as_deref(), window, now)
        .await
        .map_err(super::ssr::store_error)
}

/// The day's figures of every kind if the server has them at hand (they may be up to a few
/// minutes old: `computed_at`), else `None` while it computes them: for the overview's panel,
/// which must not wait on a computation.
#[server(prefix = "/api/fn", endpoint = "leases_at_hand", output = crate::api::JsonAnswer)]
pub async fn get_leases_at_hand() -> Result<Option<LeaseReport>, ServerFnError> {
    use lastword_core::leases::{LeaseWindow, DEFAULT_WINDOW_HOURS};
    let store = super::ssr::store()?;
    let reports = use_context::<lastword_store::leases::LeaseReports>()
        .ok_or_else(|| ServerFnError::new("server misconfigured: no lease reports in context"))?;
    let window = LeaseWindow::Last(chrono::Duration::hours(DEFAULT_WINDOW_HOURS));
    Ok(reports.at_hand(store.db(), store.tokens(), None, window).await)
}
