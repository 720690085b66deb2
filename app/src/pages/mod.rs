//! One route component per file; the only place that creates Resources and Actions (besides
//! the header's who-am-I, `components::layout`).

pub mod audit;
pub mod failures;
pub mod leases;
pub mod login;
pub mod overview;
pub mod task;
pub mod timeline;
pub mod workers;

use chrono::{DateTime, Utc};
use leptos::prelude::*;

/// Bumps whenever the live feed reports a change: pages add it to their resources' sources
/// so they refetch without a reload. Zero (never changes) on the server and before hydration.
pub fn live_version() -> Signal<u64> {
    match use_context::<crate::live::LiveFeed>() {
        Some(feed) => feed.last_change.into(),
        None => Signal::stored(0),
    }
}

/// Like [`live_version`], but bumps only for a batch of changes that `concerns` the page: the
/// task page need not refetch for every other task's heartbeat. A reset concerns everyone
/// (`LiveBatch::touches_*` say so).
pub fn live_version_where(
    concerns: impl Fn(&crate::live::LiveBatch) -> bool + Send + Sync + 'static,
) -> Signal<u64> {
    match use_context::<crate::live::LiveFeed>() {
        Some(feed) => Memo::new(move |prev: Option<&u64>| {
            // Tracked: recomputed on every bump; the batch behind it is set before the bump.
            feed.last_change.track();
            match prev {
                None => 0,
                Some(prev) if feed.last_batch.with_untracked(|b| concerns(b)) => prev + 1,
                Some(prev) => *prev,
            }
        })
        .into(),
        None => Signal::stored(0),
    }
}

/// How long before a lease lapses a page showing it asks again: runners beat well before (a
/// third of the lease is usual), so the answer normally carries the extended lease.
const LEASE_CHECK_LEAD: chrono::Duration = chrono::Duration::seconds(2);
/// How long after a lease lapsed a page asks once more, when the lead's answer still had it.
const LEASE_CHECK_GRACE: chrono::Duration = chrono::Duration::seconds(1);
/// The shortest time between two checks: a page showing hundreds of leases (the workers page of
/// a big fleet) asks every two seconds at most, the leases due meanwhile in one answer. No
/// longer than the lead, so a lease is still asked about before it lapses.
const LEASE_CHECK_GAP: chrono::Duration = chrono::Duration::seconds(2);

/// The next moment after `now` a page showing leases that lapse at `expiries` should refetch:
/// [`LEASE_CHECK_LEAD`] before the earliest one, or [`LEASE_CHECK_GRACE`] after it once inside
/// the lead, and never sooner than [`LEASE_CHECK_GAP`] from `now`. `None` when every lease
/// lapsed longer ago than that (a lapsed lease that beats again is in the live feed, migration
/// 0008).
pub fn next_lease_check(
    expiries: impl IntoIterator<Item = DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    expiries
        .into_iter()
        .flat_map(|e| [e - LEASE_CHECK_LEAD, e + LEASE_CHECK_GRACE])
        .filter(|check| *check > now)
        .min()
        .map(|check| check.max(now + LEASE_CHECK_GAP))
}

/// What a page that shows leases refetches by. Heartbeats are not in the live feed (they fire
/// no trigger, so the runner pays nothing for being watched: migration 0008), so the page
/// learns that a lease was extended by asking again shortly before it lapses — and once more
/// just after, if it was not, so the lapse shows on time. The page tells it the leases of each
/// answer ([`LeaseChecks::show`]) and adds [`LeaseChecks::key`] to its resource's source.
#[derive(Clone, Copy)]
pub struct LeaseChecks {
    expiries: RwSignal<Vec<DateTime<Utc>>>,
    /// Changes each time the clock passes the next check; constant on the server, where the
    /// clock does not tick.
    pub key: Signal<Option<DateTime<Utc>>>,
}

impl Default for LeaseChecks {
    fn default() -> Self {
        Self::new()
    }
}

