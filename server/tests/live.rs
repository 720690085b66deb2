//! Live updates end to end: a real server on a real port, a raw HTTP client reading the
//! server-sent events, changes written with the runner library. Every case runs on a SQLite
//! file and on PostgreSQL (required in CI via `LASTWORD_REQUIRE_POSTGRES=1`).

use chrono::Utc;
use lastword_core::{Change, Safety, Source, Tokens};
use lastword_runner::{enqueue, Outcome, Runner, RunnerConfig, SystemClock};
use lastword_server::live::{LiveConfig, LiveHub};
use lastword_server::{router, state::leptos_options, AppState};
use lastword_store::testing::{postgres, sqlite_file, TEST_DATABASE_URL};
use lastword_store::{changes, store_for, Db, DbTarget, NewTask};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

const WAIT: Duration = Duration::from_secs(15);

fn test_config() -> LiveConfig {
    LiveConfig {
        poll_interval: Duration::from_millis(50),
        gap_check_interval: Duration::from_millis(20),
        backoff_initial: Duration::from_millis(50),
        backoff_max: Duration::from_millis(300),
        ..LiveConfig::default()
    }
}

/// A dashboard server on 127.0.0.1:<free port>, with its hub started.
struct Server {
    addr: SocketAddr,
    state: AppState,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start(db: &Db) -> Server {
        Server::start_with(db, test_config()).await
    }

    /// With the hub's timings of one's own (the production defaults, for recovery times).
    async fn start_with(db: &Db, config: LiveConfig) -> Server {
        let hub = LiveHub::new(db.clone(), config);
        hub.ensure_started();
        let state = AppState::with_live(leptos_options(), store_for(db.clone(), Tokens::default()), hub);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = router(state.clone());
        let task = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let server = Server { addr, state, task };
        server.wait_for_hub().await;
        server
    }

    fn hub(&self) -> &LiveHub {
        &self.state.live
    }

    async fn wait_for_hub(&self) {
        eventually("the hub's first read", || self.hub().watermark().is_some()).await;
    }

    /// Until the hub published a refresh covering change `id`: when a page would refetch.
    async fn wait_for_refresh_covering(&self, id: i64) {
        eventually("a refresh covering the change", || {
            self.hub().refresh().is_some_and(|r| r.watermark >= id)
        })
        .await;
    }

    async fn connect(&self, last_event_id: Option<&str>) -> SseClient {
        SseClient::connect(self.addr, "/api/v1/events", last_event_id).await
    }

    fn live_clients(&self) -> i64 {
        self.state.live_clients.load(Ordering::SeqCst)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
struct SseEvent {
    event: String,
    data: String,
    id: Option<String>,
}

impl SseEvent {
    fn changes(&self) -> Vec<Change> {
        assert_eq!(self.event, "changes", "{self:?}");
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("{e}: {}", self.data))
    }

    fn id(&self) -> i64 {
        self.id.as_deref().expect("an id").parse().expect("a numeric id")
    }
}

/// A minimal HTTP/1.1 client for one event stream: headers, chunked body, SSE lines.
struct SseClient {
    reader: BufReader<TcpStream>,
    chunked: bool,
    body: Vec<u8>,
    pending: SseEvent,
    /// The last `id:` seen, as a browser keeps it.
    last_id: Option<String>,
    /// Whether `refresh` events are returned; the cases about what changes arrive skip them
    /// (they come at most once a second, whenever the clock says) and see only the changes.
    refreshes: bool,
}

impl SseClient {
    async fn connect(addr: SocketAddr, path: &str, last_event_id: Option<&str>) -> SseClient {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let mut request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n");
        if let Some(id) = last_event_id {
            request.push_str(&format!("Last-Event-ID: {id}\r\n"));
        }
        request.push_str("\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut reader = BufReader::new(stream);
        let mut status = String::new();
        reader.read_line(&mut status).await.unwrap();
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        let mut chunked = false;
        let mut content_type = String::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).await.unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').unwrap();
            let (name, value) = (name.to_ascii_lowercase(), value.trim().to_ascii_lowercase());
            if name == "transfer-encoding" && value.contains("chunked") {
                chunked = true;
            }
            if name == "content-type" {
                content_type = value;
            }
        }
        assert!(content_type.starts_with("text/event-stream"), "{content_type}");
        SseClient {
            reader,
            chunked,
            body: Vec::new(),
            pending: SseEvent::default(),
            last_id: None,
            refreshes: false,
        }
    }

