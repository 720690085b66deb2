//! HTTP tests: the router the binary serves, driven in-process, on a real database.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use lastword_core::Tokens;
use lastword_server::{router, state::leptos_options, AppState};
use lastword_store::testing::{insert_task, sqlite_memory};
use lastword_store::{store_for, Db};
use tower::ServiceExt;

async fn app_on(db: Db) -> (axum::Router, Db) {
    let store = store_for(db.clone(), Tokens::default());
    (router(AppState::new(leptos_options(), store)), db)
}

async fn get(app: &axum::Router, uri: &str) -> (StatusCode, String) {
    let response = app.clone().oneshot(Request::get(uri).body(Body::empty()).unwrap()).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 10 << 20).await.unwrap();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

#[tokio::test]
async fn healthz_and_readyz_answer_when_the_database_is_up() {
    let (app, _db) = app_on(sqlite_memory().await).await;
    let (status, body) = get(&app, "/healthz").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("\"ok\""), "{body}");
    let (status, body) = get(&app, "/readyz").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("\"ready\"") && body.contains("sqlite"), "{body}");
}

#[tokio::test]
async fn readyz_is_503_when_the_database_is_gone() {
    let (app, db) = app_on(sqlite_memory().await).await;
    db.close().await;
    let (status, body) = get(&app, "/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body.contains("database unreachable"), "{body}");
    // The process itself is still alive.
    assert_eq!(get(&app, "/healthz").await.0, StatusCode::OK);
}

#[tokio::test]
async fn readyz_is_503_while_migrations_are_pending() {
    // A database with no migrations applied.
    let db = Db::connect(&lastword_store::DbTarget::SqliteMemory).await.unwrap();
    let (app, _db) = app_on(db).await;
    let (status, body) = get(&app, "/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body.contains("migrations pending"), "{body}");
}

#[tokio::test]
async fn the_overview_is_rendered_on_the_server_with_totals_from_the_store() {
    let db = sqlite_memory().await;
    insert_task(&db, "reply", "unsafe", chrono::Utc::now()).await;
    insert_task(&db, "reply", "idempotent", chrono::Utc::now()).await;
    let (app, _db) = app_on(db).await;
    let (status, html) = get(&app, "/").await;
    assert_eq!(status, StatusCode::OK);
    // `<!>` is Leptos' empty hydration marker after a text it may update: not part of the heading.
    assert!(html.replace("<!>", "").contains("<h1>Overview</h1>"), "{html}");
    assert!(html.contains("/pkg/lastword.js"), "the page loads the wasm bundle: {html}");
    assert!(
        html.contains(r#"data-testid="total-tasks">2<"#),
        "totals are in the server-rendered HTML: {html}"
    );
}

/// A router built while a page renders must not stall that render. Building one generates the
/// page routes, which renders the app with Leptos' resource loading switched off process-wide
/// (leptos#4773); the routes are generated once per process (`page_routes`), so no render can
/// overlap it. When every router generated its own, renders overlapping a build waited out the
/// request timeout: this is what the test files' global lock used to hide.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn building_a_router_never_stalls_a_page_rendering_at_the_same_moment() {
    let db = sqlite_memory().await;
    let task = insert_task(&db, "reply", "unsafe", chrono::Utc::now()).await;
    let task_page = format!("/tasks/{task}");
    let state = AppState::new(leptos_options(), store_for(db.clone(), Tokens::default()));
    let app = router(state.clone());
    /// Stops the builder when the test ends, by a failed assertion too (the runtime waits for
    /// its blocking threads before the test can report).
    struct StopOnDrop(std::sync::Arc<std::sync::atomic::AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(false, std::sync::atomic::Ordering::Relaxed);
        }
    }
    let building = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let stop = StopOnDrop(building.clone());
    let builder = tokio::task::spawn_blocking({
        let building = building.clone();
        move || {
            let mut built = 0u32;
            while building.load(std::sync::atomic::Ordering::Relaxed) {
                drop(router(state.clone()));
                built += 1;
            }
            built
        }
    });
    for round in 0..25 {
        let pages =
            futures::future::join_all(["/", "/failures", task_page.as_str()].map(|uri| get(&app, uri)));
        let answers =
            tokio::time::timeout(std::time::Duration::from_secs(10), pages).await.unwrap_or_else(|_| {
                panic!("round {round}: a page render stalled while routers were being built")
            });
        for (status, body) in answers {
            assert_eq!(status, StatusCode::OK, "round {round}: {body}");
        }
    }
    drop(stop);
    let built = builder.await.unwrap();
    assert!(built > 0, "no router was built during the renders");
}

#[tokio::test]
async fn the_totals_server_function_answers_json() {
    let db = sqlite_memory().await;
    insert_task(&db, "reply", "unsafe", chrono::Utc::now()).await;
    let (app, _db) = app_on(db).await;
    let request = Request::post("/api/fn/totals")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Body::empty())
        .unwrap();
    let response = app.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
    let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(json, serde_json::json!({"tasks": 1, "runs": 0, "effects": 0, "estimated": false}));
}

