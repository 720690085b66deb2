//! `GET /api/v1/tasks/{id}`.

use super::{path_id, read_now, ApiError};
use crate::AppState;
use axum::extract::{Path, State};
use axum::Json;
use lastword_core::TaskDetail;

/// The task's columns, its runs (each with its state), effects, audit trail, and the
/// `double_execution` / `needs_compensation` flags.
#[utoipa::path(get, path = "/tasks/{id}", tag = "tasks", params(super::openapi::IdPath),
    responses((status = 200, description = "The task's story", body = TaskDetail), super::openapi::Refusals))]
pub async fn one(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<TaskDetail>, ApiError> {
    let id = path_id("id", &id)?;
    match state.store.task_detail(id, read_now()).await? {
        Some(detail) => Ok(Json(detail)),
        None => Err(ApiError::NotFound(format!("task {id}"))),
    }
}
