//! The live-update hub: ONE database watcher per server process, fanned out to every browser.
//!
//! A background task follows `change_log` (migration 0002) and broadcasts what it reads through
//! a [`tokio::sync::broadcast`] channel; each `GET /api/v1/events` stream
//! ([`crate::events`]) is one receiver. So the database sees one listener and one reader per
//! dashboard process however many people watch.
//!
//! The watcher **polls** the log on both backends: a primary-key range read every
//! [`LiveConfig::poll_interval`] (100 ms), whatever the write rate. PostgreSQL's `NOTIFY` was
//! used until migration 0005 and removed because it serialises the commits of every notifying
//! transaction on one global lock, which halved a busy fleet's write throughput; a read of an
//! index every 100 ms per dashboard process costs the database far less than a notification per
//! runner write, and keeps live latency within about one interval.
//!
//! **Out-of-order commits.** PostgreSQL hands out change ids when rows are written, but they
//! become visible when their transactions commit, so id 11 can be read before id 10. The hub's
//! [`Tracker`] remembers such gaps with the reading snapshot's `xmax`, fills them as the rows
//! appear, and gives a gap up only once the oldest running transaction is past that horizon (no
//! transaction that could still commit it is running), or after [`LiveConfig::gap_max_wait`].
//! The *watermark* — every id at or below it was delivered or never will exist — is what
//! clients resume from, so a browser that reconnects never misses a change (it may see one
//! twice, which only costs a refetch).
//!
//! **Refreshes: when the pages ask again.** Changes are broadcast the moment they are read (the
//! live latency), but pages do not refetch on each: the hub also broadcasts a [`Refresh`] at
//! most once per wall-clock second, when something was delivered since the last one, and pages
//! refetch on that. Every open tab then asks at the same moment, within the same second, at the
//! same [`Refresh::version`] — the version [`SharedReads`](lastword_store::SharedReads) keys its
//! answers by — so 200 tabs cost one database read per question, as one tab does. (Keyed by
//! the watermark instead, tabs that each throttle on their own clock asked at every watermark
//! the hub passed, several a second.) A refresh's version is published before it is broadcast
//! and after the changes before it, so an answer at that version was read after every change
//! the refreshing page has seen was committed. No refresh is started after the
//! [`REFRESH_CUTOFF_MS`]th millisecond of a second, so the reads that follow do not straddle
//! two seconds.
//!
//! **Outages.** The database's health is published in a [`watch`] channel (streams send
//! `status` events). While reads fail the watcher retries with capped backoff; once a read
//! succeeds it catches up from where it was, so nothing is missed. An outage longer than half the
//! log's retention ends with a `reset` broadcast: another server may have pruned what this one
//! never read.

use chrono::Utc;
use lastword_store::changes::{self, Change};
use lastword_store::{Db, StoreError};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Timings and sizes of the hub. The defaults suit production; tests shorten them.
#[derive(Clone, Debug)]
pub struct LiveConfig {
    /// How often the log is read: the live latency is about this plus one read.
    pub poll_interval: Duration,
    /// While gaps are open, how often they are looked up again.
    pub gap_check_interval: Duration,
    /// A gap still missing after this long is given up (normally the transaction horizon
    /// settles it in milliseconds; this bounds the wait behind a long-running transaction).
    pub gap_max_wait: Duration,
    /// Rows per read.
    pub read_batch: i64,
    /// While the database is unreachable, reads are retried after this, doubling up to the cap.
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// Changes older than this are pruned from the log.
    pub retention: Duration,
    /// How often the pruning runs.
    pub prune_interval: Duration,
    /// Broadcast batches a slow stream may lag behind before it gets a `reset`.
    pub channel_capacity: usize,
    /// A resuming client more than this many changes behind gets a `reset` instead of a replay.
    pub replay_limit: i64,
    /// SSE comment lines at least this often, so proxies keep idle streams open.
    pub keep_alive: Duration,
}

impl Default for LiveConfig {
    fn default() -> Self {
        LiveConfig {
            // 10 index reads a second per dashboard process: nothing next to a fleet's writes,
            // and well inside the 250 ms live-latency target (issue 9).
            poll_interval: Duration::from_millis(100),
            gap_check_interval: Duration::from_millis(100),
            gap_max_wait: Duration::from_secs(60),
            read_batch: 1_000,
            backoff_initial: Duration::from_millis(250),
            // Short enough that the feed is back within a few seconds of the database.
            backoff_max: Duration::from_secs(2),
            retention: Duration::from_secs(3600),
            prune_interval: Duration::from_secs(300),
            channel_capacity: 1_024,
            replay_limit: 10_000,
            keep_alive: Duration::from_secs(15),
        }
    }
}

