//! A run's trace link: to the run's trace in the team's tracer when the server has a
//! `--trace-url-template`, else the id itself, to copy. Nothing when the run has no trace id.

use lastword_core::TraceLinks;
use leptos::prelude::*;

#[component]
pub fn TraceLink(trace_id: Option<String>, links: Signal<Option<TraceLinks>>) -> impl IntoView {
    trace_id.map(|id| {
        move || match links.get().and_then(|l| l.url(&id)) {
            Some(url) => view! {
                <a
                    class="trace-link"
                    data-testid="trace-link"
                    href=url
                    target="_blank"
                    rel="noopener noreferrer"
                    title=format!("trace {id} (opens the tracer)")
                >
                    "trace ↗"
                </a>
            }
            .into_any(),
            None => view! {
                <span
                    class="trace-id"
                    data-testid="trace-id"
                    title="trace id (no --trace-url-template configured)"
                >
                    "trace "
                    <code>{id.clone()}</code>
                </span>
            }
            .into_any(),
        }
    })
}
