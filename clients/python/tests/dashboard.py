"""Pieces of the dashboard for the Python tests, so they check what the dashboard concludes from
the rows a Python worker wrote:

- `dashboard_states`: the dashboard's own SQL twin of `run_state` (`STATE_SQL`, read from
  `store/src/postgres.rs` and `store/src/sqlite.rs` at test time, not copied), run on the test
  database exactly as the store's task page runs it. On SQLite it compares the runner's
  timestamp text with the dashboard's, so a format the dashboard misreads fails here.
- `run_state`: a line-by-line port of `core/src/state.rs`, for quick checks of one row.
- `operator_requeue`: the dashboard's re-queue (`store/src/actions.rs`, `REQUEUE` and the audit
  row in one transaction, guarded by the epoch the operator saw), as plain SQL.
"""

from __future__ import annotations

import re
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from lastword_runner import Tokens, sqlite_time, trim_token
from lastword_runner._backends import _psycopg_sql

REPO = Path(__file__).resolve().parents[3]


def rust_string(source: str, name: str) -> str:
    """The value of `pub const NAME: &str = "…";` in Rust source: escapes and backslash-newline
    continuations (which drop the newline and the next line's indentation) resolved."""
    match = re.search(rf'pub const {name}: &str =\s*"((?:[^"\\]|\\.|\\\n)*)"', source, re.S)
    assert match, f"no {name} in the Rust source"
    raw, out, i = match.group(1), [], 0
    escapes = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "0": "\0"}
    while i < len(raw):
        if raw[i] == "\\":
            nxt = raw[i + 1]
            if nxt == "\n":
                i += 2
                while i < len(raw) and raw[i] in " \t\n":
                    i += 1
                continue
            out.append(escapes[nxt])
            i += 2
        else:
            out.append(raw[i])
            i += 1
    return "".join(out)


@cache
def state_sql(backend: str) -> str:
    return rust_string((REPO / "store" / "src" / f"{backend}.rs").read_text(), "STATE_SQL")


def dashboard_states(db: Any, task_id: int, now: datetime, tokens: Tokens = Tokens()) -> list[str]:
    """The state of each run of `task_id` (by epoch), decided by the dashboard's SQL as of `now`."""
    sql = f"SELECT {state_sql(db.backend)} AS state FROM runs r WHERE r.task_id = $4 ORDER BY r.lease_epoch, r.id"
    params = [now, trim_token(tokens.no_action), trim_token(tokens.skip), task_id]
    if db.backend == "sqlite":
        rows = db.conn.execute(sql, {"1": sqlite_time(now), "2": params[1], "3": params[2], "4": task_id}).fetchall()
    else:
        rows = db.conn.execute(_psycopg_sql(sql), {f"p{i}": v for i, v in enumerate(params, start=1)}).fetchall()
    return [row[0] for row in rows]

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
