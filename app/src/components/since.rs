//! The "Since" choice of the filter forms (failures, audit): a `<select name="since">` whose
//! values are the ages every door accepts (`15m`, `1h`, `7d`; empty: any time). A plain form
//! field, so the filters work with JavaScript off.

use leptos::prelude::*;

/// `(value, label)`; each page offers the ages that make sense for what it lists.
pub type SinceChoices = &'static [(&'static str, &'static str)];

/// `current`: the URL's `since`, selected.
#[component]
pub fn SinceSelect(choices: SinceChoices, #[prop(into)] current: Signal<String>) -> impl IntoView {
    view! {
        <label>
            "Since"
            <select name="since">
                {choices
                    .iter()
                    .map(|&(v, label)| {
                        view! {
                            <option value=v selected=move || current.get() == v>
                                {label}
                            </option>
                        }
                    })
                    .collect_view()}
            </select>
        </label>
    }
}
