//! Lease health (issue 13): for each task kind, how long runs take against the lease they hold,
//! how many outlived it and what that cost (lost leases, double executions), how fast a lapsed
//! lease is re-claimed and why, with a suggestion where the figures support one; tasks in a
//! re-claim loop, workers whose clocks run ahead, and the heartbeat age of running work.

use crate::api::leases::get_leases;
use crate::components::layout::PageHead;
use crate::components::meter::LeaseMeter;
use crate::components::segmented::{Choice, Segmented};
use crate::components::table::{Column, DataTable};
use crate::components::time::Time;
use crate::pages::{live_version, loaded};
use lastword_core::leases::{spoken_ms, HeartbeatHealth, KindLeaseStats, LeaseReport};
use lastword_core::query::encode_component;
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

const WINDOWS: [&str; 4] = ["1h", "6h", "24h", "3d"];
use lastword_core::leases::DEFAULT_WINDOW;

fn ms(v: Option<i64>) -> String {
    v.map(spoken_ms).unwrap_or_else(|| "—".into())
}

/// `part` of `whole` as a whole percentage, "—" of nothing.
fn share(part: i64, whole: i64) -> String {
    if whole <= 0 {
        "—".into()
    } else {
        format!("{} %", (part * 100 + whole / 2) / whole)
    }
}

const LEASE_KINDS_COLUMNS: &[Column] = &[
    Column::text("Kind"),
    Column::num("Runs"),
    Column::num("Lease"),
    Column::num("p50"),
    Column::num("p95"),
    Column::num("p99"),
    Column::num("max"),
    Column::num("Outlived lease").titled("finished after their lease expired"),
    Column::num("Lost lease"),
    Column::num("Double exec."),
    Column::num("Re-claims (slow/stalled/dead)")
        .titled("re-claims after a lapsed lease: slow / stalled / dead worker"),
    Column::num("Operator re-queues"),
    Column::num("Reclaim latency p50 / p95").titled("from the lapsed lease's expiry to the next claim"),
];

const LEASE_WORKERS_COLUMNS: &[Column] = &[
    Column::text("Worker"),
    Column::num("Paused (finished late)"),
    Column::num("Stalled"),
    Column::num("Dead"),
];

const HEARTBEATS_COLUMNS: &[Column] = &[
    Column::text("Task"),
    Column::text("Kind"),
    Column::text("Worker"),
    Column::text("Last heard"),
    Column::text("Lease used since"),
];

#[component]
pub fn LeasesPage() -> impl IntoView {
    let query = use_query_map();
    let window = Memo::new(move |_| {
        let w = query.read().get("window").unwrap_or_else(|| DEFAULT_WINDOW.into());
        if WINDOWS.contains(&w.as_str()) {
            w
        } else {
            DEFAULT_WINDOW.into()
        }
    });
    let kind = Memo::new(move |_| query.read().get("kind").unwrap_or_default());
    let live = live_version();
    let report = Resource::new(move || (window.get(), kind.get(), live.get()), |(w, k, _)| get_leases(w, k));
    let window_choices = WINDOWS
        .into_iter()
        .map(|w| {
            let href = Signal::derive(move || {
                let k = kind.get();
                if k.is_empty() {
                    format!("/leases?window={w}")
                } else {
                    format!("/leases?window={w}&kind={}", encode_component(&k))
                }
            });
            Choice::new(w, href, Signal::derive(move || window.get() == w))
        })
        .collect();
    view! {
        <section class="page">
            <PageHead title="Leases">
                <Segmented label="Window" choices=window_choices />
            </PageHead>
            <p class="muted">
                "A lease is how long a worker may stay silent before its task is taken from it: shorter notices a dead worker sooner, "
                "but re-claims work from live, slow ones (a lost-lease completion, perhaps a double execution)."
            </p>
            {loaded(
                "Loading lease figures…",
                "lease figures",
                move || report.get(),
                move |report| view! { <LeaseReportView report=report window=window.get() /> },
            )}
        </section>
    }
}

