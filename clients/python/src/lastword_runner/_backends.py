"""How a move's statements reach each database: one connection per runner, every move in its
own transaction begun the way the contract says (`BEGIN` on PostgreSQL through psycopg,
`BEGIN IMMEDIATE` on SQLite so a claim waits for the write lock instead of failing to upgrade),
and the parameter encodings the Rust runner's sqlx uses — above all SQLite's timestamp text,
which the dashboard compares as text.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import threading
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any, Protocol, TypeVar

from ._dsn import Target
from ._moves import Move, Payload, Result, Statement, payload_to_sqlite

T = TypeVar("T")


def sqlite_time(t: datetime) -> str:
    """RFC 3339 UTC text exactly as sqlx writes a `DateTime<Utc>` into SQLite
    (`to_rfc3339_opts(SecondsFormat::AutoSi, false)`): no fraction for whole seconds, else 3 or 6
    digits (whichever shows every non-zero digit), and `+00:00`. Any other spelling of the same
    instant would sort differently as text and the dashboard would misread leases."""
    if t.tzinfo is None:
        raise ValueError(f"a naive datetime cannot be written: {t!r} (the clock must be timezone-aware)")
    t = t.astimezone(timezone.utc)
    micros = t.microsecond
    if micros == 0:
        fraction = ""
    elif micros % 1000 == 0:
        fraction = f".{micros // 1000:03d}"
    else:
        fraction = f".{micros:06d}"
    return f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}{fraction}+00:00"


def _sqlite_param(value: Any) -> Any:
    if isinstance(value, datetime):
        return sqlite_time(value)
    if isinstance(value, Payload):
        return payload_to_sqlite(value.value)
    return value


def drive(move: Move[T], execute: Callable[[Statement], Result]) -> T:
    """Runs a move to its end, answering each statement with `execute`."""
    try:
        statement = next(move)
        while True:
            statement = move.send(execute(statement))
    except StopIteration as stop:
        answer: T = stop.value
        return answer


async def drive_async(move: Move[T], execute: Callable[[Statement], Awaitable[Result]]) -> T:
    try:
        statement = next(move)
        while True:
            statement = move.send(await execute(statement))
    except StopIteration as stop:
        answer: T = stop.value
        return answer


class Backend(Protocol):
    name: str

    def run(self, move: Move[T]) -> T: ...

    def close(self) -> None: ...


class SqliteBackend:
    """One SQLite connection in autocommit mode, so the transactions are exactly the ones the
    contract names (the sqlite3 module's implicit BEGIN would be a deferred one)."""

    name = "sqlite"

    def __init__(self, path: str) -> None:
        # The Rust store's settings: writers queue on the lock for up to 10 s instead of failing.
        self._conn = sqlite3.connect(path, isolation_level=None, timeout=10.0, check_same_thread=False)
        if path != ":memory:":
            self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = NORMAL")
        self._conn.execute("PRAGMA foreign_keys = ON")
        # One connection serves every thread of this runner (a heartbeat thread, asyncio's
        # worker threads); a transaction must not interleave with another.
        self._lock = threading.Lock()

    def run(self, move: Move[T]) -> T:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                answer = drive(move, self._execute)
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            return answer

    def _execute(self, statement: Statement) -> Result:
        params = {str(i): _sqlite_param(v) for i, v in enumerate(statement.params, start=1)}
        cursor = self._conn.execute(statement.sql, params)
        rows = cursor.fetchall() if cursor.description else []
        return Result(rows=rows, rowcount=cursor.rowcount)

    def close(self) -> None:
        self._conn.close()


@lru_cache(maxsize=64)
def _psycopg_sql(sql: str) -> str:
    """`$n` → `%(pn)s`: psycopg's placeholders, named so a parameter used twice is sent once."""
    return re.sub(r"\$(\d+)", r"%(p\1)s", sql.replace("%", "%%"))


def _psycopg_params(statement: Statement) -> dict[str, Any]:
    from psycopg.types.json import Jsonb

    return {
        f"p{i}": Jsonb(v.value) if isinstance(v, Payload) else v
        for i, v in enumerate(statement.params, start=1)
    }


APPLICATION_NAME = "lastword-runner-python"
# The settings the Rust store gives every PostgreSQL session (`PG_SESSION_SETTINGS`): no JIT for
# short index lookups.
SESSION_OPTIONS = "-c jit=off"


class PostgresBackend:
    """One psycopg connection in autocommit mode; each move is one explicit transaction
    (`conn.transaction()` sends `BEGIN` … `COMMIT`, or `ROLLBACK` when the move raises). A broken
    connection is replaced on the next move, as a pool would."""

    name = "postgres"

    def __init__(self, url: str) -> None:
        import psycopg

        self._psycopg = psycopg
        self._url = url
        self._conn = self._connect()
        self._lock = threading.Lock()

    def _connect(self) -> Any:
        return self._psycopg.connect(
            self._url, autocommit=True, application_name=APPLICATION_NAME, options=SESSION_OPTIONS
        )

    def run(self, move: Move[T]) -> T:
        with self._lock:
            if self._conn.closed:
                self._conn = self._connect()
            with self._conn.transaction():
                return drive(move, self._execute)

    def _execute(self, statement: Statement) -> Result:
        cursor = self._conn.execute(_psycopg_sql(statement.sql), _psycopg_params(statement))
        rows = cursor.fetchall() if cursor.description else []
        return Result(rows=rows, rowcount=cursor.rowcount)

    def close(self) -> None:
        self._conn.close()


def open_backend(target: Target) -> Backend:
    if target.backend == "postgres":
        return PostgresBackend(target.location)
    return SqliteBackend(target.location)


class AsyncBackend(Protocol):
    name: str

    async def run(self, move: Move[T]) -> T: ...

    async def close(self) -> None: ...


class AsyncPostgresBackend:
    """psycopg's async connection, opened on first use (a constructor cannot await)."""

    name = "postgres"

    def __init__(self, url: str) -> None:
        import psycopg

        self._psycopg = psycopg
        self._url = url
        self._conn: Any = None
        self._lock = asyncio.Lock()

    async def run(self, move: Move[T]) -> T:
        async with self._lock:
            if self._conn is None or self._conn.closed:
                self._conn = await self._psycopg.AsyncConnection.connect(
                    self._url, autocommit=True, application_name=APPLICATION_NAME, options=SESSION_OPTIONS
                )
            async with self._conn.transaction():
                return await drive_async(move, self._execute)

    async def _execute(self, statement: Statement) -> Result:
        cursor = await self._conn.execute(_psycopg_sql(statement.sql), _psycopg_params(statement))
        rows = await cursor.fetchall() if cursor.description else []
        return Result(rows=rows, rowcount=cursor.rowcount)

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()


class AsyncSqliteBackend:
    """The sync SQLite backend in a worker thread: sqlite3 has no async interface, and a move is
    a few statements on a local file."""

    name = "sqlite"

    def __init__(self, path: str) -> None:
        self._sync = SqliteBackend(path)

    async def run(self, move: Move[T]) -> T:
        return await asyncio.to_thread(self._sync.run, move)

    async def close(self) -> None:
        self._sync.close()


def open_async_backend(target: Target) -> AsyncBackend:
    if target.backend == "postgres":
        return AsyncPostgresBackend(target.location)
    return AsyncSqliteBackend(target.location)


# SQLSTATEs worth retrying as they are (the Rust runner's `is_transient`): serialization failure,
# deadlock, lock not available, admin shutdown, connection exceptions.
TRANSIENT_SQLSTATES = frozenset({"40001", "40P01", "55P03", "57P01", "08000", "08003", "08006"})


def is_transient(exc: BaseException) -> bool:
    """True for database failures worth retrying as they are: lock contention (SQLite busy or
    locked, PostgreSQL serialization failures, deadlocks) or a dropped connection. Every move
    rolls back on error, so retrying the same call is safe."""
    if isinstance(exc, sqlite3.OperationalError):
        code = getattr(exc, "sqlite_errorcode", None)
        # The primary result code is the extended code's low byte: 5 BUSY, 6 LOCKED.
        return code is not None and code & 0xFF in (5, 6)
    try:
        import psycopg
    except ImportError:
        return False
    if isinstance(exc, psycopg.Error):
        if exc.sqlstate is None:
            # No answer from the server at all: the connection is gone (replaced on the next move).
            return isinstance(exc, psycopg.OperationalError)
        return exc.sqlstate in TRANSIENT_SQLSTATES
    return False
