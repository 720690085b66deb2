//! Where every mark of the live timeline goes, as plain data: lanes, bars, density strips,
//! glyphs, re-claim connectors and time ticks. No leptos here, so each rule (lane order, which
//! bars merge, which glyphs fit, which attempts a connector joins) is unit-tested without a
//! browser, and the page only turns these shapes into SVG.
//!
//! Coordinates are SVG user units of a chart [`Geometry::width`] wide. Time maps to x through
//! [`Scale`]. Runs of one lane that overlap in time (a worker holding two leases, a kind's
//! lane) are stacked in tracks, so no bar covers another; a lane is as tall as its tracks
//! ([`Rows`]), up to [`Geometry::max_tracks`].

use chrono::{DateTime, Duration, Utc};
use lastword_core::{time_text, ReclaimReason, RunState};
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

/// The chart's fixed dimensions, named once so the view and the tests agree on them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Geometry {
    /// Total width of the drawing.
    pub width: f64,
    /// Left column holding the lane names.
    pub label_w: f64,
    /// Right margin, holding the "now" label beside the now line.
    pub right_pad: f64,
    /// Height of the time axis row above the lanes.
    pub axis_h: f64,
    /// Height of a lane of one track.
    pub lane_h: f64,
    /// Vertical inset of a bar inside its lane.
    pub bar_inset: f64,
    /// Space between two tracks of a lane.
    pub track_gap: f64,
    /// At most this many tracks in a lane: beyond, overlapping runs share the track that frees
    /// up first (a kind's lane of 500 concurrent runs stays readable; failures draw on top).
    pub max_tracks: usize,
    /// Baseline of a lane's name below the lane's top.
    pub label_baseline: f64,
    /// Baseline of a glyph below its bar's top.
    pub glyph_baseline: f64,
    /// A run narrower than this is merged into its lane's density strip.
    pub min_bar_px: f64,
    /// Width of one density cell.
    pub bin_px: f64,
    /// Room one glyph character takes (11 px bold text; arrows are wider than digits).
    pub glyph_char_px: f64,
    /// Tick spacing the axis aims for.
    pub tick_px: f64,
}

impl Default for Geometry {
    fn default() -> Self {
        Geometry {
            width: 1000.0,
            label_w: 110.0,
            right_pad: 30.0,
            axis_h: 20.0,
            lane_h: 26.0,
            bar_inset: 4.0,
            track_gap: 2.0,
            max_tracks: 4,
            label_baseline: 17.0,
            glyph_baseline: 13.0,
            min_bar_px: 3.0,
            bin_px: 4.0,
            glyph_char_px: 11.0,
            tick_px: 90.0,
        }
    }
}

impl Geometry {
    /// The x where time is drawn from and to.
    pub fn plot(&self) -> (f64, f64) {
        (self.label_w, self.width - self.right_pad)
    }

    /// Height of one bar (one track).
    pub fn track_h(&self) -> f64 {
        self.lane_h - 2.0 * self.bar_inset
    }

    /// Height of a lane of `tracks` tracks.
    pub fn lane_height(&self, tracks: usize) -> f64 {
        let extra = tracks.max(1) - 1;
        self.lane_h + extra as f64 * (self.track_h() + self.track_gap)
    }

    /// The box (`y`, `height`) of a bar in `track`, measured from its lane's top.
    pub fn bar_in_lane(&self, track: usize) -> (f64, f64) {
        let h = self.track_h();
        (self.bar_inset + track as f64 * (h + self.track_gap), h)
    }

    /// The box (`y`, `height`) of a lane of `tracks` tracks' density cells, from its top.
    pub fn band_in_lane(&self, tracks: usize) -> (f64, f64) {
        (self.bar_inset, self.lane_height(tracks) - 2.0 * self.bar_inset)
    }
}

/// Where each lane sits vertically, from how many tracks each has.
#[derive(Clone, Debug, PartialEq)]
pub struct Rows {
    g: Geometry,
    tracks: Vec<usize>,
    /// `tops[i]` is lane `i`'s top; one more entry, the bottom of the last lane.
    tops: Vec<f64>,
}

impl Default for Rows {
    fn default() -> Self {
        Rows::new(&Geometry::default(), Vec::new())
    }
}

impl Rows {
    pub fn new(g: &Geometry, tracks: Vec<usize>) -> Rows {
        let mut tops = Vec::with_capacity(tracks.len() + 1);
        let mut y = g.axis_h;
        tops.push(y);
        for &t in &tracks {
            y += g.lane_height(t);
            tops.push(y);
        }
        Rows { g: *g, tracks, tops }
    }

    /// Lanes of one track each.
    pub fn uniform(g: &Geometry, lanes: usize) -> Rows {
        Rows::new(g, vec![1; lanes])
    }

    pub fn lanes(&self) -> usize {
        self.tracks.len()
    }

    pub fn tracks(&self, lane: usize) -> usize {
        self.tracks.get(lane).copied().unwrap_or(1)
    }

    pub fn top(&self, lane: usize) -> f64 {
        self.tops[lane.min(self.tops.len() - 1)]
    }

    pub fn height(&self, lane: usize) -> f64 {
        self.g.lane_height(self.tracks(lane))
    }

    /// The box (`y`, `height`) of a bar in `track` of `lane`.
    pub fn bar(&self, lane: usize, track: usize) -> (f64, f64) {
        let (y, h) = self.g.bar_in_lane(track);
        (self.top(lane) + y, h)
    }

    /// The vertical middle of a bar's track (`Some`), or of the lane (a run merged into a cell).
    pub fn mid(&self, lane: usize, track: Option<usize>) -> f64 {
        match track {
            Some(t) => {
                let (y, h) = self.bar(lane, t);
                y + h / 2.0
            }
            None => self.top(lane) + self.height(lane) / 2.0,
        }
    }

    /// The whole drawing's height.
    pub fn total_height(&self) -> f64 {
        self.tops.last().copied().unwrap_or(self.g.axis_h) + 2.0
    }

    /// The lanes to draw marks for: those within the part of the chart on screen, `overscan`
    /// lanes either side so a scroll shows drawn lanes before the next range arrives. `top` and
    /// `bottom` are the screen's edges in the chart's user units (negative or past the chart
    /// when the chart starts or ends on screen).
    pub fn visible(&self, top: f64, bottom: f64, overscan: usize) -> std::ops::Range<usize> {
        let lanes = self.lanes();
        // The lane whose span holds `y` (the first or the last when `y` is outside them).
        let lane_at = |y: f64| self.tops[1..].partition_point(|&bottom| bottom <= y).min(lanes);
        let first = lane_at(top).saturating_sub(overscan);
        let last = (lane_at(bottom) + 1 + overscan).min(lanes);
        first..last.max(first)
    }
}

/// Time → x over a window, linear and clamped to the plot.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scale {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub x0: f64,
    pub x1: f64,
}

