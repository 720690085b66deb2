//! The landing page: what is in the database right now.

use crate::api::overview::get_totals;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn OverviewPage() -> impl IntoView {
    // Bumped by the refresh button; the resource refetches whenever it changes.
    let refreshes = RwSignal::new(0u32);
    let totals = Resource::new(move || refreshes.get(), |_| get_totals());

    view! {
        <Title text="Overview" />
        <section class="page">
            <header class="page-head">
                <h1>"Overview"</h1>
                <button
                    type="button"
                    class="btn"
                    on:click=move |_| refreshes.update(|n| *n += 1)
                >
                    "Refresh"
                </button>
                <span class="muted" data-testid="refresh-count">
                    {move || match refreshes.get() {
                        0 => String::new(),
                        1 => "refreshed once".to_string(),
                        n => format!("refreshed {n} times"),
                    }}
                </span>
            </header>
            <Suspense fallback=|| view! { <p class="muted">"Loading totals…"</p> }>
                {move || {
                    totals
                        .get()
                        .map(|result| match result {
                            Ok(t) => {
                                view! {
                                    <dl class="totals" data-testid="totals">
                                        <div><dt>"Tasks"</dt><dd data-testid="total-tasks">{t.tasks}</dd></div>
                                        <div><dt>"Runs"</dt><dd data-testid="total-runs">{t.runs}</dd></div>
                                        <div><dt>"Effects"</dt><dd data-testid="total-effects">{t.effects}</dd></div>
                                    </dl>
                                }
                                    .into_any()
                            }
                            Err(e) => {
                                view! { <p class="banner banner-error" role="alert">{format!("Could not load totals: {e}")}</p> }
                                    .into_any()
                            }
                        })
                }}
            </Suspense>
        </section>
    }
}
