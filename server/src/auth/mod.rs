//! Who may act (docs/auth.md). One middleware, applied to every route, decides the request's
//! [`Principal`] — the local operator, a signed-in user, an API token, or the user a trusted
//! proxy names — and puts it in the request extensions, where API handlers
//! (`Extension<Principal>`, [`RequireOperator`]) and the Leptos app
//! (`app::auth::current_principal()`) find it. The same middleware turns away requests without
//! one (401 JSON for the API, the login page for browsers), cross-site writes
//! ([`cross_origin`]), and requests sent to a host name we do not serve ([`host`]).

pub mod config;
pub mod cross_origin;
pub mod handlers;
pub mod host;
pub mod outage;
pub mod proxy;
pub mod session;
pub mod throttle;
pub mod users;

use crate::api::openapi::ErrorBody;
use crate::AppState;
use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Json;
use cross_origin::PublicOrigin;
use host::AllowedHosts;
use lastword_core::{Principal, Role, SignIn};
use lastword_store::Db;
use proxy::ProxyConfig;
use session::SessionBackend;
use std::net::SocketAddr;
use std::sync::Arc;
use throttle::{LoginLimits, LoginThrottle};
use users::Users;

/// How principals are recognised: `lastword serve --auth`, and the `mode` of `GET /api/v1/me`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// One local operator, no login (loopback addresses only).
    Local,
    /// Users with passwords and API tokens, from --users-file or LASTWORD_USERS.
    Users,
    /// An authenticating reverse proxy names the user in a header.
    Proxy,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Local => "local",
            Mode::Users => "users",
            Mode::Proxy => "proxy",
        }
    }
}

/// The authentication set-up of a server, built once at start-up.
#[derive(Clone, Debug)]
pub struct Auth {
    pub mode: Mode,
    /// The trusted proxy and its headers: set in proxy mode, and only there.
    pub proxy: Option<ProxyConfig>,
    /// Password users and API tokens: required in users mode, optional (tokens only) in
    /// proxy mode.
    pub users: Option<Users>,
    /// Login sessions (users mode).
    pub sessions: Option<SessionBackend>,
    /// Mark the session cookie `Secure` (the dashboard is reached over HTTPS).
    pub cookie_secure: bool,
    /// Extra origins a state-changing browser request may come from.
    pub public_origins: Vec<PublicOrigin>,
    /// Host names requests may be sent to (loopback always).
    pub allowed_hosts: AllowedHosts,
    /// Limits on sign-in attempts (users mode).
    pub login_throttle: Arc<LoginThrottle>,
    /// How long a login session lasts after sign-in, however active (users mode).
    pub session_lifetime: std::time::Duration,
}

impl Auth {
    /// Local mode: everyone is the local operator.
    pub fn local() -> Auth {
        Auth {
            mode: Mode::Local,
            proxy: None,
            users: None,
            sessions: None,
            cookie_secure: false,
            public_origins: vec![],
            allowed_hosts: AllowedHosts::default(),
            login_throttle: Arc::new(LoginThrottle::new(LoginLimits::default())),
            session_lifetime: session::ABSOLUTE_LIFETIME,
        }
    }

    /// Users mode, with login sessions kept in `db` (their table is created if missing).
    pub async fn users(users: Users, db: &Db) -> anyhow::Result<Auth> {
        let sessions = SessionBackend::open(db).await?;
        Ok(Auth { mode: Mode::Users, users: Some(users), sessions: Some(sessions), ..Auth::local() })
    }

    /// Proxy mode; `tokens` also lets scripts in with `Authorization: Bearer`.
    pub fn proxy(proxy: ProxyConfig, tokens: Option<Users>) -> Auth {
        Auth { mode: Mode::Proxy, proxy: Some(proxy), users: tokens, ..Auth::local() }
    }

    pub fn with_cookie_secure(mut self, secure: bool) -> Auth {
        self.cookie_secure = secure;
        self
    }

    pub fn with_allowed_hosts(mut self, hosts: AllowedHosts) -> Auth {
        self.allowed_hosts = hosts;
        self
    }

    pub fn with_session_lifetime(mut self, lifetime: std::time::Duration) -> Auth {
        self.session_lifetime = lifetime;
        self
    }

