"""lastword_runner: the runner side of the lastword contract for Python workers.

A worker claims a task under a fenced lease, heartbeats, records side effects in the outbox and
ends each run with exactly one terminal call — writing the same rows, byte for byte, as the Rust
crate `lastword-runner`, so the dashboard reads a Python fleet like any other (docs/contract.md).

    runner = Runner("sqlite:lastword.db", worker="py-1", lease=timedelta(seconds=30))
    run = runner.claim("reply_to_mention")
    if run is not None:
        with run:
            ...
            run.acted("replied to @ann")
"""

from ._async import AsyncRun, AsyncRunner
from ._backends import is_transient, sqlite_time
from ._clock import Clock, ManualClock, SystemClock
from ._dsn import Target, parse_dsn
from ._runner import Run, Runner, enqueue
from ._vocab import (
    TOKEN_TRIM_CHARS,
    AlreadyFinished,
    BlankMessage,
    EffectRecorded,
    ErrorCause,
    Finish,
    LostLease,
    RunFailed,
    Safety,
    Source,
    TaskMissing,
    TaskStatus,
    Tokens,
    trim_token,
)

__all__ = [
    "AlreadyFinished",
    "AsyncRun",
    "AsyncRunner",
    "BlankMessage",
    "Clock",
    "EffectRecorded",
    "ErrorCause",
    "Finish",
    "LostLease",
    "ManualClock",
    "Run",
    "RunFailed",
    "Runner",
    "Safety",
    "Source",
    "SystemClock",
    "TOKEN_TRIM_CHARS",
    "Target",
    "TaskMissing",
    "TaskStatus",
    "Tokens",
    "enqueue",
    "is_transient",
    "parse_dsn",
    "sqlite_time",
    "trim_token",
]
