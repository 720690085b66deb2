//! Where every mark of a task's story goes, as plain data: a lane per attempt, its bar from
//! claim to end, its lease-expiry tick, the rejected final write, its effects, the stretches in
//! which two attempts ran at once, and the curves from a lapsed lease to the claim that took the
//! task over. No leptos here, so each rule is unit-tested without a browser and the page only
//! turns these shapes into SVG (as `timeline/layout.rs` does for the live timeline).
//!
//! Everything is drawn as of `now`, the instant the server read the rows (`TaskDetail::as_of`),
//! never the wall clock: the server's HTML and the browser's hydration must build the same marks.

use chrono::{DateTime, Utc};
use lastword_core::{Effect, Run, RunState};

/// The drawing's fixed dimensions, named once so the view and the tests agree on them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StoryGeometry {
    /// Total width of the drawing.
    pub width: f64,
    /// Left column holding "worker · epoch".
    pub label_w: f64,
    /// Right margin, so the last mark is not cut by the edge.
    pub right_pad: f64,
    /// Height of one lane (one attempt).
    pub lane_h: f64,
    /// Space above the first lane, for the expiry tick's overhang.
    pub top: f64,
    /// Vertical room a bar leaves inside its lane (above and below together).
    pub bar_gap: f64,
    /// Height of the axis row under the lanes.
    pub axis_h: f64,
    /// A span shorter than this is drawn this wide, so a blink of a run is still seen.
    pub min_bar_px: f64,
    /// The shortest stretch of time the axis spans: a story of one instant is not a division
    /// by zero, and a sub-second story is not stretched into a smear.
    pub min_span_ms: i64,
}

impl Default for StoryGeometry {
    fn default() -> Self {
        StoryGeometry {
            width: 900.0,
            label_w: 150.0,
            right_pad: 20.0,
            lane_h: 28.0,
            top: 4.0,
            bar_gap: 8.0,
            axis_h: 24.0,
            min_bar_px: 2.0,
            min_span_ms: 1000,
        }
    }
}

/// One attempt's lane.
#[derive(Clone, Debug, PartialEq)]
pub struct StoryLane {
    pub run_id: i64,
    /// Top of the bar (its height is the layout's [`StoryLayout::bar_h`]).
    pub y: f64,
    /// Where the bar starts and how wide it is.
    pub bar: (f64, f64),
    /// The lease-expiry tick, when the expiry falls inside the drawn span.
    pub expiry: Option<ExpiryTick>,
    /// Where the rejected final write of a lost lease is marked.
    pub rejected_x: Option<f64>,
    /// The run's effects: their index in the task's effects, and where they are drawn.
    pub effects: Vec<(usize, f64)>,
}

/// A lease-expiry tick: `lapsed` when the run was still going (or is) after it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExpiryTick {
    pub x: f64,
    pub lapsed: bool,
}

/// A stretch of time in which two attempts both ran.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Overlap {
    pub x: f64,
    pub w: f64,
}

/// A curve from where one attempt's lease lapsed to the claim of the attempt that took over
/// while it was still running (or silent).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reclaim {
    pub from_run: i64,
    pub to_run: i64,
    pub from: (f64, f64),
    pub to: (f64, f64),
}

impl Reclaim {
    /// The SVG path: leaves the lapse vertically and arrives at the claim vertically.
    pub fn path(&self) -> String {
        let ((ax, ay), (bx, by)) = (self.from, self.to);
        format!("M{ax},{ay} C{ax},{by} {bx},{ay} {bx},{by}")
    }
}

/// The whole drawing.
#[derive(Clone, Debug, PartialEq)]
pub struct StoryLayout {
    pub g: StoryGeometry,
    /// The first claim and the last thing drawn: the ends of the axis.
    pub span: (DateTime<Utc>, DateTime<Utc>),
    pub lanes: Vec<StoryLane>,
    pub overlaps: Vec<Overlap>,
    pub reclaims: Vec<Reclaim>,
}

impl StoryLayout {
    pub fn height(&self) -> f64 {
        self.g.lane_h * self.lanes.len() as f64 + self.g.axis_h
    }

    pub fn bar_h(&self) -> f64 {
        self.g.lane_h - self.g.bar_gap
    }

    /// A bar's vertical middle: where effects sit and re-claim curves attach.
    pub fn mid_y(&self, lane: &StoryLane) -> f64 {
        lane.y + self.bar_h() / 2.0
    }

    /// How far down the shading of an overlap reaches: every lane, not the axis.
    pub fn overlap_h(&self) -> f64 {
        self.height() - self.g.axis_h + self.g.top
    }

    /// The baseline of the axis' two labels, under the last lane.
    pub fn axis_y(&self) -> f64 {
        self.height() - 4.0
    }
}