    pub fn with_login_limits(mut self, limits: LoginLimits) -> Auth {
        self.login_throttle = Arc::new(LoginThrottle::new(limits));
        self
    }

    pub fn with_public_origins(mut self, origins: Vec<PublicOrigin>) -> Auth {
        self.public_origins = origins;
        self
    }

    /// One line for the start-up log.
    pub fn describe(&self) -> String {
        match (self.mode, &self.proxy) {
            (Mode::Local, _) => "local (loopback only)".to_string(),
            (Mode::Users, _) => {
                format!("users ({})", self.users.as_ref().map(Users::summary).unwrap_or_default())
            }
            (Mode::Proxy, None) => "proxy (no proxy configured: nobody is let in)".to_string(),
            (Mode::Proxy, Some(p)) => {
                let mut s = format!("proxy, trusting {} from {}", p.user_header, p.trusted_summary());
                if let Some(users) = &self.users {
                    s.push_str(&format!("; bearer tokens: {}", users.token_count()));
                }
                s
            }
        }
    }
}

/// The principal of local mode.
pub fn local_principal() -> Principal {
    Principal { name: "local".to_string(), role: Role::Operator, via: SignIn::Local }
}

/// Why a request was turned away. Answers JSON like every API error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// 401: no credentials (or none we accept).
    #[error("authentication required")]
    Unauthenticated,
    /// 401: a bearer token that matches no configured token.
    #[error("unknown bearer token")]
    BadToken,
    /// 403: signed in, but a viewer.
    #[error("{}", lastword_core::auth::viewer_may_not_act(.0))]
    Forbidden(String),
    /// 403: a browser request on behalf of another site.
    #[error("cross-origin request refused")]
    CrossOrigin,
    /// 421: sent to a host name this server does not serve (DNS rebinding, or a missing
    /// `--allowed-host`).
    #[error("this server does not serve the host {host:?}; if that is its name, start it with --allowed-host {name} (or --public-origin)")]
    MisdirectedHost { host: String, name: String },
}

impl AuthError {
    pub fn status(&self) -> StatusCode {
        match self {
            AuthError::Unauthenticated | AuthError::BadToken => StatusCode::UNAUTHORIZED,
            AuthError::Forbidden(_) | AuthError::CrossOrigin => StatusCode::FORBIDDEN,
            AuthError::MisdirectedHost { .. } => StatusCode::MISDIRECTED_REQUEST,
        }
    }
}

impl IntoResponse for AuthError {
    fn into_response(self) -> Response {
        let (code, message) = match &self {
            AuthError::Unauthenticated => {
                ("unauthorized", "authentication required: sign in, or send Authorization: Bearer <token>")
            }
            AuthError::BadToken => ("unauthorized", "unknown bearer token"),
            AuthError::Forbidden(_) => ("forbidden", ""),
            AuthError::CrossOrigin => ("cross_origin", "cross-origin request refused"),
            AuthError::MisdirectedHost { .. } => ("misdirected_host", ""),
        };
        let message = if message.is_empty() { self.to_string() } else { message.to_string() };
        let mut response =
            (self.status(), Json(ErrorBody { message: Some(message), ..ErrorBody::new(code) }))
                .into_response();
        let challenge = match self {
            AuthError::Unauthenticated => Some("Bearer"),
            AuthError::BadToken => Some(r#"Bearer error="invalid_token""#),
            _ => None,
        };
        if let Some(challenge) = challenge {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
        }
        response
    }
}

/// The principal if it may act: `Unauthenticated` without one, `Forbidden` for a viewer.
pub fn require_operator(principal: Option<&Principal>) -> Result<Principal, AuthError> {
    match principal {
        None => Err(AuthError::Unauthenticated),
        Some(p) if p.can_act() => Ok(p.clone()),
        Some(p) => Err(AuthError::Forbidden(p.name.clone())),
    }
}

/// The principal the middleware put in a request's extensions.
pub fn principal_of(parts: &Parts) -> Option<&Principal> {
    parts.extensions.get::<Principal>()
}

/// Extracts the request's [`Principal`] if it is an operator; rejects with 401 (nobody) or 403
/// JSON (a viewer). For handlers that change something:
///
/// ```text
/// async fn requeue(RequireOperator(who): RequireOperator, Path(id): Path<i64>) -> ... {
///     store.requeue(id, &who.name).await?
/// }
/// ```
#[derive(Clone, Debug)]
pub struct RequireOperator(pub Principal);

impl<S: Send + Sync> FromRequestParts<S> for RequireOperator {
    type Rejection = AuthError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        require_operator(principal_of(parts)).map(RequireOperator)
    }
}

