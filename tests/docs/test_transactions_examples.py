"""docs/transactions.md's examples, run as the page says (`tests/docs/doc_examples.py`).

The application's `tickets` table (`examples/desk/tables.py`'s) holds ticket 42 of the example's session, and
`ticket.escalated` is declared. The SQL runs on the application's asyncpg connection and the Python with the
names the page gives it, each in the session's stream as `ticket.escalated` afterwards, ticket 42 escalated;
the command goes through the HTTP door; the listener is saved and simulated through the door once the page's
capture is in place and ticket 42's priority has moved, and must take that change. The page's kit test of the desk
runs under a bare `pytest`, as its reader would run it.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

from examples.desk.tables import TABLE
from orchestrator.client import Client
from tests.docs.doc_examples import TEST_FILE, Example, examples_of, read_page, with_session

PAGE = "transactions.md"
ROOT = Path(__file__).resolve().parents[2]
TICKET = 42
ESCALATED = {"type": "object", "properties": {"priority": {"type": "integer"}}, "required": ["priority"]}


@pytest.fixture
async def tickets(door: Client, app_conn: asyncpg.Connection, session_id: str) -> asyncpg.Connection:
    """The application's connection, its table holding ticket 42 of the session, `ticket.escalated` declared."""
    await app_conn.execute(TABLE)
    await app_conn.execute(
        "INSERT INTO tickets (id, session_id, title) VALUES ($1, $2, 'printer jammed')", TICKET, session_id
    )
    await door.save_event_type("ticket.escalated", ESCALATED)
    return app_conn


@pytest.fixture
async def sessions(fresh_db: str) -> AsyncIterator[async_sessionmaker[Any]]:
    engine = create_async_engine(fresh_db.replace("postgresql://", "postgresql+asyncpg://", 1))
    yield async_sessionmaker(engine)
    await engine.dispose()


def test_every_block_of_the_page_is_an_example_run_here_or_a_marked_fragment() -> None:
    examples, problems = read_page(PAGE)
    assert not problems, "\n".join(problems)
    kinds = Counter(example.kind for example in examples)
    assert kinds == {"python": 3, "sql": 1, "command": 1, "listener": 1, "test_file": 1}, (
        f"the page's examples changed: {kinds}"
    )


async def run_python(example: Example, names: dict[str, Any]) -> None:
    """A block as the page shows it, awaited where it awaits at its top level, with `names` defined."""
    code = compile(example.block.text, example.block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    awaitable = eval(code, dict(names))  # the page's own text, the test's to run
    if awaitable is not None:
        await awaitable


@pytest.mark.parametrize("example", examples_of(PAGE, "python", "sql"), ids=lambda e: e.id)
async def test_an_emit_in_the_applications_transaction_escalates_the_ticket_with_its_event(
    door: Client,
    tickets: asyncpg.Connection,
    sessions: async_sessionmaker[Any],
    session_id: str,
    example: Example,
) -> None:
    if example.kind == "sql":
        await tickets.execute(with_session(example.block.text, session_id))
    else:
        names = {"conn": tickets, "sessions": sessions, "client": door, "session_id": session_id, "ticket": TICKET}
        await run_python(example, names)
    events = (await door.list_session_events(session_id, types=["ticket.escalated"]))["events"]
    assert [e["data"] for e in events][:1] == [{"priority": 1}], f"{example.block.where}: emitted {events}"
    priority = await tickets.fetchval("SELECT priority FROM tickets WHERE id = $1", TICKET)
    assert priority == 1, f"{example.block.where}: ticket {TICKET} has priority {priority}"


@pytest.mark.parametrize("example", examples_of(PAGE, "command"), ids=lambda e: e.id)
async def test_a_command_succeeds_through_the_door(
    door: Client, tickets: asyncpg.Connection, session_id: str, example: Example
) -> None:
    reply = await door.command(example.block.value(session_id))
    assert reply["status"] == "success", f"{example.block.where}: answered {reply}"


@pytest.mark.parametrize("example", examples_of(PAGE, "listener"), ids=lambda e: e.id)
async def test_a_listener_on_a_captured_table_takes_the_change_it_is_about(
    door: Client, tickets: asyncpg.Connection, session_id: str, example: Example
) -> None:
    (capture,) = examples_of(PAGE, "command")
    assert (await door.command(capture.block.value(session_id)))["status"] == "success"
    await tickets.execute("UPDATE tickets SET title = 'printer still jammed' WHERE id = $1", TICKET)
    # The priority with another column: `changed` is ["priority", "title"].
    await tickets.execute("UPDATE tickets SET priority = 1, title = 'printer on fire' WHERE id = $1", TICKET)
    body = example.block.value(session_id)
    saved = await door.command({"command": "save_listener", "listener": body})
    assert saved["status"] == "success", f"{example.block.where}: save_listener answered {saved}"
    tried = await door.command({"command": "simulate_listener", "session_id": session_id, "listener": body})
    assert tried["status"] == "success", f"{example.block.where}: simulate_listener answered {tried}"
    assert tried["matched"] == 1, f"{example.block.where}: took {tried['matched']} of the two updates, not one"


# A bare pytest run of the page's test file: an embedded PostgreSQL and the test server for each of its tests.
PYTEST_SECONDS = 180


@pytest.mark.timeout(PYTEST_SECONDS + 30)
@pytest.mark.parametrize("example", examples_of(PAGE, "test_file"), ids=lambda e: e.id)
def test_the_pages_kit_test_passes_as_its_reader_runs_it(tmp_path: Path, example: Example) -> None:
    """The page's test of the desk, written to a file of its own and run by a bare `pytest` (the kit's plugin from
    the installed entry point), with the repository's folder importable as the page says: a ticket saved through
    SQLAlchemy's ORM and one written with asyncpg, each in the app's transaction, each reaching its run."""
    match = TEST_FILE.match(example.block.text)
    assert match is not None
    (tmp_path / match.group(1)).write_text(example.block.text, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORCHESTRATOR_", "PYTEST_"))}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", match.group(1)],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=PYTEST_SECONDS,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout, done.stdout
    assert "warning" not in done.stdout.lower(), done.stdout
