//! A row of links of which one is the current choice (a window, a zoom, a lane order): the page
//! says what the choices are, where each leads and which one is current; the markup, and the
//! `aria-current` a screen reader announces, are written once.

use leptos::prelude::*;

/// One choice of a [`Segmented`] row.
pub struct Choice {
    pub label: String,
    /// Where it leads (the same page with the choice in its query string).
    pub href: Signal<String>,
    pub current: Signal<bool>,
    /// A longer wording for the tooltip ("last 6 hours" for "6h").
    pub title: Option<String>,
}

impl Choice {
    pub fn new(
        label: impl Into<String>,
        href: impl Into<Signal<String>>,
        current: impl Into<Signal<bool>>,
    ) -> Self {
        Choice { label: label.into(), href: href.into(), current: current.into(), title: None }
    }

    pub fn titled(self, title: String) -> Self {
        Choice { title: Some(title), ..self }
    }
}

/// `<nav class="segmented">` of `choices`, the current one marked `aria-current="page"`.
#[component]
pub fn Segmented(
    /// What is chosen ("Window", "Lane order"): the navigation's accessible name.
    label: &'static str,
    choices: Vec<Choice>,
) -> impl IntoView {
    view! {
        <nav class="segmented" aria-label=label>
            {choices
                .into_iter()
                .map(|c| {
                    let current = c.current;
                    view! {
                        <a href=c.href aria-current=move || current.get().then_some("page") title=c.title>
                            {c.label}
                        </a>
                    }
                })
                .collect_view()}
        </nav>
    }
}