/// Paths anyone may fetch: probes, metrics, the login page and its form, and static files.
fn is_open_path(path: &str, site_root: &str) -> bool {
    matches!(
        path,
        "/healthz" | "/readyz" | "/metrics" | "/login" | "/auth/login" | "/auth/logout" | "/favicon.ico"
    ) || path.starts_with("/pkg/")
        || is_static_file(path, site_root)
}

/// Whether the static-file fallback would serve `path` from the site root.
fn is_static_file(path: &str, site_root: &str) -> bool {
    let relative = path.trim_start_matches('/');
    if relative.is_empty()
        || relative.split('/').any(|seg| seg.is_empty() || seg == "." || seg == ".." || seg.contains('\\'))
    {
        return false;
    }
    std::path::Path::new(site_root).join(relative).is_file()
}

/// `Authorization: Bearer <token>`, if that is what the request carries.
fn bearer_token(headers: &http::HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// The request's `Host` (HTTP/1.1) or authority (HTTP/2).
fn request_host(req: &Request) -> Option<String> {
    req.headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.to_string()))
}

/// The middleware: principal, cross-site check, and the gate. See the module header.
pub async fn middleware(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let auth = &state.auth;
    let path = req.uri().path().to_string();
    let open = is_open_path(&path, &state.leptos_options.site_root);

    // Before anything else: a request to a name we do not serve reads and changes nothing.
    if !matches!(path.as_str(), "/healthz" | "/readyz") {
        if let Some(host) = request_host(&req).filter(|h| !auth.allowed_hosts.allows(h)) {
            tracing::warn!(host, path, "refused a request for a host this server does not serve");
            let name = host::name_of(&host).unwrap_or_else(|| host.clone());
            return AuthError::MisdirectedHost { host, name }.into_response();
        }
    }

    let mut by_token = false;
    // A trusted proxy's user comes first: proxies often pass an `Authorization` header of
    // their own (an ID token) upstream, which must neither override the user they name nor be
    // refused as an unknown bearer token.
    let proxy_user = auth.proxy.as_ref().and_then(|proxy| {
        let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
        proxy.principal(peer, req.headers())
    });
    let principal = match auth.mode {
        Mode::Local => Some(local_principal()),
        Mode::Proxy if proxy_user.is_some() => proxy_user,
        mode => match (bearer_token(req.headers()), &auth.users) {
            // A bearer token decides alone: a bad one is refused even next to a good cookie.
            (Some(token), users) => match users.as_ref().and_then(|u| u.token_principal(token)) {
                Some(p) => {
                    by_token = true;
                    Some(p)
                }
                None if open => None,
                None => return AuthError::BadToken.into_response(),
            },
            (None, users) => match mode {
                Mode::Users => {
                    let session = req.extensions().get::<tower_sessions::Session>().cloned();
                    match session_principal(session, users.as_ref(), auth.session_lifetime).await {
                        Ok(principal) => principal,
                        // The sign-in cannot be checked: say the database is down (503), never
                        // "signed out" — the session is still there when it comes back.
                        Err(SessionUnreadable) if !open => return outage::response(&path),
                        Err(SessionUnreadable) => None,
                    }
                }
                Mode::Proxy | Mode::Local => None,
            },
        },
    };

    // Token-authenticated requests carry no ambient credential another site could borrow.
    if !by_token {
        let host = request_host(&req);
        if let Err(why) =
            cross_origin::check(req.method(), req.headers(), host.as_deref(), &auth.public_origins)
        {
            tracing::warn!(method = %req.method(), path, reason = ?why, "refused a cross-origin request");
            return AuthError::CrossOrigin.into_response();
        }
    }

    match principal {
        Some(p) => {
            req.extensions_mut().insert(p);
            next.run(req).await
        }
        None if open => next.run(req).await,
        None if path == "/api" || path.starts_with("/api/") => AuthError::Unauthenticated.into_response(),
        None => match auth.mode {
            Mode::Users => {
                let target = req.uri().path_and_query().map(|pq| pq.as_str()).unwrap_or("/");
                Redirect::to(&handlers::login_url(target, false)).into_response()
            }
            _ => (
                StatusCode::UNAUTHORIZED,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                "Not signed in. This dashboard expects its authenticating proxy in front of it.\n",
            )
                .into_response(),
        },
    }
}

