//! Who is asking, and what they may do. The server decides the [`Principal`] of every request
//! (local mode, a login session, an API token, or a trusted proxy header) and puts it in the
//! request's extensions; handlers, server functions and pages read it from there. Two roles
//! only: reading is open to every signed-in person, acting needs [`Role::Operator`].

use serde::{Deserialize, Serialize};

/// What a principal may do. Ordered: an operator can do everything a viewer can.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Reads every page and API resource.
    Viewer,
    /// May also re-queue tasks and mark them compensated.
    Operator,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s.trim().to_ascii_lowercase().as_str() {
            "viewer" => Some(Role::Viewer),
            "operator" => Some(Role::Operator),
            _ => None,
        }
    }
}

/// The one wording of a viewer's refused attempt to act (the JSON API's 403, the pages'
/// server functions, the audit's reason to look).
pub fn viewer_may_not_act(name: &str) -> String {
    format!("viewer {name} may not act; operator role required")
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The person (or script) behind a request. `name` is what the audit trail records as the
/// actor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Principal {
    pub name: String,
    pub role: Role,
    /// How they were recognised: `local`, `session`, `token` or `proxy` (shown in the header and
    /// in `GET /api/v1/me`).
    pub via: String,
}

impl Principal {
    pub fn can_act(&self) -> bool {
        self.role >= Role::Operator
    }

    /// This principal as the audit trail records them.
    pub fn actor(&self) -> Actor {
        let via = if self.via == "token" { format!("token:{}", self.name) } else { self.via.clone() };
        Actor { name: self.name.clone(), via }
    }
}

/// Who did (or tried) an operator action and how they signed in: what one audit row records
/// in `actor` and `via` (`session`, `token:<name>`, `proxy`, `cli`, `local`). An on-call review
/// asks "who tried what, from where": a token, a browser session and a shell are different
/// stories even under one name.
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
        Actor::new(name, "cli")
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
        let p = |role| Principal { name: "a".into(), role, via: "token".into() };
        assert!(p(Role::Operator).can_act());
        assert!(!p(Role::Viewer).can_act());
        assert_eq!(Role::parse(" Operator "), Some(Role::Operator));
        assert_eq!(Role::parse("admin"), None);
        assert_eq!(serde_json::to_string(&Role::Viewer).unwrap(), "\"viewer\"");
    }
}
