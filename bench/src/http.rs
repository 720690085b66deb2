//! The hot reads, timed through the real server over HTTP: each page (HTML, as a browser gets
//! it on first open) and the JSON API behind it. Also the first visit's page weight: the
//! /pkg files the page HTML references, fetched compressed as a browser would.

use crate::load::Loaded;
use crate::stats::Summary;
use anyhow::Context;
use std::time::{Duration, Instant};

/// What a browser sends (Chromium's header); the server may compress with any of them.
pub const BROWSER_ENCODINGS: &str = "gzip, deflate, br, zstd";

#[derive(Clone)]
pub struct Client {
    pub http: reqwest::Client,
    pub base: String,
}

impl Client {
    pub fn new(base: String) -> anyhow::Result<Client> {
        // No automatic decompression (reqwest's gzip/brotli features are off): the byte counts
        // below are what crossed the wire.
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .pool_max_idle_per_host(256)
            .build()?;
        Ok(Client { http, base })
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// GET `path`; the body's length as received, or an error for a non-2xx answer.
    pub async fn get(&self, path: &str, html: bool) -> anyhow::Result<Fetched> {
        self.get_as(path, html, false).await
    }

    /// [`Client::get`], as a hard reload asks when `fresh` (`Cache-Control: no-cache`): the
    /// server renders the page for this request instead of serving an identical render
    /// (`lastword_server::shared_pages`); the data is still the shared answer.
    pub async fn get_as(&self, path: &str, html: bool, fresh: bool) -> anyhow::Result<Fetched> {
        let mut req = self.http.get(self.url(path));
        if html {
            req = req.header("Accept", "text/html").header("Accept-Encoding", BROWSER_ENCODINGS);
        }
        if fresh {
            req = req.header("Cache-Control", "no-cache");
        }
        let resp = req.send().await.with_context(|| format!("GET {path}"))?;
        let status = resp.status();
        let encoding =
            resp.headers().get("content-encoding").and_then(|v| v.to_str().ok()).map(str::to_string);
        let body = resp.bytes().await.with_context(|| format!("GET {path}: body"))?;
        anyhow::ensure!(
            status.is_success(),
            "GET {path}: {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(300)])
        );
        Ok(Fetched { bytes: body.len(), encoding, body: body.to_vec() })
    }
}

pub struct Fetched {
    pub bytes: usize,
    pub encoding: Option<String>,
    pub body: Vec<u8>,
}

/// One timed read.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Read {
    pub name: String,
    pub path: String,
    pub summary: Summary,
    /// Body size of the last answer as received (compressed if the server compressed it).
    pub bytes: usize,
    pub encoding: Option<String>,
    /// The untimed warm-up request's time: for a read the server shares for a while (the lease
    /// figures, 30 s), what one computation costs the database.
    pub first_ms: f64,
}

/// Pages also timed rendered for every request (`Cache-Control: no-cache`): (name, path).
pub const RENDERED_AFRESH: [(&str, &str); 2] =
    [("failures_page_render", "/failures"), ("timeline_page_render", "/timeline?minutes=15")];

/// The reads of issue 9, by name: (name, path, is a page).
fn reads(loaded: &Loaded) -> Vec<(String, String, bool)> {
    let failures = crate::explain::failure_states();
    let task = loaded.task_50;
    let mut v: Vec<(String, String, bool)> = vec![
        ("failures_page".into(), "/failures".into(), true),
        ("failures_page_timeout".into(), "/failures?cause=timeout".into(), true),
        ("failures_page_timeout_crash".into(), "/failures?cause=timeout&cause=crash".into(), true),
        ("runs_api_failures".into(), format!("/api/v1/runs?state={failures}"), false),
        ("runs_api_no_filter".into(), "/api/v1/runs".into(), false),
        ("runs_api_timeout".into(), "/api/v1/runs?cause=timeout".into(), false),
        ("runs_api_timeout_crash".into(), "/api/v1/runs?cause=timeout&cause=crash".into(), false),
        ("facets_api".into(), "/api/v1/runs/facets".into(), false),
        ("facets_api_24h".into(), "/api/v1/runs/facets?since=24h".into(), false),
        ("timeline_page".into(), "/timeline?minutes=15".into(), true),
        ("timeline_api".into(), "/api/v1/timeline?since=15m".into(), false),
        ("overview_page".into(), "/".into(), true),
    ];
    for w in ["1h", "6h", "24h", "7d"] {
        v.push((format!("overview_api_{w}"), format!("/api/v1/overview?since={w}"), false));
    }
    v.push(("task_page".into(), format!("/tasks/{task}"), true));
    v.push(("task_api".into(), format!("/api/v1/tasks/{task}"), false));
    v.push(("workers_page".into(), "/workers".into(), true));
    v.push(("workers_api_24h".into(), "/api/v1/workers?since=24h".into(), false));
    // Lease health (issue 13): computed once per question per 30 s and shared (the overview's
    // panel asks the page's question, so those are warm); a day given as absolute times is a
    // question nobody else asks, so its first request (`first_ms`) pays for one computation.
    v.push(("leases_page".into(), "/leases".into(), true));
    v.push(("leases_api_24h".into(), "/api/v1/leases?since=24h".into(), false));
    let until = chrono::Utc::now();
    let stamp = |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    v.push((
        "leases_api_day_cold".into(),
        format!("/api/v1/leases?since={}&until={}", stamp(until - chrono::Duration::hours(24)), stamp(until)),
        false,
    ));
    v.push(("leases_api_1h_kind".into(), "/api/v1/leases?since=1h&kind=reply".into(), false));
    v
}

