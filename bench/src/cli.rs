//! The command line. Defaults are the full-scale run of issue 9 (10 M runs, 200 requests per
//! read); CI passes a small `--scale` and small counts so the benchmark keeps working.

use clap::Parser;
use std::path::PathBuf;

/// Load a production-shaped data set into a fresh PostgreSQL database and measure the real
/// lastword server on it (issue 9).
#[derive(Debug, Parser)]
#[command(name = "lastword-bench")]
pub struct Args {
    /// Size of the data set: 1.0 = 10 M runs, 2 M tasks over 30 days.
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,

    /// The PostgreSQL server; a database `lastword_bench_<unix time>` is created on it.
    #[arg(long, env = "BENCH_ADMIN_URL", default_value = "postgres://postgres@127.0.0.1:5432/postgres")]
    pub admin_url: String,

    /// Keep the bench database instead of dropping it at the end.
    #[arg(long)]
    pub keep: bool,

    /// Measure an existing bench database (one kept with --keep) instead of loading a new one;
    /// it is kept. Its data set's description is read from the database comment the loader
    /// wrote.
    #[arg(long, value_name = "lastword_bench_…")]
    pub reuse_db: Option<String>,

    /// The server binary, built by cargo-leptos (`cargo leptos build --release`).
    #[arg(long, default_value = "target/release/lastword")]
    pub server_bin: PathBuf,

    /// The site cargo-leptos built with that binary (wasm, js, css under pkg/).
    #[arg(long, default_value = "target/site")]
    pub site_root: PathBuf,

    /// LEPTOS_ENV for the server; by default PROD for a binary under a `release` directory, DEV
    /// otherwise (what cargo-leptos builds it with).
    #[arg(long)]
    pub leptos_env: Option<String>,

    /// Requests per hot read (and raw SQL executions per floor query).
    #[arg(long, default_value_t = 200)]
    pub requests: usize,

    /// At most this many seconds per hot read: a slow read stops early (with at least three
    /// samples) so a full-scale run on a slow server still ends.
    #[arg(long, default_value_t = 30)]
    pub read_budget_secs: u64,

    /// Skip the page-weight measurement (for a server whose site was not built with it, e.g.
    /// a plain `cargo build` binary: its pages name files the site does not have).
    #[arg(long)]
    pub no_page_weight: bool,

    /// Samples of live latency (a run row committed → its SSE event).
    #[arg(long, default_value_t = 100)]
    pub live_samples: usize,

    /// Simulated browsers in the crowded phase of the database-load measurement.
    #[arg(long, default_value_t = 200)]
    pub clients: usize,

    /// Seconds each database-load phase lasts.
    #[arg(long, default_value_t = 20)]
    pub load_phase_secs: u64,

    /// How the simulated browsers refetch: `fn` (the pages' server functions, as the browser
    /// does), `api` (the JSON API), or `auto` (server functions if the server answers them).
    #[arg(long, default_value = "auto")]
    pub browser_calls: String,

    /// The crowd (issue 11): live clients holding an event stream each ...
    #[arg(long, default_value_t = 200)]
    pub crowd_clients: usize,

    /// ... while page and API requests arrive at this rate (per second) ...
    #[arg(long, default_value_t = 50.0)]
    pub crowd_rps: f64,

    /// ... for this many seconds. 0 skips the crowd.
    #[arg(long, default_value_t = 60)]
    pub crowd_secs: u64,

    /// Which requests the crowd makes: `all` (pages and JSON reads in turn), `html` (the
    /// server-rendered pages only) or `api` (the JSON reads only). The two halves tell where
    /// the server's memory goes when `all` shows it growing.
    #[arg(long, value_enum, default_value_t = crate::crowd::Pages::All)]
    pub crowd_pages: crate::crowd::Pages,

    /// The soak (issue 11): seconds of fleet, dashboard and scripted operators together,
    /// then the record checked. 0 skips the soak.
    #[arg(long, default_value_t = 300)]
    pub soak_secs: u64,

    /// Scripted operators acting during the soak.
    #[arg(long, default_value_t = 3)]
    pub soak_operators: usize,

    /// Seconds each runner write loop runs per phase.
    #[arg(long, default_value_t = 5)]
    pub write_secs: u64,

    /// Installed/without alternations of the runner write loops.
    #[arg(long, default_value_t = 3)]
    pub alternations: usize,

