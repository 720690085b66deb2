"""Two pieces of the dashboard, reproduced for the Python tests so they can check what the
dashboard would conclude from the rows a Python worker wrote:

- `run_state`: a run's state from its columns, a line-by-line port of `core/src/state.rs`
  (`run_state`); the Rust driver of the same contract plan asks the real one.
- `operator_requeue`: the dashboard's re-queue (`store/src/actions.rs`, `REQUEUE` and the audit
  row in one transaction, guarded by the epoch the operator saw), as plain SQL.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from lastword_runner import Tokens, sqlite_time, trim_token

ERROR_CAUSES = {"timeout", "api_error", "context_overflow", "crash", "other"}


def run_state(run: dict[str, Any], now: datetime, tokens: Tokens = Tokens()) -> tuple[str, str | None]:
    if run["finished_at"] is None:
        return ("running", None) if run["lease_expires_at"] > now else ("silent", "silent")
    if run["completion_rows"] == 0:
        return "lost_lease", "lost_lease"
    if run["error"] is not None:
        return "failed", run["error"] if run["error"] in ERROR_CAUSES else "other"
    output = trim_token(run["output"] or "")
    if not output:
        return "empty_output", "empty_output"
    if output == trim_token(tokens.no_action):
        return "no_action", None
    if output == trim_token(tokens.skip):
        return "skip", None
    return "acted", None


REQUEUE = (
    "UPDATE tasks SET status = 'queued', owner = NULL, lease_expires_at = NULL, "
    "lease_epoch = lease_epoch + 1, attempts = 0, result = NULL, updated_at = $3 "
    "WHERE id = $1 AND lease_epoch = $2"
)
AUDIT = (
    "INSERT INTO operator_actions (task_id, run_id, action, actor, reason, reference, epoch_seen, "
    "epoch_after, status_seen, outcome, request_id, created_at) "
    "VALUES ($1, NULL, 'requeue', $2, $3, NULL, $4, $5, $6, 'applied', NULL, $7)"
)


def operator_requeue(db: Any, task_id: int, now: datetime, actor: str = "operator") -> int:
    """Re-queues `task_id` as the dashboard does, guarded by the epoch read under the lock;
    returns the new epoch. `db` is a `conftest.Database`."""
    if db.backend == "sqlite":
        conn = db.conn
        conn.execute("BEGIN IMMEDIATE")
        epoch, status = conn.execute("SELECT lease_epoch, status FROM tasks WHERE id = ?", (task_id,)).fetchone()
        stamp = sqlite_time(now)
        matched = conn.execute(REQUEUE, {"1": task_id, "2": epoch, "3": stamp}).rowcount
        conn.execute(
            AUDIT, {"1": task_id, "2": actor, "3": "test: re-queue", "4": epoch, "5": epoch + 1, "6": status, "7": stamp}
        )
        conn.execute("COMMIT")
    else:
        with db.conn.transaction():
            epoch, status = db.conn.execute(
                "SELECT lease_epoch, status FROM tasks WHERE id = %s FOR UPDATE", (task_id,)
            ).fetchone()
            matched = db.conn.execute(
                REQUEUE.replace("$1", "%(p1)s").replace("$2", "%(p2)s").replace("$3", "%(p3)s"),
                {"p1": task_id, "p2": epoch, "p3": now},
            ).rowcount
            sql = AUDIT
            for i in range(7, 0, -1):
                sql = sql.replace(f"${i}", f"%(p{i})s")
            db.conn.execute(
                sql,
                {"p1": task_id, "p2": actor, "p3": "test: re-queue", "p4": epoch, "p5": epoch + 1, "p6": status, "p7": now},
            )
    assert matched == 1, "the epoch-guarded re-queue matched the task"
    return int(epoch) + 1
