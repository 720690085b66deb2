//! `lastword serve`: open the store, build the router, listen until SIGINT/SIGTERM.

use crate::cli::ServeArgs;
use crate::state::{leptos_options, AppState};
use anyhow::Context;
use lastword_core::Tokens;
use lastword_sim::FleetConfig;
use lastword_store::DbTarget;

pub async fn serve(
    target: DbTarget,
    tokens: Tokens,
    retry: lastword_core::RetryPolicy,
    args: ServeArgs,
) -> anyhow::Result<()> {
    // Before anything else: local mode must not be reachable from the network.
    crate::auth::config::check_local_addr(args.auth.mode, args.addr).map_err(anyhow::Error::msg)?;
    tracing::info!(database = %target.redacted(), "opening database");
    let store = lastword_store::open_with_policy(&target, tokens, retry.clone())
        .await
        .with_context(|| format!("opening {}", target.redacted()))?;
    let auth = args.auth.build(args.addr, store.db()).await.context("authentication")?;
    tracing::info!("auth: {}", auth.describe());
    let sweeper = auth.sessions.as_ref().map(|s| s.spawn_sweeper());
    let mut options = leptos_options();
    options.site_addr = args.addr;
    if let Err(problem) = crate::assets::check_bundle_is_split(&options) {
        tracing::error!("{problem}");
    }
    let mut state = AppState::with_auth(options, store.clone(), auth)
        .with_trace_links(args.trace_url_template.clone())
        .with_retry_policy(retry);
    if let Some(url) = &args.database_read_url {
        let replica = DbTarget::resolve(Some(url), std::path::Path::new("."))?;
        tracing::info!(replica = %replica.redacted(), "reading pages from a replica");
        // No migrations: a replica follows the primary's schema.
        let db = lastword_store::Db::connect(&replica)
            .await
            .with_context(|| format!("opening the read replica {}", replica.redacted()))?;
        let replica = lastword_store::store_for(db, store.tokens().clone());
        state = state.with_read_replica(store.clone(), replica);
    }
    // One database watcher for the whole process, fanned out to every browser (docs/live.md).
    let live = state.live.clone();
    live.ensure_started();
    // Keeps the counting pages cheap on a long history (docs/counts.md).
    let rollups = crate::rollups::spawn(store.clone());
    // Alerts to webhooks, when asked for: one sender among the servers on this database.
    let (stop_notifier, notifier_stopped) = tokio::sync::watch::channel(false);
    let specs: Vec<&String> = args.notify_url.iter().filter(|s| !s.trim().is_empty()).collect();
    let notifier = if specs.is_empty() {
        None
    } else {
        let base_url =
            args.auth.public_origin.first().cloned().unwrap_or_else(|| format!("http://{}", args.addr));
        let sinks = specs
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                crate::notify::Sink::parse(spec).map_err(|e| anyhow::anyhow!("--notify-url #{}: {e}", i + 1))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let mut config = crate::notify::NotifyConfig::new(sinks, base_url);
        config.cooldown = chrono::Duration::from_std(args.notify_cooldown).context("--notify-cooldown")?;
        let notifier = crate::notify::Notifier::new(store.db().clone(), store.tokens().clone(), config)
            .context("the webhook client")?;
        Some(notifier.spawn(notifier_stopped))
    };
    let app = crate::router(state);

    // The demo fleet stops when the server does.
    let (stop_fleet, fleet_stopped) = tokio::sync::watch::channel(false);
    let fleet = args.demo.then(|| {
        let mut config = args.fleet.clone();
        config.tokens = store.tokens().clone();
        let db = store.db().clone();
        let mut stopped = fleet_stopped.clone();
        tracing::info!(workers = config.workers, "starting the demo fleet");
        tokio::spawn(async move {
            lastword_sim::run_fleet(db, config, async move {
                let _ = stopped.changed().await;
            })
            .await
        })
    });

    let listener =
        tokio::net::TcpListener::bind(args.addr).await.with_context(|| format!("binding {}", args.addr))?;
    tracing::info!("serving the dashboard at http://{}", listener.local_addr()?);
    // The peer address is what proxy mode checks against --trusted-proxies.
    axum::serve(listener, app.into_make_service_with_connect_info::<std::net::SocketAddr>())
        .with_graceful_shutdown({
            let live = live.clone();
            async move {
                shutdown_signal().await;
                let _ = stop_fleet.send(true);
                // Ends every live-update stream, which would otherwise hold the shutdown open.
                live.shutdown().await;
            }
        })
        .await
        .context("server error")?;
    live.shutdown().await;
    rollups.abort();
    let _ = stop_notifier.send(true);
    if let Some(notifier) = notifier {
        let _ = notifier.await;
    }
    if let Some(sweeper) = sweeper {
        sweeper.abort();
    }
    if let Some(fleet) = fleet {
        match fleet.await {
            Ok(Ok(report)) => tracing::info!("demo fleet stopped: {report}"),
            Ok(Err(e)) => tracing::error!("demo fleet refused its configuration: {e}"),
            Err(e) => tracing::error!("demo fleet task failed: {e}"),
        }
    }
    store.db().close().await;
    tracing::info!("stopped");
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutting down");
}

/// `lastword demo`: the simulated fleet alone, until `--duration` elapses or Ctrl-C.
pub async fn demo(target: DbTarget, tokens: Tokens, mut fleet: FleetConfig) -> anyhow::Result<()> {
    fleet.validate().context("invalid fleet configuration")?;
    let store = lastword_store::open(&target, tokens)
        .await
        .with_context(|| format!("opening {}", target.redacted()))?;
    fleet.tokens = store.tokens().clone();
    tracing::info!(database = %target.redacted(), workers = fleet.workers, "running the demo fleet");
    let report =
        lastword_sim::run_fleet(store.db().clone(), fleet, shutdown_signal()).await.context("demo fleet")?;
    println!("{report}");
    store.db().close().await;
    Ok(())
}
