//! The crowd (issue 11, "load"): many open dashboards holding their live streams while page
//! requests arrive at a steady rate, with the live fleet writing — the worst day's traffic on
//! one server. What must hold: no request fails, no stream drops, and the server's memory is
//! as flat at the end as after the warm-up. The figures (requests, errors, latencies, memory)
//! go in the report; any error fails the benchmark, since one is a bug.

use crate::http::Client;
use crate::live::{self, Event};
use crate::load::Loaded;
use crate::server::Server;
use crate::stats::Summary;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// How long the streams and the first pages settle before memory's baseline is taken.
const WARM_UP: Duration = Duration::from_secs(3);

#[derive(Clone, Debug, serde::Serialize)]
pub struct Crowd {
    pub pages: Pages,
    pub clients: usize,
    pub rps: f64,
    pub secs: f64,
    pub requests: u64,
    /// Non-2xx answers and transport errors, with the first few for the report.
    pub errors: u64,
    pub first_errors: Vec<String>,
    /// Streams that ended (or said `reset`) while the crowd was on.
    pub streams_dropped: u64,
    /// `changes` events the streams received, all together.
    pub events: u64,
    pub latency: Summary,
    /// Server memory after the warm-up, at the end, and a few seconds after the crowd left.
    pub rss_start_mb: Option<f64>,
    pub rss_end_mb: Option<f64>,
    pub rss_after_mb: Option<f64>,
    /// Server memory every [`RSS_EVERY`] while the crowd is on: a plateau is flat, a slope to
    /// the end is a leak.
    pub rss_series_mb: Vec<f64>,
    /// What the server's allocator held allocated at the same moments (from `/metrics`; empty
    /// for a server that does not report it): RSS rising while this stays flat is memory the
    /// allocator keeps, not memory in use.
    pub heap_series_mb: Vec<f64>,
}

/// How often the crowd samples the server's memory.
pub const RSS_EVERY: Duration = Duration::from_secs(5);

impl Crowd {
    /// Growth from the warm-up baseline to the end, in percent.
    pub fn rss_growth_pct(&self) -> Option<f64> {
        Some((self.rss_end_mb? / self.rss_start_mb? - 1.0) * 100.0)
    }

    /// Growth over the second half of the crowd, in percent: what is left of the climb once
    /// the server's pools and buffers have grown to the load (near 0: flat).
    pub fn rss_second_half_growth_pct(&self) -> Option<f64> {
        let series = &self.rss_series_mb;
        let (mid, last) = (series.get(series.len() / 2)?, series.last()?);
        (series.len() >= 2).then(|| (last / mid - 1.0) * 100.0)
    }
}

/// Which of [`paths`] a crowd asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pages {
    All,
    Html,
    Api,
}

/// The pages a crowd asks for, in turn: each page an operator opens, as HTML, and the JSON
/// reads scripts make (`true`: HTML).
fn paths(loaded: &Loaded, pages: Pages) -> Vec<(String, bool)> {
    let task = loaded.task_50;
    let all: Vec<(String, bool)> = vec![
        ("/".into(), true),
        ("/failures".into(), true),
        ("/failures?cause=timeout".into(), true),
        ("/timeline?minutes=15".into(), true),
        (format!("/tasks/{task}"), true),
        ("/workers".into(), true),
        ("/audit".into(), true),
        ("/leases".into(), true),
        ("/api/v1/runs?cause=timeout".into(), false),
        ("/api/v1/overview?since=1h".into(), false),
        (format!("/api/v1/tasks/{task}"), false),
        ("/api/v1/runs/facets?since=24h".into(), false),
    ];
    all.into_iter()
        .filter(|(_, html)| match pages {
            Pages::All => true,
            Pages::Html => *html,
            Pages::Api => !*html,
        })
        .collect()
}

