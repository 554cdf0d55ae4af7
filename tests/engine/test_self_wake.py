"""Never woken by itself: what a listener writes, and its own `execution.ended`, never match it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.harness import (
    Engine,
    eventually,
    lane_outcomes,
    lane_state,
    new_session,
    recorder_listener,
    write_many,
)

pytestmark = pytest.mark.both_servers


async def session_events(engine: Engine, sid: str) -> list[dict[str, Any]]:
    reply = await engine.command("list_session_events", session_id=sid, limit=1000)
    return list(reply["events"])


async def lane_view(engine: Engine, sid: str, listener: str, lane: str = "_") -> dict[str, Any]:
    return await lane_state(engine, sid, listener, lane)


async def test_an_object_action_writing_inside_its_own_filter_runs_once_per_outside_burst(engine: Engine) -> None:
    echo = {
        "name": "echo",
        "filter": {"types": ["object.**"], "aliases": ["missions/**"]},
        # Long enough that a burst's three writes share a window even when the router takes them up in
        # two rounds (rounds are 200 ms apart) on a loaded machine.
        "batch": {"window_seconds": 1.0},
        "action": {
            "type": "object",
            "alias": "missions/echo",
            "value": {"type": "echo", "last": "{{ batch.last_id }}"},
        },
    }
    await engine.command("save_listener", listener=echo)
    sid = await new_session(engine)

    for burst in range(2):
        outside = await write_many(engine, sid, [f"missions/{burst}/{n}" for n in range(3)])

        async def answered(last: int = outside[-1]) -> bool:
            return any(o["last_id"] == last for o in await lane_outcomes(engine, sid, "echo"))

        await eventually(answered, what=f"echo's answer to burst {burst}")

    # A sentinel from outside: once its batch is done, any echo write routed back to `echo` would have been
    # pending before it (smaller id), so it would show in some outcome's events.
    sentinel = await write_many(engine, sid, ["missions/sentinel"])

    async def sentinel_done() -> bool:
        return any(sentinel[0] in o["event_ids"] for o in await lane_outcomes(engine, sid, "echo"))

    await eventually(sentinel_done, what="the sentinel's batch")
    events = await session_events(engine, sid)
    echoes = [e for e in events if e.get("alias") == "missions/echo"]
    assert len(echoes) == 3, "one write per outside batch"
    assert all(e["source"].get("listener") == "echo" for e in echoes)
    outcomes = await lane_outcomes(engine, sid, "echo")
    assert len(outcomes) == 3
    assert all(o["status"] == "success" for o in outcomes)
    consumed = {i for o in outcomes for i in o["event_ids"]}
    assert not consumed & {e["id"] for e in echoes}, "echo never consumed its own write"
    view = await lane_view(engine, sid, "echo")
    assert view["pending"] == 0
    assert view["high_water"] == sentinel[0]


# `sleep`: the recorder's end lands after the watcher's window, so the watcher hears it in a second batch.
@pytest.mark.parametrize("recorder_input", [{}, {"sleep": 1.0}], ids=["one_window", "two_batches"])
async def test_a_runs_own_execution_events_wake_other_listeners_but_not_its_own(
    engine: Engine, recorder_input: dict[str, Any]
) -> None:
    watcher = recorder_listener("watcher", filter={"types": ["execution.*"]}, batch={"window_seconds": 0.3})
    noter = {
        "name": "noter",
        "filter": {"types": ["execution.ended"]},
        "batch": {"window_seconds": 0.3},
        "action": {"type": "object", "alias": "notes/ended", "value": {"type": "echo", "last": "{{ batch.last_id }}"}},
    }
    await engine.command("save_listener", listener=watcher)
    await engine.command("save_listener", listener=noter)
    sid = await new_session(engine)
    await engine.command("start_execution", session_id=sid, workflow="recorder", input=recorder_input)

    def outside_of(events: list[dict[str, Any]]) -> list[int]:
        return [e["id"] for e in events if e["type"].startswith("execution.") and not e["source"].get("listener")]

    async def watcher_heard_both() -> bool:
        # The recorder's start and end may fall in one window or in two batches (a loaded machine): wait for
        # the watcher to have ended a run for each, not for its first run only.
        outside = outside_of(await session_events(engine, sid))
        heard = {i for o in await lane_outcomes(engine, sid, "watcher") for i in o["event_ids"]}
        return len(outside) == 2 and heard >= set(outside)

    await eventually(watcher_heard_both, what="the watcher's runs to hear the recorder's start and end")

    async def watcher_settled() -> bool:
        events = await session_events(engine, sid)
        ended = sum(e["type"] == "execution.ended" and e["source"].get("listener") == "watcher" for e in events)
        return ended == len(await lane_outcomes(engine, sid, "watcher"))

    await eventually(watcher_settled, what="every watcher run's execution.ended")
    events = await session_events(engine, sid)
    own = [e["id"] for e in events if e["source"].get("listener") == "watcher"]
    own_ended = [e["id"] for e in events if e["type"] == "execution.ended" and e["id"] in own]

    async def noted() -> bool:
        heard = {i for o in await lane_outcomes(engine, sid, "noter") for i in o["event_ids"]}
        return set(own_ended) <= heard

    # The noter hears the watcher's ends; the router routed each to every lane in the same round.
    await eventually(noted, what="the noter to hear the watcher's ends")
    watcher_runs = [r.input for r in engine.log.runs if r.input["listener"] == "watcher"]
    outside = outside_of(events)
    assert len(outside) == 2
    assert sorted(i for r in watcher_runs for i in r["batch"]["event_ids"]) == outside
    for own_id in own:
        explained = await engine.command("explain_event", session_id=sid, event_id=own_id)
        fate = next(f for f in explained["listeners"] if f["listener"] == "watcher")
        assert fate["matched"] is False and fate["reason"] == "self_wake", "its lane never received its own events"
    view = await lane_view(engine, sid, "watcher")
    assert view["pending"] == 0
    assert all(e["source"].get("listener") == "watcher" for e in events if e["id"] in own)
