"""`orchestrator dev` starts its embedded servers again when one dies.

Owns watching the embedded PostgreSQL and Temporal dev server that `orchestrator dev` started itself (not
those the settings name: they are someone else's to keep). Either can die under the platform: the OOM killer,
a `kill -9` by hand, a crash. The worker and the API ride out an outage (the router waits for the database,
commands answer `unavailable`, Temporal's client reconnects), so a server started again on its data (the
cluster's folder, the dev server's SQLite file, the same socket and ports) is all it takes to go on, with
every committed write. Without it the platform would wait for a server nobody starts until Ctrl-C.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Protocol

# How often the servers are looked at, and how long after a failed start one is tried again.
LOOK_SECONDS = 1.0
RETRY_SECONDS = 5.0


class Kept(Protocol):
    def alive(self) -> bool: ...

    async def start_again(self) -> None: ...


async def keep(servers: Sequence[tuple[str, Kept]], announce: Callable[[str], None]) -> None:
    """Until cancelled: each server found dead is started again, and both are said (`name` labels the lines)."""
    retry_at: dict[str, float] = {}
    while True:
        await asyncio.sleep(LOOK_SECONDS)
        for name, server in servers:
            try:
                if server.alive() or time.monotonic() < retry_at.get(name, 0.0):
                    continue
                if name not in retry_at:
                    announce(f"{name:<12} stopped running; starting it again on its data")
                began = time.monotonic()
                await _started(server)
                retry_at.pop(name, None)
                announce(f"{name:<12} running again (started in {time.monotonic() - began:.1f} s)")
            except Exception as err:  # said, and tried again: the keeper must not end while the dev runs
                retry_at[name] = time.monotonic() + RETRY_SECONDS
                why = (str(err).splitlines() or [type(err).__name__])[0]
                announce(f"{name:<12} did not start again ({why}); trying again in {RETRY_SECONDS:.0f} s")


async def _started(server: Kept) -> None:
    """Start `server` again; a cancel (the dev stopping) waits for a start in flight to end, so that the stop
    which follows stops what it started rather than a handle the start has not yet replaced."""
    start = asyncio.ensure_future(server.start_again())
    try:
        await asyncio.shield(start)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await start
        raise