/// What the hub broadcasts to every stream.
#[derive(Clone, Debug, PartialEq)]
pub enum LiveMsg {
    /// Changes read together (usually ascending; a filled gap may come later than higher ids),
    /// and the watermark after them.
    Changes { changes: Arc<[Change]>, watermark: i64 },
    /// Pages refetch now (see the module header).
    Refresh(Refresh),
    /// The hub may have missed changes (a long outage): clients reload everything.
    Reset { watermark: i64 },
}

/// A moment at which every page refetches (see the module header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refresh {
    /// Counts this hub's refreshes from 0 (published when the hub first read the log): the data
    /// version shared reads are keyed by.
    pub version: i64,
    /// The watermark when it was published: a page rendered at this version resumes its stream
    /// here, so the changes after it are replayed.
    pub watermark: i64,
}

/// No refresh starts at or after this millisecond of a second (the last 150 ms; see the module
/// header).
pub const REFRESH_CUTOFF_MS: u32 = 850;

/// Whether a refresh is due at wall-clock time `now`: something was delivered since the last
/// one (`owed`), the last was in an earlier second, and the pages' reads that follow can
/// still fall within this second.
pub fn refresh_due(owed: bool, last_second: Option<i64>, now: chrono::DateTime<Utc>) -> bool {
    owed && last_second.is_none_or(|last| now.timestamp() > last)
        && now.timestamp_subsec_millis() < REFRESH_CUTOFF_MS
}

/// Counters for tests and metrics. `loops_started` stays 1 per hub however many clients
/// connect; `reads` counts statements against `change_log`.
#[derive(Debug, Default)]
pub struct HubStats {
    pub loops_started: AtomicU64,
    pub reads: AtomicU64,
    pub broadcasts: AtomicU64,
    pub refreshes: AtomicU64,
    pub pruned: AtomicU64,
}

/// One per server process; cheap to clone (all clones share the one background task).
#[derive(Clone)]
pub struct LiveHub {
    inner: Arc<Inner>,
}

