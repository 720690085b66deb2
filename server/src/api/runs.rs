//! `GET /api/v1/runs`, `/runs/facets` and `/runs/{id}`.

use super::{path_id, query_pairs, read_now, ApiError};
use crate::AppState;
use axum::extract::{Path, RawQuery, State};
use axum::Json;
use lastword_core::query::parse_run_query;
use lastword_core::{CauseFacets, Run, RunPage};

/// One keyset page of runs matching the filters, newest claim first.
#[utoipa::path(get, path = "/runs", tag = "runs",
    params(super::openapi::RunFilterParams, super::openapi::PageParams),
    responses((status = 200, description = "A page of runs and the cursor of the next", body = RunPage), super::openapi::Refusals))]
pub async fn list(State(state): State<AppState>, RawQuery(raw): RawQuery) -> Result<Json<RunPage>, ApiError> {
    let now = read_now();
    let (filter, page) = parse_run_query(&query_pairs(raw.as_deref()), now)?;
    Ok(Json(state.store.list_runs(&filter, &page, now).await?))
}

/// Failure runs per cause for the same filters, the filter's own `state`/`cause` ignored.
#[utoipa::path(get, path = "/runs/facets", tag = "runs",
    params(super::openapi::RunFilterParams, super::openapi::PageParams),
    responses((status = 200, description = "Failure runs per cause", body = CauseFacets), super::openapi::Refusals))]
pub async fn facets(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Json<CauseFacets>, ApiError> {
    let now = read_now();
    let (filter, _page) = parse_run_query(&query_pairs(raw.as_deref()), now)?;
    Ok(Json(state.store.cause_facets(&filter, now).await?))
}

/// One run with its state and cause.
#[utoipa::path(get, path = "/runs/{id}", tag = "runs", params(super::openapi::IdPath),
    responses((status = 200, description = "The run", body = Run), super::openapi::Refusals))]
pub async fn one(State(state): State<AppState>, Path(id): Path<String>) -> Result<Json<Run>, ApiError> {
    let id = path_id("id", &id)?;
    match state.store.run(id, read_now()).await? {
        Some(run) => Ok(Json(run)),
        None => Err(ApiError::NotFound(format!("run {id}"))),
    }
}
