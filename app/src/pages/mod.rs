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

/// Like [`live_version`], but bumps only for a batch of changes that `concerns` the page: the
/// task page need not refetch for every other task's heartbeat. A reset concerns everyone
/// (`LiveBatch::touches_*` say so).
pub fn live_version_where(
    concerns: impl Fn(&crate::live::LiveBatch) -> bool + Send + Sync + 'static,
) -> Signal<u64> {
    match use_context::<crate::live::LiveFeed>() {
        Some(feed) => Memo::new(move |prev: Option<&u64>| {
            // Tracked: recomputed on every bump; the batch behind it is set before the bump.
            feed.last_change.track();
            match prev {
                None => 0,
                Some(prev) if feed.last_batch.with_untracked(|b| concerns(b)) => prev + 1,
                Some(prev) => *prev,
            }
        })
        .into(),
        None => Signal::stored(0),
    }
}

/// A server function's error as a page-level alert.
pub fn error_view(what: &'static str, e: ServerFnError) -> AnyView {
    view! { <p class="banner banner-error" role="alert">{format!("Could not load {what}: {e}")}</p> }
        .into_any()
}