    /// The same client, returning `refresh` events too.
    fn with_refreshes(mut self) -> SseClient {
        self.refreshes = true;
        self
    }

    /// Reads more of the body; false at its end.
    async fn fill(&mut self) -> bool {
        if self.chunked {
            let mut size = String::new();
            if self.reader.read_line(&mut size).await.unwrap_or(0) == 0 {
                return false;
            }
            let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if size == 0 {
                return false;
            }
            let mut chunk = vec![0; size + 2];
            if self.reader.read_exact(&mut chunk).await.is_err() {
                return false;
            }
            self.body.extend_from_slice(&chunk[..size]);
            true
        } else {
            let mut buf = [0; 4096];
            match self.reader.read(&mut buf).await {
                Ok(0) | Err(_) => false,
                Ok(n) => {
                    self.body.extend_from_slice(&buf[..n]);
                    true
                }
            }
        }
    }

    /// The next event (comments and keep-alives skipped), or None when the stream ended.
    async fn next_raw(&mut self) -> Option<SseEvent> {
        loop {
            while let Some(pos) = self.body.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.body.drain(..=pos).collect();
                let line = String::from_utf8(line).unwrap();
                let line = line.trim_end_matches(['\r', '\n']);
                if line.is_empty() {
                    let event = std::mem::take(&mut self.pending);
                    if event != SseEvent::default() {
                        if event.id.is_some() {
                            self.last_id = event.id.clone();
                        }
                        if event.event == "refresh" && !self.refreshes {
                            continue;
                        }
                        return Some(event);
                    }
                    continue;
                }
                if line.starts_with(':') {
                    continue;
                }
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                match field {
                    "event" => self.pending.event = value.to_string(),
                    "data" => {
                        if !self.pending.data.is_empty() {
                            self.pending.data.push('\n');
                        }
                        self.pending.data.push_str(value);
                    }
                    "id" => self.pending.id = Some(value.to_string()),
                    _ => {}
                }
            }
            if !self.fill().await {
                return None;
            }
        }
    }

    async fn next(&mut self) -> SseEvent {
        tokio::time::timeout(WAIT, self.next_raw())
            .await
            .expect("an event in time")
            .expect("the stream is still open")
    }

    async fn expect(&mut self, event: &str) -> SseEvent {
        let got = self.next().await;
        assert_eq!(got.event, event, "{got:?}");
        got
    }

    /// `changes` events until every id in `ids` arrived; returns every change received, in order.
    async fn changes_until(&mut self, ids: &[i64]) -> Vec<Change> {
        let mut got = Vec::new();
        while !ids.iter().all(|id| got.iter().any(|c: &Change| c.id == *id)) {
            let event = self.next().await;
            if event.event == "changes" {
                got.extend(event.changes());
            } else {
                assert_eq!(event.event, "status", "{event:?}");
            }
        }
        got
    }

    /// Nothing but keep-alives for `quiet`.
    async fn expect_silence(&mut self, quiet: Duration) {
        if let Ok(event) = tokio::time::timeout(quiet, self.next_raw()).await {
            panic!("expected no event, got {event:?}");
        }
    }
}

fn new_task(kind: &str) -> NewTask {
    NewTask::new(kind, Source::Notification, Safety::Unsafe).with_payload(serde_json::json!({"n": 1}))
}

fn runner(db: &Db, worker: &str) -> Runner {
    let config = RunnerConfig { lease: chrono::Duration::seconds(30), tokens: Tokens::default() };
    Runner::new(db.clone(), worker, config, Arc::new(SystemClock))
}

/// The change log's ids after `after`, from the database.
async fn logged_after(db: &Db, after: i64) -> Vec<Change> {
    changes::changes_after(db, after, 100_000).await.unwrap()
}

