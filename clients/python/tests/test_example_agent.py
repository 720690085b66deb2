"""The example agent (`examples/agent.py`) run as a newcomer runs it, as a subprocess, on both
databases: every run it leaves must read, by the dashboard's rules, as the state it claims to
demonstrate — the example is documentation that would otherwise rot silently.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import Database
from dashboard import dashboard_states
from lastword_runner import SystemClock

AGENT = Path(__file__).resolve().parents[1] / "examples" / "agent.py"


def test_the_example_agent_leaves_every_state_on_the_dashboard(db: Database) -> None:
    done = subprocess.run(
        [sys.executable, str(AGENT), "--dsn", db.dsn, "--lease", "0.4", "--pace", "0"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    now = SystemClock().now()
    runs = db.rows("SELECT * FROM runs ORDER BY task_id, lease_epoch")
    # The states as the dashboard's own SQL decides them, next to who ran and what was written.
    states = {i: iter(dashboard_states(db, i, now)) for i in range(1, 8)}
    seen = [(r["task_id"], r["worker"], next(states[r["task_id"]]), r["error"]) for r in runs]
    assert seen == [
        (1, "py-agent-1", "acted", None),
        (2, "py-agent-1", "no_action", None),
        (3, "py-agent-1", "skip", None),
        (4, "py-agent-1", "acted", None),
        (5, "py-agent-1", "lost_lease", None),
        (5, "py-agent-2", "acted", None),
        (6, "py-agent-1", "failed", "api_error"),
        (6, "py-agent-1", "acted", None),
        (7, "py-agent-1", "failed", "timeout"),
    ], done.stdout
    assert [db.task(i)["status"] for i in range(1, 8)] == ["completed"] * 6 + ["dead"]
    # The double execution the dashboard flags: one key under two epochs of task 5.
    assert [(e["task_id"], e["lease_epoch"]) for e in db.rows("SELECT * FROM effects ORDER BY id")] == [
        (1, 1), (5, 2), (5, 1)]
    assert "REFUSED: lost lease" in done.stdout
