"""Every statement the Python runner sends, copied verbatim from the Rust runner's
`runner/src/sql.rs` so both libraries write the contract tables identically (the test
`test_statements_match_the_rust_runner` compares the two files and `docs/contract.md`).

Placeholders are `$1, $2, …` as in the Rust source: SQLite binds them by name from a mapping
{"1": …}; for psycopg they are rewritten to `%(p1)s` (see `_backends.py`). All times are bound
parameters, never the database's clock.
"""

from __future__ import annotations

ENQUEUE = """INSERT INTO tasks (kind, source, safety, payload, max_attempts, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $6)
RETURNING id"""

CLAIM_EXHAUSTED = """UPDATE tasks SET status = 'dead', owner = NULL, lease_expires_at = NULL, updated_at = $2
WHERE id = $1"""

LOOP_STREAK = """SELECT COUNT(*) FROM (SELECT finished_at, error, completion_rows, output FROM runs
WHERE task_id = $1 ORDER BY lease_epoch DESC LIMIT $2) r
WHERE r.finished_at IS NULL OR r.error IS NOT NULL OR r.completion_rows = 0 OR TRIM(COALESCE(r.output, '')) = ''"""

QUARANTINE = """UPDATE tasks SET status = 'dead', dead_reason = 'loop', owner = NULL, lease_expires_at = NULL, updated_at = $2
WHERE id = $1"""

CLAIM_TAKE = """UPDATE tasks SET status = 'leased', owner = $2, lease_epoch = lease_epoch + 1,
    lease_expires_at = $3, attempts = attempts + 1, updated_at = $4
WHERE id = $1
RETURNING lease_epoch, kind, source, safety, payload, attempts, max_attempts"""

CLAIM_RUN = """INSERT INTO runs (task_id, worker, lease_epoch, claimed_at, lease_expires_at)
VALUES ($1, $2, $3, $4, $5)
RETURNING id"""

HEARTBEAT_TASK = """UPDATE tasks SET lease_expires_at = $4
WHERE id = $1 AND owner = $2 AND lease_epoch = $3"""

HEARTBEAT_RUN = """UPDATE runs SET heartbeat_at = $2, lease_expires_at = $3
WHERE id = $1"""

FINISH_SUCCESS_TASK = """UPDATE tasks SET status = 'completed', result = $4, owner = NULL, lease_expires_at = NULL, updated_at = $5
WHERE id = $1 AND owner = $2 AND lease_epoch = $3
RETURNING status"""

FINISH_FAILURE_TASK = """UPDATE tasks SET status = CASE WHEN attempts < max_attempts THEN 'queued' ELSE 'dead' END,
    result = NULL, owner = NULL, lease_expires_at = NULL, updated_at = $4
WHERE id = $1 AND owner = $2 AND lease_epoch = $3
RETURNING status"""

CURRENT_HOLDER = """SELECT owner, lease_epoch FROM tasks WHERE id = $1"""

FINISH_RUN = """UPDATE runs SET finished_at = $2, output = $3, error = $4, error_detail = $5, completion_rows = $6
WHERE id = $1 AND finished_at IS NULL"""

EFFECT_INSERT = """INSERT INTO effects (run_id, task_id, lease_epoch, kind, idempotency_key, created_at)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (run_id, idempotency_key) DO NOTHING
RETURNING id"""

SET_TRACE_ID = """UPDATE runs SET trace_id = $2
WHERE id = $1"""

EFFECT_EXISTING = """SELECT id FROM effects WHERE run_id = $1 AND idempotency_key = $2"""

LEASE_CURRENT = """SELECT COUNT(*) FROM tasks WHERE id = $1 AND owner = $2 AND lease_epoch = $3"""

# PostgreSQL's side of the statements that differ: lock one claimable task, skipping rows other
# workers have locked. `$1` now, `$2` kinds (text[], or NULL for any kind).
POSTGRES_CLAIM_CANDIDATE = """SELECT id, status, attempts, max_attempts FROM tasks
WHERE (status = 'queued' OR (status = 'leased' AND lease_expires_at <= $1))
  AND ($2::text[] IS NULL OR kind = ANY($2))
ORDER BY id
LIMIT 1
FOR UPDATE SKIP LOCKED"""

POSTGRES_BEGIN = "BEGIN"

# SQLite's side: after BEGIN IMMEDIATE (the write lock makes the claim exclusive), the same rows
# reached through the two partial indexes. `$2` is a JSON array of strings, or NULL.
SQLITE_CLAIM_CANDIDATE = """SELECT id, status, attempts, max_attempts FROM tasks
WHERE id IN (SELECT id FROM tasks WHERE status = 'queued'
             UNION ALL
             SELECT id FROM tasks WHERE status = 'leased' AND lease_expires_at <= $1)
  AND ($2 IS NULL OR kind IN (SELECT value FROM json_each($2)))
ORDER BY id
LIMIT 1"""

SQLITE_BEGIN = "BEGIN IMMEDIATE"

# Every statement under the name the Rust source gives it, for the drift check.
ALL: dict[str, str] = {
    "ENQUEUE": ENQUEUE,
    "postgres::CLAIM_CANDIDATE": POSTGRES_CLAIM_CANDIDATE,
    "sqlite::CLAIM_CANDIDATE": SQLITE_CLAIM_CANDIDATE,
    "CLAIM_EXHAUSTED": CLAIM_EXHAUSTED,
    "LOOP_STREAK": LOOP_STREAK,
    "QUARANTINE": QUARANTINE,
    "CLAIM_TAKE": CLAIM_TAKE,
    "CLAIM_RUN": CLAIM_RUN,
    "HEARTBEAT_TASK": HEARTBEAT_TASK,
    "HEARTBEAT_RUN": HEARTBEAT_RUN,
    "FINISH_SUCCESS_TASK": FINISH_SUCCESS_TASK,
    "FINISH_FAILURE_TASK": FINISH_FAILURE_TASK,
    "CURRENT_HOLDER": CURRENT_HOLDER,
    "FINISH_RUN": FINISH_RUN,
    "EFFECT_INSERT": EFFECT_INSERT,
    "SET_TRACE_ID": SET_TRACE_ID,
    "EFFECT_EXISTING": EFFECT_EXISTING,
    "LEASE_CURRENT": LEASE_CURRENT,
}
