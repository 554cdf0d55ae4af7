"""Timers a run sets (the seed's `ctx.schedule` / `ctx.unschedule`) on the dev server: set again it replaces,
unset it is gone, and its firing wakes the listener with the schedule named in the event's `cause`."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, timedelta
from typing import Any

import pytest
from temporalio import workflow
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from orchestrator.platform import Platform
from tests.engine.harness import Engine, eventually, new_session, recorder_listener, running_engine

pytestmark = pytest.mark.devserver

with workflow.unsafe.imports_passed_through():
    from orchestrator.sdk import RunInput, RunSession, SessionError


@workflow.defn(name="snoozer")
class Snoozer:
    """Sets a reminder every second, sets it again every two seconds (replacing it), sets and unsets another."""

    @workflow.run
    async def run(self, run: RunInput) -> list[Any]:
        session = RunSession(run)
        target = {"alias": "reminders/1", "value": {"type": "reminder"}}
        first = await session.schedule("remind", {"type": "interval", "every_seconds": 1}, target)
        again = await session.schedule("remind", {"type": "interval", "every_seconds": 2}, target)
        await session.schedule("spare", {"type": "interval", "every_seconds": 1}, target)
        gone = await session.unschedule("spare")
        missing = await session.unschedule("never")
        return [first["alias"], again["repeat"], gone is not None, missing]


@workflow.defn(name="outsider")
class Outsider:
    """Sets a timer whose firings would write outside what its listener owns, and notes what the session said."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        session = RunSession(run)
        said = []
        for target, target_type in (
            ({"alias": "elsewhere/1", "value": {"type": "x"}}, "object"),
            ({"workflow": "snoozer", "input": {}}, "workflow"),  # its run would be held by no owns
        ):
            try:
                await session.schedule("escape", {"type": "interval", "every_seconds": 1}, target, target_type)
                said.append("set")
            except SessionError as err:
                said.append(f"{err.code}: {err.message}")
        await session.write_object("snooze/said", {"type": "said", "said": said})


