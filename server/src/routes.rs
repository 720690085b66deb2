//! The route table: health, metrics, the JSON API, the dashboard pages (server-rendered by
//! Leptos, with their server functions), and static files. Tests call [`router`] directly.

use crate::AppState;
use crate::{api, assets, auth, events, health, metrics, packs, security, shared_pages};
use app::{shell, App};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use leptos::prelude::provide_context;
use leptos_axum::{generate_route_list, AxumRouteListing, LeptosRoutes};
use std::sync::LazyLock;
use std::time::Duration;
use tower_http::trace::TraceLayer;

/// The longest a request may take to produce its response (headers; a live stream's body
/// flows on). Long enough for any page at 10 M runs (BENCHMARKS.md: p95 well under 100 ms), short
/// enough that a stuck query cannot hold a connection and a browser tab for minutes.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The dashboard's page routes, generated once per process and shared by every router built.
///
/// Generating them renders the whole app with resource loading switched off by a
/// *process-wide* flag (leptos_server's `SuppressResourceLoad`, set and cleared by
/// `RouteList::generate`). A page rendering in the same process at that moment has its resources
/// never load, and its response never comes (leptos#4773). The binary builds one router before it
/// serves, so it never met this; tests build a router each, concurrently, and hung (2 to 4 runs in
/// 10 of four page tests, before this). Once per process means no render can ever overlap it.
fn page_routes() -> Vec<AxumRouteListing> {
    static ROUTES: LazyLock<Vec<AxumRouteListing>> = LazyLock::new(|| generate_route_list(App));
    ROUTES.clone()
}

pub fn router(state: AppState) -> Router {
    router_with(state, Router::new())
}

/// [`router`] with `extra` routes merged in, behind the same middleware (authentication,
/// cross-site protection, sessions); for tests that need a route of their own.
pub fn router_with(state: AppState, extra: Router<AppState>) -> Router {
    let routes = page_routes();
    let store = state.store.clone();
    let live = state.live.clone();
    let site = state.site.clone();
    let leases = state.leases.clone();
    let options = state.leptos_options.clone();
    let bundle_cache = assets::BundleCache::new(&options);
    let chunk_packs = packs::ChunkPacks::of_site(&options);
    let pack_urls = chunk_packs.clone().map(|packs| {
        app::ChunkPacks(std::sync::Arc::new(move |route: &str| packs.pack_of(route).map(str::to_string)))
    });
    let sessions = state.auth.sessions.as_ref().map(|s| s.layer(state.auth.cookie_secure));
    let router = Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(metrics::handler))
        .nest("/api/v1", api::routes())
        .merge(auth::handlers::routes())
        .merge(extra)
        .route(lastword_core::change::sse::PATH, get(events::events))
        .nest_service(assets::bundle_prefix(&options).trim_end_matches('/'), assets::bundle_files(&options))
        .leptos_routes_with_context(
            &state,
            routes,
            move || {
                security::provide_page_nonce();
                provide_context(store.clone());
                provide_context(site.clone());
                provide_context(leases.clone());
                if let Some(pack_urls) = &pack_urls {
                    provide_context(pack_urls.clone());
                }
                // Where the page's live feed resumes from: the changes after the refresh its
                // shared reads answer at (read before them, so nothing falls in between).
                provide_context(app::live::LiveSnapshot {
                    cursor: live.refresh().map(|r| r.watermark),
                    db_up: *live.db_up().borrow(),
                });
            },
            move || shell(options.clone()),
        )
        .fallback(leptos_axum::file_and_error_handler_with_context::<AppState, _>(
            security::provide_page_nonce,
            shell,
        ))
        // Inside authentication: a page is shared only with its own principal.
        .layer(axum::middleware::from_fn_with_state(state.clone(), shared_pages::share))
        // Every request, pages and server functions included, gets its principal here (and
        // is turned away without one, or when a browser sends it from another site).
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::middleware))
        // Extractor and argument rejections made clear (auth's own 401/403 are JSON already).
        .layer(axum::middleware::from_fn(api::rejections::clear_rejections));
    // Sessions are loaded before the auth middleware reads them (users mode only).
    let router = match sessions {
        Some(layer) => router.layer(layer),
        None => router,
    };
    router
        .layer(axum::middleware::from_fn_with_state(state.request_timeout, cut_at_timeout))
        // The chunk loader and the page packs, from memory; the cache headers as for the bundle.
        .layer(axum::middleware::from_fn_with_state(chunk_packs, packs::serve))
        .layer(axum::middleware::from_fn_with_state(bundle_cache, assets::bundle_cache_headers))
        .layer(axum::middleware::from_fn(security::headers))
        .layer(assets::compression())
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// Cuts a request that has not produced its response within `limit`: 503 with a message that
/// says so (dropping the handler cancels its database query), instead of a hung tab.
async fn cut_at_timeout(State(limit): State<Duration>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(path, ?limit, "request cut at its timeout");
            let message = format!(
                "the request took longer than {} s and was stopped; try a narrower window or filter",
                limit.as_secs_f64()
            );
            (
                StatusCode::SERVICE_UNAVAILABLE,
                [(axum::http::header::RETRY_AFTER, "5")],
                axum::Json(serde_json::json!({ "error": "timeout", "message": message })),
            )
                .into_response()
        }
    }
}
