"""A session that closes while a run's end is being recorded: the end is still recorded and frees the slot."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from temporalio import activity
from temporalio.testing import WorkflowEnvironment

from orchestrator.platform import Platform
from orchestrator.workflows.messages import RunEnd
from tests.engine.harness import (
    Engine,
    eventually,
    lane_outcomes,
    new_session,
    recorder_listener,
    replacing,
    running_engine,
)

pytestmark = pytest.mark.both_servers


class ClosesFirst:
    """Stands in for `run_ended`: the session closes just before the run's end is recorded."""

    def __init__(self, real: Callable[..., Any], platform: Platform) -> None:
        self.real, self.platform = real, platform

    @activity.defn(name="orchestrator.run_ended")
    async def ended(self, end: RunEnd) -> None:
        await self.platform.command({"command": "close_session", "session_id": end.tag.session_id})
        await self.real(end)


@pytest.fixture
async def engine(platform: Platform, temporal_env: WorkflowEnvironment) -> AsyncIterator[Engine]:
    platform.settings = platform.settings.model_copy(
        update={"search_attributes": not temporal_env.supports_time_skipping}
    )

    wrap = replacing("orchestrator.run_ended", lambda real: ClosesFirst(real, platform).ended)
    async with running_engine(platform, temporal_env.client, wrap=wrap) as running:
        yield running


async def test_a_run_whose_session_closes_before_its_end_is_recorded_ends_and_frees_its_slot(
    engine: Engine,
) -> None:
    listener = recorder_listener(batch={"window_seconds": 0.2}, receipt={"alias": "ops/receipts"})
    await engine.command("save_listener", listener=listener)
    sid = await new_session(engine)
    reply = await engine.command("write_object", session_id=sid, alias="missions/a", value={"type": "m"})

    async def slot_freed() -> bool:
        runs = (await engine.command("list_executions", session_id=sid))["executions"]
        if not runs or runs[0]["status"] != "completed":
            return False
        [listener] = (await engine.command("list_session_listeners", session_id=sid))["listeners"]
        return all(not lane["runs_in_flight"] for lane in listener["lanes"])

    await eventually(slot_freed, what="the run to end and its lane to free the slot")
    [outcome] = await lane_outcomes(engine, sid, "orchestrate")
    assert (outcome["status"], outcome["event_ids"]) == ("success", [reply["event_id"]])
    ended = await engine.command("list_session_events", session_id=sid, types=["execution.ended"])
    assert len(ended["events"]) == 1, "a closed session still records its runs' ends"
