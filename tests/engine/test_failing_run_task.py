"""A run whose workflow task keeps failing holds its lane, and the lane says so; a run whose code raises ends.

A nondeterminism error (a deploy that changed a running run's code incompatibly; here raised by the workflow
as a stand-in) fails the workflow task, not the workflow: Temporal retries the task until a fixed worker runs
it, and the run keeps its slot meanwhile. The lane waits behind it, and `list_session_listeners` (so
`orchestrator status` and the dashboard) says which run holds it, how often its task has failed, and the error,
instead of a plain "slot held". Any other exception the run's code lets out (a `KeyError`) ends it `failed`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio import workflow
from temporalio.testing import WorkflowEnvironment
from temporalio.workflow import NondeterminismError

from orchestrator.client import Client
from orchestrator.dev.inspect import format_status, session_status
from orchestrator.platform import Platform
from tests.engine.harness import Engine, eventually, lane_state, new_session, recorder_listener, running_engine

with workflow.unsafe.imports_passed_through():
    from orchestrator.workflows.messages import RunInput

pytestmark = pytest.mark.devserver


@workflow.defn(name="buggy")
class Buggy:
    """Fails its workflow task as nondeterminism does when the batch holds `missions/bug`; looks up a field its
    batch's messages do not have when it holds `missions/typo`."""

    @workflow.run
    async def run(self, run: RunInput) -> str:
        for message in run.batch.messages:
            if message.get("alias") == "missions/bug":
                raise NondeterminismError("no_such_field: the run's code changed under it")
            if message.get("alias") == "missions/typo":
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


async def test_a_run_whose_code_raises_ends_failed_naming_the_error_and_frees_its_lane(engine: Engine) -> None:
    """A `KeyError` is no Temporal failure, yet it ends the run as one does: `listener.failed` (and so an inbox)
    hears of it, and the lane goes on to its next batch."""
    action = {"type": "workflow", "workflow": "buggy", "input": {"events": "{{ batch.messages }}"}}
    await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": 0}, action=action))
    sid = await new_session(engine)

    async def ended(count: int) -> list[dict[str, Any]]:
        async def came() -> bool:
            found = await engine.command("list_session_events", session_id=sid, types=["execution.ended"])
            return len(found["events"]) >= count

        await eventually(came, within=60, what=f"{count} runs to end")
        return list((await engine.command("list_session_events", session_id=sid, types=["execution.ended"]))["events"])

    await engine.command("write_object", session_id=sid, alias="missions/typo", value={"type": "m"})
    [typo] = await ended(1)
    assert typo["execution"]["status"] == "failed"
    error = typo["execution"]["error"]
    assert error["type"] == "KeyError" and "no_such_field" in error["message"], error
    [failed] = (await engine.command("list_session_events", session_id=sid, types=["listener.failed"]))["events"]
    assert failed["data"]["execution_id"] == typo["execution"]["id"]
    await engine.command("write_object", session_id=sid, alias="missions/next", value={"type": "m"})
    assert [e["execution"]["status"] for e in await ended(2)] == ["failed", "completed"]
