//! The hot reads as the store sends them to PostgreSQL (`lastword_store::explain`, built by the
//! store's own query functions): timed directly as the floor the server is compared with, and
//! their `EXPLAIN (ANALYZE, BUFFERS)` plans with any sequential scan of `runs` flagged.

use crate::load::Loaded;
use crate::stats::Summary;
use chrono::Utc;
use lastword_core::{RunState, Tokens};
use lastword_store::explain;
use sqlx::postgres::PgPool;
use std::time::Instant;

/// The failure states, comma-separated: what the Failures page lists when no state or cause is
/// chosen (`?state=` of the API).
pub fn failure_states() -> String {
    let states: Vec<&str> = RunState::failures().into_iter().map(|s| s.as_str()).collect();
    states.join(",")
}

/// Each run list's statement (the floor of the HTTP read of the same name) run `n` times (the first run plans it: a warm-up, not a sample).
pub async fn measure_floor(pool: &PgPool, n: usize) -> anyhow::Result<Vec<(String, Summary)>> {
    let mut out = Vec::new();
    for q in explain::run_lists(Utc::now(), &Tokens::default()) {
        let mut samples = Vec::with_capacity(n);
        for i in 0..n + 1 {
            let t = Instant::now();
            q.fetch_count(pool).await?;
            if i > 0 {
                samples.push(t.elapsed());
            }
        }
        let s = Summary::of(&samples);
        println!("sql  {:<34} {s}", q.name);
        out.push((q.name, s));
    }
    Ok(out)
}

/// A plan, and whether it reads `runs` sequentially.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Plan {
    pub name: String,
    pub seq_scan_on_runs: bool,
    pub execution_ms: Option<f64>,
    pub text: String,
}

/// Every hot read's statements, explained with the task page of the loaded 50-run task; each
/// statement's text printed before its plan when `with_sql`.
pub async fn explain_hot_queries(
    pool: &PgPool,
    loaded: &Loaded,
    with_sql: bool,
) -> anyhow::Result<Vec<Plan>> {
    let mut plans = Vec::new();
    for q in explain::hot_reads(loaded.task_50, Utc::now(), &Tokens::default()) {
        let text = q.explain(pool).await?;
        let seq_scan_on_runs = explain::scans_runs(&text);
        let execution_ms = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("Execution Time: "))
            .and_then(|v| v.trim_end_matches(" ms").parse().ok());
        println!(
            "explain {:<30} {:>10} ms{}",
            q.name,
            execution_ms.map(|v: f64| format!("{v:.1}")).unwrap_or_default(),
            if seq_scan_on_runs { "   ** Seq Scan on runs **" } else { "" }
        );
        if with_sql {
            println!("{}", indent(q.sql()));
        }
        println!("{}", indent(&text));
        plans.push(Plan { name: q.name, seq_scan_on_runs, execution_ms, text });
    }
    Ok(plans)
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n")
}
