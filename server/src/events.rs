//! `GET /api/v1/events`: live updates as server-sent events (docs/live.md).
//!
//! Each stream is a receiver of the process's one [`LiveHub`]; connecting costs a few indexed
//! reads (the replay), staying connected costs the database nothing.
//!
//! ```text
//! event: status         data: db_up | db_down                       (on connect and on change)
//! event: changes        data: [{"id","table","row_id","task_id"},…]  id: <resume cursor>
//! event: refresh        data: <version>                              id: <resume cursor>
//! event: reset          data: <reason>                               id: <resume cursor>
//! ```
//!
//! `refresh` is when pages refetch (at most once a second, every tab at once: see
//! [`crate::live`]'s header); it follows every change the refetch will see. A resumed stream
//! sends one after the replayed changes the current refresh covers, so the page catches up
//! at once; the rest of the replay waits for the hub's next refresh.
//!
//! The `id:` is the cursor to resume from: every change at or below it was sent on this stream
//! (or before it, to the same browser). A client that reconnects with `Last-Event-ID` (browsers
//! do it by themselves) or `?last_event_id=` gets the changes after it replayed from the log,
//! then the live ones, without a gap: the stream subscribes to the hub *before* reading the
//! replay and skips what it already sent. When the replay is impossible (cursor pruned, unknown
//! to this database, or more than [`LiveConfig::replay_limit`](crate::live::LiveConfig) behind)
//! or the stream fell behind the hub, it sends `reset` and the client reloads everything.

use crate::live::{LiveHub, LiveMsg, Refresh};
use crate::AppState;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::IntoResponse;
use lastword_core::change::sse;
use lastword_store::changes::{self, Change};
use serde::Deserialize;
use std::collections::{HashSet, VecDeque};
use std::convert::Infallible;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, watch};

/// Changes per `changes` event; a larger batch is split (only the last part carries the id).
const CHANGES_PER_EVENT: usize = 500;
/// Tells the browser how long to wait before reconnecting after the stream ends.
const RETRY: Duration = Duration::from_secs(3);

#[derive(Debug, Default, Deserialize)]
pub struct EventsQuery {
    last_event_id: Option<String>,
}

pub async fn events(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<EventsQuery>,
) -> impl IntoResponse {
    let hub = state.live.clone();
    hub.ensure_started();
    // The header (set by the browser on reconnection) wins over the query (first connection).
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or(query.last_event_id)
        .filter(|v| !v.trim().is_empty());
    let stream = Stream::open(&hub, state.live_clients.clone(), resume).await;
    let keep_alive = hub.config().keep_alive;
    let body = futures::stream::unfold(stream, |mut stream| async move {
        let event = stream.next().await?;
        Some((Ok::<Event, Infallible>(event), stream))
    });
    (
        // Tell buffering proxies (nginx) to pass events through at once.
        [("x-accel-buffering", "no")],
        Sse::new(body).keep_alive(KeepAlive::new().interval(keep_alive)),
    )
}

/// Counts a connected stream in `live_clients` for as long as it lives.
struct ClientGuard(Arc<AtomicI64>);

impl ClientGuard {
    fn new(count: Arc<AtomicI64>) -> ClientGuard {
        count.fetch_add(1, Ordering::SeqCst);
        ClientGuard(count)
    }
}

impl Drop for ClientGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One client's stream: events waiting to be sent, and what it already has.
struct Stream {
    hub: LiveHub,
    receiver: broadcast::Receiver<LiveMsg>,
    db_up: watch::Receiver<bool>,
    stopping: watch::Receiver<bool>,
    queue: VecDeque<Event>,
    /// The cursor sent last (or the client's own): the client has every change at or below it.
    confirmed: Option<i64>,
    /// Ids above `confirmed` already sent (by the replay), not to be sent again.
    sent_above: HashSet<i64>,
    last_status: bool,
    /// End after the queue drains (the replay could not be read: the browser retries).
    finish: bool,
    _guard: ClientGuard,
}

