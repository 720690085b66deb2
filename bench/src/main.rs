//! `lastword-bench`: the production-scale benchmark of issue 9, end to end.
//!
//! One command loads a production-shaped data set into a fresh PostgreSQL database, starts the
//! real `lastword` server on it, runs a live write load with the real runner library, measures
//! the hot reads, live latency, the database load of many open dashboards and the runner's write
//! throughput with and without lastword, and writes `BENCHMARKS.md` and `results.json`.
//! `main` only wires the steps together; each step lives in its own module.

mod cli;
mod cpu;
mod crowd;
mod db;
mod explain;
mod fleet;
mod http;
mod live;
mod load;
mod report;
mod server;
mod soak;
mod stats;
mod watchers;
mod writes;

use anyhow::Context;
use clap::Parser;
use std::time::Instant;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = cli::Args::parse();
    args.validate()?;
    let started = Instant::now();
    let bench_db = match &args.reuse_db {
        Some(name) => db::BenchDb::existing(&args.admin_url, name)?,
        None => db::BenchDb::create(&args.admin_url).await.context("creating the bench database")?,
    };
    println!("database: {}", bench_db.name);
    if args.explain_only {
        let like_store = db::connect_like_store(&bench_db.url).await?;
        let loaded = load::described(&like_store, &bench_db.name)
            .await
            .context("reading the kept data set's description")?;
        let plans = explain::explain_hot_queries(&like_store, &loaded, true).await?;
        let seq: Vec<&str> = plans.iter().filter(|p| p.seq_scan_on_runs).map(|p| p.name.as_str()).collect();
        println!(
            "sequential scans of runs: {}",
            if seq.is_empty() { "none".to_string() } else { seq.join(", ") }
        );
        return Ok(());
    }
    let outcome = run(&args, &bench_db).await;
    if args.keep || args.reuse_db.is_some() {
        println!("kept database {}", bench_db.name);
    } else if let Err(e) = bench_db.drop().await {
        eprintln!("warning: could not drop {}: {e:#}", bench_db.name);
    }
    let results = outcome?;
    report::write(&args, &results).context("writing the report")?;
    println!("done in {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Every step after the database exists; the caller drops the database whatever happens here.
async fn run(args: &cli::Args, bench_db: &db::BenchDb) -> anyhow::Result<report::Results> {
    let mut results = report::Results::new(args);
    let started = Instant::now();
    db::migrate(&args.server_bin, &bench_db.url).await.context("lastword migrate")?;
    let pool = db::connect(&bench_db.url, 6).await?;
    let loaded = if args.reuse_db.is_some() {
        load::described(&pool, &bench_db.name).await.context("reading the kept data set's description")?
    } else {
        let mut loaded = load::load(&pool, &bench_db.url, args.scale, args.load_parallelism)
            .await
            .context("loading the data set")?;
        loaded.load_secs = started.elapsed().as_secs_f64();
        load::describe(&pool, &bench_db.name, &loaded).await?;
        loaded
    };
    results.scale = loaded.scale;
    results.load_secs = loaded.load_secs;
    results.reused = args.reuse_db.is_some();
    results.loaded = Some(loaded.clone());
    println!("loaded {} runs, {} tasks in {:.1} s", loaded.rows_runs, loaded.rows_tasks, results.load_secs);

    let mut server = server::Server::start(args, &bench_db.url).await.context("starting the server")?;
    results.rollup_backfill_secs = db::wait_for_rollups(&pool, std::time::Duration::from_secs(1800))
        .await
        .context("waiting for the server to count the loaded history")?;
    println!("rollups counted the loaded history in {:.1} s", results.rollup_backfill_secs);
    let http = http::Client::new(server.base_url())?;
    let fleet = fleet::Fleet::start(&bench_db.url, args.fleet_workers).await?;

    let measured = async {
        results.reads = http::measure_hot_reads(
            &http,
            &loaded,
            args.requests,
            std::time::Duration::from_secs(args.read_budget_secs),
        )
        .await?;
        let like_store = db::connect_like_store(&bench_db.url).await?;
        results.sql_floor = explain::measure_floor(&like_store, args.requests).await?;
        results.explain = explain::explain_hot_queries(&like_store, &loaded, false).await?;
        if !args.no_page_weight {
            results.page_weight = Some(http::page_weight(&http, loaded.task_50).await?);
        }
        results.live = Some(live::measure_latency(&http, &pool, &loaded, args.live_samples).await?);
        results.db_load = Some(
            watchers::measure_db_load(&http, &bench_db.name, &args.admin_url, &fleet, &server, args).await?,
        );
        if args.crowd_secs > 0 {
            let secs = std::time::Duration::from_secs(args.crowd_secs);
            results.crowd = Some(
                crowd::measure(
                    &http,
                    &server,
                    &loaded,
                    args.crowd_pages,
                    args.crowd_clients,
                    args.crowd_rps,
                    secs,
                )
                .await?,
            );
        }
        anyhow::Ok(())
    }
    .await;
    let fleet_report = fleet.stop().await;
    println!("live write load: {fleet_report}");
    measured?;

    if args.soak_secs > 0 {
        let secs = std::time::Duration::from_secs(args.soak_secs);
        results.soak = Some(
            soak::run(&http, &pool, &bench_db.url, args.fleet_workers, args.soak_operators, secs).await?,
        );
    }

    results.writes = Some(writes::measure(&pool, &bench_db.url, &mut server, &http, args).await?);
    server.stop().await;
    results.finish();
    Ok(results)
}
