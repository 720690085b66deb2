//! A fresh, migrated database per test, on either backend, for every crate's tests.
//!
//! PostgreSQL tests run when `TEST_DATABASE_URL` names a server (any database on it; each test
//! creates its own `lastword_t_*` database). When `LASTWORD_REQUIRE_POSTGRES=1` (CI), a missing
//! or unreachable server fails the test instead of skipping it.

use crate::{Db, DbTarget};
use rand::Rng;

/// The environment variable naming the PostgreSQL server for tests.
pub const TEST_DATABASE_URL: &str = "TEST_DATABASE_URL";
/// Set to `1` to turn "PostgreSQL not configured" from a skip into a failure.
pub const REQUIRE_POSTGRES: &str = "LASTWORD_REQUIRE_POSTGRES";

/// An in-memory SQLite database with the migrations applied.
pub async fn sqlite_memory() -> Db {
    let db = Db::connect(&DbTarget::SqliteMemory).await.expect("open in-memory sqlite");
    db.migrate().await.expect("migrate sqlite");
    db
}

/// A SQLite file in a temporary directory (several connections, WAL: closer to production).
/// Keep the returned directory alive for the test's duration.
pub async fn sqlite_file() -> (Db, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::connect(&DbTarget::SqliteFile(dir.path().join("test.db"))).await.expect("open sqlite file");
    db.migrate().await.expect("migrate sqlite");
    (db, dir)
}

/// A fresh PostgreSQL database, or `None` (with a note on stderr) when no server is configured
/// and `LASTWORD_REQUIRE_POSTGRES` is not set.
pub async fn postgres(test_name: &str) -> Option<Db> {
    let base = match std::env::var(TEST_DATABASE_URL) {
        Ok(url) if !url.trim().is_empty() => url,
        _ => {
            assert!(
                std::env::var(REQUIRE_POSTGRES).as_deref() != Ok("1"),
                "{REQUIRE_POSTGRES}=1 but {TEST_DATABASE_URL} is not set: the PostgreSQL suite must run"
            );
            eprintln!("SKIPPED (PostgreSQL): {test_name}: set {TEST_DATABASE_URL}=postgres://postgres@127.0.0.1:5432/postgres to run it");
            return None;
        }
    };
    let mut url = url::Url::parse(&base).unwrap_or_else(|e| panic!("{TEST_DATABASE_URL}: {e}"));
    // The creation time in the name lets `scripts/test` sweep databases that interrupted runs
    // left behind without touching those of a run still in progress.
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let suffix: u32 = rand::thread_rng().gen();
    url.set_path(&format!("lastword_t_{created}_{suffix:08x}"));
    let db = Db::connect(&DbTarget::Postgres(url.to_string()))
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {TEST_DATABASE_URL} is unreachable: {e}"));
    db.migrate().await.expect("migrate postgres");
    Some(db)
}

/// A value to bind in [`exec`]: enough types to write any contract row by hand.
#[derive(Clone, Debug)]
pub enum Arg {
    I64(Option<i64>),
    Text(Option<String>),
    Time(Option<chrono::DateTime<chrono::Utc>>),
}

impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Arg::I64(Some(v))
    }
}
impl From<Option<i64>> for Arg {
    fn from(v: Option<i64>) -> Self {
        Arg::I64(v)
    }
}
impl From<&str> for Arg {
    fn from(v: &str) -> Self {
        Arg::Text(Some(v.to_string()))
    }
}
impl From<Option<&str>> for Arg {
    fn from(v: Option<&str>) -> Self {
        Arg::Text(v.map(str::to_string))
    }
}
impl From<chrono::DateTime<chrono::Utc>> for Arg {
    fn from(v: chrono::DateTime<chrono::Utc>) -> Self {
        Arg::Time(Some(v))
    }
}
impl From<Option<chrono::DateTime<chrono::Utc>>> for Arg {
    fn from(v: Option<chrono::DateTime<chrono::Utc>>) -> Self {
        Arg::Time(v)
    }
}

macro_rules! bind_args {
    ($query:expr, $args:expr) => {{
        let mut q = $query;
        for a in $args {
            q = match a {
                Arg::I64(v) => q.bind(*v),
                Arg::Text(v) => q.bind(v.clone()),
                Arg::Time(v) => q.bind(*v),
            };
        }
        q
    }};
}

