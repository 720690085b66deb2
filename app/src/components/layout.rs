//! The frame around every page: navigation, theme, and the place for global banners.

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
    let theme = RwSignal::new(Theme::System);
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
            <nav class="topnav" aria-label="Main">
                <a class="brand" href="/">"lastword"</a>
                <a href="/">"Overview"</a>
                <span class="spacer"></span>
                <button
                    type="button"
                    class="btn btn-quiet"
                    data-testid="theme-toggle"
                    title="Theme: system → dark → light"
                    on:click=move |_| theme.update(|t| *t = t.next())
                >
                    {move || format!("Theme: {}", theme.get().as_str())}
                </button>
            </nav>
            <LiveBanner />
            <main>{children()}</main>
        </div>
    }
}
