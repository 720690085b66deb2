//! Liveness and readiness for load balancers and orchestrators.
//!
//! `/healthz` answers while the process runs; `/readyz` only when the database is reachable and
//! every embedded migration is applied, so a balancer stops sending traffic to a server whose
//! database is down and resumes when it recovers. The answer is read at most once a
//! [`READY_TTL`] and within [`READY_TIMEOUT`] ([`crate::cached`]): a flood of probes costs the
//! database one query a second, and a database that hangs reads as not ready instead of
//! hanging every probe.

use crate::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use lastword_store::Readiness;
use serde_json::json;
use std::time::Duration;

pub async fn healthz() -> impl IntoResponse {
    Json(json!({ "status": "ok" }))
}

/// How long one readiness answer is reused.
pub const READY_TTL: Duration = Duration::from_secs(1);
/// How long a readiness read may take before the database counts as unreachable.
pub const READY_TIMEOUT: Duration = Duration::from_secs(2);

pub async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    let readiness = state
        .readiness
        .get(|| async {
            tokio::time::timeout(READY_TIMEOUT, state.store.readiness())
                .await
                .unwrap_or(Readiness { reachable: false, pending_migrations: vec![] })
        })
        .await;
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
