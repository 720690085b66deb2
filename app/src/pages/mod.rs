//! One route component per file; the only place that creates Resources and Actions (besides
//! the header's who-am-I, `components::layout`).

pub mod audit;
pub mod failures;
pub mod login;
pub mod overview;
pub mod task;
pub mod timeline;
pub mod workers;

use leptos::prelude::*;

/// Bumps whenever the live feed reports a change: pages add it to their resources' sources
/// so they refetch without a reload. Zero (never changes) on the server and before hydration.
pub fn live_version() -> Signal<u64> {
    match use_context::<crate::live::LiveFeed>() {
        Some(feed) => feed.last_change.into(),
        None => Signal::stored(0),
    }
}

/// A server function's error as a page-level alert.
pub fn error_view(what: &'static str, e: ServerFnError) -> AnyView {
    view! { <p class="banner banner-error" role="alert">{format!("Could not load {what}: {e}")}</p> }
        .into_any()
}
