//! Helpers the HTTP test files share: a request sent through the real router in-process and
//! what came back, and the users and tokens of users mode. One copy, so that a change to how
//! an answer is read, or to the credentials file, is made once.
// Each test binary uses its own share of these.
#![allow(dead_code)]

use axum::body::Body;
use axum::http::{header, HeaderMap, Request, StatusCode};
use axum::Router;
use lastword_server::auth::users::{hash_password, new_token};
use std::sync::OnceLock;
use tower::ServiceExt;

/// A response, read whole.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: header::HeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body as JSON; a body that is not JSON fails the test with the status and the body.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {} {}", self.status, self.body))
    }

    /// `lastword_session=…` from Set-Cookie, ready for a Cookie header.
    pub fn session_cookie(&self) -> Option<String> {
        self.headers
            .get_all(header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find(|c| c.starts_with("lastword_session="))
            .map(|c| c.split(';').next().unwrap().to_string())
    }
}

/// Sends `request` through `app` and reads the whole answer (bodies up to 64 MiB).
pub async fn send(app: &Router, request: Request<Body>) -> Answer {
    let response = app.clone().oneshot(request).await.expect("the router answers");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), 64 << 20).await.expect("a body");
    Answer { status, headers, body: String::from_utf8_lossy(&bytes).into_owned() }
}

/// A form POST, as the login page sends it.
pub fn form(uri: &str, body: &str) -> Request<Body> {
    Request::post(uri)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// The password hashes of alice and vera, made once per test binary (argon2 is slow on purpose).
pub fn hashes() -> &'static (String, String) {
    static HASHES: OnceLock<(String, String)> = OnceLock::new();
    HASHES.get_or_init(|| (hash_password("alice-pw"), hash_password("vera-pw")))
}

/// A users file (alice: operator, password `alice-pw`; vera: viewer, `vera-pw`; tokens
/// `deploy-bot`: operator and `watcher`: viewer) with the two tokens' secrets.
pub struct Credentials {
    pub operator_token: String,
    pub viewer_token: String,
    pub toml: String,
}

pub fn credentials() -> Credentials {
    let (alice, vera) = hashes();
    let (operator_token, operator_sha) = new_token();
    let (viewer_token, viewer_sha) = new_token();
    let toml = format!(
        r#"
[[user]]
name = "alice"
role = "operator"
password_hash = "{alice}"

[[user]]
name = "vera"
role = "viewer"
password_hash = "{vera}"

[[token]]
name = "deploy-bot"
role = "operator"
sha256 = "{operator_sha}"

[[token]]
name = "watcher"
role = "viewer"
sha256 = "{viewer_sha}"
"#
    );
    Credentials { operator_token, viewer_token, toml }
}
