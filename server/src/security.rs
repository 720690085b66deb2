//! Security headers on every response.
//!
//! - **Content-Security-Policy.** A page runs exactly the scripts this server rendered into it:
//!   each render makes a fresh nonce ([`provide_page_nonce`]), leptos puts it on the hydration
//!   script and on the inline scripts that carry resource data, and the page's policy allows
//!   `'nonce-…'` and the bundle from `'self'` (`'wasm-unsafe-eval'` for the wasm module) and no
//!   other inline script; runner text rendered into a page (outputs, worker names) cannot run
//!   even if an escaping bug let it through. Everything else (JSON, files) gets
//!   `default-src 'none'`. `frame-ancestors 'none'` everywhere: no page can be framed, so no
//!   other site can trick a click on a button of ours (`/tasks/42?act=requeue` in a frame).
//! - `X-Content-Type-Options: nosniff`, `X-Frame-Options: DENY` (for browsers without
//!   `frame-ancestors`), `Referrer-Policy: same-origin` (task ids and filters stay ours).
//! - `Cache-Control: no-store` on pages and the API unless the response set its own: on-call
//!   data must not be kept by shared caches or shown stale from the back button. The bundle
//!   sets its own (server/src/assets.rs).

use axum::extract::Request;
use axum::http::header::{
    HeaderName, HeaderValue, CACHE_CONTROL, CONTENT_SECURITY_POLICY, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use axum::middleware::Next;
use axum::response::Response;

/// For responses that are not pages: nothing may load or run, nothing may frame it.
const NON_PAGE_CSP: &str = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// The policy of a rendered page whose inline scripts carry `nonce`.
pub fn page_csp(nonce: &str) -> String {
    format!(
        "default-src 'self'; script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'; \
         style-src 'self' 'nonce-{nonce}'; img-src 'self' data:; connect-src 'self'; \
         object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )
}

/// Inside a page render (the leptos context closure): a fresh nonce for this render's inline
/// scripts and styles ([`leptos::nonce::use_nonce`]), and the page's policy naming it.
pub fn provide_page_nonce() {
    let nonce = leptos::nonce::Nonce::new();
    if let Some(response) = leptos::prelude::use_context::<leptos_axum::ResponseOptions>() {
        if let Ok(policy) = HeaderValue::from_str(&page_csp(&nonce)) {
            response.insert_header(CONTENT_SECURITY_POLICY, policy);
        }
    }
    leptos::prelude::provide_context(nonce);
}

/// The middleware: fills in every header the response did not set itself.
pub async fn headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    let defaults: [(HeaderName, &'static str); 5] = [
        (CONTENT_SECURITY_POLICY, NON_PAGE_CSP),
        (X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (X_FRAME_OPTIONS, "DENY"),
        (REFERRER_POLICY, "same-origin"),
        (CACHE_CONTROL, "no-store"),
    ];
    for (name, value) in defaults {
        if !headers.contains_key(&name) {
            headers.insert(name, HeaderValue::from_static(value));
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_policy_allows_its_own_nonce_and_no_other_inline_code() {
        let policy = page_csp("abc123");
        assert!(policy.contains("script-src 'self' 'nonce-abc123' 'wasm-unsafe-eval';"), "{policy}");
        assert!(policy.contains("style-src 'self' 'nonce-abc123';"), "{policy}");
        assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
        assert!(!policy.contains("unsafe-inline") && !policy.contains("'unsafe-eval'"), "{policy}");
        assert!(HeaderValue::from_str(&policy).is_ok(), "a valid header value");
    }
}
