"""Causes before effects in the stream: a run's `execution.started` comes before every event the run writes, and
its `execution.ended` after them, read through `list_session_events`, whenever the lane's driver records the
start: even when it finishes the batch only after the run has written (slow, or dead between the start and the
record and recovered by another driver)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from temporalio import workflow
from temporalio.testing import WorkflowEnvironment

from orchestrator.platform import Platform
from orchestrator.store.lane_store import Finished, Finishing
from tests.engine.harness import Engine, eventually, new_session, recorder_listener, running_engine

pytestmark = pytest.mark.both_servers

with workflow.unsafe.imports_passed_through():
    from orchestrator.sdk import RunInput, RunSession


@workflow.defn(name="writes_at_once")
class WritesAtOnce:
    """Writes two objects as soon as it starts."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        session = RunSession(run)
        await session.write_object(f"out/{run.batch.first_id}/a", {"type": "out"})
        await session.write_object(f"out/{run.batch.first_id}/b", {"type": "out"})


FINISH_DELAY_SECONDS = 1.5


@pytest.fixture(params=["slow", "dies"])
async def slow_finish_engine(
    platform: Platform, temporal_env: WorkflowEnvironment, request: pytest.FixtureRequest
) -> AsyncIterator[Engine]:
    """An engine whose lane driver records a batch's finish (and with it, until now, `execution.started`) only
    well after its run started, so the run's writes commit first: slow to record it, or dead before it (the
    driver's step fails there; the next one finds the batch claimed and finishes it)."""
    platform.settings = platform.settings.model_copy(
        update={"search_attributes": not temporal_env.supports_time_skipping}
    )
    lanes = platform.store.lanes
    real: Callable[[Finishing], Awaitable[Finished]] = lanes.finish

    died: set[int] = set()

    async def slow(finishing: Finishing) -> Finished:
        if finishing.started:
            await asyncio.sleep(FINISH_DELAY_SECONDS)
            if request.param == "dies" and finishing.batch_id not in died:
                died.add(finishing.batch_id)
                raise ConnectionResetError("the driver died between the run's start and its record")
        return await real(finishing)

    lanes.finish = slow  # type: ignore[method-assign]
    async with running_engine(platform, temporal_env.client, workflows=[WritesAtOnce]) as engine:
        yield engine


async def test_a_runs_writes_follow_its_start_and_precede_its_end_in_the_stream(slow_finish_engine: Engine) -> None:
    engine = slow_finish_engine
    listener = recorder_listener(
        "writer",
        concurrency={"mode": "keyed", "key": "alias", "max_parallel": 4},
        batch={"window_seconds": 0.1, "max_events": 1},
        action={"type": "workflow", "workflow": "writes_at_once"},
    )
    await engine.command("save_listener", listener=listener)
    sid = await new_session(engine)
    for n in range(4):
        await engine.command("write_object", session_id=sid, alias=f"missions/{n}", value={"type": "m"})

    async def events() -> list[dict[str, Any]]:
        return list((await engine.command("list_session_events", session_id=sid, limit=1000))["events"])

    async def all_ended() -> bool:
        return sum(1 for e in await events() if e["type"] == "execution.ended") >= 4

    await eventually(all_ended, within=60, what="four runs to end")
    stream = await events()
    runs: dict[str, dict[str, list[int]]] = {}
    for event in stream:
        execution = (event.get("execution") or {}).get("id") or (event.get("source") or {}).get("execution")
        if execution is None:
            continue
        kind = event["type"] if event["type"].startswith("execution.") else "write"
        runs.setdefault(execution, {}).setdefault(kind, []).append(event["id"])
    assert len(runs) == 4, runs
    for execution, seen in runs.items():
        [started], [ended], writes = seen["execution.started"], seen["execution.ended"], seen["write"]
        assert len(writes) == 2, (execution, seen)
        assert started < min(writes), f"{execution}: its writes {writes} come before its start {started}"
        assert max(writes) < ended, f"{execution}: its writes {writes} come after its end {ended}"


@workflow.defn(name="writes_many_at_once")
class WritesManyAtOnce:
    """Writes forty objects at once, then sleeps: a stop lands while its writes are in flight."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        session = RunSession(run)
        await asyncio.gather(*(session.write_object(f"many/{n}", {"type": "out"}) for n in range(40)))
        await workflow.sleep(600)


@pytest.fixture
async def many_engine(platform: Platform, temporal_env: WorkflowEnvironment) -> AsyncIterator[Engine]:
    platform.settings = platform.settings.model_copy(
        update={"search_attributes": not temporal_env.supports_time_skipping}
    )
    async with running_engine(platform, temporal_env.client, workflows=[WritesManyAtOnce]) as engine:
        yield engine


@pytest.mark.parametrize("mode", ["cancel", "terminate"])
async def test_a_run_stopped_while_its_writes_are_in_flight_ends_after_every_write_it_made(
    many_engine: Engine, mode: str
) -> None:
    """Its end is recorded as soon as Temporal ends it; its activities still in flight write after that unless
    refused (0034_run_writes_fenced.sql): what it wrote comes before its `execution.ended`, whatever it managed."""
    engine = many_engine
    listener = recorder_listener("many", action={"type": "workflow", "workflow": "writes_many_at_once"})
    await engine.command("save_listener", listener=listener)
    sid = await new_session(engine)
    await engine.command("write_object", session_id=sid, alias="missions/go", value={"type": "m"})

    async def events() -> list[dict[str, Any]]:
        return list((await engine.command("list_session_events", session_id=sid, limit=1000))["events"])

    async def writing() -> str | None:
        return next(
            (e["source"]["execution"] for e in await events() if (e.get("alias") or "").startswith("many/")), None
        )

    await eventually(writing, within=60, what="the run's first write")
    execution = await writing()
    await engine.command("stop_execution", session_id=sid, execution_id=execution, mode=mode)

    async def ended() -> bool:
        return any(e["type"] == "execution.ended" for e in await events())

    await eventually(ended, within=60, what="the stopped run's end")
    await asyncio.sleep(3)  # what was in flight in the worker has done what it could
    stream = await events()
    [end] = [e["id"] for e in stream if e["type"] == "execution.ended"]
    writes = [
        e["id"]
        for e in stream
        if (e.get("source") or {}).get("execution") == execution and e["type"] == "object.written"
    ]
    assert writes and max(writes) < end, f"writes {writes} against the end {end}"
