"""A run terminated from outside never sends `run_finished`; its lane frees the slot on its own."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.engine.harness import Engine, eventually, new_session, recorder_listener, write_many


async def test_a_terminated_run_does_not_hold_its_slot_for_ever(
    engine: Engine, temporal_env: WorkflowEnvironment
) -> None:
    if not temporal_env.supports_time_skipping:
        pytest.skip("needs the time-skipping server to wait minutes in seconds")
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
    # workflow is terminated in the middle of a workflow task (here, the run's task that records the start).
    await eventually(run_recorded, what="the run's execution.started")
    await asyncio.sleep(0.5)
    await engine.client.get_workflow_handle(f"run:{sid}:orchestrate:_:{first}").terminate("operator")
    [second] = await write_many(engine, sid, ["missions/b"])
    await temporal_env.sleep(60)
    assert len(engine.log.runs) == 1, "the slot is still held a minute later"
    await temporal_env.sleep(400)
    await eventually(lambda: runs(2), what="the run after the stranded slot was freed")
    assert engine.log.runs[1].input["batch"]["event_ids"] == [second]
