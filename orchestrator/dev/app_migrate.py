"""An app's own migrations: its `migrate` run before its declarations are planned, so its tables are there first.

Owns calling the app's `migrate(database_url)` once the platform's own migrations have run (so the app's SQL may
call `orchestrator.emit` or name the platform's tables) and before `app_plan` reads the app's captures, and saying
what it did. What migrates, and how (Alembic, Django, plain SQL), is the app's: the platform only calls it.

A sync `migrate` runs in a thread of its own: the event loop is not held while it works, and a tool that runs an
event loop of its own inside (Alembic's async template calls `asyncio.run`) can. An async one is awaited. Workers
starting at once would migrate at once, which few migration tools survive: each run holds a session-level
advisory lock named for the app, on a connection of its own to the direct URL (the platform's own migrations
run there too, never through a pooler in transaction mode), so the second waits and then finds the work done.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from pathlib import Path

import asyncpg

from orchestrator.app_loader import UserApp
from orchestrator.platform import Platform

# The advisory lock a run of an app's `migrate` holds: this text and the file that defines it, hashed by PostgreSQL.
LOCK_PREFIX = "orchestrator.app_migrate:"


class MigrateFailed(Exception):
    """The app's `migrate` raised: `app M: migrate: <error>`, the error chained. Nothing of the app's declarations
    has been applied."""


async def run_migrate(platform: Platform, app: UserApp, announce: Callable[[str], None]) -> float | None:
    """Run the app's `migrate` with the platform's database URL (the direct one), one process at a time per app;
    answers how long it took (None: the app declares no `migrate`).

    Raises:
        MigrateFailed: `migrate` raised; the message names the app and the error.
    """
    migrate = app.migrate
    if migrate is None:
        return None
    url = platform.direct_url
    began = time.monotonic()
    lock = await asyncpg.connect(url)
    key = LOCK_PREFIX + _where(migrate, app.name)
    try:
        if not await lock.fetchval("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", key):
            announce(f"migrate      {app.title}: waiting for another process's migrate of it to end")
            await lock.execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", key)
        announce(f"migrate      {app.title}: running")
        try:
            await _call(migrate, url)
        except SystemExit as err:
            # A migration tool's command line called in-process (Alembic's `main`, a click command) exits: 0 is
            # its success, anything else its failure.
            if err.code not in (0, None):
                raise MigrateFailed(f"app {app.title}: migrate: exited with {err.code}") from err
        except Exception as err:
            raise MigrateFailed(f"app {app.title}: migrate: {type(err).__name__}: {err}") from err
    finally:
        await lock.close()  # the lock goes with its session
    took = time.monotonic() - began
    announce(f"migrate      {app.title}: done in {took:.1f} s")
    return took


def _where(migrate: Callable[[str], object], name: str) -> str:
    """What a `migrate` is, whatever spelling of its app loaded it (`--app a.b` or `--app a/b.py`): its file."""
    try:
        return str(Path(inspect.getfile(migrate)).resolve())
    except (TypeError, OSError):
        return name


async def _call(migrate: Callable[[str], object], url: str) -> None:
    if inspect.iscoroutinefunction(migrate):
        await migrate(url)
        return
    result = await asyncio.to_thread(migrate, url)
    if inspect.isawaitable(result):  # a plain function that hands back a coroutine
        await result


__all__ = ["MigrateFailed", "run_migrate"]
