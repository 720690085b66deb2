"""The four moves of the contract — claim, heartbeat, record an effect, finish — and enqueue,
written once as generators of statements, so the sync and the asyncio runner share every
decision and differ only in how a statement reaches the database (`_backends.py`).

Each move is one transaction: the backend begins it (`BEGIN` on PostgreSQL, `BEGIN IMMEDIATE`
on SQLite), sends each yielded `Statement`, feeds back its `Result`, commits when the generator
returns and rolls back when it raises — the same sequence, branch for branch, as
`runner/src/runner.rs`.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from . import _sql
from ._vocab import AlreadyFinished, EffectRecorded, Finish, Safety, Source, TaskMissing, TaskStatus


@dataclass(frozen=True)
class Payload:
    """A JSON value to bind: JSON text on SQLite, `jsonb` on PostgreSQL."""

    value: Any


@dataclass(frozen=True)
class Statement:
    """One statement with `$n` placeholders and its parameters in order ($1 first)."""

    sql: str
    params: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Result:
    """What a statement answered: its rows (empty if it returns none) and the rows it changed."""

    rows: list[tuple[Any, ...]]
    rowcount: int


T = TypeVar("T")

# A move: yields statements, receives their results, returns its answer.
Move = Generator[Statement, Result, T]


@dataclass(frozen=True)
class Claimed:
    """What a claim took: the lease (task, run, epoch) and the task's fields."""

    task_id: int
    run_id: int
    epoch: int
    kind: str
    source: str
    safety: str
    payload: Any
    attempts: int
    max_attempts: int
    claimed_at: datetime
    expires_at: datetime


