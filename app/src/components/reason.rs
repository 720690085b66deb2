//! The reason an operator gives for an action, written once for the single confirmation and
//! the bulk one: required, and no longer than the audit trail keeps (`MAX_REASON`), so the
//! browser stops at the limit the server would refuse past.

use lastword_core::action::MAX_REASON;
use leptos::prelude::*;

/// A required reason box bound to `reason`, under `label`; `testid` names it for the tests.
#[component]
pub fn ReasonField(
    reason: RwSignal<String>,
    #[prop(into)] label: Signal<&'static str>,
    testid: &'static str,
) -> impl IntoView {
    view! {
        <label class="field">
            {move || label.get()}
            <textarea
                data-testid=testid
                required=true
                maxlength=MAX_REASON
                rows="2"
                prop:value=move || reason.get()
                on:input=move |ev| reason.set(event_target_value(&ev))
            ></textarea>
        </label>
    }
}
