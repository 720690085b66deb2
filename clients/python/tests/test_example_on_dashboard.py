"""The example agent (`examples/agent.py`) as the dashboard shows it: the real `lastword` server
creates the schema, the example runs against it as a newcomer would, and `GET /api/v1/runs`
and `GET /api/v1/tasks/{id}` must report each run in the state the example set out to
demonstrate. test_example_agent.py checks the same runs with the dashboard's state SQL; this
one also catches what only the server decides (the API's cause, double-execution flags, the
timestamp text it parses on SQLite).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import server

AGENT = Path(__file__).resolve().parents[1] / "examples" / "agent.py"


def test_the_dashboard_shows_each_example_run_as_the_example_meant(blank_db: str) -> None:
    server.migrate(blank_db)  # the schema as `lastword serve` creates it, before any runner writes
    done = subprocess.run(
        [sys.executable, str(AGENT), "--dsn", blank_db, "--lease", "0.4", "--pace", "0"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr

    with server.serve(blank_db) as dashboard:
        runs = dashboard.runs()
        tasks = {i: dashboard.task(i) for i in range(1, 8)}

    seen = sorted((r["task_id"], r["lease_epoch"], r["worker"], r["kind"], r["state"], r["cause"]) for r in runs)
    reply, digest = "py_reply_to_mention", "py_nightly_digest"
    assert seen == [
        (1, 1, "py-agent-1", reply, "acted", None),           # replied, with an effect
        (2, 1, "py-agent-1", reply, "no_action", None),       # a mention that needed nothing
        (3, 1, "py-agent-1", digest, "skip", None),           # a tick with nothing to do
        (4, 1, "py-agent-1", reply, "acted", None),           # a long run kept alive by heartbeats
        (5, 1, "py-agent-1", reply, "lost_lease", "lost_lease"),  # stalled; its late answer refused
        (5, 2, "py-agent-2", reply, "acted", None),           # the peer that re-claimed it
        (6, 1, "py-agent-1", reply, "failed", "api_error"),   # failed, retried...
        (6, 2, "py-agent-1", reply, "acted", None),           # ...and succeeded
        (7, 1, "py-agent-1", digest, "failed", "timeout"),    # a timeout with no attempts left
    ], done.stdout
    # The lost lease's output is what was discarded, shown as written.
    (late,) = [r for r in runs if r["state"] == "lost_lease"]
    assert late["completion_rows"] == 0 and late["output"], late

    assert [tasks[i]["status"] for i in range(1, 8)] == ["completed"] * 6 + ["dead"]
    # Task 5 (unsafe) ran its effect under both epochs: a double execution awaiting compensation.
    # Task 1 (unsafe too) ran once.
    assert sorted(e["lease_epoch"] for e in tasks[5]["effects"]) == [1, 2]
    assert (tasks[5]["double_execution"], tasks[5]["needs_compensation"]) == (True, True)
    assert not any(tasks[i]["double_execution"] for i in (1, 2, 3, 4, 6, 7))
    assert all(t["owner"] is None for t in tasks.values())
