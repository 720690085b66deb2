-- Webhooks from lastword itself (issue 14, "Alerts"; server/src/notify.rs): one message per
-- incident, a resolved message when it clears, retries with backoff, and a log that survives a
-- restart so a notification is neither lost nor sent twice. Written only by the dashboard's
-- notifier (one server at a time: notifier_lease), never by a runner.
-- Parallel to migrations/postgres/0012_create_notifications.sql.

-- An attention item of a task (double_execution, unsafe_lost_lease, loop, dead) from when the
-- notifier first saw it until it saw it gone: one open incident per task and kind.
CREATE TABLE alert_incidents (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    kind        TEXT NOT NULL,
    task_id     INTEGER NOT NULL,           -- no foreign key: the log outlives a pruned task
    task_kind   TEXT NOT NULL,
    epoch       INTEGER NOT NULL,           -- the task's epoch when opened (a new death is a new incident)
    began_at    TEXT,               -- when the rows say it began
    opened_at   TEXT NOT NULL,
    resolved_at TEXT
);
CREATE UNIQUE INDEX alert_incidents_open_idx ON alert_incidents (kind, task_id) WHERE resolved_at IS NULL;

-- One message owed to one receiver about one incident's firing or resolution. Pending until a
-- receiver answered 2xx (delivered_at) or the retries ran out (abandoned_at).
CREATE TABLE alert_deliveries (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    incident_id  INTEGER NOT NULL REFERENCES alert_incidents (id) ON DELETE CASCADE,
    sink         TEXT NOT NULL,            -- the receiver's name: its host and a hash of its URL (no secret)
    phase        TEXT NOT NULL CHECK (phase IN ('firing', 'resolved')),
    created_at   TEXT NOT NULL,
    due_at       TEXT NOT NULL,     -- not before: the retry backoff and the cooldown
    attempts     INTEGER NOT NULL DEFAULT 0,
    delivered_at TEXT,
    abandoned_at TEXT,
    last_error   TEXT,
    message_id   TEXT                      -- the X-Lastword-Delivery id of the message that carried it
);
CREATE UNIQUE INDEX alert_deliveries_once_idx ON alert_deliveries (incident_id, sink, phase);
CREATE INDEX alert_deliveries_pending_idx ON alert_deliveries (due_at) WHERE delivered_at IS NULL AND abandoned_at IS NULL;

-- Which dashboard server sends: a lease like a runner's (owner + expiry), so with several
-- servers on one database exactly one notifies, and another takes over when it stops.
CREATE TABLE notifier_lease (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    owner      TEXT,
    epoch      INTEGER NOT NULL DEFAULT 0,
    expires_at TEXT
);
INSERT INTO notifier_lease (id) VALUES (1);
