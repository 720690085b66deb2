//! How the browser bundle (`/pkg/*`: wasm, js, css) and every other response travel.
//!
//! - **Compressed** (brotli or gzip, whichever the browser accepts): the wasm bundle is most of
//!   a first visit (1.8 MB raw) and compresses to about a third; pages and JSON compress well
//!   too. tower-http's default predicate leaves out server-sent events (compression would
//!   buffer the live stream), images and tiny bodies.
//! - **Revalidated, never guessed**: the bundle's file names do not change between builds, so
//!   a browser must not reuse an old copy by heuristic (an old wasm against a new server fails
//!   to hydrate). `Cache-Control: no-cache` makes it ask every time, and the file service
//!   answers `304 Not Modified` to `If-Modified-Since`, so a repeat visit moves no bundle bytes.

use axum::extract::Request;
use axum::http::header::{HeaderValue, CACHE_CONTROL};
use axum::middleware::Next;
use axum::response::Response;
use tower_http::compression::CompressionLayer;

/// The URL prefix cargo-leptos serves the bundle under (`site-pkg-dir`).
const BUNDLE_PREFIX: &str = "/pkg/";

/// Brotli or gzip for every response the default predicate allows.
pub fn compression() -> CompressionLayer {
    CompressionLayer::new().br(true).gzip(true)
}

/// Adds `Cache-Control: no-cache` to bundle responses that do not say otherwise.
pub async fn bundle_cache_headers(request: Request, next: Next) -> Response {
    let is_bundle = request.uri().path().starts_with(BUNDLE_PREFIX);
    let mut response = next.run(request).await;
    if is_bundle && !response.headers().contains_key(CACHE_CONTROL) {
        response.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
    response
}
