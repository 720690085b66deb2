//! Trace ids and the links made of them (issue 14, "Trace links").
//!
//! Agent runs are traced elsewhere (Langfuse, LangSmith, Jaeger/Tempo). A runner may store the
//! id of its run's trace in `runs.trace_id`; the server is told how to turn one into a URL with
//! `--trace-url-template 'https://tracer.example/trace/{trace_id}'`. Both rules live here: what
//! a trace id may be (the runner libraries refuse anything else, so a link is always well
//! formed) and how a template is checked and filled.

/// The placeholder a template must contain.
pub const PLACEHOLDER: &str = "{trace_id}";

/// The longest trace id accepted. OpenTelemetry ids are 32 hex digits, Langfuse and LangSmith
/// use UUIDs; 128 leaves room for prefixed or composite ids without storing documents.
pub const MAX_TRACE_ID_CHARS: usize = 128;

/// Why a trace id was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadTraceId {
    Empty,
    TooLong(usize),
    /// Whitespace or a control character (a trace id is a token, never text).
    NotAToken,
}

impl std::fmt::Display for BadTraceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadTraceId::Empty => write!(f, "a trace id cannot be empty"),
            BadTraceId::TooLong(n) => {
                write!(f, "a trace id is at most {MAX_TRACE_ID_CHARS} characters (this one has {n})")
            }
            BadTraceId::NotAToken => write!(f, "a trace id cannot contain whitespace or control characters"),
        }
    }
}

impl std::error::Error for BadTraceId {}

/// Checks a trace id: 1 to [`MAX_TRACE_ID_CHARS`] characters, none of them whitespace or a
/// control character.
pub fn check_trace_id(id: &str) -> Result<(), BadTraceId> {
    let n = id.chars().count();
    if n == 0 {
        Err(BadTraceId::Empty)
    } else if n > MAX_TRACE_ID_CHARS {
        Err(BadTraceId::TooLong(n))
    } else if id.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Err(BadTraceId::NotAToken)
    } else {
        Ok(())
    }
}

/// A checked `--trace-url-template`: an `http`/`https` URL with [`PLACEHOLDER`] in it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TraceLinks {
    template: String,
}

impl TraceLinks {
    /// Checks the template once, at start-up, so a typo is a refusal to start rather than a
    /// dead link on every run.
    pub fn parse(template: &str) -> Result<TraceLinks, String> {
        let template = template.trim();
        let scheme_ok = ["https://", "http://"]
            .iter()
            .any(|s| template.len() > s.len() && template[..s.len()].eq_ignore_ascii_case(s));
        if !scheme_ok {
            return Err(format!("trace URL template {template:?} must start with https:// or http://"));
        }
        if !template.contains(PLACEHOLDER) {
            return Err(format!("trace URL template {template:?} must contain {PLACEHOLDER}"));
        }
        if template.chars().any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == '<' || c == '>') {
            return Err(format!("trace URL template {template:?} contains a character a URL cannot hold"));
        }
        Ok(TraceLinks { template: template.to_string() })
    }

    /// The template as configured.
    pub fn template(&self) -> &str {
        &self.template
    }

    /// The link to `trace_id`'s trace, the id percent-encoded (an id the runner did not check
    /// — a row written by hand — still cannot change the URL's shape); `None` for an id that is
    /// not a valid trace id.
    pub fn url(&self, trace_id: &str) -> Option<String> {
        check_trace_id(trace_id).ok()?;
        // `.` and `..` would be resolved as path steps by the browser: encode an id of dots.
        let encoded = if trace_id.chars().all(|c| c == '.') {
            trace_id.replace('.', "%2E")
        } else {
            crate::query::encode_component(trace_id)
        };
        Some(self.template.replace(PLACEHOLDER, &encoded))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_ids_are_tokens_of_bounded_length() {
        assert_eq!(check_trace_id("4bf92f3577b34da6a3ce929d0e0e4736"), Ok(()));
        assert_eq!(check_trace_id("lf:7f9c-2a"), Ok(()));
        assert_eq!(check_trace_id(""), Err(BadTraceId::Empty));
        assert_eq!(check_trace_id("a b"), Err(BadTraceId::NotAToken));
        assert_eq!(check_trace_id("a\u{0}b"), Err(BadTraceId::NotAToken));
        assert_eq!(check_trace_id("ab\n"), Err(BadTraceId::NotAToken));
        let long = "x".repeat(MAX_TRACE_ID_CHARS + 1);
        assert_eq!(check_trace_id(&long), Err(BadTraceId::TooLong(MAX_TRACE_ID_CHARS + 1)));
        assert_eq!(check_trace_id(&long[1..]), Ok(()));
    }

    #[test]
    fn a_template_needs_a_web_scheme_and_the_placeholder() {
        assert!(TraceLinks::parse("https://tempo.example/trace/{trace_id}").is_ok());
        assert!(TraceLinks::parse("HTTP://lf.local/project/p/traces/{trace_id}?x=1").is_ok());
        for bad in [
            "tempo.example/trace/{trace_id}",
            "javascript:alert(1)//{trace_id}",
            "https://tempo.example/trace/",
            "https://tempo.example/{trace_id} x",
            "https://",
            "éhttps://x/{trace_id}",
        ] {
            assert!(TraceLinks::parse(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn links_encode_the_id_so_it_cannot_reshape_the_url() {
        let links = TraceLinks::parse("https://t.example/trace/{trace_id}?org=1").unwrap();
        assert_eq!(links.url("abc-123").as_deref(), Some("https://t.example/trace/abc-123?org=1"));
        assert_eq!(
            links.url("a/../b?c#d").as_deref(),
            Some("https://t.example/trace/a%2F..%2Fb%3Fc%23d?org=1")
        );
        assert_eq!(links.url("..").as_deref(), Some("https://t.example/trace/%2E%2E?org=1"));
        assert_eq!(links.url("bad id"), None);
        assert_eq!(links.url(""), None);
    }
}
