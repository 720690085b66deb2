//! Who may act: the three authentication modes, sessions, tokens, and cross-site protection,
//! driven through the router the binary serves (docs/auth.md).

mod common;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{header, Request, StatusCode};
use axum::routing::post;
use axum::Router;
use common::{credentials, form, hashes, send, Answer};
use lastword_core::Tokens;
use lastword_server::auth::config::AuthArgs;
use lastword_server::auth::host::AllowedHosts;
use lastword_server::auth::proxy::{header_name, name_list, parse_trusted, ProxyConfig};
use lastword_server::auth::throttle::LoginLimits;
use lastword_server::auth::users::Users;
use lastword_server::auth::Mode;
use lastword_server::{router_with, state::leptos_options, AppState, Auth, RequireOperator};
use lastword_store::testing::{exec, insert_task, scalar, sqlite_memory};
use lastword_store::{store_for, Db};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The real router plus `POST /api/v1/test/act`, an operator-only route that counts its runs.
fn app(db: &Db, auth: Auth) -> (Router, Arc<AtomicUsize>) {
    let store = store_for(db.clone(), Tokens::default());
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let extra = Router::new().route(
        "/api/v1/test/act",
        post(move |RequireOperator(who): RequireOperator| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                format!("acted as {}", who.name)
            }
        }),
    );
    (router_with(AppState::with_auth(leptos_options(), store, auth), extra), runs)
}

async fn users_app(db: &Db, toml: &str) -> (Router, Arc<AtomicUsize>) {
    let auth = Auth::users(Users::parse(toml).unwrap(), db).await.unwrap();
    app(db, auth)
}

fn get(uri: &str) -> axum::http::request::Builder {
    Request::get(uri)
}

async fn login(app: &Router, user: &str, password: &str, next: &str) -> Answer {
    let next: String = url::form_urlencoded::byte_serialize(next.as_bytes()).collect();
    send(app, form("/auth/login", &format!("username={user}&password={password}&next={next}"))).await
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

// ---------------------------------------------------------------- local mode

#[tokio::test]
async fn local_mode_gives_the_local_operator_without_login() {
    let db = sqlite_memory().await;
    let (app, runs) = app(&db, Auth::local());
    let me = send(&app, get("/api/v1/me").body(Body::empty()).unwrap()).await;
    assert_eq!(me.status, StatusCode::OK, "{}", me.body);
    let me = me.json();
    assert_eq!((me["name"].as_str(), me["role"].as_str()), (Some("local"), Some("operator")));
    assert_eq!((me["via"].as_str(), me["mode"].as_str()), (Some("local"), Some("local")));

    let acted = send(&app, Request::post("/api/v1/test/act").body(Body::empty()).unwrap()).await;
    assert_eq!(acted.status, StatusCode::OK, "{}", acted.body);
    assert_eq!(acted.body, "acted as local");
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    let page = send(&app, get("/").body(Body::empty()).unwrap()).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("local operator"), "the header says who: {}", page.body);
    assert!(!page.body.contains("/auth/logout"), "nothing to log out of: {}", page.body);
}

