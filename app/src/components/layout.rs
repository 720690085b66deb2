//! The frame around every page: navigation, theme, who is signed in, and the place for global
//! banners.

use crate::live::LiveBanner;
use leptos::prelude::*;

/// Theme preference: follow the system unless the operator chose.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Theme {
    System,
    Light,
    Dark,
}

impl Theme {
    fn as_str(self) -> &'static str {
        match self {
            Theme::System => "system",
            Theme::Light => "light",
            Theme::Dark => "dark",
        }
    }

    fn next(self) -> Theme {
        match self {
            Theme::System => Theme::Dark,
            Theme::Dark => Theme::Light,
            Theme::Light => Theme::System,
        }
    }

    #[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
    fn parse(s: &str) -> Theme {
        match s {
            "light" => Theme::Light,
            "dark" => Theme::Dark,
            _ => Theme::System,
        }
    }
}

#[cfg(feature = "hydrate")]
fn stored_theme() -> Option<Theme> {
    let storage = web_sys::window()?.local_storage().ok()??;
    storage.get_item("lastword-theme").ok()?.map(|s| Theme::parse(&s))
}

#[cfg(feature = "hydrate")]
fn store_theme(theme: Theme) {
    if let Some(Ok(Some(storage))) = web_sys::window().map(|w| w.local_storage()) {
        let _ = storage.set_item("lastword-theme", theme.as_str());
    }
}

#[component]
pub fn Layout(children: Children) -> impl IntoView {
    use crate::components::shortcuts::{install_shortcuts, ShortcutHelp};
    use crate::components::time::provide_time_prefs;
    use leptos_router::components::A;

    let theme = RwSignal::new(Theme::System);
    let prefs = provide_time_prefs();
    let help = RwSignal::new(false);
    // Who is signed in (server-rendered; the browser reuses the value, no extra request).
    let me = Resource::new(|| (), |_| crate::auth::whoami());
    provide_context(crate::auth::Me(me));
    crate::site::provide_site_settings();
    install_shortcuts(help, prefs.utc);
    // After hydration, pick up the operator's saved choice and persist changes.
    #[cfg(feature = "hydrate")]
    {
        Effect::new(move |first: Option<()>| {
            if first.is_none() {
                if let Some(saved) = stored_theme() {
                    theme.set(saved);
                }
            } else {
                store_theme(theme.get());
            }
            theme.track();
        });
    }

    view! {
        <div class="app" data-theme=move || theme.get().as_str()>
            <a class="skip-link" href="#content">
                "Skip to content"
            </a>
            <nav class="topnav" aria-label="Main">
                <A href="/" attr:class="brand">
                    "lastword"
                </A>
                <A href="/" exact=true>
                    "Overview"
                </A>
                <A href="/failures">"Failures"</A>
                <A href="/timeline">"Timeline"</A>
                <A href="/workers">"Workers"</A>
                <A href="/leases">"Leases"</A>
                <A href="/audit">"Audit"</A>
                <span class="spacer"></span>
                <button
                    type="button"
                    class="btn btn-quiet"
                    data-testid="utc-toggle"
                    title="Show times in UTC or local time (u)"
                    on:click=move |_| prefs.utc.update(|u| *u = !*u)
                >
                    {move || if prefs.utc.get() { "UTC" } else { "Local time" }}
                </button>
                <button
                    type="button"
                    class="btn btn-quiet"
                    data-testid="theme-toggle"
                    title="Theme: system → dark → light"
                    on:click=move |_| theme.update(|t| *t = t.next())
                >
                    {move || format!("Theme: {}", theme.get().as_str())}
                </button>
                <button
                    type="button"
                    class="btn btn-quiet"
                    title="Keyboard shortcuts (?)"
                    on:click=move |_| help.update(|h| *h = !*h)
                >
                    "?"
                </button>
                <Transition fallback=|| ()>
                    {move || {
                        me.get()
                            .and_then(Result::ok)
                            .flatten()
                            .map(|p| {
                                view! {
                                    <span
                                        class="whoami"
                                        data-testid="whoami"
                                        title=format!("signed in via {}", p.via)
                                    >
                                        {crate::auth::label(&p)}
                                    </span>
                                    // Only a login session can be ended here (tokens, proxies and local
                                    // mode have nothing to log out of).
                                    {(p.via == lastword_core::SignIn::Session)
                                        .then(|| {
                                            view! {
                                                <form method="post" action="/auth/logout" class="logout">
                                                    <button
                                                        type="submit"
                                                        class="btn btn-quiet"
                                                        data-testid="logout"
                                                    >
                                                        "Log out"
                                                    </button>
                                                </form>
                                            }
                                        })}
                                }
                            })
                    }}
                </Transition>
            </nav>
            <LiveBanner />
            <main id="content">{children()}</main>
            <ShortcutHelp open=help />
        </div>
    }
}

/// A page's heading: the document title and the `<h1>` say the same name, with the page's own
/// controls (a window, filters, a refresh) beside it.
#[component]
pub fn PageHead(title: &'static str, #[prop(optional)] children: Option<Children>) -> impl IntoView {
    view! {
        <leptos_meta::Title text=title />
        <header class="page-head">
            <h1>{title}</h1>
            {children.map(|c| c())}
        </header>
    }
}
