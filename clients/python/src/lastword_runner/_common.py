"""What the sync and the asyncio runner share beyond the moves: argument checks, and the rule
for how a `with` block that did not end with a terminal call is recorded — so an exception, a
timeout or a forgotten `acted()` can never read as success on the dashboard.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from . import _moves
from ._vocab import BlankMessage, ErrorCause, Finish, LostLease, RunFailed, Safety, Source, as_cause, trim_token

log = logging.getLogger("lastword_runner")

# `detail` when the block ended without acted(), no_action(), skip() or fail().
NO_TERMINAL_CALL = "the run's block ended without acted(), no_action(), skip() or fail()"

# asyncio's and concurrent.futures' TimeoutError are the builtin one from Python 3.11 on, separate
# classes before.
TIMEOUTS: tuple[type[BaseException], ...] = (TimeoutError, asyncio.TimeoutError, concurrent.futures.TimeoutError)


@dataclass(frozen=True)
class Failure:
    """How a block that did not finish itself is recorded, and whether its exception is swallowed
    (the library's own signals, LostLease and RunFailed, end the block quietly)."""

    cause: ErrorCause
    detail: str
    suppress: bool


def failure_for(exc: BaseException | None, run_id: int) -> Failure:
    if exc is None:
        return Failure(ErrorCause.OTHER, NO_TERMINAL_CALL, suppress=False)
    if isinstance(exc, LostLease) and exc.run_id == run_id:
        # The Rust simulator's words for the same situation (sim/src/worker.rs), so both fleets'
        # lost-heartbeat runs read alike.
        detail = (
            f"stopped: lost the lease at a heartbeat (now held by {exc.holder or 'nobody'} "
            f"under epoch {exc.epoch})"
        )
        return Failure(ErrorCause.OTHER, detail, suppress=True)
    if isinstance(exc, RunFailed):
        return Failure(exc.cause, exc.detail or "", suppress=True)
    if isinstance(exc, TIMEOUTS):
        return Failure(ErrorCause.TIMEOUT, describe(exc), suppress=False)
    # Anything else the work raised — a bug, KeyboardInterrupt, a cancelled task — is the run
    # crashing: the contract's `crash`.
    return Failure(ErrorCause.CRASH, describe(exc), suppress=False)


def describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def checked_message(message: str) -> str:
    """The message as given (kept as written), refused when blank after the dashboard's trim."""
    if not isinstance(message, str) or not trim_token(message):
        raise BlankMessage()
    return message


def checked_failure(cause: ErrorCause | str, detail: str | None) -> tuple[str, str]:
    # The Rust runner always writes a detail (Outcome::Failed carries a String, possibly empty),
    # so a failure without one is written as '' there too, never NULL.
    return as_cause(cause).value, "" if detail is None else str(detail)


# The longest trace id the contract accepts (`lastword_core::trace::MAX_TRACE_ID_CHARS`).
MAX_TRACE_ID_CHARS = 128


def checked_trace_id(trace_id: str) -> str:
    """The trace id as given, refused (ValueError, nothing written) unless it is 1 to 128
    characters with no whitespace or control characters: the rule of `lastword_core::trace`, so
    the dashboard can always make a link of it."""
    if not isinstance(trace_id, str) or not trace_id:
        raise ValueError("a trace id cannot be empty")
    if len(trace_id) > MAX_TRACE_ID_CHARS:
        raise ValueError(f"a trace id is at most {MAX_TRACE_ID_CHARS} characters (this one has {len(trace_id)})")
    if any(c.isspace() or unicodedata.category(c) == "Cc" for c in trace_id):
        raise ValueError("a trace id cannot contain whitespace or control characters")
    return trace_id


def kinds_filter(kind: str | Iterable[str] | None) -> list[str] | None:
    """None: any kind. A string: that kind. A collection: any of them (empty matches nothing)."""
    if kind is None:
        return None
    if isinstance(kind, str):
        return [kind]
    return list(kind)


def checked_lease(lease: timedelta) -> timedelta:
    if lease <= timedelta(0):
        raise ValueError(f"the lease must be positive, got {lease}")
    return lease


def checked_quarantine(claims: int | None) -> int | None:
    if claims is not None and (isinstance(claims, bool) or not isinstance(claims, int) or claims < 1):
        raise ValueError(f"quarantine_after must be a whole number of claims, at least 1, got {claims!r}")
    return claims


def checked_worker(worker: str) -> str:
    if not worker or not worker.strip():
        raise ValueError("a worker needs a name: it is the lease's owner, unique in the fleet")
    return worker


def log_extra(run: Any) -> dict[str, Any]:
    extra: dict[str, Any] = {"task_id": run.task_id, "run_id": run.run_id, "epoch": run.epoch, "worker": run.worker}
    if run.trace_id is not None:
        extra["trace_id"] = run.trace_id
    return extra


class RunFields:
    """What a claim hands the worker, the same on the sync and the asyncio `Run`: the lease
    (`task_id`, `run_id`, `epoch`) and the task's fields."""

    def __init__(self, worker: str, claimed: _moves.Claimed, trace_id: str | None) -> None:
        self.worker = worker
        self.task_id = claimed.task_id
        self.run_id = claimed.run_id
        # The fencing token: tasks.lease_epoch as set by this claim.
        self.epoch = claimed.epoch
        self.kind = claimed.kind
        self.source = Source(claimed.source)
        self.safety = Safety(claimed.safety)
        self.payload: Any = claimed.payload
        # Claims of this task so far, this one included.
        self.attempts = claimed.attempts
        self.max_attempts = claimed.max_attempts
        self.claimed_at = claimed.claimed_at
        # When the lease lapses unless a heartbeat extends it.
        self.expires_at = claimed.expires_at
        self.trace_id = trace_id
        # The answer of this run's terminal call, once one was written.
        self.finished: Finish | None = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} task={self.task_id} run={self.run_id} epoch={self.epoch} worker={self.worker!r}>"
