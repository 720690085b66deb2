//! Everything a request handler may need, built once at start-up and shared by reference.

use crate::auth::Auth;
use crate::live::{LiveConfig, LiveHub};
use axum::extract::FromRef;
use lastword_store::Store;
use leptos::prelude::LeptosOptions;
use std::sync::atomic::AtomicI64;
use std::sync::Arc;

#[derive(Clone, FromRef)]
pub struct AppState {
    pub leptos_options: LeptosOptions,
    pub store: Arc<dyn Store>,
    /// Browsers connected to the live event stream (incremented and decremented by it), read
    /// by `/metrics` as `lastword_live_clients`.
    pub live_clients: Arc<AtomicI64>,
    /// The `/metrics` reading of the store, refreshed at most every ten seconds.
    pub metrics: Arc<crate::metrics::MetricsCache>,
    /// The process's one database watcher for live updates (started on first use, or by
    /// `serve` at start-up).
    pub live: LiveHub,
    /// Who may use the dashboard and how they are recognised (docs/auth.md).
    pub auth: Arc<Auth>,
}

impl AppState {
    /// In local mode (one local operator, no login), as the embedded default serves.
    pub fn new(leptos_options: LeptosOptions, store: Arc<dyn Store>) -> Self {
        Self::with_auth(leptos_options, store, Auth::local())
    }

    /// With an authentication set-up of one's own (users or proxy mode; see [`Auth`]).
    pub fn with_auth(leptos_options: LeptosOptions, store: Arc<dyn Store>, auth: Auth) -> Self {
        let live = LiveHub::new(store.db().clone(), LiveConfig::default());
        let mut state = Self::with_live(leptos_options, store, live);
        state.auth = Arc::new(auth);
        state
    }

    /// With a hub of one's own (other timings, or shared by several routers in a test).
    pub fn with_live(leptos_options: LeptosOptions, store: Arc<dyn Store>, live: LiveHub) -> Self {
        AppState {
            leptos_options,
            store,
            live_clients: Arc::new(AtomicI64::new(0)),
            metrics: Arc::new(crate::metrics::MetricsCache::default()),
            live,
            auth: Arc::new(Auth::local()),
        }
    }
}

/// Leptos options from the variables cargo-leptos sets (and bakes in at build time), falling
/// back to this repository's layout so a plain `cargo build` binary and the tests still serve.
pub fn leptos_options() -> LeptosOptions {
    let built_by_cargo_leptos =
        std::env::var_os("LEPTOS_OUTPUT_NAME").is_some() || option_env!("LEPTOS_OUTPUT_NAME").is_some();
    if built_by_cargo_leptos {
        if let Ok(conf) = leptos::config::get_configuration(None) {
            return conf.leptos_options;
        }
    }
    let site_root = std::env::var("LEPTOS_SITE_ROOT").unwrap_or_else(|_| "target/site".to_string());
    LeptosOptions::builder().output_name("lastword").site_root(site_root).build()
}