fn ids(changes: &[Change]) -> Vec<i64> {
    changes.iter().map(|c| c.id).collect()
}

async fn sqlite() -> (Db, tempfile::TempDir) {
    sqlite_file().await
}

macro_rules! on_both_backends {
    ($case:ident, $sqlite:ident, $postgres:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $sqlite() {
            let (db, _dir) = sqlite().await;
            $case(db).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $postgres() {
            let Some(db) = postgres(stringify!($postgres)).await else { return };
            $case(db.clone()).await;
            lastword_store::testing::discard_postgres(db).await;
        }
    };
}

// (a) A change written with the runner library arrives on a connected stream.
async fn runner_changes_arrive(db: Db) {
    let server = Server::start(&db).await;
    let mut client = server.connect(None).await;
    let hello = client.expect("status").await;
    assert_eq!(hello.data, "db_up");
    assert_eq!(hello.id(), 0, "an empty log: the cursor starts at 0");

    let task_id = enqueue(&db, &new_task("reply"), Utc::now()).await.unwrap();
    let logged = logged_after(&db, 0).await;
    assert_eq!(logged.len(), 1, "one insert, one change: {logged:?}");
    let got = client.changes_until(&ids(&logged)).await;
    assert_eq!(
        got,
        vec![Change { id: logged[0].id, table: "tasks".into(), row_id: task_id, task_id: Some(task_id) }]
    );

    // A claim and a finish: one change each, the run's insert and update (they carry the task's
    // id; the task's own updates are not logged, migration 0008), and the effect between.
    let worker = runner(&db, "w1");
    let lease = worker.claim(None).await.unwrap().expect("a lease");
    worker.record_effect(&lease, "send_email", "task-1-send_email").await.unwrap();
    worker.finish(lease, Outcome::NoActionNeeded).await.unwrap();
    let logged = logged_after(&db, logged[0].id).await;
    let tables: Vec<&str> = logged.iter().map(|c| c.table.as_str()).collect();
    assert_eq!(tables, ["runs", "effects", "runs"], "{logged:?}");
    assert!(logged.iter().all(|c| c.task_id == Some(task_id)));
    let got = client.changes_until(&ids(&logged)).await;
    assert_eq!(got, logged, "every change once, in order");
}
on_both_backends!(
    runner_changes_arrive,
    a_runner_change_arrives_on_sqlite,
    a_runner_change_arrives_on_postgres
);

// (b) Reconnecting with Last-Event-ID gets exactly the changes missed while away.
async fn resume_after_disconnect(db: Db) {
    let server = Server::start(&db).await;
    let mut client = server.connect(None).await;
    client.expect("status").await;
    enqueue(&db, &new_task("first"), Utc::now()).await.unwrap();
    let seen = logged_after(&db, 0).await;
    client.changes_until(&ids(&seen)).await;
    let cursor = client.last_id.clone().expect("the stream gave a cursor");
    assert_eq!(cursor.parse::<i64>().unwrap(), seen.last().unwrap().id);
    drop(client);

    // Away: a claim, a finish and a new task.
    let worker = runner(&db, "w1");
    let lease = worker.claim(None).await.unwrap().unwrap();
    worker.finish(lease, Outcome::Skip).await.unwrap();
    enqueue(&db, &new_task("second"), Utc::now()).await.unwrap();
    let last_seen = seen.last().unwrap().id;
    // The claim's run insert, the finish's run update, the new task (migration 0008: a runner's
    // task writes ride on its run's row).
    assert_eq!(logged_after(&db, last_seen).await.len(), 3);
    // Back, by header (what browsers send) and by query (a first connection).
    for by_header in [true, false] {
        let latest = changes::latest_change_id(&db).await.unwrap();
        // Read by the hub and covered by a refresh: the replay is then one batch (one not yet
        // covered comes in two, around a refresh: `resumed_page_refetches` below).
        server.wait_for_refresh_covering(latest).await;
        let missed = logged_after(&db, last_seen).await;
        let mut client = if by_header {
            server.connect(Some(&cursor)).await
        } else {
            SseClient::connect(server.addr, &format!("/api/v1/events?last_event_id={cursor}"), None).await
        };
        let status = client.expect("status").await;
        assert_eq!(status.data, "db_up");
        let replay = client.expect("changes").await;
        assert_eq!(replay.changes(), missed, "exactly the missed changes, in order");
        assert_eq!(replay.id(), missed.last().unwrap().id);
        // Then live, without repeating the replay.
        let task_id = enqueue(&db, &new_task("third"), Utc::now()).await.unwrap();
        let live = client.expect("changes").await.changes();
        assert_eq!(live.len(), 1, "{live:?}");
        assert_eq!(live[0].row_id, task_id);
        client.expect_silence(Duration::from_millis(300)).await;
    }

    // A cursor from another database (ahead of this log) or one already pruned: reset.
    let mut client = server.connect(Some("999999999")).await;
    let reset = client.expect("reset").await;
    assert_eq!(reset.data, "unknown_id");
    let mut client = server.connect(Some("not-a-number")).await;
    assert_eq!(client.expect("reset").await.data, "unreadable_id");
}
on_both_backends!(
    resume_after_disconnect,
    resume_replays_what_was_missed_on_sqlite,
    resume_replays_what_was_missed_on_postgres
);

// (c)+(d) Fifty browsers, one database watcher; live_clients follows them. The watcher's reads
// keep their pace however many browsers watch, and nothing waits on a notification (the
// triggers send none since migration 0005, so a runner's commit never queues behind another's).
async fn many_clients_one_watcher(db: Db) {
    let server = Server::start(&db).await;
    assert_eq!(server.live_clients(), 0);
    let window = Duration::from_millis(600);
    let reads_before = server.hub().stats().reads.load(Ordering::SeqCst);
    tokio::time::sleep(window).await;
    let reads_alone = server.hub().stats().reads.load(Ordering::SeqCst) - reads_before;

    let mut clients = Vec::new();
    for _ in 0..50 {
        let mut client = server.connect(None).await;
        client.expect("status").await;
        clients.push(client);
    }
    assert_eq!(server.live_clients(), 50);
    assert_eq!(server.hub().receivers(), 50);
    let reads_before = server.hub().stats().reads.load(Ordering::SeqCst);
    tokio::time::sleep(window).await;
    let reads_watched = server.hub().stats().reads.load(Ordering::SeqCst) - reads_before;
    assert!(
        reads_watched <= reads_alone + 3,
        "fifty browsers made the watcher read more: {reads_alone} reads alone, {reads_watched} watched"
    );

    let task_id = enqueue(&db, &new_task("fan-out"), Utc::now()).await.unwrap();
    let logged = logged_after(&db, 0).await;
    for client in &mut clients {
        let got = client.changes_until(&ids(&logged)).await;
        assert_eq!(got[0].row_id, task_id);
    }

    let stats = server.hub().stats();
    assert_eq!(stats.loops_started.load(Ordering::SeqCst), 1, "one watcher for fifty clients");
    if let Db::Postgres(pool) = &db {
        let listening: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%'",
        )
        .fetch_one(pool)
        .await
        .unwrap();
        assert_eq!(listening, 0, "the watcher polls; no connection waits in LISTEN");
        let trigger: String =
            sqlx::query_scalar("SELECT prosrc FROM pg_proc WHERE proname = 'lastword_log_change'")
                .fetch_one(pool)
                .await
                .unwrap();
        assert!(!trigger.contains("pg_notify"), "the change-log trigger notifies nobody: {trigger}");
    }

    clients.truncate(20);
    eventually("live_clients to drop to 20", || server.live_clients() == 20).await;
    drop(clients);
    eventually("live_clients to drop to 0", || server.live_clients() == 0).await;
}
on_both_backends!(
    many_clients_one_watcher,
    fifty_clients_one_watcher_on_sqlite,
    fifty_clients_one_watcher_on_postgres
);

