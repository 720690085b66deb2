//! Hostile input against every route, parameter and body the server takes: random-looking and
//! malicious strings, huge and negative numbers, invalid UTF-8 and NUL bytes (percent-encoded,
//! in queries and paths), injection attempts, wrong JSON types, deeply nested and oversized
//! bodies. Each answer must be a clear 4xx (JSON naming the problem on the API) or a 2xx —
//! never a 5xx, never a panic — and nothing may change. Prints how many cases ran.
//!
//! The values are a fixed list plus a seeded generator (the same cases every run, so a
//! failure reproduces): the independent fuzzer is schemathesis against the OpenAPI document,
//! this is the in-repo floor that runs in every `cargo test`.

mod common;

use axum::body::Body;
use axum::http::Request;
use common::{send, Answer};
use lastword_core::Tokens;
use lastword_server::{router, state::leptos_options, AppState};
use lastword_store::testing::{insert_task, scalar, sqlite_memory};
use lastword_store::{store_for, Db};

/// Query values and path segments, already percent-encoded where they must be.
fn hostile_values() -> Vec<String> {
    let mut values: Vec<String> = [
        "",
        "%00",
        "a%00b",
        "%FF%FE",
        "%C3%28",
        "%E2%80%AE%E2%80%8Fevil",
        "%",
        "%%",
        "%zz",
        "-1",
        "0",
        "-9223372036854775808",
        "9223372036854775807",
        "9223372036854775808",
        "99999999999999999999999999999",
        "1e308",
        "NaN",
        "0x10",
        "1.5",
        "true",
        "null",
        "%5B%5D",
        "%7B%7D",
        "'%20OR%201=1--",
        "1;DROP%20TABLE%20tasks",
        "%3Cscript%3Ealert(1)%3C/script%3E",
        "..%2F..%2Fetc%2Fpasswd",
        "1970-01-01T00:00:00Z",
        "9999-12-31T23:59:59Z",
        "2026-13-45T99:99:99Z",
        "99999999d",
        "-5m",
        "0s",
        "1h,2h",
        "timeout,timeout,timeout",
        "failed,acted,nope",
        "1800000000000000_5",
        "x_y",
        "_",
        "18446744073709551615_1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    values.push("a".repeat(20_000));
    values.push("%F0%9F%92%A9".repeat(2_000));
    // A seeded generator: printable ASCII, percent escapes and digits, up to 64 long.
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..40 {
        let len = (next() % 64) as usize;
        let mut v = String::new();
        for _ in 0..len {
            match next() % 4 {
                0 => v.push_str(&format!("%{:02X}", next() % 256)),
                1 => v.push(char::from(b'0' + (next() % 10) as u8)),
                _ => v.push(char::from(0x21 + (next() % 94) as u8)),
            }
        }
        // `&`, `#` and `+` would split or end the value; keep them encoded.
        values.push(v.replace('&', "%26").replace('#', "%23").replace('+', "%2B"));
    }
    values
}

/// Every GET route with the parameters it takes (and one it does not).
const GET_ROUTES: &[(&str, &[&str])] = &[
    (
        "/api/v1/runs",
        &[
            "state", "cause", "worker", "kind", "source", "task", "since", "until", "q", "limit", "after",
            "bogus",
        ],
    ),
    ("/api/v1/runs/facets", &["state", "cause", "since", "until", "worker", "bogus"]),
    ("/api/v1/overview", &["since", "until", "bucket", "bogus"]),
    ("/api/v1/workers", &["since", "until", "bogus"]),
    ("/api/v1/leases", &["kind", "since", "until", "bogus"]),
    ("/api/v1/timeline", &["since", "until", "minutes", "bogus"]),
    ("/api/v1/requeue/preview", &["cause", "state", "since", "fence", "task", "bogus"]),
    ("/api/v1/audit", &["actor", "action", "outcome", "task", "since", "until", "limit", "after", "bogus"]),
    ("/failures", &["state", "cause", "worker", "since", "q", "after", "limit"]),
    ("/", &["window"]),
    ("/workers", &["window"]),
    ("/leases", &["window", "kind"]),
    ("/timeline", &["minutes", "from", "to", "order", "by", "worker", "kind", "state", "lanes"]),
    ("/audit", &["actor", "action", "outcome", "task", "since", "after"]),
];

/// Routes with a path parameter; `{}` is replaced by the hostile segment.
const PATH_ROUTES: &[&str] = &["/api/v1/runs/{}", "/api/v1/tasks/{}", "/tasks/{}"];

/// A 4xx on the API is JSON with an `error`; nothing is ever a 5xx.
fn judge(what: &str, answer: &Answer, failures: &mut Vec<String>) {
    if answer.status.is_server_error() {
        failures.push(format!(
            "{what} → {} {}",
            answer.status,
            answer.body.chars().take(200).collect::<String>()
        ));
    } else if what.contains(" /api/") && answer.status.is_client_error() {
        let json: Option<serde_json::Value> = serde_json::from_str(&answer.body).ok();
        if !answer
            .header(axum::http::header::CONTENT_TYPE)
            .unwrap_or_default()
            .starts_with("application/json")
            || json.as_ref().and_then(|j| j.get("error")).is_none()
        {
            failures.push(format!(
                "{what} → {} without a JSON error: {}",
                answer.status,
                answer.body.chars().take(200).collect::<String>()
            ));
        }
    }
}

async fn fixture(db: Db) -> (axum::Router, Db, i64) {
    let task = insert_task(&db, "reply", "unsafe", chrono::Utc::now()).await;
    let app = router(AppState::new(leptos_options(), store_for(db.clone(), Tokens::default())));
    (app, db, task)
}

/// What an applied change would move (refused attempts are audited, and change nothing).
async fn fingerprint(db: &Db) -> (i64, i64, i64) {
    (
        scalar(db, "SELECT COUNT(*) FROM operator_actions WHERE outcome = 'applied'", &[]).await,
        scalar(db, "SELECT CAST(COALESCE(SUM(lease_epoch), 0) AS BIGINT) FROM tasks", &[]).await,
        scalar(db, "SELECT COUNT(*) FROM tasks WHERE status <> 'queued'", &[]).await,
    )
}

async fn hostile_query_values_and_path_segments_get_a_clear_4xx_never_a_5xx(db: Db) {
    let (app, db, _task) = fixture(db).await;
    let before = fingerprint(&db).await;
    let values = hostile_values();
    // Every GET URI to try: each parameter of each route with each value, the same parameter
    // twice, a bare `?&&=`, and each value as a path segment.
    let mut uris = Vec::new();
    for (route, params) in GET_ROUTES {
        for param in *params {
            uris.extend(values.iter().map(|value| format!("{route}?{param}={value}")));
        }
        uris.push(format!("{route}?{0}=1&{0}=2", params[0]));
        uris.push(format!("{route}?&&=&=x"));
    }
    for route in PATH_ROUTES {
        uris.extend(values.iter().map(|value| route.replace("{}", value)));
    }
    let (mut cases, mut failures) = (0usize, Vec::new());
    for uri in &uris {
        // A value no HTTP client could send (the request builder refuses it) is not a case.
        let Ok(request) = Request::get(uri).body(Body::empty()) else { continue };
        cases += 1;
        let what = format!("GET {}", uri.chars().take(120).collect::<String>());
        judge(&what, &send(&app, request).await, &mut failures);
    }
    conclude("GET", &db, cases, &failures, before).await;
}

async fn hostile_bodies_to_every_write_and_server_function_get_a_clear_4xx_never_a_5xx(db: Db) {
    let (app, db, task) = fixture(db).await;
    let before = fingerprint(&db).await;
    let nested = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
    let deep_object = format!("{}1{}", "{\"a\":".repeat(5_000), "}".repeat(5_000));
    let huge = format!("{{\"reason\": \"{}\", \"expected_epoch\": 0}}", "x".repeat(3 << 20));
    let bodies: Vec<String> = vec![
        String::new(),
        "null".into(),
        "[]".into(),
        "\"text\"".into(),
        "{".into(),
        "{\"reason\": 5}".into(),
        "{\"reason\": \"r\", \"expected_epoch\": \"one\"}".into(),
        "{\"reason\": \"r\", \"expected_epoch\": 1e400}".into(),
        "{\"reason\": \"r\", \"expected_epoch\": -1, \"fence\": \"yes\"}".into(),
        "{\"reason\": \"r\", \"unknown\": 1}".into(),
        "{\"reason\": \"\\u0000\\u202e\", \"expected_epoch\": 0}".into(),
        "{\"reason\": \"r\", \"preview_token\": \"x\", \"task_ids\": [1, \"2\"]}".into(),
        "{\"reason\": \"r\", \"preview_token\": \"x\", \"task_ids\": [9223372036854775807]}".into(),
        "{\"reason\": \"r\", \"preview_token\": \"x\", \"expected_count\": 99999999999999999999}".into(),
        nested,
        deep_object,
        huge,
    ];
    let mut raw_bodies: Vec<Vec<u8>> = bodies.into_iter().map(String::into_bytes).collect();
    raw_bodies.push(vec![0xff, 0xfe, b'{', 0x00, b'}']);
    let writes = [
        format!("/api/v1/tasks/{task}/requeue"),
        format!("/api/v1/tasks/{task}/compensate"),
        format!("/api/v1/tasks/{task}/uncompensate"),
        "/api/v1/requeue".to_string(),
        "/api/v1/requeue?cause=timeout".to_string(),
    ];
    let server_fns = [
        "act",
        "requeue_preview",
        "bulk_requeue",
        "audit",
        "totals",
        "overview",
        "failures",
        "task",
        "timeline",
        "timeline_runs",
        "workers",
        "whoami",
        "no_such_function",
    ];
    let (mut cases, mut failures) = (0usize, Vec::new());
    for uri in &writes {
        for body in &raw_bodies {
            for content_type in ["application/json", "text/plain"] {
                let request = Request::post(uri)
                    .header("content-type", content_type)
                    .body(Body::from(body.clone()))
                    .unwrap();
                cases += 1;
                let what = format!("POST {uri} ({content_type}, {} bytes)", body.len());
                judge(&what, &send(&app, request).await, &mut failures);
            }
        }
    }
    for endpoint in server_fns {
        let uri = format!("/api/fn/{endpoint}");
        for body in &raw_bodies {
            for content_type in ["application/json", "application/x-www-form-urlencoded"] {
                let request = Request::post(&uri)
                    .header("content-type", content_type)
                    .body(Body::from(body.clone()))
                    .unwrap();
                cases += 1;
                let answer = send(&app, request).await;
                // Server functions answer in leptos' own error encoding, not the API's JSON.
                if answer.status.is_server_error() {
                    failures.push(format!(
                        "POST {uri} ({content_type}, {} bytes) → {} {}",
                        body.len(),
                        answer.status,
                        answer.body.chars().take(200).collect::<String>()
                    ));
                }
            }
        }
    }
    conclude("body", &db, cases, &failures, before).await;
}

/// Prints the figure, then fails on any bad answer or on any change to the data.
async fn conclude(what: &str, db: &Db, cases: usize, failures: &[String], before: (i64, i64, i64)) {
    println!(
        "hostile {what} cases on {}: {cases} sent, {} answered 5xx or without a clear error",
        db.backend().as_str(),
        failures.len()
    );
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    assert_eq!(fingerprint(db).await, before, "nothing changed");
}

/// Each case on SQLite and on PostgreSQL (whose text type refuses NUL bytes, so the two can
/// disagree on what a hostile string does).
macro_rules! on_both {
    ($($case:ident),+) => {
        mod sqlite {
            $(#[tokio::test]
            async fn $case() {
                super::$case(super::sqlite_memory().await).await;
            })+
        }
        mod postgres {
            $(#[tokio::test]
            async fn $case() {
                if let Some(db) = lastword_store::testing::postgres(stringify!($case)).await {
                    super::$case(db.clone()).await;
                    lastword_store::testing::discard_postgres(db).await;
                }
            })+
        }
    };
}

on_both!(
    hostile_query_values_and_path_segments_get_a_clear_4xx_never_a_5xx,
    hostile_bodies_to_every_write_and_server_function_get_a_clear_4xx_never_a_5xx
);
