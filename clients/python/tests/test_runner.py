"""The Python runner against real databases (both backends, no mocks): the rows each move
writes, byte for byte where the dashboard compares text, and the Python-only API — the `with`
block's rules for exceptions and forgotten terminal calls, argument checks, the async runner.
The contract's shared cases live in `contract/cases.json` (test_contract_plan.py).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from datetime import datetime, timedelta, timezone

import psycopg
import pytest

from conftest import Database
from dashboard import dashboard_states, operator_requeue, run_state
from lastword_runner import (
    AlreadyFinished,
    AsyncRunner,
    BlankMessage,
    ErrorCause,
    LostLease,
    ManualClock,
    Runner,
    RunFailed,
    TaskStatus,
    Tokens,
    enqueue,
    is_transient,
)

LEASE = timedelta(seconds=30)
# Sub-second on purpose: SQLite compares timestamps as text.
T0 = datetime(2027, 1, 15, 8, 0, 0, 123456, tzinfo=timezone.utc)


def secs(s: float) -> timedelta:
    return timedelta(seconds=s)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


def runner(db: Database, clock: ManualClock, worker: str = "w1", **kw: object) -> Runner:
    return Runner(db.dsn, worker=worker, lease=LEASE, clock=clock, **kw)  # type: ignore[arg-type]


def test_enqueue_writes_a_queued_task_as_the_rust_runner_does(db: Database, clock: ManualClock) -> None:
    w1 = runner(db, clock)
    task_id = w1.enqueue("send_digest", {"text": "@bot please look", "n": 7, "é": [1.5, None]}, source="tick",
                         safety="unsafe", max_attempts=5)
    t = db.task(task_id)
    assert (t["kind"], t["source"], t["safety"], t["status"]) == ("send_digest", "tick", "unsafe", "queued")
    assert t["payload"] == {"text": "@bot please look", "n": 7, "é": [1.5, None]}
    assert (t["lease_epoch"], t["attempts"], t["max_attempts"]) == (0, 0, 5)
    assert (t["owner"], t["lease_expires_at"], t["result"]) == (None, None, None)
    assert (t["created_at"], t["updated_at"]) == (T0, T0)
    if db.backend == "sqlite":
        # serde_json's text: keys sorted, no spaces, non-ASCII as is; sqlx's time text.
        payload, created = db.raw("SELECT payload, created_at FROM tasks WHERE id = ?", task_id)[0]
        assert payload == '{"n":7,"text":"@bot please look","é":[1.5,null]}'
        assert created == "2027-01-15T08:00:00.123456+00:00"
    # The module-level helper is the same insert.
    other = enqueue(db.dsn, "reply_to_mention", clock=clock)
    assert db.task(other)["payload"] == {} and other == task_id + 1


@pytest.mark.parametrize(
    "at, text",
    [
        (datetime(2027, 1, 15, 8, 0, 0, tzinfo=timezone.utc), "2027-01-15T08:00:00+00:00"),
        (datetime(2027, 1, 15, 8, 0, 0, 120000, tzinfo=timezone.utc), "2027-01-15T08:00:00.120+00:00"),
        (datetime(2027, 1, 15, 8, 0, 0, 123456, tzinfo=timezone.utc), "2027-01-15T08:00:00.123456+00:00"),
        (datetime(2027, 1, 15, 9, 30, 0, 1, tzinfo=timezone(timedelta(hours=1, minutes=30))),
         "2027-01-15T08:00:00.000001+00:00"),
    ],
)
def test_sqlite_timestamps_are_the_text_sqlx_writes(sqlite_db: Database, at: datetime, text: str) -> None:
    w1 = runner(sqlite_db, ManualClock(at))
    task_id = w1.enqueue("reply_to_mention")
    run = w1.claim()
    assert run is not None
    (claimed_at, expires_at), = sqlite_db.raw("SELECT claimed_at, lease_expires_at FROM runs WHERE task_id = ?", task_id)
    assert claimed_at == text
    assert expires_at == text.replace("T08:00:00", "T08:00:30")


def test_a_claim_is_held_until_its_expiry_then_reclaimed_with_a_new_epoch(db: Database, clock: ManualClock) -> None:
    w1, w2 = runner(db, clock, "w1"), runner(db, clock, "w2")
    task_id = w1.enqueue("reply_to_mention", {"n": 7})
    first = w1.claim()
    assert first is not None
    assert (first.task_id, first.epoch, first.attempts, first.payload) == (task_id, 1, 1, {"n": 7})
    assert (first.claimed_at, first.expires_at) == (T0, T0 + LEASE)
    clock.advance(LEASE - timedelta(microseconds=1))
    assert w2.claim() is None, "one microsecond before expiry the lease is held"
    clock.advance(timedelta(microseconds=1))
    second = w2.claim()
    assert second is not None and (second.task_id, second.epoch, second.attempts) == (task_id, 2, 2)
    t = db.task(task_id)
    assert (t["owner"], t["lease_epoch"], t["lease_expires_at"]) == ("w2", 2, T0 + 2 * LEASE)
    runs = db.runs(task_id)
    assert [(r["worker"], r["lease_epoch"], run_state(r, clock.now())[0]) for r in runs] == [
        ("w1", 1, "silent"), ("w2", 2, "running")]


def test_kind_filters(db: Database, clock: ManualClock) -> None:
    w1 = runner(db, clock)
    a = w1.enqueue("reply_to_mention")
    b = w1.enqueue("sync_calendar", source="tick")
    assert w1.claim("send_digest") is None
    assert w1.claim([]) is None, "an empty filter matches nothing"
    got_b = w1.claim(("sync_calendar", "x"))
    assert got_b is not None and got_b.task_id == b
    got_a = w1.claim("reply_to_mention")
    assert got_a is not None and got_a.task_id == a
    assert w1.claim() is None


def test_heartbeats_extend_and_then_report_the_lost_lease(db: Database, clock: ManualClock) -> None:
    w1, w2 = runner(db, clock, "w1"), runner(db, clock, "w2")
    task_id = w1.enqueue("reply_to_mention")
    run = w1.claim()
    assert run is not None
    clock.advance(secs(20))
    assert run.heartbeat() == T0 + secs(50) == run.expires_at
    assert db.task(task_id)["updated_at"] == T0, "a heartbeat moves the expiry only"
    clock.advance(secs(25))
    assert w2.claim() is None
    clock.advance(secs(5))
    assert w2.claim() is not None
    with pytest.raises(LostLease) as lost:
        run.heartbeat()
    assert (lost.value.holder, lost.value.epoch, lost.value.task_id) == ("w2", 2, task_id)
    assert run.expires_at == T0 + secs(50), "a lost heartbeat extends nothing"
    assert db.runs(task_id)[0]["heartbeat_at"] == T0 + secs(20)


def test_a_late_finish_is_a_lost_lease_recorded_on_its_run(db: Database, clock: ManualClock) -> None:
    w1, w2 = runner(db, clock, "w1"), runner(db, clock, "w2")
    task_id = w1.enqueue("reply_to_mention", safety="unsafe")
    slow = w1.claim()
    assert slow is not None
    clock.advance(secs(45))
    fresh = w2.claim()
    assert fresh is not None
    clock.advance(secs(1))
    finish = slow.acted("sent the reply")
    assert (finish.accepted, finish.status, finish.holder, finish.epoch) == (False, None, "w2", 2)
    t = db.task(task_id)
    assert (t["status"], t["owner"], t["lease_epoch"], t["result"]) == ("leased", "w2", 2, None)
    late = db.runs(task_id)[0]
    assert (late["finished_at"], late["completion_rows"], late["output"], late["error"]) == (
        T0 + secs(46), 0, "sent the reply", None)
    assert run_state(late, clock.now()) == ("lost_lease", "lost_lease")
    ok = fresh.no_action()
    assert (ok.accepted, ok.status, ok.holder) == (True, TaskStatus.COMPLETED, None)


def test_an_operator_requeue_fences_the_worker_that_held_the_lease(db: Database, clock: ManualClock) -> None:
    w1, w2 = runner(db, clock, "w1"), runner(db, clock, "w2")
    task_id = w1.enqueue("reply_to_mention", safety="unsafe")
    held = w1.claim()
    assert held is not None and held.epoch == 1
    clock.advance(secs(5))
    assert operator_requeue(db, task_id, clock.now()) == 2
    with pytest.raises(LostLease) as lost:
        held.heartbeat()
    assert (lost.value.holder, lost.value.epoch) == (None, 2)
    stale = held.effect("post_reply", f"task-{task_id}-post_reply")
    assert not stale.lease_current
    late = held.acted("replied")
    assert (late.accepted, late.holder, late.epoch) == (False, None, 2)
    assert db.task(task_id)["status"] == "queued", "the late write changed nothing"
    again = w2.claim()
    assert again is not None and (again.epoch, again.attempts) == (3, 1)
    fresh = again.effect("post_reply", f"task-{task_id}-post_reply")
    assert fresh.lease_current and fresh.id != stale.id
    assert again.acted("replied").accepted
    assert [(e["lease_epoch"], e["idempotency_key"]) for e in db.effects(task_id)] == [
        (1, f"task-{task_id}-post_reply"), (3, f"task-{task_id}-post_reply")]
    assert db.count("operator_actions") == 1


def test_tokens_and_the_blank_success_that_cannot_be_written(db: Database, clock: ManualClock) -> None:
    w1 = runner(db, clock)
    ids = [w1.enqueue("reply_to_mention") for _ in range(3)]
    run = w1.claim()
    assert run is not None
    for blank in ["", " ", " \t\r\n\x0b\x0c"]:
        with pytest.raises(BlankMessage):
            run.acted(blank)
    assert db.runs(ids[0])[0]["finished_at"] is None, "a refused message writes nothing"
    # Non-ASCII white space is not token white space (the dashboard trims ASCII only): a message.
    assert run.acted("\u00a0").accepted
    second = w1.claim()
    assert second is not None and second.no_action().accepted
    third = w1.claim()
    assert third is not None and third.skip().accepted
    outputs = [db.runs(i)[0]["output"] for i in ids]
    assert outputs == ["\u00a0", "no action needed", "skip"]
    assert [db.task(i)["result"] for i in ids] == outputs
    with pytest.raises(ValueError):
        Tokens(no_action=" \n")
    custom = runner(db, clock, "w9", tokens=Tokens(no_action="NOOP", skip="idle"))
    task_id = custom.enqueue("sync_calendar", source="tick")
    run = custom.claim()
    assert run is not None and run.skip().accepted
    assert db.runs(task_id)[0]["output"] == "idle"


def test_failures_use_the_closed_set_then_requeue_until_dead(db: Database, clock: ManualClock) -> None:
    w1 = runner(db, clock)
    task_id = w1.enqueue("send_digest", source="tick", max_attempts=2)
    first = w1.claim()
    assert first is not None
    with pytest.raises(ValueError, match="unknown cause 'rate_limited'"):
        first.fail("rate_limited")
    assert db.runs(task_id)[0]["finished_at"] is None, "an unknown cause writes nothing"
    out = first.fail(ErrorCause.API_ERROR, "429 Too Many Requests")
    assert (out.accepted, out.status) == (True, TaskStatus.QUEUED)
    second = w1.claim()
    assert second is not None and (second.epoch, second.attempts) == (2, 2)
    out = second.fail("timeout")
    assert (out.accepted, out.status) == (True, TaskStatus.DEAD)
    assert w1.claim() is None
    runs = db.runs(task_id)
    assert [(r["error"], r["error_detail"], r["completion_rows"]) for r in runs] == [
        ("api_error", "429 Too Many Requests", 1), ("timeout", "", 1)]
    assert db.task(task_id)["status"] == "dead"


def test_a_lapsed_lease_without_attempts_left_is_dead_at_the_next_claim(db: Database, clock: ManualClock) -> None:
    w1, w2 = runner(db, clock, "w1"), runner(db, clock, "w2")
    last = w1.enqueue("send_digest", max_attempts=1)
    held = w1.claim()
    nxt = w1.enqueue("reply_to_mention")
    clock.advance(secs(31))
    taken = w2.claim()
    assert taken is not None and taken.task_id == nxt
    t = db.task(last)
    assert (t["status"], t["owner"], t["attempts"], t["updated_at"]) == ("dead", None, 1, T0 + secs(31))
    assert held is not None
    assert (held.skip().accepted, db.task(last)["status"]) == (False, "dead")


def test_a_task_in_a_reclaim_loop_is_quarantined_as_the_rust_runner_does(db: Database, clock: ManualClock) -> None:
    guarded = runner(db, clock, "w1", quarantine_after=3)
    poison = guarded.enqueue("parse_pdf", source="tick", max_attempts=10)
    # Two crashes, then a lease that lapses: three failed claims in a row.
    for _ in range(2):
        run = guarded.claim()
        assert run is not None and run.task_id == poison
        run.fail("crash", "segfault in the parser")
        clock.advance(secs(1))
    lapsed = guarded.claim()
    assert lapsed is not None and lapsed.task_id == poison
    clock.advance(secs(31))
    healthy = guarded.enqueue("reply_to_mention")
    nxt = guarded.claim()
    assert nxt is not None and nxt.task_id == healthy, "quarantined instead of claimed; the claim moved on"
    t = db.task(poison)
    assert (t["status"], t["dead_reason"], t["attempts"], t["owner"]) == ("dead", "loop", 3, None)
    assert len(db.runs(poison)) == 3, "no fourth run"
    # Without the setting the same streak is claimed a fourth time (max_attempts 10 allows it).
    plain = runner(db, clock, "w2")
    other = plain.enqueue("parse_pdf", source="tick", max_attempts=10)
    for _ in range(3):
        r = plain.claim()
        assert r is not None and r.task_id == other
        r.fail("crash")
    again = plain.claim()
    assert again is not None and again.task_id == other
    assert db.task(other)["dead_reason"] is None
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="quarantine_after"):
            runner(db, clock, quarantine_after=bad)


def test_effects_are_idempotent_per_run_and_carry_each_epoch(db: Database, clock: ManualClock) -> None:
    w1, w2 = runner(db, clock, "w1"), runner(db, clock, "w2")
    task_id = w1.enqueue("reply_to_mention", safety="unsafe")
    slow = w1.claim()
    assert slow is not None
    key = f"task-{task_id}-reply"
    first = slow.effect("post_reply", key)
    clock.advance(secs(1))
    assert slow.effect("post_reply", key) == first
    clock.advance(LEASE)
    fresh = w2.claim()
    assert fresh is not None
    second = fresh.effect("post_reply", key)
    assert second.id != first.id and second.lease_current
    effects = db.effects(task_id)
    assert [(e["run_id"], e["lease_epoch"], e["created_at"]) for e in effects] == [
        (slow.run_id, 1, T0), (fresh.run_id, 2, T0 + secs(31))]


def test_a_run_is_finished_at_most_once(db: Database, clock: ManualClock) -> None:
    w1 = runner(db, clock)
    task_id = w1.enqueue("reply_to_mention")
    run = w1.claim()
    assert run is not None and run.acted("done").accepted
    clock.advance(secs(1))
    with pytest.raises(AlreadyFinished):
        run.fail("other", "a second answer")
    r = db.runs(task_id)[0]
    assert (r["output"], r["error"], r["finished_at"]) == ("done", None, T0), "untouched"


class Boom(Exception):
    pass


def test_the_with_block_never_records_success_by_accident(db: Database, clock: ManualClock) -> None:
    w1, w2 = runner(db, clock, "w1"), runner(db, clock, "w2")
    # One attempt each, so a failure shows as `dead`; the fifth may be re-claimed.
    ids = [w1.enqueue("reply_to_mention", max_attempts=1 if i != 4 else 3) for i in range(6)]

    with pytest.raises(Boom):
        with w1.claim() as run:  # type: ignore[union-attr]
            raise Boom("index out of bounds")
    with pytest.raises(TimeoutError):
        with w1.claim() as run:  # type: ignore[union-attr]
            raise TimeoutError("no model response within 300s")
    with w1.claim() as run:  # type: ignore[union-attr]
        raise RunFailed(ErrorCause.CONTEXT_OVERFLOW, "prompt is 213441 tokens")
    with w1.claim() as run:
        pass  # forgot the terminal call
    with w1.claim() as run:
        clock.advance(LEASE)
        stolen = w2.claim()
        assert stolen is not None and stolen.task_id == run.task_id
        run.heartbeat()  # raises LostLease, which ends the block quietly
        raise AssertionError("not reached")
    assert run.finished is not None and not run.finished.accepted

    got = [(r["error"], r["error_detail"], r["completion_rows"]) for i in ids[:5] for r in db.runs(i)[:1]]
    assert got == [
        ("crash", "Boom: index out of bounds", 1),
        ("timeout", "TimeoutError: no model response within 300s", 1),
        ("context_overflow", "prompt is 213441 tokens", 1),
        ("other", "the run's block ended without acted(), no_action(), skip() or fail()", 1),
        ("other", "stopped: lost the lease at a heartbeat (now held by w2 under epoch 2)", 0),
    ]
    assert [db.task(i)["status"] for i in ids[:4]] == ["dead"] * 4
    assert all(db.runs(i)[0]["output"] is None for i in ids[:5])

    # A terminal call then an exception: the answer stands, the exception propagates.
    with pytest.raises(Boom):
        with w1.claim() as run:
            run.acted("replied")
            raise Boom("after the fact")
    assert db.runs(ids[5])[0]["output"] == "replied"


def test_postgres_claims_skip_rows_another_worker_has_locked(postgres_db: Database, clock: ManualClock) -> None:
    w1 = runner(postgres_db, clock)
    a = w1.enqueue("reply_to_mention")
    b = w1.enqueue("reply_to_mention")
    other = psycopg.connect(postgres_db.dsn)
    try:
        other.execute("SELECT id FROM tasks WHERE id = %s FOR UPDATE", (a,))
        run = w1.claim()
        assert run is not None and run.task_id == b, "SKIP LOCKED: the locked candidate is passed over"
    finally:
        other.rollback()
        other.close()
    run = w1.claim()
    assert run is not None and run.task_id == a


def test_sqlite_claims_wait_for_the_write_lock(sqlite_db: Database, clock: ManualClock) -> None:
    w1 = runner(sqlite_db, clock)
    task_id = w1.enqueue("reply_to_mention")
    path = sqlite_db.dsn.removeprefix("sqlite:")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    claimed: list[object] = []
    thread = threading.Thread(target=lambda: claimed.append(runner(sqlite_db, clock, "w2").claim()))
    thread.start()
    time.sleep(0.5)
    assert thread.is_alive() and not claimed, "BEGIN IMMEDIATE queues behind the writer"
    holder.execute("COMMIT")
    thread.join(10)
    run = claimed[0]
    assert getattr(run, "task_id") == task_id and getattr(run, "worker") == "w2"
    holder.close()


def test_a_trace_id_is_written_at_the_claim_or_later_and_bad_ones_never(db: Database, clock: ManualClock) -> None:
    w1 = runner(db, clock)
    first = w1.enqueue("reply_to_mention")
    second = w1.enqueue("reply_to_mention")
    # Refused before the claim: nothing is claimed, nothing written.
    for bad in ["", "two words", "x" * 129, "nul\x00inside"]:
        with pytest.raises(ValueError):
            w1.claim(trace_id=bad)
    assert db.task(first)["status"] == "queued"
    run = w1.claim(trace_id="4bf92f3577b34da6a3ce929d0e0e4736")
    assert run is not None and run.task_id == first
    assert db.runs(first)[0]["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    later = w1.claim()
    assert later is not None
    assert (later.trace_id, db.runs(second)[0]["trace_id"]) == (None, None)
    later.set_trace_id("lf:7f9c-2a")
    with pytest.raises(ValueError):
        later.set_trace_id("line\nbreak")
    assert (later.trace_id, db.runs(second)[0]["trace_id"]) == ("lf:7f9c-2a", "lf:7f9c-2a")
    assert later.no_action().accepted
    later.set_trace_id("x" * 128)
    assert db.runs(second)[0]["trace_id"] == "x" * 128


def test_the_async_runner_writes_the_same_rows(db: Database, clock: ManualClock) -> None:
    async def main() -> None:
        async with AsyncRunner(db.dsn, worker="a1", lease=LEASE, clock=clock) as a1, \
                AsyncRunner(db.dsn, worker="a2", lease=LEASE, clock=clock) as a2:
            first = await a1.enqueue("reply_to_mention", {"n": 1}, safety="unsafe")
            second = await a1.enqueue("reply_to_mention", {"n": 2}, max_attempts=1)
            run = await a1.claim("reply_to_mention", trace_id="trace-42")
            assert run is not None and (run.task_id, run.epoch, run.trace_id) == (first, 1, "trace-42")
            assert (await run.effect("post_reply", "k")).lease_current
            clock.advance(LEASE)
            stolen = await a2.claim()
            assert stolen is not None and stolen.task_id == first
            with pytest.raises(LostLease):
                await run.heartbeat()
            lost = await run.acted("posted")
            assert (lost.accepted, lost.holder, lost.epoch) == (False, "a2", 2)
            assert (await stolen.acted("posted")).accepted
            with pytest.raises(BlankMessage):
                await stolen.acted(" ")
            with pytest.raises(asyncio.TimeoutError):
                async with await a1.claim() as crashing:  # type: ignore[union-attr]
                    await asyncio.wait_for(asyncio.sleep(1), 0.01)
            assert crashing.finished is not None and crashing.finished.status == TaskStatus.DEAD
        assert [(r["worker"], r["output"], r["completion_rows"], r["trace_id"]) for r in db.runs(first)] == [
            ("a1", "posted", 0, "trace-42"), ("a2", "posted", 1, None)]
        assert db.runs(second)[0]["error"] == "timeout"

    asyncio.run(main())


def test_the_dashboards_own_sql_reads_the_lease_to_the_microsecond(db: Database, clock: ManualClock) -> None:
    # SQLite compares the runner's timestamp text with the dashboard's: one character of format
    # drift and "running" and "silent" swap near the boundary.
    w1 = runner(db, clock)
    task_id = w1.enqueue("reply_to_mention")
    run = w1.claim()
    assert run is not None
    assert dashboard_states(db, task_id, T0 + LEASE - timedelta(microseconds=1)) == ["running"]
    assert dashboard_states(db, task_id, T0 + LEASE) == ["silent"]
    clock.advance(secs(10))
    run.heartbeat()
    assert dashboard_states(db, task_id, T0 + LEASE) == ["running"]
    assert run.acted(" no action needed\n").accepted
    assert dashboard_states(db, task_id, clock.now()) == ["no_action"]


def test_the_async_with_block_follows_the_same_rules(db: Database, clock: ManualClock) -> None:
    async def main() -> list[tuple[str | None, str | None, int | None]]:
        async with AsyncRunner(db.dsn, worker="a1", lease=LEASE, clock=clock) as a1, \
                AsyncRunner(db.dsn, worker="a2", lease=LEASE, clock=clock) as a2:
            # One attempt each (a failure is final), but the last may be re-claimed.
            ids = [await a1.enqueue("reply_to_mention", max_attempts=1 if i < 3 else 3) for i in range(4)]
            run = await a1.claim()
            assert run is not None
            async with run:
                pass  # no terminal call
            run = await a1.claim()
            assert run is not None
            async with run:
                raise RunFailed("api_error", "529 Overloaded")
            run = await a1.claim()
            assert run is not None
            with pytest.raises(Boom):
                async with run:
                    raise Boom("tool sandbox exited")
            run = await a1.claim()
            assert run is not None
            async with run:
                clock.advance(LEASE)
                assert (await a2.claim()) is not None
                await run.heartbeat()
            assert run.finished is not None and run.finished.holder == "a2"
            return [(r["error"], r["error_detail"], r["completion_rows"]) for i in ids for r in db.runs(i)[:1]]

    assert asyncio.run(main()) == [
        ("other", "the run's block ended without acted(), no_action(), skip() or fail()", 1),
        ("api_error", "529 Overloaded", 1),
        ("crash", "Boom: tool sandbox exited", 1),
        ("other", "stopped: lost the lease at a heartbeat (now held by a2 under epoch 2)", 0),
    ]


def test_lock_contention_and_lost_connections_are_transient(db: Database, clock: ManualClock) -> None:
    w1 = runner(db, clock)
    w1.enqueue("reply_to_mention")
    if db.backend == "sqlite":
        # A writer that will not wait: the error a busy database gives a runner past its timeout.
        path = db.dsn.removeprefix("sqlite:")
        holder = sqlite3.connect(path, isolation_level=None)
        impatient = sqlite3.connect(path, isolation_level=None, timeout=0)
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(sqlite3.OperationalError) as busy:
            impatient.execute("BEGIN IMMEDIATE")
        holder.execute("ROLLBACK")
        assert is_transient(busy.value)
        with pytest.raises(sqlite3.OperationalError) as bad:
            impatient.execute("SELECT * FROM no_such_table")
        assert not is_transient(bad.value)
        holder.close()
        impatient.close()
    else:
        # The server ends the runner's session (an admin, a failover): transient, and the runner
        # reconnects on its next move.
        assert w1.claim() is not None
        db.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = ? "
                   "AND datname = current_database()",
                   "lastword-runner-python")
        with pytest.raises(psycopg.OperationalError) as dropped:
            w1.enqueue("reply_to_mention")
        assert is_transient(dropped.value)
        w1.enqueue("reply_to_mention")
        with pytest.raises(psycopg.errors.UndefinedTable) as undefined:
            db.execute("SELECT * FROM no_such_table")
        assert not is_transient(undefined.value)


def test_concurrent_workers_never_claim_the_same_task(db: Database) -> None:
    # Real contention, the wall clock: SKIP LOCKED on PostgreSQL, the write lock on SQLite.
    producer = Runner(db.dsn, worker="producer")
    ids = {producer.enqueue("reply_to_mention") for _ in range(60)}
    producer.close()
    taken: list[tuple[str, int]] = []
    lock = threading.Lock()

    def work(worker: str) -> None:
        with Runner(db.dsn, worker=worker, lease=secs(60)) as w:
            while (run := w.claim()) is not None:
                with run:
                    run.acted(f"done by {worker}")
                with lock:
                    taken.append((worker, run.task_id))

    threads = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(task for _, task in taken) == sorted(ids), "every task once, none twice"
    assert db.count("runs") == 60
    assert {r[0] for r in db.raw("SELECT DISTINCT completion_rows FROM runs")} == {1}
