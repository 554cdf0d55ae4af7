"""Retries: a failed run's batch is delivered again after `min(delay * 2^n, 900)` s, holding its slot.

Times are the workflows' own (`workflow.now()`), reported by the `clocked` test workflow, so that the
waits are measured on the time-skipping server's clock, not the wall clock.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from itertools import pairwise
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from orchestrator.core.lane_clock import LaneNews
from orchestrator.core.lane_keys import lane_workflow_id
from orchestrator.core.lane_snapshot import LaneAddress
from orchestrator.lanes.nudges import Nudger
from orchestrator.platform import Platform
from tests.engine.harness import (
    Engine,
    eventually,
    lane_outcomes,
    lane_state,
    new_session,
    run_result,
    running_engine,
    write_many,
)

with workflow.unsafe.imports_passed_through():
    from orchestrator.sdk import RunInput

# How far a repeat may start from its due time, in workflow seconds: the failed run's end, its
# `execution.ended` record and the repeat's first workflow task all take a little time.
TOLERANCE = 2.0


@dataclass
class Tick:
    execution_id: str
    retry: int
    event_ids: list[int]
    input: Any
    started: float
    failed: float | None = None


@dataclass
class Clock:
    """What `clocked` runs report: when each started and failed, in workflow time."""

    ticks: dict[str, Tick] = field(default_factory=dict)

    @activity.defn(name="test.clock_started")
    async def started(self, run: RunInput, at: float) -> None:
        assert run.execution_id is not None
        if run.execution_id not in self.ticks:  # an activity retried: the same run
            self.ticks[run.execution_id] = Tick(run.execution_id, run.batch.retry, run.batch.event_ids, run.input, at)

    @activity.defn(name="test.clock_failed")
    async def failed(self, execution_id: str, at: float) -> None:
        self.ticks[execution_id].failed = at

    def of(self, event_id: int) -> list[Tick]:
        """The runs of the batch that holds `event_id`, by start."""
        return sorted((t for t in self.ticks.values() if event_id in t.event_ids), key=lambda t: t.started)


@workflow.defn(name="clocked")
class Clocked:
    """Reports its start; sleeps `input.sleep` s; fails (reporting when) if a batch alias is in `input.fail`."""

    @workflow.run
    async def run(self, run: RunInput) -> str:
        timeout = timedelta(seconds=10)
        await workflow.execute_activity(
            "test.clock_started", args=[run, workflow.now().timestamp()], start_to_close_timeout=timeout
        )
        options = run.input if isinstance(run.input, dict) else {}
        if options.get("sleep"):
            await workflow.sleep(float(options["sleep"]))
        fail = options.get("fail") or []
        if fail and any(m.get("alias") in fail for m in run.batch.messages):
            await workflow.execute_activity(
                "test.clock_failed", args=[run.execution_id, workflow.now().timestamp()], start_to_close_timeout=timeout
            )
            raise ApplicationError("asked to fail", non_retryable=True)
        return "done"


@asynccontextmanager
async def clocked_engine(platform: Platform, env: WorkflowEnvironment) -> AsyncIterator[tuple[Engine, Clock]]:
    clock = Clock()
    platform.settings = platform.settings.model_copy(update={"search_attributes": not env.supports_time_skipping})

    def wrap(activities: list[Callable[..., Any]]) -> list[Callable[..., Any]]:
        return [*activities, clock.started, clock.failed]

    async with running_engine(platform, env.client, workflows=[Clocked], wrap=wrap) as engine:
        yield engine, clock


@pytest.fixture
async def clocked(platform: Platform, temporal_env: WorkflowEnvironment) -> AsyncIterator[tuple[Engine, Clock]]:
    async with clocked_engine(platform, temporal_env) as running:
        yield running


def flaky(name: str = "flaky", *, attempts: int, delay: float, **overrides: Any) -> dict[str, Any]:
    """A listener on `missions/**` objects and on `listener.failed`, whose run fails on `missions/bad`."""
    body: dict[str, Any] = {
        "name": name,
        "filter": {"types": ["object.written", "listener.failed"]},
        "batch": {"window_seconds": 0.2},
        "action": {
            "type": "workflow",
            "workflow": "clocked",
            "input": {
                "fail": ["missions/bad"],
                "retry": "{{ batch.retry }}",
                "label": "try {{ batch.retry }}",
                "events": "{{ batch.messages }}",
            },
        },
        "retry": {"attempts": attempts, "delay_seconds": delay},
        "receipt": {"alias": "ops/receipts"},
    }
    body.update(overrides)
    return body


def waits(runs: list[Tick]) -> list[float]:
    """How long each repeat started after the failure before it."""
    assert all(t.failed is not None for t in runs[:-1])
    return [after.started - (before.failed or 0) for before, after in pairwise(runs)]


async def failed_once(engine: Engine, clock: Clock) -> tuple[str, list[int]]:
    """A session whose `missions/bad` batch has failed once and waits 30 s for its repeat."""
    await engine.command("save_listener", listener=flaky(attempts=2, delay=30))
    sid = await new_session(engine)
    ids = await write_many(engine, sid, ["missions/bad"])

    async def failed() -> bool:
        runs = clock.of(ids[0])
        return bool(runs) and runs[0].failed is not None

    await eventually(failed, what="the first run to fail")
    return sid, ids


async def advance(env: WorkflowEnvironment, done: Callable[[], Awaitable[bool]], step: float, what: str) -> None:
    """Let workflow time pass in steps of `step` seconds until `done` (the dev server's clock is the wall's)."""
    deadline = time.monotonic() + 60
    while not await done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await env.sleep(step if env.supports_time_skipping else 0.05)


async def events_of(engine: Engine, sid: str, *types: str) -> list[dict[str, Any]]:
    reply = await engine.command("list_session_events", session_id=sid, limit=1000, types=list(types) or None)
    return list(reply["events"])


async def lane_view(engine: Engine, sid: str, listener: str) -> dict[str, Any]:
    return await lane_state(engine, sid, listener)


def run_id(sid: str, listener: str, first_id: int) -> str:
    return "run" + lane_workflow_id(sid, listener, "_").removeprefix("lane") + f":{first_id}"


async def result_of(engine: Engine, env: WorkflowEnvironment, sid: str, listener: str, first_id: int) -> str:
    """How the batch's run ended over all its attempts, once it has (time skipped as it waits)."""
    ended: list[str] = []

    async def over() -> bool:
        result = await run_result(engine, sid, listener, first_id)
        ended.extend([result] if result is not None else [])
        return result is not None

    await advance(env, over, 1, "the batch's run to end")
    return ended[-1]


