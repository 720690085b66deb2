//! Server functions, one file per resource: each reads the store from context, makes one store
//! call, and maps errors to a message fit for the page (details stay in the server log).

pub mod actions;
pub mod leases;
pub mod overview;
pub mod runs;
pub mod tasks;
pub mod timeline;
pub mod workers;

#[cfg(feature = "ssr")]
pub(crate) mod ssr {
    //! Server-only helpers for the server functions.
    use leptos::prelude::*;
    use std::sync::Arc;

    /// The store the server put in context for every request.
    pub fn store() -> Result<Arc<dyn lastword_store::Store>, ServerFnError> {
        use_context::<Arc<dyn lastword_store::Store>>()
            .ok_or_else(|| ServerFnError::new("server misconfigured: no store in context"))
    }

    /// A refusal whose answer carries `status` (400 bad input, 401 nobody, 403 a viewer, 404,
    /// 503 database down) rather than the 500 every server-function error gets by default, so
    /// scripts, proxies and logs can tell a refusal from a fault. The status is set only on a
    /// server function's own response: when the same function runs inside a page render, the
    /// page shows the message and keeps its own status.
    pub fn refuse(status: http::StatusCode, message: impl Into<String>) -> ServerFnError {
        let own_call = use_context::<http::request::Parts>()
            .is_some_and(|parts| parts.uri.path().starts_with("/api/fn/"));
        if own_call {
            if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
                response.set_status(status);
            }
        }
        ServerFnError::new(message.into())
    }

    /// 400: the input is malformed; the message names the parameter.
    pub fn bad_input(message: impl Into<String>) -> ServerFnError {
        refuse(http::StatusCode::BAD_REQUEST, message)
    }

    /// 404: no such thing.
    pub fn not_found(message: impl Into<String>) -> ServerFnError {
        refuse(http::StatusCode::NOT_FOUND, message)
    }

    /// Logs the cause chain once, here, and tells the browser only what it can act on: 503
    /// while the database is unreachable, 500 for anything else.
    pub fn store_error(e: lastword_store::StoreError) -> ServerFnError {
        tracing::error!(error = %e, "store call failed");
        if e.is_unavailable() {
            refuse(http::StatusCode::SERVICE_UNAVAILABLE, "database unavailable")
        } else if e.is_too_slow() {
            refuse(http::StatusCode::SERVICE_UNAVAILABLE, e.to_string())
        } else {
            refuse(http::StatusCode::INTERNAL_SERVER_ERROR, "database error (see server log)")
        }
    }

    pub use lastword_core::query::query_pairs;
}
