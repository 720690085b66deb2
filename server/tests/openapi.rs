//! The published contract (`GET /api/v1/openapi.json`) against the router that serves it: the
//! document is OpenAPI 3.1 and names every route, each route it names is served, and its query
//! parameters are exactly the ones the handlers' parsers accept (the handlers read the raw
//! query string, so the document's parameters are declared beside them and could drift).
//! Whether each answer matches its schema is schemathesis' part (`scripts/test-api-schema`).

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use lastword_core::Tokens;
use lastword_server::{router, state::leptos_options, AppState};
use lastword_store::store_for;
use lastword_store::testing::sqlite_memory;
use serde_json::Value;
use std::collections::BTreeSet;
use tower::ServiceExt;

async fn app() -> axum::Router {
    router(AppState::new(leptos_options(), store_for(sqlite_memory().await, Tokens::default())))
}

async fn call(app: &axum::Router, method: Method, uri: &str) -> (StatusCode, Value) {
    let mut request = Request::builder().method(method.clone()).uri(uri);
    if method == Method::POST {
        // A same-origin write (local mode refuses cross-origin ones before the handler).
        request = request.header("content-type", "application/json").header("sec-fetch-site", "same-origin");
    }
    let response = app.clone().oneshot(request.body(Body::from("{}")).unwrap()).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 16 << 20).await.unwrap();
    let value = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        panic!("{method} {uri}: {status}, not JSON ({e}): {}", String::from_utf8_lossy(&bytes))
    });
    (status, value)
}

/// (method, path template, its query parameter names) for every operation in the document.
fn operations(doc: &Value) -> Vec<(Method, String, BTreeSet<String>)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().unwrap() {
            let method: Method = method.to_uppercase().parse().unwrap();
            let query = op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["in"] == "query")
                .map(|p| p["name"].as_str().unwrap().to_string())
                .collect();
            out.push((method, path.clone(), query));
        }
    }
    out
}

/// A path template with its `{id}` filled in.
fn concrete(path: &str) -> String {
    path.replace("{id}", "1")
}

#[tokio::test]
async fn the_document_is_openapi_3_1_and_names_every_route_with_its_schemas() {
    let app = app().await;
    let (status, doc) = call(&app, Method::GET, "/api/v1/openapi.json").await;
    assert_eq!(status, StatusCode::OK, "{doc}");
    assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.1")), "{}", doc["openapi"]);
    let ops = operations(&doc);
    let named: BTreeSet<String> = ops.iter().map(|(m, p, _)| format!("{m} {p}")).collect();
    // The routes docs/api.md describes; a route added without its description fails here.
    for expected in [
        "GET /api/v1/runs",
        "GET /api/v1/runs/facets",
        "GET /api/v1/runs/export",
        "GET /api/v1/runs/{id}",
        "GET /api/v1/tasks/{id}",
        "GET /api/v1/tasks/{id}/export",
        "GET /api/v1/overview",
        "GET /api/v1/workers",
        "GET /api/v1/leases",
        "GET /api/v1/timeline",
        "GET /api/v1/me",
        "POST /api/v1/tasks/{id}/requeue",
        "POST /api/v1/tasks/{id}/compensate",
        "POST /api/v1/tasks/{id}/uncompensate",
        "POST /api/v1/tasks/{id}/acknowledge",
        "GET /api/v1/requeue/preview",
        "POST /api/v1/requeue",
        "GET /api/v1/audit",
    ] {
        assert!(named.contains(expected), "{expected} is not in the document: {named:?}");
    }
    assert_eq!(named.len(), 18, "{named:?}");
    // Every schema a response or body refers to is in the document.
    let text = doc.to_string();
    let schemas = doc["components"]["schemas"].as_object().expect("components.schemas");
    for reference in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = &reference[..reference.find('"').unwrap()];
        assert!(schemas.contains_key(name), "{name} is referred to but not defined");
    }
    for name in ["RunPage", "Run", "TaskDetail", "Overview", "ErrorBody", "ActionRequest", "RunState"] {
        assert!(schemas.contains_key(name), "{name} missing from components.schemas");
    }
    // Every operation it names is served: no answer is the router's own "no such API route".
    for (method, path, _) in &ops {
        let (status, body) = call(&app, method.clone(), &concrete(path)).await;
        assert!(
            !(status == StatusCode::NOT_FOUND
                && body["error"].as_str().unwrap_or("").contains("no such API route")),
            "{method} {path} is documented but not routed: {body}"
        );
        assert!(!status.is_server_error(), "{method} {path}: {status} {body}");
    }
}

#[tokio::test]
async fn each_documented_query_parameter_is_one_its_route_accepts_and_the_reverse() {
    let app = app().await;
    let (_, doc) = call(&app, Method::GET, "/api/v1/openapi.json").await;
    let ops = operations(&doc);
    let mut checked = 0;
    for (method, path, documented) in ops.iter().filter(|(m, _, q)| *m == Method::GET && !q.is_empty()) {
        let base = concrete(path);
        // The reverse first: an unknown parameter is refused, naming what the route expects.
        let (status, body) = call(&app, method.clone(), &format!("{base}?zz_unknown=1")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{method} {path}?zz_unknown=1: {body}");
        assert_eq!(body["param"], "zz_unknown", "{method} {path}: {body}");
        let message = body["error"].as_str().unwrap();
        let expected: BTreeSet<String> = message
            .split_once("expected ")
            .unwrap_or_else(|| panic!("{method} {path}: {message}"))
            .1
            .split(", ")
            .map(|s| s.trim().to_string())
            .collect();
        // Each parser names exactly what its route accepts (the run filter's list with the
        // route's own parameters), so the message is the whole truth.
        let accepted = expected;
        assert_eq!(
            documented, &accepted,
            "{method} {path}: the document's query parameters against the parser's"
        );
        // Each documented parameter, given, is not refused as unknown.
        for name in documented {
            let (status, body) = call(&app, method.clone(), &format!("{base}?{name}=")).await;
            assert!(!status.is_server_error(), "{method} {path}?{name}=: {status} {body}");
            let unknown = status == StatusCode::BAD_REQUEST
                && body["param"] == name.as_str()
                && body["error"].as_str().unwrap_or("").contains("unknown parameter");
            assert!(!unknown, "{method} {path}: documented {name} is refused as unknown: {body}");
            checked += 1;
        }
    }
    // The bulk re-queue takes the preview's selection.
    let query_of =
        |m: Method, p: &str| ops.iter().find(|(om, op, _)| *om == m && op == p).map(|o| o.2.clone());
    assert_eq!(
        query_of(Method::POST, "/api/v1/requeue"),
        query_of(Method::GET, "/api/v1/requeue/preview"),
        "the bulk re-queue and its preview take the same selection"
    );
    assert!(checked > 40, "only {checked} parameters checked");
    println!("openapi: {checked} documented query parameters checked against their parsers");
}
