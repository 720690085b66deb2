"""The worked example of docs/adopting.md, run for real: a legacy job queue
(docs/adopting/legacy-schema.sql) with a history of every kind, `lastword migrate` on the same
database, the backfill docs/adopting/legacy-to-contract.sql, and then

- the real dashboard (`lastword serve`, LASTWORD_BIN) must show every legacy job in the state
  its history means — acted, no action, skip, failed with the right cause, a live lock as
  running, a lapsed one as silent, a late unfenced finish as a lost lease and a double
  execution — through `GET /api/v1/runs` and `GET /api/v1/tasks/{id}`;
- the Python contract runner must carry on from the copied rows: take over the lapsed lock
  under the next epoch, finish it, and enqueue without colliding with a copied id.

PostgreSQL only: the guide is for a PostgreSQL fleet (the SQL uses its dialect).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import psycopg
import pytest

import server
from lastword_runner import Runner

DOCS = Path(__file__).resolve().parents[3] / "docs" / "adopting"
LEGACY_SCHEMA = DOCS / "legacy-schema.sql"
BACKFILL = DOCS / "legacy-to-contract.sql"
RENAME_TASKS = DOCS / "rename-legacy-tasks.sql"
GUIDE = DOCS.parent / "adopting.md"

NOW = datetime.now(timezone.utc)


def ago(minutes: float) -> datetime:
    return NOW - timedelta(minutes=minutes)


# id, job_type, state, locked_by, locked_until, attempts, last_error, result, created_at
JOBS: list[tuple[Any, ...]] = [
    (1, "reply_to_mention", "done", None, None, 1, None, "replied to @ann", ago(120)),
    (2, "reply_to_mention", "done", None, None, 1, None, None, ago(115)),        # nothing to reply
    (3, "nightly_digest", "done", None, None, 1, None, "  ", ago(110)),          # nothing new
    (4, "reply_to_mention", "error", None, None, 3, "prompt is too long: 210000 tokens > 200000 maximum", None, ago(100)),
    (5, "send_invoice", "done", None, None, 2, None, "sent invoice INV-7 to ann@example.com", ago(55)),
    (6, "reply_to_mention", "done", None, None, 2, None, "replied to @chidi", ago(35)),
    (7, "reply_to_mention", "running", "worker-b", NOW + timedelta(minutes=4), 1, None, None, ago(2)),
    (8, "reply_to_mention", "running", "worker-c", ago(3), 1, None, None, ago(9)),
    (9, "nightly_digest", "pending", None, None, 0, None, None, ago(1)),
    (10, "reply_to_mention", "pending", None, None, 1, "Traceback (most recent call last): KeyError: 'user'", None, ago(6)),
    (11, "nightly_digest", "done", None, None, 1, None, "digest sent to 12 subscribers", ago(90 * 24 * 60)),
]
# job_id, attempt, worker, started_at, finished_at, outcome, result, error
ATTEMPTS: list[tuple[Any, ...]] = [
    (1, 1, "worker-a", ago(119), ago(118), "done", "replied to @ann", None),
    (2, 1, "worker-a", ago(114), ago(113), "done", None, None),
    (3, 1, "worker-b", ago(109), ago(108), "done", "  ", None),
    (4, 1, "worker-a", ago(99), ago(98), "error", None, "HTTP 502 from api.example.com"),
    (4, 2, "worker-b", ago(90), ago(88), "error", None, "TimeoutError: model call exceeded 120s"),
    (4, 3, "worker-a", ago(80), ago(79), "error", None, "prompt is too long: 210000 tokens > 200000 maximum"),
    # A slow worker: its lock lapsed, worker-b took the job and sent the invoice, and then the
    # slow one finished too (no fencing) and sent it again.
    (5, 1, "worker-a", ago(50), ago(40), "done", "sent invoice INV-7 to ann@example.com", None),
    (5, 2, "worker-b", ago(44), ago(43), "done", "sent invoice INV-7 to ann@example.com", None),
    (6, 1, "worker-c", ago(30), None, None, None, None),                        # died without a word
    (6, 2, "worker-a", ago(20), ago(19), "done", "replied to @chidi", None),
    (7, 1, "worker-b", ago(1), None, None, None, None),                         # working now
    (8, 1, "worker-c", ago(8), None, None, None, None),                         # its lock lapsed 3 min ago
    (10, 1, "worker-a", ago(5), ago(5), "error", None, "Traceback (most recent call last): KeyError: 'user'"),
    # Job 11 is older than job_attempts: no rows.
]


def create_legacy_history(conn: psycopg.Connection[Any]) -> None:
    conn.execute(LEGACY_SCHEMA.read_text().encode())
    for job in JOBS:
        *columns, created_at = job
        # updated_at: the last attempt's start or finish, as the legacy runner leaves it.
        times = [t for a in ATTEMPTS if a[0] == job[0] for t in (a[3], a[4]) if t is not None]
        updated_at = max(times) if times else created_at
        conn.execute(
            "INSERT INTO jobs (id, job_type, state, locked_by, locked_until, attempts, last_error, result, "
            "created_at, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (*columns, created_at, updated_at),
        )
    for attempt in ATTEMPTS:
        conn.execute(
            "INSERT INTO job_attempts (job_id, attempt, worker, started_at, finished_at, outcome, result, error) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            attempt,
        )


def runs_by_task(dashboard: server.Dashboard) -> dict[int, list[tuple[str, str, str | None]]]:
    """Each task's runs as the dashboard lists them: (worker, state, cause), by epoch."""
    by_task: dict[int, list[tuple[int, str, str, str | None]]] = {}
    for run in dashboard.runs():
        by_task.setdefault(run["task_id"], []).append((run["lease_epoch"], run["worker"], run["state"], run["cause"]))
    return {task: [r[1:] for r in sorted(runs)] for task, runs in by_task.items()}


