"""A session's writers notify its routers once until a router catches up (0029_wakeups_coalesced.sql). What that
must never cost: an event whose notification was lost, or whose writer committed without one while a round ran,
is still routed (by the router coming back on its own, or at worst by the slow poll).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest
from temporalio.testing import WorkflowEnvironment

from orchestrator.core.wake_shards import channel, shard_of
from orchestrator.engine.router import Router
from orchestrator.platform import Platform
from orchestrator.store.postgres import PostgresStore
from orchestrator.transactional import emit
from tests.engine.harness import eventually
from tests.store.helpers import ok


@contextlib.asynccontextmanager
async def _router(platform: Platform, temporal_env: WorkflowEnvironment, poll_seconds: float) -> AsyncIterator[Router]:
    store = platform.store
    assert isinstance(store, PostgresStore)
    router = Router(
        store, store.lanes, temporal_env.client, platform.direct_url, platform.settings, poll_seconds=poll_seconds
    )
    task = asyncio.create_task(router.run())
    try:
        yield router
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _routed_through(conn: asyncpg.Connection, session_id: str) -> int:
    query = "SELECT routed_event_id FROM orchestrator.routing_cursors WHERE session_id = $1"
    return int(await conn.fetchval(query, session_id))


async def test_a_router_is_told_once_until_it_catches_up(platform: Platform, fresh_db: str) -> None:
    sid = str((await ok(platform, "open_session"))["session"]["id"])
    conn = await asyncpg.connect(fresh_db)
    told: list[str] = []
    await conn.add_listener(channel(shard_of(sid)), lambda *args: told.append(str(args[3])))
    try:
        for n in range(3):
            await ok(platform, "write_object", session_id=sid, alias=f"a/{n}", value={"type": "t"})
        await eventually(lambda: asyncio.sleep(0, bool(told)), within=5, what="a notification")
        await asyncio.sleep(0.2)
        assert told == [sid], "three commits, one notification: nobody caught up in between"
        # Not caught up: the router must come back on its own, and nothing is cleared.
        assert not await conn.fetchval("SELECT orchestrator.orchestrator_wake_rearm($1)", sid)
        await conn.execute(
            "UPDATE orchestrator.routing_cursors SET routed_event_id = s.last_event_id FROM orchestrator.sessions s"
            " WHERE s.id = $1 AND routing_cursors.session_id = s.id",
            sid,
        )
        # A writer holds the session: its commit will not notify, so the router is not caught up either.
        writer = await asyncpg.connect(fresh_db)
        try:
            async with writer.transaction():
                await writer.fetchval("SELECT orchestrator.orchestrator_lock_session($1)", sid)
                assert not await asyncio.wait_for(
                    conn.fetchval("SELECT orchestrator.orchestrator_wake_rearm($1)", sid), 2
                ), "answered at once, without waiting for the writer"
        finally:
            await writer.close()
        assert await conn.fetchval("SELECT orchestrator.orchestrator_wake_rearm($1)", sid)
        assert await conn.fetchval("SELECT woken_at FROM orchestrator.sessions WHERE id = $1", sid) is None
        await ok(platform, "write_object", session_id=sid, alias="b", value={"type": "t"})
        await eventually(lambda: asyncio.sleep(0, len(told) == 2), within=5, what="the next write to notify")
        assert await conn.fetchval("SELECT orchestrator.orchestrator_wake_rearm('ses_gone')"), "nothing to route"
    finally:
        await conn.close()


async def test_an_event_whose_notification_was_lost_is_routed_by_the_slow_poll(
    platform: Platform, temporal_env: WorkflowEnvironment, fresh_db: str
) -> None:
    sid = str((await ok(platform, "open_session"))["session"]["id"])
    conn = await asyncpg.connect(fresh_db)
    try:
        # As if a notification went out and its router died before catching up: writers stay quiet.
        await conn.execute("UPDATE orchestrator.sessions SET woken_at = now() + interval '1 hour' WHERE id = $1", sid)
        async with _router(platform, temporal_env, poll_seconds=0.5) as router:
            # Written once the router listens, so its first look at the sessions behind does not find it.
            await eventually(
                lambda: asyncio.sleep(0, router.listener is not None and bool(router.listener.held)),
                within=10,
                what="the router to listen",
            )
            reply = await ok(platform, "write_object", session_id=sid, alias="a", value={"type": "t"})
            written = int(reply["event_id"])

            async def routed() -> bool:
                return await _routed_through(conn, sid) >= written

            await eventually(routed, within=10, what="the slow poll to route the event")
            # Caught up: the mark is cleared, and the next write wakes the router at once.
            await eventually(
                lambda: conn.fetchval("SELECT woken_at IS NULL FROM orchestrator.sessions WHERE id = $1", sid),
                within=5,
                what="the router to clear the mark",
            )
    finally:
        await conn.close()


@pytest.mark.parametrize("captured", [False, True])
async def test_a_writer_in_flight_during_a_round_is_routed_without_a_notification_of_its_own(
    platform: Platform, temporal_env: WorkflowEnvironment, fresh_db: str, captured: bool
) -> None:
    """A round finds the session held by a writer whose commit will not notify (its routers were told a moment
    ago): the router comes back after its round interval, long before its slow poll."""
    sid = str((await ok(platform, "open_session"))["session"]["id"])
    await ok(platform, "save_event_type", name="ticket.escalated", schema={"type": "object"})
    conn = await asyncpg.connect(fresh_db)
    writer = await asyncpg.connect(fresh_db)
    await writer.execute("CREATE TABLE tickets (id bigint PRIMARY KEY, session text NOT NULL)")
    await ok(platform, "capture_table", table="tickets", type_prefix="ticket", session_column="session")
    try:
        async with _router(platform, temporal_env, poll_seconds=60):
            await ok(platform, "write_object", session_id=sid, alias="a", value={"type": "t"})
            await eventually(
                lambda: conn.fetchval("SELECT woken_at IS NULL FROM orchestrator.sessions WHERE id = $1", sid),
                within=10,
                what="the router to catch up",
            )
            await conn.execute("UPDATE orchestrator.sessions SET woken_at = now() WHERE id = $1", sid)
            tx = writer.transaction()
            await tx.start()
            try:
                if captured:
                    await writer.execute("INSERT INTO tickets VALUES (1, $1)", sid)
                    # Its append runs at the commit: hold the session there as an emit would.
                    await writer.fetchval("SELECT orchestrator.orchestrator_lock_session($1)", sid)
                else:
                    await emit(writer, sid, "ticket.escalated", {"n": 1})
                # A round while the writer holds the session (what wakes it is beside the point).
                await conn.execute("SELECT pg_notify(orchestrator.orchestrator_wake_channel($1), $1)", sid)
                await asyncio.sleep(0.3)
            finally:
                await tx.commit()
            committed = time.monotonic()
            last = int(await conn.fetchval("SELECT last_event_id FROM orchestrator.sessions WHERE id = $1", sid))

            async def routed() -> bool:
                return await _routed_through(conn, sid) >= last

            await eventually(routed, within=10, what="the router to come back")
            assert time.monotonic() - committed < 5, "routed by the router coming back, not by its slow poll"
    finally:
        await conn.close()
        await writer.close()
