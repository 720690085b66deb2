//! Everything a request handler may need, built once at start-up and shared by reference.

use crate::assets;
use crate::auth::Auth;
use crate::live::{LiveConfig, LiveHub};
use axum::extract::FromRef;
use lastword_store::{SharedReadStats, SharedReads, Store};
use leptos::prelude::LeptosOptions;
use std::sync::atomic::AtomicI64;
use std::sync::Arc;

#[derive(Clone, FromRef)]
pub struct AppState {
    pub leptos_options: LeptosOptions,
    /// The store every request reads through: identical reads at one data version share one
    /// database call ([`SharedReads`], keyed by the live hub's refresh version).
    pub store: Arc<dyn Store>,
    /// How many reads were shared and how many reached the database, for `/metrics`.
    pub shared_reads: Arc<SharedReadStats>,
    /// Pages rendered once per principal, URL and data version ([`crate::shared_pages`]).
    pub shared_pages: crate::shared_pages::SharedPages,
    /// Browsers connected to the live event stream (incremented and decremented by it), read
    /// by `/metrics` as `lastword_live_clients`.
    pub live_clients: Arc<AtomicI64>,
    /// The `/metrics` reading of the store, refreshed at most every ten seconds.
    pub metrics: Arc<crate::metrics::MetricsCache>,
    /// How long a request may take to produce its response before it is cut with a 503.
    pub request_timeout: std::time::Duration,
    /// Lease health reports, shared between everyone asking the same question for a while.
    pub leases: lastword_store::leases::LeaseReports,
    /// The `/readyz` answer, read at most once a second however often probes ask.
    pub readiness: Arc<crate::cached::Cached<lastword_store::Readiness>>,
    /// The process's one database watcher for live updates (started on first use, or by
    /// `serve` at start-up).
    pub live: LiveHub,
    /// Who may use the dashboard and how they are recognised (docs/auth.md).
    pub auth: Arc<Auth>,
    /// What pages need of the configuration (trace links), provided to every render and
    /// server function.
    pub site: app::site::SiteSettings,
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
        let shared = SharedReads::new(store, version_of(&live));
        AppState {
            leptos_options,
            shared_reads: shared.stats(),
            shared_pages: crate::shared_pages::SharedPages::default(),
            store: Arc::new(shared),
            live_clients: Arc::new(AtomicI64::new(0)),
            metrics: Arc::new(crate::metrics::MetricsCache::default()),
            leases: lastword_store::leases::LeaseReports::default(),
            readiness: Arc::new(crate::cached::Cached::new(crate::health::READY_TTL)),
            request_timeout: crate::routes::REQUEST_TIMEOUT,
            live,
            auth: Arc::new(Auth::local()),
            site: app::site::SiteSettings::default(),
        }
    }
}

impl AppState {
    /// Runs with a trace id link to `links`' tracer (`--trace-url-template`).
    pub fn with_trace_links(mut self, links: Option<lastword_core::TraceLinks>) -> Self {
        self.site.trace_links = links;
        self
    }

    /// Tells the pages which failure causes a re-queue cannot fix, so they warn before the
    /// store refuses (the store holds the same policy and decides).
    pub fn with_retry_policy(mut self, retry: lastword_core::RetryPolicy) -> Self {
        self.site.retry = retry;
        self
    }

    pub fn with_request_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sends the shared page and API reads to a read replica; actions, their previews, the
    /// audit trail, readiness and the change feed stay on `primary` (the store this state was
    /// built with). See `lastword_store::shared_reads`.
    pub fn with_read_replica(mut self, primary: Arc<dyn Store>, replica: Arc<dyn Store>) -> Self {
        let shared = SharedReads::new(primary, version_of(&self.live)).with_replica(replica);
        self.shared_reads = shared.stats();
        self.store = Arc::new(shared);
        self
    }
}

/// The data version shared reads are keyed by: the hub's refresh version, which moves at most
/// once a second, when every open page refetches (`crate::live`'s header says why).
fn version_of(live: &LiveHub) -> lastword_store::shared_reads::VersionSource {
    let live = live.clone();
    Arc::new(move || live.refresh().map(|r| r.version))
}

/// Leptos options from the variables cargo-leptos sets (and bakes in at build time), falling
/// back to this repository's layout so a plain `cargo build` binary and the tests still serve.
/// Content-hashed bundle names are used when the build left them (see [`assets`]); leptos reads
/// `LEPTOS_HASH_FILES` only at run time, so a binary started by hand would otherwise name files
/// the site does not hold.
pub fn leptos_options() -> LeptosOptions {
    let built_by_cargo_leptos =
        std::env::var_os("LEPTOS_OUTPUT_NAME").is_some() || option_env!("LEPTOS_OUTPUT_NAME").is_some();
    let configured = built_by_cargo_leptos.then(|| leptos::config::get_configuration(None).ok()).flatten();
    let mut options = match configured {
        Some(conf) => conf.leptos_options,
        None => {
            let site_root = std::env::var("LEPTOS_SITE_ROOT").unwrap_or_else(|_| "target/site".to_string());
            LeptosOptions::builder().output_name("lastword").site_root(site_root).build()
        }
    };
    let told = std::env::var("LEPTOS_HASH_FILES").ok().and_then(|v| v.parse::<bool>().ok());
    options.hash_files = match told {
        Some(false) => false,
        _ => assets::hash_file_beside_binary(&options)
            .is_some_and(|file| assets::use_hashed_names(&options, &file)),
    };
    options
}
