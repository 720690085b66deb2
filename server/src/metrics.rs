//! `GET /metrics`: what an alert pages on (the rules: `deploy/prometheus/lastword-rules.yml`).
//!
//! Three kinds of figures, all from one refresh cached for [`TTL`] (concurrent scrapes wait for
//! one refresh and share it, so a scrape storm costs the database one set of queries per ten
//! seconds; a failed refresh is cached too, `lastword_database_up 0`):
//!
//! - **Counters** of what runs reached (`lastword_run_outcomes_total{state}`, causes, claims,
//!   unsafe lost leases, deaths): monotonic by construction, from the per-bucket counts the
//!   rollups keep (`lastword_core::alerts` says why a count by current state cannot be one);
//! - **gauges of open attention items** across all history (double executions awaiting
//!   compensation, loops; deaths of the last day), open vs acknowledged;
//! - the **last-hour gauges** of the overview (`lastword_runs{state}` …), kept for dashboards;
//! - **lease histograms** (issue 13) of the runs that finished since this process started: run
//!   duration ÷ its lease, time unheard at finish ÷ its lease, and the latency of re-claims after
//!   a lapsed lease. Each refresh reads the runs changed since the last one from `change_log`
//!   ([`LeaseObserver`]) and observes each finished run once, so they are honest cumulative
//!   histograms (`rate()` and `histogram_quantile()` work); like the counters, every server
//!   observes the same runs, so rules take `max without (instance)`.
//!
//! `lastword_live_clients` and the heap gauges (`lastword_heap_allocated_bytes`,
//! `lastword_heap_resident_bytes`, [`crate::heap`]) are read on every scrape.

use crate::cached::Cached;
use crate::AppState;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use chrono::Duration;
use lastword_core::alerts::{AttentionNow, OutcomeCounters};
use lastword_core::{Cause, Overview, RunState};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::Ordering;

/// How long one reading of the store serves scrapes.
pub const TTL: std::time::Duration = std::time::Duration::from_secs(10);
/// A refresh that takes longer counts as the database being down.
const REFRESH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// The OpenMetrics text format (Prometheus scrapes it natively).
pub const CONTENT_TYPE_OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// How far back the counters look: claims in the last two days (a run that lasts longer than
/// that and ends later is not counted).
const HORIZON_BUCKETS: i64 = 2 * 24 * 3600 / lastword_store::BUCKET_SECS;

/// One refresh: the last hour's overview, and the alert figures (the items open now, the
/// counters as of it) unless they could not be read this time.
#[derive(Clone, Debug)]
pub struct Reading {
    pub overview: Overview,
    pub alerts: Option<AlertFigures>,
    /// `None` until the first refresh that read the change log.
    pub leases: Option<LeaseHistograms>,
}

/// The lease histograms (see the module header). Clones share their counts.
#[derive(Clone, Debug)]
pub struct LeaseHistograms {
    pub duration_over_lease: Histogram,
    pub unheard_over_lease: Histogram,
    pub reclaim_latency_seconds: Histogram,
}

impl Default for LeaseHistograms {
    fn default() -> Self {
        use lastword_core::leases::{LEASE_RATIO_BUCKETS, RECLAIM_LATENCY_BUCKETS};
        LeaseHistograms {
            duration_over_lease: Histogram::new(LEASE_RATIO_BUCKETS),
            unheard_over_lease: Histogram::new(LEASE_RATIO_BUCKETS),
            reclaim_latency_seconds: Histogram::new(RECLAIM_LATENCY_BUCKETS),
        }
    }
}

/// Changes younger than this (by the database's clock) wait for the next refresh: a change id
/// can become visible after a higher one, and this lets it.
const OBSERVE_LAG_MS: i64 = 2_000;
/// Run ids remembered as observed (a finished run changed again must not count twice); the
/// oldest are forgotten first, long after their last change.
const OBSERVED_REMEMBERED: usize = 100_000;

/// Follows `change_log` from the process's start and feeds [`LeaseHistograms`].
#[derive(Default)]
pub struct LeaseObserver {
    histograms: LeaseHistograms,
    /// The change id up to which runs were looked at; `None` before the first refresh, which
    /// only takes the newest id (a process counts from its start, like the counters).
    cursor: Option<i64>,
    observed: std::collections::HashSet<i64>,
    order: std::collections::VecDeque<i64>,
}

