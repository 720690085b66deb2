//! The HTML shell and the route table, nothing else.
//!
//! Every page is a lazy route: `cargo leptos build --split` puts each page's code (its views,
//! its answer types' JSON readers) in wasm chunks of its own, so a first visit downloads the
//! shell and the page it opened, not all eight (sizes: docs/bundle-size.md). The server names
//! what the page needs as `<link rel="preload">`: the page's pack, all its chunks in one file
//! (`server/src/packs.rs`), or else each chunk (from cargo-leptos' `__wasm_split_manifest.json`),
//! so hydration waits on no second round trip, and hydration itself waits for them
//! (`crate::hydrate`). Every wasm build needs `--split` (scripts/test,
//! scripts/run and scripts/bench pass it): without it the wasm imports a chunk loader that
//! does not exist and no page comes alive, which the server says at start
//! (`assets::check_bundle_is_split`).

use crate::components::layout::Layout;
use crate::live::{provide_live_feed, LiveMeta};
use crate::pages::audit::AuditPage;
use crate::pages::failures::FailuresPage;
use crate::pages::leases::LeasesPage;
use crate::pages::login::LoginPage;
use crate::pages::overview::OverviewPage;
use crate::pages::task::TaskPage;
use crate::pages::timeline::TimelinePage;
use crate::pages::workers::WorkersPage;
use leptos::prelude::*;
use leptos_meta::{provide_meta_context, HashedStylesheet, MetaTags, Title};
use leptos_router::components::{Route, Router, Routes};
use leptos_router::{lazy_route, path, Lazy, LazyRoute, SsrMode};

/// The document around every page; rendered on the server only.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8" />
                <meta name="viewport" content="width=device-width, initial-scale=1" />
                <meta name="color-scheme" content="light dark" />
                <AutoReload options=options.clone() />
                // The bundle's names: content-hashed when the build hashed them (cargo-leptos
                // `hash-files`), so the server can let browsers cache them for good.
                <HashedStylesheet options=options.clone() id="leptos" />
                <HydrationScripts options />
                <MetaTags />
                <LiveMeta />
            </head>
            <body>
                <App />
            </body>
        </html>
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    // One live-update stream for the page; pages read it with `use_live_feed()`.
    provide_live_feed();
    view! {
        <Title formatter=|page: String| {
            if page.is_empty() { "lastword".to_string() } else { format!("{page} · lastword") }
        } />
        // Async SSR: the server sends each page complete, so it reads the same with JavaScript
        // off (out-of-order streaming would leave fallbacks that only a script can replace).
        <Router>
            <Layout>
                <Routes fallback=|| {
                    view! {
                        <section class="empty">
                            <h1>"Not found"</h1>
                            <p>"No page here. "<a href="/">"Back to the overview"</a></p>
                        </section>
                    }
                }>
                    <Route path=path!("/") view={Lazy::<Overview>::new()} ssr=SsrMode::Async />
                    <Route path=path!("/failures") view={Lazy::<Failures>::new()} ssr=SsrMode::Async />
                    <Route path=path!("/tasks/:id") view={Lazy::<Task>::new()} ssr=SsrMode::Async />
                    <Route path=path!("/workers") view={Lazy::<Workers>::new()} ssr=SsrMode::Async />
                    <Route path=path!("/leases") view={Lazy::<Leases>::new()} ssr=SsrMode::Async />
                    <Route path=path!("/timeline") view={Lazy::<Timeline>::new()} ssr=SsrMode::Async />
                    <Route path=path!("/audit") view={Lazy::<Audit>::new()} ssr=SsrMode::Async />
                    <Route path=path!("/login") view={Lazy::<Login>::new()} ssr=SsrMode::Async />
                </Routes>
            </Layout>
        </Router>
    }
}

/// Where the server keeps a page's chunks packed into one file (`server/src/packs.rs`): the
/// pack's file name for a route (`task`), if the server has one. Provided to every render.
#[cfg(feature = "ssr")]
#[derive(Clone)]
pub struct ChunkPacks(pub std::sync::Arc<PackNameOf>);

