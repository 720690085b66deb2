//! What a request gets when its sign-in cannot be checked because the database (which holds
//! the sessions) is down: `503` saying so, never the login page or a `401`. Treating an outage
//! as a logout sends the on-call person to a password prompt in the middle of an incident,
//! makes scripts think their token or session is bad, and hides the real cause. The session
//! cookie is left alone (a 5xx is never saved or cleared by the session layer), so the person
//! is still signed in when the database returns.
//!
//! Pages get a small self-contained page with the same database banner the dashboard shows
//! (`data-testid="banner-db-down"`) that reloads itself; the API gets the JSON of every other
//! database-unavailable answer (`api::ApiError::Unavailable`).

use axum::http::header::{HeaderValue, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, RETRY_AFTER};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

/// Seconds a client should wait before trying again (the page reloads after as long).
pub const RETRY_AFTER_SECS: u32 = 5;

/// The page: no script, no inline style, nothing to load.
fn page() -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"{RETRY_AFTER_SECS}\">\
         <title>lastword — database unreachable</title></head><body>\
         <p class=\"banner live-banner live-banner-db\" role=\"alert\" data-testid=\"banner-db-down\">\
         ⚠ Database unreachable — lastword cannot check your sign-in until it is back.</p>\
         <p>You are still signed in. This page tries again every {RETRY_AFTER_SECS} seconds.</p>\
         </body></html>\n"
    )
}

/// `503` for `path`: JSON under `/api`, the page otherwise; `Retry-After` on both.
pub fn response(path: &str) -> Response {
    let mut response = if path == "/api" || path.starts_with("/api/") {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({
                "error": "database unavailable",
                "message": "the database is unreachable, so the sign-in cannot be checked; retry later",
            })),
        )
            .into_response()
    } else {
        let mut page = (StatusCode::SERVICE_UNAVAILABLE, page()).into_response();
        let headers = page.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
        headers.insert(
            CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'; base-uri 'none'"),
        );
        page
    };
    let headers = response.headers_mut();
    headers.insert(RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
