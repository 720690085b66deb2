//! The JSON API under `/api/v1`, for scripts, chat bots and tests (documented in
//! `docs/api.md`). One file per resource; every handler parses its parameters into the core
//! types (a bad one is a 400 naming it), makes its store calls, and answers JSON.

mod actions;
mod error;
pub mod export;
mod leases;
mod overview;
pub mod rejections;
mod runs;
mod tasks;
mod timeline;
mod workers;

pub use error::ApiError;

use crate::AppState;
use axum::routing::{get, post};
use axum::Router;
use chrono::{DateTime, Utc};
use lastword_core::query::parse_time;
use lastword_core::ParamError;

/// The `/api/v1` routes (nested by [`crate::router`]); unknown paths below it are JSON 404s.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/runs", get(runs::list))
        .route("/runs/facets", get(runs::facets))
        .route("/runs/export", get(export::runs))
        .route("/runs/{id}", get(runs::one))
        .route("/tasks/{id}", get(tasks::one))
        .route("/tasks/{id}/export", get(export::task))
        .route("/overview", get(overview::get))
        .route("/workers", get(workers::list))
        .route("/leases", get(leases::get))
        .route("/timeline", get(timeline::list))
        .route("/me", get(crate::auth::handlers::me))
        .route("/tasks/{id}/requeue", post(actions::requeue))
        .route("/tasks/{id}/compensate", post(actions::compensate))
        .route("/tasks/{id}/uncompensate", post(actions::uncompensate))
        .route("/tasks/{id}/acknowledge", post(actions::acknowledge))
        .route("/requeue/preview", get(actions::preview))
        .route("/requeue", post(actions::bulk_requeue))
        .route("/audit", get(actions::audit))
        .fallback(|| async { ApiError::NotFound("no such API route".to_string()) })
}

/// The query string as percent-decoded (name, value) pairs, in order. Never fails: a stray `%`
/// is kept literally, and the parameter's own parser judges the value.
pub(crate) fn query_pairs(raw: Option<&str>) -> Vec<(String, String)> {
    url::form_urlencoded::parse(raw.unwrap_or_default().as_bytes()).into_owned().collect()
}

/// A path segment that must be a positive integer id.
pub(crate) fn path_id(param: &str, raw: &str) -> Result<i64, ApiError> {
    raw.parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| ParamError::new(param, format!("{raw:?} is not an id (a positive integer)")).into())
}

// Reads ask as of the whole second (shared between viewers), writes keep microseconds.
pub(crate) use lastword_core::{read_now, write_now};

/// The parameters of a window endpoint (`since`, `until`, `bucket`, …): only `allowed` names,
/// each at most once.
pub(crate) struct WindowParams {
    pairs: Vec<(String, String)>,
}

impl WindowParams {
    pub fn parse(raw: Option<&str>, allowed: &[&str]) -> Result<Self, ParamError> {
        let pairs = query_pairs(raw);
        for (i, (key, _)) in pairs.iter().enumerate() {
            if !allowed.contains(&key.as_str()) {
                return Err(ParamError::new(
                    key,
                    format!("unknown parameter; expected {}", allowed.join(", ")),
                ));
            }
            if pairs[..i].iter().any(|(k, _)| k == key) {
                return Err(ParamError::new(key, "given more than once"));
            }
        }
        Ok(WindowParams { pairs })
    }

    pub fn value(&self, name: &str) -> Option<&str> {
        self.pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.trim()).filter(|v| !v.is_empty())
    }

    /// An RFC 3339 time or an age (`15m` = now − 15 minutes); `default` when absent.
    pub fn time(
        &self,
        name: &str,
        now: DateTime<Utc>,
        default: DateTime<Utc>,
    ) -> Result<DateTime<Utc>, ParamError> {
        self.value(name).map(|v| parse_time(name, v, now)).transpose().map(|t| t.unwrap_or(default))
    }

    /// A duration like `30s`, `5m`, `1h`, `1d`, if given.
    pub fn duration(&self, name: &str) -> Result<Option<chrono::Duration>, ParamError> {
        self.value(name)
            .map(|v| {
                lastword_core::query::parse_age(v).ok_or_else(|| {
                    ParamError::new(name, format!("{v:?} is not a duration like 30s, 5m, 1h, 1d"))
                })
            })
            .transpose()
    }

    /// `since` (default `now − default_age`) and `until` (default now), `since < until`.
    pub fn window(
        &self,
        now: DateTime<Utc>,
        default_age: chrono::Duration,
    ) -> Result<(DateTime<Utc>, DateTime<Utc>), ParamError> {
        let until = self.time("until", now, now)?;
        let since = self.time("since", now, until - default_age)?;
        if since >= until {
            return Err(ParamError::new("until", "must be later than since"));
        }
        Ok((since, until))
    }
}