// (e) Two servers behind a load balancer on one database: their streams carry the same changes
// under the same ids, a cursor from one resumes at the other, and an operator's action through
// one reaches the other's shared reads as soon as its hub reads the change (no shared memory).
async fn two_servers_one_database(db: Db) {
    let (a, b) = (Server::start(&db).await, Server::start(&db).await);
    let mut at_a = a.connect(None).await;
    let mut at_b = b.connect(None).await;
    at_a.expect("status").await;
    at_b.expect("status").await;

    let task_id = enqueue(&db, &new_task("balanced").with_max_attempts(1), Utc::now()).await.unwrap();
    let worker = runner(&db, "w1");
    let lease = worker.claim(None).await.unwrap().expect("a lease");
    let failed = Outcome::Failed { cause: lastword_core::ErrorCause::Crash, detail: "boom".into() };
    worker.finish(lease, failed).await.unwrap();
    let logged = logged_after(&db, 0).await;
    assert_eq!(at_a.changes_until(&ids(&logged)).await, logged);
    assert_eq!(at_b.changes_until(&ids(&logged)).await, logged, "the same changes, the same ids");

    // Both servers' shared reads see the dead task once their own hub's refresh covers it (when
    // their pages refetch).
    let last = logged.last().unwrap().id;
    for server in [&a, &b] {
        server.wait_for_refresh_covering(last).await;
    }
    let now = lastword_core::read_now();
    for server in [&a, &b] {
        let task = server.state.store.task(task_id).await.unwrap().unwrap();
        assert_eq!((task.status.as_str(), task.lease_epoch), ("dead", 1));
        assert_eq!(server.state.store.task_runs(task_id, now).await.unwrap().len(), 1);
    }

    // A cursor handed out by A, used at B (the balancer sent the reconnect elsewhere).
    let cursor = at_a.last_id.clone().expect("a cursor from A");
    drop(at_a);
    let request = lastword_core::ActionRequest {
        reason: "re-run after the crash fix".into(),
        expected_epoch: Some(1),
        expected_status: Some("dead".into()),
        ..Default::default()
    };
    let outcome = b
        .state
        .store
        .act(
            task_id,
            lastword_core::ActionKind::Requeue,
            &request,
            &lastword_core::Actor::new("alice", "local"),
            lastword_core::write_now(),
        )
        .await
        .unwrap();
    assert!(matches!(outcome, Some(lastword_core::ActionOutcome::Applied { .. })), "{outcome:?}");
    let missed = logged_after(&db, cursor.parse().unwrap()).await;
    assert!(!missed.is_empty(), "the re-queue is logged");
    let mut resumed = b.connect(Some(&cursor)).await;
    assert_eq!(resumed.expect("status").await.data, "db_up");
    assert_eq!(resumed.changes_until(&ids(&missed)).await, missed, "exactly what A's client missed");

    // A never saw the action's invalidation, only the change log: its reads catch up at the
    // refresh that follows its hub reading the change.
    let latest = changes::latest_change_id(&db).await.unwrap();
    a.wait_for_refresh_covering(latest).await;
    let task = a.state.store.task(task_id).await.unwrap().unwrap();
    assert_eq!((task.status.as_str(), task.lease_epoch), ("queued", 2), "A's shared read is not stale");
}
on_both_backends!(
    two_servers_one_database,
    two_servers_share_one_database_on_sqlite,
    two_servers_share_one_database_on_postgres
);

