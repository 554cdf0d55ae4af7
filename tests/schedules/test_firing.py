"""Schedules firing on the dev server: an interval writes through the store into a lane, a one-time fires
once, a disabled one waits for enabling, a deleted one stops, and every firing's result is listed."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.engine.harness import Engine, eventually, new_session, recorder_listener

pytestmark = pytest.mark.devserver

CLOCK = {"alias": "ops/clock", "value": {"type": "tick"}}


def every(seconds: int) -> dict[str, Any]:
    return {"type": "interval", "every_seconds": seconds}


async def runs_of(engine: Engine, sid: str, alias: str) -> list[dict[str, Any]]:
    return list((await engine.command("list_schedule_runs", session_id=sid, alias=alias))["runs"])


async def clock_writes(engine: Engine, sid: str) -> list[dict[str, Any]]:
    reply = await engine.command("list_session_events", session_id=sid, types=["object.written"], limit=1000)
    return [e for e in reply["events"] if e["alias"] == "ops/clock"]


async def test_an_interval_schedule_writes_through_the_store_and_wakes_a_lane_until_deleted(engine: Engine) -> None:
    listener = recorder_listener(
        "on-clock", filter={"types": ["object.written"], "aliases": ["ops/clock"]}, batch={"window_seconds": 0.2}
    )
    await engine.command("save_listener", listener=listener)
    sid = await new_session(engine)
    created = await engine.command(
        "create_schedule",
        session_id=sid,
        alias="clock",
        repeat=every(1),
        invocation_target_type="object",
        target=CLOCK,
    )
    assert created["schedule"]["schedule_id"] == f"schedule:{sid}:clock"
    assert created["schedule"]["enabled"] is True

    async def two_runs_and_two_batches() -> bool:
        runs = await runs_of(engine, sid, "clock")
        return len(runs) >= 2 and len(engine.log.event_ids("on-clock")) >= 2

    await eventually(two_runs_and_two_batches, within=15, what="two firings delivered to the listener")
    described = (await engine.command("get_schedule", session_id=sid, alias="clock"))["schedule"]
    assert described["repeat"] == every(1)
    assert len(described["next_invocations"]) >= 1

    await engine.command("delete_schedule", session_id=sid, alias="clock")
    stopped_at = len(await clock_writes(engine, sid))
    await asyncio.sleep(2.5)
    writes = await clock_writes(engine, sid)
    assert len(writes) <= stopped_at + 1, "at most a firing already under way when deleted"
    assert all(w["source"] == {"client": "schedule:clock"} and w["depth"] == 0 for w in writes)
    delivered = engine.log.event_ids("on-clock")
    assert len(delivered) == len(set(delivered)), "each tick in one batch only"
    assert set(delivered) <= {w["id"] for w in writes}
    assert (await engine.command("list_schedules", session_id=sid))["schedules"] == []
    gone = await engine.platform.command({"command": "list_schedule_runs", "session_id": sid, "alias": "clock"})
    assert gone["error"] == "not_found"


async def test_list_schedule_runs_lists_each_firing_with_its_write(engine: Engine) -> None:
    sid = await new_session(engine)
    await engine.command(
        "create_schedule", session_id=sid, alias="clock", repeat=every(1), invocation_target_type="object", target=CLOCK
    )

    async def two_runs() -> bool:
        return len(await runs_of(engine, sid, "clock")) >= 2

    await eventually(two_runs, within=15, what="two firings")
    runs = (await runs_of(engine, sid, "clock"))[:2]
    assert [r["status"] for r in runs] == ["success", "success"]
    writes = {w["id"]: w for w in await clock_writes(engine, sid)}
    assert all(r["event_id"] in writes for r in runs)
    first, second = (datetime.fromisoformat(r["scheduled_at"]) for r in runs)
    assert second - first >= timedelta(seconds=1)


async def test_a_one_time_schedule_fires_exactly_once(engine: Engine) -> None:
    sid = await new_session(engine)
    at = (datetime.now(UTC) + timedelta(seconds=2)).replace(microsecond=0, tzinfo=None)
    repeat = {"type": "one_time", "invocation_time": at.isoformat(), "timezone": "UTC"}
    await engine.command(
        "create_schedule", session_id=sid, alias="once", repeat=repeat, invocation_target_type="object", target=CLOCK
    )

    async def fired() -> bool:
        return len(await runs_of(engine, sid, "once")) >= 1

    await eventually(fired, within=15, what="the one-time firing")
    await asyncio.sleep(2.5)
    [run] = await runs_of(engine, sid, "once")
    assert run["status"] == "success"
    assert datetime.fromisoformat(run["scheduled_at"]) == at.replace(tzinfo=UTC)
    assert len(await clock_writes(engine, sid)) == 1
    described = (await engine.command("get_schedule", session_id=sid, alias="once"))["schedule"]
    assert described["next_invocations"] == []


async def test_a_disabled_schedule_does_not_fire_until_enabled(engine: Engine) -> None:
    sid = await new_session(engine)
    await engine.command(
        "create_schedule",
        session_id=sid,
        alias="clock",
        repeat=every(1),
        invocation_target_type="object",
        target=CLOCK,
        enabled=False,
    )
    await asyncio.sleep(2.5)
    assert await runs_of(engine, sid, "clock") == []
    assert await clock_writes(engine, sid) == []
    paused = (await engine.command("get_schedule", session_id=sid, alias="clock"))["schedule"]
    assert paused["next_invocations"] == [], "a paused schedule fires at no time (it said times gone by)"
    updated = await engine.command("update_schedule", session_id=sid, alias="clock", enabled=True)
    assert updated["schedule"]["enabled"] is True
    assert updated["schedule"]["repeat"] == every(1), "an update keeps what it does not name"

    async def fired() -> bool:
        return len(await runs_of(engine, sid, "clock")) >= 1

    await eventually(fired, within=10, what="a firing after enabling")
    assert (await engine.command("get_schedule", session_id=sid, alias="clock"))["schedule"]["next_invocations"]
    await engine.command("update_schedule", session_id=sid, alias="clock", enabled=False)
    settled = len(await clock_writes(engine, sid))
    await asyncio.sleep(2)
    assert len(await clock_writes(engine, sid)) <= settled + 1, "disabled again: at most one firing under way"
    again = (await engine.command("get_schedule", session_id=sid, alias="clock"))["schedule"]
    assert again["next_invocations"] == [], again


async def test_workflow_targets_start_a_run_in_the_session_and_failures_are_recorded(engine: Engine) -> None:
    sid = await new_session(engine)
    made = {}
    for alias, workflow in (("sweep", "recorder"), ("typo", "no-such-workflow")):
        made[alias] = await engine.command(
            "create_schedule",
            session_id=sid,
            alias=alias,
            repeat=every(1),
            invocation_target_type="workflow",
            target={"workflow": workflow, "input": {"why": "sweep"}},
        )
    # Saved all the same (a worker may deploy after it), with a warning, as a listener's unknown workflow is.
    assert "warnings" not in made["sweep"]
    [warning] = made["typo"]["warnings"]
    assert warning.startswith(
        "target.workflow: no worker has registered 'no-such-workflow' in the last 5 minutes; its firings fail until"
        " one does (registered: "
    )
    assert "recorder" in warning

    async def both_fired() -> bool:
        return bool(engine.log.runs) and bool(await runs_of(engine, sid, "typo"))

    await eventually(both_fired, within=15, what="both schedules to fire")
    await engine.command("delete_schedule", session_id=sid, alias="sweep")
    run = engine.log.runs[0].input
    assert (run["session_id"], run["listener"], run["input"]) == (sid, "", {"why": "sweep"})
    sweep_execution = run["execution_id"]
    assert sweep_execution.startswith(f"exe:{sid}:schedule:sweep:")
    executions = (await engine.command("list_executions", session_id=sid))["executions"]
    assert sweep_execution in {e["id"] for e in executions}
    typo = (await runs_of(engine, sid, "typo"))[0]
    assert typo["status"] == "invocation_error"
    assert typo["message"] == "target.workflow: 'no-such-workflow' is not registered"


async def test_a_workflow_targets_runs_never_overlap_a_firing_waits_for_its_run(engine: Engine) -> None:
    """Every second, a run of 2.5 s: the firings due while a run is in flight are skipped (overlap: skip), so
    the schedule's runs follow one another."""
    sid = await new_session(engine)
    await engine.command(
        "create_schedule",
        session_id=sid,
        alias="slow",
        repeat=every(1),
        invocation_target_type="workflow",
        target={"workflow": "recorder", "input": {"sleep": 2.5}},
    )

    async def three_ended() -> bool:
        return sum(run.ended is not None for run in engine.log.runs) >= 3

    await eventually(three_ended, within=30, what="three of the schedule's runs to end")
    firings = await runs_of(engine, sid, "slow")
    await engine.command("delete_schedule", session_id=sid, alias="slow")
    runs = sorted(engine.log.runs, key=lambda run: run.started)
    for earlier, later in itertools.pairwise(runs):
        assert earlier.ended is not None and earlier.ended <= later.started, "a run started beside the one before"
    assert len(firings) <= len(runs) + 1, "the firings in between were skipped"


async def test_a_closed_session_and_an_alias_outside_schedule_owns_are_recorded_as_such(engine: Engine) -> None:
    sid = await new_session(engine)
    await engine.command(
        "create_schedule", session_id=sid, alias="clock", repeat=every(1), invocation_target_type="object", target=CLOCK
    )
    await engine.command("close_session", session_id=sid)

    async def refused_once() -> bool:
        return any(r["status"] == "invocation_error" for r in await runs_of(engine, sid, "clock"))

    await eventually(refused_once, within=10, what="a firing into the closed session")
    message = next(r["message"] for r in await runs_of(engine, sid, "clock") if r["status"] == "invocation_error")
    assert message == f"session_id: session {sid!r} is closed"

    await engine.command("reopen_session", session_id=sid)
    engine.platform.settings.schedule_owns = ["views/**"]

    async def denied() -> bool:
        return any(r["status"] == "access_error" for r in await runs_of(engine, sid, "clock"))

    await eventually(denied, within=10, what="a firing outside schedule_owns")
    message = next(r["message"] for r in await runs_of(engine, sid, "clock") if r["status"] == "access_error")
    assert message == "target.alias: 'ops/clock' is outside schedule_owns"
