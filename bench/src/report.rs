//! The figures: `results.json` (the keys issue 9 asks for, then every detail) and
//! `BENCHMARKS.md` (machine, date, scale, commit, each headline figure next to its target,
//! then the detail tables), and the full query plans in `explain.txt`.

use crate::cli::Args;
use crate::explain::Plan;
use crate::http::{PageWeight, Read};
use crate::live::Latency;
use crate::load::Loaded;
use crate::stats::Summary;
use crate::watchers::DbLoad;
use crate::writes::Writes;
use serde_json::{json, Map, Value};
use std::fmt::Write as _;

pub struct Results {
    pub command: String,
    /// The commit measured, read when the run starts (the tree may move on during a long run).
    pub commit: String,
    pub scale: f64,
    pub started_at: chrono::DateTime<chrono::Utc>,
    pub clients: usize,
    pub load_secs: f64,
    /// How long the server's rollup maintainer took to count the loaded history.
    pub rollup_backfill_secs: f64,
    /// Measured on a database an earlier run loaded (`--reuse-db`).
    pub reused: bool,
    pub loaded: Option<Loaded>,
    pub reads: Vec<Read>,
    pub sql_floor: Vec<(String, Summary)>,
    pub explain: Vec<Plan>,
    pub page_weight: Option<PageWeight>,
    pub live: Option<Latency>,
    pub db_load: Option<DbLoad>,
    pub writes: Option<Writes>,
    /// Issue 11's load: many live clients and a steady page rate.
    pub crowd: Option<crate::crowd::Crowd>,
    /// Issue 11's soak: fleet, dashboard and operators together, then the record checked.
    pub soak: Option<crate::soak::Soak>,
    pub total_secs: f64,
}

impl Results {
    pub fn new(args: &Args) -> Results {
        Results {
            command: std::env::args().collect::<Vec<_>>().join(" "),
            commit: git_commit(),
            scale: args.scale,
            started_at: chrono::Utc::now(),
            clients: args.clients,
            load_secs: 0.0,
            rollup_backfill_secs: 0.0,
            reused: false,
            loaded: None,
            reads: Vec::new(),
            sql_floor: Vec::new(),
            explain: Vec::new(),
            page_weight: None,
            live: None,
            db_load: None,
            writes: None,
            crowd: None,
            soak: None,
            total_secs: 0.0,
        }
    }

    pub fn finish(&mut self) {
        self.total_secs = (chrono::Utc::now() - self.started_at).num_milliseconds() as f64 / 1000.0;
    }

    fn read(&self, name: &str) -> Option<&Summary> {
        self.reads.iter().find(|r| r.name == name).map(|r| &r.summary)
    }

    fn floor(&self, name: &str) -> Option<&Summary> {
        self.sql_floor.iter().find(|(n, _)| n == name).map(|(_, s)| s)
    }

    /// The worst p95 among reads whose name starts with one of `prefixes`.
    fn worst_p95(&self, prefixes: &[&str]) -> Option<f64> {
        self.reads
            .iter()
            .filter(|r| prefixes.iter().any(|p| r.name.starts_with(p)))
            .map(|r| r.summary.p95_ms)
            .reduce(f64::max)
    }