// (f) Pages are told to refetch (`refresh`) at most once a wall-clock second, only after
// changes, on every stream at the same moment; the shared reads' version moves with the
// refreshes, not with each change, so reads between two refreshes share one answer.
async fn refreshes_pace_the_pages(db: Db) {
    let server = Server::start(&db).await;
    let mut a = server.connect(None).await.with_refreshes();
    let mut b = server.connect(None).await.with_refreshes();
    a.expect("status").await;
    b.expect("status").await;
    a.expect_silence(Duration::from_millis(1_200)).await;

    // A change about every 100 ms for 3 s, and a read of the totals about every 50 ms.
    let first_write = Utc::now();
    let reads_before = server.state.shared_reads.database.load(Ordering::SeqCst);
    let refreshes_before = server.hub().stats().refreshes.load(Ordering::SeqCst);
    let started = std::time::Instant::now();
    let mut reads = 0;
    while started.elapsed() < Duration::from_secs(3) {
        enqueue(&db, &new_task("paced"), Utc::now()).await.unwrap();
        for _ in 0..2 {
            server.state.store.totals().await.unwrap();
            reads += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let database_reads = server.state.shared_reads.database.load(Ordering::SeqCst) - reads_before;
    let refreshed = server.hub().stats().refreshes.load(Ordering::SeqCst) - refreshes_before;
    assert!(
        database_reads <= refreshed + 1,
        "{reads} reads over 3 s of changes went to the database {database_reads} times; the \
         version moved {refreshed} times"
    );
    let logged = logged_after(&db, 0).await;
    let latest = logged.last().unwrap().id;
    assert!(logged.len() >= 10, "{logged:?}");

    // Both streams: every change, and refreshes between them until one covers the last.
    let mut sequences = Vec::new();
    for client in [&mut a, &mut b] {
        let (mut got, mut refreshes, mut since_refresh) = (Vec::new(), Vec::new(), 0);
        let last_at = loop {
            let event = client.next().await;
            match event.event.as_str() {
                "changes" => {
                    got.extend(event.changes());
                    since_refresh += 1;
                }
                "refresh" => {
                    assert!(since_refresh > 0, "a refresh without a change before it: {refreshes:?}");
                    since_refresh = 0;
                    refreshes.push(event.data.parse::<i64>().expect("a version"));
                    if got.iter().any(|c| c.id == latest) {
                        break Utc::now();
                    }
                }
                other => panic!("unexpected {other}: {event:?}"),
            }
        };
        assert_eq!(got, logged, "every change once, in order");
        assert!(refreshes.windows(2).all(|w| w[0] < w[1]), "versions grow: {refreshes:?}");
        let seconds = last_at.timestamp() - first_write.timestamp() + 1;
        assert!(
            refreshes.len() >= 2 && refreshes.len() as i64 <= seconds,
            "{} refreshes over {seconds} wall-clock seconds of changes: {refreshes:?}",
            refreshes.len()
        );
        sequences.push(refreshes);
    }
    assert_eq!(sequences[0], sequences[1], "every stream refreshes at the same versions");
    let current = server.hub().refresh().unwrap();
    assert_eq!(current.version, *sequences[0].last().unwrap());
    assert_eq!(current.watermark, latest);
    // Quiet again: no more refreshes.
    a.expect_silence(Duration::from_millis(1_200)).await;
}
on_both_backends!(
    refreshes_pace_the_pages,
    refreshes_pace_the_pages_on_sqlite,
    refreshes_pace_the_pages_on_postgres
);

// (g) A page resumes from its refresh's watermark (what the server writes in the page): the
// replayed changes the hub's current refresh covers come with a `refresh` right after them (its
// data is behind: refetch now); a change after that waits for the hub's next refresh. (Replayed
// changes newer than the current refresh come after its `refresh`; when that happens depends
// on the hub's clock, so no case here pins it.)
async fn resumed_page_refetches(db: Db) {
    let server = Server::start(&db).await;
    let rendered_at = server.hub().refresh().expect("a refresh at start").watermark;
    enqueue(&db, &new_task("before-refresh"), Utc::now()).await.unwrap();
    let covered = logged_after(&db, rendered_at).await;
    let covered_to = covered.last().unwrap().id;
    server.wait_for_refresh_covering(covered_to).await;

    let mut client = server.connect(Some(&rendered_at.to_string())).await.with_refreshes();
    assert_eq!(client.expect("status").await.data, "db_up");
    assert_eq!(client.expect("changes").await.changes(), covered);
    let refresh = client.expect("refresh").await;
    assert_eq!(refresh.data, server.hub().refresh().unwrap().version.to_string());
    // A change after it: delivered live, then covered by the hub's next refresh.
    enqueue(&db, &new_task("after-refresh"), Utc::now()).await.unwrap();
    let later = logged_after(&db, covered_to).await;
    assert_eq!(client.expect("changes").await.changes(), later);
    let next = client.expect("refresh").await;
    assert!(next.data.parse::<i64>().unwrap() > refresh.data.parse::<i64>().unwrap());
    assert!(server.hub().refresh().unwrap().watermark >= later.last().unwrap().id);
}
on_both_backends!(
    resumed_page_refetches,
    a_resumed_page_refetches_after_the_replay_its_data_missed_on_sqlite,
    a_resumed_page_refetches_after_the_replay_its_data_missed_on_postgres
);

/// A database outage is shown (`status: db_down`), survived (the stream stays open) and
/// recovered from (`db_up`, then changes flow again, nothing written meanwhile is missed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_is_shown_and_recovered_from_on_postgres() {
    let Some(db) = postgres("outage").await else { return };
    let Db::Postgres(pool) = &db else { unreachable!() };
    let name: String = sqlx::query_scalar("SELECT current_database()").fetch_one(pool).await.unwrap();
    let base = std::env::var(TEST_DATABASE_URL).unwrap();
    let admin = Db::connect(&DbTarget::Postgres(base)).await.unwrap();
    let Db::Postgres(admin) = admin else { unreachable!() };

    let server = Server::start(&db).await;
    let mut client = server.connect(None).await;
    assert_eq!(client.expect("status").await.data, "db_up");

    // Down: no new connections, and every existing one is cut.
    sqlx::query(&format!("ALTER DATABASE \"{name}\" WITH ALLOW_CONNECTIONS false"))
        .execute(&admin)
        .await
        .unwrap();
    sqlx::query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1")
        .bind(&name)
        .execute(&admin)
        .await
        .unwrap();
    assert_eq!(client.expect("status").await.data, "db_down");
    assert!(!*server.hub().db_up().borrow());
    assert_eq!(server.live_clients(), 1, "the stream survives the outage");

    // Back.
    sqlx::query(&format!("ALTER DATABASE \"{name}\" WITH ALLOW_CONNECTIONS true"))
        .execute(&admin)
        .await
        .unwrap();
    loop {
        if client.expect("status").await.data == "db_up" {
            break;
        }
    }
    let mut task_id = None;
    for _ in 0..50 {
        match enqueue(&db, &new_task("after"), Utc::now()).await {
            Ok(id) => {
                task_id = Some(id);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let task_id = task_id.expect("the pool reconnects");
    let logged = logged_after(&db, 0).await;
    let got = client.changes_until(&ids(&logged)).await;
    assert_eq!(got[0].row_id, task_id);
    assert_eq!(server.hub().stats().loops_started.load(Ordering::SeqCst), 1);
    lastword_store::testing::discard_postgres(db).await;
}

/// One GET over a fresh connection: the status and the body (the server answers with a length
/// or chunks; either is read to the end of the response).
async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(WAIT, stream.read_to_end(&mut raw)).await;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, text)
}

/// PostgreSQL stopped in the middle of a session (`pg_ctl stop -m immediate` on a cluster of
/// the test's own) and started again: pages show the outage banner, `/readyz` answers 503, the
/// open stream says `db_down` and stays open, a client that lost its connection meanwhile
/// resumes from its last event id, every change is delivered exactly once, and the server is
/// back within 5 s of the database, without a restart. Prints the figures (`pg-outage:`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_and_restarted_postgres_cluster_is_survived_without_losing_an_event() {
    let Some(cluster) = lastword_store::testing::ThrowawayCluster::start() else { return };
    let target = DbTarget::Postgres(cluster.url("lastword"));
    let db = Db::connect(&target).await.unwrap();
    db.migrate().await.unwrap();
    // The production timings: "back within 5 s" is about what a deployment does.
    let server = Server::start_with(&db, LiveConfig::default()).await;
    let mut stays = server.connect(None).await;
    assert_eq!(stays.expect("status").await.data, "db_up");
    let mut leaves = server.connect(None).await;
    assert_eq!(leaves.expect("status").await.data, "db_up");
    assert_eq!(http_get(server.addr, "/readyz").await.0, 200);

    let mut written = Vec::new();
    for _ in 0..3 {
        written.push(enqueue(&db, &new_task("before"), Utc::now()).await.unwrap());
    }
    let before = logged_after(&db, 0).await;
    let mut got = stays.changes_until(&ids(&before)).await;
    leaves.changes_until(&ids(&before)).await;
    let resume_from = leaves.last_id.clone().expect("an event id to resume from");

    cluster.stop();
    drop(leaves); // a browser tab whose connection broke during the outage
    assert_eq!(stays.expect("status").await.data, "db_down");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (status, _) = http_get(server.addr, "/readyz").await;
        if status == 503 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "/readyz still {status} during the outage");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, page) = http_get(server.addr, "/").await;
    assert!(status < 500, "the overview is a page with a banner, not an error page: {status}");
    assert!(page.contains("banner-db-down"), "the outage banner is on the page");

    cluster.start_again();
    let back = std::time::Instant::now();
    loop {
        if http_get(server.addr, "/readyz").await.0 == 200 {
            break;
        }
        assert!(back.elapsed() < Duration::from_secs(5), "not back within 5 s of the database");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let recovered_in = back.elapsed();
    while stays.expect("status").await.data != "db_up" {}
    for _ in 0..3 {
        written.push(enqueue(&db, &new_task("after"), Utc::now()).await.unwrap());
    }
    let all = logged_after(&db, 0).await;
    let missed: Vec<i64> = ids(&all).into_iter().filter(|id| !ids(&before).contains(id)).collect();
    got.extend(stays.changes_until(&missed).await);
    let mut resumed = server.connect(Some(&resume_from)).await;
    let caught_up = resumed.changes_until(&missed).await;

    assert_eq!(ids(&got), ids(&all), "the open stream: every change once, in order");
    assert_eq!(ids(&caught_up), missed, "the resumed stream: exactly what it missed");
    let (status, page) = http_get(server.addr, "/").await;
    assert_eq!(status, 200);
    assert!(!page.contains("banner-db-down"), "the banner is gone");
    assert_eq!(server.hub().stats().loops_started.load(Ordering::SeqCst), 1, "no restart of the watcher");
    println!(
        "pg-outage: {} changes delivered ({} before the stop, {} after the restart), 0 lost, 0 repeated; \
         /readyz back {} ms after the database; the resumed client caught up {} changes",
        got.len(),
        before.len(),
        got.len() - before.len(),
        recovered_in.as_millis(),
        caught_up.len()
    );
    assert_eq!(written.len(), 6);
}

