//! The live timeline: a swimlane per worker over the last N minutes, one bar per run from claim
//! to finish, coloured and patterned by state; every re-claim drawn as a connector from the
//! earlier attempt's lease lapse to the re-claiming run, across lanes; a time axis and a "now"
//! line. Runs too narrow to draw merge into density cells (failures on top); glyphs appear only
//! where they fit. Hovering or focusing a bar lights up every attempt of its task.
//!
//! Where each mark goes is decided in [`layout`] (pure, unit-tested); this module only draws
//! it. Between answers the picture moves with the clock as one translated group (and running
//! bars grow), so a second passing redraws two attributes, not every bar; a live answer lays
//! the picture out again on the same scale ([`layout::Anchor`]) and redraws only the lanes
//! whose marks changed (keyed by [`layout::LaneMarks::key`]), so 5 000 runs stay smooth.

pub mod layout;

use crate::api::timeline::{get_timeline, get_timeline_runs, AnswerId, TimelineData, TimelineRun};
use crate::components::badges::{cause_label, state_mark};
use crate::components::layout::PageHead;
use crate::components::segmented::{Choice, Segmented};
use crate::live::use_live_feed;
use crate::pages::{loaded, LeaseChecks};
use chrono::{DateTime, Utc};
use lastword_core::time_text::hms;
use lastword_core::{ReclaimReason, RunState};
use layout::{Anchor, Geometry, LaneBy, LaneMarks, LaneOrder, Rows, Scale, Span};
use leptos::prelude::*;
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
/// How far left of the "now" line its label's backing covers the axis.
const NOW_MASK_W: f64 = 26.0;
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
    fn keeps(&self, item: &TimelineRun, state: RunState) -> bool {
        (self.worker.is_empty() || item.worker.contains(&self.worker))
            && (self.kind.is_empty() || item.kind.contains(&self.kind))
            && self.state.is_none_or(|s| s == state)
    }
}

