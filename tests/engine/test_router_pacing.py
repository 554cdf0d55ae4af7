"""The router paces its signals to a lane and may hold events back between two; it never loses one so.

These tests drive routers by hand (`route_session`), one round at a time: the harness starts none.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from temporalio.testing import WorkflowEnvironment

from orchestrator.platform import Platform
from orchestrator.router import Router
from tests.engine.harness import Engine, eventually, new_session, recorder_listener, running_engine


@pytest.fixture
async def engine(platform: Platform, temporal_env: WorkflowEnvironment) -> AsyncIterator[Engine]:
    platform.settings = platform.settings.model_copy(
        update={"search_attributes": not temporal_env.supports_time_skipping}
    )
    async with running_engine(platform, temporal_env.client, routers=False) as running:
        yield running


# A short lease, so that a test can outlive it.
LEASE = 0.5


def router(engine: Engine) -> Router:
    platform = engine.platform
    return Router(platform.store, engine.client, platform.database_url, platform.settings, lease_seconds=LEASE)


async def write(engine: Engine, session_id: str, alias: str) -> int:
    reply = await engine.command("write_object", session_id=session_id, alias=alias, value={"type": "m"})
    return int(reply["event_id"])


async def session_for(engine: Engine, window_seconds: float) -> str:
    """A new session, with the recorder listening to `missions/**` in windows of `window_seconds`."""
    await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": window_seconds}))
    return await new_session(engine)


async def all_in_runs(engine: Engine, count: int) -> None:
    async def ran() -> bool:
        return len(engine.log.event_ids()) >= count

    await eventually(ran, what=f"{count} events in runs")


async def position(engine: Engine, session_id: str) -> int:
    async with engine.platform.store.transaction() as conn:
        return int(await conn.fetchval("SELECT routed_event_id FROM routing_cursors WHERE session_id = $1", session_id))


async def test_a_router_that_stops_while_holding_events_back_loses_none_and_none_goes_twice(engine: Engine) -> None:
    sid = await session_for(engine, 3)
    first = router(engine)

    ids = [await write(engine, sid, "missions/1")]
    await first.route_session(sid)
    assert first.signals == 1, "a lane's first event goes at once"
    ids += [await write(engine, sid, "missions/2"), await write(engine, sid, "missions/3")]
    await first.route_session(sid)
    assert first.signals == 1, "the next ones wait for the lane's pace"
    assert await position(engine, sid) == ids[0], "the saved position stays before what is held back"

    # The first router stops here (its memory is gone); another one takes the session over once its lease on
    # the session has run out.
    second = router(engine)
    assert await second.route_session(sid) == 0
    await asyncio.sleep(LEASE * 1.5)
    await second.route_session(sid)
    assert second.signals == 1
    assert await position(engine, sid) == ids[-1]
    # The first one, were it still alive, sees that another worker routed meanwhile and forgets what it held.
    await asyncio.sleep(LEASE * 1.5)
    await first.route_session(sid)
    assert first.signals == 1, "what another router delivered meanwhile is not sent again"

    await all_in_runs(engine, len(ids))
    assert engine.log.event_ids() == ids, "each event once, in one batch (the window opened with the first)"
    assert len(engine.log.runs) == 1


async def test_held_events_go_in_one_signal_once_the_pace_has_passed(engine: Engine) -> None:
    sid = await session_for(engine, 1)
    paced = router(engine)
    ids = [await write(engine, sid, "missions/0")]
    await paced.route_session(sid)
    for n in range(1, 6):
        ids.append(await write(engine, sid, f"missions/{n}"))
        await paced.route_session(sid)
    assert paced.signals == 1

    async def flushed() -> bool:
        await paced.route_session(sid)  # a round, as the router's own timer would start one
        return await position(engine, sid) == ids[-1]

    await eventually(flushed, within=5, what="the held events to go out")
    assert paced.signals == 2, "everything held back went in one signal"

    await all_in_runs(engine, len(ids))
    assert sorted(engine.log.event_ids()) == ids, "each event exactly once"


async def test_a_busy_session_stays_with_its_router_until_that_router_stops_renewing_its_lease(
    engine: Engine,
) -> None:
    sid = await session_for(engine, 0.1)
    owner, other = router(engine), router(engine)
    ids = [await write(engine, sid, "missions/1")]
    await owner.route_session(sid)
    ids.append(await write(engine, sid, "missions/2"))
    assert await other.route_session(sid) == 0, "the session is the owner's while its lease runs"
    assert other.signals == 0
    await owner.route_session(sid)
    assert owner.signals == 2 and await position(engine, sid) >= ids[-1]

    ids.append(await write(engine, sid, "missions/3"))
    await asyncio.sleep(LEASE * 1.5)  # the owner stopped: its lease runs out
    assert await other.route_session(sid) > 0
    assert other.signals == 1 and await position(engine, sid) >= ids[-1]

    await all_in_runs(engine, len(ids))
    assert sorted(engine.log.event_ids()) == ids, "each event exactly once"