/// POSTs a server function call with a form or JSON body; its status and body.
async fn call(app: &axum::Router, endpoint: &str, content_type: &str, body: &str) -> (StatusCode, String) {
    let request = Request::post(format!("/api/fn/{endpoint}"))
        .header("content-type", content_type)
        .body(Body::from(body.to_string()))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

/// A server function's refusal carries the status of what went wrong, like the JSON API:
/// bad input 400, no such task 404, database down 503, never a 500 for everything.
#[tokio::test]
async fn server_function_errors_carry_their_status() {
    let (app, db) = app_on(sqlite_memory().await).await;
    let form = "application/x-www-form-urlencoded";
    let (status, body) = call(&app, "workers", form, "window=yesterday").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("window"), "names the parameter: {body}");
    let (status, body) = call(&app, "timeline", form, "minutes=0").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let act =
        r#"{"task_id": 424242, "kind": "requeue", "request": {"reason": "retry", "expected_epoch": 1}}"#;
    let (status, body) = call(&app, "act", "application/json", act).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(body.contains("no task 424242"), "{body}");
    let no_reason =
        r#"{"task_id": 424242, "kind": "requeue", "request": {"reason": " ", "expected_epoch": 1}}"#;
    assert_eq!(call(&app, "act", "application/json", no_reason).await.0, StatusCode::BAD_REQUEST);
    let (status, body) = call(&app, "workers", form, "window=1h").await;
    assert_eq!(status, StatusCode::OK, "{body}");

    db.close().await;
    let (status, body) = call(&app, "workers", form, "window=1h").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body.contains("database unavailable"), "{body}");
}

