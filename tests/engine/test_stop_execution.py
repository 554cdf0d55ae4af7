"""`stop_execution`: a run is cancelled (it cleans up, its end recorded `stopped` with the reason) or terminated
(`stopped` at once), and its lane goes on as after a run stopped from outside: the slot is freed, handed on, and the
stopped run is not repeated. A run that ignores its cancellation is terminated after its grace."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus

from orchestrator.crossings import Died, dies_at, inject
from orchestrator.dev.log import activity_lines
from orchestrator.engine import wait_answers
from orchestrator.lanes.executions import TemporalRuns
from orchestrator.workflows.messages import RunTag
from tests.engine.harness import Engine, eventually, new_session, recorder_listener, write_many

pytestmark = pytest.mark.asyncio

SLOW = {
    "type": "workflow",
    "workflow": "recorder",
    "input": {"sleep": 600, "sleep_for": "missions/slow", "events": "{{ batch.messages }}"},
}


async def test_a_stopped_run_ends_stopped_and_its_lane_takes_what_waited(engine: Engine) -> None:
    listener = recorder_listener(batch={"window_seconds": 0.1}, action=SLOW, retry={"attempts": 2})
    await engine.command("save_listener", listener=listener)
    sid = await new_session(engine)
    await write_many(engine, sid, ["missions/slow"])

    async def started(n: int) -> bool:
        return len(engine.log.runs) >= n

    await eventually(lambda: started(1), what="the slow run")
    await write_many(engine, sid, ["missions/fast"])  # waits behind the slow run: one run at a time
    slow = str(engine.log.runs[0].input["execution_id"])

    # "Graceful unless asked to terminate": asked as a flag here (`mode: terminate` in the tests below).
    conflicting = {"command": "stop_execution", "session_id": sid, "execution_id": slow, "mode": "cancel"}
    refused = await engine.platform.command({**conflicting, "terminate": True})
    assert refused["error"] == "invalid_request" and "terminate" in refused["message"], refused
    assert (await only_run_of(engine, sid, slow))["status"] == "running", "a refused stop changes nothing"
    reply = await engine.command("stop_execution", session_id=sid, execution_id=slow, terminate=True)
    assert reply["execution"] == {"id": slow, "status": "stopped"}

    await eventually(lambda: started(2), what="the next batch, in the slot the stopped run freed")
    runs = {r["id"]: r for r in (await engine.command("list_executions", session_id=sid))["executions"]}
    assert runs[slow]["status"] == "stopped" and runs[slow]["error"] == "stopped by stop_execution"
    assert len(engine.log.runs) == 2, "a stopped run is not repeated"
    again = await engine.command("stop_execution", session_id=sid, execution_id=slow)
    assert again["execution"]["status"] == "stopped", "stopping it again changes nothing"
    ended = (await engine.command("list_session_events", session_id=sid, types=["execution.ended"]))["events"]
    assert [e["execution"]["id"] for e in ended].count(slow) == 1, "its end is recorded once"
    [end] = [e for e in ended if e["execution"]["id"] == slow]
    assert end["execution"]["error"] == {"type": "stopped", "message": "stopped by stop_execution"}, end

    missing = await engine.platform.command({"command": "stop_execution", "session_id": sid, "execution_id": "exe:x"})
    assert missing["error"] == "not_found" and missing["message"].startswith("execution_id")


async def test_a_stop_lets_the_run_clean_up_and_its_end_says_stopped_with_the_reason(engine: Engine) -> None:
    listener = recorder_listener(batch={"window_seconds": 0.1}, action=SLOW, retry={"attempts": 2})
    await engine.command("save_listener", listener=listener)
    sid = await new_session(engine)
    await write_many(engine, sid, ["missions/slow"])

    async def started(n: int) -> bool:
        return len(engine.log.runs) >= n

    await eventually(lambda: started(1), what="the slow run")
    await write_many(engine, sid, ["missions/fast"])
    slow = str(engine.log.runs[0].input["execution_id"])
    reply = await engine.command("stop_execution", session_id=sid, execution_id=slow, reason="the customer left")
    assert reply["execution"] == {"id": slow, "status": "stopping"}

    async def ended() -> bool:
        runs = {r["id"]: r for r in (await engine.command("list_executions", session_id=sid))["executions"]}
        return runs[slow]["status"] != "running"

    await eventually(ended, what="the stopped run's end")
    assert engine.log.runs[0].ended is not None, "it cleaned up: its cancellation ran its own code"
    runs = {r["id"]: r for r in (await engine.command("list_executions", session_id=sid))["executions"]}
    # A run's statuses end `completed`, `failed` or `stopped` (the data model); `cancelled` is `cancel_on`'s alone.
    assert (runs[slow]["status"], runs[slow]["error"]) == ("stopped", "the customer left")
    await eventually(lambda: started(2), what="the next batch, in the slot the stopped run freed")
    assert len(engine.log.runs) == 2, "a stopped run is not repeated"
    [end] = [
        e
        for e in (await engine.command("list_session_events", session_id=sid, types=["execution.ended"]))["events"]
        if e["execution"]["id"] == slow
    ]
    assert end["execution"]["status"] == "stopped"
    assert end["execution"]["error"] == {"type": "stopped", "message": "the customer left"}


async def only_run_of(engine: Engine, sid: str, execution_id: str) -> dict[str, Any]:
    runs = {r["id"]: r for r in (await engine.command("list_executions", session_id=sid))["executions"]}
    return dict(runs[execution_id])


async def recorded_not_started(engine: Engine, sid: str, run_input: dict[str, Any]) -> str:
    """A `start_execution` whose process dies between the run's record and its start: the sweep starts it."""
    with inject(dies_at("execution.recorded")), pytest.raises(Died):
        await engine.platform.command(
            {"command": "start_execution", "session_id": sid, "workflow": "recorder", "input": run_input}
        )
    [recorded] = (await engine.command("list_executions", session_id=sid))["executions"]
    assert recorded["status"] == "running" and not engine.log.runs, "recorded, not started"
    return str(recorded["id"])


