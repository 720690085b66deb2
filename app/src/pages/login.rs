//! The sign-in page of users mode: a plain HTML form posting to `/auth/login`, so it works
//! before (and without) the wasm bundle. `?error=1` after a failed attempt; `?next=` is where
//! to go afterwards (the server only follows local paths).

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

#[component]
pub fn LoginPage() -> impl IntoView {
    let query = use_query_map();
    let next = move || query.read().get("next").unwrap_or_else(|| "/".into());
    let failed = move || query.read().get("error").is_some();
    view! {
        <Title text="Sign in" />
        <section class="page login">
            <h1>"Sign in"</h1>
            {move || {
                failed()
                    .then(|| {
                        view! {
                            <p class="banner banner-error" role="alert" data-testid="login-error">
                                "Wrong user name or password."
                            </p>
                        }
                    })
            }}
            <form method="post" action="/auth/login" class="login-form" data-testid="login-form">
                <label>"User name"<input name="username" autocomplete="username" required autofocus /></label>
                <label>
                    "Password"
                    <input type="password" name="password" autocomplete="current-password" required />
                </label>
                <input type="hidden" name="next" value=next />
                <button type="submit" class="btn">
                    "Sign in"
                </button>
            </form>
        </section>
    }
}
