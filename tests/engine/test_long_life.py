"""Long life: a lane continues as new under a stream, and completes when idle, and loses nothing either way."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from orchestrator.core.lane_keys import lane_workflow_id
from orchestrator.platform import Platform
from tests.engine.harness import (
    Engine,
    eventually,
    lane_outcomes,
    new_session,
    overlapping_holds,
    recorder_listener,
    running_engine,
    write_many,
)


@asynccontextmanager
async def engine_with(platform: Platform, env: WorkflowEnvironment, **settings: Any) -> AsyncIterator[Engine]:
    platform.settings = platform.settings.model_copy(
        update={"search_attributes": not env.supports_time_skipping, **settings}
    )
    async with running_engine(platform, env.client) as engine:
        yield engine


async def all_ran(engine: Engine, count: int, within: float = 30.0) -> None:
    async def done() -> bool:
        return len(engine.log.event_ids()) >= count and all(r.ended is not None for r in engine.log.runs)

    await eventually(done, within=within, what=f"{count} events in runs")


@pytest.mark.both_servers
async def test_a_lane_continues_as_new_under_a_stream_and_loses_nothing(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    """A write action's batches are all fired by the lane itself (no run holds a slot), so a steady stream
    keeps the lane's workflow busy, and it continues as new again and again while nudges keep landing."""
    async with engine_with(platform, temporal_env, lane_history_limit=40) as engine:
        action = {
            "type": "object",
            "alias": "tally/{{ batch.first_id }}",
            "value": {"type": "tally", "ids": "{{ batch.messages }}"},
        }
        body = recorder_listener(batch={"window_seconds": 0.1}, action=action, owns=["tally/**"])
        await engine.command("save_listener", listener=body)
        sid = await new_session(engine)
        handle = engine.client.get_workflow_handle(lane_workflow_id(sid, "orchestrate", "_"))
        ids = await write_many(engine, sid, ["missions/first"])
        await eventually(lambda: _tallied(engine, sid, ids), what="the first batch")
        first_run_id = (await handle.describe()).run_id
        for burst in range(30):
            ids += await write_many(engine, sid, [f"missions/{burst}/{n}" for n in range(10)])
            await asyncio.sleep(0.05)
        await eventually(lambda: _tallied(engine, sid, ids), within=60, what="every event in a batch")

        tallied = await _tallied_ids(engine, sid)
        assert sorted(tallied) == ids, "every event in exactly one batch"
        assert (await handle.describe()).run_id != first_run_id
        history = await engine.client.get_workflow_handle(handle.id, run_id=first_run_id).fetch_history()
        assert history.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW


@pytest.mark.both_servers
async def test_a_serial_lane_continues_as_new_between_runs_and_never_runs_two_at_once(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    """Bursts that each find the lane free (the lane fires them itself) and batches that wait for the run
    before them (the run's end hands the slot on): the lane continues as new, every event runs once, in
    order, and never two runs at once."""
    async with engine_with(platform, temporal_env, lane_history_limit=40) as engine:
        # Runs long enough that two at once would show.
        action = {"type": "workflow", "workflow": "recorder", "input": {"sleep": 0.3}}
        await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": 0.1}, action=action))
        sid = await new_session(engine)
        handle = engine.client.get_workflow_handle(lane_workflow_id(sid, "orchestrate", "_"))
        ids = await write_many(engine, sid, ["missions/first"])
        await all_ran(engine, 1)
        first_run_id = (await handle.describe()).run_id
        for burst in range(10):
            # Ten writes one after the other: some land in the run's window, the rest wait for its end.
            ids += await write_many(engine, sid, [f"missions/{burst}/{n}" for n in range(10)])
            await all_ran(engine, len(ids), within=60)

        assert engine.log.event_ids() == ids, "every event exactly once, in order"
        assert engine.log.most_at_once["orchestrate:_"] == 1
        assert await overlapping_holds(engine, sid, "orchestrate") == []
        assert (await handle.describe()).run_id != first_run_id
        history = await engine.client.get_workflow_handle(handle.id, run_id=first_run_id).fetch_history()
        assert history.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW


async def _tallied_ids(engine: Engine, sid: str) -> list[int]:
    objects = (await engine.command("list_objects", session_id=sid, prefix="tally/"))["objects"]
    return [int(m["id"]) for obj in objects for m in obj["value"]["ids"]]


async def _tallied(engine: Engine, sid: str, ids: list[int]) -> bool:
    return set(await _tallied_ids(engine, sid)) >= set(ids)


@pytest.mark.both_servers
async def test_an_idle_lane_completes_and_the_next_event_starts_it_again(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    async with engine_with(platform, temporal_env, lane_idle_exit_seconds=1.0) as engine:
        await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": 0.1}))
        sid = await new_session(engine)
        handle = engine.client.get_workflow_handle(lane_workflow_id(sid, "orchestrate", "_"))
        ids = await write_many(engine, sid, ["missions/a", "missions/b"])
        await all_ran(engine, len(ids))
        first_run_id = (await handle.describe()).run_id

        async def completed() -> bool:
            return (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED

        await eventually(completed, within=15, what="the idle lane to complete")
        ids += await write_many(engine, sid, ["missions/c"])
        await all_ran(engine, len(ids))
        assert engine.log.event_ids() == ids
        description = await handle.describe()
        assert description.run_id != first_run_id
        # The first two may share a batch or not (two writes, two routing rounds); the one after the restart
        # is a batch of its own, in the lane's new run.
        assert engine.log.runs[-1].input["batch"]["event_ids"] == ids[2:]


async def test_events_written_at_the_idle_exit_moment_are_not_lost(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    idle = 0.5
    async with engine_with(platform, temporal_env, lane_idle_exit_seconds=idle) as engine:
        await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": 0}))
        sid = await new_session(engine)
        handle = engine.client.get_workflow_handle(lane_workflow_id(sid, "orchestrate", "_"))
        ids: list[int] = []
        run_ids: set[str] = set()
        # Each write lands around the moment the lane, idle since the previous write, decides to complete:
        # a little before, at, or a little after it.
        for step in range(12):
            ids += await write_many(engine, sid, [f"missions/{step}"])
            await all_ran(engine, len(ids))
            run_ids.add((await handle.describe()).run_id)
            await asyncio.sleep(max(idle - 0.15 + 0.03 * step, 0.0))
        await all_ran(engine, len(ids))
        assert engine.log.event_ids() == ids, "every event exactly once, in order"
        assert len(run_ids) > 1, "the lane did complete and start again during the loop"


async def test_an_event_landing_as_a_write_fires_and_the_lane_exits_is_neither_lost_nor_doubled(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    # With the window as long as the idle exit, the lane fires a write action and completes in one go;
    # a second event lands around that moment.
    quiet = 0.3
    async with engine_with(platform, temporal_env, lane_idle_exit_seconds=quiet) as engine:
        action = {"type": "object", "alias": "tally/last", "value": {"type": "tally", "last": "{{ batch.last_id }}"}}
        listener = {
            "name": "tally",
            "filter": {"types": ["object.**"], "aliases": ["missions/**"]},
            "batch": {"window_seconds": quiet},
            "action": action,
        }
        await engine.command("save_listener", listener=listener)
        sid = await new_session(engine)
        ids: list[int] = []
        for step in range(12):
            ids += await write_many(engine, sid, [f"missions/{step}/a"])
            await asyncio.sleep(quiet - 0.04 + 0.01 * step)
            ids += await write_many(engine, sid, [f"missions/{step}/b"])

            async def answered(last: int = ids[-1]) -> bool:
                return any(last in o["event_ids"] for o in await lane_outcomes(engine, sid, "tally"))

            await eventually(answered, what=f"the batch of step {step}")
        outcomes = await engine.platform.store.recent_outcomes(sid, "tally", limit=1000)
        consumed = [i for o in outcomes for i in o["event_ids"]]
        assert sorted(consumed) == ids, "every event in exactly one batch"


@pytest.mark.both_servers
async def test_a_lane_terminated_from_outside_with_events_waiting_still_delivers_them_all(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    """Its events are in the store: the router's poll nudges the lane again, and a new one fires them."""
    async with engine_with(platform, temporal_env) as engine:
        body = recorder_listener(
            batch={"window_seconds": 0.5},
            action={"type": "workflow", "workflow": "recorder", "input": {"sleep": 1.5}},
        )
        await engine.command("save_listener", listener=body)
        sid = await new_session(engine)
        handle = engine.client.get_workflow_handle(lane_workflow_id(sid, "orchestrate", "_"))
        first = await write_many(engine, sid, ["missions/a"])
        await eventually(lambda: _open(engine), what="the first run")
        # These wait behind the run; the lane holding them is terminated before it fires them.
        waiting = await write_many(engine, sid, [f"missions/w{n}" for n in range(5)])
        await handle.terminate("an operator's mistake")
        await all_ran(engine, len(first) + len(waiting), within=60)
        assert engine.log.event_ids() == first + waiting, "every event exactly once, in order"
        assert engine.log.most_at_once["orchestrate:_"] == 1, "the new lane waited for the run in flight"
        assert await overlapping_holds(engine, sid, "orchestrate") == []


async def _open(engine: Engine) -> bool:
    return bool(engine.log.open)


async def test_a_lane_whose_run_is_stuck_keeps_a_constant_state_while_50000_events_arrive(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    """The events wait in the store, not in the lane: its state does not grow, nothing wakes it while it
    cannot fire, and they all reach the next runs once the stuck one ends (continuing as new under a stream
    is the two tests above)."""
    async with engine_with(platform, temporal_env, lane_history_limit=40) as engine:
        body = recorder_listener(
            batch={"window_seconds": 0.1, "max_events": 1000},
            action={
                "type": "workflow",
                "workflow": "recorder",
                "input": {"sleep": 100_000, "sleep_for": "missions/stuck", "events": "{{ batch.messages }}"},
            },
        )
        await engine.command("save_listener", listener=body)
        sid = await new_session(engine)
        handle = engine.client.get_workflow_handle(lane_workflow_id(sid, "orchestrate", "_"))
        # The first run sleeps 100,000 s of workflow time: stuck, for the test.
        [stuck] = await write_many(engine, sid, ["missions/stuck"])
        await eventually(lambda: _open(engine), what="the stuck run")
        sizes = [len(json.dumps(await handle.query("state")))]
        length = (await handle.describe()).history_length
        total = 50_000
        await _bulk_write(engine, sid, total)
        await eventually(lambda: _routed(engine, sid), within=120, what="the router to queue 50,000 events")
        # Time passes for the lane without a run ending. It is not woken for what waits: its run holds its only
        # slot, and the record of that run's end hands the slot on, so the router leaves it waiting.
        for _ in range(20):
            await temporal_env.sleep(30)
        sizes.append(len(json.dumps(await handle.query("state"))))
        assert max(sizes) < 4_000, f"the lane's state stays small: {sizes} bytes"
        grown = (await handle.describe()).history_length - length
        assert grown < 20, f"the lane's history grew by {grown} events for 50,000 events it could not fire"
        waiting = (await engine.command("list_session_listeners", session_id=sid))["listeners"][0]["lanes"][0]
        assert waiting["pending"] == total
        # Once the stuck run ends, everything that waited goes, in batches of max_events.
        await engine.client.get_workflow_handle(f"exe:{sid}:orchestrate:_:{stuck}.0").cancel()

        async def delivered() -> bool:
            return len(engine.log.event_ids()) >= total + 1

        await eventually(delivered, within=300, what="every event in a run")
        async with engine.platform.store.transaction() as conn:
            written = await conn.fetch(
                "SELECT id FROM orchestrator.events WHERE session_id = $1 AND alias LIKE 'missions/%'", sid
            )
        assert sorted(engine.log.event_ids()) == sorted(r["id"] for r in written), "every event exactly once"
        assert engine.log.most_at_once["orchestrate:_"] == 1
        assert await overlapping_holds(engine, sid, "orchestrate") == []


async def _bulk_write(engine: Engine, sid: str, count: int) -> None:
    """`count` object writes through the store, a thousand to a statement (one by one took a minute)."""
    store = engine.platform.store
    for start in range(0, count, 1000):
        objects = [{"alias": f"missions/bulk/{n}", "value": {"type": "m"}} for n in range(start, start + 1000)]
        await store.write_objects(sid, objects)


async def _routed(engine: Engine, sid: str) -> bool:
    async with engine.platform.store.transaction() as conn:
        behind = await conn.fetchval(
            "SELECT s.last_event_id - c.routed_event_id FROM orchestrator.sessions s JOIN"
            " orchestrator.routing_cursors c ON c.session_id = s.id"
            " WHERE s.id = $1",
            sid,
        )
    return behind == 0
