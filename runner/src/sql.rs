//! Every statement the runner library sends, in one place, so `docs/contract.md` can quote them
//! verbatim for runners in other languages (a test checks the document still contains each one).
//! Both backends accept `$n` placeholders; where the dialects differ there is one constant per
//! backend in [`postgres`] and [`sqlite`]. All times are bound parameters, never the database's
//! clock.

/// Producer: a new task. `$1` kind, `$2` source, `$3` safety, `$4` payload (JSON),
/// `$5` max_attempts, `$6` now.
pub const ENQUEUE: &str =
    "INSERT INTO tasks (kind, source, safety, payload, max_attempts, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $6)
RETURNING id";

/// Claim, step 2a (the candidate's lease lapsed and its attempts are used up): the task is dead
/// instead of re-claimed; pick the next candidate. `$1` task id, `$2` now.
pub const CLAIM_EXHAUSTED: &str =
    "UPDATE tasks SET status = 'dead', owner = NULL, lease_expires_at = NULL, updated_at = $2
WHERE id = $1";

/// Claim, step 2a' (only with `Runner::quarantine_after`): of the candidate's newest `$2`
/// runs, how many failed — never finished (its lease lapsed: the candidate is being re-claimed
/// or was re-queued), finished with an error, lost its lease, or left a blank output. `$1` task
/// id. Equal to `$2` with at least `$2` attempts since the last re-queue: a re-claim loop.
pub const LOOP_STREAK: &str = "SELECT COUNT(*) FROM (SELECT finished_at, error, completion_rows, output FROM runs
WHERE task_id = $1 ORDER BY lease_epoch DESC LIMIT $2) r
WHERE r.finished_at IS NULL OR r.error IS NOT NULL OR r.completion_rows = 0 OR TRIM(COALESCE(r.output, '')) = ''";

/// Claim, step 2a'' (a loop): quarantine the candidate instead of claiming it. `$1` task id,
/// `$2` now.
pub const QUARANTINE: &str =
    "UPDATE tasks SET status = 'dead', dead_reason = 'loop', owner = NULL, lease_expires_at = NULL, updated_at = $2
WHERE id = $1";

/// Claim, step 2b: take the candidate. `$1` task id, `$2` worker, `$3` now + lease, `$4` now.
pub const CLAIM_TAKE: &str = "UPDATE tasks SET status = 'leased', owner = $2, lease_epoch = lease_epoch + 1,
    lease_expires_at = $3, attempts = attempts + 1, updated_at = $4
WHERE id = $1
RETURNING lease_epoch, kind, source, safety, payload, attempts, max_attempts";

/// Claim, step 3: the run of this attempt. `$1` task id, `$2` worker, `$3` the new epoch,
/// `$4` now, `$5` now + lease.
pub const CLAIM_RUN: &str = "INSERT INTO runs (task_id, worker, lease_epoch, claimed_at, lease_expires_at)
VALUES ($1, $2, $3, $4, $5)
RETURNING id";

/// Heartbeat, step 1: extend the lease if this worker still holds it. `$1` task id, `$2` worker,
/// `$3` epoch, `$4` now + lease. Zero rows: the lease is lost.
pub const HEARTBEAT_TASK: &str = "UPDATE tasks SET lease_expires_at = $4
WHERE id = $1 AND owner = $2 AND lease_epoch = $3";

/// Heartbeat, step 2 (only when step 1 matched): `$1` run id, `$2` now, `$3` now + lease.
pub const HEARTBEAT_RUN: &str = "UPDATE runs SET heartbeat_at = $2, lease_expires_at = $3
WHERE id = $1";

/// Finish, success: `$1` task id, `$2` worker, `$3` epoch, `$4` output, `$5` now.
pub const FINISH_SUCCESS_TASK: &str = "UPDATE tasks SET status = 'completed', result = $4, owner = NULL, lease_expires_at = NULL, updated_at = $5
WHERE id = $1 AND owner = $2 AND lease_epoch = $3
RETURNING status";

/// Finish, failure: re-queued while attempts remain, else dead. `$1` task id, `$2` worker,
/// `$3` epoch, `$4` now.
pub const FINISH_FAILURE_TASK: &str =
    "UPDATE tasks SET status = CASE WHEN attempts < max_attempts THEN 'queued' ELSE 'dead' END,
    result = NULL, owner = NULL, lease_expires_at = NULL, updated_at = $4
WHERE id = $1 AND owner = $2 AND lease_epoch = $3
RETURNING status";