async def test_a_failing_run_is_repeated_then_reported_with_listener_failed(
    clocked: tuple[Engine, Clock], temporal_env: WorkflowEnvironment
) -> None:
    engine, clock = clocked
    # A window long enough that both writes land in it even on a loaded machine.
    await engine.command("save_listener", listener=flaky(attempts=2, delay=0.5, batch={"window_seconds": 2}))
    inbox = {
        "name": "inbox",
        "filter": {"types": ["listener.failed"]},
        "batch": {"window_seconds": 0.2},
        "action": {
            "type": "thread_item",
            "alias": "ops/inbox",
            "item": {"type": "json", "role": "system", "message": "failed", "metadata": "{{ event }}"},
        },
    }
    await engine.command("save_listener", listener=inbox)
    sid = await new_session(engine)
    ids = await write_many(engine, sid, ["missions/bad", "missions/other"])

    async def reported() -> bool:
        items = (await engine.command("list_thread_items", session_id=sid, alias="ops/inbox"))["items"]
        return bool(items)

    await advance(temporal_env, reported, 1, "the inbox to hear of the failure")

    runs = clock.of(ids[0])
    assert [(t.retry, t.event_ids) for t in runs] == [(0, ids), (1, ids), (2, ids)], "attempts 2: two repeats"
    assert all(t.failed is not None for t in runs)
    assert [t.input["retry"] for t in runs] == [0, 1, 2], "batch.retry renders the repeat's number"
    assert [t.input["label"] for t in runs] == ["try 0", "try 1", "try 2"]
    assert all(wait >= due - 0.05 for wait, due in zip(waits(runs), [0.5, 1.0], strict=True)), "never before its delay"

    executions = (await engine.command("list_executions", session_id=sid, listener="flaky"))["executions"]
    assert [(e["status"], e["batch"]["retry"]) for e in executions] == [("failed", 0), ("failed", 1), ("failed", 2)]
    assert [e["id"] for e in executions] == [t.execution_id for t in runs]

    outcomes = sorted(await lane_outcomes(engine, sid, "flaky"), key=lambda o: o["retry"])
    assert [(o["status"], o["retry"], o["event_ids"]) for o in outcomes] == [
        ("success", 0, ids),
        ("success", 1, ids),
        ("success", 2, ids),
    ], "each repeat is a batch of its own with its own outcome"
    assert [o["execution_id"] for o in outcomes] == [t.execution_id for t in runs]

    receipts = (await engine.command("list_thread_items", session_id=sid, alias="ops/receipts"))["items"]
    assert sorted((r["metadata"]["status"], r["metadata"]["retry"]) for r in receipts) == [
        ("success", 0),
        ("success", 1),
        ("success", 2),
    ], "each repeat has its own receipt"
    assert all(r["metadata"]["event_ids"] == ids and r["metadata"]["listener"] == "flaky" for r in receipts)
    assert [r["message"] for r in receipts] == [r["metadata"] for r in receipts], "the message is the receipt"

    [failed] = await events_of(engine, sid, "listener.failed")
    assert failed["source"]["listener"] == "flaky"
    assert failed["actor"] == {"listener": "flaky", "execution": runs[-1].execution_id}
    data = failed["data"]
    assert (data["listener"], data["first_id"], data["last_id"], data["event_ids"]) == ("flaky", ids[0], ids[-1], ids)
    assert data["retry"] == 2
    assert data["execution_id"] == runs[-1].execution_id
    execution = failed["execution"]
    assert (execution["id"], execution["workflow"], execution["status"]) == (runs[-1].execution_id, "clocked", "failed")
    assert "asked to fail" in execution["error"]["message"]
    assert "asked to fail" in data["error"]

    [noted] = (await engine.command("list_thread_items", session_id=sid, alias="ops/inbox"))["items"]
    assert noted["metadata"]["id"] == failed["id"], "another listener is woken by listener.failed"
    assert [(o["status"], o["event_ids"]) for o in await lane_outcomes(engine, sid, "inbox")] == [
        ("success", [failed["id"]])
    ]
    # `flaky` filters on listener.failed too, yet never sees its own: no run of it holds that event.
    sentinel = await write_many(engine, sid, ["missions/sentinel"])

    async def sentinel_done() -> bool:
        view = await lane_view(engine, sid, "flaky")
        return bool(clock.of(sentinel[0])) and not view["in_flight"] and not view["pending"]

    await advance(temporal_env, sentinel_done, 1, "the sentinel's run")
    assert failed["id"] not in {i for t in clock.ticks.values() for i in t.event_ids}
    assert failed["id"] not in {i for o in await lane_outcomes(engine, sid, "flaky") for i in o["event_ids"]}


