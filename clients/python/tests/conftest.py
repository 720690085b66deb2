"""Fresh, migrated databases for every test, on SQLite and PostgreSQL, the way the Rust suites
get theirs (`store/src/testing.rs`): a temporary SQLite file with `migrations/sqlite/`, or a new
PostgreSQL database `lastword_t_<unix seconds>_<random>` (the prefix and timestamp let
`scripts/test` sweep what an interrupted run left) with `migrations/postgres/`, dropped afterwards.

PostgreSQL comes from TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres).
Unreachable, its cases are skipped with the reason shown — unless LASTWORD_REQUIRE_POSTGRES=1
(CI), which makes them fail.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

REPO = Path(__file__).resolve().parents[3]
MIGRATIONS = REPO / "migrations"
DEFAULT_POSTGRES = "postgres://postgres@127.0.0.1:5432/postgres"
BACKENDS = ["sqlite", "postgres"]


def migration_files(dialect: str) -> list[Path]:
    files = sorted((MIGRATIONS / dialect).glob("*.sql"))
    assert files, f"no migrations in {MIGRATIONS / dialect}"
    return files


def parse_time(value: Any) -> datetime | None:
    """A timestamp column as an aware datetime: PostgreSQL's timestamptz, or SQLite's RFC 3339 text."""
    if value is None or isinstance(value, datetime):
        return value
    parsed = datetime.fromisoformat(value)
    assert parsed.tzinfo is not None, f"timestamp without offset: {value!r}"
    return parsed.astimezone(timezone.utc)


TIME_COLUMNS = {"lease_expires_at", "created_at", "updated_at", "claimed_at", "heartbeat_at", "finished_at", "compensated_at"}


class Database:
    """A test database: its DSN for the runner, and plain reads of the contract tables through a
    connection of its own (what the dashboard would read)."""

    def __init__(self, backend: str, dsn: str, connection: Any) -> None:
        self.backend = backend
        self.dsn = dsn
        self.conn = connection

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.backend == "postgres" else sql

    def rows(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        cursor = self.conn.execute(self._sql(sql), params)
        names = [d[0] for d in cursor.description]
        return [
            {n: (parse_time(v) if n in TIME_COLUMNS else v) for n, v in zip(names, row)} for row in cursor.fetchall()
        ]

    def raw(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Rows exactly as stored (SQLite's timestamp text unparsed)."""
        return list(self.conn.execute(self._sql(sql), params).fetchall())

    def execute(self, sql: str, *params: Any) -> int:
        return int(self.conn.execute(self._sql(sql), params).rowcount)

    def task(self, task_id: int) -> dict[str, Any]:
        (row,) = self.rows("SELECT * FROM tasks WHERE id = ?", task_id)
        if self.backend == "sqlite":
            import json

            row["payload"] = json.loads(row["payload"])
        return row

    def runs(self, task_id: int) -> list[dict[str, Any]]:
        return self.rows("SELECT * FROM runs WHERE task_id = ? ORDER BY lease_epoch, id", task_id)

    def effects(self, task_id: int) -> list[dict[str, Any]]:
        return self.rows("SELECT * FROM effects WHERE task_id = ? ORDER BY id", task_id)

    def count(self, table: str) -> int:
        return int(self.raw(f"SELECT COUNT(*) FROM {table}")[0][0])


_postgres_unreachable: str | None = None


def postgres_admin_url() -> str:
    return os.environ.get("TEST_DATABASE_URL", "").strip() or DEFAULT_POSTGRES


def require_postgres() -> bool:
    return os.environ.get("LASTWORD_REQUIRE_POSTGRES") == "1"


def postgres_or_skip() -> psycopg.Connection[Any]:
    """An admin connection, or a skip (a failure when PostgreSQL is required)."""
    global _postgres_unreachable
    url = postgres_admin_url()
    if _postgres_unreachable is None:
        try:
            return psycopg.connect(url, autocommit=True, connect_timeout=5)
        except psycopg.OperationalError as e:
            _postgres_unreachable = f"PostgreSQL unreachable at {redact(url)}: {str(e).strip()}"
    if require_postgres():
        pytest.fail(f"LASTWORD_REQUIRE_POSTGRES=1 but {_postgres_unreachable}", pytrace=False)
    pytest.skip(f"SKIPPED (PostgreSQL): {_postgres_unreachable}; set TEST_DATABASE_URL to run these cases")


def redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Iterator[Database]:
    path = tmp_path / "lastword.db"
    conn = sqlite3.connect(path, isolation_level=None)
    # WAL as the dashboard and the runner open it; no fsync while migrating a throwaway file.
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = OFF")
    for file in migration_files("sqlite"):
        conn.executescript(file.read_text())
    yield Database("sqlite", f"sqlite:{path}", conn)
    conn.close()


@pytest.fixture
def postgres_db() -> Iterator[Database]:
    admin = postgres_or_skip()
    name, url = _new_postgres_database(admin)
    conn = psycopg.connect(url, autocommit=True)
    try:
        for file in migration_files("postgres"):
            conn.execute(file.read_text().encode())
        yield Database("postgres", url, conn)
    finally:
        conn.close()
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def _new_postgres_database(admin: psycopg.Connection[Any]) -> tuple[str, str]:
    name = f"lastword_t_{int(time.time())}_{secrets.token_hex(4)}"
    admin.execute(f'CREATE DATABASE "{name}"')
    return name, urlunsplit(urlsplit(postgres_admin_url())._replace(path=f"/{name}"))


@pytest.fixture
def blank_postgres_db() -> Iterator[str]:
    """The URL of a new, empty PostgreSQL database (nothing migrated), dropped afterwards: for
    tests that let `lastword migrate` create the schema, or build a legacy one first."""
    admin = postgres_or_skip()
    name, url = _new_postgres_database(admin)
    try:
        yield url
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@pytest.fixture(params=BACKENDS)
def blank_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The DSN of an empty database on each backend (a SQLite file not created yet, or
    `blank_postgres_db`)."""
    if request.param == "sqlite":
        yield f"sqlite:{tmp_path / 'lastword.db'}"
    else:
        url: str = request.getfixturevalue("blank_postgres_db")
        yield url


@pytest.fixture(autouse=True)
def backend_property(request: pytest.FixtureRequest, record_property: Any) -> None:
    """Tags each test with the backend it runs on, so scripts/test-python can count the
    PostgreSQL cases (and notice when they were skipped) from the JUnit report."""
    callspec = getattr(request.node, "callspec", None)
    params = callspec.params if callspec is not None else {}
    backend = params.get("db") or params.get("backend") or params.get("blank_db")
    for candidate in BACKENDS:
        if backend is None and {f"{candidate}_db", f"blank_{candidate}_db"} & set(request.fixturenames):
            backend = candidate
    record_property("backend", backend or "none")


@pytest.fixture(params=BACKENDS)
def db(request: pytest.FixtureRequest) -> Database:
    fixture = "sqlite_db" if request.param == "sqlite" else "postgres_db"
    database: Database = request.getfixturevalue(fixture)
    return database
