"""Which database a DSN names, read the way the dashboard reads `DATABASE_URL`
(`store/src/connect.rs`, `DbTarget::from_url`), so the same string works for both.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """`backend` is "postgres" or "sqlite"; `location` is the URL for PostgreSQL, the file path
    (or ":memory:") for SQLite."""

    backend: str
    location: str


def parse_dsn(dsn: str) -> Target:
    """`postgres://…`/`postgresql://…` select PostgreSQL; `sqlite:path`, `sqlite://path`,
    `sqlite:///abs/path` (a query string is ignored) select a SQLite file; `sqlite::memory:` or an
    empty path a private in-memory database (tests only: it is this runner's alone)."""
    url = dsn.strip()
    scheme = url.split(":", 1)[0]
    if scheme in ("postgres", "postgresql"):
        return Target("postgres", url)
    if scheme == "sqlite":
        # The same trimming as Rust's trim_start_matches("sqlite:").trim_start_matches("//"):
        # each strips the prefix as many times as it repeats.
        rest = url
        while rest.startswith("sqlite:"):
            rest = rest[len("sqlite:") :]
        while rest.startswith("//"):
            rest = rest[2:]
        path = rest.split("?", 1)[0]
        if path in ("", ":memory:"):
            return Target("sqlite", ":memory:")
        return Target("sqlite", path)
    raise ValueError(
        f"unsupported database URL scheme {scheme!r}; "
        "use postgres://user@host:port/db or sqlite:path/to/file.db"
    )
