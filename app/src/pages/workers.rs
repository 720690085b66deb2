//! Every worker seen in a window: the leases it holds now, its last heartbeat, its runs and
//! failures, and a flag when it holds a lease that already lapsed (paused, hung, or dead).

use crate::api::workers::get_workers;
use crate::components::layout::PageHead;
use crate::components::segmented::{Choice, Segmented};
use crate::components::table::{Column, DataTable};
use crate::components::time::Time;
use crate::pages::{live_version, loaded, LeaseChecks};
use lastword_core::query::encode_component;
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

const WINDOWS: [&str; 4] = ["15m", "1h", "6h", "24h"];

const WORKERS_COLUMNS: &[Column] = &[
    Column::text("Worker"),
    Column::num("Runs"),
    Column::num("Failures"),
    Column::text("Leases held now"),
    Column::text("Last claim"),
    Column::text("Last heartbeat"),
];

#[component]
pub fn WorkersPage() -> impl IntoView {
    let query = use_query_map();
    let window = Memo::new(move |_| {
        let w = query.read().get("window").unwrap_or_else(|| "1h".into());
        if WINDOWS.contains(&w.as_str()) {
            w
        } else {
            "1h".into()
        }
    });
    let window_choices = WINDOWS
        .into_iter()
        .map(|w| Choice::new(w, format!("/workers?window={w}"), Signal::derive(move || window.get() == w)))
        .collect();
    let live = live_version();
    // The leases they hold are asked about again around their lapse: shown from each answer.
    let leases = LeaseChecks::new();
    let workers =
        Resource::new(move || (window.get(), live.get(), leases.key.get()), |(w, _, _)| get_workers(w));
    Effect::new(move |_| {
        if let Some(Ok(ws)) = workers.get() {
            leases.show(ws.iter().flat_map(|w| w.leases.iter().filter_map(|l| l.lease_expires_at)));
        }
    });
    view! {
        <section class="page">
            <PageHead title="Workers">
                <Segmented label="Window" choices=window_choices />
            </PageHead>
            {loaded(
                "Loading workers…",
                "workers",
                move || workers.get(),
                move |r| match r {
                    list if list.is_empty() => {
                        view! {
                            <div class="empty">
                                <p>"No worker claimed a task in this window."</p>
                            </div>
                        }
                            .into_any()
                    }
                    list => {
                        view! {
                            <DataTable columns=WORKERS_COLUMNS testid="workers">
                                {list
                                    .into_iter()
                                    .map(|w| {
                                        let worker_q = encode_component(&w.worker);
                                        view! {
                                            <tr
                                                data-row=""
                                                class={if w.holds_lapsed_lease { "row-lapsed" } else { "" }}
                                            >
                                                <td>
                                                    <a href=format!(
                                                        "/failures?worker={worker_q}",
                                                    )>{w.worker.clone()}</a>
                                                    {w
                                                        .holds_lapsed_lease
                                                        .then(|| {
                                                            view! {
                                                                <span
                                                                    class="tag tag-alert"
                                                                    data-testid="lapsed-lease"
                                                                    title="holds a lease that already expired"
                                                                >
                                                                    "⚠ lapsed lease"
                                                                </span>
                                                            }
                                                        })}
                                                </td>
                                                <td class="num">{w.runs}</td>
                                                <td class="num">
                                                    <a href=format!(
                                                        "/failures?worker={worker_q}",
                                                    )>{w.failures}</a>
                                                </td>
                                                <td>
                                                    {if w.leases.is_empty() {
                                                        view! { <span class="muted">"none"</span> }.into_any()
                                                    } else {
                                                        w.leases
                                                            .iter()
                                                            .map(|l| {
                                                                view! {
                                                                    <a class="lease-chip" href=format!("/tasks/{}", l.task_id)>
                                                                        {format!("#{} (epoch {})", l.task_id, l.lease_epoch)}
                                                                    </a>
                                                                }
                                                            })
                                                            .collect_view()
                                                            .into_any()
                                                    }}
                                                </td>
                                                <td>
                                                    {w.last_claim_at.map(|t| view! { <Time t=t short=true /> })}
                                                </td>
                                                <td>
                                                    {w
                                                        .last_heartbeat_at
                                                        .map(|t| view! { <Time t=t short=true /> })}
                                                </td>
                                            </tr>
                                        }
                                    })
                                    .collect_view()}
                            </DataTable>
                        }
                            .into_any()
                    }
                },
            )}
        </section>
    }
}