#[component]
pub fn TimelinePage() -> impl IntoView {
    let query = use_query_map();
    let q = Memo::new(move |_| query.with(|m| TimelineQuery::from_pairs(|k| m.get(k))));
    let paused = RwSignal::new(false);
    // The browser's clock when the view was paused: the picture stays drawn at that moment
    // (running bars stop growing, nothing slides left) until Resume.
    let paused_at = RwSignal::new(None::<DateTime<Utc>>);
    // The `(task, run)` under the pointer or focus. Held here, above the drawing, so a redraw
    // (a new answer every second or so under a live fleet) keeps the task lit.
    let hot = RwSignal::new(None::<(i64, i64)>);
    // A drag across the chart in progress (its start and current x, in the chart's units): held
    // here too, so a live redraw under the pointer does not drop it.
    let drag = RwSignal::new(None::<(f64, f64)>);
    let feed = use_live_feed();
    // Changes that arrived while paused: the view holds still, the count says how many batches
    // wait, and the runs they changed are kept (`Held`) to be merged in on Resume.
    let waiting = RwSignal::new(0u64);
    let held_back = StoredValue::new(Held::default());
    // Bumped to fetch the whole window again: a reset, a batch too big to merge, a resume.
    let refetch = RwSignal::new(0u64);
    let data = Resource::new(
        move || (q.with(|q| (q.minutes, q.zoom)), refetch.get()),
        |((m, zoom), _)| get_timeline(m, zoom.map(|z| z.0), zoom.map(|z| z.1)),
    );
    // The window's answer with the live batches since merged in, tagged with the answer it was
    // built on (a newer answer, or another window's, replaces it).
    let merged = RwSignal::new(None::<(AnswerId, TimelineData)>);
    let shown = move || {
        let base = data.get_untracked().and_then(Result::ok)?;
        Some(merged.get_untracked().filter(|(on, _)| *on == base.id()).map(|(_, m)| m).unwrap_or(base))
    };
    // Reads the runs `ids` and merges them into what is shown; only the rows that changed
    // travel, not the window (`get_timeline_runs`).
    let merge_in = move |ids: Vec<i64>| {
        if ids.len() > lastword_core::TIMELINE_RUNS_CAP {
            refetch.update(|n| *n += 1);
            return;
        }
        if ids.is_empty() {
            return;
        }
        leptos::task::spawn_local(async move {
            let Ok(fresh) = get_timeline_runs(ids.clone()).await else {
                // The next batch or lease check asks again; a failing server shows in the banner.
                return;
            };
            if paused.get_untracked() {
                // Paused while it was read: kept for Resume with what arrives meanwhile.
                held_back.update_value(|h| h.runs = Held::union(std::mem::take(&mut h.runs), ids));
                return;
            }
            let Some(base) = data.get_untracked().and_then(Result::ok).map(|d| d.id()) else { return };
            let Some(mut next) = shown() else { return };
            let (since, until) = match next.fixed {
                Some((from, to)) => (from, Some(to)),
                None => (fresh.now - chrono::Duration::minutes(q.with_untracked(|q| q.minutes)), None),
            };
            next.merge(fresh, since, until);
            merged.set(Some((base, next)));
        });
    };
    Effect::new(move |_| {
        // Tracked: every bump; the batch behind it is set before the bump.
        if feed.last_change.get() == 0 {
            return;
        }
        let batch = feed.last_batch.get_untracked();
        if paused.get_untracked() {
            waiting.update(|n| *n += 1);
            held_back.update_value(|h| h.keep(&batch));
            return;
        }
        if batch.reset {
            refetch.update(|n| *n += 1);
            return;
        }
        merge_in(Held::runs_of(&batch));
    });
    // Unfinished runs' leases, asked about again around their lapse (heartbeats are not in the
    // live feed): the running runs' rows are read again, not the window.
    let leases = LeaseChecks::new();
    Effect::new(move |prev: Option<Option<DateTime<Utc>>>| {
        let key = leases.key.get();
        if prev.is_some_and(|p| p != key) && !paused.get_untracked() {
            let unfinished = shown()
                .map(|d| d.runs.iter().filter(|r| r.finished_at.is_none()).map(|r| r.id).collect())
                .unwrap_or_default();
            merge_in(unfinished);
        }
        key
    });
    // The leases of what is shown (a merged picture only while it is built on the latest answer).
    Effect::new(move |_| {
        merged.track();
        data.track();
        let unfinished: Vec<DateTime<Utc>> = shown()
            .map(|d| d.runs.iter().filter(|r| r.finished_at.is_none()).map(|r| r.lease_expires_at).collect())
            .unwrap_or_default();
        leases.show(unfinished);
    });
    let prefs = crate::components::time::use_time_prefs();
    let state_options = move || {
        let chosen = q.with(|q| q.state);
        std::iter::once(
            view! {
                <option value="" selected=chosen.is_none()>
                    "any state"
                </option>
            }
            .into_any(),
        )
        .chain(RunState::ALL.into_iter().map(move |s| {
            view! {
                <option value=s.as_str() selected=chosen == Some(s)>
                    {state_mark(s).1}
                </option>
            }
            .into_any()
        }))
        .collect_view()
    };

    let zoom_choices = ZOOMS
        .into_iter()
        .map(|m| {
            let label = if m < 60 { format!("{m} min") } else { format!("{} h", m / 60) };
            let href = Signal::derive(move || {
                q.with(|q| {
                    q.altered(|n| {
                        n.minutes = m;
                        n.zoom = None;
                    })
                    .href()
                })
            });
            Choice::new(label, href, Signal::derive(move || q.with(|q| q.zoom.is_none() && q.minutes == m)))
        })
        .collect();
    let order_choices = [(LaneOrder::RecentFailure, "recent failure first"), (LaneOrder::ByName, "by name")]
        .into_iter()
        .map(|(o, label)| {
            let href = Signal::derive(move || q.with(|q| q.altered(|n| n.order = o).href()));
            Choice::new(label, href, Signal::derive(move || q.with(|q| q.order) == o))
        })
        .collect();
    let lanes_choices = LaneBy::ALL
        .into_iter()
        .map(|b| {
            let href = Signal::derive(move || q.with(|q| q.altered(|n| n.by = b).href()));
            Choice::new(format!("per {}", b.as_str()), href, Signal::derive(move || q.with(|q| q.by) == b))
        })
        .collect();
    let toggle_pause = move |_| {
        let resuming = paused.get_untracked();
        paused.update(|p| *p = !*p);
        paused_at.set((!resuming).then(|| prefs.now.get_untracked()));
        // Resuming: what arrived meanwhile is merged in as it would have been live (only the
        // runs it changed are read), with every unfinished run (heartbeats are not in the feed,
        // and the lease checks waited: a run drawn silent may have been extended meanwhile);
        // after a reset, or more than a merge takes, the window is read again, whole.
        if resuming {
            let held = held_back.try_update_value(std::mem::take).unwrap_or_default();
            if held.reset {
                refetch.update(|n| *n += 1);
            } else {
                let unfinished = shown()
                    .map(|d| d.runs.iter().filter(|r| r.finished_at.is_none()).map(|r| r.id).collect())
                    .unwrap_or_default();
                merge_in(Held::union(held.runs, unfinished));
            }
        }
        waiting.set(0);
    };
    view! {
        <section class="page">
            <PageHead title="Live timeline">
                <Segmented label="Window" choices=zoom_choices />
                <Segmented label="Lane order" choices=order_choices />
                <Segmented label="Lanes" choices=lanes_choices />
                <button
                    type="button"
                    class="btn"
                    data-testid="pause"
                    aria-pressed=move || paused.get().to_string()
                    on:click=toggle_pause
                >
                    {move || if paused.get() { "▶ Resume" } else { "❚❚ Pause" }}
                </button>
                <span class="muted" data-testid="waiting">
                    {move || {
                        let n = waiting.get();
                        (paused.get() && n > 0)
                            .then(|| format!("{n} update{} waiting", if n == 1 { "" } else { "s" }))
                    }}
                </span>
                <Legend />
            </PageHead>
            <form class="filters timeline-filters" method="get" action="/timeline" aria-label="Filter lanes">
                <input type="hidden" name="minutes" value=move || q.with(|q| q.minutes.to_string()) />
                <input type="hidden" name="order" value=move || q.with(|q| q.order.as_str()) />
                <input type="hidden" name="by" value=move || q.with(|q| q.by.as_str()) />
                {move || {
                    q.with(|q| {
                        q.zoom
                            .map(|(a, b)| {
                                view! {
                                    <input
                                        type="hidden"
                                        name="from"
                                        value=a.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
                                    />
                                    <input
                                        type="hidden"
                                        name="to"
                                        value=b.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
                                    />
                                }
                            })
                    })
                }}
                <label>
                    "worker "
                    <input
                        type="search"
                        name="worker"
                        value=move || q.with(|q| q.worker.clone())
                        placeholder="any"
                    />
                </label>
                <label>
                    "kind "
                    <input
                        type="search"
                        name="kind"
                        value=move || q.with(|q| q.kind.clone())
                        placeholder="any"
                    />
                </label>
                <label>"state " <select name="state">{state_options}</select></label>
                <button type="submit" class="btn">
                    "Filter"
                </button>
                {move || {
                    q.with(|q| {
                        q.zoom
                            .map(|_| {
                                let back = q.altered(|n| n.zoom = None).href();
                                view! {
                                    <a class="btn" data-testid="zoom-out" href=back>
                                        {format!("← back to the last {} min, live", q.minutes)}
                                    </a>
                                }
                            })
                    })
                }}
            </form>
            {loaded(
                "Loading the timeline…",
                "the timeline",
                move || data.get(),
                move |d| {
                    let shown = ShownAnswer {
                        id: d.id(),
                        base: StoredValue::new(d),
                        merged,
                    };
                    // Drawn anew for a new answer or a new order, filter or lane count (those
                    // need no new data); live batches merged into the answer redraw only the
                    // lanes they change; a pause holds the next answers back and the drawing
                    // still (`held`), without a redraw.
                    view! {
                        <Swimlanes
                            shown=shown
                            query=q.get()
                            now=prefs.now
                            held=paused_at
                            utc=prefs.utc
                            hot=hot
                            drag=drag
                        />
                    }
                },
            )}
        </section>
    }
}

