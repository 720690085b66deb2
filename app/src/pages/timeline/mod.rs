//! The live timeline: a swimlane per worker over the last N minutes, one bar per run from claim
//! to finish, coloured and shaped by state; lease expiries and re-claims marked; lost-lease
//! completions and empty outputs highlighted. New runs appear and bars grow while you watch;
//! zoom and pause; click a bar to open its task.

use crate::api::timeline::{get_timeline, TimelineData};
use crate::components::badges::state_mark;
use crate::pages::{error_view, live_version, LeaseChecks};
use chrono::{DateTime, Duration, Utc};
use lastword_core::{RunListItem, RunState};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

const ZOOMS: [i64; 4] = [5, 15, 60, 240];

#[component]
pub fn TimelinePage() -> impl IntoView {
    let query = use_query_map();
    let minutes = Memo::new(move |_| {
        query
            .read()
            .get("minutes")
            .and_then(|m| m.parse::<i64>().ok())
            .filter(|m| ZOOMS.contains(m))
            .unwrap_or(15)
    });
    let paused = RwSignal::new(false);
    let live = live_version();
    // Unfinished runs' leases, asked about again around their lapse: shown from each answer.
    let leases = LeaseChecks::new();
    // While paused the data stays as it was; resuming catches up at once.
    let live_key = Memo::new(move |prev: Option<&(u64, Option<DateTime<Utc>>)>| match prev {
        Some(prev) if paused.get() => *prev,
        _ => (live.get(), leases.key.get()),
    });
    let data = Resource::new(move || (minutes.get(), live_key.get()), |(m, _)| get_timeline(m));
    Effect::new(move |_| {
        if let Some(Ok(d)) = data.get() {
            let unfinished = d.runs.iter().filter(|r| r.run.finished_at.is_none());
            leases.show(unfinished.map(|r| r.run.lease_expires_at));
        }
    });
    let prefs = crate::components::time::use_time_prefs();

    view! {
        <Title text="Live timeline" />
        <section class="page">
            <header class="page-head">
                <h1>"Live timeline"</h1>
                <nav class="segmented" aria-label="Zoom">
                    {ZOOMS.into_iter().map(|m| view! {
                        <a href=format!("/timeline?minutes={m}") aria-current=move || (minutes.get() == m).then_some("page")>
                            {if m < 60 { format!("{m} min") } else { format!("{} h", m / 60) }}
                        </a>
                    }).collect_view()}
                </nav>
                <button type="button" class="btn" data-testid="pause" aria-pressed=move || paused.get().to_string()
                    on:click=move |_| paused.update(|p| *p = !*p)>
                    {move || if paused.get() { "▶ Resume" } else { "❚❚ Pause" }}
                </button>
                <Legend />
            </header>
            <Suspense fallback=|| view! { <p class="muted">"Loading the timeline…"</p> }>
                {move || data.get().map(|r| match r {
                    Ok(d) => {
                        let frozen = paused.get_untracked();
                        view! { <Swimlanes data=d minutes=minutes.get_untracked() now=prefs.now frozen=frozen /> }.into_any()
                    }
                    Err(e) => error_view("the timeline", e),
                })}
            </Suspense>
        </section>
    }
}

#[component]
fn Legend() -> impl IntoView {
    view! {
        <ul class="legend" aria-label="Legend">
            {RunState::ALL.into_iter().map(|s| {
                let (glyph, label) = state_mark(s);
                view! { <li class=format!("state-{}", s.as_str())><span class="swatch" aria-hidden="true">{glyph}</span>{label}</li> }
            }).collect_view()}
        </ul>
    }
}

