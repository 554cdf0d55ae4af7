"""The clock pattern: a schedule's tick is an `object.written` like any other, so it waits for the lane.

A listener whose run sleeps 3 s hears `ops/clock`, ticking every second. Ticks that land while its run is in
flight start nothing beside it; they wait and arrive together in the lane's next batch.
"""

from __future__ import annotations

import pytest

from tests.engine.harness import Engine, eventually, new_session, recorder_listener

pytestmark = pytest.mark.devserver


async def test_ticks_during_a_run_wait_and_join_the_next_batch(engine: Engine) -> None:
    slow = recorder_listener(
        "sweeper",
        filter={"types": ["object.written"], "aliases": ["ops/clock"]},
        batch={"window_seconds": 0.2},
        action={"type": "workflow", "workflow": "recorder", "input": {"sleep": 3}},
    )
    await engine.command("save_listener", listener=slow)
    sid = await new_session(engine)
    await engine.command(
        "create_schedule",
        session_id=sid,
        alias="clock",
        repeat={"type": "interval", "every_seconds": 1},
        invocation_target_type="object",
        target={"alias": "ops/clock", "value": {"type": "tick"}},
    )

    async def second_run_started() -> bool:
        return len(engine.log.runs) >= 2

    await eventually(second_run_started, within=20, what="the lane's second run")
    await engine.command("delete_schedule", session_id=sid, alias="clock")
    first, second = engine.log.runs[:2]
    assert first.ended is not None and first.ended <= second.started, "the second run began after the first ended"
    assert engine.log.most_at_once["sweeper:_"] == 1, "never a second run in flight"
    first_ids, second_ids = (run.input["batch"]["event_ids"] for run in (first, second))
    assert len(second_ids) >= 2, "the ticks of the first run's 3 s arrive together"
    assert max(first_ids) < min(second_ids)
    ticks = await engine.command("list_session_events", session_id=sid, types=["object.written"])
    sources = {e["id"]: e["source"] for e in ticks["events"]}
    assert all(sources[i] == {"client": "schedule:clock"} for i in first_ids + second_ids)