struct Inner {
    db: Db,
    config: LiveConfig,
    sender: broadcast::Sender<LiveMsg>,
    db_up: watch::Sender<bool>,
    /// The watermark, or -1 before the first read.
    watermark: Arc<AtomicI64>,
    /// The latest refresh, `None` before the first read.
    refresh: watch::Sender<Option<Refresh>>,
    stats: Arc<HubStats>,
    stop: watch::Sender<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl LiveHub {
    /// A hub over `db`, not yet running: [`LiveHub::ensure_started`] starts it (the server does
    /// at start-up; the events endpoint does on first use).
    pub fn new(db: Db, config: LiveConfig) -> LiveHub {
        let (sender, _) = broadcast::channel(config.channel_capacity.max(1));
        LiveHub {
            inner: Arc::new(Inner {
                db,
                config,
                sender,
                db_up: watch::channel(true).0,
                watermark: Arc::new(AtomicI64::new(-1)),
                refresh: watch::channel(None).0,
                stats: Arc::new(HubStats::default()),
                stop: watch::channel(false).0,
                task: Mutex::new(None),
            }),
        }
    }

    /// Starts the background task unless it runs already (or the hub was shut down). Needs a
    /// Tokio runtime.
    pub fn ensure_started(&self) {
        let mut task = self.inner.task.lock().expect("hub lock");
        if task.is_some() || *self.inner.stop.borrow() {
            return;
        }
        let worker = Worker {
            db: self.inner.db.clone(),
            config: self.inner.config.clone(),
            sender: self.inner.sender.clone(),
            db_up: self.inner.db_up.clone(),
            watermark: self.inner.watermark.clone(),
            refresh: self.inner.refresh.clone(),
            owed: false,
            refreshed_second: None,
            stats: self.inner.stats.clone(),
            stop: self.inner.stop.subscribe(),
            tracker: None,
            down_since: None,
        };
        *task = Some(tokio::spawn(worker.run()));
    }

    /// Stops the background task and ends every stream (so a graceful shutdown is not held up
    /// by open browsers). Idempotent.
    pub async fn shutdown(&self) {
        self.inner.stop.send_replace(true);
        let task = self.inner.task.lock().expect("hub lock").take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }

    pub fn subscribe(&self) -> broadcast::Receiver<LiveMsg> {
        self.inner.sender.subscribe()
    }

    /// `true` while the database answers (and, on PostgreSQL, the listener is connected).
    pub fn db_up(&self) -> watch::Receiver<bool> {
        self.inner.db_up.subscribe()
    }

    /// Becomes `true` when the hub shuts down.
    pub fn stopping(&self) -> watch::Receiver<bool> {
        self.inner.stop.subscribe()
    }

    /// Every change id at or below this was broadcast or never will exist; `None` before the
    /// hub's first read.
    pub fn watermark(&self) -> Option<i64> {
        Some(self.inner.watermark.load(Ordering::Acquire)).filter(|w| *w >= 0)
    }

    /// The latest refresh (see the module header); `None` before the hub's first read.
    pub fn refresh(&self) -> Option<Refresh> {
        *self.inner.refresh.borrow()
    }

    pub fn stats(&self) -> &HubStats {
        &self.inner.stats
    }

    pub fn db(&self) -> &Db {
        &self.inner.db
    }

    pub fn config(&self) -> &LiveConfig {
        &self.inner.config
    }

    /// Streams currently subscribed.
    pub fn receivers(&self) -> usize {
        self.inner.sender.receiver_count()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The task holds no handle to `Inner`; tell it nobody is left.
        self.stop.send_replace(true);
    }
}

struct Worker {
    db: Db,
    config: LiveConfig,
    sender: broadcast::Sender<LiveMsg>,
    db_up: watch::Sender<bool>,
    watermark: Arc<AtomicI64>,
    refresh: watch::Sender<Option<Refresh>>,
    /// Something was delivered since the last refresh.
    owed: bool,
    /// The wall-clock second of the last refresh.
    refreshed_second: Option<i64>,
    stats: Arc<HubStats>,
    stop: watch::Receiver<bool>,
    tracker: Option<Tracker>,
    down_since: Option<Instant>,
}

impl Worker {
    async fn run(mut self) {
        self.stats.loops_started.fetch_add(1, Ordering::Relaxed);
        tracing::info!(backend = self.db.backend().as_str(), "live updates: watching the change log");
        self.run_polling().await;
        tracing::info!("live updates: stopped");
    }

    fn stopped(&self) -> bool {
        *self.stop.borrow()
    }

    async fn run_polling(&mut self) {
        let mut next_prune = Instant::now() + self.config.prune_interval;
        let mut stop = self.stop.clone();
        let mut backoff = self.config.backoff_initial;
        loop {
            let ok = self.catch_up().await;
            self.set_db_up(ok);
            if !self.db_open() {
                return;
            }
            if refresh_due(self.owed, self.refreshed_second, Utc::now()) {
                self.publish_refresh();
            }
            if ok && Instant::now() >= next_prune {
                self.prune().await;
                next_prune = Instant::now() + self.config.prune_interval;
            }
            let wait = if !ok {
                let wait = backoff;
                backoff = (backoff * 2).min(self.config.backoff_max);
                wait
            } else {
                backoff = self.config.backoff_initial;
                let poll = if self.has_gaps() {
                    self.config.gap_check_interval.min(self.config.poll_interval)
                } else {
                    self.config.poll_interval
                };
                // An owed refresh goes out just after the second turns, not up to a poll later.
                if self.owed {
                    poll.min(until_next_second(Utc::now()))
                } else {
                    poll
                }
            };
            tokio::select! {
                _ = stop.changed() => {}
                _ = tokio::time::sleep(wait) => {}
            }
            if self.stopped() {
                return;
            }
        }
    }

    fn db_open(&self) -> bool {
        match &self.db {
            Db::Postgres(p) => !p.is_closed(),
            Db::Sqlite(p) => !p.is_closed(),
        }
    }

    fn has_gaps(&self) -> bool {
        self.tracker.as_ref().is_some_and(Tracker::has_gaps)
    }

    fn set_db_up(&mut self, up: bool) {
        let mut was = up;
        // Streams are woken only by a real change.
        self.db_up.send_if_modified(|current| {
            was = std::mem::replace(current, up);
            was != up
        });
        if up && !was {
            tracing::info!("live updates: database reachable again");
        }
        if !up {
            self.down_since.get_or_insert_with(Instant::now);
        }
    }

