//! `GET /api/v1/overview?since=24h&until=&bucket=`.

use super::{read_now, ApiError, WindowQuery};
use crate::AppState;
use axum::extract::{RawQuery, State};
use axum::Json;
use chrono::Duration;
use lastword_core::{Overview, ParamError};

/// At most this many buckets in one series.
pub const MAX_BUCKETS: i64 = 1000;

/// Bucket lengths chosen when `bucket` is absent: the smallest giving at most 60 buckets.
const NICE_BUCKETS: [i64; 12] =
    [60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86_400, 7 * 86_400, 30 * 86_400, 92 * 86_400];

/// Counts per state and cause over the window, a series for the chart, and what needs attention.
#[utoipa::path(get, path = "/overview", tag = "counts",
    params(super::openapi::WindowParams,
        ("bucket" = Option<String>, Query, description = "The chart's bucket: a duration such as `5m` or `1h` (default: at most 60 buckets; at most 1000)")),
    responses((status = 200, description = "Counts, series and attention (default window: the last 24 hours)", body = Overview), super::openapi::Refusals))]
pub async fn get(State(state): State<AppState>, RawQuery(raw): RawQuery) -> Result<Json<Overview>, ApiError> {
    let now = read_now();
    let params = WindowQuery::parse(raw.as_deref(), &["since", "until", "bucket"])?;
    let (since, until) = params.window(now, Duration::hours(24))?;
    let span = (until - since).num_seconds().max(1);
    let bucket = match params.duration("bucket")? {
        Some(b) => {
            if span / b.num_seconds() > MAX_BUCKETS {
                return Err(ParamError::new(
                    "bucket",
                    format!("too small for the window: at most {MAX_BUCKETS} buckets"),
                )
                .into());
            }
            b
        }
        None => {
            let secs = NICE_BUCKETS.into_iter().find(|b| span / b <= 60).unwrap_or(92 * 86_400);
            Duration::seconds(secs)
        }
    };
    Ok(Json(state.store.overview(since, until, bucket, now).await?))
}
