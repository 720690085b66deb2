-- The contract tables, SQLite dialect. Parallel to migrations/postgres/0001_create_contract_tables.sql:
-- same tables and columns. Timestamps are TEXT in RFC 3339 UTC as sqlx writes them
-- ('2026-11-30T04:23:02.123+00:00'); every time value is bound from Rust, never from SQLite's
-- own clock, so one format holds and text order is time order.

CREATE TABLE tasks (
    id                  INTEGER PRIMARY KEY,
    kind                TEXT NOT NULL,
    source              TEXT NOT NULL CHECK (source IN ('notification', 'tick')),
    safety              TEXT NOT NULL CHECK (safety IN ('idempotent', 'unsafe')),
    status              TEXT NOT NULL DEFAULT 'queued'
                        CHECK (status IN ('queued', 'leased', 'completed', 'failed', 'dead')),
    payload             TEXT NOT NULL DEFAULT '{}',          -- JSON
    result              TEXT,
    owner               TEXT,
    lease_epoch         INTEGER NOT NULL DEFAULT 0,          -- fencing token, see the postgres file
    lease_expires_at    TEXT,
    attempts            INTEGER NOT NULL DEFAULT 0,
    max_attempts        INTEGER NOT NULL DEFAULT 3 CHECK (max_attempts > 0),
    compensated_at      TEXT,
    compensated_by      TEXT,
    compensation_reason TEXT,
    compensation_ref    TEXT,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL
);

CREATE INDEX tasks_queued_idx ON tasks (id) WHERE status = 'queued';
CREATE INDEX tasks_leased_expiry_idx ON tasks (lease_expires_at) WHERE status = 'leased';
CREATE INDEX tasks_status_updated_idx ON tasks (status, updated_at);
CREATE INDEX tasks_owner_idx ON tasks (owner) WHERE owner IS NOT NULL;

CREATE TABLE runs (
    id                  INTEGER PRIMARY KEY,
    task_id             INTEGER NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    worker              TEXT NOT NULL,
    lease_epoch         INTEGER NOT NULL,
    claimed_at          TEXT NOT NULL,
    lease_expires_at    TEXT NOT NULL,
    heartbeat_at        TEXT,
    finished_at         TEXT,
    output              TEXT,
    error               TEXT CHECK (error IN ('timeout', 'api_error', 'context_overflow', 'crash', 'other')),
    error_detail        TEXT,
    completion_rows     INTEGER,                             -- 1 accepted, 0 lost lease, null not recorded
    CONSTRAINT runs_task_epoch_key UNIQUE (task_id, lease_epoch)
);

CREATE INDEX runs_claimed_idx ON runs (claimed_at DESC, id DESC);
CREATE INDEX runs_worker_claimed_idx ON runs (worker, claimed_at DESC, id DESC);
CREATE INDEX runs_error_claimed_idx ON runs (error, claimed_at DESC, id DESC) WHERE error IS NOT NULL;
CREATE INDEX runs_lost_lease_idx ON runs (claimed_at DESC, id DESC) WHERE completion_rows = 0;
CREATE INDEX runs_unfinished_expiry_idx ON runs (lease_expires_at) WHERE finished_at IS NULL;

CREATE TABLE effects (
    id                  INTEGER PRIMARY KEY,
    run_id              INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    task_id             INTEGER NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    lease_epoch         INTEGER NOT NULL,
    kind                TEXT NOT NULL,
    idempotency_key     TEXT NOT NULL,
    created_at          TEXT NOT NULL,
    CONSTRAINT effects_run_key UNIQUE (run_id, idempotency_key)
);
CREATE INDEX effects_task_idx ON effects (task_id, lease_epoch);

CREATE TABLE operator_actions (
    id                  INTEGER PRIMARY KEY,
    task_id             INTEGER NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    run_id              INTEGER REFERENCES runs (id) ON DELETE SET NULL,
    action              TEXT NOT NULL,
    actor               TEXT NOT NULL,
    reason              TEXT NOT NULL,
    reference           TEXT,
    epoch_seen          INTEGER,
    epoch_after         INTEGER,
    status_seen         TEXT,
    outcome             TEXT NOT NULL,
    request_id          TEXT UNIQUE,
    created_at          TEXT NOT NULL
);
CREATE INDEX operator_actions_task_idx ON operator_actions (task_id, created_at DESC);
CREATE INDEX operator_actions_created_idx ON operator_actions (created_at DESC, id DESC);
CREATE INDEX operator_actions_actor_idx ON operator_actions (actor, created_at DESC);