@workflow.defn(name="looper")
class Looper:
    """Sets a timer, seconds ahead, that writes what wakes its own listener: a loop only the chain limit ends."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        session = RunSession(run)
        due = (workflow.now() + timedelta(seconds=3)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
        repeat = {"type": "one_time", "invocation_time": due, "timezone": "UTC"}
        await session.schedule(f"again-{run.batch.last_id}", repeat, {"alias": "loop/tick", "value": {"type": "t"}})


@workflow.defn(name="relooper")
class Relooper:
    """Woken by its listener, sets a timer that starts itself; started by that timer, writes what wakes its
    listener again."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        session = RunSession(run)
        if run.scheduled is not None:
            await session.write_object("reloop/tick", {"type": "t"})
            return
        due = (workflow.now() + timedelta(seconds=3)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
        repeat = {"type": "one_time", "invocation_time": due, "timezone": "UTC"}
        await session.schedule(f"again-{run.batch.last_id}", repeat, {"workflow": "relooper"})


@pytest.fixture
async def engine(platform: Platform, dev_env: WorkflowEnvironment) -> AsyncIterator[Engine]:
    workflows = [Snoozer, Outsider, Looper, Relooper]
    async with running_engine(platform, dev_env.client, workflows=workflows) as running:
        try:
            yield running
        finally:
            for row in await platform.store.pool.fetch("SELECT schedule_id FROM orchestrator.schedules"):
                with contextlib.suppress(RPCError):
                    await dev_env.client.get_schedule_handle(row["schedule_id"]).delete()


async def test_a_run_sets_replaces_and_unsets_its_timers_and_a_firing_names_its_schedule(engine: Engine) -> None:
    snooze = recorder_listener(
        "snooze",
        filter={"types": ["object.written"], "aliases": ["snooze/*"]},
        batch={"window_seconds": 0.2},
        action={"type": "workflow", "workflow": "snoozer"},
    )
    woken = recorder_listener(
        "woken", filter={"types": ["object.written"], "aliases": ["reminders/*"]}, batch={"window_seconds": 0.2}
    )
    await engine.command("save_listener", listener=snooze)
    await engine.command("save_listener", listener=woken)
    sid = await new_session(engine)
    await engine.command("write_object", session_id=sid, alias="snooze/1", value={"type": "t"})

    async def reminded() -> bool:
        return bool(engine.log.event_ids("woken"))

    await eventually(reminded, within=20, what="the reminder the run set waking its listener")
    schedules = (await engine.command("list_schedules", session_id=sid))["schedules"]
    assert [(s["alias"], s["repeat"]) for s in schedules] == [("remind", {"type": "interval", "every_seconds": 2})]
    [reminder] = [
        e
        for e in (await engine.command("list_session_events", session_id=sid, types=["object.written"]))["events"]
        if e["alias"] == "reminders/1"
    ][:1]
    assert reminder["cause"]["schedule"]["alias"] == "remind"
    assert reminder["cause"]["schedule"]["due_at"]
    assert reminder["actor"] == {"schedule": "remind"}, "a firing's actor is its schedule"
    assert reminder["cause"]["schedule"]["set_by"] == schedules[0]["set_by"], "a firing names the run that set it"
    back = (await engine.command("explain_event", session_id=sid, event_id=reminder["id"]))["caused_by"]
    assert [next(iter(step)) for step in back] == ["schedule", "run", "batch", "event", "request"], back
    assert back[1]["run"] == {"execution_id": schedules[0]["set_by"], "workflow": "snoozer"}, back
    assert back[3]["event"]["alias"] == "snooze/1", "back through the run's timer to what woke the run"
    [start] = [
        e
        for e in (await engine.command("list_session_events", session_id=sid, types=["object.written"]))["events"]
        if e["alias"] == "snooze/1"
    ]
    [took] = (await engine.command("explain_event", session_id=sid, event_id=start["id"]))["caused"]
    assert took["runs"] == [schedules[0]["set_by"]]
    assert reminder["id"] in [w["event"]["id"] for w in took["wrote"]], "what the run's timer wrote, the run caused"


async def chain_of_timers(engine: Engine, workflow: str, place: str) -> tuple[str, list[dict[str, Any]]]:
    """A listener on `place/*` whose run is `workflow`, woken once: its session and its `place/tick` writes once
    its chain was stopped at the depth limit (a batch `skipped` for `depth`)."""
    listener = recorder_listener(
        workflow,
        filter={"types": ["object.written"], "aliases": [f"{place}/*"]},
        batch={"window_seconds": 0},
        action={"type": "workflow", "workflow": workflow},
    )
    await engine.command("save_listener", listener=listener)
    sid = await new_session(engine)
    await engine.command("write_object", session_id=sid, alias=f"{place}/start", value={"type": "t"})

    async def stopped() -> bool:
        outcomes = (await engine.command("list_session_listeners", session_id=sid))["listeners"][0]["recent_outcomes"]
        return any(o["status"] == "skipped" and o.get("reason") == "depth" for o in outcomes)

    limit = engine.platform.settings.limits.listener_chain_depth
    await eventually(stopped, within=30 + 10 * limit, what=f"the chain of {workflow}'s timers to reach the limit")
    written = (await engine.command("list_session_events", session_id=sid, types=["object.written"]))["events"]
    return sid, [e for e in written if e["alias"] == f"{place}/tick"]


async def test_a_timer_a_run_sets_to_wake_its_own_listener_is_a_chain_the_depth_limit_ends(
    engine: Engine, platform: Platform
) -> None:
    """SPEC 4, bounded: a run's timer writes at the depth of the run's own writes, so a listener whose runs set
    timers that wake it again stops at `listener_chain_depth` (its firings wrote at depth 0 and looped for ever)."""
    limit = platform.settings.limits.listener_chain_depth
    _, ticks = await chain_of_timers(engine, "looper", "loop")
    depths = [e["depth"] for e in ticks]
    assert depths == list(range(1, limit + 1)), "each firing one deeper than the run that set it, none past the limit"


async def test_a_timer_a_run_sets_to_start_a_run_that_wakes_its_listener_is_a_chain_the_depth_limit_ends(
    engine: Engine, platform: Platform
) -> None:
    """The same through a timer that starts a workflow: the run it starts is as deep as the run that set it would
    have written, and its writes one deeper, so the chain ends at the limit (it wrote at depth 1 every time).
    SPEC 12: what caused the last write goes back through each timer a run set, and the run its firing started, to
    the outside request that began it (it stopped at the first schedule)."""
    limit = platform.settings.limits.listener_chain_depth
    sid, ticks = await chain_of_timers(engine, "relooper", "reloop")
    depths = [e["depth"] for e in ticks]
    assert depths == list(range(2, limit + 1, 2)), "each run's write two deeper than the last, none past the limit"
    deepest = max(ticks, key=lambda e: e["depth"])
    back = (await engine.command("explain_event", session_id=sid, event_id=deepest["id"]))["caused_by"]
    kinds = [next(iter(step)) for step in back]
    assert kinds[-3:] == ["batch", "event", "request"], back
    assert kinds[:3] == ["run", "schedule", "run"], "the tick's run, the timer that started it, the run that set it"
    assert kinds.count("schedule") == deepest["depth"] // 2, back
    assert [s["event"]["alias"] for s in back if "event" in s][-1] == "reloop/start", back


async def test_a_timer_whose_firings_would_write_outside_what_the_listener_owns_is_refused(engine: Engine) -> None:
    outsider = recorder_listener(
        "outsider",
        filter={"types": ["object.written"], "aliases": ["snooze/go"]},
        batch={"window_seconds": 0.2},
        action={"type": "workflow", "workflow": "outsider"},
        owns=["snooze/**"],
    )
    await engine.command("save_listener", listener=outsider)
    sid = await new_session(engine)
    await engine.command("write_object", session_id=sid, alias="snooze/go", value={"type": "t"})

    async def said() -> dict[str, Any] | None:
        reply = await engine.platform.command({"command": "read_object", "session_id": sid, "alias": "snooze/said"})
        return reply.get("object")

    async def noted_it() -> bool:
        return await said() is not None

    await eventually(noted_it, within=20, what="the run to note what its session said")
    noted = await said()
    assert noted is not None, noted
    to_object, to_workflow = noted["value"]["said"]
    assert to_object.startswith("access_denied: target.alias: 'elsewhere/1' is outside"), noted
    assert to_workflow.startswith("access_denied: target: a timer that starts a workflow"), noted
    assert (await engine.command("list_schedules", session_id=sid))["schedules"] == []