impl Scale {
    pub fn px_per_ms(&self) -> f64 {
        (self.x1 - self.x0) / ((self.end - self.start).num_milliseconds().max(1) as f64)
    }

    /// The x of `t`, unclamped (marks past the edges are clipped by the view).
    pub fn x(&self, t: DateTime<Utc>) -> f64 {
        self.x0 + (t - self.start).num_milliseconds() as f64 * self.px_per_ms()
    }

    /// The time drawn at `x` (the inverse of [`Scale::x`]), for turning a drag into a window.
    pub fn time_at(&self, x: f64) -> DateTime<Utc> {
        self.start + Duration::milliseconds(((x - self.x0) / self.px_per_ms()).round() as i64)
    }

    /// The x of `t`, held to the plot.
    pub fn x_clamped(&self, t: DateTime<Utc>) -> f64 {
        self.x(t).clamp(self.x0, self.x1)
    }
}

impl Scale {
    /// The same mapping of time to x, held one window further on each side instead of to the
    /// plot: a picture laid out on it stays right while the clock moves it left (see [`Anchor`]).
    pub fn widened(&self) -> Scale {
        let (span, w) = (self.end - self.start, self.x1 - self.x0);
        Scale { start: self.start - span, end: self.end + span, x0: self.x0 - w, x1: self.x1 + w }
    }
}

/// The scale a live picture is laid out on, kept from answer to answer while it still shows
/// what a fresh one would: a lane whose runs did not change then lays out to the same numbers,
/// so its elements are kept rather than redrawn, and the clock moves the whole picture left as
/// one group (by the time since `now`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Anchor {
    pub scale: Scale,
    /// The answer's time the scale was set at: the picture is drawn at `now`'s place from it.
    pub now: DateTime<Utc>,
}

impl Anchor {
    /// The anchor for an answer whose own window is `fresh`: `prev` while, moved on to
    /// `fresh.now`, it shows the same stretch (give or take a fortieth of it on the left) and
    /// the clock has moved less than a quarter window; else `fresh`. A fixed stretch has
    /// nothing to follow: its own scale.
    pub fn follow(prev: Option<&Anchor>, fresh: Anchor, fixed: bool) -> Anchor {
        let Some(prev) = prev.filter(|_| !fixed) else { return fresh };
        let moved = fresh.now - prev.now;
        let span = prev.scale.end - prev.scale.start;
        let shown_from = prev.scale.start + moved;
        let slack = span / 40;
        let same_stretch = (shown_from - fresh.scale.start).abs() <= slack
            && (fresh.scale.end - fresh.scale.start - span).abs() <= slack;
        if moved >= Duration::zero() && moved <= span / 4 && same_stretch {
            *prev
        } else {
            fresh
        }
    }
}

/// The window drawn: the last `minutes` up to `now`, or, when every run in it started later,
/// from a little before the first claim, so a short history is not squeezed into the right edge.
pub fn fitted_window(
    now: DateTime<Utc>,
    minutes: i64,
    first_claim: Option<DateTime<Utc>>,
) -> (DateTime<Utc>, DateTime<Utc>) {
    let full = now - Duration::minutes(minutes);
    let start = match first_claim {
        Some(first) if first > full => {
            // 5 % of the fitted span as margin, and at least the last minute shown.
            let margin = (now - first) / 20;
            (first - margin).min(now - Duration::minutes(1)).max(full)
        }
        _ => full,
    };
    (start, now)
}

/// One run as the timeline needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    pub run: i64,
    pub task: i64,
    /// The lane it is drawn in: its worker, or its kind or state when lanes group by those.
    pub lane: String,
    pub epoch: i64,
    pub claimed_at: DateTime<Utc>,
    /// The finish, or `None` while it runs (drawn up to now) or since it went silent (drawn up
    /// to its lease lapse).
    pub finished_at: Option<DateTime<Utc>>,
    pub lease_expires_at: DateTime<Utc>,
    pub state: RunState,
    /// Why this claim re-claimed its task, as the server decided it (`lastword_core::reclaim`,
    /// the rule the run list and the task page use); `None` for a first claim.
    pub reclaim: Option<ReclaimReason>,
}

/// How lanes are ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LaneOrder {
    /// The lane whose latest failure is most recent first; lanes without one after, by name.
    #[default]
    RecentFailure,
    ByName,
}

impl LaneOrder {
    pub fn as_str(self) -> &'static str {
        match self {
            LaneOrder::RecentFailure => "failure",
            LaneOrder::ByName => "name",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [LaneOrder::RecentFailure, LaneOrder::ByName].into_iter().find(|o| o.as_str() == s)
    }
}

/// What one lane holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LaneBy {
    /// One lane per worker: who held which lease.
    #[default]
    Worker,
    /// One lane per task kind.
    Kind,
    /// One lane per state: every failure of a kind in one row.
    State,
}

impl LaneBy {
    pub const ALL: [LaneBy; 3] = [LaneBy::Worker, LaneBy::Kind, LaneBy::State];

    pub fn as_str(self) -> &'static str {
        match self {
            LaneBy::Worker => "worker",
            LaneBy::Kind => "kind",
            LaneBy::State => "state",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        LaneBy::ALL.into_iter().find(|b| b.as_str() == s)
    }
}

/// The lanes, in order.
pub fn lanes(spans: &[Span], order: LaneOrder) -> Vec<String> {
    let mut latest_failure: HashMap<&str, Option<DateTime<Utc>>> = HashMap::new();
    for s in spans {
        let seen = latest_failure.entry(s.lane.as_str()).or_insert(None);
        if s.state.is_failure() {
            let at = s.finished_at.unwrap_or(s.lease_expires_at);
            *seen = Some(seen.map_or(at, |prev| prev.max(at)));
        }
    }
    let mut lanes: Vec<(&str, Option<DateTime<Utc>>)> = latest_failure.into_iter().collect();
    match order {
        LaneOrder::ByName => lanes.sort_by(|a, b| a.0.cmp(b.0)),
        // `None` sorts first in `Option`'s order, so compare reversed on the failure time.
        LaneOrder::RecentFailure => lanes.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0))),
    }
    lanes.into_iter().map(|(w, _)| w.to_string()).collect()
}

/// A run drawn as its own bar.
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    pub span: Span,
    pub lane: usize,
    /// Its row inside the lane (0 at the top).
    pub track: usize,
    pub x0: f64,
    /// The right end at layout time; a running bar keeps growing in the view.
    pub x1: f64,
    /// The lease lapse inside the bar, if the run outlived its lease.
    pub lapse_x: Option<f64>,
}

