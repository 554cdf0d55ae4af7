"""The platform's SQL names its schema: no connection of the platform sets a search path (so any pooler on its
default settings hands it a server connection that works), and a platform in another schema
(ORCHESTRATOR_DATABASE_SCHEMA) works whole there and leaves `orchestrator` alone."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from orchestrator.config import Settings
from orchestrator.core.schema_names import in_schema
from orchestrator.platform import Platform
from orchestrator.store import postgres
from orchestrator.transactional import emit
from tests.conftest import OTHER_SCHEMA
from tests.store.helpers import all_events, ok
from tests.store.test_lane_store_contract import PgWorld, address, fire, listener, snapshot

SEARCH_PATH = "SELECT setting, source FROM pg_settings WHERE name = 'search_path'"


async def test_no_connection_of_the_platform_sets_a_search_path(
    fresh_db: str, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neither as a startup parameter (`server_settings`, `options`) nor by `SET`: the server's default, as a
    pooler's `DISCARD ALL` leaves it, is what every statement of the platform runs under."""
    found: list[tuple[str, str]] = []
    connect = asyncpg.connect

    async def connect_and_look(*args: Any, **kwargs: Any) -> asyncpg.Connection:
        conn = await connect(*args, **kwargs)
        found.append(tuple(await conn.fetchrow(SEARCH_PATH)))  # type: ignore[arg-type]
        return conn

    monkeypatch.setattr(postgres.asyncpg, "connect", connect_and_look)
    platform = await Platform.connect(settings, fresh_db)
    monkeypatch.undo()
    try:
        assert found == [('"$user", public', "default")], "the connection that migrates"
        sid = (await ok(platform, "open_session"))["session"]["id"]
        await ok(platform, "write_object", session_id=sid, alias="notes/1", value={"type": "note"})
        pool = platform.store.pool
        async with pool.acquire() as one, pool.acquire() as two:
            for conn in (one, two):
                assert tuple(await conn.fetchrow(SEARCH_PATH)) == ('"$user", public', "default")
    finally:
        await platform.close()


async def test_a_platform_in_another_schema_works_there_whole_and_leaves_orchestrator_alone(
    platform_elsewhere: Platform, elsewhere_db: str
) -> None:
    platform = platform_elsewhere
    app = await asyncpg.connect(elsewhere_db)
    try:
        await app.execute("CREATE TABLE public.tickets (id bigint PRIMARY KEY, session text, title text)")
        assert await app.fetchval("SELECT to_regnamespace('orchestrator') IS NULL"), "no schema of the default's name"
        bodies = await app.fetch(
            "SELECT proname, prosrc FROM pg_proc WHERE pronamespace = $1::regnamespace", OTHER_SCHEMA
        )
        assert len(bodies) > 50
        assert [r["proname"] for r in bodies if in_schema(r["prosrc"], OTHER_SCHEMA) != r["prosrc"]] == []

        # Commands, the application's own emit, a captured table, routing and a lane's fire.
        await ok(platform, "save_event_type", name="ticket.escalated", schema={"type": "object"})
        world = PgWorld(platform)
        await world.save_listener(listener())
        sid = await world.open_session()
        await fire(world, sid, "notes/1")
        assert (await snapshot(world, address(sid))).fires_last_minute == 1
        async with app.transaction():
            await emit(app, sid, "ticket.escalated", {"n": 1}, schema=OTHER_SCHEMA)
        await ok(platform, "capture_table", table="tickets", type_prefix="ticket", session_id=sid)
        await app.execute("INSERT INTO public.tickets (id, session, title) VALUES (1, $1, 'one')", sid)
        captures = (await ok(platform, "list_captures"))["captures"]
        assert [c["table"] for c in captures] == ["public.tickets"]
        events = await all_events(platform, sid)
        types = [e["type"] for e in events]
        assert [t for t in types if not t.startswith("execution.")] == [
            "object.written",
            "ticket.escalated",
            "ticket.created",
        ]
        assert {"execution.started", "execution.ended"} <= set(types)

        # Retention's removal of a session names every table of the schema by the schema it is in.
        store = platform.store
        assert await store.mark_deleting(sid)
        while not (await store.purge_step(sid, 1000))["done"]:
            pass
        assert await app.fetchval(f'SELECT count(*) FROM "{OTHER_SCHEMA}".events') == 0
    finally:
        await app.close()