impl LeaseObserver {
    async fn advance(
        &mut self,
        db: &lastword_store::Db,
    ) -> Result<LeaseHistograms, lastword_store::StoreError> {
        let Some(cursor) = self.cursor else {
            self.cursor = Some(lastword_store::changes::latest_change_id(db).await?);
            return Ok(self.histograms.clone());
        };
        let (finished, next) = lastword_store::leases::finished_after(db, cursor, OBSERVE_LAG_MS).await?;
        for run in finished {
            if !self.observed.insert(run.run_id) {
                continue;
            }
            self.order.push_back(run.run_id);
            if self.order.len() > OBSERVED_REMEMBERED {
                if let Some(old) = self.order.pop_front() {
                    self.observed.remove(&old);
                }
            }
            if run.lease_ms > 0 {
                let lease = run.lease_ms as f64;
                self.histograms.duration_over_lease.observe(run.duration_ms.max(0) as f64 / lease);
                self.histograms.unheard_over_lease.observe(run.unheard_ms.max(0) as f64 / lease);
            }
            if let Some(ms) = run.reclaim_latency_ms {
                self.histograms.reclaim_latency_seconds.observe(ms as f64 / 1000.0);
            }
        }
        self.cursor = Some(next);
        Ok(self.histograms.clone())
    }
}

#[derive(Clone, Debug)]
pub struct AlertFigures {
    pub attention: AttentionNow,
    pub counters: OutcomeCounters,
}

/// The last reading of the store (`None` inside: the database did not answer), and the
/// counters it feeds.
pub struct MetricsCache {
    last: Cached<Option<Reading>>,
    counters: tokio::sync::Mutex<OutcomeCounters>,
    leases: tokio::sync::Mutex<LeaseObserver>,
}

impl Default for MetricsCache {
    fn default() -> Self {
        Self::with_ttl(TTL)
    }
}

impl MetricsCache {
    /// A cache whose readings last `ttl` (tests read every scrape afresh with zero).
    pub fn with_ttl(ttl: std::time::Duration) -> Self {
        MetricsCache { last: Cached::new(ttl), counters: Default::default(), leases: Default::default() }
    }

    /// The cached reading, refreshed first if older than [`TTL`].
    async fn reading(&self, state: &AppState) -> Option<Reading> {
        self.last.get(|| async { self.refresh(state).await }).await
    }

    /// The overview decides `lastword_database_up`; the alert figures are read after it and,
    /// should they fail or be slow, are left out of this reading (never reported as an outage).
    async fn refresh(&self, state: &AppState) -> Option<Reading> {
        let now = lastword_core::read_now();
        let store = &state.store;
        let query = store.overview(now - Duration::hours(1), now, Duration::hours(1), now);
        let overview = match tokio::time::timeout(REFRESH_TIMEOUT, query).await {
            Ok(Ok(overview)) => overview,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "metrics: store unavailable");
                return None;
            }
            Err(_) => {
                tracing::warn!("metrics: store did not answer within {REFRESH_TIMEOUT:?}");
                return None;
            }
        };
        let alerts = optional("alert figures", self.alert_figures(state, now)).await;
        let leases = optional("lease histograms", self.lease_histograms(state)).await;
        Some(Reading { overview, alerts, leases })
    }

    async fn lease_histograms(
        &self,
        state: &AppState,
    ) -> Result<LeaseHistograms, lastword_store::StoreError> {
        self.leases.lock().await.advance(state.store.db()).await
    }

    async fn alert_figures(
        &self,
        state: &AppState,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<AlertFigures, lastword_store::StoreError> {
        let store = &state.store;
        let attention = lastword_store::alerts::attention_now(store.db(), store.tokens(), now).await?;
        let horizon = now.timestamp().div_euclid(lastword_store::BUCKET_SECS) - HORIZON_BUCKETS;
        let since = chrono::DateTime::from_timestamp(horizon * lastword_store::BUCKET_SECS, 0).unwrap_or(now);
        let counts = lastword_store::alerts::counts(store.db(), store.tokens(), since, now).await?;
        let mut counters = self.counters.lock().await;
        counters.observe(&counts, horizon);
        Ok(AlertFigures { attention, counters: counters.clone() })
    }
}

/// A part of a reading that may be left out: `None` (logged) when it fails or is slow, so that
/// only the overview decides whether the database is reported down.
async fn optional<T>(
    what: &str,
    read: impl std::future::Future<Output = Result<T, lastword_store::StoreError>>,
) -> Option<T> {
    match tokio::time::timeout(REFRESH_TIMEOUT, read).await {
        Ok(Ok(value)) => Some(value),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "metrics: {what} left out of this reading");
            None
        }
        Err(_) => {
            tracing::warn!("metrics: {what} not read within {REFRESH_TIMEOUT:?}, left out of this reading");
            None
        }
    }
}

