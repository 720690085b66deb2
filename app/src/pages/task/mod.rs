//! A task's story: its fields, the current lease, and every attempt on one timeline — who
//! claimed it when, where a lease lapsed, who re-claimed it, where a late final write was
//! rejected, when two workers both ran it, and the effects each run recorded.

use crate::api::actions::act_on_task;
use crate::api::tasks::get_task;
use crate::auth::use_can_act;
use crate::components::actions::{ActionFeedback, ActionUi, Feedback, Submission, TaskActions};
use crate::components::audit_line::AuditLine;
use crate::components::badges::StateBadge;
use crate::components::meter::LeaseMeter;
use crate::components::table::{Column, DataTable};
use crate::components::text::LongText;
use crate::components::time::{relative, use_time_prefs, Time};
use crate::components::trace::TraceLink;
use crate::pages::{live_version_where, loaded, LeaseChecks};
use chrono::{DateTime, Utc};
use lastword_core::leases::lease_used_percent;
use lastword_core::query::encode_component;
use lastword_core::time_text;
use lastword_core::{ActionKind, Effect, Run, TaskDetail};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_params_map, use_query_map};
use story_layout::{story_layout, StoryGeometry};

pub mod story_layout;

const TASK_RUNS_COLUMNS: &[Column] = &[
    Column::text("Epoch"),
    Column::text("Re-claimed").titled("why this claim took the task from the run before it"),
    Column::text("Worker"),
    Column::text("State"),
    Column::text("Claimed"),
    Column::text("Finished"),
    Column::text("Final write").titled("rows matched by the final owner-guarded write"),
    Column::text("Output / error"),
];

const EFFECTS_COLUMNS: &[Column] = &[
    Column::text("Kind"),
    Column::text("Idempotency key"),
    Column::text("Epoch").titled("the fencing token of the run that caused it"),
    Column::text("Run"),
    Column::text("At"),
];

#[component]
pub fn TaskPage() -> impl IntoView {
    let params = use_params_map();
    let query = use_query_map();
    let id = Memo::new(move |_| params.read().get("id").and_then(|s| s.parse::<i64>().ok()));
    // Only changes to this task (its runs, effects, audit) refetch it.
    let live = live_version_where(move |batch| id.get_untracked().is_some_and(|id| batch.touches_task(id)));
    let ui = ActionUi::new();
    // From a failure row's "re-queue" link: open the confirmation, remember the run.
    ui.run_id.set(query.get_untracked().get("run").and_then(|r| r.parse().ok()));
    if query.get_untracked().get("act").as_deref() == Some("requeue") {
        ui.open(ActionKind::Requeue);
    }
    // Live updates refetch the task, except while a confirmation is open: it must submit the
    // epoch the operator is looking at (a stale one is refused by the server, never applied).
    // Its leases are asked about again around their lapse: shown from each answer.
    let leases = LeaseChecks::new();
    let live_key =
        Memo::new(move |prev: Option<&(u64, Option<DateTime<Utc>>)>| match (ui.open.get(), prev) {
            (Some(_), Some(prev)) => *prev,
            _ => (live.get(), leases.key.get()),
        });
    let detail = Resource::new(
        move || (id.get(), live_key.get()),
        |(id, _)| async move {
            match id {
                Some(id) => get_task(id).await,
                None => Ok(None),
            }
        },
    );
    // An action's answer: say what happened, close the form, and show the task as it is.
    let act =
        Action::new(|(task_id, kind, request): &Submission| act_on_task(*task_id, *kind, request.clone()));
    leptos::prelude::Effect::new(move |_| {
        if let Some(answer) = act.value().get() {
            ui.feedback.set(Some(Feedback::of(&answer)));
            ui.open.set(None);
            detail.refetch();
        }
    });
    let submit = Callback::new(move |submission: Submission| {
        act.dispatch(submission);
    });
    let pending = Signal::derive(move || act.pending().get());
    leptos::prelude::Effect::new(move |_| {
        if let Some(Ok(Some(d))) = detail.get() {
            let unfinished = d.runs.iter().filter(|r| r.finished_at.is_none()).map(|r| r.lease_expires_at);
            leases.show(d.task.lease_expires_at.into_iter().chain(unfinished));
        }
    });
    view! {
        // `try_get`: on the server the title is written into the page's head from outside this
        // page's reactive owner, once the owner may already be gone (seen under concurrent
        // renders: a panic, "accessed a reactive value … already disposed").
        <Title text=move || {
            id.try_get().flatten().map(|i| format!("Task #{i}")).unwrap_or_else(|| "Task".into())
        } />
        <section class="page">
            <ActionFeedback ui=ui />
            {loaded(
                "Loading the task…",
                "the task",
                move || detail.get(),
                move |r| match r {
                    Some(d) => view! { <TaskBody detail=d ui=ui submit=submit pending=pending /> }.into_any(),
                    None => {
                        view! {
                            <div class="empty">
                                <h1>"No such task"</h1>
                                <p>
                                    "It may have been deleted, or the id is wrong. "
                                    <a href="/failures">"Back to failures"</a>
                                </p>
                            </div>
                        }
                            .into_any()
                    }
                },
            )}
        </section>
    }
}

