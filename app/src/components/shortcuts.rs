//! Keyboard shortcuts for the common moves, and the `?` overlay that lists them.
//! `/` filter · `j`/`k` next/previous row · `Enter` open · `g o|f|t|w|a` go to a page · `?` help.

use leptos::prelude::*;

pub const SHORTCUTS: [(&str, &str); 10] = [
    ("/", "focus the filter"),
    ("j / k", "next / previous row"),
    ("Enter", "open the selected row"),
    ("g o", "go to the overview"),
    ("g f", "go to failures"),
    ("g t", "go to the live timeline"),
    ("g w", "go to workers"),
    ("g l", "go to leases"),
    ("u", "toggle UTC / local time"),
    ("?", "show or hide this help"),
];

/// The help overlay; `open` is toggled by `?` (and closed by Escape or its button).
#[component]
pub fn ShortcutHelp(open: RwSignal<bool>) -> impl IntoView {
    view! {
        <Show when=move || open.get()>
            <div class="overlay" role="dialog" aria-modal="true" aria-labelledby="shortcut-title">
                <div class="overlay-box">
                    <h2 id="shortcut-title">"Keyboard shortcuts"</h2>
                    <dl class="shortcuts">
                        {SHORTCUTS
                            .iter()
                            .map(|(k, what)| {
                                view! {
                                    <div>
                                        <dt>
                                            <kbd>{*k}</kbd>
                                        </dt>
                                        <dd>{*what}</dd>
                                    </div>
                                }
                            })
                            .collect_view()}
                    </dl>
                    <button type="button" class="btn" on:click=move |_| open.set(false)>
                        "Close"
                    </button>
                </div>
            </div>
        </Show>
    }
}

/// Installs the global key handler (browser only).
pub fn install_shortcuts(help: RwSignal<bool>, utc: RwSignal<bool>) {
    #[cfg(feature = "hydrate")]
    {
        use leptos::ev;
        use wasm_bindgen::JsCast;
        let navigate = leptos_router::hooks::use_navigate();
        let pending_g = RwSignal::new(false);
        let row = RwSignal::new(-1i32);
        let handle = window_event_listener(ev::keydown, move |e: web_sys::KeyboardEvent| {
            if e.ctrl_key() || e.meta_key() || e.alt_key() {
                return;
            }
            let typing = e
                .target()
                .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
                .map(|el| matches!(el.tag_name().as_str(), "INPUT" | "TEXTAREA" | "SELECT"))
                .unwrap_or(false);
            if typing {
                if e.key() == "Escape" {
                    if let Some(el) =
                        document().active_element().and_then(|a| a.dyn_into::<web_sys::HtmlElement>().ok())
                    {
                        let _ = el.blur();
                    }
                }
                return;
            }
            let key = e.key();
            if pending_g.get_untracked() {
                pending_g.set(false);
                let to = match key.as_str() {
                    "o" => Some("/"),
                    "f" => Some("/failures"),
                    "t" => Some("/timeline"),
                    "w" => Some("/workers"),
                    "l" => Some("/leases"),
                    _ => None,
                };
                if let Some(to) = to {
                    e.prevent_default();
                    row.set(-1);
                    navigate(to, Default::default());
                }
                return;
            }
            match key.as_str() {
                "g" => pending_g.set(true),
                "?" => help.update(|h| *h = !*h),
                "Escape" => help.set(false),
                "u" => utc.update(|u| *u = !*u),
                "/" => {
                    if let Some(input) = document()
                        .query_selector("[data-filter-focus]")
                        .ok()
                        .flatten()
                        .and_then(|el| el.dyn_into::<web_sys::HtmlElement>().ok())
                    {
                        e.prevent_default();
                        let _ = input.focus();
                    }
                }
                "j" | "k" => {
                    let Ok(rows) = document().query_selector_all("[data-row]") else { return };
                    let n = rows.length() as i32;
                    if n == 0 {
                        return;
                    }
                    let next = if key == "j" {
                        (row.get_untracked() + 1).min(n - 1)
                    } else {
                        (row.get_untracked() - 1).max(0)
                    };
                    row.set(next);
                    for i in 0..n {
                        if let Some(el) =
                            rows.item(i as u32).and_then(|n| n.dyn_into::<web_sys::Element>().ok())
                        {
                            let _ = if i == next {
                                el.class_list().add_1("selected")
                            } else {
                                el.class_list().remove_1("selected")
                            };
                            if i == next {
                                if let Some(link) = el
                                    .query_selector("a")
                                    .ok()
                                    .flatten()
                                    .and_then(|a| a.dyn_into::<web_sys::HtmlElement>().ok())
                                {
                                    let _ = link.focus();
                                }
                            }
                        }
                    }
                    e.prevent_default();
                }
                _ => {}
            }
        });
        on_cleanup(move || handle.remove());
    }
    #[cfg(not(feature = "hydrate"))]
    {
        let _ = (help, utc);
    }
}
