//! The live timeline: a swimlane per worker over the last N minutes, one bar per run from claim
//! to finish, coloured and patterned by state; every re-claim drawn as a connector from the
//! earlier attempt's lease lapse to the re-claiming run, across lanes; a time axis and a "now"
//! line. Runs too narrow to draw merge into density cells (failures on top); glyphs appear only
//! where they fit. Hovering or focusing a bar lights up every attempt of its task.
//!
//! Where each mark goes is decided in [`layout`] (pure, unit-tested); this module only draws
//! it. Between answers the picture moves with the clock as one translated group (and running
//! bars grow), so a second passing redraws two attributes, not every bar.

pub mod layout;

use crate::api::timeline::{get_timeline, TimelineData};
use crate::components::badges::{cause_label, state_mark};
use crate::pages::{error_view, live_version, LeaseChecks};
use chrono::{DateTime, Utc};
use lastword_core::{RunListItem, RunState};
use layout::{Geometry, LaneBy, LaneOrder, Layout, Reclaim, Scale, Span};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use std::collections::HashMap;

const ZOOMS: [i64; 4] = [5, 15, 60, 240];
/// Characters of a run's output shown in its tooltip; the task page has the whole text.
const OUTPUT_PREFIX: usize = 80;
/// Lanes drawn before "show all": a 200-worker fleet stays one screen, most urgent first.
const DEFAULT_LANES: usize = 40;
/// "Show all lanes": more than any fleet this page is for (and within a 32-bit `usize`, which
/// the browser build has).
const ALL_LANES: usize = 10_000;
/// Half the width of a tick label (`17:48:20` at 11 px), for keeping labels whole.
const TICK_LABEL_HALF: f64 = 24.0;
/// A drag shorter than this (user units) is a click, not a zoom.
const MIN_BRUSH: f64 = 6.0;

/// Everything the URL says about what the timeline draws, so a pasted link opens the same view.
#[derive(Clone, Debug, PartialEq)]
pub struct TimelineQuery {
    pub minutes: i64,
    pub order: LaneOrder,
    /// What a lane holds: a worker (default), a kind or a state.
    pub by: LaneBy,
    /// A zoomed-in fixed stretch (drag on the chart); `None` follows now.
    pub zoom: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// Substring filters on worker and kind; a state to keep only.
    pub worker: String,
    pub kind: String,
    pub state: Option<RunState>,
    /// How many lanes to draw.
    pub lanes: usize,
}

impl Default for TimelineQuery {
    fn default() -> Self {
        TimelineQuery {
            minutes: 15,
            order: LaneOrder::default(),
            by: LaneBy::default(),
            zoom: None,
            worker: String::new(),
            kind: String::new(),
            state: None,
            lanes: DEFAULT_LANES,
        }
    }
}