/// One density cell: the runs too narrow to draw alone in a lane's stretch of time.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    pub lane: usize,
    pub x0: f64,
    pub x1: f64,
    pub count: usize,
    /// The state the cell is coloured by: its most urgent one (failures always win).
    pub state: RunState,
    pub failures: usize,
    /// The tasks of the runs merged into it (ascending, once each): the cell lights up with
    /// them when one of their attempts is under the pointer.
    pub tasks: Vec<i64>,
}

impl Cell {
    /// A cell that holds a failure is painted over the lane's bars ([`LaneMarks::paint_order`]).
    pub fn holds_failure(&self) -> bool {
        self.failures > 0
    }
}

/// One mark of a lane, as [`LaneMarks::paint_order`] yields them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mark<'a> {
    Cell(&'a Cell),
    Bar(&'a Bar),
    Glyph(&'a Glyph),
}

/// A glyph drawn in a bar.
#[derive(Clone, Debug, PartialEq)]
pub struct Glyph {
    pub run: i64,
    pub lane: usize,
    pub track: usize,
    pub x: f64,
    pub width: f64,
    pub text: String,
    /// What it marks: a state (`lost_lease`, `empty_output`) or `reclaim`.
    pub mark: &'static str,
}

/// A line from the end of an attempt's lease to the start of the next attempt of its task.
#[derive(Clone, Debug, PartialEq)]
pub struct Connector {
    pub from_run: i64,
    pub to_run: i64,
    pub task: i64,
    pub reason: ReclaimReason,
    pub from: (f64, f64),
    pub to: (f64, f64),
}

/// A re-claim whose earlier attempt is not drawn (before the window, or in a lane not shown):
/// a short lead-in to the re-claiming bar, so the hand-over is still visible and says why.
#[derive(Clone, Debug, PartialEq)]
pub struct Stub {
    pub to_run: i64,
    pub task: i64,
    pub reason: ReclaimReason,
    /// Where the re-claiming run starts.
    pub to: (f64, f64),
}

impl Stub {
    /// Length of the lead-in, in user units.
    pub const REACH: f64 = 18.0;

    /// An SVG path: in from the upper left, ending at the claim.
    pub fn path(&self) -> String {
        let (x, y) = self.to;
        format!("M{:.1},{:.1} L{x:.1},{y:.1}", x - Self::REACH, y - Self::REACH / 3.0)
    }
}

impl Connector {
    /// An SVG path: out of the lapse to the right, into the new claim from the left.
    pub fn path(&self) -> String {
        let ((x0, y0), (x1, y1)) = (self.from, self.to);
        let bend = ((x1 - x0).abs() / 2.0).max(12.0);
        format!("M{x0:.1},{y0:.1} C{:.1},{y0:.1} {:.1},{y1:.1} {x1:.1},{y1:.1}", x0 + bend, x1 - bend)
    }
}

/// A labelled time on the axis.
#[derive(Clone, Debug, PartialEq)]
pub struct Tick {
    pub at: DateTime<Utc>,
    pub x: f64,
    pub label: String,
}

/// Everything the chart draws for one answer.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Layout {
    pub lanes: Vec<String>,
    /// Where each lane sits, from its tracks.
    pub rows: Rows,
    pub bars: Vec<Bar>,
    pub cells: Vec<Cell>,
    pub glyphs: Vec<Glyph>,
    pub connectors: Vec<Connector>,
    pub stubs: Vec<Stub>,
}

/// One lane's marks, in the lane's own coordinates (bars and cells placed by their track, not
/// by where the lane sits), with a key that changes exactly when what the lane draws does: a
/// live answer redraws the lanes it touched and moves the others, instead of redrawing 5 000
/// runs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LaneMarks {
    pub name: String,
    pub tracks: usize,
    pub cells: Vec<Cell>,
    pub bars: Vec<Bar>,
    pub glyphs: Vec<Glyph>,
}

impl LaneMarks {
    /// The lane's marks bottom to top: healthy density cells, the bars (failures last: see
    /// [`layout`]), the cells that hold a failure, then the glyphs. A failure merged into a cell
    /// is never painted under a healthy bar of another track of its lane.
    pub fn paint_order(&self) -> impl Iterator<Item = Mark<'_>> {
        let (over, under): (Vec<&Cell>, Vec<&Cell>) = self.cells.iter().partition(|c| c.holds_failure());
        under
            .into_iter()
            .map(Mark::Cell)
            .chain(self.bars.iter().map(Mark::Bar))
            .chain(over.into_iter().map(Mark::Cell))
            .chain(self.glyphs.iter().map(Mark::Glyph))
    }

    /// A digest of everything the lane draws, plus what `more` adds for each bar's run (what
    /// the page shows of a run beyond its shape: its tooltip's text). A running bar's right
    /// end is left out: the view grows it with the clock, so it moves without a redraw.
    pub fn key(&self, mut more: impl FnMut(i64, &mut DefaultHasher)) -> u64 {
        let mut h = DefaultHasher::new();
        let f = |x: f64, h: &mut DefaultHasher| x.to_bits().hash(h);
        self.name.hash(&mut h);
        self.tracks.hash(&mut h);
        for c in &self.cells {
            (c.count, c.failures, c.state, &c.tasks).hash(&mut h);
            f(c.x0, &mut h);
            f(c.x1, &mut h);
        }
        for b in &self.bars {
            let s = &b.span;
            (s.run, s.task, s.epoch, s.claimed_at, s.finished_at, s.lease_expires_at, s.state, s.reclaim)
                .hash(&mut h);
            (b.track, b.lapse_x.map(f64::to_bits)).hash(&mut h);
            f(b.x0, &mut h);
            if !b.grows() {
                f(b.x1, &mut h);
            }
            more(s.run, &mut h);
        }
        for g in &self.glyphs {
            (g.run, g.track, &g.text, g.mark).hash(&mut h);
            f(g.x, &mut h);
        }
        h.finish()
    }
}

impl Bar {
    /// A run still going (neither finished nor lapsed): the view draws it to the clock.
    pub fn grows(&self) -> bool {
        self.span.finished_at.is_none() && self.span.state == RunState::Running
    }
}

impl Layout {
    /// Hands the marks out per lane, in lane order (the layout keeps its rows, connectors and
    /// stubs).
    pub fn take_lane_marks(&mut self) -> Vec<LaneMarks> {
        let mut lanes: Vec<LaneMarks> = self
            .lanes
            .iter()
            .enumerate()
            .map(|(i, name)| LaneMarks {
                name: name.clone(),
                tracks: self.rows.tracks(i),
                ..LaneMarks::default()
            })
            .collect();
        for c in self.cells.drain(..) {
            lanes[c.lane].cells.push(c);
        }
        for b in self.bars.drain(..) {
            lanes[b.lane].bars.push(b);
        }
        for g in self.glyphs.drain(..) {
            lanes[g.lane].glyphs.push(g);
        }
        lanes
    }
}