/// The live timeline's merge reads runs by id: a batch's rows in the page's compact shape, and
/// a batch over the cap refused as bad input (the page then fetches the window instead).
#[tokio::test]
async fn the_timeline_reads_a_batch_of_runs_by_id_and_refuses_too_many() {
    use lastword_store::testing::scalar;
    let db = sqlite_memory().await;
    let now = chrono::Utc::now();
    let task = insert_task(&db, "reply", "idempotent", now).await;
    let run = scalar(
        &db,
        "INSERT INTO runs (task_id, worker, lease_epoch, claimed_at, lease_expires_at) \
         VALUES ($1, 'w1', 1, $2, $2) RETURNING id",
        &[task.into(), now.into()],
    )
    .await;
    let (app, _db) = app_on(db).await;
    let form = "application/x-www-form-urlencoded";
    let (status, body) = call(&app, "timeline_runs", form, &format!("ids[0]={run}&ids[1]=999999")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    let runs = json["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "unknown ids are left out: {body}");
    assert_eq!((runs[0]["i"].as_i64(), runs[0]["w"].as_str()), (Some(run), Some("w1")), "{body}");
    let too_many: Vec<String> =
        (0..=lastword_core::TIMELINE_RUNS_CAP).map(|i| format!("ids[{i}]={i}")).collect();
    let (status, body) = call(&app, "timeline_runs", form, &too_many.join("&")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("ids: at most 500"), "{body}");
}

/// Every link that carries runner data encodes it: a worker named like a query string links
/// to a filter on exactly that worker, never to one it rewrote (`state=acted`).
#[tokio::test]
async fn links_carrying_worker_names_encode_them() {
    use lastword_runner::{
        enqueue, ErrorCause, NewTask, Outcome, Runner, RunnerConfig, Safety, Source, SystemClock,
    };
    let db = sqlite_memory().await;
    let sly = "w&state=acted";
    let new_task =
        |kind: &str| NewTask::new(kind, Source::Notification, Safety::Idempotent).with_max_attempts(1);
    let runner = Runner::new(db.clone(), sly, RunnerConfig::default(), std::sync::Arc::new(SystemClock));
    let now = chrono::Utc::now();
    let failed = enqueue(&db, &new_task("reply"), now).await.unwrap();
    let lease = runner.claim(None).await.unwrap().unwrap();
    let outcome = Outcome::Failed { cause: ErrorCause::Timeout, detail: "<script>x</script>".into() };
    runner.finish(lease, outcome).await.unwrap();
    let held = enqueue(&db, &new_task("reply"), now).await.unwrap();
    assert_eq!(runner.claim(None).await.unwrap().unwrap().task_id, held);
    let (app, _db) = app_on(db).await;

    for page in [
        format!("/tasks/{failed}"),
        format!("/tasks/{held}"),
        "/failures".to_string(),
        "/workers".to_string(),
    ] {
        let (status, html) = get(&app, &page).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        assert!(html.contains("worker=w%26state%3Dacted"), "{page} links the worker encoded: {html}");
        for raw in ["worker=w&state=acted", "worker=w&amp;state=acted"] {
            assert!(!html.contains(raw), "{page} has the raw name in a link: {raw}");
        }
    }
}

/// A run's trace id is a link on the failures list and the task page when the server has a
/// template, the id percent-encoded into it (one written by hand that would reshape the URL
/// cannot); without a template the id is shown as text; the API carries it either way.
#[tokio::test]
async fn runs_with_a_trace_id_link_to_their_trace() {
    use lastword_runner::{
        enqueue, ErrorCause, NewTask, Outcome, Runner, RunnerConfig, Safety, Source, SystemClock,
    };
    let db = sqlite_memory().await;
    let runner = Runner::new(db.clone(), "w1", RunnerConfig::default(), std::sync::Arc::new(SystemClock));
    let task = NewTask::new("reply", Source::Notification, Safety::Idempotent).with_max_attempts(1);
    let now = chrono::Utc::now();
    let traced = enqueue(&db, &task, now).await.unwrap();
    let lease = runner.claim(None).await.unwrap().unwrap();
    runner.set_trace_id(&lease, "4bf92f3577b34da6a3ce929d0e0e4736").await.unwrap();
    runner
        .finish(lease, Outcome::Failed { cause: ErrorCause::Timeout, detail: String::new() })
        .await
        .unwrap();
    // Written around the library: a value that would break out of the URL's path.
    let sly = enqueue(&db, &task, now).await.unwrap();
    let lease = runner.claim(None).await.unwrap().unwrap();
    runner
        .finish(lease.clone(), Outcome::Failed { cause: ErrorCause::Crash, detail: String::new() })
        .await
        .unwrap();
    if let Db::Sqlite(pool) = &db {
        sqlx::query("UPDATE runs SET trace_id = '../x?y=\"<b>' WHERE id = ?")
            .bind(lease.run_id)
            .execute(pool)
            .await
            .unwrap();
    }
    assert!(matches!(
        runner.set_trace_id(&lease, "two words").await,
        Err(lastword_runner::RunnerError::BadTraceId(_))
    ));

    let store = store_for(db.clone(), Tokens::default());
    let links = lastword_core::TraceLinks::parse("https://tempo.example/trace/{trace_id}?orgId=1").unwrap();
    let linked = router(AppState::new(leptos_options(), store.clone()).with_trace_links(Some(links)));
    let want = r#"href="https://tempo.example/trace/4bf92f3577b34da6a3ce929d0e0e4736?orgId=1""#;
    for page in ["/failures".to_string(), format!("/tasks/{traced}")] {
        let (status, html) = get(&linked, &page).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        assert!(html.contains(want), "{page} links the trace: {html}");
        assert!(html.contains(r#"data-testid="trace-link""#), "{page}");
    }
    let (_, html) = get(&linked, &format!("/tasks/{sly}")).await;
    assert!(
        html.contains("https://tempo.example/trace/..%2Fx%3Fy%3D%22%3Cb%3E?orgId=1"),
        "a hand-written id is encoded into the path: {html}"
    );
    assert!(!html.contains("<b>"), "and escaped where it is shown");

    let plain = router(AppState::new(leptos_options(), store));
    let (_, html) = get(&plain, &format!("/tasks/{traced}")).await;
    assert!(!html.contains(r#"data-testid="trace-link""#), "no template, no link");
    // The id in a <code> of its own (what follows it is the element's end, or the hydration
    // marker the server renders after text, as the shipped build does).
    assert!(html.contains("<code>4bf92f3577b34da6a3ce929d0e0e4736<"), "the id, to copy: {html}");
    let (status, json) = get(&plain, &format!("/api/v1/tasks/{traced}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(json.contains(r#""trace_id":"4bf92f3577b34da6a3ce929d0e0e4736""#), "{json}");
}

#[tokio::test]
async fn unknown_pages_are_404_not_500() {
    let (app, _db) = app_on(sqlite_memory().await).await;
    let (status, _) = get(&app, "/no/such/page").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// The bundle as a browser gets it: a content-hashed file precompressed and cached for good, a
/// plain name revalidated (`304` on a repeat), and a missing hashed name never cached.
#[tokio::test]
async fn the_bundle_is_precompressed_and_cached_for_good_only_under_a_content_hash() {
    let site = tempfile::tempdir().unwrap();
    let pkg = site.path().join("pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    let hashed = "lastword.AbCdEfGhIjKlMnOpQr-_01.wasm";
    std::fs::write(pkg.join(hashed), b"\0asm-the-raw-module").unwrap();
    std::fs::write(pkg.join(format!("{hashed}.br")), b"brotli-bytes").unwrap();
    std::fs::write(pkg.join("lastword.css"), b"body { color: red }").unwrap();
    let options = leptos::prelude::LeptosOptions::builder()
        .output_name("lastword")
        .site_root(site.path().to_string_lossy().to_string())
        .build();
    let store = store_for(sqlite_memory().await, Tokens::default());
    let app = router(AppState::new(options, store));
    let send = |uri: &str, headers: &[(&str, &str)]| {
        let mut request = Request::get(uri);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        app.clone().oneshot(request.body(Body::empty()).unwrap())
    };
    let header = |r: &axum::response::Response, name: &str| {
        r.headers().get(name).map(|v| v.to_str().unwrap_or_default().to_string())
    };

    let wasm = send(&format!("/pkg/{hashed}"), &[("accept-encoding", "gzip, br")]).await.unwrap();
    assert_eq!(wasm.status(), StatusCode::OK);
    assert_eq!(header(&wasm, "content-encoding").as_deref(), Some("br"), "the precompressed file is sent");
    assert_eq!(header(&wasm, "content-type").as_deref(), Some("application/wasm"));
    assert_eq!(header(&wasm, "cache-control").as_deref(), Some("public, max-age=31536000, immutable"));
    let body = axum::body::to_bytes(wasm.into_body(), 1 << 20).await.unwrap();
    assert_eq!(&body[..], b"brotli-bytes", "sent as built, not encoded twice");
    // A browser that prefers zstd still gets the precompressed brotli, not the raw file
    // compressed on the fly.
    let wasm =
        send(&format!("/pkg/{hashed}"), &[("accept-encoding", "gzip, deflate, br, zstd")]).await.unwrap();
    assert_eq!(header(&wasm, "content-encoding").as_deref(), Some("br"));
    let body = axum::body::to_bytes(wasm.into_body(), 1 << 20).await.unwrap();
    assert_eq!(&body[..], b"brotli-bytes");

    let raw = send(&format!("/pkg/{hashed}"), &[]).await.unwrap();
    assert_eq!(header(&raw, "content-encoding"), None);
    assert_eq!(&axum::body::to_bytes(raw.into_body(), 1 << 20).await.unwrap()[..], b"\0asm-the-raw-module");

    let css = send("/pkg/lastword.css", &[]).await.unwrap();
    assert_eq!(css.status(), StatusCode::OK);
    assert_eq!(header(&css, "cache-control").as_deref(), Some("no-cache"), "a plain name is revalidated");
    let modified = header(&css, "last-modified").expect("a validator to revalidate with");
    let again = send("/pkg/lastword.css", &[("if-modified-since", &modified)]).await.unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED, "a repeat visit moves no bytes");
    assert_eq!(header(&again, "cache-control").as_deref(), Some("no-cache"));

    let missing = send("/pkg/lastword.ZZZZZZZZZZZZZZZZZZZZZZ.js", &[]).await.unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        header(&missing, "cache-control").as_deref(),
        Some("no-cache"),
        "a 404 is never cached for a year"
    );
}

/// A page's wasm chunks as one download: the server serves the chunk loader with its fetches
/// routed through the page's pack, and each page's pack holds exactly the chunks the split
/// manifest lists for it, in every encoding a browser may ask for (`server/src/packs.rs`).
#[tokio::test]
async fn a_pages_chunks_are_served_as_one_pack_and_the_loader_takes_them_from_it() {
    let site = tempfile::tempdir().unwrap();
    let pkg = site.path().join("pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    // An unhashed split build: fixed manifest and loader names, cargo-leptos' placeholder hash.
    let loader = "__wasm_split.______________________.js";
    std::fs::write(
        pkg.join("__wasm_split_manifest.json"),
        r#"{"__task_view_1":["chunk_1.x","split___task_view_1.y"],"__audit_view_1":["chunk_1.x"]}"#,
    )
    .unwrap();
    std::fs::write(
        pkg.join(loader),
        "const a = makeLoad(() => { const src = fetch(new URL(\"./chunk_1.x.wasm\", import.meta.url)); }, []);\n\
         const b = makeLoad(() => { const src = fetch(new URL(\"./split___task_view_1.y.wasm\", import.meta.url)); }, []);",
    )
    .unwrap();
    // The manifest lists the smaller chunk first; the pack holds the larger first.
    let shared: Vec<u8> = b"\0asm shared chunk ".repeat(100);
    let own: Vec<u8> = b"\0asm the task page ".repeat(200);
    std::fs::write(pkg.join("chunk_1.x.wasm"), &shared).unwrap();
    std::fs::write(pkg.join("split___task_view_1.y.wasm"), &own).unwrap();
    let options = leptos::prelude::LeptosOptions::builder()
        .output_name("lastword")
        .site_root(site.path().to_string_lossy().to_string())
        .build();
    let store = store_for(sqlite_memory().await, Tokens::default());
    let app = router(AppState::new(options, store));
    let send = |method: &str, uri: &str, encoding: Option<&str>| {
        let mut request = Request::builder().method(method).uri(uri);
        if let Some(encoding) = encoding {
            request = request.header("accept-encoding", encoding);
        }
        app.clone().oneshot(request.body(Body::empty()).unwrap())
    };
    let header = |r: &axum::response::Response, name: &str| {
        r.headers().get(name).map(|v| v.to_str().unwrap_or_default().to_string())
    };
    let body = |r: axum::response::Response| async move {
        axum::body::to_bytes(r.into_body(), 1 << 24).await.unwrap()
    };

    let routed = send("GET", &format!("/pkg/{loader}"), None).await.unwrap();
    assert_eq!(routed.status(), StatusCode::OK);
    assert_eq!(header(&routed, "content-type").as_deref(), Some("text/javascript"));
    assert_eq!(
        header(&routed, "cache-control").as_deref(),
        Some("no-cache"),
        "an unhashed name is revalidated"
    );
    let routed = String::from_utf8(body(routed).await.to_vec()).unwrap();
    assert!(routed.starts_with(lastword_server::packs::LOADER_PRELUDE), "{routed}");
    assert_eq!(routed.matches("__lwFetch(new URL(\"./").count(), 2, "{routed}");

    let pack = "/pkg/pack_task.______________________.pack";
    let expected = lastword_server::packs::pack(&[
        ("split___task_view_1".into(), own),
        ("chunk_1".into(), shared.clone()),
    ]);
    // Brotli alone: the answer is brotli even before the background thread has made it (a
    // client taking gzip too may get gzip until then: packs.rs' own tests).
    let br = send("GET", pack, Some("br")).await.unwrap();
    assert_eq!(br.status(), StatusCode::OK);
    assert_eq!(header(&br, "content-encoding").as_deref(), Some("br"));
    assert_eq!(header(&br, "vary").as_deref(), Some("accept-encoding"));
    let compressed = body(br).await;
    assert!(compressed.len() < expected.len() / 4, "compressed: {} of {}", compressed.len(), expected.len());
    let mut unpacked = Vec::new();
    brotli::BrotliDecompress(&mut &compressed[..], &mut unpacked).unwrap();
    assert_eq!(unpacked, expected, "the task page's chunks, whole, the largest first");

    let gzip = send("GET", pack, Some("gzip, br;q=0")).await.unwrap();
    assert_eq!(header(&gzip, "content-encoding").as_deref(), Some("gzip"), "br;q=0 refuses brotli");
    let mut ungz = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&body(gzip).await[..]), &mut ungz).unwrap();
    assert_eq!(ungz, expected);
    let chromium = send("GET", pack, Some("gzip, deflate, br, zstd")).await.unwrap();
    assert_eq!(header(&chromium, "content-encoding").as_deref(), Some("br"), "brotli is made by now");
    let plain = send("GET", pack, None).await.unwrap();
    assert_eq!(header(&plain, "content-encoding"), None);
    assert_eq!(body(plain).await.to_vec(), expected);

    // The audit page's pack holds its one chunk.
    let audit = body(send("GET", "/pkg/pack_audit.______________________.pack", None).await.unwrap()).await;
    assert_eq!(audit.to_vec(), lastword_server::packs::pack(&[("chunk_1".into(), shared)]));

    let head = send("HEAD", pack, Some("br")).await.unwrap();
    assert_eq!(head.status(), StatusCode::OK);
    assert!(body(head).await.is_empty(), "HEAD sends no body");
    let post = send("POST", pack, None).await.unwrap();
    assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(
        send("GET", "/pkg/pack_nosuch.______________________.pack", None).await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
    // The chunks themselves stay where they were, for pages navigated to later.
    let chunk = send("GET", "/pkg/chunk_1.x.wasm", None).await.unwrap();
    assert_eq!(chunk.status(), StatusCode::OK);
}

/// Every response carries the security headers; a page's policy names the nonce its own inline
/// scripts carry (a fresh one per render), and nothing else inline may run.
#[tokio::test]
async fn pages_carry_a_nonce_policy_and_every_response_the_security_headers() {
    let (app, _db) = app_on(sqlite_memory().await).await;
    let fetch = |uri: &'static str| {
        let app = app.clone();
        async move {
            let response = app.oneshot(Request::get(uri).body(Body::empty()).unwrap()).await.unwrap();
            let headers = response.headers().clone();
            let bytes = axum::body::to_bytes(response.into_body(), 10 << 20).await.unwrap();
            (headers, String::from_utf8_lossy(&bytes).into_owned())
        }
    };
    let header = |h: &axum::http::HeaderMap, name: &str| {
        h.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string()
    };
    let mut nonces = Vec::new();
    for _ in 0..2 {
        let (headers, html) = fetch("/").await;
        let policy = header(&headers, "content-security-policy");
        let nonce = policy
            .split("'nonce-")
            .nth(1)
            .and_then(|rest| rest.split('\'').next())
            .unwrap_or_else(|| panic!("a nonce in {policy:?}"))
            .to_string();
        assert!(policy.contains("frame-ancestors 'none'") && !policy.contains("unsafe-inline"), "{policy}");
        let scripts = html.matches("<script").count();
        assert!(scripts > 0, "the page has its hydration script: {html}");
        for tag in html.split("<script").skip(1).map(|rest| &rest[..rest.find('>').unwrap_or(rest.len())]) {
            assert!(
                tag.contains(&format!("nonce=\"{nonce}\"")),
                "an inline script without the nonce: <script{tag}>"
            );
        }
        for (name, value) in [
            ("x-content-type-options", "nosniff"),
            ("x-frame-options", "DENY"),
            ("referrer-policy", "same-origin"),
            ("cache-control", "no-store"),
        ] {
            assert_eq!(header(&headers, name), value, "{name}");
        }
        nonces.push(nonce);
    }
    assert_ne!(nonces[0], nonces[1], "a fresh nonce per render");

    let (api, _) = fetch("/api/v1/overview?since=1h").await;
    assert_eq!(
        header(&api, "content-security-policy"),
        "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    );
    assert_eq!(header(&api, "cache-control"), "no-store");
    assert_eq!(header(&api, "x-content-type-options"), "nosniff");
}

/// A request that does not answer in time is cut with a 503 that says so, and the server goes
/// on answering others.
#[tokio::test]
async fn a_request_past_its_timeout_is_cut_with_a_clear_503() {
    let store = store_for(sqlite_memory().await, Tokens::default());
    let slow = axum::Router::new().route(
        "/api/v1/test/slow",
        axum::routing::get(|| async {
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            "too late"
        }),
    );
    let state =
        AppState::new(leptos_options(), store).with_request_timeout(std::time::Duration::from_millis(100));
    let app = lastword_server::router_with(state, slow);
    let started = std::time::Instant::now();
    let (status, body) = get(&app, "/api/v1/test/slow").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body.contains("\"timeout\"") && body.contains("narrower window"), "{body}");
    assert!(started.elapsed() < std::time::Duration::from_secs(2), "cut, not waited out");
    assert_eq!(get(&app, "/healthz").await.0, StatusCode::OK);
}
