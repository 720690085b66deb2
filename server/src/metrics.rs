//! `GET /metrics`: Prometheus gauges so an alert can page someone before anyone opens the page.
//!
//! The store-derived gauges come from one [`Store::overview`](lastword_store::Store::overview)
//! over the last hour, cached for [`TTL`]: concurrent scrapes wait for one refresh and share it,
//! so a scrape storm costs the database one set of queries per ten seconds. A failed refresh is
//! cached too (`lastword_database_up 0`). `lastword_live_clients` is read on every scrape.

use crate::cached::Cached;
use crate::AppState;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use chrono::Duration;
use lastword_core::{Cause, Overview, RunState};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::Ordering;

/// How long one reading of the store serves scrapes.
pub const TTL: std::time::Duration = std::time::Duration::from_secs(10);
/// A refresh that takes longer counts as the database being down.
const REFRESH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// The OpenMetrics text format (Prometheus scrapes it natively).
pub const CONTENT_TYPE_OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The last reading of the store; `None` inside means the database did not answer.
pub struct MetricsCache {
    last: Cached<Option<Overview>>,
}

impl Default for MetricsCache {
    fn default() -> Self {
        MetricsCache { last: Cached::new(TTL) }
    }
}

impl MetricsCache {
    /// The cached reading, refreshed first if older than [`TTL`].
    async fn reading(&self, state: &AppState) -> Option<Overview> {
        self.last
            .get(|| async {
                let now = lastword_core::read_now();
                let query = state.store.overview(now - Duration::hours(1), now, Duration::hours(1), now);
                match tokio::time::timeout(REFRESH_TIMEOUT, query).await {
                    Ok(Ok(overview)) => Some(overview),
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "metrics: store unavailable");
                        None
                    }
                    Err(_) => {
                        tracing::warn!("metrics: store did not answer within {REFRESH_TIMEOUT:?}");
                        None
                    }
                }
            })
            .await
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
}

/// The exposition text for a store reading and the process's own figures.
pub fn render(reading: Option<&Overview>, process: ProcessReading) -> String {
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
    let live_clients = process.live_clients;
    let up = Gauge::<i64>::default();
    up.set(i64::from(reading.is_some()));
    registry.register("lastword_database_up", "1 when the database answered the last metrics refresh", up);
    let live = Gauge::<i64>::default();
    live.set(live_clients);
    registry.register("lastword_live_clients", "Browsers connected to the live event stream", live);
    if let Some(o) = reading {
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

pub async fn handler(State(state): State<AppState>) -> Response {
    let reading = state.metrics.reading(&state).await;
    let process = ProcessReading {
        live_clients: state.live_clients.load(Ordering::Relaxed),
        db_reads: state.shared_reads.database.load(Ordering::Relaxed),
        shared_reads: state.shared_reads.shared.load(Ordering::Relaxed),
    };
    let body = render(reading.as_ref(), process);
    ([(CONTENT_TYPE, CONTENT_TYPE_OPENMETRICS)], body).into_response()
}