async def _started(clock: Clock, event_id: int) -> bool:
    return bool(clock.of(event_id))


@pytest.mark.skipif("config.getoption('--temporal') == 'dev'", reason="waits of 30 s and 60 s need time skipping")
async def test_repeats_wait_30_then_60_seconds_and_hold_the_slot(
    clocked: tuple[Engine, Clock], temporal_env: WorkflowEnvironment
) -> None:
    engine, clock = clocked
    sid, ids = await failed_once(engine, clock)
    late = await write_many(engine, sid, ["missions/late"])

    async def late_pending() -> bool:
        return int((await lane_view(engine, sid, "flaky"))["pending"]) == 1

    await eventually(late_pending, what="the late event to wait in the lane")
    await temporal_env.sleep(20)
    assert not clock.of(late[0]), "an event arriving during the wait does not start a run"
    assert len(clock.of(ids[0])) == 1, "the repeat waits its delay"
    assert [r["run_key"] for r in (await lane_view(engine, sid, "flaky"))["in_flight"]] == [
        run_id(sid, "flaky", ids[0])
    ], "the failed run's slot is held through the wait"

    await advance(temporal_env, lambda: _started(clock, late[0]), 10, "the late event's run")
    runs = clock.of(ids[0])
    assert [t.retry for t in runs] == [0, 1, 2]
    assert waits(runs) == pytest.approx([30, 60], abs=TOLERANCE)
    [late_run] = clock.of(late[0])
    last_failure = runs[-1].failed
    assert last_failure is not None
    assert late_run.started >= last_failure, "the late batch ran only once the retries ended"
    assert (late_run.retry, late_run.event_ids) == (0, late)
    assert await result_of(engine, temporal_env, sid, "flaky", ids[0]) == "failed"


