//! The server under test: the real `lastword serve`, started as a child process on the bench
//! database with the `LEPTOS_*` variables cargo-leptos builds it with (site root, pkg dir,
//! output name, env), so the pages it renders reference the wasm/js/css it was built with (the
//! server itself finds a content-hashed bundle from the hash.txt beside it).
//! Stopped with SIGTERM like a deployment would, and restartable (the write-ratio phases run
//! without it).

use crate::cli::Args;
use anyhow::Context;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

pub struct Server {
    bin: PathBuf,
    site_root: PathBuf,
    leptos_env: String,
    database_url: String,
    port: u16,
    child: Option<Child>,
    log: PathBuf,
}

impl Server {
    pub async fn start(args: &Args, database_url: &str) -> anyhow::Result<Server> {
        let port = free_port()?;
        let site_root = std::fs::canonicalize(&args.site_root)
            .with_context(|| format!("--site-root {}", args.site_root.display()))?;
        let log = std::env::temp_dir().join(format!("lastword-bench-server-{port}.log"));
        let mut server = Server {
            bin: args.server_bin.clone(),
            site_root,
            leptos_env: args.leptos_env(),
            database_url: database_url.to_string(),
            port,
            child: None,
            log,
        };
        server.spawn().await?;
        Ok(server)
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// Starts the process and waits until `/readyz` answers 200 (database reachable, every
    /// migration applied).
    pub async fn spawn(&mut self) -> anyhow::Result<()> {
        if self.child.is_some() {
            return Ok(());
        }
        let addr = format!("127.0.0.1:{}", self.port);
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log)?;
        let mut cmd = Command::new(&self.bin);
        cmd.args(["serve", "--addr", &addr])
            .env("DATABASE_URL", &self.database_url)
            .env("LEPTOS_OUTPUT_NAME", "lastword")
            .env("LEPTOS_SITE_ROOT", &self.site_root)
            .env("LEPTOS_SITE_PKG_DIR", "pkg")
            .env("LEPTOS_SITE_ADDR", &addr)
            .env("LEPTOS_RELOAD_PORT", free_port()?.to_string())
            .env("LEPTOS_ENV", &self.leptos_env)
            .env("RUST_LOG", std::env::var("BENCH_SERVER_LOG").unwrap_or_else(|_| "warn".into()))
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .kill_on_drop(true);
        let child = cmd.spawn().with_context(|| format!("starting {}", self.bin.display()))?;
        self.child = Some(child);
        let client = reqwest::Client::new();
        let url = format!("{}/readyz", self.base_url());
        let started = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Some(status) = child.try_wait()? {
                    self.child = None;
                    anyhow::bail!("the server exited with {status} at start-up; see {}", self.log.display());
                }
            }
            if let Ok(r) = client.get(&url).timeout(Duration::from_secs(2)).send().await {
                if r.status().is_success() {
                    println!(
                        "server: {} ready at {} in {:.1} s (log {})",
                        self.bin.display(),
                        self.base_url(),
                        started.elapsed().as_secs_f64(),
                        self.log.display()
                    );
                    return Ok(());
                }
            }
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(120),
                "the server was not ready within 120 s; see {}",
                self.log.display()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Stops the running process where it is (`SIGSTOP`): it uses no CPU and sends the
    /// database nothing until [`Server::resume`]. For measuring what a running server costs
    /// in slices seconds apart (bench/src/writes.rs), where restarting it would take longer
    /// than a slice.
    pub async fn pause(&self) -> anyhow::Result<()> {
        self.signal("STOP").await
    }

    /// Lets a paused process go on (`SIGCONT`); harmless on a running one.
    pub async fn resume(&self) -> anyhow::Result<()> {
        self.signal("CONT").await
    }

    async fn signal(&self, name: &str) -> anyhow::Result<()> {
        let pid = self.pid().context("the server is not running")?;
        let status = Command::new("kill").args([format!("-{name}"), pid.to_string()]).status().await?;
        anyhow::ensure!(status.success(), "kill -{name} {pid}: {status}");
        Ok(())
    }

    /// SIGTERM (and SIGCONT, in case it was paused), then SIGKILL if it has not stopped within
    /// ten seconds.
    pub async fn stop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        if let Some(pid) = child.id() {
            let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status().await;
            let _ = Command::new("kill").args(["-CONT", &pid.to_string()]).status().await;
        }
        match tokio::time::timeout(Duration::from_secs(10), child.wait()).await {
            Ok(_) => {}
            Err(_) => {
                eprintln!("server: did not stop within 10 s of SIGTERM; killing it");
                let _ = child.kill().await;
            }
        }
    }

    /// What the server's allocator holds allocated (`lastword_heap_allocated_bytes` on
    /// `/metrics`), in MB: beside the RSS it tells memory in use from memory kept. `None` when
    /// the server does not report it.
    pub async fn heap_allocated_mb(&self, client: &crate::http::Client) -> Option<f64> {
        let metrics = client.get("/metrics", false).await.ok()?;
        let text = String::from_utf8(metrics.body).ok()?;
        let bytes: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("lastword_heap_allocated_bytes "))?
            .trim()
            .parse()
            .ok()?;
        Some(bytes / (1024.0 * 1024.0))
    }

    /// The server's resident memory (`VmRSS` in /proc/<pid>/status), in MB.
    pub fn rss_mb(&self) -> Option<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?)).ok()?;
        let kb: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kb / 1024.0)
    }
}

/// A port nobody listens on now (the OS picks it; it is free again once the probe closes).
fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}
