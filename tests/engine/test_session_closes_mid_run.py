"""A session that closes while a batch's run is being recorded: the run still ends and frees its slot."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from temporalio import activity
from temporalio.testing import WorkflowEnvironment

from orchestrator.core.lane_keys import lane_workflow_id
from orchestrator.core.outcomes import Outcome
from orchestrator.platform import Platform
from tests.engine.harness import (
    Engine,
    eventually,
    lane_outcomes,
    new_session,
    recorder_listener,
    replacing,
    running_engine,
)
from workflows.messages import ExecutionRecord


class ClosesFirst:
    """Stands in for `execution_started`: the session closes just before the run's start is recorded."""

    def __init__(self, real: Callable[..., Any], platform: Platform) -> None:
        self.real, self.platform = real, platform

    @activity.defn(name="orchestrator.execution_started")
    async def started(self, record: ExecutionRecord, receipt: str | None) -> list[Outcome]:
        await self.platform.command({"command": "close_session", "session_id": record.session_id})
        outcomes: list[Outcome] = await self.real(record, receipt)
        return outcomes


@pytest.fixture
async def engine(platform: Platform, temporal_env: WorkflowEnvironment) -> AsyncIterator[Engine]:
    platform.settings = platform.settings.model_copy(
        update={"search_attributes": not temporal_env.supports_time_skipping}
    )

    wrap = replacing("orchestrator.execution_started", lambda real: ClosesFirst(real, platform).started)
    async with running_engine(platform, temporal_env.client, wrap=wrap) as running:
        yield running


async def test_a_run_whose_session_closes_before_its_start_is_recorded_ends_and_frees_its_slot(
    engine: Engine,
) -> None:
    listener = recorder_listener(batch={"window_seconds": 0.2}, receipt={"alias": "ops/receipts"})
    await engine.command("save_listener", listener=listener)
    sid = await new_session(engine)
    reply = await engine.command("write_object", session_id=sid, alias="missions/a", value={"type": "m"})
    lane = engine.client.get_workflow_handle(lane_workflow_id(sid, "orchestrate", "_"))

    async def slot_freed() -> bool:
        runs = (await engine.command("list_executions", session_id=sid))["executions"]
        if not runs or runs[0]["status"] != "completed":
            return False
        state = await lane.query("state")
        view = state if isinstance(state, dict) else state.model_dump()
        return not view["in_flight"]

    await eventually(slot_freed, what="the run to end and its lane to free the slot")
    [outcome] = await lane_outcomes(engine, sid, "orchestrate")
    assert (outcome["status"], outcome["event_ids"]) == ("success", [reply["event_id"]])
    receipts = await engine.command("list_session_events", session_id=sid, types=["thread.item_posted"])
    assert not receipts["events"], "a closed session takes no receipt"
