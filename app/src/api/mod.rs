//! Server functions, one file per resource: each reads the store from context, makes one store
//! call, and maps errors to a message fit for the page (details stay in the server log).

pub mod actions;
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

    /// Logs the cause chain once, here, and tells the browser only what it can act on.
    pub fn store_error(e: lastword_store::StoreError) -> ServerFnError {
        tracing::error!(error = %e, "store call failed");
        if e.is_unavailable() {
            ServerFnError::new("database unavailable")
        } else {
            ServerFnError::new("database error (see server log)")
        }
    }

    /// A URL query string (`a=1&b=2`, with or without the leading `?`) as decoded pairs.
    pub fn query_pairs(query: &str) -> Vec<(String, String)> {
        url::form_urlencoded::parse(query.trim_start_matches('?').as_bytes()).into_owned().collect()
    }
}
