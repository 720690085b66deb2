//! Runs the simulator fleet on its own, without the dashboard, and prints what it left in the
//! database — the same thing `lastword demo` does inside the server binary.
//!
//! ```sh
//! cargo run -p lastword-sim --example fleet -- --database-url sqlite:/tmp/demo.db --seed 1 --duration 30s
//! ```

use clap::Parser;
use lastword_core::{RunState, Tokens};
use lastword_store::{store_for, Db, DbTarget};
use std::collections::BTreeMap;

#[derive(Parser)]
struct Args {
    /// postgres://… or sqlite:path (created and migrated if needed).
    #[arg(long, env = "DATABASE_URL", default_value = "sqlite:lastword-demo.db")]
    database_url: String,
    #[command(flatten)]
    fleet: lastword_sim::FleetConfig,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();
    let db = Db::connect(&DbTarget::from_url(&args.database_url)?).await?;
    db.migrate().await?;
    let report = lastword_sim::run_fleet(db.clone(), args.fleet, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    println!("{report}");

    // What the dashboard will show, decided by the store's state function.
    let store = store_for(db.clone(), Tokens::default());
    let ids: Vec<i64> = match &db {
        Db::Postgres(p) => sqlx::query_scalar("SELECT id FROM tasks ORDER BY id").fetch_all(p).await?,
        Db::Sqlite(p) => sqlx::query_scalar("SELECT id FROM tasks ORDER BY id").fetch_all(p).await?,
    };
    let now = chrono::Utc::now();
    let mut states: BTreeMap<String, u64> = BTreeMap::new();
    let mut doubled = 0;
    for id in ids {
        for run in store.task_runs(id, now).await? {
            let key = match (run.state, run.cause) {
                (RunState::Failed, Some(cause)) => format!("failed/{cause}"),
                (state, _) => state.to_string(),
            };
            *states.entry(key).or_default() += 1;
        }
        let epochs: std::collections::BTreeSet<i64> =
            store.task_effects(id).await?.iter().map(|e| e.lease_epoch).collect();
        if epochs.len() >= 2 {
            doubled += 1;
        }
    }
    println!("runs by state: {states:?}");
    println!("tasks with effects under two or more epochs: {doubled}");
    Ok(())
}
