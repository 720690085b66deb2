//! The operator actions over HTTP: `POST /api/v1/tasks/{id}/requeue|compensate|uncompensate`,
//! the bulk re-queue (`GET /api/v1/requeue/preview`, `POST /api/v1/requeue`) and the audit trail
//! (`GET /api/v1/audit`). Each handler checks the caller may act, validates the body (400
//! naming the field), and hands over to the store, whose one transaction decides; a refusal is
//! 409 with what changed and the task as it is now. Documented in `docs/api.md`.

use super::{path_id, query_pairs, write_now, ApiError};
use crate::auth::{require_operator, AuthError};
use crate::{AppState, RequireOperator};
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use lastword_core::action::parse_audit_query;
use lastword_core::query::parse_bulk_filter;
use lastword_core::{
    ActionKind, ActionOutcome, ActionRequest, AuditPage, BulkOptions, BulkOutcome, BulkPreview,
    BulkRequeueRequest, BulkSelection, ParamError, Principal,
};
use serde_json::{json, Value};

/// A JSON body, or a 400 that says what is wrong with it (axum's own rejections are 415/422
/// plain text).
/// Only a JSON object: serde would otherwise read an array into the struct's fields by position.
fn body<T: serde::de::DeserializeOwned>(body: Result<Json<Value>, JsonRejection>) -> Result<T, ApiError> {
    let Json(value) = body.map_err(|e| ParamError::new("body", e.body_text()))?;
    if !value.is_object() {
        return Err(ParamError::new("body", "must be a JSON object").into());
    }
    serde_json::from_value(value).map_err(|e| ParamError::new("body", e.to_string()).into())
}

fn outcome_response(outcome: ActionOutcome) -> Response {
    match outcome {
        ActionOutcome::Applied { .. } | ActionOutcome::Replayed { .. } => {
            (StatusCode::OK, Json(outcome)).into_response()
        }
        ActionOutcome::Refused(r) => (
            StatusCode::CONFLICT,
            Json(json!({
                "outcome": "refused",
                "error": r.code.as_str(),
                "message": r.message,
                "task": r.task,
            })),
        )
            .into_response(),
    }
}

/// One action on one task by `principal`. A viewer is refused (403) before anything else, and
/// the attempt is written to the audit trail (when the task exists and the body reads).
async fn act(
    state: AppState,
    kind: ActionKind,
    id: String,
    principal: Option<Extension<Principal>>,
    request: Result<Json<Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    let principal = principal.map(|Extension(p)| p);
    let actor = match require_operator(principal.as_ref()) {
        Ok(actor) => actor,
        Err(refusal) => {
            if let (AuthError::Forbidden(_), Some(viewer), Ok(id)) =
                (&refusal, &principal, path_id("id", &id))
            {
                let tried = body::<ActionRequest>(request).unwrap_or_default().as_recorded_refusal();
                state
                    .store
                    .record_refusal(id, kind, &tried, &viewer.actor(), "forbidden", write_now())
                    .await?;
            }
            return Err(refusal.into());
        }
    };
    let id = path_id("id", &id)?;
    let request = body::<ActionRequest>(request)?.validate(kind)?;
    match state.store.act(id, kind, &request, &actor.actor(), write_now()).await? {
        Some(outcome) => Ok(outcome_response(outcome)),
        None => Err(ApiError::NotFound(format!("task {id}"))),
    }
}

/// `POST /api/v1/tasks/{id}/requeue` `{"reason", "expected_epoch", "expected_status"?, "fence"?,
/// "run_id"?, "request_id"?}`.
pub async fn requeue(
    State(state): State<AppState>,
    Path(id): Path<String>,
    principal: Option<Extension<Principal>>,
    request: Result<Json<Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    act(state, ActionKind::Requeue, id, principal, request).await
}

/// `POST /api/v1/tasks/{id}/compensate` `{"reason", "reference"?, "expected_epoch"?, "request_id"?}`.
pub async fn compensate(
    State(state): State<AppState>,
    Path(id): Path<String>,
    principal: Option<Extension<Principal>>,
    request: Result<Json<Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    act(state, ActionKind::Compensate, id, principal, request).await
}

