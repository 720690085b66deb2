//! How a run's state looks. Every state has its own glyph and label as well as a colour, so
//! lost-lease and empty-output rows stand out by shape even without colour vision (or colour).

use lastword_core::{Cause, RunState};
use leptos::prelude::*;

/// (glyph, label) for a state.
pub fn state_mark(state: RunState) -> (&'static str, &'static str) {
    match state {
        RunState::Running => ("▶", "running"),
        RunState::Silent => ("…", "silent"),
        RunState::LostLease => ("⇄", "lost lease"),
        RunState::Failed => ("✕", "failed"),
        RunState::EmptyOutput => ("∅", "empty output"),
        RunState::NoAction => ("○", "no action"),
        RunState::Skip => ("–", "skip"),
        RunState::Acted => ("✓", "acted"),
    }
}

pub fn cause_label(cause: Cause) -> &'static str {
    match cause {
        Cause::Timeout => "timeout",
        Cause::ApiError => "API error",
        Cause::ContextOverflow => "context overflow",
        Cause::Crash => "crash",
        Cause::Other => "other",
        Cause::EmptyOutput => "empty output",
        Cause::Silent => "silent",
        Cause::LostLease => "lost lease",
    }
}

/// The badge shown in lists and on the task page.
#[component]
pub fn StateBadge(state: RunState, #[prop(optional_no_strip)] cause: Option<Cause>) -> impl IntoView {
    let (glyph, label) = state_mark(state);
    let text = match (state, cause) {
        (RunState::Failed, Some(c)) => format!("failed: {}", cause_label(c)),
        _ => label.to_string(),
    };
    view! {
        <span class=format!("badge state-{}", state.as_str()) data-state=state.as_str()>
            <span class="glyph" aria-hidden="true">
                {glyph}
            </span>
            {text}
        </span>
    }
}