pub async fn measure(
    client: &Client,
    server: &Server,
    loaded: &Loaded,
    pages: Pages,
    clients: usize,
    rps: f64,
    secs: Duration,
) -> anyhow::Result<Crowd> {
    let events = Arc::new(AtomicU64::new(0));
    let dropped = Arc::new(AtomicU64::new(0));
    let mut streams = Vec::with_capacity(clients);
    for _ in 0..clients {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let stream = live::connect(client, tx).await?;
        live::wait_open(&mut rx).await?;
        let (events, dropped) = (events.clone(), dropped.clone());
        let watcher = tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Some(Event::Changes(..)) => {
                        events.fetch_add(1, Ordering::Relaxed);
                    }
                    Some(Event::Open | Event::Refresh) => {}
                    Some(Event::Reset) | None => {
                        dropped.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                }
            }
        });
        streams.push((stream, watcher));
    }

    let requests = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let paths = paths(loaded, pages);
    let period = Duration::from_secs_f64(1.0 / rps);
    let run_requests = |until: Instant, timed: bool| {
        let (requests, errors, latencies, paths) =
            (requests.clone(), errors.clone(), latencies.clone(), paths.clone());
        let client = client.clone();
        async move {
            // A steady arrival rate, whatever each answer takes: every request on its own task.
            let mut ticker = tokio::time::interval(period);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let mut inflight = Vec::new();
            let mut i = 0usize;
            while Instant::now() < until {
                ticker.tick().await;
                let (path, html) = paths[i % paths.len()].clone();
                i += 1;
                let (client, requests, errors, latencies) =
                    (client.clone(), requests.clone(), errors.clone(), latencies.clone());
                inflight.push(tokio::spawn(async move {
                    let t = Instant::now();
                    let answer = client.get(&path, html).await;
                    if !timed {
                        return;
                    }
                    requests.fetch_add(1, Ordering::Relaxed);
                    match answer {
                        Ok(_) => {
                            if let Ok(mut l) = latencies.lock() {
                                l.push(t.elapsed());
                            }
                        }
                        Err(e) => {
                            if let Ok(mut errs) = errors.lock() {
                                errs.push(format!("{e:#}"));
                            }
                        }
                    }
                }));
            }
            for task in inflight {
                let _ = task.await;
            }
        }
    };

    run_requests(Instant::now() + WARM_UP, false).await;
    let rss_start_mb = server.rss_mb();
    let (events0, dropped0) = (events.load(Ordering::Relaxed), dropped.load(Ordering::Relaxed));
    let started = Instant::now();
    let sampler = async {
        let (mut rss, mut heap) = (Vec::new(), Vec::new());
        while started.elapsed() < secs {
            tokio::time::sleep(RSS_EVERY.min(secs.saturating_sub(started.elapsed()))).await;
            rss.extend(server.rss_mb());
            heap.extend(server.heap_allocated_mb(client).await);
        }
        (rss, heap)
    };
    let ((), (rss_series_mb, heap_series_mb)) = tokio::join!(run_requests(started + secs, true), sampler);
    let elapsed = started.elapsed().as_secs_f64();
    let rss_end_mb = server.rss_mb();
    let events = events.load(Ordering::Relaxed) - events0;
    let streams_dropped = dropped.load(Ordering::Relaxed) - dropped0;
    for (stream, watcher) in streams {
        stream.abort();
        watcher.abort();
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss_after_mb = server.rss_mb();

    let errors = errors.lock().map(|e| e.clone()).unwrap_or_default();
    let crowd = Crowd {
        pages,
        clients,
        rps,
        secs: elapsed,
        requests: requests.load(Ordering::Relaxed),
        errors: errors.len() as u64,
        first_errors: errors.into_iter().take(5).collect(),
        streams_dropped,
        events,
        latency: latencies.lock().map(|l| Summary::of(&l)).unwrap_or_default(),
        rss_start_mb,
        rss_end_mb,
        rss_after_mb,
        rss_series_mb,
        heap_series_mb,
    };
    let mb = |m: Option<f64>| m.map(|m| format!("{m:.0} MB")).unwrap_or_else(|| "?".into());
    println!(
        "crowd ({pages:?} requests): {clients} live clients + {rps} requests/s for {elapsed:.0} s: {} requests, {} errors, {} streams dropped, {} events; {}; server RSS {} → {} ({} after; every {} s: {:.0?} MB; heap allocated: {:.0?} MB)",
        crowd.requests,
        crowd.errors,
        crowd.streams_dropped,
        crowd.events,
        crowd.latency,
        mb(rss_start_mb),
        mb(rss_end_mb),
        mb(rss_after_mb),
        RSS_EVERY.as_secs(),
        crowd.rss_series_mb,
        crowd.heap_series_mb
    );
    anyhow::ensure!(
        crowd.errors == 0 && crowd.streams_dropped == 0,
        "the crowd saw {} failed requests and {} dropped streams; first: {:?}",
        crowd.errors,
        crowd.streams_dropped,
        crowd.first_errors
    );
    anyhow::ensure!(crowd.requests > 0, "the crowd made no request");
    Ok(crowd)
}
