"""The asyncio runner: the same moves as `Runner` (`_moves.py`), sent through psycopg's async
connection on PostgreSQL and through a worker thread on SQLite (sqlite3 has no async API), so
an asyncio agent loop never blocks its event loop on the database.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any

from . import _moves
from ._backends import AsyncBackend, open_async_backend
from ._clock import Clock, SystemClock
from ._common import (
    RunFields,
    checked_failure,
    checked_lease,
    checked_quarantine,
    checked_message,
    checked_trace_id,
    checked_worker,
    failure_for,
    kinds_filter,
    log,
    log_extra,
)
from ._dsn import parse_dsn
from ._vocab import EffectRecorded, ErrorCause, Finish, LostLease, Safety, Source, Tokens


class AsyncRunner:
    """`Runner` for asyncio: the same arguments; every database call is awaited. The connection
    opens on first use; `await runner.close()` (or `async with AsyncRunner(...)`) closes it."""

    def __init__(
        self,
        dsn: str,
        worker: str = "w1",
        lease: timedelta = timedelta(seconds=30),
        *,
        tokens: Tokens = Tokens(),
        clock: Clock | None = None,
        quarantine_after: int | None = None,
    ) -> None:
        self.worker = checked_worker(worker)
        # A candidate claimed this many times since its last re-queue whose newest this many
        # runs all failed is quarantined (dead, dead_reason 'loop') instead of claimed again.
        self.quarantine_after = checked_quarantine(quarantine_after)
        self.lease = checked_lease(lease)
        self.tokens = tokens
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._backend: AsyncBackend = open_async_backend(parse_dsn(dsn))

    @property
    def backend(self) -> str:
        return self._backend.name

    def now(self) -> datetime:
        return self.clock.now()

    async def close(self) -> None:
        await self._backend.close()

    async def __aenter__(self) -> AsyncRunner:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def enqueue(
        self,
        kind: str,
        payload: Any = None,
        *,
        source: Source | str = Source.NOTIFICATION,
        safety: Safety | str = Safety.IDEMPOTENT,
        max_attempts: int = 3,
    ) -> int:
        """Producer side: inserts a `queued` task; returns its id."""
        move = _moves.enqueue(
            kind,
            Source(source).value,
            Safety(safety).value,
            {} if payload is None else payload,
            max_attempts,
            self.clock.now(),
        )
        return await self._backend.run(move)

    async def claim(
        self, kind: str | Iterable[str] | None = None, *, trace_id: str | None = None
    ) -> AsyncRun | None:
        """`Runner.claim`, awaited: an `AsyncRun` (use it with `async with`) or None."""
        if trace_id is not None:
            checked_trace_id(trace_id)
        now = self.clock.now()
        claimed = await self._backend.run(
            _moves.claim(
                self._backend.name,
                self.worker,
                kinds_filter(kind),
                now,
                now + self.lease,
                trace_id,
                self.quarantine_after,
            )
        )
        if claimed is None:
            return None
        run = AsyncRun(self, claimed, trace_id)
        log.debug("claimed task %s under epoch %s", run.task_id, run.epoch, extra=log_extra(run))
        return run


class AsyncRun(RunFields):
    """`Run` for asyncio: the same calls, awaited, and `async with` with the same rules (an
    exception records `timeout` or `crash`, a missing terminal call `other`; a cancelled task is a
    crash too)."""

    def __init__(self, runner: AsyncRunner, claimed: _moves.Claimed, trace_id: str | None) -> None:
        super().__init__(runner.worker, claimed, trace_id)
        self._runner = runner

    async def acted(self, message: str) -> Finish:
        return await self._finish(checked_message(message), None, None)

    async def no_action(self) -> Finish:
        return await self._finish(self._runner.tokens.no_action, None, None)

    async def skip(self) -> Finish:
        return await self._finish(self._runner.tokens.skip, None, None)

    async def fail(self, cause: ErrorCause | str, detail: str | None = None) -> Finish:
        error, text = checked_failure(cause, detail)
        return await self._finish(None, error, text)

    async def heartbeat(self) -> datetime:
        now = self._runner.clock.now()
        until = now + self._runner.lease
        lost = await self._runner._backend.run(
            _moves.heartbeat(self.task_id, self.run_id, self.worker, self.epoch, now, until)
        )
        if lost is not None:
            holder, epoch = lost
            log.warning("heartbeat matched nothing: lease lost to %s (epoch %s)", holder, epoch, extra=log_extra(self))
            raise LostLease(self.task_id, self.run_id, holder, epoch)
        self.expires_at = until
        return until

    async def set_trace_id(self, trace_id: str) -> None:
        await self._runner._backend.run(_moves.set_trace_id(self.run_id, checked_trace_id(trace_id)))
        self.trace_id = trace_id

    async def effect(self, kind: str, key: str) -> EffectRecorded:
        recorded = await self._runner._backend.run(
            _moves.record_effect(self.task_id, self.run_id, self.worker, self.epoch, kind, key, self._runner.clock.now())
        )
        if not recorded.lease_current:
            log.warning("effect %s recorded under a lease this worker no longer holds", key, extra=log_extra(self))
        return recorded

    async def _finish(self, output: str | None, error: str | None, detail: str | None) -> Finish:
        finish = await self._runner._backend.run(
            _moves.finish(
                self.task_id, self.run_id, self.worker, self.epoch, self._runner.clock.now(), output, error, detail
            )
        )
        self.finished = finish
        if not finish.accepted:
            log.warning(
                "final write matched nothing: lost lease (held by %s, epoch %s)",
                finish.holder,
                finish.epoch,
                extra=log_extra(self),
            )
        return finish

    async def __aenter__(self) -> AsyncRun:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        if self.finished is not None:
            return False
        failure = failure_for(exc, self.run_id)
        try:
            await self._finish(None, failure.cause.value, failure.detail)
        except Exception:
            if exc is None:
                raise
            log.exception("could not record the run's failure", extra=log_extra(self))
            return False
        if exc is None:
            log.error("run ended without a terminal call: recorded as a failure", extra=log_extra(self))
        return failure.suppress
