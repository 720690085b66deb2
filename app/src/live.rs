//! The browser's live feed: one `EventSource` on `GET /api/v1/events` per page, shared through
//! context as a [`LiveFeed`] of signals. Pages use [`LiveFeed::last_change`] as a resource
//! source, so they refetch when something changed — at the server's next `refresh` event, at
//! most once a second and in every open tab at the same moment, so the server answers them
//! all from one database read — and
//! [`LiveBanner`] tells the operator when the feed or the database is down.
//!
//! ```text
//! let live = use_live_feed();
//! let runs = Resource::new(move || (filter.get(), live.last_change.get()), |(f, _)| get_runs(f));
//! ```
//!
//! On the server (and in any build without `hydrate`) the signals keep their initial values: no
//! change, not connected, the database as the server last saw it. In the browser the stream
//! resumes from the cursor the server rendered the page at (a `<meta>` written by
//! [`LiveMeta`]), so a change made between the render and the connection is not missed; the
//! browser resumes by itself with `Last-Event-ID` after a dropped connection, and this module
//! reconnects with the last cursor when the browser gives up (an error page from a proxy).

use lastword_core::Change;
use leptos::prelude::*;

/// What the server knew when it rendered the page; provided by the server for each request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveSnapshot {
    /// The live feed's resume cursor at render time (`None` before the first read).
    pub cursor: Option<i64>,
    /// Whether the database answered the server's live-update reader.
    pub db_up: bool,
}

/// The changes behind the latest bump of [`LiveFeed::last_change`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveBatch {
    /// Oldest first; empty when `reset`.
    pub changes: Vec<Change>,
    /// Anything may have changed (the server could not tell what the page missed, or too many
    /// changes arrived at once): reload everything.
    pub reset: bool,
}

impl LiveBatch {
    /// Does this batch concern task `id` (or everything)?
    pub fn touches_task(&self, id: i64) -> bool {
        self.reset || self.changes.iter().any(|c| c.task_id == Some(id))
    }
}

/// The live feed's signals. Copy; get it with [`use_live_feed`].
#[derive(Clone, Copy, Debug)]
pub struct LiveFeed {
    /// Bumped (+1) at the server's `refresh` after changes arrived (at most once a second), or
    /// at once on a `reset`. Use it as a resource source to refetch.
    pub last_change: ReadSignal<u64>,
    /// The changes behind the latest bump.
    pub last_batch: ReadSignal<LiveBatch>,
    /// The event stream is open.
    pub connected: ReadSignal<bool>,
    /// The stream has been down for a couple of seconds (never on the server, nor during a
    /// short reconnection): what [`LiveBanner`] shows "paused" for.
    pub paused: ReadSignal<bool>,
    /// The database answers the server (from the stream's `status` events).
    pub db_up: ReadSignal<bool>,
}