#[component]
fn TaskBody(
    detail: TaskDetail,
    ui: ActionUi,
    submit: Callback<Submission>,
    pending: Signal<bool>,
) -> impl IntoView {
    let t = detail.task.clone();
    let prefs = use_time_prefs();
    let can_act = use_can_act();
    let trace_links = crate::site::use_trace_links();
    let retry = crate::site::use_retry_policy();
    let for_actions = detail.clone();
    let current_run = detail.runs.iter().find(|r| r.lease_epoch == t.lease_epoch).cloned();
    let heartbeat = current_run.as_ref().and_then(|r| r.heartbeat_at.or(Some(r.claimed_at)));
    let expires = t.lease_expires_at;
    view! {
        <header class="page-head">
            <h1>{format!("Task #{}", t.id)}</h1>
            <span class="muted">{t.kind.clone()}</span>
            <span class=format!("tag status-{}", t.status)>{t.status.as_str()}</span>
            {(t.dead_reason == Some(lastword_core::DeadReason::Loop))
                .then(|| {
                    view! {
                        <span
                            class="tag tag-alert"
                            data-testid="quarantined"
                            title="a runner stopped claiming it after a streak of failed claims"
                        >
                            "quarantined: re-claim loop"
                        </span>
                    }
                })}
            {(t.safety == lastword_core::Safety::Unsafe)
                .then(|| view! { <span class="tag tag-unsafe">"unsafe"</span> })}
            {detail
                .double_execution
                .then(|| {
                    view! {
                        <span class="tag tag-double" data-testid="double-execution">
                            "⧉ executed twice"
                        </span>
                    }
                })}
            {detail
                .needs_compensation
                .then(|| {
                    view! {
                        <span class="tag tag-alert" data-testid="needs-compensation">
                            "⚠ needs compensation"
                        </span>
                    }
                })}
            <span class="spacer"></span>
            <span class="exports">
                "Export: "
                <a
                    href=format!("/api/v1/tasks/{}/export?format=md", t.id)
                    download=format!("task-{}.md", t.id)
                    data-testid="export-md"
                >
                    "Markdown"
                </a> " · "
                <a
                    href=format!("/api/v1/tasks/{}/export?format=json", t.id)
                    download=format!("task-{}.json", t.id)
                    data-testid="export-json"
                >
                    "JSON"
                </a>
            </span>
        </header>
        {detail
            .acknowledgements
            .iter()
            .map(|a| {
                let what = a.attention.map(|k| k.label()).unwrap_or("attention");
                view! {
                    <p class="banner banner-ack" data-testid="acknowledged">
                        <strong>{format!("⚑ {what}: taken by {}", a.actor)}</strong>
                        " "
                        <Time t=a.created_at />
                        {format!(" — {}", a.reason)}
                    </p>
                }
            })
            .collect_view()}
        {detail
            .attention
            .iter()
            .filter(|k| !detail.acknowledgements.iter().any(|a| a.attention == Some(**k)))
            .map(|k| {
                view! {
                    <p class="banner banner-warn" data-testid="unacknowledged">
                        {format!("Needs someone: {} — nobody has taken it yet.", k.label())}
                    </p>
                }
            })
            .collect_view()}
        {t
            .compensated_at
            .map(|at| {
                view! {
                    <p class="banner banner-ok" data-testid="compensated">
                        {format!("Compensated by {} ", t.compensated_by.clone().unwrap_or_default())}
                        <Time t=at />
                        {format!(": {}", t.compensation_reason.clone().unwrap_or_default())}
                        {t.compensation_ref.clone().map(|r| format!(" (ref {r})"))}
                    </p>
                }
            })}
        {move || {
            can_act
                .get()
                .then(|| {
                    let doomed = retry.get().doomed_by(for_actions.runs.last());
                    view! {
                        <TaskActions
                            detail=for_actions.clone()
                            ui=ui
                            submit=submit
                            pending=pending
                            doomed=doomed
                        />
                    }
                })
        }}
        <div class="two-col">
            <dl class="facts">
                <div>
                    <dt>"Source"</dt>
                    <dd>{t.source.as_str()}</dd>
                </div>
                <div>
                    <dt>"Safety"</dt>
                    <dd>{t.safety.as_str()}</dd>
                </div>
                <div>
                    <dt>"Attempts"</dt>
                    <dd>{format!("{} of {}", t.attempts, t.max_attempts)}</dd>
                </div>
                <div>
                    <dt>"Created"</dt>
                    <dd>
                        <Time t=t.created_at />
                    </dd>
                </div>
                <div>
                    <dt>"Updated"</dt>
                    <dd>
                        <Time t=t.updated_at />
                    </dd>
                </div>
                <div>
                    <dt>"Result"</dt>
                    <dd>
                        <LongText text=t.result.clone().unwrap_or_else(|| "—".into()) />
                    </dd>
                </div>
                <div>
                    <dt>"Payload"</dt>
                    <dd>
                        <code>{t.payload.to_string()}</code>
                    </dd>
                </div>
            </dl>
            <section class="lease" aria-labelledby="lease-title" data-testid="lease">
                <h2 id="lease-title">"Current lease"</h2>
                {match t.owner.clone() {
                    None => {
                        view! { <p class="muted">{format!("Not leased (epoch {}).", t.lease_epoch)}</p> }
                            .into_any()
                    }
                    Some(owner) => {
                        view! {
                            <dl class="facts">
                                <div>
                                    <dt>"Holder"</dt>
                                    <dd>
                                        <a href=format!(
                                            "/failures?worker={}&state=running,silent",
                                            encode_component(&owner),
                                        )>{owner.clone()}</a>
                                    </dd>
                                </div>
                                <div>
                                    <dt>"Epoch"</dt>
                                    <dd title="fencing token">{t.lease_epoch}</dd>
                                </div>
                                <div>
                                    <dt>"Expires"</dt>
                                    <dd data-testid="lease-countdown">
                                        {move || match expires {
                                            Some(e) if e > prefs.now.get() => {
                                                format!("{} (live)", relative(e, prefs.now.get()))
                                            }
                                            Some(e) => format!("lapsed {}", relative(e, prefs.now.get())),
                                            None => "—".into(),
                                        }}
                                    </dd>
                                </div>
                                <div>
                                    <dt>"Last heartbeat"</dt>
                                    <dd>
                                        {move || {
                                            heartbeat
                                                .map(|h| relative(h, prefs.now.get()))
                                                .unwrap_or_else(|| "never".into())
                                        }}
                                        {heartbeat
                                            .zip(expires)
                                            .map(|(h, e)| {
                                                let used = Signal::derive(move || {
                                                    lease_used_percent(
                                                        (prefs.now.get() - h).num_milliseconds(),
                                                        (e - h).num_milliseconds(),
                                                    )
                                                });
                                                view! {
                                                    " "
                                                    <LeaseMeter used=used />
                                                }
                                            })}
                                    </dd>
                                </div>
                            </dl>
                        }
                            .into_any()
                    }
                }}
            </section>
        </div>
        <section aria-labelledby="story-title">
            <h2 id="story-title">"Story"</h2>
            <Story runs=detail.runs.clone() effects=detail.effects.clone() now=detail.as_of />
        </section>
        <section aria-labelledby="runs-title">
            <h2 id="runs-title">{format!("Runs ({})", detail.runs.len())}</h2>
            <DataTable columns=TASK_RUNS_COLUMNS testid="task-runs">
                {detail
                    .runs
                    .iter()
                    .map(|r| {
                        let write = match r.completion_rows {
                            Some(0) => "rejected (0 rows)",
                            Some(_) => "accepted",
                            None => "—",
                        };
                        let text = match (&r.error, &r.error_detail) {
                            (Some(e), Some(d)) => format!("{e}: {d}"),
                            (Some(e), None) => e.clone(),
                            _ => r.output.clone().unwrap_or_default(),
                        };
                        view! {
                            <tr data-row="" class=format!("row-{}", r.state.as_str())>
                                <td class="num">{r.lease_epoch}</td>
                                <td data-reclaim=r
                                    .reclaim_reason
                                    .map(|c| {
                                        c.as_str()
                                    })>
                                    {match r.reclaim_reason {
                                        Some(c) => {
                                            view! { <span title=c.label()>{c.short()}</span> }.into_any()
                                        }
                                        None => view! { <span class="muted">"first claim"</span> }.into_any(),
                                    }}
                                </td>
                                <td>
                                    <a href=format!(
                                        "/failures?worker={}",
                                        encode_component(&r.worker),
                                    )>{r.worker.clone()}</a>
                                </td>
                                <td>
                                    <StateBadge state=r.state cause=r.cause />
                                </td>
                                <td>
                                    <Time t=r.claimed_at short=true />
                                </td>
                                <td>{r.finished_at.map(|f| view! { <Time t=f short=true /> })}</td>
                                <td>{write}</td>
                                <td class="detail">
                                    <LongText text=text />
                                    " "
                                    <TraceLink trace_id=r.trace_id.clone() links=trace_links />
                                </td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </DataTable>
        </section>
        <section aria-labelledby="effects-title">
            <h2 id="effects-title">{format!("Effects ({})", detail.effects.len())}</h2>
            {if detail.effects.is_empty() {
                view! { <p class="muted">"No side effects recorded."</p> }.into_any()
            } else {
                view! {
                    <DataTable columns=EFFECTS_COLUMNS testid="effects">
                        {detail
                            .effects
                            .iter()
                            .map(|e| {
                                view! {
                                    <tr>
                                        <td>{e.kind.clone()}</td>
                                        <td>
                                            <code>{e.idempotency_key.clone()}</code>
                                        </td>
                                        <td class="num">{e.lease_epoch}</td>
                                        <td class="num">{e.run_id}</td>
                                        <td>
                                            <Time t=e.created_at short=true />
                                        </td>
                                    </tr>
                                }
                            })
                            .collect_view()}
                    </DataTable>
                }
                    .into_any()
            }}
        </section>
        <section aria-labelledby="audit-title">
            <h2 id="audit-title">"Audit trail"</h2>
            {if detail.audit.is_empty() {
                view! { <p class="muted">"No operator actions on this task."</p> }.into_any()
            } else {
                view! {
                    <ul class="audit" data-testid="task-audit">
                        {detail
                            .audit
                            .iter()
                            .map(|a| {
                                view! {
                                    <li>
                                        <AuditLine action=a.clone() />
                                    </li>
                                }
                            })
                            .collect_view()}
                    </ul>
                    <p>
                        <a href=format!("/audit?task={}", t.id)>"This task in the audit log"</a>
                    </p>
                }
                    .into_any()
            }}
        </section>
    }
}

/// The attempts drawn on one time axis, a lane per run, as of `now`: the instant the server read
/// them (never the wall clock, which differs between the server's render and hydration). Where
/// each mark goes is [`story_layout`]'s; this only writes the SVG.
#[component]
fn Story(runs: Vec<Run>, effects: Vec<Effect>, now: DateTime<Utc>) -> impl IntoView {
    let Some(l) = story_layout(&runs, &effects, now, &StoryGeometry::default()) else {
        return view! { <p class="muted">"Never claimed yet."</p> }.into_any();
    };
    let shaded = l
        .overlaps
        .iter()
        .map(|o| {
            view! {
                <rect class="overlap" x=o.x y=0 width=o.w height=l.overlap_h()>
                    <title>"two workers ran this task at once"</title>
                </rect>
            }
        })
        .collect_view();
    let lanes = runs
        .iter()
        .zip(&l.lanes)
        .map(|(r, lane)| {
            let (mid_y, bar_h) = (l.mid_y(lane), l.bar_h());
            let expiry = lane.expiry.map(|tick| {
                view! {
                    <line
                        class=if tick.lapsed { "expiry lapsed" } else { "expiry" }
                        x1=tick.x
                        x2=tick.x
                        y1=lane.y - 2.0
                        y2=lane.y + bar_h + 2.0
                    >
                        <title>{if tick.lapsed { "lease lapsed here" } else { "lease expiry" }}</title>
                    </line>
                }
            });
            let rejected = lane.rejected_x.map(|fx| {
                view! {
                    <text class="rejected" x=fx - 5.0 y=mid_y + 6.0>
                        "✕"
                        <title>"final write rejected: the lease was lost"</title>
                    </text>
                }
            });
            let run_effects = lane
                .effects
                .iter()
                .map(|&(k, cx)| {
                    let e = &effects[k];
                    view! {
                        <circle class="effect" cx=cx cy=mid_y r=5>
                            <title>
                                {format!(
                                    "effect {} under epoch {} ({})",
                                    e.kind,
                                    e.lease_epoch,
                                    e.idempotency_key,
                                )}
                            </title>
                        </circle>
                    }
                })
                .collect_view();
            view! {
                <g class=format!("lane state-{}", r.state.as_str()) data-epoch=r.lease_epoch data-run=r.id>
                    <text class="lane-label" x=4 y=mid_y + 4.0>
                        {format!("{} · epoch {}", r.worker, r.lease_epoch)}
                    </text>
                    <rect
                        class=format!("bar state-{}", r.state.as_str())
                        x=lane.bar.0
                        y=lane.y
                        width=lane.bar.1
                        height=bar_h
                        rx=3
                    >
                        <title>{format!("{}: {}", r.worker, r.state.as_str())}</title>
                    </rect>
                    {expiry}
                    {rejected}
                    {run_effects}
                </g>
            }
        })
        .collect_view();
    let worker_of = |id: i64| runs.iter().find(|r| r.id == id).map(|r| r.worker.clone()).unwrap_or_default();
    let reclaims = l
        .reclaims
        .iter()
        .map(|c| {
            view! {
                <path class="reclaim" d=c.path() data-from-run=c.from_run data-to-run=c.to_run>
                    <title>
                        {format!(
                            "{} re-claimed after {}'s lease lapsed",
                            worker_of(c.to_run),
                            worker_of(c.from_run),
                        )}
                    </title>
                </path>
            }
        })
        .collect_view();
    view! {
        <figure class="story" data-testid="story">
            <svg
                viewBox=format!("0 0 {} {}", l.g.width, l.height())
                role="img"
                aria-label="Every attempt on one time axis"
            >
                {shaded}
                {lanes}
                {reclaims}
                <text class="axis" x=l.g.label_w y=l.axis_y()>
                    {format!("{} UTC", time_text::hms(&l.span.0))}
                </text>
                <text class="axis" text-anchor="end" x=l.g.width - l.g.right_pad y=l.axis_y()>
                    {format!("{} UTC", time_text::hms(&l.span.1))}
                </text>
            </svg>
            <figcaption class="muted">
                "Bars: runs from claim to finish. Tick: lease expiry (red when it lapsed before the run ended). "
                "Curve: a re-claim. ✕: a final write rejected. Dots: effects. Shaded: two workers ran it at once."
            </figcaption>
        </figure>
    }
    .into_any()
}