def test_a_legacy_queue_brought_to_the_contract_shows_its_history_and_keeps_working(blank_postgres_db: str) -> None:
    url = blank_postgres_db
    with psycopg.connect(url, autocommit=True) as conn:
        create_legacy_history(conn)
        server.migrate(url)  # lastword's own tables, next to the legacy ones
        conn.execute(BACKFILL.read_text().encode())

        # Run once: a second run is refused before it changes anything.
        with pytest.raises(psycopg.Error, match="tasks is not empty"):
            conn.execute(BACKFILL.read_text().encode())
        conn.execute("ROLLBACK")  # the file's own BEGIN is still open after its error, as in psql

        with server.serve(url) as dashboard:
            assert runs_by_task(dashboard) == {
                1: [("worker-a", "acted", None)],
                2: [("worker-a", "no_action", None)],           # a blank legacy result, not an empty output
                3: [("worker-b", "skip", None)],                # blank on a tick: skip
                4: [("worker-a", "failed", "api_error"),
                    ("worker-b", "failed", "timeout"),
                    ("worker-a", "failed", "context_overflow")],
                5: [("worker-a", "lost_lease", "lost_lease"),   # finished after worker-b took over
                    ("worker-b", "acted", None)],
                6: [("worker-c", "silent", "silent"),           # never came back
                    ("worker-a", "acted", None)],
                7: [("worker-b", "running", None)],
                8: [("worker-c", "silent", "silent")],
                10: [("worker-a", "failed", "crash")],
                11: [("legacy-runner", "acted", None)],         # from before job_attempts
            }
            tasks = {i: dashboard.task(i) for i in range(1, 12)}
            assert {i: t["status"] for i, t in tasks.items()} == {
                1: "completed", 2: "completed", 3: "completed", 4: "dead", 5: "completed", 6: "completed",
                7: "leased", 8: "leased", 9: "queued", 10: "queued", 11: "completed",
            }
            assert [tasks[i]["result"] for i in (1, 2, 3)] == ["replied to @ann", "no action needed", "skip"]
            # The unsafe invoice sent twice: flagged, and waiting for an operator to compensate.
            assert (tasks[5]["double_execution"], tasks[5]["needs_compensation"]) == (True, True)
            assert not any(tasks[i]["double_execution"] for i in (1, 2, 3, 4, 6, 7, 8, 9, 10, 11))
            assert (tasks[7]["owner"], tasks[7]["lease_epoch"]) == ("worker-b", 1)
            assert tasks[4]["runs"][0]["error_detail"] == "HTTP 502 from api.example.com"
            assert tasks[9]["runs"] == [] and tasks[9]["lease_epoch"] == 0

            # The contract runner takes over where the legacy one stopped: the live lock is
            # left alone, the lapsed one is re-claimed under the next epoch.
            runner = Runner(url, worker="py-adopter", lease=timedelta(seconds=30))
            try:
                run = runner.claim()
                assert run is not None
                assert (run.task_id, run.epoch, run.attempts) == (8, 2, 2)
                with run:
                    outcome = run.acted("replied to @bo after the cut-over")
                assert outcome.accepted
                new_task = runner.enqueue("reply_to_mention", {"from": "@dara"})
                assert new_task == 12, "the identity sequence was moved past the copied ids"
            finally:
                runner.close()

            expected_runs = [("worker-c", "silent", "silent"), ("py-adopter", "acted", None)]
            assert dashboard.settle(lambda: runs_by_task(dashboard)[8], expected_runs) == expected_runs
            task8_expected = ("completed", 2, "replied to @bo after the cut-over")

            def task8() -> tuple[str, int, str]:
                task = dashboard.task(8)
                return task["status"], task["lease_epoch"], task["result"]

            assert dashboard.settle(task8, task8_expected) == task8_expected

        # Old readers see the new rows in the legacy vocabulary; old writers fail loudly.
        view = conn.execute("SELECT id, state, locked_by, last_error FROM jobs WHERE id IN (4, 7, 8) ORDER BY id")
        assert view.fetchall() == [
            (4, "error", None, "prompt is too long: 210000 tokens > 200000 maximum"),
            (7, "running", "worker-b", None),
            (8, "done", None, None),
        ]
        with pytest.raises(psycopg.Error, match="cannot update view"):
            conn.execute("UPDATE jobs SET state = 'done' WHERE id = 7")
        # The legacy rows are kept, renamed, until the team drops them.
        assert conn.execute("SELECT count(*) FROM jobs_before_lastword").fetchone() == (11,)