/// Creates the feed (in the browser: opens the stream) and provides it to every component
/// below; call once near the root (`App` does). Calling it again returns the same feed.
pub fn provide_live_feed() -> LiveFeed {
    if let Some(feed) = use_context::<LiveFeed>() {
        return feed;
    }
    let initial = initial_snapshot();
    let (last_change, set_last_change) = signal(0u64);
    let (last_batch, set_last_batch) = signal(LiveBatch::default());
    let (connected, set_connected) = signal(false);
    let (paused, set_paused) = signal(false);
    let (db_up, set_db_up) = signal(initial.db_up);
    let feed = LiveFeed { last_change, last_batch, connected, paused, db_up };
    provide_context(feed);
    #[cfg(feature = "hydrate")]
    {
        let writers = browser::Writers {
            last_change: set_last_change,
            last_batch: set_last_batch,
            connected: set_connected,
            paused: set_paused,
            db_up: set_db_up,
        };
        // After hydration: the stream's callbacks only ever touch a hydrated page.
        Effect::new(move |started: Option<()>| {
            if started.is_none() {
                browser::start(initial.cursor, writers);
            }
        });
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = (set_last_change, set_last_batch, set_connected, set_paused, set_db_up);
    feed
}

/// The feed provided by [`provide_live_feed`], or, without one, a feed that never changes (so
/// a page renders in tests and on its own).
pub fn use_live_feed() -> LiveFeed {
    use_context::<LiveFeed>().unwrap_or_else(|| LiveFeed {
        last_change: signal(0).0,
        last_batch: signal(LiveBatch::default()).0,
        connected: signal(false).0,
        paused: signal(false).0,
        db_up: signal(initial_snapshot().db_up).0,
    })
}

/// Meta tags (for the document's `<head>`, rendered on the server only) carrying the render's
/// [`LiveSnapshot`] to the browser: where its stream resumes, and the database state the
/// server-rendered banner showed (so hydration renders the same).
#[component]
pub fn LiveMeta() -> impl IntoView {
    let snapshot = use_context::<LiveSnapshot>();
    let cursor = snapshot.and_then(|s| s.cursor).map(|c| c.to_string());
    let db = if snapshot.is_none_or(|s| s.db_up) { "up" } else { "down" };
    view! {
        {cursor.map(|cursor| view! { <meta name=CURSOR_META content=cursor /> })}
        <meta name=DB_META content=db />
    }
}

const CURSOR_META: &str = "lastword-live-cursor";
const DB_META: &str = "lastword-live-db";

/// The render's snapshot: from context on the server, from [`LiveMeta`]'s tags in the browser.
fn initial_snapshot() -> LiveSnapshot {
    #[cfg(feature = "hydrate")]
    {
        LiveSnapshot {
            cursor: browser::meta(CURSOR_META).and_then(|c| c.parse().ok()),
            db_up: browser::meta(DB_META).as_deref() != Some("down"),
        }
    }
    #[cfg(not(feature = "hydrate"))]
    {
        use_context::<LiveSnapshot>().unwrap_or(LiveSnapshot { cursor: None, db_up: true })
    }
}

/// The banners for a feed or database that is down. Nothing while all is well; on the server
/// only the database banner (the feed is a browser thing).
#[component]
pub fn LiveBanner() -> impl IntoView {
    let feed = use_live_feed();
    view! {
        <div class="live-banners" aria-live="polite">
            <Show when=move || !feed.db_up.get()>
                <p class="banner live-banner live-banner-db" role="alert" data-testid="banner-db-down">
                    <span class="live-banner-icon" aria-hidden="true">
                        "⚠"
                    </span>
                    "Database unreachable — showing the last data we had"
                </p>
            </Show>
            <Show when=move || feed.paused.get()>
                <p
                    class="banner live-banner live-banner-paused"
                    role="status"
                    data-testid="banner-live-paused"
                >
                    <span class="live-banner-icon" aria-hidden="true">
                        "⏸"
                    </span>
                    "Live updates paused — reconnecting…"
                </p>
            </Show>
        </div>
    }
}

#[cfg(feature = "hydrate")]
mod browser {
    //! The `EventSource` and its callbacks. Lives as long as the page.

    use super::LiveBatch;
    use lastword_core::change::sse;
    use lastword_core::Change;
    use leptos::prelude::*;
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::time::Duration;
    use wasm_bindgen::closure::Closure;
    use wasm_bindgen::JsCast;
    use web_sys::{EventSource, MessageEvent};

    /// Changes are flushed into a bump at the server's next `refresh` (at most once a second,
    /// every tab at once, so their reads are shared); without one for this long (a server that
    /// sends none, mid-upgrade) they are flushed anyway.
    const FALLBACK: Duration = Duration::from_millis(2_500);
    /// Down this long before the "paused" banner shows.
    const PAUSED_AFTER: Duration = Duration::from_secs(2);
    /// Our own reconnection (when the browser gave up): first wait and cap.
    const RETRY_FIRST: Duration = Duration::from_secs(1);
    const RETRY_MAX: Duration = Duration::from_secs(30);
    /// More pending changes than this become a reset: the page reloads everything anyway.
    const MAX_PENDING: usize = 2_000;

    #[derive(Clone, Copy)]
    pub(super) struct Writers {
        pub last_change: WriteSignal<u64>,
        pub last_batch: WriteSignal<LiveBatch>,
        pub connected: WriteSignal<bool>,
        pub paused: WriteSignal<bool>,
        pub db_up: WriteSignal<bool>,
    }

    struct State {
        writers: Writers,
        /// The last event id seen: where a new `EventSource` resumes.
        cursor: Option<String>,
        source: Option<EventSource>,
        listeners: Vec<Closure<dyn FnMut(web_sys::Event)>>,
        pending: LiveBatch,
        /// Bumps so far, so a fallback timer set before one does nothing.
        flushes: u64,
        /// A fallback timer is set.
        fallback_set: bool,
        connected: bool,
        /// Counts opens, so a "paused" timer from an earlier outage does nothing.
        opens: u64,
        retry: Duration,
    }

    type Shared = Rc<RefCell<State>>;

    pub(super) fn meta(name: &str) -> Option<String> {
        let document = web_sys::window()?.document()?;
        document.query_selector(&format!("meta[name=\"{name}\"]")).ok()??.get_attribute("content")
    }

    pub(super) fn start(cursor: Option<i64>, writers: Writers) {
        let state = Rc::new(RefCell::new(State {
            writers,
            cursor: cursor.map(|c| c.to_string()),
            source: None,
            listeners: Vec::new(),
            pending: LiveBatch::default(),
            flushes: 0,
            fallback_set: false,
            connected: false,
            opens: 0,
            retry: RETRY_FIRST,
        }));
        connect(&state);
        // A page that never connects shows the banner too.
        schedule_paused(&state, 0);
    }

    fn url(cursor: Option<&str>) -> String {
        match cursor.filter(|c| c.bytes().all(|b| b.is_ascii_digit())) {
            Some(cursor) => format!("{}?{}={cursor}", sse::PATH, sse::RESUME_PARAM),
            None => sse::PATH.to_string(),
        }
    }

    fn connect(state: &Shared) {
        let url = url(state.borrow().cursor.as_deref());
        let Ok(source) = EventSource::new(&url) else {
            schedule_reconnect(state);
            return;
        };
        let mut listeners = Vec::new();
        for name in ["open", "error", sse::CHANGES, sse::REFRESH, sse::STATUS, sse::RESET] {
            let shared = state.clone();
            let callback = Closure::<dyn FnMut(web_sys::Event)>::new(move |event: web_sys::Event| {
                on_event(&shared, name, event)
            });
            let _ = source.add_event_listener_with_callback(name, callback.as_ref().unchecked_ref());
            listeners.push(callback);
        }
        let mut s = state.borrow_mut();
        if let Some(old) = s.source.replace(source) {
            old.close();
        }
        s.listeners = listeners;
    }

    fn on_event(state: &Shared, name: &str, event: web_sys::Event) {
        let message = event.dyn_ref::<MessageEvent>();
        if let Some(message) = message {
            let id = message.last_event_id();
            if !id.is_empty() {
                state.borrow_mut().cursor = Some(id);
            }
        }
        let data = message.and_then(|m| m.data().as_string()).unwrap_or_default();
        match name {
            "open" => {
                let writers = {
                    let mut s = state.borrow_mut();
                    s.connected = true;
                    s.opens += 1;
                    s.retry = RETRY_FIRST;
                    s.writers
                };
                writers.connected.set(true);
                writers.paused.set(false);
            }
            "error" => on_error(state),
            sse::STATUS => {
                let writers = state.borrow().writers;
                writers.db_up.set(data != sse::DB_DOWN);
            }
            sse::RESET => {
                state.borrow_mut().pending = LiveBatch { changes: Vec::new(), reset: true };
                flush(state);
            }
            sse::REFRESH => {
                let owed = {
                    let s = state.borrow();
                    s.pending.reset || !s.pending.changes.is_empty()
                };
                if owed {
                    flush(state);
                }
            }
            // `changes`: an array of changes.
            _ => {
                let changes: Vec<Change> = serde_json::from_str(&data).unwrap_or_default();
                {
                    let mut s = state.borrow_mut();
                    if !s.pending.reset {
                        s.pending.changes.extend(changes);
                        if s.pending.changes.len() > MAX_PENDING {
                            s.pending = LiveBatch { changes: Vec::new(), reset: true };
                        }
                    }
                }
                set_fallback(state);
            }
        }
    }

    fn on_error(state: &Shared) {
        let (writers, opens, closed) = {
            let mut s = state.borrow_mut();
            s.connected = false;
            let closed = s.source.as_ref().is_none_or(|source| source.ready_state() == EventSource::CLOSED);
            (s.writers, s.opens, closed)
        };
        writers.connected.set(false);
        schedule_paused(state, opens);
        // The browser retries by itself unless the response was not an event stream (a proxy's
        // error page, say); then it is our turn, from the last cursor.
        if closed {
            schedule_reconnect(state);
        }
    }

    /// Shows "paused" if the stream is still down after a while and has not opened since.
    fn schedule_paused(state: &Shared, opens: u64) {
        let shared = state.clone();
        set_timeout(
            move || {
                let s = shared.borrow();
                if !s.connected && s.opens == opens {
                    s.writers.paused.set(true);
                }
            },
            PAUSED_AFTER,
        );
    }

    fn schedule_reconnect(state: &Shared) {
        let wait = {
            let mut s = state.borrow_mut();
            let wait = s.retry;
            s.retry = (s.retry * 2).min(RETRY_MAX);
            wait
        };
        let shared = state.clone();
        set_timeout(move || connect(&shared), wait);
    }

    /// Flushes the pending changes after [`FALLBACK`] unless a refresh did it first.
    fn set_fallback(state: &Shared) {
        let flushes = {
            let mut s = state.borrow_mut();
            if s.fallback_set {
                return;
            }
            s.fallback_set = true;
            s.flushes
        };
        let shared = state.clone();
        set_timeout(
            move || {
                let (missed, owed) = {
                    let mut s = shared.borrow_mut();
                    s.fallback_set = false;
                    (s.flushes == flushes, s.pending.reset || !s.pending.changes.is_empty())
                };
                match (missed, owed) {
                    (true, true) => flush(&shared),
                    // Flushed meanwhile, and more arrived since: their own wait.
                    (false, true) => set_fallback(&shared),
                    _ => {}
                }
            },
            FALLBACK,
        );
    }

    /// Hands the pending changes to the page: one bump of `last_change`.
    fn flush(state: &Shared) {
        let (writers, batch) = {
            let mut s = state.borrow_mut();
            s.flushes += 1;
            (s.writers, std::mem::take(&mut s.pending))
        };
        writers.last_batch.set(batch);
        writers.last_change.update(|n| *n += 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(id: i64, table: &str, task: i64) -> Change {
        Change { id, table: table.into(), row_id: id, task_id: Some(task) }
    }

    #[test]
    fn a_batch_tells_which_tasks_it_touches() {
        let batch = LiveBatch { changes: vec![change(1, "runs", 7), change(2, "tasks", 8)], reset: false };
        assert!(batch.touches_task(7) && batch.touches_task(8) && !batch.touches_task(9));
        let reset = LiveBatch { changes: vec![], reset: true };
        assert!(reset.touches_task(9));
    }

    #[test]
    fn without_a_browser_the_feed_keeps_its_defaults() {
        let owner = Owner::new();
        owner.with(|| {
            provide_context(LiveSnapshot { cursor: Some(5), db_up: false });
            let feed = provide_live_feed();
            assert_eq!(feed.last_change.get_untracked(), 0);
            assert!(!feed.connected.get_untracked());
            assert!(!feed.paused.get_untracked());
            assert!(!feed.db_up.get_untracked(), "the server's view of the database is kept");
            // Provided once: a second call returns the same feed.
            let again = provide_live_feed();
            assert_eq!(again.last_change, feed.last_change);
        });
    }
}