impl TimelineQuery {
    /// Reads the query string's pairs; anything malformed falls back to the default for it.
    pub fn from_pairs<'a>(get: impl Fn(&str) -> Option<String> + 'a) -> Self {
        let d = TimelineQuery::default();
        let time = |k: &str| {
            get(k).and_then(|v| DateTime::parse_from_rfc3339(&v).ok()).map(|t| t.with_timezone(&Utc))
        };
        let zoom = match (time("from"), time("to")) {
            (Some(a), Some(b))
                if a < b && b - a <= chrono::Duration::minutes(crate::api::timeline::MAX_MINUTES) =>
            {
                Some((a, b))
            }
            _ => None,
        };
        TimelineQuery {
            minutes: get("minutes")
                .and_then(|m| m.parse().ok())
                .filter(|m| ZOOMS.contains(m))
                .unwrap_or(d.minutes),
            order: get("order").and_then(|o| LaneOrder::parse(&o)).unwrap_or(d.order),
            by: get("by").and_then(|b| LaneBy::parse(&b)).unwrap_or(d.by),
            zoom,
            worker: get("worker").unwrap_or_default().trim().to_string(),
            kind: get("kind").unwrap_or_default().trim().to_string(),
            state: get("state").and_then(|s| s.parse().ok()),
            lanes: get("lanes").and_then(|n| n.parse().ok()).filter(|n| *n > 0).unwrap_or(d.lanes),
        }
    }

    /// This view's URL.
    pub fn href(&self) -> String {
        let mut pairs =
            vec![("minutes", self.minutes.to_string()), ("order", self.order.as_str().to_string())];
        if self.by != LaneBy::Worker {
            pairs.push(("by", self.by.as_str().to_string()));
        }
        if let Some((from, to)) = self.zoom {
            pairs.push(("from", from.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)));
            pairs.push(("to", to.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)));
        }
        for (k, v) in [("worker", &self.worker), ("kind", &self.kind)] {
            if !v.is_empty() {
                pairs.push((k, v.clone()));
            }
        }
        if let Some(s) = self.state {
            pairs.push(("state", s.as_str().to_string()));
        }
        if self.lanes != DEFAULT_LANES {
            pairs.push(("lanes", self.lanes.to_string()));
        }
        let query: Vec<String> = pairs
            .into_iter()
            .map(|(k, v)| format!("{k}={}", lastword_core::query::encode_component(&v)))
            .collect();
        format!("/timeline?{}", query.join("&"))
    }

    fn altered(&self, change: impl FnOnce(&mut Self)) -> Self {
        let mut next = self.clone();
        change(&mut next);
        next
    }

    /// Whether a run passes the worker, kind and state filters.
    fn keeps(&self, item: &RunListItem, state: RunState) -> bool {
        (self.worker.is_empty() || item.run.worker.contains(&self.worker))
            && (self.kind.is_empty() || item.kind.contains(&self.kind))
            && self.state.is_none_or(|s| s == state)
    }
}

