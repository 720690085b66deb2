//! `GET /api/v1/leases?kind=&since=&until=`: lease health per task kind (issue 13).

use super::{read_now, ApiError, WindowQuery};
use crate::AppState;
use axum::extract::{RawQuery, State};
use axum::Json;
use lastword_core::leases::{parse_kind, LeaseReport, LeaseWindow};

/// Run length against the lease, reclaim latency and reasons per kind, loops, skewed clocks and
/// the heartbeat age of running work, shared between askers for a short while (`computed_at`).
#[utoipa::path(get, path = "/leases", tag = "counts",
    params(("kind" = Option<String>, Query, description = "One task kind (default all)"), super::openapi::WindowParams),
    responses((status = 200, description = "Lease health (default window: the last 24 hours)", body = LeaseReport), super::openapi::Refusals))]
pub async fn get(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Json<LeaseReport>, ApiError> {
    let now = read_now();
    let params = WindowQuery::parse(raw.as_deref(), &["kind", "since", "until"])?;
    let window = LeaseWindow::parse(params.value("since"), params.value("until"), now)?;
    let kind = parse_kind(params.value("kind"))?;
    Ok(Json(state.leases.get(state.store.db(), state.store.tokens(), kind.as_deref(), window, now).await?))
}
