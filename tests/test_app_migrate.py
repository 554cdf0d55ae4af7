"""An app's `migrate`: called with the platform's database URL, sync (in a thread of its own, where it may run an
event loop, as Alembic's async template does) or async; one process at a time per app; a failure named."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import asyncpg
import pytest

from orchestrator.app_loader import UserApp
from orchestrator.dev.app_migrate import MigrateFailed, run_migrate
from orchestrator.platform import Platform


async def make_table(url: str, name: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f"CREATE TABLE IF NOT EXISTS {name} (id int PRIMARY KEY)")
    finally:
        await conn.close()


async def table_exists(url: str, name: str) -> bool:
    conn = await asyncpg.connect(url)
    try:
        return bool(await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f"public.{name}"))
    finally:
        await conn.close()


async def test_a_sync_migrate_runs_off_the_event_loop_and_may_run_a_loop_of_its_own(platform: Platform) -> None:
    loop_thread = threading.get_ident()
    called: list[tuple[str, bool]] = []

    def migrate(database_url: str) -> None:
        called.append((database_url, threading.get_ident() != loop_thread))
        asyncio.run(make_table(database_url, "sync_made"))

    said: list[str] = []
    took = await run_migrate(platform, UserApp(name="tests.sync_app", migrate=migrate), said.append)

    assert called == [(platform.direct_url, True)]
    assert await table_exists(platform.database_url, "sync_made")
    assert took is not None and said == [
        "migrate      tests.sync_app: running",
        f"migrate      tests.sync_app: done in {took:.1f} s",
    ]


async def test_an_async_migrate_is_awaited(platform: Platform) -> None:
    async def migrate(database_url: str) -> None:
        await make_table(database_url, "async_made")

    await run_migrate(platform, UserApp(name="tests.async_app", migrate=migrate), lambda _: None)

    assert await table_exists(platform.database_url, "async_made")


async def test_an_app_without_migrate_runs_nothing(platform: Platform) -> None:
    said: list[str] = []
    assert await run_migrate(platform, UserApp(name="tests.plain_app"), said.append) is None
    assert said == []


async def test_processes_starting_at_once_migrate_one_after_the_other(platform: Platform, settings: Any) -> None:
    """Two workers of one app starting together: the second's migrate begins once the first's has ended."""
    spans: list[tuple[float, float]] = []

    def migrate(database_url: str) -> None:
        began = time.monotonic()
        time.sleep(0.5)
        spans.append((began, time.monotonic()))

    other = await Platform.connect(settings, platform.database_url)
    try:
        app = UserApp(name="tests.twice_app", migrate=migrate)
        await asyncio.gather(run_migrate(platform, app, lambda _: None), run_migrate(other, app, lambda _: None))
    finally:
        await other.close()
    first, second = sorted(spans)
    assert second[0] >= first[1], f"the two migrations overlapped: {spans}"


async def test_a_failing_migrate_is_named_with_its_error_chained(platform: Platform) -> None:
    def migrate(database_url: str) -> None:
        raise LookupError("revision 'abc123' not found")

    with pytest.raises(MigrateFailed) as failed:
        await run_migrate(platform, UserApp(name="tests.failing_app", migrate=migrate), lambda _: None)

    assert str(failed.value) == "app tests.failing_app: migrate: LookupError: revision 'abc123' not found"
    assert isinstance(failed.value.__cause__, LookupError)
    conn = await asyncpg.connect(platform.database_url)
    try:
        held = await conn.fetchval(
            "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database"
            " WHERE l.locktype = 'advisory' AND d.datname = current_database()"
        )
    finally:
        await conn.close()
    assert held == 0, "the lock went with the failed run"


@pytest.mark.parametrize(("code", "fails"), [(0, False), (None, False), (1, True), ("no such revision", True)])
async def test_a_migrate_that_exits_is_a_success_at_0_and_else_a_failure_named(
    platform: Platform, code: Any, fails: bool
) -> None:
    """A migration tool's command line called in-process exits (Alembic's `main` on an error, a click command even
    on success): the start goes on at 0 and stops naming the app otherwise, never ends the process unnamed."""

    def migrate(database_url: str) -> None:
        raise SystemExit(code)

    app = UserApp(name="tests.exiting_app", migrate=migrate)
    if not fails:
        assert await run_migrate(platform, app, lambda _: None) is not None
        return
    with pytest.raises(MigrateFailed, match=rf"^app tests\.exiting_app: migrate: exited with {code}$"):
        await run_migrate(platform, app, lambda _: None)