#[component]
pub fn TimelinePage() -> impl IntoView {
    let query = use_query_map();
    let q = Memo::new(move |_| query.with(|m| TimelineQuery::from_pairs(|k| m.get(k))));
    let paused = RwSignal::new(false);
    let live = live_version();
    // Changes that arrived while paused: the view holds still, the count says what waits.
    let waiting = RwSignal::new(0u64);
    Effect::new(move |_| {
        live.track();
        if paused.get_untracked() {
            waiting.update(|n| *n += 1);
        }
    });
    // Unfinished runs' leases, asked about again around their lapse: shown from each answer.
    let leases = LeaseChecks::new();
    // While paused the data stays as it was; resuming catches up at once.
    let live_key = Memo::new(move |prev: Option<&(u64, Option<DateTime<Utc>>)>| match prev {
        Some(prev) if paused.get() => *prev,
        _ => (live.get(), leases.key.get()),
    });
    let data = Resource::new(
        move || (q.with(|q| (q.minutes, q.zoom)), live_key.get()),
        |((m, zoom), _)| get_timeline(m, zoom.map(|z| z.0), zoom.map(|z| z.1)),
    );
    Effect::new(move |_| {
        if let Some(Ok(d)) = data.get() {
            let unfinished = d.runs.iter().filter(|r| r.run.finished_at.is_none());
            leases.show(unfinished.map(|r| r.run.lease_expires_at));
        }
    });
    let prefs = crate::components::time::use_time_prefs();
    let state_options = move || {
        let chosen = q.with(|q| q.state);
        std::iter::once(view! { <option value="" selected=chosen.is_none()>"any state"</option> }.into_any())
            .chain(RunState::ALL.into_iter().map(move |s| {
                view! { <option value=s.as_str() selected=chosen == Some(s)>{state_mark(s).1}</option> }
                    .into_any()
            }))
            .collect_view()
    };

    view! {
        <Title text="Live timeline" />
        <section class="page">
            <header class="page-head">
                <h1>"Live timeline"</h1>
                <nav class="segmented" aria-label="Window">
                    {ZOOMS.into_iter().map(|m| view! {
                        <a href=move || q.with(|q| q.altered(|n| { n.minutes = m; n.zoom = None; }).href())
                            aria-current=move || q.with(|q| q.zoom.is_none() && q.minutes == m).then_some("page")>
                            {if m < 60 { format!("{m} min") } else { format!("{} h", m / 60) }}
                        </a>
                    }).collect_view()}
                </nav>
                <nav class="segmented" aria-label="Lane order">
                    {[(LaneOrder::RecentFailure, "recent failure first"), (LaneOrder::ByName, "by name")].into_iter().map(|(o, label)| view! {
                        <a href=move || q.with(|q| q.altered(|n| n.order = o).href()) aria-current=move || (q.with(|q| q.order) == o).then_some("page")>{label}</a>
                    }).collect_view()}
                </nav>
                <nav class="segmented" aria-label="Lanes">
                    {LaneBy::ALL.into_iter().map(|b| view! {
                        <a href=move || q.with(|q| q.altered(|n| n.by = b).href()) aria-current=move || (q.with(|q| q.by) == b).then_some("page")>
                            {format!("per {}", b.as_str())}
                        </a>
                    }).collect_view()}
                </nav>
                <button type="button" class="btn" data-testid="pause" aria-pressed=move || paused.get().to_string()
                    on:click=move |_| { paused.update(|p| *p = !*p); waiting.set(0); }>
                    {move || if paused.get() { "▶ Resume" } else { "❚❚ Pause" }}
                </button>
                <span class="muted" data-testid="waiting">{move || (paused.get() && waiting.get() > 0).then(|| format!("{} updates waiting", waiting.get()))}</span>
                <Legend />
            </header>
            <form class="filters timeline-filters" method="get" action="/timeline" aria-label="Filter lanes">
                <input type="hidden" name="minutes" value=move || q.with(|q| q.minutes.to_string()) />
                <input type="hidden" name="order" value=move || q.with(|q| q.order.as_str()) />
                <input type="hidden" name="by" value=move || q.with(|q| q.by.as_str()) />
                {move || q.with(|q| q.zoom.map(|(a, b)| view! {
                    <input type="hidden" name="from" value=a.to_rfc3339_opts(chrono::SecondsFormat::Millis, true) />
                    <input type="hidden" name="to" value=b.to_rfc3339_opts(chrono::SecondsFormat::Millis, true) />
                }))}
                <label>"worker " <input type="search" name="worker" value=move || q.with(|q| q.worker.clone()) placeholder="any" /></label>
                <label>"kind " <input type="search" name="kind" value=move || q.with(|q| q.kind.clone()) placeholder="any" /></label>
                <label>"state " <select name="state">{state_options}</select></label>
                <button type="submit" class="btn">"Filter"</button>
                {move || q.with(|q| q.zoom.map(|_| {
                    let back = q.altered(|n| n.zoom = None).href();
                    view! { <a class="btn" data-testid="zoom-out" href=back>{format!("← back to the last {} min, live", q.minutes)}</a> }
                }))}
            </form>
            <Suspense fallback=|| view! { <p class="muted">"Loading the timeline…"</p> }>
                {move || data.get().map(|r| match r {
                    Ok(d) => {
                        // Redrawn for a new answer or a new order, filter or lane count (those
                        // need no new data); a pause only holds the next answers back.
                        let frozen = paused.get_untracked() || d.fixed.is_some();
                        view! { <Swimlanes data=d query=q.get() now=prefs.now utc=prefs.utc frozen=frozen /> }.into_any()
                    }
                    Err(e) => error_view("the timeline", e),
                })}
            </Suspense>
        </section>
    }
}

#[component]
fn Legend() -> impl IntoView {
    let reclaims = [Reclaim::LostLease, Reclaim::Silent, Reclaim::Retry, Reclaim::Requeue];
    view! {
        <ul class="legend" aria-label="Legend">
            {RunState::ALL.into_iter().map(|s| {
                let (glyph, label) = state_mark(s);
                view! { <li class=format!("state-{}", s.as_str())><span class="swatch" aria-hidden="true">{glyph}</span>{label}</li> }
            }).collect_view()}
            {reclaims.into_iter().map(|r| view! {
                <li class=format!("reclaim-key reason-{}", r.as_str())><span class="swatch" aria-hidden="true">"⤳"</span>{r.label()}</li>
            }).collect_view()}
        </ul>
    }
}

