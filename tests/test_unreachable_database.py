"""A database URL that cannot be reached is named, with what to do, by every command that needs the database:
never a bare `[Errno 2] No such file or directory`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.store.connection import database_place

CLI = str(Path(sys.executable).parent / "orchestrator")


def test_a_url_names_its_socket_or_its_host() -> None:
    assert database_place("postgresql://postgres:@/postgres?host=/x/pg/") == "socket /x/pg/.s.PGSQL.5432"
    assert database_place("postgresql://u@db.example:6432/app") == "host db.example:6432"
    assert database_place("postgresql:///app") == "host localhost:5432"


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["dev"], 1),
        (["plan", "--app", "examples.inbound.app"], 2),
        (["call", "--local", '{"command": "list_listeners"}'], 3),
        # The same door, the same exit code and line (they printed a traceback and exited 1).
        (["status", "--local", "--session", "ses_x"], 3),
        (["events", "--local", "--session", "ses_x"], 3),
        (["keys", "list", "--local"], 3),
    ],
)
def test_a_command_names_the_socket_it_cannot_reach_and_what_to_do(tmp_path: Path, args: list[str], code: int) -> None:
    gone = tmp_path / ".orchestrator" / "postgres"
    env = {
        **os.environ,
        "ORCHESTRATOR_DATABASE_URL": f"postgresql://postgres:@/postgres?host={gone}",
        "PYTHONPATH": str(Path(__file__).parents[1]),
    }
    done = subprocess.run([CLI, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == code, done.stderr
    assert f"cannot reach PostgreSQL at the socket {gone}/.s.PGSQL.5432" in done.stderr, done.stderr
    assert "ORCHESTRATOR_DATABASE_URL" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