impl LeaseChecks {
    pub fn new() -> Self {
        let expiries = RwSignal::new(Vec::new());
        let now = crate::components::time::use_time_prefs().now;
        // Recomputed when the leases change, from the clock at that moment.
        let next = Memo::new(move |_| next_lease_check(expiries.get(), now.get_untracked()));
        let key = Memo::new(move |prev: Option<&Option<DateTime<Utc>>>| {
            let passed = prev.copied().flatten();
            match next.get() {
                Some(check) if now.get() >= check => Some(check),
                _ => passed,
            }
        });
        LeaseChecks { expiries, key: key.into() }
    }

    /// The leases the page shows now (from its latest answer).
    pub fn show(&self, expiries: impl IntoIterator<Item = DateTime<Utc>>) {
        self.expiries.set(expiries.into_iter().collect());
    }
}

/// A page's data as it arrives: `loading` until the answer is there, then the answer drawn by
/// `ready`, or the error ("Could not load {what}: …"). `answer` reads the page's resource
/// inside a `Transition`, so the server waits for it and the browser hydrates it. One place for
/// the three states every page's data goes through.
///
/// A `Transition`, not a `Suspense`: every page refetches on live changes (about once a second
/// under a busy fleet), and a `Suspense` shows `loading` again for each refetch, so the list an
/// operator is reading blinked out and back every second. A `Transition` keeps the last answer
/// on screen until the next one replaces it; `loading` shows only before the first. The app
/// uses no `Suspense` at all: each of the two is its own copy of the boundary's code in the
/// wasm (both together cost every page about 2 KB brotli more than `Transition` alone:
/// docs/bundle-size.md), and a `Transition` does all a `Suspense` did here.
pub fn loaded<T, V>(
    loading: &'static str,
    what: &'static str,
    answer: impl Fn() -> Option<Result<T, ServerFnError>> + Send + Sync + 'static,
    ready: impl Fn(T) -> V + Send + Sync + 'static,
) -> impl IntoView
where
    T: 'static,
    V: IntoView + 'static,
{
    view! {
        <Transition fallback=move || {
            view! { <p class="muted">{loading}</p> }
        }>
            {move || {
                answer()
                    .map(|r| match r {
                        Ok(value) => ready(value).into_any(),
                        Err(e) => error_view(what, e),
                    })
            }}
        </Transition>
    }
}

/// A query string the page could not read, as an alert that names what is wrong with it (the
/// failures and audit pages' filters; nothing is listed until it is mended).
pub fn bad_filter_view(e: impl std::fmt::Display) -> AnyView {
    view! {
        <p class="banner banner-error" role="alert" data-testid="bad-filter">
            {e.to_string()}
        </p>
    }
    .into_any()
}

/// A server function's error as a page-level alert.
pub fn error_view(what: &'static str, e: ServerFnError) -> AnyView {
    view! {
        <p class="banner banner-error" role="alert">
            {format!("Could not load {what}: {e}")}
        </p>
    }
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + s, 0).unwrap()
    }

    #[test]
    fn a_page_asks_before_the_earliest_lease_lapses_and_once_after() {
        // Leases lapsing at 30 s and 50 s, seen at 0 s: ask at 28 s (two seconds before).
        assert_eq!(next_lease_check([t(50), t(30)], t(0)), Some(t(28)));
        // Asked at 28 s and the 30 s lease was not extended: once more at 31 s.
        assert_eq!(next_lease_check([t(50), t(30)], t(28)), Some(t(31)));
        // Past that: the next lease's check.
        assert_eq!(next_lease_check([t(50), t(30)], t(31)), Some(t(48)));
        // Every lease lapsed long ago, or none shown: nothing to ask.
        assert_eq!(next_lease_check([t(50), t(30)], t(60)), None);
        assert_eq!(next_lease_check([], t(0)), None);
        // Many leases due at once: one check every two seconds at most, still before each lapses.
        let many: Vec<_> = (0..200).map(|i| t(10) + chrono::Duration::milliseconds(i * 10)).collect();
        assert_eq!(next_lease_check(many.clone(), t(7)), Some(t(9)));
        assert_eq!(next_lease_check(many, t(9)), Some(t(11)));
    }
}
