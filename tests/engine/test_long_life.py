"""Long life: a lane continues as new under a stream, and completes when idle, and loses nothing either way."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

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


async def test_a_lane_continues_as_new_under_a_stream_and_loses_nothing(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    async with engine_with(platform, temporal_env, lane_history_limit=40) as engine:
        await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": 0.1}))
        sid = await new_session(engine)
        handle = engine.client.get_workflow_handle(lane_workflow_id(sid, "orchestrate", "_"))
        ids = await write_many(engine, sid, ["missions/first"])
        await all_ran(engine, 1)
        first_run_id = (await handle.describe()).run_id
        for burst in range(30):
            ids += await write_many(engine, sid, [f"missions/{burst}/{n}" for n in range(10)])
            await asyncio.sleep(0.05)
        await all_ran(engine, len(ids), within=60)

        assert engine.log.event_ids() == ids, "every event exactly once, in order"
        assert engine.log.most_at_once["orchestrate:_"] == 1
        assert (await handle.describe()).run_id != first_run_id
        history = await engine.client.get_workflow_handle(handle.id, run_id=first_run_id).fetch_history()
        assert history.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW


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


async def test_a_lane_too_large_to_hand_over_stays_in_its_run_and_hands_over_once_it_shrinks(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    # A hand-over limit of 4 KB stands for Temporal's 2 MB: a slow run lets a few dozen events pile up.
    async with engine_with(platform, temporal_env, lane_history_limit=30, lane_handover_bytes=4_000) as engine:
        listener = recorder_listener(
            batch={"window_seconds": 0.1},
            action={"type": "workflow", "workflow": "recorder", "input": {"sleep": 8}},
        )
        await engine.command("save_listener", listener=listener)
        sid = await new_session(engine)
        handle = engine.client.get_workflow_handle(lane_workflow_id(sid, "orchestrate", "_"))
        ids = await write_many(engine, sid, ["missions/first"])

        async def running() -> bool:
            return bool(engine.log.open)

        await eventually(running, what="the first run")
        first_run_id = (await handle.describe()).run_id
        for burst in range(4):
            ids += await write_many(engine, sid, [f"missions/{burst}/{n}" for n in range(15)])
        state = await handle.query("state")
        view = state if isinstance(state, dict) else state.model_dump()
        assert view["pending"] == 60, "the events wait behind the slow run"
        assert (await handle.describe()).run_id == first_run_id, "too large to hand over: still the same run"

        await all_ran(engine, len(ids), within=60)
        # Small again: further events take the history past the next weighing, and the lane hands over.
        for n in range(60):
            ids += await write_many(engine, sid, [f"missions/after/{n}"])
            if (await handle.describe()).run_id != first_run_id:
                break
        await all_ran(engine, len(ids), within=120)
        assert (await handle.describe()).run_id != first_run_id, "it continued as new once it had shrunk"
        assert engine.log.event_ids() == ids, "every event exactly once, in order"
        assert engine.log.most_at_once["orchestrate:_"] == 1
