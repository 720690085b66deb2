//! The `lastword serve` options that choose how people are recognised, and their validation:
//! a server that would expose its local operator to the network, or whose users file has a
//! mistake in it, refuses to start with a message saying what to do instead.

use crate::auth::cross_origin::PublicOrigin;
use crate::auth::host::AllowedHosts;
use crate::auth::proxy::{self, ProxyConfig};
use crate::auth::users::Users;
use crate::auth::{Auth, Mode};
use anyhow::Context;
use clap::Args;
use lastword_store::Db;
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Clone, Debug, Args)]
pub struct AuthArgs {
    /// Who may use the dashboard: local (one operator, loopback only), users (login and API
    /// tokens), proxy (an authenticating reverse proxy). See docs/auth.md.
    #[arg(long = "auth", env = "LASTWORD_AUTH", value_enum, default_value_t = Mode::Local)]
    pub mode: Mode,

    /// The users TOML file (users mode; in proxy mode its tokens are accepted too).
    #[arg(long, env = "LASTWORD_USERS_FILE")]
    pub users_file: Option<PathBuf>,

    /// The users TOML text itself, instead of --users-file.
    #[arg(long = "users", env = "LASTWORD_USERS", hide_env_values = true, conflicts_with = "users_file")]
    pub users_toml: Option<String>,

    /// Mark the session cookie Secure (set when browsers reach the dashboard over HTTPS).
    #[arg(long, env = "LASTWORD_COOKIE_SECURE")]
    pub cookie_secure: bool,

    /// Origins browsers reach the dashboard at, when a proxy rewrites Host
    /// (https://lastword.example.com; comma-separated).
    #[arg(long, env = "LASTWORD_PUBLIC_ORIGIN", value_delimiter = ',')]
    pub public_origin: Vec<String>,

    /// Host names (or addresses) the dashboard is reached at, besides loopback and the hosts of
    /// --public-origin (comma-separated); requests naming any other Host are refused (DNS
    /// rebinding). `*` accepts any host, for a proxy that checks Host itself.
    #[arg(long, env = "LASTWORD_ALLOWED_HOSTS", value_delimiter = ',')]
    pub allowed_host: Vec<String>,

    /// Proxy mode: the header naming the user.
    #[arg(long, env = "LASTWORD_PROXY_USER_HEADER", default_value = "X-Forwarded-User")]
    pub proxy_user_header: String,

    /// Proxy mode: peers (IPs or CIDR blocks, comma-separated) whose header is believed.
    #[arg(long, env = "LASTWORD_TRUSTED_PROXIES")]
    pub trusted_proxies: Option<String>,

    /// Proxy mode: user names that are operators (comma-separated).
    #[arg(long, env = "LASTWORD_PROXY_OPERATORS")]
    pub proxy_operators: Option<String>,

    /// Proxy mode: the header listing the user's groups (comma-separated values).
    #[arg(long, env = "LASTWORD_PROXY_GROUPS_HEADER")]
    pub proxy_groups_header: Option<String>,

    /// Proxy mode: members of these groups are operators (comma-separated).
    #[arg(long, env = "LASTWORD_PROXY_OPERATOR_GROUPS")]
    pub proxy_operator_groups: Option<String>,
}

impl Default for AuthArgs {
    fn default() -> Self {
        AuthArgs {
            mode: Mode::Local,
            users_file: None,
            users_toml: None,
            cookie_secure: false,
            public_origin: vec![],
            allowed_host: vec![],
            proxy_user_header: "X-Forwarded-User".to_string(),
            trusted_proxies: None,
            proxy_operators: None,
            proxy_groups_header: None,
            proxy_operator_groups: None,
        }
    }
}

/// Local mode has no login, so it may only listen where nobody else can connect.
pub fn check_local_addr(mode: Mode, addr: SocketAddr) -> Result<(), String> {
    if mode != Mode::Local || addr.ip().to_canonical().is_loopback() {
        return Ok(());
    }
    Err(format!(
        "refusing to serve {addr} in local auth mode: local mode has no login and makes everyone \
         an operator, so it only listens on loopback addresses (127.0.0.1, ::1). Listen on \
         127.0.0.1, or choose --auth users (with --users-file) or --auth proxy (with \
         --trusted-proxies); see docs/auth.md"
    ))
}

impl AuthArgs {
    /// The users and tokens, from the file or the environment, validated; `None` if neither
    /// was given.
    pub fn load_users(&self) -> anyhow::Result<Option<Users>> {
        let (text, source) = match (&self.users_file, &self.users_toml) {
            (Some(path), _) => (
                std::fs::read_to_string(path)
                    .with_context(|| format!("reading the users file {}", path.display()))?,
                path.display().to_string(),
            ),
            (None, Some(text)) => (text.clone(), "LASTWORD_USERS".to_string()),
            (None, None) => return Ok(None),
        };
        Users::parse(&text).map(Some).with_context(|| format!("invalid users in {source}"))
    }

