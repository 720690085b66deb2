//! Failures: every run that did not end healthily, filterable by cause (several at once),
//! worker, kind, source, time and text. The URL holds every filter, so a link pasted into chat
//! opens the same view; the form works with JavaScript off (a plain GET).

mod bulk;

use crate::api::runs::{list_failures, RunsAnswer};
use crate::auth::use_can_act;
use crate::components::badges::{cause_label, StateBadge};
use crate::components::bulk::BulkScope;
use crate::components::layout::PageHead;
use crate::components::since::SinceSelect;
use crate::components::time::{human_duration, Time};
use crate::components::trace::TraceLink;
use crate::pages::{bad_filter_view, live_version, loaded};
use bulk::bulk_requeue_panel;
use lastword_core::{Cause, CauseFacets, ReclaimReason, RunListItem, RunPage, RunState, TraceLinks};
use leptos::prelude::*;
use leptos_router::components::Form;
use leptos_router::hooks::use_query_map;

const SINCE_CHOICES: [(&str, &str); 6] = [
    ("", "any time"),
    ("15m", "15 minutes"),
    ("1h", "1 hour"),
    ("6h", "6 hours"),
    ("24h", "24 hours"),
    ("7d", "7 days"),
];

/// The list export (`/api/v1/runs/export`) of what the page lists: its filters without paging,
/// and failures only unless the URL names a state or cause, as the page does.
fn export_href(query: &leptos_router::params::ParamsMap, format: &str) -> String {
    let mut q = query.clone();
    q.remove("after");
    let given = |k: &str| q.get(k).is_some_and(|v| !v.trim().is_empty());
    let narrowed = given("state") || given("cause");
    if !narrowed {
        q.remove("state");
        q.remove("cause");
        let failures: Vec<&str> = RunState::failures().iter().map(|s| s.as_str()).collect();
        q.insert("state", failures.join(","));
    }
    q.insert("format", format.to_string());
    format!("/api/v1/runs/export{}", q.to_query_string())
}

