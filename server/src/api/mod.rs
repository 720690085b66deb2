//! The JSON API under `/api/v1`, for scripts, chat bots and tests (documented in
//! `docs/api.md`). One file per resource; every handler parses its parameters into the core
//! types (a bad one is a 400 naming it), makes its store calls, and answers JSON.

mod actions;
mod error;
pub mod export;
mod leases;
pub mod openapi;
mod overview;
pub mod rejections;
mod runs;
mod tasks;
mod timeline;
mod workers;

pub use error::ApiError;

use crate::AppState;
use axum::routing::get;
use axum::Router;
use chrono::{DateTime, Utc};
use lastword_core::query::parse_time;
use lastword_core::ParamError;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The `/api/v1` routes (nested by [`crate::router`]) and the document that describes them;
/// unknown paths below it are JSON 404s.
pub fn routes() -> Router<AppState> {
    let (router, _) = documented_routes().split_for_parts();
    router
        .route("/openapi.json", get(openapi::serve))
        .fallback(|| async { ApiError::NotFound("no such API route".to_string()) })
}

/// Every API route with its OpenAPI description (each handler's `#[utoipa::path]`): one list,
/// so a route cannot be served undocumented.
pub(crate) fn documented_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::base())
        .routes(routes!(runs::list))
        .routes(routes!(runs::facets))
        .routes(routes!(export::runs))
        .routes(routes!(runs::one))
        .routes(routes!(tasks::one))
        .routes(routes!(export::task))
        .routes(routes!(overview::get))
        .routes(routes!(workers::list))
        .routes(routes!(leases::get))
        .routes(routes!(timeline::list))
        .routes(routes!(crate::auth::handlers::me))
        .routes(routes!(actions::requeue))
        .routes(routes!(actions::compensate))
        .routes(routes!(actions::uncompensate))
        .routes(routes!(actions::acknowledge))
        .routes(routes!(actions::preview))
        .routes(routes!(actions::bulk_requeue))
        .routes(routes!(actions::audit))
}

/// The query string as percent-decoded (name, value) pairs ([`lastword_core::query::query_pairs`]).
pub(crate) fn query_pairs(raw: Option<&str>) -> Vec<(String, String)> {
    lastword_core::query::query_pairs(raw.unwrap_or_default())
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
pub(crate) struct WindowQuery {
    pairs: Vec<(String, String)>,
}

impl WindowQuery {
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
        Ok(WindowQuery { pairs })
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