impl Stream {
    async fn open(hub: &LiveHub, clients: Arc<AtomicI64>, resume: Option<String>) -> Stream {
        let guard = ClientGuard::new(clients);
        // Subscribe first, then read the watermark and the replay: whatever the hub broadcasts
        // from here on is received, and whatever it broadcast before is in the replay.
        let receiver = hub.subscribe();
        let db_up = hub.db_up();
        let last_status = *db_up.borrow();
        let mut stream = Stream {
            hub: hub.clone(),
            receiver,
            db_up,
            stopping: hub.stopping(),
            queue: VecDeque::new(),
            confirmed: None,
            sent_above: HashSet::new(),
            last_status,
            finish: false,
            _guard: guard,
        };
        let watermark = hub.watermark();
        match resume {
            None => {
                stream.confirmed = watermark;
                stream.queue.push_back(stream.status_event(last_status));
            }
            Some(raw) => match raw.trim().parse::<i64>() {
                Ok(after) if after >= 0 => stream.replay(after, watermark, last_status).await,
                _ => stream.reset(watermark, "unreadable_id"),
            },
        }
        stream
    }

    /// `event` carrying the resume cursor, when there is one.
    fn with_cursor(&self, event: Event) -> Event {
        match self.confirmed {
            Some(id) => event.id(id.to_string()),
            None => event,
        }
    }

    fn status_event(&self, up: bool) -> Event {
        self.with_cursor(Event::default().event(sse::STATUS).data(if up { sse::DB_UP } else { sse::DB_DOWN }))
    }

    fn reset(&mut self, watermark: Option<i64>, reason: &str) {
        self.confirmed = match (watermark, self.confirmed) {
            (Some(w), Some(c)) => Some(w.max(c)),
            (w, c) => w.or(c),
        };
        self.sent_above.clear();
        let event = self.with_cursor(Event::default().event(sse::RESET).data(reason).retry(RETRY));
        self.queue.push_back(event);
        self.queue.push_back(self.status_event(self.last_status));
    }

    /// The changes after the client's cursor `after`, from the log.
    async fn replay(&mut self, after: i64, watermark: Option<i64>, up: bool) {
        let db = self.hub.db().clone();
        let limit = self.hub.config().replay_limit;
        let bounds = async {
            let latest = changes::latest_change_id(&db).await?;
            let oldest = changes::oldest_change_id(&db).await?;
            Ok::<_, lastword_store::StoreError>((latest, oldest))
        };
        let (latest, oldest) = match bounds.await {
            Ok(bounds) => bounds,
            Err(e) => return self.give_up(e),
        };
        if after > latest {
            // Not a cursor of this database (it was replaced, or restored from a backup).
            return self.reset(watermark, "unknown_id");
        }
        if oldest.is_some_and(|oldest| after < oldest - 1) {
            return self.reset(watermark, "expired");
        }
        let rows = match changes::changes_after(&db, after, limit + 1).await {
            Ok(rows) => rows,
            Err(e) => return self.give_up(e),
        };
        if rows.len() as i64 > limit {
            return self.reset(watermark, "too_far_behind");
        }
        // Every id at or below the hub's watermark was final before the replay was read, so the
        // replay holds all of them: the client is complete up to the higher of the two.
        let mut confirmed = watermark.unwrap_or(after).max(after);
        // SQLite has one writer at a time: its ids become visible in order, so nothing can
        // still appear below the newest one read.
        if db.backend() == lastword_store::Backend::Sqlite {
            confirmed = confirmed.max(rows.last().map_or(after, |c| c.id));
        }
        self.confirmed = Some(confirmed);
        self.sent_above = rows.iter().map(|c| c.id).filter(|id| *id > confirmed).collect();
        self.queue.push_back(self.status_event(up));
        // What the current refresh covers, then the refresh (the page refetches now), then the
        // rest, which the hub's next refresh covers.
        let refresh = self.hub.refresh();
        let (covered, rest): (Vec<Change>, Vec<Change>) =
            rows.into_iter().partition(|c| refresh.is_some_and(|r| c.id <= r.watermark));
        let caught_up = !covered.is_empty();
        self.push_changes(covered);
        if let (true, Some(refresh)) = (caught_up, refresh) {
            self.push_refresh(refresh);
        }
        self.push_changes(rest);
    }

