"""An example agent loop on lastword_runner, for a newcomer to run against the demo database and
then find on the dashboard: worker `py-agent-1` (and `py-agent-2`, which re-claims a lapsed
lease) on the Workers and Timeline pages, kinds `py_reply_to_mention` and `py_nightly_digest`.

    scripts/run                                  # terminal 1: the dashboard and its demo fleet
    python3 clients/python/examples/agent.py     # terminal 2: this agent, on ./lastword.db

Each task it enqueues ends a different way the contract distinguishes: an action (with its side
effect in the outbox), `no action needed`, `skip`, a failure that is retried, a timeout, a long
run kept alive by heartbeats, and a lost lease — a slow run whose late answer is refused because
another worker re-claimed the task. `--dsn postgresql://…` runs it on PostgreSQL instead.

The demo's own workers claim tasks of any kind, so now and then one of them takes a task this
agent just enqueued; the agent says so and moves on.
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import sys
import time
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

try:
    import lastword_runner as lw
except ImportError:  # not installed: use the package from this checkout (SQLite needs nothing else)
    sys.path.insert(0, str(REPO / "clients" / "python" / "src"))
    import lastword_runner as lw

REPLY = "py_reply_to_mention"
DIGEST = "py_nightly_digest"
KINDS = (REPLY, DIGEST)
PEOPLE = ["@ann", "@bo", "@chidi", "@dara"]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--dsn",
        default=os.environ.get("DATABASE_URL") or f"sqlite:{REPO / 'lastword.db'}",
        help="the dashboard's database (default: $DATABASE_URL, else the demo's ./lastword.db)",
    )
    parser.add_argument("--worker", default="py-agent-1", help="this agent's name (the lease owner)")
    parser.add_argument("--peer", default="py-agent-2", help="the second worker, which re-claims a lapsed lease")
    parser.add_argument("--lease", type=float, default=6.0, help="lease length in seconds")
    parser.add_argument("--rounds", type=int, default=1, help="how many times to go through the scenarios")
    parser.add_argument("--pace", type=float, default=1.0, help="seconds of pretend work per step (0: none)")
    return parser.parse_args()


def ensure_schema(dsn: str) -> None:
    """The dashboard creates the tables; say so plainly instead of failing on a missing table."""
    target = lw.parse_dsn(dsn)
    if target.backend != "sqlite":
        return
    path = Path(target.location)
    ok = path.exists() and sqlite3.connect(path).execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tasks'"
    ).fetchone()
    if not ok:
        sys.exit(f"{path} has no lastword tables yet: start the dashboard first (scripts/run), which creates them.")


class Agent:
    def __init__(self, args: argparse.Namespace) -> None:
        lease = timedelta(seconds=args.lease)
        self.me = lw.Runner(args.dsn, worker=args.worker, lease=lease)
        # A second worker of the same fleet, to re-claim a lease the first one let lapse.
        self.peer = lw.Runner(args.dsn, worker=args.peer, lease=lease)
        self.lease = args.lease
        self.pace = args.pace
        self.n = 0

    def work(self, seconds: float) -> None:
        time.sleep(seconds * self.pace)

    def take(self, kind: str, source: str, safety: str = "idempotent", max_attempts: int = 3) -> lw.Run | None:
        """Enqueues one task and claims it at once; None when a demo worker was quicker."""
        self.n += 1
        person = random.choice(PEOPLE)
        payload = {"n": self.n, "from": person, "text": f"{person}: can you look at #{self.n}?"}
        task_id = self.me.enqueue(kind, payload, source=source, safety=safety, max_attempts=max_attempts)
        run = self.me.claim(KINDS, trace_id=f"example-{task_id}")
        if run is None:
            print(f"  task {task_id}: a demo worker claimed it first (the demo fleet takes any kind)")
        return run

    def report(self, run: lw.Run, what: str) -> None:
        finish = run.finished
        if finish is None:
            verdict = "unfinished"
        elif finish.accepted:
            verdict = f"accepted, task {finish.status.value if finish.status else '?'}"
        else:
            verdict = f"REFUSED: lost lease, now held by {finish.holder or 'nobody'} (epoch {finish.epoch})"
        print(f"  task {run.task_id} epoch {run.epoch} [{run.kind}] {what}: {verdict}")

    def acted_with_effect(self) -> None:
        run = self.take(REPLY, "notification", safety="unsafe")
        if run is None:
            return
        with run:
            self.work(1)
            # Record the side effect before finishing, under this run's fencing token.
            run.effect("post_reply", f"task-{run.task_id}-post_reply")
            run.acted(f"replied to {run.payload['from']} in #{run.payload['n']} (from Python)")
        self.report(run, "acted")

    def no_action(self) -> None:
        run = self.take(REPLY, "notification")
        if run is None:
            return
        with run:
            self.work(0.5)
            run.no_action()
        self.report(run, "no action needed")

    def skip(self) -> None:
        run = self.take(DIGEST, "tick")
        if run is None:
            return
        with run:
            self.work(0.3)
            run.skip()
        self.report(run, "skip")

    def api_error_then_retry(self) -> None:
        run = self.take(REPLY, "notification", max_attempts=2)
        if run is None:
            return
        with run:
            self.work(0.5)
            raise lw.RunFailed(lw.ErrorCause.API_ERROR, "model API returned 529 Overloaded")
        self.report(run, "failed (api_error), back to the queue")
        retry = self.me.claim(KINDS)
        if retry is None:
            print("  the retry was claimed by a demo worker")
            return
        with retry:
            self.work(0.5)
            retry.acted(f"replied to {retry.payload['from']} on the second attempt")
        self.report(retry, f"retried (attempt {retry.attempts})")

    def timeout(self) -> None:
        run = self.take(DIGEST, "tick", max_attempts=1)  # no retry: it ends `dead`
        if run is None:
            return
        try:
            with run:
                self.work(0.5)
                raise TimeoutError("no model response within 20s")
        except TimeoutError:
            pass  # recorded as `timeout` by the with block, which re-raises it
        self.report(run, "timed out")

    def long_run_with_heartbeats(self) -> None:
        run = self.take(REPLY, "notification")
        if run is None:
            return
        with run:
            for _ in range(3):
                # Real work would take longer than the lease; heartbeat every half lease.
                self.work(self.lease / 2)
                run.heartbeat()
            run.acted(f"summarised a long thread for {run.payload['from']}")
        self.report(run, "acted after heartbeats")

    def lost_lease(self) -> None:
        run = self.take(REPLY, "notification", safety="unsafe")
        if run is None:
            return
        with run:
            # Stalls past its lease without a heartbeat (the "30 s lease, 45 s run" case).
            time.sleep(self.lease * 1.2)
            stolen = self.peer.claim(KINDS)
            if stolen is not None:
                with stolen:
                    stolen.effect("post_reply", f"task-{stolen.task_id}-post_reply")
                    stolen.acted(f"replied to {stolen.payload['from']} (after a re-claim)")
                self.report(stolen, f"re-claimed by {self.peer.worker}")
            run.effect("post_reply", f"task-{run.task_id}-post_reply")  # it ran anyway: recorded
            run.acted(f"replied to {run.payload['from']} (too late)")
        self.report(run, "acted late")

    def close(self) -> None:
        self.me.close()
        self.peer.close()


def main() -> None:
    args = parse_args()
    ensure_schema(args.dsn)
    agent = Agent(args)
    print(f"{args.worker} on {args.dsn}")
    scenarios = [
        agent.acted_with_effect,
        agent.no_action,
        agent.skip,
        agent.long_run_with_heartbeats,
        agent.lost_lease,
        agent.api_error_then_retry,
        agent.timeout,
    ]
    try:
        for _ in range(args.rounds):
            for scenario in scenarios:
                scenario()
    finally:
        agent.close()
    print(
        "done. On the dashboard (http://127.0.0.1:3000): /workers lists "
        f"{args.worker}; /timeline?by=kind shows {REPLY} and {DIGEST}; /failures shows the timeout, "
        "the api_error and the lost lease."
    )


if __name__ == "__main__":
    main()
