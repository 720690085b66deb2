//! `GET /api/v1/leases?kind=&since=&until=`: lease health per task kind (issue 13).

use super::{read_now, ApiError, WindowParams};
use crate::AppState;
use axum::extract::{RawQuery, State};
use axum::Json;
use lastword_core::leases::{parse_kind, LeaseReport, LeaseWindow};

/// Run length against the lease, reclaim latency and reasons per kind, loops, skewed clocks and
/// the heartbeat age of running work, shared between askers for a short while (`computed_at`).
pub async fn get(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Json<LeaseReport>, ApiError> {
    let now = read_now();
    let params = WindowParams::parse(raw.as_deref(), &["kind", "since", "until"])?;
    let window = LeaseWindow::parse(params.value("since"), params.value("until"), now)?;
    let kind = parse_kind(params.value("kind"))?;
    Ok(Json(state.leases.get(state.store.db(), state.store.tokens(), kind.as_deref(), window, now).await?))
}