/// Finish, zero rows matched: who holds the task now. `$1` task id.
pub const CURRENT_HOLDER: &str = "SELECT owner, lease_epoch FROM tasks WHERE id = $1";

/// Finish, in the same transaction, whatever the task update matched: `$1` run id, `$2` now,
/// `$3` output, `$4` error, `$5` error_detail, `$6` rows the task update matched (1 or 0).
pub const FINISH_RUN: &str =
    "UPDATE runs SET finished_at = $2, output = $3, error = $4, error_detail = $5, completion_rows = $6
WHERE id = $1 AND finished_at IS NULL";

/// Trace id (optional, at any time during or after the run): `$1` run id, `$2` the trace id.
pub const SET_TRACE_ID: &str = "UPDATE runs SET trace_id = $2
WHERE id = $1";

/// Effect, step 1: `$1` run id, `$2` task id, `$3` the run's epoch, `$4` effect kind,
/// `$5` idempotency key, `$6` now. No row returned: this run recorded that key already.
pub const EFFECT_INSERT: &str =
    "INSERT INTO effects (run_id, task_id, lease_epoch, kind, idempotency_key, created_at)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (run_id, idempotency_key) DO NOTHING
RETURNING id";

/// Effect, step 2 (only when step 1 returned nothing): `$1` run id, `$2` idempotency key.
pub const EFFECT_EXISTING: &str = "SELECT id FROM effects WHERE run_id = $1 AND idempotency_key = $2";

/// Effect, step 3: does this worker still hold the lease? `$1` task id, `$2` worker, `$3` epoch.
pub const LEASE_CURRENT: &str =
    "SELECT COUNT(*) FROM tasks WHERE id = $1 AND owner = $2 AND lease_epoch = $3";

/// PostgreSQL's side of the statements that differ.
pub mod postgres {
    /// Claim, step 1, after `BEGIN`: lock one claimable task, skipping rows other workers have
    /// locked. `$1` now, `$2` kinds (`text[]`, or NULL for any kind).
    pub const CLAIM_CANDIDATE: &str = "SELECT id, status, attempts, max_attempts FROM tasks
WHERE (status = 'queued' OR (status = 'leased' AND lease_expires_at <= $1))
  AND ($2::text[] IS NULL OR kind = ANY($2))
ORDER BY id
LIMIT 1
FOR UPDATE SKIP LOCKED";
}

/// SQLite's side of the statements that differ.
pub mod sqlite {
    /// Claim, step 1, after `BEGIN IMMEDIATE` (which takes the write lock up front, so two
    /// workers never pick the same candidate). `$1` now, `$2` kinds as a JSON array of strings,
    /// or NULL for any kind. The same rows as PostgreSQL's query, spelled so SQLite finds them
    /// through the two partial indexes instead of scanning every finished task.
    pub const CLAIM_CANDIDATE: &str = "SELECT id, status, attempts, max_attempts FROM tasks
WHERE id IN (SELECT id FROM tasks WHERE status = 'queued'
             UNION ALL
             SELECT id FROM tasks WHERE status = 'leased' AND lease_expires_at <= $1)
  AND ($2 IS NULL OR kind IN (SELECT value FROM json_each($2)))
ORDER BY id
LIMIT 1";
}

/// Every statement with its name, for the documentation check.
pub const ALL: &[(&str, &str)] = &[
    ("ENQUEUE", ENQUEUE),
    ("postgres::CLAIM_CANDIDATE", postgres::CLAIM_CANDIDATE),
    ("sqlite::CLAIM_CANDIDATE", sqlite::CLAIM_CANDIDATE),
    ("CLAIM_EXHAUSTED", CLAIM_EXHAUSTED),
    ("LOOP_STREAK", LOOP_STREAK),
    ("QUARANTINE", QUARANTINE),
    ("CLAIM_TAKE", CLAIM_TAKE),
    ("CLAIM_RUN", CLAIM_RUN),
    ("HEARTBEAT_TASK", HEARTBEAT_TASK),
    ("HEARTBEAT_RUN", HEARTBEAT_RUN),
    ("FINISH_SUCCESS_TASK", FINISH_SUCCESS_TASK),
    ("FINISH_FAILURE_TASK", FINISH_FAILURE_TASK),
    ("CURRENT_HOLDER", CURRENT_HOLDER),
    ("FINISH_RUN", FINISH_RUN),
    ("EFFECT_INSERT", EFFECT_INSERT),
    ("SET_TRACE_ID", SET_TRACE_ID),
    ("EFFECT_EXISTING", EFFECT_EXISTING),
    ("LEASE_CURRENT", LEASE_CURRENT),
];
