#![recursion_limit = "256"]
//! The lastword dashboard as a Leptos app. Built twice by cargo-leptos: with `ssr` into the
//! server binary (pages render on the server, readable with JavaScript off) and with `hydrate`
//! into wasm (the same components take over in the browser for live updates).

pub mod api;
mod app;
pub mod auth;
pub mod components;
pub mod live;
pub mod pages;
pub mod site;

#[cfg(feature = "ssr")]
pub use app::ChunkPacks;
pub use app::{shell, App};

/// The browser entry point: attaches the server-rendered page to the reactive system. Pages are
/// lazy routes (`app.rs`), so hydration first waits for the opened page's wasm chunk, which
/// the server told the browser to preload.
#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    // Not leptos' spawn_local: its executor is set up inside hydrate_from_async.
    wasm_bindgen_futures::spawn_local(async {
        let Some(body) = web_sys::window().and_then(|w| w.document()).and_then(|d| d.body()) else {
            return;
        };
        // Lazy parts the server rendered open must be loaded before hydration reaches them.
        components::confirm::load_before_hydration().await;
        leptos::mount::hydrate_from_async(body.clone(), App).await.forget();
        // A marker for browser tests (and the curious): event handlers are attached from here on.
        let _ = body.set_attribute("data-hydrated", "true");
    });
}