#[component]
pub fn FailuresPage() -> impl IntoView {
    let query = use_query_map();
    let live = live_version();
    let query_string = Memo::new(move |_| query.read().to_query_string());
    // Operators tick rows, or take every task the filter matches, into a bulk re-queue.
    let selected = RwSignal::new(Vec::<i64>::new());
    let bulk_open = RwSignal::new(false);
    let bulk_scope = RwSignal::new(None::<BulkScope>);
    let bulk_done = RwSignal::new(None::<String>);
    let can_act = use_can_act();
    let trace_links = crate::site::use_trace_links();
    // A live change refetches only the first page: a paged view stays put while you read it,
    // and while a bulk confirmation is open.
    let live_key =
        move || if query.read().get("after").is_some() || bulk_open.get() { 0 } else { live.get() };
    let answer = Resource::new(move || (query_string.get(), live_key()), |(q, _)| list_failures(q));

    let param = move |k: &str| query.read().get(k).unwrap_or_default();
    // Every `reclaim` value of the URL (it may repeat and hold a comma list), as one list.
    let reclaim_param = move || query.read().get_all("reclaim").unwrap_or_default().join(",");
    let causes_selected = move || {
        query
            .read()
            .get_all("cause")
            .unwrap_or_default()
            .join(",")
            .split(',')
            .map(str::to_string)
            .collect::<Vec<_>>()
    };

    view! {
        <section class="page">
            <PageHead title="Failures">
                <a class="muted" href="/failures">
                    "Clear filters"
                </a>
            </PageHead>
            <Form method="GET" action="/failures" attr:class="filters" attr:aria-label="Filter failures">
                <fieldset class="causes">
                    <legend>"Cause"</legend>
                    // Kept through live refetches (see `loaded`): boxes that blink out are
                    // boxes a click misses.
                    <Transition fallback=|| ()>
                        {move || {
                            let facets = answer
                                .get()
                                .and_then(|a| match a {
                                    Ok(RunsAnswer::Page { facets, .. }) => Some(facets),
                                    _ => None,
                                });
                            let selected = causes_selected();
                            Cause::ALL
                                .into_iter()
                                .map(|c| {
                                    let count = facets
                                        .as_ref()
                                        .map(|f: &CauseFacets| {
                                            let n = f
                                                .counts
                                                .iter()
                                                .find(|(fc, _)| *fc == c)
                                                .map(|(_, n)| *n)
                                                .unwrap_or(0);
                                            if f.capped.contains(&c) {
                                                format!("{n}+")
                                            } else {
                                                n.to_string()
                                            }
                                        });
                                    // A count with no rollup behind it stops at the cap: "10000+".
                                    view! {
                                        <label class=format!("cause cause-{}", c.as_str())>
                                            <input
                                                type="checkbox"
                                                name="cause"
                                                value=c.as_str()
                                                checked=selected.iter().any(|s| s == c.as_str())
                                            />
                                            {cause_label(c)}
                                            {count
                                                .map(|n| {
                                                    view! {
                                                        <span class="facet" data-facet=c.as_str()>
                                                            {n}
                                                        </span>
                                                    }
                                                })}
                                        </label>
                                    }
                                })
                                .collect_view()
                        }}
                    </Transition>
                </fieldset>
                <label>
                    "Text"
                    <input
                        type="search"
                        name="q"
                        value=move || param("q")
                        placeholder="output, error…"
                        data-filter-focus=""
                    />
                </label>
                <label>
                    "Worker" <input type="text" name="worker" value=move || param("worker") size="10" />
                </label>
                <label>"Kind" <input type="text" name="kind" value=move || param("kind") size="12" /></label>
                <label>
                    "Source"
                    <select name="source">
                        {["", "notification", "tick"]
                            .into_iter()
                            .map(|s| {
                                view! {
                                    <option value=s selected=move || param("source") == s>
                                        {if s.is_empty() { "any" } else { s }}
                                    </option>
                                }
                            })
                            .collect_view()}
                    </select>
                </label>
                <label title="runs that took their task from an earlier run, by why the earlier one lost it">
                    "Re-claimed" <select name="reclaim">
                        <option value="" selected=move || reclaim_param().is_empty()>
                            "any"
                        </option>
                        // A URL naming several reasons (`reclaim=dead_worker,stalled_worker`) keeps
                        // them through Apply instead of the select falling back to "any".
                        {move || {
                            let current = reclaim_param();
                            let single = ReclaimReason::ALL.iter().any(|r| r.as_str() == current);
                            (!current.is_empty() && !single)
                                .then(|| {
                                    let label = current.replace(',', " or ").replace('_', " ");
                                    view! {
                                        <option value=current selected=true>
                                            {label}
                                        </option>
                                    }
                                })
                        }}
                        {ReclaimReason::ALL
                            .iter()
                            .map(|&r| {
                                view! {
                                    <option value=r.as_str() selected=move || reclaim_param() == r.as_str()>
                                        {r.short()}
                                    </option>
                                }
                            })
                            .collect_view()}
                    </select>
                </label>
                <SinceSelect choices=&SINCE_CHOICES current=Signal::derive(move || param("since")) />
                <button type="submit" class="btn">
                    "Apply"
                </button>
            </Form>
            <p class="exports">
                "Export what this page lists: "
                <a
                    href=move || export_href(&query.read(), "csv")
                    download="lastword-runs.csv"
                    data-testid="export-csv"
                >
                    "CSV"
                </a> " · "
                <a
                    href=move || export_href(&query.read(), "ndjson")
                    download="lastword-runs.ndjson"
                    data-testid="export-ndjson"
                >
                    "NDJSON"
                </a>
            </p>
            {move || {
                bulk_done
                    .get()
                    .map(|m| {
                        view! {
                            <p class="banner banner-ok" role="status" data-testid="bulk-result">
                                {m}
                                " "
                                <a href="/audit">"See the audit log"</a>
                            </p>
                        }
                    })
            }}
            <Transition fallback=|| ()>
                {move || {
                    can_act
                        .get()
                        .then(|| {
                            view! {
                                <div class="bulk-bar" data-testid="bulk-bar">
                                    <button
                                        type="button"
                                        class="btn"
                                        data-testid="requeue-selected"
                                        disabled=move || selected.get().is_empty()
                                        on:click=move |_| {
                                            bulk_done.set(None);
                                            bulk_scope.set(Some(BulkScope::Tasks(selected.get_untracked())));
                                            bulk_open.set(true);
                                        }
                                    >
                                        {move || format!("Re-queue selected ({})…", selected.get().len())}
                                    </button>
                                    <button
                                        type="button"
                                        class="btn"
                                        data-testid="requeue-matching"
                                        on:click=move |_| {
                                            bulk_done.set(None);
                                            bulk_scope
                                                .set(Some(BulkScope::Filter(query_string.get_untracked())));
                                            bulk_open.set(true);
                                        }
                                    >
                                        "Re-queue all matching…"
                                    </button>
                                </div>
                            }
                        })
                }}
            </Transition>
            <Transition>
                {move || {
                    (bulk_open.get())
                        .then(|| bulk_scope.get())
                        .flatten()
                        .map(|scope| {
                            let done = Callback::new(move |m: String| {
                                bulk_done.set(Some(m));
                                selected.set(Vec::new());
                                answer.refetch();
                            });
                            Suspend::new(bulk_requeue_panel(scope, bulk_open, done))
                        })
                }}
            </Transition>
            {loaded(
                "Loading runs…",
                "runs",
                move || answer.get(),
                move |a| match a {
                    RunsAnswer::Page { page, .. } => {
                        view! {
                            <RunTable page=page selected=selected can_act=can_act trace_links=trace_links />
                        }
                            .into_any()
                    }
                    RunsAnswer::BadFilter(e) => bad_filter_view(e),
                },
            )}
        </section>
    }
}