type Labelled = Family<[(&'static str, &'static str); 1], Gauge>;

/// What `/metrics` reports about the dashboard process itself, read on every scrape.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcessReading {
    /// Browsers connected to the live event stream.
    pub live_clients: i64,
    /// Page and API reads that went to the database.
    pub db_reads: u64,
    /// Reads answered by sharing another viewer's identical read.
    pub shared_reads: u64,
    /// Page requests rendered afresh, and served from an identical render
    /// ([`crate::shared_pages`]).
    pub pages_rendered: u64,
    pub pages_shared: u64,
    /// The allocator's counts (`None`: it would not say).
    pub heap: Option<crate::heap::Heap>,
}

/// The exposition text for a store reading and the process's own figures.
pub fn render(reading: Option<&Reading>, process: ProcessReading) -> String {
    let mut registry = Registry::default();
    let db_reads = Counter::<u64>::default();
    db_reads.inc_by(process.db_reads);
    registry.register(
        "lastword_db_reads",
        "Page and API reads that went to the database (identical reads at one data version are shared)",
        db_reads,
    );
    let shared = Counter::<u64>::default();
    shared.inc_by(process.shared_reads);
    registry.register(
        "lastword_shared_reads",
        "Page and API reads answered by sharing an identical read",
        shared,
    );
    let pages = Family::<[(&'static str, &'static str); 1], Counter<u64>>::default();
    pages.get_or_create(&[("outcome", "rendered")]).inc_by(process.pages_rendered);
    pages.get_or_create(&[("outcome", "shared")]).inc_by(process.pages_shared);
    registry.register(
        "lastword_shared_pages",
        "Requests for shareable pages (overview, failures, workers, timeline): rendered afresh, or served from an identical render for the same principal, URL and data version",
        pages,
    );
    let live_clients = process.live_clients;
    let up = Gauge::<i64>::default();
    up.set(i64::from(reading.is_some()));
    registry.register("lastword_database_up", "1 when the database answered the last metrics refresh", up);
    let live = Gauge::<i64>::default();
    live.set(live_clients);
    registry.register("lastword_live_clients", "Browsers connected to the live event stream", live);
    if let Some(heap) = process.heap {
        let gauges = [
            ("lastword_heap_allocated_bytes", "Bytes the server has allocated and not freed", heap.allocated),
            (
                "lastword_heap_resident_bytes",
                "Bytes of resident memory the server's allocator maps (allocated, its own metadata and free pages not yet returned)",
                heap.resident,
            ),
        ];
        for (name, help, bytes) in gauges {
            let g = Gauge::<i64>::default();
            g.set(i64::try_from(bytes).unwrap_or(i64::MAX));
            registry.register(name, help, g);
        }
    }
    if let Some(figures) = reading.and_then(|r| r.alerts.as_ref()) {
        register_alert_figures(&mut registry, figures);
    }
    if let Some(h) = reading.and_then(|r| r.leases.as_ref()) {
        registry.register(
            "lastword_run_duration_over_lease",
            "Runs finished since this process started: duration (finish minus claim) divided by the lease it held; above 1 it outlived the lease",
            h.duration_over_lease.clone(),
        );
        registry.register(
            "lastword_run_unheard_at_finish_over_lease",
            "Runs finished since this process started: time since the last heartbeat (or the claim) at the finish, divided by the lease",
            h.unheard_over_lease.clone(),
        );
        registry.register(
            "lastword_reclaim_latency_seconds",
            "Re-claims after a lapsed lease (slow, stalled or dead worker), observed when the re-claiming run finishes: from the earlier lease's expiry to the claim",
            h.reclaim_latency_seconds.clone(),
        );
    }
    if let Some(o) = reading.map(|r| &r.overview) {
        let runs = Labelled::default();
        for state in RunState::ALL {
            let n = o.by_state.iter().find(|(s, _)| *s == state).map_or(0, |(_, n)| *n);
            runs.get_or_create(&[("state", state.as_str())]).set(n);
        }
        registry.register("lastword_runs", "Runs claimed in the last hour, by state", runs);
        let failures = Labelled::default();
        for cause in Cause::ALL {
            let n = o.by_cause.iter().find(|(c, _)| *c == cause).map_or(0, |(_, n)| *n);
            failures.get_or_create(&[("cause", cause.as_str())]).set(n);
        }
        registry.register(
            "lastword_run_failures",
            "Failed runs claimed in the last hour, by cause",
            failures,
        );
        let gauges = [
            (
                "lastword_lost_lease_completions",
                "Runs claimed in the last hour whose final write was rejected (lost lease)",
                o.by_state.iter().find(|(s, _)| *s == RunState::LostLease).map_or(0, |(_, n)| *n),
            ),
            (
                "lastword_silent_runs",
                "Runs claimed in the last hour that never finished and whose lease lapsed",
                o.attention.silent_runs,
            ),
            (
                "lastword_double_executions_awaiting_compensation",
                "Unsafe tasks with runs or effects in the last hour, executed twice, not compensated",
                o.attention.needs_compensation,
            ),
            ("lastword_dead_tasks", "Tasks that became dead in the last hour", o.attention.dead_tasks),
        ];
        for (name, help, value) in gauges {
            let g = Gauge::<i64>::default();
            g.set(value);
            registry.register(name, help, g);
        }
    }
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = encode(&mut out, &registry);
    out
}