/// Runs one statement with `$n` parameters on either backend; returns rows affected.
/// For arranging test data by hand (rows no runner would write, e.g. a contract violation).
pub async fn exec(db: &Db, sql: &str, args: &[Arg]) -> u64 {
    let result = match db {
        Db::Postgres(p) => bind_args!(sqlx::query(sql), args).execute(p).await.map(|r| r.rows_affected()),
        Db::Sqlite(p) => bind_args!(sqlx::query(sql), args).execute(p).await.map(|r| r.rows_affected()),
    };
    result.unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Runs a query returning one i64 (a count, an id) on either backend.
pub async fn scalar(db: &Db, sql: &str, args: &[Arg]) -> i64 {
    let result = match db {
        Db::Postgres(p) => bind_args!(sqlx::query_scalar::<_, i64>(sql), args).fetch_one(p).await,
        Db::Sqlite(p) => bind_args!(sqlx::query_scalar::<_, i64>(sql), args).fetch_one(p).await,
    };
    result.unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Inserts a task row directly; returns its id.
pub async fn insert_task(db: &Db, kind: &str, safety: &str, now: chrono::DateTime<chrono::Utc>) -> i64 {
    scalar(
        db,
        "INSERT INTO tasks (kind, source, safety, payload, created_at, updated_at) \
         VALUES ($1, 'notification', $2, '{\"n\": 1}', $3, $3) RETURNING id",
        &[kind.into(), safety.into(), now.into()],
    )
    .await
}

/// Inserts `n` completed tasks in one statement (PostgreSQL): a long history for the tests of
/// what must not slow down with it.
pub async fn insert_completed_tasks(pool: &sqlx::PgPool, n: i64) {
    sqlx::query(
        "INSERT INTO tasks (kind, source, safety, payload, status, created_at, updated_at) \
         SELECT 'reply', 'tick', 'idempotent', '{}', 'completed', now(), now() FROM generate_series(1, $1)",
    )
    .bind(n)
    .execute(pool)
    .await
    .expect("insert completed tasks");
}

/// The overview counted from history alone, with the queries that predate the rollups: the
/// oracle the rollup-backed [`Store::overview`](crate::Store::overview) must equal.
pub async fn raw_overview(
    db: &Db,
    tokens: &lastword_core::Tokens,
    since: chrono::DateTime<chrono::Utc>,
    until: chrono::DateTime<chrono::Utc>,
    bucket: chrono::Duration,
    now: chrono::DateTime<chrono::Utc>,
) -> lastword_core::Overview {
    crate::rollups::raw_overview(db, tokens, since, until, bucket, now).await.expect("raw overview")
}

/// The cause facets counted from history alone, uncapped (the oracle).
pub async fn raw_cause_facets(
    db: &Db,
    tokens: &lastword_core::Tokens,
    filter: &lastword_core::RunFilter,
    now: chrono::DateTime<chrono::Utc>,
) -> lastword_core::CauseFacets {
    crate::rollups::raw_cause_facets(db, tokens, filter, now).await.expect("raw facets")
}

/// The workers page counted from history alone (the oracle).
pub async fn raw_workers(
    db: &Db,
    tokens: &lastword_core::Tokens,
    since: chrono::DateTime<chrono::Utc>,
    now: chrono::DateTime<chrono::Utc>,
) -> Vec<lastword_core::WorkerSummary> {
    crate::rollups::raw_workers(db, tokens, since, now).await.expect("raw workers")
}

/// `EXPLAIN (ANALYZE, BUFFERS)` of each statement behind the counting pages at `now`
/// (PostgreSQL; empty on SQLite), named: what the benchmark prints as proof of its plans.
pub async fn explain_hot_queries(
    db: &Db,
    tokens: &lastword_core::Tokens,
    now: chrono::DateTime<chrono::Utc>,
) -> Vec<(String, String)> {
    let Db::Postgres(pool) = db else { return Vec::new() };
    let mut out = Vec::new();
    for (name, buf) in crate::rollups::hot_queries(db, tokens, now) {
        let sql = format!("EXPLAIN (ANALYZE, BUFFERS) {}", buf.sql);
        let lines: Vec<String> = crate::queries::bind_values!(sqlx::query_scalar(&sql), &buf.args)
            .fetch_all(pool)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        out.push((name, lines.join("\n")));
    }
    out
}

/// Closes a test's PostgreSQL pool and drops its `lastword_t_*` database, so a test run leaves
/// the shared server as it found it.
pub async fn discard_postgres(db: Db) {
    let Db::Postgres(pool) = &db else { return };
    let name: Option<String> = sqlx::query_scalar("SELECT current_database()").fetch_one(pool).await.ok();
    db.close().await;
    let (Some(name), Ok(base)) = (name, std::env::var(TEST_DATABASE_URL)) else { return };
    if !name.starts_with("lastword_t_") {
        return;
    }
    if let Ok(admin) = sqlx::PgPool::connect(&base).await {
        let _ =
            sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")).execute(&admin).await;
        admin.close().await;
    }
}

/// Defines each listed `async fn case(db: Db)` as three tests: in-memory SQLite, a SQLite file
/// (WAL, several connections) and PostgreSQL (see [`postgres`] for when that one runs). The
/// one way every crate holds both backends to the same behaviour.
#[macro_export]
macro_rules! on_every_backend {
    ($($case:ident),+ $(,)?) => {
        $crate::on_sqlite_and_postgres!($($case),+);
        mod sqlite_file {
            $(
                #[tokio::test]
                async fn $case() {
                    let (db, _dir) = $crate::testing::sqlite_file().await;
                    super::$case(db).await;
                }
            )+
        }
    };
}

/// [`on_every_backend!`] without the SQLite file: in-memory SQLite and PostgreSQL, for suites
/// whose cases are slow (a fleet, a server) and whose SQLite behaviour does not depend on WAL
/// or on several connections.
#[macro_export]
macro_rules! on_sqlite_and_postgres {
    ($($case:ident),+ $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $case() {
                    super::$case($crate::testing::sqlite_memory().await).await;
                }
            )+
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $case() {
                    if let Some(db) = $crate::testing::postgres(stringify!($case)).await {
                        super::$case(db.clone()).await;
                        $crate::testing::discard_postgres(db).await;
                    }
                }
            )+
        }
    };
}

