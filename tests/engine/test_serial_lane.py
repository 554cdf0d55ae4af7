"""A serial listener: one lane per session, events batched by window, one run in flight at a time."""

from __future__ import annotations

import asyncio

import pytest

from tests.engine.harness import Engine, eventually, new_session, overlapping_holds, recorder_listener, write_many
from tests.store.helpers import write_held_open

pytestmark = pytest.mark.both_servers


async def test_a_burst_in_one_window_is_one_run(engine: Engine) -> None:
    await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": 1}))
    sid = await new_session(engine)
    ids = await write_many(engine, sid, [f"missions/{n}" for n in range(5)])
    await write_many(engine, sid, ["elsewhere/1"])

    async def ran() -> bool:
        return len(engine.log.event_ids()) >= 5

    await eventually(ran, what="the batch's run")
    assert len(engine.log.runs) == 1
    run = engine.log.runs[0].input
    assert run["batch"]["event_ids"] == ids
    assert run["session_id"] == sid
    assert [m["id"] for m in run["input"]["events"]] == ids
    assert run["batch"]["retry"] == 0


async def test_max_events_splits_a_burst_and_loses_nothing(engine: Engine) -> None:
    # Each run lasts long enough that a second batch started beside it would show.
    action = {"type": "workflow", "workflow": "recorder", "input": {"sleep": 0.5}}
    body = recorder_listener(batch={"window_seconds": 0.5, "max_events": 7}, action=action)
    await engine.command("save_listener", listener=body)
    sid = await new_session(engine)
    ids = await write_many(engine, sid, [f"missions/{n}" for n in range(30)])

    async def all_ran() -> bool:
        return len(engine.log.event_ids()) >= 30 and all(r.ended is not None for r in engine.log.runs)

    await eventually(all_ran, what="every event in a run")
    assert engine.log.event_ids() == ids, "every event exactly once, in order"
    assert all(len(r.input["batch"]["event_ids"]) <= 7 for r in engine.log.runs)
    assert len(engine.log.runs) >= 5
    assert engine.log.most_at_once["orchestrate:_"] == 1
    assert await overlapping_holds(engine, sid, "orchestrate") == [], "one batch holds the lane at a time"


async def test_distinct_by_alias_makes_200_writes_one_entry(engine: Engine) -> None:
    await engine.command(
        "save_listener",
        listener=recorder_listener(batch={"window_seconds": 3, "max_events": 10, "distinct_by": "alias"}),
    )
    sid = await new_session(engine)
    ids = await write_many(engine, sid, ["missions/hot"] * 200 + ["missions/cold"])

    async def ran() -> bool:
        return bool(engine.log.runs)

    await eventually(ran, what="the run")
    [run] = [r.input for r in engine.log.runs]
    assert [e["id"] for e in run["input"]["events"]] == [ids[199], ids[200]]
    assert run["batch"]["event_ids"] == ids
    assert run["batch"]["count"] == 2


async def test_events_during_a_run_wait_for_the_next_batch(engine: Engine) -> None:
    listener = recorder_listener(
        batch={"window_seconds": 0.2},
        action={"type": "workflow", "workflow": "recorder", "input": {"sleep": 2}},
    )
    await engine.command("save_listener", listener=listener)
    sid = await new_session(engine)
    first = await write_many(engine, sid, ["missions/a"])

    async def started() -> bool:
        return bool(engine.log.runs)

    await eventually(started, what="the first run")
    during = await write_many(engine, sid, [f"missions/{n}" for n in range(10)])

    async def both() -> bool:
        return len(engine.log.runs) >= 2 and engine.log.runs[1].ended is not None

    await eventually(both, what="the second run")
    assert engine.log.runs[0].input["batch"]["event_ids"] == first
    assert engine.log.runs[1].input["batch"]["event_ids"] == during
    assert engine.log.runs[1].started >= (engine.log.runs[0].ended or 0)
    assert engine.log.most_at_once["orchestrate:_"] == 1
    assert await overlapping_holds(engine, sid, "orchestrate") == [], "the second batch waited for the first's slot"


async def test_an_event_whose_transaction_commits_after_later_ids_still_reaches_its_lane(engine: Engine) -> None:
    # Event ids are drawn from one sequence for every session: while one transaction of session `held` stays
    # open with its id, another session commits later ids and the router routes them. The held event must
    # still reach its lane when it commits, and the writes queued behind it in its session after it.
    await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": 0.2}))
    held, other = await new_session(engine), await new_session(engine)
    async with write_held_open(engine.platform, held, "missions/held") as held_id:
        queued = [
            asyncio.create_task(
                engine.command("write_object", session_id=held, alias=f"missions/late/{n}", value={"type": "m"})
            )
            for n in range(3)
        ]
        others = await write_many(engine, other, ["missions/free/1", "missions/free/2"])
        assert min(others) > held_id, "the other session committed later ids first"

        async def others_ran() -> bool:
            return set(others) <= set(engine.log.event_ids())

        await eventually(others_ran, what="the other session's run")
    late = [(await task)["event_id"] for task in queued]

    async def held_ran() -> bool:
        return {held_id, *late} <= set(engine.log.event_ids())

    await eventually(held_ran, what="the held event and those queued behind it in their runs")
    runs_of_held = [r.input for r in engine.log.runs if r.input["session_id"] == held]
    assert sorted(i for r in runs_of_held for i in r["batch"]["event_ids"]) == sorted([held_id, *late])