#[component]
fn RunTable(
    page: RunPage,
    selected: RwSignal<Vec<i64>>,
    can_act: Signal<bool>,
    trace_links: Signal<Option<TraceLinks>>,
) -> impl IntoView {
    let query = use_query_map();
    let next_href = page.next.clone().map(|cursor| {
        let mut q = query.get_untracked();
        q.remove("after");
        q.insert("after", cursor);
        format!("/failures{}", q.to_query_string())
    });
    let newest_href = query.get_untracked().get("after").map(|_| {
        let mut q = query.get_untracked();
        q.remove("after");
        format!("/failures{}", q.to_query_string())
    });
    if page.runs.is_empty() {
        return view! {
            <div class="empty" data-testid="no-runs">
                <p>"No runs match these filters."</p>
                <p class="muted">
                    "Healthy runs end in a token or an action; failures show up here as they happen."
                </p>
            </div>
        }
        .into_any();
    }
    view! {
        <table class="grid runs" data-testid="runs">
            <thead>
                <tr>
                    {move || {
                        can_act
                            .get()
                            .then(|| {
                                view! {
                                    <th scope="col">
                                        <span class="visually-hidden">"Select"</span>
                                    </th>
                                }
                            })
                    }} <th scope="col">"State"</th> <th scope="col">"Task"</th> <th scope="col">"Worker"</th>
                    <th scope="col" class="num" title="lease epoch (fencing token)">
                        "Epoch"
                    </th> <th scope="col">"Claimed"</th> <th scope="col" class="num">
                        "Took"
                    </th> <th scope="col">"Output / error"</th>
                </tr>
            </thead>
            <tbody>
                {page
                    .runs
                    .into_iter()
                    .map(|item| {
                        view! {
                            <RunRow item=item selected=selected can_act=can_act trace_links=trace_links />
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
        <nav class="pager" aria-label="Pages">
            {newest_href.map(|h| view! { <a href=h>"↑ Newest"</a> })}
            {next_href
                .map(|h| {
                    view! {
                        <a href=h rel="next" data-testid="next-page">
                            "Next page →"
                        </a>
                    }
                })}
        </nav>
    }
    .into_any()
}

#[component]
fn RunRow(
    item: RunListItem,
    selected: RwSignal<Vec<i64>>,
    can_act: Signal<bool>,
    trace_links: Signal<Option<TraceLinks>>,
) -> impl IntoView {
    let run = item.run;
    let task_id = run.task_id;
    let run_id = run.id;
    let took = run.finished_at.map(|f| human_duration((f - run.claimed_at).num_seconds()));
    let detail = match run.state {
        RunState::LostLease => view! {
            <span class="label">"discarded output: "</span>
            <q>{run.output.clone().unwrap_or_default()}</q>
        }
        .into_any(),
        RunState::EmptyOutput => {
            view! { <span class="label">"∅ no output — the contract reserves empty for failure"</span> }
                .into_any()
        }
        RunState::Silent => {
            view! { <span class="label">"never reported an end; lease lapsed"</span> }.into_any()
        }
        _ => {
            let text = match (&run.error, &run.error_detail) {
                (Some(e), Some(d)) => format!("{e}: {d}"),
                (Some(e), None) => e.clone(),
                _ => run.output.clone().unwrap_or_default(),
            };
            view! { <span>{text}</span> }.into_any()
        }
    };
    view! {
        <tr data-row="" class=format!("row-{}", run.state.as_str()) data-state=run.state.as_str()>
            {move || {
                can_act
                    .get()
                    .then(|| {
                        view! {
                            <td>
                                <input
                                    type="checkbox"
                                    data-testid="select-task"
                                    aria-label=format!("select task #{task_id}")
                                    prop:checked=move || selected.get().contains(&task_id)
                                    on:change=move |ev| {
                                        let on = event_target_checked(&ev);
                                        selected
                                            .update(|s| {
                                                s.retain(|id| *id != task_id);
                                                if on {
                                                    s.push(task_id);
                                                }
                                            });
                                    }
                                />
                            </td>
                        }
                    })
            }}
            <td>
                <StateBadge state=run.state cause=run.cause />
            </td>
            <td>
                <a href=format!("/tasks/{}", run.task_id)>{format!("#{}", run.task_id)}</a>
                {move || {
                    can_act
                        .get()
                        .then(|| {
                            view! {
                                " "
                                <a
                                    class="row-action"
                                    data-testid="row-requeue"
                                    href=format!("/tasks/{task_id}?act=requeue&run={run_id}")
                                >
                                    "re-queue…"
                                </a>
                            }
                        })
                }}
                " "
                <span class="muted">{item.kind}</span>
                {(item.safety == lastword_core::Safety::Unsafe)
                    .then(|| {
                        view! {
                            <span class="tag tag-unsafe" title="running it twice is not harmless">
                                "unsafe"
                            </span>
                        }
                    })}
            </td>
            <td>
                <a href=format!(
                    "/failures?worker={}",
                    lastword_core::query::encode_component(&run.worker),
                )>{run.worker.clone()}</a>
            </td>
            <td class="num">
                {run.lease_epoch}
                {run
                    .reclaim_reason
                    .map(|c| {
                        view! {
                            " "
                            <span class="reclaim-reason" data-reclaim=c.as_str() title=c.label()>
                                {c.short()}
                            </span>
                        }
                    })}
            </td>
            <td>
                <Time t=run.claimed_at short=true />
            </td>
            <td class="num">{took.unwrap_or_else(|| "—".to_string())}</td>
            <td class="detail">
                {detail}
                {item
                    .text_truncated
                    .then(|| {
                        view! {
                            "… "
                            <a class="muted" data-testid="full-text" href=format!("/tasks/{task_id}")>
                                "full text"
                            </a>
                        }
                    })} " "<TraceLink trace_id=run.trace_id.clone() links=trace_links />
            </td>
        </tr>
    }
}