/// The state an unfinished run is drawn in at `now` (it turns silent the moment its lease
/// lapses); a finished run's state is the server's, decided with the configured tokens.
fn state_at(r: &lastword_core::Run, now: DateTime<Utc>) -> RunState {
    if r.finished_at.is_none() {
        lastword_core::run_state(&r.facts(), now, &lastword_core::Tokens::default()).0
    } else {
        r.state
    }
}

fn span_of(item: &RunListItem, now: DateTime<Utc>, by: LaneBy) -> Span {
    let r = &item.run;
    let state = state_at(r, now);
    Span {
        run: r.id,
        task: r.task_id,
        lane: match by {
            LaneBy::Worker => r.worker.clone(),
            LaneBy::Kind => item.kind.clone(),
            LaneBy::State => state_mark(state).1.to_string(),
        },
        epoch: r.lease_epoch,
        claimed_at: r.claimed_at,
        finished_at: r.finished_at,
        lease_expires_at: r.lease_expires_at,
        state,
    }
}

/// What a bar's tooltip and the details line say about a run.
fn describe(item: &RunListItem, state: RunState) -> String {
    let r = &item.run;
    let (_, label) = state_mark(state);
    let cause = r.cause.map(|c| format!(" ({})", cause_label(c))).unwrap_or_default();
    let times = match r.finished_at {
        Some(f) => format!(
            "{} → {} ({:.1} s)",
            r.claimed_at.format("%H:%M:%S"),
            f.format("%H:%M:%S"),
            (f - r.claimed_at).num_milliseconds() as f64 / 1000.0
        ),
        None => format!(
            "claimed {}, lease to {}",
            r.claimed_at.format("%H:%M:%S"),
            r.lease_expires_at.format("%H:%M:%S")
        ),
    };
    let output = r
        .output
        .as_deref()
        .map(|o| {
            let prefix: String = o.chars().take(OUTPUT_PREFIX).collect();
            let more = if o.chars().count() > OUTPUT_PREFIX || item.text_truncated { "…" } else { "" };
            format!(" · “{prefix}{more}”")
        })
        .unwrap_or_default();
    format!(
        "task #{} ({}) · {} · epoch {} · {label}{cause} · {times} UTC{output}",
        r.task_id, item.kind, r.worker, r.lease_epoch
    )
}

/// The run under a pointer or keyboard focus: `(task, run)` of the nearest bar.
#[cfg(feature = "hydrate")]
fn run_under(ev: &leptos::ev::Event) -> Option<(i64, i64)> {
    use wasm_bindgen::JsCast;
    let el = ev.target()?.dyn_into::<web_sys::Element>().ok()?.closest("[data-run]").ok()??;
    Some((el.get_attribute("data-task")?.parse().ok()?, el.get_attribute("data-run")?.parse().ok()?))
}

#[cfg(not(feature = "hydrate"))]
fn run_under(_: &leptos::ev::Event) -> Option<(i64, i64)> {
    None
}

/// Marks every bar and link of `task` in the chart `hot` (and unmarks the last task's), so CSS
/// lights them up across lanes. A class set on the few matching elements, not a reactive class
/// on each of 5 000 bars, and not an inline `<style>` (the page's CSP allows none).
#[cfg(feature = "hydrate")]
fn light_up(ev: &leptos::ev::Event, task: Option<i64>) {
    use wasm_bindgen::JsCast;
    let Some(chart) = ev.current_target().and_then(|t| t.dyn_into::<web_sys::Element>().ok()) else {
        return;
    };
    let each = |selector: &str, apply: &dyn Fn(&web_sys::DomTokenList)| {
        if let Ok(found) = chart.query_selector_all(selector) {
            for i in 0..found.length() {
                if let Some(el) = found.item(i).and_then(|n| n.dyn_into::<web_sys::Element>().ok()) {
                    apply(&el.class_list());
                }
            }
        }
    };
    each(".hot", &|c| {
        let _ = c.remove_1("hot");
    });
    if let Some(task) = task {
        each(&format!("[data-task=\"{task}\"]"), &|c| {
            let _ = c.add_1("hot");
        });
    }
}