/// Each read `n` times in a row (after one untimed warm-up), or for at most `budget` when
/// a read is slow — the figures then rest on fewer samples, which the report shows.
pub async fn measure_hot_reads(
    client: &Client,
    loaded: &Loaded,
    n: usize,
    budget: Duration,
) -> anyhow::Result<Vec<Read>> {
    let mut out = Vec::new();
    // The pages as shared between requests at one data version, and the same pages rendered
    // for each request (what a page costs the first person to ask at a version).
    let fresh_renders =
        RENDERED_AFRESH.iter().map(|(name, path)| (name.to_string(), path.to_string(), true, true));
    let all =
        reads(loaded).into_iter().map(|(name, path, html)| (name, path, html, false)).chain(fresh_renders);
    for (name, path, html, fresh) in all {
        let first = Instant::now();
        client.get_as(&path, html, fresh).await?;
        let first_ms = first.elapsed().as_secs_f64() * 1000.0;
        let mut samples = Vec::with_capacity(n);
        let started = Instant::now();
        let mut last = None;
        while samples.len() < n && (samples.len() < 3 || started.elapsed() < budget) {
            let t = Instant::now();
            let fetched = client.get_as(&path, html, fresh).await?;
            samples.push(t.elapsed());
            last = Some(fetched);
        }
        let summary = Summary::of(&samples);
        let (bytes, encoding) = last.map(|f| (f.bytes, f.encoding)).unwrap_or_default();
        println!(
            "http {name:<34} {summary}  {:>8.1} KB{}",
            bytes as f64 / 1024.0,
            encoding.as_deref().map(|e| format!(" ({e})")).unwrap_or_default()
        );
        out.push(Read { name, path, summary, bytes, encoding, first_ms });
    }
    Ok(out)
}

/// What a first visit downloads besides the page: the /pkg files (wasm, js, css, pack) its HTML
/// names. The bundle is split per page (`cargo leptos build --split`), so that is the shell's
/// wasm, js and css, the chunk loader, and the opened page's wasm chunks, which the server
/// names as preloads: all of them in one pack (`server/src/packs.rs`), or each chunk when the
/// server has no pack. Measured for every page, since an alert's link opens any of them.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PageWeight {
    /// The overview's (`/`) files, as the browser gets them: (path, bytes, encoding).
    pub files: Vec<(String, usize, Option<String>)>,
    /// The overview's first visit, on the wire.
    pub total_bytes: usize,
    /// The same files without compression, for comparison.
    pub uncompressed_bytes: usize,
    /// Every page's first visit, the overview first.
    pub pages: Vec<FirstVisit>,
    /// The timeline page (15 minutes) HTML without compression.
    pub timeline_html_bytes: usize,
}

/// One page's first visit: how many /pkg files and bytes its HTML makes the browser fetch.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FirstVisit {
    pub page: String,
    pub files: usize,
    pub bytes: usize,
    pub uncompressed_bytes: usize,
}

impl PageWeight {
    /// The heaviest page's first visit.
    pub fn heaviest(&self) -> Option<&FirstVisit> {
        self.pages.iter().max_by_key(|p| p.bytes)
    }
}

