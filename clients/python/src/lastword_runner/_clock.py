"""Where a runner's "now" comes from. Lease arithmetic is all about time, so tests drive a
`ManualClock` instead of sleeping (the Rust runner's `Clock` trait, `runner/src/clock.rs`);
production uses `SystemClock`. Every timestamp the runner writes comes from here, never from the
database's own clock.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Protocol


class Clock(Protocol):
    """A source of the current time: timezone-aware, microsecond precision (what PostgreSQL
    keeps, so a value read back equals the one written)."""

    def now(self) -> datetime: ...


class SystemClock:
    """The wall clock in UTC (Python's datetime already stops at microseconds)."""

    def now(self) -> datetime:
        return datetime.now(timezone.utc)


class ManualClock:
    """A clock that moves only when told to. One instance may be shared by several runners, so a
    test advances them all at once."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("ManualClock needs a timezone-aware start time")
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, by: timedelta) -> None:
        with self._lock:
            self._now += by

    def set(self, to: datetime) -> None:
        if to.tzinfo is None:
            raise ValueError("ManualClock needs a timezone-aware time")
        with self._lock:
            self._now = to
