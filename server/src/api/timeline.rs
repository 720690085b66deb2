//! `GET /api/v1/timeline?since=15m&until=`.

use super::{read_now, ApiError, WindowQuery};
use crate::AppState;
use axum::extract::{RawQuery, State};
use axum::Json;
use chrono::Duration;
use lastword_core::RunListItem;

/// Runs overlapping the window (default the last 15 minutes), by worker then claim; at most
/// the newest 5000.
#[utoipa::path(get, path = "/timeline", tag = "counts", params(super::openapi::WindowParams),
    responses((status = 200, description = "Runs in the window (default the last 15 minutes)", body = Vec<RunListItem>), super::openapi::Refusals))]
pub async fn list(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Vec<RunListItem>>, ApiError> {
    let now = read_now();
    let params = WindowQuery::parse(raw.as_deref(), &["since", "until"])?;
    let (since, until) = params.window(now, Duration::minutes(15))?;
    Ok(Json(state.store.timeline(since, until, now).await?))
}
