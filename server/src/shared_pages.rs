//! Rendered pages shared per question and data version, as the reads behind them already are.
//!
//! Why: a page's data is shared ([`lastword_store::SharedReads`]: one database read per question
//! and version, however many ask), but rendering it was not. The Failures page's 50 rows cost a
//! few milliseconds of CPU to render as HTML, against a third of a millisecond for the same
//! answer as JSON (BENCHMARKS.md). Now a page is rendered once per [`PageKey`] and served again
//! to whoever asks with that key: one person's reloads and tabs, a wallboard, everyone in local
//! mode (one operator), and everyone a proxy names as the same user. Different people never
//! share a render (the page shows who is signed in), so forty people opening one link are
//! forty renders still; their data is one read.
//!
//! What a rendered page depends on, and so its key holds:
//! - **the URL**, path and query: every filter is in it;
//! - **who asks**: the principal's name, role and how they signed in (the page shows who is
//!   signed in and what they may do). A page is never served to anyone but its principal;
//! - **the data version**: the live hub's refresh (its version, and its watermark, which the
//!   page embeds as its live cursor), whether the database is up, how many times the shared
//!   answers were dropped after an operator action (the page that acted must not read its own
//!   stale state back), and the second (answers carry `read_now`'s second: states that change
//!   with time alone, and ages).
//!
//! A hard reload (`Cache-Control: no-cache`, which browsers send on Shift+Reload) is rendered
//! for its request; its data is still the shared answer.
//!
//! The one part that differs per response is the nonce of the page's inline scripts: a shared
//! page keeps the nonce it was rendered with and is served with a fresh one in its place, in the
//! body and in the Content-Security-Policy header ([`crate::security`]).
//!
//! Only the pages built from shared reads are shared ([`SHARED_PAGES`]; the overview's lease
//! panel is the lease report every viewer shares for 30 s, which the key does not follow: it
//! shows a new report from the next second). The task page reads action previews fresh and the
//! audit trail is read fresh, so they are rendered per request. Only a `200` without
//! `Set-Cookie` is kept, and not a page that showed a refusal or a fault (the render marks it
//! [`NOT_SHAREABLE`]: the database down, a read refused as too slow), nor a
//! redirect. Without a refresh yet (the hub has not read the log) nothing is shared.

use crate::security::page_csp;
use crate::AppState;
use app::api::NOT_SHAREABLE;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_LENGTH, CONTENT_SECURITY_POLICY, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use lastword_core::Principal;
use moka::future::Cache;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The pages rendered once per key: those whose data all comes from shared reads.
pub const SHARED_PAGES: [&str; 4] = ["/", "/failures", "/workers", "/timeline"];

/// Keys carry the second, so an entry is useless after about a second; this bounds memory.
const ENTRY_TTL: Duration = Duration::from_secs(2);
/// Bytes of pages kept at once (distinct URLs × principals within a second or two): moka
/// drops the least used past it.
const MAX_KEPT_TOTAL: u64 = 32 << 20;
/// A page larger than this is served but not kept (a 240-minute timeline of a huge fleet).
const MAX_KEPT_BYTES: usize = 2 << 20;

/// The shared pages and how often each was rendered or served shared, for `/metrics`.
#[derive(Clone)]
pub struct SharedPages {
    pages: Cache<PageKey, Arc<Rendered>>,
    pub stats: Arc<SharedPageStats>,
}

#[derive(Debug, Default)]
pub struct SharedPageStats {
    /// Responses served from a page rendered for an earlier request.
    pub shared: AtomicU64,
    /// Shareable requests rendered afresh (the first with their key).
    pub rendered: AtomicU64,
}

impl Default for SharedPages {
    fn default() -> Self {
        SharedPages {
            pages: Cache::builder()
                .weigher(|_, page: &Arc<Rendered>| u32::try_from(page.body.len()).unwrap_or(u32::MAX))
                .max_capacity(MAX_KEPT_TOTAL)
                .time_to_live(ENTRY_TTL)
                .build(),
            stats: Arc::default(),
        }
    }
}

/// Everything a rendered page depends on (see the module header).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PageKey {
    /// Path and query.
    uri: String,
    principal: Principal,
    refresh_version: i64,
    refresh_watermark: i64,
    db_up: bool,
    invalidations: u64,
    second: i64,
}

