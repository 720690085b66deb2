//! The bench's own database: created fresh for every run (`lastword_bench_<unix time>`),
//! migrated by the real `lastword migrate` (so the schema is exactly what the binary ships),
//! and dropped at the end. Also the one place that reads `pg_stat_database`, from the admin
//! database so reading the statistics does not count as load on the bench database.

use anyhow::Context;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::ConnectOptions;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

pub struct BenchDb {
    pub name: String,
    /// postgres://…/<name>
    pub url: String,
    admin_url: String,
}

impl BenchDb {
    pub async fn create(admin_url: &str) -> anyhow::Result<BenchDb> {
        let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
        let name = format!("lastword_bench_{stamp}");
        let admin = admin_pool(admin_url).await?;
        sqlx::query(&format!("CREATE DATABASE \"{name}\"")).execute(&admin).await?;
        admin.close().await;
        Ok(BenchDb { url: with_database(admin_url, &name)?, name, admin_url: admin_url.to_string() })
    }

    /// A database an earlier run kept (`--keep`).
    pub fn existing(admin_url: &str, name: &str) -> anyhow::Result<BenchDb> {
        Ok(BenchDb {
            url: with_database(admin_url, name)?,
            name: name.to_string(),
            admin_url: admin_url.to_string(),
        })
    }

    pub async fn drop(&self) -> anyhow::Result<()> {
        // Only ever a database this run created (the name was built above).
        anyhow::ensure!(self.name.starts_with("lastword_bench_"), "refusing to drop {}", self.name);
        let admin = admin_pool(&self.admin_url).await?;
        sqlx::query(&format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name))
            .execute(&admin)
            .await?;
        admin.close().await;
        println!("dropped database {}", self.name);
        Ok(())
    }
}

/// The admin URL with its database replaced.
fn with_database(url: &str, db: &str) -> anyhow::Result<String> {
    let mut u = url::Url::parse(url).context("--admin-url")?;
    u.set_path(&format!("/{db}"));
    Ok(u.to_string())
}

async fn admin_pool(admin_url: &str) -> anyhow::Result<PgPool> {
    PgPoolOptions::new().max_connections(1).connect(admin_url).await.context("connecting to --admin-url")
}

/// A pool on the bench database. Statement logging is off: the loader's statements run for
/// seconds by design.
pub async fn connect(url: &str, max: u32) -> anyhow::Result<PgPool> {
    let options =
        PgConnectOptions::from_str(url)?.application_name("lastword-bench").disable_statement_logging();
    Ok(PgPoolOptions::new()
        .max_connections(max)
        .acquire_timeout(Duration::from_secs(60))
        .connect_with(options)
        .await?)
}

/// A pool whose sessions are set as the server's store sets its own (JIT off), so the raw-SQL
/// floor and the plans are those of the server's reads.
pub async fn connect_like_store(url: &str) -> anyhow::Result<PgPool> {
    let options = PgConnectOptions::from_str(url)?
        .application_name("lastword-bench-floor")
        .disable_statement_logging()
        .options(lastword_store::explain::session_settings().iter().copied());
    Ok(PgPoolOptions::new().max_connections(2).connect_with(options).await?)
}

/// `lastword migrate` against the bench database: the schema the server under test ships.
pub async fn migrate(server_bin: &Path, url: &str) -> anyhow::Result<()> {
    let status = tokio::process::Command::new(server_bin)
        .arg("migrate")
        .env("DATABASE_URL", url)
        .env("RUST_LOG", "warn")
        .status()
        .await
        .with_context(|| format!("running {} migrate", server_bin.display()))?;
    anyhow::ensure!(status.success(), "{} migrate exited with {status}", server_bin.display());
    Ok(())
}

/// Reads the bench database's committed-transaction counter from the admin database.
pub struct Stats {
    admin: PgPool,
    name: String,
}

impl Stats {
    pub async fn new(admin_url: &str, name: &str) -> anyhow::Result<Stats> {
        Ok(Stats { admin: admin_pool(admin_url).await?, name: name.to_string() })
    }

    /// `pg_stat_database.xact_commit` of the bench database. Backends report their counts when
    /// they go idle, at most once a second (PostgreSQL 15); over a phase of many seconds in a
    /// steady state the lag at both ends cancels out.
    pub async fn xact_commit(&self) -> anyhow::Result<i64> {
        let n: i64 = sqlx::query_scalar("SELECT xact_commit FROM pg_stat_database WHERE datname = $1")
            .bind(&self.name)
            .fetch_one(&self.admin)
            .await?;
        Ok(n)
    }
}

impl Stats {
    /// Statements of anyone but the bench running on the bench database right now: sampled
    /// over a phase, their mean is the server's average active sessions — the database time
    /// the dashboard uses per second, which stays meaningful when the server is saturated and
    /// few statements complete.
    pub async fn active_sessions(&self) -> anyhow::Result<i64> {
        Ok(sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND state = 'active' \
             AND application_name NOT LIKE 'lastword-bench%'",
        )
        .bind(&self.name)
        .fetch_one(&self.admin)
        .await?)
    }

    /// Waits until no statement of anyone but the bench runs on the bench database (the
    /// server's leftovers from a phase), for at most `limit`.
    pub async fn wait_quiet(&self, limit: Duration) -> anyhow::Result<()> {
        let started = std::time::Instant::now();
        loop {
            let active: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND state = 'active' \
                 AND application_name NOT LIKE 'lastword-bench%'",
            )
            .bind(&self.name)
            .fetch_one(&self.admin)
            .await?;
            if active == 0 || started.elapsed() > limit {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Waits until the server's rollup maintainer has counted every closed 15-minute bucket of the
/// loaded history (docs/counts.md): the loader writes with triggers off, so the maintainer
/// backfills from `runs` after start-up, and the pages are only as fast as production's once
/// that is done. Returns the seconds waited, or an error after `limit`.
pub async fn wait_for_rollups(pool: &PgPool, limit: Duration) -> anyhow::Result<f64> {
    const MISSING_SQL: &str = "SELECT (floor(extract(epoch FROM now()) / 900)::bigint \
           - floor(extract(epoch FROM (SELECT MIN(claimed_at) FROM runs)) / 900)::bigint) \
           - (SELECT COUNT(*) FROM run_rollup_buckets)";
    let started = std::time::Instant::now();
    loop {
        let missing: Option<i64> = sqlx::query_scalar(MISSING_SQL).fetch_one(pool).await?;
        let missing = missing.unwrap_or(0);
        if missing <= 0 {
            return Ok(started.elapsed().as_secs_f64());
        }
        anyhow::ensure!(
            started.elapsed() < limit,
            "the rollups were still {missing} buckets short after {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
