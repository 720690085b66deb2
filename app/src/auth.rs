//! Who is looking at the page. The server's auth middleware puts the request's
//! [`Principal`] in the request extensions before any page renders or server function runs;
//! this module reads it back out, on the server with [`current_principal`] and in the browser
//! with the [`whoami`] server function (docs/auth.md).

use lastword_core::Principal;
use leptos::prelude::*;

/// The principal of the request being served, for server functions and server rendering:
/// `None` only on the open pages (the login page) when nobody is signed in.
///
/// Server functions that change something check the role themselves:
///
/// ```text
/// let who = current_principal().filter(|p| p.can_act())
///     .ok_or_else(|| api::ssr::refuse(StatusCode::FORBIDDEN, "operator role required"))?;
/// ```
///
/// leptos_axum provides the request's `http::request::Parts` (extensions included) as context
/// for both page rendering and server functions, so this works in either.
#[cfg(feature = "ssr")]
pub fn current_principal() -> Option<Principal> {
    use_context::<http::request::Parts>().and_then(|parts| parts.extensions.get::<Principal>().cloned())
}

/// Who the server says is signed in (the page header shows it).
#[server(prefix = "/api/fn", endpoint = "whoami", output = crate::api::JsonAnswer)]
pub async fn whoami() -> Result<Option<Principal>, ServerFnError> {
    Ok(current_principal())
}

/// The header's who-am-I resource, shared with the pages through context (one request per
/// page load, server-rendered and reused by the browser).
#[derive(Clone, Copy)]
pub struct Me(pub Resource<Result<Option<Principal>, ServerFnError>>);

/// Whether the signed-in principal may act: pages show action buttons only then (the server
/// checks again on every action). Read it inside a `Transition`.
pub fn use_can_act() -> Signal<bool> {
    let me = use_context::<Me>();
    Signal::derive(move || {
        me.and_then(|m| m.0.get()).and_then(Result::ok).flatten().is_some_and(|p| p.can_act())
    })
}

/// "alice · operator", or "local operator" in local mode.
pub fn label(p: &Principal) -> String {
    if p.via == lastword_core::SignIn::Local {
        format!("local {}", p.role)
    } else {
        format!("{} · {}", p.name, p.role)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lastword_core::{Role, SignIn};

    #[test]
    fn labels() {
        let p = |name: &str, role, via| Principal { name: name.into(), role, via };
        assert_eq!(label(&p("local", Role::Operator, SignIn::Local)), "local operator");
        assert_eq!(label(&p("alice", Role::Viewer, SignIn::Session)), "alice · viewer");
    }
}
