-- Counts that stay cheap at 10 M runs (docs/counts.md), SQLite dialect: timestamps are RFC 3339
-- text as in 0001, so text order is time order. No table the runner writes changes and
-- no trigger is added: these tables are written only by the dashboard's rollup maintainer
-- (store/src/rollups.rs), which follows change_log (0002) after the fact, off the runner's
-- write path. Parallel to migrations/postgres/0006_create_run_rollups.sql.
--
-- A bucket is 15 minutes of claimed_at: bucket k holds the runs claimed in
-- [k * 900 s, (k + 1) * 900 s) since the Unix epoch. Only closed buckets are rolled up; readers
-- count everything else (edges of a window, the open bucket, buckets missing or out of date)
-- from `runs` directly, so an answer is the same as counting history would give.

-- One row per computed bucket: when and with what its states were decided.
CREATE TABLE run_rollup_buckets (
    bucket      INTEGER PRIMARY KEY,
    computed_at TEXT NOT NULL,   -- the `now` the run states were decided with
    -- The earliest lease expiry among the bucket's unfinished runs counted as `running`: from
    -- then on one of them is `silent` although no row changed, so the counts are out of date.
    stale_at    TEXT,
    -- The latest lease expiry among unfinished runs counted as `silent`: a reader whose `now`
    -- is earlier (another server's clock) would call that run `running`.
    fresh_from  TEXT,
    no_action   TEXT NOT NULL,          -- the trimmed tokens the states were decided with
    skip        TEXT NOT NULL
);
CREATE INDEX run_rollup_buckets_stale_idx ON run_rollup_buckets (stale_at) WHERE stale_at IS NOT NULL;

-- Runs per bucket, state, error (kept for `failed` only: the cause) and safety (kept for
-- `lost_lease` only: "unsafe lost leases" needs attention).
CREATE TABLE run_rollups (
    bucket  BIGINT NOT NULL,
    state   TEXT NOT NULL,
    error   TEXT,
    safety  TEXT,
    runs    BIGINT NOT NULL
);
CREATE INDEX run_rollups_bucket_idx ON run_rollups (bucket);

-- The workers page per bucket and worker.
CREATE TABLE worker_rollups (
    bucket            BIGINT NOT NULL,
    worker            TEXT NOT NULL,
    runs              BIGINT NOT NULL,
    failures          BIGINT NOT NULL,
    last_claim_at     TEXT,
    last_heartbeat_at TEXT
);
CREATE INDEX worker_rollups_bucket_idx ON worker_rollups (bucket);

-- Unsafe tasks executed twice and not compensated (the rule of lastword_core::needs_compensation),
-- re-evaluated for every task that change_log says changed: one row per claim of one of its
-- runs and per effect, so "active in the window" is an index range.
CREATE TABLE double_executions (
    task_id   INTEGER NOT NULL,
    active_at TEXT NOT NULL
);
CREATE INDEX double_executions_active_idx ON double_executions (active_at, task_id);
CREATE INDEX double_executions_task_idx ON double_executions (task_id);

-- The maintainer's place in change_log, shared by every dashboard server (one row).
CREATE TABLE rollup_state (
    id              INTEGER PRIMARY KEY CHECK (id = 1),
    -- Every change with an id at or below it has been accounted for.
    change_cursor   BIGINT NOT NULL,
    -- The last read: its highest id and its snapshot's xmax. Once no transaction older than
    -- the horizon runs, no id at or below pending_max can still appear (ids commit out of order).
    pending_max     BIGINT NOT NULL,
    pending_horizon BIGINT,
    -- double_executions is complete for tasks up to flags_target once flags_done_to reaches it;
    -- later tasks are covered by their changes. Evaluated with these tokens.
    flags_done_to   BIGINT NOT NULL,
    flags_target    BIGINT NOT NULL,
    no_action       TEXT NOT NULL,
    skip            TEXT NOT NULL,
    refreshed_at    TEXT NOT NULL
);
