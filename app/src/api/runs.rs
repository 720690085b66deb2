//! Run lists for the failures page: one filtered keyset page, and the facet counts per cause.

use lastword_core::{CauseFacets, RunPage};
use leptos::prelude::*;

/// The result of a list request: the page, or the parameter that was wrong.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum RunsAnswer {
    Page { page: RunPage, facets: CauseFacets },
    BadFilter(lastword_core::ParamError),
}

/// One page of runs for a URL query string (the same parameters as `GET /api/v1/runs`).
/// With no `state` and no `cause`, only failures are listed: this backs the failures page.
#[server(prefix = "/api/fn", endpoint = "failures", output = crate::api::JsonAnswer)]
pub async fn list_failures(query: String) -> Result<RunsAnswer, ServerFnError> {
    let now = lastword_core::read_now();
    let pairs = super::ssr::query_pairs(&query);
    let (filter, page) = match lastword_core::query::parse_run_query(&pairs, now) {
        Ok((filter, page)) => (filter.failures_unless_narrowed(), page),
        Err(e) => return Ok(RunsAnswer::BadFilter(e)),
    };
    let store = super::ssr::store()?;
    let (runs, facets) =
        tokio::try_join!(store.list_runs(&filter, &page, now), store.cause_facets(&filter, now))
            .map_err(super::ssr::store_error)?;
    Ok(RunsAnswer::Page { page: runs, facets })
}
