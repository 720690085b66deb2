//! Proxy mode: an authenticating reverse proxy (oauth2-proxy and the like) in front of the
//! dashboard names the user in a header. The header is only believed when the TCP peer is one
//! of the configured proxies; anyone else could simply send it.

use http::{HeaderMap, HeaderName};
use ipnet::IpNet;
use lastword_core::{Principal, Role, SignIn};
use std::collections::BTreeSet;
use std::net::IpAddr;

/// Who is trusted to say who the user is, and who among the users may act.
#[derive(Clone, Debug)]
pub struct ProxyConfig {
    /// The header naming the user (`X-Forwarded-User`).
    pub user_header: HeaderName,
    /// The header listing the user's groups, comma-separated (`X-Forwarded-Groups`), if any.
    pub groups_header: Option<HeaderName>,
    /// The peers whose headers are believed.
    pub trusted: Vec<IpNet>,
    /// Users who are operators by name.
    pub operators: BTreeSet<String>,
    /// Members of these groups are operators.
    pub operator_groups: BTreeSet<String>,
}

impl ProxyConfig {
    /// Trusts `user_header` from `trusted`; everyone is a viewer until roles are mapped.
    pub fn new(user_header: &str, trusted: Vec<IpNet>) -> Result<ProxyConfig, String> {
        Ok(ProxyConfig {
            user_header: header_name(user_header)?,
            groups_header: None,
            trusted,
            operators: BTreeSet::new(),
            operator_groups: BTreeSet::new(),
        })
    }

    /// The principal the proxy vouches for, if the peer is trusted and names someone.
    pub fn principal(&self, peer: Option<IpAddr>, headers: &HeaderMap) -> Option<Principal> {
        let peer = peer?.to_canonical();
        if !self.trusted.iter().any(|net| net.contains(&peer)) {
            return None;
        }
        // Exactly once: a proxy that appends instead of replacing would pass a client's own
        // copy along beside its own, and which of the two is the proxy's is unknowable.
        let name = only_value(headers, &self.user_header)?.trim();
        if name.is_empty() {
            return None;
        }
        let in_operator_group = || {
            let Some(header) = &self.groups_header else { return false };
            let Some(groups) = only_value(headers, header) else {
                if headers.contains_key(header) {
                    tracing::warn!(header = %header, "groups header sent more than once; ignoring the groups");
                }
                return false;
            };
            groups.split(',').any(|g| self.operator_groups.contains(g.trim()))
        };
        let role =
            if self.operators.contains(name) || in_operator_group() { Role::Operator } else { Role::Viewer };
        Some(Principal { name: name.to_string(), role, via: SignIn::Proxy })
    }

    /// "10.0.0.0/8, 192.168.1.7/32", for the start-up log.
    pub fn trusted_summary(&self) -> String {
        self.trusted.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", ")
    }
}

/// The header's value if it appears exactly once and is text; `None` if absent, repeated or
/// not text.
fn only_value<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Option<&'h str> {
    let mut values = headers.get_all(name).iter();
    let first = values.next()?;
    if values.next().is_some() {
        tracing::warn!(header = %name, "proxy header sent more than once; not believed");
        return None;
    }
    first.to_str().ok()
}

/// A header name from the command line.
pub fn header_name(s: &str) -> Result<HeaderName, String> {
    HeaderName::try_from(s.trim()).map_err(|_| format!("{s:?} is not an HTTP header name"))
}

/// `10.0.0.0/8,127.0.0.1,::1`: IPs and CIDR blocks, comma-separated (a bare IP is one host).
pub fn parse_trusted(s: &str) -> Result<Vec<IpNet>, String> {
    let nets = s
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.parse::<IpNet>()
                .or_else(|_| p.parse::<IpAddr>().map(IpNet::from))
                .map(|n| n.trunc())
                .map_err(|_| format!("{p:?} is not an IP address or CIDR block"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if nets.is_empty() {
        return Err("no trusted proxy addresses given".to_string());
    }
    Ok(nets)
}

/// A comma-separated list of names, blanks dropped.
pub fn name_list(s: &str) -> BTreeSet<String> {
    s.split(',').map(str::trim).filter(|n| !n.is_empty()).map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trusted_peers_only_and_roles_from_names_or_groups() {
        let mut config =
            ProxyConfig::new("X-Forwarded-User", parse_trusted("10.0.0.0/8, 127.0.0.1").unwrap()).unwrap();
        config.operators = name_list("alice, bob");
        config.groups_header = Some(header_name("X-Forwarded-Groups").unwrap());
        config.operator_groups = name_list("sre,oncall");
        let headers = |user: &str, groups: &str| {
            let mut h = HeaderMap::new();
            h.insert("x-forwarded-user", user.parse().unwrap());
            if !groups.is_empty() {
                h.insert("x-forwarded-groups", groups.parse().unwrap());
            }
            h
        };
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        let role = |peer, user, groups| config.principal(peer, &headers(user, groups)).map(|p| p.role);
        assert_eq!(role(ip("10.1.2.3"), "alice", ""), Some(Role::Operator));
        assert_eq!(role(ip("10.1.2.3"), "carol", "devs, oncall"), Some(Role::Operator));
        assert_eq!(role(ip("10.1.2.3"), "carol", "devs"), Some(Role::Viewer));
        assert_eq!(role(ip("127.0.0.1"), "dave", ""), Some(Role::Viewer));
        assert_eq!(role(ip("::ffff:10.0.0.1"), "alice", ""), Some(Role::Operator), "IPv4-mapped peers");
        assert_eq!(role(ip("192.168.0.1"), "alice", ""), None, "untrusted peer");
        assert_eq!(role(None, "alice", ""), None, "unknown peer");
        assert_eq!(role(ip("10.1.2.3"), " ", ""), None, "blank user");
        assert_eq!(config.principal(ip("10.1.2.3"), &HeaderMap::new()), None);

        // A header the client smuggled in beside the proxy's own: neither is believed.
        let mut twice = headers("carol", "");
        twice.append("x-forwarded-user", "alice".parse().unwrap());
        assert_eq!(config.principal(ip("10.1.2.3"), &twice), None, "user header twice");
        // Groups twice: the user stands, the groups are ignored.
        let mut groups_twice = headers("carol", "devs");
        groups_twice.append("x-forwarded-groups", "oncall".parse().unwrap());
        assert_eq!(config.principal(ip("10.1.2.3"), &groups_twice).map(|p| p.role), Some(Role::Viewer));
        assert_eq!(config.principal(ip("10.1.2.3"), &headers("alice", "")).unwrap().via, SignIn::Proxy);
    }

    #[test]
    fn trusted_lists_parse_ips_and_blocks() {
        assert_eq!(parse_trusted("10.0.0.0/8,::1").unwrap().len(), 2);
        assert_eq!(parse_trusted("10.1.2.3/8").unwrap()[0].to_string(), "10.0.0.0/8");
        assert!(parse_trusted("").is_err());
        assert!(parse_trusted("10.0.0.0/33").is_err());
        assert!(parse_trusted("proxy.internal").is_err());
    }
}