    /// The keys of issue 9 (null when not measured), then details.
    pub fn json(&self) -> Value {
        let mut m = Map::new();
        let num = |v: Option<f64>| {
            v.filter(|x| x.is_finite()).map(|x| json!((x * 1000.0).round() / 1000.0)).unwrap_or(Value::Null)
        };
        let failures = self.read("failures_page");
        m.insert("failures_page_p50_ms".into(), num(failures.map(|s| s.p50_ms)));
        m.insert("failures_page_p95_ms".into(), num(failures.map(|s| s.p95_ms)));
        let floor = self.floor("failures_default");
        let ratio = |read: Option<&Summary>| match (read, floor) {
            (Some(r), Some(f)) if f.p50_ms > 0.0 => Some(r.p50_ms / f.p50_ms),
            _ => None,
        };
        m.insert("failures_page_vs_sql".into(), num(ratio(failures)));
        m.insert("failures_api_vs_sql".into(), num(ratio(self.read("runs_api_failures"))));
        // The same page rendered for each request (a hard reload, or the first to ask at a
        // data version); the figures above are the page as served, shared at one version.
        let render = self.read("failures_page_render");
        m.insert("failures_page_render_p50_ms".into(), num(render.map(|s| s.p50_ms)));
        m.insert("failures_page_render_p95_ms".into(), num(render.map(|s| s.p95_ms)));
        m.insert("failures_page_render_vs_sql".into(), num(ratio(render)));
        m.insert(
            "failures_worst_p95_ms".into(),
            num(self.worst_p95(&["failures_page", "runs_api_", "facets_api"])),
        );
        m.insert("timeline_p95_ms".into(), num(self.worst_p95(&["timeline_"])));
        m.insert("overview_p95_ms".into(), num(self.worst_p95(&["overview_"])));
        m.insert("task_page_p95_ms".into(), num(self.worst_p95(&["task_"])));
        m.insert("workers_page_p95_ms".into(), num(self.worst_p95(&["workers_"])));
        m.insert("leases_p95_ms".into(), num(self.worst_p95(&["leases_"])));
        m.insert(
            "leases_compute_ms".into(),
            num(self
                .reads
                .iter()
                .filter(|r| r.name.starts_with("leases_"))
                .map(|r| r.first_ms)
                .reduce(f64::max)),
        );
        m.insert("live_latency_p50_ms".into(), num(self.live.as_ref().map(|l| l.summary.p50_ms)));
        m.insert("live_latency_p95_ms".into(), num(self.live.as_ref().map(|l| l.summary.p95_ms)));
        m.insert("db_load_ratio_200_vs_1".into(), num(self.db_load.as_ref().map(|d| d.ratio)));
        m.insert(
            "db_load_ratio_200_vs_1_active_sessions".into(),
            num(self.db_load.as_ref().map(|d| d.ratio_active_sessions)),
        );
        m.insert(
            "db_load_active_sessions_resolved".into(),
            json!(self.db_load.as_ref().map(|d| d.active_sessions_resolved)),
        );
        m.insert("db_load_saturated".into(), json!(self.db_load.as_ref().map(|d| d.saturated)));
        m.insert(
            "db_load_ratio_200_vs_1_server_counter".into(),
            num(self.db_load.as_ref().and_then(|d| d.ratio_server_counter)),
        );
        m.insert("runner_write_ratio".into(), num(self.writes.as_ref().map(Writes::headline_ratio)));
        m.insert("runner_write_ratio_phases".into(), num(self.writes.as_ref().map(|w| w.ratio)));
        m.insert("runner_write_ratio_paired".into(), num(self.writes.as_ref().map(|w| w.paired_ratio)));
        m.insert(
            "runner_write_ratio_paired_triggers_only".into(),
            num(self.writes.as_ref().map(|w| w.paired_triggers_only_ratio)),
        );
        m.insert(
            "runner_write_ratio_triggers_only".into(),
            num(self.writes.as_ref().map(|w| w.triggers_only_ratio)),
        );
        m.insert(
            "runner_write_ratio_interleaved".into(),
            num(self.writes.as_ref().map(|w| w.interleaved_ratio)),
        );
        m.insert(
            "page_weight_gz_kb".into(),
            num(self.page_weight.as_ref().map(|p| p.total_bytes as f64 / 1024.0)),
        );
        let heaviest = self.page_weight.as_ref().and_then(|p| p.heaviest());
        m.insert("page_weight_max_kb".into(), num(heaviest.map(|v| v.bytes as f64 / 1024.0)));
        m.insert("page_weight_max_page".into(), json!(heaviest.map(|v| &v.page)));
        m.insert("rss_200_clients_mb".into(), num(self.db_load.as_ref().and_then(|d| d.rss_clients_mb)));
        m.insert("rows_runs".into(), json!(self.loaded.as_ref().map(|l| l.rows_runs)));
        m.insert("rows_tasks".into(), json!(self.loaded.as_ref().map(|l| l.rows_tasks)));
        m.insert("rows_effects".into(), json!(self.loaded.as_ref().map(|l| l.rows_effects)));
        m.insert(
            "timeline_page_html_kb".into(),
            num(self.page_weight.as_ref().map(|p| p.timeline_html_bytes as f64 / 1024.0)),
        );
        m.insert(
            "seq_scans_on_runs".into(),
            json!(self.explain.iter().filter(|p| p.seq_scan_on_runs).map(|p| &p.name).collect::<Vec<_>>()),
        );
        m.insert("scale".into(), json!(self.scale));
        m.insert("simulated_clients".into(), json!(self.clients));
        m.insert("load_secs".into(), num(Some(self.load_secs)));
        m.insert("rollup_backfill_secs".into(), num(Some(self.rollup_backfill_secs)));
        m.insert("reused_database".into(), json!(self.reused));
        m.insert("total_secs".into(), num(Some(self.total_secs)));
        m.insert("date".into(), json!(self.started_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)));
        m.insert("git_commit".into(), json!(self.commit));
        m.insert("machine".into(), json!(machine()));
        m.insert("command".into(), json!(self.command));
        m.insert("reads".into(), json!(self.reads));
        m.insert("sql_floor".into(), json!(self.sql_floor));
        m.insert("explain".into(), json!(self.explain.iter().map(|p| json!({"name": p.name, "seq_scan_on_runs": p.seq_scan_on_runs, "execution_ms": p.execution_ms})).collect::<Vec<_>>()));
        m.insert("page_weight".into(), json!(self.page_weight));
        m.insert("live_latency".into(), json!(self.live));
        m.insert("db_load".into(), json!(self.db_load));
        m.insert("writes".into(), json!(self.writes));
        m.insert("crowd".into(), json!(self.crowd));
        m.insert("soak".into(), json!(self.soak));
        m.insert("loaded".into(), json!(self.loaded));
        Value::Object(m)
    }
}