async def only_run(engine: Engine, sid: str) -> dict[str, Any]:
    [found] = (await engine.command("list_executions", session_id=sid))["executions"]
    return dict(found)


async def ended_once(engine: Engine, sid: str) -> dict[str, Any]:
    async def ended() -> bool:
        return (await only_run(engine, sid))["status"] != "running"

    await eventually(ended, within=60, what="the run, started by the sweep, to end by the stop")
    return await only_run(engine, sid)


# `sleep`: a run that would run for ten minutes; none: one that would complete at once, before it could hear.
@pytest.mark.parametrize("run_input", [{"sleep": 600}, {}], ids=["long", "at_once"])
@pytest.mark.parametrize("mode", ["cancel", "terminate"])
async def test_a_run_stopped_between_its_record_and_its_start_is_stopped_once_it_starts(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, mode: str, run_input: dict[str, Any]
) -> None:
    """A run is recorded before its start is made: a stop in between finds nothing on Temporal. Ended there and
    then, the run would run all the same once started; it answers `stopping`, the run's start (the sweep's here)
    tells it the stop (cancelled, so it cleans up; or terminated, with no clean-up), and it ends `stopped` with
    the reason, however it ended. The router's poll, which would tell it later, is kept out (its delay an hour)."""
    monkeypatch.setattr(wait_answers, "UNTOLD_SECONDS", 3600.0)
    sid = await new_session(engine)
    execution_id = await recorded_not_started(engine, sid, run_input)
    reply = await engine.command(
        "stop_execution", session_id=sid, execution_id=execution_id, mode=mode, reason="not wanted", grace_seconds=5
    )
    assert reply["execution"] == {"id": execution_id, "status": "stopping"}
    run = await ended_once(engine, sid)
    assert (run["status"], run["error"]) == ("stopped", "not wanted")
    assert [r.input["execution_id"] for r in engine.log.runs] in ([execution_id], []), "started once, if at all"
    if run_input:
        # Told as asked: Temporal's cancellation, which the run let through, or its termination.
        # (Its end is recorded in its last workflow task, a moment before Temporal closes it.)
        expected = WorkflowExecutionStatus.CANCELED if mode == "cancel" else WorkflowExecutionStatus.TERMINATED

        async def closed_as_told() -> bool:
            return (await engine.client.get_workflow_handle(execution_id).describe()).status == expected

        await eventually(closed_as_told, what=f"Temporal to close the run {expected.name}")
    if mode == "terminate":
        await asyncio.sleep(1.0)
        assert all(r.ended is None for r in engine.log.runs), "terminated: none of its clean-up ran"