/// A page as rendered: its headers, its body, and the nonce its inline scripts carry.
struct Rendered {
    headers: HeaderMap,
    body: String,
    nonce: String,
}

/// The middleware (inside authentication, which puts the principal in the request).
pub async fn share(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(key) = key(&state, &request) else {
        return next.run(request).await;
    };
    let pages = &state.shared_pages;
    if let Some(page) = pages.pages.get(&key).await {
        pages.stats.shared.fetch_add(1, Ordering::Relaxed);
        return serve(&page);
    }
    pages.stats.rendered.fetch_add(1, Ordering::Relaxed);
    let mut response = next.run(request).await;
    let marked = response.headers_mut().remove(NOT_SHAREABLE).is_some();
    let Some(nonce) = keepable(&response).filter(|_| !marked) else {
        return response;
    };
    let (mut parts, body) = response.into_parts();
    let body = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(body) => body,
        Err(e) => {
            tracing::warn!(error = %e, "a page's body failed while it was read");
            return (StatusCode::INTERNAL_SERVER_ERROR, "the page could not be rendered; reload it")
                .into_response();
        }
    };
    parts.headers.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
    if body.len() <= MAX_KEPT_BYTES {
        if let Ok(text) = std::str::from_utf8(&body) {
            let page = Rendered { headers: parts.headers.clone(), body: text.to_string(), nonce };
            pages.pages.insert(key, Arc::new(page)).await;
        }
    }
    Response::from_parts(parts, Body::from(body))
}

/// What a rendered page depends on, or `None` when the request is not for a shared page, asks
/// for a fresh render, or nothing can be shared yet.
fn key(state: &AppState, request: &Request) -> Option<PageKey> {
    if request.method() != Method::GET || !SHARED_PAGES.contains(&request.uri().path()) {
        return None;
    }
    // A hard reload (the browser sends `Cache-Control: no-cache`) asks for a page rendered now.
    let fresh = request.headers().get(CACHE_CONTROL).and_then(|v| v.to_str().ok());
    if fresh.is_some_and(|v| v.contains("no-cache")) {
        return None;
    }
    let principal = request.extensions().get::<Principal>()?.clone();
    let refresh = state.live.refresh()?;
    Some(PageKey {
        uri: request.uri().to_string(),
        principal,
        refresh_version: refresh.version,
        refresh_watermark: refresh.watermark,
        db_up: *state.live.db_up().borrow(),
        invalidations: state.shared_reads.invalidations.load(Ordering::Relaxed),
        second: lastword_core::read_now().timestamp(),
    })
}

/// The nonce of a response that may be kept: a `200` page that sets no cookie, whose policy
/// names its nonce.
fn keepable(response: &Response) -> Option<String> {
    if response.status() != StatusCode::OK || response.headers().contains_key(SET_COOKIE) {
        return None;
    }
    let policy = response.headers().get(CONTENT_SECURITY_POLICY)?.to_str().ok()?;
    nonce_in(policy)
}

/// The nonce a page's policy allows (`'nonce-…'`).
fn nonce_in(policy: &str) -> Option<String> {
    let start = policy.find("'nonce-")? + "'nonce-".len();
    let len = policy[start..].find('\'')?;
    (len > 0).then(|| policy[start..start + len].to_string())
}

/// A kept page with a fresh nonce in place of the one it was rendered with.
fn serve(page: &Rendered) -> Response {
    let nonce = leptos::nonce::Nonce::new().to_string();
    let body = page.body.replace(&page.nonce, &nonce);
    let mut headers = page.headers.clone();
    if let Ok(policy) = HeaderValue::from_str(&page_csp(&nonce)) {
        headers.insert(CONTENT_SECURITY_POLICY, policy);
    }
    headers.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
    let mut response = Response::new(Body::from(body));
    *response.headers_mut() = headers;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_names_its_nonce() {
        assert_eq!(nonce_in(&page_csp("abc123")).as_deref(), Some("abc123"));
        assert_eq!(nonce_in("default-src 'none'"), None);
        assert_eq!(nonce_in("script-src 'nonce-'"), None);
    }
}