#[tokio::test]
async fn local_mode_refuses_cross_site_writes_so_no_web_page_can_act_through_the_browser() {
    let db = sqlite_memory().await;
    let (app, runs) = app(&db, Auth::local());
    let from_evil = send(
        &app,
        Request::post("/api/v1/test/act")
            .header("origin", "http://evil.example")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(from_evil.status, StatusCode::FORBIDDEN);
    assert_eq!(from_evil.json()["error"], "cross_origin");
    assert_eq!(from_evil.json()["message"], "cross-origin request refused");
    // Leptos server functions too.
    let server_fn = send(
        &app,
        Request::post("/api/fn/totals")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header("sec-fetch-site", "cross-site")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(server_fn.status, StatusCode::FORBIDDEN, "{}", server_fn.body);
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the handler never ran");
}

// ---------------------------------------------------------------- users mode: the gate

/// DNS rebinding: a page on `rebind.example` that points its name at 127.0.0.1 is same-origin
/// to the browser, so only `Host` tells it apart. Refused (421) in every mode, reads and writes
/// alike, with nothing done; the names we serve, and the probes, still answer.
#[tokio::test]
async fn requests_for_a_host_we_do_not_serve_are_refused_in_every_mode() {
    let db = sqlite_memory().await;
    let allowed = AllowedHosts::new(["dash.example.com"]);
    let fx = credentials();
    let users = Auth::users(Users::parse(&fx.toml).unwrap(), &db).await.unwrap();
    for (mode, auth) in [("local", Auth::local()), ("users", users)] {
        let (app, runs) = app(&db, auth.with_allowed_hosts(allowed.clone()));
        let with_host = |req: axum::http::request::Builder, host: &str| {
            req.header(header::HOST, host).body(Body::empty()).unwrap()
        };
        for host in ["rebind.example:3000", "127.0.0.1.rebind.example", "10.0.0.9:3000"] {
            let page = send(&app, with_host(get("/"), host)).await;
            assert_eq!(page.status, StatusCode::MISDIRECTED_REQUEST, "{mode} {host}: {}", page.body);
            assert!(page.body.contains("--allowed-host"), "says what to do: {}", page.body);
            let api = send(&app, with_host(get("/api/v1/runs"), host)).await;
            assert_eq!(api.status, StatusCode::MISDIRECTED_REQUEST, "{mode} {host}");
            let act = send(
                &app,
                with_host(
                    Request::post("/api/v1/test/act")
                        .header(header::AUTHORIZATION, bearer(&fx.operator_token)),
                    host,
                ),
            )
            .await;
            assert_eq!(act.status, StatusCode::MISDIRECTED_REQUEST, "{mode} {host}: even with a good token");
        }
        assert_eq!(runs.load(Ordering::SeqCst), 0, "{mode}: nothing acted");
        assert_eq!(
            send(&app, with_host(get("/readyz"), "10.0.0.9:3000")).await.status,
            StatusCode::OK,
            "probes answer"
        );
        for host in
            ["127.0.0.1:3000", "localhost:3000", "[::1]:3000", "dash.example.com", "DASH.example.com:443"]
        {
            let me = send(
                &app,
                with_host(get("/api/v1/me").header(header::AUTHORIZATION, bearer(&fx.operator_token)), host),
            )
            .await;
            assert_eq!(me.status, StatusCode::OK, "{mode} {host}: {}", me.body);
        }
    }
}

#[tokio::test]
async fn users_mode_without_credentials_is_401_for_the_api_and_the_login_page_for_browsers() {
    let db = sqlite_memory().await;
    let f = credentials();
    let (app, _) = users_app(&db, &f.toml).await;

    let api = send(&app, get("/api/v1/runs").body(Body::empty()).unwrap()).await;
    assert_eq!(api.status, StatusCode::UNAUTHORIZED);
    assert_eq!(api.header(header::WWW_AUTHENTICATE), Some("Bearer"));
    assert_eq!(api.json()["error"], "unauthorized");
    let me = send(&app, get("/api/v1/me").body(Body::empty()).unwrap()).await;
    assert_eq!(me.status, StatusCode::UNAUTHORIZED);
    let server_fn = send(&app, form("/api/fn/totals", "")).await;
    assert_eq!(server_fn.status, StatusCode::UNAUTHORIZED, "{}", server_fn.body);

    let page = send(&app, get("/failures?worker=w1").body(Body::empty()).unwrap()).await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    assert_eq!(page.header(header::LOCATION), Some("/login?next=%2Ffailures%3Fworker%3Dw1"));

    // Open: probes, metrics, and the login page itself.
    for open in ["/healthz", "/readyz", "/metrics"] {
        let answer = send(&app, get(open).body(Body::empty()).unwrap()).await;
        assert_eq!(answer.status, StatusCode::OK, "{open}: {}", answer.body);
    }
    let login_page = send(&app, get("/login?next=%2Ffailures&error=1").body(Body::empty()).unwrap()).await;
    assert_eq!(login_page.status, StatusCode::OK);
    assert!(login_page.body.contains(r#"action="/auth/login""#), "{}", login_page.body);
    assert!(login_page.body.contains(r#"name="next""#) && login_page.body.contains("/failures"));
    assert!(login_page.body.contains("login-error"), "?error=1 shows the message");
}

// ---------------------------------------------------------------- users mode: tokens

#[tokio::test]
async fn tokens_viewers_read_operators_act_unknown_ones_are_refused() {
    let db = sqlite_memory().await;
    let f = credentials();
    let (app, runs) = users_app(&db, &f.toml).await;
    let act = |token: &str| {
        Request::post("/api/v1/test/act")
            .header(header::AUTHORIZATION, bearer(token))
            .body(Body::empty())
            .unwrap()
    };

    let read = send(
        &app,
        get("/api/v1/runs")
            .header(header::AUTHORIZATION, bearer(&f.viewer_token))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.body);

    let viewer = send(&app, act(&f.viewer_token)).await;
    assert_eq!(viewer.status, StatusCode::FORBIDDEN, "{}", viewer.body);
    assert_eq!(viewer.json()["error"], "forbidden");
    assert_eq!(viewer.json()["message"], "viewer watcher may not act; operator role required");
    assert_eq!(runs.load(Ordering::SeqCst), 0);

    let operator = send(&app, act(&f.operator_token)).await;
    assert_eq!(operator.status, StatusCode::OK, "{}", operator.body);
    assert_eq!(operator.body, "acted as deploy-bot");
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    let me = send(
        &app,
        get("/api/v1/me")
            .header(header::AUTHORIZATION, bearer(&f.operator_token))
            .body(Body::empty())
            .unwrap(),
    )
    .await
    .json();
    assert_eq!(
        (me["name"].as_str(), me["via"].as_str(), me["mode"].as_str()),
        (Some("deploy-bot"), Some("token"), Some("users"))
    );

    let unknown = send(&app, act("lw_not-a-real-token")).await;
    assert_eq!(unknown.status, StatusCode::UNAUTHORIZED);
    assert!(unknown.header(header::WWW_AUTHENTICATE).unwrap().starts_with("Bearer"));
    // A token is exempt from the cross-site check: scripts send no cookie to abuse.
    let scripted = Request::post("/api/v1/test/act")
        .header(header::AUTHORIZATION, bearer(&f.operator_token))
        .header("origin", "http://elsewhere.example")
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&app, scripted).await.status, StatusCode::OK);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

// ---------------------------------------------------------------- users mode: sessions

#[tokio::test]
async fn a_wrong_password_redirects_back_with_an_error_and_no_session() {
    let db = sqlite_memory().await;
    let (app, _) = users_app(&db, &credentials().toml).await;
    let wrong = login(&app, "alice", "nope", "/failures").await;
    assert_eq!(wrong.status, StatusCode::SEE_OTHER);
    assert_eq!(wrong.header(header::LOCATION), Some("/login?error=1&next=%2Ffailures"));
    assert_eq!(wrong.session_cookie(), None);
    let nobody = login(&app, "mallory", "alice-pw", "/").await;
    assert_eq!(nobody.header(header::LOCATION), Some("/login?error=1&next=%2F"));
    assert_eq!(nobody.session_cookie(), None);
}

#[tokio::test]
async fn login_gives_a_session_that_names_the_user_until_logout() {
    let db = sqlite_memory().await;
    let f = credentials();
    let (app, _) = users_app(&db, &f.toml).await;
    let ok = login(&app, "alice", "alice-pw", "/failures?worker=w1").await;
    assert_eq!(ok.status, StatusCode::SEE_OTHER, "{}", ok.body);
    assert_eq!(ok.header(header::LOCATION), Some("/failures?worker=w1"));
    let set_cookie = ok.header(header::SET_COOKIE).unwrap().to_string();
    assert!(set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Lax"), "{set_cookie}");
    assert!(!set_cookie.contains("Secure"), "{set_cookie}");
    assert!(set_cookie.contains("Max-Age=43200"), "12 hours: {set_cookie}");
    let cookie = ok.session_cookie().unwrap();

    let me = send(&app, get("/api/v1/me").header(header::COOKIE, &cookie).body(Body::empty()).unwrap()).await;
    assert_eq!(me.status, StatusCode::OK, "{}", me.body);
    let me = me.json();
    assert_eq!((me["name"].as_str(), me["role"].as_str()), (Some("alice"), Some("operator")));
    assert_eq!((me["via"].as_str(), me["mode"].as_str()), (Some("session"), Some("users")));

    let page = send(&app, get("/").header(header::COOKIE, &cookie).body(Body::empty()).unwrap()).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("alice · operator"), "{}", page.body);
    assert!(page.body.contains(r#"action="/auth/logout""#), "{}", page.body);

    // A bad token is refused even next to a good session.
    let mixed =
        get("/api/v1/me").header(header::COOKIE, &cookie).header(header::AUTHORIZATION, "Bearer wrong");
    assert_eq!(send(&app, mixed.body(Body::empty()).unwrap()).await.status, StatusCode::UNAUTHORIZED);

    let out = Request::post("/auth/logout").header(header::COOKIE, &cookie).body(Body::empty()).unwrap();
    let out = send(&app, out).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert_eq!(out.header(header::LOCATION), Some("/login"));
    let after =
        send(&app, get("/api/v1/me").header(header::COOKIE, &cookie).body(Body::empty()).unwrap()).await;
    assert_eq!(after.status, StatusCode::UNAUTHORIZED, "the session ended: {}", after.body);
}

/// The database holds the sessions. While it is down nobody can be told apart, and saying so
/// (503) is the truth; a redirect to the login page or a 401 would send the on-call person to
/// a password prompt mid-incident and make scripts think their credentials are bad.
#[tokio::test]
async fn a_database_outage_in_users_mode_answers_503_with_the_banner_not_a_logout() {
    let db = sqlite_memory().await;
    let f = credentials();
    let (app, _) = users_app(&db, &f.toml).await;
    let cookie = login(&app, "alice", "alice-pw", "/").await.session_cookie().unwrap();
    db.close().await;

    let with_cookie = |uri: &str| get(uri).header(header::COOKIE, &cookie).body(Body::empty()).unwrap();
    let api = send(&app, with_cookie("/api/v1/me")).await;
    assert_eq!(api.status, StatusCode::SERVICE_UNAVAILABLE, "{}", api.body);
    assert_eq!(api.json()["error"], "database unavailable");
    assert_eq!(api.header(header::RETRY_AFTER), Some("5"));
    let server_fn = send(&app, with_cookie("/api/fn/totals")).await;
    assert_eq!(server_fn.status, StatusCode::SERVICE_UNAVAILABLE, "{}", server_fn.body);

    let page = send(&app, with_cookie("/failures")).await;
    assert_eq!(page.status, StatusCode::SERVICE_UNAVAILABLE, "{}", page.body);
    assert_eq!(page.header(header::LOCATION), None, "not sent to the login page");
    assert!(page.body.contains(r#"data-testid="banner-db-down""#), "{}", page.body);
    assert!(page.header(header::CONTENT_TYPE).unwrap().starts_with("text/html"));
    // The cookie is neither cleared nor replaced: the person is still signed in afterwards.
    for answer in [&api, &page] {
        assert_eq!(answer.session_cookie(), None, "{:?}", answer.headers);
    }
    // Signing in during the outage says the same instead of "wrong password" or a 500.
    let retry = login(&app, "alice", "alice-pw", "/").await;
    assert_eq!(retry.status, StatusCode::SERVICE_UNAVAILABLE, "{}", retry.body);
    // Without a session there is nothing to check: still the ordinary answers.
    let anonymous = send(&app, get("/api/v1/me").body(Body::empty()).unwrap()).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
}

/// A sign-in from `peer` (the TCP source the throttle keys on).
async fn login_from(app: &Router, peer: &str, user: &str, password: &str) -> Answer {
    let mut request = form("/auth/login", &format!("username={user}&password={password}&next=%2F"));
    request.extensions_mut().insert(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
    send(app, request).await
}

#[tokio::test]
async fn sign_in_attempts_are_limited_per_user_name_and_per_source_with_429_and_retry_after() {
    let db = sqlite_memory().await;
    let f = credentials();
    let limits = LoginLimits {
        per_source_burst: 6,
        per_source_every: Duration::from_secs(60),
        per_user_burst: 3,
        per_user_every: Duration::from_secs(30),
        ..LoginLimits::default()
    };
    let auth = Auth::users(Users::parse(&f.toml).unwrap(), &db).await.unwrap().with_login_limits(limits);
    let (app, _) = app(&db, auth);

    // Guessing alice's password from several sources: three tries, then 429 even for the
    // right password, with no session.
    for peer in ["10.0.0.1:1000", "10.0.0.2:1000", "10.0.0.3:1000"] {
        let wrong = login_from(&app, peer, "alice", "guess").await;
        assert_eq!(wrong.header(header::LOCATION), Some("/login?error=1&next=%2F"), "{}", wrong.body);
    }
    let refused = login_from(&app, "10.0.0.4:1000", "alice", "alice-pw").await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS, "{}", refused.body);
    let wait: u64 = refused.header(header::RETRY_AFTER).unwrap().parse().unwrap();
    assert!((1..=30).contains(&wait), "Retry-After {wait}");
    assert_eq!(refused.session_cookie(), None);
    assert!(refused.body.contains("Too many sign-in attempts"), "{}", refused.body);

    // Another person is not locked out by that.
    let vera = login_from(&app, "10.0.0.4:1000", "vera", "vera-pw").await;
    assert_eq!(vera.header(header::LOCATION), Some("/"), "{}", vera.body);
    assert!(vera.session_cookie().is_some());

    // One source trying many names runs out of its own budget (6), whatever the names.
    let mut statuses = vec![];
    for i in 0..7 {
        statuses.push(login_from(&app, "10.9.9.9:1000", &format!("nobody{i}"), "x").await.status);
    }
    assert_eq!(&statuses[..6], &[StatusCode::SEE_OTHER; 6], "{statuses:?}");
    assert_eq!(statuses[6], StatusCode::TOO_MANY_REQUESTS, "{statuses:?}");
    let refused_total = 1 + statuses.iter().filter(|s| **s == StatusCode::TOO_MANY_REQUESTS).count();
    println!(
        "sign-in throttle: {} attempts sent, {refused_total} refused with 429",
        3 + 1 + 1 + statuses.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hash_checks_run_a_bounded_number_at_once_and_the_rest_get_429() {
    let db = sqlite_memory().await;
    let f = credentials();
    let limits = LoginLimits { concurrent_checks: 1, check_wait: Duration::ZERO, ..LoginLimits::default() };
    let auth = Auth::users(Users::parse(&f.toml).unwrap(), &db).await.unwrap().with_login_limits(limits);
    let (app, _) = app(&db, auth);
    let attempts = 8;
    let answers = futures::future::join_all((0..attempts).map(|i| {
        let app = app.clone();
        tokio::spawn(
            async move { login_from(&app, &format!("10.1.0.{i}:1000"), &format!("user{i}"), "x").await },
        )
    }))
    .await;
    let statuses: Vec<StatusCode> = answers.into_iter().map(|a| a.unwrap().status).collect();
    let busy = statuses.iter().filter(|s| **s == StatusCode::TOO_MANY_REQUESTS).count();
    let checked = statuses.iter().filter(|s| **s == StatusCode::SEE_OTHER).count();
    assert_eq!(busy + checked, attempts, "only 303 or 429: {statuses:?}");
    assert!(busy >= 1 && checked >= 1, "one check at a time, the others refused: {statuses:?}");
    println!("concurrent sign-ins: {attempts} sent, {checked} checked, {busy} refused as busy");
}

#[tokio::test]
async fn a_session_ends_at_its_absolute_lifetime_however_active_it_is() {
    let db = sqlite_memory().await;
    let f = credentials();
    let lifetime = Duration::from_millis(600);
    let auth =
        Auth::users(Users::parse(&f.toml).unwrap(), &db).await.unwrap().with_session_lifetime(lifetime);
    let (app, _) = app(&db, auth);
    let cookie = login(&app, "alice", "alice-pw", "/").await.session_cookie().unwrap();
    let me = |cookie: String| {
        let app = app.clone();
        async move {
            send(&app, get("/api/v1/me").header(header::COOKIE, cookie).body(Body::empty()).unwrap()).await
        }
    };
    // Active all along (each request restarts the inactivity clock)…
    for _ in 0..2 {
        assert_eq!(me(cookie.clone()).await.status, StatusCode::OK);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(lifetime).await;
    // …and still signed out once the lifetime has passed; the cookie is cleared.
    let ended = me(cookie.clone()).await;
    assert_eq!(ended.status, StatusCode::UNAUTHORIZED, "{}", ended.body);
    let cleared = ended
        .headers
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|c| c.starts_with("lastword_session=") && c.contains("Max-Age=0"));
    assert!(cleared, "{:?}", ended.headers);
    assert_eq!(me(cookie).await.status, StatusCode::UNAUTHORIZED, "the session row is gone");
}

#[tokio::test]
async fn after_login_only_local_paths_are_followed() {
    let db = sqlite_memory().await;
    let (app, _) = users_app(&db, &credentials().toml).await;
    for next in ["//evil.example", "https://evil.example/", "/\\evil.example"] {
        let ok = login(&app, "alice", "alice-pw", next).await;
        assert_eq!(ok.status, StatusCode::SEE_OTHER);
        assert_eq!(ok.header(header::LOCATION), Some("/"), "{next}");
    }
}

#[tokio::test]
async fn the_cookie_is_secure_when_asked() {
    let db = sqlite_memory().await;
    let auth =
        Auth::users(Users::parse(&credentials().toml).unwrap(), &db).await.unwrap().with_cookie_secure(true);
    let (app, _) = app(&db, auth);
    let ok = login(&app, "alice", "alice-pw", "/").await;
    assert!(ok.header(header::SET_COOKIE).unwrap().contains("Secure"));
}

#[tokio::test]
async fn sessions_are_shared_between_servers_and_end_when_the_user_is_removed() {
    let db = sqlite_memory().await;
    let f = credentials();
    let (first, _) = users_app(&db, &f.toml).await;
    let (second, _) = users_app(&db, &f.toml).await;
    let cookie = login(&first, "vera", "vera-pw", "/").await.session_cookie().unwrap();
    let me =
        send(&second, get("/api/v1/me").header(header::COOKIE, &cookie).body(Body::empty()).unwrap()).await;
    assert_eq!(me.status, StatusCode::OK, "another server on the same database knows the session");
    assert_eq!(me.json()["role"], "viewer");

    // The same file without vera.
    let without_vera = f.toml.replace("name = \"vera\"", "name = \"victor\"");
    let (third, _) = users_app(&db, &without_vera).await;
    let me =
        send(&third, get("/api/v1/me").header(header::COOKIE, &cookie).body(Body::empty()).unwrap()).await;
    assert_eq!(me.status, StatusCode::UNAUTHORIZED, "{}", me.body);
}

#[tokio::test]
async fn a_viewer_session_may_not_act() {
    let db = sqlite_memory().await;
    let (app, runs) = users_app(&db, &credentials().toml).await;
    let cookie = login(&app, "vera", "vera-pw", "/").await.session_cookie().unwrap();
    let act = Request::post("/api/v1/test/act")
        .header(header::COOKIE, &cookie)
        .header("sec-fetch-site", "same-origin")
        .body(Body::empty())
        .unwrap();
    let answer = send(&app, act).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    assert_eq!(answer.json()["message"], "viewer vera may not act; operator role required");
    assert_eq!(runs.load(Ordering::SeqCst), 0);

    // The page's own server function says the same with the same status, not a 500.
    let act = Request::post("/api/fn/act")
        .header(header::COOKIE, &cookie)
        .header("sec-fetch-site", "same-origin")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(
            r#"{"task_id": 1, "kind": "requeue", "request": {"reason": "x", "expected_epoch": 1}}"#,
        ))
        .unwrap();
    let answer = send(&app, act).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN, "{}", answer.body);
    assert!(answer.body.contains("viewer vera may not act"), "{}", answer.body);

    // The page's bulk re-queue too, and the attempt is on the record for the task it names.
    let dead = insert_task(&db, "reply", "idempotent", chrono::Utc::now()).await;
    exec(&db, "UPDATE tasks SET status = 'dead', lease_epoch = 1 WHERE id = $1", &[dead.into()]).await;
    let bulk = Request::post("/api/fn/bulk_requeue")
        .header(header::COOKIE, &cookie)
        .header("sec-fetch-site", "same-origin")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(
            serde_json::json!({"query": null, "request": {"reason": "all of it", "preview_token": "00-1", "task_ids": [dead]}})
                .to_string(),
        ))
        .unwrap();
    let answer = send(&app, bulk).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN, "{}", answer.body);
    let recorded = scalar(
        &db,
        "SELECT COUNT(*) FROM operator_actions WHERE task_id = $1 AND actor = 'vera' AND via = 'session' \
         AND outcome = 'refused:forbidden' AND reason = 'all of it' AND epoch_after = 1",
        &[dead.into()],
    )
    .await;
    assert_eq!(recorded, 1, "the viewer's bulk attempt is audited");
    assert_eq!(
        scalar(&db, "SELECT COUNT(*) FROM tasks WHERE id = $1 AND status = 'dead'", &[dead.into()]).await,
        1
    );
}

// ---------------------------------------------------------------- cross-site protection

#[tokio::test]
async fn cross_site_writes_with_a_valid_session_are_refused_before_the_handler_runs() {
    let db = sqlite_memory().await;
    // Served as dash.internal (started with --allowed-host dash.internal).
    let auth = Auth::users(Users::parse(&credentials().toml).unwrap(), &db).await.unwrap();
    let (app, runs) = app(&db, auth.with_allowed_hosts(AllowedHosts::new(["dash.internal"])));
    let cookie = login(&app, "alice", "alice-pw", "/").await.session_cookie().unwrap();
    let act = |headers: &[(&str, &str)]| {
        let mut request = Request::post("/api/v1/test/act")
            .header(header::COOKIE, &cookie)
            .header(header::HOST, "dash.internal:3000");
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        request.body(Body::empty()).unwrap()
    };

    for refused in [
        vec![("origin", "http://evil.example")],
        vec![("sec-fetch-site", "cross-site")],
        vec![("sec-fetch-site", "same-site"), ("origin", "http://other.dash.internal:3000")],
    ] {
        let answer = send(&app, act(&refused)).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{refused:?}");
        assert_eq!(answer.json()["error"], "cross_origin", "{refused:?}");
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the handler never ran");

    for allowed in [
        vec![("sec-fetch-site", "same-origin"), ("origin", "http://dash.internal:3000")],
        vec![("origin", "http://dash.internal:3000")],
        vec![],
    ] {
        let answer = send(&app, act(&allowed)).await;
        assert_eq!(answer.status, StatusCode::OK, "{allowed:?}: {}", answer.body);
    }
    assert_eq!(runs.load(Ordering::SeqCst), 3);

    // The login form too: another site must not sign the browser in to its own account.
    let forged = Request::post("/auth/login")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header("sec-fetch-site", "cross-site")
        .body(Body::from("username=alice&password=alice-pw&next=%2F"))
        .unwrap();
    let forged = send(&app, forged).await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    assert_eq!(forged.session_cookie(), None);
}

#[tokio::test]
async fn a_public_origin_is_trusted_behind_a_host_rewriting_proxy() {
    let db = sqlite_memory().await;
    let origin =
        lastword_server::auth::cross_origin::PublicOrigin::parse("https://lastword.example.com").unwrap();
    // The proxy forwards to the address the server listens on (--addr 10.0.0.5:3000).
    let served = AllowedHosts::new(["10.0.0.5"]);
    let (app, runs) = app(&db, Auth::local().with_public_origins(vec![origin]).with_allowed_hosts(served));
    let request = |origin: &str| {
        Request::post("/api/v1/test/act")
            .header(header::HOST, "10.0.0.5:3000")
            .header("origin", origin)
            .body(Body::empty())
            .unwrap()
    };
    assert_eq!(send(&app, request("https://lastword.example.com")).await.status, StatusCode::OK);
    assert_eq!(send(&app, request("https://evil.example")).await.status, StatusCode::FORBIDDEN);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

// ---------------------------------------------------------------- proxy mode

fn proxy_auth(tokens: Option<Users>) -> Auth {
    let mut proxy = ProxyConfig::new("X-Forwarded-User", parse_trusted("10.0.0.0/8").unwrap()).unwrap();
    proxy.operators = name_list("alice");
    proxy.groups_header = Some(header_name("X-Forwarded-Groups").unwrap());
    proxy.operator_groups = name_list("sre, oncall");
    Auth::proxy(proxy, tokens)
}

fn from_peer(peer: &str, uri: &str, user: Option<&str>, groups: Option<&str>) -> Request<Body> {
    let mut request = Request::get(uri);
    if let Some(user) = user {
        request = request.header("x-forwarded-user", user);
    }
    if let Some(groups) = groups {
        request = request.header("x-forwarded-groups", groups);
    }
    let mut request = request.body(Body::empty()).unwrap();
    request.extensions_mut().insert(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
    request
}

#[tokio::test]
async fn proxy_mode_believes_trusted_peers_only_and_maps_roles() {
    let db = sqlite_memory().await;
    let (app, _) = app(&db, proxy_auth(None));
    let me = |peer: &'static str, user, groups| {
        let app = app.clone();
        async move { send(&app, from_peer(peer, "/api/v1/me", user, groups)).await }
    };

    let alice = me("10.1.2.3:5555", Some("alice"), None).await;
    assert_eq!(alice.status, StatusCode::OK, "{}", alice.body);
    let alice = alice.json();
    assert_eq!((alice["name"].as_str(), alice["role"].as_str()), (Some("alice"), Some("operator")));
    assert_eq!((alice["via"].as_str(), alice["mode"].as_str()), (Some("proxy"), Some("proxy")));
    assert_eq!(me("10.1.2.3:5555", Some("carol"), Some("devs,oncall")).await.json()["role"], "operator");
    assert_eq!(me("10.1.2.3:5555", Some("dave"), Some("devs")).await.json()["role"], "viewer");

    let untrusted = me("192.168.7.7:5555", Some("alice"), None).await;
    assert_eq!(untrusted.status, StatusCode::UNAUTHORIZED, "{}", untrusted.body);
    assert_eq!(me("10.1.2.3:5555", None, None).await.status, StatusCode::UNAUTHORIZED);
    // Pages: a plain 401, not a login form the proxy mode does not have.
    let page = send(&app, from_peer("192.168.7.7:5555", "/", Some("alice"), None)).await;
    assert_eq!(page.status, StatusCode::UNAUTHORIZED);
    assert!(page.body.contains("proxy"), "{}", page.body);
}

#[tokio::test]
async fn proxy_mode_also_takes_tokens_from_a_users_file() {
    let db = sqlite_memory().await;
    let f = credentials();
    let (app, _) = app(&db, proxy_auth(Some(Users::parse(&f.toml).unwrap())));
    let mut request = from_peer("192.168.7.7:5555", "/api/v1/me", None, None);
    request.headers_mut().insert(header::AUTHORIZATION, bearer(&f.viewer_token).parse().unwrap());
    let answer = send(&app, request).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.json()["name"], "watcher");
}

#[tokio::test]
async fn proxy_mode_believes_a_user_header_sent_once_and_lets_the_proxy_pass_its_own_authorization() {
    let db = sqlite_memory().await;
    let f = credentials();
    let (app, runs) = app(&db, proxy_auth(Some(Users::parse(&f.toml).unwrap())));

    // A client's own X-Forwarded-User passed along beside the proxy's: nobody.
    let mut smuggled = from_peer("10.1.2.3:5555", "/api/v1/me", Some("carol"), None);
    smuggled.headers_mut().append("x-forwarded-user", "alice".parse().unwrap());
    let answer = send(&app, smuggled).await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{}", answer.body);

    // Groups sent twice are ignored: carol stays a viewer and may not act.
    let mut groups = from_peer("10.1.2.3:5555", "/api/v1/test/act", Some("carol"), Some("devs"));
    *groups.method_mut() = axum::http::Method::POST;
    groups.headers_mut().append("x-forwarded-groups", "oncall".parse().unwrap());
    assert_eq!(send(&app, groups).await.status, StatusCode::FORBIDDEN);
    assert_eq!(runs.load(Ordering::SeqCst), 0);

    // The proxy's own Authorization (an ID token we do not know) neither overrides the user it
    // names nor gets the request refused; a known token does not override it either.
    for authorization in ["Bearer eyJhbGciOiJSUzI1NiJ9.proxy-id-token", &bearer(&f.operator_token)] {
        let mut request = from_peer("10.1.2.3:5555", "/api/v1/me", Some("dave"), None);
        request.headers_mut().insert(header::AUTHORIZATION, authorization.parse().unwrap());
        let answer = send(&app, request).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
        let me = answer.json();
        assert_eq!((me["name"].as_str(), me["role"].as_str()), (Some("dave"), Some("viewer")), "{me}");
        assert_eq!(me["via"], "proxy");
    }
    // From a peer the proxy is not, an unknown token is still refused.
    let mut request = from_peer("192.168.7.7:5555", "/api/v1/me", None, None);
    request.headers_mut().insert(header::AUTHORIZATION, "Bearer nope".parse().unwrap());
    assert_eq!(send(&app, request).await.status, StatusCode::UNAUTHORIZED);
}

// ---------------------------------------------------------------- start-up validation

#[tokio::test]
async fn users_files_are_validated_at_start() {
    let db = sqlite_memory().await;
    let addr: SocketAddr = "0.0.0.0:3000".parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let build = |text: &str| {
        let path = dir.path().join("users.toml");
        std::fs::write(&path, text).unwrap();
        let args = AuthArgs { mode: Mode::Users, users_file: Some(path), ..AuthArgs::default() };
        let db = db.clone();
        async move { args.build(addr, &db).await.map(|_| ()).map_err(|e| format!("{e:#}")) }
    };
    let good = credentials().toml;
    assert_eq!(build(&good).await, Ok(()));
    let errors = [
        (good.replace("role = \"viewer\"", "role = \"admin\""), "unknown role \"admin\""),
        (good.replace("name = \"vera\"", "name = \"alice\""), "\"alice\" is defined more than once"),
        (good.replace(&hashes().0, "$argon2id$v=19$garbage"), "password_hash is not an argon2 PHC string"),
        (String::new(), "at least one [[user]] or [[token]]"),
    ];
    for (text, expected) in errors {
        let err = build(&text).await.unwrap_err();
        assert!(err.contains(expected), "expected {expected:?} in {err:?}");
        assert!(err.contains("users.toml"), "names the file: {err}");
    }
    let missing = AuthArgs { mode: Mode::Users, ..AuthArgs::default() };
    let err = format!("{:#}", missing.build(addr, &db).await.unwrap_err());
    assert!(err.contains("--users-file"), "{err}");

    let local = AuthArgs::default();
    let err = format!("{:#}", local.build(addr, &db).await.unwrap_err());
    assert!(err.contains("0.0.0.0:3000") && err.contains("loopback"), "{err}");
}