    fn push_refresh(&mut self, refresh: Refresh) {
        let event = self.with_cursor(Event::default().event(sse::REFRESH).data(refresh.version.to_string()));
        self.queue.push_back(event);
    }

    /// The replay could not be read (the database is down): say so and end the stream; the
    /// browser reconnects after [`RETRY`] with the same cursor.
    fn give_up(&mut self, error: lastword_store::StoreError) {
        tracing::warn!(%error, "live updates: could not replay for a resuming client");
        self.last_status = false;
        let event = Event::default().event(sse::STATUS).data(sse::DB_DOWN).retry(RETRY);
        self.queue.push_back(event);
        self.finish = true;
    }

    fn push_changes(&mut self, changes: Vec<Change>) {
        if changes.is_empty() {
            return;
        }
        let parts = changes.chunks(CHANGES_PER_EVENT).count();
        for (i, part) in changes.chunks(CHANGES_PER_EVENT).enumerate() {
            let data = serde_json::to_string(part).expect("changes serialise");
            let event = Event::default().event(sse::CHANGES).data(data);
            let event = if i + 1 == parts { self.with_cursor(event) } else { event };
            self.queue.push_back(event);
        }
    }

    /// Hub batches received together become one event: skips what the client has, moves the
    /// cursor to the newest watermark.
    fn on_batches(&mut self, batches: Vec<(Arc<[Change]>, i64)>) {
        let floor = self.confirmed.unwrap_or(i64::MIN);
        let mut out = Vec::new();
        let mut newest = floor;
        for (changes, watermark) in batches {
            newest = newest.max(watermark);
            for change in changes.iter() {
                if change.id > floor && !self.sent_above.contains(&change.id) {
                    out.push(change.clone());
                }
            }
        }
        if newest > floor {
            self.confirmed = Some(newest);
            self.sent_above.retain(|id| *id > newest);
        }
        self.push_changes(out);
    }

    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(event);
            }
            if self.finish || *self.stopping.borrow() {
                return None;
            }
            tokio::select! {
                _ = self.stopping.changed() => return None,
                changed = self.db_up.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                    let up = *self.db_up.borrow_and_update();
                    if up != self.last_status {
                        self.last_status = up;
                        let event = self.status_event(up);
                        self.queue.push_back(event);
                    }
                }
                message = self.receiver.recv() => self.on_message(message),
            }
        }
    }

    fn on_message(&mut self, first: Result<LiveMsg, broadcast::error::RecvError>) {
        let mut batches = Vec::new();
        let mut next = Some(first);
        // Coalesce: whatever else is already waiting goes into the same event, in order (a
        // refresh ends the changes before it; those after it wait for the next).
        while let Some(message) = next.take() {
            match message {
                Ok(LiveMsg::Changes { changes, watermark }) => batches.push((changes, watermark)),
                Ok(LiveMsg::Refresh(refresh)) => {
                    self.on_batches(std::mem::take(&mut batches));
                    self.push_refresh(refresh);
                }
                Ok(LiveMsg::Reset { watermark }) => {
                    batches.clear();
                    self.reset(Some(watermark), "hub_reset");
                }
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::debug!(missed, "live updates: a slow stream lagged; resetting it");
                    batches.clear();
                    let watermark = self.hub.watermark();
                    self.reset(watermark, "lagged");
                }
                Err(broadcast::error::RecvError::Closed) => {
                    self.finish = true;
                    break;
                }
            }
            if batches.len() < 64 {
                match self.receiver.try_recv() {
                    Ok(m) => next = Some(Ok(m)),
                    Err(broadcast::error::TryRecvError::Lagged(n)) => {
                        next = Some(Err(broadcast::error::RecvError::Lagged(n)))
                    }
                    Err(broadcast::error::TryRecvError::Closed) => {
                        next = Some(Err(broadcast::error::RecvError::Closed))
                    }
                    Err(broadcast::error::TryRecvError::Empty) => {}
                }
            }
        }
        self.on_batches(batches);
    }
}