#[component]
fn LeaseReportView(report: LeaseReport, window: String) -> impl IntoView {
    let suggestions = report.suggestions();
    let LeaseReport { computed_at, kinds, loops, loop_claims, skewed_workers, workers, heartbeats, .. } =
        report;
    view! {
        <p class="muted freshness" data-testid="lease-freshness">
            {format!("Runs claimed in the last {window}; figures ")}
            {computed_at
                .map(|t| {
                    view! {
                        "read at "
                        <Time t=t short=true />
                    }
                })}
            " (shared between viewers for up to 30 s)."
        </p>
        {(!suggestions.is_empty())
            .then(|| {
                view! {
                    <section aria-labelledby="suggestions-h">
                        <h2 id="suggestions-h">"Suggestions"</h2>
                        <ul class="suggestions">
                            {suggestions
                                .into_iter()
                                .map(|(kind, text)| {
                                    view! {
                                        <li
                                            class="banner banner-warn"
                                            data-testid="lease-suggestion"
                                            data-kind=kind
                                        >
                                            {text}
                                        </li>
                                    }
                                })
                                .collect_view()}
                        </ul>
                    </section>
                }
            })}
        <section aria-labelledby="kinds-h">
            <h2 id="kinds-h">"Run length against the lease, per kind"</h2>
            {if kinds.is_empty() {
                view! {
                    <div class="empty">
                        <p>"No run was claimed in this window."</p>
                    </div>
                }
                    .into_any()
            } else {
                view! {
                    <div class="table-scroll">
                        <DataTable columns=LEASE_KINDS_COLUMNS testid="lease-kinds">
                            {kinds.into_iter().map(|k| view! { <KindRow k=k /> }).collect_view()}
                        </DataTable>
                    </div>
                }
                    .into_any()
            }}
        </section>
        <section aria-labelledby="loops-h">
            <h2 id="loops-h">"Re-claim loops"</h2>
            <p class="muted">
                {format!(
                    "Tasks claimed at least {loop_claims} times since re-queued whose newest {loop_claims} attempts all failed: a poison task that kills or stalls every worker that takes it.",
                )}
            </p>
            {if loops.is_empty() {
                view! { <p data-testid="no-loops">"None now."</p> }.into_any()
            } else {
                view! {
                    <ul data-testid="lease-loops">
                        {loops
                            .into_iter()
                            .map(|l| {
                                view! {
                                    <li>
                                        <a href=format!(
                                            "/tasks/{}",
                                            l.task_id,
                                        )>{format!("#{}", l.task_id)}</a>
                                        " "
                                        <span class="muted">{l.kind}</span>
                                        {format!(" · epoch {}", l.lease_epoch)}
                                        {l
                                            .streak_since
                                            .map(|t| {
                                                view! {
                                                    " · failing since "
                                                    <Time t=t short=true />
                                                }
                                            })}
                                    </li>
                                }
                            })
                            .collect_view()}
                    </ul>
                }
                    .into_any()
            }}
        </section>
        <section aria-labelledby="workers-h">
            <h2 id="workers-h">"Workers that lost leases"</h2>
            {if workers.is_empty() {
                view! { <p data-testid="no-lost-workers">"No worker lost a lease in this window."</p> }
                    .into_any()
            } else {
                view! {
                    <p class="muted">
                        "Paused: the heartbeats stopped but the run finished later (a GC pause, an API stall) — a longer lease or more frequent heartbeats help. "
                        "Stalled: the run never finished but the worker went on claiming. Dead: never finished, the worker not seen since — the lease did its job."
                    </p>
                    <DataTable columns=LEASE_WORKERS_COLUMNS testid="lease-workers">
                        {workers
                            .into_iter()
                            .map(|w| {
                                let href = format!("/failures?worker={}", encode_component(&w.worker));
                                view! {
                                    <tr data-row="" data-worker=w.worker.clone()>
                                        <td>
                                            <a href=href>{w.worker.clone()}</a>
                                        </td>
                                        <td class="num">{w.paused}</td>
                                        <td class="num">{w.stalled}</td>
                                        <td class="num">{w.dead}</td>
                                    </tr>
                                }
                            })
                            .collect_view()}
                    </DataTable>
                }
                    .into_any()
            }}
        </section>
        <section aria-labelledby="skew-h">
            <h2 id="skew-h">"Clock skew"</h2>
            {if skewed_workers.is_empty() {
                view! {
                    <p data-testid="no-skew">
                        "No worker stamped times ahead of the database's clock in the window's last hour."
                    </p>
                }
                    .into_any()
            } else {
                view! {
                    <p class="muted">
                        "Lease expiries written by these workers are compared across clocks: leases may lapse early or late."
                    </p>
                    <ul data-testid="skewed-workers">
                        {skewed_workers
                            .into_iter()
                            .map(|w| {
                                let href = format!("/failures?worker={}", encode_component(&w.worker));
                                view! {
                                    <li>
                                        <span class="tag tag-alert">"⏱ skew"</span>
                                        " "
                                        <a href=href>{w.worker}</a>
                                        {format!(
                                            ": up to {} ahead, on {} runs",
                                            spoken_ms(w.ahead_ms),
                                            w.runs,
                                        )}
                                    </li>
                                }
                            })
                            .collect_view()}
                    </ul>
                }
                    .into_any()
            }}
        </section>
        <section aria-labelledby="beats-h">
            <h2 id="beats-h">"Heartbeats of running work"</h2>
            {if heartbeats.is_empty() {
                view! { <p class="muted">"Nothing is running."</p> }.into_any()
            } else {
                view! {
                    <DataTable columns=HEARTBEATS_COLUMNS testid="heartbeats">
                        {heartbeats.into_iter().map(|h| view! { <HeartbeatRow h=h /> }).collect_view()}
                    </DataTable>
                }
                    .into_any()
            }}
        </section>
    }
}