/// The urgency a state wins a density cell (and a glyph slot) with: failures first.
fn urgency(state: RunState) -> u8 {
    match state {
        RunState::LostLease => 7,
        RunState::EmptyOutput => 6,
        RunState::Silent => 5,
        RunState::Failed => 4,
        RunState::Running => 3,
        RunState::Acted => 2,
        RunState::NoAction => 1,
        RunState::Skip => 0,
    }
}

/// A density cell being filled: how many runs, the most urgent state, the failures, the tasks.
struct Bin {
    count: usize,
    state: RunState,
    failures: usize,
    tasks: Vec<i64>,
}

/// Lays out `spans` (runs overlapping the window) on `scale`, with running ones drawn to `now`.
pub fn layout(spans: &[Span], order: LaneOrder, scale: &Scale, now: DateTime<Utc>, g: &Geometry) -> Layout {
    let lanes = lanes(spans, order);
    let lane_of: HashMap<&str, usize> = lanes.iter().enumerate().map(|(i, w)| (w.as_str(), i)).collect();
    let mut bars = Vec::new();
    // (lane, bin index) → the runs merged there so far
    let mut bins: HashMap<(usize, i64), Bin> = HashMap::new();
    for s in spans {
        let lane = lane_of[s.lane.as_str()];
        // A silent run is drawn to where it went silent (its lease lapse), a running one to now.
        let open_end = if s.state == RunState::Silent { s.lease_expires_at } else { now };
        let end = s.finished_at.unwrap_or(open_end).max(s.claimed_at);
        let (x0, x1) = (scale.x_clamped(s.claimed_at), scale.x_clamped(end));
        if x1 - x0 >= g.min_bar_px {
            let lapse_x = (s.lease_expires_at < end).then(|| scale.x_clamped(s.lease_expires_at));
            bars.push(Bar { span: s.clone(), lane, track: 0, x0, x1, lapse_x });
        } else {
            // Bins on absolute x, so a run's cell does not depend on its neighbours.
            let bin = (((x0 + x1) / 2.0 - g.label_w) / g.bin_px).floor() as i64;
            let cell = bins.entry((lane, bin)).or_insert(Bin {
                count: 0,
                state: s.state,
                failures: 0,
                tasks: Vec::new(),
            });
            cell.count += 1;
            if urgency(s.state) > urgency(cell.state) {
                cell.state = s.state;
            }
            cell.failures += usize::from(s.state.is_failure());
            cell.tasks.push(s.task);
        }
    }
    let rows = Rows::new(g, pack(&mut bars, lanes.len(), g.max_tracks));
    // Bars share a track only in a lane past `max_tracks`: failures are drawn last, so a
    // healthy bar never covers one (stable: otherwise in claim order).
    bars.sort_by_key(|b| b.span.state.is_failure());
    let mut cells: Vec<Cell> = bins
        .into_iter()
        .map(|((lane, bin), Bin { count, state, failures, mut tasks })| {
            let x0 = g.label_w + bin as f64 * g.bin_px;
            tasks.sort_unstable();
            tasks.dedup();
            Cell { lane, x0, x1: x0 + g.bin_px, count, state, failures, tasks }
        })
        .collect();
    // Healthy cells first, failures last: drawn on top, never hidden.
    cells.sort_by(|a, b| {
        urgency(a.state).cmp(&urgency(b.state)).then(a.lane.cmp(&b.lane)).then(a.x0.total_cmp(&b.x0))
    });
    let glyphs = place_glyphs(&bars, g);
    let track_of: HashMap<i64, usize> = bars.iter().map(|b| (b.span.run, b.track)).collect();
    let y_of = |run: i64, lane: usize| rows.mid(lane, track_of.get(&run).copied());
    let (connectors, stubs) = connect(spans, &lane_of, scale, y_of);
    Layout { lanes, rows, bars, cells, glyphs, connectors, stubs }
}

/// Stacks each lane's bars in tracks so that no two overlap: in start order, a bar takes the
/// first track free by its start (which uses the fewest tracks), a new one while the lane has
/// fewer than `max_tracks`, else the track that frees up first. Returns each lane's number of
/// tracks (at least one).
fn pack(bars: &mut [Bar], lanes: usize, max_tracks: usize) -> Vec<usize> {
    /// Room left between two bars of one track, so they read as two.
    const GAP: f64 = 1.0;
    let mut order: Vec<usize> = (0..bars.len()).collect();
    order.sort_by(|&a, &b| bars[a].x0.total_cmp(&bars[b].x0).then(bars[a].span.run.cmp(&bars[b].span.run)));
    // Per lane: where each of its tracks is free from.
    let mut free_from: Vec<Vec<f64>> = vec![Vec::new(); lanes];
    for i in order {
        let (lane, x0, x1) = (bars[i].lane, bars[i].x0, bars[i].x1);
        let ends = &mut free_from[lane];
        let track = match ends.iter().position(|&end| end + GAP <= x0) {
            Some(t) => t,
            None if ends.len() < max_tracks.max(1) => {
                ends.push(f64::NEG_INFINITY);
                ends.len() - 1
            }
            None => (0..ends.len()).min_by(|&a, &b| ends[a].total_cmp(&ends[b])).unwrap_or(0),
        };
        ends[track] = ends[track].max(x1);
        bars[i].track = track;
    }
    free_from.iter().map(|t| t.len().max(1)).collect()
}

/// The glyph a bar would carry, if any: its failure mark, else its re-claim epoch.
fn glyph_for(span: &Span) -> Option<(String, &'static str)> {
    match span.state {
        RunState::LostLease => Some(("⇄".into(), "lost_lease")),
        RunState::EmptyOutput => Some(("∅".into(), "empty_output")),
        _ if span.epoch > 1 => Some((format!("↻{}", span.epoch), "reclaim")),
        _ => None,
    }
}

