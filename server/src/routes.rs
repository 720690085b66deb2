//! The route table: health, metrics, the JSON API, the dashboard pages (server-rendered by
//! Leptos, with their server functions), and static files. Tests call [`router`] directly.

use crate::AppState;
use crate::{api, assets, auth, events, health, metrics};
use app::{shell, App};
use axum::routing::get;
use axum::Router;
use leptos::prelude::provide_context;
use leptos_axum::{generate_route_list, LeptosRoutes};
use tower_http::trace::TraceLayer;

pub fn router(state: AppState) -> Router {
    router_with(state, Router::new())
}

/// [`router`] with `extra` routes merged in, behind the same middleware (authentication,
/// cross-site protection, sessions); for tests that need a route of their own.
pub fn router_with(state: AppState, extra: Router<AppState>) -> Router {
    let routes = generate_route_list(App);
    let store = state.store.clone();
    let live = state.live.clone();
    let options = state.leptos_options.clone();
    let bundle_cache = assets::BundleCache::new(&options);
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
                provide_context(store.clone());
                // Where the page's live feed resumes from: the changes after the render.
                provide_context(app::live::LiveSnapshot {
                    cursor: live.watermark(),
                    db_up: *live.db_up().borrow(),
                });
            },
            move || shell(options.clone()),
        )
        .fallback(leptos_axum::file_and_error_handler::<AppState, _>(shell))
        // Every request, pages and server functions included, gets its principal here (and
        // is turned away without one, or when a browser sends it from another site).
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::middleware));
    // Sessions are loaded before the auth middleware reads them (users mode only).
    let router = match sessions {
        Some(layer) => router.layer(layer),
        None => router,
    };
    router
        .layer(axum::middleware::from_fn_with_state(bundle_cache, assets::bundle_cache_headers))
        .layer(assets::compression())
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}
