//! The database load of open dashboards: N simulated browser tabs (1, then many) on the
//! Failures and the Overview page, each holding an event stream and, like the real page
//! (`app/src/live.rs`), refetching the page's data at each `refresh` event that follows
//! changes (the server sends one at most once a second), while the live fleet writes.
//! Measured on the database side: committed transactions of the bench database (`pg_stat_database.xact_commit`) per second, minus the fleet's own,
//! which it counts exactly — plus, when the server exports one, its `lastword_db_*` counter.

use crate::cli::Args;
use crate::fleet::Fleet;
use crate::http::Client;
use crate::live::{self, Event};
use crate::server::Server;
use crate::stats::Summary;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Page {
    Failures,
    Overview,
}

/// How a tab fetches its page's data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Calls {
    /// The server functions the hydrated page calls (`/api/fn/…`).
    ServerFn,
    /// The JSON API with the same answers.
    Api,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct Phase {
    pub page: Page,
    pub clients: usize,
    pub secs: f64,
    /// Bench database commits per second, all of them.
    pub xact_per_s: f64,
    /// Minus the live fleet's own commits: what the dashboard caused.
    pub dashboard_xact_per_s: f64,
    /// The server's own `lastword_db_*` counter per second, if it exports one.
    pub server_counter_per_s: Option<f64>,
    /// Mean number of the server's statements running at once (sampled every
    /// [`ACTIVE_SAMPLE_EVERY`]).
    pub active_sessions: f64,
    /// The server's statements seen running, summed over the samples (a sample that finds two
    /// counts two): how many observations `active_sessions` rests on.
    pub busy_samples: i64,
    pub refetches_per_s: f64,
    pub refetch: Summary,
    pub rss_max_mb: Option<f64>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct DbLoad {
    pub calls: Calls,
    pub server_counter: Option<String>,
    pub phases: Vec<Phase>,
    /// Dashboard commits/s with many clients ÷ with one, both pages together.
    pub ratio: f64,
    /// The same from the server's counter, if any.
    pub ratio_server_counter: Option<f64>,
    /// Average active database sessions with many clients ÷ with one: the database time the
    /// dashboard takes, which does not drop when the server saturates.
    pub ratio_active_sessions: f64,
    /// The one-client phases saw at least [`MIN_BUSY_SAMPLES`] statements running over their samples:
    /// below that the ratio is a ratio of a handful of counts (1 against 2 reads as 2.0), and
    /// only says that the dashboard's database time is too small to sample.
    pub active_sessions_resolved: bool,
    /// The crowded phases got far fewer answers than the tabs asked for (the server could not
    /// keep up), so fewer statements completed: the commit ratio understates the load.
    pub saturated: bool,
    pub rss_clients_mb: Option<f64>,
}

/// How often a phase samples the server's running statements. The query runs on the admin
/// database (it adds nothing to the bench database's commits) and costs well under a
/// millisecond; at 250 ms a one-tab phase caught one or two busy samples in 80.
pub const ACTIVE_SAMPLE_EVERY: Duration = Duration::from_millis(20);
/// Statements seen running that the one-client phases need together before the active-session
/// ratio is judged (a count of 50 is known to about ±15 %).
pub const MIN_BUSY_SAMPLES: i64 = 50;

pub async fn measure_db_load(
    client: &Client,
    db_name: &str,
    admin_url: &str,
    fleet: &Fleet,
    server: &Server,
    args: &Args,
) -> anyhow::Result<DbLoad> {
    let calls = choose_calls(client, &args.browser_calls).await?;
    let server_counter = db_counter_name(client).await;
    println!(
        "db load: tabs refetch through {calls:?}; server counter: {}",
        server_counter.as_deref().unwrap_or("none")
    );
    let stats = crate::db::Stats::new(admin_url, db_name).await?;
    let secs = Duration::from_secs(args.load_phase_secs);
    let mut phases = Vec::new();
    for page in [Page::Failures, Page::Overview] {
        for n in [1, args.clients] {
            let phase =
                run_phase(client, &stats, fleet, server, page, n, calls, server_counter.as_deref(), secs)
                    .await?;
            println!(
                "db load: {page:?} x{n}: {:.1} dashboard xact/s ({:.1} all), {:.2} active sessions, {:.1} refetches/s, refetch {}{}",
                phase.dashboard_xact_per_s,
                phase.xact_per_s,
                phase.active_sessions,
                phase.refetches_per_s,
                phase.refetch,
                phase.rss_max_mb.map(|m| format!(", server RSS {m:.0} MB")).unwrap_or_default()
            );
            phases.push(phase);
        }
    }
    let sum = |n: usize, f: &dyn Fn(&Phase) -> Option<f64>| -> Option<f64> {
        phases.iter().filter(|p| p.clients == n).map(f).sum()
    };
    let ratio_of = |f: &dyn Fn(&Phase) -> Option<f64>| match (sum(args.clients, f), sum(1, f)) {
        (Some(many), Some(one)) if one > 0.0 => Some(many / one),
        _ => None,
    };
    let ratio = ratio_of(&|p| Some(p.dashboard_xact_per_s.max(0.0))).unwrap_or(f64::NAN);
    let ratio_server_counter = ratio_of(&|p| p.server_counter_per_s);
    let ratio_active_sessions = ratio_of(&|p| Some(p.active_sessions)).unwrap_or(f64::NAN);
    let active_sessions_resolved =
        phases.iter().filter(|p| p.clients == 1).map(|p| p.busy_samples).sum::<i64>() >= MIN_BUSY_SAMPLES;
    // A tab asks about once a second while the fleet writes; a crowd answered at under half
    // the one-tab rate per tab was not served.
    let saturated = [Page::Failures, Page::Overview].into_iter().any(|page| {
        let rate = |n: usize| {
            phases.iter().find(|p| p.page == page && p.clients == n).map(|p| p.refetches_per_s / n as f64)
        };
        matches!((rate(args.clients), rate(1)), (Some(many), Some(one)) if many < 0.5 * one.max(0.5))
    });
    let rss_clients_mb =
        phases.iter().filter(|p| p.clients == args.clients).filter_map(|p| p.rss_max_mb).reduce(f64::max);
    Ok(DbLoad {
        calls,
        server_counter,
        phases,
        ratio,
        ratio_server_counter,
        ratio_active_sessions,
        active_sessions_resolved,
        saturated,
        rss_clients_mb,
    })
}

/// Server functions when the server answers the Failures page's one (the real page's path),
/// else the JSON API.
async fn choose_calls(client: &Client, wanted: &str) -> anyhow::Result<Calls> {
    match wanted {
        "fn" => Ok(Calls::ServerFn),
        "api" => Ok(Calls::Api),
        _ => {
            let probe = post_fn(client, "/api/fn/failures", "query=").await;
            Ok(if probe.is_ok() { Calls::ServerFn } else { Calls::Api })
        }
    }
}

async fn post_fn(client: &Client, path: &str, form: &str) -> anyhow::Result<()> {
    let resp = client
        .http
        .post(client.url(path))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .header("Accept", "application/json")
        .body(form.to_string())
        .send()
        .await?;
    let status = resp.status();
    let _ = resp.bytes().await?;
    anyhow::ensure!(status.is_success(), "POST {path}: {status}");
    Ok(())
}

/// The page's data, fetched the way its resources do (concurrently).
async fn refetch(client: &Client, page: Page, calls: Calls) -> anyhow::Result<()> {
    let failures = crate::explain::failure_states();
    match (page, calls) {
        (Page::Failures, Calls::ServerFn) => post_fn(client, "/api/fn/failures", "query=").await,
        (Page::Failures, Calls::Api) => {
            let runs = format!("/api/v1/runs?state={failures}");
            let (a, b) = tokio::join!(client.get(&runs, false), client.get("/api/v1/runs/facets", false));
            a.and(b).map(|_| ())
        }
        (Page::Overview, Calls::ServerFn) => {
            let (a, b) = tokio::join!(
                post_fn(client, "/api/fn/totals", ""),
                post_fn(client, "/api/fn/overview", "window=1h")
            );
            a.and(b)
        }
        (Page::Overview, Calls::Api) => client.get("/api/v1/overview?since=1h", false).await.map(|_| ()),
    }
}

/// The first counter family in `/metrics` whose name starts with `lastword_db_`.
async fn db_counter_name(client: &Client) -> Option<String> {
    let text = client.get("/metrics", false).await.ok()?;
    let text = String::from_utf8_lossy(&text.body).to_string();
    text.lines().find_map(|l| {
        let rest = l.strip_prefix("# TYPE ")?;
        let (name, kind) = rest.split_once(' ')?;
        (name.starts_with("lastword_db_") && kind.trim() == "counter").then(|| name.to_string())
    })
}

/// The sum of a counter family's samples (OpenMetrics names them `<family>_total`).
async fn read_counter(client: &Client, family: &str) -> Option<f64> {
    let text = client.get("/metrics", false).await.ok()?;
    let text = String::from_utf8_lossy(&text.body).to_string();
    let total: f64 = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            let name = l.split(['{', ' ']).next().unwrap_or_default();
            name == family || name == format!("{family}_total")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    Some(total)
}

#[allow(clippy::too_many_arguments)]
async fn run_phase(
    client: &Client,
    stats: &crate::db::Stats,
    fleet: &Fleet,
    server: &Server,
    page: Page,
    n: usize,
    calls: Calls,
    counter: Option<&str>,
    secs: Duration,
) -> anyhow::Result<Phase> {
    let fetches = Arc::new(AtomicU64::new(0));
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let mut tabs = Vec::with_capacity(n);
    for _ in 0..n {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let stream = live::connect(client, tx).await?;
        live::wait_open(&mut rx).await?;
        let (client, fetches, latencies) = (client.clone(), fetches.clone(), latencies.clone());
        let tab = tokio::spawn(async move {
            // Like the page: changes are held until the server's refresh, which every tab gets
            // at the same moment; a reset refetches at once.
            let mut owed = false;
            while let Some(event) = rx.recv().await {
                match event {
                    Event::Open => continue,
                    Event::Changes(..) => {
                        owed = true;
                        continue;
                    }
                    Event::Refresh if !owed => continue,
                    Event::Refresh | Event::Reset => owed = false,
                }
                let t = Instant::now();
                if refetch(&client, page, calls).await.is_ok() {
                    fetches.fetch_add(1, Ordering::Relaxed);
                    if let Ok(mut l) = latencies.lock() {
                        l.push(t.elapsed());
                    }
                }
            }
        });
        tabs.push((stream, tab));
    }
    // Let the first refetch of every tab go by before measuring.
    tokio::time::sleep(Duration::from_secs(2)).await;
    if let Ok(mut l) = latencies.lock() {
        l.clear();
    }
    let (x0, f0, c0, r0) = (
        stats.xact_commit().await?,
        fleet.commits(),
        read_counter_opt(client, counter).await,
        fetches.load(Ordering::Relaxed),
    );
    let t0 = Instant::now();
    let mut rss_max: Option<f64> = None;
    let (mut active, mut samples) = (0i64, 0i64);
    while t0.elapsed() < secs {
        tokio::time::sleep(ACTIVE_SAMPLE_EVERY).await;
        active += stats.active_sessions().await?;
        samples += 1;
        if let Some(rss) = server.rss_mb() {
            rss_max = Some(rss_max.map_or(rss, |m: f64| m.max(rss)));
        }
    }
    let (x1, f1, c1, r1) = (
        stats.xact_commit().await?,
        fleet.commits(),
        read_counter_opt(client, counter).await,
        fetches.load(Ordering::Relaxed),
    );
    let elapsed = t0.elapsed().as_secs_f64();
    for (stream, tab) in tabs {
        stream.abort();
        tab.abort();
    }
    let refetch = latencies.lock().map(|l| Summary::of(&l)).unwrap_or_default();
    // Let the server notice the closed streams and finish in-flight queries before the next
    // phase (a dropped request does not cancel its statement in PostgreSQL).
    tokio::time::sleep(Duration::from_secs(1)).await;
    stats.wait_quiet(Duration::from_secs(120)).await?;
    let xact = (x1 - x0) as f64;
    let fleet_xact = f1.saturating_sub(f0) as f64;
    Ok(Phase {
        page,
        clients: n,
        secs: elapsed,
        xact_per_s: xact / elapsed,
        dashboard_xact_per_s: (xact - fleet_xact) / elapsed,
        server_counter_per_s: match (c0, c1) {
            (Some(a), Some(b)) => Some((b - a) / elapsed),
            _ => None,
        },
        active_sessions: active as f64 / samples.max(1) as f64,
        busy_samples: active,
        refetches_per_s: r1.saturating_sub(r0) as f64 / elapsed,
        refetch,
        rss_max_mb: rss_max,
    })
}

async fn read_counter_opt(client: &Client, counter: Option<&str>) -> Option<f64> {
    match counter {
        Some(c) => read_counter(client, c).await,
        None => None,
    }
}
