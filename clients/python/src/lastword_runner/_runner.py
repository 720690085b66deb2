"""The synchronous runner: `Runner` claims tasks under a fenced lease and hands out `Run`s, one
unit of work each, whose terminal calls are the only ways to end it. Used as a context manager,
a `Run` that raises or forgets its terminal call is recorded as a failure, never as a success.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any

from . import _moves
from ._backends import Backend, open_backend
from ._clock import Clock, SystemClock
from ._common import (
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
    RunFields,
)
from ._dsn import parse_dsn
from ._vocab import EffectRecorded, ErrorCause, Finish, LostLease, Safety, Source, Tokens


class Runner:
    """One worker's handle on the contract tables.

    `dsn`: `postgresql://…` or `sqlite:path` (what the dashboard's `DATABASE_URL` accepts).
    `worker`: written to `tasks.owner` and `runs.worker`; unique in the fleet, or two workers
    could pass each other's owner guard. `lease`: how long a claim or heartbeat holds the task.
    `tokens`: the outputs of `no_action()`/`skip()`, as configured on the dashboard. `clock`: where
    "now" comes from (a `ManualClock` in tests).
    """

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
        self._backend: Backend = open_backend(parse_dsn(dsn))

    @property
    def backend(self) -> str:
        """"postgres" or "sqlite"."""
        return self._backend.name

    def now(self) -> datetime:
        return self.clock.now()

    def close(self) -> None:
        self._backend.close()

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def enqueue(
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
        task_id = self._backend.run(move)
        log.debug("enqueued task %s (%s)", task_id, kind, extra={"task_id": task_id})
        return task_id

    def claim(self, kind: str | Iterable[str] | None = None, *, trace_id: str | None = None) -> Run | None:
        """Takes the lowest-id task that is queued, or leased with a lapsed lease (a re-claim),
        optionally only of `kind` (a kind or several). One transaction: bumps the fencing token,
        sets owner, expiry and attempts, inserts the run. A lapsed task whose attempts are used up
        becomes `dead` instead and the next is tried. None: nothing to do.

        `trace_id` (optional: the run's trace in Langfuse, LangSmith, an OpenTelemetry backend) is
        written on the run in the claim's transaction — the dashboard links it — and carried on
        every log record of the run. `Run.set_trace_id` sets it later."""
        if trace_id is not None:
            checked_trace_id(trace_id)
        now = self.clock.now()
        claimed = self._backend.run(
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
        run = Run(self, claimed, trace_id)
        log.debug("claimed task %s under epoch %s", run.task_id, run.epoch, extra=log_extra(run))
        return run


class Run(RunFields):
    """One claimed attempt of a task, under the fencing token `epoch`. End it with exactly one of
    `acted(message)`, `no_action()`, `skip()` or `fail(cause, detail)`; each returns a `Finish`
    whose `accepted` is False when the lease was lost.

    As a context manager: an exception in the block records a failure (`timeout` for a
    TimeoutError, `crash` for anything else) and propagates; `LostLease` from `heartbeat()` and
    `RunFailed` record a failure and end the block quietly; a block that ends without a terminal
    call records `other`. Nothing of that is ever recorded as success.
    """

    def __init__(self, runner: Runner, claimed: _moves.Claimed, trace_id: str | None) -> None:
        super().__init__(runner.worker, claimed, trace_id)
        self._runner = runner

    def acted(self, message: str) -> Finish:
        """The run did something; `message` says what (never empty or blank: that raises
        BlankMessage before anything is written)."""
        return self._finish(checked_message(message), None, None)

    def no_action(self) -> Finish:
        """A notification that owed nothing: writes the no-action token."""
        return self._finish(self._runner.tokens.no_action, None, None)

    def skip(self) -> Finish:
        """A tick with nothing to do: writes the skip token."""
        return self._finish(self._runner.tokens.skip, None, None)

    def fail(self, cause: ErrorCause | str, detail: str | None = None) -> Finish:
        """The run failed with `cause` (timeout, api_error, context_overflow, crash, other). The task
        is re-queued while attempts remain, else `dead`."""
        error, text = checked_failure(cause, detail)
        return self._finish(None, error, text)

    def heartbeat(self) -> datetime:
        """Extends the lease by the runner's lease length; returns the new expiry. Raises LostLease
        (with the current holder) when this worker no longer holds the task — stop working then."""
        now = self._runner.clock.now()
        until = now + self._runner.lease
        lost = self._runner._backend.run(
            _moves.heartbeat(self.task_id, self.run_id, self.worker, self.epoch, now, until)
        )
        if lost is not None:
            holder, epoch = lost
            log.warning("heartbeat matched nothing: lease lost to %s (epoch %s)", holder, epoch, extra=log_extra(self))
            raise LostLease(self.task_id, self.run_id, holder, epoch)
        self.expires_at = until
        return until

    def set_trace_id(self, trace_id: str) -> None:
        """Stores the id of this run's trace (1 to 128 characters, no whitespace) on the run, so the
        dashboard links it; call it as soon as the work has a trace. Replaces an earlier id."""
        self._runner._backend.run(_moves.set_trace_id(self.run_id, checked_trace_id(trace_id)))
        self.trace_id = trace_id

    def effect(self, kind: str, key: str) -> EffectRecorded:
        """Records a side effect in the outbox under this run's fencing token, before finishing —
        also when the lease may be lost: the row documents what ran. `key` is stable across
        attempts of the same logical effect (e.g. f"task-{run.task_id}-send_email"). Recording the
        same key again from this run returns the same row."""
        recorded = self._runner._backend.run(
            _moves.record_effect(self.task_id, self.run_id, self.worker, self.epoch, kind, key, self._runner.clock.now())
        )
        if not recorded.lease_current:
            log.warning("effect %s recorded under a lease this worker no longer holds", key, extra=log_extra(self))
        return recorded

    def _finish(self, output: str | None, error: str | None, detail: str | None) -> Finish:
        finish = self._runner._backend.run(
            _moves.finish(
                self.task_id, self.run_id, self.worker, self.epoch, self._runner.clock.now(), output, error, detail
            )
        )
        self.finished = finish
        if finish.accepted:
            log.debug("finished: task is %s", finish.status and finish.status.value, extra=log_extra(self))
        else:
            log.warning(
                "final write matched nothing: lost lease (held by %s, epoch %s)",
                finish.holder,
                finish.epoch,
                extra=log_extra(self),
            )
        return finish

    def __enter__(self) -> Run:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        if self.finished is not None:
            return False
        failure = failure_for(exc, self.run_id)
        try:
            self._finish(None, failure.cause.value, failure.detail)
        except Exception:
            if exc is None:
                raise
            # Keep the work's own exception visible; the recording failure goes to the log.
            log.exception("could not record the run's failure", extra=log_extra(self))
            return False
        if exc is None:
            log.error("run ended without a terminal call: recorded as a failure", extra=log_extra(self))
        return failure.suppress


def enqueue(
    dsn: str,
    kind: str,
    payload: Any = None,
    *,
    source: Source | str = Source.NOTIFICATION,
    safety: Safety | str = Safety.IDEMPOTENT,
    max_attempts: int = 3,
    clock: Clock | None = None,
) -> int:
    """Producer side without a worker: opens the database, inserts one `queued` task, closes."""
    backend = open_backend(parse_dsn(dsn))
    try:
        now = (clock if clock is not None else SystemClock()).now()
        return backend.run(
            _moves.enqueue(kind, Source(source).value, Safety(safety).value, {} if payload is None else payload, max_attempts, now)
        )
    finally:
        backend.close()


# The module is quiet unless the application configures logging.
logging.getLogger("lastword_runner").addHandler(logging.NullHandler())
