"""Commands that land between a run's record in PostgreSQL and its start on Temporal, raced live: the command
runs after the record and before the start, which then goes on (SPEC 4: a run recorded but not yet started has
not started). A session deleted there leaves no run of it running; a run stopped there ends `stopped` once, and
is not repeated however it ends."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus

from orchestrator.engine import wait_answers
from orchestrator.lanes.executions import TemporalRuns
from orchestrator.workflows.messages import RunTag
from tests.engine.harness import Engine, eventually, new_session, recorder_listener, write_many

pytestmark = pytest.mark.asyncio


def before_the_first_start(monkeypatch: pytest.MonkeyPatch, between: Callable[[RunTag], Awaitable[None]]) -> None:
    """`between` runs after the first run's record and before its start, which then goes on."""
    real = TemporalRuns.start
    done: list[str] = []

    async def start(self: TemporalRuns, tag: RunTag, run_input: Any, priority: Any) -> None:
        if not done:
            done.append(tag.execution_id)
            await between(tag)
        await real(self, tag, run_input, priority)

    monkeypatch.setattr(TemporalRuns, "start", start)


async def executions(engine: Engine, sid: str) -> list[dict[str, Any]]:
    return list((await engine.command("list_executions", session_id=sid))["executions"])


async def test_a_session_deleted_between_a_runs_record_and_its_start_leaves_no_run_of_it_running(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = await new_session(engine)
    deleted: list[dict[str, Any]] = []
    started: list[str] = []

    async def delete(tag: RunTag) -> None:
        started.append(tag.execution_id)
        deleted.append(await engine.command("delete_session", session_id=sid))

    before_the_first_start(monkeypatch, delete)
    await engine.platform.command(
        {"command": "start_execution", "session_id": sid, "workflow": "recorder", "input": {"sleep": 600}}
    )
    assert deleted and deleted[0]["complete"], deleted
    handle = engine.client.get_workflow_handle(started[0])

    async def ended_on_temporal() -> bool:
        return (await handle.describe()).status != WorkflowExecutionStatus.RUNNING

    await eventually(ended_on_temporal, what="the deleted session's run to end on Temporal")
    assert (await handle.describe()).status == WorkflowExecutionStatus.TERMINATED


async def test_a_run_started_while_its_session_is_being_deleted_is_ended(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deletion ends the session's runs on Temporal, then takes their records a table at a time: a run whose
    start is made after the first, its record still there, is ended too (its start sees the session going, and
    the deletion's next round ends what the session still runs)."""
    sid = await new_session(engine)
    started: list[str] = []

    async def deletion_begins(tag: RunTag) -> None:
        started.append(tag.execution_id)
        await engine.platform.store.pool.execute("SELECT orchestrator.orchestrator_mark_deleting($1, NULL)", sid)

    before_the_first_start(monkeypatch, deletion_begins)
    await engine.platform.command(
        {"command": "start_execution", "session_id": sid, "workflow": "recorder", "input": {"sleep": 600}}
    )
    handle = engine.client.get_workflow_handle(started[0])

    async def ended_on_temporal() -> bool:
        return (await handle.describe()).status != WorkflowExecutionStatus.RUNNING

    await eventually(ended_on_temporal, what="the run of a session being deleted to end on Temporal")
    assert (await handle.describe()).status == WorkflowExecutionStatus.TERMINATED


@pytest.mark.parametrize("kind", ["listener", "start_execution"])
@pytest.mark.parametrize("mode", ["cancel", "terminate"])
async def test_a_run_stopped_between_its_record_and_its_start_is_told_by_its_start(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, kind: str, mode: str
) -> None:
    """The start's maker tells the stop right after the start: the router's poll, which would tell it later, is
    kept out (its delay an hour), so nothing else could. A long run ends as asked: cancelled (it lets the
    cancellation through) or terminated."""
    monkeypatch.setattr(wait_answers, "UNTOLD_SECONDS", 3600.0)
    sid = await new_session(engine)
    stops: list[dict[str, Any]] = []
    started: list[str] = []

    async def stop(tag: RunTag) -> None:
        started.append(tag.execution_id)
        stops.append(
            await engine.command(
                "stop_execution", session_id=sid, execution_id=tag.execution_id, mode=mode, reason="no"
            )
        )

    before_the_first_start(monkeypatch, stop)
    if kind == "listener":
        slow = {"type": "workflow", "workflow": "recorder", "input": {"sleep": 600}}
        await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": 0.1}, action=slow))
        await write_many(engine, sid, ["missions/a"])
    else:
        await engine.platform.command(
            {"command": "start_execution", "session_id": sid, "workflow": "recorder", "input": {"sleep": 600}}
        )

    async def settled() -> bool:
        found = await executions(engine, sid)
        return bool(found) and all(e["status"] != "running" for e in found)

    await eventually(settled, what="the stopped run's end")
    assert stops and stops[0]["execution"]["status"] == "stopping", stops
    assert [(e["status"], e["error"]) for e in await executions(engine, sid)] == [("stopped", "no")]
    expected = WorkflowExecutionStatus.CANCELED if mode == "cancel" else WorkflowExecutionStatus.TERMINATED
    handle = engine.client.get_workflow_handle(started[0])

    async def closed_as_told() -> bool:
        return (await handle.describe()).status == expected

    await eventually(closed_as_told, what=f"Temporal to close the run {expected.name}")


async def test_a_listeners_run_stopped_between_its_record_and_its_start_ends_stopped_and_is_not_repeated(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that fails at once, with `retry`: it may fail before it hears the stop, and is not repeated."""
    fails = {"type": "workflow", "workflow": "recorder", "input": {"fail": True}}
    listener = recorder_listener(
        batch={"window_seconds": 0.1}, action=fails, retry={"attempts": 3, "delay_seconds": 0.1}
    )
    await engine.command("save_listener", listener=listener)
    sid = await new_session(engine)
    stops: list[dict[str, Any]] = []

    async def stop(tag: RunTag) -> None:
        stops.append(await engine.command("stop_execution", session_id=sid, execution_id=tag.execution_id, reason="no"))

    before_the_first_start(monkeypatch, stop)
    await write_many(engine, sid, ["missions/a"])

    async def settled() -> bool:
        found = await executions(engine, sid)
        return bool(found) and all(e["status"] != "running" for e in found)

    await eventually(settled, what="the run's end")
    await asyncio.sleep(1.5)  # a repeat would be due after 0.1 s
    assert stops and stops[0]["execution"]["status"] == "stopping", stops
    found = await executions(engine, sid)
    assert [(e["status"], e["error"]) for e in found] == [("stopped", "no")], found
    assert len(engine.log.runs) <= 1, "started once at most, never repeated"
    failed = await engine.command("list_session_events", session_id=sid, types=["listener.failed"])
    assert not failed["events"], "a stopped run is no listener's failure"
