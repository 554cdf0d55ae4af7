"""A database used under the migrations before the newest one upgrades in place and goes on as if made new; one
migrated by a newer release is refused by an older one."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import asyncpg
import pytest

from orchestrator.config import Settings
from orchestrator.dev.embedded import EmbeddedPostgres
from orchestrator.platform import Platform
from orchestrator.store import migrate as migrate_module
from orchestrator.store.migrate import SchemaMismatch, migrate, migration_files
from tests.conftest import scratch_database
from tests.store.earlier_releases import released_through, their_connections
from tests.store.test_lane_store_contract import PgWorld, address, fire, listener, route_all, snapshot

FIRES_IN_ORDER = 23  # 0023_fires_counted_in_order.sql


@pytest.fixture
async def blank_db(embedded_pg: EmbeddedPostgres) -> AsyncIterator[str]:
    async with scratch_database(embedded_pg, "upgrade") as url:
        yield url


async def test_fires_recorded_before_their_places_were_kept_are_counted_after_the_upgrade(
    blank_db: str, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    with released_through(monkeypatch, FIRES_IN_ORDER - 1):
        before = await Platform.connect(settings, their_connections(blank_db))
    try:
        world = PgWorld(before)
        await world.save_listener(listener())
        sid, other = await world.open_session(), await world.open_session()
        # Another session's fire between this one's: places are counted per session.
        await fire(world, sid, "a/0")
        await fire(world, other, "b/0")
        await fire(world, sid, "a/1")
        await fire(world, sid, "a/2")
    finally:
        await before.close()

    after = await Platform.connect(settings, blank_db)
    try:
        world = PgWorld(after)
        places = await after.store.pool.fetch(
            "SELECT session_id, fire_seq FROM orchestrator.batches WHERE counted ORDER BY created_at"
        )
        assert [(r["session_id"] == sid, r["fire_seq"]) for r in places] == [
            (True, 1),
            (False, 1),
            (True, 2),
            (True, 3),
        ]
        await world.write(sid, "a/3")
        await route_all(world, sid)
        assert (await snapshot(world, address(sid))).fires_last_minute == 3
        await fire(world, sid, "a/4")
        assert (await snapshot(world, address(sid))).fires_last_minute == 4
    finally:
        await after.close()


DELETED_LEAVE_ROUTING = 25  # 0025_deleted_listeners_leave_routing.sql


async def test_listeners_deleted_before_the_upgrade_leave_their_probes_and_paths_behind_at_it(
    blank_db: str, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    by_value = {"where": [{"path": "data.n", "op": "eq", "value": 1}]}
    with released_through(monkeypatch, DELETED_LEAVE_ROUTING - 1):
        before = await Platform.connect(settings, their_connections(blank_db))
    try:
        for name, flt in (("gone", by_value), ("kept", {"types": ["app.*"]})):
            await before.store.save_listener(
                name, {"name": name, "filter": flt, "action": {"type": "workflow", "workflow": "w"}}, 0
            )
        await before.store.delete_listener("gone")
        pool = before.store.pool
        assert await pool.fetchval("SELECT count(*) FROM orchestrator.listener_probes WHERE name = 'gone'") > 0
        assert await pool.fetchval("SELECT count(*) FROM orchestrator.listener_probe_paths") == 1
    finally:
        await before.close()

    after = await Platform.connect(settings, blank_db)
    try:
        pool = after.store.pool
        left = await pool.fetch("SELECT DISTINCT name FROM orchestrator.listener_probes")
        assert [r["name"] for r in left] == ["kept"]
        assert await pool.fetchval("SELECT count(*) FROM orchestrator.listener_rules WHERE name = 'gone'") == 0
        assert await pool.fetchval("SELECT count(*) FROM orchestrator.listener_probe_paths") == 0
    finally:
        await after.close()


async def test_a_release_before_the_newest_migration_refuses_the_database_and_leaves_it_as_it_was(
    blank_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Going back (docs/operations.md, "Upgrade"): migrations have no down step, and a process of a release that
    does not ship the database's newest migration refuses to start rather than run its SQL over those tables."""
    conn = await asyncpg.connect(blank_db)
    try:
        await migrate(conn)
        newest = migration_files()[-1]
        recorded = await conn.fetch("SELECT version, name FROM orchestrator.schema_migrations ORDER BY version")
        monkeypatch.setattr(migrate_module, "migration_files", lambda: migration_files()[:-1])
        with pytest.raises(SchemaMismatch, match=re.escape(newest[1])):
            await migrate(conn)
        after = await conn.fetch("SELECT version, name FROM orchestrator.schema_migrations ORDER BY version")
        assert after == recorded
    finally:
        await conn.close()
