//! Pages rendered once per principal, URL and data version (`lastword_server::shared_pages`):
//! through the real router, with the live hub started so there is a data version to share at.

mod common;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use common::{send, Answer};
use lastword_core::Tokens;
use lastword_server::auth::proxy::{name_list, parse_trusted, ProxyConfig};
use lastword_server::auth::Auth;
use lastword_server::live::{LiveConfig, LiveHub};
use lastword_server::{router, state::leptos_options, AppState};
use lastword_store::testing::sqlite_file;
use lastword_store::{store_for, Db};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The router in proxy mode (a trusted proxy names the user; alice operates, others view),
/// with its hub started and its first refresh published.
async fn app(db: &Db) -> (Router, AppState) {
    let hub = LiveHub::new(
        db.clone(),
        LiveConfig { poll_interval: Duration::from_millis(50), ..LiveConfig::default() },
    );
    hub.ensure_started();
    let mut proxy = ProxyConfig::new("X-Forwarded-User", parse_trusted("10.0.0.0/8").unwrap()).unwrap();
    proxy.operators = name_list("alice");
    let mut state = AppState::with_live(leptos_options(), store_for(db.clone(), Tokens::default()), hub);
    state.auth = std::sync::Arc::new(Auth::proxy(proxy, None));
    for _ in 0..200 {
        if state.live.refresh().is_some() {
            return (router(state.clone()), state);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the hub published no refresh");
}

async fn get_as(app: &Router, user: &str, uri: &str) -> Answer {
    let mut request = Request::get(uri).header("x-forwarded-user", user).body(Body::empty()).unwrap();
    request.extensions_mut().insert(ConnectInfo("10.1.2.3:5555".parse::<SocketAddr>().unwrap()));
    send(app, request).await
}

/// The nonce a page's policy names; the body must carry it on its scripts.
fn nonce_of(page: &Answer) -> String {
    let policy = page.header(header::CONTENT_SECURITY_POLICY).expect("a page policy");
    let start = policy.find("'nonce-").expect("a nonce in the policy") + "'nonce-".len();
    let len = policy[start..].find('\'').unwrap();
    policy[start..start + len].to_string()
}

fn shared(state: &AppState) -> u64 {
    state.shared_pages.stats.shared.load(Ordering::SeqCst)
}

fn rendered(state: &AppState) -> u64 {
    state.shared_pages.stats.rendered.load(Ordering::SeqCst)
}

/// Two requests by `user` for `uri`, the second served from the first's render (the key holds
/// the second, so a pair that straddles one is tried again).
async fn pair_in_one_second(app: &Router, state: &AppState, user: &str, uri: &str) -> (Answer, Answer) {
    for _ in 0..5 {
        let first = get_as(app, user, uri).await;
        let before = shared(state);
        let second = get_as(app, user, uri).await;
        if shared(state) > before {
            return (first, second);
        }
    }
    panic!("no two requests for {uri} were shared in five tries");
}

/// Runs `warm` (a request that leaves a shared page for its key), then `probe`, which must be
/// rendered afresh: both within one second, the second the shared pages are keyed by (a
/// render that a new second caused would prove nothing), tried again otherwise.
async fn rendered_afresh<W, P>(
    state: &AppState,
    what: &str,
    mut warm: impl FnMut() -> W,
    mut probe: impl FnMut() -> P,
) where
    W: std::future::Future<Output = ()>,
    P: std::future::Future<Output = ()>,
{
    for _ in 0..5 {
        let at = lastword_core::read_now();
        warm().await;
        let rendered_before = rendered(state);
        probe().await;
        if lastword_core::read_now() == at {
            assert_eq!(rendered(state), rendered_before + 1, "{what}: rendered afresh");
            return;
        }
    }
    panic!("{what}: no try ran within one second");
}

#[tokio::test]
async fn a_page_asked_twice_at_one_data_version_is_rendered_once_with_a_fresh_nonce_each_time() {
    let (db, _dir) = sqlite_file().await;
    let (app, state) = app(&db).await;
    let (first, second) = pair_in_one_second(&app, &state, "dave", "/failures?cause=timeout").await;
    assert_eq!((first.status, second.status), (StatusCode::OK, StatusCode::OK));
    let (n1, n2) = (nonce_of(&first), nonce_of(&second));
    assert_ne!(n1, n2, "every response has a nonce of its own");
    for (page, nonce) in [(&first, &n1), (&second, &n2)] {
        assert!(page.body.contains(&format!("nonce=\"{nonce}\"")), "the scripts carry the policy's nonce");
    }
    assert!(!second.body.contains(&n1), "the shared page kept none of the first response's nonce");
    assert_eq!(
        first.body.replace(&n1, "NONCE"),
        second.body.replace(&n2, "NONCE"),
        "the same page otherwise"
    );
    let length: usize = second.header(header::CONTENT_LENGTH).unwrap().parse().unwrap();
    assert_eq!(length, second.body.len());
}

#[tokio::test]
async fn a_page_is_never_shared_with_another_principal_url_or_hard_reload_or_across_an_action() {
    let (db, _dir) = sqlite_file().await;
    let (app, state) = app(&db).await;
    let (dave, _) = pair_in_one_second(&app, &state, "dave", "/failures").await;

    assert!(dave.body.contains("dave") && !dave.body.contains("alice"));
    let app = &app;
    let dave_failures = || async move {
        get_as(app, "dave", "/failures").await;
    };
    // Another person, right after dave's page was kept: rendered for them, showing them.
    rendered_afresh(&state, "another person", dave_failures, || async move {
        let alice = get_as(app, "alice", "/failures").await;
        assert!(alice.body.contains("alice") && !alice.body.contains("dave"), "alice sees herself");
    })
    .await;
    // Another URL.
    rendered_afresh(&state, "another URL", dave_failures, || async move {
        get_as(app, "dave", "/failures?cause=crash").await;
    })
    .await;
    // A hard reload: rendered for its request (neither served from dave's page nor kept).
    let mut reloaded = false;
    for _ in 0..5 {
        let at = lastword_core::read_now();
        dave_failures().await;
        let before = (shared(&state), rendered(&state));
        let mut request = Request::get("/failures")
            .header("x-forwarded-user", "dave")
            .header(header::CACHE_CONTROL, "no-cache")
            .body(Body::empty())
            .unwrap();
        request.extensions_mut().insert(ConnectInfo("10.1.2.3:5555".parse::<SocketAddr>().unwrap()));
        assert_eq!(send(app, request).await.status, StatusCode::OK);
        if lastword_core::read_now() == at {
            assert_eq!((shared(&state), rendered(&state)), before, "a hard reload is not shared");
            reloaded = true;
            break;
        }
    }
    assert!(reloaded, "no hard reload within one second in five tries");
    // An operator action drops the shared answers, and with them the pages built from them.
    let invalidations = &state.shared_reads.invalidations;
    rendered_afresh(&state, "after an operator action", dave_failures, || async move {
        invalidations.fetch_add(1, Ordering::SeqCst);
        get_as(app, "dave", "/failures").await;
    })
    .await;
    // (A new data version comes with a new second: the hub publishes a refresh at most once a
    // second, so the second in the key already renders it afresh.)
}

#[tokio::test]
async fn only_the_pages_whose_reads_are_shared_are_shared() {
    let (db, _dir) = sqlite_file().await;
    let (app, state) = app(&db).await;
    for uri in ["/audit", "/leases", "/tasks/1", "/api/v1/runs", "/no-such-page"] {
        let before = (shared(&state), rendered(&state));
        get_as(&app, "dave", uri).await;
        get_as(&app, "dave", uri).await;
        assert_eq!((shared(&state), rendered(&state)), before, "{uri} is rendered for every request");
    }
}
