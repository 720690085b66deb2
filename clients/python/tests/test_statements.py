"""The Python runner sends the Rust runner's statements, character for character: this reads
`runner/src/sql.rs` and `docs/contract.md` and fails when the copy in `_sql.py` drifts from
either. Also the DSN forms the dashboard's `DATABASE_URL` accepts.
"""

from __future__ import annotations

import re

import pytest

from conftest import REPO
from lastword_runner import Target, parse_dsn
from lastword_runner._sql import ALL, POSTGRES_BEGIN, SQLITE_BEGIN


def rust_statements() -> dict[str, str]:
    source = (REPO / "runner" / "src" / "sql.rs").read_text()
    found: dict[str, str] = {}
    module = ""
    for line_match in re.finditer(r'pub mod (\w+) \{|pub const (\w+): &str =\s*"((?:[^"\\]|\\.)*)"', source):
        if line_match.group(1):
            module = line_match.group(1) + "::"
            continue
        name, text = line_match.group(2), line_match.group(3)
        assert "\\" not in text, f"{name}: an escape the parser does not read"
        found[(module if name == "CLAIM_CANDIDATE" else "") + name] = text
    return found


def rust_begin_write() -> dict[str, str]:
    """How the Rust side begins a write transaction per backend: `Backend::begin_write` in
    `store/src/connect.rs`, the one place the runner and the store take it from."""
    source = (REPO / "store" / "src" / "connect.rs").read_text()
    body = source[source.index("fn begin_write") :]
    body = body[: body.index("\n    }\n")]
    return dict(re.findall(r'Backend::(\w+) => "([^"]*)"', body))


def test_statements_match_the_rust_runner() -> None:
    rust = rust_statements()
    assert set(ALL) == set(rust), "the same statements, by name"
    for name, text in ALL.items():
        assert text == rust[name], f"{name} differs from runner/src/sql.rs"
    assert rust_begin_write() == {"Postgres": POSTGRES_BEGIN, "Sqlite": SQLITE_BEGIN}


def test_the_contract_document_quotes_every_statement() -> None:
    # White space aside, as the Rust runner's own check reads it.
    squash = " ".join
    document = squash((REPO / "docs" / "contract.md").read_text().split())
    for name, text in ALL.items():
        assert squash(text.split()) in document, f"{name} is not quoted in docs/contract.md"


@pytest.mark.parametrize(
    "dsn, target",
    [
        ("postgres://u@h:5432/db", Target("postgres", "postgres://u@h:5432/db")),
        ("postgresql://u@h/db", Target("postgres", "postgresql://u@h/db")),
        ("sqlite:x/y.db?mode=rwc", Target("sqlite", "x/y.db")),
        ("sqlite://relative.db", Target("sqlite", "relative.db")),
        ("sqlite:///abs/path.db", Target("sqlite", "/abs/path.db")),
        ("sqlite:lastword.db", Target("sqlite", "lastword.db")),
        ("sqlite::memory:", Target("sqlite", ":memory:")),
    ],
)
def test_dsns_read_like_database_url(dsn: str, target: Target) -> None:
    assert parse_dsn(dsn) == target


def test_other_schemes_are_refused() -> None:
    with pytest.raises(ValueError, match="unsupported database URL scheme 'mysql'"):
        parse_dsn("mysql://h/db")
