//! The landing page: what state the fleet's runs are in over a window, and what needs attention.

use crate::api::leases::get_leases_at_hand;
use crate::api::overview::{get_overview, get_totals, WINDOWS};
use crate::components::badges::{cause_label, state_mark, StateBadge};
use crate::components::layout::PageHead;
use crate::components::segmented::{Choice, Segmented};
use crate::components::table::{Column, DataTable};
use crate::components::time::Time;
use crate::pages::{error_view, live_version, loaded};
use lastword_core::query::encode_component;
use lastword_core::{Bucket, Overview, RunState};
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

const CAUSES_COLUMNS: &[Column] = &[Column::text("Cause"), Column::num("Runs")];

#[component]
pub fn OverviewPage() -> impl IntoView {
    let query = use_query_map();
    let window = Memo::new(move |_| {
        let w = query.read().get("window").unwrap_or_else(|| "1h".to_string());
        if WINDOWS.iter().any(|(v, _, _)| *v == w) {
            w
        } else {
            "1h".to_string()
        }
    });
    let live = live_version();
    // Bumped by the refresh button; the resources refetch whenever it changes.
    let refreshes = RwSignal::new(0u32);
    let totals = Resource::new(move || (refreshes.get(), live.get()), |_| get_totals());
    let overview =
        Resource::new(move || (window.get(), refreshes.get(), live.get()), |(w, _, _)| get_overview(w));
    // Lease health over its own default window (a day), as the server has it at hand: shared
    // between viewers and never waited for (the first answer after a start may be "computing").
    let leases = Resource::new(move || (refreshes.get(), live.get()), |_| get_leases_at_hand());
    let window_choices = WINDOWS
        .iter()
        .map(|&(w, label, _)| {
            Choice::new(w, format!("/?window={w}"), Signal::derive(move || window.get() == w))
                .titled(format!("last {label}"))
        })
        .collect();

    view! {
        <section class="page">
            <PageHead title="Overview">
                <Segmented label="Window" choices=window_choices />
                <button type="button" class="btn" on:click=move |_| refreshes.update(|n| *n += 1)>
                    "Refresh"
                </button>
                <span class="muted" data-testid="refresh-count">
                    {move || match refreshes.get() {
                        0 => String::new(),
                        1 => "refreshed once".to_string(),
                        n => format!("refreshed {n} times"),
                    }}
                </span>
            </PageHead>
            {loaded(
                "Loading…",
                "the overview",
                move || overview.get(),
                move |o| view! { <OverviewBody overview=o window=window.get_untracked() /> },
            )}
            <Transition fallback=|| ()>
                {move || {
                    leases
                        .get()
                        .map(|r| match r {
                            Ok(Some(report)) => view! { <LeasePanel report=report /> }.into_any(),
                            Ok(None) => {
                                view! {
                                    <section class="lease-panel" data-testid="lease-panel">
                                        <h2>
                                            <a href="/leases">"Leases"</a>
                                        </h2>
                                        <p class="muted">
                                            "The day's lease figures are being computed; they appear here in a moment."
                                        </p>
                                    </section>
                                }
                                    .into_any()
                            }
                            Err(e) => error_view("lease health", e),
                        })
                }}
            </Transition>
            <h2>"All time"</h2>
            {loaded(
                "Loading totals…",
                "totals",
                move || totals.get(),
                move |t| {
                    let shown = move |n: i64| {
                        if t.estimated { format!("≈ {n}") } else { n.to_string() }
                    };
                    // Large tables are PostgreSQL's estimate: marked, and said why.
                    view! {
                        <dl class="totals" data-testid="totals">
                            <div>
                                <dt>"Tasks"</dt>
                                <dd data-testid="total-tasks">{shown(t.tasks)}</dd>
                            </div>
                            <div>
                                <dt>"Runs"</dt>
                                <dd data-testid="total-runs">{shown(t.runs)}</dd>
                            </div>
                            <div>
                                <dt>"Effects"</dt>
                                <dd data-testid="total-effects">{shown(t.effects)}</dd>
                            </div>
                        </dl>
                        {t
                            .estimated
                            .then(|| {
                                view! {
                                    <p class="muted" data-testid="totals-estimated">
                                        "≈ PostgreSQL's estimate, kept current by autovacuum: tables past 100 000 rows are not counted per request."
                                    </p>
                                }
                            })}
                    }
                        .into_any()
                },
            )}
        </section>
    }
}