def test_a_legacy_table_named_tasks_must_move_aside_before_lastword_migrates(blank_postgres_db: str) -> None:
    with psycopg.connect(blank_postgres_db, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE tasks (id BIGSERIAL PRIMARY KEY, state TEXT NOT NULL, owner TEXT);"
            "CREATE INDEX tasks_owner_idx ON tasks (owner);"  # a name lastword's 0001 uses too
            "INSERT INTO tasks (state) VALUES ('done'), ('pending');"
        )
        refused = server.try_migrate(blank_postgres_db)
        assert refused.returncode != 0 and 'relation "tasks" already exists' in refused.stderr, refused.stderr

        conn.execute(RENAME_TASKS.read_text().encode())
        server.migrate(blank_postgres_db)
        assert conn.execute("SELECT count(*) FROM legacy_tasks").fetchone() == (2,)
        assert conn.execute("SELECT count(*) FROM tasks").fetchone() == (0,)  # lastword's, empty
        indexes = conn.execute(
            "SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'legacy_tasks'::regclass ORDER BY 1"
        ).fetchall()
        assert indexes == [("legacy_tasks_owner_idx",), ("legacy_tasks_pkey",)]


def test_the_guide_quotes_the_tested_sql_verbatim() -> None:
    """Every SQL block the guide presents as taken from legacy-to-contract.sql is in that file."""
    blocks = re.findall(r"```sql\n-- from legacy-to-contract\.sql\n(.*?)```", GUIDE.read_text(), re.S)
    assert len(blocks) >= 2
    backfill = BACKFILL.read_text()
    for block in blocks:
        assert block in backfill, block