    /// Reads everything new (and looks up open gaps), broadcasting as it goes. `false` if the
    /// database could not be read.
    async fn catch_up(&mut self) -> bool {
        match self.try_catch_up().await {
            Ok(()) => {
                self.down_since = None;
                true
            }
            Err(e) => {
                if *self.db_up.borrow() {
                    tracing::warn!(error = %e, "live updates: reading the change log failed");
                }
                false
            }
        }
    }

    async fn try_catch_up(&mut self) -> Result<(), StoreError> {
        let now = Instant::now();
        if self.tracker.is_none() {
            self.tracker = Some(self.start_tracker(now).await?);
            self.publish(Vec::new());
            self.publish_refresh();
        }
        // Back from an outage long enough that another server may have pruned changes this one
        // never read: every client reloads.
        if let Some(since) = self.down_since {
            if now.duration_since(since) > self.config.retention / 2 {
                let tracker = self.tracker.as_mut().expect("tracker");
                let latest = changes::latest_change_id(&self.db).await?;
                *tracker = Tracker::new(latest);
                self.watermark.store(latest, Ordering::Release);
                let _ = self.sender.send(LiveMsg::Reset { watermark: latest });
                // Answers shared before the outage are no answers to the reload it prompts.
                self.publish_refresh();
                return Ok(());
            }
        }
        let tracker = self.tracker.as_mut().expect("tracker");
        if tracker.has_gaps() {
            let found = changes::changes_with_ids(&self.db, &tracker.gap_ids()).await?;
            self.stats.reads.fetch_add(1, Ordering::Relaxed);
            let tracker = self.tracker.as_mut().expect("tracker");
            let filled = tracker.fill(found.changes);
            tracker.expire(found.xmin, Instant::now(), self.config.gap_max_wait);
            self.publish(filled);
        }
        loop {
            let high = self.tracker.as_ref().expect("tracker").high;
            let read = changes::read_changes_after(&self.db, high, self.config.read_batch).await?;
            self.stats.reads.fetch_add(1, Ordering::Relaxed);
            let full = read.changes.len() as i64 >= self.config.read_batch;
            let fresh =
                self.tracker.as_mut().expect("tracker").observe(read.changes, read.horizon, Instant::now());
            self.publish(fresh);
            if !full {
                return Ok(());
            }
        }
    }

    /// The tracker at start-up: from the newest id, remembering which of the ids just below it
    /// are missing (their transactions may still be running and commit later).
    async fn start_tracker(&self, now: Instant) -> Result<Tracker, StoreError> {
        const LOOKBACK: i64 = 1_000;
        let latest = changes::latest_change_id(&self.db).await?;
        let from = (latest - LOOKBACK).max(0);
        let mut tracker = Tracker::new(from);
        let read = changes::read_changes_after(&self.db, from, LOOKBACK).await?;
        // Already in the database before anyone could subscribe: not broadcast.
        let _ = tracker.observe(read.changes, read.horizon, now);
        tracker.high = tracker.high.max(latest);
        Ok(tracker)
    }

    /// Publishes the watermark, then broadcasts `changes` (if any). The watermark is stored
    /// first, so a stream that subscribes and then reads it can only under-estimate it.
    fn publish(&mut self, changes: Vec<Change>) {
        let watermark = self.tracker.as_ref().map(Tracker::watermark).unwrap_or(0);
        self.watermark.store(watermark, Ordering::Release);
        if changes.is_empty() {
            return;
        }
        self.stats.broadcasts.fetch_add(1, Ordering::Relaxed);
        self.owed = true;
        // No receivers is fine: nobody is watching.
        let _ = self.sender.send(LiveMsg::Changes { changes: changes.into(), watermark });
    }

    /// Publishes the next refresh version, then broadcasts it: a page that refetches on the
    /// broadcast reads at this version or a later one, never an answer shared before it.
    fn publish_refresh(&mut self) {
        let watermark = self.watermark.load(Ordering::Acquire).max(0);
        let version = self.refresh.borrow().map_or(0, |r| r.version + 1);
        let refresh = Refresh { version, watermark };
        self.refresh.send_replace(Some(refresh));
        self.owed = false;
        self.refreshed_second = Some(Utc::now().timestamp());
        if version > 0 {
            self.stats.refreshes.fetch_add(1, Ordering::Relaxed);
            let _ = self.sender.send(LiveMsg::Refresh(refresh));
        }
    }