@pytest.mark.parametrize("temporal_env", ["time_skipping"], indirect=True)
async def test_a_repeat_waits_its_delay_in_workflow_time_however_far_the_server_skipped_before(
    clocked: tuple[Engine, Clock], temporal_env: WorkflowEnvironment
) -> None:
    """On a server that skips time (the kit's), a lane reads the database's clock moved on by what the server has
    skipped. A repeat's due time is set on the database's clock at the run's end: what was skipped before that end
    must not count toward its delay, or a lane woken before its timer (by the router's look at stale lanes, or
    its own step retried after trouble) starts it at once."""
    engine, clock = clocked
    await temporal_env.sleep(600)  # the server's clock ten minutes past the database's, before anything runs
    sid, ids = await failed_once(engine, clock)
    flaky_lane = LaneAddress(sid, "flaky", "_", lane_workflow_id(sid, "flaky", "_"))
    # Woken long before its repeat is due, as the router wakes a lane it finds stale.
    await Nudger(engine.client, engine.platform.settings).nudge(flaky_lane, LaneNews(due_in=0.0))
    await temporal_env.sleep(20)
    assert len(clock.of(ids[0])) == 1, "the repeat waits its 30 s, in the lane's time"

    async def repeated_twice() -> bool:
        runs = clock.of(ids[0])
        return len(runs) == 3 and runs[2].failed is not None

    await advance(temporal_env, repeated_twice, 10, "the last repeat to fail")
    runs = clock.of(ids[0])
    assert [t.retry for t in runs] == [0, 1, 2]
    assert waits(runs) == pytest.approx([30, 60], abs=TOLERANCE)


@pytest.mark.skipif("config.getoption('--temporal') == 'dev'", reason="waits of up to 900 s need time skipping")
async def test_a_long_chain_of_repeats_waits_at_most_900_seconds(
    clocked: tuple[Engine, Clock], temporal_env: WorkflowEnvironment
) -> None:
    engine, clock = clocked
    await engine.command("save_listener", listener=flaky(attempts=6, delay=200))
    sid = await new_session(engine)
    ids = await write_many(engine, sid, ["missions/bad"])

    async def all_failed() -> bool:
        runs = clock.of(ids[0])
        return len(runs) == 7 and all(t.failed is not None for t in runs)

    await advance(temporal_env, all_failed, 100, "seven failed runs")
    runs = clock.of(ids[0])
    assert [t.retry for t in runs] == list(range(7))
    assert waits(runs) == pytest.approx([200, 400, 800, 900, 900, 900], abs=TOLERANCE)

    async def reported() -> bool:
        return bool(await events_of(engine, sid, "listener.failed"))

    await eventually(reported, what="listener.failed")
    [failed] = await events_of(engine, sid, "listener.failed")
    assert failed["data"]["retry"] == 6


