"""A run whose workflow has a bug holds its lane, and the lane says so.

An exception in a workflow that is not a Temporal failure (here a `KeyError`) fails the workflow task, not
the workflow: Temporal retries the task until a fixed worker runs it, and the run keeps its slot meanwhile.
The lane waits behind it, and `list_session_listeners` (so `orchestrator status` and the dashboard) says
which run holds it, how often its task has failed, and the error, instead of a plain "slot held".
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio import workflow
from temporalio.testing import WorkflowEnvironment

from orchestrator.client import Client
from orchestrator.dev.inspect import format_status, session_status
from orchestrator.platform import Platform
from tests.engine.harness import Engine, eventually, lane_state, new_session, recorder_listener, running_engine

with workflow.unsafe.imports_passed_through():
    from orchestrator.workflows.messages import RunInput

pytestmark = pytest.mark.devserver


@workflow.defn(name="buggy")
class Buggy:
    """Looks up a field its batch's messages do not have when the batch holds `missions/bug`."""

    @workflow.run
    async def run(self, run: RunInput) -> str:
        for message in run.batch.messages:
            if message.get("alias") == "missions/bug":
                return str(message["no_such_field"])
        return "done"


@pytest.fixture
async def engine(platform: Platform, dev_env: WorkflowEnvironment) -> AsyncIterator[Engine]:
    async with running_engine(platform, dev_env.client, workflows=[Buggy]) as running:
        yield running


async def test_a_lane_behind_a_run_whose_workflow_task_keeps_failing_says_which_run_and_why(engine: Engine) -> None:
    action = {"type": "workflow", "workflow": "buggy", "input": {"events": "{{ batch.messages }}"}}
    await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": 0}, action=action))
    sid = await new_session(engine)
    await engine.command("write_object", session_id=sid, alias="missions/bug", value={"type": "m"})
    await eventually(lambda: _slot_taken(engine, sid), what="the buggy run to take the lane's slot")
    await engine.command("write_object", session_id=sid, alias="missions/next", value={"type": "m"})

    shown: dict[str, Any] = {}

    async def says_run_failing() -> bool:
        shown.update(await lane_state(engine, sid, "orchestrate"))
        return (shown.get("waiting") or {}).get("reason") == "run_failing"

    await eventually(says_run_failing, within=60, what="the lane to say its run's workflow task fails")
    waiting = shown["waiting"]
    assert waiting["run"] == shown["runs_in_flight"][0]["execution_id"]
    assert waiting["attempts"] >= 2 and waiting["since"]
    assert "no_such_field" in waiting["error"]
    assert "whose workflow task has failed" in waiting["text"]
    assert shown["pending"] == 1, "the event behind the run waits, and is not lost"

    status = format_status(await session_status(Client.local(engine.platform), sid))
    assert f"waits: slot held by run {waiting['run']}, whose workflow task has failed" in status


async def _slot_taken(engine: Engine, sid: str) -> bool:
    return bool((await lane_state(engine, sid, "orchestrate"))["in_flight"])