/// The counters and the open-item gauges (see the module header).
fn register_alert_figures(registry: &mut Registry, r: &AlertFigures) {
    let c = &r.counters;
    let claimed = Counter::<u64>::default();
    claimed.inc_by(c.claimed());
    registry.register("lastword_runs_claimed", "Runs claimed (counted since this process started)", claimed);
    let outcomes = Family::<[(&'static str, &'static str); 1], Counter<u64>>::default();
    for state in RunState::ALL.into_iter().filter(|s| *s != RunState::Running) {
        outcomes.get_or_create(&[("state", state.as_str())]).inc_by(c.reached(state));
    }
    registry.register(
        "lastword_run_outcomes",
        "Runs that reached each state (silent: the lease lapsed without a word; a silent run that later lands as a lost lease counts in both)",
        outcomes,
    );
    let causes = Family::<[(&'static str, &'static str); 1], Counter<u64>>::default();
    for cause in Cause::ALL {
        causes.get_or_create(&[("cause", cause.as_str())]).inc_by(c.failed_with(cause));
    }
    registry.register("lastword_run_failure_causes", "Failed runs per cause", causes);
    let unsafe_lost = Counter::<u64>::default();
    unsafe_lost.inc_by(c.unsafe_lost_leases());
    registry.register(
        "lastword_unsafe_lost_lease_completions",
        "Lost-lease completions of unsafe tasks (their effects may have run twice)",
        unsafe_lost,
    );
    let dead = Counter::<u64>::default();
    dead.inc_by(c.dead_tasks());
    registry.register("lastword_tasks_dead", "Tasks that used every attempt", dead);
    let items = Family::<[(&'static str, &'static str); 2], Gauge>::default();
    let a = &r.attention;
    let kinds = [
        ("double_execution", a.double_executions),
        ("unsafe_lost_lease", Some(a.unsafe_lost_leases)),
        ("dead", Some(a.dead)),
        ("loop", Some(a.loops)),
    ];
    for (kind, counts) in kinds {
        let Some(n) = counts else { continue };
        items.get_or_create(&[("kind", kind), ("acknowledged", "false")]).set(n.items - n.acknowledged);
        items.get_or_create(&[("kind", kind), ("acknowledged", "true")]).set(n.acknowledged);
    }
    registry.register(
        "lastword_attention_items",
        "Attention items now: double executions awaiting compensation and re-claim loops in all history, deaths and unsafe lost leases of the last 24 h; acknowledged=false ones nobody has taken",
        items,
    );
}

pub async fn handler(State(state): State<AppState>) -> Response {
    let reading = state.metrics.reading(&state).await;
    let process = ProcessReading {
        live_clients: state.live_clients.load(Ordering::Relaxed),
        db_reads: state.shared_reads.database.load(Ordering::Relaxed),
        shared_reads: state.shared_reads.shared.load(Ordering::Relaxed),
        pages_rendered: state.shared_pages.stats.rendered.load(Ordering::Relaxed),
        pages_shared: state.shared_pages.stats.shared.load(Ordering::Relaxed),
        heap: crate::heap::now(),
    };
    let body = render(reading.as_ref(), process);
    ([(CONTENT_TYPE, CONTENT_TYPE_OPENMETRICS)], body).into_response()
}