async def test_completed_runs_and_batches_that_started_no_run_are_not_retried(
    clocked: tuple[Engine, Clock], temporal_env: WorkflowEnvironment
) -> None:
    engine, clock = clocked
    completes = flaky("completes", attempts=3, delay=0.2, filter={"types": ["object.written"], "aliases": ["ok/*"]})
    no_run = flaky(
        "norun",
        attempts=3,
        delay=0.2,
        filter={"types": ["object.written"], "aliases": ["none/*"]},
        action={"type": "workflow", "workflow": "not_registered"},
    )
    for body in (completes, no_run):
        await engine.command("save_listener", listener=body)
    sid = await new_session(engine)
    ok_ids = await write_many(engine, sid, ["ok/1"])
    none_ids = await write_many(engine, sid, ["none/1"])

    assert await result_of(engine, temporal_env, sid, "completes", ok_ids[0]) == "completed"

    async def norun_done() -> bool:
        return bool(await lane_outcomes(engine, sid, "norun"))

    await eventually(norun_done, what="norun's outcome")
    # Well past every delay a repeat would have waited.
    await temporal_env.sleep(2)

    assert [t.retry for t in clock.of(ok_ids[0])] == [0]
    executions = (await engine.command("list_executions", session_id=sid))["executions"]
    assert [(e["listener"], e["status"]) for e in executions] == [("completes", "completed")]
    assert [(o["status"], o["retry"]) for o in await lane_outcomes(engine, sid, "completes")] == [("success", 0)]
    [outcome] = await lane_outcomes(engine, sid, "norun")
    assert (outcome["status"], outcome["retry"], outcome["event_ids"]) == ("invocation_error", 0, none_ids)
    assert not await events_of(engine, sid, "listener.failed"), "only a failed last attempt is reported"
    receipts = (await engine.command("list_thread_items", session_id=sid, alias="ops/receipts"))["items"]
    assert sorted((r["metadata"]["listener"], r["metadata"]["status"]) for r in receipts) == [
        ("completes", "success"),
        ("norun", "invocation_error"),
    ], "an invocation_error has its receipt too"


@pytest.mark.both_servers
@pytest.mark.parametrize("stop", ["cancel", "terminate"])
async def test_a_stopped_run_is_not_retried(
    clocked: tuple[Engine, Clock], temporal_env: WorkflowEnvironment, stop: str
) -> None:
    engine, clock = clocked
    sleeper = flaky(
        "sleeper", attempts=3, delay=0.2, action={"type": "workflow", "workflow": "clocked", "input": {"sleep": 3600}}
    )
    await engine.command("save_listener", listener=sleeper)
    sid = await new_session(engine)
    ids = await write_many(engine, sid, ["missions/1"])

    async def started() -> bool:
        return bool(clock.of(ids[0]))

    await eventually(started, what="the run to stop")
    child = engine.client.get_workflow_handle(clock.of(ids[0])[0].execution_id)
    await (child.cancel() if stop == "cancel" else child.terminate("stopped by the test"))
    # Cancelled from outside, it ran its own code to its end, which says so; terminated, nothing of it ran. Either
    # is a run stopped from outside: `cancelled` is a `cancel_on`'s alone.
    ended = "stopped"
    assert await result_of(engine, temporal_env, sid, "sleeper", ids[0]) == ended
    await temporal_env.sleep(2)

    assert [t.retry for t in clock.of(ids[0])] == [0]
    executions = (await engine.command("list_executions", session_id=sid))["executions"]
    assert [(e["listener"], e["status"]) for e in executions] == [("sleeper", ended)]
    assert [(o["status"], o["retry"]) for o in await lane_outcomes(engine, sid, "sleeper")] == [("success", 0)]
    assert not await events_of(engine, sid, "listener.failed")
    view = await lane_view(engine, sid, "sleeper")
    assert not view["in_flight"], "a stopped run frees its slot at once"


@pytest.mark.skipif("config.getoption('--temporal') == 'dev'", reason="a 30 s wait needs time skipping")
async def test_a_repeat_after_the_session_closed_is_skipped_and_frees_the_slot(
    clocked: tuple[Engine, Clock], temporal_env: WorkflowEnvironment
) -> None:
    engine, clock = clocked
    sid, ids = await failed_once(engine, clock)
    await engine.command("close_session", session_id=sid)
    assert await result_of(engine, temporal_env, sid, "flaky", ids[0]) == "failed"
    assert [t.retry for t in clock.of(ids[0])] == [0], "the repeat never ran"
    outcomes = sorted(await lane_outcomes(engine, sid, "flaky"), key=lambda o: o["retry"])
    assert [(o["status"], o.get("reason"), o["retry"], o["event_ids"]) for o in outcomes] == [
        ("success", None, 0, ids),
        ("skipped", "session_not_open", 1, ids),
    ], "the repeat is a batch of its own, with its own outcome"
    assert not await events_of(engine, sid, "listener.failed"), "a closed session takes no more events"

    async def slot_free() -> bool:
        return not (await lane_view(engine, sid, "flaky"))["in_flight"]

    await eventually(slot_free, what="the lane to free the run's slot")