/// A route's name (`task`) to its pack's file name, if the server packed that route.
#[cfg(feature = "ssr")]
pub type PackNameOf = dyn Fn(&str) -> Option<String> + Send + Sync;

/// Names what the page being rendered needs of the bundle as `<link rel="preload">` in the page's
/// head, with the chunk loader as a module preload, so the browser fetches them with the shell:
/// the page's pack (all its chunks in one file) when the server has one, else each chunk.
///
/// Leptos names the chunks itself, but not reliably: its server integration provides the context
/// that collects the lazy functions a render ran only after the render has started, and a route's
/// view that runs first is lost (measured: `/timeline` named its chunks in about one request of
/// three). The chunk keys in cargo-leptos' manifest are the lazy view functions' names,
/// `__<route>_view_<hash>` (`#[lazy_route]` names the view `__<Route>_View`, `#[lazy]` puts it in
/// snake case and adds a hash of where it was declared). Registered with the meta context as
/// leptos does it (`to_html` on a `Link` adds it to the head), so nothing enters the body and
/// hydration, which never sees these tags, is not disturbed. A build without a manifest (no
/// `--split`) names nothing.
#[cfg(feature = "ssr")]
fn preload_chunks_of(route: &str) {
    use leptos_meta::Link;
    let Some(manifest) = use_context::<leptos::WasmSplitManifest>() else { return };
    let Some(manifest) = manifest.0.try_read_value() else { return };
    let (pkg, chunks, loader) = &*manifest;
    let route = route.to_lowercase();
    let key_prefix = format!("__{route}_view_");
    let nonce = leptos::nonce::use_nonce().map(|n| n.to_string()).unwrap_or_default();
    let pack = use_context::<ChunkPacks>().and_then(|packs| (packs.0)(&route));
    let files: Vec<String> = match pack {
        Some(pack) => {
            // Leptos would name the chunks as well when its race goes the other way: the lazy view
            // registered itself (its first statement, before this) to be preloaded chunk by chunk.
            // The pack holds them; a browser told of both would download them twice.
            if let Some(prefetches) = use_context::<leptos::PrefetchLazyFn>() {
                if let Some(mut keys) = prefetches.0.try_write_value() {
                    keys.retain(|key| !key.starts_with(&key_prefix));
                }
            }
            vec![pack]
        }
        None => chunks
            .iter()
            .filter(|(key, _)| key.starts_with(&key_prefix))
            .flat_map(|(_, modules)| modules.iter().map(|m| format!("{m}.wasm")))
            .collect(),
    };
    for file in files {
        let href = format!("{pkg}/{file}");
        // A pack is not wasm itself: no type for it, so no browser skips it as unsupported.
        let _ = if file.ends_with(".wasm") {
            view! { <Link rel="preload" href as_="fetch" type_="application/wasm" crossorigin=nonce.clone() /> }
                .to_html()
        } else {
            view! { <Link rel="preload" href as_="fetch" crossorigin=nonce.clone() /> }.to_html()
        };
    }
    let _ = view! { <Link rel="modulepreload" href=format!("{pkg}/{loader}") crossorigin=nonce /> }.to_html();
}

/// A page as a lazy route: no data of its own before its code arrives (each page creates its
/// resources itself), and a view that is the page component.
macro_rules! lazy_page {
    ($($route:ident => $page:ident),* $(,)?) => {$(
        #[doc = concat!("The route of [`", stringify!($page), "`], loaded with its own wasm chunk.")]
        struct $route;

        #[lazy_route]
        impl LazyRoute for $route {
            fn data() -> Self {
                $route
            }

            fn view(_this: Self) -> AnyView {
                #[cfg(feature = "ssr")]
                preload_chunks_of(stringify!($route));
                view! { <$page /> }.into_any()
            }
        }
    )*};
}

lazy_page! {
    Overview => OverviewPage,
    Failures => FailuresPage,
    Task => TaskPage,
    Workers => WorkersPage,
    Leases => LeasesPage,
    Timeline => TimelinePage,
    Audit => AuditPage,
    Login => LoginPage,
}