    /// Validates everything and builds the server's [`Auth`] (creating the session table in
    /// users mode).
    pub async fn build(&self, addr: SocketAddr, db: &Db) -> anyhow::Result<Auth> {
        check_local_addr(self.mode, addr).map_err(anyhow::Error::msg)?;
        let public_origins = self
            .public_origin
            .iter()
            .filter(|o| !o.trim().is_empty())
            .map(|o| PublicOrigin::parse(o).map_err(anyhow::Error::msg))
            .collect::<anyhow::Result<Vec<_>>>()
            .context("--public-origin")?;
        let auth = match self.mode {
            Mode::Local => Auth::local(),
            Mode::Users => {
                let users = self.load_users()?.ok_or_else(|| {
                    anyhow::anyhow!(
                        "--auth users needs --users-file PATH or LASTWORD_USERS (see docs/auth.md)"
                    )
                })?;
                Auth::users(users, db).await?
            }
            Mode::Proxy => Auth::proxy(self.proxy_config()?, self.load_users()?),
        };
        let allowed_hosts = self.allowed_hosts(addr);
        tracing::info!(hosts = allowed_hosts.describe(), "serving requests for these hosts");
        Ok(auth
            .with_cookie_secure(self.cookie_secure)
            .with_public_origins(public_origins)
            .with_allowed_hosts(allowed_hosts))
    }

    /// Loopback, `--allowed-host`, the hosts of `--public-origin`, and the address we listen
    /// on when it is one address (not `0.0.0.0`/`::`, which says nothing about our name).
    pub fn allowed_hosts(&self, addr: SocketAddr) -> AllowedHosts {
        let listen = (!addr.ip().is_unspecified()).then(|| match addr.ip() {
            std::net::IpAddr::V6(ip) => format!("[{ip}]"),
            ip => ip.to_string(),
        });
        AllowedHosts::new(
            self.allowed_host.iter().cloned().chain(self.public_origin.iter().cloned()).chain(listen),
        )
    }

    fn proxy_config(&self) -> anyhow::Result<ProxyConfig> {
        let trusted = self.trusted_proxies.as_deref().ok_or_else(|| {
            anyhow::anyhow!(
                "--auth proxy needs --trusted-proxies (the proxy's IPs or CIDR blocks): without it \
                 anyone could send {} and be believed",
                self.proxy_user_header
            )
        })?;
        let trusted =
            proxy::parse_trusted(trusted).map_err(anyhow::Error::msg).context("--trusted-proxies")?;
        let mut config = ProxyConfig::new(&self.proxy_user_header, trusted)
            .map_err(anyhow::Error::msg)
            .context("--proxy-user-header")?;
        config.operators = proxy::name_list(self.proxy_operators.as_deref().unwrap_or_default());
        config.operator_groups = proxy::name_list(self.proxy_operator_groups.as_deref().unwrap_or_default());
        config.groups_header = self
            .proxy_groups_header
            .as_deref()
            .map(proxy::header_name)
            .transpose()
            .map_err(anyhow::Error::msg)
            .context("--proxy-groups-header")?;
        anyhow::ensure!(
            config.operator_groups.is_empty() || config.groups_header.is_some(),
            "--proxy-operator-groups needs --proxy-groups-header"
        );
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_hosts_are_loopback_the_flags_the_public_origins_and_a_specific_listen_address() {
        let addr = |s: &str| s.parse::<SocketAddr>().unwrap();
        let args = AuthArgs {
            allowed_host: vec!["ops.internal".into()],
            public_origin: vec!["https://dash.example.com".into()],
            ..AuthArgs::default()
        };
        let on_one = args.allowed_hosts(addr("10.0.0.5:3000"));
        assert_eq!(on_one.describe(), "loopback, ops.internal, dash.example.com, 10.0.0.5");
        assert!(on_one.allows("10.0.0.5:3000") && on_one.allows("dash.example.com"));
        let on_all = args.allowed_hosts(addr("0.0.0.0:3000"));
        assert!(!on_all.allows("0.0.0.0:3000") && !on_all.allows("10.0.0.5:3000"), "{}", on_all.describe());
        assert!(args.allowed_hosts(addr("[fd00::5]:3000")).allows("[fd00::5]:3000"));
    }

    #[test]
    fn local_mode_listens_on_loopback_only() {
        let addr = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert!(check_local_addr(Mode::Local, addr("127.0.0.1:3000")).is_ok());
        assert!(check_local_addr(Mode::Local, addr("127.8.9.10:3000")).is_ok());
        assert!(check_local_addr(Mode::Local, addr("[::1]:3000")).is_ok());
        assert!(check_local_addr(Mode::Local, addr("[::ffff:127.0.0.1]:3000")).is_ok());
        let refused = check_local_addr(Mode::Local, addr("0.0.0.0:3000")).unwrap_err();
        assert!(refused.contains("0.0.0.0:3000"), "{refused}");
        assert!(refused.contains("--auth users") && refused.contains("--auth proxy"), "{refused}");
        assert!(check_local_addr(Mode::Local, addr("[::]:3000")).is_err());
        assert!(check_local_addr(Mode::Local, addr("192.168.1.5:3000")).is_err());
        assert!(check_local_addr(Mode::Users, addr("0.0.0.0:3000")).is_ok());
        assert!(check_local_addr(Mode::Proxy, addr("0.0.0.0:3000")).is_ok());
    }

    #[test]
    fn proxy_mode_needs_trusted_proxies_and_users_mode_needs_users() {
        let args = AuthArgs { mode: Mode::Proxy, ..AuthArgs::default() };
        let err = args.proxy_config().unwrap_err().to_string();
        assert!(err.contains("--trusted-proxies"), "{err}");
        let args = AuthArgs {
            mode: Mode::Proxy,
            trusted_proxies: Some("10.0.0.0/8".into()),
            proxy_operator_groups: Some("sre".into()),
            ..AuthArgs::default()
        };
        assert!(args.proxy_config().is_err(), "groups without a groups header");
        let args = AuthArgs { users_toml: Some("[[user]]\nname = \"a\"\n".into()), ..AuthArgs::default() };
        let err = format!("{:#}", args.load_users().unwrap_err());
        assert!(err.contains("LASTWORD_USERS"), "{err}");
    }
}