@pytest.mark.skipif("config.getoption('--temporal') == 'dev'", reason="a 30 s wait needs time skipping")
async def test_a_repeat_after_the_listener_was_switched_off_is_consumed_and_the_next_batch_runs(
    clocked: tuple[Engine, Clock], temporal_env: WorkflowEnvironment
) -> None:
    engine, clock = clocked
    sid, ids = await failed_once(engine, clock)
    await engine.command("switch_listener", session_id=sid, name="flaky", enabled=False)
    assert await result_of(engine, temporal_env, sid, "flaky", ids[0]) == "failed"
    assert [t.retry for t in clock.of(ids[0])] == [0], "the repeat never ran"
    assert [o["retry"] for o in await lane_outcomes(engine, sid, "flaky")] == [0], "consumed with no outcome"
    assert not await events_of(engine, sid, "listener.failed")

    await engine.command("switch_listener", session_id=sid, name="flaky", enabled=True)
    later = await write_many(engine, sid, ["missions/ok"])
    await advance(temporal_env, lambda: _started(clock, later[0]), 1, "the next batch's run")
    assert [(t.retry, t.event_ids) for t in clock.of(later[0])] == [(0, later)]


@pytest.mark.skipif("config.getoption('--temporal') == 'dev'", reason="a 30 s wait needs time skipping")
async def test_a_repeat_after_a_resave_that_takes_none_of_its_events_is_skipped_unmatched(
    clocked: tuple[Engine, Clock], temporal_env: WorkflowEnvironment
) -> None:
    engine, clock = clocked
    sid, ids = await failed_once(engine, clock)
    await engine.command(
        "save_listener", listener=flaky(attempts=2, delay=30, filter={"types": ["thread.item_posted"]})
    )
    assert await result_of(engine, temporal_env, sid, "flaky", ids[0]) == "failed"
    assert [t.retry for t in clock.of(ids[0])] == [0], "the repeat never ran"
    outcomes = sorted(await lane_outcomes(engine, sid, "flaky"), key=lambda o: o["retry"])
    assert [(o["status"], o.get("reason"), o["retry"]) for o in outcomes] == [
        ("success", None, 0),
        ("skipped", "unmatched", 1),
    ], "checked as any batch: the listener as saved now takes none of its events"
    [failed] = await events_of(engine, sid, "listener.failed")
    assert failed["data"]["execution_id"] == clock.of(ids[0])[0].execution_id, "the failure before it stands"