/// Glyphs only where they fit: inside their own bar and clear of every glyph already placed in
/// the lane, the most urgent placed first. A glyph that does not fit is left out (the bar's
/// colour, pattern and tooltip still say it).
fn place_glyphs(bars: &[Bar], g: &Geometry) -> Vec<Glyph> {
    let mut wanted: Vec<(&Bar, String, &'static str)> =
        bars.iter().filter_map(|b| glyph_for(&b.span).map(|(t, m)| (b, t, m))).collect();
    wanted.sort_by(|a, b| {
        urgency(b.0.span.state).cmp(&urgency(a.0.span.state)).then(a.0.x0.total_cmp(&b.0.x0))
    });
    let mut placed: Vec<Glyph> = Vec::new();
    for (bar, text, mark) in wanted {
        let width = text.chars().count() as f64 * g.glyph_char_px + 2.0;
        let x = bar.x0 + 1.0;
        let fits_bar = x + width <= bar.x1;
        let clear = placed
            .iter()
            .filter(|p| p.lane == bar.lane && p.track == bar.track)
            .all(|p| x + width <= p.x || p.x + p.width <= x);
        if fits_bar && clear {
            placed.push(Glyph { run: bar.span.run, lane: bar.lane, track: bar.track, x, width, text, mark });
        }
    }
    placed
}

/// A connector for every re-claim (a run with a reason) whose task's previous attempt is drawn
/// too: from the earlier run's lease lapse (or its finish, if it finished within its lease) to
/// the later claim, each end at the middle of its run's track (`y_of(run, lane)`). A re-claim
/// whose previous attempt is not drawn gets a [`Stub`].
fn connect(
    spans: &[Span],
    lane_of: &HashMap<&str, usize>,
    scale: &Scale,
    y_of: impl Fn(i64, usize) -> f64,
) -> (Vec<Connector>, Vec<Stub>) {
    let mut by_task: HashMap<i64, Vec<&Span>> = HashMap::new();
    for s in spans {
        by_task.entry(s.task).or_default().push(s);
    }
    let (mut connectors, mut stubs) = (Vec::new(), Vec::new());
    for later in spans {
        let Some(reason) = later.reclaim else { continue };
        let to = (scale.x_clamped(later.claimed_at), y_of(later.run, lane_of[later.lane.as_str()]));
        // The attempt it replaced: the task's run of the next lower epoch (as the rule reads it).
        let earlier = by_task[&later.task]
            .iter()
            .filter(|s| s.epoch < later.epoch)
            .max_by_key(|s| (s.epoch, s.claimed_at, s.run));
        match earlier {
            Some(earlier) => {
                let handed_over =
                    earlier.finished_at.map_or(earlier.lease_expires_at, |f| f.min(earlier.lease_expires_at));
                connectors.push(Connector {
                    from_run: earlier.run,
                    to_run: later.run,
                    task: later.task,
                    reason,
                    from: (scale.x_clamped(handed_over), y_of(earlier.run, lane_of[earlier.lane.as_str()])),
                    to,
                });
            }
            None => stubs.push(Stub { to_run: later.run, task: later.task, reason, to }),
        }
    }
    connectors.sort_by_key(|c| c.to_run);
    stubs.sort_by_key(|c| c.to_run);
    (connectors, stubs)
}

/// Steps the axis may use, in seconds.
const TICK_STEPS: [i64; 16] = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600];