#[cfg(not(feature = "hydrate"))]
fn light_up(_: &leptos::ev::Event, _: Option<i64>) {}

/// A pointer's x in the chart's user units (the SVG scales with the page).
#[cfg(feature = "hydrate")]
fn user_x(ev: &leptos::ev::MouseEvent, width: f64) -> Option<f64> {
    use wasm_bindgen::JsCast;
    let svg = ev.current_target()?.dyn_into::<web_sys::Element>().ok()?;
    let rect = svg.get_bounding_client_rect();
    (rect.width() > 0.0).then(|| (ev.client_x() as f64 - rect.left()) * width / rect.width())
}

#[cfg(not(feature = "hydrate"))]
fn user_x(_: &leptos::ev::MouseEvent, _: f64) -> Option<f64> {
    None
}

#[component]
fn Swimlanes(
    data: TimelineData,
    query: TimelineQuery,
    now: RwSignal<DateTime<Utc>>,
    utc: RwSignal<bool>,
    frozen: bool,
) -> impl IntoView {
    let minutes = query.minutes;
    let lanes_by = query.by.as_str();
    let g = Geometry::default();
    let server_now = data.now;
    let (start, end) = match data.fixed {
        Some(window) => window,
        None => layout::fitted_window(server_now, minutes, data.runs.iter().map(|r| r.run.claimed_at).min()),
    };
    let (x0, x1) = g.plot();
    let scale = Scale { start, end, x0, x1 };
    let all_runs = data.runs.len();
    let kept: Vec<(&RunListItem, Span)> = data
        .runs
        .iter()
        .map(|r| (r, span_of(r, server_now, query.by)))
        .filter(|(r, s)| query.keeps(r, s.state))
        .collect();
    if kept.is_empty() {
        let what = if all_runs == 0 { "No runs" } else { "No runs match the filters" };
        let window = match data.fixed {
            Some(_) => "in this stretch".to_string(),
            None => format!("in the last {minutes} minutes"),
        };
        return view! {
            <div class="empty" data-testid="timeline-empty">
                <p>{format!("{what} {window}.")}</p>
                <p class="muted">"Start a fleet (or `lastword demo`) and runs appear here as they are claimed."</p>
            </div>
        }
        .into_any();
    }
    // The first `lanes` lanes in order are drawn; the rest wait behind "show all".
    let all_spans: Vec<Span> = kept.iter().map(|(_, s)| s.clone()).collect();
    let all_lanes = layout::lanes(&all_spans, query.order);
    let shown_lanes: std::collections::HashSet<&str> =
        all_lanes.iter().take(query.lanes).map(String::as_str).collect();
    let (items, spans): (Vec<&RunListItem>, Vec<Span>) = kept
        .iter()
        .filter(|(_, s)| shown_lanes.contains(s.lane.as_str()))
        .map(|(r, s)| (*r, s.clone()))
        .unzip();
    let hidden_lanes = all_lanes.len() - shown_lanes.len();
    let order = query.order;
    let Layout { lanes, bars, cells, glyphs, connectors } =
        layout::layout(&spans, order, &scale, server_now, &g);
    let details: HashMap<i64, String> =
        items.iter().zip(&spans).map(|(item, s)| (s.run, describe(item, s.state))).collect();
    let details = StoredValue::new(details);
    let height = g.height(lanes.len());

    // The clock keeps moving between answers (unless paused): everything drawn in time shifts
    // left as one group. The server's `now` anchors it, so a skewed browser clock does not.
    let skew = Utc::now() - server_now;
    let view_now = move || if frozen { server_now } else { now.get() - skew };
    let shift = move || -((view_now() - server_now).num_milliseconds() as f64 * scale.px_per_ms());
    let hot = RwSignal::new(None::<(i64, i64)>);
    // The task under the pointer or focus: its marks get `hot` (see `light_up`).
    let point_at = move |ev: &leptos::ev::Event, hit: Option<(i64, i64)>| {
        if hot.get_untracked() != hit {
            light_up(ev, hit.map(|(task, _)| task));
            hot.set(hit);
        }
    };
    let detail = move || hot.get().and_then(|(_, run)| details.with_value(|d| d.get(&run).cloned()));
    let failures = spans.iter().filter(|s| s.state.is_failure()).count();
    let caption = format!(
        "{} runs in {} lanes (one per {}), {failures} failed; {} re-claims drawn as links. Hover or focus a bar for its task's attempts; click to open it.",
        spans.len(),
        lanes.len(),
        query.by.as_str(),
        connectors.len(),
    );
    // Live, ticks run a few minutes past the answer's `now`, so the moving axis never runs out.
    let ahead = if frozen { chrono::Duration::zero() } else { chrono::Duration::minutes(2) };
    let tick_scale = Scale { end: end + ahead, x1: scale.x(end + ahead), ..scale };
    let ticks = move || {
        let offset =
            if utc.get() { chrono::FixedOffset::east_opt(0) } else { Some(*chrono::Local::now().offset()) };
        let offset = offset.unwrap_or_else(|| chrono::FixedOffset::east_opt(0).expect("zero offset"));
        layout::ticks(&tick_scale, &g, offset)
            .into_iter()
            // A label centred this close to the plot's left edge would be cut in half.
            .filter(|t| t.x >= x0 + TICK_LABEL_HALF)
            .map(|t| {
                view! {
                    <g class="tick" data-at=t.at.to_rfc3339()>
                        <line class="tick-line" x1=t.x x2=t.x y1=g.axis_h - 4.0 y2=height />
                        <text class="tick-label" x=t.x y=g.axis_h - 7.0 text-anchor="middle">{t.label}</text>
                    </g>
                }
            })
            .collect_view()
    };
    let lane_rows = lanes
        .iter()
        .enumerate()
        .map(|(i, w)| {
            view! {
                <g class="swimlane" data-lane=w.clone()>
                    <rect class="lane-bg" x=0 y=g.lane_top(i) width=g.width height=g.lane_h />
                    <text class="lane-label" x=4 y=g.lane_top(i) + 17.0>{w.clone()}</text>
                </g>
            }
        })
        .collect_view();
    let cell_marks = cells
        .into_iter()
        .map(|c| {
            let (_, label) = state_mark(c.state);
            view! {
                <rect class=format!("cell state-{}", c.state.as_str()) data-count=c.count data-failures=c.failures
                    x=c.x0 y=g.lane_top(c.lane) + g.bar_inset width=c.x1 - c.x0 height=g.lane_h - 2.0 * g.bar_inset>
                    <title>{format!("{} runs here, {} failed (most urgent: {label}). Zoom in to see them apart.", c.count, c.failures)}</title>
                </rect>
            }
        })
        .collect_view();
    let bar_marks = bars
        .into_iter()
        .map(|b| {
            let s = &b.span;
            let y = g.lane_top(b.lane) + g.bar_inset;
            let h = g.lane_h - 2.0 * g.bar_inset;
            let running = s.finished_at.is_none() && s.state == RunState::Running;
            let bar_x0 = b.x0;
            let fixed_w = (b.x1 - b.x0).max(g.min_bar_px);
            // A running bar grows with the clock and turns silent when its lease lapses.
            let lease = s.lease_expires_at;
            let width = move || if running { (scale.x(view_now()) - bar_x0).max(fixed_w) } else { fixed_w };
            let base = s.state;
            let class = move || {
                let state = if running && view_now() >= lease { RunState::Silent } else { base };
                let highlight = matches!(state, RunState::LostLease | RunState::EmptyOutput);
                format!("bar state-{}{}", state.as_str(), if highlight { " highlight" } else { "" })
            };
            let state_attr = move || if running && view_now() >= lease { "silent" } else { base.as_str() };
            let title = details.with_value(|d| d.get(&s.run).cloned().unwrap_or_default());
            let lapse = b.lapse_x.map(|ex| view! { <line class="expiry lapsed" x1=ex x2=ex y1=y - 2.0 y2=y + h + 2.0 /> });
            // The <g> root makes the macro build an SVG <a> (an HTML one would not render inside <svg>).
            view! {
                <g>
                <a href=format!("/tasks/{}", s.task) class="bar-link" data-run=s.run data-task=s.task data-state=state_attr>
                    <rect class=class x=bar_x0 y=y width=width height=h rx=2>
                        <title>{title}</title>
                    </rect>
                    {lapse}
                </a>
                </g>
            }
        })
        .collect_view();
    let glyph_marks = glyphs
        .into_iter()
        .map(|gl| view! {
            <text class="bar-glyph" data-glyph=gl.mark data-run=gl.run x=gl.x y=g.lane_top(gl.lane) + g.lane_h - 9.0>{gl.text}</text>
        })
        .collect_view();
    let connector_marks = connectors
        .into_iter()
        .map(|c| view! {
            <path class=format!("reclaim reason-{}", c.reason.as_str()) d=c.path()
                data-from-run=c.from_run data-to-run=c.to_run data-task=c.task>
                <title>{format!("task #{}: run {} → run {}, {}", c.task, c.from_run, c.to_run, c.reason.label())}</title>
            </path>
        })
        .collect_view();
    let clip_h = height - g.axis_h + 20.0;
    let more_lanes = (hidden_lanes > 0).then(|| {
        let all = query.altered(|n| n.lanes = ALL_LANES).href();
        view! {
            <p class="muted" data-testid="hidden-lanes">
                {format!("{hidden_lanes} more lanes not drawn. ")}<a href=all>"Show all lanes"</a>
                " or filter them."
            </p>
        }
    });

    // Drag across the chart to zoom into that stretch (the URL holds it; "back" returns live).
    let drag = RwSignal::new(None::<(f64, f64)>);
    let navigate = leptos_router::hooks::use_navigate();
    let zoom_to = move |a: f64, b: f64| {
        let (a, b) = (a.min(b).max(x0), a.max(b).min(x1));
        if b - a < MIN_BRUSH {
            return;
        }
        let at = |x: f64| scale.time_at(x - shift());
        let href = query.altered(|n| n.zoom = Some((at(a), at(b)))).href();
        navigate(&href, Default::default());
    };
    let brush = move || {
        drag.get().filter(|(a, b)| (a - b).abs() >= MIN_BRUSH).map(|(a, b)| {
            view! { <rect class="brush" data-testid="brush" x=a.min(b) y=g.axis_h width=(a - b).abs() height=height - g.axis_h /> }
        })
    };
    // Live, now is the right edge; a zoom shows it only if the stretch reaches it.
    let now_x = scale.x(server_now);
    let now_mark = (now_x >= x0 && now_x <= x1 + 0.5).then(|| {
        view! {
            <line class="now-line" data-testid="now-line" x1=now_x x2=now_x y1=g.axis_h - 4.0 y2=height />
            // Over the axis: a tick label sliding under "now" is masked, not overprinted.
            <rect class="now-mask" x=now_x - 26.0 y=0 width=26.0 + g.right_pad height=g.axis_h - 3.0 />
            <text class="now-label" x=now_x + 3.0 y=g.axis_h - 7.0>"now"</text>
        }
    });
    let window_note = match data.fixed {
        Some((a, b)) => format!(
            "Zoomed: {} → {} UTC (fixed; drag again to zoom further).",
            a.format("%H:%M:%S"),
            b.format("%H:%M:%S")
        ),
        None => "Drag across the chart to zoom into a stretch.".to_string(),
    };

    view! {
        <figure class="timeline" data-testid="timeline">
            <svg viewBox=format!("0 0 {} {height}", g.width) role="img"
                aria-label=format!("Runs per {lanes_by} over the last {minutes} minutes")
                class:focusing=move || hot.get().is_some()
                on:mouseover=move |ev| point_at(&ev, run_under(&ev))
                on:mouseleave=move |ev| point_at(&ev, None)
                on:focusin=move |ev| point_at(&ev, run_under(&ev))
                on:focusout=move |ev| point_at(&ev, None)
                on:mousedown=move |ev| {
                    if let Some(x) = user_x(&ev, g.width).filter(|x| (x0..=x1).contains(x)) {
                        if ev.button() == 0 {
                            // No native link drag from a bar; a click still opens its task.
                            ev.prevent_default();
                            drag.set(Some((x, x)));
                        }
                    }
                }
                on:mousemove=move |ev| {
                    if let (Some((a, _)), Some(x)) = (drag.get_untracked(), user_x(&ev, g.width)) {
                        drag.set(Some((a, x)));
                    }
                }
                on:mouseup=move |ev| {
                    if let Some((a, b)) = drag.get_untracked() {
                        drag.set(None);
                        zoom_to(a, user_x(&ev, g.width).unwrap_or(b));
                    }
                }>
                <defs>
                    <clipPath id="timeline-plot"><rect x=x0 y=0 width=x1 - x0 height=clip_h /></clipPath>
                </defs>
                {lane_rows}
                <g clip-path="url(#timeline-plot)">
                    <g class="plot" transform=move || format!("translate({:.2},0)", shift())>
                        <g class="axis">{ticks}</g>
                        <g class="cells">{cell_marks}</g>
                        <g class="bars">{bar_marks}</g>
                        <g class="reclaims">{connector_marks}</g>
                        <g class="glyphs">{glyph_marks}</g>
                    </g>
                </g>
                {brush}
                {now_mark}
            </svg>
            <p class="timeline-detail" data-testid="timeline-detail" aria-live="polite">
                {move || detail().unwrap_or_else(|| "Hover or focus a bar: its task, attempt, state, cause, times and output appear here.".into())}
            </p>
            {more_lanes}
            <figcaption class="muted">{caption}" "{window_note}</figcaption>
        </figure>
    }
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(query: &str) -> TimelineQuery {
        let pairs: HashMap<String, String> = query
            .trim_start_matches("/timeline?")
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.replace("%20", " ").replace("%2B", "+")))
            .collect();
        TimelineQuery::from_pairs(|k| pairs.get(k).cloned())
    }

    #[test]
    fn a_view_survives_its_own_url() {
        let zoomed = TimelineQuery {
            minutes: 60,
            order: LaneOrder::ByName,
            by: LaneBy::Kind,
            zoom: Some((
                "2026-12-01T10:00:00.250Z".parse().unwrap(),
                "2026-12-01T10:05:00Z".parse().unwrap(),
            )),
            worker: "worker 7".into(),
            kind: "reply".into(),
            state: Some(RunState::LostLease),
            lanes: 200,
        };
        assert_eq!(parse(&zoomed.href()), zoomed);
        assert_eq!(parse(&TimelineQuery::default().href()), TimelineQuery::default());
        assert_eq!(TimelineQuery::default().href(), "/timeline?minutes=15&order=failure");
    }

    #[test]
    fn malformed_parameters_fall_back_to_their_defaults() {
        let d = TimelineQuery::default();
        assert_eq!(parse("minutes=7&order=sideways&state=bogus&lanes=0"), d);
        // A zoom backwards, or longer than a day, or half given, is no zoom.
        assert_eq!(parse("from=2026-12-01T10:05:00Z&to=2026-12-01T10:00:00Z").zoom, None);
        assert_eq!(parse("from=2026-11-01T10:00:00Z&to=2026-12-01T10:00:00Z").zoom, None);
        assert_eq!(parse("from=2026-12-01T10:00:00Z").zoom, None);
        assert_eq!(parse("from=yesterday&to=today").zoom, None);
    }
}