    async fn prune(&self) {
        let cutoff = Utc::now() - chrono::Duration::from_std(self.config.retention).unwrap_or_default();
        match changes::prune_changes(&self.db, cutoff).await {
            Ok(n) => {
                self.stats.pruned.fetch_add(n, Ordering::Relaxed);
                if n > 0 {
                    tracing::debug!(rows = n, "live updates: pruned the change log");
                }
            }
            Err(e) => tracing::warn!(error = %e, "live updates: pruning the change log failed"),
        }
    }
}

/// From `now` to the next whole second (at least a millisecond, so a wait never spins).
fn until_next_second(now: chrono::DateTime<Utc>) -> Duration {
    let into = Duration::from_nanos(u64::from(now.timestamp_subsec_nanos().min(999_999_999)));
    Duration::from_secs(1).saturating_sub(into).max(Duration::from_millis(1))
}

/// Which change ids were delivered, which are still missing, and the watermark. Pure, so the
/// out-of-order rules are unit-tested without a database.
#[derive(Clone, Debug, PartialEq)]
pub struct Tracker {
    /// The highest id read.
    pub high: i64,
    /// Ids below `high` not seen yet: id → (horizon of the read that found it missing, since).
    gaps: BTreeMap<i64, (Option<i64>, Instant)>,
}

/// A jump larger than this (a sequence skipping ahead) is not tracked id by id.
const MAX_GAP_SPAN: i64 = 10_000;

impl Tracker {
    pub fn new(high: i64) -> Tracker {
        Tracker { high, gaps: BTreeMap::new() }
    }

    /// Every id at or below this was seen, or never will be.
    pub fn watermark(&self) -> i64 {
        match self.gaps.keys().next() {
            Some(first) => first - 1,
            None => self.high,
        }
    }

    pub fn has_gaps(&self) -> bool {
        !self.gaps.is_empty()
    }

    pub fn gap_ids(&self) -> Vec<i64> {
        self.gaps.keys().copied().collect()
    }

    /// Rows read after `high`, ascending. Ids skipped on the way become gaps if `horizon` says
    /// a running transaction may still commit them (PostgreSQL); without a horizon (SQLite, one
    /// writer at a time) a skipped id is final. Returns the rows to deliver.
    pub fn observe(&mut self, rows: Vec<Change>, horizon: Option<i64>, now: Instant) -> Vec<Change> {
        let mut fresh = Vec::with_capacity(rows.len());
        for row in rows {
            if row.id <= self.high {
                continue;
            }
            if horizon.is_some() && row.id - self.high - 1 <= MAX_GAP_SPAN {
                for missing in self.high + 1..row.id {
                    self.gaps.insert(missing, (horizon, now));
                }
            }
            self.high = row.id;
            fresh.push(row);
        }
        fresh
    }

    /// Rows found among the gap ids: they are delivered and no longer missing.
    pub fn fill(&mut self, rows: Vec<Change>) -> Vec<Change> {
        rows.into_iter().filter(|row| self.gaps.remove(&row.id).is_some()).collect()
    }

