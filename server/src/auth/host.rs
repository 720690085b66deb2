//! Refuses requests whose `Host` is not a name this dashboard is served under.
//!
//! Why: DNS rebinding. A page on `rebind.example` can point its own name at 127.0.0.1 after it
//! has loaded; the browser then treats `http://rebind.example:3000/` as the page's own origin,
//! so the cross-site checks ([`super::cross_origin`]) see a same-origin request, and in local
//! mode (no login) that page could read everything and re-queue as `local`. The one thing such a
//! request cannot hide is its `Host`: `rebind.example:3000`. So every request, in every mode,
//! must name a host we serve: loopback names and addresses, the hosts of `--public-origin`, the
//! address we listen on if it is a specific one, and `--allowed-host` (`*` to accept any, for a
//! proxy that checks `Host` itself). Refused with `421 Misdirected Request`.
//!
//! A request without `Host` (HTTP/1.0, in-process tests) has nothing to check; browsers always
//! send it. Liveness and readiness probes are exempt: orchestrators send the pod address.

use std::net::IpAddr;

/// The host names (lower case, without port) requests may be sent to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowedHosts {
    names: Vec<String>,
    any: bool,
}

impl AllowedHosts {
    /// Loopback names and addresses, plus `extra` (`host`, `host:port` or a URL's host; `*`
    /// allows every host).
    pub fn new<S: AsRef<str>>(extra: impl IntoIterator<Item = S>) -> AllowedHosts {
        let mut allowed = AllowedHosts::default();
        for name in extra {
            let name = name.as_ref().trim();
            if name == "*" {
                allowed.any = true;
            } else if let Some(host) = host_part(name) {
                if !host.is_empty() && !allowed.names.contains(&host) {
                    allowed.names.push(host);
                }
            }
        }
        allowed
    }

    /// Whether a request whose `Host` header (or authority) is `host` may be served.
    pub fn allows(&self, host: &str) -> bool {
        if self.any {
            return true;
        }
        let Some(name) = host_part(host) else {
            return false;
        };
        is_loopback(&name) || self.names.contains(&name)
    }

    /// The configured names, for the start-up log.
    pub fn describe(&self) -> String {
        if self.any {
            return "any host (--allowed-host '*')".to_string();
        }
        let mut all = vec!["loopback".to_string()];
        all.extend(self.names.iter().cloned());
        all.join(", ")
    }
}

/// The host of `Host: name[:port]`, `[v6]:port`, or `scheme://name[:port]`, lower case; `None`
/// for something that is not a host at all.
fn host_part(value: &str) -> Option<String> {
    let value = value.trim();
    let value = value.split_once("://").map_or(value, |(_, rest)| rest);
    let value = value.split('/').next().unwrap_or_default();
    if value.contains(['@', ' ', '\\']) || value.is_empty() {
        return None;
    }
    let host = if let Some(rest) = value.strip_prefix('[') {
        // [v6] or [v6]:port
        let (inside, after) = rest.split_once(']')?;
        if !(after.is_empty() || after.strip_prefix(':').is_some_and(is_port)) {
            return None;
        }
        inside.parse::<std::net::Ipv6Addr>().ok()?;
        format!("[{}]", inside.to_ascii_lowercase())
    } else {
        let (name, port) = match value.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (value, None),
        };
        if port.is_some_and(|p| !is_port(p)) || name.contains(':') {
            return None;
        }
        name.trim_end_matches('.').to_ascii_lowercase()
    };
    Some(host)
}

/// The host name a `Host` value names (lower case, without port), if it is one.
pub fn name_of(host: &str) -> Option<String> {
    host_part(host)
}

fn is_port(p: &str) -> bool {
    !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())
}

/// `localhost`, `*.localhost` (browsers resolve those to loopback themselves), and loopback
/// addresses (127.0.0.0/8, ::1).
fn is_loopback(host: &str) -> bool {
    if host == "localhost" || host.ends_with(".localhost") {
        return true;
    }
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<IpAddr>().is_ok_and(|ip| ip.to_canonical().is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_always_allowed_and_a_rebinding_name_never() {
        let hosts = AllowedHosts::new(Vec::<String>::new());
        for ok in [
            "127.0.0.1:3000",
            "127.0.0.1",
            "localhost:3000",
            "LOCALHOST",
            "app.localhost:3000",
            "[::1]:3000",
            "127.1.2.3:80",
        ] {
            assert!(hosts.allows(ok), "{ok}");
        }
        for refused in [
            "rebind.example:3000",
            "rebind.example",
            "127.0.0.1.rebind.example:3000",
            "localhost.rebind.example",
            "10.0.0.5:3000",
            "[::2]:3000",
            "",
            "127.0.0.1:3000:1",
            "127.0.0.1:http",
            "user@127.0.0.1",
        ] {
            assert!(!hosts.allows(refused), "{refused}");
        }
    }

    #[test]
    fn configured_names_match_without_port_or_case() {
        let hosts = AllowedHosts::new(["https://Dash.Example.com", "10.0.0.5:3000", "ops.internal", " "]);
        for ok in [
            "dash.example.com",
            "DASH.example.com:443",
            "dash.example.com.",
            "10.0.0.5:8080",
            "ops.internal:3000",
        ] {
            assert!(hosts.allows(ok), "{ok}");
        }
        assert!(!hosts.allows("evil.example.com"));
        assert!(!hosts.allows("example.com"));
        assert_eq!(hosts.describe(), "loopback, dash.example.com, 10.0.0.5, ops.internal");
        assert!(AllowedHosts::new(["*"]).allows("anything.example:1"));
    }
}