#[component]
fn Swimlanes(data: TimelineData, minutes: i64, now: RwSignal<DateTime<Utc>>, frozen: bool) -> impl IntoView {
    if data.runs.is_empty() {
        return view! {
            <div class="empty" data-testid="timeline-empty">
                <p>{format!("No runs in the last {minutes} minutes.")}</p>
                <p class="muted">"Start a fleet (or `lastword demo`) and runs appear here as they are claimed."</p>
            </div>
        }
        .into_any();
    }
    let mut workers: Vec<String> = data.runs.iter().map(|r| r.run.worker.clone()).collect();
    workers.sort();
    workers.dedup();
    let lane_h = 26.0;
    let label_w = 110.0;
    let width = 1000.0;
    let height = lane_h * workers.len() as f64 + 22.0;
    let server_now = data.now;
    // The clock keeps moving between refetches (bars grow) unless paused; the server's `now`
    // anchors it so a skewed browser clock does not shift the picture.
    let skew = Utc::now() - server_now;
    let view_now = move || if frozen { server_now } else { now.get() - skew };
    let runs = data.runs;
    let caption = format!(
        "{} runs by {} workers. Click a bar to open its task. Red tick: lease lapsed; ⇄ lost lease; ∅ empty output; ↻n: re-claim (epoch n).",
        runs.len(),
        workers.len()
    );
    let workers_for_lanes = workers.clone();
    view! {
        <figure class="timeline" data-testid="timeline">
            <svg viewBox=format!("0 0 {width} {height}") role="img" aria-label=format!("Runs per worker over the last {minutes} minutes")>
                {workers_for_lanes.iter().enumerate().map(|(i, w)| view! {
                    <g class="swimlane">
                        <rect class="lane-bg" x=0 y=i as f64 * lane_h width=width height=lane_h />
                        <text class="lane-label" x=4 y=i as f64 * lane_h + 17.0>{w.clone()}</text>
                    </g>
                }).collect_view()}
                {move || {
                    let end = view_now();
                    let start = end - Duration::minutes(minutes);
                    let span = (end - start).num_milliseconds() as f64;
                    let x = move |t: DateTime<Utc>| {
                        label_w + ((t - start).num_milliseconds() as f64 / span).clamp(0.0, 1.0) * (width - label_w - 4.0)
                    };
                    runs.iter().map(|item| {
                        let lane = workers.iter().position(|w| *w == item.run.worker).unwrap_or(0) as f64;
                        bar(item, lane * lane_h, lane_h, end, &x)
                    }).collect_view()
                }}
            </svg>
            <figcaption class="muted">{caption}</figcaption>
        </figure>
    }
    .into_any()
}

fn bar(
    item: &RunListItem,
    y: f64,
    lane_h: f64,
    now: DateTime<Utc>,
    x: &impl Fn(DateTime<Utc>) -> f64,
) -> impl IntoView {
    let r = &item.run;
    // Live state: an unfinished run turns silent the moment its lease lapses, without a refetch.
    // The shared rule decides (tokens only matter for finished runs, whose state the server
    // already decided with the configured ones).
    let state = if r.finished_at.is_none() {
        lastword_core::run_state(&r.facts(), now, &lastword_core::Tokens::default()).0
    } else {
        r.state
    };
    let end = r.finished_at.unwrap_or(now);
    let (x0, x1) = (x(r.claimed_at), x(end));
    let (glyph, label) = state_mark(state);
    let highlight = matches!(state, RunState::LostLease | RunState::EmptyOutput);
    let expiry = (r.lease_expires_at < end).then(|| {
        let ex = x(r.lease_expires_at);
        view! { <line class="expiry lapsed" x1=ex x2=ex y1=y + 2.0 y2=y + lane_h - 2.0 /> }
    });
    let title = format!(
        "task #{} ({}) · {} · epoch {} · {}{}",
        r.task_id,
        item.kind,
        r.worker,
        r.lease_epoch,
        label,
        r.output
            .as_deref()
            .map(|o| format!(": {}", o.chars().take(80).collect::<String>()))
            .unwrap_or_default()
    );
    // The <g> root makes the macro build an SVG <a> (an HTML one would not render inside <svg>).
    view! {
        <g>
        <a href=format!("/tasks/{}", r.task_id) class="bar-link" data-state=state.as_str() data-task=r.task_id>
            <rect
                class=format!("bar state-{}{}", state.as_str(), if highlight { " highlight" } else { "" })
                x=x0 y=y + 4.0 width=(x1 - x0).max(3.0) height=lane_h - 8.0 rx=2
            >
                <title>{title}</title>
            </rect>
            {(highlight || r.lease_epoch > 1).then(|| view! {
                <text class="bar-glyph" x=x0 + 2.0 y=y + lane_h - 9.0>{if highlight { glyph.to_string() } else { format!("↻{}", r.lease_epoch) }}</text>
            })}
            {expiry}
        </a>
        </g>
    }
}
