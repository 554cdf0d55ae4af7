"""The router paces its signals to a lane and may hold events back between two; it never loses one so.

These tests drive routers by hand (`route_session`), one round at a time: the harness starts none.
"""

from __future__ import annotations

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


def router(engine: Engine) -> Router:
    return Router(engine.platform.store, engine.client, engine.platform.database_url, engine.platform.settings)


async def write(engine: Engine, session_id: str, alias: str) -> int:
    reply = await engine.command("write_object", session_id=session_id, alias=alias, value={"type": "m"})
    return int(reply["event_id"])


async def position(engine: Engine, session_id: str) -> int:
    async with engine.platform.store.transaction() as conn:
        return int(await conn.fetchval("SELECT routed_event_id FROM routing_cursors WHERE session_id = $1", session_id))


async def test_a_router_that_stops_while_holding_events_back_loses_none_and_none_goes_twice(engine: Engine) -> None:
    await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": 3}))
    sid = await new_session(engine)
    first = router(engine)

    ids = [await write(engine, sid, "missions/1")]
    await first.route_session(sid)
    assert first.signals == 1, "a lane's first event goes at once"
    ids += [await write(engine, sid, "missions/2"), await write(engine, sid, "missions/3")]
    await first.route_session(sid)
    assert first.signals == 1, "the next ones wait for the lane's pace"
    assert await position(engine, sid) == ids[0], "the saved position stays before what is held back"

    # The first router stops here (its memory is gone); another one takes the session over.
    second = router(engine)
    await second.route_session(sid)
    assert second.signals == 1
    assert await position(engine, sid) == ids[-1]
    # The first one, were it still alive, sees that another worker routed meanwhile and forgets what it held.
    await first.route_session(sid)
    assert first.signals == 1, "what another router delivered meanwhile is not sent again"

    async def ran() -> bool:
        return len(engine.log.event_ids()) >= 3

    await eventually(ran, what="the batch's run")
    assert engine.log.event_ids() == ids, "each event once, in one batch (the window opened with the first)"
    assert len(engine.log.runs) == 1


async def test_held_events_go_in_one_signal_once_the_pace_has_passed(engine: Engine) -> None:
    await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": 1}))
    sid = await new_session(engine)
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

    async def ran() -> bool:
        return len(engine.log.event_ids()) >= len(ids)

    await eventually(ran, what="the runs")
    assert sorted(engine.log.event_ids()) == ids, "each event exactly once"