/// `POST /api/v1/tasks/{id}/acknowledge` `{"attention", "reason", "expected_epoch"?, "request_id"?}`:
/// takes an attention item (`reason` is the note everyone sees).
pub async fn acknowledge(
    State(state): State<AppState>,
    Path(id): Path<String>,
    principal: Option<Extension<Principal>>,
    request: Result<Json<Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    act(state, ActionKind::Acknowledge, id, principal, request).await
}

/// `POST /api/v1/tasks/{id}/uncompensate` `{"reason", "request_id"?}`: undoes a compensation mark.
pub async fn uncompensate(
    State(state): State<AppState>,
    Path(id): Path<String>,
    principal: Option<Extension<Principal>>,
    request: Result<Json<Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    act(state, ActionKind::Uncompensate, id, principal, request).await
}

/// The run filter of a bulk request (the `/api/v1/runs` parameters, paging ignored, and as on
/// the failures page no state and no cause means failures only) and its `fence` and
/// `include_deterministic` flags.
fn bulk_filter(raw: Option<&str>) -> Result<(BulkSelection, BulkOptions), ParamError> {
    let mut options = BulkOptions::default();
    let mut pairs = Vec::new();
    let flag = |name: &str, v: &str| match v {
        "true" | "1" => Ok(true),
        "false" | "0" | "" => Ok(false),
        _ => Err(ParamError::new(name, "true or false")),
    };
    for (k, v) in query_pairs(raw) {
        match k.as_str() {
            "fence" => options.fence = flag("fence", &v)?,
            "include_deterministic" => options.include_deterministic = flag("include_deterministic", &v)?,
            _ => pairs.push((k, v)),
        }
    }
    Ok((BulkSelection::Filter(parse_bulk_filter(&pairs, write_now())?), options))
}

/// `GET /api/v1/requeue/preview?<run filter>[&fence=true][&include_deterministic=true]`: what
/// a bulk re-queue would do now.
pub async fn preview(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Json<BulkPreview>, ApiError> {
    let (selection, options) = bulk_filter(raw.as_deref())?;
    Ok(Json(state.store.requeue_preview(&selection, options, write_now()).await?))
}

/// `POST /api/v1/requeue?<run filter>` `{"reason", "expected_count", "fence"?, "request_id"?}`,
/// or with `"task_ids": [...]` (and no filter) for a selection.
pub async fn bulk_requeue(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
    RequireOperator(actor): RequireOperator,
    request: Result<Json<Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    let request = body::<BulkRequeueRequest>(request)?.validate()?;
    let (filtered, param_options) = bulk_filter(raw.as_deref())?;
    let selection = match (&request.task_ids, raw.as_deref().is_some_and(|q| !q.trim().is_empty())) {
        (Some(_), true) => {
            return Err(ParamError::new(
                "task_ids",
                "send either task_ids or a filter in the query, not both",
            )
            .into())
        }
        (Some(ids), false) => BulkSelection::Tasks(ids.clone()),
        (None, _) => filtered,
    };
    let request = BulkRequeueRequest {
        fence: request.fence || param_options.fence,
        include_deterministic: request.include_deterministic || param_options.include_deterministic,
        ..request
    };
    match state.store.bulk_requeue(&selection, &request, &actor.actor(), write_now()).await? {
        // The same shape as a single action's refusal (`error` is the code), with the preview
        // as it is now instead of a task.
        BulkOutcome::Refused { code, message, preview } => Ok((
            StatusCode::CONFLICT,
            Json(json!({
                "outcome": "refused",
                "error": code.as_str(),
                "message": message,
                "preview": preview,
            })),
        )
            .into_response()),
        outcome => Ok((StatusCode::OK, Json(outcome)).into_response()),
    }
}

/// `GET /api/v1/audit?actor=&action=&task=&since=&until=&after=&limit=`: the audit trail, newest
/// first.
pub async fn audit(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Json<AuditPage>, ApiError> {
    let (filter, page) = parse_audit_query(&query_pairs(raw.as_deref()), write_now())?;
    Ok(Json(state.store.audit(&filter, &page).await?))
}
