"""The slow poll reaches every session behind, however many are behind at once, and runs once per deployment.

The poll is what routes a session whose notification was lost. It took the first 1,000 sessions behind in no
order: with more than that behind at once (a busy deployment, most of them being routed by other workers), the
same ones came back each time and a session past them waited until the load fell. It now walks them in order
from where the last poll stopped (0030).
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from temporalio.testing import WorkflowEnvironment

from orchestrator.engine.router import Router
from orchestrator.platform import Platform
from orchestrator.store.engine_records import EngineRecords
from tests.engine.harness import eventually
from tests.store.helpers import ok

# More sessions behind than one poll takes.
BUSY = 1_100


async def behind(store: EngineRecords, ids: list[str]) -> None:
    """Sessions with one event each that nothing has routed (written in SQL, with nobody listening)."""
    async with store.pool.acquire() as conn, conn.transaction():
        await conn.execute("INSERT INTO orchestrator.sessions (id) SELECT unnest($1::text[])", ids)
        await conn.execute("INSERT INTO orchestrator.routing_cursors (session_id) SELECT unnest($1::text[])", ids)
        await conn.execute(
            "WITH e AS (INSERT INTO orchestrator.events (id, session_id, type)"
            " SELECT nextval('orchestrator.event_ids'), unnest($1::text[]), 'test.fact' RETURNING id, session_id)"
            " UPDATE orchestrator.sessions s SET last_event_id = e.id FROM e WHERE e.session_id = s.id",
            ids,
        )


@pytest.mark.asyncio
async def test_a_session_past_the_first_thousand_behind_is_routed_by_the_poll_alone(
    platform: Platform, temporal_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = platform.store
    assert isinstance(store, EngineRecords)
    busy = [f"ses_busy{n:05}" for n in range(BUSY)]
    await behind(store, busy)
    # Another worker is routing each of them (it holds their positions), so they stay behind meanwhile.
    other = await store.pool.acquire()
    held = other.transaction()
    await held.start()
    try:
        await other.execute("SELECT 1 FROM orchestrator.routing_cursors WHERE session_id = ANY($1) FOR UPDATE", busy)
        router = Router(
            store, store.lanes, temporal_env.client, platform.direct_url, platform.settings, poll_seconds=0.2
        )
        # No notification reaches this router: the poll alone may route the session.
        monkeypatch.setattr(router, "_on_notify", lambda *_: None)
        task = asyncio.create_task(router.run())
        try:
            await asyncio.sleep(0.5)  # a poll or two, all of them finding the busy sessions first
            lost = (await ok(platform, "open_session", alias="zz-lost"))["session"]["id"]
            await ok(platform, "write_object", session_id=lost, alias="a/1", value={"type": "t"})
            last = await store.session_end(lost)

            async def routed() -> bool:
                assert not task.done(), task.exception()
                position = await store.pool.fetchval(
                    "SELECT routed_event_id FROM orchestrator.routing_cursors WHERE session_id = $1", lost
                )
                return bool(position == last)

            await eventually(routed, within=10.0, what="the poll to route the session past the busy ones")
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    finally:
        await held.rollback()
        await store.pool.release(other)


@pytest.mark.asyncio
async def test_the_poll_walks_the_sessions_behind_in_turn_and_once_per_interval(platform: Platform) -> None:
    store = platform.store
    assert isinstance(store, EngineRecords)
    ids = [f"ses_turn{n}" for n in range(5)]
    await behind(store, ids)
    walked = [await store.sessions_behind(limit=2) for _ in range(4)]
    assert walked == [ids[0:2], ids[2:4], [ids[4], ids[0]], ids[1:3]]
    # Another router asking within the interval is answered none: the deployment was just polled.
    assert await store.sessions_behind(every=60.0, limit=2) == []
    assert await store.sessions_behind(every=0.0, limit=2) == ids[3:5]
