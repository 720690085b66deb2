//! Runner text on the task page: the first [`SHOWN_CHARS`] characters, and the rest one click
//! away in a closed `<details>` (not laid out until opened). Runner output is untrusted and
//! unbounded; a 300 000-character blob would otherwise push the effects and the audit trail a
//! screen-height per kilobyte down the page. Lists already get a prefix from the store.

use leptos::prelude::*;

/// Characters shown before "show all".
pub const SHOWN_CHARS: usize = 1_000;

#[component]
pub fn LongText(text: String) -> impl IntoView {
    let total = text.chars().count();
    if total <= SHOWN_CHARS {
        return view! { <span class="run-text">{text}</span> }.into_any();
    }
    let head: String = text.chars().take(SHOWN_CHARS).collect();
    view! {
        <span class="run-text">{head}"…"</span>
        <details class="full-text">
            <summary data-testid="show-full-text">{format!("show all {total} characters")}</summary>
            <pre data-testid="full-text-body">{text}</pre>
        </details>
    }
    .into_any()
}