/// Where an attempt's bar ends: its finish, or, still unfinished, the later of `now` and its
/// lease expiry (a silent run's bar reaches the present; a live one's its lease).
pub fn end_of(run: &Run, now: DateTime<Utc>) -> DateTime<Utc> {
    run.finished_at.unwrap_or(now.max(run.lease_expires_at))
}

/// Lays out `runs` (a lane each, in the order given: the task's claims, oldest first) and
/// `effects` as of `now`. `None` when there is nothing to draw.
pub fn story_layout(
    runs: &[Run],
    effects: &[Effect],
    now: DateTime<Utc>,
    g: &StoryGeometry,
) -> Option<StoryLayout> {
    let t0 = runs.iter().map(|r| r.claimed_at).min()?;
    let t1 =
        runs.iter().map(|r| end_of(r, now)).chain(effects.iter().map(|e| e.created_at)).max().unwrap_or(t0);
    let span_ms = (t1 - t0).num_milliseconds().max(g.min_span_ms) as f64;
    let plot_w = g.width - g.label_w - g.right_pad;
    let x = |t: DateTime<Utc>| g.label_w + (t - t0).num_milliseconds() as f64 / span_ms * plot_w;
    let lane_top = |i: usize| g.top + i as f64 * g.lane_h;

    let lanes = runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let y = lane_top(i);
            let (x0, x1) = (x(r.claimed_at), x(end_of(r, now)));
            let lapsed = r.finished_at.map_or(r.lease_expires_at < now, |f| r.lease_expires_at < f);
            StoryLane {
                run_id: r.id,
                y,
                bar: (x0, (x1 - x0).max(g.min_bar_px)),
                expiry: (r.lease_expires_at <= t1).then(|| ExpiryTick { x: x(r.lease_expires_at), lapsed }),
                rejected_x: (r.state == RunState::LostLease).then_some(x1),
                effects: effects
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| e.run_id == r.id)
                    .map(|(k, e)| (k, x(e.created_at)))
                    .collect(),
            }
        })
        .collect();

    // Where double execution becomes possible: every pair of attempts that ran at once.
    let mut overlaps = Vec::new();
    for (i, a) in runs.iter().enumerate() {
        for b in &runs[i + 1..] {
            let start = a.claimed_at.max(b.claimed_at);
            let end = end_of(a, now).min(end_of(b, now));
            if start < end {
                overlaps.push(Overlap { x: x(start), w: (x(end) - x(start)).max(1.0) });
            }
        }
    }

    let mut layout = StoryLayout { g: *g, span: (t0, t1), lanes, overlaps, reclaims: Vec::new() };
    // A claim after the previous attempt's lease lapsed while that attempt had not finished:
    // the lease changed hands under a running worker. The curve joins the two bars' middles.
    let reclaims = runs
        .windows(2)
        .enumerate()
        .filter(|(_, w)| {
            w[1].claimed_at >= w[0].lease_expires_at && w[0].finished_at.is_none_or(|f| f > w[1].claimed_at)
        })
        .map(|(i, w)| Reclaim {
            from_run: w[0].id,
            to_run: w[1].id,
            from: (x(w[0].lease_expires_at), layout.mid_y(&layout.lanes[i])),
            to: (x(w[1].claimed_at), layout.mid_y(&layout.lanes[i + 1])),
        })
        .collect();
    layout.reclaims = reclaims;
    Some(layout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, TimeZone};
    use lastword_core::fixtures;

    fn at(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + s, 0).unwrap()
    }

    /// A run claimed at `claimed` (seconds), leased until `lease`, finished at `finished`.
    fn run(id: i64, claimed: i64, lease: i64, finished: Option<i64>, state: RunState) -> Run {
        Run {
            lease_expires_at: at(lease),
            finished_at: finished.map(at),
            state,
            ..fixtures::run(id, at(claimed))
        }
    }

    fn effect(run_id: i64, s: i64) -> Effect {
        fixtures::effect(run_id, at(s))
    }

    fn plot_x(g: &StoryGeometry, fraction: f64) -> f64 {
        g.label_w + fraction * (g.width - g.label_w - g.right_pad)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn nothing_to_draw_without_runs() {
        assert_eq!(story_layout(&[], &[effect(1, 0)], at(0), &StoryGeometry::default()), None);
    }

    #[test]
    fn a_lost_lease_taken_over_is_a_curve_an_overlap_and_a_rejected_write() {
        // w1 claims at 0 with a 10 s lease, stalls, writes at 30 (rejected). w2 re-claims at 12
        // and finishes at 20. The axis runs 0..30.
        let g = StoryGeometry::default();
        let runs = [run(1, 0, 10, Some(30), RunState::LostLease), run(2, 12, 22, Some(20), RunState::Acted)];
        let effects = [effect(1, 29), effect(2, 18)];
        let l = story_layout(&runs, &effects, at(100), &g).unwrap();
        assert_eq!(l.span, (at(0), at(30)));

        let (a, b) = (&l.lanes[0], &l.lanes[1]);
        let ends = |lane: &StoryLane| (lane.bar.0, lane.bar.0 + lane.bar.1);
        assert!(close(ends(a).0, plot_x(&g, 0.0)) && close(ends(a).1, plot_x(&g, 1.0)));
        assert!(close(ends(b).0, plot_x(&g, 12.0 / 30.0)) && close(ends(b).1, plot_x(&g, 20.0 / 30.0)));
        assert!(b.y > a.y + l.bar_h(), "lanes do not overlap: {a:?} {b:?}");

        // w1's lease lapsed while it ran; w2 finished inside its own.
        assert_eq!(a.expiry, Some(ExpiryTick { x: plot_x(&g, 10.0 / 30.0), lapsed: true }));
        assert_eq!(b.expiry, Some(ExpiryTick { x: plot_x(&g, 22.0 / 30.0), lapsed: false }));
        assert_eq!(a.rejected_x, Some(plot_x(&g, 1.0)));
        assert_eq!(b.rejected_x, None);
        assert_eq!(a.effects, vec![(0, plot_x(&g, 29.0 / 30.0))]);
        assert_eq!(b.effects, vec![(1, plot_x(&g, 18.0 / 30.0))]);

        // Both ran from 12 to 20.
        assert_eq!(l.overlaps.len(), 1);
        assert!(close(l.overlaps[0].x, plot_x(&g, 12.0 / 30.0)));
        assert!(close(l.overlaps[0].x + l.overlaps[0].w, plot_x(&g, 20.0 / 30.0)));

        // The curve leaves w1's lane at its lapse and lands on w2's lane at its claim.
        assert_eq!(l.reclaims.len(), 1);
        let c = l.reclaims[0];
        assert_eq!((c.from_run, c.to_run), (1, 2));
        assert!(close(c.from.0, a.expiry.unwrap().x) && close(c.to.0, b.bar.0));
        assert_eq!((c.from.1, c.to.1), (l.mid_y(a), l.mid_y(b)), "from w1's bar to w2's");
        assert!(c.path().starts_with(&format!("M{},{}", c.from.0, c.from.1)));
    }

    #[test]
    fn a_retry_after_a_finished_failure_is_no_reclaim_and_no_overlap() {
        let g = StoryGeometry::default();
        let runs = [run(1, 0, 10, Some(5), RunState::Failed), run(2, 6, 16, Some(9), RunState::Acted)];
        let l = story_layout(&runs, &[], at(100), &g).unwrap();
        assert!(l.reclaims.is_empty());
        assert!(l.overlaps.is_empty());
        // w1's lease (until 10) outlived its run and is past the drawn end (9): no tick.
        assert_eq!(l.span, (at(0), at(9)));
        assert_eq!(l.lanes[0].expiry, None);
    }

    #[test]
    fn an_unfinished_run_is_drawn_as_of_the_read_not_the_wall_clock() {
        let g = StoryGeometry::default();
        // Live: the bar reaches its lease (20), past the read (15); the lease has not lapsed.
        let live = [run(1, 0, 20, None, RunState::Running)];
        let l = story_layout(&live, &[], at(15), &g).unwrap();
        assert_eq!(l.span.1, at(20));
        assert_eq!(l.lanes[0].expiry, Some(ExpiryTick { x: plot_x(&g, 1.0), lapsed: false }));
        // Silent: read at 40, its lease lapsed at 20; the bar reaches the read.
        let l = story_layout(&live, &[], at(40), &g).unwrap();
        assert_eq!(l.span.1, at(40));
        assert_eq!(l.lanes[0].expiry, Some(ExpiryTick { x: plot_x(&g, 0.5), lapsed: true }));
        // The same rows read at the same instant draw the same marks, whenever they are drawn.
        assert_eq!(story_layout(&live, &[], at(40), &g), story_layout(&live, &[], at(40), &g));
    }

    #[test]
    fn a_blink_of_a_run_is_still_seen() {
        let g = StoryGeometry::default();
        let mut r = run(1, 0, 10, Some(0), RunState::NoAction);
        r.finished_at = Some(r.claimed_at + Duration::milliseconds(1));
        let l = story_layout(&[r], &[], at(100), &g).unwrap();
        assert_eq!(l.lanes[0].bar.1, g.min_bar_px);
        assert!(l.lanes[0].bar.0.is_finite());
    }
}