    /// Seconds each runner write loop runs twice more with the mode switched every 2 s: the
    /// triggers off and on (no server), then the triggers off with the server paused and on
    /// with it running. What lastword costs, free of the drift between phases; the second is
    /// `runner_write_ratio` (bench/src/writes.rs). 0 skips both. Two minutes give each loop
    /// 26 installed slices with a slice without on both sides to take the median of (one
    /// minute's 13 left a loop that fires no trigger reading anywhere from 0.94 to 1.01).
    #[arg(long, default_value_t = 120)]
    pub interleave_secs: u64,

    /// Concurrent clients in each runner write loop.
    #[arg(long, default_value_t = 8)]
    pub write_clients: usize,

    /// Workers of the live write load (the real runner library) during the read measurements.
    #[arg(long, default_value_t = 4)]
    pub fleet_workers: usize,

    /// Loader connections working on chunks at once.
    #[arg(long, default_value_t = 2)]
    pub load_parallelism: usize,

    /// Where BENCHMARKS.md, results.json and explain.txt go. Without it: BENCHMARKS.md at the
    /// repository root and bench/results.json, bench/explain.txt (the committed figures).
    #[arg(long)]
    pub out: Option<PathBuf>,

    /// With --reuse-db: only EXPLAIN (ANALYZE, BUFFERS) every hot read's statement on that
    /// database, print the plans with their SQL, and stop (no server, nothing written): a change
    /// to a query or an index checked against the full data set in seconds.
    #[arg(long, requires = "reuse_db")]
    pub explain_only: bool,
}

impl Args {
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.scale > 0.0 && self.scale <= 10.0, "--scale: between 0 (exclusive) and 10");
        if let Some(name) = &self.reuse_db {
            anyhow::ensure!(
                name.starts_with("lastword_bench_"),
                "--reuse-db: only lastword_bench_* databases"
            );
        }
        anyhow::ensure!(self.requests >= 1, "--requests: at least 1");
        anyhow::ensure!(self.clients >= 1, "--clients: at least 1");
        anyhow::ensure!(self.write_clients >= 1, "--write-clients: at least 1");
        anyhow::ensure!(self.alternations >= 1, "--alternations: at least 1");
        anyhow::ensure!(
            self.interleave_secs == 0 || self.interleave_secs >= 7,
            "--interleave-secs: 0 (skip) or at least 7 (three slices)"
        );
        anyhow::ensure!(self.crowd_clients >= 1, "--crowd-clients: at least 1");
        anyhow::ensure!(
            self.crowd_rps.is_finite() && self.crowd_rps > 0.0 && self.crowd_rps <= 10_000.0,
            "--crowd-rps: more than 0, at most 10000"
        );
        anyhow::ensure!(self.soak_operators >= 1, "--soak-operators: at least 1");
        anyhow::ensure!(
            matches!(self.browser_calls.as_str(), "auto" | "fn" | "api"),
            "--browser-calls: auto, fn or api"
        );
        if self.explain_only {
            // No server and no site: only the database is read.
            return Ok(());
        }
        anyhow::ensure!(
            self.server_bin.is_file(),
            "--server-bin {}: not found; build it with `cargo leptos build --release` (or pass the debug build)",
            self.server_bin.display()
        );
        anyhow::ensure!(
            self.site_root.join("pkg").is_dir(),
            "--site-root {}: no pkg/ inside; build the site with cargo leptos build",
            self.site_root.display()
        );
        Ok(())
    }

    /// The LEPTOS_ENV the server was built for.
    pub fn leptos_env(&self) -> String {
        self.leptos_env.clone().unwrap_or_else(|| {
            let release = self.server_bin.components().any(|c| c.as_os_str() == "release");
            if release { "PROD" } else { "DEV" }.to_string()
        })
    }

    /// (BENCHMARKS.md, results.json, explain.txt)
    pub fn out_paths(&self) -> (PathBuf, PathBuf, PathBuf) {
        match &self.out {
            Some(dir) => (dir.join("BENCHMARKS.md"), dir.join("results.json"), dir.join("explain.txt")),
            None => (
                PathBuf::from("BENCHMARKS.md"),
                PathBuf::from("bench/results.json"),
                PathBuf::from("bench/explain.txt"),
            ),
        }
    }
}
