//! What the server was configured with that pages need to draw: the trace links
//! (`--trace-url-template`) and the retry policy (`--deterministic-causes`). One server function, read once per page load in the layout
//! (server-rendered; the browser reuses the value), shared with pages through context.

use lastword_core::{RetryPolicy, TraceLinks};
use leptos::prelude::*;

/// The server's configuration as pages see it.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SiteSettings {
    /// How a run's trace id becomes a link; `None` when no template is configured (the id is
    /// then shown as text, to copy).
    pub trace_links: Option<TraceLinks>,
    /// Which failure causes a re-queue cannot fix: the task page warns before submitting.
    #[serde(default)]
    pub retry: RetryPolicy,
}

/// The settings the server put in context for every request.
#[server(prefix = "/api/fn", endpoint = "site_settings", output = crate::api::JsonAnswer)]
pub async fn get_site_settings() -> Result<SiteSettings, ServerFnError> {
    Ok(use_context::<SiteSettings>().unwrap_or_default())
}

/// The layout's settings resource, shared with the pages through context.
#[derive(Clone, Copy)]
pub struct Site(pub Resource<Result<SiteSettings, ServerFnError>>);

/// Starts the settings read and provides it (the layout calls this once).
pub fn provide_site_settings() {
    provide_context(Site(Resource::new(|| (), |_| get_site_settings())));
}

/// The trace links in force, for a page to hand to its components. Read it inside a
/// `Transition` (the page's own).
pub fn use_trace_links() -> Signal<Option<TraceLinks>> {
    let site = use_context::<Site>();
    Signal::derive(move || site.and_then(|s| s.0.get()).and_then(Result::ok).and_then(|s| s.trace_links))
}

/// The retry policy in force (the default until the settings arrive).
pub fn use_retry_policy() -> Signal<RetryPolicy> {
    let site = use_context::<Site>();
    Signal::derive(move || {
        site.and_then(|s| s.0.get()).and_then(Result::ok).map(|s| s.retry).unwrap_or_default()
    })
}