#[component]
fn OverviewBody(overview: Overview, window: String) -> impl IntoView {
    let since = format!("since={window}");
    let a = overview.attention.clone();
    // (label, count, of which acknowledged, link, test id)
    let attention = [
        (
            "Lost-lease completions of unsafe tasks",
            a.unsafe_lost_leases,
            Some(a.taken.unsafe_lost_leases),
            format!("/failures?cause=lost_lease&{since}"),
            "attention-lost-lease",
        ),
        (
            "Double executions awaiting compensation",
            a.needs_compensation,
            Some(a.taken.needs_compensation),
            format!("/failures?cause=lost_lease&{since}"),
            "attention-compensation",
        ),
        ("Silent runs", a.silent_runs, None, format!("/failures?cause=silent&{since}"), "attention-silent"),
        (
            "Re-claim loops now",
            a.loops,
            Some(a.taken.loops),
            // A loop is a task: the first one's story (the card lists the others).
            a.loop_tasks.first().map_or_else(|| format!("/failures?{since}"), |id| format!("/tasks/{id}")),
            "attention-loops",
        ),
        (
            "Dead tasks",
            a.dead_tasks,
            Some(a.taken.dead_tasks),
            format!("/failures?{since}"),
            "attention-dead",
        ),
    ];
    let loop_tasks = a.loop_tasks.clone();
    let total: i64 = overview.by_state.iter().map(|(_, n)| n).sum();
    let cards = attention
        .into_iter()
        .map(|(label, n, taken, href, id)| {
            // Open items are the alarm; those someone has taken are said, not shouted.
            // Counted a moment apart (the rollups lag the audit): never below zero.
            let open = (n - taken.unwrap_or(0)).max(0);
            view! {
                <li class={if open > 0 { "card card-alert" } else { "card" }} data-testid=id>
                    <a href=href>
                        <span class="card-n">{n}</span>
                        <span class="card-label">{label}</span>
                        {taken
                            .filter(|t| *t > 0)
                            .map(|t| {
                                view! {
                                    <span class="card-taken" data-testid="taken">
                                        {format!("{open} open · {t} acknowledged")}
                                    </span>
                                }
                            })}
                    </a>
                </li>
            }
        })
        .collect_view();
    view! {
        <section aria-labelledby="attention-title" class="attention">
            <h2 id="attention-title">"Needs attention"</h2>
            <ul class="cards">{cards}</ul>
            {(loop_tasks.len() > 1)
                .then(|| {
                    view! {
                        <p class="muted" data-testid="loop-tasks">
                            "In a re-claim loop: "
                            {loop_tasks
                                .iter()
                                .map(|id| {
                                    view! {
                                        <a href=format!("/tasks/{id}")>{format!("task {id}")}</a>
                                        " "
                                    }
                                })
                                .collect_view()}
                        </p>
                    }
                })}
        </section>
        <section aria-labelledby="states-title">
            <h2 id="states-title">{format!("Runs by state ({total})")}</h2>
            {overview
                .counted_at
                .map(|t| {
                    view! {
                        <p class="muted" data-testid="counted-at">
                            "Past quarter-hours counted at "
                            <Time t=t short=true />
                            "; the current one is counted live."
                        </p>
                    }
                })}
            <ul class="state-counts" data-testid="state-counts">
                {overview
                    .by_state
                    .iter()
                    .map(|(state, n)| {
                        let href = format!("/failures?state={}&{since}", state.as_str());
                        view! {
                            <li>
                                <a href=href data-state=state.as_str()>
                                    <StateBadge state=*state />
                                    <span class="count">{*n}</span>
                                </a>
                            </li>
                        }
                    })
                    .collect_view()}
            </ul>
            <Chart series=overview.series.clone() />
        </section>
        <section aria-labelledby="causes-title">
            <h2 id="causes-title">"Failures by cause"</h2>
            <DataTable columns=CAUSES_COLUMNS class="narrow">
                {overview
                    .by_cause
                    .iter()
                    .map(|(cause, n)| {
                        let href = format!("/failures?cause={}&{}", encode_component(cause.as_str()), since);
                        view! {
                            <tr>
                                <td>
                                    <a href=href>{cause_label(*cause)}</a>
                                </td>
                                <td class="num">{*n}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </DataTable>
        </section>
    }
}

/// Stacked bars of runs per bucket, failures on top so they catch the eye.
#[component]
fn Chart(series: Vec<Bucket>) -> impl IntoView {
    const ORDER: [RunState; 8] = [
        RunState::Acted,
        RunState::NoAction,
        RunState::Skip,
        RunState::Running,
        RunState::Failed,
        RunState::EmptyOutput,
        RunState::Silent,
        RunState::LostLease,
    ];
    let max = series.iter().map(|b| b.counts.iter().map(|(_, n)| *n).sum::<i64>()).max().unwrap_or(0).max(1);
    let width = 600.0;
    let height = 120.0;
    let n = series.len().max(1) as f64;
    let bar = width / n;
    let bars = series
        .iter()
        .enumerate()
        .flat_map(|(i, b)| {
            let mut y = height;
            ORDER
                .iter()
                .filter_map(|s| {
                    let count = b.counts.iter().find(|(st, _)| st == s).map(|(_, c)| *c).unwrap_or(0);
                    (count > 0).then(|| {
                        let h = count as f64 / max as f64 * height;
                        y -= h;
                        let title = format!(
                            "{}: {} {}",
                            b.start
                                .map(|t| format!("{} UTC", lastword_core::time_text::hm(&t)))
                                .unwrap_or_default(),
                            count,
                            state_mark(*s).1
                        );
                        view! {
                            <rect
                                class=format!("bar state-{}", s.as_str())
                                x=i as f64 * bar + 1.0
                                y=y
                                width=(bar - 2.0).max(1.0)
                                height=h
                            >
                                <title>{title}</title>
                            </rect>
                        }
                    })
                })
                .collect::<Vec<_>>()
        })
        .collect_view();
    view! {
        <figure class="chart">
            <svg
                viewBox=format!("0 0 {width} {height}")
                preserveAspectRatio="none"
                role="img"
                aria-label="Runs over time by state"
            >
                {bars}
            </svg>
            <figcaption class="muted">{format!("Runs per bucket (max {max})")}</figcaption>
        </figure>
    }
}

/// Lease health in brief: each suggestion of the day, loops and skewed clocks, linking to the
/// Leases page for the figures behind them.
#[component]
fn LeasePanel(report: lastword_core::leases::LeaseReport) -> impl IntoView {
    let suggestions = report.suggestions();
    let reclaims: i64 = report.kinds.iter().map(|k| k.reclaims).sum();
    let lost: i64 = report.kinds.iter().map(|k| k.lost_lease).sum();
    let window = lastword_core::leases::DEFAULT_WINDOW;
    view! {
        <section class="lease-panel" aria-labelledby="lease-panel-h" data-testid="lease-panel">
            <h2 id="lease-panel-h">
                <a href=format!("/leases?window={window}")>"Leases"</a>
            </h2>
            <p class="muted">
                {format!(
                    "Last {window}: {reclaims} re-claims after a lapsed lease, {lost} lost leases; {} tasks in a re-claim loop now; {} workers with clocks ahead.",
                    report.loops.len(),
                    report.skewed_workers.len(),
                )}
            </p>
            {if suggestions.is_empty() {
                view! { <p data-testid="lease-panel-ok">"No lease needs changing."</p> }.into_any()
            } else {
                view! {
                    <ul class="suggestions">
                        {suggestions
                            .into_iter()
                            .map(|(kind, text)| {
                                view! {
                                    <li
                                        class="banner banner-warn"
                                        data-testid="lease-suggestion"
                                        data-kind=kind.clone()
                                    >
                                        {text}
                                        " "
                                        <a href=format!(
                                            "/leases?window={window}&kind={}",
                                            encode_component(&kind),
                                        )>"figures"</a>
                                    </li>
                                }
                            })
                            .collect_view()}
                    </ul>
                }
                    .into_any()
            }}
        </section>
    }
}
