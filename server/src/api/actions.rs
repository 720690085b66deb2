//! The operator actions over HTTP: `POST /api/v1/tasks/{id}/requeue|compensate|uncompensate`,
//! the bulk re-queue (`GET /api/v1/requeue/preview`, `POST /api/v1/requeue`) and the audit trail
//! (`GET /api/v1/audit`). Each handler checks the caller may act, validates the body (400
//! naming the field), and hands over to the store, whose one transaction decides; a refusal is
//! 409 with what changed and the task as it is now. Documented in `docs/api.md`.

use super::openapi::{ActionRefused, BulkRefused, Refused};
use super::{path_id, query_pairs, write_now, ApiError};
use crate::auth::{require_operator, AuthError};
use crate::AppState;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, RawQuery, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use lastword_core::action::parse_audit_query;
use lastword_core::{
    ActionKind, ActionOutcome, ActionRequest, AuditPage, BulkOptions, BulkOutcome, BulkPreview,
    BulkRequeueRequest, BulkSelection, ParamError, Principal,
};
use serde_json::Value;

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
            Json(ActionRefused {
                outcome: Refused::Refused,
                error: r.code,
                message: r.message,
                task: r.task,
            }),
        )
            .into_response(),
    }
}

/// What every `POST /tasks/{id}/<action>` route reads from its request: the task id as written
/// (checked by [`path_id`] so a bad one is a 400 that names it), who asks, and the body as JSON
/// (its errors become a 400 by [`body`], after the caller's right to act is checked).
pub struct ActionCall {
    state: AppState,
    id: String,
    principal: Option<Principal>,
    body: Result<Json<Value>, JsonRejection>,
}

impl FromRequest<AppState> for ActionCall {
    type Rejection = Response;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Response> {
        let (mut parts, body) = request.into_parts();
        let Path(id) = Path::<String>::from_request_parts(&mut parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let principal = parts.extensions.get::<Principal>().cloned();
        let body = Json::<Value>::from_request(Request::from_parts(parts, body), state).await;
        Ok(ActionCall { state: state.clone(), id, principal, body })
    }
}

impl ActionCall {
    /// One action on one task. A viewer is refused (403) before anything else, and the attempt
    /// is written to the audit trail (when the task exists and the body reads).
    async fn act(self, kind: ActionKind) -> Result<Response, ApiError> {
        let ActionCall { state, id, principal, body: request } = self;
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
}

#[utoipa::path(post, path = "/tasks/{id}/requeue", tag = "actions", params(super::openapi::IdPath), request_body = ActionRequest,
    responses((status = 200, description = "Re-queued (or replayed: the same request id was applied before)", body = ActionOutcome),
        (status = 409, description = "Refused: what changed, and the task as it is now", body = super::openapi::ActionRefused), super::openapi::Refusals))]
/// `POST /api/v1/tasks/{id}/requeue` `{"reason", "expected_epoch", "expected_status"?, "fence"?,
/// "run_id"?, "request_id"?}`.
pub async fn requeue(call: ActionCall) -> Result<Response, ApiError> {
    call.act(ActionKind::Requeue).await
}

#[utoipa::path(post, path = "/tasks/{id}/compensate", tag = "actions", params(super::openapi::IdPath), request_body = ActionRequest,
    responses((status = 200, description = "Marked compensated (or replayed: the same request id was applied before)", body = ActionOutcome),
        (status = 409, description = "Refused: what changed, and the task as it is now", body = super::openapi::ActionRefused), super::openapi::Refusals))]
/// `POST /api/v1/tasks/{id}/compensate` `{"reason", "reference"?, "expected_epoch"?, "request_id"?}`.
pub async fn compensate(call: ActionCall) -> Result<Response, ApiError> {
    call.act(ActionKind::Compensate).await
}

#[utoipa::path(post, path = "/tasks/{id}/acknowledge", tag = "actions", params(super::openapi::IdPath), request_body = ActionRequest,
    responses((status = 200, description = "Acknowledged (or replayed: the same request id was applied before)", body = ActionOutcome),
        (status = 409, description = "Refused: what changed, and the task as it is now", body = super::openapi::ActionRefused), super::openapi::Refusals))]
/// `POST /api/v1/tasks/{id}/acknowledge` `{"attention", "reason", "expected_epoch"?, "request_id"?}`:
/// takes an attention item (`reason` is the note everyone sees).
pub async fn acknowledge(call: ActionCall) -> Result<Response, ApiError> {
    call.act(ActionKind::Acknowledge).await
}

#[utoipa::path(post, path = "/tasks/{id}/uncompensate", tag = "actions", params(super::openapi::IdPath), request_body = ActionRequest,
    responses((status = 200, description = "The compensation mark removed (or replayed: the same request id was applied before)", body = ActionOutcome),
        (status = 409, description = "Refused: what changed, and the task as it is now", body = super::openapi::ActionRefused), super::openapi::Refusals))]
/// `POST /api/v1/tasks/{id}/uncompensate` `{"reason", "request_id"?}`: undoes a compensation mark.
pub async fn uncompensate(call: ActionCall) -> Result<Response, ApiError> {
    call.act(ActionKind::Uncompensate).await
}

/// The API's own flags in a bulk request's query string, beside the run filter.
const BULK_FLAGS: [&str; 2] = ["fence", "include_deterministic"];