pub async fn page_weight(client: &Client, task: i64) -> anyhow::Result<PageWeight> {
    let pages = [
        "/".to_string(),
        "/failures".to_string(),
        "/timeline?minutes=15".to_string(),
        format!("/tasks/{task}"),
        "/workers".to_string(),
        "/leases".to_string(),
        "/audit".to_string(),
    ];
    let mut visits = Vec::new();
    let mut overview_files = Vec::new();
    for page in pages {
        let html = client.get(&page, false).await?;
        let files = pkg_files(&String::from_utf8_lossy(&html.body));
        anyhow::ensure!(!files.is_empty(), "{page} references no /pkg files");
        // Each page is a lazy route: its HTML names its pack or its wasm chunks. Neither means the
        // server binary and the site come from different builds (a chunk's name is derived from
        // where its route is declared), and the count would leave out what the browser then
        // fetches on demand.
        anyhow::ensure!(
            files.iter().any(|f| {
                f.ends_with(".pack") || (f.ends_with(".wasm") && !f.trim_start_matches("/pkg/").starts_with("lastword"))
            }),
            "{page} names neither a pack nor a wasm chunk of its own: are the server binary and the site from the same `cargo leptos build --split`?"
        );
        let (mut bytes, mut uncompressed) = (0, 0);
        for f in &files {
            let wire = as_served_once_warm(client, f).await?;
            uncompressed += client.get(f, false).await?.bytes;
            bytes += wire.bytes;
            if visits.is_empty() {
                println!(
                    "pkg  {f:<40} {:>9.1} KB {}",
                    wire.bytes as f64 / 1024.0,
                    wire.encoding.as_deref().unwrap_or("identity")
                );
                overview_files.push((f.clone(), wire.bytes, wire.encoding));
            }
        }
        println!("first visit {page:<24} {:>3} files {:>9.1} KB", files.len(), bytes as f64 / 1024.0);
        visits.push(FirstVisit { page, files: files.len(), bytes, uncompressed_bytes: uncompressed });
    }
    let timeline_html_bytes = client.get("/timeline?minutes=15", false).await?.bytes;
    Ok(PageWeight {
        files: overview_files,
        total_bytes: visits[0].bytes,
        uncompressed_bytes: visits[0].uncompressed_bytes,
        pages: visits,
        timeline_html_bytes,
    })
}

/// `path` as a browser gets it from a warm server. A page's pack is served gzip until the
/// server's background thread, which runs only on an idle core, has made its brotli
/// (`server/src/packs.rs`); the figure is the steady state, so this waits for brotli (at most a
/// minute, then counts what came).
async fn as_served_once_warm(client: &Client, path: &str) -> anyhow::Result<Fetched> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let wire = client.get(path, true).await?;
        let cold = path.ends_with(".pack") && wire.encoding.as_deref() == Some("gzip");
        if !cold || std::time::Instant::now() > deadline {
            return Ok(wire);
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

/// `/pkg/…{.wasm,.js,.css}` references in a page, in order, without duplicates. The wasm may
/// only be named by the js loader (`<name>_bg.wasm` or `<name>.wasm` next to it), so it is
/// derived from the js file when the HTML does not name it.
fn pkg_files(html: &str) -> Vec<String> {
    let mut files: Vec<String> = Vec::new();
    for (i, _) in html.match_indices("/pkg/") {
        let rest = &html[i..];
        let end = rest
            .find(|c: char| c == '"' || c == '\'' || c.is_whitespace() || c == '>' || c == '?')
            .unwrap_or(rest.len());
        let f = &rest[..end];
        if [".wasm", ".js", ".css", ".pack"].iter().any(|ext| f.ends_with(ext))
            && !files.iter().any(|x| x == f)
        {
            files.push(f.to_string());
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkg_files_are_found_once_in_order() {
        let html = r#"<link rel="stylesheet" id="leptos" href="/pkg/lastword.css"><link rel="modulepreload" href="/pkg/lastword.js"><link rel="preload" href="/pkg/lastword.wasm" as="fetch"><link rel="preload" href="/pkg/pack_task.h.pack" as="fetch"><script type="module">import('/pkg/lastword.js')</script><a href="/pkg/notes.txt">"#;
        assert_eq!(
            pkg_files(html),
            vec!["/pkg/lastword.css", "/pkg/lastword.js", "/pkg/lastword.wasm", "/pkg/pack_task.h.pack"]
        );
    }
}