@pytest.mark.skipif("config.getoption('--temporal') == 'dev'", reason="a 30 s wait needs time skipping")
@pytest.mark.parametrize("mode", ["serial", "keyed"])
async def test_stop_execution_of_a_failed_run_calls_off_its_repeat_and_hands_its_slot_on(
    clocked: tuple[Engine, Clock], temporal_env: WorkflowEnvironment, mode: str
) -> None:
    engine, clock = clocked
    keyed = {"concurrency": {"mode": "keyed", "key": "alias", "max_parallel": 1}} if mode == "keyed" else {}
    await engine.command("save_listener", listener=flaky(attempts=3, delay=30, **keyed))
    sid = await new_session(engine)
    ids = await write_many(engine, sid, ["missions/bad"])
    lane = "missions/bad" if mode == "keyed" else "_"

    async def failed() -> bool:
        return any(
            e["status"] == "failed" for e in (await engine.command("list_executions", session_id=sid))["executions"]
        )

    await eventually(failed, what="the first run's failure recorded")
    first = clock.of(ids[0])[0]
    assert first.failed is not None
    # The next batch waits for the slot the failed run holds for its repeat (in keyed mode, for the one key slot).
    later = await write_many(engine, sid, ["missions/ok"])
    await temporal_env.sleep(2)
    assert not clock.of(later[0]), "held behind the repeat's slot"

    reply = await engine.command("stop_execution", session_id=sid, execution_id=first.execution_id)
    assert reply["execution"] == {"id": first.execution_id, "status": "failed", "repeat": "stopped"}
    await advance(temporal_env, lambda: _started(clock, later[0]), 1, "the next batch's run")
    assert clock.of(later[0])[0].started < first.failed + 30, "its slot handed on at the stop, not after the delay"

    await temporal_env.sleep(200)  # past every delay the repeats would have waited
    assert [t.retry for t in clock.of(ids[0])] == [0], "never repeated"
    assert not await events_of(engine, sid, "listener.failed"), "stopped, not given up on"
    executions = (await engine.command("list_executions", session_id=sid))["executions"]
    assert sorted(e["status"] for e in executions) == ["completed", "failed"]
    assert not (await lane_state(engine, sid, "flaky", lane))["in_flight"]
    again = await engine.command("stop_execution", session_id=sid, execution_id=first.execution_id)
    assert again["execution"] == {"id": first.execution_id, "status": "failed"}, "nothing left to call off"


async def test_stop_execution_of_a_failed_run_whose_repeat_started_answers_failed_and_leaves_the_repeat(
    clocked: tuple[Engine, Clock], temporal_env: WorkflowEnvironment
) -> None:
    engine, clock = clocked
    sleepy = {"type": "workflow", "workflow": "clocked", "input": {"fail": ["missions/bad"], "sleep": 3600}}
    await engine.command("save_listener", listener=flaky(attempts=2, delay=0.2, action=sleepy))
    sid = await new_session(engine)
    ids = await write_many(engine, sid, ["missions/bad"])
    await advance(temporal_env, lambda: _repeated(clock, ids[0]), 1, "the repeat to start")
    first, repeat = clock.of(ids[0])

    reply = await engine.command("stop_execution", session_id=sid, execution_id=first.execution_id)
    assert reply["execution"] == {"id": first.execution_id, "status": "failed"}
    statuses = {e["id"]: e["status"] for e in (await engine.command("list_executions", session_id=sid))["executions"]}
    assert statuses == {first.execution_id: "failed", repeat.execution_id: "running"}
    assert (await lane_state(engine, sid, "flaky"))["in_flight"], "the repeat holds the slot"


async def _repeated(clock: Clock, event_id: int) -> bool:
    return len(clock.of(event_id)) >= 2


@pytest.mark.skipif("config.getoption('--temporal') == 'dev'", reason="a 30 s wait needs time skipping")
async def test_a_throttled_repeat_reports_the_failure_with_listener_failed(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    limits = platform.settings.limits.model_copy(update={"listener_fires_per_minute": 1})
    platform.settings = platform.settings.model_copy(update={"limits": limits})
    async with clocked_engine(platform, temporal_env) as (engine, clock):
        await engine.command("save_listener", listener=flaky(attempts=3, delay=5))
        sid = await new_session(engine)
        ids = await write_many(engine, sid, ["missions/bad"])

        async def reported() -> bool:
            return bool(await events_of(engine, sid, "listener.failed"))

        await advance(temporal_env, reported, 1, "listener.failed")
        assert [t.retry for t in clock.of(ids[0])] == [0], "one fire a minute: the repeat 5 s later is throttled"
        outcomes = sorted(await lane_outcomes(engine, sid, "flaky"), key=lambda o: o["retry"])
        assert [(o["status"], o["retry"]) for o in outcomes] == [("success", 0), ("throttled", 1)]
        [failed] = await events_of(engine, sid, "listener.failed")
        assert (failed["data"]["retry"], failed["data"]["event_ids"]) == (0, ids), "the last run that failed"
        receipts = (await engine.command("list_thread_items", session_id=sid, alias="ops/receipts"))["items"]
        assert sorted((r["metadata"]["status"], r["metadata"]["retry"]) for r in receipts) == [
            ("success", 0),
            ("throttled", 1),
        ]
