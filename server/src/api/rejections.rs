//! Malformed requests that fail before our handlers run get the same clear answer as the ones
//! our handlers refuse. Two framework defaults fall short, and one middleware mends both, by
//! path, in one place:
//!
//! - **The JSON API** (`/api/v1/*`): axum's extractor rejections (a path segment that is not
//!   UTF-8, a body that is not JSON) are `4xx` plain text. Scripts expect `{"error": …}`, so
//!   any `4xx` that is not JSON is wrapped into it, its text kept as the message.
//! - **Server functions** (`/api/fn/*`): leptos answers arguments it cannot decode (a missing
//!   field, a wrong type, a body that is not UTF-8 or too long) with `500` and an `Args|…` or
//!   `Deserialization|…` error. That is the client's mistake, not a fault: `400`, body kept
//!   (the page's client decodes the same error either way).

use super::openapi::ErrorBody;
use axum::extract::Request;
use axum::http::header::{HeaderValue, CONTENT_TYPE};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;

/// Error bodies are small; anything larger is left as it is.
const MAX_ERROR_BODY: usize = 64 << 10;

/// The middleware (see the module header).
pub async fn clear_rejections(request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let (api, server_fn) = (path.starts_with("/api/v1/") || path == "/api/v1", path.starts_with("/api/fn/"));
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let mend = (api && status.is_client_error() && !is_json)
        || (server_fn && status == StatusCode::INTERNAL_SERVER_ERROR);
    if !mend {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_ERROR_BODY).await else {
        return (status, "error body too large").into_response();
    };
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if api {
        let mut answer = (status, Json(ErrorBody::new(text.trim()))).into_response();
        for (name, value) in
            parts.headers.iter().filter(|(name, _)| *name != CONTENT_TYPE && *name != "content-length")
        {
            answer.headers_mut().insert(name.clone(), value.clone());
        }
        return answer;
    }
    // A server function's argument the client got wrong: leptos' own encoding names it.
    if text.starts_with("Args|") || text.starts_with("Deserialization|") {
        parts.status = StatusCode::BAD_REQUEST;
        parts.headers.remove("content-length");
        parts.headers.entry(CONTENT_TYPE).or_insert(HeaderValue::from_static("text/plain; charset=utf-8"));
    }
    Response::from_parts(parts, axum::body::Body::from(bytes))
}