    /// Gives up gaps that can no longer fill: the oldest running transaction (`xmin`, read in
    /// the same statement as the [`Tracker::fill`] lookup just before) is past their horizon, or
    /// they waited longer than `max_wait`.
    pub fn expire(&mut self, xmin: Option<i64>, now: Instant, max_wait: Duration) {
        self.gaps.retain(|_, (horizon, since)| {
            let settled = match (horizon, xmin) {
                (Some(h), Some(x)) => x >= *h,
                (None, _) => true,
                (Some(_), None) => false,
            };
            let waited = now.duration_since(*since) >= max_wait;
            !(settled || waited)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: i64) -> Change {
        Change { id, table: "runs".into(), row_id: id * 10, task_id: Some(1) }
    }

    fn ids(changes: &[Change]) -> Vec<i64> {
        changes.iter().map(|c| c.id).collect()
    }

    fn at(ms: i64) -> chrono::DateTime<Utc> {
        chrono::DateTime::from_timestamp_millis(1_700_000_000_000 + ms).unwrap()
    }

    #[test]
    fn a_refresh_is_due_once_a_second_only_when_something_was_delivered() {
        let second = at(0).timestamp();
        // Nothing delivered: never.
        assert!(!refresh_due(false, None, at(100)));
        assert!(!refresh_due(false, Some(second - 5), at(1_100)));
        // Delivered: the first refresh at once, then not again within the same second.
        assert!(refresh_due(true, None, at(100)));
        assert!(!refresh_due(true, Some(second), at(999 - 200)));
        assert!(refresh_due(true, Some(second), at(1_000)));
        assert!(refresh_due(true, Some(second - 1), at(840)));
        // Not in the last part of a second, whose reads would fall in the next one.
        assert!(!refresh_due(true, Some(second - 1), at(i64::from(REFRESH_CUTOFF_MS))));
        assert!(!refresh_due(true, None, at(990)));
        assert!(refresh_due(true, None, at(1_000)));
    }

    #[test]
    fn the_wait_for_the_next_second_ends_on_it() {
        assert_eq!(until_next_second(at(0)), Duration::from_secs(1));
        assert_eq!(until_next_second(at(250)), Duration::from_millis(750));
        assert_eq!(until_next_second(at(999)), Duration::from_millis(1));
        assert_eq!(
            until_next_second(at(0) + chrono::Duration::nanoseconds(999_999_999)),
            Duration::from_millis(1)
        );
    }

    #[test]
    fn in_order_rows_advance_the_watermark() {
        let now = Instant::now();
        let mut t = Tracker::new(4);
        assert_eq!(ids(&t.observe(vec![c(3), c(5), c(6)], Some(100), now)), vec![5, 6]);
        assert_eq!((t.high, t.watermark(), t.has_gaps()), (6, 6, false));
    }

    #[test]
    fn a_row_committed_late_is_delivered_and_holds_the_watermark_until_then() {
        let now = Instant::now();
        let mut t = Tracker::new(9);
        // 11 committed before 10: 10 is a gap; the watermark stays at 9.
        assert_eq!(ids(&t.observe(vec![c(11), c(12)], Some(500), now)), vec![11, 12]);
        assert_eq!((t.high, t.watermark(), t.gap_ids()), (12, 9, vec![10]));
        // The transactions of that read are still running (xmin below the horizon): kept.
        t.expire(Some(499), now, Duration::from_secs(60));
        assert_eq!(t.gap_ids(), vec![10]);
        // 10 commits: delivered once, watermark jumps to 12.
        assert_eq!(ids(&t.fill(vec![c(10)])), vec![10]);
        assert_eq!(ids(&t.fill(vec![c(10)])), Vec::<i64>::new());
        assert_eq!((t.watermark(), t.has_gaps()), (12, false));
    }

    #[test]
    fn a_gap_is_given_up_once_every_transaction_that_could_fill_it_ended() {
        let now = Instant::now();
        let mut t = Tracker::new(0);
        t.observe(vec![c(1), c(3)], Some(700), now);
        // 2 rolled back: once xmin passes the horizon and the lookup found nothing, it is final.
        t.expire(Some(700), now, Duration::from_secs(60));
        assert_eq!((t.watermark(), t.has_gaps()), (3, false));
    }

    #[test]
    fn a_gap_is_given_up_after_the_longest_wait() {
        let now = Instant::now();
        let mut t = Tracker::new(0);
        t.observe(vec![c(2)], Some(700), now);
        t.expire(Some(1), now + Duration::from_secs(59), Duration::from_secs(60));
        assert_eq!(t.watermark(), 0);
        t.expire(Some(1), now + Duration::from_secs(60), Duration::from_secs(60));
        assert_eq!(t.watermark(), 2);
    }

    #[test]
    fn without_a_horizon_skipped_ids_are_final() {
        // SQLite: one writer at a time, a skipped id was rolled back.
        let mut t = Tracker::new(0);
        assert_eq!(ids(&t.observe(vec![c(1), c(4)], None, Instant::now())), vec![1, 4]);
        assert_eq!((t.watermark(), t.has_gaps()), (4, false));
    }

    #[test]
    fn huge_jumps_are_not_tracked_id_by_id() {
        let mut t = Tracker::new(0);
        t.observe(vec![c(MAX_GAP_SPAN + 5)], Some(9), Instant::now());
        assert!(!t.has_gaps());
        assert_eq!(t.watermark(), MAX_GAP_SPAN + 5);
    }

    #[test]
    fn gaps_found_in_a_second_read_keep_their_own_horizon() {
        let now = Instant::now();
        let mut t = Tracker::new(0);
        t.observe(vec![c(2)], Some(10), now);
        t.observe(vec![c(4)], Some(20), now);
        t.expire(Some(15), now, Duration::from_secs(60));
        // 1's transactions ended (given up); 3's may still run.
        assert_eq!((t.gap_ids(), t.watermark()), (vec![3], 2));
    }
}
