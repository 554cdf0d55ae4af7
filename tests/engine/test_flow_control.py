"""Flow control: debounce that keeps every event, pause and resume, and each lane saying why it waits."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.engine.harness import (
    Engine,
    eventually,
    lane_outcomes,
    lane_state,
    new_session,
    recorder_listener,
    write_many,
)


async def all_delivered(engine: Engine, ids: list[int]) -> None:
    async def done() -> bool:
        return set(ids) <= set(engine.log.event_ids())

    await eventually(done, within=30, what="every event in a run")


@pytest.mark.both_servers
async def test_a_paused_listener_keeps_routing_fires_nothing_and_fires_everything_once_resumed(
    engine: Engine,
) -> None:
    await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": 0.2, "max_events": 5}))
    sid = await new_session(engine)
    paused = await engine.command("pause_listener", name="orchestrate", session_id=sid)
    assert paused["listener"]["paused"] is True
    ids = await write_many(engine, sid, [f"missions/{n}" for n in range(12)])

    async def all_waiting() -> bool:
        lane = await lane_state(engine, sid, "orchestrate")
        return lane["pending"] == 12 and (lane.get("waiting") or {}).get("reason") == "paused"

    await eventually(all_waiting, what="the events to wait in the paused lane")
    await asyncio.sleep(1.0)
    assert not engine.log.runs, "nothing fires while paused"
    [listener] = (await engine.command("list_session_listeners", session_id=sid))["listeners"]
    assert listener["paused"] is True

    resumed = await engine.command("resume_listener", name="orchestrate", session_id=sid)
    assert resumed["listener"]["paused"] is False
    await all_delivered(engine, ids)
    assert engine.log.event_ids() == ids, "every event once, in order, as batches by the usual rules"
    assert [len(r.input["batch"]["event_ids"]) for r in engine.log.runs] == [5, 5, 2]
    assert engine.log.most_at_once["orchestrate:_"] == 1


async def test_switching_off_consumes_but_pausing_keeps(engine: Engine) -> None:
    await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": 0.2}))
    sid = await new_session(engine)
    await engine.command("pause_listener", name="orchestrate")  # in every session
    kept = await write_many(engine, sid, ["missions/a"])

    async def waiting() -> bool:
        return (await lane_state(engine, sid, "orchestrate"))["pending"] == 1

    await eventually(waiting, what="the event to wait")
    await engine.command("resume_listener", name="orchestrate")
    await all_delivered(engine, kept)
    assert not await lane_outcomes(engine, sid, "orchestrate") or all(
        o["status"] == "success" for o in await lane_outcomes(engine, sid, "orchestrate")
    )


async def test_a_resume_in_every_session_lifts_a_pause_of_one_and_one_session_is_not_let_out_of_a_pause_of_all(
    engine: Engine,
) -> None:
    """`resume_listener` without `session_id` resumes the listener in every session, so a pause of one session
    is lifted with it (it answered `paused: false` and nothing fired); with one, while the listener is paused in
    every session, it is refused naming `session_id` (the pause would stand there all the same)."""
    await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": 0.2}))
    sid = await new_session(engine)
    await engine.command("pause_listener", name="orchestrate", session_id=sid)
    first = await write_many(engine, sid, ["missions/a"])

    async def waiting() -> bool:
        return (await lane_state(engine, sid, "orchestrate"))["pending"] == 1

    await eventually(waiting, what="the event to wait")
    await engine.command("resume_listener", name="orchestrate")
    await all_delivered(engine, first)
    [listener] = (await engine.command("list_session_listeners", session_id=sid))["listeners"]
    assert listener["paused"] is False

    await engine.command("pause_listener", name="orchestrate")
    refused = await engine.platform.command({"command": "resume_listener", "name": "orchestrate", "session_id": sid})
    assert (refused["status"], refused["error"]) == ("error", "invalid_request"), refused
    assert refused["message"].startswith("session_id:"), refused
    [listener] = (await engine.command("list_session_listeners", session_id=sid))["listeners"]
    assert listener["paused"] is True


@pytest.mark.parametrize(
    ("args", "code", "field"),
    [
        ({"name": "nobody"}, "not_found", "name"),
        ({"name": "orchestrate", "session_id": "ses_none"}, "not_found", "session_id"),
        ({"name": 5}, "invalid_request", "name"),
        ({"name": "orchestrate", "colour": "red"}, "invalid_request", "colour"),
    ],
)
async def test_pause_and_resume_refuse_bad_input_naming_the_field(
    engine: Engine, args: dict[str, Any], code: str, field: str
) -> None:
    await engine.command("save_listener", listener=recorder_listener())
    for command in ("pause_listener", "resume_listener"):
        reply = await engine.platform.command({"command": command, **args})
        assert (reply["status"], reply["error"]) == ("error", code), reply
        assert reply["message"].startswith(field), reply
    sid = await new_session(engine)
    [listener] = (await engine.command("list_session_listeners", session_id=sid))["listeners"]
    assert listener["paused"] is False, "a refused command changed nothing"


async def test_debounce_keeps_every_event_of_the_quiet_period_in_one_batch(
    engine: Engine, temporal_env: WorkflowEnvironment
) -> None:
    # A debounce ten times the writes' spacing: a loaded machine that held one write back past a debounce of 1 s
    # closed the window between two of them.
    body = recorder_listener(batch={"debounce_seconds": 3.0, "max_wait_seconds": 30, "max_events": 1000})
    await engine.command("save_listener", listener=body)
    sid = await new_session(engine)
    ids: list[int] = []
    for n in range(5):  # each write within the debounce of the one before: the window stays open
        ids += await write_many(engine, sid, [f"missions/{n}"])
        await asyncio.sleep(0.3)
    await all_delivered(engine, ids)
    assert [r.input["batch"]["event_ids"] for r in engine.log.runs] == [ids], "one batch holds every event"


async def test_debounce_under_a_steady_stream_fires_at_max_wait(engine: Engine) -> None:
    body = recorder_listener(batch={"debounce_seconds": 0.8, "max_wait_seconds": 2.0, "max_events": 1000})
    await engine.command("save_listener", listener=body)
    sid = await new_session(engine)
    ids: list[int] = []

    async def stream() -> None:
        for n in range(20):  # every 0.25 s for 5 s: never quiet for 0.8 s
            ids.extend(await write_many(engine, sid, [f"missions/{n}"]))
            await asyncio.sleep(0.25)

    await stream()
    await all_delivered(engine, ids)
    assert len(engine.log.runs) >= 2, "the stream never went quiet, yet batches fired at max_wait_seconds"
    assert engine.log.event_ids() == ids


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        ({"debounce_seconds": 5, "max_wait_seconds": 2}, "max_wait_seconds (2) below debounce_seconds (5)"),
        ({"max_wait_seconds": 2}, "declare debounce_seconds too"),
        (
            {"debounce_seconds": 1, "window_seconds": 5, "max_wait_seconds": 3},
            "max_wait_seconds (3) below window_seconds (5)",
        ),
        ({"debounce_seconds": 301}, "must be at most 300"),
    ],
)
async def test_a_debounce_that_could_never_fire_as_declared_is_refused(
    engine: Engine, batch: dict[str, Any], message: str
) -> None:
    reply = await engine.platform.command({"command": "save_listener", "listener": recorder_listener(batch=batch)})
    assert reply["status"] == "error" and reply["message"].startswith("listener.batch"), reply
    assert message in reply["message"], reply


async def test_a_lane_says_why_it_waits(engine: Engine) -> None:
    slow = recorder_listener(
        batch={"window_seconds": 0.2},
        action={"type": "workflow", "workflow": "recorder", "input": {"sleep": 3}},
    )
    await engine.command("save_listener", listener=slow)
    long_window = recorder_listener("later", batch={"window_seconds": 60})
    await engine.command("save_listener", listener=long_window)
    sid = await new_session(engine)
    await write_many(engine, sid, ["missions/a"])
    await eventually(lambda: _running(engine), what="the slow run")
    await write_many(engine, sid, ["missions/b"])

    async def slot_held() -> bool:
        lane = await lane_state(engine, sid, "orchestrate")
        return (lane.get("waiting") or {}).get("reason") == "slot_held"

    await eventually(slot_held, what="the lane to say its slot is held")
    held = (await lane_state(engine, sid, "orchestrate"))["waiting"]
    assert held["run"].startswith(f"exe:{sid}:orchestrate:") and held["since"]
    window = (await lane_state(engine, sid, "later"))["waiting"]
    assert window["reason"] == "window_open" and window["until"]


async def _running(engine: Engine) -> bool:
    return bool(engine.log.open)
