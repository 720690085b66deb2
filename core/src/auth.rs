//! Who is asking, and what they may do. The server decides the [`Principal`] of every request
//! (local mode, a login session, an API token, or a trusted proxy header) and puts it in the
//! request's extensions; handlers, server functions and pages read it from there. Two roles
//! only: reading is open to every signed-in person, acting needs [`Role::Operator`].

use serde::{Deserialize, Serialize};

string_enum!(
    /// What a principal may do. Ordered: an operator can do everything a viewer can.
    #[derive(PartialOrd, Ord)]
    Role, "role" {
        /// Reads every page and API resource.
        Viewer => "viewer",
        /// May also re-queue tasks and mark them compensated.
        Operator => "operator",
    }
);

impl Role {
    /// A role as people write it in a users file or on the command line: case and surrounding
    /// blanks do not matter.
    pub fn parse(s: &str) -> Option<Role> {
        s.trim().to_ascii_lowercase().parse().ok()
    }
}

string_enum!(
    /// How a principal was recognised (shown in the header, in `GET /api/v1/me`, and recorded
    /// with every operator action).
    SignIn, "via" {
        /// Local mode: the one operator on a loopback address.
        Local => "local",
        /// A login session (users mode).
        Session => "session",
        /// An API token (`Authorization: Bearer`).
        Token => "token",
        /// A trusted reverse proxy's user header.
        Proxy => "proxy",
        /// The command line (`lastword requeue …`), which reaches the database directly.
        Cli => "cli",
    }
);

/// The one wording of a viewer's refused attempt to act (the JSON API's 403, the pages'
/// server functions, the audit's reason to look).
pub fn viewer_may_not_act(name: &str) -> String {
    format!("viewer {name} may not act; operator role required")
}

/// The person (or script) behind a request. `name` is what the audit trail records as the
/// actor.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Principal {
    pub name: String,
    pub role: Role,
    /// How they were recognised.
    pub via: SignIn,
}

impl Principal {
    pub fn can_act(&self) -> bool {
        self.role >= Role::Operator
    }

    /// This principal as the audit trail records them.
    pub fn actor(&self) -> Actor {
        // A token is recorded with its name: two tokens of one person are two stories.
        let via = match self.via {
            SignIn::Token => format!("token:{}", self.name),
            other => other.as_str().to_string(),
        };
        Actor { name: self.name.clone(), via }
    }
}

/// Who did (or tried) an operator action and how they signed in: what one audit row records
/// in `actor` and `via` (`session`, `token:<name>`, `proxy`, `cli`, `local`). An on-call review
/// asks "who tried what, from where": a token, a browser session and a shell are different
/// stories even under one name. `via` is text, not a [`SignIn`], because it carries the token's
/// name and is read back from rows written by older versions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Actor {
    pub name: String,
    pub via: String,
}

impl Actor {
    pub fn new(name: impl Into<String>, via: impl Into<String>) -> Actor {
        Actor { name: name.into(), via: via.into() }
    }

    /// Someone acting from the command line (`lastword requeue …`, `lastword compensate …`).
    pub fn cli(name: impl Into<String>) -> Actor {
        Actor::new(name, SignIn::Cli.as_str())
    }
}

impl std::fmt::Display for Actor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_operators_act_and_roles_parse_case_blind() {
        let p = |role| Principal { name: "a".into(), role, via: SignIn::Token };
        assert!(p(Role::Operator).can_act());
        assert!(!p(Role::Viewer).can_act());
        assert_eq!(Role::parse(" Operator "), Some(Role::Operator));
        assert_eq!(Role::parse("admin"), None);
        assert_eq!(serde_json::to_string(&Role::Viewer).unwrap(), "\"viewer\"");
        assert!(Role::Operator > Role::Viewer);
    }

    #[test]
    fn a_token_is_recorded_with_its_name_and_other_sign_ins_as_they_are() {
        let p = |via| Principal { name: "bob".into(), role: Role::Operator, via };
        assert_eq!(p(SignIn::Token).actor().via, "token:bob");
        assert_eq!(p(SignIn::Session).actor().via, "session");
        assert_eq!(p(SignIn::Local).actor(), Actor::new("bob", "local"));
        assert_eq!(Actor::cli("ann").via, "cli");
    }
}