#[component]
fn KindRow(k: KindLeaseStats) -> impl IntoView {
    let kind_q = encode_component(&k.kind);
    view! {
        <tr data-row="" data-kind=k.kind.clone() class=if k.suggestion.is_some() { "row-lapsed" } else { "" }>
            <td>
                <a href=format!("/failures?kind={kind_q}")>{k.kind.clone()}</a>
            </td>
            <td class="num">{k.runs}</td>
            <td class="num">{ms(k.lease_ms)}</td>
            <td class="num">{ms(k.duration_p50_ms)}</td>
            <td class="num">{ms(k.duration_p95_ms)}</td>
            <td class="num">{ms(k.duration_p99_ms)}</td>
            <td class="num">{ms(k.duration_max_ms)}</td>
            <td class="num" data-testid="outlived">
                {format!("{} ({})", k.outlived_lease, share(k.outlived_lease, k.finished))}
            </td>
            <td class="num">
                <a href=format!("/failures?kind={kind_q}&state=lost_lease")>{k.lost_lease}</a>
            </td>
            <td class="num">{k.double_executions}</td>
            <td class="num">
                <a href=format!(
                    "/failures?kind={kind_q}&reclaim=slow_worker,stalled_worker,dead_worker",
                )>{k.reclaims}</a>
                {format!(
                    " ({}/{}/{})",
                    k.reclaims_slow_worker,
                    k.reclaims_stalled_worker,
                    k.reclaims_dead_worker,
                )}
            </td>
            <td class="num">{k.reclaims_operator_requeue}</td>
            <td class="num">
                {format!("{} / {}", ms(k.reclaim_latency_p50_ms), ms(k.reclaim_latency_p95_ms))}
            </td>
        </tr>
    }
}

/// A running run's heartbeat age against its lease: how much of it is used up, and when it lapses.
#[component]
fn HeartbeatRow(h: HeartbeatHealth) -> impl IntoView {
    let used = h.used_percent();
    view! {
        <tr data-row="" data-run=h.run_id>
            <td>
                <a href=format!("/tasks/{}", h.task_id)>{format!("#{}", h.task_id)}</a>
            </td>
            <td>{h.kind.clone()}</td>
            <td>{h.worker.clone()}</td>
            <td class="num">{format!("{} ago", spoken_ms(h.heartbeat_age_ms))}</td>
            <td>
                <LeaseMeter used=used />
                {format!(" of {} · lapses in {}", spoken_ms(h.lease_ms), spoken_ms(h.lease_left_ms.max(0)))}
            </td>
        </tr>
    }
}
