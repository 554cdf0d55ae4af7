"""The platform in a schema of its own: a database made before (everything in `public`) upgrades in place and
keeps working, and a new one beside an application's tables of the same names leaves them alone."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from orchestrator.config import Settings
from orchestrator.dev.embedded import EmbeddedPostgres
from orchestrator.platform import Platform
from orchestrator.store import migrate as migrate_module
from orchestrator.store.postgres import connection_class
from tests.conftest import scratch_database
from tests.store.earlier_releases import released_through, their_connections
from tests.store.helpers import all_events, ok
from tests.store.test_function_files import definitions

LISTENER = {
    "name": "notes",
    "filter": {"types": ["object.written"]},
    "action": {"type": "workflow", "workflow": "recorder"},
}


@pytest.fixture
async def blank_db(embedded_pg: EmbeddedPostgres) -> AsyncIterator[str]:
    async with scratch_database(embedded_pg, "move") as url:
        yield url


async def _public_tables(url: str) -> set[str]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        return {r["tablename"] for r in rows}
    finally:
        await conn.close()


async def test_a_database_made_in_public_moves_in_place_and_keeps_working(
    blank_db: str, fresh_db: str, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped = migrate_module.migration_files()
    # The database as the migrations before the schema of its own made it, used a while.
    with released_through(monkeypatch, 10):
        before = await Platform.connect(
            settings.model_copy(update={"database_schema": "public"}), their_connections(blank_db, "public")
        )
    try:
        await ok(before, "save_listener", listener=LISTENER)
        # By the store, as that release saved it: the command's look at captures needs a table it did not have.
        await before.store.save_event_type("ticket.escalated", {"type": "object"}, None, None)
        sid = (await ok(before, "open_session", alias="kept"))["session"]["id"]
        await ok(before, "write_object", session_id=sid, alias="notes/1", value={"type": "note"})
        await ok(before, "emit_event", session_id=sid, type="ticket.escalated", data={"n": 1})
    finally:
        await before.close()
    assert {"sessions", "events", "lanes", "schema_migrations"} <= await _public_tables(blank_db)

    after = await Platform.connect(settings, blank_db)
    try:
        assert await _public_tables(blank_db) == set(), "everything moved"
        [session] = (await ok(after, "list_sessions"))["sessions"]
        assert (session["id"], session["alias"]) == (sid, "kept")
        assert [lst["name"] for lst in (await ok(after, "list_listeners"))["listeners"]] == ["notes"]
        await ok(after, "write_object", session_id=sid, alias="notes/2", value={"type": "note"})
        await ok(after, "emit_event", session_id=sid, type="ticket.escalated", data={"n": 2})
        events = await all_events(after, sid)
        assert [e["type"] for e in events] == [
            "object.written",
            "ticket.escalated",
            "object.written",
            "ticket.escalated",
        ]
        assert [e["id"] for e in events] == sorted({e["id"] for e in events}), "ids go on from where they were"
        conn = await asyncpg.connect(blank_db)
        try:
            recorded = await conn.fetch("SELECT version FROM orchestrator.schema_migrations ORDER BY version")
            assert [r["version"] for r in recorded] == [version for version, _, _ in shipped]
            assert await definitions(conn, "public") == {}, "no function of the platform's left in public"
            moved = await definitions(conn)
        finally:
            await conn.close()
        new = await asyncpg.connect(fresh_db)
        try:
            assert moved == await definitions(new), "the functions and triggers of a database made new"
        finally:
            await new.close()
    finally:
        await after.close()


async def test_a_new_database_beside_an_applications_tables_of_the_same_names_leaves_them_alone(
    blank_db: str, settings: Settings
) -> None:
    conn = await asyncpg.connect(blank_db)
    try:
        await conn.execute("CREATE TABLE public.events (id serial PRIMARY KEY, what text)")
        await conn.execute("CREATE TABLE public.sessions (token text PRIMARY KEY)")
        await conn.execute("INSERT INTO public.events (what) VALUES ('the application''s own')")
    finally:
        await conn.close()
    platform = await Platform.connect(settings, blank_db)
    try:
        sid = (await ok(platform, "open_session"))["session"]["id"]
        await ok(platform, "write_object", session_id=sid, alias="notes/1", value={"type": "note"})
        assert len(await all_events(platform, sid)) == 1
    finally:
        await platform.close()
    assert await _public_tables(blank_db) == {"events", "sessions"}
    conn = await asyncpg.connect(blank_db)
    try:
        assert await conn.fetchval("SELECT what FROM public.events") == "the application's own"
    finally:
        await conn.close()


async def test_a_schema_name_that_is_not_plain_is_refused(settings: Settings) -> None:
    with pytest.raises(ValueError, match="database_schema"):
        Settings(database_schema='orchestrator"; DROP SCHEMA public; --')
    with pytest.raises(ValueError, match="database_schema"):
        connection_class("pg_catalog")


@pytest.mark.parametrize(
    "theirs",
    [
        "CREATE TABLE schema_migrations (version bigint PRIMARY KEY, dirty boolean NOT NULL)",  # golang-migrate
        "CREATE TABLE schema_migrations (version varchar PRIMARY KEY)",  # Rails, dbmate
    ],
)
async def test_an_applications_own_schema_migrations_in_public_is_not_taken_for_the_platforms(
    blank_db: str, settings: Settings, theirs: str
) -> None:
    conn = await asyncpg.connect(blank_db)
    try:
        await conn.execute(theirs)
    finally:
        await conn.close()
    platform = await Platform.connect(settings, blank_db)
    try:
        await ok(platform, "open_session")
    finally:
        await platform.close()
    assert await _public_tables(blank_db) == {"schema_migrations"}, "the application's table stays its own"