/// What a paused timeline keeps of the live feed for Resume.
#[derive(Clone, Debug, Default)]
struct Held {
    /// Runs changed meanwhile, ascending, once each.
    runs: Vec<i64>,
    /// The feed asked for a reload of everything meanwhile.
    reset: bool,
}

impl Held {
    /// Keeps what `batch` changed; past what one merge reads, a paused page reads its window
    /// again on Resume instead of holding an ever longer list.
    fn keep(&mut self, batch: &crate::live::LiveBatch) {
        self.reset |= batch.reset;
        if !self.reset {
            self.runs = Held::union(std::mem::take(&mut self.runs), Held::runs_of(batch));
            self.reset = self.runs.len() > lastword_core::TIMELINE_RUNS_CAP;
        }
        if self.reset {
            self.runs.clear();
        }
    }

    /// Both lists of runs, ascending, once each.
    fn union(mut a: Vec<i64>, b: Vec<i64>) -> Vec<i64> {
        a.extend(b);
        a.sort_unstable();
        a.dedup();
        a
    }

    /// The runs a live batch changed, ascending, once each.
    fn runs_of(batch: &crate::live::LiveBatch) -> Vec<i64> {
        let mut ids: Vec<i64> =
            batch.changes.iter().filter(|c| c.table == "runs").map(|c| c.row_id).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

#[component]
fn Legend() -> impl IntoView {
    view! {
        <ul class="legend" aria-label="Legend">
            {RunState::ALL
                .into_iter()
                .map(|s| {
                    let (glyph, label) = state_mark(s);
                    view! {
                        <li class=format!("state-{}", s.as_str())>
                            <span class="swatch" aria-hidden="true">
                                {glyph}
                            </span>
                            {label}
                        </li>
                    }
                })
                .collect_view()}
            {ReclaimReason::ALL
                .iter()
                .copied()
                .map(|r| {
                    // The link's own stroke (dash and hue), so the key matches the chart
                    // without colour too.
                    view! {
                        <li class="reclaim-key" data-reason=r.as_str()>
                            <svg class="swatch-line" viewBox="0 0 28 8" aria-hidden="true">
                                <line class=format!("reclaim reason-{}", r.as_str()) x1=0 y1=4 x2=28 y2=4 />
                            </svg>
                            {r.label()}
                        </li>
                    }
                })
                .collect_view()}
        </ul>
    }
}

/// The state an unfinished run is drawn in at `now` (it turns silent the moment its lease
/// lapses, by the one rule); a finished run's state is the server's, decided with the
/// configured tokens.
fn state_at(r: &TimelineRun, now: DateTime<Utc>) -> RunState {
    if r.finished_at.is_none() {
        let facts = lastword_core::RunFacts {
            finished_at: None,
            lease_expires_at: r.lease_expires_at,
            completion_rows: None,
            error: None,
            output: None,
        };
        lastword_core::run_state(&facts, now, &lastword_core::Tokens::default()).0
    } else {
        r.state
    }
}

fn span_of(r: &TimelineRun, now: DateTime<Utc>, by: LaneBy) -> Span {
    let state = state_at(r, now);
    Span {
        run: r.id,
        task: r.task_id,
        lane: match by {
            LaneBy::Worker => r.worker.clone(),
            LaneBy::Kind => r.kind.clone(),
            LaneBy::State => state_mark(state).1.to_string(),
        },
        epoch: r.lease_epoch,
        claimed_at: r.claimed_at,
        finished_at: r.finished_at,
        lease_expires_at: r.lease_expires_at,
        state,
        reclaim: r.reclaim_reason,
    }
}

/// What a bar's tooltip and the details line say about a run.
fn describe(r: &TimelineRun, state: RunState) -> String {
    let (_, label) = state_mark(state);
    let cause = r.cause.map(|c| format!(" ({})", cause_label(c))).unwrap_or_default();
    let times = match r.finished_at {
        Some(f) => format!(
            "{} → {} ({:.1} s)",
            hms(&r.claimed_at),
            hms(&f),
            (f - r.claimed_at).num_milliseconds() as f64 / 1000.0
        ),
        None => format!("claimed {}, lease to {}", hms(&r.claimed_at), hms(&r.lease_expires_at)),
    };
    let output = r
        .output
        .as_deref()
        .map(|o| {
            let prefix: String = o.chars().take(OUTPUT_PREFIX).collect();
            let more = if o.chars().count() > OUTPUT_PREFIX || r.text_truncated { "…" } else { "" };
            format!(" · “{prefix}{more}”")
        })
        .unwrap_or_default();
    let reclaim = r.reclaim_reason.map(|why| format!(" · {}", why.label())).unwrap_or_default();
    format!(
        "task #{} ({}) · {} · epoch {} · {label}{cause} · {times} UTC{output}{reclaim}",
        r.task_id, r.kind, r.worker, r.lease_epoch
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

/// What a drawing shows: the window's answer with the live batches merged into it since
/// (`merged`, while it is built on this answer). Copy, so every closure of the chart reads it.
#[derive(Clone, Copy)]
struct ShownAnswer {
    id: AnswerId,
    base: StoredValue<TimelineData>,
    merged: RwSignal<Option<(AnswerId, TimelineData)>>,
}

impl ShownAnswer {
    /// Reads what is shown; tracked, so a merged batch wakes the reader.
    fn with<R>(&self, f: impl FnOnce(&TimelineData) -> R) -> R {
        let (id, base) = (self.id, self.base);
        self.merged.with(|m| match m {
            Some((on, d)) if *on == id => f(d),
            _ => base.with_value(f),
        })
    }

    fn with_untracked<R>(&self, f: impl FnOnce(&TimelineData) -> R) -> R {
        untrack(|| self.with(f))
    }
}

/// One answer laid out for drawing.
struct Picture {
    anchor: Anchor,
    /// The answer's `now`.
    now: DateTime<Utc>,
    /// Runs in the answer, and those the filters keep.
    all_runs: usize,
    kept: usize,
    /// Runs in the lanes drawn, and how many of them failed.
    drawn: usize,
    failures: usize,
    /// The lanes drawn, in order, with their marks and each one's key (see [`LaneMarks::key`]).
    lanes: Vec<LaneMarks>,
    keys: Vec<u64>,
    rows: Rows,
    connectors: Vec<layout::Connector>,
    stubs: Vec<layout::Stub>,
    hidden_lanes: usize,
    /// Where each drawn run is in the answer's rows, for its tooltip.
    row_of: HashMap<i64, usize>,
}

/// A [`Picture`] behind a pointer: every answer makes a new one, so equality is identity and
/// a memo of it costs no comparison of 5 000 runs.
#[derive(Clone)]
struct Drawn(std::sync::Arc<Picture>);

impl PartialEq for Drawn {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Lays out what `d` holds that `query` keeps, on `anchor`'s scale (widened, so marks the
/// clock moves into view are already placed).
fn picture(d: &TimelineData, query: &TimelineQuery, anchor: Anchor, g: &Geometry) -> Picture {
    let (rows_kept, spans_kept): (Vec<usize>, Vec<Span>) = d
        .runs
        .iter()
        .enumerate()
        .map(|(i, r)| (i, span_of(r, d.now, query.by)))
        .filter(|(i, s)| query.keeps(&d.runs[*i], s.state))
        .unzip();
    // The first `lanes` lanes in order are drawn; the rest wait behind "show all".
    let all_lanes = layout::lanes(&spans_kept, query.order);
    let shown_lanes: std::collections::HashSet<&str> =
        all_lanes.iter().take(query.lanes).map(String::as_str).collect();
    let kept = spans_kept.len();
    let (rows_drawn, spans): (Vec<usize>, Vec<Span>) =
        rows_kept.into_iter().zip(spans_kept).filter(|(_, s)| shown_lanes.contains(s.lane.as_str())).unzip();
    let hidden_lanes = all_lanes.len() - shown_lanes.len();
    let mut l = layout::layout(&spans, query.order, &anchor.scale.widened(), d.now, g);
    let lanes = l.take_lane_marks();
    let row_of: HashMap<i64, usize> = spans.iter().zip(&rows_drawn).map(|(s, &i)| (s.run, i)).collect();
    let keys = lanes
        .iter()
        .map(|lane| {
            use std::hash::{Hash, Hasher};
            // What a bar's tooltip says beyond its shape (`describe`); and the scale, so a new
            // anchor redraws every lane.
            let marks = lane.key(|run, h| {
                if let Some(r) = row_of.get(&run).and_then(|&i| d.runs.get(i)) {
                    (r.cause, &r.output, r.text_truncated).hash(h);
                }
            });
            let mut h = std::hash::DefaultHasher::new();
            (marks, anchor.scale.start, anchor.scale.end).hash(&mut h);
            h.finish()
        })
        .collect();
    Picture {
        anchor,
        now: d.now,
        all_runs: d.runs.len(),
        kept,
        drawn: spans.len(),
        failures: spans.iter().filter(|s| s.state.is_failure()).count(),
        lanes,
        keys,
        rows: l.rows,
        connectors: l.connectors,
        stubs: l.stubs,
        hidden_lanes,
        row_of,
    }
}

/// Keeps `on_screen` on the lanes the chart shows in the window (with a margin), following
/// scrolls, resizes and lanes that grow or move, from the moment the page is hydrated (on the
/// server: the first lanes).
fn follow_the_screen(
    chart: NodeRef<leptos::svg::Svg>,
    on_screen: RwSignal<std::ops::Range<usize>>,
    rows: Memo<Rows>,
) {
    #[cfg(not(feature = "hydrate"))]
    let _ = (chart, on_screen, rows);
    #[cfg(feature = "hydrate")]
    {
        /// Lanes either side of the screen drawn ahead of a scroll.
        const OVERSCAN_LANES: usize = 8;
        let measure = move || {
            let Some(svg) = chart.get_untracked() else { return };
            let rect = svg.get_bounding_client_rect();
            if rect.height() <= 0.0 {
                return;
            }
            let units_per_px = rows.with_untracked(Rows::total_height) / rect.height();
            let screen_h = window().inner_height().ok().and_then(|h| h.as_f64()).unwrap_or(800.0);
            let top = -rect.top() * units_per_px;
            let bottom = (screen_h - rect.top()) * units_per_px;
            let range = rows.with_untracked(|rows| rows.visible(top, bottom, OVERSCAN_LANES));
            if on_screen.get_untracked() != range {
                on_screen.set(range);
            }
        };
        Effect::new(move |_| {
            chart.track();
            rows.track();
            measure();
        });
        let scroll = window_event_listener(leptos::ev::scroll, move |_| measure());
        let resize = window_event_listener(leptos::ev::resize, move |_| measure());
        on_cleanup(move || {
            scroll.remove();
            resize.remove();
        });
    }
}

/// Keyboard focus on a bar outlives the bar. A live merge redraws the lanes it changed, and a
/// redrawn bar is a new element: focus would drop to the page and the task's highlight go out
/// under a keyboard user's hands about once a second with a fleet running. So the bar holding
/// focus is remembered, and when it leaves the page the same run's new bar takes focus.
#[derive(Clone, Copy)]
struct FocusKeeper {
    chart: NodeRef<leptos::svg::Svg>,
    #[cfg(feature = "hydrate")]
    bar: StoredValue<Option<web_sys::Element>, LocalStorage>,
}

impl FocusKeeper {
    fn new(chart: NodeRef<leptos::svg::Svg>) -> Self {
        FocusKeeper {
            chart,
            #[cfg(feature = "hydrate")]
            bar: StoredValue::new_local(None),
        }
    }

    /// Focus entered the chart (`focusin`): remembers the bar it landed on, if any.
    fn took(&self, ev: &leptos::ev::FocusEvent) {
        #[cfg(not(feature = "hydrate"))]
        let _ = ev;
        #[cfg(feature = "hydrate")]
        {
            use wasm_bindgen::JsCast;
            let bar = ev.target().and_then(|t| t.dyn_into::<web_sys::Element>().ok());
            self.bar.set_value(bar.and_then(|el| el.closest("a.bar-link").ok().flatten()));
        }
    }

    /// After focus left a bar (`focusout`) or lanes were redrawn, one frame later (the redraw is
    /// in the page by then): the bar still has focus, or it was redrawn and focus fell to the
    /// page (the same run's new bar takes it), or focus moved away on purpose, or the run is no
    /// longer drawn as a bar: then `release`.
    fn settle(self, release: impl FnOnce() + 'static) {
        #[cfg(not(feature = "hydrate"))]
        let _ = (self.chart, release);
        #[cfg(feature = "hydrate")]
        request_animation_frame(move || {
            use wasm_bindgen::JsCast;
            let Some(held) = self.bar.get_value() else { return };
            let active = document().active_element();
            if active.as_ref() == Some(&held) {
                return;
            }
            let fell_to_page = active.is_none_or(|a| a.tag_name().eq_ignore_ascii_case("body"));
            let successor = (fell_to_page && !held.is_connected())
                .then(|| {
                    let run = held.get_attribute("data-run")?;
                    let svg = self.chart.get_untracked()?;
                    svg.query_selector(&format!("a.bar-link[data-run=\"{run}\"]")).ok()?
                })
                .flatten()
                .and_then(|el| el.dyn_into::<web_sys::SvgElement>().ok());
            match successor {
                // Its `focusin` remembers it and keeps the task lit.
                Some(bar) => _ = bar.focus(),
                None => {
                    self.bar.set_value(None);
                    release();
                }
            }
        });
    }
}

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

/// The chart of one window's answer. It lives as long as the answer: live batches merged into
/// it lay the picture out again, but only the lanes whose marks changed are redrawn (lanes and
/// links are keyed by what they draw), and the rest move if they must.
#[component]
fn Swimlanes(
    shown: ShownAnswer,
    query: TimelineQuery,
    now: RwSignal<DateTime<Utc>>,
    /// The browser's time the view was paused at, if it is.
    held: RwSignal<Option<DateTime<Utc>>>,
    utc: RwSignal<bool>,
    hot: RwSignal<Option<(i64, i64)>>,
    drag: RwSignal<Option<(f64, f64)>>,
) -> impl IntoView {
    let g = Geometry::default();
    let (x0, x1) = g.plot();
    let minutes = query.minutes;
    let fixed = shown.base.with_value(|d| d.fixed.is_some());
    let anchor = Memo::new(move |prev: Option<&Anchor>| {
        let fresh = shown.with(|d| {
            let (start, end) = match d.fixed {
                Some(window) => window,
                None => layout::fitted_window(d.now, minutes, d.runs.iter().map(|r| r.claimed_at).min()),
            };
            Anchor { scale: Scale { start, end, x0, x1 }, now: d.now }
        });
        Anchor::follow(prev, fresh, fixed)
    });
    let query = StoredValue::new(query);
    let picture = Memo::new(move |_| {
        let anchor = anchor.get();
        Drawn(std::sync::Arc::new(shown.with(|d| query.with_value(|q| picture(d, q, anchor, &g)))))
    });
    // `Some(whether the answer has no runs at all)` when nothing passes the filters.
    let empty = Memo::new(move |_| picture.with(|p| (p.0.kept == 0).then_some(p.0.all_runs == 0)));
    let chart = Chart { shown, query, anchor, picture, fixed, now, held, utc, hot, drag };
    move || match empty.get() {
        Some(no_runs) => {
            let what = if no_runs { "No runs" } else { "No runs match the filters" };
            let window =
                if fixed { "in this stretch".to_string() } else { format!("in the last {minutes} minutes") };
            view! {
                <div class="empty" data-testid="timeline-empty">
                    <p>{format!("{what} {window}.")}</p>
                    <p class="muted">
                        "Start a fleet (or `lastword demo`) and runs appear here as they are claimed."
                    </p>
                </div>
            }
            .into_any()
        }
        None => chart.view(),
    }
}

/// Everything the chart's closures share (all of it handles, so the struct is `Copy`).
#[derive(Clone, Copy)]
struct Chart {
    shown: ShownAnswer,
    query: StoredValue<TimelineQuery>,
    anchor: Memo<Anchor>,
    picture: Memo<Drawn>,
    fixed: bool,
    now: RwSignal<DateTime<Utc>>,
    held: RwSignal<Option<DateTime<Utc>>>,
    utc: RwSignal<bool>,
    hot: RwSignal<Option<(i64, i64)>>,
    drag: RwSignal<Option<(f64, f64)>>,
}

impl Chart {
    fn view(self) -> AnyView {
        let Chart { shown, query, anchor, picture, fixed, now, held, utc, hot, drag } = self;
        let g = Geometry::default();
        let (x0, x1) = g.plot();
        // Live, "now" is the right edge; a zoom shows it only if the stretch reaches it. Its line,
        // the mask over the axis and the tick labels kept clear of it all follow this one rule.
        let now_shown = move |now_x: f64| now_x >= x0 && now_x <= x1 + 0.5;
        let (minutes, lanes_by) = query.with_value(|q| (q.minutes, q.by.as_str()));
        let answer_now = Memo::new(move |_| picture.with(|p| p.0.now));
        let rows = Memo::new(move |_| picture.with(|p| p.0.rows.clone()));
        let height = move || rows.with(Rows::total_height);

        // The clock keeps moving between answers (unless paused, or a fixed stretch is shown):
        // everything drawn in time shifts left as one group from where the anchor put it. The
        // server's `now` anchors it, so a skewed browser clock does not.
        let skew = Utc::now() - answer_now.get_untracked();
        // Paused before this drawing (a filter changed meanwhile): drawn at the answer's `now`.
        let view_now = move || {
            let answered = answer_now.get();
            if fixed {
                answered
            } else {
                (held.get().unwrap_or_else(|| now.get()) - skew).max(answered)
            }
        };
        let shift = move || {
            let a = anchor.get();
            if fixed {
                0.0
            } else {
                -((view_now() - a.now).num_milliseconds() as f64 * a.scale.px_per_ms())
            }
        };
        // The task under the pointer or focus: its bars and links get `hot`, across lanes. A
        // selector wakes only the marks of the task that was lit and the one that is, not 5 000.
        let point_at = move |hit: Option<(i64, i64)>| {
            if hot.get_untracked() != hit {
                hot.set(hit);
            }
        };
        let lit = Selector::new(move || hot.get().map(|(task, _)| task));
        let lit_up = move |task: i64| {
            let lit = lit.clone();
            move || lit.selected(&Some(task))
        };
        let detail = move || {
            let (_, run) = hot.get()?;
            let row = picture.with(|p| p.0.row_of.get(&run).copied())?;
            shown.with(|d| d.runs.get(row).map(|r| describe(r, state_at(r, d.now))))
        };
        let caption = move || {
            picture.with(|p| {
                let p = &p.0;
                format!(
                    "{} runs in {} lanes (one per {lanes_by}), {} failed; {} re-claims drawn as links{}. Hover or focus a bar for its task's attempts; click to open it.",
                    p.drawn,
                    p.lanes.len(),
                    p.failures,
                    p.connectors.len(),
                    if p.stubs.is_empty() {
                        String::new()
                    } else {
                        format!(", {} more whose earlier attempt is not drawn", p.stubs.len())
                    },
                )
            })
        };
        let ticks = move || {
            let a = anchor.get();
            // Live, ticks run past the anchor's `now` as far as the clock may move the picture
            // before a new anchor (a quarter window), and a little more, so the axis never runs out.
            let ahead = if fixed {
                chrono::Duration::zero()
            } else {
                (a.scale.end - a.scale.start) / 4 + chrono::Duration::minutes(2)
            };
            let tick_scale =
                Scale { end: a.scale.end + ahead, x1: a.scale.x(a.scale.end + ahead), ..a.scale };
            let offset = if utc.get() {
                chrono::FixedOffset::east_opt(0)
            } else {
                Some(*chrono::Local::now().offset())
            };
            let offset = offset.unwrap_or_else(|| chrono::FixedOffset::east_opt(0).expect("zero offset"));
            let height = height();
            // Labels are shown whole or not at all: one sliding (live) under the "now" label's
            // backing or off the plot's left edge is hidden, not cut (`07:34:0` in a screenshot).
            let now_x = a.scale.x(a.now);
            let label_room = if now_shown(now_x) { now_x - NOW_MASK_W } else { f64::INFINITY };
            layout::ticks(&tick_scale, &g, offset)
                .into_iter()
                // A label centred this close to the plot's left edge would be cut in half.
                .filter(|t| t.x >= x0 + TICK_LABEL_HALF)
                .map(|t| {
                    let at_x = t.x;
                    let cut = move || {
                        let x = at_x + shift();
                        x - TICK_LABEL_HALF < x0 || x + TICK_LABEL_HALF > label_room
                    };
                    view! {
                        <g class="tick" data-at=t.at.to_rfc3339()>
                            <line class="tick-line" x1=t.x x2=t.x y1=g.axis_h - 4.0 y2=height />
                            <text
                                class="tick-label"
                                class:cut=cut
                                x=t.x
                                y=g.axis_h - 7.0
                                text-anchor="middle"
                            >
                                {t.label}
                            </text>
                        </g>
                    }
                })
                .collect_view()
        };
        // Each lane's background and name, kept while it stays where it is.
        let lane_rows = move || {
            picture.with(|p| {
                let p = &p.0;
                p.lanes
                    .iter()
                    .enumerate()
                    .map(|(i, lane)| (lane.name.clone(), p.rows.top(i), p.rows.height(i)))
                    .collect::<Vec<_>>()
            })
        };
        let lane_row = move |(name, top, h): (String, f64, f64)| {
            let label = name.clone();
            view! {
                <g class="swimlane" data-lane=name>
                    <rect class="lane-bg" x=0 y=top width=g.width height=h />
                    <text class="lane-label" x=4 y=top + g.label_baseline>
                        {label}
                    </text>
                </g>
            }
        };
        // Where each lane is (its index and top): a lane that moves is moved, not redrawn.
        let places = Memo::new(move |_| {
            picture.with(|p| {
                p.0.lanes
                    .iter()
                    .enumerate()
                    .map(|(i, lane)| (lane.name.clone(), (i, p.0.rows.top(i))))
                    .collect::<HashMap<String, (usize, f64)>>()
            })
        });
        // Until the page has measured the screen (and on the server), the first lanes: the same
        // on both sides, so hydration matches.
        let on_screen = RwSignal::new(0..picture.with_untracked(|p| p.0.lanes.len()).min(DEFAULT_LANES));
        let chart = NodeRef::<leptos::svg::Svg>::new();
        follow_the_screen(chart, on_screen, rows);
        let keeper = FocusKeeper::new(chart);
        // Some browsers drop focus from a removed element without a `focusout`.
        Effect::new(move |_| {
            picture.track();
            keeper.settle(move || point_at(None));
        });
        // Each lane's marks, drawn only while the lane is on screen (200 lanes of a big fleet
        // cost what the 20 in view cost), keyed by what they draw: a live answer redraws only
        // the lanes it changed.
        let lanes_on_screen = move || {
            let range = on_screen.get();
            picture.with(|p| {
                let p = &p.0;
                let end = range.end.min(p.lanes.len());
                (range.start.min(end)..end).map(|i| (p.lanes[i].name.clone(), p.keys[i])).collect::<Vec<_>>()
            })
        };
        let lane_lit_up = lit_up.clone();
        let draw_lane = move |(name, _): (String, u64)| {
            let marks = picture.with_untracked(|p| {
                let p = &p.0;
                let lane = p.lanes.iter().find(|l| l.name == name)?;
                Some(shown.with_untracked(|d| {
                    lane_marks(
                        lane,
                        p.anchor.scale,
                        &g,
                        |run, state| {
                            p.row_of
                                .get(&run)
                                .and_then(|&i| d.runs.get(i))
                                .map(|r| describe(r, state))
                                .unwrap_or_default()
                        },
                        view_now,
                        lane_lit_up.clone(),
                    )
                }))
            });
            let place = {
                let name = name.clone();
                move || places.with(|m| m.get(&name).copied().unwrap_or_default())
            };
            let index_of = place.clone();
            view! {
                <g
                    class="lane-marks"
                    data-lane=name
                    data-lane-index=move || index_of().0
                    transform=move || format!("translate(0,{})", place().1)
                >
                    {marks}
                </g>
            }
        };
        let links = move || picture.with(|p| p.0.connectors.clone());
        let link_lit_up = lit_up.clone();
        let link = move |c: layout::Connector| {
            let lit_up = link_lit_up.clone();
            view! {
                <path
                    class=format!("reclaim reason-{}", c.reason.as_str())
                    class:hot=lit_up(c.task)
                    d=c.path()
                    data-from-run=c.from_run
                    data-to-run=c.to_run
                    data-task=c.task
                    data-reason=c.reason.as_str()
                >
                    <title>
                        {format!(
                            "task #{}: run {} → run {}, {}",
                            c.task,
                            c.from_run,
                            c.to_run,
                            c.reason.label(),
                        )}
                    </title>
                </path>
            }
        };
        let stubs = move || picture.with(|p| p.0.stubs.clone());
        let stub = move |st: layout::Stub| {
            let lit_up = lit_up.clone();
            view! {
                <path
                    class=format!("reclaim-stub reason-{}", st.reason.as_str())
                    class:hot=lit_up(st.task)
                    d=st.path()
                    data-to-run=st.to_run
                    data-task=st.task
                    data-reason=st.reason.as_str()
                >
                    <title>
                        {format!(
                            "task #{}: run {} {}; the attempt before it is not drawn (earlier, or in a lane not shown)",
                            st.task,
                            st.to_run,
                            st.reason.label(),
                        )}
                    </title>
                </path>
            }
        };
        let more_lanes = move || {
            let hidden = picture.with(|p| p.0.hidden_lanes);
            (hidden > 0).then(|| {
                let all = query.with_value(|q| q.altered(|n| n.lanes = ALL_LANES).href());
                view! {
                    <p class="muted" data-testid="hidden-lanes">
                        {format!("{hidden} more lanes not drawn. ")}
                        <a href=all>"Show all lanes"</a>
                        " or filter them."
                    </p>
                }
            })
        };

        // Drag across the chart to zoom into that stretch (the URL holds it; "back" returns
        // live). `drag` is held by the page, so a live redraw in the middle of a drag keeps it.
        let navigate = leptos_router::hooks::use_navigate();
        let zoom_to = move |a: f64, b: f64| {
            let (a, b) = (a.min(b).max(x0), a.max(b).min(x1));
            if b - a < MIN_BRUSH {
                return;
            }
            let (scale, moved) = untrack(|| (anchor.get().scale, shift()));
            let at = |x: f64| scale.time_at(x - moved);
            let href = query.with_value(|q| q.altered(|n| n.zoom = Some((at(a), at(b)))).href());
            navigate(&href, Default::default());
        };
        let brush = move || {
            drag.get().filter(|(a, b)| (a - b).abs() >= MIN_BRUSH).map(|(a, b)| {
                view! {
                    <rect
                        class="brush"
                        data-testid="brush"
                        x=a.min(b)
                        y=g.axis_h
                        width=(a - b).abs()
                        height=height() - g.axis_h
                    />
                }
            })
        };
        let now_mark = move || {
            let a = anchor.get();
            let now_x = a.scale.x(a.now);
            now_shown(now_x).then(|| {
                view! {
                    <line
                        class="now-line"
                        data-testid="now-line"
                        x1=now_x
                        x2=now_x
                        y1=g.axis_h - 4.0
                        y2=height
                    />
                    // Over the axis: a tick label sliding under "now" is masked, not overprinted.
                    <rect
                        class="now-mask"
                        x=now_x - NOW_MASK_W
                        y=0
                        width=NOW_MASK_W + g.right_pad
                        height=g.axis_h - 3.0
                    />
                    <text class="now-label" x=now_x + 3.0 y=g.axis_h - 7.0>
                        "now"
                    </text>
                }
            })
        };
        let start_drag = move |ev: leptos::ev::MouseEvent| {
            if let Some(x) = user_x(&ev, g.width).filter(|x| (x0..=x1).contains(x)) {
                if ev.button() == 0 {
                    // No native link drag from a bar; a click still opens its task.
                    ev.prevent_default();
                    drag.set(Some((x, x)));
                }
            }
        };
        let stretch = shown.base.with_value(|d| d.fixed);
        let chart_label = match stretch {
            Some((a, b)) => {
                format!("Runs per {lanes_by} from {} to {} UTC", hms(&a), hms(&b))
            }
            None => format!("Runs per {lanes_by} over the last {minutes} minutes"),
        };
        let window_note = match stretch {
            Some((a, b)) => {
                format!("Zoomed: {} → {} UTC (fixed; drag again to zoom further).", hms(&a), hms(&b))
            }
            None => "Drag across the chart to zoom into a stretch.".to_string(),
        };

        view! {
            <figure
                class="timeline"
                data-testid="timeline"
                data-now=move || answer_now.get().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            >
                <svg
                    node_ref=chart
                    viewBox=move || format!("0 0 {} {}", g.width, height())
                    role="img"
                    aria-label=chart_label
                    class:focusing=move || hot.get().is_some()
                    on:mouseover=move |ev| point_at(run_under(&ev))
                    on:mouseleave=move |_| point_at(None)
                    on:focusin=move |ev| {
                        keeper.took(&ev);
                        point_at(run_under(&ev));
                    }
                    on:focusout=move |_| keeper.settle(move || point_at(None))
                    on:mousedown=start_drag
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
                    }
                >
                    <defs>
                        <clipPath id="timeline-plot">
                            <rect x=x0 y=0 width=x1 - x0 height=move || height() - g.axis_h + 20.0 />
                        </clipPath>
                        // Failed runs are hatched as well as red, so the chart reads without
                        // colour (each state has its own stroke or fill: style/main.css).
                        <pattern
                            id="timeline-hatch"
                            patternUnits="userSpaceOnUse"
                            width=5
                            height=5
                            patternTransform="rotate(45)"
                        >
                            <line class="hatch-line" x1=0 y1=0 x2=0 y2=5 />
                        </pattern>
                    </defs>
                    <For
                        each=lane_rows
                        key=|(name, top, h)| (name.clone(), top.to_bits(), h.to_bits())
                        children=lane_row
                    />
                    <g clip-path="url(#timeline-plot)">
                        <g class="plot" transform=move || format!("translate({:.2},0)", shift())>
                            <g class="axis">{ticks}</g>
                            <g class="marks">
                                <For each=lanes_on_screen key=|lane| lane.clone() children=draw_lane />
                            </g>
                            <g class="reclaims">
                                <For
                                    each=links
                                    key=|c| (c.from_run, c.to_run, c.reason, c.path())
                                    children=link
                                />
                                <For each=stubs key=|s| (s.to_run, s.reason, s.path()) children=stub />
                            </g>
                        </g>
                    </g>
                    {brush}
                    {now_mark}
                </svg>
                <p class="timeline-detail" data-testid="timeline-detail" aria-live="polite">
                    {move || {
                        detail()
                            .unwrap_or_else(|| {
                                "Hover or focus a bar: its task, attempt, state, cause, times and output appear here."
                                    .into()
                            })
                    }}
                </p>
                {more_lanes}
                <figcaption class="muted">{caption}" "{window_note}</figcaption>
            </figure>
        }
        .into_any()
    }
}

/// One lane's marks in the lane's own coordinates, on `scale`, painted in
/// [`LaneMarks::paint_order`] (failures never under healthy runs, glyphs on top);
/// `title(run, state)` is a bar's tooltip, `lit_up(task)` whether a task is lit.
fn lane_marks<L, F>(
    lane: &LaneMarks,
    scale: Scale,
    g: &Geometry,
    title: impl Fn(i64, RunState) -> String,
    view_now: impl Fn() -> DateTime<Utc> + Copy + Send + Sync + 'static,
    lit_up: L,
) -> AnyView
where
    L: Fn(i64) -> F + Clone,
    F: Fn() -> bool + Send + Sync + 'static,
{
    let g = *g;
    let (band_y, band_h) = g.band_in_lane(lane.tracks);
    let cell_mark = |c: &layout::Cell| {
        let (_, label) = state_mark(c.state);
        // Lit when any run merged into it belongs to the task under the pointer or focus.
        let lit: Vec<F> = c.tasks.iter().map(|&task| lit_up(task)).collect();
        let tasks: Vec<String> = c.tasks.iter().map(i64::to_string).collect();
        view! {
            <rect
                class=format!("cell state-{}", c.state.as_str())
                class:hot=move || lit.iter().any(|lit| lit())
                data-count=c.count
                data-failures=c.failures
                data-tasks=tasks.join(" ")
                x=c.x0
                y=band_y
                width=c.x1 - c.x0
                height=band_h
            >
                <title>
                    {format!(
                        "{} runs here, {} failed (most urgent: {label}). Zoom in to see them apart.",
                        c.count,
                        c.failures,
                    )}
                </title>
            </rect>
        }
        .into_any()
    };
    let bar_mark = |b: &layout::Bar| {
        let s = &b.span;
        let (y, h) = g.bar_in_lane(b.track);
        let running = b.grows();
        let bar_x0 = b.x0;
        let fixed_w = (b.x1 - b.x0).max(g.min_bar_px);
        // A running bar grows with the clock until its lease lapses, then ends there, silent
        // (as the layout ends a silent run at its lapse on the next answer).
        let lease = s.lease_expires_at;
        let width =
            move || if running { (scale.x(view_now().min(lease)) - bar_x0).max(fixed_w) } else { fixed_w };
        let base = s.state;
        let class = move || {
            let state = if running && view_now() >= lease { RunState::Silent } else { base };
            let highlight = matches!(state, RunState::LostLease | RunState::EmptyOutput);
            format!("bar state-{}{}", state.as_str(), if highlight { " highlight" } else { "" })
        };
        let state_attr = move || if running && view_now() >= lease { "silent" } else { base.as_str() };
        let lapse = b
            .lapse_x
            .map(|ex| view! { <line class="expiry lapsed" x1=ex x2=ex y1=y - 2.0 y2=y + h + 2.0 /> });
        // The <g> root makes the macro build an SVG <a> (an HTML one would not render inside <svg>).
        view! {
            <g>
                <a
                    href=format!("/tasks/{}", s.task)
                    class="bar-link"
                    class:hot=lit_up(s.task)
                    data-run=s.run
                    data-task=s.task
                    data-state=state_attr
                >
                    <rect class=class x=bar_x0 y=y width=width height=h rx=2>
                        <title>{title(s.run, s.state)}</title>
                    </rect>
                    {lapse}
                </a>
            </g>
        }
        .into_any()
    };
    let glyph_mark = |gl: &layout::Glyph| {
        view! {
            <text
                class="bar-glyph"
                data-glyph=gl.mark
                data-run=gl.run
                x=gl.x
                y=g.bar_in_lane(gl.track).0 + g.glyph_baseline
            >
                {gl.text.clone()}
            </text>
        }
        .into_any()
    };
    lane.paint_order()
        .map(|m| match m {
            layout::Mark::Cell(c) => cell_mark(c),
            layout::Mark::Bar(b) => bar_mark(b),
            layout::Mark::Glyph(gl) => glyph_mark(gl),
        })
        .collect_view()
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
    fn a_paused_timeline_holds_each_changed_run_once_and_past_a_merge_asks_for_the_window() {
        let batch = |rows: &[(&str, i64)]| crate::live::LiveBatch {
            changes: rows
                .iter()
                .enumerate()
                .map(|(i, (table, row_id))| lastword_core::Change {
                    id: i as i64 + 1,
                    table: table.to_string(),
                    row_id: *row_id,
                    task_id: None,
                })
                .collect(),
            reset: false,
        };
        let mut held = Held::default();
        held.keep(&batch(&[("runs", 7), ("tasks", 3), ("runs", 5)]));
        held.keep(&batch(&[("runs", 7), ("runs", 9)]));
        assert_eq!((held.runs.clone(), held.reset), (vec![5, 7, 9], false), "runs only, once each");
        let many: Vec<(&str, i64)> =
            (0..=lastword_core::TIMELINE_RUNS_CAP as i64).map(|i| ("runs", 100 + i)).collect();
        held.keep(&batch(&many));
        assert!(held.reset && held.runs.is_empty(), "more than one merge reads: the window again");
        held.keep(&batch(&[("runs", 1)]));
        assert!(held.reset && held.runs.is_empty(), "and it stays so until Resume");
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