async def test_a_terminate_after_a_graceful_stop_before_the_start_ends_the_run_at_once_with_its_reason(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two stops while the run is recorded and not started: a graceful one with a long grace, then `terminate`.
    The second is not lost behind the first: the run is terminated once started, its reason the terminate's."""
    monkeypatch.setattr(wait_answers, "UNTOLD_SECONDS", 3600.0)
    sid = await new_session(engine)
    execution_id = await recorded_not_started(engine, sid, {"sleep": 600})
    gently = await engine.command(
        "stop_execution", session_id=sid, execution_id=execution_id, reason="gently", grace_seconds=600
    )
    now = await engine.command(
        "stop_execution", session_id=sid, execution_id=execution_id, mode="terminate", reason="now"
    )
    assert gently["execution"]["status"] == now["execution"]["status"] == "stopping"
    run = await ended_once(engine, sid)
    assert (run["status"], run["error"]) == ("stopped", "now")
    assert all(r.ended is None for r in engine.log.runs), "terminated: none of its clean-up ran"


async def test_a_graceful_stop_after_a_terminate_asked_before_the_start_does_not_turn_it_into_a_cancellation(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `terminate` asked while the run is recorded and not started, then a graceful stop landing just after the
    start is made (before its maker has told the first): the terminate stands. The run is terminated, never
    cancelled (none of its clean-up runs), and ends `stopped` with the terminate's reason."""
    monkeypatch.setattr(wait_answers, "UNTOLD_SECONDS", 3600.0)
    sid = await new_session(engine)
    execution_id = await recorded_not_started(engine, sid, {"sleep": 600})
    now = await engine.command(
        "stop_execution", session_id=sid, execution_id=execution_id, mode="terminate", reason="now"
    )
    assert now["execution"]["status"] == "stopping"
    real = TemporalRuns.start
    gently: list[dict[str, Any]] = []

    async def start_then_a_graceful_stop(self: TemporalRuns, tag: RunTag, run_input: Any, priority: Any) -> None:
        await real(self, tag, run_input, priority)
        if tag.execution_id == execution_id and not gently:
            gently.append(
                await engine.command(
                    "stop_execution", session_id=sid, execution_id=execution_id, reason="gently", grace_seconds=600
                )
            )

    monkeypatch.setattr(TemporalRuns, "start", start_then_a_graceful_stop)
    run = await ended_once(engine, sid)
    assert gently, "the sweep started the run"
    assert (run["status"], run["error"]) == ("stopped", "now")

    async def terminated() -> bool:
        described = await engine.client.get_workflow_handle(execution_id).describe()
        return described.status == WorkflowExecutionStatus.TERMINATED

    await eventually(terminated, what="Temporal to close the run TERMINATED")
    assert all(r.ended is None for r in engine.log.runs), "terminated: none of its clean-up ran"


async def test_the_dev_lines_say_a_stopped_runs_end_as_recorded_whether_it_cleaned_up_or_was_terminated(
    engine: Engine,
) -> None:
    """`orchestrator dev` prints one line per run's end with its status as recorded: a run let clean up reports its
    cancellation and is recorded `stopped` (the line said `cancelled`); a terminated one reports nothing, and its
    stop records its end (no line was printed)."""
    await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": 0.1}, action=SLOW))
    sessions = [await new_session(engine), await new_session(engine)]
    for sid in sessions:
        await write_many(engine, sid, ["missions/slow"])

    async def started() -> bool:
        return len(engine.log.runs) >= 2

    await eventually(started, what="both slow runs")
    lines: list[str] = []
    by_session = {str(r.input["session_id"]): str(r.input["execution_id"]) for r in engine.log.runs}
    graceful, terminated = (by_session[sid] for sid in sessions)
    with activity_lines(lines.append):
        await engine.command("stop_execution", session_id=sessions[0], execution_id=graceful, reason="let go")
        await engine.command("stop_execution", session_id=sessions[1], execution_id=terminated, mode="terminate")

        async def both_said() -> bool:
            return all(any(f"run {run}" in line for line in lines) for run in (graceful, terminated))

        await eventually(both_said, what="a line for each run's end")
    [said_graceful] = [line for line in lines if f"run {graceful}" in line]
    [said_terminated] = [line for line in lines if f"run {terminated}" in line]
    assert " stopped" in said_graceful and "error: let go" in said_graceful, said_graceful
    assert " stopped" in said_terminated and "stopped by stop_execution" in said_terminated, said_terminated
