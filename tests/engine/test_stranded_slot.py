"""A run terminated from outside never reports its end; the router's sweep finds it and frees its slot."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from temporalio.testing import WorkflowEnvironment

from orchestrator.platform import Platform
from tests.engine.harness import Engine, eventually, new_session, recorder_listener, running_engine, write_many

pytestmark = pytest.mark.both_servers


@pytest.fixture
async def engine(platform: Platform, temporal_env: WorkflowEnvironment) -> AsyncIterator[Engine]:
    # The sweep asks Temporal about a run once its record has said `running` this long (45 s by default).
    platform.settings = platform.settings.model_copy(
        update={"search_attributes": not temporal_env.supports_time_skipping, "run_check_seconds": 1.0}
    )
    async with running_engine(platform, temporal_env.client) as running:
        yield running


async def test_a_terminated_run_does_not_hold_its_slot_for_ever(engine: Engine) -> None:
    listener = recorder_listener(
        batch={"window_seconds": 0.2},
        action={"type": "workflow", "workflow": "recorder", "input": {"sleep": 100_000}},
    )
    await engine.command("save_listener", listener=listener)
    sid = await new_session(engine)
    [first] = await write_many(engine, sid, ["missions/a"])

    async def runs(n: int) -> bool:
        return len(engine.log.runs) >= n

    await eventually(lambda: runs(1), what="the first run")

    async def run_recorded() -> bool:
        reply = await engine.command("list_session_events", session_id=sid, types=["execution.started"])
        return bool(reply["events"])

    # Terminated once its start is recorded: the time-skipping server can keep time locked for ever when a
    # workflow is terminated in the middle of a workflow task.
    await eventually(run_recorded, what="the run's execution.started")
    await asyncio.sleep(0.5)
    await engine.client.get_workflow_handle(f"exe:{sid}:orchestrate:_:{first}.0").terminate("operator")
    [second] = await write_many(engine, sid, ["missions/b"])
    await eventually(lambda: runs(2), what="the run after the stranded slot was freed")
    assert engine.log.runs[1].input["batch"]["event_ids"] == [second]
    [run] = (await engine.command("list_executions", session_id=sid, status="stopped"))["executions"]
    assert run["id"] == f"exe:{sid}:orchestrate:_:{first}.0", "the terminated run is recorded as stopped"
