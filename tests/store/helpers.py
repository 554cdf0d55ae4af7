"""Small helpers the store contract tests share: run a command and insist on its outcome."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from orchestrator.platform import Platform
from orchestrator.store.postgres import PostgresStore

# The tables a command's changes land in: what the tests that a refused command changes nothing compare.
STATE_TABLES = (
    "sessions",
    "events",
    "objects",
    "thread_items",
    "listener_versions",
    "listeners",
    "listener_switches",
    "listener_pauses",
    "schedules",
    "executions",
    "replays",
    "event_types",
    "graphs",
    "api_keys",
    "key_passes",
    "session_retention",
)


async def ok(platform: Platform, command: str, **args: Any) -> dict[str, Any]:
    reply = await platform.command({"command": command, **args})
    assert reply["status"] == "success", reply
    return reply


async def refused(platform: Platform, code: str, field: str | None, command: str, **args: Any) -> dict[str, Any]:
    reply = await platform.command({"command": command, **args})
    assert reply["status"] == "error", reply
    assert reply["error"] == code, reply
    if field is not None:
        assert field in reply["message"], reply
    return reply


async def all_events(platform: Platform, session_id: str) -> list[dict[str, Any]]:
    reply = await ok(platform, "list_session_events", session_id=session_id, limit=1000)
    return list(reply["events"])


@asynccontextmanager
async def write_held_open(platform: Platform, session_id: str, alias: str) -> AsyncIterator[int]:
    """Append an `object.written` event in a transaction that stays open for the block; answer its id.

    The transaction holds the session's row, so the session's other writers queue behind it while other
    sessions draw later ids and commit: the out-of-order commit every reader of the stream must survive. It
    commits when the block ends (rolls back if the block raised), so no failing test leaves the row locked.
    """
    store = platform.store
    assert isinstance(store, PostgresStore)
    async with store.transaction() as conn:
        await store._locked_session(conn, session_id, require_open=True)
        event = await store._append(conn, session_id, "object.written", alias=alias)
        yield event.id
