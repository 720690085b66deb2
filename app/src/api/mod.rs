//! Server functions, one file per resource: each reads the store from context, makes one store
//! call, and maps errors to a message fit for the page (details stay in the server log).

pub mod actions;
pub mod leases;
pub mod overview;
pub mod runs;
pub mod tasks;
pub mod timeline;
pub mod workers;

use leptos::server_fn::{codec::Post, Bytes, ContentType, Decodes, Encodes, Format, FormatType};
use serde::{de::DeserializeOwned, Serialize};

/// Every server function's answer (`output = JsonAnswer`): JSON, as server_fn's own `Json`,
/// but read in the browser as text. The page's resources arrive with the HTML as text and are
/// read by `serde_json::from_str`; server_fn's `Json` reads a fetched answer as bytes
/// (`from_slice`), so each answer type's decoder was compiled into the wasm twice, once per
/// reader. Reading both as text keeps one copy (release wasm, see BENCHMARKS.md).
pub type JsonAnswer = Post<JsonText>;

/// The encoding behind [`JsonAnswer`].
pub struct JsonText;

impl ContentType for JsonText {
    const CONTENT_TYPE: &'static str = "application/json";
}

impl FormatType for JsonText {
    const FORMAT_TYPE: Format = Format::Text;
}

impl<T: Serialize> Encodes<T> for JsonText {
    type Error = serde_json::Error;

    fn encode(output: &T) -> Result<Bytes, Self::Error> {
        serde_json::to_vec(output).map(Bytes::from)
    }
}

impl<T: DeserializeOwned> Decodes<T> for JsonText {
    type Error = serde_json::Error;

    fn decode(bytes: Bytes) -> Result<T, Self::Error> {
        // Our server writes UTF-8; a stray invalid byte becomes U+FFFD and, inside JSON syntax,
        // a parse error with its position, as a bad answer should.
        serde_json::from_str(&String::from_utf8_lossy(&bytes))
    }
}

/// Read by the server's shared pages (`server/src/shared_pages.rs`).
#[cfg(feature = "ssr")]
pub use ssr::NOT_SHAREABLE;

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
    /// page shows the message and keeps its own status, and is marked [`NOT_SHAREABLE`].
    pub fn refuse(status: http::StatusCode, message: impl Into<String>) -> ServerFnError {
        let own_call = use_context::<http::request::Parts>()
            .is_some_and(|parts| parts.uri.path().starts_with("/api/fn/"));
        if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
            if own_call {
                response.set_status(status);
            } else {
                response.insert_header(
                    http::HeaderName::from_static(NOT_SHAREABLE),
                    http::HeaderValue::from_static("1"),
                );
            }
        }
        ServerFnError::new(message.into())
    }

    /// Set on a page render that showed a refusal or a fault (the database down, a read too
    /// slow): the server renders that page for every request instead of serving the same render
    /// to the next one (`server/src/shared_pages.rs`), which removes the header.
    pub const NOT_SHAREABLE: &str = "x-lastword-not-shareable";

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_read_back_as_they_were_written() {
        let sent: Result<Vec<(i64, String)>, String> = Ok(vec![(7, "no action needed".into())]);
        let bytes = <JsonText as Encodes<_>>::encode(&sent).unwrap();
        assert_eq!(std::str::from_utf8(&bytes).unwrap(), r#"{"Ok":[[7,"no action needed"]]}"#);
        let got: Result<Vec<(i64, String)>, String> = <JsonText as Decodes<_>>::decode(bytes).unwrap();
        assert_eq!(got, sent);
    }

    #[test]
    fn a_broken_answer_is_an_error_not_a_value() {
        // Inside a string, an invalid byte reads as U+FFFD, as a browser's `response.text()`
        // would read it.
        let mangled = Bytes::from_static(b"\"ok\xff\"");
        let read: String = <JsonText as Decodes<_>>::decode(mangled).unwrap();
        assert_eq!(read, "ok\u{fffd}");
        // Outside a string it is a syntax error with a position.
        let broken = Bytes::from_static(b"[1,\xff]");
        let err = <JsonText as Decodes<Vec<i64>>>::decode(broken).unwrap_err();
        assert!(err.to_string().contains("column"), "{err}");
        // Truncated by a dropped connection: an error, not a partial list.
        let cut = Bytes::from_static(b"[1,2");
        assert!(<JsonText as Decodes<Vec<i64>>>::decode(cut).is_err());
    }
}
