//! `GET /api/v1/workers?since=1h`.

use super::{read_now, ApiError, WindowQuery};
use crate::AppState;
use axum::extract::{RawQuery, State};
use axum::Json;
use chrono::Duration;
use lastword_core::WorkerSummary;

/// Every worker with a run claimed since `since` (default the last hour) or holding a lease now.
#[utoipa::path(get, path = "/workers", tag = "counts",
    params(("since" = Option<String>, Query, description = "RFC 3339 or an age such as `1h` (default `1h`)")),
    responses((status = 200, description = "The workers", body = Vec<WorkerSummary>), super::openapi::Refusals))]
pub async fn list(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Vec<WorkerSummary>>, ApiError> {
    let now = read_now();
    let params = WindowQuery::parse(raw.as_deref(), &["since"])?;
    let since = params.time("since", now, now - Duration::hours(1))?;
    Ok(Json(state.store.workers(since, now).await?))
}