/// Shutting the hub down ends every stream, so a graceful server shutdown is not held open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutting_the_hub_down_ends_the_streams() {
    let (db, _dir) = sqlite().await;
    let server = Server::start(&db).await;
    let mut client = server.connect(None).await;
    client.expect("status").await;
    server.hub().shutdown().await;
    let end = tokio::time::timeout(WAIT, client.next_raw()).await.expect("the stream ends");
    assert_eq!(end, None);
    eventually("live_clients to drop to 0", || server.live_clients() == 0).await;
}

/// The change log is pruned by age, oldest first, always keeping the newest row.
#[tokio::test]
async fn pruning_keeps_the_newest_change() {
    let (db, _dir) = sqlite().await;
    for kind in ["a", "b", "c"] {
        enqueue(&db, &new_task(kind), Utc::now()).await.unwrap();
    }
    let all = logged_after(&db, 0).await;
    assert_eq!(changes::prune_changes(&db, Utc::now() - chrono::Duration::hours(1)).await.unwrap(), 0);
    let pruned = changes::prune_changes(&db, Utc::now() + chrono::Duration::hours(1)).await.unwrap();
    assert_eq!(pruned, 2);
    assert_eq!(logged_after(&db, 0).await, all[2..].to_vec());
    assert_eq!(changes::latest_change_id(&db).await.unwrap(), all[2].id);
    assert_eq!(changes::oldest_change_id(&db).await.unwrap(), Some(all[2].id));

    // A client whose cursor is below what is kept must reload.
    let server = Server::start(&db).await;
    let mut client = server.connect(Some("0")).await;
    assert_eq!(client.expect("reset").await.data, "expired");
}
