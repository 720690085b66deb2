//! Liveness and readiness for load balancers and orchestrators.
//!
//! `/healthz` answers while the process runs; `/readyz` only when the database is reachable and
//! every embedded migration is applied, so a balancer stops sending traffic to a server whose
//! database is down and resumes when it recovers.

use crate::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use serde_json::json;

pub async fn healthz() -> impl IntoResponse {
    Json(json!({ "status": "ok" }))
}

pub async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    let readiness = state.store.readiness().await;
    let backend = state.store.backend().as_str();
    if readiness.is_ready() {
        (StatusCode::OK, Json(json!({ "status": "ready", "backend": backend })))
    } else {
        let reason = if !readiness.reachable { "database unreachable" } else { "migrations pending" };
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({
                "status": "unavailable",
                "backend": backend,
                "reason": reason,
                "pending_migrations": readiness.pending_migrations,
            })),
        )
    }
}
