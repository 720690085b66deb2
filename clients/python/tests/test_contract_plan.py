"""The driver-neutral contract plan (`contract/cases.json`) run against this library, every case
on SQLite and on PostgreSQL. The Rust runner runs the same file (`runner/tests/contract_plan.rs`);
when the two libraries disagree on a case, one of the two suites fails.

The run states are decided by the dashboard's own SQL (`STATE_SQL`, read from the store's
source) over the rows this library wrote, as the Rust driver's are by the store itself. The
operator's re-queue is the dashboard's statement as SQL (the Rust driver calls the real action).
Both live in `dashboard.py`.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from conftest import BACKENDS, REPO, Database
from dashboard import dashboard_states, operator_requeue, run_state
from lastword_runner import AlreadyFinished, BlankMessage, LostLease, ManualClock, Run, Runner, Tokens

PLAN_PATH = REPO / "contract" / "cases.json"
PLAN: dict[str, Any] = json.loads(PLAN_PATH.read_text())
TIME_KEYS = {
    "claimed_at", "expires_at", "lease_expires_at", "heartbeat_at", "finished_at", "created_at", "updated_at",
    "extended_until",
}


def micros(seconds: float) -> int:
    return round(seconds * 1_000_000)


class Driver:
    def __init__(self, db: Database, case: dict[str, Any]) -> None:
        self.db = db
        self.t0 = datetime.fromisoformat(PLAN["t0"])
        self.clock = ManualClock(self.t0)
        self.lease = timedelta(microseconds=micros(PLAN["lease_seconds"]))
        self.tokens = Tokens(**case["tokens"]) if "tokens" in case else Tokens()
        self.runners: dict[str, Runner] = {}
        self.tasks: dict[str, int] = {}
        self.leases: dict[str, Run] = {}
        self.effects: dict[str, int] = {}

    def runner(self, worker: str) -> Runner:
        if worker not in self.runners:
            self.runners[worker] = Runner(self.db.dsn, worker=worker, lease=self.lease, tokens=self.tokens, clock=self.clock)
        return self.runners[worker]

    def close(self) -> None:
        for runner in self.runners.values():
            runner.close()

    def offset(self, t: datetime | None) -> int | None:
        return None if t is None else (t - self.t0) // timedelta(microseconds=1)

    def check(self, ctx: str, expected: dict[str, Any], observed: dict[str, Any]) -> None:
        for key, want in expected.items():
            assert key in observed, f"{ctx}: observed {observed}, which has no {key!r}"
            if key == "task" and isinstance(want, str):
                want = self.tasks[want]
            elif key == "lease" and isinstance(want, str):
                want = self.leases[want].run_id
            elif key in TIME_KEYS and isinstance(want, (int, float)):
                want = micros(want)
            assert observed[key] == want, f"{ctx}: {key} (observed {observed})"

    def step(self, ctx: str, step: dict[str, Any]) -> None:
        expect: Any = step.get("expect")
        do = step["do"]
        if do == "enqueue":
            self.tasks[step["as"]] = self.runner("producer").enqueue(
                step["kind"],
                step.get("payload", {}),
                source=step.get("source", "notification"),
                safety=step.get("safety", "idempotent"),
                max_attempts=step.get("max_attempts", 3),
            )
        elif do == "advance":
            self.clock.advance(timedelta(microseconds=micros(step["seconds"])))
        elif do == "claim":
            run = self.runner(step["worker"]).claim(step.get("kinds"))
            if run is None:
                assert "expect" not in step or expect is None, f"{ctx}: expected a claim, got nothing"
                return
            assert not ("expect" in step and expect is None), f"{ctx}: expected nothing to claim, got {run}"
            observed = {
                "task": run.task_id, "epoch": run.epoch, "attempts": run.attempts, "max_attempts": run.max_attempts,
                "kind": run.kind, "source": run.source.value, "safety": run.safety.value, "payload": run.payload,
                "claimed_at": self.offset(run.claimed_at), "expires_at": self.offset(run.expires_at),
            }
            if expect is not None:
                self.check(ctx, expect, observed)
            if "as" in step:
                self.leases[step["as"]] = run
        elif do == "heartbeat":
            try:
                observed = {"extended_until": self.offset(self.leases[step["lease"]].heartbeat())}
            except LostLease as lost:
                observed = {"lost": {"holder": lost.holder, "epoch": lost.epoch}}
            self.check(ctx, expect, observed)
        elif do == "finish":
            run = self.leases[step["lease"]]
            try:
                outcome = step["outcome"]
                if outcome == "acted":
                    finish = run.acted(step["message"])
                elif outcome == "no_action":
                    finish = run.no_action()
                elif outcome == "skip":
                    finish = run.skip()
                elif outcome == "failed":
                    finish = run.fail(step["cause"], step["detail"])
                else:
                    raise AssertionError(f"{ctx}: unknown outcome {outcome!r}")
                if finish.accepted:
                    assert finish.status is not None
                    observed = {"accepted": finish.status.value}
                else:
                    observed = {"lost": {"holder": finish.holder, "epoch": finish.epoch}}
            except BlankMessage:
                observed = {"error": "blank_message"}
            except AlreadyFinished:
                observed = {"error": "already_finished"}
            self.check(ctx, expect, observed)
        elif do == "effect":
            recorded = self.leases[step["lease"]].effect(step["kind"], step["key"])
            if "same_as" in step:
                assert recorded.id == self.effects[step["same_as"]], f"{ctx}: the same effect row"
            else:
                assert recorded.id not in self.effects.values(), f"{ctx}: a new effect row"
            if expect is not None:
                self.check(ctx, expect, {"lease_current": recorded.lease_current})
            if "as" in step:
                self.effects[step["as"]] = recorded.id
        elif do == "trace":
            try:
                self.leases[step["lease"]].set_trace_id(step["trace_id"])
                observed = {"written": True}
            except ValueError:
                observed = {"error": "bad_trace_id"}
            self.check(ctx, expect, observed)
        elif do == "requeue":
            # The emulation always fences: `fence` is the dashboard's consent checkbox, not SQL.
            operator_requeue(self.db, self.tasks[step["task"]], self.clock.now())
        elif do == "check_task":
            t = self.db.task(self.tasks[step["task"]])
            observed = {k: t[k] for k in (
                "kind", "source", "safety", "status", "payload", "result", "owner", "lease_epoch", "attempts",
                "max_attempts")}
            observed.update({k: self.offset(t[k]) for k in ("lease_expires_at", "created_at", "updated_at")})
            self.check(ctx, expect, observed)
        elif do == "check_runs":
            runs = self.db.runs(self.tasks[step["task"]])
            assert len(runs) == len(expect), f"{ctx}: number of runs ({runs})"
            # The dashboard's SQL decides the state; the Rust port must agree with it.
            states = dashboard_states(self.db, self.tasks[step["task"]], self.clock.now(), self.tokens)
            assert states == [run_state(r, self.clock.now(), self.tokens)[0] for r in runs], ctx
            for i, (r, want, state) in enumerate(zip(runs, expect, states)):
                observed = {k: r[k] for k in (
                    "worker", "lease_epoch", "output", "error", "error_detail", "completion_rows", "trace_id")}
                observed["lease"] = r["id"]
                observed.update({k: self.offset(r[k]) for k in ("claimed_at", "lease_expires_at", "heartbeat_at", "finished_at")})
                observed["state"] = state
                self.check(f"{ctx}, run {i}", want, observed)
        elif do == "check_effects":
            effects = self.db.effects(self.tasks[step["task"]])
            assert len(effects) == len(expect), f"{ctx}: number of effects ({effects})"
            for i, (e, want) in enumerate(zip(effects, expect)):
                observed = {k: e[k] for k in ("lease_epoch", "kind", "idempotency_key")}
                observed["lease"] = e["run_id"]
                observed["created_at"] = self.offset(e["created_at"])
                self.check(f"{ctx}, effect {i}", want, observed)
        else:
            raise AssertionError(f"{ctx}: unknown step {do!r}")


CASES = PLAN["cases"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_contract_case(case: dict[str, Any], backend: str, request: pytest.FixtureRequest) -> None:
    db: Database = request.getfixturevalue(f"{backend}_db")
    driver = Driver(db, case)
    try:
        for i, step in enumerate(case["steps"]):
            driver.step(f"{backend}: {case['name']}, step {i} {json.dumps(step)}", step)
    finally:
        driver.close()


def test_the_plan_covers_what_the_issue_asks_for() -> None:
    names = [c["name"] for c in CASES]
    assert len(set(names)) == len(names), "case names are unique"
    steps = {s["do"] for c in CASES for s in c["steps"]}
    assert {"enqueue", "advance", "claim", "heartbeat", "finish", "effect", "trace", "requeue", "check_runs", "check_effects"} <= steps
    assert Path(PLAN_PATH).is_file()
