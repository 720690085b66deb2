//! The HTML shell and the route table, nothing else.

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
use leptos_router::path;
use leptos_router::SsrMode;

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
                    <Route path=path!("/") view=OverviewPage ssr=SsrMode::Async />
                    <Route path=path!("/failures") view=FailuresPage ssr=SsrMode::Async />
                    <Route path=path!("/tasks/:id") view=TaskPage ssr=SsrMode::Async />
                    <Route path=path!("/workers") view=WorkersPage ssr=SsrMode::Async />
                    <Route path=path!("/leases") view=LeasesPage ssr=SsrMode::Async />
                    <Route path=path!("/timeline") view=TimelinePage ssr=SsrMode::Async />
                    <Route path=path!("/audit") view=AuditPage ssr=SsrMode::Async />
                    <Route path=path!("/login") view=LoginPage ssr=SsrMode::Async />
                </Routes>
            </Layout>
        </Router>
    }
}