/// The session store could not be read (the database is down), so nobody can be told apart.
#[derive(Debug)]
struct SessionUnreadable;

/// The signed-in user of the request's session, if they are still configured. A record that
/// does not decode is no session; a store that does not answer is [`SessionUnreadable`].
/// A session past its absolute `lifetime` is ended (its row deleted) and counts as none.
async fn session_principal(
    session: Option<tower_sessions::Session>,
    users: Option<&Users>,
    lifetime: std::time::Duration,
) -> Result<Option<Principal>, SessionUnreadable> {
    let Some(session) = session else { return Ok(None) };
    let unreadable = |e: tower_sessions::session::Error| match e {
        tower_sessions::session::Error::Store(tower_sessions::session_store::Error::Backend(e)) => {
            tracing::warn!(error = %e, "the session store is unreachable; answering 503");
            Err(SessionUnreadable)
        }
        e => {
            tracing::error!(error = %e, "a session record did not decode; treating it as signed out");
            Ok(None)
        }
    };
    let name = match session.get::<String>(session::USER_KEY).await {
        Ok(Some(name)) => name,
        Ok(None) => return Ok(None),
        Err(e) => return unreadable(e),
    };
    let signed_in_at = match session.get::<i64>(session::SIGNED_IN_AT_KEY).await {
        Ok(at) => at,
        Err(e) => return unreadable(e),
    };
    if session::outlived(signed_in_at, lifetime, session::unix_millis_now()) {
        tracing::info!(user = name, "session reached its absolute lifetime; signing out");
        if let Err(e) = session.flush().await {
            tracing::warn!(error = %e, "deleting an expired session failed");
        }
        return Ok(None);
    }
    let principal = users.and_then(|u| u.session_principal(&name));
    if principal.is_none() {
        tracing::info!(user = name, "session of a user no longer configured");
    }
    Ok(principal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn viewers_may_not_act() {
        let p = |role| Principal { name: "vera".into(), role, via: SignIn::Token };
        assert_eq!(require_operator(None), Err(AuthError::Unauthenticated));
        assert_eq!(require_operator(Some(&p(Role::Viewer))), Err(AuthError::Forbidden("vera".into())));
        assert_eq!(require_operator(Some(&p(Role::Operator))), Ok(p(Role::Operator)));
        assert_eq!(
            AuthError::Forbidden("vera".into()).to_string(),
            "viewer vera may not act; operator role required"
        );
    }

    #[test]
    fn bearer_tokens_and_open_paths() {
        let mut h = http::HeaderMap::new();
        h.insert(header::AUTHORIZATION, "bearer  lw_abc ".parse().unwrap());
        assert_eq!(bearer_token(&h), Some("lw_abc"));
        h.insert(header::AUTHORIZATION, "Basic YTpi".parse().unwrap());
        assert_eq!(bearer_token(&h), None);
        for open in ["/healthz", "/metrics", "/login", "/pkg/lastword.js", "/favicon.ico"] {
            assert!(is_open_path(open, "/nonexistent"), "{open}");
        }
        for closed in ["/", "/failures", "/tasks/1.5", "/api/v1/runs", "/api/fn/totals", "/pkg"] {
            assert!(!is_open_path(closed, "/nonexistent"), "{closed}");
        }
        let dir = std::env::temp_dir();
        let name = format!("lastword-auth-test-{}.txt", std::process::id());
        std::fs::write(dir.join(&name), "x").unwrap();
        assert!(is_open_path(&format!("/{name}"), dir.to_str().unwrap()));
        assert!(!is_open_path(&format!("/../{name}"), dir.to_str().unwrap()));
        std::fs::remove_file(dir.join(&name)).unwrap();
    }
}
