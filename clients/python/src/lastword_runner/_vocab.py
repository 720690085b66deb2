"""The contract's closed vocabularies and the values that cross the runner API, spelled exactly
as the Rust runner writes them (`core/src/model.rs`, `core/src/state.rs`,
`runner/src/outcome.rs`), so a Python worker's rows read the same on the dashboard.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class ErrorCause(str, Enum):
    """What a failed run writes into `runs.error`: the closed set the schema's CHECK allows."""

    TIMEOUT = "timeout"
    API_ERROR = "api_error"
    CONTEXT_OVERFLOW = "context_overflow"
    CRASH = "crash"
    OTHER = "other"


class TaskStatus(str, Enum):
    """`tasks.status` (`failed` is reserved by the schema; no runner writes it)."""

    QUEUED = "queued"
    LEASED = "leased"
    COMPLETED = "completed"
    FAILED = "failed"
    DEAD = "dead"


class Source(str, Enum):
    """What woke a task."""

    NOTIFICATION = "notification"
    TICK = "tick"


class Safety(str, Enum):
    """Whether running a task twice is harmless; unsafe tasks need compensation after a double
    execution."""

    IDEMPOTENT = "idempotent"
    UNSAFE = "unsafe"


# The white space trimmed around a terminal token: ASCII only, the same six characters as the
# Rust runner and the dashboard's SQL twin (`TOKEN_TRIM_CHARS`). Python's str.strip() without
# arguments would also strip Unicode spaces and disagree with the dashboard.
TOKEN_TRIM_CHARS = " \t\n\r\x0b\x0c"


def trim_token(text: str) -> str:
    """`text` with surrounding token white space removed, as the dashboard compares outputs."""
    return text.strip(TOKEN_TRIM_CHARS)


@dataclass(frozen=True)
class Tokens:
    """The outputs written for "nothing to do". A fleet may choose its own words; the dashboard
    must be started with the same ones (`--no-action-token`, `--skip-token`)."""

    no_action: str = "no action needed"
    skip: str = "skip"

    def __post_init__(self) -> None:
        for name, value in (("no_action", self.no_action), ("skip", self.skip)):
            if not trim_token(value):
                raise ValueError(f"the {name} token must not be blank: blank output means failure")


class BlankMessage(ValueError):
    """`acted()` was given empty or blank text. The contract reserves empty output for failures:
    use `no_action()`, `skip()` or `fail()` instead."""

    def __init__(self) -> None:
        super().__init__(
            "an action message must not be empty or blank (use no_action(), skip() or fail())"
        )


class LostLease(Exception):
    """The lease is gone: another worker re-claimed the task, an operator re-queued it, or the run
    already finished. Raised by `Run.heartbeat()`; stop working. Raised inside a `with` block it
    ends the block quietly and the run is recorded as a lost-lease failure."""

    def __init__(self, task_id: int, run_id: int, holder: str | None, epoch: int) -> None:
        self.task_id = task_id
        self.run_id = run_id
        self.holder = holder
        self.epoch = epoch
        super().__init__(
            f"task {task_id}: lease lost, now held by {holder or 'nobody'} under epoch {epoch}"
        )


class AlreadyFinished(Exception):
    """The run was finished before: a lease is finished at most once (nothing of this second call
    was written)."""

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        super().__init__(f"run {run_id} was already finished")


class TaskMissing(Exception):
    """The task a lease points at no longer exists (deleted by hand)."""

    def __init__(self, task_id: int) -> None:
        self.task_id = task_id
        super().__init__(f"task {task_id} no longer exists")


class RunFailed(Exception):
    """Raise inside a `with` block to end the run as failed with a chosen cause, from code deep in
    the work (e.g. `raise RunFailed(ErrorCause.API_ERROR, "529 Overloaded")`). The block ends
    quietly; the failure is recorded like `run.fail(cause, detail)`."""

    def __init__(self, cause: ErrorCause | str, detail: str | None = None) -> None:
        self.cause = as_cause(cause)
        self.detail = detail
        super().__init__(f"{self.cause.value}: {detail}" if detail else self.cause.value)


def as_cause(cause: ErrorCause | str) -> ErrorCause:
    """The cause as the closed set's member; an unknown word is refused before anything is written."""
    try:
        return ErrorCause(cause)
    except ValueError:
        allowed = ", ".join(c.value for c in ErrorCause)
        raise ValueError(f"error: unknown cause {cause!r}; expected one of {allowed}") from None


@dataclass(frozen=True)
class Finish:
    """The answer to a terminal call (`acted`, `no_action`, `skip`, `fail`).

    `accepted` True: the owner-guarded final write matched the task (`completion_rows = 1`) and the
    task is now `status` (nobody holds it; `epoch` is the run's). False: the lease was lost (`completion_rows = 0`); the output was kept on
    the run but not applied to the task, and `holder`/`epoch` say who holds the task now (`holder`
    None: nobody, e.g. after an operator re-queue).
    """

    accepted: bool
    status: TaskStatus | None
    holder: str | None
    epoch: int


@dataclass(frozen=True)
class EffectRecorded:
    """The answer to recording a side effect: its `effects` row (the existing one when this run
    recorded the same key before) and whether this worker still held the lease. `lease_current`
    False: the effect ran under a stale token, probably twice."""

    id: int
    lease_current: bool