/// A PostgreSQL cluster of a test's own (`initdb` + `pg_ctl` in a temporary directory, on a
/// free loopback port), for tests that stop the database: never the machine's shared server.
/// As root, the server binaries run as the `postgres` user (`initdb` refuses root). Stopped and
/// removed when dropped.
pub struct ThrowawayCluster {
    bin: std::path::PathBuf,
    dir: tempfile::TempDir,
    pub port: u16,
    as_postgres: bool,
}

impl ThrowawayCluster {
    /// `None` when the server binaries are not installed and PostgreSQL is not required
    /// (`LASTWORD_REQUIRE_POSTGRES` unset); a failure to start is a panic with the log.
    pub fn start() -> Option<ThrowawayCluster> {
        let bin = postgres_bindir();
        let Some(bin) = bin else {
            assert!(
                std::env::var(REQUIRE_POSTGRES).as_deref() != Ok("1"),
                "{REQUIRE_POSTGRES}=1 but no PostgreSQL server binaries (initdb, pg_ctl) were found"
            );
            eprintln!("SKIPPED (PostgreSQL): no initdb/pg_ctl for a throwaway cluster");
            return None;
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let as_postgres = running_as_root();
        if as_postgres {
            let ok = std::process::Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .expect("chown");
            assert!(ok.success(), "chown of the cluster directory");
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let cluster = ThrowawayCluster { bin, dir, port, as_postgres };
        let data = cluster.data();
        cluster.run("initdb", &["-D", &data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"]);
        cluster.pg_ctl_start();
        Some(cluster)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    /// `postgres://postgres@127.0.0.1:<port>/<database>`.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    fn run(&self, tool: &str, args: &[&str]) {
        let exe = self.bin.join(tool);
        let mut command = if self.as_postgres {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&exe);
            c
        } else {
            std::process::Command::new(&exe)
        };
        let out = command.args(args).output().unwrap_or_else(|e| panic!("{}: {e}", exe.display()));
        let log = std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default();
        assert!(
            out.status.success(),
            "{tool} {args:?} failed: {}{}\n{log}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn pg_ctl_start(&self) {
        let (data, log) = (self.data(), self.dir.path().join("log").display().to_string());
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off",
            self.port,
            self.dir.path().display()
        );
        self.run("pg_ctl", &["-D", &data, "-l", &log, "-o", &options, "-w", "-t", "60", "start"]);
    }

    /// Starts the stopped cluster again, on the same port.
    pub fn start_again(&self) {
        self.pg_ctl_start();
    }

    /// Stops it the hard way (`-m immediate`: every connection cut, as a crash would).
    pub fn stop(&self) {
        self.run("pg_ctl", &["-D", &self.data(), "-m", "immediate", "-w", "stop"]);
    }
}

impl Drop for ThrowawayCluster {
    fn drop(&mut self) {
        let data = self.data();
        let exe = self.bin.join("pg_ctl");
        let mut command = if self.as_postgres {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&exe);
            c
        } else {
            std::process::Command::new(&exe)
        };
        let _ = command.args(["-D", &data, "-m", "immediate", "-w", "stop"]).output();
    }
}

/// Where `initdb` and `pg_ctl` live: `pg_config --bindir`, else Debian's versioned directory.
fn postgres_bindir() -> Option<std::path::PathBuf> {
    let from_config = std::process::Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| std::path::PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let debian = std::fs::read_dir("/usr/lib/postgresql").ok().and_then(|versions| {
        let mut dirs: Vec<_> = versions.flatten().map(|v| v.path().join("bin")).collect();
        dirs.sort();
        dirs.pop()
    });
    [from_config, debian]
        .into_iter()
        .flatten()
        .find(|dir| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file())
}

/// Whether this process runs as root (then the cluster runs as `postgres`).
fn running_as_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}
