//! How much of a lease has been used since its worker was last heard from, as a native
//! `<meter>`: green, amber past half the lease, red past four fifths, with the share as text so
//! it reads without colour, and no inline style (the page's CSP allows none).

use leptos::prelude::*;

#[component]
pub fn LeaseMeter(#[prop(into)] used: Signal<i64>) -> impl IntoView {
    view! {
        <meter
            class="ramp"
            min="0"
            max="100"
            low="50"
            high="80"
            optimum="0"
            value=move || used.get()
            aria-label="share of the lease used since the last heartbeat"
            data-testid="lease-meter"
        >
            {move || format!("{} %", used.get())}
        </meter>
        <span class="ramp-text">{move || format!(" {} %", used.get())}</span>
    }
}