def payload_to_sqlite(value: Any) -> str:
    """JSON text the way serde_json writes a `serde_json::Value` (what the Rust runner stores):
    no spaces, object keys sorted (serde_json's map is a BTreeMap), non-ASCII kept as is."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False)


def enqueue(
    kind: str, source: str, safety: str, payload: Any, max_attempts: int, now: datetime
) -> Generator[Statement, Result, int]:
    result = yield Statement(_sql.ENQUEUE, (kind, source, safety, Payload(payload), max_attempts, now))
    return int(result.rows[0][0])


def claim(
    backend: str,
    worker: str,
    kinds: Sequence[str] | None,
    now: datetime,
    expires: datetime,
    trace_id: str | None = None,
    quarantine_after: int | None = None,
) -> Generator[Statement, Result, Claimed | None]:
    kinds_param: list[str] | str | None
    if backend == "postgres":
        candidate_sql, kinds_param = _sql.POSTGRES_CLAIM_CANDIDATE, (None if kinds is None else list(kinds))
    else:
        candidate_sql = _sql.SQLITE_CLAIM_CANDIDATE
        kinds_param = None if kinds is None else json.dumps(list(kinds), separators=(",", ":"), ensure_ascii=False)
    while True:
        candidate = yield Statement(candidate_sql, (now, kinds_param))
        if not candidate.rows:
            return None
        task_id, status, attempts, max_attempts = candidate.rows[0]
        if status == TaskStatus.LEASED.value and attempts >= max_attempts:
            # Its lease lapsed with no attempts left: dead instead of re-claimed; next candidate.
            yield Statement(_sql.CLAIM_EXHAUSTED, (task_id, now))
            continue
        if quarantine_after is not None and attempts >= quarantine_after:
            # A re-claim loop: its newest `quarantine_after` runs all failed. Quarantined (dead,
            # dead_reason 'loop') instead of claimed again; next candidate.
            streak = yield Statement(_sql.LOOP_STREAK, (task_id, quarantine_after))
            if int(streak.rows[0][0]) >= quarantine_after:
                yield Statement(_sql.QUARANTINE, (task_id, now))
                continue
        taken = yield Statement(_sql.CLAIM_TAKE, (task_id, worker, expires, now))
        epoch, kind, source, safety, payload, attempts, max_attempts = taken.rows[0]
        run = yield Statement(_sql.CLAIM_RUN, (task_id, worker, epoch, now, expires))
        if trace_id is not None:
            yield Statement(_sql.SET_TRACE_ID, (run.rows[0][0], trace_id))
        # Read before the commit, as the Rust runner does: a row outside the vocabulary (written
        # by something else) rolls the claim back instead of leaving a lease nobody works.
        try:
            Source(source), Safety(safety)
        except ValueError as e:
            raise ValueError(f"task {task_id}: {e}") from None
        if backend == "sqlite":
            payload = json.loads(payload)
        return Claimed(
            task_id=int(task_id),
            run_id=int(run.rows[0][0]),
            epoch=int(epoch),
            kind=kind,
            source=source,
            safety=safety,
            payload=payload,
            attempts=int(attempts),
            max_attempts=int(max_attempts),
            claimed_at=now,
            expires_at=expires,
        )


def current_holder(task_id: int) -> Generator[Statement, Result, tuple[str | None, int]]:
    holder = yield Statement(_sql.CURRENT_HOLDER, (task_id,))
    if not holder.rows:
        raise TaskMissing(task_id)
    owner, epoch = holder.rows[0]
    return owner, int(epoch)


def heartbeat(
    task_id: int, run_id: int, worker: str, epoch: int, now: datetime, until: datetime
) -> Generator[Statement, Result, tuple[str | None, int] | None]:
    """None: extended until `until`. Otherwise the lease is lost: (holder, epoch) of the task now."""
    matched = yield Statement(_sql.HEARTBEAT_TASK, (task_id, worker, epoch, until))
    if matched.rowcount == 0:
        return (yield from current_holder(task_id))
    yield Statement(_sql.HEARTBEAT_RUN, (run_id, now, until))
    return None


def finish(
    task_id: int,
    run_id: int,
    worker: str,
    epoch: int,
    now: datetime,
    output: str | None,
    error: str | None,
    detail: str | None,
) -> Generator[Statement, Result, Finish]:
    """A success when `error` is None (`output` written), else a failure with `error`, `detail`."""
    if error is None:
        task = yield Statement(_sql.FINISH_SUCCESS_TASK, (task_id, worker, epoch, output, now))
    else:
        task = yield Statement(_sql.FINISH_FAILURE_TASK, (task_id, worker, epoch, now))
    if task.rows:
        # Accepted: the final write cleared the owner, so nobody holds the task now.
        outcome = Finish(accepted=True, status=TaskStatus(task.rows[0][0]), holder=None, epoch=epoch)
    else:
        holder, current_epoch = yield from current_holder(task_id)
        outcome = Finish(accepted=False, status=None, holder=holder, epoch=current_epoch)
    recorded = yield Statement(
        _sql.FINISH_RUN, (run_id, now, output, error, detail, 1 if outcome.accepted else 0)
    )
    if recorded.rowcount != 1:
        # Raising rolls the transaction back: nothing of this second finish is kept.
        raise AlreadyFinished(run_id)
    return outcome


def set_trace_id(run_id: int, trace_id: str) -> Generator[Statement, Result, None]:
    yield Statement(_sql.SET_TRACE_ID, (run_id, trace_id))


def record_effect(
    task_id: int, run_id: int, worker: str, epoch: int, kind: str, key: str, now: datetime
) -> Generator[Statement, Result, EffectRecorded]:
    inserted = yield Statement(_sql.EFFECT_INSERT, (run_id, task_id, epoch, kind, key, now))
    if inserted.rows:
        effect_id = int(inserted.rows[0][0])
    else:
        existing = yield Statement(_sql.EFFECT_EXISTING, (run_id, key))
        effect_id = int(existing.rows[0][0])
    current = yield Statement(_sql.LEASE_CURRENT, (task_id, worker, epoch))
    return EffectRecorded(id=effect_id, lease_current=int(current.rows[0][0]) > 0)
