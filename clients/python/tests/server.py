"""The real dashboard for the Python tests: the `lastword` binary (LASTWORD_BIN, default
`target/debug/lastword` in the repository) migrating a database and serving it on a free loopback
port, read through its JSON API (docs/api.md) — so a test checks what an on-call engineer would
see, not the test's idea of it.

The binary is built by `cargo test`, which `scripts/test` runs before this suite. Missing, the
server-backed cases are skipped with the reason shown, unless LASTWORD_REQUIRE_SERVER=1 (set by
`scripts/test` whenever PostgreSQL is required, i.e. in CI), which makes them fail.

The server must apply its own migrations (it records them in `_sqlx_migrations` and refuses a
database whose `tasks` table it did not create), so these tests start from an empty database
(`blank_db`, `blank_postgres_db` in conftest.py) and run `lastword migrate` on it, never from
the raw-SQL fixtures `sqlite_db` / `postgres_db`.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

REPO = Path(__file__).resolve().parents[3]
SKIP_PREFIX = "SKIPPED (server)"
T = TypeVar("T")
_missing_bin_checked = False


def lastword_bin() -> Path:
    """The server binary, or a skip (a failure when LASTWORD_REQUIRE_SERVER=1)."""
    configured = os.environ.get("LASTWORD_BIN", "").strip()
    path = Path(configured) if configured else REPO / "target" / "debug" / "lastword"
    if not path.is_absolute():
        path = REPO / path
    # The file may be mid-replacement by a rebuild: give it a few seconds to reappear, once per
    # session (a binary that is simply absent then skips every case at once).
    global _missing_bin_checked
    for _ in range(1 if _missing_bin_checked else 10):
        if path.is_file() and os.access(path, os.X_OK):
            return path
        time.sleep(0.3)
    _missing_bin_checked = True
    reason = f"no lastword binary at {path} (build it with `cargo build -p lastword`, or set LASTWORD_BIN)"
    if os.environ.get("LASTWORD_REQUIRE_SERVER") == "1":
        pytest.fail(f"LASTWORD_REQUIRE_SERVER=1 but {reason}", pytrace=False)
    pytest.skip(f"{SKIP_PREFIX}: {reason}")


def _env(dsn: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LASTWORD_") and k != "DATABASE_URL"}
    env["DATABASE_URL"] = dsn
    env["RUST_LOG"] = "warn"
    return env


def try_migrate(dsn: str) -> subprocess.CompletedProcess[str]:
    """`lastword migrate`: what `lastword serve` does to the schema before serving."""
    return subprocess.run([str(lastword_bin()), "migrate"], env=_env(dsn), capture_output=True, text=True, timeout=60)


def migrate(dsn: str) -> None:
    done = try_migrate(dsn)
    assert done.returncode == 0, f"lastword migrate failed:\n{done.stdout}\n{done.stderr}"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Dashboard:
    """A running `lastword serve`, read over HTTP."""

    def __init__(self, base: str, process: "subprocess.Popen[str]") -> None:
        self.base = base
        self.process = process

    def get(self, path: str) -> Any:
        try:
            with urllib.request.urlopen(self.base + path, timeout=10) as response:
                return json.load(response)
        except urllib.error.HTTPError as e:
            raise AssertionError(f"GET {path}: {e.code} {e.read().decode(errors='replace')}") from e

    def runs(self) -> list[dict[str, Any]]:
        """Every run the dashboard lists (all pages of `GET /api/v1/runs`), oldest claim first."""
        rows: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page = self.get("/api/v1/runs?limit=500" + (f"&after={cursor}" if cursor else ""))
            rows.extend(page["runs"])
            cursor = page["next"]
            if cursor is None:
                return sorted(rows, key=lambda r: (r["claimed_at"], r["id"]))

    def settle(self, read: Callable[[], T], expected: T, timeout: float = 5.0) -> T:
        """`read()` again until it answers `expected` or `timeout` passes; the last answer. A
        runner's write is not in the API's answers at once: reads are shared until the server's
        change-log reader (one poll every 100 ms) has seen the write (docs/live.md, "Shared
        reads"), so a test that writes and then reads must allow for that."""
        deadline = time.monotonic() + timeout
        answer = read()
        while answer != expected and time.monotonic() < deadline:
            time.sleep(0.05)
            answer = read()
        return answer

    def task(self, task_id: int) -> dict[str, Any]:
        task: dict[str, Any] = self.get(f"/api/v1/tasks/{task_id}")
        return task


@contextmanager
def serve(dsn: str, *extra_args: str) -> Iterator[Dashboard]:
    """`lastword serve` on `dsn` (local mode, a free loopback port) until /readyz says ready."""
    binary = lastword_bin()
    for _ in range(3):  # another process may take the free port between our check and the bind
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        # The log goes to a file, not a pipe: nobody reads a pipe while the server runs, and a
        # full one would stall it.
        log_file = tempfile.TemporaryFile(mode="w+")
        process = subprocess.Popen(
            [str(binary), "serve", "--addr", f"127.0.0.1:{port}", *extra_args],
            env=_env(dsn), stdout=log_file, stderr=subprocess.STDOUT, text=True,
        )
        deadline = time.monotonic() + 30
        ready = False
        while time.monotonic() < deadline and process.poll() is None:
            try:
                with urllib.request.urlopen(base + "/readyz", timeout=2) as response:
                    ready = response.status == 200
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if ready:
                break
            time.sleep(0.05)
        if ready:
            break
        process.kill()
        process.wait()
        log_file.seek(0)
        log = log_file.read()
        log_file.close()
        if "binding" not in log:  # anything but a lost race for the port is a real failure
            raise AssertionError(f"lastword serve did not become ready on {base}:\n{log}")
    else:
        raise AssertionError("lastword serve found no free port in three tries")
    try:
        yield Dashboard(base, process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log_file.close()
