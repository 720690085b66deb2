//! `lastword serve`: open the store, build the router, listen until SIGINT/SIGTERM.

use crate::cli::ServeArgs;
use crate::state::{leptos_options, AppState};
use anyhow::Context;
use lastword_core::Tokens;
use lastword_store::DbTarget;

pub async fn serve(target: DbTarget, tokens: Tokens, args: ServeArgs) -> anyhow::Result<()> {
    tracing::info!(database = %target.redacted(), "opening database");
    let store = lastword_store::open(&target, tokens)
        .await
        .with_context(|| format!("opening {}", target.redacted()))?;
    let mut options = leptos_options();
    options.site_addr = args.addr;
    let state = AppState::new(options, store.clone());
    let app = crate::router(state);

    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("binding {}", args.addr))?;
    tracing::info!("serving the dashboard at http://{}", listener.local_addr()?);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await
        .context("server error")?;
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