/// Ticks at round times (every 10 s, 1 min, 15 min, …), about `tick_px` apart, labelled in
/// the zone `offset` gives (UTC or the browser's), with seconds only when the step needs them.
pub fn ticks(scale: &Scale, g: &Geometry, offset: chrono::FixedOffset) -> Vec<Tick> {
    let span_ms = (scale.end - scale.start).num_milliseconds().max(1);
    let wanted = ((scale.x1 - scale.x0) / g.tick_px).max(1.0);
    let step = TICK_STEPS
        .into_iter()
        .find(|s| (span_ms as f64 / (*s as f64 * 1000.0)) <= wanted)
        .unwrap_or(*TICK_STEPS.last().unwrap_or(&3600));
    let step_ms = step * 1000;
    let local_ms = |t: DateTime<Utc>| t.timestamp_millis() + offset.local_minus_utc() as i64 * 1000;
    let first = local_ms(scale.start).div_euclid(step_ms) * step_ms + step_ms;
    let mut out = Vec::new();
    let mut at_local = first;
    while at_local <= local_ms(scale.end) {
        let Some(at) = DateTime::from_timestamp_millis(at_local - offset.local_minus_utc() as i64 * 1000)
        else {
            break;
        };
        let shown = at.with_timezone(&offset);
        let label = if step < 60 { time_text::hms(&shown) } else { time_text::hm(&shown) };
        out.push(Tick { at, x: scale.x(at), label });
        at_local += step_ms;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + s, 0).unwrap()
    }

    /// A re-claim: `s` with the reason the server gave it.
    fn because(reason: ReclaimReason, s: Span) -> Span {
        Span { reclaim: Some(reason), ..s }
    }

    #[allow(clippy::too_many_arguments)] // one row of a table of attempts reads best flat
    fn span(
        run: i64,
        task: i64,
        worker: &str,
        epoch: i64,
        from: i64,
        to: Option<i64>,
        lease: i64,
        state: RunState,
    ) -> Span {
        Span {
            run,
            task,
            lane: worker.into(),
            epoch,
            claimed_at: t(from),
            finished_at: to.map(t),
            lease_expires_at: t(lease),
            state,
            reclaim: None,
        }
    }

    fn scale(from: i64, to: i64) -> Scale {
        let (x0, x1) = Geometry::default().plot();
        Scale { start: t(from), end: t(to), x0, x1 }
    }

    #[test]
    fn a_drag_turns_back_into_the_times_it_covers() {
        let sc = scale(0, 900);
        for s in [0, 1, 450, 899, 900] {
            assert_eq!(sc.time_at(sc.x(t(s))), t(s));
        }
        assert_eq!(sc.x(t(0)), sc.x0);
        assert_eq!(sc.x(t(900)), sc.x1);
        assert_eq!(sc.x_clamped(t(2000)), sc.x1);
    }

    #[test]
    fn a_short_history_is_fitted_and_a_long_one_fills_the_window() {
        // 15 minutes asked, runs only in the last 100 s: start 5 s before the first claim.
        assert_eq!(fitted_window(t(900), 15, Some(t(800))), (t(795), t(900)));
        // Runs from before the window: the whole window.
        assert_eq!(fitted_window(t(900), 15, Some(t(-5))), (t(0), t(900)));
        assert_eq!(fitted_window(t(900), 15, None), (t(0), t(900)));
        // A first claim a second ago still shows about a minute.
        let (start, _) = fitted_window(t(900), 15, Some(t(899)));
        assert!(start < t(899) && start >= t(0));
    }

    #[test]
    fn lanes_put_the_most_recent_failure_first_or_go_by_name() {
        let spans = vec![
            span(1, 1, "b", 1, 0, Some(5), 30, RunState::Acted),
            span(2, 2, "c", 1, 0, Some(5), 30, RunState::Failed),
            span(3, 3, "a", 1, 0, Some(9), 30, RunState::LostLease),
            span(4, 4, "d", 1, 0, Some(5), 30, RunState::Skip),
        ];
        assert_eq!(lanes(&spans, LaneOrder::RecentFailure), ["a", "c", "b", "d"]);
        assert_eq!(lanes(&spans, LaneOrder::ByName), ["a", "b", "c", "d"]);
        assert_eq!(LaneOrder::parse("name"), Some(LaneOrder::ByName));
        assert_eq!(LaneOrder::parse("nope"), None);
    }

    #[test]
    fn narrow_runs_merge_into_cells_coloured_by_their_worst_state_and_drawn_on_top() {
        let g = Geometry::default();
        // 900 s on 882 px: about a pixel a second, so one-second runs are too narrow to draw.
        let sc = scale(0, 900);
        let spans = vec![
            span(1, 1, "w", 1, 100, Some(101), 130, RunState::Acted),
            span(2, 2, "w", 1, 101, Some(102), 130, RunState::Failed),
            span(3, 3, "w", 1, 400, Some(401), 430, RunState::Skip),
            span(4, 4, "w", 1, 500, Some(560), 530, RunState::LostLease),
        ];
        let l = layout(&spans, LaneOrder::ByName, &sc, t(900), &g);
        assert_eq!(l.bars.len(), 1, "only the 60-second run is wide enough");
        assert_eq!(l.bars[0].span.run, 4);
        assert!(l.bars[0].lapse_x.is_some(), "it outlived its lease at 530 s");
        let total: usize = l.cells.iter().map(|c| c.count).sum();
        assert_eq!(total, 3, "every narrow run is counted in a cell");
        let failed = l.cells.iter().find(|c| c.failures > 0).expect("the failure's cell");
        assert_eq!(failed.state, RunState::Failed, "a failure colours the cell it shares with a healthy run");
        assert_eq!(failed.count, 2);
        assert_eq!(l.cells.last().unwrap().state, RunState::Failed, "failure cells are drawn last, on top");
        assert_eq!(failed.tasks, [1, 2], "the cell names the tasks it holds, to light up with them");
        // Zoomed in on the first two runs, they separate into bars.
        let zoomed = layout(&spans[..2], LaneOrder::ByName, &scale(95, 110), t(110), &g);
        assert_eq!((zoomed.bars.len(), zoomed.cells.len()), (2, 0));
    }

    #[test]
    fn a_lane_paints_healthy_cells_then_bars_then_cells_holding_a_failure_then_glyphs() {
        let g = Geometry::default();
        let sc = scale(0, 900);
        let spans = vec![
            // A wide healthy bar, and a one-second failure during it (a cell, in the lane's band).
            span(1, 1, "w", 1, 100, Some(400), 430, RunState::Acted),
            span(2, 2, "w", 1, 200, Some(201), 230, RunState::Failed),
            // A one-second healthy run: a healthy cell.
            span(3, 3, "w", 1, 600, Some(601), 630, RunState::Skip),
            // A wide lost lease: a bar with its glyph.
            span(4, 4, "w", 1, 500, Some(560), 530, RunState::LostLease),
        ];
        let mut l = layout(&spans, LaneOrder::ByName, &sc, t(900), &g);
        let lanes = l.take_lane_marks();
        let order: Vec<String> = lanes[0]
            .paint_order()
            .map(|m| match m {
                Mark::Cell(c) => format!("cell {}", c.state.as_str()),
                Mark::Bar(b) => format!("bar {}", b.span.run),
                Mark::Glyph(gl) => format!("glyph {}", gl.run),
            })
            .collect();
        assert_eq!(order, ["cell skip", "bar 1", "bar 4", "cell failed", "glyph 4"]);
    }

    #[test]
    fn a_failure_is_drawn_over_a_healthy_run_it_shares_a_lane_and_time_with() {
        // A lane at its track limit (one): the three runs share it.
        let g = Geometry { max_tracks: 1, ..Geometry::default() };
        let sc = scale(0, 300);
        // The failure was claimed first; the healthy run, claimed later, overlaps it.
        let spans = vec![
            span(1, 1, "w", 1, 10, Some(200), 40, RunState::LostLease),
            span(2, 2, "w", 1, 20, Some(100), 50, RunState::Acted),
            span(3, 3, "w", 1, 30, Some(90), 60, RunState::Skip),
        ];
        let l = layout(&spans, LaneOrder::ByName, &sc, t(300), &g);
        let order: Vec<i64> = l.bars.iter().map(|b| b.span.run).collect();
        assert_eq!(order, [2, 3, 1], "healthy bars in claim order, then the failure on top");
    }

    #[test]
    fn glyphs_fit_inside_their_bar_and_never_overlap_in_a_lane() {
        // One track per lane, so that bars starting together share it and their glyphs collide.
        let g = Geometry { max_tracks: 1, ..Geometry::default() };
        let sc = scale(0, 300);
        // Two lost leases and a re-claim starting together in one lane: wide bars, colliding
        // glyphs; an empty output in a bar too narrow for its glyph; a re-claim in another lane.
        let spans = vec![
            span(1, 1, "w", 1, 10, Some(40), 20, RunState::LostLease),
            span(2, 2, "w", 1, 10, Some(40), 20, RunState::LostLease),
            span(3, 3, "w", 3, 10, Some(30), 50, RunState::Acted),
            span(4, 4, "w", 1, 45, Some(47), 50, RunState::EmptyOutput),
            span(5, 5, "v", 2, 10, Some(40), 50, RunState::Acted),
        ];
        let l = layout(&spans, LaneOrder::ByName, &sc, t(300), &g);
        assert_eq!(l.bars.len(), 5, "every run is wide enough for a bar");
        for (i, a) in l.glyphs.iter().enumerate() {
            let bar = l.bars.iter().find(|b| b.span.run == a.run).unwrap();
            assert!(a.x >= bar.x0 && a.x + a.width <= bar.x1, "glyph {a:?} inside its bar");
            for b in &l.glyphs[i + 1..] {
                let overlap = a.lane == b.lane && a.x < b.x + b.width && b.x < a.x + a.width;
                assert!(!overlap, "{a:?} and {b:?} overlap");
            }
        }
        let marks: Vec<_> = l.glyphs.iter().map(|g| (g.run, g.mark)).collect();
        assert!(marks.contains(&(1, "lost_lease")), "the first lost lease gets its glyph: {marks:?}");
        assert!(!marks.iter().any(|(r, _)| *r == 2 || *r == 3), "colliding glyphs are left out: {marks:?}");
        assert!(marks.contains(&(5, "reclaim")), "another lane is free: {marks:?}");
        assert!(!marks.iter().any(|(r, _)| *r == 4), "a glyph wider than its bar is left out: {marks:?}");
    }

    #[test]
    fn connectors_join_each_attempt_to_the_next_across_lanes_with_the_servers_reason() {
        use ReclaimReason::{DeadWorker, OperatorRequeue, SlowWorker};
        let g = Geometry::default();
        let sc = scale(0, 300);
        // Task 7: a silent run on a (its worker never seen again), re-claimed by b whose write
        // lost its lease, re-claimed by c. Task 8 re-queued by an operator. Task 9 once.
        // Task 6's earlier attempt is before the window: its re-claim gets a stub.
        let spans = vec![
            span(10, 7, "a", 1, 0, None, 30, RunState::Silent),
            because(DeadWorker, span(11, 7, "b", 2, 31, Some(90), 61, RunState::LostLease)),
            because(SlowWorker, span(12, 7, "c", 3, 62, Some(70), 92, RunState::Acted)),
            span(13, 8, "a", 1, 100, Some(110), 130, RunState::Acted),
            because(OperatorRequeue, span(14, 8, "a", 2, 200, Some(210), 230, RunState::NoAction)),
            span(15, 9, "b", 1, 100, Some(110), 130, RunState::Acted),
            because(SlowWorker, span(16, 6, "c", 4, 150, Some(160), 180, RunState::Acted)),
        ];
        let l = layout(&spans, LaneOrder::ByName, &sc, t(300), &g);
        let ends: Vec<_> = l.connectors.iter().map(|c| (c.from_run, c.to_run, c.reason)).collect();
        assert_eq!(ends, [(10, 11, DeadWorker), (11, 12, SlowWorker), (13, 14, OperatorRequeue)]);
        let first = &l.connectors[0];
        // One track per lane here (no two runs of a lane overlap): each end at its lane's middle.
        let mid = |lane| Rows::uniform(&g, 3).mid(lane, None);
        assert_eq!(first.from, (sc.x(t(30)), mid(0)), "from the lapse of a's lease, in a's lane");
        assert_eq!(first.to, (sc.x(t(31)), mid(1)), "to b's claim, in b's lane");
        let silent = l.bars.iter().find(|b| b.span.run == 10).unwrap();
        assert_eq!(
            (silent.x0, silent.x1),
            (sc.x(t(0)), sc.x(t(30))),
            "a silent run ends where it went silent"
        );
        // A run that finished inside its lease hands over at its finish.
        assert_eq!(l.connectors[2].from.0, sc.x(t(110)));
        assert!(first.path().starts_with('M'));
        // The re-claim whose earlier attempt is not drawn: a stub into its claim, with its reason.
        assert_eq!(l.stubs.len(), 1);
        assert_eq!((l.stubs[0].to_run, l.stubs[0].reason), (16, SlowWorker));
        assert_eq!(l.stubs[0].to, (sc.x(t(150)), mid(2)));
        // Without the earlier lane drawn (a filter, a lane limit) a connector becomes a stub.
        let only_b: Vec<Span> = spans.iter().filter(|s| s.lane != "a").cloned().collect();
        let l = layout(&only_b, LaneOrder::ByName, &sc, t(300), &g);
        let ends: Vec<_> = l.connectors.iter().map(|c| (c.from_run, c.to_run)).collect();
        assert_eq!(ends, [(11, 12)]);
        let stubs: Vec<_> = l.stubs.iter().map(|s| s.to_run).collect();
        assert_eq!(stubs, [11, 16]);
        // A first claim (no reason) never gets a link or a stub.
        let into: Vec<i64> =
            l.connectors.iter().map(|c| c.to_run).chain(l.stubs.iter().map(|s| s.to_run)).collect();
        assert!(![10, 13, 15].iter().any(|first| into.contains(first)), "{into:?}");
    }

    #[test]
    fn only_the_lanes_on_screen_and_a_margin_are_drawn() {
        let g = Geometry::default();
        let rows = Rows::uniform(&g, 200);
        // 200 lanes of 26 units under a 20-unit axis; the screen shows units 0..520 (the top).
        assert_eq!(rows.visible(0.0, 520.0, 5), 0..25);
        // Scrolled to lane 100's top: lanes 100..=119 on screen, 5 either side.
        let top = rows.top(100);
        assert_eq!(top, g.axis_h + 100.0 * g.lane_h);
        assert_eq!(rows.visible(top, top + 519.0, 5), 95..125);
        // Past the end, and a chart wholly below the screen or above it.
        assert_eq!(rows.visible(rows.top(195), rows.top(195) + 520.0, 5), 190..200);
        assert_eq!(rows.visible(-2000.0, -1000.0, 5), 0..6);
        assert!(rows.visible(9000.0, 9520.0, 5).len() <= 6);
        assert_eq!(Rows::uniform(&g, 0).visible(0.0, 520.0, 5), 0..0);
        // Taller lanes (four tracks each, 86 units) put fewer on one screen.
        let tall = Rows::new(&g, vec![4; 200]);
        assert_eq!(tall.height(0), 26.0 + 3.0 * 20.0);
        assert_eq!(tall.visible(0.0, 520.0, 0), 0..6, "lanes 0..=5 reach unit 520");
        assert_eq!(tall.visible(tall.top(50) + 1.0, tall.top(50) + 80.0, 0), 50..51);
        assert_eq!(tall.total_height(), g.axis_h + 200.0 * 86.0 + 2.0);
    }

    #[test]
    fn runs_of_a_lane_that_overlap_in_time_are_stacked_in_tracks_and_the_lane_grows() {
        let g = Geometry::default();
        let sc = scale(0, 300);
        // Lane w: 1 and 2 overlap, 3 starts after 1 ends (reuses its track), 4 overlaps all
        // three. Lane v: one run, one track.
        let spans = vec![
            span(1, 1, "w", 1, 0, Some(100), 200, RunState::Acted),
            span(2, 2, "w", 1, 50, Some(150), 200, RunState::Acted),
            span(3, 3, "w", 1, 110, Some(180), 200, RunState::LostLease),
            span(4, 4, "w", 1, 60, Some(170), 200, RunState::Acted),
            span(5, 5, "v", 1, 0, Some(100), 200, RunState::Acted),
        ];
        let l = layout(&spans, LaneOrder::ByName, &sc, t(300), &g);
        let track = |run| l.bars.iter().find(|b| b.span.run == run).unwrap().track;
        assert_eq!([track(1), track(2), track(3), track(4)], [0, 1, 0, 2]);
        let (v, w) = (0, 1);
        assert_eq!((l.rows.tracks(v), l.rows.tracks(w)), (1, 3));
        assert_eq!(l.rows.top(w), g.axis_h + g.lane_h, "v above w, one track tall");
        assert_eq!(l.rows.height(w), g.lane_height(3));
        // No two bar boxes of the chart intersect.
        let boxes: Vec<(i64, f64, f64, f64, f64)> = l
            .bars
            .iter()
            .map(|b| {
                let (y, h) = l.rows.bar(b.lane, b.track);
                (b.span.run, b.x0, b.x1, y, y + h)
            })
            .collect();
        for (i, a) in boxes.iter().enumerate() {
            assert!(a.3 >= l.rows.top(if a.0 == 5 { v } else { w }), "{a:?} inside its lane");
            for b in &boxes[i + 1..] {
                let overlap = a.1 < b.2 && b.1 < a.2 && a.3 < b.4 && b.3 < a.4;
                assert!(!overlap, "{a:?} and {b:?} overlap");
            }
        }
        // A connector ends at the middle of its run's track.
        let spans = vec![
            span(1, 1, "w", 1, 0, Some(100), 200, RunState::Acted),
            span(2, 9, "w", 1, 50, None, 70, RunState::Silent),
            because(ReclaimReason::DeadWorker, span(3, 9, "v", 2, 71, Some(90), 120, RunState::Acted)),
        ];
        let l = layout(&spans, LaneOrder::ByName, &sc, t(300), &g);
        let (y, h) = l.rows.bar(1, 1);
        assert_eq!(l.connectors[0].from, (sc.x(t(70)), y + h / 2.0));
    }

    #[test]
    fn a_lane_stops_growing_at_its_track_limit_and_failures_stay_on_top() {
        let g = Geometry { max_tracks: 2, ..Geometry::default() };
        let sc = scale(0, 300);
        // Three runs at once in one lane with room for two tracks: the third shares the track
        // that frees up first, and the failure among them is drawn after the healthy ones.
        let spans = vec![
            span(1, 1, "w", 1, 0, Some(100), 200, RunState::Acted),
            span(2, 2, "w", 1, 10, Some(200), 250, RunState::Acted),
            span(3, 3, "w", 1, 20, Some(90), 250, RunState::Failed),
        ];
        let l = layout(&spans, LaneOrder::ByName, &sc, t(300), &g);
        assert_eq!(l.rows.tracks(0), 2);
        let track = |run| l.bars.iter().find(|b| b.span.run == run).unwrap().track;
        assert_eq!([track(1), track(2), track(3)], [0, 1, 0]);
        let order: Vec<i64> = l.bars.iter().map(|b| b.span.run).collect();
        assert_eq!(order.last(), Some(&3), "the failure is drawn last: {order:?}");
    }

    #[test]
    fn ticks_fall_on_round_times_about_the_wanted_distance_apart() {
        let g = Geometry::default();
        let utc = chrono::FixedOffset::east_opt(0).unwrap();
        for (minutes, step_secs) in [(5, 60), (15, 120), (60, 600), (240, 1800)] {
            let sc = scale(0, minutes * 60);
            let ticks = ticks(&sc, &g, utc);
            assert!(ticks.len() >= 3, "{minutes} min: {ticks:?}");
            for pair in ticks.windows(2) {
                assert_eq!((pair[1].at - pair[0].at).num_seconds(), step_secs, "{minutes} min");
                assert!(pair[1].x - pair[0].x >= g.tick_px * 0.6, "{minutes} min: readable spacing");
            }
            for tick in &ticks {
                assert_eq!(tick.at.timestamp() % step_secs, 0, "round times");
                assert!(tick.x >= sc.x0 && tick.x <= sc.x1);
            }
        }
        let sc = scale(0, 60);
        assert!(ticks(&sc, &g, utc).iter().all(|t| t.label.len() == 8), "seconds shown on short windows");
        // A zone east of UTC labels the same instants in its own time.
        let plus2 = chrono::FixedOffset::east_opt(7200).unwrap();
        let a = ticks(&scale(0, 3600), &g, utc);
        let b = ticks(&scale(0, 3600), &g, plus2);
        assert_eq!(a.iter().map(|t| t.at).collect::<Vec<_>>(), b.iter().map(|t| t.at).collect::<Vec<_>>());
        assert_ne!(a[0].label, b[0].label);
    }

    #[test]
    fn a_live_picture_keeps_its_scale_while_the_clock_moves_a_little_and_widened_maps_alike() {
        let at = |now: i64, from: i64| Anchor { scale: scale(from, now), now: t(now) };
        // A full 15-minute window, answers 1 s and 200 s later: the same stretch moved on.
        let first = at(900, 0);
        assert_eq!(Anchor::follow(Some(&first), at(901, 1), false), first);
        assert_eq!(Anchor::follow(Some(&first), at(1100, 200), false), first);
        // More than a quarter window on, or an answer from before, or a different stretch
        // (another window, a fitted history that grew): the fresh scale.
        assert_eq!(Anchor::follow(Some(&first), at(1200, 300), false), at(1200, 300));
        assert_eq!(Anchor::follow(Some(&first), at(899, -1), false), at(899, -1));
        assert_eq!(Anchor::follow(Some(&first), at(1000, 700), false), at(1000, 700));
        assert_eq!(Anchor::follow(None, first, false), first);
        // A fixed stretch follows nothing.
        assert_eq!(Anchor::follow(Some(&first), at(901, 1), true), at(901, 1));
        // Widened: same x for every time, clamped a window further out.
        let sc = scale(0, 900);
        let wide = sc.widened();
        for s in [-900, 0, 450, 900, 1800] {
            assert!((wide.x(t(s)) - sc.x(t(s))).abs() < 1e-9);
        }
        assert!((wide.x_clamped(t(1000)) - sc.x(t(1000))).abs() < 1e-9);
        assert!((wide.x_clamped(t(5000)) - sc.x(t(1800))).abs() < 1e-9, "held a window past the end");
        assert!((wide.x_clamped(t(-5000)) - sc.x(t(-900))).abs() < 1e-9, "and a window before the start");
    }

    #[test]
    fn a_lanes_key_changes_when_what_it_draws_does_and_only_then() {
        let g = Geometry::default();
        let sc = scale(0, 300);
        let spans = vec![
            span(1, 1, "w", 1, 0, Some(100), 200, RunState::Acted),
            span(2, 2, "w", 2, 120, None, 400, RunState::Running),
            span(3, 3, "v", 1, 0, Some(100), 200, RunState::Acted),
        ];
        let keys = |spans: &[Span], now: i64| -> HashMap<String, u64> {
            let mut l = layout(spans, LaneOrder::ByName, &sc, t(now), &g);
            l.take_lane_marks().into_iter().map(|m| (m.name.clone(), m.key(|_, _| ()))).collect()
        };
        let before = keys(&spans, 250);
        // The running bar grew (the clock moved): nothing to redraw.
        assert_eq!(keys(&spans, 260), before);
        // A run finished in lane w: w's key changes, v's does not.
        let mut finished = spans.clone();
        finished[1] = span(2, 2, "w", 2, 120, Some(255), 400, RunState::Acted);
        let after = keys(&finished, 260);
        assert_ne!(after["w"], before["w"]);
        assert_eq!(after["v"], before["v"]);
        // A lane that moves (another lane now sorts above it) keeps its key: its marks are
        // in its own coordinates.
        let mut more = spans.clone();
        more.push(span(4, 4, "a", 1, 0, Some(100), 200, RunState::Acted));
        assert_eq!(keys(&more, 250)["w"], before["w"]);
        // What the page adds per run counts too (a tooltip's text that changed).
        let mut l = layout(&spans, LaneOrder::ByName, &sc, t(250), &g);
        let w = l.take_lane_marks().into_iter().find(|m| m.name == "w").unwrap();
        assert_ne!(w.key(|_, _| ()), w.key(|run, h| run.hash(h)));
        assert_eq!(w.bars.len() + w.cells.len(), 2, "both runs of w are in w's marks");
    }
}