/// A bulk request's query string: its pairs (the run filter and the flags) and the flags read.
fn bulk_query(raw: Option<&str>) -> Result<(Vec<(String, String)>, BulkOptions), ParamError> {
    let pairs = query_pairs(raw);
    let mut options = BulkOptions::default();
    let flag = |name: &str, v: &str| match v {
        "true" | "1" => Ok(true),
        "false" | "0" | "" => Ok(false),
        _ => Err(ParamError::new(name, "true or false")),
    };
    for (k, v) in &pairs {
        match k.as_str() {
            "fence" => options.fence = flag("fence", v)?,
            "include_deterministic" => options.include_deterministic = flag("include_deterministic", v)?,
            _ => {}
        }
    }
    Ok((pairs, options))
}

/// The run filter of a bulk request's query string ([`BulkSelection::from_request`]: the
/// `/api/v1/runs` parameters, paging ignored, failures only unless narrowed, as on the page and
/// in the CLI) and its flags.
fn bulk_filter(raw: Option<&str>) -> Result<(BulkSelection, BulkOptions), ParamError> {
    let (pairs, options) = bulk_query(raw)?;
    Ok((BulkSelection::from_request(&pairs, None, write_now(), &BULK_FLAGS)?, options))
}

/// What a bulk request selects: its `task_ids`, or else the filter in the query string (not
/// both), with the query's `fence`/`include_deterministic` flags folded into the request's.
fn bulk_selection(
    raw: Option<&str>,
    request: BulkRequeueRequest,
) -> Result<(BulkSelection, BulkRequeueRequest), ParamError> {
    let (pairs, param_options) = bulk_query(raw)?;
    let selection = BulkSelection::from_request(&pairs, request.task_ids.clone(), write_now(), &BULK_FLAGS)?;
    let request = BulkRequeueRequest {
        fence: request.fence || param_options.fence,
        include_deterministic: request.include_deterministic || param_options.include_deterministic,
        ..request
    };
    Ok((selection, request))
}

#[utoipa::path(get, path = "/requeue/preview", tag = "actions",
    params(super::openapi::RunFilterParams, super::openapi::BulkFlags),
    responses((status = 200, description = "What a bulk re-queue would do now", body = BulkPreview), super::openapi::Refusals))]
/// `GET /api/v1/requeue/preview?<run filter>[&fence=true][&include_deterministic=true]`: what
/// a bulk re-queue would do now.
pub async fn preview(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Json<BulkPreview>, ApiError> {
    let (selection, options) = bulk_filter(raw.as_deref())?;
    Ok(Json(state.store.requeue_preview(&selection, options, write_now()).await?))
}

#[utoipa::path(post, path = "/requeue", tag = "actions",
    params(super::openapi::RunFilterParams, super::openapi::BulkFlags), request_body = BulkRequeueRequest,
    responses((status = 200, description = "Re-queued (or replayed)", body = BulkOutcome),
        (status = 409, description = "Refused: the selection changed since the preview", body = super::openapi::BulkRefused), super::openapi::Refusals))]
/// `POST /api/v1/requeue?<run filter>` `{"reason", "expected_count", "fence"?, "request_id"?}`,
/// or with `"task_ids": [...]` (and no filter) for a selection.
pub async fn bulk_requeue(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
    principal: Option<Extension<Principal>>,
    request: Result<Json<Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    let principal = principal.map(|Extension(p)| p);
    let actor = match require_operator(principal.as_ref()) {
        Ok(actor) => actor,
        Err(refusal) => {
            // A viewer's attempt goes on the record, task by task, as far as it can be read
            // (an unreadable body or filter selects nothing to record).
            if let (AuthError::Forbidden(_), Some(viewer)) = (&refusal, &principal) {
                let tried = body::<BulkRequeueRequest>(request).unwrap_or_default();
                if let Ok((selection, tried)) = bulk_selection(raw.as_deref(), tried) {
                    state
                        .store
                        .record_bulk_refusal(&selection, &tried, &viewer.actor(), "forbidden", write_now())
                        .await?;
                }
            }
            return Err(refusal.into());
        }
    };
    let request = body::<BulkRequeueRequest>(request)?.validate()?;
    let (selection, request) = bulk_selection(raw.as_deref(), request)?;
    match state.store.bulk_requeue(&selection, &request, &actor.actor(), write_now()).await? {
        // The same shape as a single action's refusal (`error` is the code), with the preview
        // as it is now instead of a task.
        BulkOutcome::Refused { code, message, preview } => Ok((
            StatusCode::CONFLICT,
            Json(BulkRefused { outcome: Refused::Refused, error: code, message, preview }),
        )
            .into_response()),
        outcome => Ok((StatusCode::OK, Json(outcome)).into_response()),
    }
}

#[utoipa::path(get, path = "/audit", tag = "actions",
    params(("actor" = Option<String>, Query, description = "Who acted"),
        ("action" = Option<lastword_core::ActionKind>, Query, description = "The action kind"),
        ("outcome" = Option<super::openapi::AuditOutcome>, Query, description = "Applied actions or refused attempts"),
        ("task" = Option<i64>, Query, description = "One task's actions"),
        super::openapi::WindowParams, super::openapi::PageParams),
    responses((status = 200, description = "The audit trail, newest first", body = AuditPage), super::openapi::Refusals))]
/// `GET /api/v1/audit?actor=&action=&task=&since=&until=&after=&limit=`: the audit trail, newest
/// first.
pub async fn audit(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Json<AuditPage>, ApiError> {
    let (filter, page) = parse_audit_query(&query_pairs(raw.as_deref()), write_now())?;
    Ok(Json(state.store.audit(&filter, &page).await?))
}
