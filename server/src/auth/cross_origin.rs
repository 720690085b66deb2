//! Refuses state-changing requests that a browser sends on behalf of another site.
//!
//! Why: in local mode there is no login at all, and in users mode the browser attaches the
//! session cookie by itself. Without this check any web page the on-call engineer happens to
//! have open could make their browser POST to `http://127.0.0.1:3000/...` and re-queue tasks.
//! The algorithm is Go 1.25's `net/http.CrossOriginProtection`: modern browsers say where a
//! request comes from in `Sec-Fetch-Site`; older ones only send `Origin`, which must then
//! match the `Host` the request was sent to (or a configured public origin, for proxies that
//! rewrite `Host`). Clients that send neither header are not browsers, and have no ambient
//! credentials for another site to borrow. Requests authenticated by a bearer token are exempt
//! for the same reason (the middleware decides that, not this function).

use http::{HeaderMap, Method};

/// An origin the dashboard is reached at, normalised: `scheme://host[:port]`, lower case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicOrigin(String);

impl PublicOrigin {
    /// Parses `https://lastword.example.com` (a trailing `/` is tolerated; a path is not).
    pub fn parse(s: &str) -> Result<PublicOrigin, String> {
        let url = url::Url::parse(s.trim()).map_err(|e| format!("{s:?} is not an origin: {e}"))?;
        if url.host_str().is_none() || !matches!(url.scheme(), "http" | "https") {
            return Err(format!("{s:?} is not an origin like https://lastword.example.com"));
        }
        if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
            return Err(format!("{s:?} has a path; an origin is scheme://host[:port] only"));
        }
        Ok(PublicOrigin(url.origin().ascii_serialization()))
    }

    fn matches(&self, origin: &str) -> bool {
        self.0.eq_ignore_ascii_case(origin.trim_end_matches('/'))
    }
}

/// Why a request was refused (only logged; the client gets one generic message).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrossSite {
    /// `Sec-Fetch-Site` says `cross-site` or `same-site`.
    FetchSite,
    /// An older browser's `Origin` names another host.
    Origin,
}

/// Whether a request may go ahead. `host` is the request's `Host` (or HTTP/2 authority).
pub fn check(
    method: &Method,
    headers: &HeaderMap,
    host: Option<&str>,
    public: &[PublicOrigin],
) -> Result<(), CrossSite> {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return Ok(());
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let origin = header("origin");
    let trusted = || origin.is_some_and(|o| public.iter().any(|p| p.matches(o)));
    match header("sec-fetch-site") {
        None | Some("") => {}
        Some("same-origin") | Some("none") => return Ok(()),
        Some(_) if trusted() => return Ok(()),
        Some(_) => return Err(CrossSite::FetchSite),
    }
    let Some(origin) = origin else {
        // Not a browser (or a browser too old to matter): no cookie of ours to abuse.
        return Ok(());
    };
    let origin_host = url::Url::parse(origin).ok().and_then(|u| {
        let host = u.host_str()?.to_string();
        Some(match u.port() {
            Some(port) => format!("{host}:{port}"),
            None => host,
        })
    });
    if let (Some(origin_host), Some(host)) = (origin_host, host) {
        // `Url` drops a default port (`http://h:80` → `h`), as browsers do in `Origin`.
        let host = host.strip_suffix(":80").or_else(|| host.strip_suffix(":443")).unwrap_or(host);
        if origin_host.eq_ignore_ascii_case(host) {
            return Ok(());
        }
    }
    if trusted() {
        return Ok(());
    }
    Err(CrossSite::Origin)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(
        method: Method,
        pairs: &[(&'static str, &str)],
        host: Option<&str>,
        public: &[PublicOrigin],
    ) -> bool {
        let mut headers = HeaderMap::new();
        for (k, v) in pairs {
            headers.insert(*k, v.parse().unwrap());
        }
        check(&method, &headers, host, public).is_ok()
    }

    #[test]
    fn the_go_cross_origin_protection_table() {
        let host = Some("127.0.0.1:3000");
        let none: &[PublicOrigin] = &[];
        // Safe methods always pass.
        assert!(req(Method::GET, &[("sec-fetch-site", "cross-site")], host, none));
        // Sec-Fetch-Site decides when present.
        assert!(req(Method::POST, &[("sec-fetch-site", "same-origin")], host, none));
        assert!(req(Method::POST, &[("sec-fetch-site", "none")], host, none));
        assert!(!req(Method::POST, &[("sec-fetch-site", "cross-site")], host, none));
        assert!(!req(Method::DELETE, &[("sec-fetch-site", "same-site")], host, none));
        // ... even when Origin would match the host.
        assert!(!req(
            Method::POST,
            &[("sec-fetch-site", "cross-site"), ("origin", "http://127.0.0.1:3000")],
            host,
            none
        ));
        // No Sec-Fetch-Site and no Origin: not a browser.
        assert!(req(Method::POST, &[], host, none));
        // Old browsers: Origin must match Host.
        assert!(req(Method::POST, &[("origin", "http://127.0.0.1:3000")], host, none));
        assert!(!req(Method::POST, &[("origin", "http://evil.example")], host, none));
        assert!(!req(Method::PUT, &[("origin", "http://127.0.0.1:4000")], host, none));
        assert!(!req(Method::PATCH, &[("origin", "null")], host, none));
        assert!(!req(Method::POST, &[("origin", "http://127.0.0.1:3000")], None, none));
        assert!(req(Method::POST, &[("origin", "https://dash.example")], Some("dash.example:443"), none));
    }

    #[test]
    fn public_origins_are_trusted_when_a_proxy_rewrites_host() {
        let public = [PublicOrigin::parse("https://Lastword.example.com/").unwrap()];
        let inner = Some("10.0.0.5:3000");
        assert!(req(Method::POST, &[("origin", "https://lastword.example.com")], inner, &public));
        assert!(!req(Method::POST, &[("origin", "https://evil.example")], inner, &public));
        assert!(req(
            Method::POST,
            &[("sec-fetch-site", "cross-site"), ("origin", "https://lastword.example.com")],
            inner,
            &public
        ));
        assert!(PublicOrigin::parse("lastword.example.com").is_err());
        assert!(PublicOrigin::parse("https://lastword.example.com/app").is_err());
    }
}
