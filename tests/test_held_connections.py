"""The connections the door's deadlines may close: those its work itself took, on a pool a door uses. A task the
work starts keeps its own, and the engine's acquires are not noted at all (its pools take no hook)."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import httpx
import pytest

from orchestrator.config import Settings
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.door.deadlines import Deadlines, Missed
from orchestrator.platform import Platform
from orchestrator.store.held_connections import note_lent


async def test_a_task_the_work_starts_keeps_its_connection_when_the_work_is_cut(fresh_db: str) -> None:
    """A command that starts a task (one that runs on after it, holding a connection of its own) and is then cut
    loose from the database: its own connection is closed, the task's is not."""
    pool = await asyncpg.create_pool(fresh_db, min_size=2, max_size=2, setup=note_lent)
    try:
        holding = asyncio.Event()
        may_go_on = asyncio.Event()
        started: list[asyncio.Task[int]] = []

        async def on_its_own() -> int:
            async with pool.acquire() as conn:
                holding.set()
                await may_go_on.wait()
                return int(await conn.fetchval("SELECT 1"))

        async def command() -> None:
            async with pool.acquire():
                started.append(asyncio.ensure_future(on_its_own()))
                await holding.wait()
                await asyncio.Event().wait()  # as a statement on a database that answers nothing

        deadlines = Deadlines()
        missed = await deadlines.run(command(), 0.2)
        assert missed == Missed(0.2, reached=True, on_database=True), "the command's own connection was noted"
        # Cut at once, as at shutdown: cancelled, and the connections it took closed.
        async with asyncio.timeout(10):
            await deadlines.close()
        may_go_on.set()
        async with asyncio.timeout(10):
            assert await started[0] == 1, "the task it started still has its connection"
    finally:
        await pool.close()


async def test_only_a_door_platform_notes_the_connections_its_pool_lends(
    fresh_db: str, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine's acquires (its reads and writes, a command in process) take no hook; the door's commands do."""
    calls: list[Any] = []

    async def counted(conn: Any) -> None:
        calls.append(conn)
        await note_lent(conn)

    monkeypatch.setattr("orchestrator.store.postgres.note_lent", counted)
    engine = await Platform.connect(settings, fresh_db, door=False)
    try:
        opened = await engine.command({"command": "open_session"})
        sid = opened["session"]["id"]
        await engine.store.sessions_behind()
        await engine.store.routed_events(sid)
        await engine.store.lanes.stale_lanes()
        await engine.store.wake_rearm(sid)
        assert calls == [], "the engine's acquires take no hook"
        with pytest.raises(ValueError, match="door=False"):
            create_app(engine, settings)
    finally:
        await engine.close()

    door = await Platform.connect(settings, fresh_db)
    try:
        async with (
            serve_api(create_app(door, settings), "127.0.0.1", 0) as url,
            httpx.AsyncClient(base_url=url) as http,
        ):
            answer = await http.post("/v1/commands", json={"command": "list_session_events", "session_id": sid})
            assert answer.status_code == 200, answer.text
        assert calls, "the door's commands are noted"
    finally:
        await door.close()