#[derive(serde::Serialize)]
struct Machine {
    nproc: usize,
    ram_gb: f64,
    cpu: String,
    postgres: String,
}

fn machine() -> Machine {
    let nproc = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let ram_kb: f64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let postgres = std::process::Command::new("psql")
        .args(["--version"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    Machine { nproc, ram_gb: (ram_kb / 1024.0 / 1024.0 * 10.0).round() / 10.0, cpu, postgres }
}

fn git_commit() -> String {
    let run = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = run(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = run(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    if dirty {
        format!("{commit} (with uncommitted changes)")
    } else {
        commit
    }
}

/// Each headline figure: (results.json key, label, target text, does it meet it).
fn headlines(v: &Value) -> Vec<(&'static str, &'static str, &'static str, Option<bool>)> {
    let f = |k: &str| v.get(k).and_then(Value::as_f64);
    let le = |k: &str, t: f64| f(k).map(|x| x <= t);
    let ge = |k: &str, t: f64| f(k).map(|x| x >= t);
    vec![
        ("failures_page_p50_ms", "Failures page (HTML, as first opened), p50", "—", None),
        (
            "failures_page_p95_ms",
            "Failures page (HTML, as first opened), p95",
            "≤ 25 ms",
            le("failures_page_p95_ms", 25.0),
        ),
        (
            "failures_worst_p95_ms",
            "Failures, worst p95 of page/API/facets, any cause filter",
            "≤ 25 ms",
            le("failures_worst_p95_ms", 25.0),
        ),
        (
            "failures_page_vs_sql",
            "Failures page p50 ÷ raw list query p50",
            "≤ 1.5",
            le("failures_page_vs_sql", 1.5),
        ),
        (
            "failures_api_vs_sql",
            "Failures API p50 ÷ raw list query p50",
            "≤ 1.5",
            le("failures_api_vs_sql", 1.5),
        ),
        (
            "failures_page_render_p95_ms",
            "Failures page rendered for its request (hard reload), p95",
            "—",
            None,
        ),
        (
            "failures_page_render_vs_sql",
            "Failures page rendered for its request, p50 ÷ raw list query p50",
            "—",
            None,
        ),
        ("timeline_p95_ms", "Timeline, 15 min (page and API), p95", "≤ 50 ms", le("timeline_p95_ms", 50.0)),
        ("timeline_page_html_kb", "Timeline page HTML, 15 min (KB, uncompressed)", "no full outputs", None),
        (
            "overview_p95_ms",
            "Overview (page, API 1h/6h/24h/7d), worst p95",
            "≤ 100 ms",
            le("overview_p95_ms", 100.0),
        ),
        (
            "task_page_p95_ms",
            "Task with 50 runs (page and API), p95",
            "≤ 20 ms",
            le("task_page_p95_ms", 20.0),
        ),
        ("workers_page_p95_ms", "Workers (page, API 24h), p95", "≤ 50 ms", le("workers_page_p95_ms", 50.0)),
        (
            "leases_p95_ms",
            "Leases (page, API 24h, 1h of one kind; shared 30 s), p95",
            "≤ 50 ms",
            le("leases_p95_ms", 50.0),
        ),
        (
            "leases_compute_ms",
            "Leases, one computation of a day's figures (a cold question's first request; once per 30 s per question, in the background)",
            "—",
            None,
        ),
        ("live_latency_p50_ms", "Live latency (run committed → SSE event), p50", "—", None),
        ("live_latency_p95_ms", "Live latency, p95", "≤ 250 ms", le("live_latency_p95_ms", 250.0)),
        (
            "db_load_ratio_200_vs_1",
            "Database load, 200 live clients ÷ 1 (committed statements/s)",
            "≤ 1.2",
            // Fewer statements complete on a saturated server: then the ratio cannot be judged.
            if v.get("db_load_saturated").and_then(Value::as_bool) == Some(true) {
                None
            } else {
                le("db_load_ratio_200_vs_1", 1.2)
            },
        ),
        (
            "db_load_ratio_200_vs_1_active_sessions",
            "Database load, 200 live clients ÷ 1 (average active sessions; judged when one client's phases were busy in enough samples to count)",
            "≤ 1.2",
            if v.get("db_load_active_sessions_resolved").and_then(Value::as_bool) == Some(false) {
                None
            } else {
                le("db_load_ratio_200_vs_1_active_sessions", 1.2)
            },
        ),
        (
            "runner_write_ratio",
            "Runner write throughput, with lastword ÷ without",
            "≥ 0.95",
            ge("runner_write_ratio", 0.95),
        ),
        (
            "runner_write_ratio_phases",
            "Runner write throughput, with ÷ without, medians of the alternating phases (diagnostic)",
            "—",
            None,
        ),
        (
            "runner_write_ratio_triggers_only",
            "Runner write throughput, triggers without a server ÷ without (diagnostic)",
            "—",
            None,
        ),
        (
            "runner_write_ratio_paired",
            "Runner write throughput, with ÷ without, paired per alternation (diagnostic)",
            "—",
            None,
        ),
        (
            "runner_write_ratio_interleaved",
            "Runner write throughput, triggers switched every 2 s within one run ÷ without (diagnostic)",
            "—",
            None,
        ),
        (
            "page_weight_gz_kb",
            "First-visit page weight, the overview (wasm + js + css, compressed)",
            "≤ 350 KB",
            le("page_weight_gz_kb", 350.0),
        ),
        (
            "page_weight_max_kb",
            "First-visit page weight, the heaviest page (`page_weight_max_page`)",
            "≤ 350 KB",
            le("page_weight_max_kb", 350.0),
        ),
        (
            "rss_200_clients_mb",
            "Server RSS with 200 live clients (MB)",
            "≤ 150 MB",
            le("rss_200_clients_mb", 150.0),
        ),
        ("rows_runs", "rows: runs", "10 M at scale 1", None),
        ("rows_tasks", "rows: tasks", "2 M at scale 1", None),
    ]
}

fn fmt_num(v: Option<&Value>) -> String {
    match v {
        Some(Value::Number(n)) => match n.as_f64() {
            Some(x) if n.is_f64() => {
                if x.abs() >= 100.0 {
                    format!("{x:.0}")
                } else if x.abs() >= 10.0 {
                    format!("{x:.1}")
                } else {
                    format!("{x:.2}")
                }
            }
            _ => n.to_string(),
        },
        Some(Value::Null) | None => "not measured".into(),
        Some(other) => other.to_string(),
    }
}

pub fn markdown(r: &Results, v: &Value) -> String {
    let mut s = String::new();
    let m = machine();
    let _ = writeln!(s, "# Benchmarks\n");
    let _ = writeln!(
        s,
        "Produced by `scripts/bench` (the `lastword-bench` crate, `bench/`): a production-shaped data set \
         loaded into a fresh PostgreSQL database, the real `lastword` server (the `--server-bin` of \
         the command below, started with the `LEPTOS_*` variables) measured over HTTP while a live write load of the runner library runs (issue 9). \
         Benchmarks report figures; nothing here is asserted.\n"
    );
    let _ = writeln!(s, "| | |\n|---|---|");
    let _ = writeln!(s, "| date | {} |", r.started_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    let _ = writeln!(
        s,
        "| machine | {} cores ({}), {} GB RAM; {} on the same machine |",
        m.nproc, m.cpu, m.ram_gb, m.postgres
    );
    let loaded = if r.reused {
        format!("a kept database (--reuse-db), loaded in {:.0} s by an earlier run", r.load_secs)
    } else {
        format!(
            "loaded in {:.0} s; the server's rollups counted it in {:.0} s",
            r.load_secs, r.rollup_backfill_secs
        )
    };
    let _ = writeln!(
        s,
        "| scale | {} ({} runs, {} tasks, {} effects; {loaded}) |",
        r.scale,
        fmt_num(v.get("rows_runs")),
        fmt_num(v.get("rows_tasks")),
        fmt_num(v.get("rows_effects"))
    );
    let _ = writeln!(s, "| git commit | {} |", r.commit);
    let _ = writeln!(s, "| command | `{}` |", r.command);
    let _ = writeln!(s, "| total time | {:.0} s |\n", r.total_secs);

    let _ = writeln!(s, "## Figures and targets\n");
    let _ = writeln!(s, "| figure | `results.json` key | measured | target | met |\n|---|---|---|---|---|");
    for (key, label, target, met) in headlines(v) {
        let met = match met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "",
        };
        let _ = writeln!(s, "| {label} | `{key}` | {} | {target} | {met} |", fmt_num(v.get(key)));
    }

    let _ = writeln!(s, "\n## Hot reads through the server (ms)\n");
    let _ = writeln!(s, "| read | path | n | min | p50 | p95 | body KB |\n|---|---|---|---|---|---|---|");
    for read in &r.reads {
        let x = &read.summary;
        let enc = read.encoding.as_deref().map(|e| format!(" ({e})")).unwrap_or_default();
        let _ = writeln!(
            s,
            "| {} | `{}` | {} | {:.2} | {:.2} | {:.2} | {:.1}{enc} |",
            read.name,
            read.path,
            x.n,
            x.min_ms,
            x.p50_ms,
            x.p95_ms,
            read.bytes as f64 / 1024.0
        );
    }
    let _ = writeln!(
        s,
        "\nA read that is slow stops after its time budget, so n can be smaller than requested.\n"
    );

    let _ = writeln!(
        s,
        "## The same list answers as raw SQL (the floor, ms)\n\nThe store's own statements \
         (`lastword_store::explain`), run directly on the database: what the server adds is the \
         HTTP read's time above these.\n"
    );
    let _ = writeln!(s, "| query | n | min | p50 | p95 |\n|---|---|---|---|---|");
    for (name, x) in &r.sql_floor {
        let _ = writeln!(s, "| {name} | {} | {:.2} | {:.2} | {:.2} |", x.n, x.min_ms, x.p50_ms, x.p95_ms);
    }

    let _ = writeln!(
        s,
        "\n## Query plans (`EXPLAIN (ANALYZE, BUFFERS)`, full text in `explain.txt`)\n\nEvery \
         statement the store runs for a hot read, as it runs it (`lastword_store::explain::hot_reads`): \
         counts read the rollups, with raw runs only for the window's uncovered edges.\n"
    );
    let _ = writeln!(s, "| query | execution ms | Seq Scan on runs |\n|---|---|---|");
    for p in &r.explain {
        let _ = writeln!(
            s,
            "| {} | {} | {} |",
            p.name,
            p.execution_ms.map(|x| format!("{x:.1}")).unwrap_or_default(),
            if p.seq_scan_on_runs { "**yes**" } else { "no" }
        );
    }

    if let Some(live) = &r.live {
        let _ = writeln!(s, "\n## Live latency\n");
        let _ = writeln!(
            s,
            "{} samples: {} (events not received within 10 s: {})",
            live.summary.n, live.summary, live.missed
        );
    }

    if let Some(d) = &r.db_load {
        let _ = writeln!(s, "\n## Database load of open dashboards\n");
        let _ = writeln!(
            s,
            "Simulated tabs refetch through {:?} at each `refresh` event that follows changes (the server sends one at most once a second), as the pages do. \
             \"dashboard xact/s\" = bench database commits/s minus the live fleet's own. Server counter: {}.\n",
            d.calls,
            d.server_counter.as_deref().unwrap_or("none exported")
        );
        if d.saturated {
            let _ = writeln!(
                s,
                "**Saturated:** with {} tabs the server answered far fewer refetches than the tabs asked \
                 for, so fewer statements completed; the committed-statement ratio understates the load. \
                 Average active sessions (the database time the dashboard takes) is the figure to read.\n",
                r.clients
            );
        }
        if !d.active_sessions_resolved {
            let _ = writeln!(
                s,
                "Active sessions (sampled every {} ms) are too few with one tab to divide (under {} \
                 statements seen running in its phases): the dashboard's database time is below what sampling resolves, \
                 and `db_load_ratio_200_vs_1_active_sessions` is not judged.\n",
                crate::watchers::ACTIVE_SAMPLE_EVERY.as_millis(),
                crate::watchers::MIN_BUSY_SAMPLES
            );
        }
        let _ = writeln!(s, "| page | tabs | dashboard xact/s | all xact/s | active sessions | statements seen running | server counter/s | refetches/s | refetch p50 / p95 ms | server RSS MB |\n|---|---|---|---|---|---|---|---|---|---|");
        for p in &d.phases {
            let _ = writeln!(
                s,
                "| {:?} | {} | {:.1} | {:.1} | {:.3} | {} | {} | {:.1} | {:.1} / {:.1} | {} |",
                p.page,
                p.clients,
                p.dashboard_xact_per_s,
                p.xact_per_s,
                p.active_sessions,
                p.busy_samples,
                p.server_counter_per_s.map(|x| format!("{x:.1}")).unwrap_or_else(|| "—".into()),
                p.refetches_per_s,
                p.refetch.p50_ms,
                p.refetch.p95_ms,
                p.rss_max_mb.map(|x| format!("{x:.0}")).unwrap_or_default()
            );
        }
    }

    if let Some(c) = &r.crowd {
        let mb = |m: Option<f64>| m.map(|m| format!("{m:.0}")).unwrap_or_else(|| "—".into());
        let _ = writeln!(s, "\n## The crowd: live clients and a steady page rate, the fleet writing\n");
        let _ = writeln!(
            s,
            "{} event streams open throughout and {} page or API requests per second (the pages an \
             operator opens, in turn) for {:.0} s.\n\n\
             | requests | errors | streams dropped | events received | latency | server RSS MB: after warm-up → end (growth) → 3 s later |\n|---|---|---|---|---|---|\n\
             | {} | {} | {} | {} | {} | {} → {} ({}) → {} |\n\n\
             Server RSS every {} s while the crowd was on (MB): {}; growth over the second half: {}. \
             Heap allocated at the same moments (MB, jemalloc's count from `/metrics`): {}.",
            c.clients,
            c.rps,
            c.secs,
            c.requests,
            c.errors,
            c.streams_dropped,
            c.events,
            c.latency,
            mb(c.rss_start_mb),
            mb(c.rss_end_mb),
            c.rss_growth_pct().map(|g| format!("{g:+.1} %")).unwrap_or_else(|| "—".into()),
            mb(c.rss_after_mb),
            crate::crowd::RSS_EVERY.as_secs(),
            c.rss_series_mb.iter().map(|m| format!("{m:.0}")).collect::<Vec<_>>().join(", "),
            c.rss_second_half_growth_pct().map(|g| format!("{g:+.1} %")).unwrap_or_else(|| "—".into()),
            if c.heap_series_mb.is_empty() {
                "not reported".to_string()
            } else {
                c.heap_series_mb.iter().map(|m| format!("{m:.0}")).collect::<Vec<_>>().join(", ")
            }
        );
    }

    if let Some(k) = &r.soak {
        let _ = writeln!(s, "\n## The soak: fleet, dashboard and operators together\n");
        let _ = writeln!(
            s,
            "{} scripted operators for {:.0} s beside the live fleet ({}): {} action requests, {} applied \
             ({} re-queues fencing a live lease, {} by bulk re-queue), {} refused (409, audited).\n\n\
             | check | violations |\n|---|---|\n\
             | applied actions missing from the audit | {} |\n\
             | audited applied actions nobody was answered for | {} |\n\
             | tasks in two states | {} |\n\
             | completions accepted from a fenced epoch | {} |\n\
             | live events lost (of {} committed) | {} |\n\
             | stream resets | {} |",
            k.operators,
            k.secs,
            k.fleet,
            k.attempts,
            k.applied,
            k.fenced,
            k.bulk_applied,
            k.refused,
            k.applied_not_audited,
            k.audited_not_answered,
            k.tasks_in_two_states,
            k.fenced_completions_accepted,
            k.events_expected,
            k.events_lost,
            k.stream_resets
        );
    }

    if let Some(w) = &r.writes {
        let _ = writeln!(
            s,
            "\n## Runner write throughput ({} clients, {} leased tasks)\n",
            w.clients, w.leased_tasks
        );
        let _ = writeln!(s, "{WRITES_METHOD}\n");
        let _ = writeln!(
            s,
            "| loop | installed tx/s | triggers only tx/s | without tx/s | installed ÷ without | triggers only ÷ without |\n|---|---|---|---|---|---|"
        );
        for ((lp, with, without, ratio), (_, t, tr)) in w.loops.iter().zip(&w.triggers_only) {
            let _ = writeln!(s, "| {lp:?} | {with:.0} | {t:.0} | {without:.0} | {ratio:.3} | {tr:.3} |");
        }
        let _ =
            writeln!(s, "| overall (geometric mean) | | | | {:.3} | {:.3} |", w.ratio, w.triggers_only_ratio);
        let _ = writeln!(
            s,
            "\nThe same ratios paired: each alternation's installed (or triggers-only) rate ÷ its own \
             without rate, the median over the alternations (drift between alternations cancels).\n\n\
             | loop | installed ÷ without | triggers only ÷ without |\n|---|---|---|"
        );
        for (lp, installed, triggers) in &w.paired {
            let _ = writeln!(s, "| {lp:?} | {installed:.3} | {triggers:.3} |");
        }
        let _ = writeln!(
            s,
            "| overall (geometric mean) | {:.3} | {:.3} |",
            w.paired_ratio, w.paired_triggers_only_ratio
        );
        if !w.interleaved.is_empty() {
            let _ = writeln!(
                s,
                "\nThe triggers alone, switched off and on every 2 s within one run of each loop (no \
                 server): each slice with triggers ÷ the geometric mean of the slices without just \
                 before and after it, the median over the run (drift cancels within seconds).\n\n\
                 | loop | slices compared | triggers ÷ without |\n|---|---|---|"
            );
            for (lp, n, r) in &w.interleaved {
                let _ = writeln!(s, "| {lp:?} | {n} | {r:.3} |");
            }
            let _ = writeln!(s, "| overall (geometric mean) | | {:.3} |", w.interleaved_ratio);
        }
        if !w.interleaved_installed.is_empty() {
            let _ = writeln!(
                s,
                "\nInstalled, switched every 2 s within one run of each loop: the triggers on and the \
                 server resumed, then the triggers off and the server paused (`SIGSTOP`), each slice \
                 installed ÷ the geometric mean of the slices without just before and after it, the \
                 median over the run. This is `runner_write_ratio`.\n\n\
                 | loop | slices compared | installed ÷ without | the server's cores in its slices (median) |\n|---|---|---|---|"
            );
            for (lp, n, r) in &w.interleaved_installed {
                let cores = w.median_server_cores(*lp);
                let _ = writeln!(
                    s,
                    "| {lp:?} | {n} | {r:.3} | {} |",
                    cores.map_or("—".into(), |c| format!("{c:.3}"))
                );
            }
            let _ = writeln!(s, "| overall (geometric mean) | | {:.3} | |", w.interleaved_installed_ratio);
        }
        let _ = writeln!(
            s,
            "\nEach phase, with where the machine's cores went meanwhile (bench/src/cpu.rs: 1.0 is one \
             core busy for the whole phase; `bench` is the runner's clients and the event-stream reader):\n\n\
             | # | mode | loop | tx/s | cores busy | server | postgres | bench |\n|---|---|---|---|---|---|---|---|"
        );
        for x in &w.samples {
            let cores = x.cpu.map_or_else(
                || "| | | | |".to_string(),
                |c| format!("{:.2} | {:.2} | {:.2} | {:.2} |", c.machine, c.server, c.postgres, c.bench),
            );
            let _ =
                writeln!(s, "| {} | {:?} | {:?} | {:.0} | {cores}", x.alternation, x.mode, x.lp, x.tx_per_s);
        }
    }

    if let Some(p) = &r.page_weight {
        let _ = writeln!(
            s,
            "\n## First-visit page weight (`Accept-Encoding: {}`)\n",
            crate::http::BROWSER_ENCODINGS
        );
        let _ = writeln!(s, "| file | KB on the wire | encoding |\n|---|---|---|");
        for (f, b, e) in &p.files {
            let _ =
                writeln!(s, "| `{f}` | {:.1} | {} |", *b as f64 / 1024.0, e.as_deref().unwrap_or("identity"));
        }
        let _ = writeln!(
            s,
            "| total | {:.1} (uncompressed {:.1}) | |",
            p.total_bytes as f64 / 1024.0,
            p.uncompressed_bytes as f64 / 1024.0
        );
        let _ = writeln!(
            s,
            "\nEvery page's first visit (the bundle is split per page: the shell, and the page's \
             wasm chunks it names as preloads, packed into one file by the server):\n\n| page | files | KB on the wire | uncompressed KB |\n|---|---|---|---|"
        );
        for v in &p.pages {
            let _ = writeln!(
                s,
                "| `{}` | {} | {:.1} | {:.1} |",
                v.page,
                v.files,
                v.bytes as f64 / 1024.0,
                v.uncompressed_bytes as f64 / 1024.0
            );
        }
        let _ = writeln!(
            s,
            "\nWhat each step that shrank the bundle saved, where the rest goes, and what would reach \
             the target: docs/bundle-size.md."
        );
    }

    if let Some(section) = browser_section(std::path::Path::new(TIMELINE_BROWSER_FIGURES)) {
        s.push_str(&section);
    }

    if let Some(l) = &r.loaded {
        let _ = writeln!(s, "\n## The data set\n");
        let _ = writeln!(
            s,
            "Runs per state (as the dashboard decides it at load time):\n\n| state | runs |\n|---|---|"
        );
        for (state, n) in &l.states {
            let _ = writeln!(s, "| {state} | {n} |");
        }
        let _ = writeln!(
            s,
            "\nTasks with effects under two or more epochs (double executions): {}.",
            l.double_executions
        );
    }
    s
}

/// The timeline's figures in a real browser, recorded by the end2end suite
/// (`E2E_WRITE_FIGURES=1 npx playwright test tests/timeline.spec.ts` in `end2end/`): rendering
/// is measured in Chromium, not by this crate, so the report quotes the last recording.
const TIMELINE_BROWSER_FIGURES: &str = "bench/timeline-browser.json";

/// The "timeline in Chromium" section from a recording, if there is one.
fn browser_section(path: &std::path::Path) -> Option<String> {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    let n = |k: &str| fmt_num(v.get(k));
    let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
    let mut s = String::new();
    let _ = writeln!(s, "\n## The timeline in Chromium (`{TIMELINE_BROWSER_FIGURES}`)\n");
    let _ = writeln!(
        s,
        "Recorded by `E2E_WRITE_FIGURES=1 npx playwright test tests/timeline.spec.ts` (in `end2end/`) \
         on {}, {} wasm (`cargo leptos build`, `--release` for a release wasm, with `LASTWORD_BIN` naming \
         `target/release/lastword`), against a constructed history of {} runs by {} workers in the last {} \
         minutes (`end2end/fixtures/timeline-scale.sql`).\n",
        text("date"),
        text("wasm"),
        n("runs"),
        n("workers"),
        n("window_minutes")
    );
    let _ = writeln!(s, "| figure | value |\n|---|---|");
    for (label, key) in [
        ("first view (40 lanes) hydrated, ms", "first_view_hydrated_ms"),
        ("its bars / density cells", "first_view_bars"),
        ("all lanes listed, ms", "all_lanes_ms"),
        ("lanes with marks drawn (on screen, with a margin)", "lanes_with_marks_at_top"),
        ("frames in 3 s with the clock moving the picture", "frames_in_3s"),
        ("frame time p95, ms", "frame_p95_ms"),
        ("worst frame, ms", "frame_worst_ms"),
        ("frames in 4 s while 10 live batches (50 runs) are merged in", "frames_in_4s_merging"),
        ("frame time p95 while merging, ms", "merge_frame_p95_ms"),
        ("worst frame while merging, ms", "merge_frame_worst_ms"),
        ("frames over 50 ms while merging", "merge_frames_over_50ms"),
    ] {
        let value = if key == "first_view_bars" {
            format!("{} / {}", n("first_view_bars"), n("first_view_cells"))
        } else {
            n(key)
        };
        let _ = writeln!(s, "| {label} | {value} |");
    }
    Some(s)
}

pub fn write(args: &Args, r: &Results) -> anyhow::Result<()> {
    let (md, json_path, explain_path) = args.out_paths();
    for p in [&md, &json_path, &explain_path] {
        if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
    }
    let v = r.json();
    std::fs::write(&json_path, serde_json::to_string_pretty(&v)? + "\n")?;
    std::fs::write(&md, markdown(r, &v))?;
    let mut plans = String::new();
    for p in &r.explain {
        let _ = writeln!(
            plans,
            "==== {}{}\n{}",
            p.name,
            if p.seq_scan_on_runs { "   ** Seq Scan on runs **" } else { "" },
            p.text
        );
    }
    std::fs::write(&explain_path, plans)?;
    println!("wrote {}, {}, {}", md.display(), json_path.display(), explain_path.display());
    Ok(())
}

/// How the runner write figures were taken, said beside them (bench/src/writes.rs).
const WRITES_METHOD: &str =
    "The runner's own statements in three loops, timed in alternating phases (installed: \
triggers and a running server with an open event stream; triggers only; without: user triggers \
disabled, no server). Every phase starts from the same state: right after a `CHECKPOINT`, a \
claim phase with the tasks earlier claim phases took back in the queue and after `VACUUM tasks`, \
a finish phase with leases for its whole time. A loop's rate \
per mode is its median over the alternations (nearest rank). Phases minutes apart also differ by \
whatever else the machine did meanwhile, often by more than lastword costs, so `runner_write_ratio` \
is taken from the interleaved runs below (modes switched every 2 s within one run), and the \
phases' ratio is kept as `runner_write_ratio_phases`.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_browser_recording_becomes_a_section_and_its_absence_none() {
        let dir = std::env::temp_dir().join(format!("lastword-bench-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("timeline-browser.json");
        assert_eq!(browser_section(&path), None, "no recording, no section");
        std::fs::write(
            &path,
            r#"{"date":"2026-12-03T07:30:00Z","wasm":"debug","window_minutes":15,"runs":5003,"workers":203,
               "first_view_hydrated_ms":2551,"first_view_bars":413,"first_view_cells":162,"all_lanes_ms":726,
               "lanes_with_marks_at_top":23,"frames_in_3s":182,"frame_p95_ms":16.7,"frame_worst_ms":16.8}"#,
        )
        .unwrap();
        let s = browser_section(&path).unwrap();
        assert!(s.contains("| frame time p95, ms | 16.7 |"), "{s}");
        assert!(s.contains("| its bars / density cells | 413 / 162 |"), "{s}");
        assert!(s.contains("5003 runs by 203 workers"), "{s}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
