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

pub use app::{shell, App};

/// The browser entry point: attaches the server-rendered page to the reactive system.
#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(App);
    // A marker for browser tests (and the curious): event handlers are attached from here on.
    if let Some(body) = web_sys::window().and_then(|w| w.document()).and_then(|d| d.body()) {
        let _ = body.set_attribute("data-hydrated", "true");
    }
}
