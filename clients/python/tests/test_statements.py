"""The Python runner sends the Rust runner's statements, character for character: this reads
`runner/src/sql.rs` and `docs/contract.md` and fails when the copy in `_sql.py` drifts from
either. Also the DSN forms the dashboard's `DATABASE_URL` accepts.
"""

from __future__ import annotations

import re

import pytest

from conftest import REPO
from lastword_runner import Target, parse_dsn
from lastword_runner._sql import ALL


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
        found[(module if name in ("CLAIM_CANDIDATE", "BEGIN") else "") + name] = text
    return found


def test_statements_match_the_rust_runner() -> None:
    rust = rust_statements()
    assert set(ALL) == {k for k in rust if not k.endswith("BEGIN")}, "the same statements, by name"
    for name, text in ALL.items():
        assert text == rust[name], f"{name} differs from runner/src/sql.rs"
    assert (rust["postgres::BEGIN"], rust["sqlite::BEGIN"]) == ("BEGIN", "BEGIN IMMEDIATE")


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
