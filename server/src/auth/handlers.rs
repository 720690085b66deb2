//! The HTTP side of signing in: `POST /auth/login` and `POST /auth/logout` (the form on the
//! Leptos `/login` page posts here, so it works with JavaScript off), and `GET /api/v1/me`.

use crate::api::openapi::Me;
use crate::auth::{outage, session, AuthError, Mode};
use crate::AppState;
use axum::extract::{ConnectInfo, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::post;
use axum::{Extension, Form, Json, Router};
use lastword_core::Principal;
use serde::Deserialize;
use std::net::SocketAddr;
use tower_sessions::Session;

/// `/auth/login` and `/auth/logout`.
pub fn routes() -> Router<AppState> {
    Router::new().route("/auth/login", post(login)).route("/auth/logout", post(logout))
}

/// The login form's fields.
#[derive(Debug, Deserialize)]
pub struct LoginForm {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub password: String,
    #[serde(default)]
    pub next: String,
}

/// `next` if it is a path on this site (one leading `/`), else `/`: never an open redirect.
pub fn safe_next(next: &str) -> &str {
    let local = next.starts_with('/')
        && !next.starts_with("//")
        && !next.contains('\\')
        && next.chars().all(|c| c.is_ascii() && !c.is_ascii_control());
    if local {
        next
    } else {
        "/"
    }
}

/// `/login?next=…` (with `error=1` after a failed attempt).
pub fn login_url(next: &str, error: bool) -> String {
    let next: String = url::form_urlencoded::byte_serialize(safe_next(next).as_bytes()).collect();
    if error {
        format!("/login?error=1&next={next}")
    } else {
        format!("/login?next={next}")
    }
}

/// The session store (the database) failed: 503 with the outage page, not a 500.
fn internal(e: impl std::fmt::Display) -> Response {
    tracing::error!(error = %e, "login: session store failed");
    outage::response("/auth/login")
}

/// Checks the password; on success a fresh session id (no fixation) names the user.
/// Attempts are limited per source, per user name and in hash checks at once
/// ([`throttle`](crate::auth::throttle)): over a limit is `429` with `Retry-After`.
pub async fn login(
    State(state): State<AppState>,
    session: Option<Extension<Session>>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    Form(form): Form<LoginForm>,
) -> Response {
    let (Mode::Users, Some(Extension(session))) = (state.auth.mode, session) else {
        // Local and proxy modes have nobody to sign in.
        return Redirect::to(safe_next(&form.next)).into_response();
    };
    let auth = state.auth.clone();
    let name = form.username.trim().to_string();
    let password = form.password;
    let source = peer.map(|Extension(ConnectInfo(addr))| addr.ip());
    if let Err(refusal) = auth.login_throttle.admit(source, &name) {
        tracing::warn!(user = name, source = ?source, "sign-in attempt refused: too many");
        return refusal.into_response();
    }
    let slot = match auth.login_throttle.check_slot().await {
        Ok(slot) => slot,
        Err(refusal) => {
            tracing::warn!(user = name, "sign-in attempt refused: every hash check is busy");
            return refusal.into_response();
        }
    };
    let checked = {
        let name = name.clone();
        tokio::task::spawn_blocking(move || {
            let _slot = slot;
            auth.users.as_ref()?.verify_password(&name, &password)
        })
        .await
    };
    match checked {
        Ok(Some(principal)) => {
            if let Err(e) = session.cycle_id().await {
                return internal(e);
            }
            if let Err(e) = session.insert(session::USER_KEY, &principal.name).await {
                return internal(e);
            }
            if let Err(e) = session.insert(session::SIGNED_IN_AT_KEY, session::unix_millis_now()).await {
                return internal(e);
            }
            // Written now rather than by the session layer after the response, so that a
            // store that fails answers 503 here instead of an empty 500 from the layer.
            if let Err(e) = session.save().await {
                return internal(e);
            }
            tracing::info!(user = principal.name, role = %principal.role, "signed in");
            Redirect::to(safe_next(&form.next)).into_response()
        }
        Ok(None) => {
            tracing::warn!(user = name, "failed sign-in");
            Redirect::to(&login_url(&form.next, true)).into_response()
        }
        Err(e) => internal(e),
    }
}

/// Ends the session (its row is deleted) and goes back to the login page.
pub async fn logout(session: Option<Extension<Session>>) -> Response {
    if let Some(Extension(session)) = session {
        if let Err(e) = session.flush().await {
            return internal(e);
        }
    }
    Redirect::to("/login").into_response()
}

/// `GET /api/v1/me`: who the server thinks you are, and the server's mode.
#[utoipa::path(get, path = "/me", tag = "auth",
    responses((status = 200, description = "You", body = crate::api::openapi::Me), crate::api::openapi::Refusals))]
pub async fn me(
    State(state): State<AppState>,
    principal: Option<Extension<Principal>>,
) -> Result<Json<Me>, AuthError> {
    let Extension(p) = principal.ok_or(AuthError::Unauthenticated)?;
    Ok(Json(Me { name: p.name, role: p.role, via: p.via, mode: state.auth.mode }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_paths_are_followed_after_login() {
        assert_eq!(safe_next("/failures?worker=w1"), "/failures?worker=w1");
        assert_eq!(safe_next("/"), "/");
        for bad in
            ["//evil.example", "https://evil.example", "/\\evil.example", "evil", "", "/\u{e9}", "/a\nb"]
        {
            assert_eq!(safe_next(bad), "/", "{bad:?}");
        }
        assert_eq!(login_url("/tasks/3?x=1", true), "/login?error=1&next=%2Ftasks%2F3%3Fx%3D1");
        assert_eq!(login_url("//evil.example", false), "/login?next=%2F");
    }
}
