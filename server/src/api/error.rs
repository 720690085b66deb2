//! The API's one error type and how each variant becomes an HTTP response.

use super::openapi::ErrorBody;
use crate::auth::AuthError;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use lastword_core::ParamError;
use lastword_store::StoreError;

/// Everything a `/api/v1` handler can fail with. The body is always JSON with an `error`
/// message; a 400 also names the offending `param`. Malformed requests never produce a 5xx.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400 Bad Request: a query or path parameter is malformed or unknown; the body names it.
    #[error("{0}")]
    BadRequest(#[from] ParamError),
    /// 404 Not Found: no such run, task or route.
    #[error("{0} not found")]
    NotFound(String),
    /// 503 Service Unavailable: the database cannot be reached; retry later.
    #[error("database unavailable")]
    Unavailable(#[source] StoreError),
    /// 503 Service Unavailable: the query ran past the statement timeout and was cancelled;
    /// the message says so (narrow the window).
    #[error("{0}")]
    TooSlow(#[source] StoreError),
    /// 500 Internal Server Error: a query failed for another reason. Logged with its cause
    /// chain; the client gets a generic message.
    #[error("internal error")]
    Internal(#[source] StoreError),
    /// 401 Unauthorized or 403 Forbidden: see [`AuthError`] (`{"error": "unauthorized" |
    /// "forbidden" | "cross_origin", "message": ...}`).
    #[error(transparent)]
    Auth(#[from] AuthError),
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        if e.is_unavailable() {
            ApiError::Unavailable(e)
        } else if e.is_too_slow() {
            ApiError::TooSlow(e)
        } else {
            ApiError::Internal(e)
        }
    }
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Unavailable(_) | ApiError::TooSlow(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Auth(e) => e.status(),
        }
    }
}

/// The error and every `source()` below it, joined with ": ".
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        next = cause.source();
    }
    out
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Auth(e) = self {
            return e.into_response();
        }
        let status = self.status();
        let body = match &self {
            ApiError::BadRequest(p) => {
                ErrorBody { param: Some(p.param.clone()), ..ErrorBody::new(&p.message) }
            }
            ApiError::NotFound(_) => ErrorBody::new(self.to_string()),
            ApiError::Unavailable(e) => {
                tracing::warn!(error = %chain(e), "api: database unavailable");
                ErrorBody::new(self.to_string())
            }
            ApiError::TooSlow(e) => {
                tracing::warn!(error = %chain(e), "api: a query hit the statement timeout");
                ErrorBody::new(self.to_string())
            }
            ApiError::Internal(e) => {
                tracing::error!(error = %chain(e), "api: internal error");
                ErrorBody::new(self.to_string())
            }
            ApiError::Auth(_) => unreachable!("answered above"),
        };
        (status, Json(body)).into_response()
    }
}
