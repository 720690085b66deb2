//! The route table: health, metrics, the JSON API, the dashboard pages (server-rendered by
//! Leptos, with their server functions), and static files. Tests call [`router`] directly.

use crate::AppState;
use crate::{api, events, health, metrics};
use app::{shell, App};
use axum::routing::get;
use axum::Router;
use leptos::prelude::provide_context;
use leptos_axum::{generate_route_list, LeptosRoutes};
use tower_http::trace::TraceLayer;

pub fn router(state: AppState) -> Router {
    let routes = generate_route_list(App);
    let store = state.store.clone();
    let live = state.live.clone();
    let options = state.leptos_options.clone();
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(metrics::handler))
        .nest("/api/v1", api::routes())
        .route(lastword_core::change::sse::PATH, get(events::events))
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
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}
